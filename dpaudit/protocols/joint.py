"""Joint DP ("anticipating JDP"): the view is every action after the canary round.

The definition is "Anticipating JDP" of the interactive joint/local DP definitions (:mod:`dpaudit.papers`).

The adversary fixes every context and reward (:class:`ContextInput`): the history before the canary
round t and the future. The pairs (:func:`joint_pairs`, :func:`readout_pairs`) are dpaudit's
adversaries, choices of ours: contexts ``+e1`` and ``-e1`` on arms 0 and 1 (the zero vector on the
others) in every round, rewards 1/2, and at round t either

* ``reward``: the canary's rewards are 1 on every arm versus 0 (moves the PGD gradients), or
* ``context``: the canary's arms all carry ``e1`` versus ``e2`` (moves the trees' outer products; ``-e1``
  when d = 1),

with t in {0, T/2}; plus the PGD read-out adversary (:func:`readout_pairs`) and, for the central view
a_t..a_T reported beside the verdict, a canary that swaps which arm carries ``e1``. The release parts
use the worst-case canaries of :func:`canary_pairs` (derived from the trees' calibration: orthogonal
contexts and changed rewards at the round under the most released nodes); their view of a policy built
on binary trees is :func:`canary_nodes` / :func:`tree_features` (the tree nodes at and beside the
canary), and :meth:`JointDP.run` replays a recorded run on the other input for the exact loss.
"""

from __future__ import annotations

import re
from typing import Sequence, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import Release, ReplayMismatch, tree_node_counts
from dpaudit.policies.base import PolicyLike, check_actions

from .base import ContextInput, Protocol, check_context_input

__all__ = ["ContextInput", "JointDP", "JointPair", "ReadoutPair", "TreeNode", "joint_pairs", "readout_pairs", "canary_pairs",
           "growth_background",
           "canary_nodes", "tree_features", "READOUT_NORM", "READOUT_EVERY", "check_context_input"]


class JointDP(Protocol):
    """Anticipating joint DP (the interactive joint/local DP definitions, Def. "Anticipating JDP").

    The input is the contexts and rewards of every round (fixed by the adversary, who thereby fixes the
    history before the canary round t and chooses every future context and reward); the policy sees
    the contexts of round s and the reward of the arm it plays; neighbours differ in round t's
    contexts and rewards; the view is ``a_{t+1}..a_T`` (the audits drop the columns up to t).
    :meth:`run` returns all T actions so that the central view ``a_t..a_T`` can be reported beside.
    """

    name = "joint"
    summary = ("input: contexts (T x K x d) and rewards (T x K); view: a_{t+1}..a_T; neighbours: round t's "
               "contexts and rewards changed")

    def check_input(self, data, horizon, n_arms):
        return check_context_input(data, n_arms, None)

    def neighbours(self, data, alphabet):
        raise DPAuditError("joint-DP neighbours are chosen by the adversaries of dpaudit.protocols.joint, not enumerated.")

    def run(self, policy, data, n_runs, rng, adversary=None, *, record=True, path="auto", replay=None):
        """Run ``n_runs`` runs on ``data``; ``replay``: the releases of a recorded run on a neighbouring input
        with a generator in the same state as ``rng`` (:meth:`dpaudit.mechanisms.Ledger.replay`), so that every
        release keeps its recorded value and the ledger records its centre under ``data``."""
        if adversary is not None:
            raise DPAuditError("under joint DP the adversary acts through the fixed contexts and rewards, not by queries.")
        n_arms = int(policy.n_arms)
        inp = check_context_input(data, n_arms, getattr(policy, "dim", None))
        try:
            policy.reset(n_runs, rng, record=record)
        except TypeError:
            policy.reset(n_runs, rng)
        if replay is not None:
            ledger = getattr(policy, "ledger", None)
            if not record or not callable(getattr(ledger, "replay", None)):
                raise ReplayMismatch("a replayed run needs a policy that records a dpaudit.mechanisms.Ledger, and "
                                     "record=True.")
            ledger.replay(replay)
        T = inp.X.shape[0]
        who = getattr(policy, "name", "") or type(policy).__name__
        views = np.empty((n_runs, T), dtype=np.int64)
        for t in range(T):
            arms = np.broadcast_to(inp.X[t], (n_runs,) + inp.X.shape[1:])
            out = check_actions(policy.act(t, arms), n_runs, n_arms, who, t)
            views[:, t] = out
            policy.observe(t, out, inp.R[t, out])
        return views


