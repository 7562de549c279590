"""How attacks draw views on an engine: chunks with their own seeds, so findings do not depend on who runs them.

A *source* of views is a small picklable object that knows a protocol's neighbouring pairs and how to
run the policy on them (:class:`Source`): ``source.sample(candidate, side, n, seed)`` returns the
features of ``n`` views of pair ``candidate``, side 0 (d) or 1 (d'). The attacks never call it
directly: :func:`draw` splits ``n`` into chunks (at most ``source.chunk_cells`` run-cells each, a
split that depends on ``n`` and the source only), gives each chunk a seed spawned from the caller's,
and runs the chunks on the :class:`~dpaudit.engine.Engine` (this process, local processes, any
executor, a Dask cluster, with checkpoints); :func:`count` does the same for the fresh samples but
returns only how many views the chosen test rejects (and, given bin edges, the binned scores: a few hundred
counts, :class:`~dpaudit.attacks.result.ScoreHistogram`, never the scores themselves). So a serial, a two-process and a Dask audit give
the same bound, and an audit's fresh samples never travel back to the main process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, TypeAlias, TypedDict, Union, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpaudit.engine import SERIAL, Engine

from .bounds import TestCounts, cp_lower, eps_lower_from_counts, eps_lower_from_rates
from .result import ScoreHistogram

__all__ = ["Source", "Features", "Tally", "CountDetails", "Linear", "chunk_runs", "draw", "draw_pilots", "count", "Stop",
           "Counted", "count_in_looks", "LOOKS",
           "score_edges", "tally", "MAX_EDGES", "FUTILITY_ALPHA", "FUTILITY_GAIN", "FUTILITY_GAIN_OF_CLAIM"]

#: the features of a batch of views a source samples: an array (n, ...) or a dict of such arrays (feature families)
Features: TypeAlias = Union[np.ndarray, dict[str, np.ndarray]]
#: what a chunk's count returns (:func:`tally`): how many views its test rejected, or that with the chunk's binned
#: scores and how many scores were off an edge
Tally: TypeAlias = Union[int, tuple[int, np.ndarray, int]]

#: the looks at a test's fresh samples: (fraction of the fresh samples counted so far, share of the
#: test's error budget spent on that look's bound). The shares add up to 1, so whichever look an audit
#: stops at, its bound holds at the test's confidence (a union bound over the looks, fixed in advance).
LOOKS = ((1 / 16, 0.1), (1 / 4, 0.2), (1.0, 0.7))
#: the error allowed to the futility rule (stopping because more samples could not show the claim exceeded)
FUTILITY_ALPHA = 1e-3
#: the futility rule's margins: a test stops as futile only if the bound its whole planned sample would give at
#: the current rates exceeds the bound already shown by at most this fraction of it ...
FUTILITY_GAIN = 0.10
#: ... or by at most this fraction of the claim (a gain too small to matter beside the claim)
FUTILITY_GAIN_OF_CLAIM = 0.02


@dataclass(frozen=True)
class Stop:
    """When a test's fresh counts may stop early, at one of the looks of :data:`LOOKS`:

    * ``"violation"``: its bound (at that look's share of the error budget) already exceeds ``claim``,
      so the violation is settled; more samples would only make the bound larger;
    * ``"futile"``: even the most favourable rates the counts allow (one-sided Clopper-Pearson at
      :data:`FUTILITY_ALPHA`) imply an epsilon below ``claim``, so that more samples could not show a
      violation, *and* either its bound is positive (the audit showed power) and the bound the whole
      planned sample would give at the current rates (:meth:`projected`) exceeds it by at most
      max(:data:`FUTILITY_GAIN` x bound, :data:`FUTILITY_GAIN_OF_CLAIM` x claim) or stays at or below
      ``floor``, a bound the audit already shows by another test (the gray-box bound beside a black-box
      one), or its bound is 0 and the whole sample would show 0 too (a test that does not separate the
      sides: the verdict is inconclusive either way): stopping costs the reader of the audit's bound no
      more than that margin.

    Either way the bound holds at the test's confidence (the looks' shares add up to 1). ``confidence``
    and ``n_tests`` are the test's."""

    delta: float
    confidence: float
    claim: float
    n_tests: int = 1
    floor: float = 0.0

    def bound(self, fp: int, tp: int, n: int, share: float) -> float:
        conf = 1 - (1 - self.confidence) * share
        return float(eps_lower_from_counts(fp, n, n - tp, n, self.delta, conf, self.n_tests))

    def optimistic(self, fp: int, tp: int, n: int) -> float:
        """The largest epsilon the test's true error rates can plausibly imply (FPR and FNR at their lower
        confidence limits)."""
        fpr_lo = max(float(cp_lower(fp, n, FUTILITY_ALPHA / 2)), 1e-300)
        fnr_lo = max(float(cp_lower(n - tp, n, FUTILITY_ALPHA / 2)), 1e-300)
        return float(eps_lower_from_rates(fpr_lo, fnr_lo, self.delta))

    def projected(self, fp: int, tp: int, n: int, planned: int) -> float:
        """The bound the whole ``planned`` sample would give (at the last look's share) if its error rates
        were the current ones: the counts scaled to ``planned``."""
        f = planned / max(n, 1)
        return self.bound(round(fp * f), round(tp * f), planned, LOOKS[-1][1])

    def futile(self, fp: int, tp: int, n: int, planned: int, share: float) -> bool:
        """Whether the count may stop as futile here (class docstring)."""
        b = self.bound(fp, tp, n, share)
        if b > self.claim or self.optimistic(fp, tp, n) >= self.claim:
            return False
        p = self.projected(fp, tp, n, planned)
        if b <= 0:
            # no power shown yet: stop only if the whole sample would show none either (the verdict stays
            # inconclusive, never turns consistent on a test that did not separate the sides)
            return p <= 0
        return p <= self.floor or p - b <= max(FUTILITY_GAIN * b, FUTILITY_GAIN_OF_CLAIM * self.claim)


