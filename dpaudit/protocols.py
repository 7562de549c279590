"""Protocols: what the private input is, what the adversary sees, and what "neighbouring" means.

Following seed 001 Sec. III (Defs. 3 and 4):

=============== ============================ ======================== ================ ==============
protocol        private input                policy observes at t     view             neighbours
=============== ============================ ======================== ================ ==============
``TableDP``     table d of rewards, T x K    d[t, a_t]                a_1..a_T         one row
``ViewDP``      list r of rewards, length T  r[t]                     a_1..a_T         one entry
``InteractiveDP`` table d and an adversary B d[t, q_t], q_t=B(o_1..o_t) o_1..o_T         one row
=============== ============================ ======================== ================ ==============

Each protocol turns (policy, input) into an interactive mechanism: :meth:`Protocol.run` samples
views for a batch of runs. Adversaries are batched deterministic functions of the outputs so far
(seed 001 App. B, Remark 6: deterministic adversaries suffice).

Without an adversary, dpaudit's own episode-based policies (the UCB and GOPE families and the
mutants, which offer ``plan``/``complete``; see :mod:`dpaudit.simulate`) run block by block on
Table and View DP inputs: a block's reward sums are prefix-sum differences of the input, so the
cost is O(blocks), not O(T) Python steps, and the views, releases and ledger are those of the
per-step path (tests check this for every such policy). Plug-ins always run step by step: an audit
does not trust a policy's claim that its two paths agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.policies.base import check_actions

__all__ = [
    "Adversary",
    "IdentityAdversary",
    "ConstantAdversary",
    "TableAdversary",
    "Protocol",
    "TableDP",
    "ViewDP",
    "InteractiveDP",
    "PROTOCOLS",
    "get_protocol",
    "offers_blocks",
    "FixedActionSet",
]


class Adversary:
    """A deterministic adversary B = (B_1, ..., B_T): q_t = B_t(o_1, ..., o_t), batched over runs."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        """``outputs``: (n_runs, t + 1) actions o_1..o_{t+1} (0-based t); returns (n_runs,) queries."""
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class IdentityAdversary(Adversary):
    """q_t = o_t: the interaction of Algorithm 1 (Interactive DP reduces to Table DP)."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        return outputs[:, t]

    def describe(self) -> str:
        return "identity (q_t = o_t)"


@dataclass(frozen=True)
class ConstantAdversary(Adversary):
    """q_t = a_t for a fixed sequence a, whatever the policy recommends (seed 001 App. B, Step 1)."""

    sequence: tuple[int, ...]

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        return np.full(outputs.shape[0], self.sequence[t], dtype=np.int64)

    def describe(self) -> str:
        return f"constant queries {list(self.sequence)}"


@dataclass(frozen=True)
class TableAdversary(Adversary):
    """A general deterministic adversary given by lookup tables.

    ``tables[t]`` has ``K^(t+1)`` entries: the query after outputs (o_1..o_{t+1}), indexed by the
    base-K number with digits o_1..o_{t+1} (most significant first).
    """

    tables: tuple[tuple[int, ...], ...]
    n_arms: int

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        if t >= len(self.tables):
            return outputs[:, t]  # the last query is never seen by the policy within the horizon
        weights = self.n_arms ** np.arange(t, -1, -1)
        idx = outputs[:, : t + 1] @ weights
        return np.asarray(self.tables[t], dtype=np.int64)[idx]

    def describe(self) -> str:
        parts = []
        for t, tab in enumerate(self.tables):
            parts.append(f"B_{t + 1}: " + ", ".join(
                f"{''.join(map(str, np.base_repr(i, self.n_arms).zfill(t + 1)))}->{q}" for i, q in enumerate(tab)))
        return "; ".join(parts) if parts else "no queries that matter"


