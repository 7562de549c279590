"""Shuffle DP (Sarmasarkar 2026, Alg. 1): the view is the shuffled multiset of one batch's messages.

The model is that of Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized Linear
Contextual Bandits", Alg. 1.

The adversary fixes one batch of users' data, the canary arriving first: :func:`shuffle_pairs` (an
extreme canary on one coordinate against a background at the other end of the randomizer's range) and
:func:`calibrated_pairs` (canaries derived from the randomizer's calibration: a canary and a background
whose messages are as far apart as the Piecewise Mechanism allows in every coordinate of both message
sets, the canary's other value equal to the background's). The view is what the analyzer receives
from that batch, read through :func:`shuffle_features` as a binned multiset (what a shuffler leaves),
as the messages at the canary's arrival position (informative only if the order was kept) and, when
every other user holds the same datum, as the exact log-likelihood ratio of the multiset
(:class:`CanaryModel`).
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import PiecewiseShuffler
from dpaudit.policies.base import PolicyLike

from .base import ContextInput, Protocol, check_context_input

if TYPE_CHECKING:
    from dpaudit.accountants import CanaryProfile

__all__ = ["ShuffleDP", "ShufflePair", "shuffle_pairs", "calibrated_pairs", "shuffle_features", "FAMILIES", "LOSS",
           "CanaryModel", "canary_model", "ShuffleView", "MessageSet"]

class ShuffleView(TypedDict):
    """What the analyzer receives from one batch, over runs (:meth:`ShuffleDP.run`): the shuffled outer-product
    messages (None when the policy's estimate needs none) and each PGD group's shuffled gradient messages."""

    outer: np.ndarray | None
    grads: list[np.ndarray]


#: the feature families of a shuffled view (:func:`shuffle_features`)
FAMILIES = ("multiset", "position")
#: the feature family of a pair with a :class:`CanaryModel`: its exact log-likelihood ratio
LOSS = "loss"


class ShuffleDP(Protocol):
    """Shuffle DP (Sarmasarkar 2026, Alg. 1): the view is what the analyzer receives from one batch.

    The input is one batch of ``B`` users' data, fixed by the adversary: the contexts they played
    ``X`` (B, d) and their rewards ``r`` (B,) (a ``ContextInput`` with K = 1, ``X`` of shape (B, 1, d));
    neighbours differ in one user's data. :meth:`run` calls the policy's own batch pipeline
    (``batch_release``: local randomizers, shuffler, analyzer) and returns the shuffled messages: a
    dict of arrays over runs. Later batches' actions are post-processing of these messages.
    """

    name = "shuffle"
    summary = "input: one batch of users' data; view: the shuffled messages the analyzer receives; neighbours: one user"

    def check_input(self, data, horizon, n_arms):
        return check_context_input(data, 1, None)

    def neighbours(self, data, alphabet):
        raise DPAuditError("shuffle-DP neighbours are chosen by dpaudit.protocols.shuffle's adversaries, not enumerated.")

    def run(self, policy, data, n_runs, rng, adversary=None, *, record=True, path="auto"):
        if not hasattr(policy, "batch_release"):
            raise DPAuditError(f"{getattr(policy, 'name', '') or type(policy).__name__} has no shuffle pipeline "
                               "(batch_release), so it cannot be audited under shuffle DP.")
        inp = check_context_input(data, 1, getattr(policy, "dim", None))
        policy.reset(n_runs, rng, record=False)
        X = np.broadcast_to(inp.X[:, 0], (n_runs,) + inp.X[:, 0].shape)
        R = np.broadcast_to(inp.R[:, 0], (n_runs, inp.R.shape[0]))
        theta0 = np.zeros((n_runs, X.shape[2]))
        if _takes_view_only(policy):  # the same messages, without the analyzer's work on them
            view, _, _ = policy.batch_release(rng, X, R, theta0, view_only=True)
        else:
            view, _, _ = policy.batch_release(rng, X, R, theta0)
        return view


def _takes_view_only(policy: PolicyLike) -> bool:
    """Whether the policy's ``batch_release`` takes ``view_only`` (dpaudit's own shuffle policies; a plug-in
    need not)."""
    try:
        return "view_only" in inspect.signature(policy.batch_release).parameters
    except (TypeError, ValueError):
        return False




class ShufflePair:
    """One batch of users' data (contexts played, rewards) with the canary at position ``pos``."""

    def __init__(self, d0: ContextInput, d1: ContextInput, pos: int, label: str, background: str) -> None:
        self.d0, self.d1, self.pos, self.label, self.background = d0, d1, int(pos), label, background

    def describe(self) -> dict[str, object]:
        return {"label": self.label, "canary_position": self.pos, "batch": int(self.d0.X.shape[0]),
                "background": self.background}

    def common_background(self) -> tuple[np.ndarray, float] | None:
        """(context, reward) held by every user but the canary on both sides, or None if they differ."""
        X0, X1 = np.asarray(self.d0.X, dtype=float)[:, 0], np.asarray(self.d1.X, dtype=float)[:, 0]
        R0, R1 = np.asarray(self.d0.R, dtype=float)[:, 0], np.asarray(self.d1.R, dtype=float)[:, 0]
        others = np.arange(X0.shape[0]) != self.pos
        if not others.any():
            return None
        x, r = X0[others][0], R0[others][0]
        same = (np.all(X0[others] == x) and np.all(X1[others] == x) and np.all(R0[others] == r)
                and np.all(R1[others] == r))
        return (x.copy(), float(r)) if same else None


