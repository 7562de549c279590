"""Shuffle DP (seed 002 Alg. 1): the view is the shuffled multiset of one batch's messages.

The adversary fixes one batch of users' data (:func:`shuffle_pairs`: an extreme canary against a
background at the other end of the randomizer's range, the canary arriving first); the view is what
the analyzer receives from that batch, read through :func:`shuffle_features` as a binned multiset
(what a shuffler leaves) and as the messages at the canary's arrival position (informative only if
the order was kept).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from dpaudit.errors import DPAuditError

from .base import ContextInput, Protocol, check_context_input

__all__ = ["ShuffleDP", "ShufflePair", "shuffle_pairs", "shuffle_features", "FAMILIES"]

#: the feature families of a shuffled view (:func:`shuffle_features`)
FAMILIES = ("multiset", "position")


class ShuffleDP(Protocol):
    """Shuffle DP (seed 002 Alg. 1): the view is what the analyzer receives from one batch.

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


def _takes_view_only(policy: Any) -> bool:
    """Whether the policy's ``batch_release`` takes ``view_only`` (dpaudit's own shuffle policies; a plug-in
    need not)."""
    try:
        return "view_only" in inspect.signature(policy.batch_release).parameters
    except (TypeError, ValueError):
        return False




class ShufflePair:
    """One batch of users' data (contexts played, rewards) with the canary at position ``pos``."""

    def __init__(self, d0: Any, d1: Any, pos: int, label: str, background: str) -> None:
        self.d0, self.d1, self.pos, self.label, self.background = d0, d1, int(pos), label, background

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "canary_position": self.pos, "batch": int(self.d0.X.shape[0]),
                "background": self.background}


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


def _cuts(shuffler: Any) -> np.ndarray:
    """y-bins of a Piecewise-Mechanism message: cut at the ends of the high pieces of u in {-1, -1/2, 0, 1/2, 1}
    (the randomizer is public, so the attacker may align its cells with the pieces the canary moves)."""
    u = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    left = shuffler._left(u)
    cuts = np.unique(np.concatenate([left, left + shuffler.C - 1.0]))
    return cuts[(cuts > -shuffler.C) & (cuts < shuffler.C)]


def _cells(shuffler: Any, msgs: np.ndarray) -> tuple[np.ndarray, int]:
    """Each message's cell (coordinate J, y-bin) as one integer, and the number of cells."""
    J, y = shuffler.decode(np.asarray(msgs, dtype=float))
    cuts = _cuts(shuffler)
    nb = cuts.size + 1
    return J * nb + np.searchsorted(cuts, y), shuffler.dim * nb


def _count_cells(cells: np.ndarray, k: int) -> np.ndarray:
    n = cells.shape[0]
    flat = (cells + k * np.arange(n)[:, None]).ravel()
    return np.bincount(flat, minlength=n * k).reshape(n, k).astype(float)


def shuffle_features(policy: Any, view: dict[str, Any], pos: int, group_size: int,
                     families: tuple[str, ...] = FAMILIES) -> dict[str, np.ndarray]:
    """Feature families of one batch's view (the analyzer's shuffled messages), all of :data:`FAMILIES` unless
    ``families`` names fewer (a test counted on one family reads only that one).

    ``multiset``: the counts of every message cell (coordinate J, y-bin) in the outer-product shuffle and
    in each gradient group's shuffle (the multiset, binned: what a shuffler leaves). ``position``: the
    one-hot cells of the messages that arrived at the canary's position (only informative if the
    shuffler kept the arrival order)."""
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise DPAuditError(f"unknown shuffle feature families {sorted(unknown)}; known: {', '.join(FAMILIES)}.")
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
    out = {}
    if multiset:
        out["multiset"] = np.hstack(multi)
    if positional:
        out["position"] = np.hstack(position)
    return out
