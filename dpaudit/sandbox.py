"""Plug-in isolation: code dpaudit did not write never decides its exit status or pollutes its output.

A plug-in (``path/to/file.py:Class`` or ``package.module:Class``) runs inside dpaudit's process and
its workers. Every call into it -- the import, the constructor, ``claim``, ``reset``, ``act``,
``observe`` and any other member the protocols use -- goes through :func:`guard`, which

* turns ``sys.exit()`` / ``SystemExit`` and ``os._exit()`` into a :class:`DPAuditError` naming the
  plug-in, the method and the step (``os._exit`` is replaced, only while plug-in code runs, by a
  function that raises; a reference taken at import time is that same function, so it is caught
  later too);
* turns any other exception into one sentence naming the plug-in, the method, the step and the
  exception (``GeneratorExit`` and its own ``BaseException`` subclasses too, by type name and message: such a
  class exists only
  where the plug-in was imported, so it never crosses to another process); the plug-in's own traceback
  is kept on the error (``plugin_traceback``) and shown only under ``dpaudit --debug``;
* undoes a recursion limit the plug-in lowered (``sys.setrecursionlimit(50)``) when its call returns, since
  dpaudit's own code after it needs its stack (a limit it raised stays: that breaks nothing);
* keeps the plug-in's floating-point error state (``np.seterr``) to its own calls: installed around each,
  dpaudit's restored after it, so ``np.seterr(all="raise")`` in a plug-in never reaches dpaudit's numerics
  (which run under numpy's default state, :func:`own_numerics`, whatever a Python caller set);
* sends whatever the plug-in prints to stderr, so dpaudit's stdout (``--json``) stays its own;
* tells a real interruption from the plug-in's own ``KeyboardInterrupt``: while dpaudit watches the
  signals (:func:`watch_signals`: the CLI and :func:`dpaudit.runner.run` do), each SIGINT, SIGTERM and
  SIGHUP is counted before its handler raises, so a ``KeyboardInterrupt`` with no signal counted during
  the call (or raised in a worker process, which ignores those signals) is the plug-in's own: an error
  naming the method and the step, not "interrupted";
* ends a call that does not return: with a per-call limit (:func:`call_limit`), a SIGALRM timer raises in
  the plug-in's code, and the audit ends with one sentence naming the plug-in, the method, the step and
  the time it ran; a call stuck where the alarm cannot reach (C code) is killed from outside once past
  the limit and a grace (:func:`overdue`: the engine asks it about its busy workers, :func:`run_isolated`
  about its process) and reported the same way. The limit is ``--call-timeout`` when given (at most
  :data:`MAX_CALL_TIMEOUT`); by default it is the *scaled watchdog* (:func:`scaled_limit`): 60 s before
  any call into the plug-in has returned, then 100 times the slowest call measured so far (for ``reset``,
  ``act`` and ``observe`` on a batch larger than any measured, 100 times the time per run on the largest batch
  measured times the batch, if that is more), never less than 30 s;
  so a plug-in stuck in a call is named within a minute, while a slow but working one is measured first.
  Calls are measured per process; forked processes (the engine's workers) start from their parent's;
* leaves a note of the call it is running (plug-in, method, step, start, limit) in memory shared with
  the process that forked it, so that when plug-in code kills its process (a segfault, a signal,
  ``abort()``) the parent's error names the plug-in, the method and the step (:func:`explain_worker_death`).

What cannot be caught in-process -- a plug-in that kills its process (a signal to itself, ``ctypes``, a
crash in C code) -- is caught one level up: :func:`dpaudit.runner.run` audits a plug-in in a forked
process of its own (:func:`run_isolated`), also with one worker, and the engine's workers are forked
from it, so such a death is one sentence naming the process, the signal, the plug-in, the method and
the step. Plug-in objects handed to :func:`dpaudit.audit` (classes, instances) run in the caller's
process. dpaudit isolates plug-ins from mistakes, not from malice.

:class:`PluginPolicy` wraps a plug-in instance so that every member access is guarded; it also
refuses a plug-in with fewer than two arms, and always runs step by step (a plug-in's block path,
if it has one, is not one dpaudit has checked against its per-step path).
"""

from __future__ import annotations

import inspect
import io
import mmap
import os
import signal
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from types import FrameType
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO, TypeVar, cast

import numpy as np
import numpy.typing as npt

from dpaudit.errors import DPAuditError, InternalError, check_positive, shorten

if TYPE_CHECKING:
    from dpaudit.policies.base import PolicyLike

__all__ = ["guard", "PluginPolicy", "PluginExit", "wrap_plugin", "is_plugin_spec", "plugin_digest", "file_digest",
           "watch_signals", "call_limit", "current_call_limit", "time_box", "PluginTimeoutError", "TimeBoxExceeded",
           "timeout_error", "overdue", "explain_worker_death", "can_isolate", "run_isolated", "DEFAULT_CALL_TIMEOUT",
           "SCALED", "WATCHDOG_FIRST", "WATCHDOG_FLOOR", "WATCHDOG_FACTOR", "MAX_CALL_TIMEOUT", "check_call_timeout",
           "scaled_limit", "PluginStopped", "in_plugin_code", "own_numerics", "portable_error"]

#: what a function run elsewhere returns (:func:`run_isolated`)
R = TypeVar("R")
#: a signal handler that is a Python function (what :func:`watch_signals` wraps)
Handler = Callable[[int, "FrameType | None"], object]

