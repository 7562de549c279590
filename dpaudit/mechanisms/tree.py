"""Continual release by the binary tree (:class:`BinaryTreeMechanism`) and how many released nodes each
round lies under (:func:`tree_node_counts`).

The joint-DP algorithm of Sarmasarkar (2026) "Shuffle and Joint Differential Privacy for Generalized Linear
Contextual Bandits", Alg. 2, releases its two sums of outer products (V_t and H_t) through such trees.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import ZCDP, Guarantee
from dpaudit.errors import DPAuditError, check_nonnegative, check_positive
from dpaudit.mechanisms.ledger import Fed, Ledger, Noise, Release
from dpaudit.mechanisms.symmetric import pack_symmetric, unpack_symmetric

__all__ = ["tree_node_counts", "BinaryTreeMechanism"]


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
    the symmetric Gaussian channel of the interactive joint/local DP definitions,
    :func:`~dpaudit.mechanisms.symmetric.symmetric_gaussian`: the packed coordinates are i.i.d.).
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
