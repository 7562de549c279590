"""The protocol base: how a policy is run on an input to produce views, and the neighbouring pair.

A protocol (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits", Sec. III; the interactive
joint/local DP definitions, :mod:`dpaudit.papers`) says what the private input is, what the policy observes,
what the adversary sees (the view) and what "neighbouring" means. :class:`Protocol` turns (policy, input) into
an interactive mechanism: :meth:`Protocol.run` samples views for a batch of runs. Adversaries are batched
deterministic functions of the outputs so far (Azize & Basu 2023a, App. B, Remark 6: deterministic adversaries
suffice).

Without an adversary, dpaudit's own episode-based policies (the UCB and GOPE families and the
mutants, which offer ``plan``/``complete``; see :mod:`dpaudit.simulate`) run block by block on
Table and View DP inputs: a block's reward sums are prefix-sum differences of the input, so the
cost is O(blocks), not O(T) Python steps, and the views, releases and ledger are those of the
per-step path (tests check this for every such policy). Plug-ins always run step by step: an audit
does not trust a policy's claim that its two paths agree.

A policy whose blocks interleave arms round robin and draw their noise when they end (DP-SE's epochs,
``cycle_path``) runs on the cycle path instead (:meth:`Protocol._run_cycles`): a block is a pattern of
single plays repeated, its sums are differences of strided prefix sums, and blocks complete in the
order of their last rounds (runs in index order within a round), the order in which the per-step path
draws their noise.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from dpaudit.errors import DPAuditError, InternalError
from dpaudit.policies.base import PolicyLike, check_actions

__all__ = ["Adversary", "Protocol", "Pair", "FixedActionSet", "ContextInput", "check_context_input",
           "offers_blocks", "offers_copies", "splits_copies", "plays_tables", "check_table"]


class Adversary:
    """A deterministic adversary B = (B_1, ..., B_T): q_t = B_t(o_1, ..., o_t), batched over runs."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        """``outputs``: (n_runs, t + 1) actions o_1..o_{t+1} (0-based t); returns (n_runs,) queries."""
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class Pair:
    """A neighbouring pair: inputs ``d0`` (null) and ``d1`` differing at round ``round``."""

    d0: np.ndarray
    d1: np.ndarray
    round: int
    adversary: Adversary | None = None
    label: str = ""

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"label": self.label, "round": int(self.round)}
        if isinstance(self.d0, ContextInput):
            out["contexts"] = f"per-round features of shape {list(self.d0.X.shape)}"
        d0, d1 = np.asarray(self.d0), np.asarray(self.d1)
        if d0.ndim == 2:
            out["row_d"] = d0[self.round].tolist()
            out["row_d_prime"] = d1[self.round].tolist()
            bg = np.delete(d0, self.round, axis=0)
            out["background"] = _summarise_table(bg)
        else:
            out["entry_d"] = float(d0[self.round])
            out["entry_d_prime"] = float(d1[self.round])
            out["background"] = _summarise_table(np.delete(d0, self.round))
        out["horizon"] = int(d0.shape[0])
        out["adversary"] = self.adversary.describe() if self.adversary is not None else "none (the policy's own actions)"
        return out


def _summarise_table(bg: np.ndarray) -> str | list[object]:
    if bg.size == 0:
        return "empty"
    if bg.ndim == 2 and np.all(bg == bg[:1]):
        return f"every other row = {bg[0].tolist()}"
    if np.all(bg == bg.flat[0]):
        return f"constant {float(bg.flat[0]):g}"
    return bg.tolist() if bg.size <= 64 else f"table of shape {list(bg.shape)}"



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


def check_context_input(data: object, n_arms: int, dim: int | None) -> ContextInput:
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


class FixedActionSet:
    """Feeds a linear or contextual policy a fixed public action set (K feature vectors in R^d) every round.

    The protocols call ``act(t, None)``; linear policies need the (n_runs, K, d) features. A fixed
    set is one admissible choice of the (public, possibly adversarial) contexts, the same in every
    run. Everything else is the wrapped policy's; phase-based policies (GOPE) get the set before the
    block path's first ``plan()`` through :meth:`prepare_blocks`.
    """

    def __init__(self, inner: PolicyLike, features: np.ndarray) -> None:
        self._inner = inner
        self._features = np.asarray(features, dtype=float)
        self._arms = self._features[None]

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")  # absent while unpickling: no forwarding then
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    @property
    def wrapped(self) -> PolicyLike:
        """The policy inside (:func:`offers_blocks` checks where it comes from)."""
        return self._inner

    def reset(self, n_runs: int, rng: np.random.Generator, **kw: object) -> None:
        try:
            self._inner.reset(n_runs, rng, **kw)
        except TypeError:
            self._inner.reset(n_runs, rng)
        self._arms = np.broadcast_to(self._features, (n_runs,) + self._features.shape)

    def __getstate__(self) -> dict[str, object]:
        # the per-run action set is a broadcast view that pickle would write out run by run; reset rebuilds it
        return {**self.__dict__, "_arms": self._features[None]}

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        return self._inner.act(t, self._arms if arms is None else arms)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        self._inner.observe(t, actions, rewards)

    def prepare_blocks(self) -> None:
        """Give a phase-based policy (GOPE) its fixed action set before the block path's plan()."""
        self._inner.set_arms(self._arms)


