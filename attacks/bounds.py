"""Shared statistics of the attacks: hypothesis-test counts -> epsilon lower bounds.

Every sampling attack ends in a hypothesis test between neighbouring inputs d (null) and d'
(alternative). If a mechanism is (eps, delta)-DP, every test satisfies (Kairouz, Oh & Viswanath
2015, Thm 2.1; the form used by DP-Sniper, Bichsel et al. 2021)::

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

so upper confidence bounds FPR_up, FNR_up give, simultaneously with them,

    eps >= max{ ln((1 - delta - FPR_up) / FNR_up), ln((1 - delta - FNR_up) / FPR_up) }.

Confidence: the two one-sided Clopper-Pearson bounds (:func:`cp_upper`, :func:`cp_lower`: the exact
beta quantiles, through scipy's inverse regularised incomplete beta) each get half the error budget, and the budget is further divided (Bonferroni) by
the number of tests evaluated on the fresh samples, so the reported bound holds with probability at
least ``confidence`` whatever was tried. Choices made here that the literature leaves open: the
union bound over the two rates (rather than a joint region), and bounds clamped below at 0
(epsilon >= 0 always holds, so the clamp is not a silent change of a statistic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpaudit.errors import DPAuditError, check_delta
from dpaudit.errors import check_confidence as _check_confidence

__all__ = [
    "cp_upper",
    "cp_lower",
    "eps_lower_from_rates",
    "eps_lower_from_counts",
    "check_confidence",
    "TestCounts",
    "best_threshold_test",
    "projected_bound",
    "oracle_threshold_bound",
    "candidate_tests",
    "split_confidence",
    "smallest_detectable",
    "largest_bound",
    "select_projected_threshold",
    "select_threshold_for_fresh",
    "candidate_thresholds",
]


def check_confidence(confidence: float) -> float:
    """Return ``confidence`` after checking it lies in (0, 1) (:func:`dpaudit.errors.check_confidence`, the
    one check: numpy scalars are numbers too)."""
    return _check_confidence(confidence)


def cp_upper(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial rate at error ``alpha`` (vectorised).

    The (1 - alpha) quantile of Beta(k + 1, n - k) (Clopper & Pearson 1934), 1 when k = n. The one
    Clopper-Pearson of dpaudit: every attack's bound goes through it and :func:`cp_lower`.
    """
    from scipy.special import betaincinv

    k, n, back = _distinct_counts(k, n)
    with np.errstate(all="ignore"):
        hi = betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - alpha)
    return back(np.where(k >= n, 1.0, hi))


