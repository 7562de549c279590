"""What a release records: the noise (:class:`Noise`), the rounds that fed it (:class:`Fed`), the release
itself (:class:`Release`) and the batch's :class:`Ledger`, which can also replay a recorded run.

:class:`PreDrawn` stands in for a generator when a policy draws its standard noise in advance.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from dpaudit.errors import DPAuditError

__all__ = ["Noise", "PreDrawn", "Fed", "FedBlocks", "Release", "release_family", "ReplayMismatch", "Ledger",
           "user_fed"]

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
    (the joint-DP gray-box attack, :mod:`dpaudit.attacks.joint_likelihood`). The mechanisms of this package
    honour it (:class:`~dpaudit.mechanisms.GaussianMechanism`, :class:`~dpaudit.mechanisms.LaplaceMechanism`,
    :class:`~dpaudit.mechanisms.BinaryTreeMechanism`); a
    release made elsewhere shows as a value that differs from the recorded one.
    """

    n_runs: int
    releases: list[Release] = field(default_factory=list)
    enabled: bool = True
    #: the recorded releases being replayed (None: an ordinary ledger)
    replaying: list[Release] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:  # a batch has at least one run
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


def user_fed(n: int, step: int, coef: np.ndarray) -> Fed:
    """Each message fed by its own user's round ``step`` (coef: (n, m) change per unit of her reward)."""
    return Fed(np.arange(n), np.full(n, int(step), dtype=np.int64), np.asarray(coef, dtype=float).reshape(n, -1))

