"""Where an audit's independent pieces run: in this process, on local processes, or on any Executor.

An audit is many independent pieces (ranking one candidate pair, counting one chunk of fresh
views, one chunk of likelihood runs), each with its own generator from ``SeedSequence.spawn``. So
the results are the same whoever runs the pieces and in whatever order they finish; the tests
check that a serial, a two-process, a thread-pool and a Dask audit give the same report.

* ``Engine()`` (one worker) runs every piece here, in order;
* ``Engine(workers=N)`` runs them on N local processes (``dpaudit check policy`` uses one per core);
* ``Engine(executor=ex)`` on any :class:`concurrent.futures.Executor`, for example a Dask cluster's
  ``client.get_executor()`` (:func:`dask_executor`, ``--scheduler tcp://HOST:PORT``) when one machine
  is not enough. Each task works on its own copy of its inputs, so executors whose workers share
  memory (threads) are safe too.
* ``Engine(..., checkpoint=Checkpoint(DIR, key))`` records each finished piece on disk as it
  arrives and, when the same audit is run again, reuses it instead of recomputing (:class:`Checkpoint`).

Local workers are a small pool of forked processes that dpaudit owns (not a
``ProcessPoolExecutor``, whose management thread could hang the interpreter's exit after an
interrupted run, ``InvalidStateError: CANCELLED``). Each worker ignores SIGINT, SIGTERM and SIGHUP
(the parent handles them: it kills the workers with SIGKILL and reports what had finished) and dies
with its parent (``prctl(PR_SET_PDEATHSIG)`` on Linux, a watcher thread elsewhere). A worker that
dies mid-task is reported as an error, never waited for. Every worker, and the CLI,
:func:`dpaudit.check.audit_policy` and :func:`dpaudit.simulate.simulate`, keep BLAS to one thread
(:func:`one_blas_thread`). An executor's worker whose environment fixed glibc's malloc thresholds (a
Dask nanny sets ``MALLOC_TRIM_THRESHOLD_``) gets glibc's adaptive values back for dpaudit's tasks
(:func:`_roomy_malloc`): with the fixed ones the pieces ran about twice as long as in dpaudit's own workers.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import json
import multiprocessing
import os
import pickle
import signal
import stat
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, CancelledError, Executor, Future, wait
from contextlib import AbstractContextManager
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    import ctypes

from dpaudit.errors import DPAuditError, check_int, shorten

__all__ = ["Engine", "SERIAL", "Checkpoint", "default_workers", "progress_counter", "one_blas_thread",
           "kill_all_workers", "dask_executor"]

#: what a task returns (:meth:`Engine.map` gives the results of one function, in task order)
T = TypeVar("T")
#: the arguments of one task, ``fn(*args)``
TaskArgs = tuple[object, ...]


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def one_blas_thread() -> AbstractContextManager[object]:
    """A context manager inside which BLAS (OpenBLAS, MKL) uses one thread.

    dpaudit's matrices are tiny (d x d with d around 3, batched over runs), where BLAS threads only
    add overhead: on 2 cores the default AdaC-OFUL audit takes 40 s with OpenBLAS's threads and
    19.5 s without, and batched OFUL steps run 2.2e6 instead of 9.5e5 run-steps per second. One
    thread per process also leaves the cores to the engine's workers.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


# ---- local worker processes ---------------------------------------------------------------------

_WORKER_LIMITS: AbstractContextManager[object] | None = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), else watch the parent."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):  # pragma: no cover - no prctl
            armed = False
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)
    if not armed:  # pragma: no cover - not Linux
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(0)

        threading.Thread(target=watch, daemon=True).start()


def _init_worker(parent_pid: int) -> None:
    """Worker processes: signals are the parent's to handle; die with the parent; BLAS on one thread."""
    global _WORKER_LIMITS
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    _WORKER_LIMITS = one_blas_thread()


class _RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process (attached as the cause)."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


#: the modules a worker had when it was forked: the parent has them too, so it can unpickle their classes
_KNOWN_AT_FORK: frozenset[str] = frozenset()


