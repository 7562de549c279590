"""The upper side's arithmetic: exact compositions against known values and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.accountants.gaussian import gaussian_epsilon
from dpaudit.accountants.shuffle import clones_composed_delta, clones_composed_epsilon, clones_epsilon, clones_profile
from dpaudit.accountants.upper import (GAUSSIAN, LAPLACE, PURE, compose_epsilon, rr_renyi, worst_group_epsilon)
from dpaudit.errors import DPAuditError

DELTA = 1e-5


def _invert(delta_of, delta: float, hi: float) -> float:
    """The smallest eps with delta_of(eps) <= delta (bisection, to 1e-9)."""
    lo = 0.0
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if delta_of(mid) <= delta else (mid, hi)
    return hi


def test_single_gaussian_is_the_analytic_profile():
    # Balle & Wang (2018), Thm 8, written out independently: delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu)
    for mu in (0.3, 1.0, 1.414213562, 4.0):
        eps = compose_epsilon(DELTA, [mu]).epsilon
        d = stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu)
        assert d == pytest.approx(DELTA, rel=1e-6)
    # adac-ucb at rho = 1: one Gaussian release per round with mu = sqrt(2 rho)
    assert compose_epsilon(DELTA, [math.sqrt(2.0)]).epsilon == pytest.approx(6.57297, abs=1e-5)


def test_two_gaussians_compose_into_one():
    a, b = 0.7, 1.1
    got = compose_epsilon(DELTA, [a, b])
    assert got.method == "gaussian-exact"
    assert got.epsilon == pytest.approx(gaussian_epsilon(DELTA, mu=math.hypot(a, b)).epsilon, rel=1e-12)
    # dp-accounting's own PLD composition of the two releases agrees (its pessimistic estimate is above)
    from dp_accounting.pld import privacy_loss_distribution as pld

    p = pld.from_gaussian_mechanism(1 / a, value_discretization_interval=1e-4).compose(
        pld.from_gaussian_mechanism(1 / b, value_discretization_interval=1e-4))
    assert got.epsilon <= p.get_epsilon_for_delta(DELTA) <= got.epsilon + 2e-3


def _laplace_delta(eps_list: list[float], e: float, grid: int = 4001) -> float:
    """Exact delta(e) of composed Laplace releases (scale 1, shifts eps_i), by the privacy loss under P:
    L_i = eps_i w.p. 1/2, -eps_i w.p. e^-eps_i / 2, eps_i - 2x with density e^-x / 2 on (0, eps_i);
    midpoint rule on a fine grid for the continuous parts, convolved as a discrete distribution."""
    vals, probs = np.zeros(1), np.ones(1)
    for s in eps_list:
        x = (np.arange(grid) + 0.5) * s / grid
        w = np.exp(-x) / 2 * (s / grid)
        v = np.concatenate([[s, -s], s - 2 * x])
        p = np.concatenate([[0.5, math.exp(-s) / 2], w])
        vals = (vals[:, None] + v[None, :]).ravel()
        probs = (probs[:, None] * p[None, :]).ravel()
    return float(np.sum(probs * np.maximum(0.0, 1 - np.exp(e - vals))))


def test_laplace_releases_exact_and_composed():
    one = compose_epsilon(DELTA, laplace_eps=[1.0])
    assert one.method == "laplace-exact" and one.epsilon == pytest.approx(1 + 2 * math.log1p(-DELTA), abs=1e-12)
    assert one.epsilon == pytest.approx(0.99998, abs=1e-6)  # adap-ucb at epsilon = 1
    # two Laplace releases: the PLD accountant's pessimistic answer is above the exact one, within 1e-3
    got = compose_epsilon(1e-3, laplace_eps=[1.0, 0.5])
    assert got.method == "pld-pessimistic"
    assert _laplace_delta([1.0, 0.5], got.epsilon, 1000) <= 1e-3 * (1 + 1e-3)
    assert _laplace_delta([1.0, 0.5], got.epsilon - 1e-3, 1000) > 1e-3
    assert got.epsilon < 1.5  # below pure composition


def test_mixed_and_pure_compositions_are_tight_and_valid():
    from dp_accounting.pld import privacy_loss_distribution as pld

    got = compose_epsilon(DELTA, [1.0], [0.5])
    opt = pld.from_gaussian_mechanism(1.0, pessimistic_estimate=False, value_discretization_interval=1e-4).compose(
        pld.from_laplace_mechanism(2.0, pessimistic_estimate=False, value_discretization_interval=1e-4))
    low = opt.get_epsilon_for_delta(DELTA)  # the optimistic estimate is below the exact value
    assert low <= got.epsilon <= low + 2e-3
    basic = gaussian_epsilon(DELTA / 2, mu=1.0).epsilon + 0.5
    assert got.epsilon < basic  # tighter than splitting delta
    # two randomised-response releases at eps = 1: exact by enumerating the four outcomes
    p = math.exp(1) / (1 + math.exp(1))
    P = np.array([p * p, p * (1 - p), (1 - p) * p, (1 - p) ** 2])
    exact = _invert(lambda e: float(np.sum(np.maximum(P - math.exp(e) * P[::-1], 0))), DELTA, 2.0)
    rr = compose_epsilon(DELTA, pure_eps=[1.0, 1.0])
    assert exact - 1e-9 <= rr.epsilon <= exact + 1e-3
    assert compose_epsilon(DELTA, pure_eps=[1.0]).method == "pure-rr-profile"
    # randomised response's Rényi divergence, written out
    a = 3.0
    assert rr_renyi(a, 1.0) == pytest.approx(math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1))
    assert rr_renyi(math.inf, 0.7) == 0.7


def test_worst_group_is_the_maximum_over_every_group():
    rng = np.random.default_rng(3)
    n_groups = 30
    # groups 0-9: Gaussians only; 10-27: Laplace and pure members; 28-29: mixed (every kind)
    g_gauss = rng.integers(0, 10, 30)
    g_pure = rng.integers(10, 28, 50)
    group = np.concatenate([g_gauss, g_pure, [28, 28, 29, 29, 29]])
    code = np.concatenate([np.full(30, GAUSSIAN), rng.choice([LAPLACE, PURE], 50), [GAUSSIAN, LAPLACE, GAUSSIAN, PURE,
                                                                                     LAPLACE]])
    ratio = np.concatenate([rng.uniform(0.05, 0.6, 30), rng.uniform(0.05, 0.8, 50), rng.uniform(0.05, 0.5, 5)])
    got = worst_group_epsilon(n_groups, group, code, ratio, DELTA)
    brute = []
    for g in range(n_groups):
        m = group == g
        if m.any():
            brute.append(compose_epsilon(DELTA, ratio[m & (code == GAUSSIAN)], ratio[m & (code == LAPLACE)],
                                         ratio[m & (code == PURE)]).epsilon)
    assert got.epsilon == pytest.approx(max(brute), abs=1e-12)
    assert got.groups == len(brute) and got.composed_exactly < len(brute)  # the Rényi bounds pruned some
    # the worst group is reported with its composition
    m = group == got.group
    assert sorted(got.laplace_eps) == sorted(ratio[m & (code == LAPLACE)].tolist())
    # Gaussians only: the largest mu, no PLD
    g2 = worst_group_epsilon(3, np.array([0, 0, 1, 2]), np.zeros(4, int), np.array([0.3, 0.4, 0.45, 0.1]), DELTA)
    assert g2.group == 0 and g2.gaussian_mu == pytest.approx(0.5) and g2.composed_exactly == 0
    # a release without noise: nothing finite
    assert worst_group_epsilon(2, np.array([0, 1]), np.array([0, 1]), np.array([0.3, np.inf]), DELTA).epsilon == math.inf
    assert worst_group_epsilon(2, np.zeros(0, int), np.zeros(0, int), np.zeros(0), DELTA).epsilon == 0.0
    with pytest.raises(DPAuditError):
        worst_group_epsilon(2, np.array([2]), np.array([0]), np.array([0.1]), DELTA)


def _fmt_pair(n: int, eps0: float) -> tuple[np.ndarray, np.ndarray]:
    """Feldman, McMillan & Talwar's pair (Thm 3.2) over outcomes (c, k), written out without truncation."""
    a = math.exp(eps0) / (math.exp(eps0) + 1)
    P, Q = [], []
    for c in range(n):
        wc = stats.binom.pmf(c, n - 1, math.exp(-eps0))
        for k in range(c + 2):
            b1 = stats.binom.pmf(k - 1, c, 0.5) if k >= 1 else 0.0
            b0 = stats.binom.pmf(k, c, 0.5) if k <= c else 0.0
            P.append(wc * (a * b1 + (1 - a) * b0))
            Q.append(wc * ((1 - a) * b1 + a * b0))
    return np.array(P), np.array(Q)


