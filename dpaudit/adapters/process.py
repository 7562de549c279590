"""A policy served by another process, in any language (``--adapter process``): the line-delimited JSON
protocol ``dpaudit.process/1`` on the process's stdin and stdout (the reference, for an implementer in
another language, is docs/outside-code.md, "A policy in another process").

dpaudit starts the command, greets it (``hello``: the protocol version, the parameters and the horizon;
the answer says the number of arms, whether it serves a batch of runs in one message, its reward range),
asks for its claim (``claim``), then for each batch of runs sends ``reset`` (seed, runs, ...) and, round
by round, ``act`` and ``observe``. Batched (the default when the process says ``"batch": true``): one
message per round carries every run; else one message per run and round, written in chunks so that
neither side's pipe fills while the other waits.

The sandbox's guarantees: every answer is awaited at most the call limit (``timeout=`` of the adapter,
else ``--call-timeout``, the watchdog of :mod:`dpaudit.sandbox`); a process that exits, does not answer in
time, writes something that is not a JSON object of the expected form, reports an error, or plays an arm
outside 0..K-1 ends the audit with one sentence naming the command, the step (op, round, runs) and what
came back (shortened). So do a second line for one message, a process that exits after answering (one that
forks and exits, leaving a child on the pipes, would otherwise be restarted for every message), a ``batch``
that is not a JSON boolean, a reward range whose width overflows, and a command that does not split into
words. Every process the policy starts (an engine worker's own too) is greeted with ``hello`` first. Before
an audit, :meth:`ProcessPolicy.check_seeded` runs two short probes with the same seed: different arms mean
randomness the seed does not fix, refused as the other adapters refuse it. The process is killed on any of
these, on an interrupt, when the policy is dropped and at exit; on Linux it is also killed if dpaudit's
process dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypedDict, Union, cast

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.adapters.claims import CLAIM_FORMS, parse_claim
from dpaudit.errors import DPAuditError, check_int, shorten
from dpaudit.sandbox import MAX_CALL_TIMEOUT, SCALED, WATCHDOG_FACTOR, WATCHDOG_FIRST, WATCHDOG_FLOOR

__all__ = ["PROTOCOL", "ProcessPolicy", "make_process", "JSONValue", "HelloMessage", "ClaimMessage", "ResetMessage",
           "ActMessage", "ActRunMessage", "ObserveRunMessage", "Message", "Answer"]

#: the protocol's name and version, exchanged in the hello message
PROTOCOL = "dpaudit.process/1"
#: how many per-run messages are written before their answers are read (keeps both pipes below 64 KiB)
CHUNK = 512
#: the same-seed check (:meth:`ProcessPolicy.check_seeded`): two probes of this many runs and rounds, reset with
#: the seed one draw from this seed gives
PROBE_RUNS, PROBE_ROUNDS, PROBE_SEED = 4, 16, 20261122
#: seconds dpaudit waits after the answer to hello for a line the process writes unasked (refused)
HELLO_SETTLE = 0.05
_LIVE: "weakref.WeakSet[_Process]" = weakref.WeakSet()

# ---- the protocol's messages -------------------------------------------------------------------------------

#: a JSON value, as ``json`` reads and writes it
JSONValue: TypeAlias = Union[None, bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"]]


class HelloMessage(TypedDict):
    """The first message to every process: the protocol, the parameters (``--param``, as JSON values) and the
    audit's horizon (None: not known yet)."""

    op: Literal["hello"]
    protocol: str
    params: dict[str, object]
    horizon: int | None


class ClaimMessage(TypedDict):
    """Asks for the process's claim (unless ``--claim`` gives one)."""

    op: Literal["claim"]


class ResetMessage(TypedDict):
    """Fresh state for ``runs`` independent runs, all their randomness from ``seed``."""

    op: Literal["reset"]
    seed: int
    runs: int
    n_arms: int
    horizon: int | None
    params: dict[str, object]


class ActMessage(TypedDict):
    """Batched: every run's arm at round ``t``."""

    op: Literal["act"]
    t: int
    runs: int


class ActRunMessage(TypedDict):
    """Per run: run ``run``'s arm at round ``t``."""

    op: Literal["act"]
    t: int
    run: int