def offers_blocks(policy) -> bool:
    """Whether ``Protocol.run`` may advance ``policy`` block by block (see the module docstring)."""
    blocks = getattr(policy, "fast_path", False) or getattr(policy, "cycle_path", False)
    if not (blocks and hasattr(policy, "plan") and hasattr(policy, "complete")):
        return False
    if getattr(policy, "dim", None) is not None and not hasattr(policy, "prepare_blocks"):
        return False  # a linear policy needs its fixed action set before plan(); only a wrapper can give it
    inner = getattr(policy, "wrapped", policy)
    return type(inner).__module__.startswith("dpaudit.")


def offers_copies(policy) -> bool:
    """Whether ``Protocol.run`` may run ``policy`` copy by copy, each copy through all its rounds
    (``run_copies``: the per-run adapter's one-run objects, :class:`dpaudit.adapters.PerRun`). Only
    dpaudit's own adapter qualifies, behind the plug-in sandbox or not; its copies receive the calls
    they would receive round by round, so the views are the same."""
    if not callable(getattr(policy, "run_copies", None)):
        return False
    inner = policy
    for _ in range(3):
        inner = getattr(inner, "wrapped", inner)
    return type(inner).__module__.startswith("dpaudit.adapters") and callable(getattr(inner, "run_copies", None))


def splits_copies(policy) -> bool:
    """Whether :meth:`Protocol.run_batch` may run a slice of a batch of ``policy``'s runs on its own (``copies``):
    a policy run copy by copy (:func:`offers_copies`) whose ``reset``, inside its wrappers, builds just a slice of
    the batch's copies, seeded as in the whole batch (the per-run adapter's ``reset(..., copies=(lo, hi))``)."""
    if plays_tables(policy) or offers_blocks(policy) or not offers_copies(policy):
        return False
    inner = policy
    for _ in range(3):
        inner = getattr(inner, "wrapped", inner)
    try:
        return "copies" in inspect.signature(inner.reset).parameters
    except (TypeError, ValueError, AttributeError):
        return False


def plays_tables(policy) -> bool:
    """Whether ``Protocol.run`` may hand ``policy`` whole reward tables (``play_tables``) instead of driving it
    round by round: dpaudit's loop adapter (:class:`dpaudit.adapters.loop.LoopPolicy`), whose copies run their
    own loops to completion on a table fixed in advance (Table and View DP fix it; no adversary)."""
    inner = policy
    for _ in range(3):
        inner = getattr(inner, "wrapped", inner)
    return type(inner).__module__.startswith("dpaudit.") and callable(getattr(inner, "play_tables", None))


