"""Finite policies: bandit policies given by decision-rule tables (Azize & Basu 2023a, App. B).

The paper is Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits" (full reference:
:mod:`dpaudit.papers`).

A finite policy over ``K`` arms, horizon ``T`` and a finite reward alphabet ``rewards`` is a list of
decision rules ``pi_1..pi_T``; ``pi_t`` maps the history ``(a_1, r_1, ..., a_{t-1}, r_{t-1})`` to a
distribution over arms. Spec format ``dpaudit.finite-policy/1`` (JSON)::

    {"format": "dpaudit.finite-policy/1", "horizon": T, "arms": K,
     "rewards": [r_0, ..., r_{R-1}], "rules": [rules_1, ..., rules_T]}

``rules_t`` has ``(K R)^(t-1)`` rows of ``K`` probabilities (numbers or strings ``"p/q"``). The row
of a history is the mixed-radix number with digits ``a_1, r_1, a_2, r_2, ...`` (radices
``K, R, K, R, ...``, most significant first; rewards by their index in ``rewards``). For
``K = R = 2`` this is Azize & Basu's (2023a) binary indexing: history {1,0} is row 2 of pi_2.

``FinitePolicy`` also runs as a batched :class:`~dpaudit.policies.base.Policy`, so the same object
feeds exact enumeration and sampling-based attacks.
"""

from __future__ import annotations

import json
import math
import os
import stat
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import NoReturn, Sequence

import numpy as np

from dpaudit import deprecations
from dpaudit.errors import DPAuditError, shorten
from dpaudit.jsontypes import JSONMapping, JSONObject, JSONValue
from dpaudit.policies.base import Policy, check_actions

__all__ = ["FinitePolicy", "FORMAT", "load_spec", "bundled_spec", "BUNDLED"]

FORMAT = "dpaudit.finite-policy/1"
SUM_TOLERANCE = 1e-9

#: Specs shipped inside the package, by short name (an old name still read: :mod:`dpaudit.deprecations`).
BUNDLED = {"table-vs-view-counterexample": "table_vs_view_counterexample.json"}


#: bounds on what the loader reads (a spec that enumerates in reasonable time is far smaller)
MAX_SPEC_BYTES = 64 * 2**20
MAX_DEPTH = 16  # a spec nests 4 deep: {"rules": [ steps [ rows [ probabilities ] ] ] }
MAX_NUMBER_CHARS = 40  # longer numerals (a 400-digit integer, a fraction of huge integers) are refused


def parse_probability(value: object, where: str) -> float:
    if isinstance(value, bool):
        raise DPAuditError(f"{where}: probability {value!r} must be a number or a string 'p/q'.")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if isinstance(value, (int, np.integer)) and abs(int(value)) > 1:
            raise DPAuditError(f"{where}: probability {shorten(value)} is outside [0, 1].")
        p = float(value)
    elif isinstance(value, str):
        if len(value) > MAX_NUMBER_CHARS:
            raise DPAuditError(f"{where}: probability {shorten(value)} is longer than {MAX_NUMBER_CHARS} characters; "
                               "write it as a number or a short fraction 'p/q'.")
        try:
            frac = Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise DPAuditError(f"{where}: probability {shorten(value)} is not a number or a fraction 'p/q'.") from None
        if not (0 <= frac <= 1):  # compared exactly, before a float conversion could overflow
            raise DPAuditError(f"{where}: probability {shorten(value)} is outside [0, 1].")
        p = float(frac)
    else:
        raise DPAuditError(f"{where}: probability {shorten(value)} must be a number or a string 'p/q'.")
    if not (0.0 <= p <= 1.0):  # also NaN
        raise DPAuditError(f"{where}: probability {shorten(value)} is outside [0, 1].")
    return p


def _refuse_constant(name: str) -> NoReturn:
    raise DPAuditError(f"the spec contains {name}, which is not a number dpaudit accepts (probabilities lie in "
                       "[0, 1] and rewards are finite).")


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_CHARS:
        raise DPAuditError(f"the spec contains an integer with {len(text.lstrip('-'))} digits; dpaudit reads "
                           f"integers of at most {MAX_NUMBER_CHARS} digits.")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or len(text) > 2 * MAX_NUMBER_CHARS:
        raise DPAuditError(f"the spec contains the number {text[:MAX_NUMBER_CHARS]}"
                           f"{'...' if len(text) > MAX_NUMBER_CHARS else ''}, which is not a finite double.")
    return value


