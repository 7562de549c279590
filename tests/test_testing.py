"""dpaudit.testing: strategies and Rényi assertions, used on mechanisms, finite policies and every policy.

Also defines two small policies used here and by tests/test_account_cli.py (loaded as a plug-in):
``ForgettingMeans`` releases each episode's reward sum once through dpaudit's GaussianMechanism
(forgetting: a round feeds exactly one release, rho-zCDP by Azize & Basu (2023a), "Concentrated Differential
Privacy for Bandits", Lemma 1), and
``NoForgettingMeans`` re-releases the arm's cumulative sum at the end of every episode with the
same calibration (the missing-forgetting bug: early rounds feed many releases).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dpaudit.accountants import ZCDP, PureDP
from dpaudit.accountants.conversions import rdp_to_approx
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import Fed, GaussianMechanism, LaplaceMechanism, Ledger
from dpaudit.policies.ucb import AdaCUCB
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import make_policy
from dpaudit.testing import (
    assert_finite_policy_renyi,
    assert_ledger_within_claim,
    assert_mechanism_renyi,
    assert_pair_within_claim,
    assert_renyi_bound,
    finite_policies,
    neighbouring_context_streams,
    neighbouring_lists,
    neighbouring_tables,
    privacy_params,
    renyi_divergence,
    run_on_table,
)

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class ForgettingMeans(Policy):
    """Round-robin episodes (length doubling per arm); each episode's reward sum released once (rho-zCDP)."""

    name = "test-forgetting-means"
    reward_range = (0.0, 1.0)
    forget = True

    def __init__(self, n_arms: int = 2, rho: float = 0.5) -> None:
        super().__init__()
        self.n_arms = int(n_arms)
        self.rho = float(rho)
        self.claim = ZCDP(self.rho)
        self._mech = GaussianMechanism.for_zcdp(self.rho, sensitivity=1.0)

    def _reset(self) -> None:
        self.schedule: list[tuple[int, int, int]] = []  # (arm, start, stop), the same for every run
        t, e = 0, 0
        while t < 10**6:
            arm, length = e % self.n_arms, 2 ** (e // self.n_arms)
            self.schedule.append((arm, t, t + length))
            t, e = t + length, e + 1
        self.episode = 0
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.rounds: list[list[int]] = [[] for _ in range(self.n_arms)]
        self.ep_sum = np.zeros(self.n_runs)
        self.stat = np.zeros((self.n_runs, self.n_arms))

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        return np.full(self.n_runs, self.schedule[self.episode][0], dtype=np.int64)

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        arm, start, stop = self.schedule[self.episode]
        self.ep_sum += rewards
        self.sums[:, arm] += rewards
        self.rounds[arm].append(t)
        if t + 1 == stop:
            n = self.n_runs
            if self.forget:
                fed = Fed.interval(np.full(n, start), np.full(n, stop), 1.0)
                stat = self.ep_sum
            else:  # the bug: the arm's whole history, every time
                rr = np.array(self.rounds[arm])
                fed = Fed(np.repeat(np.arange(n), rr.size), np.tile(rr, n), np.ones((n * rr.size, 1)))
                stat = self.sums[:, arm]
            self.stat[:, arm] = self._mech.release(stat, self.rng, ledger=self.ledger, step=t, fed=fed,
                                                   label="episode sum")
            self.ep_sum = np.zeros(n)
            self.episode += 1


class NoForgettingMeans(ForgettingMeans):
    """The same, without forgetting: the claim is violated (early rounds feed many releases)."""

    name = "test-no-forgetting-means"
    forget = False


class UnderstatedSensitivity(ForgettingMeans):
    """Declares sensitivity 1/2 for a sum whose true sensitivity is 1 (a calibration bug)."""

    def __init__(self, n_arms: int = 2, rho: float = 0.5) -> None:
        super().__init__(n_arms, rho)
        self._mech = GaussianMechanism.for_zcdp(self.rho, sensitivity=0.5)


# ---- strategies -----------------------------------------------------------------------------------

@FAST
@given(neighbouring_tables(horizon=(1, 8), arms=(2, 4)))
def test_neighbouring_tables_differ_in_exactly_one_row(pair):
    d, d2, t = pair
    rows = np.flatnonzero(np.any(d != d2, axis=1))
    assert rows.tolist() == [t]
    assert set(np.unique(d)) <= {0.0, 1.0}


@FAST
@given(neighbouring_lists(horizon=(1, 10), alphabet=(0.0, 0.5, 1.0)))
def test_neighbouring_lists_differ_in_exactly_one_entry(pair):
    r, r2, t = pair
    assert np.flatnonzero(r != r2).tolist() == [t]


@FAST
@given(neighbouring_context_streams(horizon=(1, 6), dim=3))
def test_neighbouring_context_streams_differ_in_round_t_only(pair):
    a, b, t = pair
    assert np.all(np.linalg.norm(a["contexts"], axis=1) <= 1 + 1e-12)
    diff = np.flatnonzero(np.any(a["contexts"] != b["contexts"], axis=1) | (a["rewards"] != b["rewards"]))
    assert diff.tolist() == [t]
    assert a["rewards"][t] != b["rewards"][t]


@FAST
@given(privacy_params())
def test_privacy_params_ranges(p):
    assert 1e-4 * (1 - 1e-9) <= p["rho"] <= 1e3 * (1 + 1e-9)
    assert 0 < p["delta"] <= 0.1 * (1 + 1e-9)
    assert p["alpha"] > 1 and p["sigma"] > 0


# ---- divergences and mechanisms ------------------------------------------------------------------

def test_renyi_divergence_discrete_known_values():
    p, q = np.array([0.75, 0.25]), np.array([0.25, 0.75])
    # D_2 = log sum p^2/q = log(0.5625/0.25 + 0.0625/0.75)
    assert math.isclose(renyi_divergence(p, q, 2.0), math.log(2.25 + 1 / 12), rel_tol=1e-12)
    assert math.isclose(renyi_divergence(p, q, math.inf), math.log(3), rel_tol=1e-12)
    assert renyi_divergence(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 2.0) == math.inf


@settings(max_examples=8, deadline=None)
@given(st.floats(1.05, 40.0), st.floats(0.3, 5.0))
def test_gaussian_mechanism_renyi_matches_analytic_and_claim(alpha, sigma):
    mech = GaussianMechanism(1.0, sigma)
    v = assert_mechanism_renyi(mech, alpha)
    assert math.isclose(v, alpha / (2 * sigma**2), rel_tol=1e-6)


@settings(max_examples=8, deadline=None)
@given(st.floats(1.05, 40.0), st.floats(0.2, 5.0))
def test_laplace_mechanism_renyi_matches_analytic_and_claim(alpha, b):
    mech = LaplaceMechanism(1.0, b)
    v = assert_mechanism_renyi(mech, alpha)
    assert v <= 1 / b + 1e-12  # D_alpha <= D_inf = eps


def test_mechanism_with_understated_guarantee_is_caught():
    class Bad(GaussianMechanism):
        def guarantee(self):
            return ZCDP(float(self.sensitivity**2 / (4 * self.scale**2)))  # half the true rho

    with pytest.raises(AssertionError, match="above the bound"):
        assert_mechanism_renyi(Bad(1.0, 1.0), 2.0)


def test_assert_renyi_bound_with_distributions_and_guarantee():
    p, q = np.array([0.6, 0.4]), np.array([0.4, 0.6])
    eps = math.log(1.5)
    assert_renyi_bound((p, q), PureDP(eps), 3.0)  # randomized response is eps-DP
    with pytest.raises(AssertionError):
        assert_renyi_bound((p, q), PureDP(eps / 2), 50.0)


# ---- finite policies: exact D_alpha by enumeration ---------------------------------------------------

@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(finite_policies(horizon=(2, 3)))
def test_finite_policy_exact_renyi_monotone_and_conversion_only_weakens(policy):
    from dpaudit.attacks.exact import exact_profile

    alphas = [1.5, 2.0, 4.0, 16.0]
    delta = 1e-3
    prof = exact_profile(policy, "table", alphas=alphas, deltas=[delta])
    d = [prof.divergence(a) for a in alphas]
    assert all(x <= y + 1e-12 for x, y in zip(d, d[1:]))  # D_alpha non-decreasing in alpha
    exact_eps = prof.epsilon(delta)
    for a, v in zip(alphas, d):
        if math.isfinite(v):
            # the RDP -> (eps, delta) conversion of the exact D_alpha can only weaken the exact epsilon
            assert exact_eps <= rdp_to_approx(a, v, delta).epsilon + 1e-9
        assert_finite_policy_renyi(policy, v + 1e-12, a)


def test_finite_policy_exact_renyi_matches_view_distributions():
    """Independent check of the enumeration on T = 2 by writing the view distributions by hand."""
    from dpaudit.policies.finite import FinitePolicy

    # step 1: arm 0 w.p. 1/2; step 2: depends on (a1, r1) with rows a1*2 + r1
    rules = [[[0.5, 0.5]], [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]]
    pol = FinitePolicy(rules, [0.0, 1.0])

    def views(row0):  # row0 = rewards of round 1 for arms (0, 1)
        P = np.zeros(4)
        for a1 in range(2):
            nxt = rules[1][a1 * 2 + int(row0[a1])]
            for a2 in range(2):
                P[a1 * 2 + a2] = 0.5 * nxt[a2]
        return P

    rows = [(0, 0), (0, 1), (1, 0), (1, 1)]
    for alpha in (2.0, 5.0):
        expect = max(renyi_divergence(views(r), views(s), alpha) for r in rows for s in rows if r != s)
        v = assert_finite_policy_renyi(pol, expect + 1e-12, alpha)
        assert math.isclose(v, expect, rel_tol=1e-10)
        with pytest.raises(AssertionError):
            assert_finite_policy_renyi(pol, expect * 0.99, alpha)


# ---- policies: the ledger-implied D_alpha within the claim -------------------------------------------

@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(neighbouring_tables(horizon=40, arms=2))
def test_forgetting_policy_ledger_within_claim_on_neighbours(pair):
    d, d2, _ = pair
    for table in (d, d2):
        acc = assert_ledger_within_claim(ForgettingMeans(2, 0.5), table)
        assert acc.usage.max() == 1
        assert math.isclose(float(acc.mu2.max()) / 2, 0.5, rel_tol=1e-12)


def test_missing_forgetting_is_caught():
    table = np.ones((40, 2))
    with pytest.raises(AssertionError, match="above the bound"):
        assert_ledger_within_claim(NoForgettingMeans(2, 0.5), table)


def test_understated_sensitivity_is_caught():
    with pytest.raises(AssertionError, match="above the bound"):
        assert_ledger_within_claim(UnderstatedSensitivity(2, 0.5), np.ones((20, 2)))


def _registered_with_claims():
    from dpaudit.policies.registry import registered

    # BCO policies play points, not arms: their ledger is checked in tests/test_bco.py
    return [e for e in registered() if not getattr(e.cls, "continuous_actions", False)]


@pytest.mark.slow
@pytest.mark.parametrize("entry", _registered_with_claims(), ids=lambda e: e.name)
def test_every_registered_policy_ledger_within_claim(entry):
    """Random neighbouring inputs (a seeded pair of tables differing in one row) for each policy."""
    from dpaudit.policies.registry import make_policy

    probe = make_policy(entry.name, {})
    if getattr(probe, "claim", None) is None:
        pytest.skip(f"{entry.name} declares no claim (non-private baseline)")
    if not hasattr(probe, "ledger"):
        pytest.skip(f"{entry.name} keeps no ledger by design (an outside-style control, judged black-box)")
    K = int(probe.n_arms)
    dim = getattr(probe, "dim", None) or getattr(probe, "d", None)
    T = 1500 if dim else 200
    rng = np.random.default_rng(7)
    lo, hi = probe.reward_range if all(map(math.isfinite, probe.reward_range)) else (0.0, 1.0)
    d = np.where(rng.random((T, K)) < 0.5, hi, lo)
    d2 = d.copy()
    t = int(rng.integers(T // 4))
    d2[t] = np.where(d[t] == hi, lo, hi)
    feats = None
    if dim:
        f = rng.standard_normal((K, int(dim)))
        feats = np.broadcast_to(f / np.linalg.norm(f, axis=1, keepdims=True), (2, K, int(dim)))
    # a policy built for a horizon (the LDP linear ones) is built for this T: the assertion refuses a longer table
    params = {"horizon": T} if isinstance(getattr(probe, "horizon", None), int) else {}
    for table in (d, d2):
        acc = assert_ledger_within_claim(make_policy(entry.name, params), table, n_runs=2, features=feats)
        assert acc.usage.sum() > 0, f"{entry.name} made no release in {T} rounds: nothing was checked"


def test_run_on_table_is_reproducible():
    a = run_on_table(ForgettingMeans(2, 0.5), np.ones((15, 2)), n_runs=3, seed=4)
    b = run_on_table(ForgettingMeans(2, 0.5), np.ones((15, 2)), n_runs=3, seed=4)
    assert len(a) == len(b) > 0
    for x, y in zip(a.releases, b.releases):
        np.testing.assert_array_equal(x.value, y.value)


# ---- a ledger that saw nothing cannot vouch for a policy ----------------------------------------------

TEMPLATE = str(Path(__file__).resolve().parent.parent / "examples" / "plugin_template.py") + ":MyPolicy"


class OwnNoiseGreedy(Policy):
    """Leaks: round robin, then greedy on each arm's running mean plus its *own* Gaussian noise of sd 0.01
    (a rho-zCDP claim needs sd 1/sqrt(2 rho) on each sum), drawn without dpaudit.mechanisms. Subclassing
    Policy gives it a ledger, which stays empty: a ledger assertion that returned early on it would pass it."""

    name = "own-noise-greedy"
    reward_range = (0.0, 1.0)

    def __init__(self, n_arms: int = 3, rho: float = 0.5, sigma: float = 0.01) -> None:
        super().__init__()
        self.n_arms, self.rho, self.sigma = int(n_arms), float(rho), float(sigma)
        self.claim = ZCDP(self.rho)

    def _reset(self) -> None:
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.counts = np.zeros((self.n_runs, self.n_arms))

    def act(self, t, arms=None):
        if t < self.n_arms:
            return np.full(self.n_runs, t, dtype=np.int64)
        noisy = self.sums / np.maximum(self.counts, 1) + self.sigma * self.rng.standard_normal(self.sums.shape)
        return np.argmax(noisy, axis=1)

    def _observe(self, t, actions, rewards):
        idx = np.arange(self.n_runs)
        self.sums[idx, actions] += rewards
        self.counts[idx, actions] += 1


class OwnNoiseGreedyNoLedger:
    """The same leak as a plain plug-in class: no ledger attribute at all."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms: int = 3, rho: float = 0.5, sigma: float = 0.01) -> None:
        self._inner = OwnNoiseGreedy(n_arms, rho, sigma)
        self.n_arms, self.claim = self._inner.n_arms, self._inner.claim

    def reset(self, n_runs, rng):
        self._inner.reset(n_runs, rng)
        del self._inner.ledger  # keep nothing a ledger assertion could read

    def act(self, t, arms=None):
        return self._inner.act(t, arms)

    def observe(self, t, actions, rewards):
        self._inner.observe(t, actions, rewards)


class DisabledLedger(ForgettingMeans):
    """A correct policy whose ledger is switched off: it records nothing, so it cannot be checked."""

    def _reset(self) -> None:
        super()._reset()
        self.ledger = Ledger(self.n_runs, enabled=False)


def _template(**params):
    from dpaudit.policies.registry import load_policy_class

    return load_policy_class(TEMPLATE)(**params)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(neighbouring_tables(horizon=20, arms=3))
def test_own_noise_without_mechanisms_fails_the_ledger_assertion(pair):
    """OwnNoiseGreedy's empty ledger is no evidence: the assertion fails on every example, never returns early."""
    d, d2, _ = pair
    for table in (d, d2):
        with pytest.raises(AssertionError, match="recorded no release .* yet its actions depend on its rewards"):
            assert_ledger_within_claim(OwnNoiseGreedy(n_arms=3, rho=0.5), table)


def test_a_policy_without_a_ledger_is_refused_with_what_to_do():
    with pytest.raises(AssertionError, match="has no `ledger`.*assert_pair_within_claim"):
        assert_ledger_within_claim(OwnNoiseGreedyNoLedger(), np.zeros((20, 3)))


def test_a_disabled_ledger_is_refused():
    with pytest.raises(AssertionError, match="ledger is disabled"):
        assert_ledger_within_claim(DisabledLedger(2, 0.5), np.ones((40, 2)))


@pytest.mark.parametrize("name,needle", [("mutant-shared-noise", "yet its actions depend on its rewards"),
                                         ("mutant-sqrt2-noise", "above the bound")])
def test_ledger_assertion_fails_on_mutants_with_a_ledger(name, needle):
    from dpaudit.policies.registry import make_policy

    rng = np.random.default_rng(3)
    table = (rng.random((40, 3)) < 0.5).astype(float)
    with pytest.raises(AssertionError, match=needle):
        assert_ledger_within_claim(make_policy(name, {"n_arms": 3}), table)


def test_no_release_within_the_table_fails_unless_allowed():
    """The template releases at the end of its first explore block (K m = 12 rounds for K = 3, m = 4):
    on 8 rounds its ledger is empty and its actions (round robin) ignore the rewards."""
    table = np.ones((8, 3))
    with pytest.raises(AssertionError, match="recorded no release in 8 rounds .* allow_no_releases=True"):
        assert_ledger_within_claim(_template(n_arms=3, rho=0.5), table)
    acc = assert_ledger_within_claim(_template(n_arms=3, rho=0.5), table, allow_no_releases=True)
    assert acc.usage.sum() == 0
    # a leak is never excused by allow_no_releases
    with pytest.raises(AssertionError, match="depend on its rewards"):
        assert_ledger_within_claim(OwnNoiseGreedy(n_arms=3), np.zeros((8, 3)), allow_no_releases=True)


@pytest.mark.parametrize("make", [lambda: _template(n_arms=3, rho=0.5), lambda: AdaCUCB(n_arms=3, rho=0.5)],
                         ids=["plugin-template", "adac-ucb"])
@settings(max_examples=10, deadline=None, derandomize=True)
@given(pair=neighbouring_tables(horizon=20, arms=3))
def test_correct_policies_pass_the_ledger_assertion(make, pair):
    for table in pair[:2]:
        acc = assert_ledger_within_claim(make(), table)
        assert acc.usage.sum() > 0 and acc.usage.max() == 1


# ---- the inputs are checked against the policy ----------------------------------------------------------

@pytest.mark.parametrize("table,needle", [
    (np.zeros((20, 2)), "the table has 2 columns (arms) but adac-ucb has n_arms = 3; build the policy with n_arms=2"),
    (np.full((20, 3), 1.5), "the table holds the reward 1.5 at row 0, arm 0, outside [0, 1], the reward_range"),
    (np.where(np.arange(60).reshape(20, 3) == 31, -0.25, 0.5), "reward -0.25 at row 10, arm 1, outside [0, 1]"),
    (np.where(np.arange(60).reshape(20, 3) == 7, np.nan, 0.5), "holds nan at row 2, arm 1; rewards must be finite"),
    (np.zeros(20), "must be a T x K reward table (T >= 1), got shape (20,)"),
])
def test_ledger_assertion_checks_the_table_against_the_policy(table, needle):
    with pytest.raises(DPAuditError) as exc:
        assert_ledger_within_claim(AdaCUCB(n_arms=3, rho=0.5), table)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and msg.endswith(".")


def test_the_readme_mismatch_is_refused():
    """A README-style mismatch, the template's default 2 arms on 3-arm tables, is refused, not passed silently."""
    with pytest.raises(DPAuditError, match="has 3 columns .* n_arms = 2"):
        assert_ledger_within_claim(_template(rho=0.5), np.zeros((20, 3)))


def test_a_policy_built_for_a_shorter_horizon_is_refused():
    from dpaudit.policies.registry import make_policy

    with pytest.raises(DPAuditError, match="T = 50 rounds but ldp-linucb was built for horizon = 40; build it with "
                                           "horizon=50"):
        run_on_table(make_policy("ldp-linucb", {"horizon": 40}), np.zeros((50, 5)))


def test_an_out_of_range_action_is_refused_by_name():
    class Wild(OwnNoiseGreedy):
        def act(self, t, arms=None):
            return np.full(self.n_runs, 3, dtype=np.int64)

    with pytest.raises(DPAuditError, match="returned arm 3 at step 0; allowed arms are 0..2"):
        assert_ledger_within_claim(Wild(), np.zeros((5, 3)))


# ---- the pair, attacked: assert_pair_within_claim ------------------------------------------------------

class CoinOnFirstReward:
    """Exactly eps-DP, and tight: round 0 plays arm 0; one coin, heads with probability
    (1 + (e^eps - 1) r_0) / (1 + e^eps), fixes every later action (arm 1 on heads, else arm 0). Any two
    r_0 in [0, 1] give head and tail probabilities within a factor e^eps, and r_0 = 0 and 1 exactly e^eps
    apart, so a threshold test on the views comes as close to the claim PureDP(eps) as its counts allow.
    A plain plug-in: no ledger, judged black-box only."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms: int = 2, eps: float = 1.0) -> None:
        self.n_arms, self.eps = int(n_arms), float(eps)
        self.claim = PureDP(self.eps)

    def reset(self, n_runs, rng):
        self.n, self.rng = int(n_runs), rng
        self.heads = np.zeros(self.n, dtype=bool)

    def act(self, t, arms=None):
        return self.heads.astype(np.int64) if t > 0 else np.zeros(self.n, dtype=np.int64)

    def observe(self, t, actions, rewards):
        if t == 0:
            p = (1 + math.expm1(self.eps) * np.asarray(rewards, dtype=float)) / (1 + math.exp(self.eps))
            self.heads = self.rng.random(self.n) < p


def _canary_pair(T=20, K=3, j=0):
    d = np.zeros((T, K))
    d2 = d.copy()
    d2[j] = 1.0
    return d, d2


def _random_pair(T=20, K=3, j=2, seed=1):
    d = (np.random.default_rng(seed).random((T, K)) < 0.5).astype(float)
    d2 = d.copy()
    d2[j] = 1.0 - d2[j]
    return d, d2


#: hypothesis examples of the property tests below, and the confidence per call that keeps the chance of
#: any false alarm among them below 5% (Bonferroni), as the README advises
EXAMPLES = 8
PER_CALL = 1 - 0.05 / EXAMPLES
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)  # a failure found is reported as it is: cheap


@pytest.mark.parametrize("make", [OwnNoiseGreedy, OwnNoiseGreedyNoLedger], ids=["empty-ledger", "no-ledger"])
def test_pair_assertion_catches_own_too_small_noise(make):
    """OwnNoiseGreedy's leak, caught from the actions alone: a black-box lower bound above the claim's 4.728."""
    d, d2 = _canary_pair()
    with pytest.raises(AssertionError) as exc:
        assert_pair_within_claim(make(n_arms=3, rho=0.5), d, d2)
    msg = str(exc.value)
    bound = float(re.search(r"membership \(black-box\) attack shows eps >= ([0-9.]+)", msg).group(1))
    assert bound > 4.728  # the count stops at the first look whose bound exceeds the claim
    for needle in ("leaks more than its claim", "0.5-zCDP allows eps = 4.728 at delta = 1e-05",
                   "fresh runs per side", "row 0: [0, 0, 0] in d, [1, 1, 1] in d'"):
        assert needle in msg


def test_a_property_test_with_the_pair_assertion_finds_the_leak():
    """What the README's example does, on the leaking policy: hypothesis draws pairs until one fails."""
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=NO_SHRINK)
    @given(neighbouring_tables(horizon=20, arms=3))
    def keeps_its_claim(pair):
        d, d2, _ = pair
        assert_pair_within_claim(OwnNoiseGreedy(n_arms=3, rho=0.5), d, d2, confidence=PER_CALL)

    with pytest.raises(AssertionError, match="leaks more than its claim"):
        keeps_its_claim()


@pytest.mark.parametrize("name,pair,attack", [
    ("mutant-sqrt2-noise", _canary_pair(), "likelihood (gray-box)"),
    ("mutant-sqrt2-noise", _random_pair(), "likelihood (gray-box)"),
    ("mutant-shared-noise", _random_pair(), "membership (black-box)"),
])
def test_pair_assertion_catches_mutants_with_a_ledger(name, pair, attack):
    """Noise too small by sqrt(2) (the ledger shows it: the gray-box bound, eps or a Rényi divergence, passes
    the claim), and noise shared by the arms (the ledger stays empty: the black-box bound does)."""
    from dpaudit.policies.registry import make_policy

    with pytest.raises(AssertionError) as exc:
        assert_pair_within_claim(make_policy(name, {"n_arms": 3}), *pair)
    assert f"the {attack} attack" in str(exc.value) and "0.1-zCDP allows eps = 1.914" in str(exc.value)


@pytest.mark.slow
@pytest.mark.parametrize("make", [lambda: _template(n_arms=3, rho=0.5), lambda: AdaCUCB(n_arms=3, rho=0.5)],
                         ids=["plugin-template", "adac-ucb"])
def test_correct_policies_pass_the_pair_assertion(make):
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(neighbouring_tables(horizon=20, arms=3))
    def keeps_its_claim(pair):
        d, d2, j = pair
        res = assert_pair_within_claim(make(), d, d2, confidence=PER_CALL)
        assert res.round == j and res.epsilon_lower <= res.claim_epsilon
        assert [a.attack for a in res.attacks] == (["membership"] if j < 19 else []) + ["likelihood"] * 2

    keeps_its_claim()
    res = assert_pair_within_claim(make(), *_canary_pair())
    assert 2.0 < res.epsilon_lower <= res.claim_epsilon  # the gray-box bound sees the real (Gaussian) leak
    assert res.largest_detectable > res.claim_epsilon


@pytest.mark.slow
@pytest.mark.parametrize("case", ["coin, black-box", "adac-ucb, exact Gaussian claim"])
def test_pair_assertion_false_alarms_stay_within_one_minus_confidence(case):
    """30 seeds of a correct policy on a pair where the attack comes close to the claim: a policy that keeps
    its claim may fail the 95% assertion in at most 5% of calls, so 5 or more failures in 30 (probability
    0.016 at a 5% rate) would mean the assertion is anti-conservative. The bounds must sit close to the claim
    (median above 85% of it), so the test cannot pass by measuring nothing: with its confidence ignored
    (point estimates) the coin fails in about a third of the seeds (measured: 10-12 of 30 at
    confidence=0.05, 5 of 30 at 0.5)."""
    from dp_accounting import dp_event

    if case.startswith("coin"):
        make, pair, kw = (lambda: CoinOnFirstReward(eps=1.0)), _canary_pair(T=10, K=2), {}
    else:  # the canary row feeds one Gaussian release of noise multiplier 1/sqrt(2 rho): its exact profile is the claim
        make, pair = (lambda: AdaCUCB(n_arms=3, rho=0.5)), _canary_pair()
        kw = {"claim": dp_event.GaussianDpEvent(1.0), "delta": 0.05}
    failures, bounds = 0, []
    for seed in range(30):
        try:
            res = assert_pair_within_claim(make(), *pair, seed=seed, **kw)
        except AssertionError:
            failures += 1
        else:
            bounds.append(res.epsilon_lower / res.claim_epsilon)
    assert failures <= 4, f"{failures} false alarms in 30 seeds at 95% confidence"
    assert np.median(bounds) > 0.85, f"the bounds sit at a median {np.median(bounds):.2f} of the claim: too weak"


@pytest.mark.slow
def test_pair_assertion_under_view_dp():
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
    @given(neighbouring_lists(horizon=20))
    def keeps_its_claim(pair):
        r, r2, _ = pair
        assert_pair_within_claim(AdaCUCB(n_arms=3, rho=0.5), r, r2, protocol="view", confidence=PER_CALL)

    keeps_its_claim()
    r = np.zeros(20)
    r2 = r.copy()
    r2[1] = 1.0
    ok = assert_pair_within_claim(AdaCUCB(n_arms=3, rho=0.5), r, r2, protocol="view")
    assert 0 < ok.epsilon_lower <= ok.claim_epsilon
    with pytest.raises(AssertionError, match="membership \\(black-box\\) attack shows eps >= ") as exc:
        assert_pair_within_claim(OwnNoiseGreedy(n_arms=3), r, r2, protocol="view")
    assert float(re.search(r"attack shows eps >= ([0-9.]+)", str(exc.value)).group(1)) > 4.728
    r3 = r2.copy()
    r3[2] = 1.0
    with pytest.raises(DPAuditError, match="d and d_prime differ in entries 1, 2; View-DP neighbours"):
        assert_pair_within_claim(AdaCUCB(n_arms=3), r, r3, protocol="view")


def test_a_pair_no_action_depends_on_passes_with_a_reason():
    """The last row's reward is observed after the last action: the sides' views are equal in law."""
    d, d2 = _canary_pair(T=10, K=3, j=9)
    res = assert_pair_within_claim(OwnNoiseGreedyNoLedger(n_arms=3), d, d2)
    assert res.attacks == () and res.epsilon_lower == 0 and "no action depends on" in res.note


@pytest.mark.parametrize("args,kw,needle", [
    (lambda: _canary_pair(K=2), {}, "d has 2 columns (arms) but adac-ucb has n_arms = 3; build the policy with "
                                    "n_arms=2 or draw tables with arms=3"),
    (lambda: (np.zeros((20, 3)), np.full((20, 3), 2.0)), {}, "d_prime holds the reward 2 at row 0, arm 0, outside "
                                                             "[0, 1], the reward_range adac-ucb's sensitivity assumes"),
    (lambda: (np.zeros((20, 3)), np.zeros((20, 3))), {}, "d and d_prime differ in no rows; Table-DP neighbours differ "
                                                         "in exactly one row"),
    (lambda: (np.zeros((20, 3)), np.ones((20, 3))), {}, "d and d_prime differ in rows 0, 1, 2, 3, 4, 5, 6, 7, ...;"),
    (lambda: (np.zeros((20, 3)), np.zeros((21, 3))), {}, "d has shape (20, 3) but d_prime has shape (21, 3)"),
    (lambda: _canary_pair(), {"protocol": "local"}, "protocol must be 'table'"),
    (lambda: _canary_pair(), {"confidence": 1.0}, "confidence must lie strictly between 0 and 1"),
    (lambda: _canary_pair(), {"runs": 10}, "runs must be an integer >= 100"),
    (lambda: _canary_pair(), {"claim": "zcdp:rho=lots"}, "is not a number"),
])
def test_pair_assertion_checks_its_inputs(args, kw, needle):
    with pytest.raises(DPAuditError) as exc:
        assert_pair_within_claim(AdaCUCB(n_arms=3, rho=0.5), *args(), **kw)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_pair_assertion_refuses_a_claim_it_could_never_catch():
    """Black-box only, a claim above the largest bound the sample size can give: the assertion could not fail."""
    d, d2 = _canary_pair()
    with pytest.raises(DPAuditError, match=r"can show at most eps = 7\.12 at delta = 1e-05, not above the claim's "
                                           r"eps = 10\.72 \(2-zCDP\).* pass runs=[0-9,]+ or more"):
        assert_pair_within_claim(OwnNoiseGreedyNoLedger(n_arms=3, rho=2.0), d, d2)
    # the same claim within reach at the runs it names
    msg = ""
    try:
        assert_pair_within_claim(OwnNoiseGreedyNoLedger(n_arms=3, rho=2.0), d, d2)
    except DPAuditError as exc:
        msg = str(exc)
    runs = int(re.search(r"pass runs=([0-9,]+)", msg).group(1).replace(",", ""))
    from dpaudit.attacks.bounds import largest_bound
    from dpaudit.attacks.sampling import LOOKS

    def reach(n):  # the largest bound of n fresh runs per side, counted to the last look (its share of the budget)
        return largest_bound(n, 1e-5, 1 - 0.05 * LOOKS[-1][1])

    assert reach(runs) > 10.72 > reach(runs // 2)


# ---- the pair, exactly: finite policies are enumerated ----------------------------------------------

def _rr_finite(eps):
    """T = 2, K = 2, rewards {0, 1}: a_1 uniform, then a_2 = r_1 (the reward of arm a_1) with probability
    e^eps / (1 + e^eps): randomised response on one reward, exactly eps-DP (inf for eps = inf: a copy)."""
    from dpaudit.policies.finite import FinitePolicy

    keep = 1.0 if math.isinf(eps) else math.exp(eps) / (1 + math.exp(eps))
    step2 = [[keep, 1 - keep] if r == 0 else [1 - keep, keep] for a in range(2) for r in range(2)]
    return FinitePolicy([[[0.5, 0.5]], step2], [0.0, 1.0])


def test_pair_assertion_is_exact_on_a_finite_policy():
    d, d2 = np.zeros((2, 2)), np.zeros((2, 2))
    d2[0] = 1.0
    res = assert_pair_within_claim(_rr_finite(1.0), d, d2, claim=PureDP(1.0))
    assert res.attacks == () and res.exact is not None and "exact" in res.note
    assert math.isclose(res.epsilon_lower, res.exact["epsilon"]) and res.epsilon_lower <= res.claim_epsilon
    assert math.isclose(res.exact["D_100"], 1.0, rel_tol=0.05)  # D_alpha of randomised response tends to eps
    with pytest.raises(AssertionError, match=r"leaks more than its claim on this pair, by exact enumeration of its "
                                             r"views: eps = 0\.99.* above the eps = 0\.89.*0\.9-DP.*: route every use"):
        assert_pair_within_claim(_rr_finite(1.0), d, d2, claim=PureDP(0.9))
    with pytest.raises(AssertionError, match=r"eps = inf at delta = 1e-05"):  # a finite policy that copies the reward
        assert_pair_within_claim(_rr_finite(math.inf), d, d2, claim=PureDP(5.0))


# ---- every assertion: fails on a leak with one sentence saying what to do; refuses bad arguments ------------

class UnderstatedGaussian(GaussianMechanism):
    def guarantee(self):
        return ZCDP(float(self.sensitivity**2 / (4 * self.scale**2)))  # half the true rho


def _failure(call):
    with pytest.raises(AssertionError) as exc:
        call()
    return str(exc.value).split("\n")[0]


@pytest.mark.parametrize("name,call,todo", [
    ("assert_renyi_bound", lambda: assert_renyi_bound((np.array([0.6, 0.4]), np.array([0.4, 0.6])),
                                                      PureDP(0.1), 50.0), "add noise"),
    ("assert_mechanism_renyi", lambda: assert_mechanism_renyi(UnderstatedGaussian(1.0, 1.0), 2.0),
     "its guarantee() promises more than its noise gives; derive the guarantee"),
    ("assert_ledger_within_claim (own noise)", lambda: assert_ledger_within_claim(OwnNoiseGreedy(n_arms=3),
                                                                                  np.zeros((20, 3))),
     "release every use through dpaudit.mechanisms"),
    ("assert_ledger_within_claim (sqrt 2)", lambda: assert_ledger_within_claim(
        make_policy("mutant-sqrt2-noise", {"n_arms": 3}), _random_pair(T=40)[0]), "check the noise scale and sensitivity"),
    ("assert_pair_within_claim (exact)", lambda: assert_pair_within_claim(
        _rr_finite(2.0), np.zeros((2, 2)), np.array([[1.0, 1.0], [0.0, 0.0]]), claim=PureDP(1.0)),
     "route every use of the rewards through dpaudit.mechanisms"),
    ("assert_pair_within_claim", lambda: assert_pair_within_claim(OwnNoiseGreedy(n_arms=3), *_canary_pair()),
     "route every use of the rewards through dpaudit.mechanisms"),
    ("assert_finite_policy_renyi", lambda: assert_finite_policy_renyi(_rr_finite(2.0), 1.0, 2.0),
     "mix them towards uniform"),
])
def test_every_assertion_fails_on_a_leak_with_one_sentence_saying_what_to_do(name, call, todo):
    first = _failure(call)
    assert todo in first and first.endswith("."), first
    assert first.count(": ") <= 3 and ". " not in first.rstrip("."), first  # one sentence (its clauses by colons)


_OK = (np.array([0.6, 0.4]), np.array([0.4, 0.6]))


@pytest.mark.parametrize("call,needle", [
    (lambda: assert_pair_within_claim(None, *_canary_pair()), "policy must be a policy instance"),
    (lambda: assert_pair_within_claim("adac-ucb", *_canary_pair()), "got 'adac-ucb'; build it first"),
    (lambda: assert_pair_within_claim(AdaCUCB, *_canary_pair()), "got the class AdaCUCB, not a policy"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), None, _canary_pair()[1]), "d must be a T x 3 table of "
                                                                                   "rewards, got None"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), _canary_pair()[0], "d'"), "d_prime must be a T x 3 table"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), claim=5), "a claim must be a Guarantee"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), delta=None), "delta must be a real number"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), confidence="0.95"), "confidence must lie"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), runs=None), "runs must be an integer"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), seed=None), "seed must be an integer >= 0"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), seed="x"), "seed must be an integer >= 0"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), likelihood="no"), "likelihood must be True"),
    (lambda: assert_pair_within_claim(AdaCUCB(n_arms=3), *_canary_pair(), features="x"), "features must be the "
                                                                                         "policy's fixed action set"),
    (lambda: assert_ledger_within_claim(None, np.zeros((20, 3))), "policy must be a policy instance"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), None), "the table must be a T x 3 table of rewards"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), np.zeros((20, 3)), seed=None), "seed must be an integer"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), np.zeros((20, 3)), n_runs="4"), "n_runs must be an integer"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), np.zeros((20, 3)), alphas="2"), "alphas must be a "
                                                                                           "non-empty list"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), np.zeros((20, 3)), rtol=None), "rtol must be a real"),
    (lambda: assert_ledger_within_claim(AdaCUCB(n_arms=3), np.zeros((20, 3)), allow_no_releases="yes"),
     "allow_no_releases must be True or False"),
    (lambda: assert_renyi_bound(None, 1.0, 2.0), "measured must be a real number, got None"),
    (lambda: assert_renyi_bound("0.5", 1.0, 2.0), "measured must be a real number, got '0.5'"),
    (lambda: assert_renyi_bound(_OK, None, 2.0), "bound must be a number >= 0, a Guarantee"),
    (lambda: assert_renyi_bound(_OK, "zcdp", 2.0), "bound must be a number >= 0, a Guarantee"),
    (lambda: assert_renyi_bound(_OK, 1.0, None), "alpha must be a real number"),
    (lambda: assert_mechanism_renyi(None, 2.0), "mechanism must be a Gaussian or Laplace mechanism"),
    (lambda: assert_mechanism_renyi("gaussian", 2.0), "mechanism must be a Gaussian or Laplace mechanism"),
    (lambda: assert_mechanism_renyi(GaussianMechanism(1.0, 1.0), 2.0, centre="0"), "centre must be a real number"),
    (lambda: assert_finite_policy_renyi(None, 1.0, 2.0), "policy must be a FinitePolicy"),
    (lambda: assert_finite_policy_renyi(_rr_finite(1.0), None, 2.0), "bound must be a number >= 0"),
])
def test_every_assertion_refuses_a_wrong_argument_by_name(call, needle):
    with pytest.raises(DPAuditError) as exc:
        call()
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and msg.endswith("."), msg


# ---- the README's example, executed ------------------------------------------------------------------

def _readme_property_test(policy_class, *, stop_at_first_failure=False):
    """The README's property-test block, run as written with ``MyPolicy`` bound to ``policy_class`` (and, for a
    policy expected to fail, hypothesis told to report the first failure without shrinking it: minutes saved)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Property tests with `dpaudit.testing`", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    if stop_at_first_failure:
        assert block.count("deadline=None)") == 1
        block = block.replace("deadline=None)", "deadline=None, phases=NO_SHRINK, report_multiple_bugs=False)")
    scope = {"__name__": "__readme__", "MyPolicy": policy_class, "NO_SHRINK": NO_SHRINK}
    exec(compile(block, "README.md", "exec"), scope)
    return scope["test_my_policy_keeps_its_claim"]


@pytest.mark.slow
def test_the_readme_property_test_passes_a_correct_policy_and_fails_a_leaking_one():
    from dpaudit.policies.registry import load_policy_class

    _readme_property_test(load_policy_class(TEMPLATE))()  # the plug-in template keeps its claim
    with pytest.raises(AssertionError, match="own-noise-greedy leaks more than its claim on this pair"):
        _readme_property_test(OwnNoiseGreedy, stop_at_first_failure=True)()
