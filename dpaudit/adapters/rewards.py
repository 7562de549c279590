"""Reward inputs for code that accepts only some reward values: :func:`reward_alphabet` (the values a
policy accepts) and :func:`realise_means` (a reward table over an alphabet whose running means track
the arms' means)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpaudit.errors import DPAuditError, check_int
from dpaudit.policies.base import arm_ranges, check_alphabet

__all__ = ["reward_alphabet", "realise_means"]


def reward_alphabet(policy: object) -> tuple[float, ...] | None:
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


def realise_means(means: npt.ArrayLike, horizon: int, alphabet: Sequence[float] | None = None,
                  reward_range: npt.ArrayLike = (0.0, 1.0)) -> np.ndarray:
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