def _portable(exc: BaseException) -> BaseException:
    """An exception that survives pickling in the parent, with its traceback text kept: a class from a
    module the worker imported after the fork (a plug-in file's own ``class Boom(BaseException)``) is
    named by type and message instead, since the parent may not have that module."""
    tb = "".join(traceback.format_exception(exc))
    cls = type(exc)
    try:
        if (_KNOWN_AT_FORK and cls.__module__ not in _KNOWN_AT_FORK) or cls.__module__.startswith("dpaudit_plugin_"):
            raise TypeError(f"{cls.__module__} may not exist in the parent")
        pickle.loads(pickle.dumps(exc))
        out = exc
    except Exception:
        text = " ".join(str(exc).split())[:200] or "(no message)"
        if isinstance(exc, DPAuditError):  # one of dpaudit's own errors, from a module loaded after the fork
            out = DPAuditError(str(exc))
        elif cls.__module__.startswith("dpaudit_plugin_"):
            kind = "an Exception" if isinstance(exc, Exception) else "a BaseException, not an Exception"
            out = DPAuditError(f"plug-in code raised {cls.__qualname__} ({kind}, defined in the plug-in's module): "
                               f"{text} (rerun with dpaudit --debug for its traceback).")
        else:
            out = RuntimeError(f"{cls.__name__}: {text}")
    try:
        out._dpaudit_remote_tb = tb  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover
        pass
    return out


def _worker_main(conn: Connection, parent_pid: int) -> None:
    global _KNOWN_AT_FORK
    _KNOWN_AT_FORK = frozenset(sys.modules)
    _init_worker(parent_pid)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg is None:
            break
        fn, args = msg
        try:
            reply: tuple[str, object] = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            reply = ("err", _portable(exc))
        try:
            conn.send(reply)
        except Exception as exc:  # the result would not pickle
            conn.send(("err", _portable(RuntimeError(f"the result of {getattr(fn, '__name__', 'a task')} cannot be "
                                                     f"sent back ({type(exc).__name__}: {exc})"))))


class _LocalPool:
    """N forked worker processes, each fed one task at a time over its own pipe."""

    def __init__(self, n: int, watchdog: Callable[[int, float], bool] | None = None) -> None:
        self.watchdog = watchdog
        self.since = time.monotonic()
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.workers: list[tuple[BaseProcess, Connection]] = []
        me = os.getpid()
        for _ in range(n):
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child_end, me), daemon=True)
            proc.start()
            child_end.close()
            self.workers.append((proc, parent_end))
        _LIVE_POOLS.add(self)

    def pids(self) -> list[int]:
        return [p.pid for p, _ in self.workers if p.pid is not None]  # started: each has its pid

    def run(self, fn: Callable[..., T], tasks: Sequence[tuple[int, TaskArgs]],
            deliver: Callable[[int, T], None]) -> None:
        queue = deque(tasks)
        idle = list(range(len(self.workers)))
        busy: dict[int, int] = {}  # worker -> task index
        name = getattr(fn, "__name__", "a task")
        while queue or busy:
            while queue and idle:
                w = idle.pop()
                i, args = queue.popleft()
                try:
                    self.workers[w][1].send((fn, args))
                except (pickle.PicklingError, TypeError, AttributeError) as exc:
                    raise DPAuditError(f"the inputs of {name} cannot be sent to worker processes "
                                       f"({type(exc).__name__}: {exc}); run with --workers 1.") from None
                busy[w] = i
            waits: dict[Connection | int, int] = {self.workers[w][1]: w for w in busy}
            waits.update({self.workers[w][0].sentinel: w for w in busy})
            ready_now = wait_connections(list(waits), timeout=None if self.watchdog is None else 0.5)
            if not ready_now and self.watchdog is not None:
                for w in busy:  # a worker stuck in one call (in C code) past its limit: killed, then reported
                    proc = self.workers[w][0]
                    if proc.pid is not None and self.watchdog(proc.pid, self.since):
                        proc.kill()
            for ready in ready_now:
                w = waits[ready]  # type: ignore[index]  # wait() returns some of what it was given
                if w not in busy:
                    continue
                proc, conn = self.workers[w]
                try:
                    status, value = conn.recv() if conn.poll() else (None, None)
                except (EOFError, OSError):
                    status, value = None, None
                if status is None:
                    proc.join(0.5)
                    code = proc.exitcode
                    how = (f"was killed by signal {-code}" if code is not None and code < 0
                           else f"ended with status {code}")
                    err = DPAuditError(
                        f"a worker process {how} while running {name} (out of memory, killed from outside, or "
                        "plug-in code that ended its process); rerun with --workers 1 to run it in this process."
                    )
                    # for dpaudit.sandbox.explain_worker_death: which call of which plug-in it died in
                    err.worker_pid, err.worker_status, err.worker_since = proc.pid, code, self.since  # type: ignore[attr-defined]
                    raise err
                i = busy.pop(w)
                idle.append(w)
                if status == "err":
                    tb = getattr(value, "_dpaudit_remote_tb", None)
                    if tb and not isinstance(value, DPAuditError):
                        raise value from _RemoteTraceback(tb)
                    raise value
                deliver(i, cast(T, value))  # what fn returned in the worker

    def close(self) -> None:
        """Ask idle workers to finish, then make sure they are gone."""
        for _, conn in self.workers:
            try:
                conn.send(None)
            except Exception:
                pass
        deadline = time.monotonic() + 2.0
        for proc, _ in self.workers:
            proc.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        """SIGKILL every worker still alive and reap it (never waits on a running task)."""
        for proc, _ in self.workers:
            if proc.is_alive():
                try:
                    proc.kill()
                except Exception:  # pragma: no cover - already gone
                    pass
        for proc, conn in self.workers:
            proc.join(2.0)
            try:
                conn.close()
            except Exception:
                pass
        _LIVE_POOLS.discard(self)
        self.workers = []