_REAL_EXIT = os._exit
_LOCK = threading.Lock()
_DEPTH = 0
_SAVED_STDOUT: TextIO | None = None
_MISSING = object()
#: signals that reached this process while watched (:func:`watch_signals`), and how many watches are open
_SIGNALS_SEEN = 0
_WATCHING = 0
_WATCHED = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


@contextmanager
def watch_signals() -> Iterator[None]:
    """Count SIGINT, SIGTERM and SIGHUP before their handlers run (main thread; handlers that are Python
    functions, e.g. Python's own Ctrl-C handler or the CLI's), so that :func:`guard` can tell a real
    interruption from a ``KeyboardInterrupt`` raised by plug-in code. The handlers are restored after."""
    global _WATCHING
    installed: list[tuple[int, Handler, Handler]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in _WATCHED:
            old = signal.getsignal(sig)
            if not callable(old):
                continue  # SIG_DFL / SIG_IGN: nothing raises KeyboardInterrupt for it
            counted = _counting(old)
            signal.signal(sig, counted)
            installed.append((sig, counted, old))
    _WATCHING += 1
    try:
        yield
    finally:
        _WATCHING -= 1
        for sig, counted, old in reversed(installed):
            if signal.getsignal(sig) is counted:
                signal.signal(sig, old)


def _counting(old: Handler) -> Handler:
    """``old``, the signal's handler, after counting the signal (:func:`watch_signals`)."""

    def counted(signum: int, frame: FrameType | None) -> object:
        global _SIGNALS_SEEN
        _SIGNALS_SEEN += 1
        return old(signum, frame)

    return counted


def _a_signal(seen: int) -> bool:
    """Whether a ``KeyboardInterrupt`` is a real interruption: a signal counted since ``seen``; or, when
    nothing watches (a Python caller's own handlers), one Ctrl-C could have raised (not in a worker)."""
    if _SIGNALS_SEEN > seen:
        return True
    if _WATCHING > 0:
        return False
    try:
        return signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, None)  # workers ignore SIGINT
    except (ValueError, OSError):  # pragma: no cover
        return True


class PluginExit(BaseException):
    """Raised in place of ``os._exit(code)`` while plug-in code runs (a BaseException, like SystemExit,
    so the plug-in's own ``except Exception`` does not swallow it)."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


def _guarded_exit(code: int = 0) -> None:
    if _DEPTH > 0:
        raise PluginExit(code)
    _REAL_EXIT(code)


def is_plugin_spec(spec: object) -> bool:
    """Whether a policy spec names code outside dpaudit (``file.py:Class`` or ``module:Class``)."""
    return isinstance(spec, str) and ":" in spec


def plugin_digest(spec: str) -> str | None:
    """SHA-256 of a plug-in file's contents (None for registered policies and importable modules):
    part of a checkpoint's key, so editing the plug-in never resumes from its old pieces."""
    target = str(spec).rpartition(":")[0]
    if not is_plugin_spec(spec):
        return None
    path: str | None = target
    if not (target.endswith(".py") or "/" in target or "\\" in target):  # package.module: its source file
        import importlib.util

        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            found = None
        path = getattr(found, "origin", None) if found is not None else None
    return file_digest(path) if path else None


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """SHA-256 of a regular file's contents (None if it cannot be read)."""
    import hashlib
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


# ---- the per-call time limit (a watchdog) ----------------------------------------------------------

#: the watchdog by default (no --call-timeout): the limit of a call scales with the calls measured so far
SCALED = "scaled"
#: the scaled watchdog: before any call into plug-in code returned (in this process or the one it was forked
#: from) a call may run WATCHDOG_FIRST seconds; after, WATCHDOG_FACTOR times the slowest call measured, but
#: never less than WATCHDOG_FLOOR seconds (a call on a batch of runs larger than any measured: scaled by its runs)
WATCHDOG_FIRST = 60.0
WATCHDOG_FLOOR = 30.0
WATCHDOG_FACTOR = 100.0
#: the longest --call-timeout (seconds; about 11.6 days): the alarm timer cannot hold much more (1e10 overflows)
MAX_CALL_TIMEOUT = 1e6
#: kept for callers of dpaudit < 0.2: the default is now :data:`SCALED`, not a fixed number of seconds
DEFAULT_CALL_TIMEOUT = SCALED
_CALL_TIMEOUT: float | str | None = SCALED
#: the slowest outermost plug-in call measured in this process (seconds); the largest batch of runs a call
#: (reset, act, observe) was measured on, and the slowest per run of the calls on that batch: what the scaled
#: watchdog scales (a small batch's per-run time is mostly fixed cost, so only the largest batch's is scaled up)
_SLOWEST: float | None = None
_BATCH: int | None = None
_PER_RUN: float | None = None
#: the end (``time.monotonic()``) of the time box of an up-front estimate (:func:`time_box`), or None
_BOX_END: float | None = None
_BOX_SECONDS: float | None = None
_ARMED = False


class PluginTimeout(BaseException):
    """Raised by the watchdog's SIGALRM in plug-in code that ran past its limit (a BaseException, so the
    plug-in's own ``except Exception`` does not swallow it)."""


class PluginTimeoutError(DPAuditError):
    """A call into plug-in code ran past its limit (``--call-timeout``, or the scaled watchdog): one sentence
    naming the plug-in, the method, the step and the time it ran (``plugin``, ``method``, ``step``,
    ``seconds``)."""

    def __init__(self, message: str, plugin: str = "", method: str = "", step: int | None = None,
                 seconds: float = 0.0) -> None:
        super().__init__(message)
        self.plugin, self.method, self.step, self.seconds = plugin, method, step, seconds

    def __reduce__(self) -> tuple[type[PluginTimeoutError], tuple[str, str, str, int | None, float],
                                  dict[str, object]]:  # pickled from a worker process with its fields
        return (type(self), (str(self), self.plugin, self.method, self.step, self.seconds), self.__dict__)


