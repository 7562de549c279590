"""Gray-box likelihood attack: analytic privacy-loss distributions, CI coverage, detection of known bugs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accountants import ZCDP, PureDP, gaussian_epsilon
from dpaudit.attacks.likelihood import likelihood_attack, privacy_losses, profile_bounds, renyi_bounds
from dpaudit.protocols import Pair
from dpaudit.mechanisms import Fed, GaussianMechanism, LaplaceMechanism
from dpaudit.policies.base import Policy
from dpaudit.protocols import TableDP, ViewDP


class OneShot(Policy):
    """Round-robin over K arms, then one noisy reward sum per arm (fed by that arm's round), then argmax.

    ``weaken`` divides the noise scale (mis-calibration); ``reuse`` releases each sum that many times
    (overlapping use of a round); ``laplace`` switches to Laplace noise of scale 1/eps.
    """

    def __init__(self, n_arms: int = 2, rho: float = 0.5, weaken: float = 1.0, reuse: int = 1,
                 laplace: float = 0.0) -> None:
        super().__init__()
        self.n_arms, self.reuse = n_arms, reuse
        self.reward_range = (0.0, 1.0)
        if laplace:
            self.claim = PureDP(laplace)
            self.mech = LaplaceMechanism(1.0, 1.0 / laplace / weaken)
        else:
            self.claim = ZCDP(rho)
            self.mech = GaussianMechanism(1.0, 1.0 / math.sqrt(2 * rho) / weaken)

    def _reset(self):
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.best = np.zeros(self.n_runs, dtype=np.int64)

    def act(self, t, arms=None):
        return np.full(self.n_runs, t, dtype=np.int64) if t < self.n_arms else self.best

    def _observe(self, t, actions, rewards):
        if t < self.n_arms:
            self.sums[:, t] += rewards
        if t == self.n_arms - 1:
            tot = np.zeros((self.n_runs, self.n_arms))
            for _ in range(self.reuse):
                for a in range(self.n_arms):
                    fed = Fed.interval(np.full(self.n_runs, a), np.full(self.n_runs, a + 1), 1.0)
                    tot[:, a] += self.mech.release(self.sums[:, a], self.rng, ledger=self.ledger, step=t, fed=fed)
            self.best = np.argmax(tot, axis=1)


def _pair(T=4, K=2, j=0):
    d0 = np.full((T, K), 0.5)
    d1 = d0.copy()
    d0[j], d1[j] = 0.0, 1.0
    return Pair(d0, d1, j, label="canary")


def test_losses_are_the_analytic_gaussian():
    # sigma = 1 (rho = 0.5), unit change: L ~ N(1/2, 1) under d
    loss, info = privacy_losses(OneShot(), TableDP(), _pair(), 40000, np.random.SeedSequence(0))
    assert loss.mean() == pytest.approx(0.5, abs=0.03)
    assert loss.std() == pytest.approx(1.0, abs=0.03)
    assert info["max_releases_fed_by_round"] == 1 and info["releases_without_fed"] == 0


def test_view_protocol_uses_the_list_entry():
    r = np.full(4, 0.5)
    r0, r1 = r.copy(), r.copy()
    r0[1], r1[1] = 0.0, 1.0
    loss, _ = privacy_losses(OneShot(), ViewDP(), Pair(r0, r1, 1), 20000, np.random.SeedSequence(1))
    assert loss.mean() == pytest.approx(0.5, abs=0.04)


def test_epsilon_bound_is_valid_and_tight_for_gaussian():
    delta = 1e-3
    truth = gaussian_epsilon(delta, sigma=1.0).epsilon
    r = likelihood_attack(OneShot(), TableDP(), _pair(), delta=delta, n_runs=100000, seed=3)
    assert 0.85 * truth < r.epsilon_lower <= truth
    orders = r.details["renyi"]["orders"]
    for o, lo in zip(orders, r.details["renyi"]["lower"]):
        assert lo <= o / 2 + 1e-9  # D_alpha = alpha mu^2 / 2 = alpha / 2
    assert r.details["renyi"]["lower"][0] > 0.6  # order 1.5: truth 0.75
    assert r.details["renyi_violation"] == []


def test_laplace_loss_is_bounded_by_eps():
    pol = OneShot(laplace=0.8)
    loss, _ = privacy_losses(pol, TableDP(), _pair(), 20000, np.random.SeedSequence(4))
    assert np.all(np.abs(loss) <= 0.8 + 1e-9)
    r = likelihood_attack(pol, TableDP(), _pair(), delta=1e-3, n_runs=40000, seed=4, claim=pol.claim)
    assert 0.6 < r.epsilon_lower <= 0.8 and r.details["renyi_violation"] == []


def test_a_pure_dp_bound_is_not_capped_below_the_largest_loss():
    """A 128-point grid from 0 to twice the largest loss would cap a pure-DP bound at 126/127 eps0; the
    order statistic is not capped: Laplace at eps0 = 0.8, delta = 1e-5, 40,000 runs shows above 0.799 (its
    exact eps(delta) is 0.79998; the limit at this size, median 0.7998)."""
    pol = OneShot(laplace=0.8)
    r = likelihood_attack(pol, TableDP(), _pair(), delta=1e-5, n_runs=40000, seed=4, claim=pol.claim)
    assert 0.8 * 126 / 127 < 0.799 < r.epsilon_lower <= 0.8


def test_profile_confidence_interval_coverage():
    """delta(eps) of N(mu^2/2, mu^2) losses is the Gaussian profile; the CP interval covers it."""
    from scipy.stats import norm

    mu, eps = 1.0, 0.5
    truth = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    rng = np.random.default_rng(5)
    miss_lo = miss_hi = 0
    reps = 300
    for _ in range(reps):
        loss = rng.normal(mu**2 / 2, mu, 1000)
        _, lo, hi = profile_bounds(loss, np.array([eps]), rng.random(1000), 0.05)
        miss_lo += lo[0] > truth
        miss_hi += hi[0] < truth
    assert miss_lo / reps <= 0.05 + 0.04 and miss_hi / reps <= 0.05 + 0.04


def test_renyi_lower_bound_coverage():
    rng = np.random.default_rng(6)
    misses = 0
    for _ in range(100):
        loss = rng.normal(0.5, 1.0, 2000)
        _, low = renyi_bounds(loss, [2.0], rng.random(2000), 0.05)
        misses += low[0] > 1.0  # D_2 = 1
    assert misses <= 12


def test_catches_miscalibrated_noise():
    pol = OneShot(weaken=math.sqrt(2))  # actually 1-zCDP, claims 0.5-zCDP
    r = likelihood_attack(pol, TableDP(), _pair(), delta=1e-3, n_runs=20000, seed=7, claim=pol.claim)
    assert r.details["renyi_violation"]
    truth_claim = gaussian_epsilon(1e-3, sigma=1.0).epsilon
    assert r.epsilon_lower > truth_claim  # beyond even the exact profile of the claimed noise


def test_catches_overlapping_use_of_a_round():
    pol = OneShot(reuse=2)
    r = likelihood_attack(pol, TableDP(), _pair(), delta=1e-3, n_runs=20000, seed=8, claim=pol.claim)
    assert r.details["max_releases_fed_by_round"] == 2
    assert r.details["renyi_violation"]


def test_a_policy_without_ledger_is_refused():
    from dpaudit.errors import DPAuditError

    class NoLedger:
        n_arms = 2

        def reset(self, n, rng):
            self.n = n

        def act(self, t, arms=None):
            return np.zeros(self.n, dtype=np.int64)

        def observe(self, t, a, r):
            pass

    with pytest.raises(DPAuditError):
        likelihood_attack(NoLedger(), TableDP(), _pair(), n_runs=100)


def test_whole_attack_false_alarm_rate_over_seeds():
    """Over many seeds, the bound exceeds the exact epsilon at most 1 - confidence of the time."""
    delta, confidence, seeds = 1e-3, 0.9, 40
    truth = gaussian_epsilon(delta, sigma=1.0).epsilon
    above = 0
    for seed in range(seeds):
        r = likelihood_attack(OneShot(), TableDP(), _pair(), delta=delta, confidence=confidence, n_runs=3000, seed=seed)
        above += r.epsilon_lower > truth
        assert r.details["order_statistic"]["rank"] >= 1
    # allowed: 4 of 40 on average; P(Binomial(40, 0.1) > 9) < 0.01
    assert above <= 9


def test_the_bound_does_not_depend_on_a_grid_and_the_band_is_drawn_on_the_pilots():
    pilot = np.array([0.1, 0.7, 1.5])
    r = likelihood_attack(OneShot(), TableDP(), _pair(), delta=1e-3, n_runs=2000, seed=1, pilot=pilot)
    assert max(r.details["profile"]["eps"]) == pytest.approx(3.0)  # twice the pilot's largest loss
    other = likelihood_attack(OneShot(), TableDP(), _pair(), delta=1e-3, n_runs=2000, seed=1,
                              eps_grid=np.linspace(0, 0.5, 7))
    assert other.epsilon_lower == r.epsilon_lower > 0


def _gaussian_bounds(mu: float, n: int, delta: float, alpha: float, seeds: int) -> np.ndarray:
    """The eps bound of N(mu^2/2, mu^2) losses over seeds (what loss_bounds reports, checked on the first)."""
    from dpaudit.attacks.likelihood import epsilon_from_losses, loss_bounds

    out = np.empty(seeds)
    for s in range(seeds):
        rng = np.random.default_rng([17, s])
        loss, u = rng.normal(mu**2 / 2, mu, n), rng.random(n)
        out[s] = epsilon_from_losses(loss, u, delta, alpha)[0]
        if s == 0:
            full = loss_bounds(loss, u, delta=delta, confidence=1 - alpha / 0.8, orders=(2.0,))
            assert full.alpha_epsilon == pytest.approx(alpha) and full.epsilon_lower == out[0]
    return out


def test_the_eps_bound_exceeds_the_truth_at_the_rate_its_law_says_and_no_more():
    """The bound is the k-th largest of L - E over the counted runs, so over seeds it exceeds the exact
    eps(delta) of a Gaussian loss exactly with probability P(Binomial(n, delta) >= k) < alpha, whatever eps
    it lands on. 2,000 seeds of 2,000 N(1/2, 1) losses at delta = 0.01, confidence 0.8 (alpha 0.2 / the
    eps share 0.16 with orders): a bound that chose its eps on the counted losses, or counted L > eps without
    the uniforms, would exceed far more often (the second half checks that such a rule is caught)."""
    from scipy.stats import binom

    from dpaudit.attacks.likelihood import EPSILON_SHARE
    from dpaudit.attacks.limits import order_statistic_rank

    assert EPSILON_SHARE == 0.8  # (as _gaussian_bounds assumes)
    n, delta, conf, seeds = 2000, 0.01, 0.8, 2000
    truth = gaussian_epsilon(delta, sigma=1.0).epsilon
    alpha = (1 - conf) * EPSILON_SHARE
    k = order_statistic_rank(n, delta, alpha)
    rate = float(binom.sf(k - 1, n, delta))  # the exact exceedance probability
    assert rate < alpha
    b = _gaussian_bounds(1.0, n, delta, alpha, seeds)
    sd = math.sqrt(rate * (1 - rate) / seeds)
    assert abs(np.mean(b > truth) - rate) < 4 * sd
    # a rule that looked at the counted losses (the k-th largest loss itself, no uniforms) is caught
    naive = np.array([np.sort(np.random.default_rng([17, s]).normal(0.5, 1.0, n))[-k] for s in range(400)])
    assert np.mean(naive > truth) > alpha + 4 * math.sqrt(alpha * (1 - alpha) / 400)


def test_the_bounds_median_over_seeds_is_the_statistical_limit():
    """likelihood_limit gives the exact law of the bound: its median and deciles over 400 seeds of a
    Gaussian loss (mu = sqrt 2: AdaC-UCB at rho = 1) at 5,000 runs, delta = 1e-3."""
    from dpaudit.attacks.limits import gaussian_profile, likelihood_limit

    mu, n, delta, conf = math.sqrt(2), 5000, 1e-3, 0.975
    b = _gaussian_bounds(mu, n, delta, 1 - conf, 400)
    prof = gaussian_profile(mu)
    for q in (0.1, 0.5, 0.9):
        e = likelihood_limit(prof, n, delta, conf, quantile=q)
        # P(bound <= e) = q; over 400 seeds the empirical fraction is within 4 standard errors
        assert abs(np.mean(b <= e) - q) < 4 * math.sqrt(q * (1 - q) / 400), q


def test_profile_bounds_in_blocks_equal_the_one_matrix_bit_for_bit():
    """profile_bounds computes a few grid points at a time (memory); every estimate, count and bound is the
    one-matrix formula's, -0.0 where every run's loss is below eps included."""
    from dpaudit.attacks.bounds import cp_lower, cp_upper

    rng = np.random.default_rng(11)
    loss = np.concatenate([rng.normal(0.3, 0.6, 5001), [0.0, 2.0, -1.0]])
    u = rng.random(loss.size)
    grid = np.concatenate([np.linspace(0.0, 5.0, 11), [0.3, 10.0]])
    y = -np.expm1(np.minimum(grid[:, None] - loss[None, :], 0.0))
    k = (u[None, :] < y).sum(axis=1)
    est, lo, hi = profile_bounds(loss, grid, u, 1e-3)
    want = y.mean(axis=1)
    assert est.tobytes() == want.tobytes()  # the signs of zeros too
    assert np.array_equal(lo, cp_lower(k, loss.size, 1e-3)) and np.array_equal(hi, cp_upper(k, loss.size, 1e-3))


def test_the_whole_attack_reaches_the_limit_at_a_small_size():
    """The likelihood attack end to end (a policy, its ledger, the pair) at 2,000 runs reaches 95% of the
    statistical limit of its sample size: sigma = 1 Gaussian (loss N(1/2, 1)), delta = 1e-3, 20 seeds. The
    bound's law is exact, P(bound <= 0.95 x limit) <= 0.2 (checked), so the median of 20 seeds falls below
    0.95 x limit with probability at most P(Binomial(20, 0.2) >= 10) < 0.003. A grid-capped or
    over-corrected bound (the 128-point grid with its Bonferroni share) falls short."""
    from dpaudit.attacks.limits import gaussian_profile, likelihood_limit

    n, delta, conf = 2000, 1e-3, 0.975
    prof = gaussian_profile(1.0)
    runs = [likelihood_attack(OneShot(), TableDP(), _pair(), delta=delta, confidence=conf, n_runs=n, seed=s)
            for s in range(20)]
    own = 1 - runs[0].details["order_statistic"]["alpha"]
    limit = likelihood_limit(prof, n, delta, conf)
    assert likelihood_limit(prof, n, delta, own, quantile=0.2) >= 0.95 * limit
    bounds = np.array([r.epsilon_lower for r in runs])
    assert np.median(bounds) >= 0.95 * limit
