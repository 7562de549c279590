"""Discriminant attacks: a linear direction fitted on a training split turns high-dimensional views into a score.

* :func:`lda_direction` -- Fisher's linear discriminant (pooled covariance with a tiny ridge): on
  features with a noise-free direction (a tree whose noise is missing or reused) it finds it;
* :func:`screened_lda_direction` -- Fisher's discriminant on the k features with the largest two-sample
  t statistics, zero elsewhere: with many cells and a weak canary (a shuffled batch), fitting every
  cell would drown the few informative ones in noise;
* :func:`projected_lda_direction` -- Fisher's discriminant on known projections of the features (one per
  released tree node along the canary's difference), as a direction on the raw features;
* :func:`lda_attack` and :func:`screened_lda_attack` -- the attacks: fit on one split, choose the
  (candidate pair, threshold, direction) on a second, count only the chosen test on fresh views
  (Clopper-Pearson, :mod:`dpaudit.attacks.bounds`), so the bound needs no correction for the choice.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from dpaudit.engine import SERIAL, Engine

from .bounds import best_threshold_test, select_threshold_for_fresh
from .result import AuditResult
from .sampling import Features, Linear, Source, Stop, count, draw_pilots, score_edges

__all__ = ["lda_direction", "screened_lda_direction", "projected_lda_direction", "lda_attack", "screened_lda_attack"]


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




def projected_lda_direction(F0: np.ndarray, F1: np.ndarray, project: np.ndarray) -> np.ndarray:
    """Fisher's discriminant on the projected features ``F @ project`` ((p, q): q known directions, e.g. one
    per released node along the canary's known difference), as a direction on the raw features: with few
    informative directions among many noise coordinates, fitting q weights instead of p loses little."""
    return project @ lda_direction(F0 @ project, F1 @ project)


def lda_attack(source: Source, candidates: Sequence[int], seed: np.random.SeedSequence, *, delta: float,
               confidence: float, n_train: int, n_select: int, n_test: int, name: str, engine: Engine = SERIAL,
               progress: Callable[[str], None] | None = None, claim: float | None = None,
               pilots: Sequence[Features] | None = None, project: Sequence[np.ndarray | None] | None = None,
               threshold_for_fresh: bool = False, floor: float = 0.0) -> AuditResult:
    """Threshold attack with Fisher's discriminant, over a source's candidate pairs.

    The discriminant is fitted on ``n_train`` views per side, the best (candidate, threshold, direction)
    chosen on ``n_select`` more, and only that test is counted on ``n_test`` fresh views per side, so
    the Clopper-Pearson bound needs no correction for the choice. Views are drawn on ``engine``, or
    given as ``pilots`` (per candidate: training views of side 0 and 1, then selection views of side 0
    and 1), e.g. the features of runs another attack also uses to choose its test. ``project`` (per
    candidate, or None for a candidate): fit on those projections (:func:`projected_lda_direction`);
    ``threshold_for_fresh``: the threshold whose bound projected to ``n_test`` fresh views is largest
    (:func:`~dpaudit.attacks.bounds.select_threshold_for_fresh`) rather than the best on the selection split. ``floor``: a bound the audit already shows by another test, below
    which the fresh count may stop as futile (:class:`~dpaudit.attacks.sampling.Stop`).
    """
    t0 = time.perf_counter()
    views = draw_pilots(source, candidates, seed, n_train, n_select, engine, pilots, "lda_attack")
    best = None
    for i, c in enumerate(candidates):
        v = views[4 * i: 4 * i + 4]
        P = None if project is None else project[i]
        w = lda_direction(v[0], v[1]) if P is None else projected_lda_direction(v[0], v[1], P)
        if threshold_for_fresh:
            bound, test = select_threshold_for_fresh(v[2] @ w, v[3] @ w, delta, confidence, n_test)
        else:
            bound, test = best_threshold_test({"lda": v[2] @ w}, {"lda": v[3] @ w}, delta, confidence)[0]
        if best is None or bound > best[0]:
            best = (bound, test, w, c, score_edges(v[2] @ w, v[3] @ w, test))
    bound, test, w, c, edges = best
    f0, f1 = seed.spawn(len(candidates) + 2)[-2:]
    counted = count(source, c, n_test, (f0, f1), Linear(w), test, engine, progress, f"{name}: fresh views",
                    stop=None if claim is None else Stop(delta, confidence, claim, floor=floor), edges=edges)
    fp, tp, n_test = counted.fp, counted.tp, counted.n
    eps = counted.bound(delta, confidence)
    desc = source.describe(c)
    return AuditResult(name, eps, delta, confidence,
                       {"label": desc.get("label", ""), "pair": desc,
                        "statistic": "linear discriminant" + ("" if project is None else " on known projections"),
                        "threshold": test.threshold, "reject_when": test.reject_when()},
                       samples=len(candidates) * 2 * (n_train + n_select) + 2 * n_test,
                       seconds=time.perf_counter() - t0,
                       details={"false_positives": fp, "false_negatives": n_test - tp, "n_fresh_per_side": n_test,
                                "fpr": fp / n_test, "fnr": (n_test - tp) / n_test, "selection_bound": bound,
                                "tests_corrected_for": 1, **counted.details()},
                       scores=counted.scores(test, edges, "linear discriminant"))


def screened_lda_attack(source: Source, candidates: Sequence[int], seed: np.random.SeedSequence, *, delta: float,
                        confidence: float, n_fit: int, n_test: int, screen: int = 8,
                        name: str = "membership (shuffled view)", engine: Engine = SERIAL,
                        progress: Callable[[str], None] | None = None, claim: float | None = None,
                        pilots: Sequence[Features] | None = None, floor: float = 0.0) -> AuditResult:
    """For every (candidate, feature family) a screened discriminant fitted on ``n_fit`` views per side,
    its best threshold chosen on ``n_fit`` more for the fresh sample size, and only the best candidate
    counted on ``n_test`` fresh views per side (so the Clopper-Pearson bound needs no correction for the
    choice). ``source.sample`` returns a dict of feature families, each (n, p); a source with
    ``for_family(name)`` (the same views read as that family alone) is counted through it. Used on the
    shuffled view (the binned multiset of a batch's messages), where many cells carry nothing. ``pilots``: the
    fitting and selection views already drawn (as :func:`lda_attack` takes them), e.g. shared with another
    part that chooses its test on them. ``floor``: a bound the audit already shows by another part (the count
    may stop as futile once its projected bound stays at or below it, :class:`~dpaudit.attacks.sampling.Stop`)."""
    t0 = time.perf_counter()
    views = draw_pilots(source, candidates, seed, n_fit, n_fit, engine, pilots, "screened_lda_attack")
    best = None
    families = 0
    for i, c in enumerate(candidates):
        tr0, tr1, se0, se1 = views[4 * i: 4 * i + 4]
        for fam in tr0:
            families += 1
            w = screened_lda_direction(tr0[fam], tr1[fam], screen)
            bound, test = select_threshold_for_fresh(se0[fam] @ w, se1[fam] @ w, delta, confidence, n_test)
            if best is None or bound > best[0]:
                best = (bound, test, w, c, fam, score_edges(se0[fam] @ w, se1[fam] @ w, test))
    bound, test, w, c, fam, edges = best
    f0, f1 = seed.spawn(len(candidates) + 2)[-2:]
    # a source that can read one feature family alone (the shuffled view's) computes only the chosen test's
    counting = source.for_family(fam) if callable(getattr(source, "for_family", None)) else source
    counted = count(counting, c, n_test, (f0, f1), Linear(w, family=fam), test, engine, progress, f"{name}: fresh views",
                    stop=None if claim is None else Stop(delta, confidence, claim, floor=float(floor)), edges=edges)
    fp, tp, n_test = counted.fp, counted.tp, counted.n
    eps = counted.bound(delta, confidence)
    desc = source.describe(c)
    return AuditResult(name, eps, delta, confidence,
                       {"label": desc.get("label", ""), "pair": desc, "features": fam,
                        "statistic": f"linear discriminant on the {screen} most separated {fam} cells",
                        "threshold": test.threshold, "reject_when": test.reject_when()},
                       samples=len(candidates) * 4 * n_fit + 2 * n_test, seconds=time.perf_counter() - t0,
                       details={"false_positives": fp, "false_negatives": n_test - tp, "n_fresh_per_side": n_test,
                                "fpr": fp / n_test, "fnr": (n_test - tp) / n_test, "selection_bound": bound,
                                "candidates": families, "tests_corrected_for": 1, **counted.details()},
                       scores=counted.scores(test, edges, "linear discriminant"))
