"""Statistical limits: the best lower bound an attack can show at a sample size, when the leak is known exactly.

A lower bound from n samples cannot reach the true epsilon: the far tail it needs is seen a handful of
times at most. These functions say how close each of dpaudit's tests can come, given the exact privacy
loss of a mechanism (analytic profiles of the Gaussian, Laplace and randomized-response mechanisms, or
any finite loss distribution), so that a measured bound can be read beside what its sample size allows
(benchmarks/validation/limits.py; a tightness table).

* The gray-box test (:func:`dpaudit.attacks.likelihood.loss_bounds`) reports the k-th largest of
  W_i = L_i - E_i (E_i ~ Exp(1) independent of the loss L_i), k the smallest rank whose
  Clopper-Pearson lower bound on delta exceeds the target (:func:`order_statistic_rank`). W's survival
  function is the privacy profile: P(W > eps) = E[(1 - e^(eps - L))_+] = delta(eps) (Balle & Wang 2018's
  hockey-stick form), so the bound's law is known exactly: P(bound > eps) = P(Binomial(n, delta(eps)) >= k)
  (:func:`likelihood_limit`). Its median is the largest eps at which the Clopper-Pearson lower bound of
  the median count n delta(eps) exceeds the target delta: what the likelihood-style test can show at n.
* A threshold (black-box counting) test on the exact loss, the Neyman-Pearson optimal statistic, at n
  views per side: the best bound over thresholds from the median false positive and false negative
  counts (:func:`threshold_limit`, the trade-off curves :func:`gaussian_tradeoff`,
  :func:`laplace_tradeoff`, :func:`loss_tradeoff`).

Both are for one test at the given confidence (no Bonferroni): the limit of the statistics, not of a
search that also has to find the pair.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from dpaudit.errors import DPAuditError, check_delta

from .bounds import check_confidence, eps_lower_from_counts

__all__ = [
    "Profile",
    "order_statistic_rank",
    "gaussian_profile",
    "laplace_profile",
    "randomized_response_profile",
    "discrete_profile",
    "profile_epsilon",
    "likelihood_limit",
    "gaussian_tradeoff",
    "laplace_tradeoff",
    "loss_tradeoff",
    "threshold_limit",
    "binomial_median",
    "sufficient_size",
]

#: a privacy profile: eps (array) -> delta(eps) (array), non-increasing
Profile = Callable[[np.ndarray], np.ndarray]


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DPAuditError(f"the sample size must be an integer >= 1, got {n!r}.")
    return int(n)


def order_statistic_rank(n: int, delta: float, alpha: float) -> int | None:
    """The smallest k with P(Binomial(n, delta) >= k) < alpha: the rank (from the top) of the order statistic
    that is a lower confidence bound, at error ``alpha``, on the upper delta-quantile of n i.i.d. draws
    (equivalently, the smallest count whose one-sided Clopper-Pearson lower bound at ``alpha`` exceeds
    ``delta``). None when even k = n does not reach it (too few samples)."""
    from scipy.special import bdtrc

    n = _check_n(n)
    if not 0 < alpha < 1:
        raise DPAuditError(f"the error alpha must lie strictly between 0 and 1, got {alpha!r}.")
    if delta <= 0:
        return 1
    # P(Bin >= k) = bdtrc(k - 1), non-increasing in k: bisection on 1..n (scipy.special, not scipy.stats,
    # whose import costs a second)
    if bdtrc(n - 1, n, delta) >= alpha:
        return None
    lo, hi = 1, n  # P(Bin >= hi) < alpha
    while lo < hi:
        mid = (lo + hi) // 2
        if bdtrc(mid - 1, n, delta) < alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo


# ---- exact privacy profiles ------------------------------------------------------------------------------

def gaussian_profile(mu: float) -> Profile:
    """delta(eps) of one Gaussian release with mu = sensitivity / sigma (Balle & Wang 2018, Thm 8):
    Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu); the privacy loss is N(mu^2/2, mu^2). Vectorised."""
    from scipy.special import log_ndtr

    if not (isinstance(mu, (int, float)) and mu > 0 and math.isfinite(mu)):
        raise DPAuditError(f"mu must be a positive finite number, got {mu!r}.")
    m = float(mu)

    def profile(eps: np.ndarray) -> np.ndarray:
        e = np.asarray(eps, dtype=float)
        la = log_ndtr(m / 2 - e / m)
        lb = e + log_ndtr(-m / 2 - e / m)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.exp(la) * -np.expm1(np.minimum(lb - la, 0.0))
        return np.where(np.isfinite(out), out, 0.0)

    return profile


def laplace_profile(eps0: float) -> Profile:
    """delta(eps) of one Laplace release with eps0 = sensitivity / scale: 1 - e^((eps - eps0)/2) below eps0,
    0 from eps0 on (the loss is eps0 with probability 1/2). Vectorised."""
    if not (isinstance(eps0, (int, float)) and eps0 > 0 and math.isfinite(eps0)):
        raise DPAuditError(f"eps0 must be a positive finite number, got {eps0!r}.")
    e0 = float(eps0)
    return lambda eps: np.where(np.asarray(eps, dtype=float) < e0,
                                -np.expm1((np.minimum(np.asarray(eps, dtype=float), e0) - e0) / 2), 0.0)


def discrete_profile(losses: Sequence[float], probs: Sequence[float]) -> Profile:
    """delta(eps) = sum_i p_i (1 - e^(eps - l_i))_+ of a privacy loss that takes values ``losses`` with
    probabilities ``probs`` (under the first input of the pair). Vectorised."""
    ls = np.asarray(losses, dtype=float)
    ps = np.asarray(probs, dtype=float)
    if ls.shape != ps.shape or ls.ndim != 1 or not ls.size:
        raise DPAuditError("losses and probs must be two non-empty 1-d sequences of one length.")
    if np.any(ps < 0) or not math.isclose(float(ps.sum()), 1.0, rel_tol=0, abs_tol=1e-9) or not np.all(np.isfinite(ls)):
        raise DPAuditError(f"probs must be non-negative and sum to 1 and losses finite; got probs summing to {ps.sum()!r}.")

    def profile(eps: np.ndarray) -> np.ndarray:
        e = np.asarray(eps, dtype=float)[..., None]
        return np.sum(ps * np.maximum(-np.expm1(np.minimum(e - ls, 0.0)), 0.0), axis=-1)

    return profile


def randomized_response_profile(eps0: float) -> Profile:
    """delta(eps) of binary randomized response at eps0 (truthful with probability p = e^eps0/(1 + e^eps0)):
    the loss is eps0 with probability p and -eps0 otherwise, so delta(eps) = p (1 - e^(eps - eps0)) below eps0."""
    if not (isinstance(eps0, (int, float)) and eps0 > 0 and math.isfinite(eps0)):
        raise DPAuditError(f"eps0 must be a positive finite number, got {eps0!r}.")
    p = 1.0 / (1.0 + math.exp(-float(eps0)))
    return discrete_profile([float(eps0), -float(eps0)], [p, 1.0 - p])


def _top(profile: Profile, level: float) -> float:
    """An eps where ``profile`` is at most ``level`` (doubling from 1)."""
    hi = 1.0
    while float(profile(np.array(hi))) > level:
        hi *= 2
        if hi > 1e6:
            raise DPAuditError("the profile does not fall to the target delta (is it a privacy profile?).")
    return hi


def profile_epsilon(profile: Profile, delta: float) -> float:
    """The exact eps(delta) of a profile: the smallest eps >= 0 with delta(eps) <= delta (bisection)."""
    delta = check_delta(delta)
    if float(profile(np.array(0.0))) <= delta:
        return 0.0
    lo, hi = 0.0, _top(profile, delta)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(profile(np.array(mid))) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return hi


# ---- the gray-box (likelihood) test ----------------------------------------------------------------------

def likelihood_limit(profile: Profile, n: int, delta: float, confidence: float, quantile: float = 0.5) -> float:
    """The ``quantile`` of the likelihood test's eps lower bound from ``n`` runs with exact losses of the
    given ``profile``, one test at ``confidence``.

    The test reports the k-th largest W (module docstring; k = :func:`order_statistic_rank`), so
    P(bound <= eps) = P(Binomial(n, delta(eps)) < k) exactly. At ``quantile`` 0.5 this is the largest eps
    at which the Clopper-Pearson lower bound (error 1 - confidence) of the median count n delta(eps)
    exceeds ``delta``: the statistical limit of the test at this sample size. 0 when n runs cannot show
    any eps (k > n) or when the quantile of the bound is 0.
    """
    from scipy.special import bdtr

    n = _check_n(n)
    delta = check_delta(delta, allow_zero=True)
    confidence = check_confidence(confidence)
    if not 0 < quantile < 1:
        raise DPAuditError(f"quantile must lie strictly between 0 and 1, got {quantile!r}.")
    k = order_statistic_rank(n, delta, 1 - confidence)
    if k is None:
        return 0.0

    def below(e: float) -> bool:  # P(bound <= e) >= quantile
        return float(bdtr(k - 1, n, float(profile(np.array(e))))) >= quantile

    if below(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while not below(hi):
        hi *= 2
        if hi > 1e6:
            raise DPAuditError("the profile does not fall to 0 (is it a privacy profile?).")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if below(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return lo


def sufficient_size(limit: Callable[[int], float], n: int, gain: float = 0.05, minimum: int = 1000) -> tuple[int, float]:
    """A gray-box test's sample size chosen on the exact law of its bound (no data, so no validity is spent):
    the smallest of ``n`` / 4, ``n`` / 2 and ``n`` (none below ``minimum``) whose median bound ``limit(size)``
    (e.g. :func:`likelihood_limit` of the pair's exact profile) is at least (1 - ``gain``) times that of
    all ``n``, so the smaller sample costs the reader at most that share of what the whole sample would show
    in expectation (a fixed-size form of the futile stop of :class:`dpaudit.attacks.sampling.Stop`: an order
    statistic needs its whole sample, so it has no looks). Returns (the size, the median bound at ``n``)."""
    n = _check_n(n)
    full = float(limit(n))
    for m in (n // 4, n // 2):
        if m >= minimum and float(limit(m)) >= (1 - gain) * full:
            return m, full
    return n, full


# ---- threshold (black-box counting) tests ----------------------------------------------------------------

def gaussian_tradeoff(mu: float, points: int = 20001) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, FNR) of the threshold tests "reject d when the release > c" between N(0, 1) and N(mu, 1), over
    ``points`` thresholds c from -12 to mu + 12: the Neyman-Pearson tests of one Gaussian release."""
    from scipy.special import ndtr

    c = np.linspace(-12.0, float(mu) + 12.0, int(points))
    return ndtr(-c), ndtr(c - float(mu))


def laplace_tradeoff(eps0: float, points: int = 20001) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, FNR) of "reject d when the release > c" between Lap(0, 1) and Lap(eps0, 1) (scale 1, shift eps0),
    over ``points`` thresholds from -40 to eps0 + 40."""
    c = np.linspace(-40.0, float(eps0) + 40.0, int(points))

    def sf(x: np.ndarray) -> np.ndarray:  # P(Lap(0, 1) > x)
        return np.where(x >= 0, 0.5 * np.exp(-np.abs(x)), 1 - 0.5 * np.exp(-np.abs(x)))

    return sf(c), 1 - sf(c - float(eps0))


def loss_tradeoff(losses: Sequence[float], probs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, FNR) of the deterministic Neyman-Pearson tests of a finite privacy loss: "reject d when
    L < c" for every cut c between the loss values. The loss takes ``losses`` with ``probs`` under d, and
    with probs e^(-l) p under d' (L = log dP/dP'); binary randomized response at eps0 is
    ``loss_tradeoff([eps0, -eps0], [p, 1 - p])``."""
    ls = np.asarray(losses, dtype=float)
    ps = np.asarray(probs, dtype=float)
    order = np.argsort(ls)
    ls, ps = ls[order], ps[order]
    qs = ps * np.exp(-ls)
    if not math.isclose(float(qs.sum()), 1.0, rel_tol=0, abs_tol=1e-9):
        raise DPAuditError(f"e^(-L) must average to 1 under d for a privacy loss; got {qs.sum()!r}.")
    # cut after the i-th smallest value (i = 0..m): reject d on the i smallest loss values
    fpr = np.concatenate([[0.0], np.cumsum(ps)])
    fnr = 1.0 - np.concatenate([[0.0], np.cumsum(qs)])
    return np.clip(fpr, 0, 1), np.clip(fnr, 0, 1)


