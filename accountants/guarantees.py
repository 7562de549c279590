"""Privacy guarantees as small immutable values.

A ``Guarantee`` is what a policy *declares*: ``PureDP(eps)``, ``ApproxDP(eps, delta)``,
``ZCDP(rho)`` or ``RDP(curve)``. Each validates its parameters on construction and exposes its
Rényi curve ``renyi(alpha)`` (``inf`` where it promises nothing), which is what the audits compare
measured divergences against. Conversions to (eps, delta) live in :mod:`dpaudit.accountants.conversions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dpaudit.errors import DPAuditError, check_delta, check_nonnegative, check_order

__all__ = ["Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP"]


class Guarantee:
    """Base class of declared privacy guarantees."""

    def renyi(self, alpha: float) -> float:
        """Upper bound on D_alpha(P || Q) over neighbouring inputs (``inf`` if none)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()

    def conversion(self, delta: float):
        """The best (eps, delta) this guarantee implies, with the method and order used.

        Default: CKS 2020 Prop. 12 over continuous orders of ``renyi`` (see
        :mod:`dpaudit.accountants.conversions`); subclasses override with tighter closed forms.
        """
        from .conversions import rdp_curve_to_approx

        return rdp_curve_to_approx(self.renyi, delta)

    def epsilon_at(self, delta: float) -> float:
        """The epsilon of :meth:`conversion` at ``delta``."""
        return self.conversion(delta).epsilon

    def to_approx(self, delta: float) -> "ApproxDP":
        """This guarantee weakened to (eps, delta)-DP by the best known conversion."""
        return ApproxDP(self.conversion(delta).epsilon, delta)


@dataclass(frozen=True)
class PureDP(Guarantee):
    """epsilon-DP (delta = 0)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))

    def renyi(self, alpha: float) -> float:
        # eps-DP => (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 3.3), and D_alpha <= D_inf = eps.
        alpha = check_order(alpha)
        return min(self.epsilon, alpha * self.epsilon**2 / 2)

    def describe(self) -> str:
        return f"{self.epsilon:g}-DP"

    def conversion(self, delta: float):
        """Tight: randomized response's profile (Kairouz, Oh & Viswanath 2015)."""
        from .conversions import pure_to_approx

        return pure_to_approx(self.epsilon, delta)

    def to_zcdp(self) -> "ZCDP":
        """eps-DP => (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
        return ZCDP(self.epsilon**2 / 2)


@dataclass(frozen=True)
class ApproxDP(Guarantee):
    """(epsilon, delta)-DP."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta, allow_zero=True))

    def renyi(self, alpha: float) -> float:
        check_order(alpha)
        return self.epsilon if self.delta == 0 else math.inf

    def describe(self) -> str:
        return f"({self.epsilon:g}, {self.delta:g})-DP"

    def conversion(self, delta: float):
        """Tight for delta >= self.delta (Kairouz et al. 2015's dominating mechanism); inf below it."""
        from .conversions import approx_to_approx

        return approx_to_approx(self.epsilon, self.delta, delta)


@dataclass(frozen=True)
class ZCDP(Guarantee):
    """rho-zero-concentrated DP: D_alpha <= alpha rho for every alpha > 1 (Bun & Steinke 2016)."""

    rho: float

    def __post_init__(self) -> None:
        rho = check_nonnegative("rho", self.rho)
        object.__setattr__(self, "rho", rho)

    def renyi(self, alpha: float) -> float:
        alpha = check_order(alpha)
        return alpha * self.rho

    def describe(self) -> str:
        return f"{self.rho:g}-zCDP"

    def conversion(self, delta: float):
        """CKS 2020 Cor. 13 over continuous orders (and the KL/TV bound)."""
        from .conversions import zcdp_to_approx

        return zcdp_to_approx(self.rho, delta)

    def to_rdp(self) -> "RDP":
        """The exact Rényi curve alpha -> alpha rho."""
        return RDP(_ZcdpCurve(self.rho))


@dataclass(frozen=True)
class RDP(Guarantee):
    """Rényi DP given by a curve: a callable ``alpha -> eps`` or a table ``{alpha: eps}``.

    A table promises ``D_a <= eps`` at its orders only; since D_alpha is non-decreasing in alpha
    (van Erven & Harremoës 2014, Thm 3), ``renyi(a)`` is the smallest tabulated eps at an order
    ``>= a`` and ``inf`` above the largest order. ``RDP({alpha: eps})`` is seed 004's
    (alpha, eps)-RDP.
    """

    curve: Callable[[float], float] | Mapping[float, float]
    _table: tuple[tuple[float, float], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.curve, Mapping):
            if not self.curve:
                raise DPAuditError("an RDP table needs at least one (order, epsilon) entry, got {}.")
            rows = sorted(
                (check_order(a, "RDP order"), check_nonnegative(f"RDP epsilon at order {a}", e))
                for a, e in self.curve.items()
            )
            object.__setattr__(self, "_table", tuple(rows))
        elif not callable(self.curve):
            raise DPAuditError(
                f"RDP curve must be a callable alpha -> eps or a mapping {{alpha: eps}}, got {self.curve!r}."
            )

    @classmethod
    def point(cls, alpha: float, epsilon: float) -> "RDP":
        """(alpha, epsilon)-RDP at the single order alpha (seed 004, Def. 2)."""
        return cls({alpha: epsilon})

    def renyi(self, alpha: float) -> float:
        alpha = check_order(alpha)
        if self._table:
            candidates = [e for a, e in self._table if a >= alpha]
            return min(candidates) if candidates else math.inf
        value = float(self.curve(alpha))  # type: ignore[operator]
        return check_nonnegative(f"RDP curve at order {alpha}", value, allow_inf=True)

    @property
    def orders(self) -> tuple[float, ...]:
        return tuple(a for a, _ in self._table)

    def conversion(self, delta: float):
        """CKS over the table's orders (plus 1/delta), or over continuous orders for a callable."""
        from .conversions import rdp_curve_to_approx

        return rdp_curve_to_approx(self.renyi, delta, self.orders or None)

    def describe(self) -> str:
        if self._table:
            pts = ", ".join(f"({a:g}, {e:g})" for a, e in self._table)
            return f"RDP at {pts}"
        name = getattr(self.curve, "__name__", "curve")
        return f"RDP({name})"


class _ZcdpCurve:
    """alpha -> alpha rho, named for RDP.describe()."""

    def __init__(self, rho: float) -> None:
        self.rho = rho
        self.__name__ = f"alpha * {rho:g}"

    def __call__(self, alpha: float) -> float:
        return alpha * self.rho
