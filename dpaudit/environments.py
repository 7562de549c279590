"""Sources of rewards: stochastic environments for regret experiments, fixed inputs for audits.

Every environment is batched over runs, like the policies::

    env.reset(n_runs, rng)
    arms = env.arms(t)                 # (n_runs, K, d) action features, or None for K-armed bandits
    rewards = env.rewards(t, actions)  # (n_runs,) the rewards of the chosen arms
    means = env.means(t)               # (n_runs, K) expected rewards (for pseudo-regret), or None

Audits use fixed, adversarially chosen inputs (``RewardTable``), regret experiments use the
stochastic ones.
"""

from __future__ import annotations

import numpy as np

from dpaudit.accountants.errors import DPAuditError

__all__ = ["Environment", "RewardTable"]


class Environment:
    """Base class of reward sources."""

    n_arms: int
    dim: int | None = None  # feature dimension for linear environments, None for K-armed ones

    def reset(self, n_runs: int, rng: np.random.Generator) -> None:
        self.n_runs = int(n_runs)
        self.rng = rng

    def arms(self, t: int) -> np.ndarray | None:
        return None

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def means(self, t: int) -> np.ndarray | None:
        return None


class RewardTable(Environment):
    """A fixed T x K table of potential rewards, the same for every run (Table DP's input)."""

    def __init__(self, table: np.ndarray) -> None:
        d = np.asarray(table, dtype=float)
        if d.ndim != 2 or d.shape[0] < 1 or d.shape[1] < 2:
            raise DPAuditError(f"a reward table must have shape (T, K) with T >= 1 and K >= 2, got {d.shape}.")
        if not np.all(np.isfinite(d)):
            raise DPAuditError("the reward table contains NaN or inf; rewards must be finite numbers.")
        self.table = d
        self.horizon, self.n_arms = d.shape

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        if t >= self.horizon:
            raise DPAuditError(f"step {t} is beyond the reward table's {self.horizon} rows.")
        return self.table[t, actions]

    def means(self, t: int) -> np.ndarray:
        return np.broadcast_to(self.table[t], (self.n_runs, self.n_arms))