class TimeBoxExceeded(PluginTimeoutError):
    """A call into plug-in code ran past the end of a :func:`time_box` (an up-front estimate's budget,
    not ``--call-timeout``): the caller decides what that means."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    if _ARMED and _DEPTH > 0:
        raise PluginTimeout()


def check_call_timeout(value: object, name: str = "--call-timeout") -> float | str:
    """``--call-timeout`` checked before any work: None (the scaled watchdog, :data:`SCALED`) or a number of
    seconds in (0, :data:`MAX_CALL_TIMEOUT`]; numpy numbers are numbers."""
    if value is None or value == SCALED:
        return SCALED
    return check_positive(name, value, maximum=MAX_CALL_TIMEOUT, unit=" of seconds")


@contextmanager
def call_limit(seconds: float | str | None) -> Iterator[None]:
    """Within it, a call into plug-in code that runs longer than ``seconds`` is stopped and reported:
    a number of seconds (``--call-timeout``), :data:`SCALED` (the default: the scaled watchdog) or None
    (no limit). Processes forked inside it (the engine's workers) keep the limit."""
    global _CALL_TIMEOUT
    saved = _CALL_TIMEOUT
    _CALL_TIMEOUT = seconds if seconds in (None, SCALED) else check_call_timeout(seconds)
    try:
        yield
    finally:
        _CALL_TIMEOUT = saved


def current_call_limit() -> float | str | None:
    """The per-call limit in force (:func:`call_limit`): seconds, :data:`SCALED`, or None."""
    return _CALL_TIMEOUT


def scaled_limit(runs: int | None = None) -> float:
    """The scaled watchdog's limit for the next call (on ``runs`` runs, or None for a call on no batch):
    :data:`WATCHDOG_FIRST` before any call returned; else :data:`WATCHDOG_FACTOR` times the slowest call
    measured, or, for a call on more runs than the largest batch measured, times the time per run on that
    batch times ``runs`` if that is more (a batch 100 times larger may take 100 times longer); never less
    than :data:`WATCHDOG_FLOOR`."""
    if _SLOWEST is None:
        return WATCHDOG_FIRST
    base = _SLOWEST
    if runs and _BATCH is not None and _PER_RUN is not None and runs > _BATCH:
        base = max(base, _PER_RUN * runs)
    return min(max(WATCHDOG_FLOOR, WATCHDOG_FACTOR * base), MAX_CALL_TIMEOUT)


def _measured(seconds: float, runs: int | None) -> None:
    """An outermost plug-in call returned after ``seconds`` (on ``runs`` runs): what the watchdog scales."""
    global _SLOWEST, _BATCH, _PER_RUN
    _SLOWEST = seconds if _SLOWEST is None else max(_SLOWEST, seconds)
    if runs:
        per = seconds / runs
        if _BATCH is None or runs > _BATCH:
            _BATCH, _PER_RUN = runs, per
        elif runs == _BATCH:
            _PER_RUN = max(_PER_RUN or 0.0, per)


@contextmanager
def time_box(seconds: float) -> Iterator[None]:
    """Within it, plug-in calls together may run ``seconds``: a call still running at the end raises
    :class:`TimeBoxExceeded` (the up-front estimate of an audit uses it, so that a slow constructor or
    ``act`` cannot make the estimate itself take minutes). Nested boxes keep the earlier end."""
    global _BOX_END, _BOX_SECONDS
    saved = _BOX_END, _BOX_SECONDS
    end = time.monotonic() + float(seconds)
    if _BOX_END is None or end < _BOX_END:
        _BOX_END, _BOX_SECONDS = end, float(seconds)
    try:
        yield
    finally:
        _BOX_END, _BOX_SECONDS = saved


def _limit(runs: int | None) -> tuple[float | None, bool, bool]:
    """(the limit of the next outermost call in seconds or None, whether it is a time box's end, whether it
    is the scaled watchdog's)."""
    scaled = _CALL_TIMEOUT == SCALED
    limit = scaled_limit(runs) if scaled else _CALL_TIMEOUT  # type: ignore[assignment]
    boxed = False
    if _BOX_END is not None:
        left = max(_BOX_END - time.monotonic(), 1e-3)
        if limit is None or left < limit:
            limit, boxed, scaled = left, True, False
    return limit, boxed, scaled  # type: ignore[return-value]


def _arm(limit: float | None) -> bool:
    """Start the watchdog for an outermost plug-in call; whether it runs (not without a limit, outside the
    main thread, or when SIGALRM is already someone else's)."""
    if limit is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGALRM)
    if current is not _alarm:
        if current not in (signal.SIG_DFL, None):
            return False  # the program's own alarm: leave it alone
        signal.signal(signal.SIGALRM, _alarm)
    global _ARMED
    _ARMED = True
    signal.setitimer(signal.ITIMER_REAL, limit)
    return True


def _disarm() -> None:
    global _ARMED
    _ARMED = False  # first: an alarm from here on is ignored
    signal.setitimer(signal.ITIMER_REAL, 0)


def _called(method: str, step: int | None) -> str:
    """The call, as in "did not return from act at step 3"."""
    if method in ("import", "__init__"):
        return "its import" if method == "import" else "its constructor"
    return method + (f" at step {step}" if step is not None else "")


