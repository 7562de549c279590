"""The shuffle model's local randomizers, shuffler and analyzers: :class:`Shuffler` (one bit per coordinate)
and :class:`PiecewiseShuffler` (one sampled coordinate per user, by the Piecewise Mechanism).

The shuffle model is that of Sarmasarkar (2026) "Shuffle and Joint Differential Privacy for Generalized
Linear Contextual Bandits", Alg. 1; the paper leaves the randomizers' encodings open, and these are
dpaudit's choices.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import Guarantee, PureDP
from dpaudit.errors import DPAuditError, check_positive

__all__ = ["Shuffler", "PiecewiseShuffler"]


def _outside(value: float, coordinate: int, lo: float, hi: float) -> str:
    """The sentence for a user's value outside the range a shuffler's local randomizer is calibrated for."""
    return (f"a user's value {value:.6g} (message coordinate {coordinate}) lies outside the range [{lo:g}, {hi:g}] "
            "that the local randomizer's calibration assumes, so its privacy guarantee would not hold.")


class Shuffler:
    """The shuffle model of Sarmasarkar (2026), Alg. 1: a local randomizer R per user, a shuffler S, an analyzer A.

    Sarmasarkar (2026) leaves the randomizers' encodings open ("users encode their data into bit sequences");
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


class PiecewiseShuffler(Shuffler):
    """Shuffled vector summation: each user's ONE message is one sampled coordinate, sent by the Piecewise Mechanism.

    :class:`Shuffler` splits ``eps0`` over the ``m`` coordinates of a user's vector and rounds each to
    a bit, so a batch sum carries about ``(2 m / eps0)^2`` times one coordinate's range of noise per
    user. This randomizer spends the whole ``eps0`` on one coordinate (the "sample one attribute"
    strategy of local-DP multidimensional estimation, which beats splitting: Nguyen et al. 2016,
    Harmony; Wang et al. 2019, ICDE; Arcolezi et al. 2021, RS+FD) and does not round the value to a
    bit. Per user (our choices where Sarmasarkar (2026) leaves the encoding open):

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