@pytest.mark.parametrize("n1,n2,eps0", [(6, 6, 1.5), (5, 3, 2.0)])
def test_shuffle_composition_against_brute_force(n1, n2, eps0):
    P1, Q1 = _fmt_pair(n1, eps0)
    P2, Q2 = _fmt_pair(n2, eps0)
    P, Q = np.outer(P1, P2).ravel(), np.outer(Q1, Q2).ravel()
    profs = (clones_profile(n1, eps0), clones_profile(n2, eps0))
    for e in (0.0, 0.3, 1.0, 2.0, 2.9):
        brute = max(np.sum(np.maximum(P - math.exp(e) * Q, 0)), np.sum(np.maximum(Q - math.exp(e) * P, 0)))
        got = clones_composed_delta(profs, e)
        assert brute <= got <= brute + 1e-11
    d = 0.05
    exact = _invert(lambda e: max(np.sum(np.maximum(P - math.exp(e) * Q, 0)),
                                  np.sum(np.maximum(Q - math.exp(e) * P, 0))), d, 2 * eps0)
    got = clones_composed_epsilon([n1, n2], eps0, d)
    assert exact - 1e-8 <= got <= exact + 1e-6
    basic = clones_epsilon(n1, eps0, d / 2) + clones_epsilon(n2, eps0, d / 2)
    assert max(clones_epsilon(n1, eps0, d), clones_epsilon(n2, eps0, d)) - 1e-9 <= got <= basic


def test_shuffle_glm_defaults_composed():
    """shuffle-glm's claim 3.62 = 2 x 1.81 (basic composition at delta/2 each); composed exactly: about 2.24."""
    got = clones_composed_epsilon([1000, 1000], 3.5, DELTA)
    assert got <= 2.3 and got == pytest.approx(2.2386, abs=1e-3)
    assert got <= 2 * clones_epsilon(1000, 3.5, DELTA / 2)
    assert clones_composed_epsilon([1000], 3.5, DELTA) == clones_epsilon(1000, 3.5, DELTA)
    with pytest.raises(DPAuditError):
        clones_composed_epsilon([10, 10, 10], 1.0, DELTA)
