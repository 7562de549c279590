"""The protocol sections of an audit's findings: typed while the plan runs, JSON once it concludes.

Each plan fills a dataclass of its own sections (:class:`dpaudit.runner.central.CentralSections`, and the
local, joint, shuffle and one-run plans' likewise), owned by the module that fills it. Its fields, in
order, are the keys of :attr:`dpaudit.runner.findings.Findings.extra` (the JSON of ``dpaudit check policy
--json``): :meth:`Sections.to_json` is the one place that turns them into that JSON, so the plans never
pass state to each other through an untyped dict, and the JSON keeps its keys and their order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Union

__all__ = ["JSONValue", "JSONObject", "Sections", "Arms", "json_value"]

#: JSON-ready data (numbers may still be numpy's or infinite: :meth:`Findings.to_dict` makes them JSON's)
JSONValue = Union[None, bool, int, float, str, list["JSONValue"], tuple["JSONValue", ...], dict[str, "JSONValue"]]
#: a JSON object
JSONObject = dict[str, JSONValue]


def json_value(value: object) -> JSONValue:
    """``value`` as JSON-ready data: a value with its own ``to_json()`` (or ``to_dict()``, as
    :class:`~dpaudit.attacks.result.AuditResult`) as that says, another dataclass as its fields in order, an
    enum as its value, lists, tuples and dicts item by item; anything else as it is."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json) and not isinstance(value, type):
        return to_json()  # type: ignore[no-any-return]
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()  # type: ignore[no-any-return]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_value(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Enum):
        return json_value(value.value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(json_value(v) for v in value)
    return value  # type: ignore[return-value]


@dataclass
class Sections:
    """A plan's sections of the findings: each field that is not None is one key of the JSON, in field
    order; a field that holds :class:`Sections` puts its own keys in its place (so one typed value, say the
    horizon's choice, can fill two adjacent keys). A plan that ran none of its steps has none."""

    def to_json(self) -> JSONObject:
        out: JSONObject = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Sections):
                out.update(value.to_json())
            else:
                out[f.name] = json_value(value)
        return out


@dataclass
class Arms(Sections):
    """What the policy plays: ``n_arms`` arms, or (a BCO policy) points of ``action_space``, when the JSON
    holds ``n_arms`` as null beside the action space."""

    n_arms: int | None = None
    action_space: str | None = None

    def to_json(self) -> JSONObject:
        if self.action_space is None:
            return {"n_arms": self.n_arms}
        return {"n_arms": self.n_arms, "action_space": self.action_space}
