"""Shared statistics of the attacks: hypothesis-test counts -> epsilon lower bounds.

Every sampling attack ends in a hypothesis test between neighbouring inputs d (null) and d'
(alternative). If a mechanism is (eps, delta)-DP, every test satisfies (Kairouz, Oh & Viswanath
2015, Thm 2.1; the form used by DP-Sniper, Bichsel et al. 2021)::

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

so upper confidence bounds FPR_up, FNR_up give, simultaneously with them,

    eps >= max{ ln((1 - delta - FPR_up) / FNR_up), ln((1 - delta - FNR_up) / FPR_up) }.

Confidence: the two one-sided Clopper-Pearson bounds (statsmodels ``proportion_confint``,
``method="beta"``) each get half the error budget, and the budget is further divided (Bonferroni) by
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

__all__ = [
    "cp_upper",
    "cp_lower",
    "eps_lower_from_rates",
    "eps_lower_from_counts",
    "check_confidence",
    "TestCounts",
    "best_threshold_test",
    "oracle_threshold_bound",
]


def _proportion_confint():
    """statsmodels' ``proportion_confint``, imported on first use: statsmodels (and the pandas it loads)
    costs about a second, which ``import dpaudit.attacks`` should not pay."""
    from statsmodels.stats.proportion import proportion_confint

    return proportion_confint


def check_confidence(confidence: float) -> float:
    """Return ``confidence`` after checking it lies in (0, 1)."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise DPAuditError(f"confidence must lie strictly between 0 and 1, got {confidence!r}.")
    return float(confidence)


def cp_upper(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial rate at error ``alpha`` (vectorised)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    _, hi = _proportion_confint()(k, n, alpha=2 * alpha, method="beta")
    hi = np.where(k >= n, 1.0, hi)
    return np.asarray(hi, dtype=float)


def cp_lower(k: np.ndarray | int, n: np.ndarray | int, alpha: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound on a binomial rate at error ``alpha`` (vectorised)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    lo, _ = _proportion_confint()(k, n, alpha=2 * alpha, method="beta")
    lo = np.where(k <= 0, 0.0, lo)
    return np.asarray(lo, dtype=float)


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


def _candidate_tests(s0: np.ndarray, s1: np.ndarray, max_thresholds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    Returns the ``n_final`` best as (selection bound, test); they must be evaluated on fresh samples.
    """
    cands: list[tuple[float, TestCounts]] = []
    for name in scores0:
        s0 = np.asarray(scores0[name], dtype=float)
        s1 = np.asarray(scores1[name], dtype=float)
        thr, c0, c1 = _candidate_tests(s0, s1, max_thresholds)
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