def binomial_median(n: int, p: np.ndarray) -> np.ndarray:
    """The median of Binomial(n, p), vectorised: floor(np) or ceil(np) (Kaas & Buhrman 1980), the smallest m
    with P(Bin <= m) >= 1/2."""
    from scipy.special import bdtr

    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    m = np.floor(n * p)
    with np.errstate(invalid="ignore"):
        below = bdtr(np.minimum(m, n), n, p) < 0.5 - 1e-12  # (rounding at an exact 1/2)
    return np.minimum(np.where(below, m + 1, m), n)


def threshold_limit(fpr: np.ndarray, fnr: np.ndarray, n: int, delta: float, confidence: float) -> float:
    """The best eps lower bound a threshold test can show with ``n`` fresh views per side, given the exact
    error rates of every threshold (``fpr``, ``fnr`` arrays over thresholds): the bound of the median false
    positive and false negative counts (Binomial(n, rate)), maximised over thresholds, one test at
    ``confidence`` (:func:`dpaudit.attacks.bounds.eps_lower_from_counts`)."""
    n = _check_n(n)
    fp = binomial_median(n, np.asarray(fpr, dtype=float))
    fn = binomial_median(n, np.asarray(fnr, dtype=float))
    return float(np.max(eps_lower_from_counts(fp, n, fn, n, delta, confidence, 1)))
