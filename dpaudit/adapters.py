"""Auditing code written outside dpaudit: per-run classes, claims as text, horizons and reward inputs.

Most public bandit code is a *one-run* object (``select_arm()`` / ``update(arm, reward)``), often
drawing its noise from the global ``np.random`` or ``random`` generators. :class:`PerRun` runs N
copies of such a class as a batched policy (the plug-in contract of DESIGN.md: ``n_arms``,
``claim``, ``reset``, ``act``, ``observe``), so that it is audited unchanged (issue 9, item 5).

The other pieces let an audit feed such code what it needs (issue 9, item 6):

* :func:`parse_claim` -- the claim given on the command line (``--claim "pure:eps=1"``);
* :func:`horizon_parameter` -- the constructor parameter that receives the audit's horizon T,
  whatever the code calls it (:data:`HORIZON_NAMES`);
* :func:`reward_alphabet` and :func:`realise_means` -- inputs for a policy that accepts only some
  reward values (``{0, 1}``): each arm's column is a low-discrepancy sequence of alphabet values whose
  running mean tracks the arm's mean.

:func:`make_per_run` puts them together for the CLI's ``--adapter per-run``, and
:func:`build_policy` is what ``dpaudit check policy`` builds, with or without the adapter.
"""

from __future__ import annotations

import inspect
import math
import random as _pyrandom
import sys
import threading
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from dpaudit.accountants import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpaudit.errors import DPAuditError, check_int
from dpaudit.policies.base import arm_ranges, check_alphabet

__all__ = [
    "HORIZON_NAMES",
    "N_ARMS_NAMES",
    "SELECT_NAMES",
    "UPDATE_NAMES",
    "SEED_NAMES",
    "CLAIM_FORMS",
    "parse_claim",
    "horizon_parameter",
    "reward_alphabet",
    "realise_means",
    "PerRun",
    "ADAPTER_OPTIONS",
    "parse_adapter",
    "make_per_run",
    "build_policy",
]

# ---------------------------------------------------------------------------------------------
# Claims given as text
# ---------------------------------------------------------------------------------------------

#: the accepted forms of ``--claim``, quoted in every error message about one
CLAIM_FORMS = '"pure:eps=E", "zcdp:rho=R", "approx:eps=E,delta=D" or "rdp:alpha=A,eps=E"'

_CLAIM_KEYS: dict[str, tuple[str, ...]] = {
    "pure": ("eps",),
    "zcdp": ("rho",),
    "approx": ("eps", "delta"),
    "rdp": ("alpha", "eps"),
}
_KEY_ALIASES = {"epsilon": "eps", "e": "eps"}


def parse_claim(text: str) -> Guarantee:
    """Parse a claim written as ``kind:key=value[,key=value]`` into a Guarantee.

    ``pure:eps=1`` -> ``PureDP(1)``; ``zcdp:rho=0.1`` -> ``ZCDP(0.1)``; ``approx:eps=1,delta=1e-5``
    -> ``ApproxDP(1, 1e-5)``; ``rdp:alpha=2,eps=0.5`` -> ``RDP.point(2, 0.5)`` ((alpha, eps)-RDP at
    one order). Kinds and keys are case-insensitive, ``epsilon`` may be written for ``eps``, and
    spaces are ignored. Values must be finite: eps and rho >= 0, delta in [0, 1), alpha > 1. Any
    other text raises :class:`DPAuditError` with one sentence listing the accepted forms.
    """
    if not isinstance(text, str):
        raise DPAuditError(f"a claim must be text such as {CLAIM_FORMS}, got {text!r}.")
    kind, sep, rest = text.replace(" ", "").partition(":")
    kind = kind.lower()
    if not sep or kind not in _CLAIM_KEYS:
        raise DPAuditError(f"claim {text!r} is not one of the accepted forms {CLAIM_FORMS}.")
    values: dict[str, float] = {}
    for item in rest.split(",") if rest else []:
        key, eq, raw = item.partition("=")
        key = _KEY_ALIASES.get(key.lower(), key.lower())
        if not eq or key not in _CLAIM_KEYS[kind] or key in values:
            raise DPAuditError(f"claim {text!r} is not one of the accepted forms {CLAIM_FORMS}.")
        try:
            v = float(raw)
        except ValueError:
            raise DPAuditError(f"claim {text!r}: {key}={raw!r} is not a number; the accepted forms are "
                               f"{CLAIM_FORMS}.") from None
        if not math.isfinite(v) or v < 0:
            raise DPAuditError(f"claim {text!r}: {key} must be a finite non-negative number, got {raw!r}.")
        values[key] = v
    missing = [k for k in _CLAIM_KEYS[kind] if k not in values]
    if missing:
        raise DPAuditError(f"claim {text!r} lacks {', '.join(missing)}; the accepted forms are {CLAIM_FORMS}.")
    if kind == "pure":
        return PureDP(values["eps"])
    if kind == "zcdp":
        return ZCDP(values["rho"])
    if kind == "approx":
        return ApproxDP(values["eps"], values["delta"])  # checks delta in [0, 1)
    return RDP.point(values["alpha"], values["eps"])  # checks alpha > 1


# ---------------------------------------------------------------------------------------------
# The horizon under any name
# ---------------------------------------------------------------------------------------------

#: constructor parameter names that receive the audit's horizon T (matched case-sensitively)
HORIZON_NAMES = ("horizon", "T", "n", "iters", "n_iters", "time_horizon", "n_rounds", "rounds",
                 "num_rounds", "max_steps", "budget", "steps", "n_steps")


