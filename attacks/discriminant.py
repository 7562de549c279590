"""Discriminant attacks: a linear direction fitted on a training split turns high-dimensional views into a score.

* :func:`lda_direction` -- Fisher's linear discriminant (pooled covariance with a tiny ridge): on
  features with a noise-free direction (a tree whose noise is missing or reused) it finds it;
* :func:`screened_lda_direction` -- Fisher's discriminant on the k features with the largest two-sample
  t statistics, zero elsewhere: with many cells and a weak canary (a shuffled batch), fitting every
  cell would drown the few informative ones in noise;
* :func:`lda_attack` and :func:`screened_lda_attack` -- the attacks: fit on one split, choose the
  (candidate pair, threshold, direction) on a second, count only the chosen test on fresh views
  (Clopper-Pearson, :mod:`dpaudit.attacks.bounds`), so the bound needs no correction for the choice.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .bounds import best_threshold_test, eps_lower_from_counts, select_threshold_for_fresh

__all__ = ["lda_direction", "screened_lda_direction", "lda_attack", "screened_lda_attack", "describe"]


def describe(cand: Any) -> Any:
    """A candidate pair as the findings show it (its ``describe()``, else itself)."""
    return cand.describe() if hasattr(cand, "describe") else cand


def lda_direction(F0: np.ndarray, F1: np.ndarray) -> np.ndarray:
    """Fisher's discriminant direction (pooled covariance + ridge 1e-9 of the mean variance)."""
    mu0, mu1 = F0.mean(axis=0), F1.mean(axis=0)
    Z = np.vstack([F0 - mu0, F1 - mu1])
    C = Z.T @ Z / max(1, Z.shape[0] - 1)
    ridge = 1e-9 * (np.trace(C) / C.shape[0] + 1e-12)
    return np.linalg.solve(C + ridge * np.eye(C.shape[0]), mu1 - mu0)




def screened_lda_direction(F0: np.ndarray, F1: np.ndarray, k: int) -> np.ndarray:
    """Fisher's discriminant on the ``k`` features with the largest two-sample t statistics (zero weight elsewhere):
    with many cells and a weak canary, fitting every cell would drown the few informative ones in noise."""
    m0, m1 = F0.mean(axis=0), F1.mean(axis=0)
    se = np.sqrt(F0.var(axis=0) / F0.shape[0] + F1.var(axis=0) / F1.shape[0]) + 1e-12
    top = np.argsort(-np.abs(m1 - m0) / se)[:k]
    w = np.zeros(F0.shape[1])
    w[top] = lda_direction(F0[:, top], F1[:, top])
    return w




def lda_attack(sample: Callable[[int, int, np.random.SeedSequence], np.ndarray], candidates: list[Any],
               seed: np.random.SeedSequence, *, delta: float, confidence: float, n_train: int, n_select: int,
               n_test: int, name: str) -> dict[str, Any]:
    """Black-box threshold attack with a linear discriminant, over candidate neighbouring pairs.

    ``sample(candidate, side, n, seed)`` returns features (n, p) of n fresh views of side 0 (d) or 1
    (d'). The discriminant is fitted on ``n_train`` views per side, the best (candidate, threshold,
    direction) chosen on ``n_select`` more, and only that test is counted on ``n_test`` fresh views
    per side, so the Clopper-Pearson bound needs no correction for the choice.
    """
    t0 = time.perf_counter()
    best = None
    for i, (cand, ss) in enumerate(zip(candidates, seed.spawn(len(candidates)))):
        s = ss.spawn(4)
        w = lda_direction(sample(cand, 0, n_train, s[0]), sample(cand, 1, n_train, s[1]))
        S0, S1 = sample(cand, 0, n_select, s[2]) @ w, sample(cand, 1, n_select, s[3]) @ w
        bound, test = best_threshold_test({"lda": S0}, {"lda": S1}, delta, confidence)[0]
        if best is None or bound > best[0]:
            best = (bound, test, w, cand)
    bound, test, w, cand = best
    f0, f1 = seed.spawn(len(candidates) + 2)[-2:]
    fp = int(np.count_nonzero(test.reject(sample(cand, 0, n_test, f0) @ w)))
    tp = int(np.count_nonzero(test.reject(sample(cand, 1, n_test, f1) @ w)))
    eps = float(eps_lower_from_counts(fp, n_test, n_test - tp, n_test, delta, confidence))
    return {"attack": name, "epsilon_lower": eps, "delta": delta, "confidence": confidence,
            "witness": {"label": getattr(cand, "label", ""), "pair": describe(cand), "statistic": "linear discriminant",
                        "threshold": test.threshold, "reject_when": test.reject_when()},
            "samples": len(candidates) * 2 * (n_train + n_select) + 2 * n_test,
            "seconds": time.perf_counter() - t0,
            "details": {"false_positives": fp, "false_negatives": n_test - tp, "n_fresh_per_side": n_test,
                        "fpr": fp / n_test, "fnr": (n_test - tp) / n_test, "selection_bound": bound,
                        "tests_corrected_for": 1}}




