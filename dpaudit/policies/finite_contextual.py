"""Finite contextual policies: decision-rule tables over (context, action, reward) histories.

The contextual sibling of :mod:`dpaudit.policies.finite`, for exact joint-DP audits
(:mod:`dpaudit.attacks.exact_joint`). A finite contextual policy over a context alphabet ``C`` (labels),
``K`` arms, a reward alphabet of ``R`` values and horizon ``T`` is a list of decision rules
``pi_1..pi_T``; ``pi_t`` maps the history ``(c_1, a_1, r_1, ..., c_{t-1}, a_{t-1}, r_{t-1})`` and the
current context ``c_t`` to a distribution over arms: the ``pi_t(a_t | (x_s, a_s, r_s)_{s<t}, x_t)`` of
the interactive joint/local DP definitions (Def. "Anticipating JDP"; :mod:`dpaudit.papers`) with a finite
context space. Spec format ``dpaudit.finite-contextual-policy/1``::

    {"format": "dpaudit.finite-contextual-policy/1", "horizon": T, "arms": K,
     "contexts": ["x0", "x1"], "rewards": [0, 1], "claim": {"epsilon": 1.0986},
     "rules": [rules_1, ..., rules_T]}

``rules_t`` has ``(C K R)^(t-1) C`` rows of ``K`` probabilities (numbers or strings ``"p/q"``). The row
of a history is the mixed-radix number with digits ``c_1, a_1, r_1, ..., c_{t-1}, a_{t-1}, r_{t-1}, c_t``
(radices ``C, K, R, ..., C``, most significant first; contexts and rewards by their index in
``contexts`` and ``rewards``). With one context this is the finite-policy format with a constant
context digit: :meth:`FiniteContextualPolicy.from_finite` converts. ``claim`` (optional) is the joint-DP
guarantee the policy states: ``{"epsilon": e}`` (e-JDP), ``{"epsilon": e, "delta": d}`` or
``{"rho": r}`` (rho-zCDP); without it the exact audit reports numbers but no verdict.

Bundled examples (by name, :data:`BUNDLED_CONTEXTUAL`; built by :func:`rr_wsls` and :func:`copy_context`,
shipped as JSON in ``dpaudit.specs``), K = 2 arms, contexts {x0, x1}, rewards {0, 1}, T = 4:

* ``jdp-finite-rr``: randomised-response win-stay-lose-shift. Round 1 plays the arm its context names;
  round s > 1 forms the previous user's bit ``b = a_{s-1}`` if ``r_{s-1} = 1`` else ``1 - a_{s-1}``,
  keeps it with probability 3/4 (flips it with 1/4) and plays it, swapped when ``c_s = x1``. User t's
  data reach the later actions only through one randomised response, so the policy is ln(3)-JDP,
  and exactly so (claims ln 3).
* ``jdp-finite-rr-uneven``: the same, but the response keeps the bit with probability 7/8 when the
  previous user's context is x1: exact JDP eps = ln 7 against the same ln 3 claim (a budget that
  depends on the user's own data).
* ``jdp-finite-leak``: round s > 1 plays the arm the previous user's context names: a_{t+1} copies
  user t's context (exact JDP eps = inf; claims ln 3).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dpaudit import deprecations
from dpaudit.errors import DPAuditError, shorten
from dpaudit.jsontypes import JSONMapping, JSONObject, JSONValue
from dpaudit.policies.finite import SUM_TOLERANCE, BUNDLED, FinitePolicy, check_rewards_alphabet, parse_probability, arms_of_first_row, spec_shape

if TYPE_CHECKING:
    from dpaudit.accountants import Guarantee

__all__ = ["FiniteContextualPolicy", "FORMAT_CONTEXTUAL", "BUNDLED_CONTEXTUAL", "load_contextual",
           "is_contextual_spec", "rr_wsls", "copy_context"]

FORMAT_CONTEXTUAL = "dpaudit.finite-contextual-policy/1"

#: contextual specs shipped inside the package, by short name
BUNDLED_CONTEXTUAL = {"jdp-finite-rr": "jdp_finite_rr.json", "jdp-finite-rr-uneven": "jdp_finite_rr_uneven.json",
                      "jdp-finite-leak": "jdp_finite_leak.json"}


def _check_contexts(contexts: object) -> list[str]:
    if isinstance(contexts, (str, bytes)) or not isinstance(contexts, (list, tuple)) or len(contexts) < 1:
        raise DPAuditError(f"contexts must be a non-empty list of distinct labels (strings), got {shorten(contexts)}.")
    for c in contexts:
        if not isinstance(c, str) or not c:
            raise DPAuditError(f"each context must be a non-empty string label, got {shorten(c)}.")
    if len(set(contexts)) != len(contexts):
        raise DPAuditError(f"context labels must be distinct, got {shorten(list(contexts))}.")
    return list(contexts)


def _check_claim(claim: JSONValue) -> Guarantee | None:
    """The spec's ``claim`` object as a Guarantee (None when absent)."""
    from dpaudit.accountants import ZCDP, ApproxDP, PureDP

    if claim is None:
        return None
    if not isinstance(claim, dict) or not claim:
        raise DPAuditError(f"claim must be an object such as {{\"epsilon\": 1.0}}, {{\"epsilon\": 1, \"delta\": 1e-5}} or "
                           f"{{\"rho\": 0.5}}, got {shorten(claim)}.")
    keys = set(claim)
    for k, v in claim.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise DPAuditError(f"claim {k!r} must be a finite number >= 0, got {shorten(v)}.")
    if keys == {"epsilon"}:
        return PureDP(float(claim["epsilon"]))
    if keys == {"epsilon", "delta"}:
        if not claim["delta"] < 1:
            raise DPAuditError(f"claim delta must lie in [0, 1), got {claim['delta']!r}.")
        return ApproxDP(float(claim["epsilon"]), float(claim["delta"]))
    if keys == {"rho"}:
        return ZCDP(float(claim["rho"]))
    raise DPAuditError(f"claim has keys {sorted(keys)}; give epsilon, epsilon and delta, or rho.")


