"""Auditing code written outside dpaudit: per-run classes, claims as text, horizons and reward inputs.

Most public bandit code is a *one-run* object (``select_arm()`` / ``update(arm, reward)``), often
drawing its noise from the global ``np.random`` or ``random`` generators or from a generator made at
import. :class:`PerRun` runs N copies of such a class (or of what a factory function returns) as a
batched policy (the plug-in contract of DESIGN.md: ``n_arms``, ``claim``, ``reset``, ``act``,
``observe``), so that it is audited unchanged (issue 9, item 5): the feedback call's arguments in
whatever order the code takes them (:func:`parse_arg_map`, detected from parameter names where that
is safe, checked by a probe), every generator it can reach kept apart per copy, and, for a local-DP
class, its randomizer as the channel (:class:`LocalPerRun`).

The other pieces let an audit feed such code what it needs (issue 9, item 6):

* :func:`parse_claim` -- the claim given on the command line (``--claim "pure:eps=1"``);
* :func:`horizon_parameter` -- the constructor parameter that receives the audit's horizon T,
  whatever the code calls it (:data:`HORIZON_NAMES`);
* :func:`reward_alphabet` and :func:`realise_means` -- inputs for a policy that accepts only some
  reward values (``{0, 1}``): each arm's column is a low-discrepancy sequence of alphabet values whose
  running mean tracks the arm's mean.

:func:`make_per_run` puts them together for the CLI's ``--adapter per-run[:KEY=VALUE,...]``
(:func:`parse_adapter`), and
:func:`build_policy` is what ``dpaudit check policy`` builds, with or without the adapter.
"""

from __future__ import annotations

import inspect
import math
import random as _pyrandom
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    "ARG_TOKENS",
    "ARG_NAMES",
    "parse_arg_map",
    "find_module_generators",
    "PerRun",
    "LocalPerRun",
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


def _init_parameters(cls: Any) -> dict[str, inspect.Parameter]:
    """The keyword parameters of a class's constructor, or of a factory function."""
    try:
        sig = inspect.signature(cls.__init__ if inspect.isclass(cls) else cls)
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
#: what an argument of the feedback or step call can be: the arm played, its reward, the round
ARG_TOKENS = ("arm", "reward", "t")
#: parameter names read as each token when the adapter detects an argument order (after dropping a
#: prefix such as ``last_``): a method whose parameters all have such names is called in their order
ARG_NAMES = {
    "arm": frozenset({"arm", "a", "action", "arm_idx", "arm_index", "arm_id", "chosen_arm", "action_idx",
                      "action_index", "choice", "chosen", "played", "played_arm", "selected_arm", "idx"}),
    "reward": frozenset({"reward", "r", "rew", "rwd", "payoff", "outcome", "y", "gain", "reward_value", "click",
                         "feedback", "obs", "observation", "result"}),
    "t": frozenset({"t", "round", "time", "step", "timestep", "time_step", "rnd", "iteration", "it", "tt",
                    "round_idx", "round_index", "t_round"}),
}
_NAME_PREFIXES = ("last_", "prev_", "previous_", "the_", "current_", "cur_")

_SHAPES = ("select_arm()/select_arm(t) + update(arm, reward), pull() + update, choose() + update, "
           "act() + update, or step(last_arm, last_reward) -> next arm")

# the global generators are process-wide: one adapter at a time swaps them (threads then wait)
_GLOBAL_LOCK = threading.RLock()

ArgMap = tuple[tuple[str | None, str], ...]  # ((keyword or None for positional, token), ...)


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


def _token_of(name: str) -> str | None:
    """The token a parameter's name stands for (``last_reward`` -> reward), or None."""
    low = name.lower()
    for pre in _NAME_PREFIXES:
        if low.startswith(pre) and len(low) > len(pre):
            low = low[len(pre):]
            break
    found = [tok for tok, names in ARG_NAMES.items() if low in names]
    return found[0] if len(found) == 1 else None


def parse_arg_map(value: Any, what: str) -> ArgMap:
    """An argument mapping (``update_args``, ``step_args``) as ((keyword or None, token), ...).

    ``value``: text ``"t,arm,reward"``, a sequence of items, or a mapping {parameter name: token}. An
    item is a token (the next positional argument) or ``NAME:TOKEN`` (passed as the keyword NAME);
    tokens are ``arm``, ``reward`` and ``t`` (the round: dpaudit's 0-based round plus ``first_round``),
    each at most once, ``reward`` required; positional items come first."""
    if isinstance(value, str):
        items: list[Any] = [x.strip() for x in value.split(",") if x.strip()]
    elif isinstance(value, Mapping):
        items = [f"{k}:{v}" for k, v in value.items()]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise DPAuditError(f"{what} must be text such as 't,arm,reward', a list of tokens or a mapping, got {value!r}.")
    out: list[tuple[str | None, str]] = []
    for item in items:
        name, sep, tok = str(item).strip().partition(":")
        key: str | None = name.strip() if sep else None
        tok = (tok if sep else name).strip().lower()
        tok = "t" if tok in ("round", "time") else tok
        if tok not in ARG_TOKENS or (key is not None and not key.isidentifier()):
            raise DPAuditError(f"{what} item {str(item).strip()!r} must be one of the tokens arm, reward and t, or "
                               "NAME:TOKEN to pass it as the keyword NAME (e.g. t,arm,reward or reward,arm).")
        if key is None and any(k is not None for k, _ in out):
            raise DPAuditError(f"{what} lists the positional {tok!r} after a keyword; give positional tokens first.")
        out.append((key, tok))
    toks = [t for _, t in out]
    if len(set(toks)) != len(toks) or "reward" not in toks:
        raise DPAuditError(f"{what}={','.join(str(i) for i in items)!r} must name reward once, and arm and t at most "
                           "once each (e.g. t,arm,reward or reward,arm).")
    return tuple(out)


def _auto_args(fn: Any) -> tuple[ArgMap, str] | None:
    """The argument order of a feedback or step method, when it is safe to tell; None if it cannot be
    driven without a mapping. Its required positional parameters all named as tokens (``last_reward,
    last_arm``; ``t, arm, r``): that order. Else two positional arguments: (arm, reward). Else three
    required ones, the first named as the round (``t``, ``round``, ``time``, ``step``): (t, arm, reward)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    arity = _positional(fn)
    if arity is None:
        return None
    req, most = arity
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is inspect.Parameter.empty]
    toks = [_token_of(n) for n in names]
    if names and all(toks) and len(set(toks)) == len(toks) and "reward" in toks:
        return tuple((None, t) for t in toks), "default" if toks == ["arm", "reward"] else "names"  # type: ignore[misc]
    if req <= 2 <= most:
        return ((None, "arm"), (None, "reward")), "default"
    if req == 3 and _token_of(names[0]) == "t":
        return ((None, "t"), (None, "arm"), (None, "reward")), "round-first"
    return None


def _fits(fn: Any, amap: ArgMap) -> bool:
    """Whether ``fn`` accepts the call ``amap`` describes."""
    try:
        inspect.signature(fn).bind(*[0 for k, _ in amap if k is None], **{k: 0 for k, _ in amap if k is not None})
        return True
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to check (a builtin): let the call say


def _render(method: str, amap: ArgMap, step: bool = False) -> str:
    """``update(t, arm, reward)``, ``step(last_reward, last_arm)``, ``update(arm, r=reward)``."""
    def word(tok: str) -> str:
        return f"last_{tok}" if step and tok != "t" else tok
    return f"{method}({', '.join(word(t) if k is None else f'{k}={word(t)}' for k, t in amap)})"


def _np_state_changed(before: tuple, after: tuple) -> bool:
    return before[2] != after[2] or before[3] != after[3] or not np.array_equal(before[1], after[1])


def _same(a: Any, b: Any) -> bool:
    """Equality of generator states (dicts, tuples, arrays, numbers)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


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


_GEN_KINDS = {"generator": "a numpy Generator", "randomstate": "a numpy RandomState", "random": "a random.Random"}


