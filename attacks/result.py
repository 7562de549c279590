"""The one result type every attack returns."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["AuditResult", "jsonable"]


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

    def to_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))