def shuffle_pairs(batch: int, dim: int) -> list[ShufflePair]:
    """dpaudit's shuffle-DP adversaries (module docstring); the canary arrives first.

    * ``context``: every other user played the zero context with reward 0; the canary played ``e1``
      versus the zero context (reward 0). Her outer product's coordinate (1, 1) is at the top of its
      range against the bottom for everyone else (the extreme canary against the background), and her
      gradient term at theta = 0 is ``e1 / 2`` against 0.
    * ``reward``: every other user played ``e1`` with reward 1 (gradient term ``-e1 / 2`` at theta = 0);
      the canary played ``e1`` with reward 0 (``+e1 / 2``) versus reward 1.
    """
    e1 = np.zeros(dim)
    e1[0] = 1.0

    def variant(Xbg, Rbg, x0, x1, r0, r1, label, background):
        Xa, Ra = np.tile(Xbg, (batch, 1, 1)), np.full((batch, 1), float(Rbg))
        Xb, Rb = Xa.copy(), Ra.copy()
        Xa[0, 0], Xb[0, 0], Ra[0, 0], Rb[0, 0] = x0, x1, r0, r1
        return ShufflePair(ContextInput(Xa, Ra), ContextInput(Xb, Rb), 0, label, background)

    zero = np.zeros((1, dim))
    return [variant(zero, 0.0, e1, np.zeros(dim), 0.0, 0.0, "context: the canary played e1 vs the zero context (reward 0)",
                    "every other user played the zero context with reward 0"),
            variant(e1[None], 1.0, e1, e1, 0.0, 1.0, "reward: the canary played e1 with reward 0 vs 1",
                    "every other user played e1 with reward 1")]


def _cuts(shuffler: PiecewiseShuffler) -> np.ndarray:
    """y-bins of a Piecewise-Mechanism message: cut at the ends of the high pieces of u in {-1, -1/2, 0, 1/2, 1}
    (the randomizer is public, so the attacker may align its cells with the pieces the canary moves)."""
    u = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    left = shuffler._left(u)
    cuts = np.unique(np.concatenate([left, left + shuffler.C - 1.0]))
    return cuts[(cuts > -shuffler.C) & (cuts < shuffler.C)]