class _ModuleGen:
    """A generator object bound at module level in the class's modules (``rng = np.random.default_rng()``
    made at import), kept apart per copy.

    ``"replace"`` (the default): around copy i's calls, the module's name is bound to copy i's own
    generator (``Generator(PCG64(...))``, ``RandomState(PCG64(...))`` or a ``random.Random`` of the
    original's type, seeded from the copy's seed), built on the copy's first call; code that looks
    the name up when it draws, or keeps what it found when the copy was built, draws from its copy's
    generator. ``"swap"``: the original object's state is set to copy i's around its calls and saved
    after them (for code that holds the original some other way). ``"off"``: left alone.
    """

    def __init__(self, places: tuple[tuple[str, str], ...], kind: str, mode: str = "replace", index: int = 0) -> None:
        self.places, self.kind, self.mode, self.index = places, kind, mode, index
        self.copies: list[Any] = []
        self.spaces: list[dict] = []
        self.saved: Any = None
        mod, attr = places[0]
        self.original = vars(sys.modules[mod]).get(attr) if mod in sys.modules else None

    def spec(self) -> tuple:
        return (self.places, self.kind, self.mode, self.index)

    def label(self) -> str:
        mod, attr = self.places[0]
        m = sys.modules.get(mod)
        where = getattr(m, "__file__", None) or mod
        if where != mod:
            import os

            rel = os.path.relpath(where)
            where = rel if not rel.startswith("..") else where
        return f"{attr} of {where} ({_GEN_KINDS[self.kind]})"

    def get(self) -> Any:
        o = self.original
        if self.kind == "generator":
            return o.bit_generator.state
        if self.kind == "randomstate":
            return o.get_state(legacy=False)
        return o.getstate()

    def set(self, state: Any) -> None:
        o = self.original
        if self.kind == "generator":
            o.bit_generator.state = state
        elif self.kind == "randomstate":
            o.set_state(state)
        else:
            o.setstate(state)

    def _seq(self, seed: int) -> np.random.SeedSequence:
        return np.random.SeedSequence([int(seed), 0x6D6F64, self.index])

    def fresh(self, seed: int) -> Any:
        """Copy ``seed``'s own generator (replace mode)."""
        ss = self._seq(seed)
        if self.kind == "generator":
            return np.random.Generator(np.random.PCG64(ss))
        if self.kind == "randomstate":
            return np.random.RandomState(np.random.PCG64(ss))
        s = int(ss.generate_state(1, np.uint64)[0])
        try:
            return type(self.original)(s)
        except Exception:
            return _pyrandom.Random(s)

    def fresh_state(self, seed: int) -> Any:
        """Copy ``seed``'s state for the original object (swap mode)."""
        ss = self._seq(seed)
        o = self.original
        if self.kind == "generator":
            return type(o.bit_generator)(ss).state
        if self.kind == "randomstate":
            return np.random.RandomState(type(o._bit_generator)(ss)).get_state(legacy=False)
        return _pyrandom.Random(int(ss.generate_state(1, np.uint64)[0])).getstate()


def find_module_generators(modules: Sequence[str]) -> list[_ModuleGen]:
    """The numpy Generators and RandomStates and ``random.Random`` objects bound at module level in
    ``modules`` (not the hidden global instances, which the np.random / random handling covers, nor a
    ``random.SystemRandom``, which nothing can seed), one entry per object with every name it has."""
    found: dict[int, tuple[list[tuple[str, str]], str]] = {}
    for name in modules:
        mod = sys.modules.get(name)
        if mod is None or name in ("numpy.random", "random"):
            continue
        for attr, val in list(vars(mod).items()):
            if isinstance(val, np.random.Generator):
                kind = "generator"
            elif isinstance(val, np.random.RandomState) and val is not _NP_INST:
                kind = "randomstate"
            elif isinstance(val, _pyrandom.Random) and val is not _PY_INST and not isinstance(val, _pyrandom.SystemRandom):
                kind = "random"
            else:
                continue
            found.setdefault(id(val), ([], kind))[0].append((name, attr))
    return [_ModuleGen(tuple(places), kind, index=k) for k, (places, kind) in enumerate(found.values())]


def unseedable_module_generators(modules: Sequence[str]) -> list[str]:
    """``random.SystemRandom`` objects bound at module level in ``modules`` (named for the refusal)."""
    out = []
    for name in modules:
        mod = sys.modules.get(name)
        for attr, val in list(vars(mod).items()) if mod is not None else []:
            if isinstance(val, _pyrandom.SystemRandom):
                out.append(attr)
    return out


class _Globals:
    """Per-copy states of the global generators, one mode per generator.

    ``"off"``: left alone. ``"redirect"`` (the default, cheap even for code that never draws): while
    the copies run, the module's functions (``np.random.laplace``, ``random.random``, ...: the bound
    methods of the hidden global instance) are replaced by functions that call the current copy's own
    ``RandomState`` / ``random.Random``, built on its first draw; switching copies is one attribute
    store. The same goes for those functions imported into the class's modules (``from numpy.random
    import laplace``), found in the globals of the modules that define the class and its bases.
    ``"swap"`` (for code that reaches the hidden instance some other way, e.g. a bound method kept in
    a class attribute): each copy's saved state is swapped in with ``set_state``/``setstate`` around
    its call and saved after it (about 40 us each way for numpy, so ~100x slower). Module-level
    generator objects of the class's modules are kept apart per copy too (:class:`_ModuleGen`). In
    every mode the caller's generators end as they began.
    Copy i's generators come from its seed: ``RandomState(PCG64(seed_i))`` (see :class:`_Target`)
    or, swapped, the state of ``RandomState(seed_i)``; ``random.Random(seed_i)`` (or its state).
    """

    def __init__(self, np_mode: str, py_mode: str, modules: tuple[str, ...] = (),
                 modgens: Sequence[tuple] = ()) -> None:
        self.np_mode, self.py_mode = np_mode, py_mode
        self.modules = modules  # names of the modules whose globals may hold imported generator functions
        self.modgens = [_ModuleGen(*spec) for spec in modgens]
        self.modgens = [m for m in self.modgens if m.mode != "off" and m.original is not None]
        self.target = _Target()
        self.swaps = np_mode == "swap" or py_mode == "swap" or any(m.mode == "swap" for m in self.modgens)
        #: per replace-mode module generator: (its (namespace, name) places, the copies' objects, maker); set by enter
        self.binds: list[tuple[list[tuple[dict, str]], list[Any], Any]] = []
        self.active = np_mode != "off" or py_mode != "off" or bool(self.modgens)
        self._patched: list[tuple[dict, str, Any]] = []
        self._saved: tuple[Any, Any] = (None, None)
        self._redirectors = {which: {n: _redirector(self.target, which, n) for n in names}
                             for which, names in (("np", _NP_NAMES), ("py", _PY_NAMES))}

    def spec(self) -> tuple:
        return (self.np_mode, self.py_mode, self.modules, tuple(m.spec() for m in self.modgens))

    def __reduce__(self) -> tuple:
        # pickled (to the engine's workers) as its modes only: the generators are rebuilt by reset()
        return (_Globals, self.spec())

    def seed_copies(self, seeds: np.ndarray) -> None:
        """Copy i's generators come from ``seeds[i]`` (distinct); each is built on first use."""
        t = self.target
        t.seeds = [int(s) for s in seeds]
        t.np_gens = [None] * len(t.seeds)
        t.py_gens = [None] * len(t.seeds)
        for m in self.modgens:
            m.copies = [None] * len(t.seeds)

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
        for m in self.modgens:
            c = m.copies[i]
            if m.mode == "replace":
                if c is None:
                    c = m.copies[i] = m.fresh(t.seeds[i])
                for ns, (_, attr) in zip(m.spaces, m.places):
                    ns[attr] = c
            else:
                m.set(c if c is not None else m.fresh_state(t.seeds[i]))

    def save(self, i: int) -> None:
        """After copy ``i``'s call: keep its swapped states."""
        if self.np_mode == "swap":
            self.target.np_gens[i] = _NP_INST.get_state()
        if self.py_mode == "swap":
            self.target.py_gens[i] = _PY_INST.getstate()
        for m in self.modgens:
            if m.mode == "swap":
                m.copies[i] = m.get()

    def enter(self) -> None:
        """Before a batch of calls: install the redirections, save what a swap overwrites, and note
        the hidden instances' states (to catch a class that bypasses the redirection)."""
        self._saved = (_NP_INST.get_state(), _PY_INST.getstate())
        for m in self.modgens:
            m.spaces = [vars(sys.modules[mod]) for mod, _ in m.places]
            m.saved = m.get()
        self.binds = [([(ns, attr) for ns, (_, attr) in zip(m.spaces, m.places)], m.copies, m.fresh)
                      for m in self.modgens if m.mode == "replace"]
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
        """After a batch: undo the redirections and restore the caller's states. Returns what moved
        although it was not swapped (the class bypassed the redirection): "np.random", "random", or a
        module-level generator's label."""
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
        for m in self.modgens:
            if m.mode == "replace":
                for ns, (_, attr) in zip(m.spaces, m.places):
                    ns[attr] = m.original
                if not _same(m.get(), m.saved):
                    moved.append(m.label())
            m.set(m.saved)
        return moved


def _fingerprint(obj: Any) -> dict[str, Any]:
    """What a copy's state holds, by attribute path (numbers, arrays, text; generators by their state),
    to compare two copies built and driven alike. Paths to generator states end in ``<rng>``."""
    out: dict[str, Any] = {}
    seen: set[int] = set()

    def walk(x: Any, path: str, depth: int) -> None:
        if len(out) > 4000 or depth > 5:
            return
        if isinstance(x, (bool, int, str, bytes, type(None))):
            out[path] = x
        elif isinstance(x, float):
            out[path] = x.hex()
        elif isinstance(x, np.generic):
            out[path] = repr(x.item())
        elif isinstance(x, np.ndarray):
            if x.dtype.kind in "biufcSU":
                out[path] = (x.shape, x.dtype.str, x.tobytes())
            else:
                for j, v in enumerate(x.ravel()[:200]):
                    walk(v, f"{path}[{j}]", depth + 1)
        elif isinstance(x, np.random.Generator):
            out[path + "<rng>"] = repr(x.bit_generator.state)
        elif isinstance(x, np.random.RandomState):
            out[path + "<rng>"] = repr(x.get_state(legacy=False))
        elif isinstance(x, _pyrandom.Random) and not isinstance(x, _pyrandom.SystemRandom):
            out[path + "<rng>"] = repr(x.getstate())
        elif id(x) in seen or callable(x) or inspect.ismodule(x):
            return
        elif isinstance(x, (list, tuple)):
            seen.add(id(x))
            for j, v in enumerate(x[:1000]):
                walk(v, f"{path}[{j}]", depth + 1)
        elif isinstance(x, dict):
            seen.add(id(x))
            for k, v in list(x.items())[:1000]:
                walk(v, f"{path}[{k!r}]", depth + 1)
        elif hasattr(x, "__dict__"):
            seen.add(id(x))
            for k, v in list(vars(x).items()):
                walk(v, f"{path}.{k}" if path else k, depth + 1)

    walk(obj, "", 0)
    return out


@dataclass(frozen=True)
class _Shape:
    """How the copies are driven: ``kind`` "select" (``select`` [with the round] then ``feedback``) or
    "step" (``feedback`` is the step method, which also returns the next arm); ``args`` the feedback
    call's arguments; ``how`` where they came from: "default", "names", "round-first" or "given"."""

    kind: str
    select: str | None
    select_t: bool
    feedback: str
    args: ArgMap
    how: str

    def key(self) -> str:
        return "step_args" if self.kind == "step" else "update_args"

    def render(self) -> str:
        if self.kind == "step":
            return _render(self.feedback, self.args, step=True)
        return f"{self.select}({'t' if self.select_t else ''}) + {_render(self.feedback, self.args)}"


def _call_values(args: ArgMap, arm: Any, reward: Any, t: Any) -> tuple[tuple, dict]:
    vals = {"arm": arm, "reward": reward, "t": t}
    return tuple(vals[tok] for k, tok in args if k is None), {k: vals[tok] for k, tok in args if k is not None}


#: the probe's findings for a class, parameters and options (an audit builds the policy many times)
_PROBE_CACHE: dict[Any, dict[str, Any]] = {}


class PerRun:
    """Runs N copies of a one-run bandit class as one batched dpaudit policy.

    ``PerRun(cls, kwargs, claim)`` builds copies with ``cls(**kwargs)`` -- ``cls`` a class, or a
    *factory*: a function returning an instance, typed and given the horizon by its own signature --
    and drives them through one of these shapes (tried in this order unless ``select``/``update``/
    ``step`` name the methods):

    * a selection method (:data:`SELECT_NAMES`: ``select_arm``, ``pull``, ``choose``, ``act``, ...)
      with no required argument, called as ``select()``, or with one, called as ``select(t)`` with
      ``t = first_round + round`` (``first_round`` = 0 by default: dpaudit's 0-based round; pass 1
      for code that counts from 1), plus a feedback method (:data:`UPDATE_NAMES`: ``update``, ...)
      called as ``update(arm, reward)`` with a Python int and float.
    * ``step(last_arm, last_reward) -> next arm``: the first call is ``step(None, None)``; after
      round t's reward the next call passes (arm observed at t, its reward). The last round's reward
      is never passed (no later action could show it).

    The feedback (or step) call's arguments: ``update_args`` (``step_args``) maps them, as text
    ``"t,arm,reward"`` or a sequence, in the method's order, of the tokens ``arm``, ``reward`` and
    ``t`` (the round, ``first_round + round``; for ``step``, the round whose arm it returns), each
    optionally ``NAME:TOKEN`` to pass it as a keyword (:func:`parse_arg_map`). Without one the order
    comes from the method's parameter names when they all name tokens (``step(last_reward,
    last_arm)``, ``update(t, arm, r)``: :data:`ARG_NAMES`), else it is (arm, reward), or (t, arm,
    reward) for three required parameters of which the first names the round. Before an audit one
    copy is driven for ``probe_steps`` rounds with rewards that are not arm numbers (0.5, 0.25, ...
    of the range, unless an alphabet restricts them), and rewards never equal to the arm just
    played, so that a swapped order fails there instead of passing silently; when a call fails, the
    orders and round origins that would run are tried, and the error says which to give.

    The number of arms comes from ``n_arms`` if given, else from the first of :data:`N_ARMS_NAMES`
    found on an instance (an int, or a sequence whose length counts), else from the same names among
    ``kwargs``. ``reward_range`` and ``reward_alphabet`` default to the instance's attributes of
    those names, else [0, 1] and none (``reward_range`` and ``alphabet`` override them); rewards
    outside the range are refused, never clipped.

    Randomness (:meth:`reset`): each copy gets its own seed from the audit's generator. If the
    constructor takes ``seed`` or ``random_state`` it receives a distinct int in [0, 2^32); ``rng``
    receives a ``numpy.random.Generator`` seeded with it. A class that draws from the global
    ``np.random`` or ``random`` generators, or from a generator object made at module level in its
    modules (``rng = np.random.default_rng()`` at import), gets one generator per copy for each,
    seeded from the audit's generator and made current around every call to that copy (see
    :class:`_Globals`). So runs are independent and reproducible from the audit's seed whatever
    order they run in, and the caller's generators end as they began. The module functions are
    redirected whether or not the probe saw a draw (a draw after the probe is then kept apart too);
    code that reaches the hidden global instance, or holds a module-level generator, in a way the
    redirection cannot see has its state swapped in per copy instead ("swap", found by the probe;
    ``globals_mode`` = "off", "redirect" or "swap" forces one). Such a draw that happens later in a
    run without being kept apart is an error naming the option that fixes it, not a silent loss of
    reproducibility; so is randomness the adapter cannot seed (a generator seeded from the clock or
    the OS), which shows in the probe as two identically seeded copies acting differently or ending
    with different generator states. Running the copies holds a module-wide lock, so threads
    sharing the process wait for each other.

    ``randomizer`` (the name of a method taking one user's datum and returning the message she
    sends) makes it a local-DP plug-in (:class:`LocalPerRun`): ``channel(z_batch, rng)`` and
    ``domain`` (``domain``, else the instance's ``domain``, else the reward range).

    What the adapter did is said in ``audit_notes`` (the audit's findings carry them): the argument
    order it detected, the generators it kept apart, a parameter typed wider than its default.

    Cost: a Python call per copy per round (and in "swap" mode about 80 us per call for numpy's
    get_state/set_state); measured in benchmarks/adapter.md. The audit's up-front estimate
    (:mod:`dpaudit.runner.cost`) calibrates on the adapted class itself, so it reflects that cost.
    The adapter has no ``ledger`` attribute (the audit tests ``hasattr(policy, "ledger")``): only the
    black-box attacks apply.
    """

    accepts_queries = True

    def __new__(cls, *args: Any, **kwargs: Any) -> "PerRun":
        if cls is PerRun and kwargs.get("randomizer") is not None:
            cls = LocalPerRun
        return super().__new__(cls)

    def __init__(self, cls: Any, kwargs: Mapping[str, Any] | None = None, claim: Guarantee | str | None = None,
                 *, select: str | None = None, update: str | None = None, step: str | None = None,
                 update_args: Any = None, step_args: Any = None,
                 n_arms: int | None = None, first_round: int = 0, reward_range: Any = None,
                 alphabet: Sequence[float] | None = None, globals_mode: str | None = None,
                 probe_steps: int | None = None, randomizer: str | None = None, domain: Any = None,
                 spec: str | None = None) -> None:
        if not callable(cls):
            raise DPAuditError(f"the per-run adapter needs a class, or a function that returns an instance, got {cls!r}.")
        self.cls = cls
        self.factory = not inspect.isclass(cls)
        self.kwargs = dict(kwargs or {})
        maker = getattr(cls, "__name__", repr(cls))
        self.name = f"{maker} (per-run)"
        self._maker = maker
        self._who = maker
        self.audit_notes: list[str] = []
        self.first_round = check_int("first_round", first_round, minimum=0)
        if globals_mode not in (None, "off", "redirect", "swap"):
            raise DPAuditError(f"globals_mode must be None (detect), 'off', 'redirect' or 'swap', got {globals_mode!r}.")
        params = _init_parameters(cls)
        self._seed_param = next((s for s in SEED_NAMES if s in params), None)
        if self._seed_param is not None and self._seed_param in self.kwargs:
            raise DPAuditError(f"{maker}'s {self._seed_param!r} is set by the adapter, one per copy, so that runs are "
                               f"independent; drop {self._seed_param}={self.kwargs[self._seed_param]!r} from the "
                               "parameters (the audit's --seed decides).")
        self._check_required(params, spec)
        modules = [getattr(cls, "__module__", None)] if self.factory else [c.__module__ for c in cls.__mro__]
        early = find_module_generators([m for m in modules if m and m != "builtins"])
        with _GLOBAL_LOCK:  # building may seed or draw from the global generators: the caller's survive
            np_saved, py_saved = _NP_INST.get_state(), _PY_INST.getstate()
            mg_saved = [m.get() for m in early]
            try:
                probe = self._build(0)
            finally:
                _NP_INST.set_state(np_saved)
                _PY_INST.setstate(py_saved)
                for m, st in zip(early, mg_saved):
                    m.set(st)
        if self.factory:
            self._who = type(probe).__name__
            modules += [c.__module__ for c in type(probe).__mro__]
        self._modules = tuple(dict.fromkeys(m for m in modules if m and m != "builtins"))
        self._shape = self._detect_shape(probe, select, update, step, update_args, step_args)
        self.n_arms = self._detect_arms(probe, n_arms)
        if isinstance(claim, str):
            claim = parse_claim(claim)
        if claim is None:
            claim = getattr(probe, "claim", None)
        if claim is not None and not isinstance(claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
        self.claim = claim
        rr = reward_range if reward_range is not None else getattr(probe, "reward_range", (0.0, 1.0))
        rr_arr = arm_ranges(rr, self.n_arms)
        if not np.all(rr_arr == rr_arr[0]):
            raise DPAuditError(f"the per-run adapter needs one reward range for all arms, got {rr!r}.")
        self.reward_range = (float(rr_arr[0, 0]), float(rr_arr[0, 1]))
        self.reward_alphabet = alphabet if alphabet is not None else getattr(probe, "reward_alphabet", None)
        self.reward_alphabet = reward_alphabet(self)  # sorted, checked inside the range (None stays None)
        T = self._horizon_value()
        steps = max(32, 4 * self.n_arms) if probe_steps is None else check_int("probe_steps", probe_steps, minimum=1)
        self.probe_steps = min(steps, T) if T is not None else steps
        modgens = find_module_generators(self._modules)
        found = self._probe(modgens)
        if globals_mode is None:
            np_mode, py_mode = found["np_mode"], found["py_mode"]
            mg_modes = found["mg_modes"]
        else:
            np_mode = py_mode = globals_mode
            mg_modes = [{"redirect": "replace"}.get(globals_mode, globals_mode)] * len(modgens)
        self._globals = _Globals(np_mode, py_mode, self._modules,
                                 [m.spec()[:2] + (mode, m.index) for m, mode in zip(modgens, mg_modes)])
        #: seconds one copy took per round (its selection and feedback calls) in the probe
        self.probe_seconds_per_step = found["seconds_per_step"]
        self._used = found["used"]
        self._note(found, modgens, mg_modes, globals_mode)
        self._randomizer = None
        if randomizer is not None:
            self._local(probe, randomizer, domain)
        elif domain is not None:
            raise DPAuditError("domain applies with a randomizer (a local-DP class: --adapter "
                               "per-run:randomizer=NAME,domain=LOW,HIGH); drop it.")
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
            raise DPAuditError(f"{self._maker}({', '.join(f'{k}={v!r}' for k, v in kw.items())}) raised "
                               f"{type(exc).__name__}: {exc}.") from exc

    def _check_required(self, params: Mapping[str, inspect.Parameter], spec: str | None) -> None:
        """Refuse, before building, a constructor whose required parameters were not given (objects such
        as an environment cannot come from --param): a factory function is the way, and this says so."""
        missing = [n for n, p in params.items()
                   if p.default is inspect.Parameter.empty and n not in self.kwargs and n != self._seed_param]
        if not missing:
            return
        try:
            hp = horizon_parameter(self.cls)
        except DPAuditError:
            hp = None
        given = f" ({hp} receives the horizon)" if hp is not None and hp in self.kwargs else ""
        names = " and ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1 else missing)
        found = _factories_of(self.cls)
        where = spec.rpartition(":")[0] if spec and ":" in spec else getattr(self.cls, "__module__", "module")
        hint = (f" ({', '.join(f'{where}:{f}' for f in found)} in the same module "
                f"build{'s' if len(found) == 1 else ''} one)") if found else ""
        raise DPAuditError(
            f"{self._maker}({', '.join(params)}) needs {names}, which {'was' if len(missing) == 1 else 'were'} not "
            f"given{given}: numbers or text come with --param NAME=VALUE, but objects (an environment, a dict of "
            f"parameters) need a function that builds the instance and returns it, audited in the class's place as "
            f"FILE.py:FUNCTION or module:FUNCTION with --adapter per-run{hint}.")

    def _horizon_value(self) -> int | None:
        try:
            hp = horizon_parameter(self.cls)
        except DPAuditError:
            return None
        v = self.kwargs.get(hp) if hp else None
        return int(v) if isinstance(v, Integral) and not isinstance(v, bool) and v >= 1 else None

    def _detect_shape(self, obj: Any, select: str | None, update: str | None, step: str | None,
                      update_args: Any, step_args: Any) -> _Shape:
        who = self._who
        for name in (select, update, step):
            if name is not None and not callable(getattr(obj, name, None)):
                raise DPAuditError(f"{who} has no method {name!r}.")
        ua = parse_arg_map(update_args, "update_args") if update_args is not None else None
        sa = parse_arg_map(step_args, "step_args") if step_args is not None else None
        if ua is not None and sa is not None:
            raise DPAuditError("update_args maps the feedback call of select + update, step_args the step call; "
                               "give the one of the shape the class has.")
        never = (1 << 30, 0)  # the arity of something that cannot be called with positional arguments
        if select is not None and not (_positional(getattr(obj, select)) or never)[0] <= 1:
            raise DPAuditError(f"{who}.{select} must be callable with no argument or with one (the round).")
        if update is not None:
            fn = getattr(obj, update)
            if ua is not None and not _fits(fn, ua):
                raise DPAuditError(f"{who}.{update}{_params_text(fn)} cannot be called as {_render(update, ua)}; "
                                   "give update_args in the order of its parameters.")
            if ua is None and _auto_args(fn) is None:
                raise DPAuditError(f"{who}.{update} must be callable with two arguments (arm, reward), or say what its "
                                   f"parameters {_params_text(fn)} receive with update_args=TOKENS (tokens arm, reward "
                                   "and t in its order, e.g. update_args=t,arm,reward).")
        step_first = step is not None or (sa is not None and select is None and update is None)
        selects = [] if step_first else ([select] if select is not None else list(SELECT_NAMES))
        updates = [update] if update is not None else list(UPDATE_NAMES)
        for s in selects:
            fn = getattr(obj, s, None)
            arity = _positional(fn) if callable(fn) else None
            if not arity or arity[0] > 1:
                continue
            for u in updates:
                g = getattr(obj, u, None)
                if not callable(g) or u == s:
                    continue
                if ua is not None:
                    if _fits(g, ua):
                        return _Shape("select", s, arity[0] == 1, u, ua, "given")
                    continue
                auto = _auto_args(g)
                if auto is not None:
                    return _Shape("select", s, arity[0] == 1, u, auto[0], auto[1])
        if ua is not None and select is None and update is None and step is None:
            raise DPAuditError(f"{who} has no selection method ({', '.join(SELECT_NAMES)}) with a feedback method "
                               f"({', '.join(UPDATE_NAMES)}) callable as {_render('update', ua)}; name them with "
                               "--adapter per-run:select=NAME,update=NAME.")
        if step_first or (select is None and update is None):
            name = step if step is not None else "step"
            fn = getattr(obj, name, None)
            if callable(fn):
                if sa is not None:
                    if _fits(fn, sa):
                        return _Shape("step", None, False, name, sa, "given")
                    raise DPAuditError(f"{who}.{name}{_params_text(fn)} cannot be called as "
                                       f"{_render(name, sa, step=True)}; give step_args in the order of its parameters.")
                auto = _auto_args(fn)
                if auto is not None:
                    return _Shape("step", None, False, name, auto[0], auto[1])
            if step is not None:
                raise DPAuditError(f"{who}.{step} must accept two arguments (last_arm, last_reward), or say what its "
                                   f"parameters {_params_text(fn)} receive with step_args=TOKENS (tokens arm, reward "
                                   "and t in its order, e.g. step_args=reward,arm).")
        raise DPAuditError(f"{who} has none of the method shapes the per-run adapter drives ({_SHAPES}); name "
                           "its selection and feedback methods explicitly (--adapter per-run:select=NAME,update=NAME, "
                           "or per-run:step=NAME) and, if the feedback is not (arm, reward), its arguments "
                           "(update_args=t,arm,reward or step_args=reward,arm: the tokens arm, reward and t in its order).")

    def _detect_arms(self, obj: Any, n_arms: int | None) -> int:
        who = self._who
        if n_arms is not None:
            return check_int("n_arms", n_arms, minimum=2)
        params = _init_parameters(self.cls)

        def default(n: str) -> Any:
            p = params.get(n)
            return None if p is None or p.default is inspect.Parameter.empty else p.default

        for source, get in (("attribute", lambda n: getattr(obj, n, None)), ("parameter", self.kwargs.get),
                            ("default parameter", default)):
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
    def _values(self, kind: str) -> tuple[float, ...]:
        """The probe's rewards: the alphabet; else ``kind`` "fraction": values inside the range that are
        not whole numbers (so not arm numbers), or "ends": the range's ends."""
        if self.reward_alphabet is not None:
            return tuple(float(v) for v in self.reward_alphabet)
        lo, hi = self.reward_range
        if kind == "fraction":
            vals = tuple(v for v in (lo + (hi - lo) * q for q in (0.5, 0.25, 0.75, 0.375, 0.625))
                         if not float(v).is_integer())
            if vals:
                return vals
        return (lo, hi)

    def _probe(self, modgens: list[_ModuleGen]) -> dict[str, Any]:
        """Check the calls and how to keep each copy's randomness apart (cached per class and options).

        1. One copy built with a fixed seed is driven for ``probe_steps`` rounds with rewards that are
           not arm numbers (:meth:`_values`); if a call fails, the range's ends are tried, and if
           those fail too, the other argument orders and round origins: one that runs is named in
           the error (never adopted silently).
        2. A second copy built and driven alike, its global and module-level generators seeded alike,
           must choose the same arms and end with the same generator states (else: randomness the
           adapter cannot seed, refused); other state that differs gets a note.
        3. A hidden global instance, or a module-level generator object, that moved although its
           module functions and names were redirected per copy is reached another way: "swap".
        """
        key: Any = (self.cls, repr(sorted(self.kwargs.items())), self._shape, self.first_round, self.probe_steps,
                    self.reward_range, self.reward_alphabet, tuple(m.spec() for m in modgens), self._modules)
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in _PROBE_CACHE:
            return _PROBE_CACHE[key]
        attempts = list(dict.fromkeys([self._values("fraction"), self._values("ends")]))
        first: Any = None
        values = attempts[0]
        for vals in attempts:
            res = self._probe_run(self._shape, self.first_round, vals, modgens)
            if not isinstance(res, DPAuditError):
                first, values = res, vals
                break
            first = first if first is not None else res
        if isinstance(first, DPAuditError):
            for vals in attempts:
                fix = self._find_fix(vals, modgens)
                if fix is not None:
                    base = getattr(first, "base", str(first).rstrip("."))
                    raise DPAuditError(f"{base}; it runs when called as {fix[0]}: add {fix[1]} (--adapter "
                                       f"per-run:{fix[1]}, or PerRun(..., {fix[2]})).") from None
            raise first
        second = self._probe_run(self._shape, self.first_round, values, modgens)
        if isinstance(second, DPAuditError):  # the same calls failed the second time: not reproducible
            raise second
        self._check_repeat(first, second, modgens)
        moved = set(first["moved"]) | set(second["moved"])
        out = {
            "values": values,
            "np_mode": "swap" if "np.random" in moved else "redirect",
            "py_mode": "swap" if "random" in moved else "redirect",
            "mg_modes": ["swap" if m.label() in moved else "replace" for m in modgens],
            "used": {**first["used"], **{k: True for k in moved}},  # what moved was drawn from, if not redirected
            "state_note": first.get("state_note"),
            "seconds_per_step": first["seconds"] / max(1, self.probe_steps),
        }
        if key is not None:
            if len(_PROBE_CACHE) > 256:
                _PROBE_CACHE.clear()
            _PROBE_CACHE[key] = out
        return out

    def _find_fix(self, values: tuple[float, ...], modgens: list[_ModuleGen]) -> tuple[str, str, str] | None:
        """Another argument order or round origin under which the probe runs: (the call as rendered,
        the adapter options, the PerRun keywords), or None."""
        s = self._shape
        origins = [self.first_round] + ([1 - self.first_round] if self.first_round in (0, 1) else [])
        positional = all(k is None for k, _ in s.args)
        orders = [s.args] + ([tuple((None, t) for t in p) for p in _permutations([t for _, t in s.args])
                             if tuple((None, t) for t in p) != s.args] if positional else [])
        for args in orders:
            for fr in origins:
                if args == s.args and fr == self.first_round:
                    continue
                alt = _Shape(s.kind, s.select, s.select_t, s.feedback, args, "given")
                if not isinstance(self._probe_run(alt, fr, values, modgens), DPAuditError):
                    opts, kws = [], []
                    if args != s.args:
                        toks = ",".join(t for _, t in args)
                        opts.append(f"{s.key()}={toks}")
                        kws.append(f"{s.key()}='{toks}'")
                    if fr != self.first_round:
                        opts.append(f"first_round={fr}")
                        kws.append(f"first_round={fr}")
                    call = alt.render() + (f" with rounds counted from {fr}" if fr != self.first_round else "")
                    return call, ",".join(opts), ", ".join(kws)
        return None

    def _probe_run(self, shape: _Shape, first_round: int, values: tuple[float, ...],
                   modgens: list[_ModuleGen]) -> Any:
        """One copy, built with a fixed seed and driven for ``probe_steps`` rounds with every generator
        redirected per copy and seeded alike; the caller's generators are restored after. Returns its
        arms, state fingerprint, what it used and what moved, or the DPAuditError a call raised."""
        with _GLOBAL_LOCK:
            np_saved, py_saved = _NP_INST.get_state(), _PY_INST.getstate()
            mg_saved = [m.get() for m in modgens]
            try:
                g = _Globals("redirect", "redirect", self._modules,
                             [m.spec()[:2] + ("replace", m.index) for m in modgens])
                g.seed_copies(np.array([20261122]))
                _NP_INST.seed(20261122)
                _pyrandom.seed(20261122)
                for m in modgens:
                    m.set(m.fresh_state(20261123))  # an original reached another way draws alike in both runs
                g.enter()
                try:
                    g.select(0)
                    obj = self._build(12345)
                    t0 = time.perf_counter()
                    try:
                        arms = self._drive(obj, shape, first_round, values)
                    except DPAuditError as exc:
                        return exc
                    seconds = time.perf_counter() - t0
                finally:
                    moved = g.leave()
                used = {"np.random": g.target.np_gens[0] is not None, "random": g.target.py_gens[0] is not None}
                for m in g.modgens:
                    c = m.copies[0]
                    used[m.label()] = c is not None and not _same(_gen_state(c, m.kind), _gen_state(m.fresh(20261122), m.kind))
            finally:
                _NP_INST.set_state(np_saved)
                _PY_INST.setstate(py_saved)
                for m, st in zip(modgens, mg_saved):
                    m.set(st)
        return {"arms": arms, "print": _fingerprint(obj), "moved": moved, "used": used, "seconds": seconds}

    def _check_repeat(self, first: dict[str, Any], second: dict[str, Any], modgens: list[_ModuleGen]) -> None:
        """Refuse randomness the adapter cannot seed (two copies made and driven alike differ)."""
        a, b = first["arms"], second["arms"]
        pa, pb = first["print"], second["print"]
        rng_diff = sorted(k for k in pa.keys() | pb.keys() if k.endswith("<rng>") and pa.get(k) != pb.get(k))
        detail = None
        if a != b:
            j = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            detail = f"chose different arms from round {j} on (arm {a[j]} vs arm {b[j]})"
        elif rng_diff:
            detail = f"ended with different states of its generator {rng_diff[0][:-5] or 'itself'} (made without a seed)"
        if detail is not None:
            sysrand = unseedable_module_generators(self._modules)
            extra = (f"; its module-level {', '.join(sysrand)} {'is a' if len(sysrand) == 1 else 'are'} "
                     "random.SystemRandom, which nothing can seed") if sysrand else ""
            raise DPAuditError(
                f"{self._who} draws randomness the adapter cannot seed: two copies built with the same seed and the "
                f"same generator states {detail}{extra}; give its generator through a constructor parameter "
                f"({', '.join(SEED_NAMES)}) or draw from np.random, random or a generator made at module level.")
        other = sorted(k for k in pa.keys() | pb.keys() if pa.get(k) != pb.get(k))
        if other:
            first["state_note"] = (
                f"two copies of {self._who} built with the same seed chose the same arms in the adapter's probe but "
                f"ended with different values of {other[0]}: if that is randomness the adapter cannot seed (a "
                "generator seeded from the OS or the clock), its runs are not reproducible.")

    def _drive(self, obj: Any, shape: _Shape, first_round: int, values: tuple[float, ...]) -> list[int]:
        arms: list[int] = []
        fb = getattr(obj, shape.feedback)
        sel = getattr(obj, shape.select) if shape.kind == "select" else None
        last_arm: Any = None
        last_reward: Any = None
        for t in range(self.probe_steps):
            tt = t + first_round
            if sel is None:
                args, kw = _call_values(shape.args, last_arm, last_reward, tt)
                a = self._one_arm(self._call(fb, args, kw, t), t, 0)
            else:
                a = self._one_arm(self._call(sel, (tt,) if shape.select_t else (), {}, t), t, 0)
            j = (t * 7 + a) % len(values)
            r = next((values[(j + k) % len(values)] for k in range(len(values))
                      if values[(j + k) % len(values)] != a), values[j])  # never the arm just played
            if sel is not None:
                args, kw = _call_values(shape.args, a, r, tt)
                self._call(fb, args, kw, t)
            last_arm, last_reward = a, r
            arms.append(a)
        return arms

    def _call(self, fn: Any, args: tuple, kw: dict, t: int, copy: int = 0) -> Any:
        try:
            return fn(*args, **kw)
        except DPAuditError:
            raise
        except Exception as exc:
            raise self._failure(getattr(fn, "__name__", "call"), exc, f"at round {t} (copy {copy})") from exc

    def _failure(self, method: str, exc: BaseException, where: str) -> DPAuditError:
        """One sentence for an exception from the class's own code; for a TypeError, IndexError,
        ValueError or KeyError from a call whose arguments the adapter chose, how to map them."""
        text = str(exc).rstrip(".") or "(no message)"
        base = f"{self._who}.{method} raised {type(exc).__name__} {where}: {text}"
        hint = ""
        s = getattr(self, "_shape", None)
        if s is not None and isinstance(exc, (TypeError, IndexError, ValueError, KeyError)):
            fr = f" with t counted from {self.first_round}"
            if method == s.feedback:
                toks = [t for _, t in s.args]
                example = "reward,arm" if toks == ["arm", "reward"] else "t,arm,reward" if "t" not in toks else "arm,reward"
                call = _render(method, s.args, step=s.kind == "step")
                hint = (f"; the adapter called it as {call}{fr if 't' in toks or s.select_t else ''}: if it takes "
                        f"its arguments in another order or counts rounds from 1, say so with --adapter "
                        f"per-run:{s.key()}=TOKENS (arm, reward and t in its order, e.g. {s.key()}={example}) or "
                        f"first_round=1 ({s.key()}= and first_round= in PerRun)")
            elif method == s.select and s.select_t:
                hint = (f"; the adapter called it as {method}(t){fr}: if it counts rounds from 1, add first_round=1 "
                        "(--adapter per-run:first_round=1)")
        err = DPAuditError(base + hint + ".")
        err.base = base  # type: ignore[attr-defined]
        return err

    def _one_arm(self, value: Any, t: int, copy: int) -> int:
        if isinstance(value, (np.ndarray, np.generic)) and np.ndim(value) == 0:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, Integral):
            # a bool is refused, as batched plug-ins' bool actions are (check_actions): True is not arm 1
            if not isinstance(value, bool) and isinstance(value, Real) and float(value).is_integer():
                value = int(value)
            else:
                err = DPAuditError(f"{self._who} returned {value!r} as its arm at round {t} (copy {copy}); an arm is "
                                   f"an integer in 0..{self.n_arms - 1}.")
                err.base = str(err)[:-1]  # type: ignore[attr-defined]
                raise err
        if not 0 <= value < self.n_arms:
            err = DPAuditError(f"{self._who} returned arm {int(value)} at round {t} (copy {copy}); allowed arms are "
                               f"0..{self.n_arms - 1}.")
            err.base = str(err)[:-1]  # type: ignore[attr-defined]
            raise err
        return int(value)

    def _note(self, found: dict[str, Any], modgens: list[_ModuleGen], mg_modes: list[str],
              forced: str | None) -> None:
        """The adapter's notes for the findings (what it detected and did; nothing timed)."""
        who, s, notes = self._who, self._shape, self.audit_notes
        if s.how in ("names", "round-first"):
            why = "the names of its parameters" if s.how == "names" else "its first parameter names the round"
            notes.append(f"{who} is driven through {s.render()} ({why}; {s.key()}= says otherwise), with rounds counted "
                         f"from {self.first_round}.")
        used = found["used"]
        g = self._globals
        for which, mode in (("np.random", g.np_mode), ("random", g.py_mode)):
            if used.get(which) and mode != "off":
                how = ("its functions redirected to it around the copy's calls" if mode == "redirect" else
                       "its state swapped in around each of the copy's calls" +
                       ("" if forced else ", since the class reaches the hidden global instance directly"))
                notes.append(f"{who} draws from the global {which}: each copy had its own generator, seeded from the "
                             f"audit's seed ({how}).")
        for m, mode in zip(modgens, mg_modes):
            if mode == "off":
                continue
            how = ("put in place of it around every call of that copy" if mode == "replace" else
                   "its state swapped into that object around every call of that copy" +
                   ("" if forced else ", since the class holds the object itself"))
            if used.get(m.label()):
                notes.append(f"{who} draws from the module-level generator {m.label()}: each copy got its own, seeded "
                             f"from the audit's seed and {how}.")
            else:
                notes.append(f"the module-level generator {m.label()} was kept apart per copy too (each copy's own, "
                             f"seeded from the audit's seed), although {who} did not draw from it in the probe.")
        if found.get("state_note"):
            notes.append(found["state_note"])

    # ---- the batched contract ----------------------------------------------------------------
    def reset(self, n_runs: int, rng: np.random.Generator, *, record: bool = True) -> None:
        """Fresh copies for ``n_runs`` independent runs, each seeded from ``rng`` (see the class doc)."""
        n = check_int("n_runs", n_runs, minimum=1)
        if not isinstance(rng, np.random.Generator):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        seeds = rng.choice(1 << 32, size=n, replace=False)  # distinct: no two runs share a seed
        self._globals.seed_copies(rng.choice(1 << 32, size=n, replace=False))
        self.n_runs = n
        objs = self._run_calls([self._build] * n, [(int(x),) for x in seeds], 0)
        self._objs = objs
        s = self._shape
        self._sel = [getattr(o, s.select if s.kind == "select" else s.feedback) for o in objs]  # step: the step
        self._upd = [getattr(o, s.feedback) for o in objs] if s.kind == "select" else []
        self._last_arms: list[Any] = [None] * n
        self._last_rewards: list[Any] = [None] * n
        self._t = 0
        self._acted = False

    def _batch(self, arms: list[Any], rewards: list[Any], tt: int) -> tuple[list[tuple], list[dict] | None]:
        """Each copy's feedback (or step) arguments, positional and keyword, from the mapping."""
        n = self.n_runs
        cols = {"arm": arms, "reward": rewards, "t": [tt] * n}
        args = self._shape.args
        pos = [cols[tok] for k, tok in args if k is None]
        argss = list(zip(*pos)) if pos else [()] * n
        kws = [(k, cols[tok]) for k, tok in args if k is not None]
        kwss = [dict(zip([k for k, _ in kws], vals)) for vals in zip(*[c for _, c in kws])] if kws else None
        return argss, kwss

    def _run_calls(self, fns: list[Any], argss: Any, t: int, kwss: list[dict] | None = None) -> list[Any]:
        """``[fn(*args) for fn, args]``, copy i's call with copy i's generators (see :class:`_Globals`)."""
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
                        out[i] = fn(*args) if kwss is None else fn(*args, **kwss[i])
                        save(i)
                elif g.binds:  # redirection, and module-level names bound to the copy's own generators
                    target, binds, seeds = g.target, g.binds, g.target.seeds
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        target.i = i
                        for places, copies, fresh in binds:
                            c = copies[i]
                            if c is None:
                                c = copies[i] = fresh(seeds[i])
                            for ns, attr in places:
                                ns[attr] = c
                        out[i] = fn(*args) if kwss is None else fn(*args, **kwss[i])
                elif g.active:  # redirection only: switching copies is one attribute store
                    target = g.target
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        target.i = i
                        out[i] = fn(*args) if kwss is None else fn(*args, **kwss[i])
                else:
                    for i, (fn, args) in enumerate(zip(fns, argss)):
                        out[i] = fn(*args) if kwss is None else fn(*args, **kwss[i])
            except DPAuditError:
                raise
            except Exception as exc:
                raise self._failure(getattr(fns[i], "__name__", "call"), exc, f"at round {t} (copy {i})") from exc
            finally:
                moved = g.leave()
        if moved:
            raise DPAuditError(self._moved_message(moved, f"at round {t}"))
        return out

    def _moved_message(self, moved: list[str], when: str) -> str:
        """One sentence for a draw that was not kept apart per copy, naming the option that fixes it."""
        g, who, what = self._globals, self._who, moved[0]
        if what in ("np.random", "random"):
            mode = g.np_mode if what == "np.random" else g.py_mode
            if mode == "off":
                return (f"{who} drew from the global {what} generator {when}, which the adapter was told to leave alone "
                        f"(globals=off), so its copies would share one stream; rerun without globals=off or with "
                        f"--adapter per-run:globals=redirect (PerRun(..., globals_mode='redirect')), which gives each "
                        f"copy its own generator behind {what}'s functions.")
            return (f"{who} drew from the global {what} generator {when} without going through {what}'s functions, "
                    f"which the adapter redirects per copy (e.g. through a method of the hidden instance kept "
                    "elsewhere), so its copies would share one stream; rerun with --adapter per-run:globals=swap "
                    "(PerRun(..., globals_mode='swap')), which swaps each copy's state in around its calls (slower).")
        return (f"{who} drew from the module-level generator {what} {when} through a reference the adapter does not "
                "replace per copy, so its copies would share one stream; rerun with --adapter per-run:globals=swap "
                "(PerRun(..., globals_mode='swap')), which swaps each copy's state into that object around its calls.")

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        """Each copy's next arm, validated: (n_runs,) ints in [0, n_arms)."""
        if arms is not None:
            raise DPAuditError(f"the per-run adapter drives context-free bandits; {self._who} was given features.")
        if t != self._t or self._acted:
            raise DPAuditError(f"{self.name} expects act and observe at rounds 0, 1, 2, ... in turn; got act at round "
                               f"{t}.")
        from itertools import repeat

        s = self._shape
        tt = t + self.first_round
        if s.kind == "step":
            argss, kwss = self._batch(self._last_arms, self._last_rewards, tt)
            raw = self._run_calls(self._sel, argss, t, kwss)
        else:
            raw = self._run_calls(self._sel, repeat((tt,) if s.select_t else ()), t)
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
        if self._shape.kind == "step":
            self._last_arms, self._last_rewards = a, r
        else:
            argss, kwss = self._batch(a, r, t + self.first_round)
            self._run_calls(self._upd, argss, t, kwss)
        self._t = t + 1
        self._acted = False

    def params(self) -> dict[str, Any]:
        """The constructor parameters the copies were built with (for reports)."""
        return dict(self.kwargs)

    def describe(self) -> str:
        """One line for reports: the class, how it is driven and how its generators are kept apart."""
        g = self._globals

        def mode(which: str, m: str) -> str:
            return m if m == "off" or self._used.get(which) else f"{m} (no draw in the probe)"

        mods = "".join(f"; module-level {m.label()}: {m.mode}" for m in g.modgens)
        maker = f" (built by {self._maker})" if self.factory else ""
        return (f"{self._who}{maker} run per copy through {self._shape.render()}; per-copy global generators: "
                f"np.random {mode('np.random', g.np_mode)}, random {mode('random', g.py_mode)}{mods}")

    def __getstate__(self) -> dict[str, Any]:
        # a policy is pickled to the engine's workers before reset(): drop the copies (and bound methods)
        state = dict(self.__dict__)
        for k in ("_objs", "_sel", "_upd", "_last_arms", "_last_rewards"):
            state.pop(k, None)
        state["_globals"] = _Globals(*self._globals.spec())  # no generators
        state["n_runs"] = 0
        return state

    # ---- local DP: the randomizer as the channel -------------------------------------------------
    def _local(self, probe: Any, randomizer: str, domain: Any) -> None:
        raise DPAuditError("a randomizer makes a LocalPerRun; build it with PerRun(..., randomizer=NAME).")