class Protocol:
    """Base class: the private input, the observation rule, the view and the neighbouring relation."""

    name: str = ""
    summary: str = ""
    #: the input is a list of T rewards (View DP), not a T x K table
    list_input: bool = False
    #: without an adversary, the reward of arm a at round t is the input's entry (t, a) (or t, for a list):
    #: a one-run object may then play a whole run at once (:func:`offers_copies`)
    fixed_rewards: bool = False
    #: the adversaries the neighbouring search tries (names understood by :meth:`adversary`)
    adversaries: tuple[str, ...] = ("none",)

    def adversary(self, name: str, round_: int, n_arms: int, horizon: int) -> "Adversary | None":
        """The adversary called ``name`` for a pair whose canary is at ``round_`` (None: the policy's own
        actions). Protocols without adversaries ignore the name."""
        return None

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

        ``data`` is the protocol's input, or a :class:`ContextInput` whose per-round features ``X[t]``
        (K x d) are given to a linear policy's ``act`` (its rewards ``R`` are the input; step path).

        ``path``: ``"auto"`` (blocks where :func:`offers_blocks` allows, without an adversary),
        ``"step"`` or ``"blocks"``; both give the same views and ledger for the same ``rng``. An
        input with values outside the policy's ``reward_range`` always runs step by step, so that a
        reward the policy observes there is refused by name, as ``observe`` does.
        """
        n_arms = int(policy.n_arms)
        contexts = None
        if isinstance(data, ContextInput):  # per-round features (a read-out pair): X[t] goes to act(t, ...)
            contexts = check_context_input(data, n_arms, getattr(policy, "dim", None)).X
            data = np.asarray(data.R, dtype=float)
            path = "step" if path == "auto" else path
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
        blocks_ok = adversary is None and contexts is None and offers_blocks(policy)
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
        if adversary is None and contexts is None and plays_tables(policy):
            return policy.play_tables(data[None], np.zeros(n_runs, dtype=np.int64), self.list_input)
        if path != "step" and blocks_ok:
            if getattr(policy, "cycle_path", False):
                return self._run_cycles(policy, data[None], np.zeros(n_runs, dtype=np.int64), n_arms, who)
            return self._run_blocks(policy, data, n_runs, n_arms, who)
        if adversary is None and contexts is None and self._copies_ok(policy, data, lo, hi):
            return np.asarray(policy.run_copies(self._reward_tables(data[None], n_arms)), dtype=np.int64)
        views = np.empty((n_runs, horizon), dtype=np.int64)
        for t in range(horizon):
            arms = None if contexts is None else np.broadcast_to(contexts[t], (n_runs,) + contexts.shape[1:])
            out = check_actions(policy.act(t, arms), n_runs, n_arms, who, t)
            views[:, t] = out
            queries = out if adversary is None else adversary.query(t, views[:, : t + 1])
            policy.observe(t, queries, self.reward(data, t, out, queries))
        return views

    def run_batch(self, policy, inputs: np.ndarray, n_per: int, rng: np.random.Generator, *,
                  record: bool = False, copies: tuple[int, int] | None = None) -> np.ndarray:
        """Views of ``n_per`` runs on each of several inputs, as one batch of runs: (m, n_per, T).

        ``inputs`` is (m, T, K) for a table or (m, T) for a list of rewards; run i plays input
        ``i // n_per``. No adversary (the pilots of the neighbouring search). Block by block where
        :func:`offers_blocks` allows and every input is inside the policy's ``reward_range``, else step
        by step with the policy's own checks on every reward it observes.

        ``copies=(lo, hi)``: only runs lo..hi-1 of the batch, (hi - lo, T), the same rows as the whole batch's
        views: a policy run copy by copy (:func:`offers_copies`) whose ``reset`` takes ``copies`` builds and runs
        just those copies, seeded as in the whole batch (so one batch can be split over processes); any other
        policy runs the whole batch and the rows are cut from it.
        """
        inputs = np.asarray(inputs, dtype=float)
        m, horizon = inputs.shape[:2]
        n_arms = int(policy.n_arms)
        n = m * n_per
        which = np.repeat(np.arange(m), n_per)
        if copies is not None:
            c0, c1 = int(copies[0]), int(copies[1])
            if not 0 <= c0 < c1 <= n:
                raise ValueError(f"copies must be a range (lo, hi) with 0 <= lo < hi <= {n}, got {copies!r}")
            lo, hi = getattr(policy, "reward_range", (-np.inf, np.inf))
            if splits_copies(policy) and self._copies_ok(policy, inputs, lo, hi):
                policy.reset(n, rng, record=record, copies=(c0, c1))
                views = policy.run_copies(self._reward_tables(inputs, n_arms), which[c0:c1])
                return np.asarray(views, dtype=np.int64).reshape(c1 - c0, horizon)
            return self.run_batch(policy, inputs, n_per, rng, record=record).reshape(n, horizon)[c0:c1]
        try:
            policy.reset(n, rng, record=record)
        except TypeError:
            policy.reset(n, rng)
        who = getattr(policy, "name", "") or type(policy).__name__
        if plays_tables(policy):
            return policy.play_tables(inputs, which, self.list_input).reshape(m, n_per, horizon)
        lo, hi = getattr(policy, "reward_range", (-np.inf, np.inf))
        if (offers_blocks(policy) and type(self).block_sums is not Protocol.block_sums
                and inputs.min() >= lo and inputs.max() <= hi):
            if getattr(policy, "cycle_path", False):
                return self._run_cycles(policy, inputs, which, n_arms, who).reshape(m, n_per, horizon)
            return self._run_blocks(policy, inputs, n, n_arms, who, which).reshape(m, n_per, horizon)
        if self._copies_ok(policy, inputs, lo, hi):
            views = policy.run_copies(self._reward_tables(inputs, n_arms), which)
            return np.asarray(views, dtype=np.int64).reshape(m, n_per, horizon)
        views = np.empty((n, horizon), dtype=np.int64)
        for t in range(horizon):
            a = check_actions(policy.act(t, None), n, n_arms, who, t)
            views[:, t] = a
            policy.observe(t, a, self.reward_many(inputs, which, t, a))
        return views.reshape(m, n_per, horizon)

    def _copies_ok(self, policy: PolicyLike, inputs: np.ndarray, lo: float, hi: float) -> bool:
        """Whether to run ``policy`` copy by copy on ``inputs`` (:func:`offers_copies`): a protocol whose rewards
        are fixed by its input, and every reward inside the policy's range (else ``observe`` refuses the first
        one a run sees, by name, on the step path)."""
        return (self.fixed_rewards and offers_copies(policy) and inputs.size > 0
                and bool(inputs.min() >= lo) and bool(inputs.max() <= hi))

    def _reward_tables(self, inputs: np.ndarray, n_arms: int) -> np.ndarray:
        """Inputs (m, T, K), or (m, T) lists of rewards, as (m, T, K) tables of each arm's reward."""
        return np.repeat(inputs[..., None], n_arms, axis=2) if self.list_input else inputs

    def reward_many(self, inputs: np.ndarray, which: np.ndarray, t: int, actions: np.ndarray) -> np.ndarray:
        """The rewards at round ``t`` of runs playing ``inputs[which]`` (:meth:`run_batch`)."""
        return inputs[which, t] if self.list_input else inputs[which, t, actions]

    def _run_blocks(self, policy, data: np.ndarray, n_runs: int, n_arms: int, who: str,
                    which: np.ndarray | None = None) -> np.ndarray:
        """The block path of :meth:`run`: one iteration advances every run by one whole block.

        Each run's blocks tile rounds 0..T-1 back to back, so the views are the blocks' arms, each
        repeated for its length, in (run, start) order: one ``np.repeat`` at the end. With ``which``,
        ``data`` stacks several inputs and run i plays ``data[which[i]]`` (:meth:`run_batch`).
        """
        horizon = data.shape[0] if which is None else data.shape[1]
        if hasattr(policy, "prepare_blocks"):
            policy.prepare_blocks()
        if which is None:
            prefix = self.prefix(data)
            sums = self.block_sums
        else:
            prefix = np.concatenate([np.zeros((data.shape[0], 1) + data.shape[2:]), np.cumsum(data, axis=1)], axis=1)

            def sums(pre: np.ndarray, arms: np.ndarray, start: np.ndarray, length: np.ndarray,
                     runs: np.ndarray = np.empty(0, dtype=np.int64)) -> np.ndarray:
                w = which[runs][:, None]
                if self.list_input:
                    return pre[w, start + length] - pre[w, start]
                return pre[w, start + length, arms] - pre[w, start, arms]
        active = np.ones(n_runs, dtype=bool)
        segments: list[tuple[np.ndarray, ...]] = []
        # runs that share their blocks (GOPE's phases: a few plans per phase) are written group by group
        grouped = bool(getattr(policy, "shared_blocks", False))
        views = np.empty((n_runs, horizon), dtype=np.int64) if grouped else None
        next_start = np.zeros(n_runs, dtype=np.int64)
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
                raise InternalError(f"policy {who} planned a block with an arm outside 0..{n_arms - 1} or no plays")
            seg_start = s[:, None] + np.cumsum(L, axis=1) - L
            seg_len = np.clip(np.minimum(L, horizon - seg_start), 0, None)
            keep = seg_len > 0
            if grouped:
                if not np.array_equal(s, next_start[idx]):
                    raise InternalError(f"policy {who} planned blocks that do not cover rounds 0..{horizon - 1} back to back")
                next_start[idx] = s + total
                self._write_groups(views, idx, s, A, seg_len)
            else:
                segments.append((np.broadcast_to(idx[:, None], A.shape)[keep], seg_start[keep], A[keep], seg_len[keep]))
            end = s + total
            full = end <= horizon
            if full.any():
                if which is None:
                    policy.complete(idx[full], sums(prefix, A[full], seg_start[full], L[full]))
                else:
                    policy.complete(idx[full], sums(prefix, A[full], seg_start[full], L[full], idx[full]))
            active[idx[end >= horizon]] = False
        if grouped:
            return views
        run, seg_start, arm, seg_len = (np.concatenate(c) for c in zip(*segments))
        order = np.lexsort((seg_start, run))
        run, seg_start, arm, seg_len = run[order], seg_start[order], arm[order], seg_len[order]
        # the tiling check: within a run, each block starts where the previous one ended, from round 0
        first = np.r_[True, run[1:] != run[:-1]]
        expected = np.where(first, 0, np.r_[0, seg_start[:-1] + seg_len[:-1]])
        if not np.array_equal(seg_start, expected) or np.bincount(run, seg_len, minlength=n_runs).min() != horizon:
            raise InternalError(f"policy {who} planned blocks that do not cover rounds 0..{horizon - 1} back to back")
        return np.repeat(arm, seg_len).reshape(n_runs, horizon)

    @staticmethod
    def _write_groups(views: np.ndarray, runs: np.ndarray, start: np.ndarray, arms: np.ndarray,
                      length: np.ndarray) -> None:
        """Blocks of ``runs`` (start (n,), arms and clipped lengths (n, B)) into ``views``: one broadcast write per
        distinct block, runs with the same block at once (many distinct blocks: one gather write for them all).
        Blocks are grouped by a hash of their row, and each group checked equal to its first row."""
        rows = np.column_stack([start, arms, length])
        with np.errstate(over="ignore"):
            h = rows.view(np.uint64) @ _ROW_WEIGHTS[: rows.shape[1]] if rows.shape[1] <= _ROW_WEIGHTS.size else None
        if h is not None:
            _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
        if h is None or first.size > 64 or not np.array_equal(rows, rows[first[inverse]]):
            total = length.sum(axis=1)
            cells = int(total.sum())
            at = np.repeat(runs, total)
            offset = np.arange(cells) - np.repeat(np.cumsum(total) - total, total)
            views[at, np.repeat(start, total) + offset] = np.repeat(arms.reshape(-1), length.reshape(-1))
            return
        order = np.argsort(inverse, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(inverse, minlength=first.size))]
        for k, i in enumerate(first.tolist()):
            pattern = np.repeat(arms[i], length[i])
            if pattern.size:
                views[runs[order[bounds[k]:bounds[k + 1]]], start[i]:start[i] + pattern.size] = pattern

    def _run_cycles(self, policy, inputs: np.ndarray, which: np.ndarray, n_arms: int, who: str) -> np.ndarray:
        """The cycle path of :meth:`run` and :meth:`run_batch` (``policy.cycle_path``): run i plays
        ``inputs[which[i]]`` ((m, T, K) tables or (m, T) lists); (n_runs, T) views.

        ``policy.plan()`` gives each run's block as (start, arms (n, B), lengths (n, B) of 0 or 1, reps): the
        arms of the slots of length 1, in slot order, played ``reps`` times round robin (P = the slots used,
        the period). Each iteration completes the blocks that end first, all runs ending in that round at once
        in index order (the per-step path's order of ``observe`` calls, so a policy drawing noise in
        ``complete`` draws the same numbers); a block reaching past the horizon ends its run, uncompleted, as a
        step-by-step run ends mid-block. The sum of slot j over the block is a difference of the input's
        prefix sums with stride P (P <= B, one table per period used).
        """
        m, horizon = inputs.shape[:2]
        n_runs = which.size
        views = np.empty((n_runs, horizon), dtype=np.int64)
        strided: dict[int, np.ndarray] = {}
        # the runs still playing; each iteration touches only the runs whose blocks end in its round
        active = np.arange(n_runs)
        next_start = np.zeros(n_runs, dtype=np.int64)
        while active.size:
            start, arms, lengths, reps = policy.plan()
            s = np.asarray(start, dtype=np.int64)[active]
            A = np.asarray(arms, dtype=np.int64)[active]
            L = np.asarray(lengths, dtype=np.int64)[active]
            R = np.asarray(reps, dtype=np.int64)[active]
            P = L.sum(axis=1)
            if A.min() < 0 or A.max() >= n_arms or L.min() < 0 or L.max() > 1 or P.min() < 1 or R.min() < 1:
                raise InternalError(f"policy {who} planned a cycle with an arm outside 0..{n_arms - 1}, a slot "
                                    "longer than one round or no plays")
            if not np.array_equal(s, next_start[active]):
                raise InternalError(f"policy {who} planned blocks that do not cover rounds 0..{horizon - 1} back to back")
            full = R <= (horizon - s) // P  # the block ends within the horizon (no overflow for huge reps)
            end = np.where(full, s + np.where(full, R, 0) * P, horizon + 1)
            first = int(end.min())
            now = end == first if first <= horizon else np.zeros(active.size, dtype=bool)
            stop = ~full | (now & (end == horizon))
            shown = now | ~full
            # views of the blocks shown now: each run's used slots in order, tiled up to its block's end
            order = np.argsort(L[shown] == 0, axis=1, kind="stable")
            pattern = np.take_along_axis(A[shown], order, axis=1)
            self._write_cycles(views, active[shown], s[shown], P[shown],
                               np.minimum(np.where(full[shown], end[shown], horizon), horizon) - s[shown], pattern)
            if now.any():
                runs = active[now]
                sums = np.zeros(L[now].shape)
                w = which[runs]
                offset = np.cumsum(L[now], axis=1) - L[now]
                for p in np.unique(P[now]).tolist():
                    if p not in strided:
                        strided[p] = _strided_prefix(inputs, p)
                    g = np.flatnonzero(P[now] == p)
                    x = s[now][g][:, None] + offset[g]
                    x_end = x + (R[now][g] * p)[:, None]
                    used = L[now][g] == 1
                    if self.list_input:
                        part = strided[p][w[g][:, None], x_end] - strided[p][w[g][:, None], x]
                    else:
                        a = A[now][g]
                        part = strided[p][w[g][:, None], x_end, a] - strided[p][w[g][:, None], x, a]
                    sums[g] = np.where(used, part, 0.0)
                next_start[runs] = first
                policy.complete(runs, sums)
            active = active[~stop]
        return views

    @staticmethod
    def _write_cycles(views: np.ndarray, runs: np.ndarray, start: np.ndarray, period: np.ndarray,
                      length: np.ndarray, pattern: np.ndarray) -> None:
        """``views[r, s:s+n] = pattern[r, :P]`` repeated, for each run r of ``runs``; one slice per (s, P, n)."""
        if runs.size == 0:
            return
        keys, inverse = np.unique(np.stack([start, period, length], axis=1), axis=0, return_inverse=True)
        for k, (s0, p, n) in enumerate(keys.tolist()):
            g = np.flatnonzero(inverse.reshape(-1) == k) if keys.shape[0] > 1 else np.arange(runs.size)
            rows = runs[g]
            if rows.size == views.shape[0]:
                rows = slice(None)  # every run (the first blocks): a slice, not a gather
            for j in range(min(p, n)):  # slot j's rounds s0 + j, s0 + j + p, ...: one broadcast write each
                views[rows, s0 + j:s0 + n:p] = pattern[g, j:j + 1]


