"""Accounting for the shuffle model and the binary-tree mechanism, as the policies of Sarmasarkar (2026),
"Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits", use them.

Privacy amplification by shuffling (Feldman, McMillan and Talwar 2021, "Hiding among the clones",
FOCS; arXiv 2012.12803). If each of ``n`` users sends one message from an ``eps0``-DP local
randomizer and the messages are uniformly shuffled, the shuffled multiset on two neighbouring
datasets is a post-processing of the pair (their Thm 3.2)

    P = (A + D, C - A + 1 - D),   Q = (A + 1 - D, C - A + D),
    C ~ Bin(n - 1, e^-eps0),  A | C ~ Bin(C, 1/2),  D ~ Bern(e^eps0 / (e^eps0 + 1)),

so the shuffled output is (eps, delta)-DP whenever P and Q are (eps, delta)-indistinguishable.

* :func:`clones_delta` computes that hockey-stick divergence *exactly* (written here by hand:
  dp-accounting has no shuffle accountant). Given ``C = c`` the pair is determined by its first
  coordinate ``k = A + D`` in ``0..c+1`` with ``P_c(k) = a b_c(k-1) + (1-a) b_c(k)`` and
  ``Q_c(k) = (1-a) b_c(k-1) + a b_c(k)`` (``a = e^eps0/(e^eps0+1)``, ``b_c`` the Bin(c, 1/2) pmf), and
  ``c`` is the coordinates' sum minus one, so ``delta(eps) = sum_c P(C=c) sum_k (P_c(k) - e^eps Q_c(k))_+``,
  the larger of both directions. Values of ``c`` outside a Hoeffding range (binomial mass below ``1e-17``) are
  dropped and that mass is added to delta, so the result is an upper bound (never below the truth).
  For each ``c`` only the ``k`` where Bin(c, 1/2) has mass above 1e-18 are kept (the rest is added to
  delta too). The privacy-loss values are sorted once (and the last eight profiles cached), so every
  delta(eps) after the first costs a search.
* :func:`clones_epsilon` inverts it (bisection to 1e-10, returning the upper end: valid).
* :func:`clones_epsilon_closed_form` is FMT's Thm 3.1: for ``eps0 <= log(n / (16 log(2/delta)))``,
  ``eps <= log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta)) / sqrt(n) + 8 e^eps0 / n))``;
  outside that range it claims no amplification (``eps0``).
* :func:`shuffle_guarantee` is the guarantee a shuffled batch carries: the numerical bound (or the
  closed form) capped at ``eps0`` (the local guarantee always holds too).

Binary tree (Chan, Shi and Song 2011): each round lies under at most ``floor(log2 T) + 1`` released
nodes (:func:`tree_max_nodes`), so a tree with Gaussian noise ``sigma`` per node and per-round
L2-sensitivity ``Delta`` is ``(floor(log2 T) + 1) Delta^2 / (2 sigma^2)``-zCDP per round
(:func:`tree_zcdp`; :func:`tree_sigma` inverts it). The looser count ``ceil(log2 T) + 1`` is the same or
one more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, TypedDict
from functools import lru_cache

import numpy as np
from dpaudit.errors import DPAuditError, check_delta, check_int, check_positive

from .guarantees import ZCDP, ApproxDP

__all__ = [
    "ClonesProfile",
    "clones_profile",
    "clones_delta",
    "clones_epsilon",
    "clones_epsilon_closed_form",
    "shuffle_guarantee",
    "clones_composed_delta",
    "clones_composed_epsilon",
    "tree_max_nodes",
    "tree_zcdp",
    "tree_sigma",
]

_TAIL = 1e-17


@dataclass(frozen=True)
class ClonesProfile:
    """The sorted privacy-loss values of FMT's pair, for fast delta(eps) queries."""

    n: int
    eps0: float
    loss: np.ndarray  # log P/Q per outcome, sorted decreasingly
    cum_p: np.ndarray  # cumulative P mass in that order
    cum_q: np.ndarray
    tail: float  # binomial mass of the dropped values of c (added to delta)

    def delta(self, eps: float) -> float:
        """max over both directions of sum (P - e^eps Q)_+, plus the dropped tail mass."""
        out = self.tail
        # P || Q: outcomes with loss > eps; Q || P is the mirror image (loss < -eps), computed from the end
        i = int(np.searchsorted(-self.loss, -eps, side="left"))
        d1 = (self.cum_p[i - 1] - math.exp(eps) * self.cum_q[i - 1]) if i > 0 else 0.0
        j = int(np.searchsorted(-self.loss, eps, side="right"))  # first index with loss < -eps
        tot_p, tot_q = self.cum_p[-1], self.cum_q[-1]
        if j < self.loss.size:
            qp = tot_q - (self.cum_q[j - 1] if j > 0 else 0.0)
            pp = tot_p - (self.cum_p[j - 1] if j > 0 else 0.0)
            d2 = qp - math.exp(eps) * pp
        else:
            d2 = 0.0
        return float(min(1.0, out + max(d1, d2, 0.0)))