def _permutations(toks: list[str]) -> list[tuple[str, ...]]:
    from itertools import permutations

    return list(permutations(toks))


def _params_text(fn: Any) -> str:
    try:
        return "(" + ", ".join(str(p) for p in inspect.signature(fn).parameters.values()) + ")"
    except (TypeError, ValueError):
        return "(...)"


def _gen_state(obj: Any, kind: str) -> Any:
    if kind == "generator":
        return obj.bit_generator.state
    if kind == "randomstate":
        return obj.get_state(legacy=False)
    return obj.getstate()


def _factories_of(cls: Any) -> list[str]:
    """Functions of ``cls``'s module that build it (they name the class in their code, or return it)."""
    mod = sys.modules.get(getattr(cls, "__module__", ""), None)
    name = getattr(cls, "__name__", None)
    if mod is None or name is None:
        return []
    out = []
    for attr, val in vars(mod).items():
        if inspect.isfunction(val) and val.__module__ == mod.__name__ and not attr.startswith("_"):
            ret = getattr(val, "__annotations__", {}).get("return")
            if name in val.__code__.co_names or ret is cls or ret == name:
                out.append(attr)
    return out


class LocalPerRun(PerRun):
    """A one-run local-DP class as a local-DP plug-in (docs/local-dp.md): ``PerRun(cls, kwargs,
    claim, randomizer="privatize", domain=(0, 1))``.

    ``randomizer`` names the class's method that takes one user's datum and returns the message she
    sends (what the server may see). ``channel(z_batch, rng)`` builds one copy (seeded from ``rng``,
    its generators kept apart as the audit's copies are) and returns its randomizer's message for each
    user of the batch, one call per user; ``domain`` is the data domain (``domain``, else the
    instance's ``domain`` attribute, else the reward range). The messages a copy sends from inside its
    own feedback call are not recorded, so the audit has no transcript part for it; the channel part
    tests the randomizer and the central part the actions.
    """

    def _local(self, probe: Any, randomizer: str, domain: Any) -> None:
        who = self._who
        fn = getattr(probe, randomizer, None)
        if not callable(fn):
            raise DPAuditError(f"{who} has no method {randomizer!r} to serve as its randomizer (the method taking one "
                               "user's datum and returning the message she sends).")
        arity = _positional(fn)
        if not arity or not arity[0] <= 1 <= arity[1]:
            raise DPAuditError(f"{who}.{randomizer}{_params_text(fn)} must take one argument, a user's datum, to serve "
                               "as the randomizer.")
        raw = domain if domain is not None else getattr(probe, "domain", None)
        if raw is None:
            raw = self.reward_range
        try:
            lo, hi = (float(x) for x in raw)
        except (TypeError, ValueError):
            raise DPAuditError(f"the domain of {who}'s data must be two numbers LOW,HIGH (e.g. domain=0,1), got "
                               f"{raw!r}.") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DPAuditError(f"the domain of {who}'s data must be finite with LOW < HIGH, got {raw!r}.")
        self.domain = (lo, hi)
        self._randomizer = randomizer
        self.audit_notes.append(
            f"the channel is {who}.{randomizer}(z), called once per user on a copy built for each batch of users (its "
            "randomness seeded from the audit's generator); the messages a copy sends inside its own feedback call "
            "are not recorded, so there is no transcript part.")

    def channel(self, z_batch: Any, rng: np.random.Generator) -> np.ndarray:
        """The randomizer's message for each user of ``z_batch`` (one number per user): (n,) or (n, m)."""
        z = np.asarray(z_batch, dtype=float)
        if z.ndim != 1:
            raise DPAuditError(f"{self._who}'s randomizer takes one number per user; the channel was given data of "
                               f"shape {z.shape}.")
        seed, gseed = (int(x) for x in rng.integers(0, 1 << 32, size=2))
        g = _Globals(*self._globals.spec())
        g.seed_copies(np.array([gseed]))
        out: list[Any] = []
        v = None
        with _GLOBAL_LOCK:
            g.enter()
            try:
                g.select(0)
                obj = self._build(seed)
                fn = getattr(obj, self._randomizer)
                for v in z.tolist():
                    out.append(fn(v))
            except DPAuditError:
                raise
            except Exception as exc:
                raise self._failure(self._randomizer, exc, f"on the datum {v!r}") from exc
            finally:
                moved = g.leave()
        if moved:
            raise DPAuditError(self._moved_message(moved, "in its randomizer"))
        try:
            m = np.asarray(out, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"{self._who}.{self._randomizer} returned {out[0]!r}, not a number or a list of "
                               "numbers, as a user's message.") from None
        return m

    def _local_unused(self) -> None:  # pragma: no cover - keeps the name for the docs
        pass