def _claim_spec(claim: Guarantee | None) -> dict[str, float] | None:
    if claim is None:
        return None
    for keys in (("epsilon", "delta"), ("epsilon",), ("rho",)):
        if all(hasattr(claim, k) for k in keys):
            return {k: float(getattr(claim, k)) for k in keys}
    return None


class FiniteContextualPolicy:
    """A contextual policy given by its decision-rule tables (module docstring); the input of the exact
    joint-DP enumeration. ``rules[t]`` is a ((C K R)^t C, K) array (0-based t)."""

    name = "finite-contextual"

    def __init__(self, rules: Sequence[object], contexts: Sequence[str], rewards: Sequence[float] = (0.0, 1.0), *,
                 claim: Guarantee | JSONValue = None, label: str = "") -> None:
        contexts = _check_contexts(contexts)
        rewards = check_rewards_alphabet(rewards)
        if not isinstance(rules, (list, tuple)) or len(rules) < 1:
            raise DPAuditError("rules must be a non-empty list of decision rules, one per step (T >= 1).")
        C, R = len(contexts), len(rewards)
        first = rules[0]
        if not isinstance(first, (list, tuple, np.ndarray)) or len(first) != C:
            got = len(first) if hasattr(first, "__len__") else first
            raise DPAuditError(f"step 1 must have C = {C} rows (one per current context), got {shorten(got)}.")
        K = arms_of_first_row(first)
        tables = []
        for t, rows in enumerate(rules):
            expected = (C * K * R) ** t * C
            if not isinstance(rows, (list, tuple, np.ndarray)):
                raise DPAuditError(f"step {t + 1}: rules must be a list of rows, got {type(rows).__name__}.")
            if len(rows) != expected:
                raise DPAuditError(f"step {t + 1} has {len(rows)} rows; it needs (C K R)^{t} C = {expected} "
                                   f"(C = {C}, K = {K}, R = {R}).")
            if isinstance(rows, np.ndarray) and rows.dtype.kind == "f" and rows.shape == (expected, K):
                table = np.array(rows, dtype=float)
                if not (np.all(np.isfinite(table)) and table.min() >= 0 and table.max() <= 1):
                    raise DPAuditError(f"step {t + 1}: probabilities must lie in [0, 1].")
            else:
                table = np.empty((expected, K))
                for i, row in enumerate(rows):
                    where = f"step {t + 1}, row {i}"
                    if not isinstance(row, (list, tuple, np.ndarray)) or len(row) != K:
                        raise DPAuditError(f"{where}: a row must list K = {K} probabilities, got {shorten(row)}.")
                    table[i] = [parse_probability(v, where) for v in row]
            bad = np.flatnonzero(np.abs(table.sum(axis=1) - 1.0) > SUM_TOLERANCE)
            if bad.size:
                raise DPAuditError(f"step {t + 1}, row {bad[0]}: probabilities sum to {table[bad[0]].sum():.12g}, not 1 "
                                   f"(tolerance {SUM_TOLERANCE:g}).")
            tables.append(table)
        self.rules: list[np.ndarray] = tables
        self.contexts = contexts
        self.rewards = np.array(rewards)
        self.horizon, self.n_arms, self.n_contexts, self.n_rewards = len(tables), K, C, R
        self.claim = claim
        self.label = label

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label else ""
        return (f"FiniteContextualPolicy(T={self.horizon}, K={self.n_arms}, contexts={self.contexts}, "
                f"rewards=[{', '.join(f'{r:g}' for r in self.rewards)}]{label})")

    # ---- spec I/O ---------------------------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: JSONMapping, *, label: str = "") -> "FiniteContextualPolicy":
        if not isinstance(spec, dict):
            raise DPAuditError(f"a finite contextual policy spec must be a JSON object, got {type(spec).__name__}.")
        if spec.get("format") != FORMAT_CONTEXTUAL:
            raise DPAuditError(f"spec format must be {FORMAT_CONTEXTUAL!r}, got {shorten(spec.get('format'))}.")
        for key in ("horizon", "arms", "contexts", "rewards", "rules"):
            if key not in spec:
                raise DPAuditError(f"spec is missing the key {key!r}.")
        extra = set(spec) - {"format", "horizon", "arms", "contexts", "rewards", "rules", "claim", "description"}
        if extra:
            raise DPAuditError(f"spec has unknown keys {sorted(extra)}; the format's keys are format, horizon, arms, "
                               "contexts, rewards, rules, and optionally claim and description.")
        T, K, rules, rewards = spec_shape(spec)
        policy = cls(rules, spec["contexts"], rewards, claim=_check_claim(spec.get("claim")), label=label)
        if policy.n_arms != K:
            raise DPAuditError(f"arms is {K} but step 1, row 0 has {policy.n_arms} probabilities.")
        return policy

    @classmethod
    def from_json(cls, path: str | Path) -> "FiniteContextualPolicy":
        """Load a spec file with the finite-policy loader's bounds (regular file, size, UTF-8, nesting depth,
        no NaN/Infinity, short numerals: :meth:`FinitePolicy.from_json`), then this format's checks."""
        return FinitePolicy.from_json.__func__(_AnyFinite, path)

    @classmethod
    def from_finite(cls, policy: FinitePolicy,
                    claim: Guarantee | JSONValue = None) -> "FiniteContextualPolicy":
        """A (non-contextual) finite policy as a contextual one with the single context ``"-"``."""
        return cls([t.copy() for t in policy.rules], ["-"], policy.rewards.tolist(), claim=claim, label=policy.label)

    def to_spec(self, *, fractions: bool = False) -> JSONObject:
        """The JSON-ready spec; ``fractions``: probabilities as short ``"p/q"`` strings where exact."""
        def cell(p: float) -> int | float | str:
            f = Fraction(p).limit_denominator(1000)
            if fractions and float(f) == p:
                return f.numerator if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
            return float(p)

        spec: JSONObject = {"format": FORMAT_CONTEXTUAL, "horizon": self.horizon, "arms": self.n_arms,
                                "contexts": list(self.contexts), "rewards": [float(r) for r in self.rewards]}
        if self.claim is not None:
            spec["claim"] = _claim_spec(self.claim)
        spec["rules"] = [[[cell(p) for p in row] for row in t] for t in self.rules]
        return spec

    def row(self, history: Sequence[tuple[int, int, int]], context: int) -> np.ndarray:
        """pi_t(. | history, context) for a history of (context, arm, reward-index) triples (slow; for tests)."""
        t = len(history)
        idx = 0
        for c, a, r in history:
            idx = ((idx * self.n_contexts + c) * self.n_arms + a) * self.n_rewards + r
        return self.rules[t][idx * self.n_contexts + context]