def cp_lower(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound on a binomial rate at error ``alpha`` (vectorised): the alpha
    quantile of Beta(k, n - k + 1), 0 when k = 0."""
    from scipy.special import betaincinv

    k, n, back = _distinct_counts(k, n)
    with np.errstate(all="ignore"):
        lo = betaincinv(np.maximum(k, 1e-300), n - k + 1, alpha)
    return back(np.where(k <= 0, 0.0, lo))


#: below this many counts, finding the distinct ones costs more than the quantiles it saves
_DEDUP_MIN = 256


def _distinct_counts(k: np.ndarray | int, n: np.ndarray | int):
    """``(k, n)`` as floats, reduced to the distinct counts when there are many of one ``n`` (a threshold scan's
    counts repeat: every threshold between two samples has the same ones), and the map back to ``k``'s shape.
    The beta quantile is computed once per distinct count, so the result is the same value for value."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if k.ndim != 1 or n.ndim != 0 or k.size < _DEDUP_MIN:
        return k, n, lambda v: np.asarray(v, dtype=float)
    distinct, where = np.unique(k, return_inverse=True)
    return distinct, n, lambda v: np.asarray(v, dtype=float)[where]


def split_confidence(confidence: float, parts: int) -> float:
    """The confidence each of ``parts`` sampling parts of an audit runs at so that all their bounds
    hold together at ``confidence`` (Bonferroni: the error budget 1 - confidence split equally)."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise DPAuditError(f"an audit splits its confidence over at least one part, got {parts!r}.")
    return 1 - (1 - check_confidence(confidence)) / parts


def smallest_detectable(runs: int, delta: float, confidence: float) -> float:
    """The smallest eps an eps-DP pair with an ideal test event (randomised response: P = e^eps/(1+e^eps)
    against 1/(1+e^eps)) shows as a positive bound at ``runs`` fresh runs per side with the expected
    counts: how small a leak a black-box attack can see at this sample size once the pair is right."""
    lo, hi = 0.0, 10.0
    for _ in range(40):
        eps = 0.5 * (lo + hi)
        p = 1.0 / (1.0 + math.exp(eps))
        fp = int(round(runs * p))
        if float(eps_lower_from_counts(fp, runs, fp, runs, delta, confidence, 1)) > 0:
            hi = eps
        else:
            lo = eps
    return hi


def largest_bound(runs: int, delta: float, confidence: float) -> float:
    """The largest bound a threshold test can give with ``runs`` fresh runs per side (no error at all)."""
    return float(eps_lower_from_counts(0, runs, 0, runs, delta, confidence, 1))


def eps_lower_from_rates(fpr_up: np.ndarray, fnr_up: np.ndarray, delta: float) -> np.ndarray:
    """The DP test inequality solved for eps, given upper bounds on the two error rates (>= 0)."""
    fpr_up = np.asarray(fpr_up, dtype=float)
    fnr_up = np.asarray(fnr_up, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fpr_up, 0.0)) - np.log(fnr_up)
        b = np.log(np.maximum(1.0 - delta - fnr_up, 0.0)) - np.log(fpr_up)
    out = np.fmax(a, b)
    out = np.where(np.isnan(out), 0.0, out)
    return np.maximum(out, 0.0)


def eps_lower_from_counts(
    fp: np.ndarray | int,
    n0: np.ndarray | int,
    fn: np.ndarray | int,
    n1: np.ndarray | int,
    delta: float,
    confidence: float,
    n_tests: int = 1,
) -> np.ndarray:
    """Epsilon lower bound from a test's counts on fresh samples.

    ``fp`` of ``n0`` samples under d were rejected (false positives); ``fn`` of ``n1`` samples under
    d' were accepted (false negatives). Holds with probability ``confidence`` jointly over
    ``n_tests`` tests (Bonferroni).
    """
    check_delta(delta, allow_zero=True)
    check_confidence(confidence)
    if n_tests < 1:
        raise DPAuditError(f"n_tests must be at least 1, got {n_tests!r}.")
    alpha = (1.0 - confidence) / n_tests / 2.0
    return eps_lower_from_rates(cp_upper(fp, n0, alpha), cp_upper(fn, n1, alpha), delta)


@dataclass(frozen=True)
class TestCounts:
    """A threshold test ``reject iff direction * (score - threshold) > 0`` (ties broken by ``tie``)."""

    statistic: str
    threshold: float
    direction: int  # +1: reject when score > threshold; -1: reject when score < threshold
    include_ties: bool

    def reject(self, scores: np.ndarray) -> np.ndarray:
        s = self.direction * (np.asarray(scores, dtype=float) - self.threshold)
        return s >= 0 if self.include_ties else s > 0

    def reject_when(self) -> str:
        """The rejection rule in words, e.g. ``score > threshold``."""
        op = (">=" if self.include_ties else ">") if self.direction > 0 else ("<=" if self.include_ties else "<")
        return f"score {op} threshold"


def candidate_tests(s0: np.ndarray, s1: np.ndarray, max_thresholds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each candidate threshold c: counts of s0 > c, s0 >= c, s1 > c, s1 >= c.

    Thresholds are the distinct values (at most ``max_thresholds`` quantiles of the pooled scores).
    Returns (thresholds, counts0 (4 x m), counts1 (4 x m)) with rows: >c, >=c, <c, <=c.
    """
    pooled = np.concatenate([s0, s1])
    uniq = np.unique(pooled)
    if uniq.size > max_thresholds:
        uniq = np.unique(np.quantile(pooled, np.linspace(0, 1, max_thresholds)))
    s0s, s1s = np.sort(s0), np.sort(s1)

    def counts(ss: np.ndarray) -> np.ndarray:
        n = ss.size
        le = np.searchsorted(ss, uniq, side="right")  # <= c
        lt = np.searchsorted(ss, uniq, side="left")  # < c
        return np.stack([n - le, n - lt, lt, le])

    return uniq, counts(s0s), counts(s1s)


def projected_bound(fp: np.ndarray, n0: int, fn: np.ndarray, n1: int, n_fresh: int, delta: float, confidence: float,
                    n_tests: int = 1) -> np.ndarray:
    """The bound a test with these selection counts (``fp`` of ``n0``, ``fn`` of ``n1``) will give on
    ``n_fresh`` fresh samples per side: the fresh rates taken at the one-sigma (84%) Clopper-Pearson upper
    ends of the selection's (so a rare tail event, whose estimate is noisiest, is not chosen for luck),
    counted at ``n_fresh``, bounded at ``confidence`` over ``n_tests`` tests. What a test *will* certify at
    the fresh sample size: it favours more extreme thresholds than scoring at the selection size does (the
    idea of :func:`oracle_threshold_bound`)."""
    fpr = cp_upper(fp, n0, 0.16)
    fnr = cp_upper(fn, n1, 0.16)
    a = (1 - confidence) / n_tests / 2
    return eps_lower_from_rates(cp_upper(np.round(fpr * n_fresh), n_fresh, a),
                                cp_upper(np.round(fnr * n_fresh), n_fresh, a), delta)


def best_threshold_test(
    scores0: dict[str, np.ndarray],
    scores1: dict[str, np.ndarray],
    delta: float,
    confidence: float,
    *,
    max_thresholds: int = 512,
    n_final: int = 1,
) -> list[tuple[float, TestCounts]]:
    """Choose the best tests on a *selection* split: every statistic, threshold and direction.

    The selection score of a test is the bound it would give were these its fresh counts (with the
    final Bonferroni factor ``n_final``), which favours tests that are strong *and* well estimated.
    (Scoring instead by the bound at the fresh sample size, :func:`projected_bound`, changed the membership
    bounds of the default audits by under 1%: the action statistics are discrete, and the best pair's
    threshold is the same.) Returns the ``n_final`` best as (selection bound, test); they must be
    evaluated on fresh samples.
    """
    cands: list[tuple[float, TestCounts]] = []
    for name in scores0:
        s0 = np.asarray(scores0[name], dtype=float)
        s1 = np.asarray(scores1[name], dtype=float)
        thr, c0, c1 = candidate_tests(s0, s1, max_thresholds)
        n0, n1 = s0.size, s1.size
        # rows: reject if >c, >=c, <c, <=c   (fp = rejected under d, fn = accepted under d')
        for row, (direction, ties) in enumerate(((1, False), (1, True), (-1, False), (-1, True))):
            fp = c0[row]
            fn = n1 - c1[row]
            b = eps_lower_from_counts(fp, n0, fn, n1, delta, confidence, n_final)
            i = int(np.argmax(b))
            cands.append((float(b[i]), TestCounts(name, float(thr[i]), direction, ties)))
    cands.sort(key=lambda x: -x[0])
    return cands[:n_final]


def oracle_threshold_bound(
    fpr: np.ndarray, fnr: np.ndarray, n: int, delta: float, confidence: float
) -> float:
    """The best bound any threshold test can reach with ``n`` samples per side.

    Given the exact error rates of every threshold test (``fpr``, ``fnr`` arrays over thresholds),
    plug the expected counts ``n * rate`` into the Clopper-Pearson bound and take the best
    threshold: what an attack that knew the optimal threshold in advance would report on average.
    """
    fp = np.round(np.asarray(fpr) * n)
    fn = np.round(np.asarray(fnr) * n)
    return float(np.max(eps_lower_from_counts(fp, n, fn, n, delta, confidence, 1)))


def log_ratio_bound(k1: int, n1: int, k0: int, n0: int, confidence: float) -> float:
    """ln(P1_low / P0_up) for one event: the pure-DP (delta = 0) event bound."""
    a = (1 - confidence) / 2
    lo = float(cp_lower(k1, n1, a))
    hi = float(cp_upper(k0, n0, a))
    if lo <= 0 or hi <= 0:
        return 0.0 if lo <= 0 else math.inf
    return max(0.0, math.log(lo / hi))


# ---- threshold tests chosen for the bound they will give on the fresh samples ------------------------------



def candidate_thresholds(pooled: np.ndarray, n_grid: int, n_tail: int) -> np.ndarray:
    """Sorted pooled scores -> candidate thresholds: ``n_grid`` even quantiles, plus ``n_tail`` order
    statistics per tail at depths log-spaced from 1 sample to 5% of the pool."""
    depth = np.unique(np.geomspace(1, max(1.0, 0.05 * pooled.size), n_tail).astype(np.int64))
    return np.unique(np.concatenate([np.quantile(pooled, np.linspace(0, 1, n_grid + 1)), pooled[depth - 1],
                                     pooled[pooled.size - depth]]))


def select_projected_threshold(s0: np.ndarray, s1: np.ndarray, n_fresh: int, delta: float, confidence: float,
                               n_tests: int, n_grid: int = 1024, n_tail: int = 500) -> tuple[float, TestCounts | None]:
    """Choose the threshold test (threshold, direction) on the selection split.

    Each candidate is scored by the bound it would give on ``n_fresh`` fresh samples per side if the
    fresh error rates equalled one-sigma (84%) Clopper-Pearson upper bounds of the selection's (so a
    rare tail event, whose estimate is noisiest, is not chosen for luck): what a test *will* certify
    at the fresh sample size, which favours more extreme thresholds than scoring at the selection
    size (the idea of :func:`oracle_threshold_bound`). Candidates: a quantile
    grid of the pooled scores plus ``n_tail`` order statistics log-spaced into each tail, from the
    most extreme sample to the 5% quantile (the tails hold the best events when delta is small, at
    any depth the sample sizes allow). The choice never touches the fresh samples, so the final bound
    keeps its confidence whatever is chosen here.
    """
    thr = candidate_thresholds(np.sort(np.concatenate([s0, s1])), n_grid, n_tail)
    a0, a1 = np.sort(s0), np.sort(s1)
    n0, n1 = a0.size, a1.size
    best = (-1.0, None)
    for direction in (1, -1):
        if direction > 0:  # reject if score > c
            rej0 = n0 - np.searchsorted(a0, thr, side="right")
            rej1 = n1 - np.searchsorted(a1, thr, side="right")
        else:  # reject if score < c
            rej0 = np.searchsorted(a0, thr, side="left")
            rej1 = np.searchsorted(a1, thr, side="left")
        b = projected_bound(rej0, n0, n1 - rej1, n1, n_fresh, delta, confidence, n_tests)
        i = int(np.argmax(b))
        if b[i] > best[0]:
            best = (float(b[i]), TestCounts("message", float(thr[i]), direction, False))
    return best


def select_threshold_for_fresh(S0: np.ndarray, S1: np.ndarray, delta: float, confidence: float,
                               n_test: int) -> tuple[float, TestCounts | None]:
    """The threshold test chosen on the selection split for ``n_test`` fresh views per side.

    Each candidate threshold's rates on the selection split are taken conservatively (the one-sided 95%
    Clopper-Pearson ends: false positives up, true positives down), scaled to ``n_test`` views, and the test
    whose projected bound is largest wins: a far-tail threshold that looked good on a few selection views is
    not preferred to a central one that will hold up on fresh views. When no projection is positive, the
    threshold with the largest standardised gap between the sides' rejection rates is taken.
    Returns (projected bound, test)."""
    thr, c0, c1 = candidate_tests(S0, S1, 512)
    n0, n1 = S0.size, S1.size
    best, best_z = (-1.0, None), (-np.inf, None)
    for row, (direction, ties) in enumerate(((1, False), (1, True), (-1, False), (-1, True))):
        fp, tp = c0[row], c1[row]
        fpr_hi = cp_upper(fp, n0, 0.05)
        tpr_lo = cp_lower(tp, n1, 0.05)
        proj = eps_lower_from_counts(np.ceil(fpr_hi * n_test).astype(np.int64), n_test,
                                     np.ceil((1 - tpr_lo) * n_test).astype(np.int64), n_test, delta, confidence)
        i = int(np.argmax(proj))
        if proj[i] > best[0]:
            best = (float(proj[i]), TestCounts("lda", float(thr[i]), direction, ties))
        p0, p1 = fp / n0, tp / n1
        z = (p1 - p0) / np.sqrt(p0 * (1 - p0) / n0 + p1 * (1 - p1) / n1 + 1e-12)
        j = int(np.argmax(z))
        if z[j] > best_z[0]:
            best_z = (float(z[j]), TestCounts("lda", float(thr[j]), direction, ties))
    if best[0] > 0:
        return best
    return 0.0, best_z[1]
