"""Composition: of declared guarantees (sequential, parallel) and of noise releases (exact where possible).

* :func:`compose_sequential` — adaptive sequential composition of guarantees: zCDP adds rho
  (Bun & Steinke 2016, Lemma 2.3), pure DP adds eps, RDP curves add order by order (Mironov 2017,
  Prop. 1), (eps, delta)-DP adds both (basic composition, Dwork & Roth 2014, Thm 3.16). Mixed
  types without an (eps, delta) member compose as RDP curves.
* :func:`compose_parallel` — the same mechanism type applied to disjoint parts of the data
  (seed 001 Lemma 1 / App. D, seed 004 Lemma 11): the guarantee of the worst part.
* :class:`NoiseAccount` — a composition of concrete releases (Gaussian multipliers mu_i = D_i /
  sigma_i and Laplace eps_i = D_i / b_i), with the exact answer first: Gaussians only -> one
  Gaussian with mu = sqrt(sum mu_i^2) and Balle & Wang's exact profile; one Laplace -> its closed
  form; anything else (Laplace with Laplace or Gaussian) -> dp-accounting's PLD accountant
  (``privacy_loss_distribution``, pessimistic estimate, discretisation 1e-3 by default: an upper
  bound, so valid). The Rényi curve is exact for every mix (Gaussian alpha mu^2/2 plus Mironov's
  Laplace formula).
* :func:`per_round_account` — per-round ("per user") accounting of a ledger given as plain arrays:
  each round's guarantee is the composition of the releases that round fed; the run's realised
  guarantee is its worst round (parallel composition over rounds). This module takes arrays so the
  accountants import nothing from dpaudit's core; ``dpaudit.accounting`` turns a Ledger into them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .conversions import Conversion, cks_epsilon, rdp_curve_to_approx
from dpaudit.errors import DPAuditError, check_delta, check_int, check_nonnegative
from .gaussian import gaussian_epsilon, laplace_epsilon, laplace_renyi
from .guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP

__all__ = [
    "compose_sequential",
    "compose_parallel",
    "NoiseAccount",
    "RoundAccount",
    "per_round_account",
    "PLD_DISCRETISATION",
]

#: value_discretization_interval of the PLD accountant (smaller is tighter and slower).
PLD_DISCRETISATION = 1e-3


class _SumCurve:
    """Order-wise sum of Rényi curves (picklable, named for describe())."""

    def __init__(self, parts: tuple[Guarantee, ...], how: str = "sum") -> None:
        self.parts = parts
        self.how = how
        self.__name__ = f"{how}({', '.join(p.describe() for p in parts)})"

    def __call__(self, alpha: float) -> float:
        vals = [p.renyi(alpha) for p in self.parts]
        return float(sum(vals) if self.how == "sum" else max(vals))


def _check_guarantees(guarantees: tuple) -> tuple[Guarantee, ...]:
    if not guarantees:
        raise DPAuditError("composition needs at least one guarantee, got none.")
    from .guarantees import as_guarantee  # a dp-accounting DpEvent is converted exactly (issue 11)

    return tuple(as_guarantee(g) for g in guarantees)


def compose_sequential(*guarantees: Guarantee) -> Guarantee:
    """Adaptive sequential composition (see the module docstring for the rule per type)."""
    gs = _check_guarantees(guarantees)
    if len(gs) == 1:
        return gs[0]
    kinds = {type(g) for g in gs}
    if kinds == {ZCDP}:
        return ZCDP(sum(g.rho for g in gs))
    if kinds == {PureDP}:
        return PureDP(sum(g.epsilon for g in gs))
    if kinds <= {PureDP, ApproxDP}:
        return ApproxDP(sum(g.epsilon for g in gs), min(sum(getattr(g, "delta", 0.0) for g in gs), 1 - 1e-16))
    if ApproxDP in kinds:
        raise DPAuditError(
            "an (eps, delta)-DP guarantee composes only with pure or (eps, delta)-DP ones; convert the "
            "zCDP/RDP members to (eps, delta) first."
        )
    # Mixed zCDP / pure / RDP: add the Rényi curves (a pure member keeps its own min(eps, a eps^2/2)).
    return RDP(_SumCurve(gs, "sum"))


def compose_parallel(*guarantees: Guarantee) -> Guarantee:
    """Parallel composition over disjoint data (seed 001 Lemma 1, seed 004 Lemma 11): the worst part."""
    gs = _check_guarantees(guarantees)
    kinds = {type(g) for g in gs}
    if kinds == {ZCDP}:
        return ZCDP(max(g.rho for g in gs))
    if kinds == {PureDP}:
        return PureDP(max(g.epsilon for g in gs))
    if kinds <= {PureDP, ApproxDP}:
        return ApproxDP(max(g.epsilon for g in gs), max(getattr(g, "delta", 0.0) for g in gs))
    if ApproxDP in kinds:
        raise DPAuditError(
            "an (eps, delta)-DP guarantee and a zCDP/RDP guarantee have no common worst case; convert "
            "them to (eps, delta) first."
        )
    return RDP(_SumCurve(gs, "max"))


# ---- composition of concrete releases ---------------------------------------------------------------

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
        from .gaussian import gaussian_mu

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

    def guarantee(self) -> Guarantee:
        """The tightest Guarantee object: ZCDP for Gaussians only, PureDP for Laplace only, else RDP."""
        if not self.laplace_eps:
            return ZCDP(self.mu**2 / 2)
        if not self.gaussian_mu:
            return PureDP(sum(self.laplace_eps))
        return RDP(_NoiseCurve(self))

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

        pld = None
        if self.mu > 0:
            pld = pld_mod.from_gaussian_mechanism(1.0 / self.mu, 1.0, value_discretization_interval=discretisation)
        for e, count in sorted(Counter(e for e in self.laplace_eps if e > 0).items()):
            part = pld_mod.from_laplace_mechanism(1.0 / e, 1.0, value_discretization_interval=discretisation)
            if count > 1:
                part = part.self_compose(count)
            pld = part if pld is None else pld.compose(part)
        eps = float(pld.get_epsilon_for_delta(delta))
        return Conversion(max(0.0, eps), delta, "pld", None)


class _NoiseCurve:
    def __init__(self, account: NoiseAccount) -> None:
        self.account = account
        self.__name__ = f"{len(account.gaussian_mu)} Gaussian + {len(account.laplace_eps)} Laplace releases"

    def __call__(self, alpha: float) -> float:
        return float(self.account.renyi(alpha))


# ---- per-round accounting -------------------------------------------------------------------------

#: Orders on which per-round Rényi curves are ranked when Laplace releases are present.
RANK_ORDERS = np.concatenate([1 + np.geomspace(1e-2, 1e3, 60)])


@dataclass
class RoundAccount:
    """Per (run, round) composition of the releases each round fed.

    ``mu2[r, t]``: sum of (D/sigma)^2 over the Gaussian releases round t fed in run r;
    ``lap_eps[r, t]``: sum of D/b over its Laplace releases; ``usage[r, t]``: number of releases.
    The Laplace terms are kept per entry (``lap_run``, ``lap_round``, ``lap_eps_i``) so a round's
    exact composition can be rebuilt.
    """

    mu2: np.ndarray
    lap_eps: np.ndarray
    usage: np.ndarray
    lap_run: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lap_round: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lap_eps_i: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_runs(self) -> int:
        return int(self.mu2.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.mu2.shape[1])

    def round_account(self, run: int, rnd: int) -> NoiseAccount:
        """The exact composition of the releases round ``rnd`` fed in run ``run``."""
        sel = (self.lap_run == run) & (self.lap_round == rnd)
        mus = (math.sqrt(self.mu2[run, rnd]),) if self.mu2[run, rnd] > 0 else ()
        return NoiseAccount(mus, tuple(float(e) for e in self.lap_eps_i[sel]))

    def renyi(self, alpha: float | np.ndarray) -> np.ndarray:
        """(n_runs, horizon[, n_orders]) per-round D_alpha of the composition."""
        a = np.atleast_1d(np.asarray(alpha, dtype=float))
        out = self.mu2[..., None] * a / 2
        if self.lap_eps_i.size:
            flat = self.lap_run * self.horizon + self.lap_round
            # releases share few distinct eps_i: evaluate the Laplace curve once per distinct value
            eps_u, inv = np.unique(self.lap_eps_i, return_inverse=True)
            table = laplace_renyi(a[None, :], eps_u[:, None])  # (distinct eps, orders)
            size = self.n_runs * self.horizon
            add = np.stack([np.bincount(flat, weights=table[inv, j], minlength=size) for j in range(a.size)], axis=1)
            out = out + add.reshape(self.n_runs, self.horizon, a.size)
        return out[..., 0] if np.ndim(alpha) == 0 else out

    def worst_round(self) -> tuple[int, int]:
        """(run, round) of the largest per-round guarantee.

        Gaussian only: the largest mu^2 (exact, the profile is monotone in mu). With Laplace members
        rounds are ranked by their CKS epsilon at delta = 1e-6 over a grid of orders (a heuristic
        ranking; the chosen round is then accounted exactly).
        """
        if not self.lap_eps_i.size:
            idx = int(np.argmax(self.mu2))
        else:
            curves = self.renyi(RANK_ORDERS)
            score = np.min(cks_epsilon(RANK_ORDERS, curves, 1e-6), axis=-1)
            idx = int(np.argmax(score))
        return divmod(idx, self.horizon)

    def shared_rounds(self) -> np.ndarray:
        """(k, 3) rows (run, round, number of releases) for every round fed to more than one release."""
        r, t = np.nonzero(self.usage > 1)
        return np.stack([r, t, self.usage[r, t]], axis=1) if r.size else np.zeros((0, 3), dtype=np.int64)

    def guarantee(self) -> Guarantee:
        """The ledger-implied guarantee over all runs: the worst round (parallel composition)."""
        if not self.lap_eps_i.size:
            return ZCDP(float(np.max(self.mu2)) / 2 if self.mu2.size else 0.0)
        if not np.any(self.mu2 > 0):
            return PureDP(float(np.max(self.lap_eps)))
        return RDP(_MaxRoundCurve(self))


class _MaxRoundCurve:
    """alpha -> max over (run, round) of the round's exact D_alpha (parallel composition over rounds)."""

    def __init__(self, account: RoundAccount) -> None:
        self.account = account
        self.__name__ = "worst round of the ledger"

    def __call__(self, alpha: float) -> float:
        return float(np.max(self.account.renyi(float(alpha))))