def _init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return {}
    return {n: p for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _could_be_count(p: inspect.Parameter) -> bool:
    """False when the annotation or default says the parameter is not an integer count (``budget=1.0``
    is a privacy budget, not a horizon)."""
    ann = p.annotation
    if ann is not inspect.Parameter.empty:
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
        if "int" not in str(text).lower():
            return False
    d = p.default
    if d is not inspect.Parameter.empty and d is not None:
        return isinstance(d, Integral) and not isinstance(d, bool)
    return True


def horizon_parameter(cls: type, name: str | None = None) -> str | None:
    """The constructor parameter of ``cls`` that receives the audit's horizon T, or None.

    Looks for the names of :data:`HORIZON_NAMES` (case-sensitive: ``T`` but not ``t``) among the
    keyword parameters of ``cls.__init__``, skipping any whose annotation or default says it is not
    an integer (``budget: float`` or ``budget=1.0`` is a privacy budget). ``name`` forces a choice
    (it must be a constructor parameter). Two or more candidates are refused in one sentence, since
    guessing wrong would silently audit another horizon.
    """
    params = _init_parameters(cls)
    who = getattr(cls, "__name__", repr(cls))
    if name is not None:
        if name not in params:
            raise DPAuditError(f"{who} has no constructor parameter {name!r} to receive the horizon; its "
                               f"parameters are: {', '.join(params) or 'none'}.")
        return name
    found = [n for n in HORIZON_NAMES if n in params and _could_be_count(params[n])]
    if len(found) > 1:
        raise DPAuditError(f"{who} has several constructor parameters that could be the horizon "
                           f"({', '.join(found)}); say which one receives T.")
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------
# Reward alphabets and per-arm ranges
# ---------------------------------------------------------------------------------------------

def reward_alphabet(policy: Any) -> tuple[float, ...] | None:
    """The rewards ``policy`` accepts, from its optional ``reward_alphabet`` attribute, sorted; None
    when it has none (any value in its reward range). An alphabet must hold at least two distinct
    finite numbers, all inside the policy's ``reward_range`` when it declares one."""
    raw = getattr(policy, "reward_alphabet", None)
    if raw is None:
        return None
    who = f"{getattr(policy, 'name', '') or type(policy).__name__}'s reward_alphabet"
    alphabet = check_alphabet(raw, who)
    rr = getattr(policy, "reward_range", None)
    if rr is not None:
        lo, hi = (float(x) for x in rr)
        outside = [v for v in alphabet if not lo <= v <= hi]
        if outside:
            raise DPAuditError(f"{who} holds {outside[0]:g}, outside the policy's reward range [{lo:g}, {hi:g}].")
    return alphabet


def realise_means(means: Any, horizon: int, alphabet: Sequence[float] | None = None,
                  reward_range: Any = (0.0, 1.0)) -> np.ndarray:
    """A (T, K) reward table whose column a has running means tracking ``means[a]``.

    Without an alphabet every entry of column a is ``means[a]``. With one, column a takes only the
    two alphabet values a_lo <= m < a_hi bracketing m = ``means[a]`` (inside arm a's range): the
    value at round t (1-based) is a_hi exactly when round(t p) > round((t - 1) p), p = (m - a_lo) /
    (a_hi - a_lo) -- Bresenham's line, rounding half up. The first t entries then hold round(t p)
    copies of a_hi, the closest count there is, so every prefix mean is within (a_hi - a_lo)/(2t)
    of m (within 1/(2t) for the alphabet {0, 1}). The table is deterministic: neighbouring inputs
    built on it differ only where the caller changes them. A mean equal to an alphabet value gives a
    constant column. ``reward_range`` is ``(low, high)`` or one pair per arm; a mean outside its
    arm's range, or outside the alphabet values in that range, is refused.
    """
    m = np.asarray(means, dtype=float) if not isinstance(means, (str, bytes)) else np.array([np.nan])
    if m.ndim != 1 or m.size < 1:
        raise DPAuditError(f"means must be a one-dimensional list of per-arm means, got shape {m.shape}.")
    if not np.all(np.isfinite(m)):
        a = int(np.flatnonzero(~np.isfinite(m))[0])
        raise DPAuditError(f"the mean of arm {a} must be a finite number, got {m[a]!r}.")
    T = check_int("horizon", horizon, minimum=1)
    K = m.size
    rr = arm_ranges(reward_range, K)
    outside = (m < rr[:, 0]) | (m > rr[:, 1])
    if outside.any():
        a = int(np.flatnonzero(outside)[0])
        raise DPAuditError(f"the mean of arm {a}, {m[a]:g}, lies outside its reward range "
                           f"[{rr[a, 0]:g}, {rr[a, 1]:g}].")
    if alphabet is None:
        return np.repeat(m[None, :], T, axis=0)
    alph = np.asarray(check_alphabet(alphabet, "the reward alphabet"))
    table = np.empty((T, K))
    t = np.arange(T + 1, dtype=float)
    for a in range(K):
        allowed = alph[(alph >= rr[a, 0]) & (alph <= rr[a, 1])]
        if allowed.size == 0 or not allowed[0] <= m[a] <= allowed[-1]:
            span = f"[{allowed[0]:g}, {allowed[-1]:g}]" if allowed.size else "empty"
            raise DPAuditError(f"the mean of arm {a}, {m[a]:g}, cannot be realised with the reward alphabet "
                               f"{tuple(alph.tolist())} inside the arm's range (achievable means: {span}).")
        j = int(np.searchsorted(allowed, m[a], side="right")) - 1
        lo_v = allowed[j]
        if lo_v == m[a]:
            table[:, a] = lo_v
            continue
        hi_v = allowed[j + 1]
        p = (m[a] - lo_v) / (hi_v - lo_v)
        counts = np.floor(t * p + 0.5)  # round(t p), half up; counts[0] = 0
        table[:, a] = np.where(np.diff(counts) > 0, hi_v, lo_v)
    return table


# ---------------------------------------------------------------------------------------------
# The per-run adapter
# ---------------------------------------------------------------------------------------------

#: instance attributes (then constructor parameters) read for the number of arms, in this order
N_ARMS_NAMES = ("n_arms", "K", "k", "n_actions", "num_arms", "narms", "arms")
#: method names tried for the selection call (first found wins), with or without a round argument
SELECT_NAMES = ("select_arm", "select_action", "choose_arm", "pull", "choose", "act", "get_action")
#: method names tried for the feedback call ``update(arm, reward)``
UPDATE_NAMES = ("update", "observe", "receive_reward", "feedback")
#: constructor parameters through which each copy gets its own seed
SEED_NAMES = ("seed", "random_state", "rng")

_SHAPES = ("select_arm()/select_arm(t) + update(arm, reward), pull() + update, choose() + update, "
           "act() + update, or step(last_arm, last_reward) -> next arm")

# the global generators are process-wide: one adapter at a time swaps them (threads then wait)
_GLOBAL_LOCK = threading.RLock()


def _positional(fn: Any) -> tuple[int, int] | None:
    """(required, maximum) positional arguments of a bound method; maximum is large with *args."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    req = mx = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            mx += 1
            req += p.default is inspect.Parameter.empty
        elif p.kind == p.VAR_POSITIONAL:
            mx = 1 << 30
        elif p.kind == p.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
            return None  # needs a keyword we cannot supply
    return req, mx


def _np_state_changed(before: tuple, after: tuple) -> bool:
    return before[2] != after[2] or before[3] != after[3] or not np.array_equal(before[1], after[1])


# The module-level functions of the two global generators: bound methods of one hidden instance each.
_NP_INST = np.random.mtrand._rand
_PY_INST = _pyrandom._inst
_NP_NAMES = tuple(n for n in dir(np.random)
                  if not n.startswith("_") and getattr(getattr(np.random, n), "__self__", None) is _NP_INST) + (
    ("seed",) if hasattr(np.random, "seed") else ())  # np.random.seed is a module function, not a bound method
_NP_SEED = getattr(np.random, "seed", None)
_PY_NAMES = tuple(n for n in dir(_pyrandom)
                  if not n.startswith("_") and getattr(getattr(_pyrandom, n), "__self__", None) is _PY_INST)


class _Target:
    """Which copy's generators the redirected module functions currently call: copy ``i``'s, built on
    its first use from its seed (code that draws rarely, or never before the horizon, pays nothing).

    Copy i's numpy generator is ``RandomState(PCG64(seed_i))``: numpy's legacy distributions, as
    ``np.random.*`` computes them, on a bit generator that takes ~30 us to build where MT19937 takes
    ~300 us. Calls that need MT19937 get it: ``np.random.seed(s)`` gives the copy ``RandomState(s)``
    (exactly the stream ``np.random.seed(s)`` gives the global generator), and ``get_state`` /
    ``set_state`` first move the copy to an MT19937 generator seeded from its own stream.
    """

    def __init__(self) -> None:
        self.i = 0
        self.seeds: list[int] = []
        self.np_gens: list[Any] = []
        self.py_gens: list[Any] = []

    def np_gen(self) -> Any:
        g = self.np_gens[self.i]
        if g is None:
            g = self.np_gens[self.i] = np.random.RandomState(np.random.PCG64(self.seeds[self.i]))
        return g

    def np_mt(self) -> Any:
        g = self.np_gen()
        if not isinstance(g._bit_generator, np.random.MT19937):
            g = self.np_gens[self.i] = np.random.RandomState(int(g.randint(0, 1 << 32, dtype=np.uint64)))
        return g

    def np_seed(self, *args: Any, **kwargs: Any) -> None:
        self.np_gens[self.i] = np.random.RandomState(*args, **kwargs)

    def py_gen(self) -> Any:
        g = self.py_gens[self.i]
        if g is None:
            g = self.py_gens[self.i] = _pyrandom.Random(self.seeds[self.i])
        return g


def _redirector(target: _Target, which: str, name: str) -> Any:
    if which == "np" and name == "seed":
        call = target.np_seed
    else:
        gen = target.py_gen if which == "py" else target.np_mt if name in ("get_state", "set_state") else target.np_gen

        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(gen(), name)(*args, **kwargs)

        call.__name__ = name
    return call


class _Globals:
    """Per-copy states of the global generators, one mode per generator.

    ``"off"``: the class does not use it. ``"redirect"`` (the fast way): while the copies run, the
    module's functions (``np.random.laplace``, ``random.random``, ...: the bound methods of the hidden
    global instance) are replaced by functions that call the current copy's own ``RandomState`` /
    ``random.Random``; switching copies is one attribute store. The same goes for those functions
    imported into the class's modules (``from numpy.random import laplace``), found in the globals of
    the modules that define the class and its bases. ``"swap"`` (for code that reaches the hidden
    instance some other way, e.g. a bound method kept in a class attribute): each copy's saved state
    is swapped in with ``set_state``/``setstate`` around its call and saved after it (about 40 us
    each way for numpy, so ~100x slower). In every mode the caller's generators end as they began.
    Copy i's generators come from its seed: ``RandomState(PCG64(seed_i))`` (see :class:`_Target`)
    or, swapped, the state of ``RandomState(seed_i)``; ``random.Random(seed_i)`` (or its state).
    """

    def __init__(self, np_mode: str, py_mode: str, modules: tuple[str, ...] = ()) -> None:
        self.np_mode, self.py_mode = np_mode, py_mode
        self.modules = modules  # names of the modules whose globals may hold imported generator functions
        self.target = _Target()
        self.swaps = np_mode == "swap" or py_mode == "swap"
        self.active = np_mode != "off" or py_mode != "off"
        self._patched: list[tuple[dict, str, Any]] = []
        self._saved: tuple[Any, Any] = (None, None)
        self._redirectors = {which: {n: _redirector(self.target, which, n) for n in names}
                             for which, names in (("np", _NP_NAMES), ("py", _PY_NAMES))}

    def __reduce__(self) -> tuple:
        # pickled (to the engine's workers) as its modes only: the generators are rebuilt by reset()
        return (_Globals, (self.np_mode, self.py_mode, self.modules))

    def seed_copies(self, seeds: np.ndarray) -> None:
        """Copy i's generators come from ``seeds[i]`` (distinct); each is built on first use."""
        t = self.target
        t.seeds = [int(s) for s in seeds]
        t.np_gens = [None] * len(t.seeds)
        t.py_gens = [None] * len(t.seeds)

    def select(self, i: int) -> None:
        """Make copy ``i``'s generators the current ones."""
        t = self.target
        t.i = i
        if self.np_mode == "swap":
            st = t.np_gens[i]
            _NP_INST.set_state(st if st is not None else np.random.RandomState(t.seeds[i]).get_state())
        if self.py_mode == "swap":
            st = t.py_gens[i]
            _PY_INST.setstate(st if st is not None else _pyrandom.Random(t.seeds[i]).getstate())

    def save(self, i: int) -> None:
        """After copy ``i``'s call: keep its swapped states."""
        if self.np_mode == "swap":
            self.target.np_gens[i] = _NP_INST.get_state()
        if self.py_mode == "swap":
            self.target.py_gens[i] = _PY_INST.getstate()

    def enter(self) -> None:
        """Before a batch of calls: install the redirections, save what a swap overwrites, and note
        the hidden instances' states (to catch a class that bypasses the redirection)."""
        self._saved = (_NP_INST.get_state(), _PY_INST.getstate())
        on = {"np": self.np_mode == "redirect", "py": self.py_mode == "redirect"}
        for which, module, names in (("np", np.random, _NP_NAMES), ("py", _pyrandom, _PY_NAMES)):
            if on[which]:
                ns = vars(module)
                for n in names:
                    self._patched.append((ns, n, ns[n]))
                    ns[n] = self._redirectors[which][n]
        for name in self.modules:
            ns = vars(sys.modules[name]) if name in sys.modules else {}
            for key, val in list(ns.items()):
                owner = getattr(val, "__self__", None)
                which = "np" if owner is _NP_INST or val is _NP_SEED else "py" if owner is _PY_INST else None
                if which is not None and on[which]:
                    fn = "seed" if val is _NP_SEED else getattr(val, "__name__", "")
                    if fn in self._redirectors[which]:
                        self._patched.append((ns, key, val))
                        ns[key] = self._redirectors[which][fn]

    def leave(self) -> list[str]:
        """After a batch: undo the redirections and restore the caller's states. Returns the global
        generators that moved although they were not swapped (the class bypassed the redirection)."""
        for ns, n, original in reversed(self._patched):
            ns[n] = original
        self._patched.clear()
        np_saved, py_saved = self._saved
        moved = []
        if self.np_mode != "swap" and _np_state_changed(np_saved, _NP_INST.get_state()):
            moved.append("np.random")
        if self.py_mode != "swap" and py_saved != _PY_INST.getstate():
            moved.append("random")
        _NP_INST.set_state(np_saved)
        _PY_INST.setstate(py_saved)
        return moved


