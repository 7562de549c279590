"""Finite policies: bandit policies given by decision-rule tables (seed 001, App. B).

A finite policy over ``K`` arms, horizon ``T`` and a finite reward alphabet ``rewards`` is a list of
decision rules ``pi_1..pi_T``; ``pi_t`` maps the history ``(a_1, r_1, ..., a_{t-1}, r_{t-1})`` to a
distribution over arms. Spec format ``dpaudit.finite-policy/1`` (JSON)::

    {"format": "dpaudit.finite-policy/1", "horizon": T, "arms": K,
     "rewards": [r_0, ..., r_{R-1}], "rules": [rules_1, ..., rules_T]}

``rules_t`` has ``(K R)^(t-1)`` rows of ``K`` probabilities (numbers or strings ``"p/q"``). The row
of a history is the mixed-radix number with digits ``a_1, r_1, a_2, r_2, ...`` (radices
``K, R, K, R, ...``, most significant first; rewards by their index in ``rewards``). For
``K = R = 2`` this is seed 001's binary indexing: history {1,0} is row 2 of pi_2.

``FinitePolicy`` also runs as a batched :class:`~dpaudit.policies.base.Policy`, so the same object
feeds exact enumeration and sampling-based attacks.
"""

from __future__ import annotations

import json
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.policies.base import Policy

__all__ = ["FinitePolicy", "FORMAT", "load_spec", "bundled_spec", "BUNDLED"]

FORMAT = "dpaudit.finite-policy/1"
SUM_TOLERANCE = 1e-9

#: Specs shipped inside the package, by short name.
BUNDLED = {"seed001-counterexample": "seed001_counterexample.json"}


