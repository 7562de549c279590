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
    for o, lo, est in zip(orders, r.details["renyi"]["lower"], r.details["renyi"]["estimate"]):
        assert lo <= o / 2 + 1e-9  # D_alpha = alpha mu^2 / 2 = alpha / 2
    assert r.details["renyi"]["lower"][0] > 0.6  # order 1.5: truth 0.75
    assert r.details["renyi_violation"] == []


def test_laplace_loss_is_bounded_by_eps():
    pol = OneShot(laplace=0.8)
    loss, _ = privacy_losses(pol, TableDP(), _pair(), 20000, np.random.SeedSequence(4))
    assert np.all(np.abs(loss) <= 0.8 + 1e-9)
    r = likelihood_attack(pol, TableDP(), _pair(), delta=1e-3, n_runs=40000, seed=4, claim=pol.claim)
    assert 0.6 < r.epsilon_lower <= 0.8 and r.details["renyi_violation"] == []


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
        assert r.details["grid"]["points"] == 128 and r.details["grid"]["top"] > 0
    # allowed: 4 of 40 on average; P(Binomial(40, 0.1) > 9) < 0.01
    assert above <= 9


def test_grid_comes_from_the_pilot_not_the_counted_runs():
    pilot = np.array([0.1, 0.7, 1.5])
    r = likelihood_attack(OneShot(), TableDP(), _pair(), delta=1e-3, n_runs=2000, seed=1, pilot=pilot)
    assert r.details["grid"]["top"] == pytest.approx(3.0)  # twice the pilot's largest loss


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
