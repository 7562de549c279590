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
from typing import TYPE_CHECKING, cast

from dpaudit.errors import DPAuditError, check_delta, check_nonnegative, check_order, check_positive

from .noise import NoiseAccount

if TYPE_CHECKING:  # conversions imports numpy; guarantees stay cheap to import
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    from .conversions import Conversion

__all__ = ["Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP", "compose_sequential", "compose_parallel", "is_dp_event"]


class Guarantee:
    """Base class of declared privacy guarantees."""

    def renyi(self, alpha: float) -> float:
        """Upper bound on D_alpha(P || Q) over neighbouring inputs (``inf`` if none)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.describe()

    def conversion(self, delta: float) -> Conversion:
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

    # ---- composition operators and dp-accounting interop (defined at the end of this module) ----

    def __add__(self, other: object) -> "Guarantee":
        """Sequential composition (:func:`compose`); a dp-accounting DpEvent is accepted too."""
        if not isinstance(other, Guarantee) and not is_dp_event(other):
            return NotImplemented
        return compose(self, other)

    def __radd__(self, other: object) -> "Guarantee":
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:  # sum([g1, g2])
            return self
        return self.__add__(other)

    def __mul__(self, n: object) -> "Guarantee":
        """``g * n``: n-fold sequential self-composition."""
        if isinstance(n, bool) or not isinstance(n, int):
            return NotImplemented
        return _times(self, n)

    __rmul__ = __mul__

    def to_dp_event(self) -> object:
        """This guarantee as a dp-accounting DpEvent that describes it exactly: zCDP -> ZCDpEvent,
        eps-DP -> binary RandomizedResponseDpEvent (the eps-DP mechanism that dominates all others),
        Gaussian/Laplace releases -> their events, compositions -> Composed/SelfComposed events.
        Raises DPAuditError where dp-accounting has no exact event ((eps, delta)-DP, a general RDP curve)."""
        return _to_dp_event(self)

    @classmethod
    def from_dp_event(cls, event: object) -> "Guarantee":
        """The Guarantee a dp-accounting DpEvent describes, exactly (the inverse of :meth:`to_dp_event`)."""
        return _from_dp_event(event)


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

    def conversion(self, delta: float) -> Conversion:
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

    def conversion(self, delta: float) -> Conversion:
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

    def conversion(self, delta: float) -> Conversion:
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
    ``>= a`` and ``inf`` above the largest order. ``RDP({alpha: eps})`` is the
    (alpha, eps)-RDP of Azize & Basu (2023b), "Rényi Differentially Private Bandits".
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
        """(alpha, epsilon)-RDP at the single order alpha (Azize & Basu 2023b, Def. 2)."""
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

    def conversion(self, delta: float) -> Conversion:
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


# ==== dp-accounting interop and the composition operators ===========================================
#
# Semantics shared with dp-accounting: a DpEvent's ``noise_multiplier`` is the noise scale divided by
# the sensitivity over dpaudit's neighbouring relation (one row / one entry changes), which is
# dp-accounting's accounting under ``ADD_OR_REMOVE_ONE`` (and ``REPLACE_SPECIAL``) with sensitivity
# 1. ``RandomizedResponseDpEvent(p, 2)`` is accounted under ``REPLACE_ONE``, where dp-accounting gives
# it epsilon = log(2/p - 1) (one answer replaced by another).

#: PLD discretisation used where a composition has no closed form (dp-accounting's default)
PLD_INTERVAL = 1e-4


def _rr_parameter(epsilon: float) -> float:
    """Binary randomized response with epsilon = log(2/p - 1): p = 2 / (e^eps + 1)."""
    return 2.0 / (math.exp(epsilon) + 1.0) if epsilon < 700 else 0.0


@dataclass(frozen=True)
class MechanismDP(Guarantee):
    """The exact guarantee of concrete releases: Gaussian ones with multipliers ``gaussian_mu``
    (mu = sensitivity / sigma) and Laplace ones with ``laplace_eps`` (eps0 = sensitivity / b).

    What dp-accounting's ``GaussianDpEvent(s)`` (mu = 1/s) and ``LaplaceDpEvent(b)`` (eps0 = 1/b)
    describe. Tighter than the ZCDP / PureDP it implies, because the profile is the mechanism's own:
    :class:`~dpaudit.accountants.noise.NoiseAccount` answers (Gaussians only: one Gaussian with
    mu = sqrt(sum mu_i^2) and Balle & Wang's analytic profile, exact; one Laplace: closed form, exact;
    any other mix: dp-accounting's PLD, pessimistic, an upper bound within its discretisation).
    The Rényi curve is exact for every mix (Gaussian alpha mu^2/2 plus Mironov 2017, Prop. 6).
    """

    gaussian_mu: tuple[float, ...] = ()
    laplace_eps: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "gaussian_mu", tuple(check_nonnegative("Gaussian multiplier mu", m)
                                                      for m in self.gaussian_mu))
        object.__setattr__(self, "laplace_eps", tuple(check_nonnegative("Laplace epsilon", e) for e in self.laplace_eps))
        if not self.gaussian_mu and not self.laplace_eps:
            raise DPAuditError("MechanismDP needs at least one Gaussian or Laplace release, got none.")

    def _account(self) -> NoiseAccount:
        return NoiseAccount(self.gaussian_mu, self.laplace_eps)

    def renyi(self, alpha: float) -> float:
        return float(self._account().renyi(check_order(alpha)))

    def conversion(self, delta: float) -> Conversion:
        return self._account().epsilon(delta, discretisation=PLD_INTERVAL)

    def describe(self) -> str:
        parts = []
        if self.gaussian_mu:
            g = self.gaussian_mu
            parts.append(f"Gaussian mu = {g[0]:g}" + (f" x {len(g)}" if len(set(g)) == 1 and len(g) > 1 else "")
                         if len(set(g)) == 1 else f"{len(g)} Gaussians (mu = sqrt(sum mu_i^2) = "
                         f"{math.sqrt(sum(m * m for m in g)):g})")
        if self.laplace_eps:
            e = self.laplace_eps
            parts.append(f"Laplace eps = {e[0]:g}" + (f" x {len(e)}" if len(e) > 1 else "")
                         if len(set(e)) == 1 else f"{len(e)} Laplace releases (eps = {', '.join(f'{x:g}' for x in e)})")
        return " + ".join(parts)

    def to_zcdp(self) -> "ZCDP":
        """The zCDP it implies (mu^2/2 per Gaussian, eps^2/2 per Laplace; exact for Gaussians only)."""
        return ZCDP(self._account().rho)


@dataclass(frozen=True)
class Composed(Guarantee):
    """Sequential (adaptive) composition of guarantees, ``parts`` as (guarantee, times) pairs.

    The Rényi curve is the order-wise sum (Mironov 2017, Prop. 1), exact. No closed form gives
    (eps, delta), so the answer comes from an accountant, named in the conversion's ``method``:
    dp-accounting's PLD accountant when every part has a privacy-loss distribution (Gaussian, Laplace,
    pure DP as randomized response: pessimistic discretisation ``PLD_INTERVAL``, an upper bound at most
    about (number of compositions) x ``PLD_INTERVAL`` above the exact eps); otherwise (a zCDP or RDP
    part) the summed Rényi curve converted by CKS 2020 Prop. 12 over continuous orders, as tight as
    any RDP accountant (dp-accounting's RdpAccountant uses a grid of orders, so it is never below it).
    The PLDs are built and self-composed here (``privacy_loss_distribution``), not through
    ``PLDAccountant``, whose version 0.6.0 ignores the count of a ``SelfComposedDpEvent`` of
    randomized response (tests/test_interop.py compares against the composition spelled out).
    """

    parts: tuple[tuple[Guarantee, int], ...]

    def __post_init__(self) -> None:
        for g, n in self.parts:
            if not isinstance(g, Guarantee) or isinstance(g, (Composed, ApproxDP)):
                raise DPAuditError(f"a Composed part must be a Guarantee other than Composed or ApproxDP, got {g!r}.")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise DPAuditError(f"a Composed part's count must be an integer >= 1, got {n!r}.")
        if not self.parts:
            raise DPAuditError("a composition needs at least one part, got none.")

    def renyi(self, alpha: float) -> float:
        alpha = check_order(alpha)
        return float(sum(n * g.renyi(alpha) for g, n in self.parts))

    def _pld(self) -> PrivacyLossDistribution | None:
        """dp-accounting's PLD of the whole composition, or None if a part has none."""
        from dp_accounting.pld import privacy_loss_distribution as pld_mod

        pld: PrivacyLossDistribution | None = None
        for g, n in self.parts:
            pieces: list[PrivacyLossDistribution] = []
            if isinstance(g, PureDP):
                if g.epsilon == 0:
                    continue
                pieces.append(pld_mod.from_randomized_response(_rr_parameter(g.epsilon), 2,
                                                               value_discretization_interval=PLD_INTERVAL))
            elif isinstance(g, MechanismDP):
                pieces += [pld_mod.from_gaussian_mechanism(1.0 / m, value_discretization_interval=PLD_INTERVAL)
                           for m in g.gaussian_mu if m > 0]
                pieces += [pld_mod.from_laplace_mechanism(1.0 / e, value_discretization_interval=PLD_INTERVAL)
                           for e in g.laplace_eps if e > 0]
            else:
                return None
            for piece in pieces:
                piece = piece.self_compose(n) if n > 1 else piece
                pld = piece if pld is None else pld.compose(piece)
        return pld

    def conversion(self, delta: float) -> Conversion:
        from .conversions import Conversion, rdp_curve_to_approx

        delta = check_delta(delta)
        pld = self._pld()
        if pld is not None:
            return Conversion(max(0.0, float(pld.get_epsilon_for_delta(delta))), delta, "pld (dp-accounting)", None)
        return rdp_curve_to_approx(self.renyi, delta)

    def describe(self) -> str:
        return " + ".join(g.describe() if n == 1 else f"{n} x ({g.describe()})" for g, n in self.parts)


def _parts(g: Guarantee) -> tuple[tuple[Guarantee, int], ...]:
    return g.parts if isinstance(g, Composed) else ((g, 1),)


def compose(*guarantees: "Guarantee | object") -> Guarantee:
    """Sequential composition, exact where the types allow: zCDP adds rho; Gaussian and Laplace
    releases collect into one :class:`MechanismDP`; (eps, delta)-DP composes with pure and
    (eps, delta)-DP by basic composition (Dwork & Roth 2014, Thm 3.16); anything else is a
    :class:`Composed` (Rényi curves added; eps(delta) from dp-accounting's PLD or the RDP curve).
    DpEvents are accepted and converted by :meth:`Guarantee.from_dp_event`.
    """
    gs = [as_guarantee(g) for g in guarantees]
    if not gs:
        raise DPAuditError("composition needs at least one guarantee, got none.")
    if len(gs) == 1:
        return gs[0]
    kinds = {type(g) for g in gs}
    if kinds == {ZCDP}:
        return ZCDP(sum(g.rho for g in gs))  # type: ignore[attr-defined]
    if kinds == {MechanismDP}:
        return MechanismDP(sum((g.gaussian_mu for g in gs), ()), sum((g.laplace_eps for g in gs), ()))  # type: ignore[attr-defined]
    if ApproxDP in kinds:
        return compose_sequential(*gs)
    merged: dict[Guarantee, int] = {}
    for g in gs:
        for part, n in _parts(g):
            merged[part] = merged.get(part, 0) + n
    return Composed(tuple(merged.items()))


def _times(g: Guarantee, n: object) -> Guarantee:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise DPAuditError(f"a guarantee composes with itself a positive integer number of times, got {n!r}.")
    if n == 1:
        return g
    if isinstance(g, ZCDP):
        return ZCDP(n * g.rho)
    if isinstance(g, MechanismDP):
        return MechanismDP(g.gaussian_mu * n, g.laplace_eps * n)
    if isinstance(g, ApproxDP):
        return compose(*([g] * n))
    return Composed(tuple((p, k * n) for p, k in _parts(g)))


def is_dp_event(x: object) -> bool:
    """Whether ``x`` is a dp-accounting DpEvent (a claim dpaudit reads exactly)."""
    return type(x).__module__.startswith("dp_accounting")


def as_guarantee(claim: object) -> Guarantee:
    """``claim`` as a Guarantee: a Guarantee as it is, a dp-accounting DpEvent converted by
    :meth:`Guarantee.from_dp_event`; anything else is refused in one sentence."""
    if isinstance(claim, Guarantee):
        return claim
    if is_dp_event(claim):
        return Guarantee.from_dp_event(claim)
    raise DPAuditError(f"a claim must be a Guarantee from dpaudit.accountants (e.g. ZCDP(0.1)) or a dp-accounting "
                       f"DpEvent, got {claim!r}.")


def _to_dp_event(g: Guarantee) -> object:
    from dp_accounting import dp_event as ev

    def repeat(event: object, n: int) -> object:
        return event if n == 1 else ev.SelfComposedDpEvent(event, n)

    def group(events: list[object]) -> object:
        return events[0] if len(events) == 1 else ev.ComposedDpEvent(events)

    if isinstance(g, ZCDP):
        return ev.ZCDpEvent(g.rho)
    if isinstance(g, PureDP):
        return ev.RandomizedResponseDpEvent(_rr_parameter(g.epsilon), 2)
    if isinstance(g, MechanismDP):
        events: list[object] = []
        makers: tuple[tuple[tuple[float, ...], Callable[[float], object]], ...]
        makers = ((g.gaussian_mu, lambda m: ev.GaussianDpEvent(1.0 / m if m > 0 else math.inf)),
                  (g.laplace_eps, lambda e: ev.LaplaceDpEvent(1.0 / e if e > 0 else math.inf)))
        for values, make in makers:
            seen: dict[float, int] = {}
            for v in values:
                seen[v] = seen.get(v, 0) + 1
            events += [repeat(make(v), n) for v, n in seen.items()]
        return group(events)
    if isinstance(g, Composed):
        return group([repeat(_to_dp_event(p), n) for p, n in g.parts])
    if isinstance(g, RDP) and isinstance(g.curve, _ZcdpCurve):
        return ev.ZCDpEvent(g.curve.rho)
    raise DPAuditError(f"{g.describe()} has no exact dp-accounting DpEvent (dp-accounting has events for zCDP, "
                       "Gaussian, Laplace and randomized response, and their compositions); convert it first, "
                       "e.g. with .to_approx(delta).")


def _from_dp_event(event: object) -> Guarantee:
    from dp_accounting import dp_event as ev

    if isinstance(event, ev.ZCDpEvent):
        if event.xi:
            xi, rho = float(event.xi), float(event.rho)
            return RDP(_XiZcdpCurve(xi, rho))
        return ZCDP(float(event.rho))
    if isinstance(event, ev.GaussianDpEvent):
        s = check_positive("GaussianDpEvent noise_multiplier", event.noise_multiplier, allow_inf=True)
        return MechanismDP(gaussian_mu=(0.0 if math.isinf(s) else 1.0 / s,))
    if isinstance(event, ev.LaplaceDpEvent):
        b = check_positive("LaplaceDpEvent noise_multiplier", event.noise_multiplier, allow_inf=True)
        return MechanismDP(laplace_eps=(0.0 if math.isinf(b) else 1.0 / b,))
    if isinstance(event, ev.RandomizedResponseDpEvent) and event.num_buckets == 2:
        p = float(event.noise_parameter)
        if not 0 < p <= 1:
            raise DPAuditError(f"RandomizedResponseDpEvent noise_parameter must lie in (0, 1], got {p!r}.")
        return PureDP(math.log(2.0 / p - 1.0))
    if isinstance(event, ev.NoOpDpEvent):
        return ZCDP(0.0)
    if isinstance(event, ev.SelfComposedDpEvent):
        return _times(_from_dp_event(event.event), int(event.count))
    if isinstance(event, ev.ComposedDpEvent):
        return compose(*[_from_dp_event(e) for e in event.events])
    raise DPAuditError(f"{event!r} has no exact dpaudit Guarantee: dpaudit reads ZCDpEvent, GaussianDpEvent, "
                       "LaplaceDpEvent, RandomizedResponseDpEvent with 2 buckets, NoOpDpEvent and their "
                       "Composed/SelfComposed events.")


class _XiZcdpCurve:
    """alpha -> xi + alpha rho ((xi, rho)-zCDP), named for RDP.describe()."""

    def __init__(self, xi: float, rho: float) -> None:
        self.xi, self.rho = xi, rho
        self.__name__ = f"{xi:g} + alpha * {rho:g}"

    def __call__(self, alpha: float) -> float:
        return self.xi + alpha * self.rho


__all__ += ["MechanismDP", "Composed", "compose", "as_guarantee", "PLD_INTERVAL"]


# ---- composition of guarantees ------------------------------------------------------------------------
# Adaptive sequential composition: zCDP adds rho (Bun & Steinke 2016, Lemma 2.3), pure DP adds eps,
# RDP curves add order by order (Mironov 2017, Prop. 1), (eps, delta)-DP adds both (basic composition,
# Dwork & Roth 2014, Thm 3.16); mixed types without an (eps, delta) member compose as RDP curves.
# Parallel composition over disjoint data (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits",
# Lemma 1 / App. D; Azize & Basu 2023b, Lemma 11): the worst part.

class _SumCurve:
    """Order-wise sum of Rényi curves (picklable, named for describe())."""

    def __init__(self, parts: tuple[Guarantee, ...], how: str = "sum") -> None:
        self.parts = parts
        self.how = how
        self.__name__ = f"{how}({', '.join(p.describe() for p in parts)})"

    def __call__(self, alpha: float) -> float:
        vals = [p.renyi(alpha) for p in self.parts]
        return float(sum(vals) if self.how == "sum" else max(vals))


def _check_guarantees(guarantees: tuple[Guarantee, ...]) -> tuple[Guarantee, ...]:
    if not guarantees:
        raise DPAuditError("composition needs at least one guarantee, got none.")
    return tuple(as_guarantee(g) for g in guarantees)


def compose_sequential(*guarantees: Guarantee) -> Guarantee:
    """Adaptive sequential composition (see the module docstring for the rule per type)."""
    gs = _check_guarantees(guarantees)
    if len(gs) == 1:
        return gs[0]
    kinds = {type(g) for g in gs}
    if kinds == {ZCDP}:
        return ZCDP(sum(g.rho for g in cast("tuple[ZCDP, ...]", gs)))
    if kinds == {PureDP}:
        return PureDP(sum(g.epsilon for g in cast("tuple[PureDP, ...]", gs)))
    if kinds <= {PureDP, ApproxDP}:
        eps = cast("tuple[PureDP | ApproxDP, ...]", gs)
        return ApproxDP(sum(g.epsilon for g in eps), min(sum(getattr(g, "delta", 0.0) for g in eps), 1 - 1e-16))
    if ApproxDP in kinds:
        raise DPAuditError(
            "an (eps, delta)-DP guarantee composes only with pure or (eps, delta)-DP ones; convert the "
            "zCDP/RDP members to (eps, delta) first."
        )
    # Mixed zCDP / pure / RDP: add the Rényi curves (a pure member keeps its own min(eps, a eps^2/2)).
    return RDP(_SumCurve(gs, "sum"))


def compose_parallel(*guarantees: Guarantee) -> Guarantee:
    """Parallel composition over disjoint data (Azize & Basu 2023a, Lemma 1; Azize & Basu 2023b, Lemma 11): the worst part."""
    gs = _check_guarantees(guarantees)
    kinds = {type(g) for g in gs}
    if kinds == {ZCDP}:
        return ZCDP(max(g.rho for g in cast("tuple[ZCDP, ...]", gs)))
    if kinds == {PureDP}:
        return PureDP(max(g.epsilon for g in cast("tuple[PureDP, ...]", gs)))
    if kinds <= {PureDP, ApproxDP}:
        eps = cast("tuple[PureDP | ApproxDP, ...]", gs)
        return ApproxDP(max(g.epsilon for g in eps), max(getattr(g, "delta", 0.0) for g in eps))
    if ApproxDP in kinds:
        raise DPAuditError(
            "an (eps, delta)-DP guarantee and a zCDP/RDP guarantee have no common worst case; convert "
            "them to (eps, delta) first."
        )
    return RDP(_SumCurve(gs, "max"))