def per_round_account(
    n_runs: int,
    horizon: int,
    run: np.ndarray,
    rnd: np.ndarray,
    kind: np.ndarray,
    ratio: np.ndarray,
) -> RoundAccount:
    """Compose, for every (run, round), the releases that round fed.

    One entry per (release, run, round): ``run``, ``rnd`` (round index), ``kind`` (True for Gaussian,
    False for Laplace) and ``ratio`` (sensitivity / noise scale for that release and run). A round
    appearing in several entries of the same run was used by several releases and they compose
    (sequentially); distinct rounds compose in parallel.
    """
    n_runs = check_int("n_runs", n_runs, minimum=1)
    horizon = check_int("horizon", horizon, minimum=1)
    run = np.asarray(run, dtype=np.int64)
    rnd = np.asarray(rnd, dtype=np.int64)
    kind = np.asarray(kind, dtype=bool)
    ratio = np.asarray(ratio, dtype=float)
    if not (run.shape == rnd.shape == kind.shape == ratio.shape) or run.ndim != 1:
        raise DPAuditError("per-round accounting needs four one-dimensional arrays of the same length.")
    if run.size and (run.min() < 0 or run.max() >= n_runs):
        raise DPAuditError(f"a ledger entry names run {int(run.max())}, outside 0..{n_runs - 1}.")
    if rnd.size and (rnd.min() < 0 or rnd.max() >= horizon):
        raise DPAuditError(f"a ledger entry names round {int(rnd.max())}, outside 0..{horizon - 1}.")
    if np.any(~np.isfinite(ratio)) or np.any(ratio < 0):
        raise DPAuditError("every sensitivity / noise-scale ratio must be a non-negative finite number.")
    flat = run * horizon + rnd
    size = n_runs * horizon
    mu2 = np.bincount(flat[kind], weights=ratio[kind] ** 2, minlength=size).reshape(n_runs, horizon)
    lap = np.bincount(flat[~kind], weights=ratio[~kind], minlength=size).reshape(n_runs, horizon)
    usage = np.bincount(flat, minlength=size).reshape(n_runs, horizon)
    return RoundAccount(mu2, lap, usage, run[~kind], rnd[~kind], ratio[~kind])


__all__ += ["RANK_ORDERS"]
