"""The old names dpaudit still accepts for one release, and the warning each one gives.

This module is the one place the old names appear, so that a reader sees exactly what is kept for
compatibility. Each one works as its new name does, warns, and goes in the next release:

=========================================  =========================================  ===============================
what                                       old                                        new
=========================================  =========================================  ===============================
bundled finite spec                        ``seed001-counterexample``                 ``table-vs-view-counterexample``
``ldp-ucb``'s ``calibration``              ``"seed003"``, ``"seed000"``               ``"zheng-2020"``,
                                                                                      ``"gaussian-channel"``
function of :mod:`dpaudit.accountants`     ``lint_seed000_channel``                   ``lint_gaussian_channel``
constructors                               ``TwoPointChannel.seed003``,               ``TwoPointChannel.zheng_2020``,
                                           ``GaussianChannel.seed003``,               ``GaussianChannel.zheng_2020``,
                                           ``GaussianChannel.seed000``,               ``GaussianChannel.gaussian_channel``,
                                           ``LinearStatsChannel.seed003``,            ``LinearStatsChannel.zheng_2020``,
                                           ``GLOCChannel.seed003``                    ``GLOCChannel.zheng_2020``
=========================================  =========================================  ===============================

Python code gets a :class:`DPAuditDeprecationWarning` (a :class:`DeprecationWarning`); the command
line prints one line on stderr instead (:func:`notes_on_stderr`). Both say "X is deprecated and will be
removed in the next release; use Y."

Two renames need no warning. An output key cannot warn, so it is documented instead (docs/reference.md,
"Renamed names"), and the object's format version says which key it has: :data:`OUTPUT_KEYS`. The
calibration tag a local channel carries for the calibration lint
(:func:`dpaudit.accounting.calibration_lints`) is read by dpaudit only; :data:`CALIBRATION_TAGS` reads
the old tags as the new ones.

A leaf module: it imports nothing from dpaudit, so every layer may use it.
"""

from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager
from typing import Iterator, Mapping, TextIO, TypeVar, overload

__all__ = ["DPAuditDeprecationWarning", "SPECS", "CALIBRATIONS", "ATTRIBUTES", "METHODS", "OUTPUT_KEYS",
           "CALIBRATION_TAGS", "warn", "spec", "calibration", "attribute", "add_aliases", "notes_on_stderr"]


class DPAuditDeprecationWarning(DeprecationWarning):
    """A name dpaudit still accepts for one release; the message names its replacement."""


#: bundled finite specs: old name -> new name
SPECS: Mapping[str, str] = {"seed001-counterexample": "table-vs-view-counterexample"}
#: the ``calibration`` parameter of ``ldp-ucb``: old value -> new value
CALIBRATIONS: Mapping[str, str] = {"seed003": "zheng-2020", "seed000": "gaussian-channel"}
#: module attributes: (module, old name) -> new name in the same module
ATTRIBUTES: Mapping[tuple[str, str], str] = {
    ("dpaudit.accountants", "lint_seed000_channel"): "lint_gaussian_channel",
    ("dpaudit.accountants.gaussian", "lint_seed000_channel"): "lint_gaussian_channel",
}
#: class attributes (constructors): class name -> {old name: new name}, installed by :func:`add_aliases`
METHODS: Mapping[str, Mapping[str, str]] = {
    "TwoPointChannel": {"seed003": "zheng_2020"},
    "GaussianChannel": {"seed003": "zheng_2020", "seed000": "gaussian_channel"},
    "LinearStatsChannel": {"seed003": "zheng_2020"},
    "GLOCChannel": {"seed003": "zheng_2020"},
}
#: output keys renamed without an alias: command -> (old key, new key, the format that has the new key)
OUTPUT_KEYS: Mapping[str, tuple[str, str, str]] = {
    "dpaudit account lint --json": ("seed000", "gaussian_channel", "dpaudit.account.lint/2")}
#: a local channel's ``calibration`` tag (rule, eps, delta): old rule -> new rule
CALIBRATION_TAGS: Mapping[str, str] = {"seed003": "zheng-2020", "seed000": "gaussian-channel",
                                       "seed003-alg5": "zheng-2020-alg5", "seed003-alg3": "zheng-2020-alg3"}


def warn(old: str, new: str, stacklevel: int = 2) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (both as the user writes them); ``stacklevel``
    as :func:`warnings.warn` counts it from the caller of this function."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}.",
                  DPAuditDeprecationWarning, stacklevel=stacklevel + 1)


_T = TypeVar("_T")


@overload
def spec(name: str) -> str: ...
@overload
def spec(name: _T) -> _T: ...
def spec(name: object) -> object:
    """``name`` itself, or for an old bundled spec name its new name (with the warning)."""
    if isinstance(name, str) and name in SPECS:
        warn(f"the bundled spec name {name!r}", repr(SPECS[name]), stacklevel=3)  # the public function's caller
        return SPECS[name]
    return name


@overload
def calibration(value: str) -> str: ...
@overload
def calibration(value: _T) -> _T: ...
def calibration(value: object) -> object:
    """``value`` itself, or for an old value of ``ldp-ucb``'s ``calibration`` its new value (with the warning)."""
    if isinstance(value, str) and value in CALIBRATIONS:
        warn(f"calibration={value!r}", f"calibration={CALIBRATIONS[value]!r}", stacklevel=3)
        return CALIBRATIONS[value]
    return value


def attribute(module: str, name: str, namespace: Mapping[str, object]) -> object:
    """A module's ``__getattr__``: the value of an old attribute name (with the warning), else AttributeError."""
    new = ATTRIBUTES.get((module, name))
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warn(f"{module}.{name}", f"{module}.{new}", stacklevel=3)  # the module's __getattr__, then the importer
    return namespace[new]


class _Alias:
    """A class attribute that warns and gives the attribute it was renamed to (bound as that one is)."""

    def __init__(self, owner: str, old: str, new: str) -> None:
        self.owner, self.old, self.new = owner, old, new

    def __get__(self, obj: object, objtype: type | None = None) -> object:
        warn(f"{self.owner}.{self.old}", f"{self.owner}.{self.new}")
        return getattr(obj if obj is not None else objtype, self.new)


def add_aliases(cls: type) -> type:
    """Give ``cls`` its old attribute names of :data:`METHODS`, each warning and giving the new one."""
    for old, new in METHODS.get(cls.__name__, {}).items():
        setattr(cls, old, _Alias(cls.__name__, old, new))
    return cls


@contextmanager
def notes_on_stderr() -> Iterator[None]:
    """Within: each deprecated name used is one line on stderr, "dpaudit: note: ...", once per message
    (the command line's form of the warning); other warnings are shown as Python shows them."""
    noted: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always", DPAuditDeprecationWarning)
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if issubclass(category, DPAuditDeprecationWarning):
                if str(message) not in noted:
                    noted.add(str(message))
                    print(f"dpaudit: note: {message}", file=sys.stderr)
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield
