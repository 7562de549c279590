"""Per-round accounting of a ledger: each round's guarantee is the composition of the releases it fed.

:func:`per_round_account` takes a ledger given as plain arrays (one entry per release, run and round):
each round's guarantee is the sequential composition of the releases that round fed
(:class:`~dpaudit.accountants.noise.NoiseAccount`, exact where possible); the run's realised guarantee is
its worst round (parallel composition over rounds: Azize & Basu 2023a, "Concentrated Differential Privacy
for Bandits", Lemma 1). This module takes arrays so the accountants import nothing from dpaudit's core; :mod:`dpaudit.accounting` turns a Ledger into them.
Composition of declared guarantees (:func:`compose_sequential`, :func:`compose_parallel`) lives with the
guarantees (:mod:`dpaudit.accountants.guarantees`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dpaudit.errors import DPAuditError, check_int

from .conversions import cks_epsilon
from .gaussian import laplace_renyi
from .guarantees import RDP, ZCDP, Guarantee, PureDP
from .noise import NoiseAccount

__all__ = ["RoundAccount", "per_round_account", "RANK_ORDERS"]


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

    def round_guarantee(self, run: int, rnd: int) -> Guarantee:
        """The tightest Guarantee of round ``rnd``'s composition in run ``run``: ZCDP for Gaussians only,
        PureDP for Laplace only, else RDP with the exact Rényi curve."""
        acc = self.round_account(run, rnd)
        if not acc.laplace_eps:
            return ZCDP(acc.mu**2 / 2)
        if not acc.gaussian_mu:
            return PureDP(sum(acc.laplace_eps))
        return RDP(_NoiseCurve(acc))

    def renyi(self, alpha: float | np.ndarray) -> np.ndarray:
        """(n_runs, horizon[, n_orders]) per-round D_alpha of the composition."""
        a = np.atleast_1d(np.asarray(alpha, dtype=float))
        out = self.mu2[..., None] * a / 2
        if self.lap_eps_i.size:
            flat = self.lap_run * self.horizon + self.lap_round
            # releases share few distinct eps_i: evaluate the Laplace curve once per distinct value
            eps_u, inv = np.unique(self.lap_eps_i, return_inverse=True)
            table = np.asarray(laplace_renyi(a[None, :], eps_u[:, None]))  # (distinct eps, orders)
            size = self.n_runs * self.horizon
            add = np.stack([np.bincount(flat, weights=table[inv, j], minlength=size) for j in range(a.size)], axis=1)
            out = out + add.reshape(self.n_runs, self.horizon, a.size)
        per_round: np.ndarray = out[..., 0] if np.ndim(alpha) == 0 else out
        return per_round

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

