"""Composition of concrete noise releases: Gaussian multipliers and Laplace epsilons, exact where possible.

:class:`NoiseAccount` is a sequential composition of Gaussian releases (mu_i = D_i / sigma_i) and
Laplace releases (eps_i = D_i / b_i). Its eps(delta) is exact where a closed form exists: Gaussians
only -> one Gaussian with mu = sqrt(sum mu_i^2) and Balle & Wang's analytic profile (Balle & Wang
2018, Thm 8; Dong, Roth & Su 2019 for the composition); one Laplace -> its closed form; anything
else -> dp-accounting's PLD accountant (``privacy_loss_distribution``, pessimistic estimate,
discretisation 1e-3 by default: an upper bound, so valid). The Rényi curve is exact for every mix
(Gaussian alpha mu^2/2 plus Mironov 2017, Prop. 6 for Laplace).

It sits below :mod:`dpaudit.accountants.guarantees` (``MechanismDP`` is answered by it), so it returns
numbers and conversions, never Guarantee objects.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.errors import InternalError, check_delta, check_int, check_nonnegative

from .conversions import Conversion, rdp_curve_to_approx
from .gaussian import gaussian_epsilon, gaussian_mu, laplace_epsilon, laplace_renyi

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

__all__ = ["NoiseAccount", "PLD_DISCRETISATION"]

#: value_discretization_interval of the PLD accountant (smaller is tighter and slower).
PLD_DISCRETISATION = 1e-3


@dataclass(frozen=True)
class NoiseAccount:
    """A sequential composition of Gaussian releases (multipliers ``mu``) and Laplace releases (``eps``).

    ``mu_i = sensitivity_i / sigma_i`` (L2), ``eps_i = sensitivity_i / b_i`` (L1).
    """

    gaussian_mu: tuple[float, ...] = ()
    laplace_eps: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "gaussian_mu", tuple(check_nonnegative("Gaussian multiplier mu", m) for m in self.gaussian_mu))
        object.__setattr__(self, "laplace_eps", tuple(check_nonnegative("Laplace epsilon", e) for e in self.laplace_eps))

    @classmethod
    def gaussian(cls, sigma: float, sensitivity: float = 1.0, compositions: int = 1) -> "NoiseAccount":
        n = check_int("compositions", compositions, minimum=1)
        return cls((gaussian_mu(sigma, sensitivity, 1),) * n)

    def __add__(self, other: "NoiseAccount") -> "NoiseAccount":
        return NoiseAccount(self.gaussian_mu + other.gaussian_mu, self.laplace_eps + other.laplace_eps)

    @property
    def mu(self) -> float:
        """The single Gaussian equivalent to all Gaussian members: sqrt(sum mu_i^2)."""
        return math.sqrt(sum(m * m for m in self.gaussian_mu))

    @property
    def rho(self) -> float:
        """zCDP of the whole composition: mu^2/2 plus eps_i^2/2 per Laplace member."""
        return self.mu**2 / 2 + sum(e * e / 2 for e in self.laplace_eps)

    def renyi(self, alpha: float | np.ndarray) -> float | np.ndarray:
        """Exact D_alpha of the composition (worst neighbouring pair of each member, added)."""
        a = np.asarray(alpha, dtype=float)
        out = a * self.mu**2 / 2
        for e in self.laplace_eps:
            out = out + laplace_renyi(a, e)
        return float(out) if np.ndim(out) == 0 else out

    def epsilon(self, delta: float, *, discretisation: float = PLD_DISCRETISATION) -> Conversion:
        """eps(delta), exact where a closed form exists, else PLD (see the module docstring)."""
        delta = check_delta(delta)
        lap = [e for e in self.laplace_eps if e > 0]
        if not lap:
            return gaussian_epsilon(delta, mu=self.mu)
        if len(lap) == 1 and self.mu == 0:
            return laplace_epsilon(delta, lap[0])
        return self._pld_epsilon(delta, discretisation)

    def rdp_epsilon(self, delta: float) -> Conversion:
        """eps(delta) from the exact Rényi curve, CKS over continuous orders (an upper bound)."""
        return rdp_curve_to_approx(lambda a: float(self.renyi(a)), check_delta(delta))

    def _pld_epsilon(self, delta: float, discretisation: float) -> Conversion:
        from dp_accounting.pld import privacy_loss_distribution as pld_mod

        pld: PrivacyLossDistribution | None = None
        if self.mu > 0:
            pld = pld_mod.from_gaussian_mechanism(1.0 / self.mu, 1.0, value_discretization_interval=discretisation)
        for e, count in sorted(Counter(e for e in self.laplace_eps if e > 0).items()):
            part = pld_mod.from_laplace_mechanism(1.0 / e, 1.0, value_discretization_interval=discretisation)
            if count > 1:
                part = part.self_compose(count)
            pld = part if pld is None else pld.compose(part)
        if pld is None:  # epsilon() answers a composition without a Laplace member in closed form
            raise InternalError("the PLD of a noise account was asked for without a Laplace release")
        eps = float(pld.get_epsilon_for_delta(delta))
        return Conversion(max(0.0, eps), delta, "pld", None)
