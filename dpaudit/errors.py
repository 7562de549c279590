"""The one error type dpaudit raises for bad input, and the checks that raise it.

Every message is one sentence that names the offending value and what is allowed, so the CLI can
print it as is and exit with status 2. This module depends on nothing else in dpaudit: the
accountants are the bottom of the dependency graph and the rest of the package imports from here.
"""

from __future__ import annotations

import math
from numbers import Real

__all__ = [
    "shorten",
    "DPAuditError",
    "check_positive",
    "check_nonnegative",
    "check_delta",
    "check_order",
    "check_int",
]


class DPAuditError(ValueError):
    """Bad input to dpaudit: the message says which value and what is allowed."""


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DPAuditError(f"{name} must be a real number, got {value!r}.")
    v = float(value)
    if math.isnan(v):
        raise DPAuditError(f"{name} must be a number, got NaN.")
    return v


def check_positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 < value`` (``< inf`` unless allowed)."""
    v = _as_float(name, value)
    if not v > 0 or (math.isinf(v) and not allow_inf):
        allowed = "a positive number" + ("" if allow_inf else " (finite)")
        raise DPAuditError(f"{name} must be {allowed}, got {value!r}.")
    return v


def check_nonnegative(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 <= value``."""
    v = _as_float(name, value)
    if v < 0 or (math.isinf(v) and not allow_inf):
        raise DPAuditError(f"{name} must be a non-negative finite number, got {value!r}.")
    return v


def check_delta(value: object, name: str = "delta", *, allow_zero: bool = False) -> float:
    """Return ``value`` after checking it lies in (0, 1), or [0, 1) with ``allow_zero``."""
    v = _as_float(name, value)
    lo_ok = v >= 0 if allow_zero else v > 0
    if not (lo_ok and v < 1):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise DPAuditError(f"{name} must lie in {interval}, got {value!r}.")
    return v


def check_order(value: object, name: str = "alpha", *, finite_for: str | None = None) -> float:
    """Return a Rényi order after checking ``alpha > 1``; ``inf`` is allowed unless ``finite_for``
    names the policy that needs a finite order (a noise scale that grows with alpha)."""
    v = _as_float(name, value)
    if not v > 1:
        raise DPAuditError(f"{name} (a Rényi order) must be greater than 1, got {value!r}.")
    if finite_for is not None and math.isinf(v):
        raise DPAuditError(f"{name} must be a finite Rényi order > 1 for {finite_for} (its noise scale grows with "
                           f"{name}), got inf.")
    return v


def check_int(name: str, value: object, *, minimum: int) -> int:
    """Return ``value`` as an int after checking it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
        isinstance(value, Real) and float(value).is_integer()
    ):
        raise DPAuditError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    v = int(value)  # type: ignore[arg-type]
    if v < minimum:
        raise DPAuditError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return v


def shorten(value: object, limit: int = 80, *, as_text: bool = False) -> str:
    """``value`` for an error message: its repr (its text with ``as_text``) on one line, cut to ``limit``
    characters with "..." so a huge or multi-line value cannot swamp the sentence."""
    text = " ".join((str(value) if as_text else repr(value)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
