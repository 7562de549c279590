"""dpaudit's two families of errors, and the argument checks that raise the first.

* **The user's**: :class:`DPAuditError` (a ``ValueError``) and its subclasses. Bad input -- an argument, a
  file, a claim -- or a plug-in's failure (code the user wrote misbehaving: an exception, an exit, a hang,
  nonsense answers). Every message is one sentence that names the offending value (or the plug-in call)
  and what is allowed, so the CLI prints it as is and exits with status 2. A raise belongs here whenever
  the user's input or the user's plug-in code can trigger it.
* **dpaudit's own**: :class:`InternalError` (a ``RuntimeError``, deliberately not a ``DPAuditError``, so a
  caller's ``except DPAuditError`` never takes dpaudit's bug for its own mistake). An invariant of dpaudit
  broken: its own arrays of mismatched shapes, a state its code cannot reach, one of its policies breaking
  its own contract. The message says that this is a bug in dpaudit, the step and the value, and asks for a
  report; the CLI exits with status 70 (as for any other unexpected exception), the Python API raises it as is.

This module depends on nothing else in dpaudit: the accountants are the bottom of the dependency graph and
the rest of the package imports from here.

A number is anything :class:`numbers.Real` accepts (bool excluded): Python's ``int`` and ``float``
and numpy's scalars (``np.float32(0.9)``, ``np.int64(3)``), which numpy registers as real numbers;
every check returns a Python ``float`` or ``int``, so nothing downstream sees a numpy scalar's own
arithmetic (``float32`` rounding, ``int64`` overflow).
"""

from __future__ import annotations

import math
import os
import tempfile
from numbers import Real
from pathlib import Path
from typing import Iterable

__all__ = [
    "shorten",
    "DPAuditError",
    "InternalError",
    "check_positive",
    "check_nonnegative",
    "check_delta",
    "check_confidence",
    "check_order",
    "check_int",
    "check_path",
    "check_output_file",
    "check_output_folder",
]


class DPAuditError(ValueError):
    """The user's error: bad input to dpaudit, or a plug-in's failure; the message says which value (or which
    plug-in call) and what is allowed."""


#: what every :class:`InternalError` message ends with
REPORT = ("this is a bug in dpaudit, not in the input; please report it with the command line (dpaudit --debug "
          "prints the traceback)")


class InternalError(RuntimeError):
    """dpaudit's own error: one of its invariants broke (not the user's input, not a plug-in's doing).

    ``InternalError(context)``: ``context`` names the step and the value ("the membership attack's bound
    came out NaN"); the message adds that this is a bug in dpaudit and asks for a report."""

    def __init__(self, context: str) -> None:
        self.context = str(context).rstrip(". ")
        super().__init__(f"{self.context}; {REPORT}.")

    # pickled from a worker process with its context, not its whole message
    def __reduce__(self) -> tuple[type[InternalError], tuple[str], dict[str, object]]:
        return (type(self), (self.context,), self.__dict__)


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DPAuditError(f"{name} must be a real number, got {value!r}.")
    v = float(value)
    if math.isnan(v):
        raise DPAuditError(f"{name} must be a number, got NaN.")
    return v


def check_positive(name: str, value: object, *, allow_inf: bool = False, maximum: float | None = None,
                   unit: str = "") -> float:
    """Return ``value`` as a float after checking ``0 < value`` (``< inf`` unless allowed; ``<= maximum``
    when given, ``unit`` naming what the number counts in the sentence, e.g. " seconds")."""
    v = _as_float(name, value)
    if maximum is not None and (not v > 0 or v > maximum):
        raise DPAuditError(f"{name} must be a number{unit} > 0 and at most {maximum:g}, got {_shown(value)}.")
    if not v > 0 or (math.isinf(v) and not allow_inf):
        allowed = "a positive number" + ("" if allow_inf else " (finite)")
        raise DPAuditError(f"{name} must be {allowed}, got {value!r}.")
    return v


def _shown(value: object) -> str:
    """A number as a sentence shows it: ``1e+10`` for a float, the repr otherwise."""
    return f"{float(value):g}" if isinstance(value, float) else repr(value)


