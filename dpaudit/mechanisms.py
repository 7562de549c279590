"""Mechanisms: the only way a policy touches private data, and the ledger that records it.

A mechanism takes a statistic (batched over runs), its sensitivity and its calibration, returns the
noisy release and appends a :class:`Release` to the run batch's :class:`Ledger`. A release records
which rounds fed it and, for each such round, how the centre moves when that round's reward
changes by one unit (``coef``). For the linear statistics of the seed policies (sums, means,
sum of a_t r_t) this is exact, so the centre under a neighbouring input with the same history is
``centre + coef * (r' - r)`` and the gray-box attacks can compute the exact privacy loss.

Ledgers are batched: one ``Release`` per mechanism call holds arrays over the runs that released,
never one Python object per run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dpaudit.accountants import ZCDP, Guarantee, PureDP
from dpaudit.errors import DPAuditError, check_nonnegative, check_order, check_positive

__all__ = [
    "Noise",
    "Fed",
    "Release",
    "Ledger",
    "GaussianMechanism",
    "LaplaceMechanism",
    "PreDrawn",
]

NoiseKind = Literal["gaussian", "laplace"]


@dataclass(frozen=True)
class Noise:
    """An additive noise distribution: ``gaussian`` (scale = standard deviation) or ``laplace``."""

    kind: NoiseKind
    scale: np.ndarray  # broadcastable against the released values

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if self.kind == "gaussian":
            return rng.standard_normal(shape) * self.scale
        return rng.laplace(0.0, 1.0, shape) * self.scale

    def logpdf(self, x: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """Log-density of the release ``x`` around ``centre``, summed over the last axis."""
        z = (np.asarray(x) - np.asarray(centre)) / self.scale
        if self.kind == "gaussian":
            lp = -0.5 * z**2 - np.log(self.scale) - 0.5 * math.log(2 * math.pi)
        else:
            lp = -np.abs(z) - np.log(2 * self.scale)
        return np.sum(lp, axis=-1) if np.ndim(lp) > 1 else lp


class PreDrawn:
    """Standard draws made in advance, handed to a mechanism in place of a generator.

    Policies whose per-step and episode-level paths group releases differently draw each
    release's standard noise from a fixed place (e.g. entry (run, arm) of the k-th block drawn
    from the policy's generator), so both paths release identical values on fixed inputs. The
    mechanism still applies its own scale, so the ledger records exactly what was added.
    """

    def __init__(self, z: np.ndarray) -> None:
        self.z = np.asarray(z, dtype=float)

    def _get(self, shape: tuple[int, ...]) -> np.ndarray:
        if tuple(shape) != self.z.shape:
            raise DPAuditError(f"pre-drawn noise has shape {self.z.shape}, but the mechanism asked for {tuple(shape)}.")
        return self.z

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._get(shape)

    def laplace(self, loc: float, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        if loc != 0.0 or scale != 1.0:
            raise DPAuditError("pre-drawn Laplace noise is standard (loc 0, scale 1).")
        return self._get(shape)


@dataclass(frozen=True)
class Fed:
    """The rounds that fed a batched release, in coordinate form.

    ``pos[i]`` is the position (among the releasing runs) of the i-th (run, round) entry,
    ``rounds[i]`` the round, and ``coef[i]`` (shape ``(m,)`` per entry) the change of the centre
    per unit change of that round's reward.
    """

    pos: np.ndarray
    rounds: np.ndarray
    coef: np.ndarray

    @classmethod
    def interval(cls, start: np.ndarray, stop: np.ndarray, coef: np.ndarray | float) -> "Fed":
        """Every round in ``[start[i], stop[i])`` fed release ``i`` with the same ``coef[i]``."""
        start = np.asarray(start, dtype=np.int64)
        stop = np.asarray(stop, dtype=np.int64)
        lengths = stop - start
        if np.any(lengths < 0):
            raise DPAuditError("a release's rounds must satisfy start <= stop.")
        pos = np.repeat(np.arange(start.size), lengths)
        offsets = np.arange(pos.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        rounds = start[pos] + offsets
        coef_arr = np.broadcast_to(np.asarray(coef, dtype=float), (start.size,) if np.ndim(coef) <= 1 else np.shape(coef))
        coef_arr = coef_arr.reshape(start.size, -1)[pos]
        return cls(pos, rounds, coef_arr)


@dataclass(frozen=True)
class Release:
    """One batched call of a mechanism at step ``step``."""

    label: str
    step: int
    noise: Noise
    sensitivity: float
    runs: np.ndarray  # (n,) indices of the runs that released
    centre: np.ndarray  # (n, m) exact statistic
    value: np.ndarray  # (n, m) noisy release
    fed: Fed | None = None
    arm: np.ndarray | None = None  # (n,) the arm the statistic is about, where there is one

    def logpdf(self, centre: np.ndarray | None = None) -> np.ndarray:
        """Log-density of each run's release at ``centre`` (default: its own centre)."""
        c = self.centre if centre is None else centre
        scale = self.noise.scale
        noise = Noise(self.noise.kind, scale if np.ndim(scale) == 0 else scale.reshape(-1, 1))
        return noise.logpdf(self.value, c)


