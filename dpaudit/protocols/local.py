"""Local DP: each user's data is private even from the server.

The definition is "Local DP" of the interactive joint/local DP definitions and Def. 1 of Zheng et al.
(2020), "Locally Differentially Private (Contextual) Bandits Learning" (:mod:`dpaudit.papers`).

The server observes only the channel's message o_t = channel(z_t); the adversary sees the server's
whole transcript (every message and action); neighbours differ in one user's data, changed to any
value of its domain. A local-DP plug-in exposes its channel (``channel(z_batch, rng)``, ``domain``
or ``domain_pairs()``, optionally ``channel_table()``) and its transcript (``keep_transcript``,
``transcript()``); see docs/local-dp.md. :func:`check_local_plugin` checks that contract with
a few cheap probes before an audit relies on it: a malformed member is refused with one sentence
naming it, never a traceback from numpy and never a silent pass.
"""

from __future__ import annotations

import math
import traceback
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import numpy as np

from dpaudit.errors import DPAuditError, InternalError, shorten

from dpaudit.policies.base import PolicyLike

from .base import FixedActionSet
from .table import PairSpec, TableDP, make_pair

__all__ = ["LocalDP", "LocalPluginInfo", "check_local_plugin", "ask_transcript", "real_array"]

#: what a call into the policy's code returns
_R = TypeVar("_R")


class LocalDP(TableDP):
    """Local DP: each user's data z_t is private; the server observes only the channel's message o_t.

    ============ ================================================ ===========================================
    private      policy observes at t                             view (what the adversary sees)
    ============ ================================================ ===========================================
    z_t per user the message o_t ~ channel(z_t) (never z_t itself) the server's whole transcript: o_1..o_T and
                                                                   every action
    ============ ================================================ ===========================================

    Neighbours: user t's data changed to any other value of its domain, everything else fixed. The
    input is the same T x K table of potential rewards as Table DP (user t's data is her row; she
    holds the reward of whichever arm the server plays), so :meth:`run` is Table DP's; the audit
    (:mod:`dpaudit.check_local`) reads the messages through the policy's channel and transcript.
    """

    name = "local"
    summary = ("input: each user's data (user t's row of a T x K reward table); view: the server's whole "
               "transcript (messages and actions); neighbours: one user's data changed to any value of its domain")


# ---- the local plug-in contract, checked -----------------------------------------------------------------

def real_array(raw: object, what: str, allowed: str) -> np.ndarray:
    """``raw`` (what a plug-in returned: messages, a transcript, a channel table) as a float array.

    Complex numbers are refused in one sentence naming ``what`` and ``allowed``: converting them to floats
    would drop the imaginary part unseen, so a channel that sends the raw datum there would be judged on
    its real part alone (and pass). Anything else that is not numbers raises numpy's TypeError or
    ValueError, for the caller's own sentence."""
    arr = np.asarray(raw)
    if arr.dtype.kind == "c" or (arr.dtype.kind == "O" and any(
            isinstance(x, (complex, np.complexfloating)) for x in arr.flat)):
        values = [complex(x) for x in arr.flat if isinstance(x, (complex, np.complexfloating))]
        first = next((v for v in values if v.imag != 0), values[0])
        raise DPAuditError(f"{what} returned complex numbers (such as {complex(first)!r}); messages must be real, "
                           f"since an imaginary part would be dropped unseen: {allowed}.")
    return np.asarray(arr, dtype=float)


#: users per channel query of the probes, alternating (a channel that ignores the batch size fails one of them)
PROBE_BATCHES = (3, 5)
#: runs of each transcript probe
PROBE_RUNS = 3
#: how far a row of a finite channel's P may sum from 1
ROW_SUM_TOL = 1e-9

_MISSING = object()


