"""Black-box membership attack and the shared test statistics: known answers, validity, power."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpaudit.accountants import PureDP
from dpaudit.errors import DPAuditError
from dpaudit.attacks.bounds import (
    best_threshold_test,
    cp_lower,
    cp_upper,
    eps_lower_from_counts,
    eps_lower_from_rates,
    oracle_threshold_bound,
)
from dpaudit.attacks.membership import membership_attack
from dpaudit.protocols import Pair
from dpaudit.policies.finite import bundled_spec
from dpaudit.protocols import TableDP


class UniformPolicy:
    """Ignores its data: every lower bound above 0 is a false alarm."""

    claim = PureDP(0.1)

    def __init__(self, n_arms: int = 2) -> None:
        self.n_arms = n_arms

    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng

    def act(self, t, arms=None):
        return self.rng.integers(0, self.n_arms, self.n)

    def observe(self, t, actions, rewards):
        pass


def test_eps_formula_known_values():
    # FPR = 0.2, FNR = 0.3 at delta = 0.01: max(ln(0.79/0.3), ln(0.69/0.2))
    got = float(eps_lower_from_rates(0.2, 0.3, 0.01))
    assert got == pytest.approx(max(math.log(0.79 / 0.3), math.log(0.69 / 0.2)))
    assert float(eps_lower_from_rates(0.5, 0.5, 0.0)) == 0.0  # a coin flip proves nothing
    assert float(eps_lower_from_rates(0.0, 0.5, 0.0)) == math.inf


def test_bonferroni_and_confidence_lower_the_bound():
    a = float(eps_lower_from_counts(100, 10000, 500, 10000, 1e-5, 0.95, 1))
    b = float(eps_lower_from_counts(100, 10000, 500, 10000, 1e-5, 0.95, 50))
    c = float(eps_lower_from_counts(100, 10000, 500, 10000, 1e-5, 0.99, 1))
    assert a > b > 0 and a > c > 0
    with pytest.raises(DPAuditError):
        eps_lower_from_counts(1, 10, 1, 10, 1e-5, 1.5)
    with pytest.raises(DPAuditError):
        eps_lower_from_counts(1, 10, 1, 10, 2.0, 0.95)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 50), st.integers(50, 500), st.floats(0.001, 0.2))
def test_clopper_pearson_brackets_the_rate(k, n, alpha):
    lo, hi = float(cp_lower(k, n, alpha)), float(cp_upper(k, n, alpha))
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_clopper_pearson_coverage():
    rng = np.random.default_rng(1)
    p, n, alpha = 0.07, 300, 0.05
    k = rng.binomial(n, p, size=4000)
    miss_up = np.mean(cp_upper(k, n, alpha) < p)
    miss_lo = np.mean(cp_lower(k, n, alpha) > p)
    slack = 3 * math.sqrt(alpha * (1 - alpha) / k.size)  # Monte Carlo error of the miss rates
    assert miss_up <= alpha + slack and miss_lo <= alpha + slack  # Clopper-Pearson is conservative
    assert miss_up > alpha / 10  # ... but not vacuous


def test_clopper_pearson_of_many_counts_is_the_quantile_of_each():
    """A threshold scan's many repeated counts are bounded once per distinct count: the same values as the beta
    quantile taken entry by entry (scipy's betaincinv), for either bound and counts up to n."""
    from scipy.special import betaincinv

    rng = np.random.default_rng(3)
    n, alpha = 2000, 0.013
    k = np.sort(rng.integers(0, n + 1, 3000) // 5 * 5)  # repeats, both ends included below
    k[:3], k[-3:] = 0, n
    with np.errstate(all="ignore"):
        up = np.where(k >= n, 1.0, betaincinv(k + 1.0, np.maximum(n - k, 1e-300), 1 - alpha))
        lo = np.where(k <= 0, 0.0, betaincinv(np.maximum(k, 1e-300), n - k + 1.0, alpha))
    assert np.array_equal(cp_upper(k, n, alpha), up) and np.array_equal(cp_lower(k, n, alpha), lo)
    assert np.array_equal(cp_upper(k[::-1], n, alpha), up[::-1])  # any order


def test_best_threshold_finds_the_shift():
    rng = np.random.default_rng(2)
    s0 = {"x": rng.laplace(0, 1, 20000)}
    s1 = {"x": rng.laplace(1, 1, 20000)}
    bound, test = best_threshold_test(s0, s1, 0.0, 0.95)[0]
    assert 0.5 < bound <= 1.0 and test.direction == 1


def test_oracle_bound_below_truth_and_grows_with_n():
    from scipy.stats import norm

    c = np.linspace(-3, 6, 400)
    mu = 1.0
    fpr, fnr = norm.sf(c), norm.cdf(c - mu)
    small = oracle_threshold_bound(fpr, fnr, 10**3, 1e-3, 0.95)
    big = oracle_threshold_bound(fpr, fnr, 10**7, 1e-3, 0.95)
    from dpaudit.accountants import gaussian_epsilon

    truth = gaussian_epsilon(1e-3, sigma=1.0).epsilon
    assert small < big < truth


def test_uniform_policy_false_alarm_rate():
    pol = UniformPolicy(2)
    d0 = np.zeros((5, 2))
    d1 = d0.copy()
    d1[1] = 1.0
    pair = Pair(d0, d1, 1, label="canary")
    alarms = 0
    for seed in range(30):
        r = membership_attack(pol, TableDP(), pair, delta=0.0, confidence=0.9, n_train=300, n_select=300,
                              n_test=1500, seed=seed)
        alarms += r.epsilon_lower > 0
    # at most 1 - confidence = 10% in expectation; P(Binomial(30, 0.1) > 8) < 0.01
    assert alarms <= 8


def test_bound_never_exceeds_exact_epsilon_and_has_power():
    """Azize & Basu (2023a), Prop. 1(e): exact eps(0.17) = 0.984 under Table DP; the witness pair differs in row 0."""
    from dpaudit.attacks.exact import exact_profile

    pol = bundled_spec("table-vs-view-counterexample")
    delta = 0.17
    exact = exact_profile(pol, "table", epsilons=[1.0], deltas=[delta], alphas=[2.0]).epsilon_at[0]
    assert exact == pytest.approx(0.98398, abs=1e-4)
    d0 = np.array([[0, 1], [1, 1], [0, 0]], dtype=float)
    d1 = np.array([[1, 0], [1, 1], [0, 0]], dtype=float)
    bounds = []
    for seed in range(3):
        r = membership_attack(pol, TableDP(), Pair(d0, d1, 0), delta=delta, confidence=0.95,
                              n_train=2000, n_select=2000, n_test=20000, seed=seed)
        bounds.append(r.epsilon_lower)
        assert r.epsilon_lower <= exact
    assert min(bounds) > 0.8  # within 20% of the exact value with 2 x 24000 samples


def test_witness_and_counts_are_reported():
    pol = bundled_spec("table-vs-view-counterexample")
    d0 = np.zeros((3, 2))
    d1 = d0.copy()
    d1[0] = 1.0
    r = membership_attack(pol, TableDP(), Pair(d0, d1, 0, label="row 0"), n_test=3000, seed=0)
    assert r.attack == "membership" and r.witness["round"] == 0 and r.witness["statistic"]
    assert r.details["false_positives"] + (3000 - r.details["false_negatives"]) >= 0
    assert r.samples == 2 * (4000 + 4000) + 2 * 3000
    with pytest.raises(DPAuditError):
        membership_attack(pol, TableDP(), Pair(d0, d1, 2), n_test=100)  # last round cannot leak
    with pytest.raises(DPAuditError):
        membership_attack(pol, TableDP(), Pair(d0, d1, 0), n_test=0)


@pytest.mark.parametrize("K", [2, 3, 5, 10])
def test_view_statistics_follow_their_definitions(K):
    """The scorer's statistics (counted in one pass per block) equal their definitions, computed plainly: the hash
    sum_t (a_t + 1) w_t mod 2^64, the plays of each arm after the canary round, the shares of each arm per block."""
    from dpaudit.attacks.membership import ViewScorer

    rng = np.random.default_rng(K)
    T, j = 97, 11
    views = np.repeat(rng.integers(0, K, (300, T // 5 + 1)), 5, axis=1)[:, :T].copy()
    views[:40] = rng.integers(0, K, (40, T))
    sc = ViewScorer(K, T, j)
    w = [int(x) for x in sc._w]
    for v in (views, views[::3, :], views.astype(np.int32)):
        want_hash = [sum((int(a) + 1) * wt for a, wt in zip(row, w)) % 2**64 for row in v.tolist()]
        assert sc.hashes(v).tolist() == want_hash
        after = v[:, j + 1:]
        assert np.array_equal(sc.pulls_after(v), np.array([[np.sum(r == a) for a in range(K)] for r in after], float))
        edges = np.linspace(0, T - j - 1, sc.n_blocks + 1).astype(int)
        shares = [np.array([np.mean(r[lo:hi] == a) for r in after]) for lo, hi in zip(edges[:-1], edges[1:])
                  for a in range(K)]
        firsts = [(after[:, s] == a).astype(float) for s in range(sc.n_after) for a in range(K)]
        assert np.array_equal(sc.features(v), np.stack(shares + firsts, axis=1))
