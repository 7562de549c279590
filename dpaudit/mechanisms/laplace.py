"""The Laplace mechanism (:class:`LaplaceMechanism`) and its exact Rényi divergence (:func:`laplace_renyi`)."""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import Guarantee, PureDP
from dpaudit.errors import check_nonnegative, check_order, check_positive
from dpaudit.mechanisms.additive import AdditiveMechanism
from dpaudit.mechanisms.ledger import NoiseKind

__all__ = ["LaplaceMechanism", "laplace_renyi"]


class LaplaceMechanism(AdditiveMechanism):
    """Additive Laplace(0, b) noise on a statistic of L1-sensitivity ``sensitivity``: (Delta/b)-DP."""

    kind: NoiseKind = "laplace"

    @classmethod
    def for_pure(cls, epsilon: float, sensitivity: float = 1.0) -> "LaplaceMechanism":
        """b = Delta / eps (Dwork et al. 2006)."""
        epsilon = check_positive("epsilon", epsilon)
        return cls(sensitivity, sensitivity / epsilon)

    def guarantee(self) -> Guarantee:
        return PureDP(float(np.max(self.sensitivity / self.scale)))


def laplace_renyi(alpha: float, b: float, sensitivity: float = 1.0) -> float:
    """Exact D_alpha(Lap(0, b) || Lap(Delta, b)) (Mironov 2017, Prop. 6), computed in log space."""
    alpha = check_order(alpha)
    b = check_positive("b", b)
    t = check_nonnegative("sensitivity", sensitivity) / b
    if math.isinf(alpha):
        return t
    # (1/(a-1)) log[ a/(2a-1) e^{(a-1)t} + (a-1)/(2a-1) e^{-a t} ]
    la = math.log(alpha / (2 * alpha - 1)) + (alpha - 1) * t
    lb = math.log((alpha - 1) / (2 * alpha - 1)) - alpha * t
    return float(np.logaddexp(la, lb) / (alpha - 1))
