"""Elimination and explore-then-commit policies written as outside code is written: the controls of
the black-box path.

Most public private-bandit code does not use :mod:`dpaudit.mechanisms`: it draws its noise itself
and keeps no ledger, so an audit judges it by what its actions show (the black-box attack) alone.
These policies are written that way on purpose (no ``ledger`` attribute), and they are of the
classes a black-box audit finds hardest: they act only when a noisy statistic crosses a threshold,
and their first data-dependent decision comes hundreds or thousands of rounds in. The correct ones
here are the negative controls of that path; :mod:`dpaudit.policies.mutants` breaks each of them.

* :class:`DPSuccessiveElimination` (``dp-se``): DP-SE, Sajed & Sheffet (2019), "An Optimal Private
  Stochastic-MAB Algorithm based on an Optimal Private Stopping Rule", Alg. 1 (not one of the papers dpaudit
  follows; a widely ported private elimination algorithm).
* :class:`DPExploreThenCommit` (``dp-etc``): explore-then-commit with a report-noisy-max commit.

Both are pure eps-DP under Table DP (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits",
Def. 3) for rewards in [0, 1]: each user's reward is used in exactly one noisy mean (of one arm, in one epoch), the Laplace noise is calibrated to that
mean's sensitivity 1/n, and every action is a function of the noisy means released so far
(post-processing); the other users' rewards enter other means (parallel composition).
"""

from __future__ import annotations


import numpy as np

from dpaudit.accountants import Guarantee, PureDP
from dpaudit.errors import DPAuditError, check_int, check_positive
from dpaudit.policies.base import check_reset, check_rewards
from dpaudit.policies.registry import register

__all__ = ["DPSuccessiveElimination", "DPExploreThenCommit"]


class OutsideStyle:
    """Shared plumbing: the batched contract without dpaudit's mechanisms (so, deliberately, no ledger)."""

    name = ""
    n_arms: int
    claim: Guarantee | None = None
    reward_range = (0.0, 1.0)
    #: the schedule decides which arm's reward is observed (Interactive DP's queries do not apply)
    accepts_queries = False
    #: the protocol its claim is about: pure eps-DP, for which Table and View DP coincide (Azize & Basu 2023a, Prop. 1(a))
    notion = "table"

    def params(self) -> dict[str, object]:
        return dict(self._params)

    def reset(self, n_runs: int, rng: np.random.Generator, **_: object) -> None:
        self.n_runs = check_reset(n_runs, rng)
        self.rng = rng
        self._reset()

    def _reset(self) -> None:
        raise NotImplementedError

    def _checked(self, t: int, rewards: np.ndarray) -> np.ndarray:
        return check_rewards(rewards, self.n_runs, self.reward_range, self.name or type(self).__name__, t)


