"""The Gaussian mechanism (:class:`GaussianMechanism`) and its Rényi divergence (:func:`gaussian_renyi`).

Calibrations from Azize & Basu (2023a) "Concentrated Differential Privacy for Bandits" and Azize & Basu
(2023b) "Rényi Differentially Private Bandits".
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import ZCDP, Guarantee
from dpaudit.errors import check_nonnegative, check_order, check_positive
from dpaudit.mechanisms.additive import AdditiveMechanism
from dpaudit.mechanisms.ledger import NoiseKind

__all__ = ["GaussianMechanism", "gaussian_renyi"]


class GaussianMechanism(AdditiveMechanism):
    """Additive N(0, sigma^2) noise on a statistic of L2-sensitivity ``sensitivity``.

    One release is (Delta^2 / (2 sigma^2))-zCDP (Bun & Steinke 2016, Prop. 1.6), exactly: its Rényi
    divergence at order alpha is alpha Delta^2 / (2 sigma^2).
    """

    kind: NoiseKind = "gaussian"

    @property
    def sigma(self) -> np.ndarray:
        return self.scale

    @classmethod
    def for_zcdp(cls, rho: float, sensitivity: float = 1.0) -> "GaussianMechanism":
        """sigma = Delta / sqrt(2 rho): the calibration of Azize & Basu (2023a), App. C, Lemma 4."""
        rho = check_positive("rho", rho)
        return cls(sensitivity, sensitivity / math.sqrt(2 * rho))

    @classmethod
    def for_rdp(cls, alpha: float, epsilon: float, sensitivity: float = 1.0) -> "GaussianMechanism":
        """sigma = Delta sqrt(alpha / (2 eps)), so D_alpha = eps exactly (Azize & Basu 2023b, Lemma 2)."""
        alpha = check_order(alpha)
        epsilon = check_positive("epsilon", epsilon)
        return cls(sensitivity, sensitivity * math.sqrt(alpha / (2 * epsilon)))

    def guarantee(self) -> Guarantee:
        return ZCDP(float(np.max(self.sensitivity**2 / (2 * self.scale**2))))


def gaussian_renyi(alpha: float, sigma: float, sensitivity: float = 1.0) -> float:
    """D_alpha(N(0, s^2) || N(Delta, s^2)) = alpha Delta^2 / (2 s^2)."""
    check_order(alpha)
    check_positive("sigma", sigma)
    check_nonnegative("sensitivity", sensitivity)
    return alpha * sensitivity**2 / (2 * sigma**2)
