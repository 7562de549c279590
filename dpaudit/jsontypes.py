"""The JSON dpaudit writes and reads (findings, accounts, specs, reports' inputs), as one recursive type.

A leaf module: it imports nothing from dpaudit, so every layer may use it.
"""

from __future__ import annotations

from typing import Mapping, TypeAlias, Union

__all__ = ["JSONValue", "JSONObject", "JSONMapping"]

#: any JSON value, as :func:`json.loads` returns it (tuples are written as lists)
JSONValue: TypeAlias = Union[None, bool, int, float, str, list["JSONValue"], tuple["JSONValue", ...],
                             dict[str, "JSONValue"]]
#: a JSON object as dpaudit builds one (findings' ``to_dict``, ``describe``, an account's ``as_dict``)
JSONObject: TypeAlias = dict[str, JSONValue]
#: a JSON object as a reader takes one (any mapping of keys to JSON values)
JSONMapping: TypeAlias = Mapping[str, JSONValue]
