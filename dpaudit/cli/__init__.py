"""The ``dpaudit`` command line.

One module per command in this package (argument parsing and printing only; the work is in the
library modules), each registering itself through ``register_cli(subparsers)`` (add it to
``COMMAND_MODULES``); a registered command sets ``func`` to a callable ``args -> exit status``.

Exit statuses (docs/reference.md, "Reliability"): 0 the command succeeded (``check``: consistent); 1 a
finding (``check``: violation); 3 ``check``: inconclusive (the audit had no power); 2 the user's error:
bad input or a plug-in's failure, printed as one sentence (a :class:`DPAuditError`: every failure of plug-in
code, its own exits and ``KeyboardInterrupt`` included; ``--debug`` adds the plug-in's traceback); 70 dpaudit's
own error (an :class:`~dpaudit.errors.InternalError`, an invariant of dpaudit broken, or any other unexpected
exception: a dpaudit bug, one sentence asking for a report, the traceback with ``--debug``); 128 + N when signal N stopped it: 130 for Ctrl-C (SIGINT), 143 for SIGTERM, 129
for SIGHUP. The first of those signals stops the work and reports what had finished (``check
policy`` prints, and writes with ``--report``, the partial findings); a second one ends the process
at once, without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
import traceback

from dpaudit import __version__
from dpaudit.errors import REPORT, DPAuditError, InternalError

COMMAND_MODULES = [
    "dpaudit.cli.list",
    "dpaudit.cli.check",
    "dpaudit.cli.reproduce",
    "dpaudit.cli.account",
    "dpaudit.cli.regret",
    "dpaudit.cli.describe",
]


#: what ``dpaudit --help`` says of the exit statuses (the module docstring has the details)
EXIT_STATUSES = """exit statuses:
  0    the command succeeded (check: consistent)
  1    check: violation (a lower bound, or an exact figure, exceeds the claim)
  2    your error: bad input or a plug-in's failure, printed as one sentence (--debug adds the traceback)
  3    check: inconclusive (the audit had no power)
  70   dpaudit's error: an internal error, a bug in dpaudit to report (--debug prints the traceback)
  130  stopped by Ctrl-C (143 SIGTERM, 129 SIGHUP): what had finished is printed (and reported)
"""


def print_json(obj: dict, fmt: str, **dumps: object) -> None:
    """Print one command's ``--json`` object with its format name and version first
    (``"dpaudit.describe/1"``): a script can check what it reads."""
    import json

    print(json.dumps({"format": fmt, **{k: v for k, v in obj.items() if k != "format"}}, **dumps))  # type: ignore[arg-type]


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error printed as one sentence (exit 2) like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        msg = " ".join(message.split()).rstrip(".")
        self.exit(2, f"dpaudit: error: {msg} (see `{self.prog} --help`).\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpaudit",
        description="Audit differentially private bandit algorithms: what they claim and what they leak.",
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, also print the traceback (a plug-in's own, for plug-in failures)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register_cli(sub)
    return parser


#: bound before any plug-in code runs (dpaudit.sandbox replaces os._exit while plug-in code runs)
_HARD_EXIT = os._exit
_HANDLED = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class _Signals:
    """SIGINT, SIGTERM and SIGHUP: the first raises KeyboardInterrupt (the work stops and reports what
    finished); the second ends the process at once with 128 + the first signal's number."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.saved: dict[int, object] = {}

    def handler(self, signum: int, frame: object) -> None:
        if self.first is not None:
            try:
                os.write(2, f"dpaudit: {signal.Signals(signum).name} again; stopped at once.\n".encode())
                from dpaudit.engine import kill_all_workers

                kill_all_workers()
            finally:
                _HARD_EXIT(128 + self.first)
        self.first = signum
        raise KeyboardInterrupt

    def install(self) -> None:
        if threading_main():
            for sig in _HANDLED:
                self.saved[sig] = signal.signal(sig, self.handler)

    def restore(self) -> None:
        for sig, old in self.saved.items():
            signal.signal(sig, old)  # type: ignore[arg-type]
        self.saved.clear()

    def status(self) -> int:
        return 128 + (self.first if self.first is not None else int(signal.SIGINT))


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _print_debug(exc: BaseException) -> None:
    tb = getattr(exc, "plugin_traceback", None)
    if tb:
        print("dpaudit: the plug-in's traceback:\n" + tb.rstrip(), file=sys.stderr)
    else:
        print("".join(traceback.format_exception(exc)).rstrip(), file=sys.stderr)


#: when the running command began (``time.perf_counter()``, set by :func:`main` before the command modules load,
#: which takes seconds): a command's progress counts its first heartbeat from here
STARTED = time.perf_counter()


def main(argv: list[str] | None = None) -> int:
    global STARTED
    STARTED = time.perf_counter()
    # the handlers go in first: a Ctrl-C while the command modules (numpy, scipy) are still importing
    # is an interrupt like any other (exit 130, one line), not Python's traceback
    signals = _Signals()
    signals.install()
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    status = 2
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        debug = bool(getattr(args, "debug", False))
        from dpaudit.deprecations import notes_on_stderr
        from dpaudit.engine import one_blas_thread
        from dpaudit.sandbox import watch_signals

        # a plug-in's own KeyboardInterrupt is not a Ctrl-C (sandbox); an old name used is one line on stderr
        with one_blas_thread(), watch_signals(), notes_on_stderr():
            status = int(args.func(args) or 0)
        if status == 130 and signals.first is not None:
            status = signals.status()  # 143 for SIGTERM, 129 for SIGHUP
        return status
    except DPAuditError as exc:
        if debug:
            _print_debug(exc)
        print(f"dpaudit: error: {exc}", file=sys.stderr)
        status = 2
        return status
    except InternalError as exc:  # an invariant of dpaudit broke: its message says so and asks for a report
        if debug:
            _print_debug(exc)
        print(f"dpaudit: internal error: {' '.join(str(exc).split())}", file=sys.stderr)
        status = 70
        return status
    except KeyboardInterrupt:
        print("dpaudit: interrupted.", file=sys.stderr)
        status = signals.status()
        return status
    except MemoryError:
        if debug:
            _print_debug(sys.exc_info()[1])  # type: ignore[arg-type]
        print("dpaudit: error: out of memory; use fewer --runs, a shorter --horizon, fewer arms or fewer --workers.",
              file=sys.stderr)
        status = 2
        return status
    except BrokenPipeError:  # e.g. `dpaudit ... --json | head`: the reader left; say nothing more
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:  # pragma: no cover
            pass
        status = 1
        return status
    except Exception as exc:  # a dpaudit bug: one sentence, the traceback on request
        if signals.first is not None:
            # a Ctrl-C inside a C extension's import (numpy's) surfaces as that import's ImportError:
            # once a signal has arrived, whatever failed after it is the interrupt, not a bug
            if debug:
                _print_debug(exc)
            print("dpaudit: interrupted.", file=sys.stderr)
            status = signals.status()
            return status
        if debug:
            _print_debug(exc)
        msg = " ".join(str(exc).split())[:200].rstrip(". ")
        print(f"dpaudit: internal error: {type(exc).__name__}: {msg}; {REPORT}.", file=sys.stderr)
        status = 70
        return status
    finally:
        if argv is None and signals.saved:
            # the console script: the command is over, so a signal from here on must not change its status
            # (Python's shutdown would reset our handlers to the default action, which kills; it keeps SIG_IGN)
            for sig in _HANDLED:
                signal.signal(sig, signal.SIG_IGN)
        else:  # called in-process (tests, other programs): give the caller its handlers back
            signals.restore()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
