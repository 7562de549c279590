"""The batched Policy contract (DESIGN.md, "Policy").

A policy runs ``n_runs`` independent copies of a bandit algorithm as one numpy computation::

    policy.reset(n_runs, rng)
    for t in range(T):
        actions = policy.act(t, arms)          # (n_runs,) ints in [0, K)
        policy.observe(t, actions, rewards)    # rewards: (n_runs,) floats

This is also the plug-in contract: any class with these members (constructor keyword arguments
for its parameters, ``claim`` a Guarantee or None) can be audited. Subclassing :class:`Policy`
is optional; it adds input checks and a ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any, ClassVar, Protocol, TypeAlias, Union, runtime_checkable

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import Ledger

__all__ = ["PolicyLike", "PolicySource", "Policy", "check_reset", "check_actions", "check_rewards", "check_alphabet", "arm_ranges"]


@runtime_checkable
class PolicyLike(Protocol):
    """Structural type of anything auditable as a policy."""

    n_arms: int

    def reset(self, n_runs: int, rng: np.random.Generator) -> None: ...

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray: ...

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None: ...


#: What an audit accepts as "the policy": a registered name or a plug-in path ("file.py:Class",
#: "module:Class"), a class (built with the audit's parameters), or an instance (audited as it is).
PolicySource: TypeAlias = Union[str, type[Any], PolicyLike]


class Policy:
    """Base class for dpaudit's own policies.

    Subclasses set ``n_arms``, ``claim`` and ``reward_range`` (the interval of rewards the
    sensitivity analysis assumes; rewards outside it are refused, never clipped) and implement
    ``_reset``, ``act`` and ``_observe``.
    """

    name: ClassVar[str] = ""
    n_arms: int
    claim: Guarantee | None = None
    reward_range: tuple[float, float] = (-math.inf, math.inf)
    #: whether ``observe`` accepts an arm other than the one ``act`` returned (Interactive DP feeds back
    #: the adversary's query q_t); policies whose schedule fixes the observed arm set this to False
    accepts_queries: ClassVar[bool] = True

    def __init__(self) -> None:
        self.n_runs = 0
        self.ledger: Ledger | None = None
        self.rng: np.random.Generator | None = None
        self.record = True

    def reset(self, n_runs: int, rng: np.random.Generator, *, record: bool = True) -> None:
        """Fresh state for ``n_runs`` independent runs; ``record=False`` skips the ledger."""
        before = None if "_run_keys" in self.__dict__ else set(self.__dict__)
        self.n_runs = check_reset(n_runs, rng)
        self.rng = rng
        self.record = record
        self.ledger = Ledger(self.n_runs, enabled=record)
        self._reset()
        if before is not None:  # the attributes a run creates (see __getstate__)
            self.__dict__["_run_keys"] = tuple(k for k in self.__dict__ if k not in before)

    def _reset(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, object]:
        """A policy is pickled (to the engine's workers, into checkpoint keys) without the state of the runs it
        made here: the attributes its first ``reset`` created (its arrays) and its ledger and generator
        (megabytes per task after a ledger audit in this process). Every run begins with ``reset``, which
        rebuilds them; whatever was set on the policy otherwise (``keep_transcript``, a claim) travels."""
        run_keys = self.__dict__.get("_run_keys")
        if run_keys is None:
            return dict(self.__dict__)
        state = {k: v for k, v in self.__dict__.items() if k not in run_keys}
        state.update(n_runs=0, ledger=None, rng=None, record=True)
        return state

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        rewards = check_rewards(rewards, self.n_runs, self.reward_range, type(self).name or type(self).__name__, t)
        self._observe(t, np.asarray(actions), rewards)

    def observe_checked(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        """``observe`` for a caller that has established, once for the whole run, that every reward
        lies in ``reward_range`` (:func:`dpaudit.simulate.simulate` does, from the environment's reward
        bounds): the same update without the per-step range check."""
        self._observe(t, actions, rewards)

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        raise NotImplementedError

    def params(self) -> dict[str, object]:
        """The constructor parameters this instance was built with (for reports)."""
        return dict(getattr(self, "_params", {}))

    def __repr__(self) -> str:
        """``AdaCUCB(n_arms=5, rho=0.1, ...)``: the constructor parameters, read back from the instance
        where it keeps them under the same names (so test failures and logs say what was audited)."""
        import inspect

        try:
            names = [n for n, p in inspect.signature(type(self).__init__).parameters.items()
                     if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        except (TypeError, ValueError):
            names = []
        params = {n: getattr(self, n) for n in names if hasattr(self, n) and not callable(getattr(self, n))}
        params.update(self.params())
        shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
        return f"{type(self).__name__}({shown})"


def check_reset(n_runs: object, rng: object) -> int:
    """Validate ``reset``'s arguments: ``n_runs`` an integer >= 1, ``rng`` a numpy Generator."""
    if isinstance(n_runs, bool) or not isinstance(n_runs, (int, np.integer)) or n_runs < 1:
        raise DPAuditError(f"n_runs must be an integer >= 1, got {n_runs!r}.")
    if not isinstance(rng, np.random.Generator):
        raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
    return int(n_runs)


def check_actions(actions: object, n_runs: int, n_arms: int, who: str, t: int) -> np.ndarray:
    """Validate a policy's output: ``(n_runs,)`` integers in ``[0, n_arms)``."""
    a = np.asarray(actions)
    if a.shape != (n_runs,):
        raise DPAuditError(f"policy {who} returned actions of shape {a.shape} at step {t}; expected ({n_runs},).")
    if not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise DPAuditError(f"policy {who} returned non-integer actions at step {t} (dtype {a.dtype}).")
    if a.size and 0 <= a.min() and a.max() < n_arms:
        return a
    bad = (a < 0) | (a >= n_arms)
    if np.any(bad):
        raise DPAuditError(
            f"policy {who} returned arm {int(a[bad][0])} at step {t}; allowed arms are 0..{n_arms - 1}."
        )
    return a


def check_rewards(rewards: object, n_runs: int, reward_range: tuple[float, float], who: str, t: int) -> np.ndarray:
    """Validate rewards fed to a policy; refuse (never clip) values outside ``reward_range``."""
    r = np.asarray(rewards, dtype=float)
    if r.shape != (n_runs,):
        raise DPAuditError(f"rewards at step {t} have shape {r.shape}; expected ({n_runs},).")
    lo, hi = reward_range
    r_min, r_max = r.min(), r.max()  # NaN propagates, so this one test also rejects NaN and inf
    if lo <= r_min and r_max <= hi and math.isfinite(r_min) and math.isfinite(r_max):
        return r
    if not np.all(np.isfinite(r)):
        raise DPAuditError(f"rewards at step {t} contain NaN or inf; rewards must be finite numbers.")
    if np.any((r < lo) | (r > hi)):
        bad = r[(r < lo) | (r > hi)][0]
        raise DPAuditError(
            f"reward {bad:g} at step {t} is outside [{lo:g}, {hi:g}], the range {who}'s sensitivity "
            "assumes; rescale the rewards or choose a policy calibrated for that range."
        )
    return r


# ---- the rewards a policy accepts (its optional reward_range and reward_alphabet members) ----------------

def check_alphabet(raw: object, who: str) -> tuple[float, ...]:
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (Sequence, np.ndarray, set, frozenset)):
        raise DPAuditError(f"{who} must be a sequence of reward values such as (0.0, 1.0), got {raw!r}.")
    out = set()
    for v in raw:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, Real) or not math.isfinite(float(v)):
            raise DPAuditError(f"{who} must hold finite numbers, got {v!r}.")
        out.add(float(v))
    if len(out) < 2:
        raise DPAuditError(f"{who} must hold at least two distinct reward values, got {raw!r}.")
    return tuple(sorted(out))



def arm_ranges(reward_range: object, n_arms: int) -> np.ndarray:
    """``(lo, hi)`` or K pairs -> a (K, 2) array of finite ranges with lo < hi."""
    try:
        rr = np.asarray(reward_range, dtype=float)
    except (TypeError, ValueError):
        rr = None
    if rr is None or not (rr.shape == (2,) or rr.shape == (n_arms, 2)):
        raise DPAuditError(f"a reward range must be (low, high) or one (low, high) pair per arm ({n_arms}), "
                           f"got {reward_range!r}.")
    rr = np.broadcast_to(rr, (n_arms, 2))
    bad = ~(np.isfinite(rr).all(axis=1) & (rr[:, 0] < rr[:, 1]))
    if bad.any():
        a = int(np.flatnonzero(bad)[0])
        raise DPAuditError(f"the reward range of arm {a} must be finite with low < high, got {rr[a].tolist()}.")
    with np.errstate(over="ignore"):
        wide = ~np.isfinite(rr[:, 1] - rr[:, 0])
    if wide.any():  # [-1e308, 1e308]: every statistic built on the range's width would be inf or NaN
        a = int(np.flatnonzero(wide)[0])
        raise DPAuditError(f"the reward range of arm {a}, {rr[a].tolist()}, has a width high - low that overflows to "
                           f"inf; a reward range's width must be a finite number (at most {np.finfo(float).max:.3g}).")
    return rr