def _cells_direct(shuffler: PiecewiseShuffler, msgs: np.ndarray, cuts: np.ndarray, nb: int) -> np.ndarray:
    J, y = shuffler.decode(np.asarray(msgs, dtype=float))
    return J * nb + np.searchsorted(cuts, y)


#: equal cells of the encoded message line in the lookup table of :func:`_cells`
_TABLE_CELLS = 1 << 16


@lru_cache(maxsize=16)
def _cell_table(dim: int, W: float, C: float, cuts: tuple[float, ...]) -> np.ndarray:
    """Each of :data:`_TABLE_CELLS` equal cells of the encoded line [0, dim W] -> its messages' cell of
    :func:`_cells`, or -1 where a cell boundary (a coordinate's start J W, or a y-cut J W + C + cut) lies in it
    or within 1e-9 of it (those messages are read directly)."""
    c = np.asarray(cuts, dtype=float)
    span = dim * W
    bounds = np.arange(_TABLE_CELLS + 1) * (span / _TABLE_CELLS)
    ends = np.sort(np.concatenate([np.arange(1, dim) * W, (np.arange(dim)[:, None] * W + C + c[None, :]).ravel()]))
    first = np.searchsorted(ends, bounds[:-1] - 1e-9, side="left")
    last = np.searchsorted(ends, bounds[1:] + 1e-9, side="right")
    mids = 0.5 * (bounds[:-1] + bounds[1:])
    J = np.clip(np.floor(mids / W).astype(np.int64), 0, dim - 1)
    table = J * (c.size + 1) + np.searchsorted(c, mids - J * W - C)
    table[last > first] = -1
    return table


def _cells(shuffler: PiecewiseShuffler, msgs: np.ndarray) -> tuple[np.ndarray, int]:
    """Each message's cell (coordinate J, y-bin) as one integer, and the number of cells: read from a table of
    equal cells of the encoded line (:func:`_cell_table`), the few messages in a cell a boundary crosses read
    directly (decoded and binned), so every message gets the cell its decoded (J, y) gives."""
    msgs = np.asarray(msgs, dtype=float)
    cuts = _cuts(shuffler)
    nb = cuts.size + 1
    W = float(getattr(shuffler, "W", 0.0))
    if shuffler.dim == 1 or not W > 0:  # one coordinate (the encoding is y + C): no table needed
        return _cells_direct(shuffler, msgs, cuts, nb), shuffler.dim * nb
    table = _cell_table(int(shuffler.dim), W, float(shuffler.C), tuple(float(x) for x in cuts))
    idx = (msgs * (_TABLE_CELLS / (shuffler.dim * W))).astype(np.int64)
    np.clip(idx, 0, _TABLE_CELLS - 1, out=idx)
    cells = table.take(idx)
    amb = cells < 0
    if amb.any():
        cells[amb] = _cells_direct(shuffler, msgs[amb], cuts, nb)
    return cells, shuffler.dim * nb


def _count_cells(cells: np.ndarray, k: int) -> np.ndarray:
    n = cells.shape[0]
    flat = (cells + k * np.arange(n)[:, None]).ravel()
    return np.bincount(flat, minlength=n * k).reshape(n, k).astype(float)


