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

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dpaudit.accountants import ZCDP, Guarantee, PureDP
from dpaudit.errors import DPAuditError, check_nonnegative, check_order, check_positive

__all__ = [
    "Noise",
    "Fed",
    "FedBlocks",
    "Release",
    "release_family",
    "Ledger",
    "GaussianMechanism",
    "LaplaceMechanism",
    "PreDrawn",
    "ReplayMismatch",
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
    per unit change of that round's reward. A release fed by long runs of consecutive rounds is better
    recorded as blocks (:meth:`blocks`, :meth:`interval`): the same object, expanded only when asked.
    """

    pos: np.ndarray
    rounds: np.ndarray
    coef: np.ndarray

    def at_round(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """The entries of round ``j``: their positions (n_j,) and coefficients (n_j, m)."""
        sel = np.asarray(self.rounds) == j
        coef = np.asarray(self.coef, dtype=float)
        return np.asarray(self.pos)[sel], coef.reshape(coef.shape[0], -1)[sel]

    @classmethod
    def blocks(cls, pos: np.ndarray, start: np.ndarray, length: np.ndarray, coef: np.ndarray | float) -> "Fed":
        """Block ``b`` is rounds ``start[b] .. start[b] + length[b] - 1`` of the run at position ``pos[b]``,
        each with the coefficient ``coef[b]`` (a scalar, (B,) or (B, m)). Kept as blocks (:class:`FedBlocks`):
        an attack that asks for one round (:meth:`at_round`) never expands the phase into its rounds."""
        return FedBlocks(pos, start, length, coef)

    @classmethod
    def interval(cls, start: np.ndarray, stop: np.ndarray, coef: np.ndarray | float) -> "Fed":
        """Every round in ``[start[i], stop[i])`` fed release ``i`` with the same ``coef[i]``."""
        start = np.asarray(start, dtype=np.int64)
        stop = np.asarray(stop, dtype=np.int64)
        return FedBlocks(np.arange(start.size), start, stop - start, coef)


class FedBlocks(Fed):
    """:class:`Fed` as blocks of consecutive rounds (:meth:`Fed.blocks`); ``pos``, ``rounds`` and ``coef``
    are the coordinate form, expanded once on first use."""

    def __init__(self, pos: np.ndarray, start: np.ndarray, length: np.ndarray, coef: np.ndarray | float) -> None:
        pos = np.asarray(pos, dtype=np.int64).reshape(-1)
        start = np.asarray(start, dtype=np.int64).reshape(-1)
        length = np.asarray(length, dtype=np.int64).reshape(-1)
        if not pos.size == start.size == length.size:
            raise DPAuditError(f"a release's blocks need as many positions, starts and lengths; got {pos.size}, "
                               f"{start.size} and {length.size}.")
        if np.any(length < 0):
            raise DPAuditError("a release's rounds must satisfy start <= stop.")
        c = np.asarray(coef, dtype=float)
        c = np.broadcast_to(c, (pos.size,) if c.ndim <= 1 else c.shape).reshape(pos.size, -1)
        for name, value in (("block_pos", pos), ("block_start", start), ("block_length", length), ("block_coef", c)):
            object.__setattr__(self, name, value)

    def _expanded(self) -> Fed:
        cached = self.__dict__.get("_coordinates")
        if cached is None:
            lengths = self.block_length
            idx = np.repeat(np.arange(lengths.size), lengths)
            offsets = np.arange(idx.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            cached = Fed(self.block_pos[idx], self.block_start[idx] + offsets, self.block_coef[idx])
            object.__setattr__(self, "_coordinates", cached)
        return cached

    @property  # type: ignore[override]
    def pos(self) -> np.ndarray:
        return self._expanded().pos

    @property  # type: ignore[override]
    def rounds(self) -> np.ndarray:
        return self._expanded().rounds

    @property  # type: ignore[override]
    def coef(self) -> np.ndarray:
        return self._expanded().coef

    def at_round(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        sel = (self.block_start <= j) & (j < self.block_start + self.block_length)
        return self.block_pos[sel], self.block_coef[sel]

    def __repr__(self) -> str:
        return f"FedBlocks({self.block_pos.size} blocks, {int(self.block_length.sum())} rounds)"


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

    @property
    def family(self) -> str:
        """The mechanism the release came from: its label before any bracket or parenthesis (``H-tree`` of
        ``H-tree[level 0, rounds 0..0]``, ``PGD gradient`` of ``PGD gradient (step 3)``)."""
        return release_family(self.label)

    def logpdf(self, centre: np.ndarray | None = None) -> np.ndarray:
        """Log-density of each run's release at ``centre`` (default: its own centre)."""
        c = self.centre if centre is None else centre
        scale = self.noise.scale
        noise = Noise(self.noise.kind, scale if np.ndim(scale) == 0 else scale.reshape(-1, 1))
        return noise.logpdf(self.value, c)


def release_family(label: str) -> str:
    """A release label's mechanism (:attr:`Release.family`): the label before its first ``[`` or `` (``."""
    return re.split(r"\[| \(", str(label), maxsplit=1)[0].strip()


class ReplayMismatch(DPAuditError):
    """A replayed run asked its mechanisms for a release the recorded run did not make (:meth:`Ledger.replay`)."""


@dataclass
class Ledger:
    """Every release of a batch of ``n_runs`` runs, in order.

    A ledger can also *replay* a recorded run (:meth:`replay`): the same policy, run again with the same
    generator on a neighbouring input, gets from every mechanism call the value the recorded run
    released, while the ledger records the centre computed from the new input. Release ``k`` of the
    replay then holds the recorded value and its centre under the neighbouring input, holding every
    release fixed; with release ``k`` of the recorded run this gives the exact privacy loss of the run
    (the joint-DP gray-box attack, :mod:`dpaudit.attacks.joint_likelihood`). The mechanisms of this module
    honour it (:class:`GaussianMechanism`, :class:`LaplaceMechanism`, :class:`BinaryTreeMechanism`); a
    release made elsewhere shows as a value that differs from the recorded one.
    """

    n_runs: int
    releases: list[Release] = field(default_factory=list)
    enabled: bool = True
    #: the recorded releases being replayed (None: an ordinary ledger)
    replaying: list[Release] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:  # validation (issue 12): Ledger(-1) used to be accepted
        if isinstance(self.n_runs, bool) or not isinstance(self.n_runs, (int, np.integer)) or self.n_runs < 1:
            raise DPAuditError(f"a ledger's n_runs must be an integer >= 1, got {self.n_runs!r}.")

    def record(self, release: Release) -> None:
        if self.enabled:
            self.releases.append(release)

    def replay(self, releases: list[Release]) -> None:
        """Replay ``releases`` (a recorded run's, in order, over the same ``n_runs``) from now on: every
        mechanism call returns the value of the recorded release it corresponds to (:meth:`replayed`)."""
        if not self.enabled or self.releases:
            raise DPAuditError("a ledger replays a recorded run only when it records and has recorded nothing yet.")
        self.replaying = list(releases)

    def replayed(self, label: str, step: int, runs: np.ndarray | None, value: np.ndarray) -> np.ndarray:
        """The value a mechanism releases: ``value`` (centre + fresh noise), or while replaying the value of
        the next recorded release, which must be the same call (label, step, runs and shape), else
        :class:`ReplayMismatch`. The fresh noise is drawn either way, so the generator stays in step."""
        if self.replaying is None or not self.enabled:
            return value
        k = len(self.releases)
        if k >= len(self.replaying):
            raise ReplayMismatch(f"the replayed run made a release ({label!r} at step {step}) after the last of the "
                                 f"{len(self.replaying)} releases of the recorded run.")
        rec = self.replaying[k]
        n = value.shape[0] if value.ndim else 1
        same_runs = np.array_equal(np.asarray(rec.runs), np.arange(n) if runs is None else np.asarray(runs))
        if rec.label != label or rec.step != step or not same_runs or rec.value.size != value.size:
            raise ReplayMismatch(f"release {k} of the replayed run ({label!r} at step {step}, {value.size} values) is "
                                 f"not the recorded run's ({rec.label!r} at step {rec.step}, {rec.value.size} values): "
                                 "the calls to the mechanisms depend on the input other than through the releases.")
        return rec.value.reshape(value.shape).copy()  # the policy may change what it gets in place

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
        if not np.isfinite(centre).all():
            raise DPAuditError(f"the statistic released as {label or 'a release'} contains NaN or inf.")
        try:
            if self.scale.ndim:  # a scalar scale fits every shape
                np.broadcast_shapes(self.scale.shape, centre.shape)
        except ValueError:
            raise DPAuditError(f"the noise scale of shape {self.scale.shape} does not fit the statistic of shape "
                               f"{centre.shape} released as {label or 'a release'}.") from None
        if not isinstance(rng, (np.random.Generator, PreDrawn)):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        noise = Noise(self.kind, self.scale)
        value = centre + noise.sample(rng, centre.shape)
        if ledger is not None and ledger.replaying is not None:
            value = ledger.replayed(label, step, runs, value)
        if ledger is not None and ledger.enabled:
            c2 = centre.reshape(centre.shape[0], -1) if centre.ndim else centre.reshape(1, 1)
            v2 = value.reshape(c2.shape)
            if runs is None:
                runs = np.arange(c2.shape[0])
            if self.scale.ndim == 0:  # np.broadcast_to's values, without its cost per call (a release per step)
                scale = np.full(c2.shape[0], self.scale)
            else:
                scale = np.array(np.broadcast_to(self.scale, (c2.shape[0],)) if self.scale.ndim == 1 else self.scale, dtype=float)
            ledger.record(
                Release(label, step, Noise(self.kind, scale), self.sensitivity,
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


# ==================================================================================================
# Local channels (issue 10: local DP). Seed 000 "DP channel" / "Gaussian channel"; seed 003 Alg. 1, 5.
# A channel is a per-user mechanism: user t's private data z_t goes in, one message o_t comes out.
# Each message is recorded in the Ledger with its noise, its scale and the sensitivity OVER THE
# WHOLE DATA DOMAIN (sup over z, z' of |F(z) - F(z')|), so the per-user guarantee is computable
# from the ledger alone. Appended section; the code above is untouched.
# ==================================================================================================

def symmetric_gaussian(rng: np.random.Generator, shape_prefix: tuple[int, ...], d: int, sigma: float | np.ndarray) -> np.ndarray:
    """Symmetric Gaussian matrices Z (shape ``shape_prefix + (d, d)``): Z_ij = Z_ji i.i.d. N(0, sigma^2) for i <= j.

    Seed 000 ("Further, for any symmetric matrix V ... Z_ij = Z_ji ~ N(0, 4 sigma_a^2 Delta^2)
    independently") and seed 003 Alg. 5 line 9 (B_t(i, j) i.i.d. for i <= j, B(j, i) = B(i, j)):
    the upper triangle (diagonal included) is drawn, row by row, and mirrored.
    """
    d = _check_dim("d", d)
    prefix = tuple(int(s) for s in shape_prefix)
    full = _packed_index(d)  # entry (i, j) of the matrix is packed coordinate (min(i, j), max(i, j))
    upper = rng.standard_normal(prefix + (d * (d + 1) // 2,)) * np.asarray(sigma, dtype=float)[..., None] \
        if np.ndim(sigma) else rng.standard_normal(prefix + (d * (d + 1) // 2,)) * float(sigma)
    return upper.take(full, axis=-1).reshape(prefix + (d, d))


def _matrix_rows(rows: np.ndarray, xt: np.ndarray, noise: np.ndarray) -> None:
    """``rows`` (d * d, n) = vec(x x^T + Z) of every user, one row per entry (row-major (i, j)), from ``xt`` = x^T
    (d, n) and ``noise`` (n, m): with m = d (d + 1) / 2, Z's upper triangles (``np.triu_indices`` order) and
    Z symmetric, each upper entry fl(x_i x_j + z_ij) formed once and mirrored (x_j x_i = x_i x_j exactly), so
    every matrix is exactly symmetric; with m = d * d, every entry's own noise. The same values as
    ``x x^T + symmetric_gaussian(...)`` elementwise. One row per entry runs every operation along the users
    (contiguous); a broadcast x x^T over (n, d, d) runs 3-long inner loops and costs 3 times as much."""
    d = xt.shape[0]
    if noise.shape[1] == d * d:
        i, j = np.divmod(np.arange(d * d), d)
        np.multiply(xt[i], xt[j], out=rows)
        rows += noise.T
        return
    iu = _triu(d)
    if xt.shape[1] >= 512:  # many users: entry by entry into its row, mirrored by a copy (no (m, n) temporary)
        nt = noise.T
        for p, (i, j) in enumerate(zip(iu[0].tolist(), iu[1].tolist())):
            row = rows[i * d + j]
            np.multiply(xt[i], xt[j], out=row)
            row += nt[p]
            if i != j:
                rows[j * d + i] = row
        return
    up = xt[iu[0]]  # (m, n)
    up *= xt[iu[1]]
    up += noise.T
    np.take(up, _packed_index(d), axis=0, out=rows)


@functools.lru_cache(maxsize=64)
def _triu(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(d)``, computed once per d (read-only)."""
    iu = np.triu_indices(d)
    for a in iu:
        a.flags.writeable = False
    return iu


@functools.lru_cache(maxsize=64)
def _packed_index(d: int) -> np.ndarray:
    """(d * d,) flat: the packed upper-triangle coordinate (``np.triu_indices`` order) of each entry (i, j)."""
    iu = _triu(d)
    full = np.empty((d, d), dtype=np.intp)
    full[iu[0], iu[1]] = np.arange(iu[0].size)
    full[iu[1], iu[0]] = np.arange(iu[0].size)
    full = full.ravel()
    full.flags.writeable = False
    return full


def _check_dim(name: str, value: object) -> int:
    """``value`` as an int >= 1 (a dimension), else DPAuditError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise DPAuditError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def _check_domain(domain: object) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in domain)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise DPAuditError(f"a channel's domain must be a pair (low, high) of numbers, got {domain!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"a channel's domain must be finite with low < high, got {domain!r}.")
    return lo, hi


def user_fed(n: int, step: int, coef: np.ndarray) -> Fed:
    """Each message fed by its own user's round ``step`` (coef: (n, m) change per unit of her reward)."""
    return Fed(np.arange(n), np.full(n, int(step), dtype=np.int64), np.asarray(coef, dtype=float).reshape(n, -1))


class Channel:
    """A per-user mechanism z -> o (seed 000, Def. "DP channel"; seed 003, Def. 1 "LDP").

    ``domain`` is the interval of user data the channel accepts (data outside it is refused, never
    clipped); ``sensitivity`` is sup over the domain of |F(z) - F(z')|; ``send`` privatises a batch
    of user data (one user per run) and records one ledger entry per batch; ``epsilon(delta)`` is the
    channel's *exact* epsilon at ``delta`` (from the exact privacy profile of its noise).
    """

    kind: str = ""
    domain: tuple[float, float]
    sensitivity: float
    #: the paper's calibration this channel was built with, for the calibration lint: (rule, eps, delta)
    calibration: tuple[str, float, float] | None = None

    def check_data(self, z: np.ndarray, label: str = "user data") -> np.ndarray:
        z = np.asarray(z, dtype=float)
        lo, hi = self.domain
        # the domain is finite, so min >= lo and max <= hi fail for NaN and inf too
        if z.size and not (z.min() >= lo and z.max() <= hi):
            if not np.all(np.isfinite(z)):
                raise DPAuditError(f"{label} contains NaN or inf; a channel's input must be finite.")
            bad = z[(z < lo) | (z > hi)].flat[0]
            raise DPAuditError(f"{label} value {bad:g} lies outside the channel's declared domain [{lo:g}, {hi:g}]; "
                               "the channel's guarantee covers only its domain, so it is refused (not clipped).")
        return z

    def send(self, z: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None, step: int = -1,
             runs: np.ndarray | None = None, label: str = "") -> np.ndarray:
        raise NotImplementedError

    def epsilon(self, delta: float) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class GaussianChannel(Channel):
    """o = z + N(0, sigma^2) for scalar z in [lo, hi] (sensitivity hi - lo); exact profile: Balle & Wang 2018.

    Calibrations: :meth:`seed003` (Alg. 1, sigma = 2B sqrt(2 ln(1.25/delta))/eps with |f| <= B, i.e.
    B = (hi - lo)/2 after centring) and :meth:`seed000` (Def. "Gaussian channel",
    Priv[Delta]{v} = N(v, 4 sigma_a^2 Delta^2), sigma_a = 2 sqrt(log(1.25/beta))/alpha, ||F(z)|| <= Delta,
    i.e. Delta = (hi - lo)/2 after centring and sigma = 2 sigma_a Delta).
    """

    kind = "gaussian"

    def __init__(self, domain: tuple[float, float], sigma: float) -> None:
        self.domain = _check_domain(domain)
        self.sigma = check_positive("sigma", sigma)
        self.sensitivity = self.domain[1] - self.domain[0]

    @classmethod
    def seed003(cls, epsilon: float, delta: float, domain: tuple[float, float] = (0.0, 1.0)) -> "GaussianChannel":
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        lo, hi = _check_domain(domain)
        B = (hi - lo) / 2
        ch = cls((lo, hi), 2 * B * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
        ch.calibration = ("seed003", epsilon, delta)
        return ch

    @classmethod
    def seed000(cls, alpha: float, beta: float, domain: tuple[float, float] = (0.0, 1.0)) -> "GaussianChannel":
        alpha = check_positive("alpha", alpha)
        from dpaudit.errors import check_delta

        beta = check_delta(beta, "beta")
        lo, hi = _check_domain(domain)
        sigma_a = 2 * math.sqrt(math.log(1.25 / beta)) / alpha
        ch = cls((lo, hi), 2 * sigma_a * (hi - lo) / 2)
        ch.calibration = ("seed000", alpha, beta)
        return ch

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        o = z + rng.standard_normal(z.shape) * self.sigma
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "gaussian channel", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        return gaussian_epsilon(delta, self.sigma, self.sensitivity).epsilon

    def describe(self) -> str:
        return f"Gaussian channel sigma = {self.sigma:.4g} on [{self.domain[0]:g}, {self.domain[1]:g}]"


class LaplaceChannel(Channel):
    """o = z + Lap(b) for scalar z in [lo, hi]: (hi - lo)/b-LDP (the usual pure-LDP baseline)."""

    kind = "laplace"

    def __init__(self, domain: tuple[float, float], b: float) -> None:
        self.domain = _check_domain(domain)
        self.b = check_positive("b", b)
        self.sensitivity = self.domain[1] - self.domain[0]

    @classmethod
    def for_pure(cls, epsilon: float, domain: tuple[float, float] = (0.0, 1.0)) -> "LaplaceChannel":
        epsilon = check_positive("epsilon", epsilon)
        lo, hi = _check_domain(domain)
        return cls((lo, hi), (hi - lo) / epsilon)

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        o = z + rng.laplace(0.0, 1.0, z.shape) * self.b
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "Laplace channel", int(step), Noise("laplace", np.full(n, self.b)),
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import laplace_epsilon

        return laplace_epsilon(delta, self.sensitivity / self.b).epsilon

    def describe(self) -> str:
        return f"Laplace channel b = {self.b:.4g} on [{self.domain[0]:g}, {self.domain[1]:g}]"


class RandomizedResponse(Channel):
    """Randomised response for a reward z in [0, 1]: draw a bit b ~ Bernoulli(z), send b with probability
    p = e^eps/(1 + e^eps), else 1 - b (Warner 1965; the LDP baseline for binary rewards).

    P(o = 1 | z) = q + (p - q) z with q = 1 - p, so the worst pair is z = 0 vs z = 1 and the channel is
    exactly eps-LDP on [0, 1] (on binary rewards the first draw is the identity). A finite channel:
    :meth:`table` gives P(o | z) at the domain's extremes for the exact audit. Ledger entries carry
    noise kind ``"randomized_response"`` with scale 1/eps (so sensitivity/scale = eps, the pure
    epsilon, as for Laplace) and the user's round as ``fed``. The per-round accountant of
    :mod:`dpaudit.accountants.composition` knows only Gaussian and Laplace curves and treats this
    entry as Laplace of the same eps: its pure epsilon (and so the implied eps-DP) is exact, but its
    Rényi curve at finite orders is below randomised response's (at eps = 1, order 2: 0.619 vs 0.735),
    so use the pure guarantee, not that curve; the local audit accounts it exactly.
    """

    kind = "randomized_response"

    def __init__(self, epsilon: float) -> None:
        self.eps = check_positive("epsilon", epsilon)
        self.domain = (0.0, 1.0)
        self.sensitivity = 1.0
        self.p = 1.0 / (1.0 + math.exp(-self.eps))

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        b = rng.random(z.shape) < z
        keep = rng.random(z.shape) < self.p
        o = np.where(keep, b, ~b).astype(float)
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "randomised response", int(step),
                                  Noise("randomized_response", np.full(n, 1.0 / self.eps)),  # type: ignore[arg-type]
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, outputs, P[input, output]) at the domain's extremes z in {0, 1}, outputs {0, 1}."""
        p, q = self.p, 1.0 - self.p
        return np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([[p, q], [q, p]])

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.conversions import pure_to_approx

        return pure_to_approx(self.eps, delta).epsilon

    def describe(self) -> str:
        return f"randomised response eps = {self.eps:g} on [0, 1]"


class LinearStatsChannel(Channel):
    """Seed 003 Alg. 5 line 9: user (x, y) with ||x||_2 <= 1, |y| <= y_bound sends (x x^T + B, y x + xi).

    B is :func:`symmetric_gaussian` with scale ``sigma`` (upper triangle i.i.d., mirrored); xi ~ N(0,
    sigma^2 I_d). Data: rows ``[x_1..x_d, y]``; messages: rows ``[vec(x x^T + B) (d*d), y x + xi (d)]``.
    Sensitivities over the domain, recorded in the ledger: the upper triangle of x x^T moves by at most
    sqrt(2) in L2 (x = e_1 vs e_2; seed 003's proof of Thm 7 uses the looser 2), y x by at most 2 y_bound
    (seed 003 uses y in [-2, 2], so 4). Two ledger entries per user, composed by the local audit.
    ``symmetric=False`` draws every entry of the matrix noise independently (a mutant: the lower
    triangle's noise is then not the upper one's, which the ledger still records as symmetric).
    """

    kind = "gaussian"

    def __init__(self, d: int, sigma: float, y_bound: float = 2.0, *, symmetric: bool = True) -> None:
        self.d = _check_dim("d", d)
        self.sigma = check_positive("sigma", sigma)
        self.y_bound = check_positive("y_bound", y_bound)
        self.domain = (-self.y_bound, self.y_bound)  # of y; x is checked against the unit ball
        self.symmetric = bool(symmetric)
        self.sens_matrix = math.sqrt(2.0)
        self.sens_vector = 2.0 * self.y_bound
        self.sensitivity = math.hypot(self.sens_matrix, self.sens_vector)

    @classmethod
    def seed003(cls, d: int, epsilon: float, delta: float, y_bound: float = 2.0, **kw) -> "LinearStatsChannel":
        """sigma = 6 sqrt(2 ln(2.5/delta))/eps (seed 003 Alg. 5 line 2)."""
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        ch = cls(d, 6 * math.sqrt(2 * math.log(2.5 / delta)) / epsilon, y_bound, **kw)
        ch.calibration = ("seed003-alg5", epsilon, delta)
        return ch

    def check_data(self, z, label="user data"):
        z = np.asarray(z, dtype=float)
        if z.ndim != 2 or z.shape[1] != self.d + 1:
            raise DPAuditError(f"{label} for Alg. 5's channel must have shape (n, d + 1) = (n, {self.d + 1}), got {z.shape}.")
        if not np.isfinite(z.sum()) and not np.all(np.isfinite(z)):  # a finite sum: every entry is finite
            raise DPAuditError(f"{label} contains NaN or inf; a channel's input must be finite.")
        x = z[:, : self.d]
        if x.size and np.einsum("nd,nd->n", x, x).max() > (1 + 1e-9) ** 2:  # a squared norm above (1 + 1e-9)^2
            norms = np.sqrt(np.add.reduce(x * x, axis=1))
            raise DPAuditError(f"a context of norm {norms.max():.6g} lies outside the channel's domain (the unit ball); "
                               "it is refused, not clipped.")
        Channel.check_data(self, z[:, self.d], label)
        return z

    def contexts_in_ball(self, x: np.ndarray) -> bool:
        """Whether every row of ``x`` (k, d) lies in the unit ball with room to spare: squared norms at most
        (1 + 1e-9)^2 - d 1e-13, so that :meth:`check_data`'s test (squared norms at most (1 + 1e-9)^2) passes for
        these rows however their squares are summed (the rounding of a sum of d squares of numbers below 1.01
        is below d 1e-15). A policy whose contexts are rows of one small action set tests the set with this
        and hands the gathered rows to :meth:`send_xy` with ``x_in_ball=True``."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.d:
            return False
        return bool(np.add.reduce(x * x, axis=1).max(initial=0.0) <= (1 + 1e-9) ** 2 - self.d * 1e-13)

    def _parts(self, x: np.ndarray, y: np.ndarray, label: str = "user data") -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of :meth:`send_xy` with ``x_in_ball=True``: the shapes and y's domain checked as :meth:`check_data`
        does; x's rows need no test (the caller established them by :meth:`contexts_in_ball`, which also implies
        they are finite)."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.d or y.shape != (x.shape[0],):
            raise DPAuditError(f"{label} for this channel must be contexts (n, {self.d}) and rewards (n,), got "
                               f"{x.shape} and {y.shape}.")
        Channel.check_data(self, y, label)  # finite and in the domain
        return x, y

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        return self._release(z[:, : self.d], z[:, self.d], rng, ledger, step, runs, label)

    def send_xy(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None,
                step: int = -1, runs: np.ndarray | None = None, label: str = "", x_in_ball: bool = False) -> np.ndarray:
        """:meth:`send` of the rows ``[x, y]`` without building them: the same messages, draws and ledger entries.
        ``x_in_ball=True``: the caller vouches that every row of ``x`` passed :meth:`contexts_in_ball` (rows
        gathered from an action set it tested), so the unit-ball test per user is skipped; y is checked."""
        if not x_in_ball:
            return self.send(np.concatenate([x, np.asarray(y, dtype=float)[:, None]], axis=1), rng, ledger=ledger,
                             step=step, runs=runs, label=label)
        x, y = self._parts(x, y)
        return self._release(x, y, rng, ledger, step, runs, label)

    def _release(self, x, y, rng, ledger, step, runs, label):
        n, d = x.shape[0], self.d
        # the matrix noise's draws, then xi's, from one call: the same stream as one call each
        m = d * (d + 1) // 2 if self.symmetric else d * d
        draws = rng.standard_normal(n * (m + d))
        draws *= self.sigma
        # the message built as rows (entry, user), then written out (n, d * d + d): the same values elementwise
        rows = np.empty((d * d + d, n))
        xt = x.T
        _matrix_rows(rows[: d * d], xt, draws[: n * m].reshape(n, m))
        ut = rows[d * d:]
        np.multiply(xt, y, out=ut)
        ut += draws[n * m:].reshape(n, d).T
        out = np.empty((n, d * d + d))
        out[...] = rows.T
        u = out[:, d * d:]
        if ledger is not None and ledger.enabled:
            iu = _triu(d)
            r = np.arange(n) if runs is None else np.asarray(runs)
            ledger.record(Release(label or "Alg. 5 matrix x x^T + B", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sens_matrix, r, x.take(iu[0], axis=1) * x.take(iu[1], axis=1),
                                  out.take(_upper_flat(d), axis=1),
                                  user_fed(n, step, np.zeros((n, iu[0].size)))))
            ledger.record(Release(label or "Alg. 5 vector y x + xi", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sens_vector, r, y[:, None] * x, u.copy(), user_fed(n, step, x.copy())))
        return out

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        return gaussian_epsilon(delta, mu=self.sensitivity / self.sigma).epsilon

    def describe(self) -> str:
        sym = "symmetric" if self.symmetric else "NON-symmetric"
        return f"Alg. 5 channel ({sym} matrix noise) sigma = {self.sigma:.4g}, d = {self.d}, |y| <= {self.y_bound:g}"


class GLOCChannel(Channel):
    """Seed 003 Alg. 3 line 9 (GLOC-LDP, logistic link): user (x, y), ||x|| <= 1, y in [0, 1], given the public
    estimate theta_hat (||theta_hat|| <= 1), sends x x^T + B_t (symmetric), z x + xi_t with z = x^T theta_hat, and
    grad l_t(theta_hat) + r_t = (g(x^T theta_hat) - y) x + r_t, g the logistic function.

    Noise: B_t as :func:`symmetric_gaussian` with scale sigma, xi_t ~ N(0, sigma^2 I), r_t ~ N(0, C^2 sigma^2 I)
    with C = 1 (|g - y| < 1 for the logistic link and y in [0, 1], so the loss is 1-Lipschitz on the unit
    ball). Sensitivities over the domain, recorded in the ledger: sqrt(2) for the matrix (seed 003 uses 2),
    2 for z x (|z| <= 1) and 2 for the gradient. Data rows ``[x_1..x_d, y]``; messages
    ``[vec(x x^T + B) (d*d), z x + xi (d), grad + r (d)]``. Three ledger entries per user.
    """

    kind = "gaussian"

    def __init__(self, d: int, sigma: float, lipschitz: float = 1.0) -> None:
        self.d = _check_dim("d", d)
        self.sigma = check_positive("sigma", sigma)
        self.C = check_positive("lipschitz", lipschitz)
        self.domain = (0.0, 1.0)  # of y; x is checked against the unit ball
        self.sens = (math.sqrt(2.0), 2.0, 2.0)
        self.sensitivity = math.sqrt(2.0 + 4.0 + 4.0 / self.C**2)  # the joint multiplier is this / sigma

    @classmethod
    def seed003(cls, d: int, epsilon: float, delta: float) -> "GLOCChannel":
        """sigma = 6 sqrt(2 ln(3.75/delta))/eps (seed 003 Alg. 3 line 2): each message (eps/3, delta/3)."""
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        ch = cls(d, 6 * math.sqrt(2 * math.log(3.75 / delta)) / epsilon)
        ch.calibration = ("seed003-alg3", epsilon, delta)
        return ch

    check_data = LinearStatsChannel.check_data
    contexts_in_ball = LinearStatsChannel.contexts_in_ball
    _parts = LinearStatsChannel._parts

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label="", theta_hat=None):
        z = self.check_data(z)
        return self._release(z[:, : self.d], z[:, self.d], rng, ledger, step, runs, label, theta_hat, False)

    def send_xy(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None,
                step: int = -1, runs: np.ndarray | None = None, label: str = "", theta_hat: np.ndarray | None = None,
                x_in_ball: bool = False, theta_in_ball: bool = False) -> np.ndarray:
        """:meth:`send` of the rows ``[x, y]`` without building them: the same messages, draws and ledger entries.
        ``x_in_ball=True``: the caller vouches that every row of ``x`` passed :meth:`contexts_in_ball`;
        ``theta_in_ball=True``: that ``theta_hat`` (n, d) is its own projection onto the unit ball W (Alg. 3's
        Pi_W, whose rounding is some 1e-15 while the test allows 1e-9); those tests are then skipped."""
        if not x_in_ball:
            return self.send(np.concatenate([x, np.asarray(y, dtype=float)[:, None]], axis=1), rng, ledger=ledger,
                             step=step, runs=runs, label=label, theta_hat=theta_hat)
        x, y = self._parts(x, y)
        return self._release(x, y, rng, ledger, step, runs, label, theta_hat, theta_in_ball)

    def _release(self, x, y, rng, ledger, step, runs, label, theta_hat, theta_in_ball):
        n, d = x.shape[0], self.d
        if isinstance(theta_hat, np.ndarray) and theta_hat.shape == (n, d) and theta_hat.dtype == np.float64:
            th = theta_hat  # the server's estimates, one per user (np.broadcast_to's checks cost more than the step)
        else:
            th = np.zeros((n, d)) if theta_hat is None else np.broadcast_to(np.asarray(theta_hat, dtype=float), (n, d))
            theta_in_ball = False
        th0 = th[:1] if n > 1 and th.strides[0] == 0 else th  # one estimate broadcast to every user: check it once
        if not theta_in_ball and np.einsum("nd,nd->n", th0, th0).max(initial=0.0) > (1 + 1e-9) ** 2:  # a squared norm above (1 + 1e-9)^2
            raise DPAuditError("the public estimate theta_hat must lie in the unit ball (the set W of Zheng et al. 2020, Alg. 3).")
        zt = np.einsum("nd,nd->n", x, th)
        # B's upper triangle, xi and r drawn by one call (the same stream as one call each)
        m = d * (d + 1) // 2
        draws = rng.standard_normal(n * (m + 2 * d))
        # the message built as rows (entry, user), then written out (n, d * d + 2 d): the same values elementwise
        rows = np.empty((d * d + 2 * d, n))
        xt = x.T
        ut, gt = rows[d * d: d * d + d], rows[d * d + d:]
        # the gradient (g(z) - y) x, g(z) = 1 / (1 + e^-z): the same operations as the formula
        g = np.negative(zt)
        np.exp(g, out=g)
        g += 1.0
        np.divide(1.0, g, out=g)
        g -= y
        np.multiply(xt, g, out=gt)
        grad = gt.T.copy() if ledger is not None and ledger.enabled else None
        scaled = draws[: n * (m + d)]
        scaled *= self.sigma
        _matrix_rows(rows[: d * d], xt, scaled[: n * m].reshape(n, m))
        np.multiply(xt, zt, out=ut)
        ut += scaled[n * m:].reshape(n, d).T
        r_noise = draws[n * (m + d):]
        r_noise *= self.C * self.sigma
        gt += r_noise.reshape(n, d).T
        out = np.empty((n, d * d + 2 * d))
        out[...] = rows.T
        u, gr = out[:, d * d: d * d + d], out[:, d * d + d:]
        if grad is not None:
            iu = _triu(d)
            r = np.arange(n) if runs is None else np.asarray(runs)
            sig = np.full(n, self.sigma)
            ledger.record(Release((label or "Alg. 3") + ": x x^T + B", int(step), Noise("gaussian", sig), self.sens[0],
                                  r, x.take(iu[0], axis=1) * x.take(iu[1], axis=1), out.take(_upper_flat(d), axis=1),
                                  user_fed(n, step, np.zeros((n, iu[0].size)))))
            ledger.record(Release((label or "Alg. 3") + ": z x + xi", int(step), Noise("gaussian", sig), self.sens[1],
                                  r, zt[:, None] * x, u.copy(), user_fed(n, step, np.zeros((n, d)))))
            ledger.record(Release((label or "Alg. 3") + ": gradient + r", int(step), Noise("gaussian", self.C * sig),
                                  self.sens[2], r, grad, gr.copy(), user_fed(n, step, -x)))
        return out

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        mu = math.sqrt(self.sens[0] ** 2 + self.sens[1] ** 2 + (self.sens[2] / self.C) ** 2) / self.sigma
        return gaussian_epsilon(delta, mu=mu).epsilon

    def describe(self) -> str:
        return f"Alg. 3 channel (logistic GLOC) sigma = {self.sigma:.4g}, d = {self.d}"


__all__ += ["symmetric_gaussian", "Channel", "GaussianChannel", "LaplaceChannel", "RandomizedResponse",
            "LinearStatsChannel", "GLOCChannel"]


# ==================================================================================================
# Continual release and shuffling (issue 13; seed 002 Algs. 1-2, seed 000's symmetric channel)
# ==================================================================================================


@functools.lru_cache(maxsize=64)
def _upper_flat(d: int) -> np.ndarray:
    """Flat indices (i d + j) of the upper triangle in ``np.triu_indices`` order (read-only)."""
    iu = _triu(d)
    flat = iu[0] * d + iu[1]
    flat.flags.writeable = False
    return flat


def pack_symmetric(m: np.ndarray) -> np.ndarray:
    """The upper triangles (``np.triu_indices`` order) of stacked symmetric ``(..., d, d)`` matrices."""
    m = np.asarray(m)
    d = m.shape[-1]
    return m.reshape(m.shape[:-2] + (d * d,)).take(_upper_flat(d), axis=-1)


def unpack_symmetric(u: np.ndarray, d: int) -> np.ndarray:
    """Inverse of :func:`pack_symmetric`: ``(..., d(d+1)/2)`` -> ``(..., d, d)``."""
    u = np.asarray(u)
    return u.take(_packed_index(d), axis=-1).reshape(u.shape[:-1] + (d, d)).astype(float, copy=False)


def tree_node_counts(horizon: int) -> np.ndarray:
    """How many released nodes of the binary tree each round 0..T-1 lies under (a node is released
    when its dyadic interval completes within the horizon). The maximum is floor(log2 T) + 1, at most
    ceil(log2 T) + 1 (Chan, Shi and Song 2011, Thm 3.5)."""
    T = int(horizon)
    if T < 1:
        raise DPAuditError(f"the horizon T must be at least 1, got {horizon!r}.")
    s = np.arange(T)
    counts = np.zeros(T, dtype=np.int64)
    level = 0
    while (1 << level) <= T:
        counts += ((s >> level) + 1) << level <= T
        level += 1
    return counts


class BinaryTreeMechanism:
    """Binary-tree continual release of a stream (Chan, Shi and Song 2011; Dwork et al. 2010), batched.

    Rounds ``t = 0..T-1`` each add a contribution ``x_t`` (a vector of shape ``shape``, or with
    ``symmetric=True`` a symmetric ``d x d`` matrix, handled as its packed upper triangle). Every
    dyadic interval ``[k 2^l, (k+1) 2^l)`` is a node; when its last round arrives the node's sum is
    released once with independent Gaussian noise N(0, sigma^2) per coordinate (for a matrix this is
    seed 000's symmetric channel, :func:`symmetric_gaussian`: the packed coordinates are i.i.d.).
    The noisy prefix sum of rounds ``0..t`` is read from the nodes of the binary decomposition of
    ``t + 1`` (one per set bit), so each read is post-processing of released nodes.

    Each round lies under at most ``floor(log2 T) + 1`` released nodes (:func:`tree_node_counts`), so
    with L2-sensitivity ``Delta`` per round (for a matrix stream: of the packed triangle, which is at
    most the Frobenius norm) the stream is ``(floor(log2 T) + 1) Delta^2 / (2 sigma^2)``-zCDP per round.
    Every node is recorded in the ledger with the rounds under it; ``Fed.coef`` holds, as for every
    release, how each round's contribution moves per unit change of that round's reward (``coef`` of
    :meth:`add`; zero by default, right for statistics of contexts and actions only such as outer
    products, and then kept as one block per run; ``x_s`` for a stream of ``x_s r_s``), so the gray-box
    attacks can recompute a node's centre under a neighbouring reward. A ledger that replays a recorded
    run (:meth:`Ledger.replay`) gets every node's recorded value back, with its centre from this run's
    contributions: the joint-DP gray-box attack's exact loss when a round's *context* changes.
    """

    def __init__(self, horizon: int, shape: tuple[int, ...] | int, sigma: float, sensitivity: float, *,
                 symmetric: bool = False, label: str = "tree") -> None:
        self.horizon = int(horizon)
        if self.horizon < 1:
            raise DPAuditError(f"the tree's horizon T must be at least 1, got {horizon!r}.")
        shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
        self.symmetric = bool(symmetric)
        if self.symmetric and len(shape) != 1:
            raise DPAuditError(f"a symmetric-matrix tree takes shape (d,), got {shape}.")
        self.shape = shape
        self.d = shape[0]
        self.width = shape[0] * (shape[0] + 1) // 2 if self.symmetric else int(np.prod(shape))
        self.sigma = check_nonnegative("sigma (tree noise)", sigma)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.label = label
        self.levels = int(math.floor(math.log2(self.horizon))) + 1

    def reset(self, n_runs: int, rng: np.random.Generator, ledger: Ledger | None = None) -> None:
        n = int(n_runs)
        self.n_runs, self.rng, self.ledger = n, rng, ledger
        self._acc = np.zeros((self.levels, n, self.width))  # running sums of the open nodes
        self._latest = np.zeros((self.levels, n, self.width))  # latest released node per level
        self._last_noise = np.zeros((self.levels, n, self.width))
        self._keep = ledger is not None and ledger.enabled
        self._hist: np.ndarray | None = None  # the rounds' reward coefficients, from the first round that gives one
        self.t = -1

    def _flat(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        if self.symmetric:
            if x.shape != (self.n_runs, self.d, self.d):
                raise DPAuditError(f"{self.label}: a round's matrix has shape {x.shape}; expected {(self.n_runs, self.d, self.d)}.")
            return pack_symmetric(x)
        if x.shape != (self.n_runs,) + self.shape:
            raise DPAuditError(f"{self.label}: a round's contribution has shape {x.shape}; expected {(self.n_runs,) + self.shape}.")
        return x.reshape(self.n_runs, self.width)

    def _node_noise(self, level: int) -> np.ndarray:
        """Fresh N(0, sigma^2) per packed coordinate (mutants override this)."""
        return self.rng.standard_normal((self.n_runs, self.width)) * self.sigma

    def add(self, t: int, x: np.ndarray, coef: np.ndarray | None = None) -> np.ndarray:
        """Feed round ``t``'s contribution; return the noisy prefix sum of rounds ``0..t``.

        ``coef`` (same shape as ``x``): the change of ``x`` per unit change of round t's reward (default 0).
        """
        if t != self.t + 1 or t >= self.horizon:
            raise DPAuditError(f"{self.label}: rounds must arrive in order 0..{self.horizon - 1}; got {t} after {self.t}.")
        xf = self._flat(x)
        if not np.all(np.isfinite(xf)):
            raise DPAuditError(f"{self.label}: round {t}'s contribution contains NaN or inf.")
        self.t = t
        if self._keep and coef is not None:
            if self._hist is None:
                self._hist = np.zeros((self.n_runs, self.horizon, self.width))
            self._hist[:, t] = self._flat(np.asarray(coef, dtype=float))
        self._acc += xf[None]
        c = t + 1
        for level in range(self.levels):
            if c % (1 << level):
                break
            noise = self._node_noise(level)
            self._last_noise[level] = noise
            centre = self._acc[level].copy()
            lo = c - (1 << level)
            label = f"{self.label}[level {level}, rounds {lo}..{c - 1}]"
            value = centre + noise
            if self._keep and self.ledger.replaying is not None:  # a replayed run: the recorded node's value
                value = self.ledger.replayed(label, t, None, value)
            self._latest[level] = value
            self._acc[level] = 0.0
            if self._keep:
                n = self.n_runs
                if self._hist is None:  # no round moves with its reward: one block per run, coefficient 0
                    fed = Fed.interval(np.full(n, lo), np.full(n, c), np.zeros((n, self.width)))
                else:
                    pos = np.repeat(np.arange(n), c - lo)
                    rounds = np.tile(np.arange(lo, c), n)
                    fed = Fed(pos, rounds, self._hist[:, lo:c].reshape(-1, self.width))
                self.ledger.record(Release(label, t, Noise("gaussian", np.full(n, self.sigma)), self.sensitivity,
                                           np.arange(n), centre, self._latest[level].copy(), fed))
        bits = [level for level in range(self.levels) if c >> level & 1]
        total = self._latest[bits].sum(axis=0)
        return unpack_symmetric(total, self.d) if self.symmetric else total.reshape((self.n_runs,) + self.shape)

    def guarantee(self) -> Guarantee:
        """Per-round zCDP of the whole stream: (floor(log2 T) + 1) Delta^2 / (2 sigma^2)."""
        if self.sigma == 0:
            raise DPAuditError(f"{self.label}: a tree without noise has no privacy guarantee.")
        return ZCDP(int(tree_node_counts(self.horizon).max()) * self.sensitivity**2 / (2 * self.sigma**2))


def _outside(value: float, coordinate: int, lo: float, hi: float) -> str:
    """The sentence for a user's value outside the range a shuffler's local randomizer is calibrated for."""
    return (f"a user's value {value:.6g} (message coordinate {coordinate}) lies outside the range [{lo:g}, {hi:g}] "
            "that the local randomizer's calibration assumes, so its privacy guarantee would not hold.")


class Shuffler:
    """The shuffle model of seed 002 Alg. 1: a local randomizer R per user, a shuffler S, an analyzer A.

    Seed 002 leaves the randomizers' encodings open ("users encode their data into bit sequences");
    our choice, a pure ``eps0``-DP message per user so Feldman-McMillan-Talwar amplification applies:

    * R: each of the ``m`` coordinates ``v_j`` in ``[lo_j, hi_j]`` (default ``[-bound, bound]``) is
      rounded stochastically to a bit ``b_j`` in {-1, +1} with ``P(b_j = +1) = (v_j - lo_j)/(hi_j - lo_j)``
      and then sent through binary randomized response at ``eps1 = eps0 / m`` (kept with probability
      ``e^eps1 / (e^eps1 + 1)``). Each coordinate's output has probabilities within
      ``[1, e^eps1] / (e^eps1 + 1)`` whatever ``v``, so it is ``eps1``-DP, and the message is
      ``eps0``-DP by basic composition.
    * S: a uniform random permutation of the batch's messages (independent per run).
    * A: the debiased sum ``sum_i [lo + (hi - lo)/2 (1 + c o_i)]`` with ``c = (e^eps1 + 1)/(e^eps1 - 1)``
      (unbiased for ``sum_i v_i``).

    ``shuffle=False`` is only for the mutant that keeps arrival order. The shuffled batch is the
    view of the shuffle protocol; its guarantee is :func:`dpaudit.accountants.shuffle_guarantee`.
    Nothing is recorded in a ledger: the noise is not additive, and the claim comes from the accountant.
    """

    def __init__(self, eps0: float, dim: int, bound: float = 1.0, *, lo: np.ndarray | None = None,
                 hi: np.ndarray | None = None, shuffle: bool = True) -> None:
        self.eps0 = check_positive("eps0 (local epsilon)", eps0)
        self.dim = int(dim)
        if self.dim < 1:
            raise DPAuditError(f"the message dimension must be at least 1, got {dim!r}.")
        bound = check_positive("bound B", bound)
        self.lo = np.broadcast_to(np.asarray(-bound if lo is None else lo, dtype=float), (self.dim,)).copy()
        self.hi = np.broadcast_to(np.asarray(bound if hi is None else hi, dtype=float), (self.dim,)).copy()
        if not np.all(self.hi > self.lo):
            raise DPAuditError("every coordinate's range must satisfy lo < hi.")
        self.shuffle = bool(shuffle)
        self.eps1 = self.eps0 / self.dim
        self.keep = math.exp(self.eps1) / (math.exp(self.eps1) + 1.0)
        self.c = (math.exp(self.eps1) + 1.0) / math.expm1(self.eps1)

    def randomize(self, rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
        """R for every user: ``values`` (n_runs, n_users, m) in [lo, hi] -> messages in {-1, +1} (int8)."""
        v = np.asarray(values, dtype=float)
        if v.ndim != 3 or v.shape[-1] != self.dim:
            raise DPAuditError(f"shuffler values must have shape (runs, users, {self.dim}), got {v.shape}.")
        if not np.all(np.isfinite(v)):
            raise DPAuditError("shuffler values contain NaN or inf.")
        span = self.hi - self.lo
        p = (v - self.lo) / span
        if p.min() < -1e-9 or p.max() > 1 + 1e-9:
            at = np.unravel_index(int(np.argmax(np.abs(p - 0.5))), p.shape)
            raise DPAuditError(_outside(float(v[at]), int(at[-1]), float(self.lo[at[-1]]), float(self.hi[at[-1]])))
        # rounding then randomized response, in one draw: P(+1) = keep p + (1 - keep)(1 - p)
        q = (1.0 - self.keep) + (2.0 * self.keep - 1.0) * p
        return np.where(rng.random(v.shape) < q, 1, -1).astype(np.int8)

    def permute(self, rng: np.random.Generator, messages: np.ndarray) -> np.ndarray:
        """S: a uniform permutation of each run's batch of messages (arrival order kept if ``shuffle=False``)."""
        if not self.shuffle:
            return messages
        n, b = messages.shape[:2]
        order = rng.permuted(np.broadcast_to(np.arange(b), (n, b)), axis=1)
        return np.take_along_axis(messages, order[..., None], axis=1)

    def analyze(self, messages: np.ndarray) -> np.ndarray:
        """A: the debiased sum of a batch, (n_runs, m)."""
        n_users = messages.shape[1]
        half = 0.5 * (self.hi - self.lo)
        return n_users * (self.lo + half) + half * self.c * np.asarray(messages, dtype=float).sum(axis=1)

    def run(self, rng: np.random.Generator, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """R, S and A on one batch: (the shuffled messages the analyzer sees, the debiased sum)."""
        msgs = self.permute(rng, self.randomize(rng, values))
        return msgs, self.analyze(msgs)

    def local_guarantee(self) -> Guarantee:
        return PureDP(self.eps0)


__all__ += ["pack_symmetric", "unpack_symmetric", "tree_node_counts",
            "BinaryTreeMechanism", "Shuffler"]


# ==================================================================================================
# Shuffled vector summation: one sampled coordinate per user, Piecewise Mechanism (issue 13)
# ==================================================================================================


class PiecewiseShuffler(Shuffler):
    """Shuffled vector summation: each user's ONE message is one sampled coordinate, sent by the Piecewise Mechanism.

    :class:`Shuffler` splits ``eps0`` over the ``m`` coordinates of a user's vector and rounds each to
    a bit, so a batch sum carries about ``(2 m / eps0)^2`` times one coordinate's range of noise per
    user. This randomizer spends the whole ``eps0`` on one coordinate (the "sample one attribute"
    strategy of local-DP multidimensional estimation, which beats splitting: Nguyen et al. 2016,
    Harmony; Wang et al. 2019, ICDE; Arcolezi et al. 2021, RS+FD) and does not round the value to a
    bit. Per user (our choices where seed 002 leaves the encoding open):

    * R: draw ``J`` uniform on ``0..m-1`` (independent of the data); scale ``u = (v_J - mid_J) / half_J``
      into [-1, 1]; send ``u`` through Wang et al.'s Piecewise Mechanism (ICDE 2019, "Collecting and
      analyzing multidimensional data with local differential privacy", Alg. 2) at ``eps0``: with
      ``s = e^(eps0/2)`` and ``C = (s + 1)/(s - 1)``, ``y`` in [-C, C] has density
      ``p = (e^eps0 - s)/(2 s + 2)`` on ``[l(u), l(u) + C - 1]`` (``l(u) = (C + 1) u / 2 - (C - 1) / 2``)
      and ``p e^-eps0`` elsewhere (uniform on the high piece with probability ``s / (s + 1)``, else
      uniform on the rest). The message ``(J, y)`` has density ``f(y | u_J) / m``; ``f`` takes two
      values whose ratio is ``e^eps0`` for every ``u``, so the message is ``eps0``-DP (pure, exactly:
      :meth:`log_density`), and FMT's amplification (:func:`dpaudit.accountants.shuffle_guarantee`)
      applies to the shuffled batch as it stands.
    * S: a uniform permutation of the batch's messages (per run). A message is sent as one float,
      ``J W + y + C`` with ``W = 2 C + 1`` (:meth:`decode` splits it), so the batch is one array.
    * A: ``sum_j = m sum_{i: J_i = j} (mid_j + half_j y_i)``, unbiased: ``E[y | u] = u`` and
      ``Var[y | u] = u^2 / (s - 1) + (s + 3) / (3 (s - 1)^2)`` (Wang et al. Lemma 2), below the one-bit
      rounding's ``1 - u^2`` alone once ``eps0 >= 2.5``.
    """

    def __init__(self, eps0: float, dim: int, bound: float = 1.0, *, lo: np.ndarray | None = None,
                 hi: np.ndarray | None = None, shuffle: bool = True) -> None:
        super().__init__(eps0, dim, bound, lo=lo, hi=hi, shuffle=shuffle)  # the range checks; keep/c are unused here
        self.eps1 = self.eps0  # the whole eps0 goes to the one sampled coordinate
        self.s = math.exp(self.eps0 / 2)
        self.C = (self.s + 1.0) / (self.s - 1.0)
        self.W = 2.0 * self.C + 1.0
        self.p_high = (math.exp(self.eps0) - self.s) / (2 * self.s + 2)
        self.mid = 0.5 * (self.hi + self.lo)
        self.half = 0.5 * (self.hi - self.lo)

    def _left(self, u: np.ndarray) -> np.ndarray:
        return 0.5 * (self.C + 1.0) * u - 0.5 * (self.C - 1.0)

    def log_density(self, y: np.ndarray, u: np.ndarray) -> np.ndarray:
        """log f(y | u): the Piecewise Mechanism's output density at ``y`` in [-C, C] for the scaled input ``u``."""
        left = self._left(np.asarray(u, dtype=float))
        high = (y >= left) & (y <= left + self.C - 1.0)
        return np.where(high, math.log(self.p_high), math.log(self.p_high) - self.eps0)

    def scaled(self, values: np.ndarray) -> np.ndarray:
        """A user's vector ``values`` (..., m) on the randomizer's scale: ``u = (v - mid) / half`` in [-1, 1]."""
        v = np.asarray(values, dtype=float)
        if v.shape[-1:] != (self.dim,):
            raise DPAuditError(f"a user's vector must have {self.dim} coordinates, got shape {v.shape}.")
        u = (v - self.mid) / self.half
        if not np.all(np.isfinite(u)) or u.min() < -1 - 1e-9 or u.max() > 1 + 1e-9:
            raise DPAuditError("a user's value lies outside the range [lo, hi] that the local randomizer's "
                               "calibration assumes.")
        return np.clip(u, -1.0, 1.0)

    def message_log_density(self, messages: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The log-density of encoded ``messages`` (any shape) sent by a user whose vector is ``values`` (m,):
        ``log(1/m) + log f(y | u_J)`` (the coordinate J uniform, then the Piecewise Mechanism at its scaled
        value). ``values`` of shape (k, m) gives one density per message for each of the k vectors, shape
        ``(k,) + messages.shape``. Ratios of these densities are the exact likelihood ratios of a message."""
        J, y = self.decode(np.asarray(messages, dtype=float))
        left = self._left(self.scaled(values))
        lJ = left[..., J]  # (k,) + messages.shape, or messages.shape for one vector
        high = (y >= lJ) & (y <= lJ + (self.C - 1.0))
        top = math.log(self.p_high) - math.log(self.dim)
        return np.where(high, top, top - self.eps0)

    def ratio_classes(self, canary: np.ndarray, other: np.ndarray, background: np.ndarray) -> dict[tuple[int, int], float]:
        """How a message of a user holding ``background`` splits by its two density ratios: for each (a, b) in
        {-1, 0, 1}^2, the probability that ``f(m | canary) / f(m | background) = e^(a eps0)`` and
        ``f(m | other) / f(m | background) = e^(b eps0)`` (the Piecewise Mechanism has two density levels, so
        every ratio is one of e^-eps0, 1, e^eps0). Computed from the high pieces' overlaps per coordinate
        (exact arithmetic on interval ends, each coordinate with probability 1/m); classes of probability
        0 are left out. The privacy-loss distribution of a shuffled canary against a constant background
        is a function of these (:func:`dpaudit.accountants.shuffled_canary_profile`)."""
        lefts = self._left(np.stack([self.scaled(canary), self.scaled(other), self.scaled(background)]))  # (3, m)
        width = self.C - 1.0
        ends = np.sort(np.concatenate([np.full((1, self.dim), -self.C), lefts, lefts + width,
                                       np.full((1, self.dim), self.C)]), axis=0)  # (8, m) breakpoints
        ends = np.clip(ends, -self.C, self.C)
        lengths = np.diff(ends, axis=0)  # (7, m) segments
        mids = 0.5 * (ends[1:] + ends[:-1])
        inside = (mids[None] >= lefts[:, None]) & (mids[None] <= lefts[:, None] + width)  # (3, 7, m)
        dens = np.where(inside[2], self.p_high, self.p_high * math.exp(-self.eps0))  # under the background
        a = inside[0].astype(int) - inside[2].astype(int)
        b = inside[1].astype(int) - inside[2].astype(int)
        out: dict[tuple[int, int], float] = {}
        mass = dens * lengths / self.dim
        for ai, bi, q in zip(a.ravel(), b.ravel(), mass.ravel()):
            if q > 0:
                out[(int(ai), int(bi))] = out.get((int(ai), int(bi)), 0.0) + float(q)
        return out

    def _class_codes(self, msgs: np.ndarray, lefts: np.ndarray) -> np.ndarray:
        """Each encoded message's ratio class code ``3 (a + 1) + (b + 1)`` (int8), by the high-piece test of
        :meth:`message_log_density` for the three vectors' ``lefts`` (3, m)."""
        width = self.C - 1.0
        starts = lefts + (np.arange(self.dim) * self.W + self.C)[None]  # each piece's start on the encoded line
        if self.dim == 1:
            J = None
        else:
            J = np.floor_divide(msgs, self.W).astype(np.int64)
            np.clip(J, 0, self.dim - 1, out=J)
        code = np.full(msgs.shape, 4, dtype=np.int8)
        for k, weight in ((0, 3), (1, 1), (2, -4)):  # 3 in_x + in_x' - 4 in_b + 4 = 3 (a + 1) + (b + 1)
            t = msgs - (starts[k, 0] if J is None else starts[k].take(J))
            np.add(code, weight, out=code, where=(t >= 0) & (t <= width))
        return code

    def ratio_class_counts(self, messages: np.ndarray, canary: np.ndarray, other: np.ndarray,
                           background: np.ndarray) -> np.ndarray:
        """For each run's encoded ``messages`` (n_runs, n), how many fall in each ratio class of
        :meth:`ratio_classes`: (n_runs, 9) counts, column ``3 (a + 1) + (b + 1)`` for the class (a, b). Then
        ``sum_i f(m_i | canary) / f(m_i | background) = sum_(a, b) count (a, b) e^(a eps0)`` (and ``other`` with
        b): the sums of density ratios of :class:`dpaudit.protocols.shuffle.CanaryModel`, exact and batched.

        The high-piece test of :meth:`message_log_density` on the encoded line (coordinate J's messages occupy
        ``J W + [0, 2 C]``, a vector's piece ``J W + C + [l(u_J), l(u_J) + C - 1]``), read from a table of 2^16
        equal cells of the line: a cell with no piece end in it (or within 1e-9 of it) has one class for all its
        messages; the few messages in the other cells are tested directly."""
        lefts = self._left(np.stack([self.scaled(canary), self.scaled(other), self.scaled(background)]))  # (3, m)
        msgs = np.asarray(messages, dtype=float)
        n_runs = msgs.shape[0]
        width = self.C - 1.0
        cells = 1 << 16
        span = self.dim * self.W
        bounds = np.arange(cells + 1) * (span / cells)
        ends = np.sort((lefts[..., None] + np.array([0.0, width]) + (np.arange(self.dim) * self.W + self.C)[None, :, None])
                       .ravel())
        # a cell is ambiguous if a piece end lies within it (with a margin for the rounding of msg * scale)
        first = np.searchsorted(ends, bounds[:-1] - 1e-9, side="left")
        last = np.searchsorted(ends, bounds[1:] + 1e-9, side="right")
        table = self._class_codes(0.5 * (bounds[:-1] + bounds[1:]), lefts)
        table[last > first] = -1
        idx = (msgs * (cells / span)).astype(np.int64)
        np.clip(idx, 0, cells - 1, out=idx)
        code = table.take(idx)
        amb = code < 0
        if amb.any():
            code[amb] = self._class_codes(msgs[amb], lefts)
        out = np.empty((n_runs, 9), dtype=np.int64)
        for c in range(9):
            out[:, c] = np.count_nonzero(code == c, axis=1)
        return out

    def separation(self, values: np.ndarray, other: np.ndarray) -> np.ndarray:
        """How far apart two users' messages are: the mean over coordinates of the fraction of ``values``' high
        piece outside ``other``'s (1 when the pieces are disjoint in every coordinate, 0 for equal vectors);
        vectorised over leading axes of the (..., m) vectors. For a canary against a background equal to its
        other value the privacy loss of a shuffled batch depends on the pair only through this number (its
        ratio classes are ``separation / (s (s + 1))`` and ``separation s / (s + 1)``), and more of it is never
        less leakage (a smaller one is the larger one with some messages replaced by uninformative ones)."""
        gap = np.abs(self._left(self.scaled(values)) - self._left(self.scaled(other)))
        return np.minimum(gap / (self.C - 1.0), 1.0).mean(axis=-1)

    def sample_coordinates(self, rng: np.random.Generator, n_runs: int, n_users: int) -> np.ndarray:
        """Each user's coordinate J, uniform on 0..m-1 and independent of the data: (n_runs, n_users) ints."""
        return rng.integers(0, self.dim, size=(n_runs, n_users))

    def randomize_at(self, rng: np.random.Generator, J: np.ndarray, vJ: np.ndarray) -> np.ndarray:
        """R given the sampled coordinates ``J`` and each user's value ``vJ`` of that coordinate -> encoded messages.

        Two uniforms per message, ``pick`` (the high piece w.p. ``s / (s + 1)``) then ``w`` (the position on
        the chosen piece): ``y = l(u) + w (C - 1)`` on the high piece, else ``w (C + 1) - C`` on the low pieces
        ``[-C, l(u))``, shifted past the high piece when it reaches it. Computed in place (few passes over
        the batch), the same arithmetic as the formula."""
        v = np.asarray(vJ, dtype=float)
        J = np.asarray(J)
        if self.dim == 1:  # every J is 0: the same scalars for every user
            u = (v - self.mid[0]) / self.half[0]
        else:
            u = (v - self.mid.take(J)) / self.half.take(J)
        if u.size:
            lo, hi = u.min(), u.max()  # NaN propagates; inf shows in the extremes
            if not (math.isfinite(lo) and math.isfinite(hi)) and not np.all(np.isfinite(v)):
                raise DPAuditError("shuffler values contain NaN or inf.")
            if lo < -1 - 1e-9 or hi > 1 + 1e-9:
                at = np.unravel_index(int(np.argmax(np.abs(u))), u.shape)
                j = int(J[at]) if J.shape == u.shape else 0
                raise DPAuditError(_outside(float(v[at]), j, float(self.lo[j]), float(self.hi[j])))
        left = np.clip(u, -1.0, 1.0, out=u)
        left *= 0.5 * (self.C + 1.0)  # _left(u), in place
        left -= 0.5 * (self.C - 1.0)
        width = self.C - 1.0
        pick, w = rng.random(u.shape), rng.random(u.shape)
        high = pick < self.s / (self.s + 1.0)
        # the low pieces [-C, left) and (left + width, C] have total length C + 1: map w onto them
        z = w * (self.C + 1.0)
        z -= self.C
        w *= width
        w += left  # left + w * width: the high piece
        y = z + width
        np.copyto(y, z, where=z < left)
        np.copyto(y, w, where=high)
        y += self.C
        if self.dim == 1:
            return y  # J W = 0
        out = J * self.W
        out += y
        return out

    def randomize(self, rng: np.random.Generator, values: np.ndarray) -> np.ndarray:
        """R for every user: ``values`` (n_runs, n_users, m) in [lo, hi] -> encoded messages (n_runs, n_users)."""
        v = np.asarray(values, dtype=float)
        if v.ndim != 3 or v.shape[-1] != self.dim:
            raise DPAuditError(f"shuffler values must have shape (runs, users, {self.dim}), got {v.shape}.")
        J = self.sample_coordinates(rng, v.shape[0], v.shape[1])
        return self.randomize_at(rng, J, np.take_along_axis(v, J[..., None], axis=2)[..., 0])

    def decode(self, messages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(J, y) of encoded messages."""
        if self.dim == 1:  # one coordinate: J = 0 whatever the message (the clip below)
            return np.zeros(np.shape(messages), dtype=np.int64), messages - self.C
        J = np.floor(messages / self.W).astype(np.int64)
        np.clip(J, 0, self.dim - 1, out=J)
        y = J * self.W
        np.subtract(messages, y, out=y)
        y -= self.C
        return J, y

    def permute(self, rng: np.random.Generator, messages: np.ndarray) -> np.ndarray:
        """S: a uniform permutation of each run's (n_runs, n_users) messages (arrival order kept if ``shuffle=False``)."""
        if not self.shuffle:
            return messages
        return rng.permuted(messages, axis=1)

    def analyze(self, messages: np.ndarray) -> np.ndarray:
        """A: the unbiased estimate of each run's batch sum, (n_runs, m)."""
        J, y = self.decode(np.asarray(messages, dtype=float))
        n = J.shape[0]
        idx = (J + self.dim * np.arange(n)[:, None]).ravel()
        sums = np.bincount(idx, weights=y.ravel(), minlength=n * self.dim).reshape(n, self.dim)
        counts = np.bincount(idx, minlength=n * self.dim).reshape(n, self.dim)
        return self.dim * (counts * self.mid + self.half * sums)

    def run_at(self, rng: np.random.Generator, J: np.ndarray, vJ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """R (given the sampled coordinates and their values), S and A: (the shuffled messages, the estimated sum)."""
        msgs = self.permute(rng, self.randomize_at(rng, J, vJ))
        return msgs, self.analyze(msgs)

    def variance_bound(self) -> np.ndarray:
        """Per coordinate, a bound on the analyzer's variance per user: ``m ((|mid| + half)^2 + half^2 Var_max)``."""
        var_max = 1.0 / (self.s - 1.0) + (self.s + 3.0) / (3.0 * (self.s - 1.0) ** 2)
        return self.dim * ((np.abs(self.mid) + self.half) ** 2 + self.half**2 * var_max)


__all__ += ["PiecewiseShuffler"]