def timeout_error(plugin: str, method: str, step: int | None, limit: float, ran: float,
                  scaled: bool = False) -> PluginTimeoutError:
    """The one sentence for a plug-in call that did not return within ``limit`` seconds: ``--call-timeout``,
    or (``scaled``) the scaled watchdog's limit."""
    if scaled:
        why = (f"the watchdog allows a call {WATCHDOG_FACTOR:g} times the slowest it has measured, at least "
               f"{WATCHDOG_FLOOR:g} s ({WATCHDOG_FIRST:g} s before any call returned), so give --call-timeout "
               "SECONDS (call_timeout= in dpaudit.audit) if the call is only slow")
    else:
        why = ("a call into a plug-in may take at most --call-timeout seconds (call_timeout= in dpaudit.audit), so "
               "raise it if the call is only slow")
    return PluginTimeoutError(
        f"plug-in {plugin} did not return from {_called(method, step)} within {limit:.3g} s (stopped after "
        f"{ran:.1f} s); {why}.", plugin, method, step, ran)


def _grace(limit: float) -> float:
    """How long past its limit a call may stay stuck (in C code, where SIGALRM cannot stop it) before its
    process is killed from outside (:func:`overdue`, :func:`run_isolated`)."""
    return min(max(1.0, 0.25 * limit), 60.0)


# ---- notes of the running call, for a process that dies (or hangs) in plug-in code -----------------

_SLOTS, _SLOT = 256, 256
_HEAD = struct.Struct("<qBHdd")  # pid, state (0 idle, 1 running, 2 stopped by the watchdog), length, start, limit
_IDLE, _RUNNING, _STOPPED = 0, 1, 2
_MAIN_PID = os.getpid()
try:  # anonymous and shared: a forked process writes, its parent reads after it died or while it hangs
    _NOTES: mmap.mmap | None = mmap.mmap(-1, _SLOTS * _SLOT)
except (OSError, ValueError):  # pragma: no cover
    _NOTES = None


def _note(plugin: str, method: str, step: int | None, limit: float | None, scaled: bool = False) -> None:
    """Record the call this process is in (only in processes other than the one that imported dpaudit:
    the engine's workers and :func:`run_isolated`'s process): plug-in, method, step, its limit and whether
    that is the scaled watchdog's."""
    pid = os.getpid()
    if _NOTES is None or pid == _MAIN_PID:
        return
    text = (f"{'s' if scaled else '-'}{plugin}\x00{method}\x00{'' if step is None else step}"
            .encode()[: _SLOT - _HEAD.size])
    at = (pid % _SLOTS) * _SLOT
    _HEAD.pack_into(_NOTES, at, pid, _IDLE, 0, 0.0, 0.0)
    _NOTES[at + _HEAD.size:at + _HEAD.size + len(text)] = text
    _HEAD.pack_into(_NOTES, at, pid, _RUNNING, len(text), time.monotonic(), float(limit or 0.0))


def _unnote() -> None:
    pid = os.getpid()
    if _NOTES is None or pid == _MAIN_PID:
        return
    at = (pid % _SLOTS) * _SLOT
    if _HEAD.unpack_from(_NOTES, at)[0] == pid:
        _HEAD.pack_into(_NOTES, at, pid, _IDLE, 0, 0.0, 0.0)


class _Note(NamedTuple):
    """The call a process is (or was) in, as its note says (:func:`_note`)."""

    state: int  # _RUNNING, or _STOPPED by the watchdog
    plugin: str
    method: str
    step: int | None
    started: float  # time.monotonic() at its start
    limit: float  # seconds; 0: no limit
    scaled: bool  # the limit is the scaled watchdog's


def _read_note(pid: object, since: float = 0.0) -> _Note | None:
    """The note of the call process ``pid`` is (or was) in, if it started after ``since`` (a note older than
    the process is another process's of the same id); None if none."""
    if _NOTES is None or not isinstance(pid, int) or isinstance(pid, bool):
        return None
    at = (pid % _SLOTS) * _SLOT
    for _ in range(3):  # the process may be writing its next note meanwhile: a read is kept if the head held
        head = _HEAD.unpack_from(_NOTES, at)
        owner, state, n, started, limit = head
        if owner != pid or state == _IDLE or started < since:
            return None
        parts = bytes(_NOTES[at + _HEAD.size:at + _HEAD.size + n]).decode(errors="replace").split("\x00")
        if _HEAD.unpack_from(_NOTES, at) == head and len(parts) == 3 and parts[0][:1] in ("s", "-"):
            plugin, method, step = parts
            return _Note(state, plugin[1:], method, (int(step) if step.isdigit() else None), started, limit,
                         plugin[:1] == "s")
    return None  # a note rewritten under every read: the process is busy, not stuck in one call


def overdue(pid: int, since: float = 0.0) -> bool:
    """Whether process ``pid`` (started at ``since``, ``time.monotonic()``) has been stuck in one plug-in
    call past its limit and the grace after it (stuck in C code, where SIGALRM cannot stop it). If so it
    is marked, so that :func:`explain_worker_death` tells the timeout once the caller has killed it."""
    note = _read_note(pid, since)
    if note is None or note.state != _RUNNING or note.limit <= 0:
        return False
    if time.monotonic() - note.started <= note.limit + _grace(note.limit):
        return False
    at = (pid % _SLOTS) * _SLOT
    _NOTES[at + 8] = _STOPPED  # type: ignore[index]  # the state byte, right after the pid
    return True


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return "an unknown signal"