def _nesting_depth(text: str) -> int:
    """Deepest bracket nesting of a JSON text, strings skipped (checked before parsing it)."""
    import re

    skeleton = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    b = np.frombuffer(skeleton.encode("ascii", "replace"), dtype=np.uint8)
    step = (b == ord("[")).astype(np.int64) + (b == ord("{")) - (b == ord("]")) - (b == ord("}"))
    return int(np.cumsum(step).max(initial=0))


def check_rewards_alphabet(rewards: Sequence[object]) -> list[float]:
    if isinstance(rewards, (str, bytes)) or not hasattr(rewards, "__len__"):
        raise DPAuditError(f"rewards must be a list of at least 2 distinct finite numbers, got {shorten(rewards)}.")
    out = []
    for r in rewards:
        if isinstance(r, bool) or not isinstance(r, (int, float, np.integer, np.floating)):
            raise DPAuditError(f"rewards must be numbers, got {shorten(r)}.")
        v = float(r)
        if not math.isfinite(v):
            raise DPAuditError(f"rewards must be finite numbers, got {r!r}.")
        out.append(v)
    if len(set(out)) != len(out):
        raise DPAuditError(f"rewards must be distinct numbers, got {shorten(out)}.")
    if len(out) < 2:
        raise DPAuditError(f"the reward alphabet needs at least 2 values (neighbouring inputs differ in a reward), "
                           f"got {shorten(out)}.")
    return out


def arms_of_first_row(first: Sequence[object]) -> int:
    """K, read from step 1's row 0 of a decision-rule table (either format): a list of K >= 2 probabilities."""
    row0 = first[0]
    if not isinstance(row0, (list, tuple, np.ndarray)):
        raise DPAuditError("step 1, row 0: a row must be a list of K probabilities.")
    K = len(row0)
    if K < 2:
        raise DPAuditError(f"a policy needs K >= 2 arms, got K = {K} (step 1, row 0 has {K} entries).")
    return K


def spec_shape(spec: JSONMapping) -> tuple[int, int, list[JSONValue], list[JSONValue]]:
    """(T, K, rules, rewards) of a finite-policy spec (either format), each checked for its type and size."""
    T, K = spec["horizon"], spec["arms"]
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise DPAuditError(f"horizon must be an integer T >= 1, got {shorten(T)}.")
    if isinstance(K, bool) or not isinstance(K, int) or K < 2:
        raise DPAuditError(f"arms must be an integer K >= 2, got {shorten(K)}.")
    rules = spec["rules"]
    if not isinstance(rules, list) or len(rules) != T:
        got = len(rules) if isinstance(rules, list) else type(rules).__name__
        raise DPAuditError(f"rules must list one decision rule per step: horizon is {T}, got {got}.")
    rewards = spec["rewards"]
    if not isinstance(rewards, list) or not all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in rewards):
        raise DPAuditError(f"rewards must be a list of numbers, got {shorten(rewards)}.")
    return T, K, rules, rewards


class FinitePolicy(Policy):
    """A policy given by its decision-rule tables (Azize & Basu 2023a, App. B, proof of Prop. 1(e))."""

    name = "finite"

    def __init__(self, rules: Sequence[object], rewards: Sequence[float] = (0.0, 1.0), *, label: str = "") -> None:
        super().__init__()
        if not isinstance(rules, (list, tuple)) or len(rules) < 1:
            raise DPAuditError("rules must be a non-empty list of decision rules, one per step (T >= 1).")
        rewards = check_rewards_alphabet(rewards)
        first = rules[0]
        if not isinstance(first, (list, tuple, np.ndarray)) or len(first) != 1:
            raise DPAuditError(f"step 1 must have exactly 1 row (the empty history), got {len(first) if hasattr(first, '__len__') else first!r}.")
        K = arms_of_first_row(first)
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
                table[i] = [parse_probability(v, where) for v in row]
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
    def from_spec(cls, spec: JSONMapping, *, label: str = "") -> "FinitePolicy":
        if not isinstance(spec, dict):
            raise DPAuditError(f"a finite-policy spec must be a JSON object, got {type(spec).__name__}.")
        if spec.get("format") != FORMAT:
            raise DPAuditError(f"spec format must be {FORMAT!r}, got {spec.get('format')!r}.")
        for key in ("horizon", "arms", "rewards", "rules"):
            if key not in spec:
                raise DPAuditError(f"spec is missing the key {key!r}.")
        T, K, rules, rewards = spec_shape(spec)
        policy = cls(rules, rewards, label=label)
        if policy.n_arms != K:
            raise DPAuditError(f"arms is {K} but step 1, row 0 has {policy.n_arms} probabilities.")
        return policy

    @classmethod
    def from_json(cls, path: str | Path) -> "FinitePolicy":
        """Load a spec file, bounding what is read: a regular file (a FIFO or device would block or
        never end) of at most :data:`MAX_SPEC_BYTES`, UTF-8 text, nesting at most :data:`MAX_DEPTH`
        deep, no NaN/Infinity, no numeral longer than :data:`MAX_NUMBER_CHARS`."""
        path = Path(path)
        try:
            st = os.stat(path)
        except OSError as exc:
            raise DPAuditError(f"cannot read finite-policy spec {str(path)!r}: {exc.strerror}.") from None
        if not stat.S_ISREG(st.st_mode):
            raise DPAuditError(f"finite-policy spec {str(path)!r} is not a regular file (a directory, FIFO or "
                               "device); give a JSON file.")
        if st.st_size > MAX_SPEC_BYTES:
            raise DPAuditError(f"finite-policy spec {str(path)!r} has {st.st_size:,} bytes, more than the "
                               f"{MAX_SPEC_BYTES:,} dpaudit reads; a spec that can be enumerated is far smaller.")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # never blocks, even if swapped for a FIFO
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_SPEC_BYTES + 1)
        except OSError as exc:
            raise DPAuditError(f"cannot read finite-policy spec {str(path)!r}: {exc.strerror}.") from None
        if len(data) > MAX_SPEC_BYTES:
            raise DPAuditError(f"finite-policy spec {str(path)!r} is larger than the {MAX_SPEC_BYTES:,} bytes dpaudit reads.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DPAuditError(f"finite-policy spec {str(path)!r} is not UTF-8 text (byte {exc.start}); give a JSON "
                               "file.") from None
        if "\x00" in text:
            raise DPAuditError(f"finite-policy spec {str(path)!r} contains NUL characters (a binary file?); give a "
                               "JSON file.")
        depth = _nesting_depth(text)
        if depth > MAX_DEPTH:
            raise DPAuditError(f"finite-policy spec {str(path)!r} nests {depth} levels deep; a spec nests 4 levels "
                               f"(dpaudit reads at most {MAX_DEPTH}).")
        try:
            spec = json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise DPAuditError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).") from None
        except RecursionError:  # pragma: no cover - the depth check comes first
            raise DPAuditError(f"finite-policy spec {str(path)!r} nests too deeply.") from None
        return cls.from_spec(spec, label=str(path))

    def to_spec(self) -> JSONObject:
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
        if self.rng is None:
            raise DPAuditError("call reset(n_runs, rng) before act: this finite policy has no runs yet.")
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise DPAuditError(f"step t must be an integer, got {t!r}.")
        if not 0 <= t < self.horizon:
            raise DPAuditError(f"step t = {t} is outside this finite policy's horizon 0..{self.horizon - 1}.")
        probs = self.rules[t][self._hist]
        u = self.rng.random(self.n_runs)
        cdf = np.cumsum(probs, axis=1)
        return np.minimum((u[:, None] >= cdf).sum(axis=1), self.n_arms - 1).astype(np.int64)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        if self.rng is None:
            raise DPAuditError("call reset(n_runs, rng) before observe: this finite policy has no runs yet.")
        actions = check_actions(actions, self.n_runs, self.n_arms, "finite", t)
        super().observe(t, actions, rewards)

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
    """Load a finite policy from a JSON path or a bundled name (``table-vs-view-counterexample``)."""
    spec = deprecations.spec(spec)
    if str(spec) in BUNDLED:
        return bundled_spec(str(spec))
    return FinitePolicy.from_json(spec)


def bundled_spec(name: str) -> FinitePolicy:
    """The bundled finite policy ``name`` (:data:`BUNDLED`)."""
    name = deprecations.spec(name)
    try:
        fname = BUNDLED[name]
    except KeyError:
        raise DPAuditError(f"no bundled spec {name!r}; bundled specs are: {', '.join(BUNDLED)}.") from None
    text = resources.files("dpaudit.specs").joinpath(fname).read_text()
    return FinitePolicy.from_spec(json.loads(text), label=name)