def check_nonnegative(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 <= value``."""
    v = _as_float(name, value)
    if v < 0 or (math.isinf(v) and not allow_inf):
        raise DPAuditError(f"{name} must be a non-negative finite number, got {value!r}.")
    return v


def check_delta(value: object, name: str = "delta", *, allow_zero: bool = False) -> float:
    """Return ``value`` after checking it lies in (0, 1), or [0, 1) with ``allow_zero``."""
    v = _as_float(name, value)
    lo_ok = v >= 0 if allow_zero else v > 0
    if not (lo_ok and v < 1):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise DPAuditError(f"{name} must lie in {interval}, got {value!r}.")
    return v


def check_confidence(confidence: object, name: str = "confidence") -> float:
    """Return a confidence level as a float after checking it lies strictly between 0 and 1 (a Python or
    numpy number: ``np.float32(0.9)`` is accepted as the 0.9 it rounds to)."""
    if isinstance(confidence, bool) or not isinstance(confidence, Real) or not 0 < float(confidence) < 1:
        raise DPAuditError(f"{name} must lie strictly between 0 and 1, got {confidence!r}.")
    return float(confidence)


def check_order(value: object, name: str = "alpha", *, finite_for: str | None = None) -> float:
    """Return a Rényi order after checking ``alpha > 1``; ``inf`` is allowed unless ``finite_for``
    names the policy that needs a finite order (a noise scale that grows with alpha)."""
    v = _as_float(name, value)
    if not v > 1:
        raise DPAuditError(f"{name} (a Rényi order) must be greater than 1, got {value!r}.")
    if finite_for is not None and math.isinf(v):
        raise DPAuditError(f"{name} must be a finite Rényi order > 1 for {finite_for} (its noise scale grows with "
                           f"{name}), got inf.")
    return v


def check_int(name: str, value: object, *, minimum: int) -> int:
    """Return ``value`` as an int after checking it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
        isinstance(value, Real) and float(value).is_integer()
    ):
        raise DPAuditError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    v = int(value)  # type: ignore[arg-type]
    if v < minimum:
        raise DPAuditError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return v


def shorten(value: object, limit: int = 80, *, as_text: bool = False) -> str:
    """``value`` for an error message: its repr (its text with ``as_text``) on one line, cut to ``limit``
    characters with "..." so a huge or multi-line value cannot swamp the sentence."""
    text = " ".join((str(value) if as_text else repr(value)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_path(name: str, value: object) -> Path:
    """Return ``value`` as a Path after checking it is one: a string or an ``os.PathLike`` naming a path
    (not bytes, not empty, no NUL character)."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text.strip() or "\0" in text:
        raise DPAuditError(f"{name} must be a path (a string or a pathlib.Path), got {shorten(value)}.")
    return Path(text)


def _probe(folder: Path, name: str) -> None:
    """Create and remove the temporary file an atomic write of ``name`` puts in ``folder``
    (``.NAME.XXXXXXXX.tmp``, longer than the name itself): what passes here can be written later."""
    fd, probe = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    os.unlink(probe)


def _writable(path: Path, who: str = "it") -> None:
    """An output file's own checks: not a folder; an existing file dpaudit may replace."""
    if path.is_dir():
        raise IsADirectoryError(21, f"{who} is a folder", str(path))
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(13, f"{who} exists and cannot be overwritten", str(path))


#: the characters an atomic write's temporary name adds to the file's own (".NAME." + 8 + ".tmp")
_TEMP_EXTRA = 14


def _name_max(path: Path) -> int:
    """The longest file name the file system holding ``path`` (or its nearest existing folder) allows."""
    for folder in (path, *path.parents):
        try:
            return int(os.pathconf(folder, "PC_NAME_MAX"))
        except (OSError, ValueError):
            continue
    return 255


def _reason(exc: OSError, path: Path | None = None) -> str:
    import errno

    if exc.errno == errno.ENAMETOOLONG and path is not None:
        most = _name_max(path.parent)
        longest = max(len(part.encode()) for part in path.parts)
        if longest > most:
            return f"a name in it has {longest} bytes, more than the {most} the file system allows"
        return (f"its name has {len(path.name.encode())} bytes, more than the {most - _TEMP_EXTRA} the file system "
                f"allows with the temporary file the write puts beside it")
    return str(exc.strerror or exc).rstrip(".")


def check_output_file(path: object, what: str, flag: str = "the path") -> Path:
    """Refuse, before any work, a file dpaudit will write when the work is done: a path that is a
    folder, a file that cannot be replaced, a folder that cannot be created or written, a name longer
    than the file system allows (the temporary file of the atomic write is probed). Creates the
    missing folders; returns the path. ``what`` names the output in the sentence ("the report")."""
    p = check_path(flag, path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        _writable(p)
        _probe(p.parent, p.name)
    except OSError as exc:
        raise DPAuditError(f"cannot write {what} to {shorten(str(p), 160)}: {_reason(exc, p)}.") from None
    return p


def check_output_folder(folder: object, what: str, files: Iterable[str] = (), flag: str = "--out") -> Path:
    """Refuse, before any work, a folder dpaudit will write ``files`` into when the work is done: a
    path that is a file (or lies under one), a folder that cannot be created or written, one of the
    files taken by a folder or not replaceable, a name longer than the file system allows. Creates
    the folder; returns it. ``what`` names the output in the sentence ("the figures and tables")."""
    p = check_path(flag, folder)
    names = list(files)
    try:
        if p.exists() and not p.is_dir():
            raise NotADirectoryError(20, "it is a file, not a folder", str(p))
        p.mkdir(parents=True, exist_ok=True)
        for name in names:
            _writable(p / name, repr(name) + " in it")
        _probe(p, max(names, key=len) if names else "probe")
    except OSError as exc:
        raise DPAuditError(f"cannot write {what} into {flag} {shorten(str(p), 160)}: "
                           f"{_reason(exc, p / max(names, key=len) if names else p)}.") from None
    return p
