"""The report as data: the kinds of block a section is made of (:class:`Para`, :class:`Table`,
:class:`Figure`, :class:`Code`, :class:`Fold`, :class:`Sub`) and the :class:`Section` itself, with the builders
that turn findings' values into blocks (:func:`kv_table`, :func:`records_table`, :func:`data_blocks`) and
:func:`walk_blocks`. The Markdown and HTML writers render these blocks; nothing here draws or writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from dpaudit.report.reading import fmt

@dataclass(frozen=True)
class Para:
    """A paragraph; ``**bold**`` and ```code``` are the only markup. ``note`` renders it as a note box."""

    text: str
    note: bool = False


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    num: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Figure:
    """A figure: ``draw`` returns a matplotlib figure (drawn only by the HTML writer); ``shows`` names
    the attacks, exact figures and ledger it draws (its caption names nothing else); ``wide`` spans the page."""

    id: str
    title: str
    caption: str
    draw: Callable[[], Any]
    shows: tuple[str, ...] = ()
    wide: bool = False


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Fold:
    """Collapsed in HTML (``<details>``), a heading in Markdown."""

    summary: str
    blocks: tuple[Any, ...]
    id: str = ""


@dataclass(frozen=True)
class Sub:
    """A titled subsection."""

    title: str
    blocks: tuple[Any, ...]


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Any, ...] = field(default_factory=tuple)


def kv_table(rows: Iterable[tuple[Any, Any]], header: tuple[str, str] = ("item", "value")) -> Table:
    return Table(header, tuple((k, v) for k, v in rows))


def data_blocks(value: Any, depth: int = 0) -> list[Any]:
    """Any JSON value as blocks, generically: a list of records as one table (a row per record); a dict of
    records as one table (a column per record when there are a few, as history / data / central, else a
    row per record); any other dict's scalars and short values as one key/value table, its nested records
    and dicts as titled tables of their own (two levels deep, then one compact line). This is how protocol
    details and a part's other numbers are shown."""
    if _is_records(value):
        return [records_table(value)]
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        if len(value) <= 4:
            keys: list[str] = []
            for r in value.values():
                keys += [k for k in r if k not in keys]
            return [Table(("field", *map(str, value)), tuple((k, *(r.get(k, "") for r in value.values()))
                                                              for k in keys))]
        return [records_table([{"": k, **r} for k, r in value.items()])]
    if isinstance(value, Mapping):
        flat, blocks = [], []
        for k, v in value.items():
            if depth < 2 and v and (_is_records(v) or isinstance(v, Mapping)):
                blocks.append(Sub(str(k), tuple(data_blocks(v, depth + 1))))
            else:
                flat.append((k, v))
        return ([kv_table(flat, ("key", "value"))] if flat else []) + blocks
    return [Para(fmt(value))]


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, Mapping) for r in v)


def records_table(rows: list[Mapping[str, Any]], limit: int = 200) -> Table:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    num = frozenset(i for i, c in enumerate(cols)
                    if all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows))
    body = tuple(tuple(r.get(c, "") for c in cols) for r in rows[:limit])
    if len(rows) > limit:
        body += ((f"... {len(rows) - limit} more rows in the JSON findings",) + ("",) * (len(cols) - 1),)
    return Table(tuple(cols), body, num)


def walk_blocks(blocks: Iterable[Any]) -> Iterable[Any]:
    """Every block, depth first, with the blocks inside each :class:`Fold` and :class:`Sub`."""
    for b in blocks:
        yield b
        if isinstance(b, (Fold, Sub)):
            yield from walk_blocks(b.blocks)
