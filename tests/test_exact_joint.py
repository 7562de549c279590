"""Exact joint-DP audits of finite contextual policies: hand-derived values, brute force, the CLI."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction
from importlib import resources

import numpy as np
import pytest

from dpaudit.attacks.exact import epsilon_for_delta, hockey_stick, renyi_divergence
from dpaudit.attacks.exact_joint import exact_joint_profile, joint_work, view_distribution_brute
from functools import partial

from dpaudit.runner import check

audit_joint = partial(check, protocol="joint")
from dpaudit.cli import main
from dpaudit.errors import DPAuditError
from dpaudit.policies.finite import FinitePolicy
from dpaudit.policies.finite_contextual import (BUNDLED_CONTEXTUAL, FiniteContextualPolicy, bundled_builders,
                                                copy_context, load_contextual, rr_wsls)


def _rr_profile(k: float, eps: float, delta: float, alpha: float) -> tuple[float, float, float]:
    """Randomised response keeping a bit with probability k > 1/2: delta(eps), eps(delta), D_alpha (by hand)."""
    d = max(0.0, k - math.exp(eps) * (1 - k)) + max(0.0, (1 - k) - math.exp(eps) * k)
    e = math.log((k - delta) / (1 - k))
    r = math.log(k**alpha * (1 - k) ** (1 - alpha) + (1 - k) ** alpha * k ** (1 - alpha)) / (alpha - 1)
    return d, e, r


@pytest.mark.parametrize("keep,horizon", [(Fraction(3, 4), 3), (0.9, 4), (0.6, 3)])
def test_randomised_response_policy_matches_its_hand_derived_profile(keep, horizon):
    # user t's data reach a_{t+1}..a_T only through one randomised response of one bit (module docstring)
    pol = rr_wsls(horizon, keep)
    eps_grid, deltas, alphas = [0.0, 0.3, 1.0], [1e-5, 0.01], [1.5, 2.0, 5.0]
    prof = exact_joint_profile(pol, epsilons=eps_grid, deltas=deltas, alphas=alphas)
    k = float(keep)
    for mode in ("history", "data"):  # the adversary's reward table makes the bit deterministic: equal values
        for e in eps_grid:
            assert prof.delta(e, mode) == pytest.approx(_rr_profile(k, e, 0.01, 2)[0], abs=1e-12)
        for d in deltas:
            assert prof.epsilon(d, mode) == pytest.approx(_rr_profile(k, 0, d, 2)[1], rel=1e-12)
        for a in alphas:
            assert prof.divergence(a, mode) == pytest.approx(_rr_profile(k, 0, 0.01, a)[2], rel=1e-10)
    # round 1 plays the arm its context names: the central view a_t..a_T is not private at all
    assert math.isinf(prof.epsilon(1e-5, "central")) and prof.delta(0.0, "central") == pytest.approx(1.0)


def test_uneven_budget_and_context_copy_are_what_they_are_built_to_be():
    uneven = exact_joint_profile(rr_wsls(3, Fraction(3, 4), Fraction(7, 8)), deltas=[0.0])
    assert uneven.epsilon(0.0) == pytest.approx(math.log(7), rel=1e-12)  # the pair after context x1
    w = uneven.witnesses["history"]["epsilon"][0]
    assert w.canary[0] == w.neighbour[0] == "x1" and w.canary[2] != w.neighbour[2]
    leak = exact_joint_profile(copy_context(3), epsilons=[5.0], deltas=[0.2])
    assert math.isinf(leak.epsilon(0.2)) and leak.delta(5.0) == pytest.approx(1.0)
    w = leak.witnesses["history"]["epsilon"][0]
    assert w.canary[0] != w.neighbour[0] and w.p_event == 1.0 and w.q_event == 0.0


# ---- brute force: the interactive joint/local DP definitions written out with Python loops -----------------

def _random_policy(rng: np.random.Generator, T: int, C: int, K: int, R: int, zeros: float) -> FiniteContextualPolicy:
    rules = []
    for t in range(T):
        rows = rng.random(((C * K * R) ** t * C, K)) * (rng.random(((C * K * R) ** t * C, K)) > zeros)
        rows[rows.sum(axis=1) == 0, rng.integers(K)] = 1.0
        rules.append(rows / rows.sum(axis=1, keepdims=True))
    return FiniteContextualPolicy(rules, [f"x{i}" for i in range(C)], list(range(R)))


def _brute(pol: FiniteContextualPolicy, eps: float, delta: float, alpha: float) -> dict[str, tuple[float, float, float]]:
    """Max over t, reachable histories, neighbouring round-t data and futures, one pair at a time."""
    C, K, R, T = pol.n_contexts, pol.n_arms, pol.n_rewards, pol.horizon
    best = {m: [0.0, 0.0, 0.0] for m in ("history", "data", "central")}

    def keep(mode, P, Q):
        P, Q = np.array(P), np.array(Q)
        vals = (float(hockey_stick(P, Q, eps)), float(epsilon_for_delta(P, Q, delta)[0]),
                float(renyi_divergence(P, Q, alpha)))
        best[mode] = [max(a, b) for a, b in zip(best[mode], vals)]

    triples = list(itertools.product(range(C), range(K), range(R)))
    datas = [(c, rv) for c in range(C) for rv in itertools.product(range(R), repeat=K)]
    for t in range(T - 1):
        L = T - 1 - t
        futures = [(cs, rs) for cs in itertools.product(range(C), repeat=L)
                   for rs in itertools.product(itertools.product(range(R), repeat=K), repeat=L - 1)]
        for hist in itertools.product(triples, repeat=t):
            if any(pol.row(list(hist[:s]), hist[s][0])[hist[s][1]] <= 0 for s in range(t)):
                continue  # a history the policy cannot produce
            for cs, rs in futures:
                dist = {u: view_distribution_brute(pol, list(hist) + [u], cs, rs) for u in triples}
                seqs = sorted(dist[triples[0]])
                for u, v in itertools.permutations(triples, 2):
                    if pol.row(list(hist), u[0])[u[1]] > 0 and pol.row(list(hist), v[0])[v[1]] > 0:
                        keep("history", [dist[u][s] for s in seqs], [dist[v][s] for s in seqs])
                for (c1, r1), (c2, r2) in itertools.permutations(datas, 2):
                    sides = []
                    for c, rv in ((c1, r1), (c2, r2)):
                        pi = pol.row(list(hist), c)
                        sides.append({(a,) + s: pi[a] * dist[(c, a, rv[a])][s] for a in range(K) for s in seqs})
                    keep("data", [sum(sides[0][(a,) + s] for a in range(K)) for s in seqs],
                         [sum(sides[1][(a,) + s] for a in range(K)) for s in seqs])
                    keys = sorted(sides[0])
                    keep("central", [sides[0][k] for k in keys], [sides[1][k] for k in keys])
    return {m: tuple(v) for m, v in best.items()}


@pytest.mark.parametrize("T,C,K,R,zeros,seed", [(3, 2, 2, 2, 0.0, 0), (3, 2, 2, 2, 0.3, 1), (3, 1, 3, 2, 0.2, 2),
                                                (2, 3, 2, 3, 0.25, 3), (4, 1, 2, 2, 0.3, 4)])
def test_enumeration_equals_brute_force_on_random_tiny_policies(T, C, K, R, zeros, seed):
    pol = _random_policy(np.random.default_rng(seed), T, C, K, R, zeros)
    eps, delta, alpha = 0.5, 0.05, 2.0
    prof = exact_joint_profile(pol, epsilons=[eps], deltas=[delta], alphas=[alpha])
    ref = _brute(pol, eps, delta, alpha)
    for mode in ("history", "data", "central"):
        got = (prof.delta(eps, mode), prof.epsilon(delta, mode), prof.divergence(alpha, mode))
        for g, r in zip(got, ref[mode]):
            assert g == pytest.approx(r, rel=1e-9, abs=1e-12), (mode, got, ref[mode])
        # user data are mixtures over a_t: never above the history relation (joint convexity)
        assert prof.delta(eps, "data") <= prof.delta(eps, "history") + 1e-12


def test_witness_reproduces_its_value():
    pol = _random_policy(np.random.default_rng(7), 3, 2, 2, 2, 0.2)
    prof = exact_joint_profile(pol, epsilons=[0.4], deltas=[0.02])
    w = prof.witnesses["history"]["delta"][0]
    ctx = {c: i for i, c in enumerate(pol.contexts)}
    rix = {float(r): i for i, r in enumerate(pol.rewards)}
    hist = [(ctx[c], a, rix[r]) for c, a, r in w.history]
    fc = [ctx[c] for c in w.future_contexts]
    fr = [[rix[r] for r in row] for row in w.future_rewards]
    P, Q = (view_distribution_brute(pol, hist + [(ctx[u[0]], u[1], rix[u[2]])], fc, fr) for u in (w.canary, w.neighbour))
    assert sum(P[tuple(s)] for s in w.event) == pytest.approx(w.p_event)
    assert sum(P[tuple(s)] - math.exp(0.4) * Q[tuple(s)] for s in w.event) == pytest.approx(w.value)


def test_a_plain_finite_policy_is_the_one_context_case():
    rng = np.random.default_rng(3)
    rules = [rng.dirichlet(np.ones(2), size=4**t) for t in range(3)]
    plain = FinitePolicy([r.tolist() for r in rules], [0, 1])
    ctx = FiniteContextualPolicy.from_finite(plain)
    assert ctx.n_contexts == 1 and all(np.array_equal(a, b) for a, b in zip(ctx.rules, plain.rules))
    ref = _brute(ctx, 0.5, 0.05, 2.0)
    assert exact_joint_profile(ctx, epsilons=[0.5]).delta(0.5) == pytest.approx(ref["history"][0])


# ---- the spec format, the bundled examples and bad input ------------------------------------------------

def test_bundled_json_files_are_the_builders_output():
    for name, pol in bundled_builders().items():
        shipped = load_contextual(name)
        assert shipped.contexts == pol.contexts and shipped.claim == pol.claim
        assert all(np.allclose(a, b, atol=0, rtol=1e-15) for a, b in zip(shipped.rules, pol.rules))
        spec = json.loads(resources.files("dpaudit.specs").joinpath(BUNDLED_CONTEXTUAL[name]).read_text())
        assert FiniteContextualPolicy.from_spec(spec).horizon == 4


def test_spec_round_trip_and_json_file(tmp_path):
    pol = rr_wsls(3, Fraction(3, 4))
    path = tmp_path / "rr.json"
    path.write_text(json.dumps(pol.to_spec(fractions=True)))
    back = FiniteContextualPolicy.from_json(path)
    assert all(np.array_equal(a, b) for a, b in zip(back.rules, pol.rules)) and back.claim == pol.claim
    out = audit_joint(str(path))
    assert out["verdict"] == "consistent"


@pytest.mark.parametrize("mutate,message", [
    (lambda s: s.update(rules=s["rules"][:2]), "one decision rule per step"),
    (lambda s: s["rules"][1].pop(), "it needs"),
    (lambda s: s["rules"][1].__setitem__(0, ["1/2", "1/3"]), "sum to"),
    (lambda s: s.update(contexts=["x0", "x0"]), "distinct"),
    (lambda s: s.update(contexts=[]), "non-empty list"),
    (lambda s: s.update(claim={"epsilon": -1}), "finite number >= 0"),
    (lambda s: s.update(claim={"eps": 1}), "claim has keys"),
    (lambda s: s.update(colour="red"), "unknown keys"),
    (lambda s: s.update(format="dpaudit.finite-policy/2"), "format must be"),
])
def test_bad_specs_are_refused_in_one_sentence(mutate, message):
    spec = rr_wsls(3).to_spec(fractions=True)
    mutate(spec)
    with pytest.raises(DPAuditError, match=message):
        FiniteContextualPolicy.from_spec(spec)


def test_the_size_cap_refuses_naming_the_sizes():
    pol = rr_wsls(4)
    assert joint_work(pol)["work"] > 1e6
    with pytest.raises(DPAuditError, match=r"needs about .* operations \(at round \d+: .* futures x .* views\), above "
                                           r"the limit 1e\+06"):
        exact_joint_profile(pol, max_work=1e6)


# ---- the audit and the CLI -----------------------------------------------------------------------------

@pytest.mark.parametrize("name,verdict,exact_eps", [
    ("jdp-finite-rr", "consistent", math.log((0.75 - 1e-5) / 0.25)),
    ("jdp-finite-rr-uneven", "violation", math.log((0.875 - 1e-5) / 0.125)),
    ("jdp-finite-leak", "violation", math.inf),
])
def test_bundled_examples_get_exact_verdicts(name, verdict, exact_eps):
    out = audit_joint(name)  # the joint audit hands a finite contextual spec to the exact enumeration
    assert out["verdict"] == verdict and out["method"] == "exact enumeration"
    assert float(out["epsilon_lower"]) == pytest.approx(exact_eps, rel=1e-12)
    assert out["attacks"] == [] and out["exact"][0]["part"] == "joint enumeration" and out["confidence"] == 1.0
    assert out["epsilon_claimed"] == pytest.approx(math.log((3 - 4e-5)), rel=1e-12)  # ln 3 claim at delta 1e-5


def test_cli_exit_codes_json_and_refusals(capsys):
    assert main(["check", "policy", "jdp-finite-rr", "--protocol", "joint"]) == 0
    text = capsys.readouterr().out
    assert "CONSISTENT" in text and "exact enumeration" in text and "0.0704295" in text
    assert main(["check", "policy", "jdp-finite-leak", "--protocol", "joint", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "violation" and out["exact_joint"]["history"]["epsilon"] == "inf"  # JSON spells inf as a string
    assert main(["check", "policy", "table-vs-view-counterexample", "--protocol", "joint"]) == 0  # no claim: numbers only
    assert "NO CLAIM" in capsys.readouterr().out
    assert main(["check", "policy", "jdp-finite-rr", "--protocol", "joint", "--runs", "10"]) == 2
    assert "--runs does not apply" in capsys.readouterr().err
    assert main(["check", "policy", "jdp-finite-rr", "--protocol", "table"]) == 2
    assert "under --protocol joint only" in capsys.readouterr().err
    assert main(["check", "policy", "jdp-finite-rr", "--protocol", "joint", "--max-work", "1000"]) == 2
    assert "above the limit" in capsys.readouterr().err


def test_python_api_audits_a_finite_contextual_policy_exactly():
    import dpaudit

    a = dpaudit.audit("jdp-finite-rr-uneven", protocol="joint")
    assert a.verdict == "violation" and a.epsilon_lower == pytest.approx(math.log(6.99992), rel=1e-9)
    with pytest.raises(DPAuditError, match="no parameters"):
        dpaudit.audit("jdp-finite-rr", protocol="joint", params={"horizon": 3})


def test_chunking_over_histories_and_futures_changes_nothing(monkeypatch):
    import dpaudit.attacks.exact_joint as ej

    pol = _random_policy(np.random.default_rng(11), 4, 2, 2, 2, 0.2)
    whole = exact_joint_profile(pol, epsilons=[0.5], deltas=[0.05], alphas=[3.0])
    monkeypatch.setattr(ej, "_CHUNK_ELEMENTS", 500)  # one future and one history at a time
    parts = ej.exact_joint_profile(pol, epsilons=[0.5], deltas=[0.05], alphas=[3.0])
    for mode in ("history", "data", "central"):
        assert (parts.delta(0.5, mode), parts.epsilon(0.05, mode), parts.divergence(3.0, mode)) == pytest.approx(
            (whole.delta(0.5, mode), whole.epsilon(0.05, mode), whole.divergence(3.0, mode)), rel=1e-12)
    assert parts.witnesses["history"]["delta"][0].to_dict() == whole.witnesses["history"]["delta"][0].to_dict()


def test_the_json_loader_keeps_the_finite_loaders_bounds(tmp_path, capsys):
    # the contextual loader reads files through FinitePolicy.from_json's bounded reader
    with pytest.raises(DPAuditError, match="not a regular file"):
        FiniteContextualPolicy.from_json(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DPAuditError, match="not UTF-8"):
        load_contextual(str(bad))
    nan = tmp_path / "nan.json"
    nan.write_text('{"format": "dpaudit.finite-contextual-policy/1", "horizon": NaN}')
    assert main(["check", "policy", str(nan), "--protocol", "joint"]) == 2
    assert "not a number dpaudit accepts" in capsys.readouterr().err
    plain = tmp_path / "plain.json"  # a dpaudit.finite-policy/1 file is the one-context case
    plain.write_text(json.dumps({"format": "dpaudit.finite-policy/1", "horizon": 2, "arms": 2, "rewards": [0, 1],
                                 "rules": [[[0.5, 0.5]], [[1, 0], [0, 1], [0.5, 0.5], [0.5, 0.5]]]}))
    assert load_contextual(str(plain)).contexts == ["-"]
    assert main(["check", "policy", str(plain), "--protocol", "joint"]) == 0
    assert "inf" in capsys.readouterr().out  # round 1's reward decides a_2 after arm 0