class _CountDetailsBase(TypedDict):
    fresh_runs_used: int
    fresh_runs_planned: int
    looks: int
    budget_share_of_last_look: float
    stopped_early: str | None  # "violation", "futile" or None (:class:`Stop`)


class CountDetails(_CountDetailsBase, total=False):
    """How a test's fresh count went (:meth:`Counted.details`)."""

    projected_full_sample_bound: float  # when it stopped early (:meth:`Stop.projected`)


@dataclass(frozen=True)
class Counted:
    """A test's fresh counts: false positives ``fp`` and true positives ``tp`` of ``n`` views per side,
    counted in ``looks`` looks; ``share`` of the error budget belongs to the bound at the last look;
    ``stopped`` says why it stopped before all the planned samples (``"violation"`` or ``"futile"``,
    :class:`Stop`), else None."""

    fp: int
    tp: int
    n: int
    share: float
    stopped: str | None
    looks: int
    planned: int
    #: the binned fresh scores of side 0 and side 1 and how many scores were off an edge (when edges were given)
    binned: tuple[np.ndarray, np.ndarray, int] | None = None
    #: when it stopped early: the bound all ``planned`` views would give at the rates counted (:meth:`Stop.projected`)
    projected: float | None = None

    def bound(self, delta: float, confidence: float, n_tests: int = 1) -> float:
        """The epsilon lower bound of these counts at the test's ``confidence``, with the share of the error
        budget that belongs to the look they stopped at."""
        conf = 1 - (1 - confidence) * self.share
        return float(eps_lower_from_counts(self.fp, self.n, self.n - self.tp, self.n, delta, conf, n_tests))

    def scores(self, test: TestCounts, edges: np.ndarray | None, statistic: str | None = None) -> ScoreHistogram | None:
        """The fresh scores binned at ``edges`` as a :class:`ScoreHistogram` (None without edges)."""
        if self.binned is None or edges is None:
            return None
        h0, h1, off = self.binned
        return ScoreHistogram(statistic or test.statistic, int(test.direction), tuple(float(e) for e in edges),
                              tuple(int(x) for x in h0), tuple(int(x) for x in h1), int(off))

    def details(self) -> CountDetails:
        out: CountDetails = {"fresh_runs_used": self.n, "fresh_runs_planned": self.planned, "looks": self.looks,
               "budget_share_of_last_look": self.share, "stopped_early": self.stopped}
        if self.projected is not None:
            out["projected_full_sample_bound"] = self.projected
        return out