_LIVE_POOLS: "weakref.WeakSet[_LocalPool]" = weakref.WeakSet()


def kill_all_workers() -> None:
    """SIGKILL every local worker this process started (a second Ctrl-C; interpreter exit)."""
    for pool in list(_LIVE_POOLS):
        for proc, _ in pool.workers:
            try:
                if proc.pid is not None:
                    os.kill(proc.pid, signal.SIGKILL)
            except OSError:
                pass


def _kill_at_exit() -> None:
    for pool in list(_LIVE_POOLS):
        pool.kill()


atexit.register(_kill_at_exit)


# ---- checkpoints --------------------------------------------------------------------------------

def _digest(obj: object) -> str:
    return hashlib.sha256(obj if isinstance(obj, bytes) else json.dumps(obj, sort_keys=True, default=str).encode()
                          ).hexdigest()


class _InputsPickler(pickle.Pickler):
    """Pickles a task's inputs for its digest, with each policy by its type only.

    A policy is fully determined by the audit's key (spec, parameters, plug-in source), and every
    piece resets it with its own seed, so its left-over state from earlier pieces (which, run in
    this process, depends on which pieces came from the checkpoint) must not change the digest.
    """

    def persistent_id(self, obj: object) -> str | None:
        if not isinstance(obj, type) and all(hasattr(type(obj), m) for m in ("reset", "act", "observe")):
            return f"policy:{type(obj).__module__}.{type(obj).__qualname__}"
        return None