@register("dp-se", family="elimination")
class DPSuccessiveElimination(OutsideStyle):
    """DP-SE: successive elimination with a Laplace-noised mean per arm and epoch (Sajed & Sheffet 2019, Alg. 1).

    Epoch e = 1, 2, ...: Delta_e = 2^-e; every active arm is pulled R_e times, round robin over the
    active arms in index order, where R_e = max(32 ln(8 K e^2/beta)/Delta_e^2,
    8 ln(4 K e^2/beta)/(eps Delta_e)) (rounded up); at the epoch's end each active arm's mean of its
    R_e rewards of this epoch gets its own Lap(1/(eps R_e)) noise, and arm a is eliminated when
    max_b mu~_b - mu~_a > Delta_e. One arm left: it is played for ever. Means are not carried across
    epochs (each reward is used once). Claim: eps-DP for rewards in [0, 1], under Table DP (for pure DP, Table
    and View DP coincide: Azize & Basu 2023a, Prop. 1(a)).
    Choices: the paper's constants; arms eliminated simultaneously when several cross.

    An epoch's plays are fixed when it begins (the active arms, round robin, R_e times), so the
    protocols may run it as one block (``plan``/``complete``, ``cycle_path``): its reward sums are
    strided prefix-sum differences of the input and its noise is drawn when it ends, epochs in the
    order of their last rounds, as the per-step path draws it; both paths give the same actions.
    """

    #: the block path with round-robin blocks completed in time order (dpaudit.protocols.base.Protocol)
    cycle_path = True
    #: ``plan``'s repeat count of the last active arm's block: played to the end of any horizon
    FOREVER = np.iinfo(np.int64).max // 4

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, beta: float = 0.1) -> None:
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self.epsilon = check_positive("epsilon", epsilon)
        self.beta = check_positive("beta", beta)
        if not self.beta < 1:
            raise DPAuditError(f"beta (the failure probability) must lie in (0, 1), got {beta!r}.")
        self.claim = PureDP(self.epsilon)
        self._params = {"n_arms": self.n_arms, "epsilon": self.epsilon, "beta": self.beta}

    def epoch_length(self, e: np.ndarray) -> np.ndarray:
        """R_e, the pulls of every active arm in epoch e (Sajed & Sheffet 2019, Alg. 1, line 4)."""
        e = np.asarray(e, dtype=float)
        d = 2.0 ** -e
        K = self.n_arms
        a = 32.0 * np.log(8.0 * K * e**2 / self.beta) / d**2
        b = 8.0 * np.log(4.0 * K * e**2 / self.beta) / (self.epsilon * d)
        return np.ceil(np.maximum(a, b)).astype(np.int64)

    def _reset(self) -> None:
        n, K = self.n_runs, self.n_arms
        self.active = np.ones((n, K), dtype=bool)
        self.epoch = np.ones(n, dtype=np.int64)
        self.pos = np.zeros(n, dtype=np.int64)
        self.sums = np.zeros((n, K))
        self.length = self.epoch_length(self.epoch)
        self.ep_start = np.zeros(n, dtype=np.int64)  # the current epoch's first round
        self._rows = np.arange(n)
        self._refresh(self._rows)

    def _refresh(self, idx: np.ndarray) -> None:
        """Cache, for runs ``idx``, the active arms in index order, their count and the epoch's plays."""
        if idx.size == self.n_runs:
            self._order = np.argsort(~self.active, axis=1, kind="stable")
            self._n_act = self.active.sum(axis=1)
        else:
            self._order[idx] = np.argsort(~self.active[idx], axis=1, kind="stable")
            self._n_act[idx] = self.active[idx].sum(axis=1)
        self._plays = self.length * self._n_act
        self._live = self._n_act > 1
        self._all_live = bool(self._live.all())

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        # the k-th active arm of each run (round robin over the active arms in index order)
        return self._order[self._rows, self.pos % self._n_act]

    def _noise(self, shape: tuple[int, int], scale: np.ndarray) -> np.ndarray:
        return self.rng.laplace(0.0, 1.0, size=shape) * scale[:, None]

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        r = self._checked(t, rewards)
        if self._all_live:
            self.sums[self._rows, actions] += r
            self.pos += 1
        else:
            live = self._live
            self.sums[self._rows[live], actions[live]] += r[live]
            self.pos[live] += 1
        end = self.pos == self._plays
        if self._all_live and not end.any():
            return
        end &= self._live
        if not end.any():
            return
        self._end_epoch(np.flatnonzero(end))

    def _end_epoch(self, idx: np.ndarray) -> None:
        """The epochs of runs ``idx`` (ascending) end with their arms' sums in ``self.sums``: noise, eliminate."""
        R = self.length[idx].astype(float)
        noisy = self.sums[idx] / R[:, None] + self._noise((idx.size, self.n_arms), 1.0 / (self.epsilon * R))
        act = self.active[idx]
        best = np.where(act, noisy, -np.inf).max(axis=1)
        threshold = 2.0 ** -self.epoch[idx].astype(float)
        self.active[idx] = act & ~(best[:, None] - noisy > threshold[:, None])
        self.sums[idx] = 0.0
        self.ep_start[idx] += self._plays[idx]
        self.pos[idx] = 0
        self.epoch[idx] += 1
        self.length[idx] = self.epoch_length(self.epoch[idx])
        self._refresh(idx)

    # ---- the block path (dpaudit.protocols.base.Protocol._run_cycles) ---------------------------------------
    def plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each run's current epoch as (start (n,), arms (n, K), lengths (n, K), reps (n,)): the active arms in
        index order (length 1 each; 0 for the slots of eliminated arms) played round robin ``reps`` = R_e
        times; a run with one arm left plays it to the end (``FOREVER``)."""
        lengths = (np.arange(self.n_arms) < self._n_act[:, None]).astype(np.int64)
        return self.ep_start, self._order, lengths, np.where(self._live, self.length, self.FOREVER)

    def complete(self, runs: np.ndarray, sums: np.ndarray) -> None:
        """The current epochs of ``runs`` (ascending, all ending at the same round) ended with the reward
        sums ``sums`` (m, K) of ``plan``'s slots: the epoch's end, as :meth:`observe` does it."""
        runs = np.asarray(runs, dtype=np.int64)
        if runs.size == 0:
            return
        if not self._live[runs].all():
            raise DPAuditError(f"{self.name}: complete() was given a run with one arm left, whose play has no end.")
        sums = np.asarray(sums, dtype=float).reshape(runs.size, self.n_arms)
        slot = np.arange(self.n_arms) < self._n_act[runs][:, None]
        R = self.length[runs][:, None].astype(float)
        lo, hi = self.reward_range
        tol = 1e-9 * max(1.0, abs(lo), abs(hi)) * R  # block sums are prefix-sum differences, exact up to rounding
        if not np.all(~slot | ((sums >= lo * R - tol) & (sums <= hi * R + tol))):  # NaN fails too
            raise DPAuditError(
                f"an epoch's reward sum is outside [{lo:g}, {hi:g}] x its length: rewards leave [{lo:g}, {hi:g}], "
                f"the range {self.name}'s sensitivity assumes."
            )
        per_arm = np.zeros((runs.size, self.n_arms))
        np.put_along_axis(per_arm, self._order[runs], np.where(slot, np.clip(sums, lo * R, hi * R), 0.0), axis=1)
        self.sums[runs] = per_arm
        self._end_epoch(runs)


@register("dp-etc", family="elimination")
class DPExploreThenCommit(OutsideStyle):
    """Explore-then-commit with a report-noisy-max commit: eps-DP for rewards in [0, 1].

    Rounds 0..m-1 pull the arms round robin, n = ``pulls`` times each (m = K n); at round m each
    arm's mean gets its own Lap(1/(eps n)) noise and the policy commits to the argmax for the rest of
    the horizon. The first data-dependent action is round m (1,000 for the default K = 2, n = 500),
    so an audit that stops at 48 rounds sees nothing. Choice: ties broken to the lowest
    arm (ties have probability 0 with continuous noise). Claim: eps-DP under Table DP (for pure DP, Table
    and View DP coincide: Azize & Basu 2023a, Prop. 1(a)).
    """

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, pulls: int = 500) -> None:
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self.epsilon = check_positive("epsilon", epsilon)
        self.pulls = check_int("pulls", pulls, minimum=1)
        self.explore = self.pulls * self.n_arms
        self.claim = PureDP(self.epsilon)
        self._params = {"n_arms": self.n_arms, "epsilon": self.epsilon, "pulls": self.pulls}

    def _reset(self) -> None:
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.choice = np.zeros(self.n_runs, dtype=np.int64)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if t < self.explore:
            return np.full(self.n_runs, t % self.n_arms, dtype=np.int64)
        return self.choice

    def _commit(self, means: np.ndarray, n: int) -> np.ndarray:
        noisy = means + self.rng.laplace(0.0, 1.0 / (self.epsilon * n), size=means.shape)
        return np.argmax(noisy, axis=1)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        if t >= self.explore:
            return
        r = self._checked(t, rewards)
        self.sums[:, t % self.n_arms] += r
        if t == self.explore - 1:
            self.choice = self._commit(self.sums / self.pulls, self.pulls).astype(np.int64)
