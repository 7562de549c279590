"""Interactive DP (Azize & Basu 2023a, Def. 4): the policy observes d[t, q_t] for an adversary's query q_t.

The definition is that of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits". The
adversaries are batched deterministic functions of the outputs so far (Azize & Basu 2023a, App. B, Remark 6:
deterministic adversaries suffice). The neighbouring search tries the identity (q_t = o_t, which reduces to
Table DP), constant query sequences (always arm 0; round robin), and reactive ones that follow the outputs but
pin the canary round's query to a chosen arm, or echo the previous output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpaudit.errors import DPAuditError

from .base import Adversary
from .table import TableDP

__all__ = ["InteractiveDP", "IdentityAdversary", "ConstantAdversary", "TableAdversary", "PinAdversary",
           "EchoAdversary"]


class IdentityAdversary(Adversary):
    """q_t = o_t: the interaction of Algorithm 1 (Interactive DP reduces to Table DP)."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        return outputs[:, t]

    def describe(self) -> str:
        return "identity (q_t = o_t)"


@dataclass(frozen=True)
class ConstantAdversary(Adversary):
    """q_t = a_t for a fixed sequence a, whatever the policy recommends (Azize & Basu 2023a, App. B, Step 1)."""

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



@dataclass(frozen=True)
class PinAdversary(Adversary):
    """Reactive: q_t = o_t, except that the canary round's query is pinned to ``arm``."""

    round: int
    arm: int

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        q = outputs[:, t]
        return np.full_like(q, self.arm) if t == self.round else q

    def describe(self) -> str:
        return f"reactive: q_t = o_t except q_{self.round} = arm {self.arm}"


class EchoAdversary(Adversary):
    """Reactive: q_t = o_{t-1} (q_0 = o_0): the policy is told the reward of its previous choice."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        return outputs[:, max(t - 1, 0)]

    def describe(self) -> str:
        return "reactive: q_t = o_(t-1)"



class InteractiveDP(TableDP):
    """Interactive DP (Azize & Basu 2023a, Def. 4): the policy observes d[t, q_t] for the adversary's query q_t."""

    name = "interactive"
    summary = "input: T x K reward table and an adversary; view: actions; neighbours: one row changed"

    adversaries = ("identity", "constant-0", "round-robin", "pin-0", "echo")

    def reward(self, data, t, actions, queries):
        return data[t, queries]

    def adversary(self, name: str, round_: int, n_arms: int, horizon: int) -> Adversary | None:
        """The named adversary of the search (:data:`adversaries`, or ``"pin-<arm>"``)."""
        j, K, T = round_, n_arms, horizon
        if name == "none":
            return None
        if name == "identity":
            return IdentityAdversary()
        if name == "constant-0":
            return ConstantAdversary(tuple([0] * T))
        if name == "round-robin":
            return ConstantAdversary(tuple(t % K for t in range(T)))
        if name.startswith("pin-"):
            return PinAdversary(j, int(name[4:]))
        if name == "echo":
            return EchoAdversary()
        raise DPAuditError(f"unknown adversary {name!r}.")