class Checkpoint:
    """Finished pieces of one audit on disk, keyed by the audit's full canonical description.

    ``key`` is everything that determines the findings (the policy spec and parameters, the plug-in
    file's contents, protocol, delta, confidence, runs, horizon, seed, dpaudit's version ...): a run
    with another key never sees these pieces. Within a run, a piece's file is named by the engine
    call it belongs to (the n-th ``map`` of the audit), its index, and a SHA-256 of its pickled
    inputs, so a piece is reused only for byte-identical inputs. Files are written atomically
    (temporary file, then rename), so a run killed mid-write leaves no half piece.

    Each piece is verified before it is reused: its file starts with a header holding the SHA-256 of
    its pickled result and the digest of what it was computed for (the audit's key and the piece's
    name), so a piece damaged on disk (a flipped byte, a truncated or emptied file, another piece's
    file copied over it) never reaches the unpickler and never changes the findings: it is
    recomputed, written back whole, and counted (``summary()["pieces_damaged_recomputed"]``, the
    findings' ``checkpoint`` entry). So is a piece that is not a regular file (a FIFO, which reading would
    block on forever; a directory; a device): it is never read, a directory is moved aside (to
    ``.NAME.not-a-piece.*`` beside it, never deleted) and anything else removed, and the piece is written
    in its place.
    """

    #: the header of a piece's file: magic, then the payload's SHA-256 and the piece's own digest (hex)
    MAGIC = b"dpaudit-piece/2\n"
    #: part of the directory's digest: pieces of another file format live elsewhere, never read as damaged
    FORMAT = 2

    def __init__(self, directory: str | os.PathLike[str], key: dict[str, object]) -> None:
        base = Path(directory)
        if base.exists() and not base.is_dir():
            raise DPAuditError(f"--checkpoint {str(base)!r} exists and is not a directory.")
        self.key = key
        self._key_digest = _digest({"key": key, "piece_format": self.FORMAT})
        self.dir = base / self._key_digest[:20]
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = self.dir / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise DPAuditError(f"--checkpoint directory {str(base)!r} cannot be written ({exc.strerror}).") from None
        meta = self.dir / "audit.json"
        if not meta.exists():
            self._atomic(meta, json.dumps(key, sort_keys=True, indent=2, default=str).encode())
        self.reused = 0
        self.computed = 0
        self.damaged = 0

    def _atomic(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def path(self, call: int, fn: Callable[..., object], i: int, args: TaskArgs) -> Path:
        blob = None
        # without the memo first: a memo reference depends on which equal objects are the same object (a
        # string read back from the checkpoint is not the interned literal a fresh run has)
        for fast in (True, False):
            try:
                buf = io.BytesIO()
                pickler = _InputsPickler(buf, protocol=4)
                pickler.fast = fast
                pickler.dump(args)
                blob = buf.getvalue()
                break
            except Exception:  # a self-referential input needs the memo
                continue
        if blob is None:
            blob = repr(args).encode()
        name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', 'task')}"
        return self.dir / f"{call:03d}-{i:05d}-{_digest(name.encode() + b'|' + blob)[:24]}.pkl"

    def _for(self, path: Path) -> bytes:
        """What a piece was computed for: the audit's key and the piece's name (its call, index and inputs)."""
        return _digest(f"{self._key_digest}|{path.name}".encode()).encode()

    def load(self, path: Path) -> tuple[bool, object]:
        """``(True, result)`` for a verified piece; ``(False, None)`` for a missing one, or a damaged one
        (counted in ``damaged``, then recomputed and saved over it by the engine). Only a regular file is
        read: it is opened without blocking and checked before a byte is read (a FIFO would block)."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return False, None
        except OSError:  # a directory (EISDIR), no permission, a dangling link's loop...
            self.damaged += 1
            self._clear(path)
            return False, None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.damaged += 1
                self._clear(path)
                return False, None
            with os.fdopen(fd, "rb") as f:
                fd = -1
                blob = f.read()
        except OSError:
            self.damaged += 1
            return False, None
        finally:
            if fd >= 0:
                os.close(fd)
        head = len(self.MAGIC)
        payload = blob[head + 130:]
        if (blob[:head] != self.MAGIC or blob[head + 64:head + 65] != b" " or blob[head + 129:head + 130] != b"\n"
                or blob[head + 65:head + 129] != self._for(path)
                or blob[head:head + 64] != hashlib.sha256(payload).hexdigest().encode()):
            self.damaged += 1
            return False, None
        try:
            value = pickle.loads(payload)
        except Exception:  # verified bytes that no longer unpickle (a class renamed since): recompute
            self.damaged += 1
            return False, None
        self.reused += 1
        return True, value

    def _clear(self, path: Path) -> None:
        """Make room for a piece where something that is not one sits: a directory is moved aside (it is
        not dpaudit's to delete), anything else (a FIFO, a socket, a device node, a link to one) removed."""
        try:
            if path.is_dir() and not path.is_symlink():
                os.replace(path, path.with_name(f".{path.name}.not-a-piece.{os.getpid()}.{time.monotonic_ns()}"))
            else:
                os.unlink(path)
        except OSError:
            pass  # save() says so if the place is still taken

    def save(self, path: Path, value: object) -> None:
        self.computed += 1
        try:
            data = pickle.dumps(value, protocol=4)
        except Exception:  # pragma: no cover - results are numpy arrays and tuples
            return
        header = self.MAGIC + hashlib.sha256(data).hexdigest().encode() + b" " + self._for(path) + b"\n"
        try:
            self._atomic(path, header + data)
        except OSError as exc:
            raise DPAuditError(f"--checkpoint cannot record the piece {path.name} in {str(self.dir)!r} "
                               f"({exc.strerror or exc}); free the place or give another --checkpoint.") from None

    def summary(self) -> dict[str, str | int]:
        return {"dir": str(self.dir), "pieces_reused": self.reused, "pieces_computed": self.computed,
                "pieces_damaged_recomputed": self.damaged}


# ---- the engine ---------------------------------------------------------------------------------

#: glibc's malloc settings whose presence in the environment turns off its adaptive mmap threshold
_MALLOC_ENV = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
#: glibc's mallopt parameters, and the values its adaptive threshold settles at on 64-bit Linux
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 1024 * 1024
_malloc: list[ctypes.CDLL | None] = []  # [libc] once this process's malloc was made roomy, [None] when it was left alone


def _roomy_malloc() -> ctypes.CDLL | None:
    """In a process whose environment fixes glibc's malloc thresholds (a Dask nanny starts its workers with
    ``MALLOC_TRIM_THRESHOLD_=65536``), set them to where glibc's own adaptive rule settles (arrays up to
    32 MiB from the heap, trimmed beyond 64 MiB free) and return libc, else None. With the fixed thresholds
    every numpy temporary above 128 KiB is a fresh mmap and its pages fault in again: a chunk of
    likelihood runs took 0.59 s instead of 0.25 s, and a Dask audit's pieces about twice their time in
    dpaudit's own workers. Done once per process."""
    if _malloc:
        return _malloc[0]
    libc = None
    if sys.platform.startswith("linux") and any(k in os.environ for k in _MALLOC_ENV):
        try:
            import ctypes

            lib = ctypes.CDLL(None)
            if lib.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) == 1 and \
                    lib.mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_THRESHOLD) == 1:
                libc = lib
        except (OSError, AttributeError):  # pragma: no cover - not glibc
            libc = None
    _malloc.append(libc)
    return libc


