"""Claims given as text: ``--claim "pure:eps=1"`` as a Guarantee (:func:`parse_claim`, :data:`CLAIM_FORMS`)."""

from __future__ import annotations

import math

from dpaudit.accountants import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpaudit.errors import DPAuditError

__all__ = ["CLAIM_FORMS", "parse_claim"]

#: the accepted forms of ``--claim``, quoted in every error message about one
CLAIM_FORMS = '"pure:eps=E", "zcdp:rho=R", "approx:eps=E,delta=D" or "rdp:alpha=A,eps=E"'

_CLAIM_KEYS: dict[str, tuple[str, ...]] = {
    "pure": ("eps",),
    "zcdp": ("rho",),
    "approx": ("eps", "delta"),
    "rdp": ("alpha", "eps"),
}
_KEY_ALIASES = {"epsilon": "eps", "e": "eps"}


def parse_claim(text: str) -> Guarantee:
    """Parse a claim written as ``kind:key=value[,key=value]`` into a Guarantee.

    ``pure:eps=1`` -> ``PureDP(1)``; ``zcdp:rho=0.1`` -> ``ZCDP(0.1)``; ``approx:eps=1,delta=1e-5``
    -> ``ApproxDP(1, 1e-5)``; ``rdp:alpha=2,eps=0.5`` -> ``RDP.point(2, 0.5)`` ((alpha, eps)-RDP at
    one order). Kinds and keys are case-insensitive, ``epsilon`` may be written for ``eps``, and
    spaces are ignored. Values must be finite: eps and rho >= 0, delta in [0, 1), alpha > 1. Any
    other text raises :class:`DPAuditError` with one sentence listing the accepted forms.
    """
    if not isinstance(text, str):
        raise DPAuditError(f"a claim must be text such as {CLAIM_FORMS}, got {text!r}.")
    kind, sep, rest = text.replace(" ", "").partition(":")
    kind = kind.lower()
    if not sep or kind not in _CLAIM_KEYS:
        raise DPAuditError(f"claim {text!r} is not one of the accepted forms {CLAIM_FORMS}.")
    values: dict[str, float] = {}
    for item in rest.split(",") if rest else []:
        key, eq, raw = item.partition("=")
        key = _KEY_ALIASES.get(key.lower(), key.lower())
        if not eq or key not in _CLAIM_KEYS[kind] or key in values:
            raise DPAuditError(f"claim {text!r} is not one of the accepted forms {CLAIM_FORMS}.")
        try:
            v = float(raw)
        except ValueError:
            raise DPAuditError(f"claim {text!r}: {key}={raw!r} is not a number; the accepted forms are "
                               f"{CLAIM_FORMS}.") from None
        if not math.isfinite(v) or v < 0:
            raise DPAuditError(f"claim {text!r}: {key} must be a finite non-negative number, got {raw!r}.")
        values[key] = v
    missing = [k for k in _CLAIM_KEYS[kind] if k not in values]
    if missing:
        raise DPAuditError(f"claim {text!r} lacks {', '.join(missing)}; the accepted forms are {CLAIM_FORMS}.")
    if kind == "pure":
        return PureDP(values["eps"])
    if kind == "zcdp":
        return ZCDP(values["rho"])
    if kind == "approx":
        return ApproxDP(values["eps"], values["delta"])  # checks delta in [0, 1)
    return RDP.point(values["alpha"], values["eps"])  # checks alpha > 1