class FixedActionSet:
    """Feeds a linear or contextual policy a fixed public action set (K feature vectors in R^d) every round.

    The protocols call ``act(t, None)``; linear policies need the (n_runs, K, d) features. A fixed
    set is one admissible choice of the (public, possibly adversarial) contexts, the same in every
    run. Everything else is the wrapped policy's; phase-based policies (GOPE) get the set before the
    block path's first ``plan()`` through :meth:`prepare_blocks`.
    """

    def __init__(self, inner: Any, features: np.ndarray) -> None:
        self._inner = inner
        self._features = np.asarray(features, dtype=float)
        self._arms = self._features[None]

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")  # absent while unpickling: no forwarding then
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    @property
    def wrapped(self) -> Any:
        """The policy inside (:func:`offers_blocks` checks where it comes from)."""
        return self._inner

    def reset(self, n_runs: int, rng: np.random.Generator, **kw: Any) -> None:
        try:
            self._inner.reset(n_runs, rng, **kw)
        except TypeError:
            self._inner.reset(n_runs, rng)
        self._arms = np.broadcast_to(self._features, (n_runs,) + self._features.shape)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        return self._inner.act(t, self._arms if arms is None else arms)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        self._inner.observe(t, actions, rewards)

    def prepare_blocks(self) -> None:
        """Give a phase-based policy (GOPE) its fixed action set before the block path's plan()."""
        self._inner.set_arms(self._arms)


def offers_blocks(policy) -> bool:
    """Whether ``Protocol.run`` may advance ``policy`` block by block (see the module docstring)."""
    if not (getattr(policy, "fast_path", False) and hasattr(policy, "plan") and hasattr(policy, "complete")):
        return False
    if getattr(policy, "dim", None) is not None and not hasattr(policy, "prepare_blocks"):
        return False  # a linear policy needs its fixed action set before plan(); only a wrapper can give it
    inner = getattr(policy, "wrapped", policy)
    return type(inner).__module__.startswith("dpaudit.")


