"""Loop-shaped code (``--adapter loop``): a function or class that runs its own bandit loop and calls its own
environment (``for t in range(T): a = choose(); r = env.pull(a); ...``), audited unchanged.

The design (DESIGN.md, "Policy"): each copy runs to completion on a reward table drawn in advance. Under
Table DP the input is a T x K table fixed before the run, and under View DP a list of T rewards; in both
the reward of round t is the table's entry at (t, the arm pulled), whatever was played before, so running
a copy's own loop straight through against its table gives exactly the actions (the view) that driving it
round by round would. No threads or coroutines are needed, and a copy costs its own loop's Python time
and nothing else. The protocols hand the whole table to :meth:`LoopPolicy.play_tables` (see
:func:`dpaudit.protocols.base.plays_tables`); a protocol that must drive rounds one by one (an
Interactive-DP adversary's queries, local, joint and shuffle DP, the regret simulator) is refused in one
sentence. The same seeding rules as the per-run adapter apply (:mod:`.seeding`): each copy has its own
global ``np.random`` / ``random`` generators and module-level generators, redirected around its run, and a
seed parameter (``seed``, ``random_state``, ``rng``) gets a distinct seed per copy.

The environment object a copy is handed answers the usual names (each call is one round: its arm is the
round's action, and the table's entry its reward):

* ``pull(arm)``, ``get_reward(arm)``, ``play(arm)``, ``sample(arm)``, ``draw(arm)`` -> the reward (a float);
* ``reward(t, arm)`` (also ``reward(arm)``) -> the reward; ``t`` must be the round (counted from 0 or 1);
* ``step(action)`` -> ``(observation, reward, terminated, truncated, info)`` as gymnasium's API (the
  observation 0, ``truncated`` true at the last round);
* ``reset()`` (also ``reset(seed=..., options=...)``) -> ``(observation, info)`` as gymnasium's API: ``(0, {})``,
  the observation ``step`` gives; no round is played and nothing is reset (a bandit's rounds go on: the copy's
  table fixes each round's reward), so gymnasium-style code that resets before its first ``step`` runs as is;
* ``n_arms``, ``K``, ``k``, ``num_arms``, ``n_actions``, ``horizon``, ``T``, ``action_space.n``.

Other names are mapped by options (``--adapter loop:pull=draw_arm,step=act``); a name that is mapped
twice, or a call of a name the environment does not have, is refused in one sentence naming the option.
How the environment reaches the code: the parameter named like one (``env``, ``environment``, ``bandit``,
``bandit_env``; ``env=NAME`` names another), or ``factory=NAME``: the code builds its environment by
calling the module-level function NAME, which answers the copy's environment while the copy runs.

Each copy's run is plug-in code behind :func:`dpaudit.sandbox.guard` (the probe's copies too): its prints go to
stderr, its ``sys.exit``, ``os._exit`` and own ``KeyboardInterrupt`` are one sentence naming it, and the call
limit (``--call-timeout``) ends a copy that sleeps or spins forever (one that swallows the adapter's stop at
the horizon, too: its process is killed from outside once past the limit). Each copy has an environment of its
own; a pull from the environment of a copy that has ended, or from a second thread while it runs (a thread the
code started and left running), is answered but never played, and refused in one sentence, since it would play
into other copies' views.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral
from threading import current_thread, get_ident
from typing import Any, Protocol, TypeAlias, Union

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.adapters.claims import CLAIM_FORMS, parse_claim
from dpaudit.adapters.horizon import Maker, horizon_parameter, init_parameters
from dpaudit.adapters.seeding import (GLOBAL_LOCK, SEED_NAMES, Globals, find_module_generators, moved_message)
from dpaudit.adapters.shape import N_ARMS_NAMES
from dpaudit.errors import DPAuditError, InternalError, check_int, shorten
from dpaudit.sandbox import guard

__all__ = ["ENV_NAMES", "RUN_NAMES", "LoopEnvironment", "LoopFunction", "LoopPolicy", "make_loop"]

#: parameter names that receive the environment, in this order
ENV_NAMES = ("env", "environment", "bandit", "bandit_env", "arms_env")
#: method names of a class that run its loop (a class is built with the environment, then this is called)
RUN_NAMES = ("run", "play", "simulate", "train", "learn", "fit", "main")
#: the environment's calls: role -> the names answered without a mapping
ROLES = {"pull": ("pull", "get_reward", "play", "sample", "draw"), "reward": ("reward",), "step": ("step",),
         "reset": ("reset",)}

#: the rewards of one copy's rounds: T rows of K rewards (Table DP), or T rewards (View DP)
Table: TypeAlias = Union[Sequence[Sequence[float]], Sequence[float]]
#: what ``step(action)`` answers, as gymnasium's API: (observation, reward, terminated, truncated, info)
StepResult: TypeAlias = tuple[int, float, bool, bool, dict[str, object]]


class LoopEnvironment(Protocol):
    """The environment loop-shaped code is handed, as the code may type its parameter (:class:`LoopEnv` is
    it): its size (also as ``K``, ``k``, ``num_arms``, ``n_actions``, ``T``), and one round per call of
    ``pull(arm)`` (also ``get_reward``, ``play``, ``sample``, ``draw``: :data:`ROLES`), ``reward(t, arm)`` or
    ``step(action)``; ``reset()`` plays no round."""

    n_arms: int
    horizon: int

    def pull(self, arm: int) -> float: ...

    def reward(self, t: int, arm: int) -> float: ...

    def step(self, action: int) -> StepResult: ...

    def reset(self, *, seed: int | None = None,
              options: dict[str, object] | None = None) -> tuple[int, dict[str, object]]: ...


class LoopFunction(Protocol):
    """Loop-shaped code as a function: handed the environment (a parameter named like one, :data:`ENV_NAMES`,
    or ``env=NAME``), it plays every round by calling it; its other parameters come from ``--param`` (the
    horizon's and a seed's too). A class instead is built with the environment, then its ``run()``
    (:data:`RUN_NAMES`) plays the rounds."""

    def __call__(self, env: LoopEnvironment) -> object: ...


class _Stop(BaseException):
    """Raised in a copy's code at its (T+1)-th pull: its view is complete (a BaseException, so the code's
    own ``except Exception`` does not swallow it)."""


class Unanswered(DPAuditError, AttributeError):
    """A call the loop adapter's environment does not answer: an AttributeError too, so that the code's own
    ``hasattr(env, "render")`` or ``getattr(env, "seed", None)`` reads it as absent, while a call of it ends
    the audit with the sentence that names the option mapping it."""


class _Space:
    def __init__(self, n: int) -> None:
        self.n = n


class LoopEnv:
    """The environment one copy of loop-shaped code is handed: its rounds' rewards come from one row of
    the audit's input (a T x K table, or a list of T rewards under View DP); its pulls are recorded."""

    def __init__(self, policy: "LoopPolicy") -> None:
        self._p = policy
        k, T = policy.n_arms, policy.horizon
        self.n_arms = self.K = self.k = self.num_arms = self.n_actions = k
        self.horizon = self.T = T
        self.action_space = _Space(k)
        calls = {"pull": self._pull, "reward": self._reward, "step": self._step, "reset": self._reset}
        for name, role in policy.names.items():  # bound once: a call is one attribute lookup
            self.__dict__[name] = calls[role]
        self._ended = False
        self._tid: int | None = None  # the thread that pulls this copy's rounds (its first pull's), and its name
        self._tname = ""
        self._load(None, None)

    def _load(self, table: Table | None, copy: int | None) -> None:
        """Copy ``copy``'s rounds are ``table``'s (none yet: None)."""
        self._table, self._copy = table, copy
        self._arms: list[int] = []  # the arms it pulled, in order: its view
        self._origin: int | None = None  # what its reward(t, arm) calls count rounds from (0 or 1), once seen

    def _end(self) -> None:
        """The copy is over: a pull from here on is a stray (a thread the code left running)."""
        self._ended = True

    def _stray(self) -> float | None:
        """A pull after the copy ended, or from a second thread while it runs: recorded (the play refuses the
        audit) and answered with the range's low end, so that the stray code (a thread) neither plays into a
        copy's view nor dies with a traceback; None for the copy's first pull (its thread is the copy's)."""
        if not self._ended and self._tid is None:
            self._tid, self._tname = get_ident(), current_thread().name
            return None
        p = self._p
        if p._stray is None:
            p._stray = (self._copy, current_thread().name, None if self._ended else self._tname)
        return p.lo

    def _pull(self, arm: object) -> float:
        if self._ended or get_ident() != self._tid:
            stray = self._stray()
            if stray is not None:
                return stray
        arms = self._arms
        t = len(arms)
        p = self._p
        if t >= p.horizon:
            raise _Stop()
        if type(arm) is not int or not 0 <= arm < p.n_arms:
            arm = self._checked(arm, t)
        arms.append(arm)
        # the round's reward: a list's entry t (View DP), else the table's (t, arm)
        r: float = self._table[t] if p.list_input else self._table[t][arm]  # type: ignore[index, assignment]
        if not p.lo <= r <= p.hi:
            raise DPAuditError(f"the audit's input gives {p.who} the reward {r!r} at round {t}, outside its range "
                               f"[{p.lo:g}, {p.hi:g}].")
        return r

    def _checked(self, arm: object, t: int) -> int:
        p = self._p
        if isinstance(arm, (np.ndarray, np.generic)) and np.ndim(arm) == 0:
            arm = arm.item()
        if isinstance(arm, bool) or not isinstance(arm, Integral) or not 0 <= arm < p.n_arms:
            raise DPAuditError(f"{p.who} pulled arm {shorten(arm)} at round {t} (copy {self._copy}); an arm is an "
                               f"integer in 0..{p.n_arms - 1}.")
        return int(arm)

    def _reward(self, *args: object) -> float:
        if self._ended:
            return self._pull(None)  # a stray call: recorded, answered, never played
        if len(args) == 1:
            return self._pull(args[0])
        if len(args) != 2:
            raise DPAuditError(f"{self._p.who} called the environment's reward with {len(args)} arguments; it takes "
                               "(t, arm) or (arm).")
        t, arm = args
        round_ = len(self._arms)
        if self._origin is None and isinstance(t, Integral) and t - round_ in (0, 1):
            self._origin = int(t) - round_
        if not isinstance(t, Integral) or self._origin is None or t != round_ + self._origin:
            raise DPAuditError(f"{self._p.who} asked the environment for the reward of round {shorten(t)} at round "
                               f"{round_} (copy {self._copy}); a bandit sees the reward of the round it plays only, "
                               "one call per round, in order.")
        return self._pull(arm)

    def _step(self, action: object) -> StepResult:
        r = self._pull(action)
        return 0, r, False, len(self._arms) >= self._p.horizon, {}

    def _reset(self, *args: object, **kwargs: object) -> tuple[int, dict[str, object]]:
        """gymnasium's ``reset(seed=None, options=None)``: the first observation (0, as ``step`` gives) and an
        empty info; no round is played (the copy's seed is the adapter's, so ``seed=`` changes nothing)."""
        if self._ended:
            self._stray()
        return 0, {}

    def __getattr__(self, name: str) -> Callable[..., object]:
        if name.startswith("_"):
            raise AttributeError(name)
        p = self.__dict__.get("_p")
        role = None if p is None else p.names.get(name)
        if role is not None:
            calls: dict[str, Callable[..., object]] = {"pull": self._pull, "reward": self._reward, "step": self._step,
                                                       "reset": self._reset}
            return calls[role]
        raise Unanswered(
            f"{p.who if p else 'the loop'} asked its environment for {name!r}, which the loop adapter's environment "
            "does not answer; map it to the call it means with --adapter loop:pull=" + name + " (a reward for an arm), "
            "step=" + name + " (a gym-like tuple) or reward=" + name + " (reward(t, arm)), or "
            "LoopPolicy(..., pull='" + name + "').")


