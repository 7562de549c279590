"""Table DP (Azize & Basu 2023a, Def. 3) and the neighbouring pairs of the central protocols.

The definitions are those of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits".

The input is a T x K table d of potential rewards (row t is user t's); the policy observes
d[t, a_t]; the view is a_1..a_T; neighbours differ in one row. View DP (:mod:`.view`) and Interactive
DP (:mod:`.interactive`) build their pairs with the same functions: :class:`PairSpec` says how a pair
is built (canary round, background, adversary), so it can be rebuilt at another horizon, and
:func:`make_pair` builds it for a protocol.

The search space (our choices, guided by how the papers' policies use their data; Azize & Basu 2023a,
Sec. III, App. B-D; the search itself is :mod:`dpaudit.attacks.neighbours`):

* canary round j: the first rounds (every arm's first pull in round-robin initialisation, whose
  reward is the whole of that arm's first episode), the rounds just after them (the first episode
  boundaries of doubling schemes), and the middle of the horizon;
* canary row: the extreme rewards of the policy's reward range (row all-low in d, all-high in d');
* background: every other row constant at the low, middle or high reward, so that the canary alone
  decides an argmax (with a low background one high reward makes its arm the leader; with a high
  background one low reward makes it the loser); or per-arm means (the threshold search);
* under Interactive DP, the adversaries of :class:`~dpaudit.protocols.interactive.InteractiveDP`.

With a reward alphabet (a policy that accepts only, say, {0, 1}), a background mean between two
letters is realised by a fixed table of those letters (:func:`background_table`), nested in the
mean so that raising one arm's mean flips one entry at a time.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.policies.base import PolicyLike

from .base import ContextInput, Pair, Protocol, check_table

__all__ = ["TableDP", "PairSpec", "background_table", "audit_range", "input_range", "make_pair", "candidate_pairs",
           "readout_pairs", "READOUT_NORM", "READOUT_EVERY"]


class TableDP(Protocol):
    """Table DP (Azize & Basu 2023a, Def. 3): input a T x K table of potential rewards; neighbours differ in one row."""

    name = "table"
    summary = "input: T x K reward table; view: actions; neighbours: one row (user) changed"
    fixed_rewards = True

    def check_input(self, data, horizon, n_arms):
        return check_table(data, n_arms)

    def reward(self, data, t, actions, queries):
        return data[t, actions]

    def block_sums(self, prefix, arms, start, length):
        return prefix[start + length, arms] - prefix[start, arms]

    def neighbours(self, data, alphabet):
        alphabet = np.asarray(alphabet, dtype=float)
        T, K = data.shape
        grids = np.stack(np.meshgrid(*[alphabet] * K, indexing="ij"), -1).reshape(-1, K)
        for t in range(T):
            for row in grids:
                if not np.array_equal(row, data[t]):
                    other = data.copy()
                    other[t] = row
                    yield t, other


@dataclass(frozen=True)
class PairSpec:
    """How a pair is built, so it can be rebuilt at another horizon (leakage against T)."""

    round: int
    background: str  # "low", "mid", "high", or "means" (per-arm means in ``means``)
    adversary: str = "none"  # "none", "identity", "constant-0", "round-robin", "pin-<arm>", "echo"
    means: tuple[float, ...] | None = None

    def label(self) -> str:
        """How reports name the pair; two different specs never share a label (a mean is written to 6
        significant digits, or to as many more as it takes to read back exactly)."""
        adv = "" if self.adversary == "none" else f", adversary {self.adversary}"
        bg = self.background if self.means is None else "arm means (" + ", ".join(map(_digits, self.means)) + ")"
        return f"canary round {self.round}, background {bg}{adv}"


def _digits(x: float) -> str:
    """``x`` to 6 significant digits, or to the fewest more that read back as ``x``."""
    for p in range(6, 18):
        s = f"{x:.{p}g}"
        if float(s) == x:
            return s
    return repr(float(x))



def background_table(means: Sequence[float], horizon: int, reward_range: tuple[float, float],
                     alphabet: Sequence[float] | None = None) -> np.ndarray:
    """A (T, K) table whose arm a has mean ``means[a]``: constant without an alphabet; with one, the
    alphabet's extremes lo and hi in a fixed pattern (entry (t, a) is hi when u[t, a] < (mu_a - lo) /
    (hi - lo) for fixed uniforms u), so tables are nested in the means: raising a mean only turns lo
    entries into hi ones, one at a time, which keeps a search over means monotone."""
    mu = np.asarray(means, dtype=float)
    if alphabet is None:
        return np.broadcast_to(mu, (horizon, mu.size)).copy()
    lo, hi = float(min(alphabet)), float(max(alphabet))
    p = np.clip((mu - lo) / (hi - lo), 0.0, 1.0)
    u = np.random.default_rng([0xBAC6, horizon, mu.size]).random((horizon, mu.size))
    return np.where(u < p, hi, lo)


def audit_range(policy: PolicyLike) -> tuple[float, float]:
    """The reward range an audit builds inputs in: the policy's ``reward_range`` when it is finite
    with low < high, else [0, 1] (a policy without a finite range accepts any reward)."""
    rr = getattr(policy, "reward_range", (0.0, 1.0))
    try:
        lo, hi = (float(x) for x in rr)
    except (TypeError, ValueError):
        return (0.0, 1.0)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return (0.0, 1.0)
    if not math.isfinite(hi - lo):  # [-1e308, 1e308]: the inputs' and statistics' arithmetic would overflow
        who = getattr(policy, "name", None) or type(getattr(policy, "wrapped", policy)).__name__
        raise DPAuditError(f"the reward range [{lo:g}, {hi:g}] of {who} has a width high - low that overflows to "
                           f"inf; a reward range's width must be a finite number (at most {sys.float_info.max:.3g}).")
    return (lo, hi)


def input_range(reward_range: tuple[float, float], alphabet: Sequence[float] | None) -> tuple[float, float]:
    """The lowest and highest reward an input may hold: the alphabet's extremes, else the reward range."""
    if alphabet is not None:
        return float(min(alphabet)), float(max(alphabet))
    return reward_range