class Protocol:
    """Base class: the private input, the observation rule, the view and the neighbouring relation."""

    name: str = ""
    summary: str = ""

    def check_input(self, data: np.ndarray, horizon: int, n_arms: int) -> np.ndarray:
        raise NotImplementedError

    def reward(self, data: np.ndarray, t: int, actions: np.ndarray, queries: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def neighbours(self, data: np.ndarray, alphabet: Sequence[float]) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (index changed, neighbouring input) over a finite reward alphabet."""
        raise NotImplementedError

    def prefix(self, data: np.ndarray) -> np.ndarray:
        """Prefix sums of the input along the rounds, for :meth:`block_sums` (row 0 is zero)."""
        return np.concatenate([np.zeros((1,) + data.shape[1:]), np.cumsum(data, axis=0)])

    def block_sums(self, prefix: np.ndarray, arms: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Reward sums of ``length`` plays of ``arms`` from round ``start`` (same shapes; length 0 gives 0)."""
        raise NotImplementedError

    def run(
        self,
        policy,
        data: np.ndarray,
        n_runs: int,
        rng: np.random.Generator,
        adversary: Adversary | None = None,
        *,
        record: bool = True,
        path: str = "auto",
    ) -> np.ndarray:
        """Sample ``n_runs`` views of the interactive mechanism (policy, protocol, data): (n_runs, T).

        ``path``: ``"auto"`` (blocks where :func:`offers_blocks` allows, without an adversary),
        ``"step"`` or ``"blocks"``; both give the same views and ledger for the same ``rng``. An
        input with values outside the policy's ``reward_range`` always runs step by step, so that a
        reward the policy observes there is refused by name, as ``observe`` does.
        """
        n_arms = int(policy.n_arms)
        horizon = data.shape[0]
        data = self.check_input(data, horizon, n_arms)
        if adversary is not None and not getattr(policy, "accepts_queries", True):
            raise DPAuditError(
                f"{getattr(policy, 'name', '') or type(policy).__name__} only observes the arm it chose, so it "
                "cannot be run against an Interactive-DP adversary; use the table or view protocol."
            )
        try:
            policy.reset(n_runs, rng, record=record)
        except TypeError:  # plug-ins need not accept ``record``
            policy.reset(n_runs, rng)
        if path not in ("auto", "step", "blocks"):
            raise DPAuditError(f"path must be 'auto', 'step' or 'blocks', got {path!r}.")
        blocks_ok = adversary is None and offers_blocks(policy)
        lo, hi = getattr(policy, "reward_range", (-np.inf, np.inf))
        if blocks_ok and (data.min() < lo or data.max() > hi):
            # complete() sees only block sums: an input with rewards outside the range the sensitivity
            # assumes runs step by step, where observe() refuses the first such reward the policy sees
            path = "step"
        if path == "blocks" and not blocks_ok:
            raise DPAuditError(
                "the block path needs one of dpaudit's episode-based policies (plan()/complete()) and no adversary; "
                f"{getattr(policy, 'name', '') or type(policy).__name__} runs step by step."
            )
        who = getattr(policy, "name", "") or type(policy).__name__
        if path != "step" and blocks_ok:
            return self._run_blocks(policy, data, n_runs, n_arms, who)
        views = np.empty((n_runs, horizon), dtype=np.int64)
        for t in range(horizon):
            out = check_actions(policy.act(t, None), n_runs, n_arms, who, t)
            views[:, t] = out
            queries = out if adversary is None else adversary.query(t, views[:, : t + 1])
            policy.observe(t, queries, self.reward(data, t, out, queries))
        return views

    def _run_blocks(self, policy, data: np.ndarray, n_runs: int, n_arms: int, who: str) -> np.ndarray:
        """The block path of :meth:`run`: one iteration advances every run by one whole block.

        Each run's blocks tile rounds 0..T-1 back to back, so the views are the blocks' arms, each
        repeated for its length, in (run, start) order: one ``np.repeat`` at the end.
        """
        horizon = data.shape[0]
        if hasattr(policy, "prepare_blocks"):
            policy.prepare_blocks()
        prefix = self.prefix(data)
        active = np.ones(n_runs, dtype=bool)
        segments: list[tuple[np.ndarray, ...]] = []
        while True:
            idx = np.flatnonzero(active)
            if idx.size == 0:
                break
            start, arms, lengths = policy.plan()
            s = np.asarray(start, dtype=np.int64)[idx]
            A = np.asarray(arms, dtype=np.int64)[idx]
            L = np.asarray(lengths, dtype=np.int64)[idx]
            total = L.sum(axis=1)
            if A.min() < 0 or A.max() >= n_arms or L.min() < 0 or total.min() < 1:
                raise DPAuditError(f"policy {who} planned a block with an arm outside 0..{n_arms - 1} or no plays.")
            seg_start = s[:, None] + np.cumsum(L, axis=1) - L
            seg_len = np.clip(np.minimum(L, horizon - seg_start), 0, None)
            keep = seg_len > 0
            segments.append((np.broadcast_to(idx[:, None], A.shape)[keep], seg_start[keep], A[keep], seg_len[keep]))
            end = s + total
            full = end <= horizon
            if full.any():
                policy.complete(idx[full], self.block_sums(prefix, A[full], seg_start[full], L[full]))
            active[idx[end >= horizon]] = False
        run, seg_start, arm, seg_len = (np.concatenate(c) for c in zip(*segments))
        order = np.lexsort((seg_start, run))
        run, seg_start, arm, seg_len = run[order], seg_start[order], arm[order], seg_len[order]
        # the tiling check: within a run, each block starts where the previous one ended, from round 0
        first = np.r_[True, run[1:] != run[:-1]]
        expected = np.where(first, 0, np.r_[0, seg_start[:-1] + seg_len[:-1]])
        if not np.array_equal(seg_start, expected) or np.bincount(run, seg_len, minlength=n_runs).min() != horizon:
            raise DPAuditError(f"policy {who} planned blocks that do not cover rounds 0..{horizon - 1} back to back.")
        return np.repeat(arm, seg_len).reshape(n_runs, horizon)


def _check_table(data: np.ndarray, n_arms: int) -> np.ndarray:
    d = np.asarray(data, dtype=float)
    if d.ndim != 2 or d.shape[1] != n_arms or d.shape[0] < 1:
        raise DPAuditError(f"a reward table must have shape (T, K) = (T, {n_arms}) with T >= 1, got {d.shape}.")
    if not np.all(np.isfinite(d)):
        raise DPAuditError("the reward table contains NaN or inf; rewards must be finite numbers.")
    return d


class TableDP(Protocol):
    """Table DP (seed 001 Def. 3): input a T x K table of potential rewards; neighbours differ in one row."""

    name = "table"
    summary = "input: T x K reward table; view: actions; neighbours: one row (user) changed"

    def check_input(self, data, horizon, n_arms):
        return _check_table(data, n_arms)

    def reward(self, data, t, actions, queries):
        return data[t, actions]

    def block_sums(self, prefix, arms, start, length):
        return prefix[start + length, arms] - prefix[start, arms]

    def neighbours(self, data, alphabet):
        alphabet = np.asarray(alphabet, dtype=float)
        T, K = data.shape
        grids = np.stack(np.meshgrid(*[alphabet] * K, indexing="ij"), -1).reshape(-1, K)
        for t in range(T):
            for row in grids:
                if not np.array_equal(row, data[t]):
                    other = data.copy()
                    other[t] = row
                    yield t, other


class ViewDP(Protocol):
    """View DP (seed 001 Def. 3): input the list of observed rewards; neighbours differ in one entry."""

    name = "view"
    summary = "input: list of T rewards; view: actions; neighbours: one reward changed"

    def check_input(self, data, horizon, n_arms):
        r = np.asarray(data, dtype=float)
        if r.ndim != 1 or r.size < 1:
            raise DPAuditError(f"a reward list must be one-dimensional with T >= 1 entries, got shape {r.shape}.")
        if not np.all(np.isfinite(r)):
            raise DPAuditError("the reward list contains NaN or inf; rewards must be finite numbers.")
        return r

    def reward(self, data, t, actions, queries):
        return np.full(actions.shape[0], data[t])

    def block_sums(self, prefix, arms, start, length):
        return prefix[start + length] - prefix[start]

    def neighbours(self, data, alphabet):
        for t in range(data.shape[0]):
            for v in alphabet:
                if v != data[t]:
                    other = data.copy()
                    other[t] = v
                    yield t, other


class InteractiveDP(TableDP):
    """Interactive DP (seed 001 Def. 4): the policy observes d[t, q_t] for the adversary's query q_t."""

    name = "interactive"
    summary = "input: T x K reward table and an adversary; view: actions; neighbours: one row changed"

    def reward(self, data, t, actions, queries):
        return data[t, queries]


PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (TableDP, ViewDP, InteractiveDP)}


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise DPAuditError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOLS)}.") from None