class PerRun:
    """Runs N copies of a one-run bandit class as one batched dpaudit policy.

    ``PerRun(cls, kwargs, claim)`` builds copies with ``cls(**kwargs)`` and drives them through one
    of these shapes (tried in this order unless ``select``/``update``/``step`` name the methods):

    * a selection method (:data:`SELECT_NAMES`: ``select_arm``, ``pull``, ``choose``, ``act``, ...)
      with no required argument, called as ``select()``, or with one, called as ``select(t)`` with
      ``t = first_round + round`` (``first_round`` = 0 by default: dpaudit's 0-based round; pass 1
      for code that counts from 1), plus a feedback method (:data:`UPDATE_NAMES`: ``update``, ...)
      called as ``update(arm, reward)`` with a Python int and float.
    * ``step(last_arm, last_reward) -> next arm``: the first call is ``step(None, None)``; after
      round t's reward the next call passes (arm observed at t, its reward). The last round's reward
      is never passed (no later action could show it).

    The number of arms comes from ``n_arms`` if given, else from the first of :data:`N_ARMS_NAMES`
    found on an instance (an int, or a sequence whose length counts), else from the same names among
    ``kwargs``. ``reward_range`` and ``reward_alphabet`` default to the class's attributes of those
    names, else [0, 1] and none (``reward_range`` and ``alphabet`` override them); rewards outside the
    range are refused, never clipped.

    Randomness (:meth:`reset`): each copy gets its own seed from the audit's generator. If the
    constructor takes ``seed`` or ``random_state`` it receives a distinct int in [0, 2^32); ``rng``
    receives a ``numpy.random.Generator`` seeded with it. A class that draws from the global
    ``np.random`` or ``random`` generators gets one generator per copy, seeded from the audit's
    generator, made current around every call to that copy (see :class:`_Globals`: the module's
    functions are redirected to it, or, for code that reaches the hidden global instance another
    way, its state is swapped in and saved back). So runs are independent and reproducible from the
    audit's seed whatever order they run in, and the caller's generators end as they began. Which
    generators, and how, is found by a probe at construction (two copies run for ``probe_steps``
    rounds); ``globals_mode`` ("off", "redirect", "swap") forces it. A global generator that moves
    later in a run although the probe did not see it is an error, not a silent loss of
    reproducibility; so is randomness the adapter cannot seed (a generator seeded from the clock or
    the OS), which shows in the probe as two identically seeded copies acting differently.
    Running the copies holds a module-wide lock, so threads sharing the process wait for each other.

    Cost: a Python call per copy per round (and in "swap" mode about 80 us per call for numpy's
    get_state/set_state); measured in benchmarks/adapter.md.
    The adapter has no ``ledger`` attribute (the audit tests ``hasattr(policy, "ledger")``): only the
    black-box attacks apply.
    """

    accepts_queries = True

    def __init__(self, cls: type, kwargs: Mapping[str, Any] | None = None, claim: Guarantee | str | None = None,
                 *, select: str | None = None, update: str | None = None, step: str | None = None,
                 n_arms: int | None = None, first_round: int = 0, reward_range: Any = None,
                 alphabet: Sequence[float] | None = None, globals_mode: str | None = None,
                 probe_steps: int | None = None) -> None:
        if not inspect.isclass(cls):
            raise DPAuditError(f"the per-run adapter needs a class, got {cls!r}.")
        self.cls = cls
        self.kwargs = dict(kwargs or {})
        self.name = f"{cls.__name__} (per-run)"
        who = cls.__name__
        self._who = who
        self.first_round = check_int("first_round", first_round, minimum=0)
        params = _init_parameters(cls)
        self._seed_param = next((s for s in SEED_NAMES if s in params), None)
        if self._seed_param is not None and self._seed_param in self.kwargs:
            raise DPAuditError(f"{who}'s {self._seed_param!r} is set by the adapter, one per copy, so that runs are "
                               f"independent; drop {self._seed_param}={self.kwargs[self._seed_param]!r} from the "
                               "parameters (the audit's --seed decides).")
        with _GLOBAL_LOCK:  # building may seed or draw from the global generators: the caller's survive
            np_saved, py_saved = _NP_INST.get_state(), _PY_INST.getstate()
            try:
                probe = self._build(0)
            finally:
                _NP_INST.set_state(np_saved)
                _PY_INST.setstate(py_saved)
        self._shape = self._detect_shape(probe, select, update, step)
        self.n_arms = self._detect_arms(probe, n_arms)
        if isinstance(claim, str):
            claim = parse_claim(claim)
        if claim is None:
            claim = getattr(probe, "claim", None)
        if claim is not None and not isinstance(claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
        self.claim = claim
        rr = reward_range if reward_range is not None else getattr(cls, "reward_range", (0.0, 1.0))
        rr_arr = arm_ranges(rr, self.n_arms)
        if not np.all(rr_arr == rr_arr[0]):
            raise DPAuditError(f"the per-run adapter needs one reward range for all arms, got {rr!r}.")
        self.reward_range = (float(rr_arr[0, 0]), float(rr_arr[0, 1]))
        self.reward_alphabet = alphabet if alphabet is not None else getattr(cls, "reward_alphabet", None)
        self.reward_alphabet = reward_alphabet(self)  # sorted, checked inside the range (None stays None)
        T = self._horizon_value()
        steps = max(32, 4 * self.n_arms) if probe_steps is None else check_int("probe_steps", probe_steps, minimum=1)
        self.probe_steps = min(steps, T) if T is not None else steps
        self._modules = tuple(dict.fromkeys(c.__module__ for c in cls.__mro__ if c.__module__ != "builtins"))
        if globals_mode is None:
            np_mode, py_mode = self._probe()
        elif globals_mode in ("off", "redirect", "swap"):
            np_mode = py_mode = globals_mode
        else:
            raise DPAuditError(f"globals_mode must be None (detect), 'off', 'redirect' or 'swap', got {globals_mode!r}.")
        self._globals = _Globals(np_mode, py_mode, self._modules)
        self.n_runs = 0
        self._objs: list[Any] = []

    # ---- construction ------------------------------------------------------------------------
    def _build(self, seed: int | None) -> Any:
        kw = dict(self.kwargs)
        if self._seed_param is not None and seed is not None:
            kw[self._seed_param] = np.random.default_rng(seed) if self._seed_param == "rng" else int(seed)
        try:
            return self.cls(**kw)
        except DPAuditError:
            raise
        except Exception as exc:
            raise DPAuditError(f"{self._who}({', '.join(f'{k}={v!r}' for k, v in kw.items())}) raised "
                               f"{type(exc).__name__}: {exc}.") from exc

    def _horizon_value(self) -> int | None:
        try:
            hp = horizon_parameter(self.cls)
        except DPAuditError:
            return None
        v = self.kwargs.get(hp) if hp else None
        return int(v) if isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 else None

    def _detect_shape(self, obj: Any, select: str | None, update: str | None, step: str | None) -> tuple[str, ...]:
        who = self._who
        for name in (select, update, step):
            if name is not None and not callable(getattr(obj, name, None)):
                raise DPAuditError(f"{who} has no method {name!r}.")
        never = (1 << 30, 0)  # the arity of something that cannot be called with positional arguments
        if select is not None and not (_positional(getattr(obj, select)) or never)[0] <= 1:
            raise DPAuditError(f"{who}.{select} must be callable with no argument or with one (the round).")
        if update is not None:
            req, most = _positional(getattr(obj, update)) or never
            if not req <= 2 <= most:
                raise DPAuditError(f"{who}.{update} must be callable with two arguments (arm, reward).")
        if step is not None:
            selects = []
        else:
            selects = [select] if select is not None else list(SELECT_NAMES)
        updates = [update] if update is not None else list(UPDATE_NAMES)
        for s in selects:
            fn = getattr(obj, s, None)
            arity = _positional(fn) if callable(fn) else None
            if not arity or arity[0] > 1:
                continue
            for u in updates:
                g = getattr(obj, u, None)
                ua = _positional(g) if callable(g) else None
                if ua and ua[0] <= 2 <= ua[1]:
                    return ("select", s, u, "t" if arity[0] == 1 else "")
        if step is not None or (select is None and update is None):
            cand = [step] if step is not None else ["step"]
            for name in cand:
                fn = getattr(obj, name, None)
                arity = _positional(fn) if callable(fn) else None
                if arity and arity[0] <= 2 <= arity[1]:
                    return ("step", name)
            if step is not None:
                raise DPAuditError(f"{who}.{step} must accept two arguments (last_arm, last_reward).")
        raise DPAuditError(f"{who} has none of the method shapes the per-run adapter drives ({_SHAPES}); name "
                           "its selection and feedback methods explicitly (--adapter per-run:select=NAME,update=NAME, "
                           "or per-run:step=NAME).")

    def _detect_arms(self, obj: Any, n_arms: int | None) -> int:
        who = self._who
        if n_arms is not None:
            return check_int("n_arms", n_arms, minimum=2)
        for source, get in (("attribute", lambda n: getattr(obj, n, None)), ("parameter", self.kwargs.get)):
            for n in N_ARMS_NAMES:
                v = get(n)
                if v is None or callable(v):
                    continue
                if isinstance(v, Integral) and not isinstance(v, bool):
                    return check_int(f"{who}'s {source} {n}", int(v), minimum=2)
                if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, (str, bytes)):
                    return check_int(f"the number of {who}'s {source} {n}", len(v), minimum=2)
        raise DPAuditError(f"cannot tell how many arms {who} has: it has none of the attributes or parameters "
                           f"{', '.join(N_ARMS_NAMES)}; give n_arms explicitly (--adapter per-run:n_arms=K).")

    # ---- the probe ---------------------------------------------------------------------------
    def _probe(self) -> tuple[str, str]:
        """How to give each copy its own global generators: ``"off"``, ``"redirect"`` or ``"swap"`` for
        ``np.random`` and for ``random`` (see :class:`_Globals`), and a check that seeding makes copies repeat.

        Two copies built with the same seed are driven for ``probe_steps`` rounds with the same rewards
        (cycling the alphabet, or the range's ends), each with the module functions redirected to a
        fresh generator seeded alike and the hidden global instances seeded alike. A redirected
        generator that moved is used through the module ("redirect"); a hidden instance that moved is
        reached another way ("swap"); neither: "off". The caller's generators are restored after.
        """
        trails, moved, used = [], set(), set()
        with _GLOBAL_LOCK:
            np_saved, py_saved = _NP_INST.get_state(), _PY_INST.getstate()
            try:
                for _ in range(2):
                    g = _Globals("redirect", "redirect", self._modules)
                    g.seed_copies(np.array([20261122]))
                    _NP_INST.seed(20261122)
                    _pyrandom.seed(20261122)
                    g.enter()
                    try:
                        g.select(0)
                        obj = self._build(12345)
                        trails.append(self._drive(obj))
                    finally:
                        moved.update(g.leave())
                    if g.target.np_gens[0] is not None:  # built on first use
                        used.add("np.random")
                    if g.target.py_gens[0] is not None:
                        used.add("random")
            finally:
                _NP_INST.set_state(np_saved)
                _PY_INST.setstate(py_saved)
        if trails[0] != trails[1]:
            raise DPAuditError(
                f"{self._who} draws randomness the adapter cannot seed: two copies built with the same seed and the "
                f"same global generator states chose different arms ({trails[0][:8]} vs {trails[1][:8]}); give its "
                f"generator through a constructor parameter ({', '.join(SEED_NAMES)}) or use np.random / random.")
        return tuple("swap" if n in moved else "redirect" if n in used else "off"  # type: ignore[return-value]
                     for n in ("np.random", "random"))

    def _drive(self, obj: Any) -> list[int]:
        lo, hi = self.reward_range
        values = self.reward_alphabet or (lo, hi)
        arms: list[int] = []
        kind = self._shape[0]
        last: tuple[Any, Any] = (None, None)
        for t in range(self.probe_steps):
            if kind == "step":
                a = self._one_arm(self._call(getattr(obj, self._shape[1]), last, t), t, 0)
            else:
                a = self._one_arm(self._call(getattr(obj, self._shape[1]), self._select_args(t), t), t, 0)
            r = float(values[(t * 7 + a) % len(values)])
            if kind != "step":
                self._call(getattr(obj, self._shape[2]), (a, r), t)
            last = (a, r)
            arms.append(a)
        return arms

    def _select_args(self, t: int) -> tuple:
        return (t + self.first_round,) if self._shape[3] else ()

    def _call(self, fn: Any, args: tuple, t: int, copy: int = 0) -> Any:
        try:
            return fn(*args)
        except DPAuditError:
            raise
        except Exception as exc:
            raise DPAuditError(f"{self._who}.{fn.__name__} raised {type(exc).__name__} at round {t} (copy {copy}): "
                               f"{exc}.") from exc

    def _one_arm(self, value: Any, t: int, copy: int) -> int:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
            if isinstance(value, Real) and float(value).is_integer():
                value = int(value)
            else:
                raise DPAuditError(f"{self._who} returned {value!r} as its arm at round {t} (copy {copy}); an arm is "
                                   f"an integer in 0..{self.n_arms - 1}.")
        if not 0 <= value < self.n_arms:
            raise DPAuditError(f"{self._who} returned arm {int(value)} at round {t} (copy {copy}); allowed arms are "
                               f"0..{self.n_arms - 1}.")
        return int(value)

    # ---- the batched contract ----------------------------------------------------------------
    def reset(self, n_runs: int, rng: np.random.Generator, *, record: bool = True) -> None:
        """Fresh copies for ``n_runs`` independent runs, each seeded from ``rng`` (see the class doc)."""
        n = check_int("n_runs", n_runs, minimum=1)
        if not isinstance(rng, np.random.Generator):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        seeds = rng.choice(1 << 32, size=n, replace=False)  # distinct: no two runs share a seed
        self._globals.seed_copies(rng.choice(1 << 32, size=n, replace=False))
        objs = self._run_calls([self._build] * n, ((int(x),) for x in seeds), 0)
        self.n_runs = n
        self._objs = objs
        kind = self._shape[0]
        self._sel = [getattr(o, self._shape[1]) for o in objs]
        self._upd = [getattr(o, self._shape[2]) for o in objs] if kind == "select" else []
        self._last_arms: list[Any] = [None] * n
        self._last_rewards: list[Any] = [None] * n
        self._t = 0
        self._acted = False

    def _run_calls(self, fns: list[Any], argss: Any, t: int) -> list[Any]:
        """``[fn(*args) for fn, args]``, copy i's call with copy i's global generators (see :class:`_Globals`)."""
        g = self._globals
        out: list[Any] = [None] * len(fns)
        i = 0
        with _GLOBAL_LOCK:
            g.enter()
            try:
                if g.swaps:
                    select, save = g.select, g.save
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        select(i)
                        out[i] = fn(*args)
                        save(i)
                elif g.active:  # redirection only: switching copies is one attribute store
                    target = g.target
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        target.i = i
                        out[i] = fn(*args)
                else:
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        out[i] = fn(*args)
            except DPAuditError:
                raise
            except Exception as exc:
                raise DPAuditError(f"{self._who}.{getattr(fns[i], '__name__', 'call')} raised {type(exc).__name__} "
                                   f"at round {t} (copy {i}): {exc}.") from exc
            finally:
                moved = g.leave()
        if moved:
            raise DPAuditError(
                f"{self._who} drew from the global {' and '.join(moved)} generator at round {t} in a way the probe "
                f"over its first {self.probe_steps} rounds did not see; rerun with the adapter swapping the global "
                "generators per copy (--adapter per-run:globals=swap, or PerRun(..., globals_mode='swap')) so that "
                "each copy keeps its own state.")
        return out

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        """Each copy's next arm, validated: (n_runs,) ints in [0, n_arms)."""
        if arms is not None:
            raise DPAuditError(f"the per-run adapter drives context-free bandits; {self._who} was given features.")
        if t != self._t or self._acted:
            raise DPAuditError(f"{self.name} expects act and observe at rounds 0, 1, 2, ... in turn; got act at round "
                               f"{t}.")
        from itertools import repeat

        if self._shape[0] == "step":
            raw = self._run_calls(self._sel, zip(self._last_arms, self._last_rewards), t)
        else:
            raw = self._run_calls(self._sel, repeat(self._select_args(t)), t)
        try:
            out = np.asarray(raw)
            if out.dtype.kind not in "iu" or out.shape != (self.n_runs,):
                raise ValueError
        except (ValueError, TypeError):
            out = np.array([self._one_arm(v, t, i) for i, v in enumerate(raw)], dtype=np.int64)
        if out.size and (out.min() < 0 or out.max() >= self.n_arms):
            i = int(np.flatnonzero((out < 0) | (out >= self.n_arms))[0])
            self._one_arm(int(out[i]), t, i)
        self._acted = True
        return out.astype(np.int64, copy=False)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        """Feed round t's (arm, reward) to each copy; rewards outside ``reward_range`` are refused."""
        from dpaudit.policies.base import check_actions, check_rewards

        if t != self._t or not self._acted:
            raise DPAuditError(f"{self.name} expects act and observe at rounds 0, 1, 2, ... in turn; got observe at "
                               f"round {t}.")
        a = check_actions(actions, self.n_runs, self.n_arms, self.name, t).tolist()
        r = check_rewards(rewards, self.n_runs, self.reward_range, self.name, t).tolist()
        if self._shape[0] == "step":
            self._last_arms, self._last_rewards = a, r
        else:
            self._run_calls(self._upd, zip(a, r), t)
        self._t = t + 1
        self._acted = False

    def params(self) -> dict[str, Any]:
        """The constructor parameters the copies were built with (for reports)."""
        return dict(self.kwargs)

    def describe(self) -> str:
        """One line for reports: the class, how it is driven and which global generators are swapped."""
        shape = (f"{self._shape[1]}(last_arm, last_reward)" if self._shape[0] == "step"
                 else f"{self._shape[1]}({'t' if self._shape[3] else ''}) + {self._shape[2]}(arm, reward)")
        g = self._globals
        return (f"{self._who} run per copy through {shape}; per-copy global generators: np.random {g.np_mode}, "
                f"random {g.py_mode}")

    def __getstate__(self) -> dict[str, Any]:
        # a policy is pickled to the engine's workers before reset(): drop the copies (and bound methods)
        state = dict(self.__dict__)
        for k in ("_objs", "_sel", "_upd", "_last_arms", "_last_rewards"):
            state.pop(k, None)
        state["_globals"] = _Globals(self._globals.np_mode, self._globals.py_mode, self._modules)  # no generators
        state["n_runs"] = 0
        return state


