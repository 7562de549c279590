"""View DP (Azize & Basu 2023a, Def. 3): the input is the list of observed rewards; neighbours differ in one entry.

The definition is that of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits".

Its pairs are built by :func:`dpaudit.protocols.table.make_pair` (a list, not a table: ``list_input``).
"""

from __future__ import annotations

import numpy as np

from dpaudit.errors import DPAuditError

from .base import Protocol

__all__ = ["ViewDP"]


class ViewDP(Protocol):
    """View DP (Azize & Basu 2023a, Def. 3): input the list of observed rewards; neighbours differ in one entry."""

    name = "view"
    list_input = True
    fixed_rewards = True
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