def count_in_looks(fn: Callable[..., Tally],
                   make_task: Callable[[int, int, np.random.SeedSequence], tuple[object, ...]], n: int,
                   seeds: tuple[np.random.SeedSequence, np.random.SeedSequence], *, cells_per_run: int,
                   chunk_cells: int = 2_000_000, stop: Stop | None = None, engine: Engine = SERIAL,
                   progress: Callable[[str], None] | None = None, what: str = "fresh views") -> Counted:
    """Count a test on ``n`` fresh views per side, in chunks on ``engine``: ``fn(*make_task(side, m, seed))``
    returns how many of m views of ``side`` it rejects, or that count with the chunk's binned scores
    (:func:`tally`), which are summed into :attr:`Counted.binned`. With ``stop``, the views come in the looks of
    :data:`LOOKS` (each look's chunks seeded from its own child of the side's seed, so the counts never
    depend on the engine) and the count stops at a look where :class:`Stop` says the answer is settled;
    without, in one look (the whole budget on one bound)."""
    looks = LOOKS if stop is not None else ((1.0, 1.0),)
    sizes, done = [], 0
    for frac, _ in looks:
        target = n if frac >= 1 else max(1, math.ceil(frac * n))
        sizes.append(max(0, target - done))
        done = max(done, target)
    side_seeds = [s.spawn(len(looks)) if stop is not None else [s] for s in seeds]
    fp = tp = used = 0
    binned: list[np.ndarray | None] = [None, None]  # each side's binned scores, summed over its chunks
    off_edges = 0
    for k, ((_frac, share), size) in enumerate(zip(looks, sizes)):
        if size == 0:
            continue
        tasks, sides = [], []
        for side in (0, 1):
            for m, cs in chunk_runs(size, cells_per_run, side_seeds[side][k], chunk_cells):
                tasks.append(make_task(side, m, cs))
                sides.append(side)
        rejected = []
        for r, sd in zip(engine.map(fn, tasks), sides):
            if isinstance(r, tuple):  # (rejected, binned counts, scores off an edge)
                r, h, off = r
                h = np.asarray(h, dtype=np.int64)
                prev = binned[sd]
                binned[sd] = h if prev is None else prev + h
                off_edges += int(off)
            rejected.append(int(r))
        fp += sum(r for r, sd in zip(rejected, sides) if sd == 0)
        tp += sum(r for r, sd in zip(rejected, sides) if sd == 1)
        used += size
        if progress is not None:
            progress(f"{what}: {used}/{n} per side counted")
        hist = _binned(binned, off_edges)
        if k == len(looks) - 1 or stop is None:
            return Counted(fp, tp, used, share, None, k + 1, n, hist)
        if stop.bound(fp, tp, used, share) > stop.claim:
            return Counted(fp, tp, used, share, "violation", k + 1, n, hist, stop.projected(fp, tp, used, n))
        if stop.futile(fp, tp, used, n, share):
            return Counted(fp, tp, used, share, "futile", k + 1, n, hist, stop.projected(fp, tp, used, n))
    # the last looks were empty (n so small that an earlier look already took all of it)
    return Counted(fp, tp, used, looks[-1][1], None, len(looks), n, _binned(binned, off_edges))