def make_pair(spec: PairSpec, protocol: Protocol, n_arms: int, horizon: int,
              reward_range: tuple[float, float] = (0.0, 1.0), alphabet: Sequence[float] | None = None) -> Pair:
    """Build the neighbouring inputs for ``spec``: the canary row/entry goes from low to high
    (from high to low on a high background). With a reward ``alphabet`` every entry is a letter of it."""
    lo, hi = input_range(reward_range, alphabet)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"the reward range must be finite with low < high, got {reward_range!r}.")
    if not 0 <= spec.round < horizon - 1:
        raise DPAuditError(f"canary round {spec.round} must lie in 0..T-2 = 0..{horizon - 2}.")
    a, b = (hi, lo) if spec.background == "high" else (lo, hi)
    view = protocol.list_input
    if spec.means is not None:
        if view:
            raise DPAuditError("per-arm background means apply to reward tables (Table or Interactive DP), not to "
                               "View DP's reward list.")
        d0 = background_table(spec.means, horizon, (lo, hi), alphabet)
    else:
        level = {"low": lo, "mid": 0.5 * (lo + hi), "high": hi}[spec.background]
        if alphabet is not None and level not in set(map(float, alphabet)):
            d0 = background_table([level] * (1 if view else n_arms), horizon, (lo, hi), alphabet)
            d0 = d0[:, 0] if view else d0
        else:
            d0 = np.full((horizon,) if view else (horizon, n_arms), level, dtype=float)
    d1 = d0.copy()
    d0[spec.round] = a
    d1[spec.round] = b
    adv = protocol.adversary(spec.adversary, spec.round, n_arms, horizon)
    return Pair(d0, d1, spec.round, adv, spec.label())


def candidate_pairs(protocol: Protocol, n_arms: int, horizon: int, *,
                    rounds: Sequence[int] | None = None, backgrounds: Sequence[str] = ("low", "mid", "high"),
                    adversaries: Sequence[str] | None = None) -> list[PairSpec]:
    """The search space above as a list of pair specs (small; each costs one short sampling run)."""
    if horizon < 2:
        raise DPAuditError(f"the horizon must be at least 2 so that an action can depend on a reward, got {horizon}.")
    K = int(n_arms)
    if rounds is None:
        base = list(range(min(K, 6))) + [K, K + 1, 2 * K, horizon // 2]
        rounds = sorted({j for j in base if 0 <= j < horizon - 1})
    if adversaries is None:
        adversaries = list(protocol.adversaries)
    specs = []
    for adv in adversaries:
        rs = rounds if adv in ("none", "identity") else rounds[: max(1, min(3, len(rounds)))]
        for j in rs:
            for bg in backgrounds:
                specs.append(PairSpec(int(j), bg, adv))
    return specs


# ---- pilot runs on many inputs at once: horizon discovery and the threshold search --------------

#: (run x round) cells one pilot batch may use; the horizon cap and pilot sizes follow from it
PILOT_CELLS = 30_000_000
#: the longest horizon :func:`discover_horizon` tries (it also stops earlier when the pilot no longer fits)
HORIZON_CAP = 100_000


#: the read-out arms' feature length: small, so that read-out rounds barely move the estimate they read
READOUT_NORM = 0.05
#: every READOUT_EVERY-th round is a read-out round; the others grow the design matrix
READOUT_EVERY = 4


def readout_pairs(n_arms: int, dim: int, horizon: int, reward_range: tuple[float, float] = (0.0, 1.0),
                  rounds: Sequence[int] = (0,)) -> list[Pair]:
    """Read-out pairs for linear policies under the central protocols: the canary's influence on the
    estimate becomes an action difference (the central twin of :func:`dpaudit.protocols.joint.readout_pairs`).

    The inputs are per-round features and rewards (:class:`~dpaudit.protocols.base.ContextInput`),
    choices of ours:

    * the canary round j: every arm carries e1, so the played feature is e1 whatever the arm; the
      canary's row is the top of the reward range on every arm versus the bottom. Its term x_j r_j of the
      estimate's sum differs by (hi - lo) e1 between the sides;
    * a balancing round j + 1, the same on both sides: every arm carries -e1 with the middle reward, so
      the estimate's e1 coordinate is proportional to r_j - mid: positive on one side, negative on the
      other, even for a policy without noise (whose estimate would otherwise sit at 0 on one side);
    * growth rounds (all but every ``READOUT_EVERY``-th): every arm carries e_k, k cycling over 2..d, with the
      middle reward: the design matrix grows orthogonally to e1 (episode-based policies reach their next
      update) while the e1 coordinate of the estimate keeps only the canary's term;
    * read-out rounds: arms 0 and 1 carry +/- ``READOUT_NORM`` e1, the others the zero vector, reward the
      middle of the range. The two arms have equal confidence widths, so an optimistic (or greedy) linear
      rule plays arm 0 exactly when the estimate's e1 coordinate is positive: the view reads its sign.

    Needs d >= 2, K >= 2 and T >= 8 (else no pair). A canary after round 0 sees the background before it.
    """
    K, d, T = int(n_arms), int(dim), int(horizon)
    if d < 2 or K < 2 or T < 8:
        return []
    lo, hi = float(reward_range[0]), float(reward_range[1])
    mid = 0.5 * (lo + hi)
    out = []
    for j in rounds:
        if not 0 <= j < T - 2:
            continue
        X = np.zeros((T, K, d))
        s = np.arange(T)
        s = s[(s != j) & (s != j + 1)]
        read = s[(s - j) % READOUT_EVERY == 0]
        grow = s[(s - j) % READOUT_EVERY != 0]
        X[read, 0, 0], X[read, 1, 0] = READOUT_NORM, -READOUT_NORM
        X[grow, :, 1 + grow % (d - 1)] = 1.0
        X[j, :, 0] = 1.0
        X[j + 1, :, 0] = -1.0
        R = np.full((T, K), mid)
        R0, R1 = R.copy(), R.copy()
        R0[j], R1[j] = lo, hi
        out.append(Pair(ContextInput(X, R0), ContextInput(X.copy(), R1), int(j), None,
                        f"linear read-out: round {j}'s rewards {lo:g} vs {hi:g} on every arm (all arms e1; round "
                        f"{j + 1} all -e1 at {mid:g}), growth rounds e2..e{d}, read-out rounds +/-{READOUT_NORM:g} e1"))
    return out
