"""Named policies, plug-in loading, and ``--param key=value`` parsing.

``get_policy_class("adac-ucb")`` finds a registered policy; ``load_policy_class`` also accepts a
plug-in given as ``path/to/file.py:ClassName`` or ``package.module:ClassName`` (DESIGN.md, "Policy"),
and ``make_policy`` builds an instance from string parameters typed by the constructor's signature.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Mapping, get_type_hints

from dpaudit.errors import DPAuditError
from dpaudit.sandbox import guard, is_plugin_spec, wrap_plugin

if TYPE_CHECKING:
    from dpaudit.policies.base import PolicyLike

__all__ = [
    "NOTIONS",
    "NOTION_NAMES",
    "notion_of",
    "plugin_label",
    "entry_of",
    "PolicyEntry",
    "register",
    "registered",
    "get_policy_class",
    "load_policy_class",
    "parse_params",
    "coerce_params",
    "signature_target",
    "make_policy",
]


#: the notions of privacy a policy's claim can be about, by the protocol that audits each
#: (DESIGN.md, "Input data and protocols")
NOTIONS = ("table", "view", "interactive", "local", "joint", "shuffle")
#: how a notion is named in a sentence ("a joint-DP claim")
NOTION_NAMES = {"table": "Table-DP", "view": "View-DP", "interactive": "Interactive-DP", "local": "local-DP",
                "joint": "joint-DP", "shuffle": "shuffle-DP"}


def notion_of(policy: object) -> str | None:
    """The notion a policy's claim is about: its class attribute ``notion`` (one of :data:`NOTIONS`), or
    None when it names none (a plug-in without the attribute; the audit then defaults to table).

    ``policy`` is a class or an instance; a value outside :data:`NOTIONS` is refused in one sentence."""
    value = getattr(policy, "notion", None)
    if value is None:
        return None
    if not isinstance(value, str) or value not in NOTIONS:
        who = getattr(policy, "__qualname__", type(policy).__qualname__)
        raise DPAuditError(f"{who}.notion must be one of {', '.join(map(repr, NOTIONS))} (the protocol its claim is "
                           f"about), got {value!r}.")
    return value


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy. ``summary`` is its docstring's first line, which names papers by authors and
    year: ``dpaudit list`` shows it. ``notion`` is the protocol its claim is
    about (its class's ``notion``): the protocol ``dpaudit check policy`` audits when none is given."""

    name: str
    cls: type
    family: str
    summary: str
    mutant: bool = False
    notion: str = "table"


_REGISTRY: dict[str, PolicyEntry] = {}


def register(name: str, *, family: str, mutant: bool = False) -> Callable[[type], type]:
    """Class decorator: register a policy under a short name (``adac-ucb``)."""

    def deco(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name].cls is not cls:
            raise RuntimeError(f"policy name {name!r} is registered twice")
        doc = (cls.__doc__ or "").strip().splitlines()
        notion = notion_of(cls)
        if notion is None:
            raise RuntimeError(f"registered policy {name!r} names no notion (a class attribute notion = 'table', ...)")
        _REGISTRY[name] = PolicyEntry(name, cls, family, doc[0] if doc else "", mutant, notion)
        cls.name = name
        return cls

    return deco


def _ensure_loaded() -> None:
    # Importing the package registers every built-in policy.
    importlib.import_module("dpaudit.policies")


def registered(*, mutants: bool = False) -> list[PolicyEntry]:
    """Registered policies (mutants only when asked), sorted by family then name."""
    _ensure_loaded()
    return sorted((e for e in _REGISTRY.values() if e.mutant == mutants), key=lambda e: (e.family, e.name))


def entry_of(key: "str | type") -> PolicyEntry | None:
    """The registry entry of a registered name or class (None for anything not registered)."""
    _ensure_loaded()
    if isinstance(key, str):
        return _REGISTRY.get(key)
    return next((e for e in _REGISTRY.values() if e.cls is key), None)