def screened_lda_attack(sample: Callable[[Any, int, int, np.random.SeedSequence], dict[str, np.ndarray]],
                        pairs: list[Any], seed: np.random.SeedSequence, *, delta: float, confidence: float,
                   n_fit: int, n_test: int, screen: int = 8) -> dict[str, Any]:
    """For every (pair, feature family) a screened discriminant fitted on ``n_fit`` views per side, its best
    threshold chosen on ``n_fit`` more for the fresh sample size, and only the best candidate counted on
    ``n_test`` fresh views per side (so the Clopper-Pearson bound needs no correction for the choice).
    ``sample(pair, side, n, seed)`` returns a dict of feature families, each (n, p). Used on the shuffled
    view (the binned multiset of a batch's messages), where many cells carry nothing."""
    t0 = time.perf_counter()
    best = None
    for pair, ss in zip(pairs, seed.spawn(len(pairs))):
        s = ss.spawn(4)
        tr0, tr1 = sample(pair, 0, n_fit, s[0]), sample(pair, 1, n_fit, s[1])
        se0, se1 = sample(pair, 0, n_fit, s[2]), sample(pair, 1, n_fit, s[3])
        for fam in tr0:
            w = screened_lda_direction(tr0[fam], tr1[fam], screen)
            bound, test = select_threshold_for_fresh(se0[fam] @ w, se1[fam] @ w, delta, confidence, n_test)
            if best is None or bound > best[0]:
                best = (bound, test, w, pair, fam)
    bound, test, w, pair, fam = best
    f0, f1 = seed.spawn(len(pairs) + 2)[-2:]
    fp = int(np.count_nonzero(test.reject(sample(pair, 0, n_test, f0)[fam] @ w)))
    tp = int(np.count_nonzero(test.reject(sample(pair, 1, n_test, f1)[fam] @ w)))
    eps = float(eps_lower_from_counts(fp, n_test, n_test - tp, n_test, delta, confidence))
    return {"attack": "membership (shuffled view)", "epsilon_lower": eps, "delta": delta, "confidence": confidence,
            "witness": {"label": pair.label, "pair": pair.describe(), "features": fam,
                        "statistic": f"linear discriminant on the {screen} most separated {fam} cells",
                        "threshold": test.threshold, "reject_when": test.reject_when()},
            "samples": len(pairs) * 4 * n_fit + 2 * n_test, "seconds": time.perf_counter() - t0,
            "details": {"false_positives": fp, "false_negatives": n_test - tp, "n_fresh_per_side": n_test,
                        "fpr": fp / n_test, "fnr": (n_test - tp) / n_test, "selection_bound": bound,
                        "candidates": len(pairs) * 2, "tests_corrected_for": 1}}
