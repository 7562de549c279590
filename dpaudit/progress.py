"""Progress of long commands: a tqdm bar with an ETA on a terminal, plain lines otherwise.

The audit reports progress as messages ``"<stage>: <done>/<total> <unit> ..."`` (the neighbouring
-pair search, the membership attack's fresh views, the likelihood runs; :func:`dpaudit.engine.
progress_counter`). :class:`ProgressBar` turns each stage into one tqdm bar (rate and ETA from tqdm)
when stderr is a terminal, and into at most one plain line every ``every`` seconds (plus each
stage's last line) when it is not, so logs of CI jobs stay short and readable. A stage that counts
nothing for a while (the horizon discovery, a long chunk of runs) still shows: with ``heartbeat``
seconds set, a message that names a stage (no count) is held back until nothing was shown for that long
(an estimate, ending "(estimated)", at once),
and a line saying that the last stage is still running comes whenever nothing was shown for that long
(a daemon thread; :meth:`ProgressBar.close` stops it), however many messages came meanwhile unshown: no
two lines are further apart than ``heartbeat`` plus a second, counted from ``start`` (when the command
began: the CLI's import of numpy and the audit's modules takes seconds before the bar exists). So a
command that fails within seconds prints its error alone.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, ParamSpec, TextIO, TypeVar

if TYPE_CHECKING:
    from tqdm import tqdm

_P = ParamSpec("_P")
_R = TypeVar("_R")

__all__ = ["ProgressBar", "counted"]

#: words of a progress message that name what is counted (the bar's unit)
_UNITS = frozenset({"views", "runs", "pairs", "simulations", "adversaries", "rounds"})
#: the end of a message shown at once even with a heartbeat (the audit's estimate, redone at its horizon)
_AT_ONCE = "(estimated)"
_COUNT = re.compile(r"^\s*(?P<stage>[^:]+):\s*(?P<done>\d+)/(?P<total>\d+)\s*(?P<unit>[^\[(;,]*)")


class ProgressBar:
    """A progress callback (``bar(message)``) for :func:`dpaudit.audit` and the CLI; call :meth:`close`."""

    def __init__(self, prefix: str = "dpaudit", stream: TextIO | None = None, *, tty: bool | None = None,
                 every: float = 2.0, heartbeat: float | None = None, start: float | None = None) -> None:
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.every = every
        self._bar: tqdm | None = None
        self._stage: str | None = None
        self._last = 0.0
        #: when the command began (``start``, a ``time.perf_counter()`` value, else now): its first line comes at
        #: most a heartbeat after it, however long the command took to get here
        self._start = time.perf_counter() if start is None else min(float(start), time.perf_counter())
        self._since = time.time()  # when the current stage began (wall clock, as tqdm counts)
        self._lock = threading.RLock()
        self._shown = self._start  # when anything was last shown
        self._message: str | None = None  # the last message
        self._pending = False  # it names a stage and is not shown yet
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if heartbeat is not None and heartbeat > 0:
            self._beat = threading.Thread(target=self._beats, args=(float(heartbeat),), daemon=True,
                                          name="dpaudit-progress")
            self._beat.start()

    def _beats(self, every: float) -> None:
        while not self._stop.wait(min(1.0, every / 4)):
            with self._lock:
                now = time.perf_counter()
                # nothing shown for ``every`` seconds, however many messages came unshown meanwhile (a stage's
                # name held back, counts between two lines): so no gap between lines exceeds ``every`` plus a tick
                if self._message is None or now - self._shown < every:
                    continue
                stage = self._message.split(":", 1)[0].strip() if _COUNT.match(self._message) else self._message
                text = (f"{self.prefix}: {self._message} [{now - self._start:.0f} s]" if self._pending else
                        f"{self.prefix}: {stage.rstrip('.')}: still running [{now - self._start:.0f} s]")
                self._shown, self._pending = now, False
                if self._bar is not None:
                    self._bar.refresh()  # the bar's elapsed time moves on
                else:
                    print(text, file=self.stream, flush=True)

    def __call__(self, message: str) -> None:
        with self._lock:
            self._message = message
            if self._beat is not None and _COUNT.match(message) is None and not message.endswith(_AT_ONCE):
                self._pending = True  # a stage's name: shown once it lasts (a failure within it prints alone)
                return
            self._pending = False
            self._call(message)

    def _call(self, message: str) -> None:
        m = _COUNT.match(message)
        if m is None:
            self._line(message, force=True)
            return
        stage, done, total = m.group("stage").strip(), int(m.group("done")), int(m.group("total"))
        words = m.group("unit").split()
        unit = next((w for w in words if w in _UNITS), words[0] if words else "it")
        if self.tty:
            if stage != self._stage or self._bar is None:
                self._close_bar()
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, desc=f"{self.prefix} {stage}", unit=f" {unit}",
                                 file=self.stream, leave=True, dynamic_ncols=True, unit_scale=total >= 10000)
                # the stage began when the previous one ended (its first message comes after its first chunk)
                self._bar.start_t = self._bar.last_print_t = self._since
                self._stage = stage
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()
            self._shown = time.perf_counter()
            if done >= total:
                self._close_bar()
                self._since = time.time()
        else:
            new_stage = stage != self._stage
            self._stage = stage
            self._line(message, force=new_stage or done >= total)

    def _line(self, message: str, *, force: bool) -> None:
        now = time.perf_counter()
        if not force and now - self._last < self.every:
            return
        self._last = self._shown = now
        text = f"{self.prefix}: {message} [{now - self._start:.0f} s]"
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._stage = None

    def close(self) -> None:
        """End the current bar (if any) and the heartbeat."""
        self._stop.set()
        with self._lock:
            self._close_bar()


def counted(fn: Callable[_P, _R], stage: str, total: int,
            unit: str = "simulations") -> tuple[Callable[_P, _R], ProgressBar]:
    """``fn`` wrapped so that each call advances a :class:`ProgressBar` of ``total`` steps (the
    reproductions count their simulations this way); close the bar when done."""
    bar, done = ProgressBar("dpaudit reproduce"), [0]

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        out = fn(*args, **kwargs)
        done[0] += 1
        bar(f"{stage}: {done[0]}/{total} {unit}")
        return out

    return call, bar

