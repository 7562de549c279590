"""The arguments of a one-run object's feedback (or step) call: the tokens arm, reward and t, a mapping
given as text (:func:`parse_arg_map`: ``update_args=t,arm,reward``), the order read from the method's
parameter names when that is safe (:func:`auto_arg_map`, :data:`ARG_NAMES`), and the call's values
built from a mapping, for one copy or for N."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias, Union

from dpaudit.errors import DPAuditError

__all__ = ["ARG_TOKENS", "ARG_NAMES", "ArgMap", "ArgMapText", "parse_arg_map", "auto_arg_map", "positional_arity",
           "accepts_call", "render_call", "params_text", "call_values", "batch_call_values"]

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

ArgMap = tuple[tuple[str | None, str], ...]  # ((keyword or None for positional, token), ...)
#: an argument mapping as a user gives it (``update_args=``, ``step_args=``): text ``"t,arm,reward"``, a sequence
#: of items, or {parameter name: token} (:func:`parse_arg_map`)
ArgMapText: TypeAlias = Union[str, Sequence[str], Mapping[str, str]]
#: one call's arguments: positional, keyword
CallArgs: TypeAlias = tuple[tuple[object, ...], dict[str, object]]


def positional_arity(fn: Callable[..., object]) -> tuple[int, int] | None:
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


def parse_arg_map(value: ArgMapText, what: str) -> ArgMap:
    """An argument mapping (``update_args``, ``step_args``) as ((keyword or None, token), ...).

    ``value``: text ``"t,arm,reward"``, a sequence of items, or a mapping {parameter name: token}. An
    item is a token (the next positional argument) or ``NAME:TOKEN`` (passed as the keyword NAME);
    tokens are ``arm``, ``reward`` and ``t`` (the round: dpaudit's 0-based round plus ``first_round``),
    each at most once, ``reward`` required; positional items come first."""
    if isinstance(value, str):
        items: list[object] = [x.strip() for x in value.split(",") if x.strip()]
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


def auto_arg_map(fn: Callable[..., object]) -> tuple[ArgMap, str] | None:
    """The argument order of a feedback or step method, when it is safe to tell; None if it cannot be
    driven without a mapping. Its required positional parameters all named as tokens (``last_reward,
    last_arm``; ``t, arm, r``): that order ("names"). Else, two or three required ones all but one named as
    tokens (``observe_loss(t, loss)``): those by name and the other the token left, reward before arm before
    the round ("partial": ``(t, reward)`` there). Else three required ones, the first named as the round: (t, arm, reward) ("round-first"). Else two
    positional arguments: (arm, reward) ("default" when nothing is required or they are so named, else
    "guessed"). The probe's notes name the order whenever it is not given or read from the names."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    arity = positional_arity(fn)
    if arity is None:
        return None
    req, most = arity
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is inspect.Parameter.empty]
    toks = [_token_of(n) for n in names]
    if names and all(toks) and len(set(toks)) == len(toks) and "reward" in toks:
        return tuple((None, t) for t in toks), "default" if toks == ["arm", "reward"] else "names"  # type: ignore[misc]
    named = [t for t in toks if t is not None]
    if named and len(set(named)) == len(named) and 2 <= req <= 3 and toks.count(None) == 1:
        # all parameters but one name a token (observe_loss(t, loss)): those by name, the other the token left
        # (reward if it is left, else arm, else t)
        left = [t for t in ARG_TOKENS[2:] + ARG_TOKENS[:2] if t not in named]
        while len(left) > toks.count(None) and len(left) > 1:
            left.remove("t" if "t" in left else "arm" if "arm" in left and "reward" in left else left[0])
        if len(left) == toks.count(None):
            fill = iter(left)
            out = [t if t is not None else next(fill) for t in toks]
            if "reward" in out:
                return tuple((None, t) for t in out), "partial"
    if req == 3 and _token_of(names[0]) == "t":
        return ((None, "t"), (None, "arm"), (None, "reward")), "round-first"
    if req <= 2 <= most:
        return ((None, "arm"), (None, "reward")), "default" if req == 0 or names == ["arm", "reward"] else "guessed"
    return None


def accepts_call(fn: Callable[..., object], amap: ArgMap) -> bool:
    """Whether ``fn`` accepts the call ``amap`` describes."""
    try:
        inspect.signature(fn).bind(*[0 for k, _ in amap if k is None], **{k: 0 for k, _ in amap if k is not None})
        return True
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to check (a builtin): let the call say


def render_call(method: str, amap: ArgMap, step: bool = False) -> str:
    """``update(t, arm, reward)``, ``step(last_reward, last_arm)``, ``update(arm, r=reward)``."""
    def word(tok: str) -> str:
        return f"last_{tok}" if step and tok != "t" else tok
    return f"{method}({', '.join(word(t) if k is None else f'{k}={word(t)}' for k, t in amap)})"


def call_values(args: ArgMap, arm: int | None, reward: float | None, t: int) -> CallArgs:
    """One call's positional and keyword arguments from the mapping."""
    vals = {"arm": arm, "reward": reward, "t": t}
    return tuple(vals[tok] for k, tok in args if k is None), {k: vals[tok] for k, tok in args if k is not None}


def batch_call_values(args: ArgMap, arms: Sequence[int | None], rewards: Sequence[float | None], t: int,
                      n: int) -> tuple[list[tuple[object, ...]], list[dict[str, object]] | None]:
    """Each of ``n`` copies' feedback (or step) arguments, positional and keyword, from the mapping."""
    cols: dict[str, Sequence[object]] = {"arm": arms, "reward": rewards, "t": [t] * n}
    pos = [cols[tok] for k, tok in args if k is None]
    argss: list[tuple[object, ...]] = list(zip(*pos)) if pos else [()] * n
    kws = [(k, cols[tok]) for k, tok in args if k is not None]
    kwss = [dict(zip([k for k, _ in kws], vals)) for vals in zip(*[c for _, c in kws])] if kws else None
    return argss, kwss


def params_text(fn: object) -> str:
    """A method's parameters as written, ``(t, arm, reward)``, for error messages (``(...)`` when it has none
    to show)."""
    if not callable(fn):
        return "(...)"
    try:
        return "(" + ", ".join(str(p) for p in inspect.signature(fn).parameters.values()) + ")"
    except (TypeError, ValueError):
        return "(...)"