def _check_n_eps0(n: int, eps0: float) -> tuple[int, float]:
    n = check_int("n (users per shuffle)", n, minimum=1)
    eps0 = check_positive("eps0 (local epsilon)", eps0)
    return n, eps0


def clones_profile(n: int, eps0: float) -> ClonesProfile:
    """Enumerate FMT's pair (P, Q) for ``n`` users with ``eps0``-DP randomizers (see the module docstring)."""
    n, eps0 = _check_n_eps0(n, eps0)
    return _clones_profile(n, eps0)


def _binom_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """Binomial(n, p) pmf at ``k`` (0 <= k <= n), in logs: scipy.stats.binom.pmf without importing scipy.stats."""
    from scipy import special

    k = np.asarray(k, dtype=float)
    logp = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
            + special.xlogy(k, p) + special.xlog1py(n - k, -p))
    pmf: np.ndarray = np.exp(logp)
    return pmf


@lru_cache(maxsize=8)
def _clones_profile(n: int, eps0: float) -> ClonesProfile:
    from scipy import special  # on first use: `import dpaudit` stays light (not scipy.stats: 1-2 s to import)

    p = math.exp(-eps0)
    a = math.exp(eps0) / (math.exp(eps0) + 1.0)
    if n == 1:
        cs = np.array([0])
        wc = np.array([1.0])
        tail = 0.0
    else:
        # Hoeffding: P(|C - (n-1)p| >= h) <= 2 exp(-2 h^2 / (n-1)) <= _TAIL; the exact dropped mass is added below
        h = math.sqrt((n - 1) * math.log(2 / _TAIL) / 2)
        lo, hi = max(int(math.floor((n - 1) * p - h)), 0), min(int(math.ceil((n - 1) * p + h)), n - 1)
        cs = np.arange(lo, hi + 1)
        wc = _binom_pmf(cs, n - 1, p)
        # the dropped mass P(C < lo) + P(C > hi), from the binomial's tails (not 1 - the sum: its rounding)
        tail = (float(special.bdtr(lo - 1, n - 1, p)) if lo > 0 else 0.0) + float(special.bdtrc(hi, n - 1, p))
    keep = wc > 0
    cs, wc = cs[keep], wc[keep]
    # for each c, only k where Bin(c, 1/2) has mass: k in [lo_c, hi_c + 1] covers both b_c(k) and b_c(k-1)
    # on [lo_c, hi_c]; the mass of b_c outside that range (<= 2e-18 per c) is added to the tail
    half = np.sqrt(cs * math.log(2 / 1e-18) / 2)  # Hoeffding again, for Bin(c, 1/2)
    lo_c = np.maximum(np.floor(cs / 2 - half).astype(np.int64), 0)
    hi_c = np.minimum(np.ceil(cs / 2 + half).astype(np.int64), cs)
    kept = special.bdtr(hi_c, cs, 0.5) - np.where(lo_c > 0, special.bdtr(np.maximum(lo_c - 1, 0), cs, 0.5), 0.0)
    tail = min(1.0, tail + float(np.sum(wc * np.maximum(0.0, 1.0 - kept))))
    sizes = hi_c - lo_c + 2
    c_rep = np.repeat(cs, sizes)
    k = np.repeat(lo_c, sizes) + np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    log_half = c_rep * math.log(0.5)

    def log_b(kk: np.ndarray) -> np.ndarray:
        ok = (kk >= 0) & (kk <= c_rep)
        kk_safe = np.clip(kk, 0, c_rep)
        v = special.gammaln(c_rep + 1) - special.gammaln(kk_safe + 1) - special.gammaln(c_rep - kk_safe + 1) + log_half
        return np.where(ok, v, -np.inf)

    lb, lb1 = log_b(k), log_b(k - 1)
    lp = np.logaddexp(math.log(a) + lb1, math.log1p(-a) + lb)
    lq = np.logaddexp(math.log1p(-a) + lb1, math.log(a) + lb)
    w = np.repeat(wc, sizes)
    losses, ps, qs = [lp - lq], [w * np.exp(lp)], [w * np.exp(lq)]
    loss = np.concatenate(losses)
    order = np.argsort(-loss, kind="stable")
    return ClonesProfile(n, eps0, loss[order], np.cumsum(np.concatenate(ps)[order]),
                         np.cumsum(np.concatenate(qs)[order]), tail)