def _call_pickled(blob: bytes) -> object:
    """A task sent as bytes (:func:`_pickle_task`): unpickled here, so every task gets fresh objects.
    BLAS keeps to one thread in the executor's process too, as in dpaudit's own workers; where the
    environment fixed malloc's thresholds (Dask's workers), they are made roomy for the task
    (:func:`_roomy_malloc`) and the memory it freed is handed back to the system afterwards."""
    libc = _roomy_malloc()
    fn, args = pickle.loads(blob)
    try:
        with one_blas_thread():
            return fn(*args)
    finally:
        if libc is not None:
            libc.malloc_trim(0)


def _pickle_task(fn: Callable[..., object], args: TaskArgs) -> bytes:
    """A task as bytes, by cloudpickle where available: plug-in modules loaded from files (registered
    with :func:`cloudpickle.register_pickle_by_value`) travel by value, so remote workers need not
    have them (a Dask executor would otherwise pickle their classes by a module name the workers lack)."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps((fn, args), protocol=4)
    for name, mod in list(sys.modules.items()):
        if name.startswith("dpaudit_plugin_") and mod is not None:
            try:
                cloudpickle.register_pickle_by_value(mod)
            except (ValueError, TypeError):  # pragma: no cover - already registered or not a module
                pass
    return cloudpickle.dumps((fn, args), protocol=4)


class Engine:
    """Runs independent tasks ``fn(*args)`` and returns their results in task order.

    ``health``, for an external executor, is called every ``poll`` seconds while waiting; it raises
    :class:`DPAuditError` when the executor can no longer finish (e.g. a Dask cluster with no
    workers), so a lost cluster is reported instead of waited on forever. ``watchdog(pid, since)``, for
    local workers, is asked every half second about each busy worker (started at ``since``,
    ``time.monotonic()``); True kills that worker, which is then reported like any worker that died
    (:func:`dpaudit.sandbox.overdue` is the runner's: a plug-in call stuck in C code past its limit).
    """

    def __init__(self, workers: int = 1, executor: Executor | None = None, *,
                 checkpoint: Checkpoint | None = None, health: Callable[[], None] | None = None,
                 poll: float = 5.0, watchdog: Callable[[int, float], bool] | None = None) -> None:
        self.workers = check_int("workers", workers, minimum=1)
        self._executor = executor
        self._own: _LocalPool | None = None
        self.checkpoint = checkpoint
        self._health = health
        self._poll = poll
        self._watchdog = watchdog
        self._calls = 0

    @property
    def parallel(self) -> bool:
        return self._executor is not None or self.workers > 1

    def describe(self) -> str:
        if self._executor is not None:
            return f"executor {type(self._executor).__name__}"
        return "this process" if self.workers == 1 else f"{self.workers} local processes"

    def serial(self) -> "Engine":
        """An engine running here, keeping this one's checkpoint (for inputs that cannot be pickled)."""
        return Engine(1, checkpoint=self.checkpoint)

    def worker_pids(self) -> list[int]:
        """Process ids of the local workers started so far (for tests and diagnostics)."""
        return self._own.pids() if self._own is not None else []

    def check_picklable(self, *objects: object) -> None:
        """Raise a clear error if the tasks' inputs cannot be sent to other processes."""
        if not self.parallel:
            return
        for obj in objects:
            try:
                pickle.dumps(obj)
            except Exception as exc:
                raise DPAuditError(
                    f"{type(obj).__name__} cannot be sent to worker processes ({type(exc).__name__}: {exc}); "
                    "run with --workers 1."
                ) from exc

    def map(self, fn: Callable[..., T], tasks: Sequence[TaskArgs], *,
            on_result: Callable[[int, T], None] | None = None) -> list[T]:
        """``[fn(*t) for t in tasks]``; ``on_result(i, result)`` is called as each one finishes."""
        call = self._calls
        self._calls += 1
        results: list[T | None] = [None] * len(tasks)
        cp = self.checkpoint
        paths = [cp.path(call, fn, i, args) for i, args in enumerate(tasks)] if cp is not None else None
        todo: list[tuple[int, TaskArgs]] = []
        for i, args in enumerate(tasks):
            if cp is not None and paths is not None:
                hit, value = cp.load(paths[i])
                if hit:
                    piece = cast(T, value)  # verified as this very task's piece: what fn returned for it
                    results[i] = piece
                    if on_result is not None:
                        on_result(i, piece)
                    continue
            todo.append((i, args))

        def deliver(i: int, value: T) -> None:
            results[i] = value
            if cp is not None and paths is not None:
                cp.save(paths[i], value)
            if on_result is not None:
                on_result(i, value)

        if not todo:
            return cast("list[T]", results)
        if not self.parallel:
            for i, args in todo:
                deliver(i, fn(*args))
        elif self._executor is None:
            if self._own is None:
                self._own = _LocalPool(self.workers, self._watchdog)
            try:
                self._own.run(fn, todo, deliver)
            except BaseException:
                self.close(kill=True)
                raise
        else:
            self._run_on_executor(fn, todo, deliver)
        return cast("list[T]", results)  # every task delivered its result

    def _run_on_executor(self, fn: Callable[..., T], todo: list[tuple[int, TaskArgs]],
                         deliver: Callable[[int, T], None]) -> None:
        pool = self._executor
        assert pool is not None
        who = f"the executor {type(pool).__name__}"
        futures: dict[Future, int] = {}
        pending: set[Future] = set()
        try:
            for i, args in todo:
                try:
                    f = pool.submit(_call_pickled, _pickle_task(fn, args))
                except Exception as exc:  # shut down, full, or broken: its own words, in one sentence
                    raise DPAuditError(f"{who} refused a task: its submit raised {type(exc).__name__}: "
                                       f"{' '.join(str(exc).split()).rstrip('.') or '(no message)'}; give a running "
                                       "concurrent.futures executor (not one shut down).") from None
                if not isinstance(f, Future):
                    raise DPAuditError(f"{who}'s submit returned {shorten(f, 60)}, not a concurrent.futures.Future; "
                                       "give an executor whose submit(fn, *args) returns a Future, such as a "
                                       "ProcessPoolExecutor or a Dask client's get_executor().")
                futures[f] = i
                pending.add(f)
            while pending:
                done, pending = wait(pending, timeout=self._poll, return_when=FIRST_COMPLETED)
                if not done and self._health is not None:
                    self._health()
                for f in sorted(done, key=futures.__getitem__):
                    try:
                        value = f.result()
                    except CancelledError:
                        raise DPAuditError(f"{who} cancelled a task before it ran (was it shut down during the "
                                           "audit?); give an executor that stays up until the audit ends.") from None
                    except BrokenExecutor as exc:
                        raise DPAuditError(f"{who} broke while running a task ({type(exc).__name__}: "
                                           f"{' '.join(str(exc).split()).rstrip('.') or 'a worker died'}); its "
                                           "worker processes ended abruptly (out of memory, or killed).") from None
                    deliver(futures[f], cast(T, value))  # what fn returned in the executor's process
        except BaseException:
            for f in pending:
                f.cancel()
            raise

    def close(self, kill: bool = False) -> None:
        """Stop the local workers (``kill``: at once, without waiting for running tasks)."""
        pool, self._own = self._own, None
        if pool is None:
            return
        if kill:
            pool.kill()
        else:
            pool.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(kill=exc[0] is not None)


def progress_counter(progress: Callable[[str], None] | None, template: str, sizes: Sequence[int]
                     ) -> Callable[[int, object], None] | None:
    """An ``on_result`` for :meth:`Engine.map` reporting ``template.format(done=..., total=...)`` as
    tasks of ``sizes[i]`` units finish."""
    if progress is None:
        return None
    done, total = [0], int(sum(sizes))

    def on_result(i: int, _: object) -> None:
        done[0] += sizes[i]
        progress(template.format(done=done[0], total=total))

    return on_result


# ---- Dask ---------------------------------------------------------------------------------------

def dask_executor(address: str, *, timeout: float = 30.0, no_workers_grace: float = 120.0
                  ) -> tuple[Executor, Callable[[], None], Callable[[], None]]:
    """Connect to a Dask distributed scheduler: ``(executor, health check, close)``.

    ``address`` is the scheduler's address (``tcp://HOST:PORT``; what ``dask scheduler`` prints).
    The executor is ``Client.get_executor()``; each task is sent as cloudpickled bytes, plug-in modules
    loaded from files by value (:func:`_pickle_task`), so they need not be installed there, but dpaudit itself must be
    (``pip install "dpaudit[dask]"`` on every worker). The health check raises once the cluster has
    had no workers for ``no_workers_grace`` seconds, so a lost cluster is reported, never waited on.
    """
    try:
        from distributed import Client
    except ImportError:
        raise DPAuditError('--scheduler needs Dask distributed: pip install "dpaudit[dask]".') from None
    if not isinstance(address, str) or "://" not in address:
        raise DPAuditError(f"--scheduler must be a Dask scheduler address such as tcp://HOST:PORT, got {address!r}.")
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:
        raise DPAuditError(f"cannot connect to the Dask scheduler at {address} within {timeout:g} s "
                           f"({type(exc).__name__}: {exc}).") from None
    since: list[float | None] = [None]

    def health() -> None:
        try:
            n = len(client.scheduler_info().get("workers", {}))
        except Exception as exc:
            raise DPAuditError(f"lost the Dask scheduler at {address} ({type(exc).__name__}: {exc}).") from None
        if n > 0:
            since[0] = None
            return
        started = since[0] = since[0] or time.monotonic()
        if time.monotonic() - started > no_workers_grace:
            raise DPAuditError(f"the Dask cluster at {address} has had no workers for {no_workers_grace:g} s; "
                               "start workers (dask worker ADDRESS) or run without --scheduler.")

    def close() -> None:
        try:
            client.close(timeout=5)
        except Exception:
            pass

    return client.get_executor(), health, close


#: run everything in this process, in order (the default of the attack functions)
SERIAL = Engine(1)
