"""The one result type every attack returns."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["AuditResult", "ScoreHistogram", "jsonable"]


def jsonable(value: Any) -> Any:
    """Make ``value`` JSON-serialisable; infinities become the strings "inf" / "-inf"."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if math.isnan(v):
            return "nan"
        return v
    return value


@dataclass(frozen=True)
class ScoreHistogram:
    """The two sides' scores of a threshold test on its fresh samples, binned: enough to draw the test's
    ROC curve and the two score histograms, in a few hundred numbers instead of the raw scores.

    ``edges`` e_0 < ... < e_{m-1} (fixed on the selection split, before the fresh samples are drawn) cut
    the real line into m + 1 cells (-inf, e_0], (e_0, e_1], ..., (e_{m-1}, inf); ``counts0`` and
    ``counts1`` count the fresh scores of side 0 (d) and side 1 (d') in each. ``direction`` is the
    test's: +1 when high scores point to d', -1 when low ones do. ``off_edge`` counts the fresh scores
    that are not equal to their cell's upper edge: when it is 0 every score sits on an edge, and the
    binned ROC *is* the empirical ROC of every threshold on the raw scores (a score with few values,
    such as a pull count); otherwise it is the empirical ROC of the thresholds at the edges.
    """

    statistic: str
    direction: int
    edges: tuple[float, ...]
    counts0: tuple[int, ...]
    counts1: tuple[int, ...]
    off_edge: int = 0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ScoreHistogram":
        return cls(str(d["statistic"]), int(d["direction"]), tuple(float(x) for x in d["edges"]),
                   tuple(int(x) for x in d["counts0"]), tuple(int(x) for x in d["counts1"]),
                   int(d.get("off_edge", 0)))

    @property
    def n0(self) -> int:
        return int(sum(self.counts0))

    @property
    def n1(self) -> int:
        return int(sum(self.counts1))

    @property
    def exact(self) -> bool:
        """Whether the binned ROC is the empirical ROC of the raw scores (every score on an edge)."""
        return self.off_edge == 0

    def roc(self) -> tuple[list[float], list[float]]:
        """The empirical ROC of the threshold family at the edges, oriented by ``direction``: (FPR, TPR)
        from (0, 0) (reject nothing) to (1, 1) (reject everything), rejecting one more cell at each point,
        from the end of the score that points to d'."""
        c0, c1 = list(self.counts0), list(self.counts1)
        if self.direction > 0:
            c0, c1 = c0[::-1], c1[::-1]
        n0, n1 = max(1, self.n0), max(1, self.n1)
        fpr, tpr, a, b = [0.0], [0.0], 0, 0
        for x, y in zip(c0, c1):
            if x == 0 and y == 0:
                continue
            a, b = a + x, b + y
            fpr.append(a / n0)
            tpr.append(b / n1)
        return fpr, tpr

    def auc(self) -> float:
        """The area under :meth:`roc` (trapezoids): P(score' > score) + P(tie) / 2 over the two sides'
        fresh samples in the oriented cells, exactly; 0.5 when the sides cannot be told apart."""
        fpr, tpr = self.roc()
        return float(sum((fpr[i + 1] - fpr[i]) * (tpr[i + 1] + tpr[i]) / 2 for i in range(len(fpr) - 1)))

    def tpr_at(self, fpr: float) -> float | None:
        """The largest TPR of a threshold of the family whose FPR is at most ``fpr``; None when side 0 has
        fewer than 1 / ``fpr`` samples (no threshold's false-positive rate is resolved that finely) or side 1
        fewer (its rate would rest on less than a run per false positive allowed)."""
        if min(self.n0, self.n1) < 1.0 / fpr:
            return None
        xs, ys = self.roc()
        return float(max(y for x, y in zip(xs, ys) if x <= fpr + 1e-15))


@dataclass(frozen=True)
class AuditResult:
    """What an attack measured.

    ``epsilon_lower`` is a lower bound on the epsilon of the mechanism at ``delta`` that holds with
    probability at least ``confidence`` (``confidence = 1`` for exact computations, where it is the
    exact value over the inputs searched). ``witness`` names the neighbouring pair, the round, the
    event or threshold and the adversary that achieve it.
    """

    attack: str
    epsilon_lower: float
    delta: float
    confidence: float
    witness: dict[str, Any] = field(default_factory=dict)
    samples: int = 0
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    #: the threshold test's fresh scores, binned (:class:`ScoreHistogram`), for its ROC curve; None for an
    #: attack without one threshold test on fresh samples (and in findings files that do not carry it)
    scores: ScoreHistogram | None = None

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))