class _AnyFinite:
    """Dispatch of a JSON spec by its ``format``: a contextual spec, or a finite-policy spec seen as a
    contextual policy with one context (joint DP of a non-contextual policy is well defined)."""

    @staticmethod
    def from_spec(spec: JSONValue, *, label: str = "") -> FiniteContextualPolicy:
        from dpaudit.policies.finite import FORMAT

        if isinstance(spec, dict) and spec.get("format") == FORMAT:
            return FiniteContextualPolicy.from_finite(FinitePolicy.from_spec(spec, label=label))
        policy = FiniteContextualPolicy.from_spec(spec, label=label)
        return policy


def is_contextual_spec(spec: object) -> bool:
    """True for what :func:`load_contextual` reads: a bundled name (either format) or a ``.json`` path."""
    spec = deprecations.spec(spec)
    return isinstance(spec, FiniteContextualPolicy) or (
        isinstance(spec, str) and (spec in BUNDLED_CONTEXTUAL or spec in BUNDLED or spec.endswith(".json")))


def load_contextual(spec: FiniteContextualPolicy | str | Path) -> FiniteContextualPolicy:
    """A finite contextual policy from an instance, a bundled name (``jdp-finite-rr``; a bundled
    finite-policy name such as ``table-vs-view-counterexample`` is converted) or a JSON path (either format)."""
    spec = deprecations.spec(spec)
    if isinstance(spec, FiniteContextualPolicy):
        return spec
    if isinstance(spec, FinitePolicy):
        return FiniteContextualPolicy.from_finite(spec)
    name = str(spec)
    if name in BUNDLED_CONTEXTUAL:
        text = resources.files("dpaudit.specs").joinpath(BUNDLED_CONTEXTUAL[name]).read_text()
        return FiniteContextualPolicy.from_spec(json.loads(text), label=name)
    if name in BUNDLED:
        from dpaudit.policies.finite import bundled_spec

        return FiniteContextualPolicy.from_finite(bundled_spec(name))
    return FiniteContextualPolicy.from_json(name)