def shuffle_features(policy: PolicyLike, view: ShuffleView, pos: int, group_size: int,
                     families: tuple[str, ...] = FAMILIES, model: CanaryModel | None = None) -> dict[str, np.ndarray]:
    """Feature families of one batch's view (the analyzer's shuffled messages), all of :data:`FAMILIES` unless
    ``families`` names fewer (a test counted on one family reads only that one).

    ``multiset``: the counts of every message cell (coordinate J, y-bin) in the outer-product shuffle and
    in each gradient group's shuffle (the multiset, binned: what a shuffler leaves). ``position``: the
    one-hot cells of the messages that arrived at the canary's position (only informative if the
    shuffler kept the arrival order). ``loss`` (:data:`LOSS`, given a ``model``): the exact
    log-likelihood ratio of the multiset, one column."""
    known = FAMILIES + ((LOSS,) if model is not None else ())
    unknown = set(families) - set(known)
    if unknown:
        raise DPAuditError(f"unknown shuffle feature families {sorted(unknown)}; known: {', '.join(known)}.")
    out: dict[str, np.ndarray] = {}
    if LOSS in families:
        out[LOSS] = model.losses(view)[:, None]
        families = tuple(f for f in families if f != LOSS)
        if not families:
            return out
    multiset, positional = "multiset" in families, "position" in families
    so, sg = policy.shuffler_outer, policy.shuffler_grad
    g = pos // group_size
    multi: list[np.ndarray] = []
    position: list[np.ndarray] = []
    groups = [(so, view["outer"], pos)] + [(sg, msgs, pos % group_size if i == g else None)
                                           for i, msgs in enumerate(view["grads"])]
    for sh, msgs, at in groups:
        if multiset:
            cells, k = _cells(sh, msgs)
            multi.append(_count_cells(cells, k))
            if positional and at is not None:
                position.append(np.eye(k)[cells[:, at]])
        elif at is not None:  # the position family alone: only the messages at the canary's position
            cells, k = _cells(sh, np.asarray(msgs)[:, at])
            position.append(np.eye(k)[cells])
    if multiset:
        out["multiset"] = np.hstack(multi)
    if positional:
        out["position"] = np.hstack(position)
    return out


# ---- the exact likelihood ratio of a shuffled canary, and canaries derived from the calibration ----------------


class MessageSet(TypedDict):
    """One set of shuffled messages a canary's loss reads (:class:`CanaryModel`): the outer products or the first
    PGD group's gradients, its size, its shuffler, and the messages' values for the canary's two data and the
    background's (3, ...)."""

    name: str  # "outer" or "grad"
    group: int | None  # the PGD group (None for the outer products)
    n: int
    shuffler: PiecewiseShuffler
    values: np.ndarray


class CanaryModel:
    """The exact log-likelihood ratio of a batch's shuffled messages between a pair's two sides, when every other
    user of the batch holds the same datum b (a gray-box reading: it trusts the policy's ``message_values``, as
    the likelihood attack trusts a ledger).

    Derivation (per shuffled message set, n messages, the canary's among them): the others' messages are
    i.i.d. with density g = f(. | b), the canary's has density f(. | x), and the shuffle hides which is
    hers, so the multiset M = {m_1..m_n} has probability ``prod_i g(m_i) * (1/n) sum_i f(m_i | x) / g(m_i)``
    (the canary in any of the n places). Between the canary's two values x, x' the common factor cancels::

        P(M | x) / P(M | x') = sum_i f(m_i | x) / f(m_i | b)  /  sum_i f(m_i | x') / f(m_i | b),

    a sum over the set's messages of density ratios the randomizer's public calibration gives
    (:meth:`dpaudit.mechanisms.PiecewiseShuffler.message_log_density`). The message sets (the outer
    products; each PGD group's gradients) are independent given the data, so their log-ratios add; the
    later groups' messages depend on the canary only through the earlier messages (the estimate the
    analyzer computes from them), so their factors cancel and only the canary's own group counts. The
    order of the messages is not used: the loss is that of the multiset, which a shuffler that kept the
    arrival order also releases (so a bound from it holds for such a shuffler too).
    """

    def __init__(self, pair: ShufflePair, sets: list[MessageSet]) -> None:
        self.pair, self.sets = pair, sets

    def losses(self, view: ShuffleView) -> np.ndarray:
        """``log P(view | d0) / P(view | d1)`` of each run's view (n_runs,), batched over runs: per message set the
        sums of density ratios from how many messages fall in each ratio class
        (:meth:`dpaudit.mechanisms.PiecewiseShuffler.ratio_class_counts`), their logs' difference added up."""
        total = None
        for st in self.sets:
            msgs = view["outer"] if st["name"] == "outer" else view["grads"][st["group"]]
            counts = st["shuffler"].ratio_class_counts(msgs, *st["values"]).astype(float)
            e = float(st["shuffler"].eps0)
            a = np.repeat([-1.0, 0.0, 1.0], 3)
            b = np.tile([-1.0, 0.0, 1.0], 3)
            part = np.log(counts @ np.exp(a * e)) - np.log(counts @ np.exp(b * e))
            total = part if total is None else total + part
        return total

    def classes(self) -> list[tuple[int, float, dict]]:
        """Per message set (n, eps0, ratio classes): the input of :func:`dpaudit.accountants.shuffled_canary_profile`."""
        return [(st["n"], float(st["shuffler"].eps0), st["shuffler"].ratio_classes(*st["values"])) for st in self.sets]

    def profile(self) -> CanaryProfile:
        """The pair's exact privacy-loss distribution (:func:`dpaudit.accountants.shuffled_canary_profile`)."""
        from dpaudit.accountants import shuffled_canary_profile

        return shuffled_canary_profile(self.classes())

    def separation(self) -> list[float]:
        """Per message set, how far apart the canary's two values' messages are (0..1,
        :meth:`dpaudit.mechanisms.PiecewiseShuffler.separation`)."""
        return [float(st["shuffler"].separation(st["values"][0], st["values"][1])) for st in self.sets]