def clones_delta(n: int, eps0: float, eps: float) -> float:
    """FMT's numerical delta(eps) for ``n`` shuffled ``eps0``-DP messages (an upper bound on the true one)."""
    if not (isinstance(eps, (int, float)) and eps >= 0 and math.isfinite(eps)):
        raise DPAuditError(f"eps must be a non-negative finite number, got {eps!r}.")
    return clones_profile(n, eps0).delta(float(eps))


def clones_epsilon(n: int, eps0: float, delta: float, profile: ClonesProfile | None = None) -> float:
    """The smallest eps (to 1e-10, rounded up) with FMT's numerical delta(eps) <= ``delta``; at most eps0."""
    delta = check_delta(delta)
    prof = profile if profile is not None else clones_profile(n, eps0)
    eps0 = prof.eps0
    if prof.delta(0.0) <= delta:
        return 0.0
    if prof.delta(eps0) > delta:
        return eps0  # only the local guarantee (the tail alone exceeds delta)
    lo, hi = 0.0, eps0
    while hi - lo > 1e-10:
        mid = 0.5 * (lo + hi)
        if prof.delta(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def clones_epsilon_closed_form(n: int, eps0: float, delta: float) -> float:
    """FMT Thm 3.1's closed form (see the module docstring); ``eps0`` where its condition fails."""
    n, eps0 = _check_n_eps0(n, eps0)
    delta = check_delta(delta)
    if n < 16 * math.log(2 / delta) or eps0 > math.log(n / (16 * math.log(2 / delta))):
        return eps0
    e = math.exp(eps0)
    eps = math.log1p((e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / delta)) / math.sqrt(n) + 8 * e / n))
    return min(eps, eps0)


def shuffle_guarantee(n: int, eps0: float, delta: float, method: str = "numerical") -> ApproxDP:
    """(eps, delta)-DP of one shuffled batch of ``n`` users with ``eps0``-DP messages."""
    if method == "numerical":
        eps = clones_epsilon(n, eps0, delta)
    elif method == "closed-form":
        eps = clones_epsilon_closed_form(n, eps0, delta)
    else:
        raise DPAuditError(f"method must be 'numerical' or 'closed-form', got {method!r}.")
    return ApproxDP(min(eps, eps0), delta)


# ---- the exact composition of several shuffled message sets (the upper side) ----------------------------

def _hockey(prof: ClonesProfile, e: np.ndarray) -> np.ndarray:
    """sum over outcomes with loss > e of (P - e^e Q), for every e (any sign): the P || Q hockey stick of ``prof``'s
    enumerated outcomes at e (the dropped tail excluded)."""
    i = np.searchsorted(-prof.loss, -e, side="left")  # outcomes 0..i-1 have loss > e
    cp = np.where(i > 0, prof.cum_p[np.maximum(i - 1, 0)], 0.0)
    cq = np.where(i > 0, prof.cum_q[np.maximum(i - 1, 0)], 0.0)
    out: np.ndarray = np.maximum(cp - np.exp(e) * cq, 0.0)
    return out