def get_policy_class(name: str) -> type:
    _ensure_loaded()
    if name in _REGISTRY:
        return _REGISTRY[name].cls
    close = difflib.get_close_matches(name, list(_REGISTRY), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise DPAuditError(
        f"unknown policy {name!r}.{hint} Run `dpaudit list` for the registered names, or give a plug-in "
        "as path/to/file.py:ClassName or package.module:ClassName."
    )


def load_policy_class(spec: str, *, contract: bool = True) -> type:
    """Resolve a registered name, ``file.py:Class`` or ``package.module:Class`` to a class.

    ``contract=False`` skips the check for reset/act/observe (a one-run class for
    :class:`dpaudit.adapters.PerRun`, which also accepts ``file.py:function``: a factory returning an
    instance)."""
    if ":" not in spec:
        return get_policy_class(spec)
    target, _, attr = spec.rpartition(":")
    if not attr.isidentifier():
        raise DPAuditError(f"plug-in {spec!r} must end in ':ClassName' with a valid Python name, got {attr!r}.")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        if not path.is_file():
            raise DPAuditError(f"plug-in file {target!r} does not exist.")
        mod_name = f"dpaudit_plugin_{abs(hash(str(path.resolve())))}"
        loaded = sys.modules.get(mod_name)
        if loaded is not None and getattr(loaded, "__dpaudit_mtime__", None) == path.stat().st_mtime_ns:
            return _plugin_class(loaded, target, attr, contract)  # imported once per process (its prints, its cost)
        spec_obj = importlib.util.spec_from_file_location(mod_name, path)
        if spec_obj is None or spec_obj.loader is None:
            raise DPAuditError(f"plug-in file {target!r} cannot be loaded as a Python module.")
        module = importlib.util.module_from_spec(spec_obj)
        sys.modules[mod_name] = module
        try:
            with guard(spec, "import"):  # exits, exceptions and prints of the user's module (dpaudit.sandbox)
                spec_obj.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(mod_name, None)
            raise
    else:
        with guard(spec, "import"):
            try:
                module = importlib.import_module(target)
            except ImportError as exc:
                raise DPAuditError(f"plug-in module {target!r} cannot be imported: {exc}.") from exc
    if target.endswith(".py") or "/" in target or "\\" in target:
        module.__dpaudit_mtime__ = Path(target).stat().st_mtime_ns
        module.__dpaudit_source__ = target  # what the user wrote: how the plug-in is named to her
    return _plugin_class(module, target, attr, contract)


def plugin_label(cls: object) -> str:
    """``module:Class`` of a class, with a plug-in file's module named as the user gave it
    (``path/to/file.py:MyPolicy``, not the internal module name dpaudit imported it under)."""
    module = sys.modules.get(getattr(cls, "__module__", ""), None)
    source = getattr(module, "__dpaudit_source__", None)
    qual = getattr(cls, "__qualname__", getattr(cls, "__name__", repr(cls)))
    return f"{source or getattr(cls, '__module__', '?')}:{qual}"


def _plugin_class(module: ModuleType, target: str, attr: str, contract: bool) -> type:
    cls = getattr(module, attr, None)
    if cls is None:
        names = [n for n, v in vars(module).items() if inspect.isclass(v) and not n.startswith("_")]
        raise DPAuditError(f"plug-in {target!r} has no class {attr!r}; it defines {', '.join(names) or 'no classes'}.")
    missing = [m for m in ("n_arms", "reset", "act", "observe") if not hasattr(cls, m) and m != "n_arms"]
    if missing and contract:
        raise DPAuditError(f"plug-in class {attr!r} lacks {', '.join(missing)}; a policy needs reset, act and observe "
                           "(a one-run class, with select_arm()/update(arm, reward) or the like, runs through "
                           "--adapter per-run).")
    return cls


def parse_params(items: list[str] | None) -> dict[str, str]:
    """``["rho=0.1", "arms=5"]`` -> ``{"rho": "0.1", "arms": "5"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise DPAuditError(f"--param {item!r} must have the form NAME=VALUE.")
        out[key.strip()] = value.strip()
    return out


def _convert(key: str, raw: object, kind: object, widen: str | None = None, notes: list[str] | None = None) -> object:
    """``raw`` typed as ``kind``. ``widen`` (set when ``kind`` is int only because of an int default,
    with no annotation saying so): the owner's name; a numeric value that is not an integer is then
    passed as a float, with a note, instead of being refused."""
    if not isinstance(raw, str):
        return raw
    origin = getattr(kind, "__origin__", None)
    if kind is bool:
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise DPAuditError(f"parameter {key}={raw!r} must be true or false.")
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            pass
        try:
            value = float(raw)
        except ValueError:
            raise DPAuditError(f"parameter {key}={raw!r} must be " + ("a number." if widen else "an integer.")) from None
        if not math.isfinite(value):
            raise DPAuditError(f"parameter {key}={raw!r} must be a finite number.")
        if value.is_integer():
            return int(value)  # "2.0" for an int
        if widen is None:
            raise DPAuditError(f"parameter {key}={raw!r} must be an integer (its annotation says int).")
        if notes is not None:
            notes.append(f"--param {key}={raw} is not an integer while {widen}'s default for {key} is an integer and "
                         f"no annotation says int, so it was passed as the float {value!r}.")
        return value
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise DPAuditError(f"parameter {key}={raw!r} must be a number.") from None
    if kind in (list, tuple) or origin in (list, tuple):
        parts = [p for p in raw.replace(";", ",").split(",") if p.strip()]
        try:
            return [float(p) for p in parts]
        except ValueError:
            raise DPAuditError(f"parameter {key}={raw!r} must be a comma-separated list of numbers.") from None
    if kind is str or kind is inspect.Parameter.empty:
        for conv in (int, float):
            try:
                return conv(raw) if kind is not str else raw
            except ValueError:
                continue
        return raw
    return raw


def signature_target(target: Callable[..., object]) -> Callable[..., object]:
    """What to read the parameters of: a class's ``__init__``, or a factory function itself."""
    return target.__init__ if inspect.isclass(target) else target


def coerce_params(cls: Callable[..., object], raw: Mapping[str, object],
                  notes: list[str] | None = None) -> dict[str, object]:
    """Type string parameters by the signature of ``cls.__init__`` (or of ``cls`` itself, a factory
    function returning an instance): by the annotation, else by the default's type; refuse unknown keys.

    A value that is a number but not an integer, for a parameter whose default is an int and which no
    annotation calls int (``epsilon=0``), is passed as a float, and ``notes`` (if given) says so."""
    fn = signature_target(cls)
    who = getattr(cls, "__name__", repr(cls))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise DPAuditError(f"cannot read the parameters of {who}; give a class or a function with a Python "
                           "signature.") from None
    try:
        hints = get_type_hints(fn)
    except Exception:
        hints = {}
    params = {n: p for n, p in sig.parameters.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    accepts_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    out: dict[str, object] = {}
    for key, value in raw.items():
        if key not in params and not accepts_any:
            allowed = ", ".join(params) or "none"
            raise DPAuditError(f"{who} has no parameter {key!r}; its parameters are: {allowed}.")
        p = params.get(key)
        kind = hints.get(key, inspect.Parameter.empty)
        widen = None
        if kind is inspect.Parameter.empty and p is not None and p.default is not inspect.Parameter.empty and p.default is not None:
            kind = type(p.default)
            if kind is int:
                widen = who
        # Optional[X] / X | None -> X
        args = getattr(kind, "__args__", None)
        if args and type(None) in args and len(args) == 2:
            kind = next(a for a in args if a is not type(None))
        out[key] = _convert(key, value, kind, widen, notes)
    return out


def make_policy(spec: str, params: Mapping[str, object] | None = None) -> PolicyLike:
    """Build a policy from a registered name or plug-in spec and (string) parameters."""
    cls = load_policy_class(spec)
    kwargs = coerce_params(cls, params or {})
    plugin = is_plugin_spec(spec)
    try:
        if plugin:
            with guard(spec, "__init__"):
                try:
                    policy = cls(**kwargs)
                except TypeError as exc:  # usually the parameters, not the plug-in's code
                    raise DPAuditError(f"cannot build {spec!r} with parameters {kwargs}: {exc}.") from exc
        else:
            policy = cls(**kwargs)
    except DPAuditError:
        raise
    except TypeError as exc:
        raise DPAuditError(f"cannot build {spec!r} with parameters {kwargs}: {exc}.") from exc
    try:
        policy._params = dict(kwargs)
    except AttributeError:
        pass
    return wrap_plugin(policy, spec) if plugin else policy