# ---- the bundled examples ------------------------------------------------------------------------

def histories(C: int, K: int, R: int, t: int) -> np.ndarray:
    """(n, t, 3) triples (context, arm, reward index) of every history of length t, in row order."""
    n = (C * K * R) ** t
    idx = np.arange(n, dtype=np.int64)
    radices = [C, K, R] * t
    digits = np.empty((n, 3 * t), dtype=np.int64)
    for j in range(3 * t - 1, -1, -1):
        digits[:, j] = idx % radices[j]
        idx //= radices[j]
    return digits.reshape(n, t, 3)


def rr_wsls(horizon: int = 4, keep: Fraction | float = Fraction(3, 4), keep_x1: Fraction | float | None = None,
            *, claim_epsilon: float | None = None) -> FiniteContextualPolicy:
    """Randomised-response win-stay-lose-shift (module docstring): ``keep`` is the probability the previous
    user's bit survives (``keep_x1`` when that user's context was x1; default ``keep``). Its exact JDP
    epsilon is ``log(max(k, 1 - k) / min(k, 1 - k))`` over the keep probabilities k used."""
    k0 = float(keep)
    k1 = float(keep if keep_x1 is None else keep_x1)
    for k in (k0, k1):
        if not 0 <= k <= 1:
            raise DPAuditError(f"keep probabilities must lie in [0, 1], got {k!r}.")
    C, K, R = 2, 2, 2
    rules = [np.eye(2)]  # round 1: the arm the context names
    for t in range(1, horizon):
        h = histories(C, K, R, t)
        c, a, r = h[:, -1, 0], h[:, -1, 1], h[:, -1, 2]
        b = np.where(r == 1, a, 1 - a)  # win-stay, lose-shift
        k = np.where(c == 1, k1, k0)
        p1 = np.where(b == 1, k, 1 - k)  # P(bit = 1)
        rows = np.empty((h.shape[0], C, K))
        rows[:, 0] = np.stack([1 - p1, p1], axis=1)  # context x0 plays the bit
        rows[:, 1] = np.stack([p1, 1 - p1], axis=1)  # context x1 swaps the arms
        rules.append(rows.reshape(-1, K))
    if claim_epsilon is None:
        claim_epsilon = math.log(max(k0, 1 - k0) / min(k0, 1 - k0)) if 0 < k0 < 1 else math.inf
    from dpaudit.accountants import PureDP

    return FiniteContextualPolicy(rules, ["x0", "x1"], [0, 1], claim=PureDP(claim_epsilon), label="rr-wsls")