#: options of ``--adapter per-run:KEY=VALUE,...`` and the PerRun argument each sets
ADAPTER_OPTIONS = {"select": "select", "update": "update", "step": "step", "first_round": "first_round",
                   "globals": "globals_mode", "n_arms": "n_arms"}


def parse_adapter(text: str) -> tuple[str, dict[str, Any]]:
    """``"per-run"`` or ``"per-run:select=choose_arm,update=learn,first_round=1,globals=swap"`` ->
    (adapter name, PerRun options): the command line's way to name a class's methods, say that it
    counts rounds from 1, or force how its global generators are kept apart."""
    name, _, rest = str(text).partition(":")
    if name.strip() != "per-run":
        raise DPAuditError(f"unknown adapter {text!r}; the one adapter is 'per-run' (a one-run class run as N copies), "
                           "optionally with options as in per-run:select=NAME,update=NAME,first_round=1,globals=swap.")
    options: dict[str, Any] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in ADAPTER_OPTIONS or not value:
            raise DPAuditError(f"adapter option {item!r} must be KEY=VALUE with KEY one of "
                               f"{', '.join(ADAPTER_OPTIONS)}.")
        if key in ("first_round", "n_arms"):
            try:
                value = int(value)
            except ValueError:
                raise DPAuditError(f"adapter option {key} must be an integer, got {value!r}.") from None
        options[ADAPTER_OPTIONS[key]] = value
    return "per-run", options


