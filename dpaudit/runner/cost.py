"""Up-front cost checks: refuse, before starting, an audit that cannot finish.

``--runs 10**12``, ``--horizon 10**9``, ``--param n_arms=10**9`` or ``--workers 1000`` would run for
days, die of a MemoryError (or the kernel's OOM killer) or fork a thousand processes. So before an
audit starts, :func:`preflight` estimates

* **memory per process**: a chunk of sampled views holds ``chunk x T`` actions (the attacks split
  runs into chunks of ``2e6 / T`` runs, :data:`dpaudit.attacks.membership.CHUNK_CELLS`), the
  policy's state is a few ``chunk x K`` arrays, the neighbouring pair is two ``T x K`` tables, and the
  main process keeps one privacy loss per likelihood run; compared with the memory available
  (``MemAvailable``) shared by the worker processes;
* **time**: the policy is run for a short calibration (batches of 64, 256, 1,024 and up to 2,000
  runs, 32 steps, stopping once a batch takes half a second) on a table of the audit's shape and
  its measured run-steps per second, times the workers, is extrapolated to the audit's total
  run-steps (the fresh views of both sides, the likelihood runs, and the ranking samples of every
  candidate pair; for the central plans also the threshold search and, for a black-box audit that
  chooses its horizon, the horizon discovery and sweep with the fresh views at the longer horizon the
  sweep typically moves them to: :func:`run_steps`); compared with ``max_hours``. The estimate itself is time-boxed
  (:data:`ESTIMATE_SECONDS`, :func:`dpaudit.sandbox.time_box`): a plug-in whose constructor or
  ``act`` is still running at the box's end is refused if what was seen already exceeds
  ``max_hours``, and otherwise audited without a time estimate (a note says why);
* **workers**: at most the cores this process may use, unless forced.

What does not fit is refused in one sentence with the estimate and the largest value that fits.
The estimates are deliberately rough (a factor of 2 either way under load); they guard against
the orders of magnitude that cannot work, not against a slow afternoon.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Callable, Iterator, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError

from .sections import JSONObject, json_value

if TYPE_CHECKING:
    from dpaudit.policies.base import PolicyLike
    from dpaudit.protocols import Protocol
    from dpaudit.sandbox import TimeBoxExceeded

__all__ = ["available_memory", "check_workers", "preflight", "audit_preflight", "DEFAULT_MAX_HOURS",
           "ESTIMATE_SECONDS", "estimating", "account_preflight", "bco_preflight", "run_steps", "refresh_estimate",
           "duration", "Estimate", "AtHorizon", "Searches", "check_time"]

#: the longest audit dpaudit starts without --max-hours
DEFAULT_MAX_HOURS = 24.0
#: the longest the up-front time estimate itself may run plug-in code (building the policy, the calibration)
ESTIMATE_SECONDS = 10.0
#: bytes per (run, step) cell of a view chunk: the actions (int64) and the scorer's working copies
_VIEW_BYTES = 8 * 4
#: bytes per (run, arm) of a policy's state: counts, sums, noisy means, indices, noise draws
_STATE_BYTES = 8 * 10
#: bytes the main process keeps per likelihood run (its privacy loss and a sorted copy)
_LOSS_BYTES = 8 * 4
_BASELINE = 300 * 2**20  # the interpreter, numpy, scipy: not available to the pieces


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux ``MemAvailable``), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # pragma: no cover - not Linux
        import os

        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def check_workers(workers: int, force: bool = False) -> int:
    """Refuse more local worker processes than cores, unless ``force``."""
    from dpaudit.engine import default_workers

    cores = default_workers()
    if workers > cores and not force:
        raise DPAuditError(f"--workers {workers} is more than the {cores} core{'s' if cores != 1 else ''} this process "
                           f"may use, which only adds processes that wait for each other; use --workers {cores} or "
                           "less, or add --force-workers.")
    return workers


def _gb(x: float) -> str:
    return f"{x / 2**30:.3g} GB"


def _duration(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.3g} days"


def _chunk(runs: int, horizon: int) -> int:
    from dpaudit.attacks.membership import CHUNK_CELLS

    return max(1, min(int(runs), CHUNK_CELLS // int(horizon)))


def memory_per_process(runs: int, horizon: int, n_arms: int) -> tuple[float, float]:
    """(bytes a worker needs for one piece, bytes the main process keeps across pieces)."""
    c = _chunk(runs, horizon)
    piece = c * horizon * _VIEW_BYTES + c * n_arms * _STATE_BYTES + 2 * horizon * n_arms * 8
    main = runs * _LOSS_BYTES + 2 * horizon * n_arms * 8
    return float(piece), float(main)


#: run-rounds per round of horizon of one horizon tried by the threshold search (two orientations, each a
#: 4-level bisection of 32 gaps on 32 runs and a scan of 2 x 18 canary rounds on 32 runs per side:
#: :func:`dpaudit.attacks.neighbours.threshold_pairs`' defaults)
THRESHOLD_CELLS = 2 * (4 * 32 * 32 + 32 * 2 * 2 * 18)
#: the same for a one-run class's frugal search (``stop_at_noise``): between the one level and one scanned gap
#: of a policy whose share never jumps beyond noise and the four levels and two gaps of a sharp threshold,
#: two levels and one gap
FRUGAL_THRESHOLD_CELLS = 2 * (2 * 32 * 32 + 32 * 1 * 2 * 18)
#: the horizons the threshold search and the horizon sweep try, as multiples of the first: 1, 2, 4, 8
HORIZON_MULTIPLES = 1 + 2 + 4 + 8
#: the horizon a black-box audit's fresh test runs at, as a multiple of the first, in the estimate: the
#: geometric mean of the ten one-run classes' (benchmarks/results/defaults.md: 1 to 16 times, their threshold search
#: and horizon sweep moving them), since the estimate is made before either runs
SWEPT = 3


def run_steps(runs: int, horizon: int, n_candidates: int, *, small: int | None = None, threshold: int = 0,
              sweep: bool = False, frugal: bool = False, settled: bool = False) -> float:
    """Total (run, step) pairs of an audit: fresh views of both sides and the likelihood runs
    (3 x runs), and per candidate pair the ranking samples (training, selection and screening runs
    of both sides, about 5 x the ``small`` sample size of the search; by default a batched policy's).

    ``threshold``: the Table-DP threshold search, as the sum of the multiples of the horizon it tries
    (:data:`THRESHOLD_CELLS` per round of each): 1, or :data:`HORIZON_MULTIPLES` when it may try 2, 4 and
    8 times the horizon (when no pair's two sides act differently at the first). ``sweep``: a
    black-box audit free to choose its horizon (no ledger, no likelihood runs): the horizon discovery, the
    sweep of the best 3 pairs at 1, 2, 4 and 8 times the horizon on ``small`` runs per split, and the fresh
    views at :data:`SWEPT` times it. ``frugal``: a one-run class's threshold search, which stops at noise
    (:data:`FRUGAL_THRESHOLD_CELLS`).
    ``settled``: the least the plan can cost, the fresh views stopping at their first look
    (:data:`dpaudit.attacks.sampling.LOOKS`, 1/16 of them) at the horizon the sweep starts from, which runs
    only its first stage (1 and 2 times). Once the horizon is chosen, :func:`refresh_estimate` redoes both
    there.
    """
    small = max(500, min(2000, runs // 10)) if small is None else int(small)
    T = float(horizon)
    total = T * 5.0 * small * n_candidates
    total += (FRUGAL_THRESHOLD_CELLS if frugal else THRESHOLD_CELLS) * T * int(threshold)
    first = 1.0
    if settled:
        from dpaudit.attacks.sampling import LOOKS

        first = LOOKS[0][0]
    if sweep:
        swept = (1 + 2) * 3 if settled else HORIZON_MULTIPLES * 3  # (pairs x multiples) the sweep runs
        total += 2 * 200 * T * 2 + 4 * small * T * swept + 2.0 * runs * first * (1 if settled else SWEPT) * T
    else:
        total += 3.0 * runs * first * T
    return total


def _calibrate(policy: PolicyLike, protocol: Protocol, horizon: int, runs: int, reward_range: tuple[float, float]) -> float:
    """Measured run-steps per second of ``policy`` on a table of the audit's shape (one process): batches
    of 64, 256, 1,024 ... runs up to the audit's chunk (at most 2,000), until one takes half a second."""
    from dpaudit.protocols import PairSpec, make_pair

    K = int(policy.n_arms)
    T = int(min(horizon, 32))
    full = int(min(_chunk(runs, horizon), 2000))
    d = make_pair(PairSpec(0, "low"), protocol, K, max(T, 2), reward_range).d0[:T]  # the range's low end:
    rng = np.random.default_rng(0)  # a reward every policy accepts, even one with a {lo, hi} alphabet
    m, rate = min(full, 64), 0.0
    while True:  # the smaller batches pay for caches and imports
        t0 = time.perf_counter()
        protocol.run(policy, d, m, rng, None, record=False)
        took = max(time.perf_counter() - t0, 1e-6)
        rate = max(rate, m * T / took) if m == full or took < 0.5 else m * T / took
        if m >= full or took >= 0.5:
            return rate
        m = min(full, 4 * m)


@contextmanager
def estimating(max_hours: float | None) -> Iterator[float]:
    """The time box of an up-front estimate (:data:`ESTIMATE_SECONDS`, or ``max_hours`` if shorter):
    plug-in code still running at its end raises :class:`dpaudit.sandbox.TimeBoxExceeded`. Yields the
    box's length in seconds."""
    from dpaudit.sandbox import time_box

    limit = (DEFAULT_MAX_HOURS if max_hours is None else float(max_hours)) * 3600
    box = min(ESTIMATE_SECONDS, limit)
    with time_box(box):
        yield box


def overran(exc: TimeBoxExceeded, max_hours: float | None, box: float, at_least: float | None = None) -> str:
    """What an estimate that ran past its time box (``exc``) tells: a refusal when the audit certainly takes
    longer than ``max_hours`` (``at_least`` seconds, or the box itself when it was as long as ``max_hours``),
    else the estimate's note (the audit goes on)."""
    max_hours = DEFAULT_MAX_HOURS if max_hours is None else float(max_hours)
    limit = max_hours * 3600
    call = "its constructor" if exc.method == "__init__" else f"{exc.method}" + (
        f" at step {exc.step}" if exc.step is not None else "")
    lower = max(float(at_least or 0.0), box if box >= limit else 0.0)
    if lower >= limit:
        raise DPAuditError(f"this audit would take more than --max-hours {max_hours:g}: plug-in {exc.plugin} was still "
                           f"in {call} when the up-front estimate's {box:.3g} s time box ran out, so the audit takes at least "
                           f"{_duration(lower)}; raise --max-hours.") from None
    return (f"no time estimate: plug-in {exc.plugin} was still in {call} at the end of the estimate's "
            f"{box:g} s time box")


def _largest(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """The largest integer v in [lo, hi) with ``fits(v)`` (``fits`` monotone decreasing), or None."""
    if hi <= lo or not fits(lo):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


class Searches(TypedDict, total=False):
    """The searches a central plan runs for its policy, as :func:`run_steps`' keywords: the search's sample
    size ``small`` (absent: a batched policy's), the threshold search (``threshold``: the sum of the horizon
    multiples it tries), the horizon sweep (``sweep``) and a one-run class's frugal threshold search
    (``frugal``)."""

    small: int
    threshold: int
    sweep: bool
    frugal: bool


@dataclass
class AtHorizon:
    """The time estimate redone once the horizon is chosen (:func:`refresh_estimate`): the whole plan's
    ``seconds`` and the least, its fresh views settled at their first look (``seconds_settled``)."""

    horizon: int
    seconds: float
    seconds_settled: float


@dataclass
class Estimate:
    """The up-front estimate, as the findings record it (``estimate``): the memory and run-steps of the audit
    with the calibrated rate and time (:func:`preflight`), or a measured time and how it was measured
    (:func:`check_time`); ``note`` says why there is no time estimate; ``at_horizon`` is the time redone once
    the horizon is chosen. Only what was estimated is written (the memory available is, even when unknown)."""

    memory_bytes: float | None = None
    memory_available_bytes: int | None = None
    run_steps: float | None = None
    run_steps_per_second: float | None = None
    seconds: float | None = None
    how: str | None = None
    note: str | None = None
    at_horizon: AtHorizon | None = None

    def to_json(self) -> JSONObject:
        out: JSONObject = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or (f.name == "memory_available_bytes" and self.memory_bytes is not None):
                out[f.name] = json_value(value)
        return out


def preflight(policy: PolicyLike, protocol: Protocol, *, runs: int, horizon: int, workers: int, local: bool = True,
              max_hours: float | None = None, n_candidates: int | None = None,
              reward_range: tuple[float, float] = (0.0, 1.0), search: Searches | None = None) -> Estimate:
    """Refuse an audit that cannot finish (memory, then time); return the estimates.

    ``local``: the pieces run on this machine (``workers`` processes); with an external executor
    (Dask) only the main process's memory is checked here. ``search``: the plan's searches, as
    :func:`run_steps`' keywords (:class:`Searches`).
    """
    search = search or {}
    max_hours = DEFAULT_MAX_HOURS if max_hours is None else float(max_hours)
    if not (max_hours > 0) or math.isinf(max_hours):
        raise DPAuditError(f"--max-hours must be a positive finite number, got {max_hours!r}.")
    K, T, runs = int(policy.n_arms), int(horizon), int(runs)
    if n_candidates is None:
        try:
            from dpaudit.protocols import candidate_pairs

            n_candidates = len(candidate_pairs(protocol, K, T))
        except Exception:
            n_candidates = 30
    n_proc = workers if local else 0
    est = Estimate(memory_bytes=_memory_needed(runs, T, K, n_proc), memory_available_bytes=available_memory(),
                   run_steps=run_steps(runs, T, n_candidates, **search))
    _check_memory(est, runs, T, K, n_proc, local)
    if local:
        _estimate_time(est, policy, protocol, runs, T, workers, max_hours, reward_range, n_candidates, search)
    return est


def _memory_needed(runs: int, horizon: int, n_arms: int, n_proc: int) -> float:
    """Bytes an audit needs on this machine: the main process's and a piece in each of ``n_proc`` workers."""
    piece, main = memory_per_process(runs, horizon, n_arms)
    return main + piece * max(n_proc, 1)


def _check_memory(est: Estimate, runs: int, T: int, K: int, n_proc: int, local: bool) -> None:
    """Refuse an audit whose memory (``est``) exceeds what is available, naming what would fit."""
    avail = est.memory_available_bytes
    budget = None if avail is None else max(avail - _BASELINE * (1 + n_proc), 0)
    need = float(est.memory_bytes or 0.0)
    if budget is None or need <= budget:
        return
    hint = []
    if local and n_proc > 1 and memory_per_process(runs, T, K)[0] + memory_per_process(runs, T, K)[1] <= budget:
        hint.append("--workers 1 fits")
    for label, lo, cur, f in (("--runs", 100, runs, lambda v: _memory_needed(v, T, K, n_proc)),
                              ("--horizon", 2, T, lambda v: _memory_needed(runs, v, K, n_proc)),
                              ("n_arms", 2, K, lambda v: _memory_needed(runs, T, v, n_proc))):
        best = _largest(lo, cur, lambda v: f(v) <= budget)
        if best is not None:
            hint.append(f"{label} {best:,} fits" if label != "n_arms" else f"--param n_arms={best} fits")
    raise DPAuditError(
        f"this audit needs about {_gb(need)} of memory (K = {K}, T = {T}, --runs {runs}, "
        f"{max(n_proc, 1)} process{'es' if n_proc > 1 else ''}) but {_gb(float(avail or 0))} is available; "
        + (", or ".join(hint) if hint else "no smaller --runs, --horizon or n_arms alone fits") + "."
    )


def _estimate_time(est: Estimate, policy: PolicyLike, protocol: Protocol, runs: int, T: int, workers: int,
                   max_hours: float, reward_range: tuple[float, float], n_candidates: int, search: Searches) -> None:
    """The calibrated rate and time of ``est`` (a note instead when the calibration could not measure one);
    refuse an audit beyond ``max_hours``, naming the largest --runs and --horizon that fit."""
    from dpaudit.sandbox import PluginTimeoutError, TimeBoxExceeded

    steps = float(est.run_steps or 0.0)
    t0 = time.perf_counter()
    try:
        with estimating(max_hours) as box:
            rate = _calibrate(policy, protocol, T, runs, reward_range) * max(1, workers)
    except TimeBoxExceeded as exc:  # what the calibration saw: its batches did not finish within the box
        full = int(min(_chunk(runs, T), 2000))
        ladder = sum(min(full, 64 * 4**i) for i in range(6) if i == 0 or 64 * 4**(i - 1) < full)
        fastest = ladder * min(T, 32) / max(time.perf_counter() - t0, 1e-6) * max(1, workers)  # run-steps per second
        est.note = overran(exc, max_hours, box, at_least=steps / fastest)
        return
    except PluginTimeoutError:
        raise  # --call-timeout: the audit would meet it again
    except DPAuditError as exc:  # the audit itself will meet (and report) whatever stopped the policy here
        est.note = f"no time estimate: the calibration run stopped ({exc})"
        return
    seconds = steps / rate
    est.run_steps_per_second, est.seconds = rate, seconds
    limit = max_hours * 3600
    if seconds > limit:
        hint = []
        for label, lo, cur, f in (("--runs", 100, runs, lambda v: run_steps(v, T, n_candidates, **search)),
                                  ("--horizon", 2, T, lambda v: run_steps(runs, v, n_candidates, **search))):
            best = _largest(lo, cur, lambda v: f(v) / rate <= limit)
            if best is not None:
                hint.append(f"the largest {label} that fits is about {best:,}")
        raise DPAuditError(
            f"this audit would take about {_duration(seconds)} ({steps:.3g} run-steps at a measured "
            f"{rate:.3g} per second on {workers} process{'es' if workers > 1 else ''}), more than --max-hours "
            f"{max_hours:g}; " + ("; ".join(hint) + ", or raise --max-hours" if hint else "raise --max-hours") + "."
        )


def audit_preflight(policy_for: Callable[[int], PolicyLike], protocol: Protocol, *, runs: int, horizon: int,
                    workers: int, local: bool, max_hours: float | None,
                    search: Callable[[PolicyLike], Searches] | None = None) -> Estimate:
    """:func:`preflight` for the central plans: ``policy_for(T)`` builds the policy; ``search(policy)``, the
    plan's searches for it (:class:`Searches`).

    The horizon must be checked before anything is built for it (the protocols allocate T x K tables).
    """
    from dpaudit.errors import check_int

    T = check_int("--horizon", horizon, minimum=2)
    from dpaudit.sandbox import TimeBoxExceeded

    t0 = time.perf_counter()
    try:
        with estimating(max_hours) as box:
            policy = policy_for(T)
    except TimeBoxExceeded as exc:  # a constructor slower than the whole estimate may take
        return Estimate(note=overran(exc, max_hours, box, at_least=time.perf_counter() - t0))
    from dpaudit.protocols import audit_range

    rr = audit_range(policy)
    return preflight(policy, protocol, runs=runs, horizon=T, workers=workers, local=local, max_hours=max_hours,
                     reward_range=rr, search=None if search is None else search(policy))


def refresh_estimate(estimate: Estimate | None, runs: int, horizon: int, n_candidates: int,
                     search: Searches, elapsed: float) -> tuple[float, float] | None:
    """The up-front ``estimate`` redone once the horizon is chosen (the discovery and threshold search done,
    ``elapsed`` seconds so far): the rest of the audit's run-steps at ``horizon`` at the rate measured up
    front, plus ``elapsed``, recorded in the estimate's ``at_horizon`` (``seconds``, with its ``horizon``), and
    the least it can be, the fresh views settled at their first look (``seconds_settled``; :func:`run_steps`).
    Returns the seconds still to go, (settled, whole plan) (None without a measured rate)."""
    if estimate is None or not estimate.run_steps_per_second:
        return None
    rate = float(estimate.run_steps_per_second)
    after: Searches = {**search, "threshold": 0}  # the threshold search has run
    rest = run_steps(runs, horizon, n_candidates, **after) / rate
    least = run_steps(runs, horizon, n_candidates, **after, settled=True) / rate
    estimate.at_horizon = AtHorizon(int(horizon), elapsed + rest, elapsed + least)
    return least, rest


def duration(seconds: float) -> str:
    """Seconds as text: 42 s, 7 min, 3.5 h, 4 days."""
    return _duration(seconds)


def check_time(seconds: float, how: str, *, max_hours: float | None, workers: int, local: bool) -> Estimate:
    """Refuse, before it starts, an audit whose measured estimate (``seconds`` on one process, ``how`` it
    was measured) exceeds ``max_hours`` on the audit's ``workers`` (when ``local``: on this machine); return
    the estimate the findings record."""
    hours = DEFAULT_MAX_HOURS if max_hours is None else float(max_hours)
    if not (hours > 0) or math.isinf(hours):
        raise DPAuditError(f"--max-hours must be a positive finite number, got {max_hours!r}.")
    est = seconds / (max(1, workers) if local else 1)
    if est > hours * 3600:
        raise DPAuditError(f"this audit would take about {_duration(est)} ({how}), more than --max-hours {hours:g}; "
                           "lower --runs or --horizon, or raise --max-hours.")
    return Estimate(seconds=est, how=how)


def account_memory(runs: int, horizon: int, n_arms: int) -> float:
    """Bytes ``dpaudit account policy`` needs: the T x K reward table (and its draws), the policy's per-arm
    state for every run, and its ledger, at most a few releases per (run, step) (as a view chunk's cells)."""
    return float(runs) * horizon * _VIEW_BYTES + float(runs) * n_arms * _STATE_BYTES + 3.0 * horizon * n_arms * 8


def account_preflight(runs: int, horizon: int, n_arms: int, names: tuple[str, str] = ("--runs", "--horizon")) -> None:
    """Refuse, before any run, a ledger account (:func:`dpaudit.account`, ``dpaudit account policy``) whose
    runs cannot fit in the memory available: ``runs = 10**9`` is one sentence with the largest --runs that
    fits, not a MemoryError from deep inside numpy. ``names``: how the caller calls runs and horizon."""
    avail = available_memory()
    if avail is None:
        return
    budget = max(avail - _BASELINE, 0)
    need = account_memory(runs, horizon, n_arms)
    if need <= budget:
        return
    hint = []
    for label, lo, cur, f in ((names[0], 1, runs, lambda v: account_memory(v, horizon, n_arms)),
                              (names[1], 1, horizon, lambda v: account_memory(runs, v, n_arms))):
        best = _largest(lo, cur, lambda v: f(v) <= budget)
        if best is not None:
            hint.append(f"{label} {best:,} fits")
    raise DPAuditError(f"this account needs about {_gb(need)} of memory (K = {n_arms}, T = {horizon}, {names[0]} {runs}) "
                       f"but {_gb(avail)} is available; " + (", or ".join(hint) if hint else
                                                             f"no smaller {names[0]} or {names[1]} alone fits") + ".")


def bco_preflight(policy_for: Callable[[], object], horizon: int, run_steps: float, *, max_hours: float | None,
                  workers: int, local: bool) -> Estimate:
    """The up-front time check of a BCO policy's local audit (``--max-hours``, as for every other audit):
    ``run_steps`` (the plan's count of run-rounds) at the rate of a timed pilot, 200 runs of
    ``min(horizon, 32)`` rounds on the ledger part's loss sequence, the pilot itself time-boxed
    (:func:`estimating`); refused by :func:`check_time` when it exceeds ``--max-hours``."""
    from dpaudit.protocols.continuous import loss_pair, play
    from dpaudit.sandbox import TimeBoxExceeded

    rounds, n = int(min(horizon, 32)), 200
    t0 = time.perf_counter()
    try:
        with estimating(max_hours) as box:
            policy = policy_for()
            losses = loss_pair(policy, int(horizon), 0)[0]
            t0 = time.perf_counter()
            play(lambda: policy, losses, n, np.random.default_rng(0), rounds)
    except TimeBoxExceeded as exc:
        took = max(time.perf_counter() - t0, 1e-6)
        return Estimate(note=overran(exc, max_hours, box, at_least=run_steps / (n * rounds / took)))
    rate = n * rounds / max(time.perf_counter() - t0, 1e-6)
    return check_time(run_steps / rate, f"{run_steps:.3g} run-rounds at a measured {rate:.3g} per second on one "
                                        "process", max_hours=max_hours, workers=workers, local=local)
