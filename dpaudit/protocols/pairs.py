"""Neighbouring pairs a reviewer hands in (``--pair PAIR.json``).

The file format, ``dpaudit.pair/1``, is one JSON object::

    {
      "format": "dpaudit.pair/1",
      "d":       [[0.5, 0.5], [0.0, 1.0], [0.5, 0.5]],
      "d_prime": [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5]],
      "contexts": [[1.0, 0.0], [0.0, 1.0]],
      "label":   "the second user flips the arms"
    }

* ``d`` and ``d_prime``: the two neighbouring inputs. Under the table and interactive protocols each
  is a T x K table of potential rewards (row t is user t's reward for each of the policy's K arms);
  under the view protocol each is a list of T observed rewards. Both have the same shape and differ
  in exactly one row (table) or entry (view): that is the canary round, which must lie in
  0..T-2 (a change in the last round cannot affect any action). Every value is a finite number
  inside the policy's reward range (per arm, for a table, when the range is given per arm; under
  View DP an entry may be observed whatever arm is played, so it must lie in every arm's range) and,
  when the policy declares a reward alphabet, one of its values.
* ``contexts`` (optional, for linear and contextual policies): a K x d fixed action set (the same
  K feature vectors every round) or a T x K x d array (round t's features), finite numbers, d >= 1.
* ``label`` (optional): a short text naming the pair in reports.

No other keys are accepted (a misspelt key would otherwise be ignored). The file must be a regular
file of at most 64 MiB. Every problem is refused with one sentence naming the field, the row (and
column) and the value.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TypeAlias, Union

import numpy as np

from dpaudit.errors import DPAuditError, check_int
from dpaudit.policies.base import arm_ranges, check_alphabet

from .base import Pair, Protocol

if TYPE_CHECKING:
    from .joint import JointPair
    from .shuffle import ShufflePair

__all__ = ["PAIR_FORMAT", "MAX_PAIR_BYTES", "UserPair", "load_pair", "parse_pair", "read_pair_file",
           "load_joint_pair", "load_shuffle_pair", "pair_horizon", "RewardRange"]

PAIR_FORMAT = "dpaudit.pair/1"
#: the largest pair file read (bytes)
MAX_PAIR_BYTES = 64 * 1024 * 1024
_KEYS = ("format", "d", "d_prime", "contexts", "label")
#: the joint and shuffle protocols' pairs may also change the contexts (``contexts_prime``)
_CONTEXT_KEYS = ("format", "d", "d_prime", "contexts", "contexts_prime", "label")
#: a policy's reward range: (low, high), or one (low, high) pair per arm (:func:`dpaudit.policies.base.arm_ranges`)
RewardRange: TypeAlias = Union[tuple[float, float], Sequence[tuple[float, float]], np.ndarray]


@dataclass(frozen=True)
class UserPair(Pair):
    """A :class:`~dpaudit.attacks.membership.Pair` read from a file, with its optional contexts:
    None, a (K, d) fixed action set or a (T, K, d) array."""

    contexts: np.ndarray | None = None

    def describe(self) -> dict[str, object]:
        out = super().describe()
        out["contexts"] = "none" if self.contexts is None else f"array of shape {list(self.contexts.shape)}"
        return out


def load_pair(path: str | os.PathLike[str], *, n_arms: int, protocol: Protocol | str,
              reward_range: RewardRange = (0.0, 1.0), alphabet: Sequence[float] | None = None) -> UserPair:
    """Read and validate a ``dpaudit.pair/1`` file (see the module docstring) for a policy with
    ``n_arms`` arms audited under ``protocol`` (a Protocol or its name), with rewards in
    ``reward_range`` ((low, high) or one pair per arm) and, if given, in ``alphabet``."""
    doc, src = read_pair_file(path)
    return parse_pair(doc, n_arms=n_arms, protocol=protocol, reward_range=reward_range, alphabet=alphabet,
                      source=src)


def pair_horizon(path: str | os.PathLike[str]) -> int | None:
    """The horizon T a pair file fixes (the length of its ``d``), read before any policy is built (for the
    up-front time estimate); None when the file does not say (the audit then refuses it, naming the fault)."""
    try:
        doc, _ = read_pair_file(path)
    except DPAuditError:
        return None
    d = doc.get("d") if isinstance(doc, dict) else None
    return len(d) if isinstance(d, list) and len(d) >= 2 else None


def read_pair_file(path: str | os.PathLike[str]) -> tuple[object, str]:
    """The parsed JSON of a pair file (a regular UTF-8 file of at most :data:`MAX_PAIR_BYTES`) and its name."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise DPAuditError(f"pair file {str(p)!r} cannot be read: {exc.strerror or exc}.") from None
    if not stat.S_ISREG(st.st_mode):
        raise DPAuditError(f"pair file {str(p)!r} is not a regular file; give a JSON file of format {PAIR_FORMAT}.")
    if st.st_size > MAX_PAIR_BYTES:
        raise DPAuditError(f"pair file {str(p)!r} has {st.st_size} bytes, more than the {MAX_PAIR_BYTES} "
                           f"({MAX_PAIR_BYTES / 2**20:g} MiB) dpaudit reads.")
    try:
        with open(p, "rb") as fh:
            raw = fh.read(MAX_PAIR_BYTES + 1)
    except OSError as exc:
        raise DPAuditError(f"pair file {str(p)!r} cannot be read: {exc.strerror or exc}.") from None
    if len(raw) > MAX_PAIR_BYTES:
        raise DPAuditError(f"pair file {str(p)!r} grew past {MAX_PAIR_BYTES} bytes while being read.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DPAuditError(f"pair file {str(p)!r} is not UTF-8 text (byte {exc.start}).") from None
    try:
        doc = json.loads(text, parse_constant=_nonfinite)
    except json.JSONDecodeError as exc:
        raise DPAuditError(f"pair file {str(p)!r} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                           f"column {exc.colno}.") from None
    except ValueError:  # an integer literal of more digits than Python converts (4300 by default)
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise DPAuditError(f"pair file {str(p)!r} holds an integer of more than {limit} digits, far beyond the "
                           "largest float; values must be finite numbers.") from None
    except RecursionError:
        raise DPAuditError(f"pair file {str(p)!r} nests its JSON too deeply; a pair has at most three levels "
                           "of lists.") from None
    return doc, str(p)


def _nonfinite(token: str) -> float:
    # JSON has no NaN/Infinity, but Python's json module accepts them; keep them so the value checks
    # below can name the field and row where they sit
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[token]


def _is_number(v: object) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


#: the largest finite float, as an int: a JSON integer beyond it has no float value
_FLOAT_MAX = int(np.finfo(float).max)


def _big(v: int) -> str:
    """A huge integer for a sentence: its sign, leading digits and number of digits."""
    digits = str(abs(v)) if abs(v).bit_length() < 13000 else None
    if digits is None:
        return f"an integer of about {int(abs(v).bit_length() * 0.30103) + 1} digits"
    return f"{'-' if v < 0 else ''}{digits[0]}.{digits[1:4]}e+{len(digits) - 1} (an integer of {len(digits)} digits)"


def _numbers(value: object, field: str, depth: int, src: str) -> np.ndarray:
    """A nested list of exactly ``depth`` levels, rectangular, of JSON numbers -> a float array.
    Errors name the first offending position."""
    def fail(where: str, what: str) -> DPAuditError:
        return DPAuditError(f"{src}: {field}{where} {what}.")

    def walk(v: object, where: str, level: int) -> tuple[int, ...]:
        if level == depth:
            if not _is_number(v):
                raise fail(where, f"is {json.dumps(v)[:40]}, not a number")
            if isinstance(v, int) and not -_FLOAT_MAX <= v <= _FLOAT_MAX:  # 10**400: no float holds it
                raise fail(where, f"is {_big(v)}, beyond the largest float ({_FLOAT_MAX:.4g}); values must be "
                                  "finite numbers")
            return ()
        if not isinstance(v, list):
            raise fail(where, f"must be a list ({depth - level} more level{'s' if depth - level > 1 else ''} of "
                              f"lists of numbers), got {json.dumps(v)[:40]}")
        if not v:
            raise fail(where, "is an empty list")
        shape = walk(v[0], f"{where}[0]", level + 1)
        for i in range(1, len(v)):
            s = walk(v[i], f"{where}[{i}]", level + 1)
            if s != shape:
                raise fail(f"{where}[{i}]", f"has {s[0] if s else 'a number'} entries where {where or field}[0] "
                                            f"has {shape[0] if shape else 'a number'}")
        return (len(v),) + shape

    walk(value, "", 0)
    arr = np.asarray(value, dtype=float)
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise fail("".join(f"[{i}]" for i in idx), f"is {float(arr[idx])}; values must be finite numbers")
    return arr


def parse_pair(doc: object, *, n_arms: int, protocol: Protocol | str, reward_range: RewardRange = (0.0, 1.0),
               alphabet: Sequence[float] | None = None, source: str = "pair") -> UserPair:
    """Validate an already-parsed ``dpaudit.pair/1`` document (see :func:`load_pair`)."""
    src = source
    K = check_int("n_arms", n_arms, minimum=1)
    proto = _protocol(protocol)
    view = proto.list_input
    fields = _pair_keys(doc, src)
    d0, d1 = _pair_inputs(fields, src, K, proto)
    T = d0.shape[0]
    _check_rewards(src, d0, d1, view, K, reward_range, alphabet)
    j = _canary(src, d0, d1, view)
    contexts = _fixed_contexts(fields, src, K, T)
    label = _label(fields, src)
    unit = "entry" if view else "row"
    return UserPair(d0, d1, j, None, label or f"user pair from {src}, canary {unit} {j}", contexts)


def _protocol(protocol: Protocol | str) -> Protocol:
    """A Protocol, or the one registered under its name."""
    from . import get_protocol  # the registry of protocols is the package's

    proto = get_protocol(protocol) if isinstance(protocol, str) else protocol
    if not isinstance(proto, Protocol):
        raise DPAuditError(f"protocol must be a dpaudit Protocol or its name, got {protocol!r}.")
    return proto


def _pair_keys(doc: object, src: str) -> dict[str, object]:
    """The document as a dict of the central protocols' keys: an object, no unknown key, the format, both inputs."""
    if not isinstance(doc, dict):
        raise DPAuditError(f"{src}: a pair file holds one JSON object with keys format, d and d_prime, got a "
                           f"{type(doc).__name__}.")
    extra = [k for k in doc if k not in _KEYS]
    if extra:
        raise DPAuditError(f"{src}: unknown key {extra[0]!r}; a {PAIR_FORMAT} file has the keys "
                           f"{', '.join(_KEYS)} (contexts and label optional).")
    if doc.get("format") != PAIR_FORMAT:
        raise DPAuditError(f"{src}: format must be {PAIR_FORMAT!r}, got {doc.get('format')!r}.")
    for key in ("d", "d_prime"):
        if key not in doc:
            raise DPAuditError(f"{src}: the key {key!r} is missing; a pair gives both inputs, d and d_prime.")
    return doc


def _pair_inputs(doc: dict[str, object], src: str, K: int, proto: Protocol) -> tuple[np.ndarray, np.ndarray]:
    """``d`` and ``d_prime`` as arrays: lists of T rewards (view) or T x K tables, of one shape, T >= 2."""
    view = proto.list_input
    depth = 1 if view else 2
    what = "a list of T rewards (view protocol)" if view else f"a T x {K} table of rewards ({proto.name} protocol)"
    arrays = {}
    for key in ("d", "d_prime"):
        if not isinstance(doc[key], list):
            raise DPAuditError(f"{src}: {key} must be {what}, got {json.dumps(doc[key])[:40]}.")
        arrays[key] = _numbers(doc[key], key, depth, src)
    d0, d1 = arrays["d"], arrays["d_prime"]
    if not view and d0.shape[1] != K:
        raise DPAuditError(f"{src}: d has {d0.shape[1]} columns but the policy has {K} arms; d must be {what}.")
    if d0.shape != d1.shape:
        raise DPAuditError(f"{src}: d_prime has shape {list(d1.shape)} but d has {list(d0.shape)}; the two inputs "
                           "must have the same shape.")
    T = d0.shape[0]
    if T < 2:
        raise DPAuditError(f"{src}: d has {T} round; a pair needs T >= 2 rounds so that an action can follow the "
                           "canary.")
    return d0, d1


def _check_rewards(src: str, d0: np.ndarray, d1: np.ndarray, view: bool, K: int, reward_range: RewardRange,
                   alphabet: Sequence[float] | None) -> None:
    """Every value inside the reward range (per arm for a table; every arm's for a list) and the alphabet."""
    T = d0.shape[0]
    rr = arm_ranges(reward_range, K)
    if view:
        lo = np.full(T, rr[:, 0].max())
        hi = np.full(T, rr[:, 1].min())
        if lo[0] > hi[0]:
            raise DPAuditError(f"{src}: the arms' reward ranges have no value in common, so no View-DP reward list "
                               "fits every arm.")
    else:
        lo = np.broadcast_to(rr[:, 0], (T, K))
        hi = np.broadcast_to(rr[:, 1], (T, K))
    alph = None if alphabet is None else np.asarray(check_alphabet(alphabet, "the reward alphabet"))
    for key, arr in (("d", d0), ("d_prime", d1)):
        bad = (arr < lo) | (arr > hi)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            arm = f" (arm {idx[1]})" if not view else ""
            raise DPAuditError(f"{src}: {key}{''.join(f'[{i}]' for i in idx)} = {arr[idx]:g} lies outside the reward "
                               f"range [{lo[idx]:g}, {hi[idx]:g}]{arm}.")
        if alph is not None:
            off = ~np.isin(arr, alph)
            if off.any():
                idx = tuple(int(i) for i in np.argwhere(off)[0])
                raise DPAuditError(f"{src}: {key}{''.join(f'[{i}]' for i in idx)} = {arr[idx]:g} is not in the "
                                   f"policy's reward alphabet {tuple(alph.tolist())}.")


def _canary(src: str, d0: np.ndarray, d1: np.ndarray, view: bool) -> int:
    """The one row (table) or entry (list) in which the inputs differ, which must not be the last."""
    T = d0.shape[0]
    differs = d0 != d1 if view else np.any(d0 != d1, axis=1)
    rows = np.flatnonzero(differs)
    unit, units = ("entry", "entries") if view else ("row", "rows")
    if rows.size == 0:
        raise DPAuditError(f"{src}: d and d_prime are identical; neighbouring inputs differ in exactly one {unit}.")
    if rows.size > 1:
        more = f" (and {rows.size - 2} more)" if rows.size > 2 else ""
        raise DPAuditError(f"{src}: d and d_prime differ in {units} {rows[0]} and {rows[1]}{more}; neighbouring "
                           f"inputs differ in exactly one {unit}.")
    j = int(rows[0])
    if j > T - 2:
        raise DPAuditError(f"{src}: d and d_prime differ only in the last {unit} ({j}); the canary must lie in "
                           f"0..T-2 = 0..{T - 2}, since no action follows the last round.")
    return j


def _fixed_contexts(doc: dict[str, object], src: str, K: int, T: int) -> np.ndarray | None:
    """The optional ``contexts``: None, a K x d fixed action set or a T x K x d array of numbers."""
    c = doc.get("contexts")
    if c is None:
        return None
    if not isinstance(c, list) or not c:
        raise DPAuditError(f"{src}: contexts must be a K x d action set or a T x K x d array of numbers, got "
                           f"{json.dumps(c)[:40]}.")
    level = 0
    probe: object = c
    while isinstance(probe, list) and probe:
        probe, level = probe[0], level + 1
    if level not in (2, 3):
        raise DPAuditError(f"{src}: contexts must be a K x d action set or a T x K x d array of numbers, got "
                           f"{level} level{'s' if level != 1 else ''} of lists.")
    contexts = _numbers(c, "contexts", level, src)
    expect = (K,) if level == 2 else (T, K)
    if contexts.shape[: level - 1] != expect:
        dims = "K x d" if level == 2 else "T x K x d"
        raise DPAuditError(f"{src}: contexts has shape {list(contexts.shape)}; as a {dims} array it must start "
                           f"with {list(expect)} (T = {T} rounds, K = {K} arms).")
    return contexts


def _label(doc: dict[str, object], src: str) -> str | None:
    """The optional ``label``: text, or None when the file gives none."""
    label = doc.get("label")
    if label is not None and not isinstance(label, str):
        raise DPAuditError(f"{src}: label must be text, got {json.dumps(label)[:40]}.")
    return label


# ---- contextual inputs: joint DP (per-round contexts) and shuffle DP (one batch of users) -----------------

def _context_doc(doc: object, src: str, what: str) -> dict[str, object]:
    if not isinstance(doc, dict):
        raise DPAuditError(f"{src}: a pair file holds one JSON object with keys format, d, d_prime and contexts, got a "
                           f"{type(doc).__name__}.")
    extra = [k for k in doc if k not in _CONTEXT_KEYS]
    if extra:
        raise DPAuditError(f"{src}: unknown key {extra[0]!r}; a {PAIR_FORMAT} file for {what} has the keys "
                           f"{', '.join(_CONTEXT_KEYS)} (contexts_prime and label optional).")
    if doc.get("format") != PAIR_FORMAT:
        raise DPAuditError(f"{src}: format must be {PAIR_FORMAT!r}, got {doc.get('format')!r}.")
    for key in ("d", "d_prime", "contexts"):
        if key not in doc:
            raise DPAuditError(f"{src}: the key {key!r} is missing; a pair for {what} gives the rewards d and d_prime "
                               "and the contexts (contexts_prime when they change too).")
    return doc


def _one_difference(diff: np.ndarray, src: str, unit: str, last_allowed: int) -> int:
    rows = np.flatnonzero(diff)
    if rows.size == 0:
        raise DPAuditError(f"{src}: the two inputs are identical; neighbouring inputs differ in exactly one {unit}.")
    if rows.size > 1:
        raise DPAuditError(f"{src}: the two inputs differ in {unit}s {rows[0]} and {rows[1]}"
                           f"{f' (and {rows.size - 2} more)' if rows.size > 2 else ''}; neighbouring inputs differ in "
                           f"exactly one {unit}.")
    j = int(rows[0])
    if j > last_allowed:
        raise DPAuditError(f"{src}: the inputs differ only in the last {unit} ({j}); the canary must lie in "
                           f"0..{last_allowed}, since no action follows it.")
    return j


def load_joint_pair(path: str | os.PathLike[str], *, n_arms: int, dim: int) -> JointPair:
    """A joint-DP pair from a ``dpaudit.pair/1`` file: ``d``, ``d_prime`` (T x K rewards), ``contexts``
    (T x K x d, round t's features) and optionally ``contexts_prime``; the two inputs differ in exactly one
    round t <= T - 2 (its contexts, its rewards or both), the history before it and the future fixed."""
    from .base import ContextInput
    from .joint import JointPair

    raw, src = read_pair_file(path)
    K, d = check_int("n_arms", n_arms, minimum=1), check_int("dim", dim, minimum=1)
    doc = _context_doc(raw, src, "--protocol joint")
    R0, R1 = _numbers(doc["d"], "d", 2, src), _numbers(doc["d_prime"], "d_prime", 2, src)
    X0 = _numbers(doc["contexts"], "contexts", 3, src)
    X1 = X0 if doc.get("contexts_prime") is None else _numbers(doc["contexts_prime"], "contexts_prime", 3, src)
    T = R0.shape[0]
    for key, arr, shape in (("d", R0, (T, K)), ("d_prime", R1, (T, K)), ("contexts", X0, (T, K, d)),
                            ("contexts_prime", X1, (T, K, d))):
        if arr.shape != shape:
            raise DPAuditError(f"{src}: {key} has shape {list(arr.shape)}; under --protocol joint it must be "
                               f"{list(shape)} (T = {T} rounds, K = {K} arms, d = {d} the policy's dim).")
    if T < 3:
        raise DPAuditError(f"{src}: the inputs have {T} rounds; a joint pair needs T >= 3 so that actions follow the "
                           "canary round.")
    diff = np.any(R0 != R1, axis=1) | np.any(X0 != X1, axis=(1, 2))
    j = _one_difference(diff, src, "round", T - 2)
    label = _label(doc, src)
    return JointPair(ContextInput(X0, R0), ContextInput(X1, R1), j, label or f"user pair from {src}, canary round {j}")


def load_shuffle_pair(path: str | os.PathLike[str], *, batch: int, dim: int, reward_range: RewardRange | None = None,
                      max_norm: float | None = None) -> ShufflePair:
    """A shuffle-DP pair from a ``dpaudit.pair/1`` file: one batch of ``batch`` users, ``d`` and ``d_prime``
    their rewards (lists of B numbers), ``contexts`` the contexts they played (B x d) and optionally
    ``contexts_prime``; the two batches differ in exactly one user. ``reward_range`` (low, high) and
    ``max_norm`` (the largest context norm), when given, are what the policy's randomizers are calibrated
    for: a reward or a context outside them is refused naming the user and the numbers."""
    from .base import ContextInput
    from .shuffle import ShufflePair

    raw, src = read_pair_file(path)
    B, d = check_int("batch", batch, minimum=2), check_int("dim", dim, minimum=1)
    doc = _context_doc(raw, src, "--protocol shuffle")
    r0, r1 = _numbers(doc["d"], "d", 1, src), _numbers(doc["d_prime"], "d_prime", 1, src)
    X0 = _numbers(doc["contexts"], "contexts", 2, src)
    X1 = X0 if doc.get("contexts_prime") is None else _numbers(doc["contexts_prime"], "contexts_prime", 2, src)
    for key, arr, shape in (("d", r0, (B,)), ("d_prime", r1, (B,)), ("contexts", X0, (B, d)),
                            ("contexts_prime", X1, (B, d))):
        if arr.shape != shape:
            raise DPAuditError(f"{src}: {key} has shape {list(arr.shape)}; under --protocol shuffle it must be "
                               f"{list(shape)} (the policy's first batch of B = {B} users, d = {d}).")
    _inside(src, (("d", r0), ("d_prime", r1)), (("contexts", X0), ("contexts_prime", X1)), reward_range, max_norm)
    pos = _one_difference((r0 != r1) | np.any(X0 != X1, axis=1), src, "user", B - 1)
    label = _label(doc, src)
    return ShufflePair(ContextInput(X0[:, None, :], r0[:, None]), ContextInput(X1[:, None, :], r1[:, None]), pos,
                       label or f"user pair from {src}, user {pos}", "the batch given in the pair file")


def _inside(src: str, rewards: Sequence[tuple[str, np.ndarray]], contexts: Sequence[tuple[str, np.ndarray]],
            reward_range: RewardRange | None, max_norm: float | None) -> None:
    """Refuse a user's reward outside ``reward_range`` or context of norm above ``max_norm``, naming the numbers."""
    try:
        rr = None if reward_range is None else np.asarray(reward_range, dtype=float)
    except (TypeError, ValueError):
        rr = None
    if rr is not None and rr.shape == (2,):  # one range for every user (a per-arm range is the policy's to check)
        lo, hi = float(rr[0]), float(rr[1])
        for key, r in rewards:
            bad = np.flatnonzero((r < lo) | (r > hi))
            if bad.size:
                i = int(bad[0])
                raise DPAuditError(f"{src}: {key}[{i}] = {r[i]:g} lies outside the policy's reward range "
                                   f"[{lo:g}, {hi:g}] (user {i}).")
    if max_norm is not None:
        for key, X in contexts:
            norms = np.linalg.norm(X, axis=1)
            bad = np.flatnonzero(norms > max_norm * (1 + 1e-9))
            if bad.size:
                i = int(bad[0])
                raise DPAuditError(f"{src}: {key}[{i}] has norm {norms[i]:.6g}; contexts must lie in the ball of "
                                   f"radius {max_norm:g} that the policy's randomizers are calibrated for (user {i}).")