@dataclass(frozen=True, eq=False)
class LocalPluginInfo:
    """What :func:`check_local_plugin` found, every part of it checked.

    ``pairs`` are the (z, z') user data the channel attack compares (float arrays; 0-d for scalar data:
    the domain's extremes, or the reward alphabet's); ``alphabet`` the only user data the audit may feed
    (``--rewards``, else the policy's ``reward_alphabet``; scalar K-armed data only, else None);
    ``message_shape`` one user's message as the channel returns it; ``table`` the finite channel's
    (inputs, outputs, P), or None; ``transcript`` whether the policy keeps a transcript, with
    ``transcript_width`` m, the numbers the server receives per user.
    """

    vector_data: bool
    continuous: bool
    domain: tuple[float, float]
    pairs: tuple[tuple[np.ndarray, np.ndarray], ...]
    alphabet: tuple[float, ...] | None
    message_shape: tuple[int, ...]
    table: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    transcript: bool
    transcript_width: int | None


def _unwrap(policy: PolicyLike) -> tuple[PolicyLike, str | None]:
    """The policy object behind dpaudit's wrappers (FixedActionSet, the sandbox's PluginPolicy) and its plug-in spec."""
    from dpaudit.sandbox import PluginPolicy

    obj, plugin = policy, None
    while isinstance(obj, (FixedActionSet, PluginPolicy)):
        if isinstance(obj, PluginPolicy):
            plugin = obj._plugin
        obj = obj.wrapped
    return obj, plugin


def ask_transcript(policy: PolicyLike, keep: object = True) -> object:
    """Set ``keep_transcript`` on the policy object itself, past FixedActionSet and the sandbox's wrapper (which
    forward reads only, so setting it on them would ask nothing); returns the value it had."""
    inner, _ = _unwrap(policy)
    old = getattr(inner, "keep_transcript", None)
    inner.keep_transcript = keep
    return old


def _message(exc: BaseException) -> str:
    return (" ".join(str(exc).split())[:200] or "(no message)").rstrip(".")


class _Probe:
    """Calls into the policy: a failure of its code becomes one sentence naming the member."""

    def __init__(self, policy: PolicyLike, name: object) -> None:
        self.policy = policy
        self.inner, self.plugin = _unwrap(policy)
        if not isinstance(name, str):
            own = getattr(self.inner, "name", None)
            name = self.plugin or (own if isinstance(own, str) and own else type(self.inner).__name__)
        self.who = f"policy {name!r}"
        # dpaudit's own policies: an exception other than DPAuditError is a dpaudit bug (an internal error)
        self.own = type(self.inner).__module__.split(".")[0] == "dpaudit"

    def fail(self, exc: Exception, text: str) -> DPAuditError:
        err = DPAuditError(text)
        err.plugin_traceback = "".join(traceback.format_exception(exc))  # type: ignore[attr-defined]
        return err

    def call(self, what: str, fn: Callable[[], _R], fix: str, on: str = "") -> _R:
        """``fn()``, behind the sandbox's guard for a plug-in (exits and prints stay caught)."""
        from dpaudit.sandbox import guard

        with guard(self.plugin, what) if self.plugin else nullcontext():
            try:
                return fn()
            except Exception as exc:  # the policy's own code, whatever it raises
                if isinstance(exc, InternalError) or (self.own and not isinstance(exc, DPAuditError)):
                    raise  # dpaudit's own bug, not the plug-in's
                raise self.fail(exc, f"{what} of {self.who} raised {type(exc).__name__}{on}: {_message(exc)}; {fix} "
                                     "(rerun with dpaudit --debug for its traceback).") from exc

    def get(self, name: str, default: object = None) -> object:
        """The member ``name`` (``default`` when absent; a property's AttributeError also means absent)."""
        value = self.call(name, lambda: getattr(self.inner, name, _MISSING),
                          "reading a member of the local plug-in contract must not fail")
        return default if value is _MISSING else value

    def run(self, rounds: int, what: str, fn: Callable[[], _R]) -> _R:
        """Run the policy for ``rounds`` rounds (its act/observe: the sandbox's sentences pass as they are)."""
        try:
            return fn()
        except (DPAuditError, InternalError):
            raise
        except Exception as exc:
            if self.own:
                raise
            raise self.fail(exc, f"running {self.who} for {rounds} rounds of {PROBE_RUNS} runs {what} raised "
                                 f"{type(exc).__name__}: {_message(exc)} (rerun with dpaudit --debug for its "
                                 "traceback).") from exc