def _hockey_reverse(prof: ClonesProfile, e: np.ndarray) -> np.ndarray:
    """sum over outcomes with loss < -e of (Q - e^e P), for every e: the Q || P hockey stick at e."""
    j = np.searchsorted(-prof.loss, e, side="right")  # outcomes j.. have loss < -e
    tot_p, tot_q = prof.cum_p[-1], prof.cum_q[-1]
    pp = tot_p - np.where(j > 0, prof.cum_p[np.maximum(j - 1, 0)], 0.0)
    qq = tot_q - np.where(j > 0, prof.cum_q[np.maximum(j - 1, 0)], 0.0)
    out: np.ndarray = np.maximum(qq - np.exp(e) * pp, 0.0)
    return out


def _masses(prof: ClonesProfile) -> tuple[np.ndarray, np.ndarray]:
    return np.diff(prof.cum_p, prepend=0.0), np.diff(prof.cum_q, prepend=0.0)


#: added to every composed delta: the rounding of the cumulative sums (double precision, sums of at most 1)
_ROUNDING = 1e-12


def clones_composed_delta(profiles: "tuple[ClonesProfile, ClonesProfile]", eps: float) -> float:
    """delta(eps) of the product of two of FMT's pairs, both directions, exactly (plus the dropped tails).

    For independent pairs the hockey stick of the product is sum_i P1_i H2(eps - l1_i), with H2 the second
    pair's P || Q hockey stick at any (also negative) threshold and l1_i the first pair's privacy loss; the
    mirror direction is sum_i Q1_i G2(eps + l1_i) with G2 the Q || P one. No discretisation: every outcome of
    the first pair is enumerated and the second answers from its sorted cumulative sums. Outcomes either
    profile dropped (binomial mass below 1e-17 per value) are charged in full (their masses added)."""
    p1, p2 = profiles
    mp, mq = _masses(p1)
    d1 = float(np.dot(mp, _hockey(p2, eps - p1.loss)))
    d2 = float(np.dot(mq, _hockey_reverse(p2, eps + p1.loss)))
    return float(min(1.0, max(d1, d2) + p1.tail + p2.tail + _ROUNDING))