def canary_model(policy: PolicyLike, pair: ShufflePair) -> tuple[CanaryModel | None, str]:
    """The pair's :class:`CanaryModel`, or None and the reason it has none (said in the findings)."""
    so, sg = getattr(policy, "shuffler_outer", None), getattr(policy, "shuffler_grad", None)
    if not callable(getattr(policy, "message_values", None)):
        return None, ("the policy does not say which vectors its messages carry (message_values), so the exact "
                      "likelihood ratio of its shuffled messages is unknown")
    if not all(callable(getattr(sh, a, None)) for sh in (so, sg) for a in ("message_log_density", "ratio_classes")):
        return None, "its shufflers have no known density (they are not dpaudit.mechanisms.PiecewiseShuffler)"
    bg = pair.common_background()
    if bg is None:
        return None, "the other users of the batch do not all hold the same datum"
    B = int(pair.d0.X.shape[0])
    groups = int(getattr(policy, "groups", 1))
    size = B // groups
    if pair.pos >= size:
        return None, ("the canary is not in the first PGD group (a later group's gradients are taken at an estimate "
                      "that depends on the earlier messages)")
    X = np.stack([np.asarray(pair.d0.X, dtype=float)[pair.pos, 0], np.asarray(pair.d1.X, dtype=float)[pair.pos, 0],
                  bg[0]])
    R = np.array([float(pair.d0.R[pair.pos, 0]), float(pair.d1.R[pair.pos, 0]), bg[1]])
    vals = policy.message_values(X, R)
    sets: list[MessageSet] = [
        {"name": "outer", "group": None, "n": B, "shuffler": so, "values": np.asarray(vals["outer"], dtype=float)},
        {"name": "grad", "group": 0, "n": size, "shuffler": sg, "values": np.asarray(vals["grad"], dtype=float)}]
    for st in sets:
        st["shuffler"].scaled(st["values"])  # inside the calibrated ranges, or one sentence why not
    return CanaryModel(pair, sets), ""


#: magnitudes of the calibrated canaries' contexts (times a unit sign pattern)
_MAGNITUDES = np.linspace(0.0, 1.0, 21)