def _domain(p: _Probe) -> tuple[float, float]:
    raw = p.get("domain")
    allowed = ("it must be (low, high), two finite numbers with low < high: the range of one user's scalar data "
               "(for vector data given by domain_pairs(), the range of the rewards the audit's tables feed)")
    if raw is None:
        raise DPAuditError(f"domain of {p.who} is missing; {allowed}.")
    try:
        if isinstance(raw, (str, bytes)):
            raise TypeError
        lo, hi = (float(x) for x in raw)
    except (TypeError, ValueError):
        raise DPAuditError(f"domain of {p.who} is {shorten(raw)}, not a pair of numbers; {allowed}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"domain of {p.who} is {shorten(raw)}; {allowed}.")
    return lo, hi


def _domain_pairs(p: _Probe, fn: object) -> list[tuple[np.ndarray, np.ndarray]]:
    what = f"domain_pairs() of {p.who}"
    allowed = "it must return a non-empty list of (z, z') pairs of different user data, finite arrays of one shape"
    if not callable(fn):
        raise DPAuditError(f"domain_pairs of {p.who} is {shorten(fn)}, not a method; the local audit calls "
                           f"domain_pairs() for vector user data: {allowed}.")
    raw = p.call("domain_pairs()", fn, allowed)
    try:
        if isinstance(raw, (str, bytes)):
            raise TypeError
        items = list(raw)
    except TypeError:
        raise DPAuditError(f"{what} returned {shorten(raw)}, not a list; {allowed}.") from None
    if not items:
        raise DPAuditError(f"{what} returned no pair; {allowed}.")
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for i, item in enumerate(items):
        try:
            a, b = item
        except (TypeError, ValueError):
            raise DPAuditError(f"{what} gave {shorten(item)} as pair {i}, not a pair (z, z'); {allowed}.") from None
        zs = []
        for v in (a, b):
            try:
                z = np.asarray(v, dtype=float)
            except (TypeError, ValueError):
                raise DPAuditError(f"{what} gave {shorten(v)} in pair {i}, not an array of numbers (a ragged list?); "
                                   f"{allowed}.") from None
            if z.size == 0 or not np.all(np.isfinite(z)):
                flaw = "empty" if z.size == 0 else "with NaN or inf"
                raise DPAuditError(f"{what} gave {shorten(v)} in pair {i}, {flaw}; {allowed}.")
            zs.append(z)
        z0, z1 = zs
        if z0.shape != z1.shape:
            raise DPAuditError(f"{what} gave z of shape {z0.shape} and z' of shape {z1.shape} in pair {i}; {allowed}.")
        if out and z0.shape != out[0][0].shape:
            raise DPAuditError(f"{what} gave data of shape {out[0][0].shape} in pair 0 but {z0.shape} in pair {i}; "
                               f"{allowed}.")
        if np.array_equal(z0, z1):
            raise DPAuditError(f"{what} gave z = z' = {shorten(z0.tolist())} in pair {i}, which compares a user with "
                               f"herself; {allowed}.")
        out.append((z0, z1))
    return out


def _alphabet(p: _Probe, rewards: Sequence[float] | None, domain: tuple[float, float]) -> tuple[float, ...] | None:
    from dpaudit.policies.base import check_alphabet

    raw = rewards if rewards is not None else p.get("reward_alphabet")
    if raw is None:
        return None
    letters = check_alphabet(raw, "the reward alphabet (--rewards)" if rewards is not None else
                             f"reward_alphabet of {p.who}")
    if letters[0] < domain[0] or letters[-1] > domain[1]:
        raise DPAuditError(f"the reward alphabet {list(letters)} must lie in the policy's reward range, its domain "
                           f"[{domain[0]:g}, {domain[1]:g}].")
    return letters


def _probe_channel(p: _Probe, chan: Callable[..., object], pairs: Sequence[tuple[np.ndarray, np.ndarray]],
                   rng: np.random.Generator) -> tuple[int, ...]:
    """Query the channel on a small batch of each pair's z and z'; returns one user's message shape."""
    allowed = ("it must return one message per user, a finite float array of shape (batch, ...), the same shape "
               "whatever the user's data")
    first: tuple[object, tuple[int, ...]] | None = None  # the first data probed and its message shape
    k = 0
    for z0, z1 in pairs:
        for z in (z0, z1):
            n = PROBE_BATCHES[k % len(PROBE_BATCHES)]
            k += 1
            data = z.tolist()
            batch = np.broadcast_to(z, (n,) + z.shape).copy()
            out = p.call("channel", lambda: chan(batch, rng), allowed, on=f" on user data {data} from its domain")
            try:
                m = real_array(out, f"channel of {p.who}", allowed)
            except DPAuditError:
                raise
            except (TypeError, ValueError):
                raise DPAuditError(f"channel of {p.who} returned {shorten(out)} for {n} users with data {data}, not an "
                                   f"array of numbers; {allowed}.") from None
            if out is None or m.ndim == 0:
                raise DPAuditError(f"channel of {p.who} returned {shorten(out)} for a batch of {n} users with data "
                                   f"{data}, not one message per user; {allowed}, here ({n}, ...).")
            if m.shape[0] != n or m[0].size == 0:
                raise DPAuditError(f"channel of {p.who} returned messages of shape {m.shape} for a batch of {n} users "
                                   f"with data {data}; {allowed}, here ({n}, ...).")
            if not np.all(np.isfinite(m)):
                raise DPAuditError(f"channel of {p.who} returned NaN or inf messages for user data {data}; {allowed}.")
            if first is None:
                first = (data, m.shape[1:])
            elif m.shape[1:] != first[1]:
                raise DPAuditError(f"channel of {p.who} returned messages of shape {m.shape[1:]} per user for data "
                                   f"{data} but {first[1]} for data {first[0]}; {allowed}.")
    assert first is not None
    return first[1]


def _channel_table(p: _Probe, raw: object, vector: bool,
                   domain: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    what = f"channel_table() of {p.who}"
    allowed = ("it must return (inputs, outputs, P) with P[i, j] = P(output j | input i): one row per input "
               "(at least 2), one column per output, probabilities >= 0 with rows summing to 1, or None when the "
               "channel is not finite")
    try:
        if isinstance(raw, (str, bytes, dict)):
            raise TypeError
        inputs, outputs, P = raw
    except (TypeError, ValueError):
        raise DPAuditError(f"{what} returned {shorten(raw)}, not a triple; {allowed}.") from None
    try:
        x = real_array(inputs, f"{what} (its inputs)", allowed)
        P = real_array(P, f"{what} (its P)", allowed)
    except DPAuditError:
        raise
    except (TypeError, ValueError):
        raise DPAuditError(f"{what} returned inputs {shorten(inputs)} and P {shorten(P)}, which are not both arrays of "
                           f"numbers; {allowed}.") from None
    y = np.asarray(outputs, dtype=object)
    if x.ndim != 1 or y.ndim != 1:
        raise DPAuditError(f"{what} returned inputs of shape {x.shape} and outputs of shape {y.shape}; both must be "
                           f"1-D lists (inputs: numbers); {allowed}.")
    if not np.all(np.isfinite(x)) or (not vector and (x.min(initial=domain[0]) < domain[0] or
                                                     x.max(initial=domain[1]) > domain[1])):
        raise DPAuditError(f"{what} returned inputs {shorten(x.tolist())}, which must be finite user data from the "
                           f"domain [{domain[0]:g}, {domain[1]:g}]; {allowed}.")
    if P.shape != (len(x), len(y)) or len(x) < 2:
        raise DPAuditError(f"{what} returned P of shape {P.shape} for {len(x)} inputs and {len(y)} outputs; "
                           f"{allowed}.")
    if not np.all(np.isfinite(P)):
        raise DPAuditError(f"{what} returned P with NaN or inf entries; {allowed}.")
    if np.any(P < 0):
        i, j = (int(v) for v in np.argwhere(P < 0)[0])
        raise DPAuditError(f"{what} returned P with the negative entry P[{i}, {j}] = {P[i, j]:g}; {allowed}.")
    sums = P.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if bad.size:
        i = int(bad[0])
        raise DPAuditError(f"{what} returned P whose row {i} sums to {sums[i]:.12g}, not 1 (within {ROW_SUM_TOL:g}); "
                           f"{allowed}.")
    return x, np.asarray(outputs), P


def _check_transcript(p: _Probe, fn: Callable[[], object], rounds: int, width: int | None) -> int:
    what = f"transcript() of {p.who}"
    allowed = (f"after {rounds} rounds of {PROBE_RUNS} runs it must return what the server received, a finite float "
               f"array (n_runs, rounds, m) = ({PROBE_RUNS}, {rounds}, m)")
    out = p.call("transcript()", fn, allowed)
    try:
        a = real_array(out, what, allowed)
    except DPAuditError:
        raise
    except (TypeError, ValueError):
        raise DPAuditError(f"{what} returned {shorten(out)}, not an array of numbers; {allowed}.") from None
    if a.ndim != 3 or a.shape[:2] != (PROBE_RUNS, rounds) or a.shape[2] == 0:
        raise DPAuditError(f"{what} returned shape {a.shape}; {allowed}.")
    if width is not None and a.shape[2] != width:
        raise DPAuditError(f"{what} returned m = {a.shape[2]} numbers per user, but m = {width} after another run; "
                           f"{allowed}, with the same m.")
    if not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.isfinite(a).sum())
        raise DPAuditError(f"{what} returned NaN or inf in {bad} of its {a.size} entries; {allowed}.")
    return int(a.shape[2])


def _probe_transcript(p: _Probe, fn: Callable[[], object], *, continuous: bool, horizon: int, data_range: tuple[float, float],
                      background: str, rng: np.random.Generator) -> int:
    """Run the policy as the transcript attack does (2 rounds, then the horizon) and check transcript() each time."""
    if continuous:  # BCO: a loss sequence differing in user 0's loss, as dpaudit.bco's transcript part plays
        from dpaudit.protocols.continuous import loss_pair, play

        plans = [(1, 0), (horizon, 0)]
    else:
        plans = [(2, 0), (horizon, horizon - 2)]
    width = None
    for rounds, j in dict.fromkeys(plans):
        if continuous:
            p.run(rounds, "on a loss sequence (to read its transcript())",
                  lambda: play(lambda: p.policy, loss_pair(p.policy, horizon, j)[1], PROBE_RUNS, rng, rounds))
        else:
            proto = LocalDP()
            data = make_pair(PairSpec(j, background), proto, int(p.policy.n_arms), rounds, data_range).d1
            p.run(rounds, "on a local-protocol table (to read its transcript())",
                  lambda: proto.run(p.policy, data, PROBE_RUNS, rng, None, record=False))
        width = _check_transcript(p, fn, rounds, width)
    assert width is not None
    return width


def check_local_plugin(policy: PolicyLike, *, horizon: int | None = None, rng_seed: int = 0,
                       rewards: Sequence[float] | None = None, name: str | None = None) -> LocalPluginInfo:
    """Check everything ``--protocol local`` will use of ``policy`` (docs/local-dp.md, the plug-in contract)
    with cheap probes: a malformed member is refused with one :class:`DPAuditError` sentence naming it.

    * ``channel`` callable (else the policy "exposes no channel", as a non-private twin whose
      ``local_channel`` is None); ``domain`` (low, high), finite, low < high; ``domain_pairs()``, if
      present, a non-empty list of (z, z') pairs of finite arrays of one shape with z != z';
    * the channel on a batch of 3 or 5 users at each z and z' (the alphabet's extremes for scalar data
      with a reward alphabet): a finite float array, first dimension the batch size, one message shape
      whatever the data; an exception is one sentence with its type and message;
    * ``channel_table()``, if present: None (no finite channel) or (inputs, outputs, P) with P a
      (len(inputs) >= 2, len(outputs)) array of probabilities, rows summing to 1 within 1e-9, inputs
      in the domain for scalar data; anything it raises is an error, never "no table";
    * ``keep_transcript`` and ``transcript()`` together or not at all; with them, the policy is run for
      2 rounds and for ``horizon`` rounds, 3 runs each, as the transcript attack runs it (Local DP
      tables of the domain's or alphabet's values; BCO policies through
      :func:`dpaudit.protocols.continuous.play`), and ``transcript()`` must return a finite
      (3, rounds, m) array, m the same both times.

    ``rewards`` (``--rewards``), else the policy's ``reward_alphabet``: the only user data the probes
    feed (scalar K-armed data); ``name`` names the policy in the sentences. ``keep_transcript`` is set
    back after the probes; the policy is left reset by them (an audit resets it again).
    """
    p = _Probe(policy, name)
    chan = p.get("channel")
    if p.get("local_channel", True) is None or not callable(chan):  # dpaudit's non-private twins: no local_channel
        raise DPAuditError(
            f"{p.who} exposes no channel, so --protocol local cannot query what a user sends: a local-DP plug-in "
            "must give channel(z_batch, rng) -> messages and its data domain (see docs/local-dp.md in dpaudit's repository)."
        )
    T = 8 if horizon is None else int(horizon)
    if T < 2:
        raise DPAuditError(f"the horizon of the local probes must be at least 2, got {horizon!r}.")
    continuous = bool(p.get("continuous_actions", False))
    domain = _domain(p)
    pairs_fn = p.get("domain_pairs")
    vector = pairs_fn is not None
    alphabet = None if (vector or continuous) else _alphabet(p, rewards, domain)
    if vector:
        pairs = _domain_pairs(p, pairs_fn)
    else:
        lo, hi = (alphabet[0], alphabet[-1]) if alphabet else domain
        pairs = [(np.array(lo), np.array(hi))]
    rng = np.random.default_rng([int(rng_seed), 0x10CA1])
    shape = _probe_channel(p, chan, pairs, rng)

    table = _finite_channel(p, vector, domain)
    data_range = (alphabet[0], alphabet[-1]) if alphabet else domain
    keeps, width = _transcript_members(p, policy, continuous=continuous, horizon=T, data_range=data_range,
                                       background="low" if alphabet else "mid", rng=rng)
    return LocalPluginInfo(vector_data=vector, continuous=continuous, domain=domain, pairs=tuple(pairs),
                           alphabet=alphabet, message_shape=tuple(shape), table=table,
                           transcript=keeps, transcript_width=width)


def _finite_channel(p: _Probe, vector: bool, domain: tuple[float, float]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The finite channel's (inputs, outputs, P) from ``channel_table()``, checked; None without one."""
    table_fn = p.get("channel_table")
    if table_fn is None:
        return None
    if not callable(table_fn):
        raise DPAuditError(f"channel_table of {p.who} is {shorten(table_fn)}, not a method; give channel_table() -> "
                           "(inputs, outputs, P) for a finite channel, returning None when it is not finite.")
    raw = p.call("channel_table()", table_fn, "it must return (inputs, outputs, P) for a finite channel, or None "
                 "when the channel is not finite")
    return None if raw is None else _channel_table(p, raw, vector, domain)


def _transcript_members(p: _Probe, policy: PolicyLike, *, continuous: bool, horizon: int,
                        data_range: tuple[float, float], background: str,
                        rng: np.random.Generator) -> tuple[bool, int | None]:
    """Whether the policy keeps a transcript (``keep_transcript`` and ``transcript()`` together or not at all)
    and, when it does, the numbers m the server receives per user, from probe runs (:func:`_probe_transcript`);
    ``keep_transcript`` is set back after them."""
    keep = p.get("keep_transcript", _MISSING)
    tr = p.get("transcript")
    if keep is not _MISSING and not callable(tr):
        raise DPAuditError(f"transcript of {p.who} is {shorten(tr)}, not a method; a policy with keep_transcript must "
                           "give transcript() -> what the server received, (n_runs, rounds, m) (or drop "
                           "keep_transcript if it keeps none).")
    if keep is _MISSING and callable(tr):
        raise DPAuditError(f"{p.who} gives transcript() but no keep_transcript; the audit sets keep_transcript = True "
                           "before reset() to ask for the transcript, so add keep_transcript = False to the class.")
    if keep is _MISSING or not callable(tr):
        return False, None
    p.call("keep_transcript", lambda: ask_transcript(policy, True), "it must accept keep_transcript = True")
    try:
        width = _probe_transcript(p, tr, continuous=continuous, horizon=horizon, data_range=data_range,
                                  background=background, rng=rng)
    finally:
        p.call("keep_transcript", lambda: ask_transcript(policy, keep), "it must accept its own value back")
    return True, width
