"""The per-run adapter: N copies of a one-run bandit class (or of what a factory function returns) run as
one batched dpaudit policy (:class:`PerRun`), a local-DP class's randomizer as the channel
(:class:`LocalPerRun`), and the CLI's ``--adapter per-run`` (:func:`make_per_run`).

The adapter's pieces live beside it: which methods drive a copy (:mod:`.shape`), their arguments
(:mod:`.arguments`), the probe before an audit (:mod:`.probe`), each copy's generators kept apart
(:mod:`.seeding`).
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dpaudit.accountants import Guarantee
from dpaudit.adapters.arguments import ArgMapText, batch_call_values, params_text, positional_arity
from dpaudit.adapters.claims import CLAIM_FORMS, parse_claim
from dpaudit.adapters.horizon import Maker, horizon_parameter, horizon_value, init_parameters
from dpaudit.adapters.probe import Probe, probe_notes
from dpaudit.adapters.rewards import reward_alphabet
from dpaudit.adapters.seeding import (GLOBAL_LOCK, SEED_NAMES, Globals, find_module_generators, generators_kept,
                                      moved_message)
from dpaudit.adapters.shape import Shape, checked_arm, detect_arms, detect_shape
from dpaudit.errors import DPAuditError, InternalError, check_int
from dpaudit.policies.base import arm_ranges
from dpaudit.sandbox import guard, in_plugin_code

__all__ = ["PerRun", "LocalPerRun", "make_per_run"]


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
    :class:`Globals`). So runs are independent and reproducible from the audit's seed whatever
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
    get_state/set_state); measured in benchmarks/results/adapter.md. The audit's up-front estimate
    (:mod:`dpaudit.runner.cost`) calibrates on the adapted class itself, so it reflects that cost.
    The adapter has no ``ledger`` attribute (the audit tests ``hasattr(policy, "ledger")``): only the
    black-box attacks apply.
    """

    accepts_queries = True

    def __new__(cls, *args: object, **kwargs: object) -> "PerRun":
        if cls is PerRun and kwargs.get("randomizer") is not None:
            cls = LocalPerRun
        return super().__new__(cls)

    def __init__(self, cls: Maker, kwargs: Mapping[str, object] | None = None, claim: Guarantee | str | None = None,
                 *, select: str | None = None, update: str | None = None, step: str | None = None,
                 update_args: ArgMapText | None = None, step_args: ArgMapText | None = None,
                 n_arms: int | None = None, first_round: int = 0, reward_range: npt.ArrayLike | None = None,
                 alphabet: Sequence[float] | None = None, globals_mode: str | None = None,
                 probe_steps: int | None = None, randomizer: str | None = None, domain: Sequence[float] | None = None,
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
        #: how errors name the plug-in: its spec (as the sandbox's wrapper names it), else the class
        self._plugin = spec or maker
        self.audit_notes: list[str] = []
        self.first_round = check_int("first_round", first_round, minimum=0)
        if globals_mode not in (None, "off", "redirect", "swap"):
            raise DPAuditError(f"globals_mode must be None (detect), 'off', 'redirect' or 'swap', got {globals_mode!r}.")
        self._seed_param = self._seed_parameter(spec)
        probe = self._first_copy()
        # every read of the instance is plug-in code (a property may raise, exit or hang): behind the sandbox
        with guard(self._plugin, "its methods"):
            self._shape = detect_shape(probe, self._who, select, update, step, update_args, step_args)
        with guard(self._plugin, "n_arms"):
            self.n_arms = detect_arms(probe, self._who, cls, self.kwargs, n_arms)
        self.claim = self._claim_of(probe, claim)
        self.reward_range = self._range_of(probe, reward_range)
        if alphabet is None:
            with guard(self._plugin, "reward_alphabet"):
                alphabet = getattr(probe, "reward_alphabet", None)
        self.reward_alphabet: tuple[float, ...] | None
        self.reward_alphabet = alphabet  # type: ignore[assignment]  # as given: read back and checked on the next line
        self.reward_alphabet = reward_alphabet(self)  # sorted, checked inside the range (None stays None)
        self._probe(probe_steps, globals_mode)
        #: a LocalPerRun's randomizer: the name of the method that turns a user's datum into her message
        self._randomizer: str | None = None
        if randomizer is not None:
            self._local(probe, randomizer, domain)
        elif domain is not None:
            raise DPAuditError("domain applies with a randomizer (a local-DP class: --adapter "
                               "per-run:randomizer=NAME,domain=LOW,HIGH); drop it.")
        self.n_runs = 0
        self._objs: list[object] = []

    # ---- reading the class and a first copy ------------------------------------------------------
    def _seed_parameter(self, spec: str | None) -> str | None:
        """The constructor's seed parameter (:data:`SEED_NAMES`), which the adapter sets, one seed per copy: refused
        when the parameters set it; so is a constructor whose required parameters were not given."""
        params = init_parameters(self.cls)
        seed_param = next((s for s in SEED_NAMES if s in params), None)
        if seed_param is not None and seed_param in self.kwargs:
            raise DPAuditError(f"{self._maker}'s {seed_param!r} is set by the adapter, one per copy, so that runs are "
                               f"independent; drop {seed_param}={self.kwargs[seed_param]!r} from the "
                               "parameters (the audit's --seed decides).")
        _check_required(self.cls, self._maker, self.kwargs, seed_param, params, spec)
        return seed_param

    def _first_copy(self) -> object:
        """A first copy (seed 0), built with the caller's generators kept, and the modules whose generators are kept
        apart per copy: the class's and its bases', or a factory's and those of the class it builds (which then
        names the copies in errors)."""
        cls = self.cls
        modules = [c.__module__ for c in cls.__mro__] if inspect.isclass(cls) else [getattr(cls, "__module__", None)]
        early = find_module_generators([m for m in modules if m and m != "builtins"])
        with generators_kept(early):  # building may seed or draw from the global generators: the caller's survive
            probe = self._build(0)
        if self.factory:
            self._who = type(probe).__name__
            modules += [c.__module__ for c in type(probe).__mro__]
        self._modules = tuple(dict.fromkeys(m for m in modules if m and m != "builtins"))
        return probe

    def _claim_of(self, probe: object, claim: Guarantee | str | None) -> Guarantee | None:
        """The claim: ``claim`` (text as in :func:`parse_claim`, or a Guarantee), else the copy's ``claim``."""
        if isinstance(claim, str):
            claim = parse_claim(claim)
        if claim is None:
            with guard(self._plugin, "claim"):
                claim = getattr(probe, "claim", None)
        if claim is not None and not isinstance(claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
        return claim

    def _range_of(self, probe: object, reward_range: npt.ArrayLike | None) -> tuple[float, float]:
        """The rewards' range: ``reward_range``, else the copy's, else [0, 1]; one range for every arm."""
        if reward_range is None:
            with guard(self._plugin, "reward_range"):
                reward_range = getattr(probe, "reward_range", (0.0, 1.0))
        rr = reward_range
        rr_arr = arm_ranges(rr, self.n_arms)
        if not np.all(rr_arr == rr_arr[0]):
            raise DPAuditError(f"the per-run adapter needs one reward range for all arms, got {rr!r}.")
        return (float(rr_arr[0, 0]), float(rr_arr[0, 1]))

    def _probe(self, probe_steps: int | None, globals_mode: str | None) -> None:
        """Run the probe (:class:`~dpaudit.adapters.probe.Probe`) for ``probe_steps`` rounds (default max(32, 4 K),
        at most the horizon), and keep each copy's generators apart in the modes it found (``globals_mode``, if
        given, forces one); what it found goes to ``audit_notes``."""
        T = horizon_value(self.cls, self.kwargs)
        steps = max(32, 4 * self.n_arms) if probe_steps is None else check_int("probe_steps", probe_steps, minimum=1)
        self.probe_steps = min(steps, T) if T is not None else steps
        modgens = find_module_generators(self._modules)
        found = Probe(self.cls, self.kwargs, self._shape, self.first_round, self.probe_steps, self.reward_range,
                      self.reward_alphabet, self._modules, self._who, self._build, self._call,
                      self._one_arm).find(modgens)
        if globals_mode is None:
            np_mode, py_mode = found.np_mode, found.py_mode
            mg_modes = found.mg_modes
        else:
            np_mode = py_mode = globals_mode
            mg_modes = [{"redirect": "replace"}.get(globals_mode, globals_mode)] * len(modgens)
        self._globals = Globals(np_mode, py_mode, self._modules,
                                [m.spec()[:2] + (mode, m.index) for m, mode in zip(modgens, mg_modes)])
        #: seconds one copy took per round (its selection and feedback calls) in the probe
        self.probe_seconds_per_step = found.seconds_per_step
        self._used = found.used
        self.audit_notes.extend(probe_notes(self._who, self._shape, self.first_round, self._globals, found, modgens,
                                            mg_modes, globals_mode))

    # ---- construction ------------------------------------------------------------------------
    def _build(self, seed: int | None) -> object:
        """A copy built with ``seed``: plug-in code, behind the sandbox (an exit, a hang, a print), its
        exceptions worded here. Inside a guard already (``reset`` builds a copy per run behind the sandbox's
        wrapper) no second one is opened: that one covers it, at no cost per copy."""
        kw = dict(self.kwargs)
        if self._seed_param is not None and seed is not None:
            kw[self._seed_param] = np.random.default_rng(seed) if self._seed_param == "rng" else int(seed)
        try:
            with nullcontext() if in_plugin_code() else guard(self._plugin, "__init__", passthrough=True):
                return self.cls(**kw)
        except (DPAuditError, InternalError):
            raise
        except Exception as exc:
            raise DPAuditError(f"{self._maker}({', '.join(f'{k}={v!r}' for k, v in kw.items())}) raised "
                               f"{type(exc).__name__}: {exc}.") from exc

    def _call(self, fn: Callable[..., object], args: tuple[object, ...], kw: dict[str, object], t: int,
              copy: int = 0) -> object:
        """A copy's method called at round ``t`` (the probe's calls): behind the sandbox, its exceptions
        worded here (with the argument order that would run)."""
        try:
            with guard(self._plugin, getattr(fn, "__name__", "a method"), t, passthrough=True):
                return fn(*args, **kw)
        except (DPAuditError, InternalError):
            raise
        except Exception as exc:
            raise self._failure(getattr(fn, "__name__", "call"), exc, f"at round {t} (copy {copy})") from exc

    def _failure(self, method: str, exc: BaseException, where: str) -> DPAuditError:
        """One sentence for an exception from the class's own code; for a TypeError, IndexError,
        ValueError or KeyError from a call whose arguments the adapter chose, how to map them."""
        text = str(exc).rstrip(".") or "(no message)"
        base = f"{self._who}.{method} raised {type(exc).__name__} {where}: {text}"
        s = getattr(self, "_shape", None)
        hint = "" if s is None else s.hint(method, exc, self.first_round)
        err = DPAuditError(base + hint + ".")
        err.base = base  # type: ignore[attr-defined]
        return err

    def _one_arm(self, value: object, t: int, copy: int) -> int:
        """The arm a copy's call returned, checked (:func:`~dpaudit.adapters.shape.checked_arm`)."""
        return checked_arm(value, t, copy, self._who, self.n_arms)

    # ---- the batched contract ----------------------------------------------------------------
    def reset(self, n_runs: int, rng: np.random.Generator, *, record: bool = True,
              copies: tuple[int, int] | None = None) -> None:
        """Fresh copies for ``n_runs`` independent runs, each seeded from ``rng`` (see the class doc).

        ``copies=(lo, hi)``: only runs lo..hi-1 of those ``n_runs``, seeded as they are in the whole batch, so
        that slices of one batch run in different processes give the rows of the whole batch's views
        (:meth:`dpaudit.protocols.base.Protocol.run_batch`)."""
        n = check_int("n_runs", n_runs, minimum=1)
        if not isinstance(rng, np.random.Generator):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        seeds = rng.choice(1 << 32, size=n, replace=False)  # distinct: no two runs share a seed
        gseeds = rng.choice(1 << 32, size=n, replace=False)
        if copies is not None:
            lo, hi = (int(x) for x in copies)
            if not 0 <= lo < hi <= n:
                raise DPAuditError(f"copies must be a range (lo, hi) with 0 <= lo < hi <= {n}, got {copies!r}.")
            seeds, gseeds, n = seeds[lo:hi], gseeds[lo:hi], hi - lo
        self._globals.seed_copies(gseeds)
        self.n_runs = n
        objs = self._run_calls([self._build] * n, [(int(x),) for x in seeds], 0)
        self._objs = objs
        s = self._shape
        #: each copy's selection method (for the step shape: its step method), and its feedback method
        self._sel: list[Callable[..., object]] = [getattr(o, s.select if s.kind == "select" else s.feedback)
                                                  for o in objs]
        self._upd: list[Callable[..., object]] = [getattr(o, s.feedback) for o in objs] if s.kind == "select" else []
        self._last_arms: list[int | None] = [None] * n
        self._last_rewards: list[float | None] = [None] * n
        self._t = 0
        self._acted = False

    def _run_calls(self, fns: Sequence[Callable[..., object]], argss: Iterable[tuple[object, ...]], t: int,
                   kwss: list[dict[str, object]] | None = None) -> list[object]:
        """``[fn(*args) for fn, args]``, copy i's call with copy i's generators (see :class:`Globals`)."""
        g = self._globals
        out: list[object] = [None] * len(fns)
        i = 0
        with GLOBAL_LOCK:
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
            except (DPAuditError, InternalError):
                raise
            except Exception as exc:
                raise self._failure(getattr(fns[i], "__name__", "call"), exc, f"at round {t} (copy {i})") from exc
            finally:
                moved = g.leave()
        if moved:
            raise DPAuditError(moved_message(self._who, g, moved, f"at round {t}"))
        return out

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
            argss, kwss = batch_call_values(s.args, self._last_arms, self._last_rewards, tt, self.n_runs)
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
            argss, kwss = batch_call_values(self._shape.args, a, r, t + self.first_round, self.n_runs)
            self._run_calls(self._upd, argss, t, kwss)
        self._t = t + 1
        self._acted = False

    def run_copies(self, tables: npt.ArrayLike, which: npt.ArrayLike | None = None) -> np.ndarray:
        """Whole runs, copy by copy: after :meth:`reset`, copy i plays every round of the reward table
        ``tables[which[i]]`` (T rows of K rewards; the reward of arm a at round t is its row t's entry a;
        ``which`` None: ``tables`` is one table for every copy). Returns the views, (n_runs, T) arms.

        Each copy receives the same calls with the same arguments in the same order as :meth:`act` and
        :meth:`observe` round by round would give it, and its randomness is its own (its seed, its
        generators: see the class doc), so the views are the same for the same seeds; only the batching
        differs. What it saves is the per-round batching, which costs as much as the copies' own calls: no
        lists and arrays of the N arms and rewards each round, and each copy's generators switched in once
        per run, not once per call (in "swap" mode, numpy's get_state/set_state once per run instead of
        twice per round). The protocol calls it only without an adversary and with every reward inside
        ``reward_range`` (else it steps, and ``observe`` refuses the first reward outside it by name).
        Arms are checked as :meth:`act` checks them."""
        if self._t != 0 or self._acted or not self._objs:
            raise DPAuditError(f"{self.name} plays whole runs right after reset(); it was at round {self._t}.")
        tabs = np.asarray(tables, dtype=float)
        if tabs.ndim == 2:
            tabs = tabs[None]
        n, K, s = self.n_runs, self.n_arms, self._shape
        if tabs.ndim != 3 or tabs.shape[2] != K:
            raise DPAuditError(f"{self.name} plays tables of T x {K} rewards, got shape {np.shape(tables)}.")
        idx = np.zeros(n, dtype=np.int64) if which is None else np.asarray(which, dtype=np.int64)
        lo, hi = self.reward_range
        if tabs.size and (tabs.min() < lo or tabs.max() > hi):
            raise DPAuditError(f"{self.name} plays whole runs only on rewards inside {self.reward_range}; step them "
                               "with act and observe, which refuse the first reward outside it.")
        T = tabs.shape[1]
        rows = [t.tolist() for t in tabs]  # Python floats, as observe passes them
        pos = [("arm", "reward", "t").index(tok) for k, tok in s.args if k is None]
        kws = [(k, ("arm", "reward", "t").index(tok)) for k, tok in s.args if k is not None]
        views = np.empty((n, T), dtype=np.int64)
        g = self._globals
        i = 0
        with GLOBAL_LOCK:
            g.enter()
            try:
                for i in range(n):
                    g.pin(i)
                    views[i] = self._play_copy(i, rows[int(idx[i])], pos, kws)
                    g.save(i)
            except (DPAuditError, InternalError):
                raise
            except Exception as exc:  # outside the copy's calls (its generators switched in or saved)
                raise self._failure(_called(exc, s), exc, f"(copy {i})") from exc
            finally:
                moved = g.leave()
        if moved:
            t_moved = self._round_moved(rows[int(idx[0])], T)
            raise DPAuditError(moved_message(self._who, g, moved, f"in the {T} rounds of its copies" if t_moved is None
                                             else f"at round {t_moved}"))
        self._t = T
        return views

    def _play_copy(self, i: int, table: list[list[float]], pos: list[int], kws: list[tuple[str, int]]) -> list[int]:
        """Copy ``i``'s whole run on ``table`` (:meth:`run_copies`, its generators pinned): the arms it played. The
        feedback (or step) call's arguments are ``pos`` and ``kws``, indices into (arm, reward, t); the common
        shapes are called directly. An exception from the copy's code is one sentence naming the round."""
        s, fr, K, one_arm = self._shape, self.first_round, self.n_arms, self._one_arm
        plain = not kws and pos == [0, 1]  # feedback(arm, reward) or step(last_arm, last_reward): called directly
        arms: list[int] = []
        keep = arms.append
        t = 0
        try:
            if s.kind == "step":
                fn = self._sel[i]
                a = r = None
                if plain:  # step(last_arm, last_reward): the common shape, called directly
                    for t, row in enumerate(table):
                        a = fn(a, r)
                        if a.__class__ is not int or not 0 <= a < K:  # a numpy int, a whole float; else refused
                            a = one_arm(a, t, i)
                        keep(a)
                        r = row[a]
                else:
                    for t, row in enumerate(table):
                        vals = (a, r, t + fr)
                        a = fn(*[vals[j] for j in pos], **{k: vals[j] for k, j in kws})
                        if a.__class__ is not int or not 0 <= a < K:
                            a = one_arm(a, t, i)
                        keep(a)
                        r = row[a]
            else:
                sel, upd = self._sel[i], self._upd[i]
                if plain and not s.select_t:  # select() + feedback(arm, reward): the common shape
                    for t, row in enumerate(table):
                        a = sel()
                        if a.__class__ is not int or not 0 <= a < K:
                            a = one_arm(a, t, i)
                        keep(a)
                        upd(a, row[a])
                else:
                    st = s.select_t
                    for t, row in enumerate(table):
                        a = sel(t + fr) if st else sel()
                        if a.__class__ is not int or not 0 <= a < K:
                            a = one_arm(a, t, i)
                        keep(a)
                        vals = (a, row[a], t + fr)
                        upd(*[vals[j] for j in pos], **{k: vals[j] for k, j in kws})
        except (DPAuditError, InternalError):
            raise
        except Exception as exc:
            raise self._failure(_called(exc, s), exc, f"at round {t} (copy {i})") from exc
        return arms

    def _round_moved(self, table: list, T: int) -> int | None:
        """The first round at which one fresh copy, stepped round by round on ``table``, draws from a generator
        the adapter does not keep apart (what :meth:`run_copies` only sees at the end of its runs), or None
        (not seen again). The caller's generators end as they began."""
        g = Globals(*self._globals.spec())
        g.seed_copies(np.array([1]))
        s, fr, K = self._shape, self.first_round, self.n_arms
        with GLOBAL_LOCK:
            try:
                g.enter()
                try:
                    g.select(0)
                    obj = self._build(0)
                finally:
                    moved = g.leave()
                if moved:
                    return None
                a = r = None
                for t in range(T):
                    g.enter()
                    try:
                        g.select(0)
                        vals = {"arm": a, "reward": r, "t": t + fr}
                        call = {k: vals[tok] for k, tok in s.args if k is not None}
                        pos = [vals[tok] for k, tok in s.args if k is None]
                        if s.kind == "step":
                            a = int(getattr(obj, s.feedback)(*pos, **call))
                        else:
                            sel = getattr(obj, s.select)
                            a = int(sel(t + fr) if s.select_t else sel())
                        if not 0 <= a < K:
                            return None
                        r = table[t][a]
                        if s.kind != "step":
                            vals.update(arm=a, reward=r)
                            getattr(obj, s.feedback)(*[vals[tok] for k, tok in s.args if k is None],
                                                     **{k: vals[tok] for k, tok in s.args if k is not None})
                        g.save(0)
                    finally:
                        moved = g.leave()
                    if moved:
                        return t
            except Exception:  # the replay only names the round; the error raised is run_copies' own
                return None
        return None

    def params(self) -> dict[str, object]:
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

    def __getstate__(self) -> dict[str, object]:
        # a policy is pickled to the engine's workers before reset(): drop the copies (and bound methods)
        state = dict(self.__dict__)
        for k in ("_objs", "_sel", "_upd", "_last_arms", "_last_rewards"):
            state.pop(k, None)
        state["_globals"] = Globals(*self._globals.spec())  # no generators
        state["n_runs"] = 0
        return state

    # ---- local DP: the randomizer as the channel -------------------------------------------------
    def _local(self, probe: object, randomizer: str, domain: Sequence[float] | None) -> None:
        raise DPAuditError("a randomizer makes a LocalPerRun; build it with PerRun(..., randomizer=NAME).")


def _called(exc: BaseException, s: Shape) -> str:
    """The name of the copy's method an exception of :meth:`PerRun.run_copies` came out of: the frame its loop
    called (the feedback method when none shows, a method written in C)."""
    tb = exc.__traceback__
    frame = tb.tb_next if tb is not None else None
    return frame.tb_frame.f_code.co_name if frame is not None else s.feedback


def _check_required(cls: Maker, maker: str, kwargs: Mapping[str, object], seed_param: str | None,
                    params: Mapping[str, inspect.Parameter], spec: str | None) -> None:
    """Refuse, before building, a constructor whose required parameters were not given (objects such
    as an environment cannot come from --param): a factory function is the way, and this says so."""
    missing = [n for n, p in params.items()
               if p.default is inspect.Parameter.empty and n not in kwargs and n != seed_param]
    if not missing:
        return
    try:
        hp = horizon_parameter(cls)
    except DPAuditError:
        hp = None
    given = f" ({hp} receives the horizon)" if hp is not None and hp in kwargs else ""
    names = " and ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1 else missing)
    found = _factories_of(cls)
    where = spec.rpartition(":")[0] if spec and ":" in spec else getattr(cls, "__module__", "module")
    hint = (f" ({', '.join(f'{where}:{f}' for f in found)} in the same module "
            f"build{'s' if len(found) == 1 else ''} one)") if found else ""
    raise DPAuditError(
        f"{maker}({', '.join(params)}) needs {names}, which {'was' if len(missing) == 1 else 'were'} not "
        f"given{given}: numbers or text come with --param NAME=VALUE, but objects (an environment, a dict of "
        f"parameters) need a function that builds the instance and returns it, audited in the class's place as "
        f"FILE.py:FUNCTION or module:FUNCTION with --adapter per-run{hint}.")


def _factories_of(cls: Maker) -> list[str]:
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

    def _local(self, probe: object, randomizer: str, domain: Sequence[float] | None) -> None:
        who = self._who
        with guard(self._plugin, randomizer):
            fn = getattr(probe, randomizer, None)
        if not callable(fn):
            raise DPAuditError(f"{who} has no method {randomizer!r} to serve as its randomizer (the method taking one "
                               "user's datum and returning the message she sends).")
        arity = positional_arity(fn)
        if not arity or not arity[0] <= 1 <= arity[1]:
            raise DPAuditError(f"{who}.{randomizer}{params_text(fn)} must take one argument, a user's datum, to serve "
                               "as the randomizer.")
        raw = domain
        if raw is None:
            with guard(self._plugin, "domain"):
                raw = getattr(probe, "domain", None)
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

    def channel(self, z_batch: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The randomizer's message for each user of ``z_batch`` (one number per user): (n,) or (n, m)."""
        z = np.asarray(z_batch, dtype=float)
        if z.ndim != 1:
            raise DPAuditError(f"{self._who}'s randomizer takes one number per user; the channel was given data of "
                               f"shape {z.shape}.")
        seed, gseed = (int(x) for x in rng.integers(0, 1 << 32, size=2))
        randomizer = cast(str, self._randomizer)  # set by _local: a LocalPerRun has one
        g = Globals(*self._globals.spec())
        g.seed_copies(np.array([gseed]))
        out: list[object] = []
        v = None
        with GLOBAL_LOCK:
            g.enter()
            try:
                g.select(0)
                obj = self._build(seed)
                fn = getattr(obj, randomizer)
                for v in z.tolist():
                    out.append(fn(v))
            except (DPAuditError, InternalError):
                raise
            except Exception as exc:
                raise self._failure(randomizer, exc, f"on the datum {v!r}") from exc
            finally:
                moved = g.leave()
        if moved:
            raise DPAuditError(moved_message(self._who, self._globals, moved, "in its randomizer"))
        odd = next((v for v in out if np.iscomplexobj(cast("npt.ArrayLike", v))), None)
        if odd is not None:  # a float conversion would drop the imaginary part unseen
            raise DPAuditError(f"{self._who}.{self._randomizer} returned {odd!r}, a complex message; a user's message "
                               "must be real numbers (an imaginary part would be dropped unseen).")
        try:
            m = np.asarray(out, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"{self._who}.{self._randomizer} returned {out[0]!r}, not a number or a list of "
                               "numbers, as a user's message.") from None
        return m

    def _local_unused(self) -> None:  # pragma: no cover - keeps the name for the docs
        pass


# Both classes keep dpaudit.adapters as their module, their public home before it became a package: the
# findings name a PerRun instance "dpaudit.adapters:PerRun (instance)", a checkpoint keys a policy by its
# class's module and name, and pickles refer to it there.
PerRun.__module__ = LocalPerRun.__module__ = "dpaudit.adapters"


def make_per_run(spec: str, params: Mapping[str, object] | None = None, claim: Guarantee | str | None = None,
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