def _binned(sides: list[np.ndarray | None], off: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Both sides' binned scores and the count off an edge (:attr:`Counted.binned`), once both sides have some."""
    h0, h1 = sides
    return (h0, h1, off) if h0 is not None and h1 is not None else None


#: the most bin edges a test's fresh scores are binned at (the JSON keeps about three numbers per edge)
MAX_EDGES = 256


def score_edges(s0: npt.ArrayLike, s1: npt.ArrayLike, test: TestCounts, max_edges: int = MAX_EDGES) -> np.ndarray:
    """Bin edges for a test's fresh scores, fixed on its selection split's scores ``s0``, ``s1`` (before any
    fresh sample is drawn): every distinct value when there are at most ``max_edges`` of them (then the
    binned ROC of fresh scores with those values is their exact empirical ROC), else quantiles of the
    pooled scores, denser in both tails (where the ROC at small FPR is read); always the test's threshold
    and the float just below it, so the test's own operating point is on the curve."""
    pooled = np.concatenate([np.asarray(s0, dtype=float).ravel(), np.asarray(s1, dtype=float).ravel()])
    pooled = pooled[np.isfinite(pooled)]
    uniq = np.unique(pooled)
    if uniq.size > max_edges - 2:
        k = max_edges - 2
        tail = np.geomspace(1e-4, 0.05, k // 8)
        probs = np.unique(np.concatenate([np.linspace(0, 1, k - 2 * tail.size), tail, 1 - tail]))
        uniq = np.unique(np.quantile(pooled, probs))
    c = float(test.threshold)
    extra = [c, float(np.nextafter(c, -np.inf))] if math.isfinite(c) else []
    return np.unique(np.concatenate([uniq, extra]))


def tally(scores: npt.ArrayLike, rejected: int, edges: np.ndarray | None) -> Tally:
    """A chunk's answer: how many its test rejected, and with ``edges`` the binned scores (cells (-inf, e_0],
    (e_0, e_1], ..., (e_last, inf)) and how many scores are not on their cell's upper edge."""
    if edges is None:
        return int(rejected)
    s = np.asarray(scores, dtype=float)
    i = np.searchsorted(edges, s, side="left")
    h = np.bincount(i, minlength=edges.size + 1)
    on = (i < edges.size) & (edges[np.minimum(i, edges.size - 1)] == s)
    return int(rejected), h, int(s.size - np.count_nonzero(on))




@runtime_checkable
class Source(Protocol):
    """Views of a protocol's candidate pairs (picklable: it is sent to the engine's workers).

    ``cells_per_run`` is what one run costs in memory cells (T x K for action views); a chunk holds
    at most ``chunk_cells`` of them. ``sample`` returns an array (n, ...) or a dict of such arrays
    (feature families); ``labels`` name the candidates in the findings, ``describe(i)`` describes one.
    """

    cells_per_run: int
    chunk_cells: int

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> Features:
        ...

    def describe(self, candidate: int) -> dict[str, object]:
        ...


class Linear:
    """A fitted linear score ``x @ w`` under the statistic name ``name`` (of feature family ``family``)."""

    def __init__(self, w: np.ndarray, name: str = "lda", family: str | None = None) -> None:
        self.w, self.name, self.family = np.asarray(w, dtype=float), name, family

    def scores(self, x: Features) -> dict[str, np.ndarray]:
        x = x[self.family] if self.family is not None else x
        return {self.name: np.asarray(x, dtype=float) @ self.w}


def chunk_runs(n: int, cells_per_run: int, seed: np.random.SeedSequence,
               chunk_cells: int = 2_000_000) -> list[tuple[int, np.random.SeedSequence]]:
    """Split ``n`` runs into chunks of at most ``chunk_cells // cells_per_run`` runs, each with a seed
    spawned from ``seed``. The split depends on its arguments only, never on the engine."""
    size = max(1, int(chunk_cells) // max(1, int(cells_per_run)))
    k = max(1, math.ceil(n / size))
    return [(min(size, n - i * size), ss) for i, ss in enumerate(seed.spawn(k)) if n - i * size > 0]


def _sample_chunk(source: Source, candidate: int, side: int, m: int, ss: np.random.SeedSequence) -> Features:
    return source.sample(candidate, side, m, ss)


def _count_chunk(source: Source, candidate: int, side: int, m: int, ss: np.random.SeedSequence, scorer: Any,
                 test: TestCounts, edges: np.ndarray | None = None) -> Tally:
    s = scorer.scores(source.sample(candidate, side, m, ss))[test.statistic]
    return tally(s, np.count_nonzero(test.reject(s)), edges)


def _concat(parts: Sequence[Features]) -> Features:
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def draw(source: Source, candidate: int, side: int, n: int, seed: np.random.SeedSequence,
         engine: Engine = SERIAL) -> Features:
    """``n`` views' features of one side of one candidate, sampled in chunks on ``engine``."""
    chunks = chunk_runs(n, source.cells_per_run, seed, source.chunk_cells)
    return _concat(engine.map(_sample_chunk, [(source, candidate, side, m, ss) for m, ss in chunks]))


def draw_many(source: Source, requests: Sequence[tuple[int, int, int, np.random.SeedSequence]],
              engine: Engine = SERIAL) -> list[Features]:
    """:func:`draw` for several (candidate, side, n, seed) requests at once: one engine call, so the
    workers stay busy across candidates (a training and a selection split of every pair, say)."""
    tasks, owner = [], []
    for r, (cand, side, n, seed) in enumerate(requests):
        for m, ss in chunk_runs(n, source.cells_per_run, seed, source.chunk_cells):
            tasks.append((source, cand, side, m, ss))
            owner.append(r)
    results = engine.map(_sample_chunk, tasks)
    return [_concat([x for x, o in zip(results, owner) if o == r]) for r in range(len(requests))]


def draw_pilots(source: Source, candidates: Sequence[int], seed: np.random.SeedSequence, n_train: int, n_select: int,
                engine: Engine = SERIAL, pilots: Sequence[Features] | None = None,
                who: str = "the attack") -> list[Features]:
    """The training and selection views of every candidate, in the order side 0 and side 1 of the training
    split, then of the selection split (``n_train`` / ``n_select`` views each, seeds spawned from ``seed``);
    or ``pilots``, views already drawn in that order (e.g. from the runs another attack chooses its test
    on; pilots only choose a test, so sharing them costs no validity), checked for their number."""
    seeds = [ss.spawn(4) for ss in seed.spawn(len(candidates))]
    if pilots is not None:
        if len(pilots) != 4 * len(candidates):
            raise ValueError(f"{who} got {len(pilots)} pilot samples for {len(candidates)} candidates; expected "
                             f"{4 * len(candidates)}.")
        return list(pilots)
    return draw_many(source, [(c, side, n, s[k]) for c, s in zip(candidates, seeds)
                              for side, n, k in ((0, n_train, 0), (1, n_train, 1), (0, n_select, 2), (1, n_select, 3))],
                     engine)


def count(source: Source, candidate: int, n: int, seeds: tuple[np.random.SeedSequence, np.random.SeedSequence],
          scorer: Any, test: TestCounts, engine: Engine = SERIAL,
          progress: Callable[[str], None] | None = None, what: str = "fresh views",
          stop: Stop | None = None, edges: np.ndarray | None = None) -> Counted:
    """The counts of ``test`` on up to ``n`` fresh views per side of one candidate, in chunks on
    ``engine`` (only the counts come back, and with ``edges`` the binned scores), in looks when ``stop`` is
    given (:func:`count_in_looks`)."""
    return count_in_looks(_count_chunk, lambda side, m, cs: (source, candidate, side, m, cs, scorer, test, edges), n,
                          seeds,
                          cells_per_run=source.cells_per_run, chunk_cells=source.chunk_cells, stop=stop,
                          engine=engine, progress=progress, what=what)
