"""Accounting for the shuffle model and the binary-tree mechanism (issue 13, seed 002).

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
(:func:`tree_zcdp`; :func:`tree_sigma` inverts it). The issue's bound ``ceil(log2 T) + 1`` is the same
or one more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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


@lru_cache(maxsize=8)
def _clones_profile(n: int, eps0: float) -> ClonesProfile:
    from scipy import special, stats  # imported on first use: `import dpaudit` stays light

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
        wc = stats.binom.pmf(cs, n - 1, p)
        tail = max(0.0, 1.0 - float(wc.sum()))
    keep = wc > 0
    cs, wc = cs[keep], wc[keep]
    # for each c, only k where Bin(c, 1/2) has mass: k in [lo_c, hi_c + 1] covers both b_c(k) and b_c(k-1)
    # on [lo_c, hi_c]; the mass of b_c outside that range (<= 2e-18 per c) is added to the tail
    half = np.sqrt(cs * math.log(2 / 1e-18) / 2)  # Hoeffding again, for Bin(c, 1/2)
    lo_c = np.maximum(np.floor(cs / 2 - half).astype(np.int64), 0)
    hi_c = np.minimum(np.ceil(cs / 2 + half).astype(np.int64), cs)
    kept = stats.binom.cdf(hi_c, cs, 0.5) - stats.binom.cdf(lo_c - 1, cs, 0.5)
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


# ---- the exact composition of several shuffled message sets (issue 24, the upper side) -----------------

def _hockey(prof: ClonesProfile, e: np.ndarray) -> np.ndarray:
    """sum over outcomes with loss > e of (P - e^e Q), for every e (any sign): the P || Q hockey stick of ``prof``'s
    enumerated outcomes at e (the dropped tail excluded)."""
    i = np.searchsorted(-prof.loss, -e, side="left")  # outcomes 0..i-1 have loss > e
    cp = np.where(i > 0, prof.cum_p[np.maximum(i - 1, 0)], 0.0)
    cq = np.where(i > 0, prof.cum_q[np.maximum(i - 1, 0)], 0.0)
    return np.maximum(cp - np.exp(e) * cq, 0.0)


def _hockey_reverse(prof: ClonesProfile, e: np.ndarray) -> np.ndarray:
    """sum over outcomes with loss < -e of (Q - e^e P), for every e: the Q || P hockey stick at e."""
    j = np.searchsorted(-prof.loss, e, side="right")  # outcomes j.. have loss < -e
    tot_p, tot_q = prof.cum_p[-1], prof.cum_q[-1]
    pp = tot_p - np.where(j > 0, prof.cum_p[np.maximum(j - 1, 0)], 0.0)
    qq = tot_q - np.where(j > 0, prof.cum_q[np.maximum(j - 1, 0)], 0.0)
    return np.maximum(qq - np.exp(e) * pp, 0.0)


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