#: options of ``--adapter per-run:KEY=VALUE,...`` and the PerRun argument each sets
ADAPTER_OPTIONS = {"select": "select", "update": "update", "step": "step", "update_args": "update_args",
                   "step_args": "step_args", "first_round": "first_round", "globals": "globals_mode",
                   "n_arms": "n_arms", "horizon": "horizon_name", "randomizer": "randomizer", "domain": "domain"}
#: options whose value is a comma-separated list (the items after ``KEY=`` without an ``=`` continue it)
LIST_OPTIONS = ("update_args", "step_args", "domain")
ADAPTER_SYNTAX = ("per-run:select=NAME,update=NAME,update_args=t,arm,reward,step=NAME,step_args=reward,arm,"
                  "first_round=1,n_arms=K,horizon=NAME,globals=off|redirect|swap,randomizer=NAME,domain=LOW,HIGH")


def parse_adapter(text: str) -> tuple[str, dict[str, Any]]:
    """``"per-run"`` or ``"per-run:KEY=VALUE,..."`` -> (adapter name, PerRun options).

    Keys (:data:`ADAPTER_OPTIONS`): ``select``, ``update``, ``step`` (method names); ``update_args``,
    ``step_args`` (the feedback or step call's arguments: the tokens arm, reward and t in the
    method's order, ``NAME:TOKEN`` for a keyword; ``update_args=t,arm,reward``); ``first_round``
    (1: the class counts rounds from 1); ``n_arms``; ``horizon`` (the constructor or factory
    parameter that receives the horizon); ``globals`` (off, redirect or swap); ``randomizer`` (the
    method that turns a user's datum into her message: a local-DP class) and ``domain`` (LOW,HIGH of
    a user's datum). A list value goes on over the commas that follow it up to the next ``KEY=``:
    ``per-run:update_args=t,arm,reward,first_round=1``."""
    name, _, rest = str(text).partition(":")
    if name.strip() != "per-run":
        raise DPAuditError(f"unknown adapter {text!r}; the one adapter is 'per-run' (a one-run class run as N copies), "
                           f"optionally with options as in {ADAPTER_SYNTAX}.")
    options: dict[str, Any] = {}
    last = None
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep and last in LIST_OPTIONS:
            options[ADAPTER_OPTIONS[last]].append(item)
            continue
        if not sep or key not in ADAPTER_OPTIONS or not value:
            raise DPAuditError(f"adapter option {item!r} must be KEY=VALUE with KEY one of "
                               f"{', '.join(ADAPTER_OPTIONS)} (a list value such as update_args=t,arm,reward goes on "
                               "over the commas up to the next KEY=).")
        if ADAPTER_OPTIONS[key] in options:
            raise DPAuditError(f"adapter option {key} is given twice.")
        if key in ("first_round", "n_arms"):
            try:
                value = int(value)
            except ValueError:
                raise DPAuditError(f"adapter option {key} must be an integer, got {value!r}.") from None
        options[ADAPTER_OPTIONS[key]] = [value] if key in LIST_OPTIONS else value
        last = key
    for key in LIST_OPTIONS:
        opt = ADAPTER_OPTIONS[key]
        if opt in options:
            if key == "domain":
                try:
                    options[opt] = tuple(float(v) for v in options[opt])
                except ValueError:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(options[opt])!r}.") from None
                if len(options[opt]) != 2:
                    raise DPAuditError(f"adapter option domain must be two numbers LOW,HIGH, got "
                                       f"{','.join(str(v) for v in options[opt])!r}.")
            else:
                options[opt] = ",".join(options[opt])
                parse_arg_map(options[opt], key)  # refused here, in one sentence, before anything is built
    return "per-run", options


