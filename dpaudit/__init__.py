"""dpaudit: audit differentially private bandit algorithms.

Two questions a reviewer asks of a private bandit policy: what does it *claim* (the accountants,
:mod:`dpaudit.accountants`) and what does it *leak* (the attacks, :mod:`dpaudit.attacks`). See
DESIGN.md for the map.

The public entry point is :func:`dpaudit.audit` (returns an :class:`dpaudit.Audit`)::

    import dpaudit
    result = dpaudit.audit("adac-ucb", params={"n_arms": 3, "rho": 0.5}, runs=5000)
    print(result.verdict, result.epsilon_claimed, result.epsilon_lower)

Every name below is imported on first use (module-level ``__getattr__``), so ``import dpaudit``
costs milliseconds and pays for numpy, scipy or matplotlib only when a function that
needs them is called.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dpaudit.version import __version__

#: public name -> module that defines it (imported lazily by :func:`__getattr__`)
_LAZY: dict[str, str] = {
    "audit": "dpaudit.api",
    "Audit": "dpaudit.api",
    "Verdict": "dpaudit.runner.findings",
    "describe": "dpaudit.api",
    "account": "dpaudit.api",
    "DPAuditError": "dpaudit.errors",
    "InternalError": "dpaudit.errors",
    "Guarantee": "dpaudit.accountants",
    "PureDP": "dpaudit.accountants",
    "ApproxDP": "dpaudit.accountants",
    "ZCDP": "dpaudit.accountants",
    "RDP": "dpaudit.accountants",
    "PolicySource": "dpaudit.policies.base",
    "PolicyLike": "dpaudit.policies.base",
}

__all__ = ["__version__", "audit", "Audit", "Verdict", "describe", "account", "DPAuditError", "InternalError",
           "Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP", "PolicySource",
           "PolicyLike"]  # written out for type checkers; tests/test_api.py checks it against _LAZY

_SUBMODULES = frozenset({"accountants", "attacks", "policies", "protocols", "mechanisms", "simulate", "engine",
                         "runner", "accounting", "report", "testing", "environments", "errors", "api", "reproduce"})

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    # "import X as X": an explicit re-export under mypy --strict (no_implicit_reexport)
    from dpaudit.accountants import RDP as RDP, ZCDP as ZCDP, ApproxDP as ApproxDP, Guarantee as Guarantee
    from dpaudit.accountants import PureDP as PureDP
    from dpaudit.api import Audit as Audit, account as account, audit as audit, describe as describe
    from dpaudit.errors import DPAuditError as DPAuditError, InternalError as InternalError
    from dpaudit.policies.base import PolicyLike as PolicyLike, PolicySource as PolicySource
    from dpaudit.runner.findings import Verdict as Verdict


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error there too

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            if name in _SUBMODULES:  # ``dpaudit.attacks`` after a bare ``import dpaudit``
                return importlib.import_module(f"dpaudit.{name}")
            raise AttributeError(f"module 'dpaudit' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later look-ups skip this function
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
