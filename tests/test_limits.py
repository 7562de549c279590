"""Statistical limits (attacks.limits): exact profiles, the order statistic's rank, and the best bounds a test
can show at a sample size, against analytic answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accountants import gaussian_epsilon
from dpaudit.accountants.gaussian import gaussian_delta, laplace_delta, laplace_epsilon
from dpaudit.attacks.bounds import cp_lower, cp_upper, eps_lower_from_counts, oracle_threshold_bound
from dpaudit.attacks.limits import (binomial_median, discrete_profile, gaussian_profile, gaussian_tradeoff,
                                    laplace_profile, laplace_tradeoff, likelihood_limit, loss_tradeoff,
                                    order_statistic_rank, profile_epsilon, randomized_response_profile,
                                    threshold_limit)
from dpaudit.errors import DPAuditError


def test_profiles_are_the_analytic_ones():
    eps = np.array([0.0, 0.3, 1.0, 4.0, 6.5])
    g = gaussian_profile(math.sqrt(2))
    assert np.allclose(g(eps), [gaussian_delta(e, sigma=1 / math.sqrt(2)) for e in eps], rtol=1e-10, atol=0)
    lap = laplace_profile(0.8)
    assert np.allclose(lap(eps), [laplace_delta(e, 0.8) for e in eps], rtol=1e-12, atol=0)
    p = math.e / (1 + math.e)
    rr = randomized_response_profile(1.0)
    assert rr(np.array(0.4)) == pytest.approx(p * (1 - math.exp(0.4 - 1.0)), rel=1e-12)
    assert rr(np.array(1.0)) == 0.0
    # a finite loss: the Laplace profile is not finite, but RR written out is
    assert np.allclose(discrete_profile([1.0, -1.0], [p, 1 - p])(eps), rr(eps))
    assert profile_epsilon(g, 1e-5) == pytest.approx(gaussian_epsilon(1e-5, sigma=1 / math.sqrt(2)).epsilon, rel=1e-9)
    assert profile_epsilon(lap, 1e-5) == pytest.approx(laplace_epsilon(1e-5, 0.8).epsilon, rel=1e-9)
    with pytest.raises(DPAuditError, match="probs"):
        discrete_profile([1.0, -1.0], [0.5, 0.6])


@pytest.mark.parametrize("n,delta,alpha", [(50000, 1e-5, 0.02), (50000, 1e-5, 0.025), (2000, 0.01, 0.16),
                                           (10, 0.3, 0.05), (1000, 0.0, 0.05)])
def test_the_rank_is_the_first_count_whose_clopper_pearson_bound_exceeds_delta(n, delta, alpha):
    k = order_statistic_rank(n, delta, alpha)
    assert k is not None
    assert float(cp_lower(k, n, alpha)) > delta
    assert k == 1 or float(cp_lower(k - 1, n, alpha)) <= delta


def test_too_few_runs_show_nothing():
    assert order_statistic_rank(10, 1e-5, 0.05) == 1  # one draw above the quantile is already improbable
    assert order_statistic_rank(3, 0.9, 0.05) is None  # three of three above the 0.9 quantile is not
    assert likelihood_limit(gaussian_profile(1.0), 3, 0.9, 0.95) == 0.0


def test_the_binomial_median():
    from scipy.stats import binom

    p = np.concatenate([[0.0, 1e-9, 1e-5, 0.5, 1.0], np.random.default_rng(0).random(100)])
    for n in (1, 7, 100, 50000):
        assert np.array_equal(binomial_median(n, p), binom.ppf(0.5, n, p))


def test_the_likelihood_limit_is_the_clopper_pearson_bound_of_the_median_count():
    """The brief's definition, checked on a fine scan: the largest eps at which the Clopper-Pearson lower
    bound of the median count n delta(eps) exceeds delta (AdaC-UCB at rho = 1: mu = sqrt 2, 50,000 runs)."""
    prof = gaussian_profile(math.sqrt(2))
    n, delta, conf = 50000, 1e-5, 0.975
    lim = likelihood_limit(prof, n, delta, conf)
    scan = np.linspace(5.0, 7.0, 20001)
    ok = cp_lower(binomial_median(n, prof(scan)), n, 1 - conf) > delta
    assert lim == pytest.approx(scan[ok].max(), abs=2e-4)
    assert 5.95 < lim < 6.05 < profile_epsilon(prof, delta)  # "about 6.0" at 50,000 runs; exact 6.573


def test_the_limit_grows_to_the_exact_eps_with_the_runs():
    prof = gaussian_profile(1.0)
    exact = profile_epsilon(prof, 1e-3)
    lims = [likelihood_limit(prof, n, 1e-3, 0.95) for n in (10**3, 10**4, 10**5, 10**7)]
    assert all(a < b for a, b in zip(lims, lims[1:])) and lims[-1] < exact
    assert exact - lims[-1] < 0.02


def test_pure_dp_limits_reach_almost_eps0():
    """Laplace (eps0 = 1): delta(eps) = 1 - e^((eps - 1)/2), so the median of the bound is where the count's
    median reaches the rank k: delta(eps) = p_k with P(Binomial(n, p_k) < k) = 1/2, eps = 1 + 2 log(1 - p_k)
    (about 0.99989 at 50,000 runs). Randomized response: delta(eps) = p (1 - e^(eps - eps0)), p = e/(1 + e)."""
    from scipy.optimize import brentq
    from scipy.special import bdtr

    def p_k(n: int, alpha: float) -> float:
        k = order_statistic_rank(n, 1e-5, alpha)
        return brentq(lambda x: bdtr(k - 1, n, x) - 0.5, 1e-12, 1e-2, xtol=1e-16)

    lim = likelihood_limit(laplace_profile(1.0), 50000, 1e-5, 0.975)
    assert lim == pytest.approx(1 + 2 * math.log(1 - p_k(50000, 0.025)), abs=1e-9)
    assert 0.9998 < lim < laplace_epsilon(1e-5, 1.0).epsilon
    rr = likelihood_limit(randomized_response_profile(1.0), 10000, 1e-5, 0.975)
    p = math.e / (1 + math.e)
    assert rr == pytest.approx(1 + math.log(1 - p_k(10000, 0.025) / p), abs=1e-9)


def test_threshold_limits_against_closed_forms():
    # randomized response at eps0 = 1 (ldp-ucb-rr's channel): the one test "reject d when the bit is 1" has
    # FPR = FNR = q = 1/(1 + e); the bound of its median counts at 1,000,000 per side
    q = 1 / (1 + math.e)
    fpr, fnr = loss_tradeoff([1.0, -1.0], [1 - q, q])
    assert np.allclose(sorted(zip(fpr, fnr)), sorted([(0, 1), (q, q), (1, 0)]))
    n, conf = 10**6, 1 - 0.05 / 3
    k = binomial_median(n, np.array(q))
    up = float(cp_upper(k, n, (1 - conf) / 2))
    assert threshold_limit(fpr, fnr, n, 1e-5, conf) == pytest.approx(math.log((1 - 1e-5 - up) / up), rel=1e-12)
    # a Gaussian release: the median counts are the rounded expected ones, so the oracle bound agrees
    fpr, fnr = gaussian_tradeoff(math.sqrt(2))
    lim = threshold_limit(fpr, fnr, 50000, 1e-5, 0.975)
    assert lim == pytest.approx(oracle_threshold_bound(fpr, fnr, 50000, 1e-5, 0.975), abs=0.02)
    # the threshold test is weaker than the likelihood test on the same loss (it needs both sides' tails)
    assert lim < likelihood_limit(gaussian_profile(math.sqrt(2)), 50000, 1e-5, 0.975)
    # Laplace: the best threshold sits at the shift; no threshold test beats eps0
    fpr, fnr = laplace_tradeoff(1.0)
    assert 0.9 < threshold_limit(fpr, fnr, 10**6, 1e-5, 0.975) < 1.0
    assert float(np.max(eps_lower_from_counts(np.round(fpr * 1e8), 10**8, np.round(fnr * 1e8), 10**8, 1e-5, 0.975))) < 1.0