def make_per_run(spec: str, params: Mapping[str, Any] | None = None, claim: Guarantee | str | None = None,
                 horizon: int | None = None, **options: Any) -> PerRun:
    """The CLI's ``--adapter per-run``: load ``spec`` (``file.py:Class`` or ``module:Class``), type the
    ``--param`` strings by its constructor, give the horizon to the parameter
    :func:`horizon_parameter` finds (unless set), and wrap it in :class:`PerRun` with ``claim``
    (text as in :func:`parse_claim`, or a Guarantee). ``options`` go to :class:`PerRun`."""
    from dpaudit.policies.registry import coerce_params, load_policy_class

    cls = load_policy_class(spec, contract=False)
    kwargs = coerce_params(cls, dict(params or {}))
    hp = horizon_parameter(cls, options.pop("horizon_name", None))
    if horizon is not None and hp is not None and hp not in kwargs:
        kwargs[hp] = check_int("horizon", horizon, minimum=1)
    policy = PerRun(cls, kwargs, claim, **options)
    policy._params = dict(kwargs)
    return policy


def build_policy(spec: str, params: Mapping[str, Any] | None = None, horizon: int | None = None, *,
                 adapter: str | None = None, claim: Guarantee | str | None = None, **options: Any) -> Any:
    """What ``dpaudit check policy SPEC [--param ...] [--adapter per-run] [--claim ...]`` audits.

    ``adapter=None``: the registered policy or batched plug-in ``spec`` built from ``params``, with
    the horizon given to the constructor parameter :func:`horizon_parameter` finds (``horizon``,
    ``T``, ``iters``, ...; unless ``params`` sets it); ``claim``, if given, replaces the one the
    policy declares (a plug-in without one needs it). ``adapter="per-run"``: :func:`make_per_run`
    (``options`` go to :class:`PerRun`). The policy must say how many arms it has.
    """
    from dpaudit.policies.registry import load_policy_class, make_policy

    if adapter is not None:
        adapter, more = parse_adapter(adapter)
        options = {**more, **options}
    if adapter == "per-run":
        return make_per_run(spec, params, claim, horizon, **options)
    if options:
        raise DPAuditError(f"options {', '.join(options)} apply to the per-run adapter only.")
    params = dict(params or {})
    cls = load_policy_class(spec)
    hp = horizon_parameter(cls)
    if horizon is not None and hp is not None and hp not in params:
        params[hp] = str(check_int("horizon", horizon, minimum=1))
    policy = make_policy(spec, params)
    if not hasattr(policy, "n_arms") and not getattr(policy, "continuous_actions", False):  # BCO: dpaudit.bco
        raise DPAuditError(f"policy {spec!r} has no n_arms attribute; a policy must say how many arms it has.")
    if claim is not None:
        policy.claim = parse_claim(claim) if isinstance(claim, str) else claim
        if not isinstance(policy.claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
    return policy
