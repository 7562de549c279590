"""The report as data: the kinds of block a section is made of (:class:`Para`, :class:`Table`,
:class:`Figure`, :class:`Code`, :class:`Fold`, :class:`Sub`, :class:`Box`) and the :class:`Section` itself,
with the builders that turn findings' values into readable blocks (:func:`kv_table`, :func:`records_table`,
:func:`data_blocks`: keys in words, numbers to 4 significant digits, absent values left out) and
:func:`walk_blocks`. The Markdown and HTML writers render these blocks; nothing here draws or writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Sequence, TypeAlias, Union

from dpaudit.jsontypes import JSONMapping, JSONObject, JSONValue
from dpaudit.report.reading import Verbatim, cell, label, tidy_distinct

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

@dataclass(frozen=True)
class Para:
    """A paragraph; ``**bold**`` and ```code``` are the only markup. ``note`` renders it as a note box."""

    text: str
    note: bool = False


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]  # each cell shown as reading.cell shows it
    num: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Figure:
    """A figure: ``draw`` returns a matplotlib figure (drawn only by the HTML writer); ``shows`` names
    the attacks, exact figures and ledger it draws (its caption names nothing else); ``wide`` spans the page."""

    id: str
    title: str
    caption: str
    draw: Callable[[], MplFigure]
    shows: tuple[str, ...] = ()
    wide: bool = False


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Fold:
    """Collapsed in HTML (``<details>``), a heading in Markdown."""

    summary: str
    blocks: tuple[Block, ...]
    id: str = ""


@dataclass(frozen=True)
class Sub:
    """A titled subsection."""

    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Box:
    """A note box holding a sentence and the blocks that go with it (one box, e.g. for every Rényi order
    a bound exceeds, with their table)."""

    text: str
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)


#: every kind of block a section is made of
Block: TypeAlias = Union[Para, Table, Figure, Code, Fold, Sub, Box]


def kv_table(rows: Iterable[tuple[object, object]], header: tuple[str, str] = ("item", "value")) -> Table:
    return Table(header, tuple((k, v) for k, v in rows))


def _absent(v: object) -> bool:
    return v is None or (isinstance(v, (str, list, tuple, dict)) and len(v) == 0)


def data_blocks(value: JSONValue, depth: int = 0, digits: int = 4) -> list[Block]:
    """Any JSON value as readable blocks, generically: a list of records as one table (a row per record); a
    dict of records as one table (a column per record when there are a few, as history / data / central,
    else a row per record); any other dict's scalars and short values as one two-column table, its nested
    records and dicts as titled tables of their own (two levels deep, then one line of text). Keys read as
    words (:func:`~dpaudit.report.reading.label`), numbers to 4 significant digits, absent values (None, an
    empty list) are left out; text is tidied to at least ``digits`` significant digits (a pair's label to those
    that keep every pair apart). This is how protocol details and a part's other numbers are shown."""
    if _is_records(value):
        return [records_table(value, digits=digits)]
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        if len(value) <= 4:
            keys: list[str] = []
            for r in value.values():
                keys += [k for k in r if k not in keys and not all(_absent(x.get(k)) for x in value.values())]
            return [Table(("field", *map(str, value)), tuple((label(k), *(r.get(k) for r in value.values()))
                                                              for k in keys))]
        return [records_table([{"": k, **r} for k, r in value.items()], digits=digits)]
    if isinstance(value, Mapping):
        flat, blocks = [], []
        for k, v in value.items():
            if _absent(v):
                continue
            witness = isinstance(v, Mapping) and "canary" in v and "neighbour" in v  # one line of text (cell)
            if depth < 2 and (_is_records(v) or isinstance(v, Mapping)) and not witness:
                blocks.append(Sub(label(k), tuple(data_blocks(v, depth + 1, digits))))
            else:
                flat.append((label(k), v))
        return ([kv_table(flat, ("item", "value"))] if flat else []) + blocks
    return [Para(cell(value))]


def _is_records(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, Mapping) for r in v)


def _flat(r: JSONMapping) -> JSONObject:
    """A record with its nested dicts spread into columns ``outer: inner``."""
    out: JSONObject = {}
    for k, v in r.items():
        if isinstance(v, Mapping) and v and not any(isinstance(x, Mapping) for x in v.values()):
            out.update({f"{k}: {label(kk)}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def records_table(rows: Sequence[JSONMapping], limit: int = 200, digits: int = 4) -> Table:
    """Records as one table: a column per key (in words; a nested dict spread into columns), columns that
    are absent in every record left out, text columns tidied to the fewest digits (at least ``digits``) that
    keep rows apart."""
    rows = [_flat(r) for r in rows]
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    cols = [c for c in cols if not all(_absent(r.get(c)) for r in rows)]
    num = frozenset(i for i, c in enumerate(cols)
                    if all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows))
    tidied = {c: tidy_distinct((r[c] for r in rows if isinstance(r.get(c), str)), digits) for c in cols}
    body = tuple(tuple(Verbatim(tidied[c][r[c]]) if isinstance(r.get(c), str) else r.get(c) for c in cols)
                 for r in rows[:limit])
    if len(rows) > limit:
        body += ((f"... {len(rows) - limit} more rows in the JSON findings",) + ("",) * (len(cols) - 1),)
    return Table(tuple(label(c) if ":" not in c else c for c in cols), body, num)


def walk_blocks(blocks: Iterable[Block]) -> Iterator[Block]:
    """Every block, depth first, with the blocks inside each :class:`Fold` and :class:`Sub`."""
    for b in blocks:
        yield b
        if isinstance(b, (Fold, Sub, Box)):
            yield from walk_blocks(b.blocks)