#: odd 64-bit weights of the row hash of :meth:`Protocol._write_groups` (a fixed draw; groups are checked exactly)
_ROW_WEIGHTS = (np.random.default_rng(0x5EED).integers(1, 2**63, size=64, dtype=np.int64).astype(np.uint64)
                << np.uint64(1)) | np.uint64(1)


def _strided_prefix(inputs: np.ndarray, p: int) -> np.ndarray:
    """Prefix sums of the inputs with stride ``p``, P zero rows first: out[:, u] = inputs[:, u - p] + out[:, u - p]
    for u >= p, so the sum of rounds x, x + p, ..., x + (R - 1) p is out[:, x + R p] - out[:, x]."""
    m, T = inputs.shape[:2]
    c = -(-T // p)
    padded = np.zeros((m, p * (c + 1)) + inputs.shape[2:])
    padded[:, p:p + T] = inputs
    folded = padded.reshape((m, c + 1, p) + inputs.shape[2:])
    return np.cumsum(folded, axis=1).reshape(padded.shape)


def check_table(data: np.ndarray, n_arms: int) -> np.ndarray:
    d = np.asarray(data, dtype=float)
    if d.ndim != 2 or d.shape[1] != n_arms or d.shape[0] < 1:
        raise DPAuditError(f"a reward table must have shape (T, K) = (T, {n_arms}) with T >= 1, got {d.shape}.")
    if not np.all(np.isfinite(d)):
        raise DPAuditError("the reward table contains NaN or inf; rewards must be finite numbers.")
    return d