def _death(pid: object, code: object, who: str, since: float = 0.0) -> DPAuditError | None:
    """The sentence for process ``pid`` (``who``) that ended with ``code`` (-N: signal N) in plug-in code,
    or that the watchdog stopped; None when it was not in plug-in code."""
    note = _read_note(pid, since)
    if note is None:
        return None
    state, plugin, method, step, started, limit, scaled = note
    if state == _STOPPED:
        return timeout_error(plugin, method, step, limit, time.monotonic() - started, scaled)
    if isinstance(code, int) and code >= 0:
        return DPAuditError(f"{who} exited with status {code} on its own while plug-in {plugin} ran "
                            f"{_where(method, step)}, so its code (or C code it calls) ended that process (os._exit, "
                            "posix._exit or a C exit()); a plug-in must raise an exception, not end its process.")
    how = (f"was killed by signal {-code} ({_signal_name(-code)})" if isinstance(code, int)
           else f"ended with status {code}")
    return DPAuditError(f"{who} {how} while plug-in {plugin} ran {_where(method, step)}, so its code (or C code it "
                        "calls) crashed or ended that process; rerun under python -X faulthandler -m dpaudit to see "
                        "where.")


def explain_worker_death(exc: BaseException) -> DPAuditError | None:
    """The engine's error for a worker process that died (``worker_pid``, ``worker_status``, ``worker_since``),
    told again naming the plug-in call it died in; None when it was not running plug-in code."""
    return _death(getattr(exc, "worker_pid", None), getattr(exc, "worker_status", None), "a worker process",
                  getattr(exc, "worker_since", 0.0))


# ---- plug-in code in a process of its own -------------------------------------------------------------

def can_isolate() -> bool:
    """Whether :func:`run_isolated` can run work in a forked process here (not on Windows)."""
    return hasattr(os, "fork") and "fork" in __import__("multiprocessing").get_all_start_methods()