@dataclass
class Ledger:
    """Every release of a batch of ``n_runs`` runs, in order."""

    n_runs: int
    releases: list[Release] = field(default_factory=list)
    enabled: bool = True

    def __post_init__(self) -> None:  # validation (issue 12): Ledger(-1) used to be accepted
        if isinstance(self.n_runs, bool) or not isinstance(self.n_runs, (int, np.integer)) or self.n_runs < 1:
            raise DPAuditError(f"a ledger's n_runs must be an integer >= 1, got {self.n_runs!r}.")

    def record(self, release: Release) -> None:
        if self.enabled:
            self.releases.append(release)

    def __len__(self) -> int:
        return len(self.releases)

    def round_usage(self, horizon: int) -> np.ndarray:
        """(n_runs, horizon) counts: how many releases each round fed, per run.

        A count above one for a round means that round's data was used by several releases; the
        per-round accounting composes them (this is how a missing "forgetting" step shows).
        """
        usage = np.zeros((self.n_runs, horizon), dtype=np.int64)
        for rel in self.releases:
            if rel.fed is None:
                continue
            np.add.at(usage, (rel.runs[rel.fed.pos], rel.fed.rounds), 1)
        return usage


class _Additive:
    kind: NoiseKind

    def __init__(self, sensitivity: float, scale: float | np.ndarray) -> None:
        self.sensitivity = check_positive("sensitivity", sensitivity)
        try:
            scale = np.asarray(scale, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"the noise scale must be a positive finite number or array, got {scale!r}.") from None
        if scale.size == 0 or np.any(~(scale > 0)) or np.any(~np.isfinite(scale)):
            raise DPAuditError(f"the noise scale must be positive and finite, got {scale!r}.")
        self.scale = scale

    def release(
        self,
        centre: np.ndarray,
        rng: np.random.Generator,
        *,
        ledger: Ledger | None = None,
        label: str = "",
        step: int = -1,
        runs: np.ndarray | None = None,
        fed: Fed | None = None,
        arm: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return ``centre + noise`` (same shape) and record the release in ``ledger``."""
        # a copy: the ledger keeps the centre, and a caller that reuses its buffer (zeroes its sums after
        # the release) must not rewrite history (a view here made such a policy's ledger wrong)
        try:
            centre = np.array(centre, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"the statistic released as {label or 'a release'} must be numbers, got "
                               f"{type(centre).__name__}.") from None
        if not np.all(np.isfinite(centre)):
            raise DPAuditError(f"the statistic released as {label or 'a release'} contains NaN or inf.")
        try:
            np.broadcast_shapes(self.scale.shape, centre.shape)
        except ValueError:
            raise DPAuditError(f"the noise scale of shape {self.scale.shape} does not fit the statistic of shape "
                               f"{centre.shape} released as {label or 'a release'}.") from None
        if not isinstance(rng, (np.random.Generator, PreDrawn)):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        noise = Noise(self.kind, self.scale)
        value = centre + noise.sample(rng, centre.shape)
        if ledger is not None and ledger.enabled:
            c2 = centre.reshape(centre.shape[0], -1) if centre.ndim else centre.reshape(1, 1)
            v2 = value.reshape(c2.shape)
            if runs is None:
                runs = np.arange(c2.shape[0])
            scale = np.broadcast_to(self.scale, (c2.shape[0],)) if self.scale.ndim <= 1 else self.scale
            ledger.record(
                Release(label, step, Noise(self.kind, np.array(scale, dtype=float)), self.sensitivity,
                        np.asarray(runs), c2, v2, fed, None if arm is None else np.asarray(arm))
            )
        return value

    def guarantee(self) -> Guarantee:
        raise NotImplementedError


class GaussianMechanism(_Additive):
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
        """sigma = Delta / sqrt(2 rho): the calibration of seed 001 (App. C, Lemma 4)."""
        rho = check_positive("rho", rho)
        return cls(sensitivity, sensitivity / math.sqrt(2 * rho))

    @classmethod
    def for_rdp(cls, alpha: float, epsilon: float, sensitivity: float = 1.0) -> "GaussianMechanism":
        """sigma = Delta sqrt(alpha / (2 eps)), so D_alpha = eps exactly (seed 004, Lemma 2)."""
        alpha = check_order(alpha)
        epsilon = check_positive("epsilon", epsilon)
        return cls(sensitivity, sensitivity * math.sqrt(alpha / (2 * epsilon)))

    def guarantee(self) -> Guarantee:
        return ZCDP(float(np.max(self.sensitivity**2 / (2 * self.scale**2))))


class LaplaceMechanism(_Additive):
    """Additive Laplace(0, b) noise on a statistic of L1-sensitivity ``sensitivity``: (Delta/b)-DP."""

    kind: NoiseKind = "laplace"

    @classmethod
    def for_pure(cls, epsilon: float, sensitivity: float = 1.0) -> "LaplaceMechanism":
        """b = Delta / eps (Dwork et al. 2006)."""
        epsilon = check_positive("epsilon", epsilon)
        return cls(sensitivity, sensitivity / epsilon)

    def guarantee(self) -> Guarantee:
        return PureDP(float(np.max(self.sensitivity / self.scale)))


def gaussian_renyi(alpha: float, sigma: float, sensitivity: float = 1.0) -> float:
    """D_alpha(N(0, s^2) || N(Delta, s^2)) = alpha Delta^2 / (2 s^2)."""
    check_order(alpha)
    check_positive("sigma", sigma)
    check_nonnegative("sensitivity", sensitivity)
    return alpha * sensitivity**2 / (2 * sigma**2)


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


__all__ += ["gaussian_renyi", "laplace_renyi"]