class ObserveRunMessage(TypedDict):
    """Per run: run ``run``'s arm and reward at round ``t``. (Batched, observe is written as JSON text at once:
    :func:`json_numbers`.)"""

    op: Literal["observe"]
    t: int
    run: int
    arm: int
    reward: float


#: what dpaudit sends, one JSON object per line (a batched observe as its JSON text already)
Message: TypeAlias = Union[HelloMessage, ClaimMessage, ResetMessage, ActMessage, ActRunMessage, ObserveRunMessage]


class Answer(TypedDict, total=False):
    """An answer of the process, one JSON object per message, by the fields the protocol gives it: hello's
    (``protocol``, ``n_arms``, ``batch``, ``name``, ``reward_range``), claim's (``claim``), act's (``arms``
    batched, ``arm`` per run), ``ok``, and ``error`` for a message it cannot serve. Outside code wrote it:
    each field is checked where it is read, and a wrong one is refused in one sentence."""

    protocol: str
    n_arms: int
    batch: bool
    name: str
    reward_range: list[float]
    claim: str | None
    arms: list[int]
    arm: int
    ok: bool
    error: str


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class _Process:
    """One running command and its pipes: lines written, lines read under a deadline (``timeout``: seconds,
    or "scaled": the sandbox's scaled watchdog rule applied to this process's own answers)."""

    def __init__(self, argv: list[str], label: str, timeout: float | str, env: Mapping[str, str] | None = None) -> None:
        self.label, self.timeout = label, timeout
        self.slowest: float | None = None
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                         env=None if env is None else dict(env),
                                         preexec_fn=_die_with_parent if os.name == "posix" else None)
        except OSError as exc:
            self.stderr.close()
            raise DPAuditError(f"the process adapter cannot start {label}: {exc.strerror or exc}; POLICY is the "
                               "command that serves the policy, e.g. \"node examples/process_ucb.js\".") from None
        self.owner = os.getpid()
        self.buf = bytearray()
        os.set_blocking(self.proc.stdout.fileno(), False)
        os.set_blocking(self.proc.stdin.fileno(), False)
        _LIVE.add(self)
        self._finalizer = weakref.finalize(self, _kill, self.proc, self.owner)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(0, os.SEEK_END)
            n = self.stderr.tell()
            self.stderr.seek(max(0, n - 2000))
            lines = [x for x in self.stderr.read().decode(errors="replace").splitlines() if x.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1] if lines else ""

    def died(self, where: str) -> DPAuditError:
        """The sentence for a process that exited (or closed its stdout) during ``where``."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.stderr_tail()
        self.kill()
        how = ("closed its output" if code is None else f"was killed by signal {-code}" if code < 0
               else f"exited with code {code}")
        said = f"; its last line on stderr: {shorten(tail, 160, as_text=True)}" if tail else "; it wrote nothing on stderr"
        return DPAuditError(f"process {self.label} {how} during {where}{said}.")

    def limit(self) -> float:
        """Seconds the next answer may take: the fixed timeout, or the scaled watchdog's rule (the first answer
        WATCHDOG_FIRST seconds, then WATCHDOG_FACTOR times the slowest answer so far, at least WATCHDOG_FLOOR)."""
        if self.timeout != SCALED:
            return float(self.timeout)
        if self.slowest is None:
            return WATCHDOG_FIRST
        return min(max(WATCHDOG_FLOOR, WATCHDOG_FACTOR * self.slowest), MAX_CALL_TIMEOUT)

    def hung(self, where: str, limit: float) -> DPAuditError:
        self.kill()
        rule = ("" if self.timeout != SCALED else
                f" (by default the scaled watchdog: {WATCHDOG_FIRST:g} s for the first answer, then "
                f"{WATCHDOG_FACTOR:g} times the slowest so far, at least {WATCHDOG_FLOOR:g} s)")
        return DPAuditError(f"process {self.label} did not answer {where} within {limit:g} s, so it was killed; an "
                            f"answer may take at most the call limit (--adapter process:timeout=SECONDS, else "
                            f"--call-timeout{rule}), so raise it if the process is only slow.")

    def write(self, data: bytes, where: str) -> None:
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        limit = self.limit()
        deadline = time.monotonic() + limit
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.hung(where, limit)
            _, w, _ = select.select([], [fd], [], left)
            if not w:
                continue
            try:
                n = os.write(fd, view)
            except BrokenPipeError:
                raise self.died(where) from None
            except BlockingIOError:
                continue
            view = view[n:]

    def read_lines(self, n: int, where: str) -> list[bytes]:
        """The next ``n`` lines, each within the time limit of the one before."""
        fd = self.proc.stdout.fileno()
        out: list[bytes] = []
        limit = self.limit()
        start = time.monotonic()
        deadline = start + limit
        while len(out) < n:
            i = self.buf.find(b"\n")
            if i >= 0:
                out.append(bytes(self.buf[:i]))
                del self.buf[:i + 1]
                now = time.monotonic()
                self.slowest = max(self.slowest or 0.0, now - start)
                limit = self.limit()
                start, deadline = now, now + limit
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.hung(where, limit)
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                raise self.died(where)
            self.buf += chunk
        return out

    def unasked(self, wait: float = 0.0) -> bytes | None:
        """Output the process wrote beyond its answers (already read, or in the pipe within ``wait`` seconds):
        what it wrote unasked, or None. A well-behaved process writes exactly one line per message."""
        if not self.buf:
            fd = self.proc.stdout.fileno()
            try:
                r, _, _ = select.select([fd], [], [], wait)
                chunk = os.read(fd, 1 << 20) if r else b""
            except (BlockingIOError, OSError, ValueError):
                chunk = b""
            self.buf += chunk
        if not self.buf:
            return None
        i = self.buf.find(b"\n")
        return bytes(self.buf[:i if i >= 0 else len(self.buf)])

    def kill(self) -> None:
        self._finalizer()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.stderr.close()
        except OSError:
            pass
        _LIVE.discard(self)

    def close(self) -> None:
        """Say goodbye (stdin closed: the process should exit), then kill what is left."""
        if os.getpid() != self.owner:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=0.5)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            pass
        self.kill()


def _kill(proc: subprocess.Popen, owner: int) -> None:
    if os.getpid() != owner:  # a forked worker holds a copy of the handle: the process is its parent's
        return
    if proc.poll() is None:
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


@atexit.register
def _kill_all() -> None:
    for p in list(_LIVE):
        p.kill()


class ProcessPolicy:
    """A policy served by a command speaking ``dpaudit.process/1`` (module docstring), as a batched
    dpaudit policy: ``n_arms``, ``claim``, ``reset``, ``act``, ``observe``.

    ``ProcessPolicy("node examples/process_ucb.js", params={"epsilon": 1}, horizon=48)``: the command
    (text, split as a POSIX shell would, or a list), the parameters sent in ``hello`` and ``reset`` (as
    JSON: numbers stay numbers), the audit's horizon, and the options of ``--adapter
    process:KEY=VALUE,...``: ``batch`` (True/False: one message per round for all runs, or one per run;
    default what the process's hello says), ``n_arms`` (else the process's hello must say it),
    ``timeout`` (seconds an answer may take; default the call limit in force: ``--call-timeout``, or the
    sandbox's scaled watchdog rule applied to the process's own answers). ``claim``
    replaces the process's own (its answer to ``claim``). No ledger: only the black-box attacks apply.
    """

    accepts_queries = True

    def __init__(self, command: str | Sequence[str], params: Mapping[str, object] | None = None,
                 horizon: int | None = None, claim: Guarantee | str | None = None, *, batch: bool | None = None,
                 n_arms: int | None = None, timeout: float | None = None) -> None:
        argv = _split_command(command)
        self.argv = argv
        self.command = " ".join(shlex.quote(a) for a in argv)
        short = " ".join(os.path.basename(a) if os.sep in a else a for a in argv)
        self.label = f"`{shorten(short, 80, as_text=True)}`"
        self.name = f"{self.command} (process)"
        self.kwargs = {k: _json_value(v) for k, v in dict(params or {}).items()}
        self.horizon = None if horizon is None else check_int("horizon", horizon, minimum=1)
        self.timeout: float | str = _answer_limit(timeout)
        self._proc: _Process | None = None
        #: the hello message (every process the policy starts is greeted with it), the n_arms the first answer
        #: said, and the step the process answered last (for a process that exits or writes unasked after it)
        self._greeting: HelloMessage | None = None
        self._hello_said: int | None = None
        self._answered: str | None = None
        hello = self._hello()
        self._hello_said = hello.get("n_arms")
        self.n_arms = self._arms_said(hello, n_arms)
        self.batch = self._batch_said(hello, batch)
        #: one message per run and round costs what a one-run class's call does, or more: the search then
        #: ranks on the per-run adapter's small samples (runner.central.pilot_budgets)
        self.per_copy = not self.batch
        self.reward_range = self._range_said(hello)
        self.process_name = str(hello.get("name", argv[0]))
        self.claim = self._claim(claim)
        self.audit_notes = [
            f"{self.process_name} is served by the process {self.command} (protocol {PROTOCOL}, "
            + ("one message per round for all runs" if self.batch else "one message per run and round")
            + "); it keeps no ledger, so only the black-box attacks judge it."]
        self.n_runs = 0
        self._t = 0
        self._acted = False

    # ---- what the process said in its hello, and its claim -------------------------------------------------
    def _arms_said(self, hello: Answer, n_arms: int | None) -> int:
        """The number of arms: ``n_arms`` if given, else the hello's; an integer >= 2."""
        k = n_arms if n_arms is not None else hello.get("n_arms")
        if k is None:
            raise DPAuditError(f"process {self.label} did not say its number of arms in its answer to hello "
                               "(\"n_arms\": K); give it with --adapter process:n_arms=K.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 2:
            raise DPAuditError(f"the number of arms of process {self.label} must be an integer >= 2, got {shorten(k)}.")
        return int(k)

    def _batch_said(self, hello: Answer, batch: bool | None) -> bool:
        """Whether one message per round carries every run: ``batch`` if given, else the hello's (a JSON boolean;
        left out: false)."""
        said = hello.get("batch", False)
        if not isinstance(said, bool):  # "false" is text, and bool("false") is True: only JSON booleans
            self.close()
            raise DPAuditError(f"process {self.label} answered hello with \"batch\": {shorten(json.dumps(said), as_text=True)}; "
                               "batch must be a JSON boolean, true or false (or left out: false).")
        if batch is not None and not isinstance(batch, (bool, np.bool_)):
            self.close()
            raise DPAuditError(f"the process adapter's batch must be True, False or None (what the process's hello "
                               f"says), got {shorten(batch)}.")
        return said if batch is None else bool(batch)

    def _range_said(self, hello: Answer) -> tuple[float, float]:
        """The hello's reward range (default [0, 1]): two finite numbers LOW < HIGH whose width is finite too."""
        rr = hello.get("reward_range", [0.0, 1.0])
        try:
            lo, hi = (float(x) for x in rr)
            assert np.isfinite(lo) and np.isfinite(hi) and lo < hi
        except (TypeError, ValueError, AssertionError, OverflowError):
            self.close()
            raise DPAuditError(f"process {self.label} answered hello with reward_range {shorten(rr)}; it must be two "
                               "finite numbers [LOW, HIGH] with LOW < HIGH.") from None
        if not np.isfinite(hi - lo):  # [-1e308, 1e308]: the audit's rewards and statistics would overflow
            self.close()
            raise DPAuditError(f"process {self.label} answered hello with reward_range {shorten(rr)}, whose width "
                               f"HIGH - LOW overflows to inf; the width of a reward range must be a finite number "
                               f"(at most {np.finfo(float).max:.3g}).")
        return (lo, hi)

    def _claim(self, claim: Guarantee | str | None) -> Guarantee | None:
        """The claim audited: ``claim`` (text as in :func:`parse_claim`, or a Guarantee), else the process's answer
        to ``claim`` (its text, or null for none)."""
        if claim is None:
            answer = self._ask([{"op": "claim"}], "claim", "claim")[0]
            if "claim" not in answer:
                self.close()
                raise DPAuditError(f"process {self.label} answered claim with {shorten(answer)}, which has no "
                                   f"\"claim\" field; the answer is {{\"claim\": TEXT}} with TEXT such as "
                                   f"{CLAIM_FORMS}, or {{\"claim\": null}} for none.")
            text = answer.get("claim")
            if text is not None:
                if not isinstance(text, str):
                    raise DPAuditError(f"process {self.label} answered claim with {shorten(answer)}; the claim must "
                                       f"be text such as {CLAIM_FORMS}, or null.")
                try:
                    claim = parse_claim(text)
                except DPAuditError as exc:
                    raise DPAuditError(f"process {self.label} answered claim with {shorten(text)}: {exc}") from None
        elif isinstance(claim, str):
            claim = parse_claim(claim)
        if claim is not None and not isinstance(claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
        return claim

    # ---- the pipe ---------------------------------------------------------------------------------------
    def _process(self) -> _Process:
        """The running process, started (and greeted with ``hello``, as every process is) when there is none in
        this process: the first, or an engine worker's own. One that exited after answering is refused."""
        p = self._proc
        if p is not None and p.owner == os.getpid():
            if p.alive():
                return p
            self._proc = None
            raise self._exited(p)
        p = self._proc = _Process(self.argv, self.label, self.timeout)
        if self._greeting is not None:  # a worker's own process: hello first, as the first process had it
            answer = self._exchange(p, [self._greeting], "hello", "hello")[0]
            self._check_hello(answer)
            if self._hello_said is not None and answer.get("n_arms", self._hello_said) != self._hello_said:
                p.kill()
                self._proc = None
                raise DPAuditError(f"process {self.label} answered hello with n_arms = {shorten(answer.get('n_arms'))} "
                                   f"in a worker process but {self._hello_said} in the first; a policy's processes "
                                   "must agree on its number of arms.")
        return p

    def _exited(self, p: _Process) -> DPAuditError:
        """The sentence for a process that exited on its own after answering (``where`` it last answered)."""
        code = p.proc.poll()
        tail = p.stderr_tail()
        p.kill()
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        said = f"; its last line on stderr: {shorten(tail, 160, as_text=True)}" if tail else ""
        return DPAuditError(f"process {self.label} {how} after answering {self._answered or 'nothing'}, while the audit still "
                            "needed it; a server must keep running, with its runs' state, until dpaudit closes its "
                            "stdin (one that forks and exits, leaving a child to answer, is refused, since each "
                            f"restart would drop the runs it serves){said}.")

    def _hello(self) -> Answer:
        msg: HelloMessage = {"op": "hello", "protocol": PROTOCOL, "params": self.kwargs, "horizon": self.horizon}
        answer = self._ask([msg], "hello", "hello")[0]
        self._check_hello(answer)
        self._greeting = msg
        return answer

    def _check_hello(self, answer: Answer) -> None:
        if answer.get("protocol") != PROTOCOL:
            self.close()
            raise DPAuditError(f"process {self.label} answered hello with protocol {shorten(answer.get('protocol'))}; "
                               f"dpaudit speaks {PROTOCOL!r} (docs/outside-code.md).")

    def _ask(self, messages: Sequence[Message | str], op: str, where: str, *, runs: list[int] | None = None,
             t: int | None = None) -> list[Answer]:
        """Send ``messages`` (in chunks of :data:`CHUNK`; a message is a dict, or its JSON text already
        encoded) and return their answers, each a JSON object without ``error``; ``where`` names the step
        for errors, ``runs`` the run of each message."""
        return self._exchange(self._process(), messages, op, where, runs=runs)

    def _exchange(self, p: _Process, messages: Sequence[Message | str], op: str, where: str, *,
                  runs: list[int] | None = None) -> list[Answer]:
        """:meth:`_ask` on the process ``p``: its answers; on any failure ``p`` is killed. Output beyond one line
        per message is refused (looked for before and after; after ``hello``, for :data:`HELLO_SETTLE` seconds,
        since a banner or a second line of a greeting comes right after it)."""
        out: list[Answer] = []
        try:
            extra = p.unasked()
            if extra is not None:
                when = "before dpaudit asked anything" if self._answered is None else f"after its answer to {self._answered}"
                raise DPAuditError(f"process {self.label} wrote {shorten(extra.decode(errors='replace'), 80, as_text=True)!r} "
                                   f"{when}, unasked; the protocol answers each message with exactly one line on "
                                   "stdout, so anything else goes to stderr (docs/outside-code.md).")
            for s in range(0, len(messages), CHUNK):
                part = messages[s:s + CHUNK]
                here = where if runs is None else f"{where}, run {runs[s]}" + (
                    f"..{runs[s + len(part) - 1]}" if len(part) > 1 else "")
                p.write("".join((m if isinstance(m, str) else json.dumps(m, separators=(",", ":"))) + "\n"
                                for m in part).encode(), here)
                for j, line in enumerate(p.read_lines(len(part), here)):
                    step = where if runs is None else f"{where}, run {runs[s + j]}"
                    out.append(self._parse(line, op, step))
                self._answered = here
            extra = p.unasked(HELLO_SETTLE if op == "hello" else 0.0)
            if extra is not None:
                raise DPAuditError(f"process {self.label} answered {self._answered} with more than one line: after its "
                                   f"answer came {shorten(extra.decode(errors='replace'), 80, as_text=True)!r}; the "
                                   "protocol answers each message with exactly one line (docs/outside-code.md).")
        except BaseException:
            if not isinstance(p, _Process):  # pragma: no cover
                raise
            p.kill()  # an error, a timeout or an interrupt: nothing is left running
            if self._proc is p:
                self._proc = None
            raise
        return out

    def _parse(self, line: bytes, op: str, where: str) -> Answer:
        text = line.decode(errors="replace")
        obj: JSONValue
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise DPAuditError(f"process {self.label} answered {where} with {shorten(text, 80, as_text=True)!r}, which "
                               "is not a JSON object on one line (the protocol: docs/outside-code.md).")
        if "error" in obj:
            raise DPAuditError(f"process {self.label} reported an error at {where}: "
                               f"{shorten(obj['error'], 160, as_text=True)}.")
        return cast(Answer, obj)  # a JSON object: its fields are checked where they are read

    # ---- the same-seed check -----------------------------------------------------------------------------
    def check_seeded(self, runs: int = PROBE_RUNS, rounds: int = PROBE_ROUNDS) -> None:
        """Two short probes with the same seed (``runs`` runs, the first ``rounds`` rounds of the horizon, on the
        same rewards) must answer the same arms, else the process draws randomness its ``reset`` seed does not
        fix (the OS's, the clock's): refused in one sentence, as the other adapters refuse unseedable code, since
        the audit's findings could not be reproduced from its seed. :func:`make_process` (the CLI's
        ``--adapter process`` and ``dpaudit.audit``) runs it; after it the policy waits for the audit's first reset."""
        lo, hi = self.reward_range
        T = min(rounds, self.horizon) if self.horizon is not None else rounds
        vals = (0.5, 0.25, 0.75, 0.375, 0.625)
        views = []
        for _ in range(2):
            self.reset(runs, np.random.default_rng(PROBE_SEED))
            seed = self._probe_seed
            arms = []
            for t in range(T):
                a = self.act(t)
                arms.append(a.tolist())
                self.observe(t, a, lo + (hi - lo) * np.array([vals[(t * 7 + int(x) + i) % 5] for i, x in enumerate(a)]))
            views.append(arms)
        self.n_runs, self._t, self._acted = 0, 0, False
        if views[0] != views[1]:
            t, i = next((t, i) for t in range(T) for i in range(runs) if views[0][t][i] != views[1][t][i])
            self.close()
            raise DPAuditError(f"process {self.label} draws randomness its reset seed does not fix: two resets with the "
                               f"same seed ({seed}) on the same rewards played arm {views[0][t][i]} and then arm "
                               f"{views[1][t][i]} for run {i} at round {t}; draw every random number from a generator "
                               "seeded by reset's \"seed\" (not the OS's or the clock's), so that a seed reproduces "
                               "the audit.")

    # ---- the batched contract ------------------------------------------------------------------------
    def reset(self, n_runs: int, rng: np.random.Generator, **_: object) -> None:
        """Fresh state for ``n_runs`` runs in the process, seeded by one draw from ``rng``."""
        n = check_int("n_runs", n_runs, minimum=1)
        if not isinstance(rng, np.random.Generator):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        seed = self._probe_seed = int(rng.integers(0, 1 << 31))
        msg: ResetMessage = {"op": "reset", "seed": seed, "runs": n, "n_arms": self.n_arms, "horizon": self.horizon,
                             "params": self.kwargs}
        self._ask([msg], "reset", f"reset ({n} runs)")
        self.n_runs, self._t, self._acted = n, 0, False

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        """Each run's arm at round ``t``, checked: (n_runs,) ints in [0, n_arms)."""
        if arms is not None:
            raise DPAuditError(f"the process adapter drives context-free bandits; {self.label} was given features.")
        self._in_turn("act", t, False)
        n = self.n_runs
        if self.batch:
            answer = self._ask([{"op": "act", "t": t, "runs": n}], "act", f"act at round {t} ({n} runs)")[0]
            raw = answer.get("arms")
            if not isinstance(raw, list) or len(raw) != n:
                raise DPAuditError(f"process {self.label} answered act at round {t} with {shorten(answer)}; it must be "
                                   f"{{\"arms\": [...]}} with one arm for each of the {n} runs.")
            out = self._arms(raw, t, list(range(n)))
        else:
            answers = self._ask([{"op": "act", "t": t, "run": i} for i in range(n)], "act", f"act at round {t}",
                                runs=list(range(n)))
            out = self._arms([a.get("arm") for a in answers], t, list(range(n)))
        self._acted = True
        return out

    def _arms(self, raw: Sequence[object], t: int, runs: list[int]) -> np.ndarray:
        if set(map(type, raw)) <= {int}:  # the usual answer, checked without a Python loop per run
            try:
                out = np.asarray(raw, dtype=np.int64)
            except OverflowError:  # an arm beyond int64 (10**20): named below with the allowed range
                out = None
            if out is not None and (out.size == 0 or (out.min() >= 0 and out.max() < self.n_arms)):
                return out
        ok = [isinstance(a, int) and not isinstance(a, bool) and 0 <= a < self.n_arms for a in raw]
        if not all(ok):
            i = ok.index(False)
            raise DPAuditError(f"process {self.label} answered act at round {t} with arm {shorten(raw[i])} for run "
                               f"{runs[i]}; an arm is an integer in 0..{self.n_arms - 1}.")
        return np.asarray(raw, dtype=np.int64)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        """Round ``t``'s arms and rewards to every run; rewards outside ``reward_range`` are refused."""
        from dpaudit.policies.base import check_actions, check_rewards

        self._in_turn("observe", t, True)
        a_arr = check_actions(actions, self.n_runs, self.n_arms, self.name, t)
        r_arr = check_rewards(rewards, self.n_runs, self.reward_range, self.name, t)
        if self.batch:
            line = (f'{{"op":"observe","t":{int(t)},"arms":{json_numbers(a_arr)},'
                    f'"rewards":{json_numbers(r_arr)}}}')
            self._ask([line], "observe", f"observe at round {t} ({self.n_runs} runs)")
        else:
            a, r = a_arr.tolist(), r_arr.tolist()
            self._ask([{"op": "observe", "t": t, "run": i, "arm": a[i], "reward": r[i]} for i in range(self.n_runs)],
                      "observe", f"observe at round {t}", runs=list(range(self.n_runs)))
        self._t, self._acted = t + 1, False

    def _in_turn(self, op: str, t: int, acted: bool) -> None:
        if t != self._t or self._acted != acted or self.n_runs == 0:
            raise DPAuditError(f"{self.name} expects reset, then act and observe at rounds 0, 1, 2, ... in turn; got "
                               f"{op} at round {t}.")

    def params(self) -> dict[str, object]:
        """The parameters sent to the process (for reports)."""
        return dict(self.kwargs)

    def describe(self) -> str:
        return (f"{self.process_name} served by the process {self.command} ({PROTOCOL}, "
                f"{'batched' if self.batch else 'per run'})")

    def close(self) -> None:
        """End the process (stdin closed, then killed if still running)."""
        if self._proc is not None:
            self._proc.close()
            self._proc = None

    def __getstate__(self) -> dict[str, object]:
        # pickled to the engine's workers: each starts its own process on its first message
        state = dict(self.__dict__)
        state["_proc"] = None
        state["n_runs"] = 0
        return state


def json_numbers(values: np.ndarray) -> str:
    """The JSON array of a 1-d array of finite numbers, as ``json.dumps(values.tolist())`` writes it.

    Integers stay integers and floats floats (``1.0``, never ``1``: a policy in Python reads the type it
    would have read), in about a tenth of ``json.dumps``'s time when every value is a single digit (arms,
    0/1 rewards: the batched protocol's bulk), else by ``repr``, which is what ``json`` writes, once per
    distinct value when there are few.
    """
    v = np.asarray(values)
    if v.ndim != 1:
        raise ValueError(f"json_numbers takes a 1-d array, got shape {v.shape}")
    is_int = v.dtype.kind in "iub"
    if v.size and v.dtype.kind in "iuf":
        digit = v.min() >= 0 and v.max() <= 9 and (is_int or bool(np.all(v == np.floor(v))))
        if digit:
            width = 2 if is_int else 4  # "d," or "d.0,"
            buf = np.empty((v.size, width), dtype=np.uint8)
            buf[:, 0] = v.astype(np.uint8) + ord("0")
            if not is_int:
                buf[:, 1], buf[:, 2] = ord("."), ord("0")
            buf[:, -1] = ord(",")
            return "[" + buf.tobytes()[:-1].decode("ascii") + "]"
    if v.dtype.kind == "b":
        return json.dumps(v.tolist())
    text = repr if v.dtype.kind == "f" else str
    if v.size > 64:
        # an audit's rewards take a few values (a reward table's means, a canary's two rewards): each is
        # written once, and the array is assembled by index
        values, index = np.unique(v, return_inverse=True)
        if values.size <= v.size // 8:
            return "[" + ",".join(np.array([text(x) for x in values.tolist()], dtype=object)[index].tolist()) + "]"
    return "[" + ",".join(map(text, v.tolist())) + "]"


def _json_value(v: object) -> object:
    """A ``--param`` string as the JSON value it reads as (numbers, true/false, null), else the text."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _split_command(command: str | Sequence[str]) -> list[str]:
    """The command's words: text split as a POSIX shell would, or a list's items as text; refused in one sentence
    when it does not split (an unbalanced quote), is neither, or is empty."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else [str(x) for x in command]
    except ValueError as exc:  # an unbalanced quote: shlex's "No closing quotation"
        raise DPAuditError(f"the process adapter cannot split the command {shorten(command)} into words as a POSIX "
                           f"shell would ({str(exc).lower()}); close the quote, or quote the whole command once "
                           "for your shell, e.g. \"node examples/process_ucb.js\".") from None
    except TypeError:
        raise DPAuditError("the process adapter needs a command as text or a list of words, e.g. \"node "
                           f"examples/process_ucb.js\"; got {shorten(command)}.") from None
    if not argv:
        raise DPAuditError("the process adapter needs a command, e.g. \"node examples/process_ucb.js\"; got "
                           f"{shorten(command)}.")
    return argv


def _answer_limit(timeout: float | None) -> float | str:
    """Seconds an answer may take: ``timeout``, else the call limit in force (:func:`dpaudit.sandbox.call_limit`:
    seconds, or :data:`~dpaudit.sandbox.SCALED`, the scaled watchdog's rule; no limit: the longest); a number of
    seconds must lie in (0, :data:`~dpaudit.sandbox.MAX_CALL_TIMEOUT`]."""
    limit: float | str | None = timeout
    if limit is None:
        from dpaudit.sandbox import current_call_limit

        limit = current_call_limit()  # seconds, the scaled watchdog, or None (no limit)
        limit = MAX_CALL_TIMEOUT if limit is None else limit
    if limit != SCALED:
        given = limit
        try:
            limit = float(limit)
        except (TypeError, ValueError):
            limit = float("nan")
        if not 0 < limit <= MAX_CALL_TIMEOUT:
            raise DPAuditError(f"the process adapter's timeout must be a number of seconds in (0, "
                               f"{MAX_CALL_TIMEOUT:g}], got {given!r}.")
    return limit


def make_process(command: str, params: Mapping[str, object] | None = None, claim: Guarantee | str | None = None,
                 horizon: int | None = None, **options: Any) -> ProcessPolicy:
    """The CLI's ``--adapter process[:KEY=VALUE,...]``: POLICY is the command (``"node examples/process_ucb.js"``),
    ``--param`` values go to the process as JSON values, ``options`` to :class:`ProcessPolicy`; the process must
    pass the same-seed check (:meth:`ProcessPolicy.check_seeded`)."""
    policy = ProcessPolicy(command, params, horizon, claim, **options)
    policy.check_seeded()
    return policy