# ==================================================================================================
# Local DP (issue 10; seed 000 "Local DP", seed 003 Def. 1). Appended section.
# ==================================================================================================

class LocalDP(TableDP):
    """Local DP: each user's data z_t is private; the server observes only the channel's message o_t.

    ============ ================================================ ===========================================
    private      policy observes at t                             view (what the adversary sees)
    ============ ================================================ ===========================================
    z_t per user the message o_t ~ channel(z_t) (never z_t itself) the server's whole transcript: o_1..o_T and
                                                                   every action
    ============ ================================================ ===========================================

    Neighbours: user t's data changed to any other value of its domain, everything else fixed. The
    input is the same T x K table of potential rewards as Table DP (user t's data is her row; she
    holds the reward of whichever arm the server plays), so :meth:`run` is Table DP's; the audit
    (:mod:`dpaudit.check_local`) reads the messages through the policy's channel and transcript.
    """

    name = "local"
    summary = ("input: each user's data (user t's row of a T x K reward table); view: the server's whole "
               "transcript (messages and actions); neighbours: one user's data changed to any value of its domain")


PROTOCOLS[LocalDP.name] = LocalDP
__all__ += ["LocalDP"]


# ==================================================================================================
# Joint DP and shuffle DP (issue 13; seed 000 "anticipating JDP", seed 002 Alg. 1)
# ==================================================================================================


