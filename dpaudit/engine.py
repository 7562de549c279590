"""Where an audit's independent pieces run: in this process, on local processes, or on any Executor.

An audit is many independent pieces (ranking one candidate pair, counting one chunk of fresh
views, one chunk of likelihood runs), each with its own generator from ``SeedSequence.spawn``. So
the results are the same whoever runs the pieces and in whatever order they finish; the tests
check that a serial and a two-process audit give the same report.

* ``Engine()`` (one worker) runs every piece here, in order;
* ``Engine(workers=N)`` runs them on N local processes (``dpaudit check policy`` uses one per core);
* ``Engine(executor=ex)`` on any :class:`concurrent.futures.Executor`, for example a Dask cluster's
  ``client.get_executor()`` when one machine is not enough. The policy is pickled to the workers,
  so a plug-in's module must be importable there; each task works on its own copy of its inputs,
  so executors whose workers share memory (threads) are safe too.

Local workers are forked where the platform allows it (they inherit loaded plug-in modules and
start in milliseconds) and ignore Ctrl-C, which the parent handles: it stops the workers and
reports what had finished. Every worker, and the CLI, :func:`dpaudit.check.audit_policy` and
:func:`dpaudit.simulate.simulate`, keep BLAS to one thread (:func:`one_blas_thread`).
"""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import signal
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

from dpaudit.errors import DPAuditError, check_int

__all__ = ["Engine", "SERIAL", "default_workers", "progress_counter", "one_blas_thread"]


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def one_blas_thread() -> Any:
    """A context manager inside which BLAS (OpenBLAS, MKL) uses one thread.

    dpaudit's matrices are tiny (d x d with d around 3, batched over runs), where BLAS threads only
    add overhead: on 2 cores the default AdaC-OFUL audit takes 40 s with OpenBLAS's threads and
    19.5 s without, and batched OFUL steps run 2.2e6 instead of 9.5e5 run-steps per second. One
    thread per process also leaves the cores to the engine's workers.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


_WORKER_LIMITS: Any = None


def _init_worker() -> None:
    """Worker processes: Ctrl-C is the parent's to handle, and BLAS keeps to one thread."""
    global _WORKER_LIMITS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_LIMITS = one_blas_thread()


def _call(fn: Callable[..., Any], args: tuple) -> Any:
    return fn(*args)


def _call_on_copies(fn: Callable[..., Any], args: tuple) -> Any:
    """For executors that may share objects between tasks (threads): each task gets its own policy state."""
    return fn(*copy.deepcopy(args))


class Engine:
    """Runs independent tasks ``fn(*args)`` and returns their results in task order."""

    def __init__(self, workers: int = 1, executor: Executor | None = None) -> None:
        self.workers = check_int("workers", workers, minimum=1)
        self._executor = executor
        self._own: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self._executor is not None or self.workers > 1

    def describe(self) -> str:
        if self._executor is not None:
            return f"executor {type(self._executor).__name__}"
        return "this process" if self.workers == 1 else f"{self.workers} local processes"

    def _pool(self) -> Executor:
        if self._executor is not None:
            return self._executor
        if self._own is None:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._own = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_init_worker)
        return self._own

    def check_picklable(self, *objects: Any) -> None:
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

    def map(self, fn: Callable[..., Any], tasks: Sequence[tuple], *,
            on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
        """``[fn(*t) for t in tasks]``; ``on_result(i, result)`` is called as each one finishes."""
        if not self.parallel:
            out = []
            for i, args in enumerate(tasks):
                out.append(fn(*args))
                if on_result is not None:
                    on_result(i, out[-1])
            return out
        pool = self._pool()
        call = _call if pool is self._own else _call_on_copies
        futures: dict[Future, int] = {pool.submit(call, fn, args): i for i, args in enumerate(tasks)}
        results: list[Any] = [None] * len(tasks)
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=futures.__getitem__):
                    i = futures[f]
                    results[i] = f.result()
                    if on_result is not None:
                        on_result(i, results[i])
        except BaseException as exc:
            for f in pending:
                f.cancel()
            if isinstance(pool, ProcessPoolExecutor) and pool is self._own:
                self.close(kill=True)
            if isinstance(exc, BrokenProcessPool):
                raise DPAuditError(
                    f"a worker process died while running {getattr(fn, '__name__', 'a task')} (out of memory, or the "
                    "policy could not be unpickled there); rerun with --workers 1 to run it in this process."
                ) from None
            raise
        return results

    def close(self, kill: bool = False) -> None:
        """Stop the local workers (``kill``: without waiting for running tasks)."""
        pool, self._own = self._own, None
        if pool is None:
            return
        if kill:
            for p in list(getattr(pool, "_processes", {}).values()):
                p.terminate()
        pool.shutdown(wait=not kill, cancel_futures=True)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(kill=exc[0] is not None)


def progress_counter(progress: Callable[[str], None] | None, template: str, sizes: Sequence[int]
                     ) -> Callable[[int, Any], None] | None:
    """An ``on_result`` for :meth:`Engine.map` reporting ``template.format(done=..., total=...)`` as
    tasks of ``sizes[i]`` units finish."""
    if progress is None:
        return None
    done, total = [0], int(sum(sizes))

    def on_result(i: int, _: Any) -> None:
        done[0] += sizes[i]
        progress(template.format(done=done[0], total=total))

    return on_result


#: run everything in this process, in order (the default of the attack functions)
SERIAL = Engine(1)
