"""Exact enumeration: hand-computed cases, the counterexample of Azize & Basu (2023a), "Concentrated Differential
Privacy for Bandits", and its Prop. 1/2 as properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpaudit.errors import DPAuditError
from dpaudit.attacks.exact import (
    epsilon_for_delta,
    estimate_work,
    exact_audit,
    exact_profile,
    hockey_stick,
    renyi_divergence,
    view_distributions,
)
from dpaudit.policies.finite import FinitePolicy, bundled_spec

INF = math.inf


def reward_driven_policy() -> FinitePolicy:
    """T = 2, K = 2: pi_1 uniform; pi_2 plays arm 1 w.p. 3/4 after reward 1 and 1/4 after reward 0."""
    after = {0: [0.75, 0.25], 1: [0.25, 0.75]}
    rows = [after[r] for a in range(2) for r in range(2)]  # history (a1, r1) -> row 2 a1 + r1
    return FinitePolicy([[[0.5, 0.5]], rows], [0, 1])


def test_hand_computed_view_and_table() -> None:
    # View: P_0 = [3, 1, 3, 1]/8, P_1 = [1, 3, 1, 3]/8 over sequences 00, 01, 10, 11.
    pol = reward_driven_policy()
    alpha = 2.0
    renyi = math.log((3**alpha + 3 ** (1 - alpha)) / 4) / (alpha - 1)  # = log(7/3)
    for protocol in ("view", "table"):
        prof = exact_profile(pol, protocol, epsilons=[0.0, math.log(3)], deltas=[0.0, 0.25], alphas=[alpha])
        assert prof.delta_at[0] == pytest.approx(0.5)
        assert prof.delta_at[1] == pytest.approx(0.0, abs=1e-15)
        assert prof.epsilon_at[0] == pytest.approx(math.log(3))
        # delta = 1/4: event {00, 10}: (3/4 - 1/4) / (1/4) = 2 -> log 2 (the tight Neyman-Pearson set)
        assert prof.epsilon_at[1] == pytest.approx(math.log(2))
        assert prof.renyi[0] == pytest.approx(renyi)
    assert renyi == pytest.approx(math.log(7 / 3))


def test_hand_computed_interactive_adversary_helps() -> None:
    # pi_2 reacts only to a reward seen for arm 1; the identity adversary (Table DP) queries arm 1
    # only when the policy plays it, an adversary that always queries arm 1 exposes the row every time.
    rows = []
    for a in range(2):
        for r in range(2):
            rows.append([1.0, 0.0] if (a == 1 and r == 0) else ([0.0, 1.0] if a == 1 else [0.5, 0.5]))
    pol = FinitePolicy([[[0.5, 0.5]], rows], [0, 1])
    table = exact_profile(pol, "table", epsilons=[0.0])
    inter = exact_profile(pol, "interactive", epsilons=[0.0])
    assert table.delta_at[0] == pytest.approx(0.5)  # pulled arm 1 w.p. 1/2, then deterministic
    assert inter.delta_at[0] == pytest.approx(1.0)
    assert inter.witnesses["delta"][0].adversary.startswith("B_1(0->1, 1->1)")


def test_table_vs_view_counterexample_numbers() -> None:
    pol = bundled_spec("table-vs-view-counterexample")
    view = exact_profile(pol, "view", epsilons=[0.95], deltas=[0.17])
    table = exact_profile(pol, "table", epsilons=[0.95], deltas=[0.17])
    assert view.delta_at[0] <= 0.17 < table.delta_at[0]
    assert round(table.epsilon_at[0], 2) == 0.98
    w = table.witnesses["delta"][0]
    # The witness is a genuine violation: P(S) > e^0.95 Q(S) + 0.17.
    assert w.p_event > math.exp(0.95) * w.q_event + 0.17
    assert w.p_event - math.exp(0.95) * w.q_event == pytest.approx(table.delta_at[0])


def test_witness_event_attains_epsilon() -> None:
    pol = bundled_spec("table-vs-view-counterexample")
    prof = exact_profile(pol, "table", deltas=[0.17])
    w = prof.witnesses["epsilon"][0]
    assert math.log((w.p_event - 0.17) / w.q_event) == pytest.approx(prof.epsilon_at[0])


def test_pair_functions_on_known_distributions() -> None:
    P = np.array([[0.5, 0.5, 0.0]])
    Q = np.array([[0.25, 0.25, 0.5]])
    assert hockey_stick(P, Q, 0.0)[0] == pytest.approx(0.5)
    assert hockey_stick(P, Q, math.log(2))[0] == pytest.approx(0.0)
    eps, k = epsilon_for_delta(P, Q, 0.1)
    assert eps[0] == pytest.approx(math.log(2)) or eps[0] == pytest.approx(math.log((1 - 0.1) / 0.5))
    assert renyi_divergence(P, Q, 2.0)[0] == pytest.approx(math.log(2))  # sum p^2/q = 2
    assert renyi_divergence(Q, P, 2.0)[0] == INF
    assert renyi_divergence(P, Q, INF)[0] == pytest.approx(math.log(2))


def test_refuses_oversized_enumeration_naming_the_size() -> None:
    T = 6
    rules = [[[0.5, 0.5]] * (4**t) for t in range(T)]
    pol = FinitePolicy(rules, [0, 1])
    sizes = estimate_work(pol, "interactive")
    assert sizes["adversaries"] == 2 ** (2 + 4 + 8 + 16 + 32)
    with pytest.raises(DPAuditError, match=r"needs about .* operations .* above the limit"):
        exact_profile(pol, "interactive", epsilons=[1.0])


def test_exact_audit_result() -> None:
    res = exact_audit(bundled_spec("table-vs-view-counterexample"), "table", delta=0.17)
    assert res.confidence == 1.0 and res.attack == "exact-table"
    assert round(res.epsilon_lower, 2) == 0.98
    assert res.to_dict()["witness"]["round"] == 1


def test_horizon_one_leaks_nothing() -> None:
    pol = FinitePolicy([[[0.3, 0.7]]], [0, 1])
    prof = exact_profile(pol, "interactive", epsilons=[0.0], deltas=[0.0], alphas=[2.0])
    assert prof.delta_at == [0.0] and prof.epsilon_at == [0.0] and prof.renyi == [0.0]


# ---- properties over random finite policies (Azize & Basu 2023a, Props. 1 and 2) -----------
@st.composite
def finite_policies(draw, max_T: int = 3, zeros: bool = True) -> FinitePolicy:
    T = draw(st.integers(1, max_T))
    K, R = 2, 2
    weights = st.integers(0 if zeros else 1, 6)
    rules = []
    for t in range(T):
        rows = []
        for _ in range((K * R) ** t):
            w = draw(st.lists(weights, min_size=K, max_size=K).filter(lambda v: sum(v) > 0))
            rows.append([x / sum(w) for x in w])
        rules.append(rows)
    return FinitePolicy(rules, [0, 1])


EPS_GRID = [0.0, 0.1, 0.5, 1.0, 2.0]


@settings(max_examples=40, deadline=None)
@given(finite_policies())
def test_table_dominates_view_and_interactive_dominates_table(pol: FinitePolicy) -> None:
    view = exact_profile(pol, "view", epsilons=EPS_GRID, alphas=[2.0])
    table = exact_profile(pol, "table", epsilons=EPS_GRID, alphas=[2.0])
    inter = exact_profile(pol, "interactive", epsilons=EPS_GRID, alphas=[2.0])
    for v, t, i in zip(view.delta_at, table.delta_at, inter.delta_at):
        assert t >= v - 1e-12  # Prop. 1(b)
        assert i >= t - 1e-12  # Prop. 2(a): the identity adversary is one of them
    assert table.renyi[0] >= view.renyi[0] - 1e-12  # Prop. 1(c)
    assert inter.renyi[0] >= table.renyi[0] - 1e-12


@settings(max_examples=40, deadline=None)
@given(finite_policies())
def test_pure_dp_of_table_and_view_coincide(pol: FinitePolicy) -> None:
    # Prop. 1(a): the smallest pure epsilon (delta = 0) is the same under both definitions.
    v = exact_profile(pol, "view", deltas=[0.0]).epsilon_at[0]
    t = exact_profile(pol, "table", deltas=[0.0]).epsilon_at[0]
    assert (math.isinf(v) and math.isinf(t)) or v == pytest.approx(t, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(finite_policies())
def test_profile_is_non_increasing(pol: FinitePolicy) -> None:
    grid = list(np.linspace(0, 3, 13))
    for protocol in ("view", "table", "interactive"):
        d = exact_profile(pol, protocol, epsilons=grid).delta_at
        assert all(b <= a + 1e-12 for a, b in zip(d, d[1:]))


@settings(max_examples=30, deadline=None)
@given(finite_policies(), st.data())
def test_post_processing_never_increases_delta(pol: FinitePolicy, data) -> None:
    P, inputs = view_distributions(pol, "table")
    n_views = P.shape[1]
    f = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n_views, max_size=n_views)))
    PF = np.stack([np.bincount(f, weights=row, minlength=3) for row in P])
    n = P.shape[0]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    diff_rows = (inputs[i] != inputs[j]).any(-1).sum(-1) == 1 if inputs.ndim == 3 else None
    if diff_rows is None or not diff_rows.any():
        return
    a, b = i[diff_rows], j[diff_rows]
    for eps in EPS_GRID:
        before = hockey_stick(P[a], P[b], eps).max()
        after = hockey_stick(PF[a], PF[b], eps).max()
        assert after <= before + 1e-12
        assert before == pytest.approx(exact_profile(pol, "table", epsilons=[eps]).delta_at[0], abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(finite_policies(max_T=3))
def test_sampled_views_match_exact_distribution(pol: FinitePolicy) -> None:
    from scipy import stats

    from dpaudit.protocols import TableDP

    P, inputs = view_distributions(pol, "table")
    idx = 0
    table = np.vstack([pol.rewards[inputs[idx]], np.zeros((1, pol.n_arms))]) if pol.horizon > 1 else np.zeros((1, 2))
    views = TableDP().run(pol, table, 4000, np.random.default_rng(1))
    codes = views @ (pol.n_arms ** np.arange(pol.horizon - 1, -1, -1))
    counts = np.bincount(codes, minlength=P.shape[1])
    expected = P[idx] * 4000
    keep = expected > 0
    assert counts[~keep].sum() == 0
    if keep.sum() > 1:
        chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
        assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-4


@settings(max_examples=30, deadline=None)
@given(finite_policies(max_T=3))
def test_interactive_tree_method_equals_brute_force(pol: FinitePolicy) -> None:
    kw = dict(epsilons=[0.0, 0.5, 2.0], deltas=[0.0, 0.05, 0.3], alphas=[2.0, 5.0, math.inf])
    tree = exact_profile(pol, "interactive", method="tree", **kw)
    brute = exact_profile(pol, "interactive", method="brute", **kw)
    for a, b in zip(tree.delta_at + tree.epsilon_at + tree.renyi, brute.delta_at + brute.epsilon_at + brute.renyi):
        assert (math.isinf(a) and math.isinf(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12)
    for w in tree.witnesses["delta"]:  # the witness adversary and event attain the reported delta
        assert w.p_event - math.exp(kw["epsilons"][tree.witnesses["delta"].index(w)]) * w.q_event == pytest.approx(w.value, abs=1e-12)
