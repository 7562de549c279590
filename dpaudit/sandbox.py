"""Plug-in isolation: code dpaudit did not write never decides its exit status or pollutes its output.

A plug-in (``path/to/file.py:Class`` or ``package.module:Class``) runs inside dpaudit's process and
its workers. Every call into it -- the import, the constructor, ``claim``, ``reset``, ``act``,
``observe`` and any other member the protocols use -- goes through :func:`guard`, which

* turns ``sys.exit()`` / ``SystemExit`` and ``os._exit()`` into a :class:`DPAuditError` naming the
  plug-in, the method and the step (``os._exit`` is replaced, only while plug-in code runs, by a
  function that raises; a reference taken at import time is that same function, so it is caught
  later too);
* turns any other exception into one sentence naming the plug-in, the method, the step and the
  exception; the plug-in's own traceback is kept on the error (``plugin_traceback``) and shown
  only under ``dpaudit --debug``;
* sends whatever the plug-in prints to stderr, so dpaudit's stdout (``--json``) stays its own;
* tells a real interruption from the plug-in's own ``KeyboardInterrupt``: while dpaudit watches the
  signals (:func:`watch_signals`: the CLI and :func:`dpaudit.runner.run` do), each SIGINT, SIGTERM and
  SIGHUP is counted before its handler raises, so a ``KeyboardInterrupt`` with no signal counted during
  the call (or raised in a worker process, which ignores those signals) is the plug-in's own: an error
  naming the method and the step, not "interrupted".

What cannot be caught in-process, and what dpaudit does about it: a plug-in that kills its process
by other means (a signal to itself, ``ctypes``, a crash in C code). In a worker process that death
is reported as an error (:mod:`dpaudit.engine`); in the main process it ends dpaudit with whatever
status the process dies with. dpaudit isolates plug-ins from mistakes, not from malice.

:class:`PluginPolicy` wraps a plug-in instance so that every member access is guarded; it also
refuses a plug-in with fewer than two arms, and always runs step by step (a plug-in's block path,
if it has one, is not one dpaudit has checked against its per-step path).
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from dpaudit.errors import DPAuditError, shorten

__all__ = ["guard", "PluginPolicy", "PluginExit", "wrap_plugin", "is_plugin_spec", "plugin_digest", "file_digest",
           "watch_signals"]

_REAL_EXIT = os._exit
_LOCK = threading.Lock()
_DEPTH = 0
_SAVED_STDOUT: Any = None
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
    installed: list[tuple[int, Any, Any]] = []
    if threading.current_thread() is threading.main_thread():
        for sig in _WATCHED:
            old = signal.getsignal(sig)
            if not callable(old):
                continue  # SIG_DFL / SIG_IGN: nothing raises KeyboardInterrupt for it

            def counted(signum: int, frame: Any, _old: Any = old) -> Any:
                global _SIGNALS_SEEN
                _SIGNALS_SEEN += 1
                return _old(signum, frame)

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

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def _guarded_exit(code: int = 0) -> None:
    if _DEPTH > 0:
        raise PluginExit(code)
    _REAL_EXIT(code)


def is_plugin_spec(spec: Any) -> bool:
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


def file_digest(path: str | os.PathLike) -> str | None:
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


def _enter() -> None:
    global _DEPTH, _SAVED_STDOUT
    with _LOCK:
        if _DEPTH == 0:
            _SAVED_STDOUT = sys.stdout
            sys.stdout = sys.stderr
            os._exit = _guarded_exit
        _DEPTH += 1


def _leave() -> None:
    global _DEPTH, _SAVED_STDOUT
    with _LOCK:
        _DEPTH -= 1
        if _DEPTH == 0:
            os._exit = _REAL_EXIT
            sys.stdout = _SAVED_STDOUT  # even if the plug-in replaced it
            _SAVED_STDOUT = None


def _where(method: str, step: Any) -> str:
    if method == "import":
        return "while being imported"
    if method == "__init__":
        return "in its constructor"
    return f"in {method}" + (f" at step {step}" if step is not None else "")


@contextmanager
def guard(plugin: str, method: str, step: Any = None) -> Iterator[None]:
    """Run plug-in code: exits and exceptions become one-sentence :class:`DPAuditError`\\ s, prints go
    to stderr. ``KeyboardInterrupt`` from a real signal (Ctrl-C, and SIGTERM/SIGHUP as the CLI maps them)
    passes through; one the plug-in raised itself is an error naming the method and the step."""
    seen = _SIGNALS_SEEN
    _enter()
    try:
        yield
    except DPAuditError:
        raise
    except KeyboardInterrupt as exc:
        if _a_signal(seen):
            raise
        err = DPAuditError(f"plug-in {plugin} raised KeyboardInterrupt {_where(method, step)} while no Ctrl-C or "
                           "signal reached dpaudit, so it is the plug-in's own error, not an interruption (rerun with "
                           "dpaudit --debug for its traceback).")
        err.plugin_traceback = "".join(traceback.format_exception(exc))
        raise err from None
    except SystemExit as exc:
        err = DPAuditError(f"plug-in {plugin} called sys.exit({exc.code!r}) {_where(method, step)}; a plug-in must "
                           "raise an exception, not end dpaudit, so its exit status cannot pass for a verdict.")
        err.plugin_traceback = "".join(traceback.format_exception(exc))
        raise err from None
    except PluginExit as exc:
        err = DPAuditError(f"plug-in {plugin} called os._exit({exc.code!r}) {_where(method, step)}; a plug-in must "
                           "raise an exception, not end dpaudit, so its exit status cannot pass for a verdict.")
        err.plugin_traceback = "".join(traceback.format_exception(exc))
        raise err from None
    except Exception as exc:
        msg = shorten(exc, 200, as_text=True) or "(no message)"
        err = DPAuditError(f"plug-in {plugin} raised {type(exc).__name__} {_where(method, step)}: {msg.rstrip('.')} "
                           "(rerun with dpaudit --debug for its traceback).")
        err.plugin_traceback = "".join(traceback.format_exception(exc))
        raise err from None
    finally:
        _leave()


def _step_of(method: str, args: tuple) -> Any:
    if method in ("act", "observe") and args:
        t = args[0]
        if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
            return int(t)
    return None


class PluginPolicy:
    """A plug-in policy instance behind :func:`guard`: every member access and call is isolated."""

    #: dpaudit's block path and hoisted reward check are for its own verified policies only
    fast_path = False
    valid_actions = False

    def __init__(self, inner: Any, plugin: str) -> None:
        self._inner = inner
        self._plugin = plugin
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
    def wrapped(self) -> Any:
        """The plug-in instance (``offers_blocks`` looks at its type: plug-ins run step by step)."""
        return self._inner

    @property
    def claim(self) -> Any:
        if "_claim" in self.__dict__:  # given on the command line (--claim), in place of the plug-in's own
            return self.__dict__["_claim"]
        with guard(self._plugin, "claim"):
            return getattr(self._inner, "claim", None)

    @claim.setter
    def claim(self, value: Any) -> None:
        self.__dict__["_claim"] = value

    def reset(self, n_runs: int, rng: np.random.Generator, **kw: Any) -> None:
        with guard(self._plugin, "reset"):
            if self._reset_kw:
                self._inner.reset(n_runs, rng, **kw)
            else:
                self._inner.reset(n_runs, rng)

    def act(self, t: int, arms: np.ndarray | None = None) -> Any:
        with guard(self._plugin, "act", _step_of("act", (t,))):
            return self._inner.act(t, arms)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        with guard(self._plugin, "observe", _step_of("observe", (t,))):
            self._inner.observe(t, actions, rewards)

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
            def call(*args: Any, **kwargs: Any) -> Any:
                with guard(plugin, name, _step_of(name, args)):
                    return value(*args, **kwargs)
            call.__name__ = name
            return call
        return value

    def __repr__(self) -> str:
        return f"PluginPolicy({self._plugin})"


def wrap_plugin(policy: Any, plugin: str) -> PluginPolicy:
    """Wrap a plug-in instance (idempotent)."""
    return policy if isinstance(policy, PluginPolicy) else PluginPolicy(policy, plugin)