def clones_composed_epsilon(ns: "tuple[int, ...] | list[int]", eps0: float, delta: float) -> float:
    """The smallest eps (to 1e-9, rounded up) at which the shuffled message sets of one user are
    (eps, delta)-DP together: ``ns`` holds the size of each shuffle she sends one ``eps0``-DP message to (one
    or two shuffles), each reduced to Feldman, McMillan & Talwar's (2021) clone pair (Thm 3.2) and the pairs
    composed exactly (:func:`clones_composed_delta`) instead of by adding each one's eps at delta/2.

    Valid because the message sets are shuffled and randomised independently given the earlier batches, so the
    pair of views is a post-processing of the product of the two clone pairs. At most the sum of the two
    eps at delta/2 (basic composition), and at most 2 eps0 (the local guarantee composed)."""
    delta = check_delta(delta)
    ns = [check_int("n (users per shuffle)", n, minimum=1) for n in ns]
    if len(ns) == 1:
        return clones_epsilon(ns[0], eps0, delta)
    if len(ns) != 2:
        raise DPAuditError(f"the exact composition takes one or two shuffles per user, got {len(ns)}.")
    profs = (clones_profile(ns[0], eps0), clones_profile(ns[1], eps0))
    hi = 2 * profs[0].eps0
    if clones_composed_delta(profs, 0.0) <= delta:
        return 0.0
    if clones_composed_delta(profs, hi) > delta:
        return hi
    lo = 0.0
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        if clones_composed_delta(profs, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def tree_max_nodes(horizon: int) -> int:
    """floor(log2 T) + 1: the most released nodes one round lies under in a binary tree over T rounds."""
    T = check_int("horizon T", horizon, minimum=1)
    return T.bit_length()


def tree_zcdp(horizon: int, sigma: float, sensitivity: float = 1.0) -> ZCDP:
    """Per-round zCDP of a binary tree: (floor(log2 T) + 1) Delta^2 / (2 sigma^2)."""
    sigma = check_positive("sigma", sigma)
    sensitivity = check_positive("sensitivity", sensitivity)
    return ZCDP(tree_max_nodes(horizon) * sensitivity**2 / (2 * sigma**2))


def tree_sigma(horizon: int, rho: float, sensitivity: float = 1.0) -> float:
    """The node noise that makes a binary tree over T rounds rho-zCDP per round (inverse of :func:`tree_zcdp`)."""
    rho = check_positive("rho", rho)
    sensitivity = check_positive("sensitivity", sensitivity)
    return sensitivity * math.sqrt(tree_max_nodes(horizon) / (2 * rho))


# ==================================================================================================
# The exact privacy loss of one shuffled canary against a constant background
# ==================================================================================================

#: the privacy loss is rounded to this grid, up for the upper bound on delta and down for the lower one
CANARY_GRID = 1e-5
#: counts of a ratio class whose binomial tail is below this are dropped (their mass is added to delta)
_CANARY_TAIL = 1e-22
#: the most count vectors one message set may enumerate
CANARY_MAX_ATOMS = 4_000_000


@dataclass(frozen=True)
class _Rounded:
    """One message set's privacy loss under one side, rounded: sorted decreasingly, with suffix sums."""

    loss: np.ndarray  # rounded loss values, decreasing
    mass: np.ndarray  # the side's probability of each
    cum_mass: np.ndarray  # cumulative mass in that order
    cum_other: np.ndarray  # cumulative mass * e^-loss in that order (the other side's, for the rounded loss)
    dropped: float  # the side's probability of the count vectors left out


def _round_set(loss: np.ndarray, mass: np.ndarray, dropped: float, up: bool) -> _Rounded:
    h = CANARY_GRID
    idx = np.ceil(loss / h) if up else np.floor(loss / h)
    vals = idx * h
    # the division may round across a grid point: never round the wrong way
    idx = np.where(vals < loss, idx + 1, idx) if up else np.where(vals > loss, idx - 1, idx)
    keys, inv = np.unique(idx.astype(np.int64), return_inverse=True)
    m = np.bincount(inv, weights=mass, minlength=keys.size)
    order = np.argsort(-keys, kind="stable")
    lv, m = keys[order] * h, m[order]
    return _Rounded(lv, m, np.cumsum(m), np.cumsum(m * np.exp(-lv)), float(dropped))


#: a background user's ratio classes, ``{(a, b): probability}``
#: (:meth:`dpaudit.mechanisms.PiecewiseShuffler.ratio_classes`)
RatioClasses = Mapping[tuple[int, int], float]


class MessageSet(TypedDict):
    """One shuffled message set of a :class:`CanaryProfile`, as its ``sets`` describe it."""

    n: int
    eps0: float
    classes: dict[str, float]  # "a,b" -> probability
    count_vectors: int  # how many count vectors were enumerated


@dataclass(frozen=True)
class CanaryProfile:
    """The exact privacy-loss distribution of a canary in shuffled batches (:func:`shuffled_canary_profile`).

    ``delta(eps, direction)`` is the hockey-stick divergence of the view under side ``direction`` (0: the
    canary's first value, 1: its second) against the other side; ``bound="upper"`` rounds every loss up
    and adds the mass of the count vectors left out (never below the truth), ``"lower"`` rounds down and
    leaves them out (never above). The two differ by less than 2e-5 in eps at the sizes of an audit.
    """

    sets: tuple[MessageSet, ...]  # per message set: n, eps0, the classes, how many count vectors were enumerated
    _parts: dict[tuple[int, str], list[_Rounded]]  # (direction, bound) -> one per informative set

    def delta(self, eps: float, direction: int | None = None, bound: str = "upper") -> float:
        """delta(eps) of one direction, or the larger of both (``direction=None``)."""
        if direction is None:
            return max(self.delta(eps, 0, bound), self.delta(eps, 1, bound))
        parts = self._parts[(int(direction), bound)]
        if not parts:
            return 0.0
        a = parts[0] if len(parts) == 2 else _Rounded(np.zeros(1), np.ones(1), np.ones(1), np.ones(1), 0.0)
        b = parts[-1]
        # sum over a's atoms of mass_a * E_b[(1 - e^(eps - la - lb))_+]: b's suffix sums past eps - la
        t = eps - a.loss
        i = np.searchsorted(-b.loss, -t, side="left")  # how many of b's losses exceed t
        has = i > 0
        j = np.maximum(i - 1, 0)
        cm = np.where(has, b.cum_mass[j], 0.0)
        co = np.where(has, b.cum_other[j], 0.0)
        val = float(np.sum(a.mass * cm) - math.exp(eps) * np.sum(a.mass * np.exp(-a.loss) * co))
        val = max(val, 0.0)
        if bound == "upper":
            val += sum(p.dropped for p in parts)
        return float(min(1.0, val))

    def epsilon(self, delta: float, direction: int | None = None, bound: str = "upper") -> float:
        """The smallest eps (to 1e-7) with delta(eps) <= ``delta``: of one direction, or the larger of both."""
        delta = check_delta(delta)
        if direction is None:
            return max(self.epsilon(delta, 0, bound), self.epsilon(delta, 1, bound))
        if self.delta(0.0, direction, bound) <= delta:
            return 0.0
        lo, hi = 0.0, sum(float(s["eps0"]) for s in self.sets) + 1.0
        while hi - lo > 1e-7:
            mid = 0.5 * (lo + hi)
            if self.delta(mid, direction, bound) <= delta:
                hi = mid
            else:
                lo = mid
        return hi if bound == "upper" else lo


def _canary_atoms(n: int, eps0: float,
                  classes: RatioClasses) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Every count vector of the non-null ratio classes among ``n`` background messages that has mass: the loss
    log(S / S'), the background's probability g, and S / n, S' / n (each side's probability is g S / n).

    The counts are multinomial: class by class, ``N_t`` given the earlier ones is binomial(what is left,
    q_t / (1 - q_1 - ... - q_{t-1})), enumerated over a window of its conditional mean (10 sd below, 14 sd
    and 10 counts above); count vectors of mass below 1e-28 are dropped after every class. What is dropped is
    measured (one minus what is kept) and added to delta by the upper bound."""
    from scipy import special

    cls = [(a, b, float(q)) for (a, b), q in sorted(classes.items()) if (a, b) != (0, 0) and q > 0]
    if len(cls) > 3:
        raise DPAuditError(f"the canary's messages fall into {len(cls)} non-trivial ratio classes; the exact "
                           "enumeration handles at most 3 (e.g. the other value equal to the background's).")
    counts = np.zeros((0, 1), dtype=np.int64)
    logg = np.zeros(1)
    used = 0.0
    for _a, _b, q in cls:
        left = n - counts.sum(axis=0)
        p = min(1.0, q / max(1.0 - used, 1e-300))
        used += q
        mean, sd = left * p, np.sqrt(left * p * (1 - p))
        lo = np.maximum(np.floor(mean - 10 * sd).astype(np.int64), 0)
        width = int(np.ceil(np.max(24 * sd))) + 12
        if counts.shape[1] * width > CANARY_MAX_ATOMS:
            raise DPAuditError(f"the exact enumeration of a shuffle of {n} messages needs about "
                               f"{counts.shape[1] * width} count vectors, more than {CANARY_MAX_ATOMS}.")
        k = lo[None, :] + np.arange(width)[:, None]  # (width, atoms)
        ok = k <= left[None, :]
        kk = np.where(ok, k, 0)
        lp = (special.gammaln(left + 1)[None] - special.gammaln(kk + 1) - special.gammaln(left[None] - kk + 1)
              + special.xlogy(kk, p) + special.xlog1py(left[None] - kk, -p))
        lp = np.where(ok, lp + logg[None], -np.inf)
        keep = lp > math.log(1e-28)
        col = np.nonzero(keep)[1]
        counts = np.vstack([counts[:, col], k[keep][None]])
        logg = lp[keep]
    g = np.exp(logg)
    up = np.array([math.expm1(a * eps0) for a, _, _ in cls]).reshape(-1, 1)
    down = np.array([math.expm1(b * eps0) for _, b, _ in cls]).reshape(-1, 1)
    w0 = 1.0 + (counts * up).sum(axis=0) / n
    w1 = 1.0 + (counts * down).sum(axis=0) / n
    return np.log(w0) - np.log(w1), g, w0, w1, int(g.size)


def shuffled_canary_profile(sets: list[tuple[int, float, RatioClasses]]) -> CanaryProfile:
    """The exact privacy-loss distribution of one canary in shuffled message sets, every other user holding
    the same background datum.

    ``sets``: per shuffled message set, ``(n, eps0, classes)``: the ``n`` messages of that shuffle (the
    canary's among them), each from an ``eps0``-DP randomizer whose density takes two levels (so every
    density ratio is e^-eps0, 1 or e^eps0), and ``classes`` = {(a, b): probability} of a background user's
    message having ratios ``f(m | x) / f(m | b) = e^(a eps0)`` and ``f(m | x') / f(m | b) = e^(b eps0)``
    (x, x' the canary's two values, b the background's;
    :meth:`dpaudit.mechanisms.PiecewiseShuffler.ratio_classes`).

    Derivation. With the n - 1 others i.i.d. from the background's density ``g`` and the canary from
    ``f_x``, the shuffled multiset M has ``P_x(M) = prod_i g(m_i) * (1/n) sum_i f_x(m_i) / g(m_i)`` (the
    canary is any of the n places, each with probability 1/n), so with S = sum_i f_x(m_i)/g(m_i) and S' the
    same for x', ``P_x(M) / P_x'(M) = S / S'``: a function of how many messages fall in each ratio class.
    Under the all-background product measure G those counts are multinomial(n, classes), and each side's
    probability of a count vector is its G-probability times S / n (resp. S' / n). Every count vector
    with mass is enumerated (at most 3 non-null classes: counts whose binomial tail is below 1e-22 are
    dropped and their mass added to the upper bound), its loss log(S / S') computed exactly. Message
    sets are independent given the data, so their losses add; two informative sets are composed
    exactly (for each atom of one, the other's suffix sums past eps minus its loss), each loss rounded
    to a 1e-5 grid (up for the upper bound, down for the lower). In the spirit of the numerical shuffle
    accountants of Koskela, Heikkilä and Honkela ("Numerical accounting in the shuffle model of
    differential privacy", 2023) and Feldman, McMillan and Talwar (2021), but for a given pair and
    background (the truth of that pair), not the worst case over all of them.
    """
    described: list[MessageSet] = []
    raw: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for n, eps0, classes in sets:
        n = check_int("n (messages per shuffle)", n, minimum=1)
        eps0 = check_positive("eps0 (local epsilon)", eps0)
        loss, g, w0, w1, atoms = _canary_atoms(n, eps0, dict(classes))
        described.append({"n": n, "eps0": eps0, "classes": {f"{a},{b}": float(q) for (a, b), q in sorted(classes.items())},
                          "count_vectors": atoms})
        if np.all(np.abs(loss) == 0):  # the canary's two values look alike in this set
            continue
        raw.append((loss, g, w0, w1))
    if len(raw) > 2:
        raise DPAuditError(f"{len(raw)} message sets carry the canary; the exact composition handles at most 2.")
    parts: dict[tuple[int, str], list[_Rounded]] = {}
    for direction in (0, 1):
        for bound in ("upper", "lower"):
            rounded = []
            for loss, g, w0, w1 in raw:
                mass = g * (w0 if direction == 0 else w1)
                dropped = max(0.0, 1.0 - float(mass.sum()))
                rounded.append(_round_set(loss if direction == 0 else -loss, mass, dropped, bound == "upper"))
            parts[(direction, bound)] = rounded
    return CanaryProfile(tuple(described), parts)


__all__ += ["CanaryProfile", "shuffled_canary_profile", "CANARY_GRID", "CANARY_MAX_ATOMS"]