class LoopPolicy:
    """N copies of loop-shaped code as one batched dpaudit policy, each run to completion on its reward
    table (module docstring). ``LoopPolicy(fn, kwargs, claim, horizon=T)``: ``fn`` a function taking the
    environment, or a class built with it whose ``run`` (:data:`RUN_NAMES`, or ``run=NAME``) runs the loop;
    ``kwargs`` its other parameters; the horizon goes to the parameter :func:`horizon_parameter` finds.
    Options: ``env`` (the parameter that receives the environment), ``factory`` (a module-level function
    the code calls to build its environment), ``pull``/``step``/``reward``/``get_reward`` (names of the
    code's environment calls), ``n_arms``, ``globals_mode`` (off, redirect or swap, as the per-run adapter's;
    swap costs a state swap per copy, not per round, since a copy runs once).
    No ledger: only the black-box attacks judge it."""

    accepts_queries = False  # its own loop observes the arm it pulled: no Interactive-DP adversary's queries
    #: a Python loop per copy: the search ranks on the per-run adapter's small samples (runner.central)
    per_copy = True

    def __init__(self, fn: Maker, kwargs: Mapping[str, object] | None = None, claim: Guarantee | str | None = None, *,
                 horizon: int | None = None, env: str | None = None, factory: str | None = None,
                 pull: str | None = None, step: str | None = None, reward: str | None = None,
                 get_reward: str | None = None, n_arms: int | None = None, run: str | None = None,
                 globals_mode: str | None = None, reward_range: Sequence[float] = (0.0, 1.0),
                 spec: str | None = None) -> None:
        self.spec = spec
        if not callable(fn):
            raise DPAuditError(f"the loop adapter needs a function or a class, got {shorten(fn)}.")
        self.fn = fn
        self.who = getattr(fn, "__name__", repr(fn))
        self.name = f"{self.who} (loop)"
        self.kwargs = dict(kwargs or {})
        self.audit_notes: list[str] = []
        self.names = _call_names(pull, get_reward, step, reward)
        params = init_parameters(fn)
        self._seed_param = next((s for s in SEED_NAMES if s in params), None)
        if self._seed_param is not None and self._seed_param in self.kwargs:
            raise DPAuditError(f"{self.who}'s {self._seed_param!r} is set by the adapter, one per copy; drop "
                               f"{self._seed_param}={self.kwargs[self._seed_param]!r} from the parameters.")
        self.factory = factory
        self.env_param = self._env_param(params, env, factory)
        self._hp = self._horizon_of(horizon)
        self.n_arms = self._arms(params, n_arms)
        self.run_name = self._run_method(run)
        missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in self.kwargs
                   and n not in (self.env_param, self._seed_param)]
        if missing:
            raise DPAuditError(f"{self.who} needs {', '.join(missing)}, which --param did not give (the environment "
                               f"goes to {self.env_param or 'the factory ' + str(factory)}, the horizon to "
                               f"{self._hp or 'no parameter'}).")
        if isinstance(claim, str):
            claim = parse_claim(claim)
        if claim is not None and not isinstance(claim, Guarantee):
            raise DPAuditError(f"the claim must be a Guarantee from dpaudit.accountants or text such as "
                               f"{CLAIM_FORMS}, got {claim!r}.")
        self.claim = claim
        self.lo, self.hi = (float(x) for x in reward_range)
        self.reward_range = (self.lo, self.hi)
        self.list_input = False
        self._module = getattr(fn, "__module__", None)
        if factory is not None and not callable(getattr(sys.modules.get(self._module or ""), factory, None)):
            raise DPAuditError(f"the loop adapter's factory={factory} names no function of {self.who}'s module "
                               f"{self._module}.")
        self._modules = tuple(m for m in {self._module} if m and m != "builtins")
        self._globals = self._kept_apart(globals_mode)
        how = (f"its parameter {self.env_param}" if self.env_param else f"its module's {factory}()")
        self.audit_notes.append(
            f"{self.who} runs its own loop: each copy ran to completion on its reward table (fixed in advance, as "
            f"Table and View DP fix it), with the environment passed through {how}; its pulls are the view.")
        self._seeds: list[int] = []
        self.n_runs = 0
        #: (copy, thread name, None if the copy had ended else the name of the thread pulling its rounds) of the
        #: first stray pull, until it is reported
        self._stray: tuple[int | None, str, str | None] | None = None
        self._probe()

    # ---- construction ------------------------------------------------------------------------------
    def _horizon_of(self, horizon: int | None) -> str | None:
        """Set the horizon: ``horizon``, else the parameters' value of the code's horizon parameter (which then
        receives it, unless the parameters set it); that parameter, or None."""
        fn = self.fn
        hp = horizon_parameter(fn) if inspect.isclass(fn) or inspect.isfunction(fn) else None
        T = horizon if horizon is not None else (self.kwargs.get(hp) if hp else None)
        if T is None:
            raise DPAuditError(f"the loop adapter needs the horizon of {self.who}: give --horizon (or the parameter "
                               "that receives it).")
        self.horizon = check_int("horizon", T, minimum=1)
        if hp is not None and hp not in self.kwargs:
            self.kwargs[hp] = self.horizon
        return hp

    def _run_method(self, run: str | None) -> str | None:
        """For a class, the name of its method that runs the loop (``run``, else the first of :data:`RUN_NAMES` it
        has); None for a function."""
        if not inspect.isclass(self.fn):
            return None
        found = [n for n in ((run,) if run else RUN_NAMES) if callable(getattr(self.fn, n, None))]
        if not found:
            raise DPAuditError(f"{self.who} is a class without a method that runs its loop (one of "
                               f"{', '.join(RUN_NAMES)}); name it with --adapter loop:run=NAME.")
        return found[0]

    def _kept_apart(self, globals_mode: str | None) -> Globals:
        """Each copy's generators, kept apart in ``globals_mode`` (off, redirect or swap; default redirect)."""
        mode = globals_mode or "redirect"
        if mode not in ("off", "redirect", "swap"):
            raise DPAuditError(f"the loop adapter's globals must be off, redirect or swap, got {globals_mode!r}.")
        return Globals(mode, mode, self._modules,
                       [m.spec()[:2] + ({"redirect": "replace"}.get(mode, mode), m.index)
                        for m in find_module_generators(self._modules)])

    def _env_param(self, params: Mapping[str, inspect.Parameter], env: str | None, factory: str | None) -> str | None:
        if env is not None:
            if env not in params:
                raise DPAuditError(f"{self.who} has no parameter {env!r} for the environment (its parameters: "
                                   f"{', '.join(params) or 'none'}); fix --adapter loop:env=NAME.")
            return env
        found = [n for n in ENV_NAMES if n in params]
        if factory is not None:
            return None
        if len(found) > 1:
            raise DPAuditError(f"{self.who} has several parameters that may receive the environment "
                               f"({', '.join(found)}); say which with --adapter loop:env=NAME.")
        if not found:
            raise DPAuditError(f"{self.who} has no parameter named like an environment ({', '.join(ENV_NAMES)}); "
                               "name the one that receives it with --adapter loop:env=NAME, or the module-level "
                               "function that builds it with --adapter loop:factory=NAME.")
        return found[0]

    def _arms(self, params: Mapping[str, inspect.Parameter], n_arms: int | None) -> int:
        if n_arms is not None:
            return check_int("n_arms", n_arms, minimum=2)
        for n in N_ARMS_NAMES:
            if n in self.kwargs:
                return check_int(n, self.kwargs[n], minimum=2)
            p = params.get(n)
            if p is not None and isinstance(p.default, Integral) and not isinstance(p.default, bool):
                return check_int(n, p.default, minimum=2)
        raise DPAuditError(f"the loop adapter cannot tell how many arms {self.who}'s environment has; give "
                           "--adapter loop:n_arms=K (or --param n_arms=K if the code takes it).")

    def _probe(self) -> None:
        """Two copies with the same seed on the same table must pull the same arms (else randomness the
        adapter cannot seed, refused); the code's shape is checked on the way (a pull it cannot make)."""
        K, T = self.n_arms, self.horizon
        vals = [0.5, 0.25, 0.75, 0.375, 0.625]
        table = np.array([[vals[(t * 7 + a) % 5] for a in range(K)] for t in range(T)])
        table = self.lo + (self.hi - self.lo) * table
        first, second = (self._play([table.tolist()], [0], [20261122], [20261123]) for _ in range(2))
        if first != second:
            j = next(i for i, (x, y) in enumerate(zip(first[0], second[0])) if x != y)
            raise DPAuditError(f"{self.who} draws randomness the adapter cannot seed: two copies with the same seed "
                               f"pulled different arms from round {j} on; draw from np.random, random, a generator "
                               f"made at module level or a seed parameter ({', '.join(SEED_NAMES)}).")

    # ---- the batched contract ---------------------------------------------------------------------------
    def reset(self, n_runs: int, rng: np.random.Generator, **_: object) -> None:
        """Seeds for ``n_runs`` copies from ``rng`` (distinct); the copies run in :meth:`play_tables`."""
        n = check_int("n_runs", n_runs, minimum=1)
        self._seeds = [int(x) for x in rng.choice(1 << 32, size=n, replace=False)]
        self._gseeds = [int(x) for x in rng.choice(1 << 32, size=n, replace=False)]
        self.n_runs = n

    def play_tables(self, inputs: np.ndarray, which: np.ndarray, list_input: bool) -> np.ndarray:
        """The views (n_runs, T): copy i runs its loop to completion on ``inputs[which[i]]`` (a T x K table,
        or a list of T rewards when ``list_input``)."""
        inputs = np.asarray(inputs, dtype=float)
        which = np.asarray(which, dtype=np.int64)
        if which.shape != (self.n_runs,):
            raise InternalError(f"the protocol reset {self.name} for {self.n_runs} runs but asked it to play "
                                f"{which.shape[0] if which.ndim else which.shape}")
        T = inputs.shape[1]
        if T != self.horizon:  # an input of another length (the up-front estimate's): the horizon follows it
            self.horizon = T
            if self._hp is not None:
                self.kwargs[self._hp] = T
        self.list_input = bool(list_input)
        tables = [x.tolist() for x in inputs]
        views = self._play(tables, which.tolist(), self._seeds, self._gseeds)
        return np.asarray(views, dtype=np.int64).reshape(self.n_runs, T)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        raise DPAuditError(f"{self.name} runs its own loop, so each copy runs to completion on a reward table fixed in "
                           "advance (Table or View DP); this protocol drives the rounds one by one, which the loop "
                           "adapter cannot do: audit it under --protocol table or view.")

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        self.act(t)

    # ---- running the copies ----------------------------------------------------------------------
    def _play(self, tables: Sequence[Table], which: list[int], seeds: list[int], gseeds: list[int]) -> list[list[int]]:
        g = self._globals
        g.seed_copies(np.asarray(gseeds))
        mod = sys.modules.get(self._module or "")
        saved_factory = getattr(mod, self.factory) if self.factory else None
        out: list[list[int]] = []
        i = 0
        env = LoopEnv(self)
        current = [env]
        self._refuse_stray(None)
        with GLOBAL_LOCK:
            g.enter()
            try:
                if self.factory:
                    setattr(mod, self.factory, lambda *a, **k: current[0])
                for i, (w, seed) in enumerate(zip(which, seeds)):
                    env = current[0] = LoopEnv(self)  # a copy's own: a pull from an ended copy's is a stray
                    env._load(tables[w], i)
                    g.pin(i)
                    try:
                        with guard(self.spec or self.who, "its loop", runs=1, passthrough=True):
                            self._one(env, seed)
                    finally:
                        env._end()
                    g.save(i)  # swap mode: the copy's states kept (a copy runs once, so twice per copy)
                    self._refuse_stray(i)
                    if len(env._arms) < self.horizon:
                        raise DPAuditError(f"{self.who} returned after {len(env._arms)} pulls (copy {i}), but the "
                                           f"audit's horizon is {self.horizon} rounds; give the horizon to the "
                                           "parameter that sets its number of rounds (--adapter loop:horizon=NAME).")
                    out.append(env._arms)
            except (DPAuditError, InternalError):
                raise
            except Exception as exc:
                text = str(exc).rstrip(".") or "(no message)"
                raise DPAuditError(f"{self.who} raised {type(exc).__name__} at round {len(env._arms)} (copy {i}): "
                                   f"{shorten(text, 160, as_text=True)}.") from exc
            finally:
                if self.factory:
                    setattr(mod, self.factory, saved_factory)
                moved = g.leave()
        if moved:
            text = moved_message(self.who, g, moved, "in its loop")
            raise DPAuditError(text.replace("per-run", "loop").replace("PerRun(", "LoopPolicy("))
        return out

    def _refuse_stray(self, running: int | None) -> None:
        """Refuse the audit once a pull came from the environment of a copy that had ended (while copy
        ``running`` ran, or between plays), or from a second thread while a copy ran: code left running after
        its copy returned (a thread) plays into later copies' views, so they would not be the independent
        runs the attacks count."""
        if self._stray is None:
            return
        copy, thread, first = self._stray
        self._stray = None
        if first is None:
            when = f"while copy {running} ran" if running is not None else "after its batch of copies had run"
            what = f"pulled from the environment of copy {copy} after that copy had ended ({when}, in thread {thread!r})"
        else:
            what = f"pulled from the environment of copy {copy} in two threads at once ({first!r} and {thread!r})"
        raise DPAuditError(f"{self.who} {what}; code that pulls outside its copy's one loop, such as a thread it "
                           "started and did not join, plays into other copies' views, so each copy's pulls must come "
                           "from one thread and end when its run returns.")

    def _one(self, env: LoopEnv, seed: int) -> None:
        kw = dict(self.kwargs)
        if self.env_param is not None:
            kw[self.env_param] = env
        if self._seed_param is not None:
            kw[self._seed_param] = np.random.default_rng(seed) if self._seed_param == "rng" else seed
        try:
            obj = self.fn(**kw)
            if self.run_name is not None:
                getattr(obj, self.run_name)()
        except _Stop:
            pass

    def params(self) -> dict[str, object]:
        return dict(self.kwargs)

    def describe(self) -> str:
        how = f"parameter {self.env_param}" if self.env_param else f"factory {self.factory}()"
        return f"{self.who} run to completion per copy on its reward table (environment through its {how})"

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_globals"] = Globals(*self._globals.spec())
        return state


