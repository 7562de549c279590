"""The horizon under any name: the constructor parameter that receives the audit's T (:func:`horizon_parameter`,
:data:`HORIZON_NAMES`), and the value a class's parameters give it."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from collections.abc import Callable
from numbers import Integral
from typing import TypeAlias

from dpaudit.errors import DPAuditError

__all__ = ["HORIZON_NAMES", "Maker", "horizon_parameter", "horizon_value", "init_parameters"]

#: what builds the code an adapter audits from its parameters: a class, or a factory function returning an
#: instance (called with keyword arguments)
Maker: TypeAlias = Callable[..., object]

#: constructor parameter names that receive the audit's horizon T (matched case-sensitively)
HORIZON_NAMES = ("horizon", "T", "n", "iters", "n_iters", "time_horizon", "n_rounds", "rounds",
                 "num_rounds", "max_steps", "budget", "steps", "n_steps")


def init_parameters(cls: Maker) -> dict[str, inspect.Parameter]:
    """The keyword parameters of a class's constructor, or of a factory function."""
    try:
        sig = inspect.signature(cls.__init__ if inspect.isclass(cls) else cls)
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _could_be_count(p: inspect.Parameter) -> bool:
    """False when the annotation or default says the parameter is not an integer count (``budget=1.0``
    is a privacy budget, not a horizon)."""
    ann = p.annotation
    if ann is not inspect.Parameter.empty:
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
        if "int" not in str(text).lower():
            return False
    d = p.default
    if d is not inspect.Parameter.empty and d is not None:
        return isinstance(d, Integral) and not isinstance(d, bool)
    return True


def horizon_parameter(cls: Maker, name: str | None = None) -> str | None:
    """The constructor parameter of ``cls`` that receives the audit's horizon T, or None.

    Looks for the names of :data:`HORIZON_NAMES` (case-sensitive: ``T`` but not ``t``) among the
    keyword parameters of ``cls.__init__``, skipping any whose annotation or default says it is not
    an integer (``budget: float`` or ``budget=1.0`` is a privacy budget). ``name`` forces a choice
    (it must be a constructor parameter). Two or more candidates are refused in one sentence, since
    guessing wrong would silently audit another horizon.
    """
    params = init_parameters(cls)
    who = getattr(cls, "__name__", repr(cls))
    if name is not None:
        if name not in params:
            raise DPAuditError(f"{who} has no constructor parameter {name!r} to receive the horizon; its "
                               f"parameters are: {', '.join(params) or 'none'}.")
        return name
    found = [n for n in HORIZON_NAMES if n in params and _could_be_count(params[n])]
    if len(found) > 1:
        raise DPAuditError(f"{who} has several constructor parameters that could be the horizon "
                           f"({', '.join(found)}); say which one receives T.")
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------


def horizon_value(cls: Maker, kwargs: Mapping[str, object]) -> int | None:
    """The horizon T that ``kwargs`` give ``cls`` through its horizon parameter (an int >= 1), or None
    (no such parameter, several candidates, or no usable value)."""
    try:
        hp = horizon_parameter(cls)
    except DPAuditError:
        return None
    v = kwargs.get(hp) if hp else None
    return int(v) if isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 else None
