"""The adapter's options as text: ``--adapter per-run[:KEY=VALUE,...]`` (:func:`parse_adapter`,
:data:`ADAPTER_OPTIONS`), refused in one sentence before anything is built."""

from __future__ import annotations

from typing import Any

from dpaudit.adapters.arguments import parse_arg_map
from dpaudit.errors import DPAuditError

__all__ = ["ADAPTER_OPTIONS", "LIST_OPTIONS", "ADAPTER_SYNTAX", "parse_adapter"]

#: options of ``--adapter per-run:KEY=VALUE,...`` and the PerRun argument each sets
ADAPTER_OPTIONS = {"select": "select", "update": "update", "step": "step", "update_args": "update_args",
                   "step_args": "step_args", "first_round": "first_round", "globals": "globals_mode",
                   "n_arms": "n_arms", "horizon": "horizon_name", "randomizer": "randomizer", "domain": "domain"}
#: options whose value is a comma-separated list (the items after ``KEY=`` without an ``=`` continue it)
LIST_OPTIONS = ("update_args", "step_args", "domain")
ADAPTER_SYNTAX = ("per-run:select=NAME,update=NAME,update_args=t,arm,reward,step=NAME,step_args=reward,arm,"
                  "first_round=1,n_arms=K,horizon=NAME,globals=off|redirect|swap,randomizer=NAME,domain=LOW,HIGH")


def parse_adapter(text: str) -> tuple[str, dict[str, Any]]:
    """``"per-run"`` or ``"per-run:KEY=VALUE,..."`` -> (adapter name, PerRun options).

    Keys (:data:`ADAPTER_OPTIONS`): ``select``, ``update``, ``step`` (method names); ``update_args``,
    ``step_args`` (the feedback or step call's arguments: the tokens arm, reward and t in the
    method's order, ``NAME:TOKEN`` for a keyword; ``update_args=t,arm,reward``); ``first_round``
    (1: the class counts rounds from 1); ``n_arms``; ``horizon`` (the constructor or factory
    parameter that receives the horizon); ``globals`` (off, redirect or swap); ``randomizer`` (the
    method that turns a user's datum into her message: a local-DP class) and ``domain`` (LOW,HIGH of
    a user's datum). A list value goes on over the commas that follow it up to the next ``KEY=``:
    ``per-run:update_args=t,arm,reward,first_round=1``."""
    name, _, rest = str(text).partition(":")
    if name.strip() != "per-run":
        raise DPAuditError(f"unknown adapter {text!r}; the one adapter is 'per-run' (a one-run class run as N copies), "
                           f"optionally with options as in {ADAPTER_SYNTAX}.")
    options: dict[str, Any] = {}
    last = None
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep and last in LIST_OPTIONS:
            options[ADAPTER_OPTIONS[last]].append(item)
            continue
        if not sep or key not in ADAPTER_OPTIONS or not value:
            raise DPAuditError(f"adapter option {item!r} must be KEY=VALUE with KEY one of "
                               f"{', '.join(ADAPTER_OPTIONS)} (a list value such as update_args=t,arm,reward goes on "
                               "over the commas up to the next KEY=).")
        if ADAPTER_OPTIONS[key] in options:
            raise DPAuditError(f"adapter option {key} is given twice.")
        if key in ("first_round", "n_arms"):
            try:
                value = int(value)
            except ValueError:
                raise DPAuditError(f"adapter option {key} must be an integer, got {value!r}.") from None
        options[ADAPTER_OPTIONS[key]] = [value] if key in LIST_OPTIONS else value
        last = key
    for key in LIST_OPTIONS:
        opt = ADAPTER_OPTIONS[key]
        if opt in options:
            if key == "domain":
                try:
                    options[opt] = tuple(float(v) for v in options[opt])
                except ValueError:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(options[opt])!r}.") from None
                if len(options[opt]) != 2:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(str(v) for v in options[opt])!r}.")
            else:
                options[opt] = ",".join(options[opt])
                parse_arg_map(options[opt], key)  # refused here, in one sentence, before anything is built
    return "per-run", options