def _isolated_main(conn: Connection, parent: int, fn: Callable[..., object], args: tuple[object, ...],
                   kwargs: dict[str, object]) -> None:
    """The isolated process: signals come from the parent only (SIGUSR1: stop as on Ctrl-C), it dies with
    the parent, runs ``fn`` and sends back ("progress", message) lines and then its result."""
    global _SIGNALS_SEEN
    for sig in _WATCHED:
        signal.signal(sig, signal.SIG_IGN)  # a Ctrl-C reaches the whole process group: the parent decides

    def stop(signum: int, frame: FrameType | None) -> None:
        global _SIGNALS_SEEN
        _SIGNALS_SEEN += 1  # a real interruption, also inside plug-in code (guard)
        raise KeyboardInterrupt

    signal.signal(signal.SIGUSR1, stop)
    if "faulthandler" not in sys._xoptions and not os.environ.get("PYTHONFAULTHANDLER"):
        # the parent names a crash of plug-in code in one sentence; a handler inherited from a host (pytest
        # enables one) would add a C-level traceback to stderr. Asked for with -X faulthandler, it stays.
        import faulthandler

        faulthandler.disable()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover
            pass
    if os.getppid() != parent:
        _REAL_EXIT(1)
    at = (os.getpid() % _SLOTS) * _SLOT
    if _NOTES is not None:  # a note another process of this id left is not ours
        _HEAD.pack_into(_NOTES, at, os.getpid(), _IDLE, 0, 0.0, 0.0)

    def progress(message: str) -> None:
        conn.send(("progress", message))

    class Forward(io.TextIOBase):
        """What the process writes to sys.stdout / sys.stderr, written by the parent to its own."""

        def __init__(self, kind: str) -> None:
            self.kind = kind

        def writable(self) -> bool:
            return True

        def write(self, text: str) -> int:
            if text:
                conn.send((self.kind, str(text)))
            return len(text)

    sys.stdout, sys.stderr = Forward("stdout"), Forward("stderr")
    known = frozenset(sys.modules)  # the parent's modules: what it can unpickle without importing anything

    try:
        reply: tuple[str, object] = ("ok", fn(*args, progress=progress, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        reply = ("err", portable_error(exc, known))
    try:
        try:
            conn.send(reply)
        except Exception as exc:  # what does not pickle goes back as one sentence
            text = " ".join(str(reply[1]).split())[:300]
            conn.send(("err", DPAuditError(text) if isinstance(reply[1], DPAuditError) else
                       InternalError(text) if isinstance(reply[1], InternalError) else
                       RuntimeError(f"{type(reply[1]).__name__}: {text} ({type(exc).__name__} sending it back)")))
    finally:
        _REAL_EXIT(0)


def portable_error(exc: BaseException, known: Collection[str]) -> BaseException:
    """``exc`` as it may cross to a parent process whose modules are ``known``: itself when its class lives in
    one of them, else one sentence with its type's name and its message, so the parent never has to import
    (or fail to import) the class: a plug-in file's own exception class (``class Boom(BaseException)``)
    exists only in the process that imported the plug-in. Raised by plug-in code, it is the plug-in's
    error (a :class:`PluginStopped`); from elsewhere, an internal error (a RuntimeError) naming it."""
    cls = type(exc)
    mod = sys.modules.get(cls.__module__)
    # a plug-in module may be in the parent's modules at the fork and gone (or another file's) when it
    # unpickles: its classes never cross, whatever the parent had
    plugin = getattr(mod, "__dpaudit_mtime__", None) is not None or cls.__module__.startswith("dpaudit_plugin_")
    if cls.__module__ in known and not plugin:
        return exc
    text = shorten(exc, 200, as_text=True).rstrip(".") or "(no message)"
    if plugin:
        kind = "an Exception" if isinstance(exc, Exception) else "a BaseException, not an Exception"
        err: BaseException = PluginStopped(
            f"plug-in code raised {cls.__qualname__} ({kind}, defined in the plug-in's module) outside any call "
            f"dpaudit names: {text} (rerun with dpaudit --debug for its traceback).")
        err.plugin_traceback = "".join(traceback.format_exception(exc))  # type: ignore[attr-defined]
        return err
    return RuntimeError(f"{cls.__qualname__} (from {cls.__module__}): {text}")


def _passed_on(kind: object, value: object, progress: Callable[[str], object] | None) -> bool:
    """Whether ``(kind, value)``, a message of :func:`run_isolated`'s process, was a progress line or output it
    wrote, passed on here (to ``progress``; to this process's stdout or stderr)."""
    if kind == "progress":
        if progress is not None:
            progress(cast(str, value))
        return True
    if kind in ("stdout", "stderr"):
        stream = sys.stdout if kind == "stdout" else sys.stderr
        stream.write(cast(str, value))
        stream.flush()
        return True
    return False


def _isolated_death(pid: int | None, code: int, what: str, since: float) -> DPAuditError:
    """The sentence for :func:`run_isolated`'s process (``pid``, started at ``since``) that ended with ``code``
    before it answered: in plug-in code (:func:`_death`), or outside it."""
    err = _death(pid, code, f"{what}'s process", since)
    if err is None:
        if code < 0:
            err = DPAuditError(f"{what}'s process was killed by signal {-code} ({_signal_name(-code)}) "
                               "outside plug-in code (out of memory, or killed from outside).")
        else:  # dpaudit's own code there ends only after sending its answer: code it ran ended it
            err = DPAuditError(f"{what}'s process exited with status {code} on its own before it "
                               "answered, outside any plug-in call dpaudit watches, which dpaudit never "
                               "does: plug-in code ended it (os._exit or posix._exit, from a thread it "
                               "started, say).")
    return err


def run_isolated(fn: Callable[..., R], *args: object, progress: Callable[[str], object] | None = None,
                 what: str = "the audit", **kwargs: object) -> R:
    """``fn(*args, progress=..., **kwargs)`` in a forked process, so that plug-in code that crashes the
    interpreter (a segfault in C code, ``abort()``, a signal to itself) or hangs in C code ends ``what``
    with one sentence naming the plug-in, the method and the step, never dpaudit itself.

    Its result (or exception) comes back pickled; ``progress`` messages are passed on as they come. A
    ``KeyboardInterrupt`` here (Ctrl-C, or SIGTERM/SIGHUP as the CLI maps them) stops the process as
    Ctrl-C stops an audit (it reports what had finished); a second one kills it. A call stuck past its
    limit (:func:`call_limit`) and the grace after it is killed and reported as a timeout.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe(duplex=False)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # pragma: no cover
            pass
    proc = ctx.Process(target=_isolated_main, args=(there, os.getpid(), fn, args, kwargs), daemon=False)
    since = time.monotonic()
    proc.start()
    there.close()
    stopping = False
    killed_for_time = False
    try:
        while True:
            try:
                ready = wait([here, proc.sentinel], timeout=0.25)
                if here in ready:
                    try:
                        kind, value = here.recv()
                    except (EOFError, OSError):
                        kind, value = None, None
                    if _passed_on(kind, value, progress):
                        continue
                    if kind == "ok":
                        return value
                    if kind == "err":
                        raise value
                if here not in ready and proc.sentinel not in ready:
                    if not killed_for_time and overdue(proc.pid, since):
                        killed_for_time = True
                        proc.kill()
                    continue
                proc.join(1.0)
                if proc.exitcode is None:  # the pipe closed but the process lives on: wait for its end
                    continue
                raise _isolated_death(proc.pid, proc.exitcode, what, since)
            except KeyboardInterrupt:
                if stopping or not proc.is_alive():
                    raise
                stopping = True  # the first stop: the process reports what it finished
                try:
                    os.kill(proc.pid, signal.SIGUSR1)
                except OSError:  # pragma: no cover - already gone
                    pass
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(2.0)
        here.close()


#: the floating-point error state (``np.seterr``) plug-in code last left, or None while it changed nothing:
#: installed around each plug-in call and taken off after it, so neither side's state reaches the other
_PLUGIN_ERR: dict[str, str] | None = None
_SAVED_ERR: dict[str, str] | None = None
#: dpaudit's recursion limit while the outermost plug-in call runs: put back after it if plug-in code lowered it
_SAVED_RECURSION: int | None = None


def _enter() -> bool:
    """Enter plug-in code; whether this is the outermost call."""
    global _DEPTH, _SAVED_STDOUT, _SAVED_ERR, _SAVED_RECURSION
    with _LOCK:
        outermost = _DEPTH == 0
        if outermost:
            _SAVED_STDOUT = sys.stdout
            sys.stdout = sys.stderr
            _SAVED_RECURSION = sys.getrecursionlimit()
            os._exit = _guarded_exit
            _SAVED_ERR = np.geterr()
            if _PLUGIN_ERR is not None:
                np.seterr(**_PLUGIN_ERR)
        _DEPTH += 1
    return outermost


def _leave() -> None:
    global _DEPTH, _SAVED_STDOUT, _SAVED_ERR, _PLUGIN_ERR, _SAVED_RECURSION
    with _LOCK:
        _DEPTH -= 1
        if _DEPTH == 0:
            os._exit = _REAL_EXIT
            sys.stdout = cast(TextIO, _SAVED_STDOUT)  # even if the plug-in replaced it (set by the outermost _enter)
            _SAVED_STDOUT = None
            if _SAVED_RECURSION is not None and sys.getrecursionlimit() < _SAVED_RECURSION:
                sys.setrecursionlimit(_SAVED_RECURSION)  # dpaudit's stack was within it before the call
            _SAVED_RECURSION = None
            now = np.geterr()
            if _SAVED_ERR is not None and (now != _SAVED_ERR or _PLUGIN_ERR is not None):
                _PLUGIN_ERR = now  # the plug-in's np.seterr stays the plug-in's
                np.seterr(**_SAVED_ERR)
            _SAVED_ERR = None


#: numpy's default floating-point error state: what dpaudit's numerics are written and tested under
NUMPY_ERRORS = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def own_numerics() -> np.errstate:
    """A context manager: dpaudit's computations under numpy's default floating-point error state, whatever
    the caller (``np.seterr(all="raise")`` before ``dpaudit.audit``) or a plug-in set; an underflow that
    dpaudit's numerics expect is never an error. :func:`dpaudit.runner.run` and :func:`dpaudit.account` run
    under it, and :func:`guard` keeps a plug-in's own state to its calls."""
    return np.errstate(**NUMPY_ERRORS)


def in_plugin_code() -> bool:
    """Whether a :func:`guard` is open in this process (plug-in code is running further up the stack)."""
    return _DEPTH > 0


def _where(method: str, step: int | None) -> str:
    if method == "import":
        return "while being imported"
    if method == "__init__":
        return "in its constructor"
    return f"in {method}" + (f" at step {step}" if step is not None else "")


class PluginStopped(DPAuditError):
    """Plug-in code ended its call in a way no caller may handle as an ordinary failure: an exit
    (``sys.exit``, ``os._exit``), a ``KeyboardInterrupt`` of its own or another ``BaseException``."""


def _traced(err: DPAuditError, exc: BaseException) -> DPAuditError:
    err.plugin_traceback = "".join(traceback.format_exception(exc))  # type: ignore[attr-defined]
    return err


@contextmanager
def guard(plugin: str, method: str, step: int | None = None, *, runs: int | None = None,
          passthrough: bool = False) -> Iterator[None]:
    """Run plug-in code: exits and exceptions become one-sentence :class:`DPAuditError`\\ s, prints go
    to stderr. ``KeyboardInterrupt`` from a real signal (Ctrl-C, and SIGTERM/SIGHUP as the CLI maps them)
    passes through; one the plug-in raised itself is an error naming the method and the step.

    ``runs``: the call works on a batch of that many runs (``reset``, ``act``, ``observe``), so the scaled
    watchdog scales its limit with the batch (:func:`scaled_limit`). ``passthrough``: ordinary exceptions
    (``Exception``) pass unchanged, for a caller that words them itself (the per-run adapter names the
    argument order that would run); exits, timeouts and other ``BaseException``\\ s are still this
    guard's. The plug-in's ``np.seterr`` is kept apart from dpaudit's (installed around its calls only).
    Only the outermost guard of nested ones times its call, and reports its timeout."""
    seen = _SIGNALS_SEEN
    outermost = _enter()
    armed = False
    limit, boxed, scaled = None, False, False
    timed_out = False
    started = time.monotonic()
    try:
        if outermost:
            limit, boxed, scaled = _limit(runs)
            _note(plugin, method, step, limit, scaled)
            armed = _arm(limit)
            started = time.monotonic()
        yield
    except (DPAuditError, InternalError):
        raise  # already one sentence: the user's (a nested guard's, an adapter's), or dpaudit's own bug
    except PluginTimeout as exc:
        if not outermost:
            raise  # the guard that armed the watchdog reports it
        timed_out = True
        ran = time.monotonic() - started
        if boxed:
            err: DPAuditError = TimeBoxExceeded(
                f"plug-in {plugin} was still in {_called(method, step)} at the end of a "
                f"{_BOX_SECONDS or limit:g} s time box (after {ran:.1f} s).", plugin, method, step, ran)
        else:
            err = timeout_error(plugin, method, step, limit if limit is not None else ran, ran, scaled)
        raise _traced(err, exc) from None
    except KeyboardInterrupt as exc:
        if _a_signal(seen):
            raise
        raise _traced(PluginStopped(
            f"plug-in {plugin} raised KeyboardInterrupt {_where(method, step)} while no Ctrl-C or signal reached "
            "dpaudit, so it is the plug-in's own error, not an interruption (rerun with dpaudit --debug for its "
            "traceback)."), exc) from None
    except SystemExit as exc:
        raise _traced(PluginStopped(
            f"plug-in {plugin} called sys.exit({exc.code!r}) {_where(method, step)}; a plug-in must raise an "
            "exception, not end dpaudit, so its exit status cannot pass for a verdict."), exc) from None
    except PluginExit as exc:
        raise _traced(PluginStopped(
            f"plug-in {plugin} called os._exit({exc.code!r}) {_where(method, step)}; a plug-in must raise an "
            "exception, not end dpaudit, so its exit status cannot pass for a verdict."), exc) from None
    except Exception as exc:
        if passthrough:
            raise
        msg = shorten(exc, 200, as_text=True) or "(no message)"
        raise _traced(DPAuditError(
            f"plug-in {plugin} raised {type(exc).__name__} {_where(method, step)}: {msg.rstrip('.')} (rerun with "
            "dpaudit --debug for its traceback)."), exc) from None
    except BaseException as exc:  # GeneratorExit or the plug-in's own BaseException subclass: named, never pickled
        # (no guard of dpaudit's is open across a yield, so a GeneratorExit here is the plug-in's own)
        msg = shorten(exc, 200, as_text=True) or "(no message)"
        raise _traced(PluginStopped(
            f"plug-in {plugin} raised {type(exc).__name__} (a BaseException, not an Exception) "
            f"{_where(method, step)}: {msg.rstrip('.')}; a plug-in must raise an Exception (rerun with dpaudit "
            "--debug for its traceback)."), exc) from None
    finally:
        if armed:
            _disarm()
        if outermost:
            _unnote()
            if not timed_out:
                _measured(time.monotonic() - started, runs)
        _leave()


def _step_of(method: str, args: tuple[object, ...]) -> int | None:
    if method in ("act", "observe") and args:
        t = args[0]
        if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
            return int(t)
    return None


class PluginPolicy:
    """A plug-in policy instance behind :func:`guard`: every member access and call is isolated."""

    #: dpaudit's block path and hoisted reward check are for its own verified policies only
    fast_path = False
    cycle_path = False
    valid_actions = False

    def __init__(self, inner: PolicyLike, plugin: str) -> None:
        self._inner = inner
        self._plugin = plugin
        self._runs: int | None = None  # the batch reset last made: act and observe work on it (the watchdog)
        with guard(plugin, "n_arms"):
            k = getattr(inner, "n_arms", None)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise DPAuditError(f"plug-in {plugin} has n_arms = {k!r}; a policy must say how many arms it has, "
                               "as an integer >= 2.")
        if k < 2:
            raise DPAuditError(f"plug-in {plugin} has n_arms = {int(k)}; a bandit policy needs at least 2 arms, "
                               "so there is no choice to audit.")
        self.n_arms = int(k)
        try:
            sig = inspect.signature(inner.reset).parameters
            self._reset_kw = "record" in sig or any(p.kind == p.VAR_KEYWORD for p in sig.values())
        except (TypeError, ValueError, AttributeError):
            self._reset_kw = False

    # ---- the contract ------------------------------------------------------------------
    @property
    def wrapped(self) -> PolicyLike:
        """The plug-in instance (``offers_blocks`` looks at its type: plug-ins run step by step)."""
        return self._inner

    @property
    def claim(self) -> object:
        if "_claim" in self.__dict__:  # given on the command line (--claim), in place of the plug-in's own
            return self.__dict__["_claim"]
        with guard(self._plugin, "claim"):
            return getattr(self._inner, "claim", None)

    @claim.setter
    def claim(self, value: object) -> None:
        self.__dict__["_claim"] = value

    def reset(self, n_runs: int, rng: np.random.Generator, **kw: object) -> None:
        runs = int(n_runs) if isinstance(n_runs, (int, np.integer)) and not isinstance(n_runs, bool) else None
        self._runs = runs if runs is not None and runs > 0 else None
        with guard(self._plugin, "reset", runs=self._runs):
            if self._reset_kw:
                self._inner.reset(n_runs, rng, **kw)
            else:
                self._inner.reset(n_runs, rng)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        with guard(self._plugin, "act", _step_of("act", (t,)), runs=self._runs):
            return self._inner.act(t, arms)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        with guard(self._plugin, "observe", _step_of("observe", (t,)), runs=self._runs):
            self._inner.observe(t, actions, rewards)

    def run_copies(self, tables: npt.ArrayLike, which: npt.ArrayLike | None = None) -> np.ndarray:
        """The per-run adapter's whole runs (``PerRun.run_copies``): one call doing the work of T rounds of
        ``act`` and ``observe``, so the scaled watchdog counts its run-rounds as the runs of its batch."""
        fn: Callable[[npt.ArrayLike, npt.ArrayLike | None], np.ndarray] = self._inner.run_copies
        rounds = int(np.shape(tables)[-2]) if np.ndim(tables) >= 2 else 1
        cells = self._runs * rounds if self._runs else None
        with guard(self._plugin, "run_copies", runs=cells):
            return fn(tables, which)

    def play_tables(self, inputs: np.ndarray, which: np.ndarray, list_input: bool) -> np.ndarray:
        """The loop adapter's whole-table play (``protocols.base.plays_tables``): a call on the batch of runs,
        so the scaled watchdog scales its limit with the batch, as for ``act``."""
        with guard(self._plugin, "play_tables", runs=self._runs):
            play: Callable[[np.ndarray, np.ndarray, bool], np.ndarray] = self._inner.play_tables
            return play(inputs, which, list_input)

    # ---- everything else the protocols may ask for ---------------------------------------
    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")  # absent while unpickling: no forwarding then
        if inner is None or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        plugin = self.__dict__.get("_plugin", "?")
        with guard(plugin, name):
            value = getattr(inner, name, _MISSING)  # a property's own AttributeError also means "absent"
        if value is _MISSING:
            raise AttributeError(name)
        if callable(value) and not isinstance(value, type):
            def call(*args: object, **kwargs: object) -> object:
                with guard(plugin, name, _step_of(name, args)):
                    return value(*args, **kwargs)
            call.__name__ = name
            return call
        return value

    def __repr__(self) -> str:
        return f"PluginPolicy({self._plugin})"


def wrap_plugin(policy: PolicyLike, plugin: str) -> PluginPolicy:
    """Wrap a plug-in instance (idempotent)."""
    return policy if isinstance(policy, PluginPolicy) else PluginPolicy(policy, plugin)
