"""How attacks draw views on an engine: chunks with their own seeds, so findings do not depend on who runs them.

A *source* of views is a small picklable object that knows a protocol's neighbouring pairs and how to
run the policy on them (:class:`Source`): ``source.sample(candidate, side, n, seed)`` returns the
features of ``n`` views of pair ``candidate``, side 0 (d) or 1 (d'). The attacks never call it
directly: :func:`draw` splits ``n`` into chunks (at most ``source.chunk_cells`` run-cells each, a
split that depends on ``n`` and the source only), gives each chunk a seed spawned from the caller's,
and runs the chunks on the :class:`~dpaudit.engine.Engine` (this process, local processes, any
executor, a Dask cluster, with checkpoints); :func:`count` does the same for the fresh samples but
returns only how many views the chosen test rejects. So a serial, a two-process and a Dask audit give
the same bound, and an audit's fresh samples never travel back to the main process.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from dpaudit.engine import SERIAL, Engine, progress_counter

from .bounds import TestCounts

__all__ = ["Source", "Linear", "chunk_runs", "draw", "count"]


@runtime_checkable
class Source(Protocol):
    """Views of a protocol's candidate pairs (picklable: it is sent to the engine's workers).

    ``cells_per_run`` is what one run costs in memory cells (T x K for action views); a chunk holds
    at most ``chunk_cells`` of them. ``sample`` returns an array (n, ...) or a dict of such arrays
    (feature families); ``labels`` name the candidates in the findings, ``describe(i)`` describes one.
    """

    cells_per_run: int
    chunk_cells: int

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> Any:
        ...

    def describe(self, candidate: int) -> dict[str, Any]:
        ...


class Linear:
    """A fitted linear score ``x @ w`` under the statistic name ``name`` (of feature family ``family``)."""

    def __init__(self, w: np.ndarray, name: str = "lda", family: str | None = None) -> None:
        self.w, self.name, self.family = np.asarray(w, dtype=float), name, family

    def scores(self, x: Any) -> dict[str, np.ndarray]:
        x = x[self.family] if self.family is not None else x
        return {self.name: np.asarray(x, dtype=float) @ self.w}


def chunk_runs(n: int, cells_per_run: int, seed: np.random.SeedSequence,
               chunk_cells: int = 2_000_000) -> list[tuple[int, np.random.SeedSequence]]:
    """Split ``n`` runs into chunks of at most ``chunk_cells // cells_per_run`` runs, each with a seed
    spawned from ``seed``. The split depends on its arguments only, never on the engine."""
    size = max(1, int(chunk_cells) // max(1, int(cells_per_run)))
    k = max(1, math.ceil(n / size))
    return [(min(size, n - i * size), ss) for i, ss in enumerate(seed.spawn(k)) if n - i * size > 0]


def _sample_chunk(source: Source, candidate: int, side: int, m: int, ss: np.random.SeedSequence) -> Any:
    return source.sample(candidate, side, m, ss)


def _count_chunk(source: Source, candidate: int, side: int, m: int, ss: np.random.SeedSequence, scorer: Any,
                 test: TestCounts) -> int:
    return int(np.count_nonzero(test.reject(scorer.scores(source.sample(candidate, side, m, ss))[test.statistic])))


def _concat(parts: Sequence[Any]) -> Any:
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def draw(source: Source, candidate: int, side: int, n: int, seed: np.random.SeedSequence,
         engine: Engine = SERIAL) -> Any:
    """``n`` views' features of one side of one candidate, sampled in chunks on ``engine``."""
    chunks = chunk_runs(n, source.cells_per_run, seed, source.chunk_cells)
    return _concat(engine.map(_sample_chunk, [(source, candidate, side, m, ss) for m, ss in chunks]))


def draw_many(source: Source, requests: Sequence[tuple[int, int, int, np.random.SeedSequence]],
              engine: Engine = SERIAL) -> list[Any]:
    """:func:`draw` for several (candidate, side, n, seed) requests at once: one engine call, so the
    workers stay busy across candidates (a training and a selection split of every pair, say)."""
    tasks, owner = [], []
    for r, (cand, side, n, seed) in enumerate(requests):
        for m, ss in chunk_runs(n, source.cells_per_run, seed, source.chunk_cells):
            tasks.append((source, cand, side, m, ss))
            owner.append(r)
    results = engine.map(_sample_chunk, tasks)
    return [_concat([x for x, o in zip(results, owner) if o == r]) for r in range(len(requests))]


def count(source: Source, candidate: int, n: int, seeds: tuple[np.random.SeedSequence, np.random.SeedSequence],
          scorer: Any, test: TestCounts, engine: Engine = SERIAL,
          progress: Callable[[str], None] | None = None, what: str = "fresh views") -> tuple[int, int]:
    """(false positives, true positives) of ``test`` on ``n`` fresh views per side of one candidate,
    counted in chunks on ``engine`` (only the counts come back)."""
    tasks, sides = [], []
    for side, ss in enumerate(seeds):
        for m, cs in chunk_runs(n, source.cells_per_run, ss, source.chunk_cells):
            tasks.append((source, candidate, side, m, cs, scorer, test))
            sides.append(side)
    counter = progress_counter(progress, f"{{done}}/{{total}} {what}", [t[3] for t in tasks])
    rejected = engine.map(_count_chunk, tasks, on_result=counter)
    fp = sum(r for r, s in zip(rejected, sides) if s == 0)
    tp = sum(r for r, s in zip(rejected, sides) if s == 1)
    return fp, tp