def _prob(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise DPAuditError(f"{where}: probability {value!r} must be a number or a string 'p/q'.")
    if isinstance(value, (int, float)):
        p = float(value)
    elif isinstance(value, str):
        try:
            p = float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            raise DPAuditError(f"{where}: probability {value!r} is not a number or a fraction 'p/q'.") from None
    else:
        raise DPAuditError(f"{where}: probability {value!r} must be a number or a string 'p/q'.")
    if not (0.0 <= p <= 1.0):
        raise DPAuditError(f"{where}: probability {value!r} is outside [0, 1].")
    return p


class FinitePolicy(Policy):
    """A policy given by its decision-rule tables (seed 001, App. B, proof of Prop. 1(e))."""

    name = "finite"

    def __init__(self, rules: Sequence[Any], rewards: Sequence[float] = (0.0, 1.0), *, label: str = "") -> None:
        super().__init__()
        if not isinstance(rules, (list, tuple)) or len(rules) < 1:
            raise DPAuditError("rules must be a non-empty list of decision rules, one per step (T >= 1).")
        rewards = [float(r) for r in rewards]
        if len(rewards) < 1 or len(set(rewards)) != len(rewards):
            raise DPAuditError(f"rewards must be a non-empty list of distinct numbers, got {rewards!r}.")
        first = rules[0]
        if not isinstance(first, (list, tuple, np.ndarray)) or len(first) != 1:
            raise DPAuditError(f"step 1 must have exactly 1 row (the empty history), got {len(first) if hasattr(first, '__len__') else first!r}.")
        row0 = first[0]
        if not isinstance(row0, (list, tuple, np.ndarray)):
            raise DPAuditError("step 1, row 0: a row must be a list of K probabilities.")
        K = len(row0)
        if K < 2:
            raise DPAuditError(f"a policy needs K >= 2 arms, got K = {K} (step 1, row 0 has {K} entries).")
        R = len(rewards)
        tables = []
        for t, rows in enumerate(rules):
            expected = (K * R) ** t
            if not isinstance(rows, (list, tuple, np.ndarray)):
                raise DPAuditError(f"step {t + 1}: rules must be a list of rows, got {type(rows).__name__}.")
            if len(rows) != expected:
                raise DPAuditError(
                    f"step {t + 1} has {len(rows)} rows; it needs (K R)^{t} = {expected} (K = {K}, R = {R})."
                )
            table = np.empty((expected, K))
            for i, row in enumerate(rows):
                where = f"step {t + 1}, row {i}"
                if not isinstance(row, (list, tuple, np.ndarray)) or len(row) != K:
                    raise DPAuditError(f"{where}: a row must list K = {K} probabilities, got {row!r}.")
                table[i] = [_prob(v, where) for v in row]
                total = table[i].sum()
                if abs(total - 1.0) > SUM_TOLERANCE:
                    raise DPAuditError(f"{where}: probabilities sum to {total:.12g}, not 1 (tolerance {SUM_TOLERANCE:g}).")
            tables.append(table)
        self.rules: list[np.ndarray] = tables
        self.rewards = np.array(rewards)
        self.horizon = len(tables)
        self.n_arms = K
        self.n_rewards = R
        self.label = label
        self.reward_range = (min(rewards), max(rewards))

    def __repr__(self) -> str:
        rewards = ", ".join(f"{r:g}" for r in self.rewards)
        label = f", label={self.label!r}" if self.label else ""
        return f"FinitePolicy(T={self.horizon}, K={self.n_arms}, rewards=[{rewards}]{label})"

    # ---- spec I/O -------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: dict[str, Any], *, label: str = "") -> "FinitePolicy":
        if not isinstance(spec, dict):
            raise DPAuditError(f"a finite-policy spec must be a JSON object, got {type(spec).__name__}.")
        if spec.get("format") != FORMAT:
            raise DPAuditError(f"spec format must be {FORMAT!r}, got {spec.get('format')!r}.")
        for key in ("horizon", "arms", "rewards", "rules"):
            if key not in spec:
                raise DPAuditError(f"spec is missing the key {key!r}.")
        T, K = spec["horizon"], spec["arms"]
        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise DPAuditError(f"horizon must be an integer T >= 1, got {T!r}.")
        if isinstance(K, bool) or not isinstance(K, int) or K < 2:
            raise DPAuditError(f"arms must be an integer K >= 2, got {K!r}.")
        rules = spec["rules"]
        if not isinstance(rules, list) or len(rules) != T:
            got = len(rules) if isinstance(rules, list) else type(rules).__name__
            raise DPAuditError(f"rules must list one decision rule per step: horizon is {T}, got {got}.")
        rewards = spec["rewards"]
        if not isinstance(rewards, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rewards):
            raise DPAuditError(f"rewards must be a list of numbers, got {rewards!r}.")
        policy = cls(rules, rewards, label=label)
        if policy.n_arms != K:
            raise DPAuditError(f"arms is {K} but step 1, row 0 has {policy.n_arms} probabilities.")
        return policy

    @classmethod
    def from_json(cls, path: str | Path) -> "FinitePolicy":
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise DPAuditError(f"cannot read finite-policy spec {str(path)!r}: {exc.strerror}.") from None
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DPAuditError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).") from None
        return cls.from_spec(spec, label=str(path))

    def to_spec(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "horizon": self.horizon,
            "arms": self.n_arms,
            "rewards": [float(r) for r in self.rewards],
            "rules": [t.tolist() for t in self.rules],
        }

    # ---- batched Policy -------------------------------------------------------------------
    def _reset(self) -> None:
        self._hist = np.zeros(self.n_runs, dtype=np.int64)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if not 0 <= t < self.horizon:
            raise DPAuditError(f"step t = {t} is outside this finite policy's horizon 0..{self.horizon - 1}.")
        probs = self.rules[t][self._hist]
        u = self.rng.random(self.n_runs)
        cdf = np.cumsum(probs, axis=1)
        return np.minimum((u[:, None] >= cdf).sum(axis=1), self.n_arms - 1).astype(np.int64)

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        r_idx = self.reward_index(rewards, t)
        self._hist = (self._hist * self.n_arms + actions) * self.n_rewards + r_idx

    def reward_index(self, rewards: np.ndarray, t: int = -1) -> np.ndarray:
        """Index of each reward in the alphabet; refuses values outside it."""
        order = np.argsort(self.rewards)
        pos = np.clip(np.searchsorted(self.rewards[order], rewards), 0, self.n_rewards - 1)
        ok = self.rewards[order][pos] == rewards
        if not np.all(ok):
            bad = np.asarray(rewards)[~ok].flat[0]
            raise DPAuditError(f"reward {bad:g} at step {t} is not in this policy's alphabet {self.rewards.tolist()}.")
        return order[pos]


def load_spec(spec: str | Path) -> FinitePolicy:
    """Load a finite policy from a JSON path or a bundled name (``seed001-counterexample``)."""
    if str(spec) in BUNDLED:
        return bundled_spec(str(spec))
    return FinitePolicy.from_json(spec)


def bundled_spec(name: str) -> FinitePolicy:
    try:
        fname = BUNDLED[name]
    except KeyError:
        raise DPAuditError(f"no bundled spec {name!r}; bundled specs are: {', '.join(BUNDLED)}.") from None
    text = resources.files("dpaudit.specs").joinpath(fname).read_text()
    return FinitePolicy.from_spec(json.loads(text), label=name)