def _call_names(pull: str | None, get_reward: str | None, step: str | None, reward: str | None) -> dict[str, str]:
    """The environment's call names, each with its role (:data:`ROLES`): the usual ones, and those the options
    map (``pull=``, ``get_reward=``, ``step=``, ``reward=``); a name mapped to two roles is refused."""
    names: dict[str, str] = {}
    for role, given in (("pull", pull), ("pull", get_reward), ("step", step), ("reward", reward)):
        if given is not None:
            if given in names and names[given] != role:
                raise DPAuditError(f"the loop adapter's options map {given!r} to both {names[given]} and {role}; "
                                   "a name is one call: give it once.")
            names[given] = role
    defaults = {n: role for role, ns in ROLES.items() for n in ns if n not in names}
    return {**defaults, **names}


def make_loop(spec: str, params: Mapping[str, object] | None = None, claim: Guarantee | str | None = None,
              horizon: int | None = None, **options: Any) -> LoopPolicy:
    """The CLI's ``--adapter loop[:KEY=VALUE,...]``: load ``spec`` (``file.py:function``, ``file.py:Class``,
    ``module:function``), type the ``--param`` strings by its signature, and wrap it in :class:`LoopPolicy`
    with the horizon and ``claim``; ``options`` go to :class:`LoopPolicy` (``horizon_name`` names the
    parameter that receives the horizon)."""
    from dpaudit.policies.registry import coerce_params, load_policy_class

    target = load_policy_class(spec, contract=False)
    if not callable(target):
        raise DPAuditError(f"plug-in {spec!r} is {shorten(target)}, neither a function nor a class.")
    notes: list[str] = []
    kwargs = coerce_params(target, dict(params or {}), notes)
    hp = horizon_parameter(target, options.pop("horizon_name", None))
    if horizon is not None and hp is not None and hp not in kwargs:
        kwargs[hp] = check_int("horizon", horizon, minimum=1)
    if horizon is None and hp is not None and hp in kwargs:
        horizon = kwargs[hp]
    policy = LoopPolicy(target, kwargs, claim, horizon=horizon, spec=spec, **options)
    policy.audit_notes[:0] = notes
    policy._params = dict(kwargs)
    return policy