@dataclass(frozen=True)
class ContextInput:
    """A contextual input fixed by the adversary: contexts ``X`` (T, K, d) and per-arm rewards ``R`` (T, K)."""

    X: np.ndarray
    R: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.R.shape

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """As an array, the input is its (T, K) reward table (what round-indexed code needs)."""
        return np.asarray(self.R, dtype=dtype)


def _check_context_input(data: Any, n_arms: int, dim: int | None) -> ContextInput:
    if not isinstance(data, ContextInput):
        raise DPAuditError("a contextual input must be a ContextInput(X, R) with contexts X (T, K, d) and rewards R (T, K).")
    X, R = np.asarray(data.X, dtype=float), np.asarray(data.R, dtype=float)
    if X.ndim != 3 or X.shape[1] != n_arms or (dim is not None and X.shape[2] != dim) or X.shape[0] < 1:
        raise DPAuditError(f"contexts must have shape (T, K, d) = (T, {n_arms}, {dim if dim is not None else 'd'}), got {X.shape}.")
    if R.shape != X.shape[:2]:
        raise DPAuditError(f"rewards must have shape (T, K) = {X.shape[:2]}, got {R.shape}.")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(R))):
        raise DPAuditError("the contextual input contains NaN or inf; contexts and rewards must be finite numbers.")
    return ContextInput(X, R)


class JointDP(Protocol):
    """Anticipating joint DP (seed 000, Def. "Anticipating JDP").

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
        return _check_context_input(data, n_arms, None)

    def neighbours(self, data, alphabet):
        raise DPAuditError("joint-DP neighbours are chosen by dpaudit.check_joint's adversaries, not enumerated.")

    def run(self, policy, data, n_runs, rng, adversary=None, *, record=True, path="auto"):
        if adversary is not None:
            raise DPAuditError("under joint DP the adversary acts through the fixed contexts and rewards, not by queries.")
        n_arms = int(policy.n_arms)
        inp = _check_context_input(data, n_arms, getattr(policy, "dim", None))
        try:
            policy.reset(n_runs, rng, record=record)
        except TypeError:
            policy.reset(n_runs, rng)
        T = inp.X.shape[0]
        who = getattr(policy, "name", "") or type(policy).__name__
        views = np.empty((n_runs, T), dtype=np.int64)
        for t in range(T):
            arms = np.broadcast_to(inp.X[t], (n_runs,) + inp.X.shape[1:])
            out = check_actions(policy.act(t, arms), n_runs, n_arms, who, t)
            views[:, t] = out
            policy.observe(t, out, inp.R[t, out])
        return views


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
        return _check_context_input(data, 1, None)

    def neighbours(self, data, alphabet):
        raise DPAuditError("shuffle-DP neighbours are chosen by dpaudit.check_joint's adversaries, not enumerated.")

    def run(self, policy, data, n_runs, rng, adversary=None, *, record=True, path="auto"):
        if not hasattr(policy, "batch_release"):
            raise DPAuditError(f"{getattr(policy, 'name', '') or type(policy).__name__} has no shuffle pipeline "
                               "(batch_release), so it cannot be audited under shuffle DP.")
        inp = _check_context_input(data, 1, getattr(policy, "dim", None))
        policy.reset(n_runs, rng, record=False)
        X = np.broadcast_to(inp.X[:, 0], (n_runs,) + inp.X[:, 0].shape)
        R = np.broadcast_to(inp.R[:, 0], (n_runs, inp.R.shape[0]))
        view, _, _ = policy.batch_release(rng, X, R, np.zeros((n_runs, X.shape[2])))
        return view


PROTOCOLS.update({JointDP.name: JointDP, ShuffleDP.name: ShuffleDP})
__all__ += ["ContextInput", "JointDP", "ShuffleDP"]