class JointPair:
    """A neighbouring pair of contextual inputs differing at round ``round``."""

    def __init__(self, d0: ContextInput, d1: ContextInput, round_: int, label: str) -> None:
        self.d0, self.d1, self.round, self.label = d0, d1, int(round_), label

    def describe(self) -> dict[str, object]:
        return {"label": self.label, "round": self.round, "horizon": int(self.d0.X.shape[0]),
                "canary_contexts_d": self.d0.X[self.round].tolist(), "canary_contexts_d_prime": self.d1.X[self.round].tolist(),
                "canary_rewards_d": self.d0.R[self.round].tolist(), "canary_rewards_d_prime": self.d1.R[self.round].tolist(),
                "background": "arms 0 and 1 carry +e1 and -e1 (others the zero vector), rewards 1/2, every other round"}


def joint_pairs(n_arms: int, dim: int, horizon: int, *, central: bool = False) -> list[JointPair]:
    """dpaudit's joint-DP adversaries (module docstring); ``central``: the pair for the central view."""
    K, d, T = n_arms, dim, horizon
    e1 = np.zeros(d)
    e1[0] = 1.0
    e2 = np.zeros(d)
    e2[min(1, d - 1)] = 1.0
    if d == 1:
        e2 = -e1
    X = np.zeros((T, K, d))
    X[:, 0], X[:, 1] = e1, -e1
    R = np.full((T, K), 0.5)

    def variant(t: int, x0: np.ndarray, x1: np.ndarray, r0: np.ndarray, r1: np.ndarray, label: str) -> JointPair:
        Xa, Xb, Ra, Rb = X.copy(), X.copy(), R.copy(), R.copy()
        Xa[t], Xb[t], Ra[t], Rb[t] = x0, x1, r0, r1
        return JointPair(ContextInput(Xa, Ra), ContextInput(Xb, Rb), t, label)

    if central:
        t = T // 2
        x0 = np.zeros((K, d))
        x1 = np.zeros((K, d))
        x0[0], x1[1] = e1, e1
        return [variant(t, x0, x1, R[t], R[t], f"central: round {t}'s e1 on arm 0 vs arm 1")]
    out = []
    for t in sorted({0, T // 2}):
        if t >= T - 1:
            continue
        out.append(variant(t, X[t], X[t], np.ones(K), np.zeros(K), f"reward: round {t}'s rewards 1 vs 0"))
        out.append(variant(t, np.tile(e1, (K, 1)), np.tile(e2, (K, 1)), R[t], R[t],
                           f"context: round {t}'s arms all e1 vs all {'e2' if d > 1 else '-e1'}"))
    return out


def growth_background(n_arms: int, dim: int, horizon: int) -> ContextInput:
    """An input that makes a policy's data-dependent releases happen as early as any input can: at round t
    every arm carries the unit context ``e_(t mod d)``, rewards 1/2.

    Policies that release again when their design matrix has grown enough (Sarmasarkar 2026, Alg. 2's
    Criterion II: det H~ doubles; rarely-switching OFUL-style rules alike) release the most on the input
    whose Gram matrix's determinant grows fastest, and among unit contexts that is the one spreading its
    mass equally over the d directions (for a fixed trace the determinant is largest at equal eigenvalues).
    The joint plan's long-horizon ledger runs the policy on it: a short audit's background (one direction)
    never makes such a policy update, so a mistake in the updates' calibration would go unseen."""
    K, d, T = int(n_arms), int(dim), int(horizon)
    X = np.zeros((T, K, d))
    X[np.arange(T), :, np.arange(T) % d] = 1.0
    return ContextInput(X, np.full((T, K), 0.5))


def canary_pairs(n_arms: int, dim: int, horizon: int) -> list[JointPair]:
    """The worst-case canaries for the releases of a policy built on binary trees of outer products
    (Sarmasarkar 2026, Alg. 2: trees of x_s x_s^T, a private gradient of terms (mu(x_s^T theta) - r_s) x_s).

    Derived from the trees' calibration: a round's packed outer product has L2-sensitivity sqrt(2), the
    largest distance between two unit rank-one matrices, attained exactly by two *orthogonal* unit
    contexts; so the canary's arms all carry ``e1`` on one side and all ``e2`` on the other (whatever arm
    the policy plays, its played context is known), and with them the rewards change too (under joint DP
    a round's context and reward both change): 0 vs 1 and 1 vs 0, the two orientations of the gradient
    term's change, whose size depends on the estimate theta at each gradient release. With d = 1 there is
    no second direction: ``e1`` against the zero vector (shift 1).

    The canary round is the first round under the most released nodes within T
    (:func:`dpaudit.mechanisms.tree_node_counts`): round 0, which lies under floor(log2 T) + 1 nodes for
    every T and feeds every gradient release that follows. Its history is empty, which is also the
    history under which Alg. 2's canary round is most likely to explore and so feed the exploration tree
    too: V~ is then exactly (lambda + shift) I, and any earlier round could only add explored outer
    products and tree noise to it (measured: with ``shift_scale=0`` round 0 explores in every run, a
    canary after eight quiet rounds in fewer, and its loss is smaller). The background is
    :func:`joint_pairs`'. The audit screens the two pairs, and which side to sample, on pilot runs.
    """
    K, d, T = int(n_arms), int(dim), int(horizon)
    e1 = np.zeros(d)
    e1[0] = 1.0
    e2 = np.zeros(d)
    if d > 1:
        e2[1] = 1.0
    other = "e2" if d > 1 else "0"
    X = np.zeros((T, K, d))
    X[:, 0], X[:, 1] = e1, -e1
    R = np.full((T, K), 0.5)
    t = int(np.argmax(tree_node_counts(T)))  # the first of the rounds under the most nodes: 0

    def pair(r0: float, r1: float) -> JointPair:
        Xa, Ra = X.copy(), R.copy()
        Xb, Rb = Xa.copy(), Ra.copy()
        Xa[t], Xb[t] = e1, e2
        Ra[t], Rb[t] = r0, r1
        return JointPair(ContextInput(Xa, Ra), ContextInput(Xb, Rb), t,
                         f"canary: round {t}'s arms all (e1, reward {r0:g}) vs all ({other}, reward {r1:g})")

    return [pair(0.0, 1.0), pair(1.0, 0.0)]


#: a binary-tree node's release label: ``NAME[level L, rounds A..B]`` (:class:`dpaudit.mechanisms.BinaryTreeMechanism`)
_NODE = re.compile(r"^(?P<tree>.*)\[level (?P<level>\d+), rounds (?P<lo>\d+)\.\.(?P<hi>\d+)\]$")


class TreeNode(TypedDict):
    """A binary-tree node near a canary round (:func:`canary_nodes`)."""

    index: int  # its release's index in the ledger
    tree: str  # the tree's name
    level: int
    lo: int  # the first and last rounds it sums
    hi: int
    on_path: bool  # whether it contains the canary round
    parent: int | None  # the index in the list of the path node whose sibling it is (its own for a path node)


def canary_nodes(releases: Sequence[Release], t: int) -> list[TreeNode]:
    """The binary-tree nodes near round ``t`` among a ledger's releases, in release order: every node that
    contains round t (``on_path``) and the sibling of each (the node a reused-noise bug would correlate
    with it: a parent that reuses a child's noise minus that child is the other child, noise-free). Each is
    ``{"index", "tree", "level", "lo", "hi", "on_path", "parent"}`` (``parent``: the index in this list of
    the path node whose sibling it is, or its own for a path node)."""
    out: list[TreeNode] = []
    for k, rel in enumerate(releases):
        m = _NODE.match(getattr(rel, "label", ""))
        if m is None:
            continue
        lo, hi = int(m["lo"]), int(m["hi"]) + 1
        size = hi - lo
        parent_lo = lo - (lo % (2 * size))
        on_path = lo <= t < hi
        if on_path or parent_lo <= t < parent_lo + 2 * size:
            out.append({"index": k, "tree": m["tree"], "level": int(m["level"]), "lo": lo, "hi": hi - 1,
                        "on_path": on_path, "parent": None})
    for node in out:
        node["parent"] = next((i for i, p in enumerate(out) if p["on_path"] and p["tree"] == node["tree"]
                               and p["level"] == node["level"]), None)
    return out


def tree_features(policy: PolicyLike, t: int, horizon: int) -> np.ndarray:
    """Values of the tree nodes containing round t and of their siblings (:func:`canary_nodes`), from the
    policy's ledger: (n_runs, sum of the nodes' widths)."""
    rels = policy.ledger.releases
    nodes = canary_nodes(rels, t)
    if not nodes:
        raise DPAuditError("the policy's ledger has no binary-tree release near the canary round; the gray-box tree "
                           "attack needs a policy built on dpaudit.mechanisms.BinaryTreeMechanism.")
    return np.hstack([rels[n["index"]].value for n in nodes])


#: the read-out arms' context length: small, so that read-out rounds barely move the estimate they read
READOUT_NORM = 0.05
#: every READOUT_EVERY-th round is a read-out round; the others grow the design matrix
READOUT_EVERY = 4


class ReadoutPair(JointPair):
    """The PGD read-out adversary's pair (:func:`readout_pairs`)."""

    def describe(self) -> dict[str, object]:
        d = super().describe()
        d["background"] = (f"every {READOUT_EVERY}th round arms 0 and 1 carry +/-{READOUT_NORM:g} e1 (the others the zero "
                           "vector); every other round all arms carry one of e2..ed in turn; rewards 1/2")
        return d


def readout_pairs(n_arms: int, dim: int, horizon: int) -> list[JointPair]:
    """The PGD read-out adversary: a canary whose reward moves the private estimate's e1 coordinate,
    a background that triggers the estimate's updates and then reads its sign out of the actions.

    Built for Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized Linear Contextual
    Bandits", Alg. 2 (``jdp-glm``), whose actions depend on the canary only through the private PGD estimate
    theta (Criterion II's update), choices of ours:

    * round 0 (the canary): every arm carries e1, so the played context is e1 whatever the arm; the
      rewards are 1 on every arm versus 0. Its gradient term (mu(theta_1) - r) e1 differs by e1 between
      the sides in every PGD step that follows.
    * growth rounds (all but every ``READOUT_EVERY``-th): every arm carries e_k, k cycling over 2..d, with
      reward 1/2. The played outer products grow det H in directions orthogonal to e1, so Criterion II
      fires, while the gradient's e1 coordinate keeps only the canary's term (no background pull
      towards theta_1 = 0).
    * read-out rounds: arms 0 and 1 carry +/-``READOUT_NORM`` e1, the others the zero vector. Both
      widths ||x||_{H^-1} are equal, so the exploit rule plays arm 0 exactly when theta_1 > 0: the view
      reads the sign of the canary's coordinate after each update.

    Needs d >= 2 and T >= 8 (else no pair). Under the audit's defaults the first update comes after
    about a hundred rounds (``benchmarks/results/joint_power.md``); at T = 16 the pair shows nothing.
    """
    K, d, T = int(n_arms), int(dim), int(horizon)
    if d < 2 or T < 8:
        return []
    X = np.zeros((T, K, d))
    s = np.arange(1, T)
    read = s[s % READOUT_EVERY == 0]
    grow = s[s % READOUT_EVERY != 0]
    X[read, 0, 0], X[read, 1, 0] = READOUT_NORM, -READOUT_NORM
    X[grow, :, 1 + grow % (d - 1)] = 1.0
    X[0, :, 0] = 1.0
    R = np.full((T, K), 0.5)
    Ra, Rb = R.copy(), R.copy()
    Ra[0], Rb[0] = 1.0, 0.0
    return [ReadoutPair(ContextInput(X, Ra), ContextInput(X.copy(), Rb), 0,
                        "pgd read-out: round 0's rewards 1 vs 0 (all arms e1), growth rounds e2..ed, read-out rounds "
                        f"+/-{READOUT_NORM:g} e1")]

