"""Which methods drive a copy of a one-run class and how many arms it has: the method names tried
(:data:`SELECT_NAMES`, :data:`UPDATE_NAMES`), the shapes under their usual names as Protocols
(:class:`SelectsArm`, :class:`SelectsArmAtRound`, :class:`Steps`: what a user may type a class against), the
shape found (:class:`Shape`, :func:`detect_shape`), the number of arms (:data:`N_ARMS_NAMES`,
:func:`detect_arms`), and an arm a call returned, checked (:func:`checked_arm`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Protocol, TypeAlias, Union

import numpy as np

from dpaudit.adapters.arguments import (ArgMap, ArgMapText, accepts_call, auto_arg_map, params_text, parse_arg_map,
                                        positional_arity, render_call)
from dpaudit.adapters.horizon import Maker, init_parameters
from dpaudit.errors import DPAuditError, check_int

__all__ = ["N_ARMS_NAMES", "SELECT_NAMES", "UPDATE_NAMES", "MAX_ARMS", "SelectsArm", "SelectsArmAtRound", "Steps",
           "OneRunBandit", "Shape", "detect_shape", "detect_arms", "checked_arm"]

#: instance attributes (then constructor parameters) read for the number of arms, in this order
N_ARMS_NAMES = ("n_arms", "K", "k", "n_actions", "num_arms", "narms", "arms")
#: method names tried for the selection call (first found wins), with or without a round argument
SELECT_NAMES = ("select_arm", "select_action", "choose_arm", "pull", "choose", "act", "get_action")
#: the most arms the per-run adapter drives: its probe plays max(32, 4 K) rounds of one copy, twice, before
#: anything else (a copy's selection usually scans its arms, so K^2 Python steps), and it sizes per-arm arrays by
#: K before the audit's own memory check runs; what the audit can afford is then checked with the rest
MAX_ARMS = 100_000
#: method names tried for the feedback call ``update(arm, reward)``
UPDATE_NAMES = ("update", "observe", "receive_reward", "feedback")

_SHAPES = ("select_arm()/select_arm(t) + update(arm, reward), pull() + update, choose() + update, "
           "act() + update, or step(last_arm, last_reward) -> next arm")


class SelectsArm(Protocol):
    """A one-run bandit in the most common shape: each round ``select_arm()`` returns the arm to play, then
    ``update(arm, reward)`` feeds back its reward (the other names of :data:`SELECT_NAMES` and
    :data:`UPDATE_NAMES`, and other argument orders, are found too or named with ``select=``, ``update=``,
    ``update_args=``)."""

    def select_arm(self) -> int: ...

    def update(self, arm: int, reward: float) -> None: ...


class SelectsArmAtRound(Protocol):
    """:class:`SelectsArm` with the round: ``select_arm(t)``, ``t`` counted from ``first_round`` (0 unless
    given)."""

    def select_arm(self, t: int) -> int: ...

    def update(self, arm: int, reward: float) -> None: ...


class Steps(Protocol):
    """A one-run bandit in one call per round: ``step(last_arm, last_reward)`` returns the next arm, the first
    call being ``step(None, None)``."""

    def step(self, last_arm: int | None, last_reward: float | None) -> int: ...


#: the shapes the per-run adapter drives under their usual names; an instance of another shape is driven
#: when its methods are named (the adapter itself takes any object and finds its methods: :func:`detect_shape`)
OneRunBandit: TypeAlias = Union[SelectsArm, SelectsArmAtRound, Steps]


@dataclass(frozen=True)
class Shape:
    """How the copies are driven: ``kind`` "select" (``select`` [with the round] then ``feedback``) or
    "step" (``feedback`` is the step method, which also returns the next arm); ``args`` the feedback
    call's arguments; ``how`` where they came from: "default", "names", "partial", "round-first", "guessed" or
    "given" (:func:`~dpaudit.adapters.arguments.auto_arg_map`)."""

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
            return render_call(self.feedback, self.args, step=True)
        return f"{self.select}({'t' if self.select_t else ''}) + {render_call(self.feedback, self.args)}"

    def hint(self, method: str, exc: BaseException, first_round: int) -> str:
        """For a TypeError, IndexError, ValueError or KeyError from the call of ``method`` whose arguments
        the adapter chose: how to map them ("" for any other exception or method)."""
        s = self
        hint = ""
        if isinstance(exc, (TypeError, IndexError, ValueError, KeyError)):
            fr = f" with t counted from {first_round}"
            if method == s.feedback:
                toks = [t for _, t in s.args]
                example = "reward,arm" if toks == ["arm", "reward"] else "t,arm,reward" if "t" not in toks else "arm,reward"
                call = render_call(method, s.args, step=s.kind == "step")
                hint = (f"; the adapter called it as {call}{fr if 't' in toks or s.select_t else ''}: if it takes "
                        f"its arguments in another order or counts rounds from 1, say so with --adapter "
                        f"per-run:{s.key()}=TOKENS (arm, reward and t in its order, e.g. {s.key()}={example}) or "
                        f"first_round=1 ({s.key()}= and first_round= in PerRun)")
            elif method == s.select and s.select_t:
                hint = (f"; the adapter called it as {method}(t){fr}: if it counts rounds from 1, add first_round=1 "
                        "(--adapter per-run:first_round=1)")
        return hint


def detect_shape(obj: object, who: str, select: str | None, update: str | None, step: str | None,
                 update_args: ArgMapText | None, step_args: ArgMapText | None) -> Shape:
    """How to drive ``obj`` (a copy, named ``who`` in errors): the method shape and the feedback call's
    arguments, from the methods and mappings given (``select``, ``update``, ``step``, ``update_args``,
    ``step_args``) or, for what is not given, found as :class:`~dpaudit.adapters.per_run.PerRun` says. A
    shape it cannot drive is refused in one sentence naming the options that fix it."""
    for name in (select, update, step):
        if name is not None and not callable(getattr(obj, name, None)):
            raise DPAuditError(f"{who} has no method {name!r}.")
    ua = parse_arg_map(update_args, "update_args") if update_args is not None else None
    sa = parse_arg_map(step_args, "step_args") if step_args is not None else None
    if ua is not None and sa is not None:
        raise DPAuditError("update_args maps the feedback call of select + update, step_args the step call; "
                           "give the one of the shape the class has.")
    never = (1 << 30, 0)  # the arity of something that cannot be called with positional arguments
    if select is not None and not (positional_arity(getattr(obj, select)) or never)[0] <= 1:
        raise DPAuditError(f"{who}.{select} must be callable with no argument or with one (the round).")
    if update is not None:
        fn = getattr(obj, update)
        if ua is not None and not accepts_call(fn, ua):
            raise DPAuditError(f"{who}.{update}{params_text(fn)} cannot be called as {render_call(update, ua)}; "
                               "give update_args in the order of its parameters.")
        if ua is None and auto_arg_map(fn) is None:
            raise DPAuditError(f"{who}.{update} must be callable with two arguments (arm, reward), or say what its "
                               f"parameters {params_text(fn)} receive with update_args=TOKENS (tokens arm, reward "
                               "and t in its order, e.g. update_args=t,arm,reward).")
    step_first = step is not None or (sa is not None and select is None and update is None)
    selects = [] if step_first else ([select] if select is not None else list(SELECT_NAMES))
    updates = [update] if update is not None else list(UPDATE_NAMES)
    for s in selects:
        fn = getattr(obj, s, None)
        arity = positional_arity(fn) if callable(fn) else None
        if not arity or arity[0] > 1:
            continue
        for u in updates:
            g = getattr(obj, u, None)
            if not callable(g) or u == s:
                continue
            if ua is not None:
                if accepts_call(g, ua):
                    return Shape("select", s, arity[0] == 1, u, ua, "given")
                continue
            auto = auto_arg_map(g)
            if auto is not None:
                return Shape("select", s, arity[0] == 1, u, auto[0], auto[1])
    if ua is not None and select is None and update is None and step is None:
        raise DPAuditError(f"{who} has no selection method ({', '.join(SELECT_NAMES)}) with a feedback method "
                           f"({', '.join(UPDATE_NAMES)}) callable as {render_call('update', ua)}; name them with "
                           "--adapter per-run:select=NAME,update=NAME.")
    if step_first or (select is None and update is None):
        name = step if step is not None else "step"
        fn = getattr(obj, name, None)
        if callable(fn):
            if sa is not None:
                if accepts_call(fn, sa):
                    return Shape("step", None, False, name, sa, "given")
                raise DPAuditError(f"{who}.{name}{params_text(fn)} cannot be called as "
                                   f"{render_call(name, sa, step=True)}; give step_args in the order of its parameters.")
            auto = auto_arg_map(fn)
            if auto is not None:
                return Shape("step", None, False, name, auto[0], auto[1])
        if step is not None:
            raise DPAuditError(f"{who}.{step} must accept two arguments (last_arm, last_reward), or say what its "
                               f"parameters {params_text(fn)} receive with step_args=TOKENS (tokens arm, reward "
                               "and t in its order, e.g. step_args=reward,arm).")
    raise DPAuditError(f"{who} has none of the method shapes the per-run adapter drives ({_SHAPES}); name "
                       "its selection and feedback methods explicitly (--adapter per-run:select=NAME,update=NAME, "
                       "or per-run:step=NAME) and, if the feedback is not (arm, reward), its arguments "
                       "(update_args=t,arm,reward or step_args=reward,arm: the tokens arm, reward and t in its order).")


def detect_arms(obj: object, who: str, cls: Maker, kwargs: Mapping[str, object], n_arms: int | None) -> int:
    """The number of arms: ``n_arms`` if given, else the first of :data:`N_ARMS_NAMES` found on ``obj``
    (an int, or a sequence whose length counts), else among ``kwargs``, else among the defaults of
    ``cls``'s parameters; none of them is refused in one sentence naming n_arms."""
    if n_arms is not None:
        return _bounded("n_arms", check_int("n_arms", n_arms, minimum=2))
    params = init_parameters(cls)

    def default(n: str) -> object:
        p = params.get(n)
        return None if p is None or p.default is inspect.Parameter.empty else p.default

    for source, get in (("attribute", lambda n: getattr(obj, n, None)), ("parameter", kwargs.get),
                        ("default parameter", default)):
        for n in N_ARMS_NAMES:
            v = get(n)
            if v is None or callable(v):
                continue
            if isinstance(v, Integral) and not isinstance(v, bool):
                return _bounded(f"{who}'s {source} {n}", check_int(f"{who}'s {source} {n}", int(v), minimum=2))
            if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, (str, bytes)):
                what = f"the number of {who}'s {source} {n}"
                return _bounded(what, check_int(what, len(v), minimum=2))
    raise DPAuditError(f"cannot tell how many arms {who} has: it has none of the attributes or parameters "
                       f"{', '.join(N_ARMS_NAMES)}; give n_arms explicitly (--adapter per-run:n_arms=K).")