def make_per_run(spec: str, params: Mapping[str, Any] | None = None, claim: Guarantee | str | None = None,
                 horizon: int | None = None, **options: Any) -> PerRun:
    """The CLI's ``--adapter per-run``: load ``spec`` (``file.py:Class`` or ``module:Class``, or a
    factory ``file.py:function`` / ``module:function`` returning an instance), type the ``--param``
    strings by its signature (a number that is not an integer, for a parameter whose default is an
    int and which no annotation calls int, is passed as a float, with a note), give the horizon to the
    parameter :func:`horizon_parameter` finds (unless set; ``horizon_name`` names it), and wrap it in
    :class:`PerRun` with ``claim`` (text as in :func:`parse_claim`, or a Guarantee). ``options`` go
    to :class:`PerRun`."""
    from dpaudit.policies.registry import coerce_params, load_policy_class

    target = load_policy_class(spec, contract=False)
    if not callable(target):
        raise DPAuditError(f"plug-in {spec!r} is {target!r}, neither a class nor a function that returns an instance.")
    notes: list[str] = []
    kwargs = coerce_params(target, dict(params or {}), notes)
    hp = horizon_parameter(target, options.pop("horizon_name", None))
    if horizon is not None and hp is not None and hp not in kwargs:
        kwargs[hp] = check_int("horizon", horizon, minimum=1)
    policy = PerRun(target, kwargs, claim, spec=spec, **options)
    if policy.factory:
        call = f"{policy._maker}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
        notes.append(f"{policy._maker} is a factory: each copy is {call}, an instance of {policy._who}"
                     + (f", the horizon going to its parameter {hp}." if hp is not None and horizon is not None
                        else "."))
    policy.audit_notes[:0] = notes
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