def copy_context(horizon: int = 4, claim_epsilon: float = math.log(3)) -> FiniteContextualPolicy:
    """The leaky rule (module docstring): round s > 1 plays the arm named by the previous user's context."""
    from dpaudit.accountants import PureDP

    C, K, R = 2, 2, 2
    rules = [np.eye(2)]
    for t in range(1, horizon):
        h = histories(C, K, R, t)
        prev = h[:, -1, 0]
        rows = np.zeros((h.shape[0], C, K))
        rows[np.arange(h.shape[0]), :, prev] = 1.0
        rules.append(rows.reshape(-1, K))
    return FiniteContextualPolicy(rules, ["x0", "x1"], [0, 1], claim=PureDP(claim_epsilon), label="copy-context")


def bundled_builders() -> dict[str, FiniteContextualPolicy]:
    """The bundled examples as built in Python (the shipped JSON files are these, written with
    ``write_bundled``; a test checks they agree)."""
    ln3 = math.log(3)
    return {"jdp-finite-rr": rr_wsls(4, Fraction(3, 4), claim_epsilon=ln3),
            "jdp-finite-rr-uneven": rr_wsls(4, Fraction(3, 4), Fraction(7, 8), claim_epsilon=ln3),
            "jdp-finite-leak": copy_context(4, ln3)}


def write_bundled(folder: str | Path) -> None:
    """Write the bundled examples' JSON files into ``folder`` (``python -m dpaudit.policies.finite_contextual DIR``)."""
    descriptions = {"jdp-finite-rr": "randomised-response win-stay-lose-shift (keep 3/4): exactly ln(3)-JDP",
                    "jdp-finite-rr-uneven": "as jdp-finite-rr but keep 7/8 after a user with context x1: ln(7)-JDP, "
                                            "claims ln 3",
                    "jdp-finite-leak": "a_{t+1} plays the arm named by user t's context: not JDP, claims ln 3"}
    for name, policy in bundled_builders().items():
        spec = policy.to_spec(fractions=True)
        spec = {"format": spec["format"], "description": descriptions[name],
                **{k: v for k, v in spec.items() if k != "format"}}
        text = json.dumps(spec, separators=(",", ":"))
        Path(folder, BUNDLED_CONTEXTUAL[name]).write_text(text + "\n")


if __name__ == "__main__":  # pragma: no cover - regenerates the shipped JSON
    import sys

    write_bundled(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "specs")
