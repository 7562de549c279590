"""The adapters' options as text: ``--adapter per-run[:KEY=VALUE,...]`` (:func:`parse_adapter`,
:data:`ADAPTER_OPTIONS`), ``--adapter loop[:KEY=VALUE,...]`` (:data:`LOOP_OPTIONS`) and ``--adapter
process[:KEY=VALUE,...]`` (:data:`PROCESS_OPTIONS`), refused in one sentence before anything is built."""

from __future__ import annotations

from typing import TypeAlias, Union

from dpaudit.adapters.arguments import parse_arg_map
from dpaudit.errors import DPAuditError

__all__ = ["ADAPTER_OPTIONS", "LIST_OPTIONS", "ADAPTER_SYNTAX", "PROCESS_OPTIONS", "LOOP_OPTIONS", "OptionValue",
           "parse_adapter"]

#: an adapter option's value, parsed: a name or an argument mapping (text), a count (n_arms, first_round), a number
#: of seconds (timeout), on or off (batch), a domain's two ends
OptionValue: TypeAlias = Union[str, int, float, bool, tuple[float, ...]]

#: options of ``--adapter per-run:KEY=VALUE,...`` and the PerRun argument each sets
ADAPTER_OPTIONS = {"select": "select", "update": "update", "step": "step", "update_args": "update_args",
                   "step_args": "step_args", "first_round": "first_round", "globals": "globals_mode",
                   "n_arms": "n_arms", "horizon": "horizon_name", "randomizer": "randomizer", "domain": "domain"}
#: options whose value is a comma-separated list (the items after ``KEY=`` without an ``=`` continue it)
LIST_OPTIONS = ("update_args", "step_args", "domain")
ADAPTER_SYNTAX = ("per-run:select=NAME,update=NAME,update_args=t,arm,reward,step=NAME,step_args=reward,arm,"
                  "first_round=1,n_arms=K,horizon=NAME,globals=off|redirect|swap,randomizer=NAME,domain=LOW,HIGH")


#: options of ``--adapter process:KEY=VALUE,...`` (:class:`dpaudit.adapters.process.ProcessPolicy`)
PROCESS_OPTIONS = {"batch": "batch", "n_arms": "n_arms", "timeout": "timeout"}
#: options of ``--adapter loop:KEY=VALUE,...`` (:class:`dpaudit.adapters.loop.LoopPolicy`): the
#: environment's parameter or factory, its method names for the mapped calls, the number of arms,
#: the horizon's parameter, the seed's
LOOP_OPTIONS = {"env": "env", "pull": "pull", "step": "step", "reward": "reward", "get_reward": "get_reward",
                "n_arms": "n_arms", "horizon": "horizon_name", "globals": "globals_mode", "factory": "factory",
                "run": "run"}
PROCESS_SYNTAX = "process:batch=on|off,n_arms=K,timeout=SECONDS"
LOOP_SYNTAX = ("loop:env=NAME,pull=NAME,step=NAME,reward=NAME,get_reward=NAME,run=NAME,n_arms=K,horizon=NAME,"
               "factory=NAME,globals=off|redirect|swap")


def _parse_simple(kind: str, rest: str, keys: dict[str, str]) -> dict[str, OptionValue]:
    """``KEY=VALUE,...`` of the process and loop adapters (no list values), each checked."""
    options: dict[str, OptionValue] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or key not in keys or not text:
            raise DPAuditError(f"{kind} adapter option {item!r} must be KEY=VALUE with KEY one of {', '.join(keys)}.")
        if keys[key] in options:
            raise DPAuditError(f"{kind} adapter option {key} is given twice.")
        value: OptionValue = text
        if key == "n_arms":
            try:
                value = int(text)
            except ValueError:
                raise DPAuditError(f"{kind} adapter option n_arms must be an integer, got {text!r}.") from None
        elif key == "timeout":
            try:
                seconds = float(text)
            except ValueError:
                seconds = float("nan")
            if not 0 < seconds < float("inf"):
                raise DPAuditError(f"process adapter option timeout must be a number of seconds > 0, got "
                                   f"{text!r}.")
            value = seconds
        elif key == "batch":
            if text.lower() not in ("on", "off", "true", "false", "1", "0"):
                raise DPAuditError(f"process adapter option batch must be on or off, got {text!r}.")
            value = text.lower() in ("on", "true", "1")
        elif key == "globals" and text not in ("off", "redirect", "swap"):
            raise DPAuditError(f"loop adapter option globals must be off, redirect or swap, got {text!r}.")
        elif key not in ("globals",) and not text.isidentifier():
            raise DPAuditError(f"{kind} adapter option {key} must be a Python name, got {text!r}.")
        options[keys[key]] = value
    return options


def parse_adapter(text: str) -> tuple[str, dict[str, OptionValue]]:
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
    if name.strip() in ("process", "loop"):
        kind = name.strip()
        return kind, _parse_simple(kind, rest, PROCESS_OPTIONS if kind == "process" else LOOP_OPTIONS)
    if name.strip() != "per-run":
        raise DPAuditError(f"unknown adapter {text!r}; the adapters are 'per-run' (a one-run class run as N copies, "
                           f"options as in {ADAPTER_SYNTAX}), 'loop' (a function or class that runs its own loop: "
                           f"{LOOP_SYNTAX}) and 'process' (POLICY is a command speaking dpaudit.process/1: "
                           f"{PROCESS_SYNTAX}).")
    options: dict[str, OptionValue] = {}
    lists: dict[str, list[str]] = {}  # the items of each list value, in order
    last: str | None = None
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep and last is not None and last in LIST_OPTIONS:
            lists[ADAPTER_OPTIONS[last]].append(item)
            continue
        if not sep or key not in ADAPTER_OPTIONS or not text:
            raise DPAuditError(f"adapter option {item!r} must be KEY=VALUE with KEY one of "
                               f"{', '.join(ADAPTER_OPTIONS)} (a list value such as update_args=t,arm,reward goes on "
                               "over the commas up to the next KEY=).")
        opt = ADAPTER_OPTIONS[key]
        if opt in options:
            raise DPAuditError(f"adapter option {key} is given twice.")
        value: OptionValue = text
        if key in ("first_round", "n_arms"):
            try:
                value = int(text)
            except ValueError:
                raise DPAuditError(f"adapter option {key} must be an integer, got {text!r}.") from None
        if key in LIST_OPTIONS:
            lists[opt] = [text]
        options[opt] = value  # a list value's place: filled in below, once all its items are read
        last = key
    for key in LIST_OPTIONS:
        opt = ADAPTER_OPTIONS[key]
        if opt in lists:
            items = lists[opt]
            if key == "domain":
                try:
                    domain = tuple(float(v) for v in items)
                except ValueError:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(items)!r}.") from None
                if len(domain) != 2:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(str(v) for v in domain)!r}.")
                options[opt] = domain
            else:
                options[opt] = joined = ",".join(items)
                parse_arg_map(joined, key)  # refused here, in one sentence, before anything is built
    return "per-run", options