def _bounded(what: str, k: int) -> int:
    """``k`` arms, refused beyond :data:`MAX_ARMS` before anything is sized by it."""
    if k > MAX_ARMS:
        raise DPAuditError(f"{what} is {k}; the per-run adapter drives at most {MAX_ARMS:,} arms (its probe plays "
                           "4 rounds per arm with one Python copy before the audit starts), so give a smaller n_arms.")
    return k


def checked_arm(value: object, t: int, copy: int, who: str, n_arms: int) -> int:
    """The arm copy ``copy`` of ``who`` returned at round ``t``, as an int in 0..n_arms-1 (a whole float or a
    0-d array is accepted; a bool, anything else, or an arm out of range is refused)."""
    if isinstance(value, (np.ndarray, np.generic)) and np.ndim(value) == 0:
        value = value.item()
    # a bool is refused, as batched plug-ins' bool actions are (check_actions): True is not arm 1
    if isinstance(value, Integral) and not isinstance(value, bool):
        arm = int(value)
    elif not isinstance(value, bool) and isinstance(value, Real) and float(value).is_integer():
        arm = int(value)
    else:
        err = DPAuditError(f"{who} returned {value!r} as its arm at round {t} (copy {copy}); an arm is "
                           f"an integer in 0..{n_arms - 1}.")
        err.base = str(err)[:-1]  # type: ignore[attr-defined]
        raise err
    if not 0 <= arm < n_arms:
        err = DPAuditError(f"{who} returned arm {arm} at round {t} (copy {copy}); allowed arms are "
                           f"0..{n_arms - 1}.")
        err.base = str(err)[:-1]  # type: ignore[attr-defined]
        raise err
    return arm