def calibrated_pairs(policy: PolicyLike, batch: int, limit: int = 4) -> list[ShufflePair]:
    """Canaries derived from the randomizer's calibration, against a background equal to the canary's other value.

    Data points: contexts ``a sigma / |sigma|`` for a in 0, 0.05, ..., 1 and sigma all ones or alternating
    signs, with rewards at both ends of the policy's reward range. Every ordered (canary, background) pair of
    them is scored in each message set by :meth:`~dpaudit.mechanisms.PiecewiseShuffler.separation` of the
    canary's and the background's messages (the Piecewise Mechanism's high pieces of width C - 1 stop
    overlapping once the scaled inputs differ by 2 (C - 1) / (C + 1), about 0.35 at eps0 = 3.5): for such a
    pair the exact privacy loss depends on it only through those separations and grows with each, so the
    pairs on their Pareto front (at most ``limit``, the largest total separation first) are the candidates;
    :func:`dpaudit.accountants.shuffled_canary_profile` ranks them exactly. d0 has the canary, d1 every user
    at the background (so the canary's other value is the background's: her absence). Empty for a policy
    without ``message_values`` or whose shufflers are not Piecewise ones."""
    so, sg = getattr(policy, "shuffler_outer", None), getattr(policy, "shuffler_grad", None)
    if not callable(getattr(policy, "message_values", None)) or not all(
            callable(getattr(sh, "separation", None)) for sh in (so, sg)):
        return []
    dim = int(policy.dim)
    lo, hi = (float(v) for v in getattr(policy, "reward_range", (0.0, 1.0)))
    signs = [np.ones(dim)] + ([np.where(np.arange(dim) % 2, -1.0, 1.0)] if dim > 1 else [])
    ctx = np.unique(np.round(np.vstack([a * s / np.linalg.norm(s) for s in signs for a in _MAGNITUDES]), 12), axis=0)
    X = np.repeat(ctx, 2, axis=0)
    R = np.tile([lo, hi], ctx.shape[0])
    vals = policy.message_values(X, R)
    # only data whose messages the randomizers accept (a policy's ranges may be narrower than the unit ball)
    ok = np.ones(X.shape[0], dtype=bool)
    for sh, key in ((so, "outer"), (sg, "grad")):
        ok &= np.all(np.abs((vals[key] - sh.mid) / sh.half) <= 1 + 1e-9, axis=1)
    if ok.sum() < 2:
        return []
    X, R, vals = X[ok], R[ok], {k: v[ok] for k, v in vals.items()}
    sep_o = so.separation(vals["outer"][:, None], vals["outer"][None, :])
    sep_g = sg.separation(vals["grad"][:, None], vals["grad"][None, :])
    i, j = np.nonzero(~np.eye(X.shape[0], dtype=bool))
    pts = np.round(np.stack([sep_o[i, j], sep_g[i, j]], axis=1), 9)
    # the Pareto front of (outer, gradient) separation, each point once (the first pair that reaches it)
    order = np.lexsort((-pts[:, 1], -pts[:, 0]))
    front, best_g = [], -1.0
    for k in order:
        if pts[k, 1] > best_g:
            front.append(k)
            best_g = pts[k, 1]
    front.sort(key=lambda k: -(pts[k, 0] + pts[k, 1]))
    out = []
    for k in front[:limit]:
        c, b = int(i[k]), int(j[k])
        Xa = np.tile(X[b], (batch, 1))[:, None, :]
        Ra = np.full((batch, 1), R[b])
        Xc, Rc = Xa.copy(), Ra.copy()
        Xc[0, 0], Rc[0, 0] = X[c], R[c]

        def txt(x: np.ndarray, r: float) -> str:
            return "[" + ", ".join(f"{v:.3g}" for v in x) + f"] with reward {r:g}"

        out.append(ShufflePair(ContextInput(Xc, Rc), ContextInput(Xa, Ra), 0,
                               f"calibrated: the canary played {txt(X[c], R[c])} vs the background's datum "
                               f"(separation {pts[k, 0]:.3g} of the outer-product messages, {pts[k, 1]:.3g} of the "
                               "gradient messages)",
                               f"every other user played {txt(X[b], R[b])}"))
    return out
