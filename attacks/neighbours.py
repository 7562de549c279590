"""Neighbouring-input search: find the pair (and adversary) that maximises an attack's bound.

The search space (our choices, guided by how the policies of the papers dpaudit follows use their data;
Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits", Sec. III, App. B-D):

* canary round j: the first rounds (every arm's first pull in round-robin initialisation, whose
  reward is the whole of that arm's first episode), the rounds just after them (the first episode
  boundaries of doubling schemes), and the middle of the horizon;
* canary row: the extreme rewards of the policy's reward range (row all-low in d, all-high in d');
* background: every other row constant at the low, middle or high reward, so that the canary alone
  decides an argmax (with a low background one high reward makes its arm the leader; with a high
  background one low reward makes it the loser);
* threshold backgrounds (:func:`threshold_pairs`): per-arm means (arm 0 at m + g/2, the others at
  m - g/2) with the gap g found by a zooming grid search (a bisection that evaluates 32 gaps per
  step, all in one batch of runs) for the place where the policy's decision flips, so that an
  elimination or commit test sits within one canary of its threshold; policies that act only when
  a noisy statistic crosses a threshold show nothing on constant backgrounds;
* under Interactive DP, adversaries: the identity (q_t = o_t), constant query sequences (always arm
  0; round robin), and reactive ones that follow the outputs but pin the canary round's query to a
  chosen arm, or echo the previous output.

and, for a policy without a ledger, the horizon (:func:`discover_horizon`): the first round at which
the views depend on the input at all, found by running two extreme backgrounds side by side and
doubling the horizon up to a stated cap.

With a reward alphabet (a policy that accepts only, say, {0, 1}), a background mean between two
letters is realised by a fixed table of those letters (:func:`background_table`), nested in the
mean so that raising one arm's mean flips one entry at a time.

Ranking uses small samples (the membership attack's selection bound; the mean privacy loss from the
ledger for the likelihood attack); the threshold search and the horizon discovery use their own
pilot runs; only the best pair of each attack is then evaluated on fresh samples, so the final
bounds need no correction for the number of pairs ranked or searched.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, TypedDict

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.errors import DPAuditError
from dpaudit.engine import SERIAL, Engine, progress_counter
from dpaudit.protocols import (
    ContextInput,
    InteractiveDP,
    Pair,
    PairSpec,
    Protocol,
    ViewDP,
    audit_range,
    background_table,
    candidate_pairs,
    input_range,
    make_pair,
    offers_blocks,
    splits_copies,
)
from dpaudit.policies.base import PolicyLike

from .likelihood import likelihood_attack, privacy_losses
from .membership import MembershipCandidate, evaluate, fit_select, fit_select_views
from .result import AuditResult

__all__ = [
    "run_tables",
    "HorizonChoice",
    "discover_horizon",
    "threshold_pairs",
    "ThresholdSearch",
    "family_of",
    "SearchResult",
    "search",
    "leakage_vs_horizon",
    "horizon_sweep",
]


# ---- pilot runs on many inputs at once: horizon discovery and the threshold search --------------

#: (run x round) cells one pilot batch may use; the horizon cap and pilot sizes follow from it
PILOT_CELLS = 30_000_000
#: the longest horizon :func:`discover_horizon` tries (it also stops earlier when the pilot no longer fits)
HORIZON_CAP = 100_000
#: rounds an audit runs past the first round whose action depends on the input
DEFAULT_TAIL = 48


def run_tables(policy: PolicyLike, protocol: Protocol, tables: np.ndarray, n_per: int,
               rng: np.random.Generator, copies: tuple[int, int] | None = None) -> np.ndarray:
    """Views of ``n_per`` runs on each of several inputs, as one batch: (m, n_per, T).

    ``tables`` is (m, T, K) for Table DP or (m, T) for View DP; run i plays input i // n_per
    (:meth:`Protocol.run_batch`: block by block where the policy offers it; pilot runs only, the
    audit's counted samples come from :meth:`Protocol.run`). ``copies=(lo, hi)``: only the batch's runs
    lo..hi-1, flat, (hi - lo, T).
    """
    return protocol.run_batch(policy, tables, n_per, rng, record=False, copies=copies)


def _play_moments(v: np.ndarray, n_arms: int) -> tuple[np.ndarray, np.ndarray]:
    """Per arm and round, the mean and variance over runs of the cumulative plays: two (K, T) arrays."""
    n, T = v.shape
    sums = []
    counts = np.int32 if T < 2**31 else np.int64  # a count never exceeds T: half the memory, the sums in int64
    for a in range(n_arms if n_arms != 2 else 1):
        c = np.cumsum(v == a, axis=1, dtype=counts)  # (n, T) along rows: integer sums keep a constant column's variance 0
        sums.append((c.sum(axis=0, dtype=np.int64), np.einsum("ij,ij->j", c, c, dtype=np.int64)))
    if n_arms == 2:  # arm 1's cumulative plays are t + 1 minus arm 0's: the same integers, from arm 0's sums
        s1, s2 = sums[0]
        t1 = np.arange(1, T + 1, dtype=np.int64)
        sums.append((n * t1 - s1, n * t1 * t1 - 2 * t1 * s1 + s2))
    means = [s1 / n for s1, _ in sums]
    variances = [(n * s2 - s1 * s1) / (n * n) for s1, s2 in sums]
    return np.array(means), np.array(variances)


def _gaps_of_moments(mom0: tuple[np.ndarray, np.ndarray], mom1: tuple[np.ndarray, np.ndarray],
                     n: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per arm: |difference of two samples' mean cumulative plays| and its standard error, per round."""
    (m0, var0), (m1, var1) = mom0, mom1
    for a in range(m0.shape[0]):
        yield np.abs(m0[a] - m1[a]), np.sqrt((var0[a] + var1[a]) / n)


def _cumulative_gaps(v0: np.ndarray, v1: np.ndarray, n_arms: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per arm: |difference of the two samples' mean cumulative plays| and its standard error, per round."""
    yield from _gaps_of_moments(_play_moments(v0, n_arms), _play_moments(v1, n_arms), v0.shape[0])


def _first_of(diff: np.ndarray, se: np.ndarray, n: int, z: float) -> int | None:
    hit = np.flatnonzero((diff > z * se) & (diff > 0.5 / n))
    return int(hit[0]) if hit.size else None


def _first_difference(v0: np.ndarray, v1: np.ndarray, n_arms: int, z: float = 6.0) -> int | None:
    """The first round at which the two samples' cumulative plays of some arm differ beyond noise
    (|mean difference| > z standard errors, or any difference where both sides are constant)."""
    firsts = [f for diff, se in _cumulative_gaps(v0, v1, n_arms) if (f := _first_of(diff, se, v0.shape[0], z)) is not None]
    return min(firsts, default=None)


@dataclass(frozen=True)
class HorizonChoice:
    """What :func:`discover_horizon` found: the horizon, the first data-dependent round (None: none
    seen up to ``tried``), and why, in one sentence."""

    horizon: int
    first_dependent_round: int | None
    tried: int
    reason: str


def _background_moments(policy: PolicyLike, protocol: Protocol, table: np.ndarray, n_per: int,
                        seed: np.random.SeedSequence) -> tuple[np.ndarray, np.ndarray]:
    """The play moments (:func:`_play_moments`) of ``n_per`` pilot views of one background: a task of
    :func:`discover_horizon` on the engine, which sends back 2 K T numbers, not the views."""
    v = run_tables(policy, protocol, table[None], n_per, np.random.default_rng(seed))[0]
    return _play_moments(v, int(policy.n_arms))


def discover_horizon(policy_for: Callable[[int], PolicyLike], protocol: Protocol, seed: np.random.SeedSequence,
                     reward_range: tuple[float, float], alphabet: Sequence[float] | None = None, *,
                     start: int = 48, tail: int = 48, cap: int = HORIZON_CAP,
                     cells: int = PILOT_CELLS, engine: Engine = SERIAL,
                     progress: Callable[[str], None] | None = None) -> HorizonChoice:
    """The horizon for a policy without a ledger: run both extreme backgrounds (arm 0 best and the
    others worst, and the reverse) side by side, doubling T from ``start`` until the views depend on
    the input at some round t (the first data-dependent decision), then audit ``tail`` rounds past
    it. Stops at ``cap`` rounds, or earlier where 2 x 16 pilot runs no longer fit in ``cells``.
    The two backgrounds run as two tasks on ``engine`` (each with its own seed, so the choice does not
    depend on the engine): a policy stepped in Python spends its time per step, not per run. ``progress``
    hears of each horizon tried.
    """
    lo, hi = input_range(reward_range, alphabet)
    T = start
    tried = 0
    view = isinstance(protocol, ViewDP)
    while True:
        n_per = min(200, cells // (2 * T))
        if n_per < 16 or T > cap:
            break
        policy = policy_for(T)
        K = int(policy.n_arms)
        if view:
            tables = np.stack([np.full(T, hi), np.full(T, lo)])
        else:
            tables = np.stack([background_table([hi] + [lo] * (K - 1), T, (lo, hi), alphabet),
                               background_table([lo] + [hi] * (K - 1), T, (lo, hi), alphabet)])
        if progress is not None:
            progress(f"horizon discovery: T = {T}, two extreme backgrounds, {n_per} pilot runs each")
        mom = engine.map(_background_moments, [(policy, protocol, tables[i], n_per, ss)
                                               for i, ss in enumerate(seed.spawn(2))])
        tried = T
        firsts = [f for diff, se in _gaps_of_moments(mom[0], mom[1], n_per) if (f := _first_of(diff, se, n_per, 6.0))
                  is not None]
        first = min(firsts, default=None)
        if first is not None:
            if first < start:
                return HorizonChoice(start, first, tried, "default")
            horizon = first + 1 + tail
            return HorizonChoice(horizon, first, tried, (
                f"the views first depend on the input at round {first} (two extreme backgrounds, {n_per} pilot runs "
                f"each), so the audit runs {tail} rounds past it"))
        T *= 2
    limit = "the cap" if tried * 2 > cap else "the pilot budget"
    return HorizonChoice(start, None, tried, (
        f"no action depended on the input within {tried} rounds (two extreme backgrounds; {limit} stops the "
        f"search there), so no horizon up to {tried} shows a decision"))


def _separation(v0: np.ndarray, v1: np.ndarray, n_arms: int) -> tuple[float, int | None]:
    """How far apart two samples of views are: the largest z-score, over arms and rounds, of the
    difference of the mean cumulative plays of an arm (a deterministic difference scores 1e6), and the
    first round at which it exceeds 6 standard errors (None: never)."""
    n = v0.shape[0]
    best, firsts = 0.0, []
    for diff, se in _cumulative_gaps(v0, v1, n_arms):
        z = np.where(se > 0, diff / np.where(se > 0, se, 1.0), np.where(diff > 0.5 / n, 1e6, 0.0))
        best = max(best, float(z.max(initial=0.0)))
        f = _first_of(diff, se, n, 6.0)
        if f is not None:
            firsts.append(f)
    return best, min(firsts, default=None)


@dataclass(frozen=True)
class ThresholdSearch:
    """What :func:`threshold_pairs` found: candidate pairs, the horizon they need, and what was tried."""

    specs: list[PairSpec]
    horizon: int
    info: dict[str, object]


#: the z-score at which the two sides of a pilot pair count as producing different actions
SEPARATED = 5.0
#: the two orientations of the threshold family: arm 0 the better arm, or the worse
_ORIENTATIONS = ("better", "worse")
#: a pilot pair scored: how far apart its two sides' actions are (:func:`_separation`), the first round they
#: differ beyond noise (None: never), and the pair
Scored = tuple[float, int | None, PairSpec]


def threshold_pairs(policy_for: Callable[[int], PolicyLike], protocol: Protocol, horizon: int, seed: np.random.SeedSequence,
                    reward_range: tuple[float, float], alphabet: Sequence[float] | None = None, *,
                    grid: int = 32, levels: int = 4, scan_rounds: int = 16, keep: int = 4,
                    max_horizon: int | None = None, cells: int = PILOT_CELLS, stop_at_noise: bool = False,
                    engine: Engine = SERIAL, progress: Callable[[str], None] | None = None) -> ThresholdSearch:
    """Backgrounds that put the policy's decision at its threshold, searched as a black-box optimisation.

    Family: per-arm constant means, the special arm 0 at m + g/2 and every other arm at m - g/2 (arm 0
    the *better* arm) or the reverse (arm 0 the *worse* arm), m the middle of the range. For each
    orientation a bisection on the gap g (each step runs ``grid`` gaps at once and keeps the interval
    where the mean share of arm-0 plays jumps most; ``levels`` steps) brackets the place where a
    decision flips. At the two bracketing gaps the canary's round is searched: ``scan_rounds`` rounds
    spread over the horizon (and rounds 0, 1), each pair's two sides run side by side on a pilot, and
    scored by how far apart their actions are (:func:`_separation`). A code that tests in batches with
    sums restarting each batch needs the canary inside the deciding batch, and a code whose next block
    plays the same arm either way shows the decision only later: so when no candidate's two sides
    produce different actions within the horizon, the horizon doubles (the policy rebuilt by
    ``policy_for``) up to ``max_horizon`` (default 8 x ``horizon``, capped by :data:`HORIZON_CAP`), the
    bisection and scan run again, and the first horizon where some pair separates, plus 48 rounds
    past its first difference, is returned. The ``keep`` best-separated pairs (and the old rounds-0/1
    pairs of the bracketing gaps) are the candidates; ranking on small samples, then fresh samples,
    decide (:func:`search`), so the pilot's choices cost no validity. Only Table and Interactive DP
    inputs have arms; every pilot batch stays within ``cells`` run-rounds. With ``stop_at_noise`` (for
    a policy whose every pilot run-round is a Python call: a one-run class through an adapter) the
    bisection stops after the first level whose largest jump is within noise (its z-score over the
    runs' shares below :data:`SEPARATED`): the gaps inside that interval are ones the pilot cannot tell
    apart, so a finer level would narrow at random, and one gap (the interval's middle) is scanned
    instead of two: a third of the run-rounds per horizon for a share that never jumps beyond noise
    (TreeCounterGreedy's; docs/accuracy-and-speed.md). The two orientations run as
    two tasks on ``engine`` (each from its own seed, so the result does not depend on the engine);
    ``progress`` hears of each horizon tried.
    """
    if isinstance(protocol, ViewDP):
        return ThresholdSearch([], horizon, {"skipped": "View DP inputs have no per-arm means"})
    lo, hi = input_range(reward_range, alphabet)
    cap = min(HORIZON_CAP, 8 * horizon if max_horizon is None else max_horizon)
    T = horizon
    tried: list[dict[str, object]] = []
    fallback: list[PairSpec] = []
    for s_T in _seed_stream(seed):
        policy = policy_for(T)
        n_per = int(min(32, cells // max(1, grid * T)))
        if n_per < 4:
            tried.append({"horizon": T, "skipped": "the pilot budget"})
            break
        # the two orientations are independent: one task each on the engine
        tasks = [(policy, protocol, orient, T, (lo, hi), alphabet, grid, levels, scan_rounds, n_per, cells, ss,
                  stop_at_noise)
                 for orient, ss in zip(_ORIENTATIONS, s_T.spawn(2))]
        row: dict[str, object] = {"horizon": T, "runs_per_gap": n_per}
        if progress is not None:
            upto = "up to " if stop_at_noise else ""
            progress(f"threshold search: T = {T} (up to {cap}), {grid} gaps x {upto}{levels} levels, {n_per} pilot runs "
                     "each")
        scored: list[Scored] = []
        for orient, (info, found) in zip(_ORIENTATIONS, engine.map(_threshold_orientation, tasks)):
            row[orient] = info
            scored += found
            if T == horizon:
                fallback += [sp for _, _, sp in found if sp.round in (0, 1)]
        tried.append(row)
        scored.sort(key=lambda x: -x[0])
        separated = [x for x in scored if x[0] >= SEPARATED and x[1] is not None]
        if separated or 2 * T > cap:
            return _threshold_choice(scored, separated, T, horizon, fallback, tried, keep)
        T *= 2
    return ThresholdSearch([sp for sp in fallback if sp.round < horizon - 1], horizon,
                           {"tried": tried, "separated": False, "horizon": horizon})


def _threshold_choice(scored: list[Scored], separated: list[Scored], T: int, horizon: int, fallback: list[PairSpec],
                      tried: list[dict[str, object]], keep: int) -> ThresholdSearch:
    """The candidates :func:`threshold_pairs` passes on from the last horizon ``T`` it tried: the ``keep``
    best-separated pairs (the best scored when none separated) and, at the audit's own horizon, the
    rounds-0/1 ``fallback``; the horizon is extended past the chosen pairs' first difference when the
    separation needed a longer one."""
    chosen = separated[:keep] if separated else scored[:keep]
    new_T = horizon
    if separated and T > horizon:
        new_T = min(T, max(horizon, max(f for _, f, _ in chosen if f is not None) + 1 + DEFAULT_TAIL))
    specs = [sp for _, _, sp in chosen] + [sp for sp in fallback if sp not in [c[2] for c in chosen]]
    if new_T != horizon:
        specs = [sp for _, _, sp in chosen]  # the fallback's rounds were sized for the old horizon
    # the best pairs passed on, each with the horizon its pilot ran at: when no horizon separated, the
    # audit stays at ``horizon`` while the last pilot ran at T, and a canary round past the audit's
    # horizon would name a pair the audit never ran (it is dropped below)
    info: dict[str, object] = {
        "tried": tried, "separated": bool(separated), "horizon": new_T,
        "best": [{"pair": sp.label(), "separation": round(min(z, 1e6), 2), "first_difference": f,
                  "scored_at_horizon": T} for z, f, sp in chosen if sp.round < new_T - 1]}
    if not specs:
        info["skipped"] = "no gap changed the policy's actions"
    return ThresholdSearch([sp for sp in specs if sp.round < new_T - 1], new_T, info)


def _jump_z(v: np.ndarray) -> float:
    """The z-score of the difference in arm-0 share between two gaps' pilot runs ``v`` (2, n, T), each run's
    share one observation (infinite for a deterministic jump, 0 for none)."""
    per_run = (v == 0).mean(axis=2)
    diff = abs(float(per_run[1].mean() - per_run[0].mean()))
    se = math.sqrt(float(per_run.var(axis=1, ddof=1).sum()) / per_run.shape[1])
    if se == 0:
        return math.inf if diff > 0 else 0.0
    return diff / se


def _seed_stream(seed: np.random.SeedSequence) -> Iterator[np.random.SeedSequence]:
    """One child seed per horizon tried, in order."""
    while True:
        yield seed.spawn(1)[0]


def _threshold_orientation(policy: PolicyLike, protocol: Protocol, orient: str, T: int, bounds: tuple[float, float],
                           alphabet: Sequence[float] | None, grid: int, levels: int, scan_rounds: int, n_per: int,
                           cells: int, seed: np.random.SeedSequence, stop_at_noise: bool = False
                           ) -> tuple[dict[str, object], list[Scored]]:
    """One orientation of :func:`threshold_pairs` at horizon ``T`` (a task on the engine): the bisection
    on the gap, then the canary-round scan at the two bracketing gaps. Returns what it found (the gap
    interval, the share jump, the best separation) and the scanned pairs with their scores; when no gap
    changes the actions, no pairs."""
    lo, hi = bounds
    mid, span = 0.5 * (lo + hi), hi - lo
    K = int(policy.n_arms)
    rng = np.random.default_rng(seed)
    sign = 1.0 if orient == "better" else -1.0

    def means_of(g: float) -> list[float]:
        return [mid + sign * g / 2] + [mid - sign * g / 2] * (K - 1)

    a, b, best_jump, at_noise = 0.0, span, 0.0, None
    for level in range(levels):
        gaps = np.linspace(a, b, grid)
        tables = np.stack([background_table(means_of(g), T, (lo, hi), alphabet) for g in gaps])
        v = run_tables(policy, protocol, tables, n_per, rng)
        share = (v == 0).mean(axis=(1, 2))
        jumps = np.abs(np.diff(share))
        i = int(np.argmax(jumps))
        if jumps[i] == 0:
            break
        best_jump = float(jumps[i])
        a, b = float(gaps[i]), float(gaps[i + 1])
        if stop_at_noise:
            z = _jump_z(v[i:i + 2])
            if z < SEPARATED:
                at_noise = {"level": level + 1, "z": round(z, 2)}
                break
    info: dict[str, object] = {"gap_interval": [a, b], "share_jump": best_jump}
    if at_noise is not None:
        info["stopped_at_noise"] = at_noise
    if best_jump == 0:
        return info, []
    rounds = sorted({0, 1, *np.linspace(0, T - 2, scan_rounds).astype(int).tolist()})
    rounds = [j for j in rounds if 0 <= j < T - 1]
    # the bracketing gaps a and b coincide when the bisection closed on a point: one pair per (gap, round)
    scanned = (a, b) if at_noise is None else (0.5 * (a + b),)
    specs = list(dict.fromkeys(PairSpec(int(j), "means", "none", tuple(float(x) for x in means_of(g)))
                               for g in scanned for j in rounds))
    n_scan = int(min(32, cells // max(1, 2 * len(specs) * T)))
    if n_scan < 4:
        return info, [(0.0, None, sp) for sp in specs if sp.round in (0, 1)]
    pairs = [make_pair(sp, protocol, K, T, (lo, hi), alphabet) for sp in specs]
    v = run_tables(policy, protocol, np.stack([d for p in pairs for d in (p.d0, p.d1)]), n_scan, rng)
    scored = []
    for i, sp in enumerate(specs):
        z, first = _separation(v[2 * i], v[2 * i + 1], K)
        scored.append((z, first, sp))
    info["best_separation"] = max(z for z, _, _ in scored)
    return info, scored


class _RankingRowBase(TypedDict):
    pair: str  # the candidate's label
    family: str  # :func:`family_of`
    membership_selection_bound: float  # the membership attack's bound on the selection split
    statistic: str  # the test it chose
    separation: float  # how far apart the two sides' views were (rounded)


class RankingRow(_RankingRowBase, total=False):
    """One candidate pair ranked on small samples (a row of the search's ``ranking``)."""

    likelihood_mean_loss: float  # the mean privacy loss of its screening runs (a policy with a ledger)
    stage: str  # "pilot" or "ranked"


#: one candidate ranked: its fitted membership attack, its ranking row, its screening losses (None without them)
Ranked = tuple[MembershipCandidate, RankingRow, np.ndarray | None]


class SweepRow(TypedDict):
    """One (pattern, horizon) :func:`horizon_sweep` tried."""

    pair: str
    horizon: int
    pilot_bound: float  # the membership attack's selection bound
    separation: float


@dataclass
class SearchResult:
    """The final (fresh-sample) results of each attack at its best pair, and the ranking."""

    membership: AuditResult | None  # None when the caller tests the membership attack itself
    likelihood: AuditResult | None
    best_membership_spec: PairSpec | Pair
    best_likelihood_spec: PairSpec | Pair | None
    ranking: list[RankingRow] = field(default_factory=list)
    #: the candidates ranked on the full sizes, in the order of the ranking's "ranked" rows
    ranked_specs: list[PairSpec | Pair] = field(default_factory=list)
    #: the membership attack fitted on the best pair's ranking views (what the fresh test evaluates)
    best_membership_candidate: MembershipCandidate | None = None


def _as_pair(item: PairSpec | Pair, protocol: Protocol, n_arms: int, horizon: int, rr: tuple[float, float],
             alphabet: Sequence[float] | None) -> Pair:
    """A candidate is a :class:`PairSpec` the search builds, or a :class:`Pair` a user gave (``--pair``)."""
    return item if isinstance(item, Pair) else make_pair(item, protocol, n_arms, horizon, rr, alphabet)


def family_of(item: PairSpec | Pair) -> str:
    """The family of pairs a candidate belongs to (for the findings' record of what was searched)."""
    if isinstance(item, Pair):
        return "read-out" if "read-out" in (item.label or "") else "given pair"
    if item.means is not None:
        return "threshold, arm 0 better" if item.means[0] >= item.means[-1] else "threshold, arm 0 worse"
    if item.adversary not in ("none", None):
        return "adversary"
    return "constant background"


def _label(item: PairSpec | Pair) -> str:
    if isinstance(item, Pair):
        return item.label or "the given pair"
    return item.label()


def _has_ledger(policy: PolicyLike) -> bool:
    return hasattr(policy, "ledger")


def _rank(policy: PolicyLike, protocol: Protocol, spec: PairSpec | Pair, seed: np.random.SeedSequence, horizon: int,
          rr: tuple[float, float], delta: float, confidence: float, n_train: int, n_select: int,
          n_screen: int | None, alphabet: Sequence[float] | None = None) -> Ranked:
    """Rank one candidate pair (a task of :func:`search`): its fitted membership test and, with
    ``n_screen``, the privacy losses of ``n_screen`` runs (None if the policy keeps no ledger)."""
    K = int(policy.n_arms)
    pair = _as_pair(spec, protocol, K, horizon, rr, alphabet)
    s_m, s_l = seed.spawn(2)
    cand = fit_select(policy, protocol, pair, s_m, delta=delta, confidence=confidence,
                      n_train=n_train, n_select=n_select)
    row: RankingRow = {"pair": _label(spec), "family": family_of(spec),
                       "membership_selection_bound": cand.selection_bound, "statistic": cand.test.statistic,
                       "separation": round(cand.extra.get("separation", 0.0), 3)}
    loss = None
    if n_screen is not None:
        try:
            loss, _ = privacy_losses(policy, protocol, pair, n_screen, s_l)
        except DPAuditError:
            loss = None
        else:
            row["likelihood_mean_loss"] = float(np.mean(loss))
    return cand, row, loss


#: cells (runs x rounds) of one batched ranking task: a group of candidate pairs sampled together
RANK_CELLS = 20_000_000


def _rank_group(policy: PolicyLike, protocol: Protocol, specs: Sequence[PairSpec | Pair], seed: np.random.SeedSequence,
                horizon: int, rr: tuple[float, float], delta: float, confidence: float, n_train: int,
                n_select: int, alphabet: Sequence[float] | None = None) -> list[Ranked]:
    """Rank a group of candidate pairs from one batch of runs (a task of :func:`search` for policies
    that run step by step without a ledger: one numpy step serves every pair, instead of a Python
    loop over rounds per pair and split)."""
    K = int(policy.n_arms)
    pairs = [_as_pair(spec, protocol, K, horizon, rr, alphabet) for spec in specs]
    tables = np.stack([d for p in pairs for d in (p.d0, p.d1)])
    n = n_train + n_select
    views = run_tables(policy, protocol, tables, n, np.random.default_rng(seed))
    return [_fit_pair(K, spec, pair, views[2 * i], views[2 * i + 1], n_train, delta, confidence)
            for i, (spec, pair) in enumerate(zip(specs, pairs))]


def _fit_pair(K: int, spec: PairSpec | Pair, pair: Pair, v0: np.ndarray, v1: np.ndarray, n_train: int, delta: float,
              confidence: float) -> Ranked:
    """One pair of a group ranked from its views (the first ``n_train`` of each side train, the rest select)."""
    cand = fit_select_views(K, pair, v0[:n_train], v1[:n_train], v0[n_train:], v1[n_train:], delta=delta,
                            confidence=confidence)
    return (cand, {"pair": _label(spec), "family": family_of(spec),
                   "membership_selection_bound": cand.selection_bound, "statistic": cand.test.statistic,
                   "separation": round(cand.extra.get("separation", 0.0), 3)}, None)


def _group_slice(policy: PolicyLike, protocol: Protocol, specs: Sequence[PairSpec | Pair], seed: np.random.SeedSequence,
                 horizon: int, rr: tuple[float, float], n: int, alphabet: Sequence[float] | None,
                 copies: tuple[int, int]) -> np.ndarray:
    """Runs ``copies`` of one group's batch (:func:`_rank_group`'s runs, seeded as there), flat (hi - lo, T): a task
    of :func:`_rank_all` for a policy run copy by copy, whose batch is split over the engine's workers."""
    K = int(policy.n_arms)
    tables = np.stack([d for sp in specs for p in (_as_pair(sp, protocol, K, horizon, rr, alphabet),)
                       for d in (p.d0, p.d1)])
    return _compact(run_tables(policy, protocol, tables, n, np.random.default_rng(seed), copies=copies), K)


def _compact(views: np.ndarray, n_arms: int) -> np.ndarray:
    """Actions in the smallest integer type that holds ``n_arms`` arms (what travels between processes)."""
    return views.astype(np.int8 if n_arms <= 127 else np.int16 if n_arms <= 32767 else np.int64, copy=False)


def _fit_pair_task(K: int, spec: PairSpec | Pair, protocol: Protocol, horizon: int, rr: tuple[float, float],
                   alphabet: Sequence[float] | None, v0: np.ndarray, v1: np.ndarray, n_train: int, delta: float,
                   confidence: float) -> Ranked:
    return _fit_pair(K, spec, _as_pair(spec, protocol, K, horizon, rr, alphabet), v0.astype(np.int64),
                     v1.astype(np.int64), n_train, delta, confidence)


def _slices(n: int, parts: int) -> list[tuple[int, int]]:
    """``range(n)`` in ``parts`` contiguous slices of nearly equal length (none empty)."""
    bounds = np.linspace(0, n, max(1, min(parts, n)) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _groups(n_specs: int, cells_per_pair: int) -> list[range]:
    """Candidate pairs in groups of at most ``RANK_CELLS`` cells (depends on the sizes only, so the
    findings do not depend on who runs the groups)."""
    size = max(1, RANK_CELLS // max(1, cells_per_pair))
    return [range(i, min(i + size, n_specs)) for i in range(0, n_specs, size)]


#: successive halving of the search: every pair ranked on n_train // PILOT_DIVISOR views (at least PILOT_MIN)
#: per split, the PILOT_KEEP most promising on the full sizes
PILOT_DIVISOR, PILOT_MIN, PILOT_KEEP = 8, 250, 8


def _rank_split(policy: PolicyLike, protocol: Protocol, specs: Sequence[PairSpec | Pair], groups: Sequence[range],
                group_seeds: Sequence[np.random.SeedSequence], horizon: int, rr: tuple[float, float], delta: float,
                confidence: float, n_train: int, n_select: int, alphabet: Sequence[float] | None, engine: Engine,
                workers: int, ranked: Callable[[int, Ranked], None]) -> list[Ranked]:
    """:func:`_rank_group` of every group with each group's batch of runs split into ``workers`` slices run on the
    engine (:func:`_group_slice`), then each pair fitted as a task of its own: the same views, fits and rows."""
    n = n_train + n_select
    K = int(policy.n_arms)
    tasks, owner = [], []
    for gi, (g, ss) in enumerate(zip(groups, group_seeds)):
        for sl in _slices(2 * len(g) * n, workers):
            tasks.append((policy, protocol, [specs[i] for i in g], ss, horizon, rr, n, alphabet, sl))
            owner.append(gi)
    parts = engine.map(_group_slice, tasks)
    fits = []
    for gi, g in enumerate(groups):
        views = np.concatenate([p for p, o in zip(parts, owner) if o == gi]).reshape(2 * len(g), n, horizon)
        fits += [(K, specs[i], protocol, horizon, rr, alphabet, views[2 * j], views[2 * j + 1], n_train, delta,
                  confidence) for j, i in enumerate(g)]
    return engine.map(_fit_pair_task, fits, on_result=ranked)


def _rank_all(policy: PolicyLike, protocol: Protocol, specs: Sequence[PairSpec | Pair], seed: np.random.SeedSequence,
              horizon: int, rr: tuple[float, float], delta: float, confidence: float, n_train: int, n_select: int,
              n_screen: int | None, alphabet: Sequence[float] | None, engine: Engine,
              progress: Callable[[str], None] | None, finished: list[RankingRow], t0: float, stage: str) -> list[Ranked]:
    """Rank ``specs`` on the engine: (candidate, ranking row, screening losses) per pair, in order; each row
    is appended to ``finished`` (with its ``stage``) as it completes."""
    rank_seeds = seed.spawn(len(specs))
    done = [0]

    def ranked(i: int, result: Ranked) -> None:
        done[0] += 1
        finished.append({**result[1], "stage": stage})
        if progress is not None:
            progress(f"search ({stage}): {done[0]}/{len(specs)} candidate pairs ranked ({time.perf_counter() - t0:.0f} s)")

    # pairs ranked in groups from one batch of runs unless the policy's losses are screened or it has a ledger and
    # a block path (then per pair); a ledger-free policy is grouped whichever path runs it (the same seeds)
    batched = (n_screen is None and not isinstance(protocol, InteractiveDP)
               and not (offers_blocks(policy) and _has_ledger(policy))
               and all(getattr(spec, "adversary", None) in ("none", None) for spec in specs)
               and not any(isinstance(getattr(spec, "d0", None), ContextInput) for spec in specs))
    if batched:
        groups = _groups(len(specs), 2 * (n_train + n_select) * horizon)
        group_seeds = seed.spawn(len(groups))
        workers = engine.workers if engine.parallel else 1
        if workers > 1 and len(groups) < workers and splits_copies(policy):
            # a one-run class's copies cost a Python call each per round: each group's batch is split over the
            # workers (each slice seeded as in the whole batch, so the views and the findings are the same)
            return _rank_split(policy, protocol, specs, groups, group_seeds, horizon, rr, delta, confidence, n_train,
                               n_select, alphabet, engine, workers, ranked)
        group_tasks = [(policy, protocol, [specs[i] for i in g], ss, horizon, rr, delta, confidence,
                        n_train, n_select, alphabet) for g, ss in zip(groups, group_seeds)]

        def ranked_group(i: int, result: list[Ranked]) -> None:
            for r in result:
                ranked(i, r)

        return [r for group in engine.map(_rank_group, group_tasks, on_result=ranked_group) for r in group]
    tasks = [(policy, protocol, spec, ss, horizon, rr, delta, confidence, n_train, n_select, n_screen, alphabet)
             for spec, ss in zip(specs, rank_seeds)]
    return engine.map(_rank, tasks, on_result=ranked)


def search(policy: PolicyLike, protocol: Protocol, *, horizon: int, delta: float, confidence_membership: float,
           confidence_likelihood: float | None, seed: np.random.SeedSequence,
           specs: Sequence[PairSpec | Pair] | None = None, reward_range: tuple[float, float] | None = None,
           n_train: int = 2000, n_select: int = 2000, n_test: int = 50000, n_screen: int = 2000,
           n_likelihood: int = 50000, claim: Guarantee | None = None, progress: Callable[[str], None] | None = None,
           engine: Engine = SERIAL, finished: dict[str, object] | None = None,
           alphabet: Sequence[float] | None = None, claim_epsilon: float | None = None,
           test_membership: bool = True) -> SearchResult:
    """Rank every candidate pair on small samples, then evaluate each attack's best pair afresh.

    ``confidence_likelihood=None`` skips the gray-box attack (policies without a ledger). The
    candidates are ranked on ``engine`` (see :mod:`dpaudit.engine`); the results do not depend on
    it. ``finished``, if given, receives each piece as it completes (``ranking`` rows, then the
    ``likelihood`` and ``membership`` results), so an interrupted search can report what it did.
    ``claim_epsilon`` lets the membership attack's fresh counts stop once the answer is settled
    (:class:`dpaudit.attacks.sampling.Stop`). ``test_membership=False`` leaves the membership attack's
    fresh test to the caller (``membership`` is then None; the fitted attack is
    ``best_membership_candidate``), for a caller that selects further before testing.
    """
    K = int(policy.n_arms)
    rr = reward_range or audit_range(policy)
    specs = list(specs) if specs is not None else candidate_pairs(protocol, K, horizon)
    s_rank, s_final_m, s_final_l = seed.spawn(3)
    use_lik = confidence_likelihood is not None and _has_ledger(policy)
    finished = finished if finished is not None else {}
    rows: list[RankingRow] = []
    finished["ranking"] = rows  # each row as it completes, so that an interrupted search can report them
    rank = functools.partial(_rank_all, policy, protocol, horizon=horizon, rr=rr, delta=delta,
                             confidence=confidence_membership, alphabet=alphabet, engine=engine, progress=progress,
                             finished=rows, t0=time.perf_counter())
    n_pilot = max(PILOT_MIN, n_train // PILOT_DIVISOR)
    pilot_rows: list[RankingRow] = []
    if len(specs) > PILOT_KEEP and n_train >= 2 * n_pilot:
        # successive halving: every pair on a small pilot, the most promising ones on the full ranking sizes
        s_pilot, s_rank = s_rank.spawn(2)
        pilot = rank(specs, s_pilot, n_train=n_pilot, n_select=n_pilot, n_screen=n_pilot if use_lik else None,
                     stage="pilot")
        pilot_rows = [{**row, "stage": "pilot"} for _, row, _ in pilot]
        specs = [specs[i] for i in _promising(pilot, use_lik)]
    results = rank(specs, s_rank, n_train=n_train, n_select=n_select, n_screen=n_screen if use_lik else None,
                   stage="ranked")
    ranking = pilot_rows + [{**row, "stage": "ranked"} for _, row, _ in results]
    finished["ranking"] = ranking  # the pilot's rows, then the ranked ones, each in candidate order
    use_lik = use_lik and all(loss is not None for _, _, loss in results)
    best_m, best_l = _best_pairs(specs, results, use_lik)
    lik = None
    if best_l is not None:
        pair = _as_pair(best_l[1], protocol, K, horizon, rr, alphabet)
        # the screening losses of the chosen pair say where the profile band is drawn; the bound counts
        # fresh runs only
        lik = likelihood_attack(policy, protocol, pair, delta=delta, confidence=confidence_likelihood,
                                n_runs=n_likelihood, seed=s_final_l, claim=claim, pilot=best_l[2],
                                progress=progress, engine=engine)
        finished["likelihood"] = lik
    mem = None
    if test_membership:
        # counted after the likelihood attack, so that its count may stop once it cannot raise the audit's
        # bound above the gray-box one (the floor of attacks.sampling.Stop); its seed is its own either way
        mem = evaluate(policy, protocol, best_m[2], s_final_m, n_test=n_test, delta=delta,
                       confidence=confidence_membership, n_tests=1, progress=progress, engine=engine,
                       claim=claim_epsilon, floor=lik.epsilon_lower if lik is not None else 0.0)
        finished["membership"] = mem
    return SearchResult(mem, lik, best_m[1], best_l[1] if best_l is not None else None, ranking, list(specs),
                        best_m[2])


def _promising(pilot: Sequence[Ranked], use_lik: bool) -> list[int]:
    """The candidates a pilot ranking keeps for the full sizes, in candidate order: the :data:`PILOT_KEEP` of
    largest selection bound (then separation), and with the likelihood attack the 2 of largest mean loss."""
    order = sorted(range(len(pilot)), key=lambda i: (-pilot[i][0].selection_bound,
                                                     -pilot[i][0].extra.get("separation", 0.0)))
    keep = set(order[:PILOT_KEEP])
    if use_lik and all(loss is not None for _, _, loss in pilot):
        keep |= set(sorted(range(len(pilot)), key=lambda i: -pilot[i][1]["likelihood_mean_loss"])[:2])
    return sorted(keep)


def _best_pairs(specs: Sequence[PairSpec | Pair], results: Sequence[Ranked], use_lik: bool
                ) -> tuple[tuple[float, PairSpec | Pair, MembershipCandidate],
                           tuple[float, PairSpec | Pair, np.ndarray] | None]:
    """Each attack's best ranked pair: the membership attack's by selection bound (with its fitted test), the
    likelihood attack's by mean privacy loss (with its screening losses; None without ``use_lik``). Ties keep
    the first."""
    best_m: tuple[float, PairSpec | Pair, MembershipCandidate] | None = None
    best_l: tuple[float, PairSpec | Pair, np.ndarray] | None = None
    for spec, (cand, row, loss) in zip(specs, results):
        if best_m is None or cand.selection_bound > best_m[0]:
            best_m = (cand.selection_bound, spec, cand)
        if use_lik and loss is not None and (best_l is None or row["likelihood_mean_loss"] > best_l[0]):
            best_l = (row["likelihood_mean_loss"], spec, loss)
    assert best_m is not None
    return best_m, best_l


#: the horizon sweep's first stage (its first factors); the rest run only when it showed a positive bound
#: (:func:`horizon_sweep`)
SWEEP_FIRST_STAGE = 2


def horizon_sweep(policy_for: Callable[[int], PolicyLike], protocol: Protocol, specs: Sequence[PairSpec], horizon: int,
                  seed: np.random.SeedSequence, reward_range: tuple[float, float], *, delta: float, confidence: float,
                  n: int, alphabet: Sequence[float] | None = None, factors: Sequence[int] = (1, 2, 4, 8),
                  cells: int = PILOT_CELLS, engine: Engine = SERIAL,
                  progress: Callable[[str], None] | None = None
                  ) -> tuple[PairSpec, int, MembershipCandidate, list[SweepRow]]:
    """The pair pattern and horizon at which a policy leaks most: each of ``specs`` rebuilt at ``horizon``
    x each factor (within :data:`HORIZON_CAP` and ``cells`` run-rounds in all) and scored by the
    membership attack's selection bound on ``n`` views per split (training and selection). A policy
    whose privacy loss grows with the rounds (a counter that is never reset, a noise that shrinks too
    fast) shows more at a longer horizon than at the first one its actions depend on. The factors run in
    two stages, the first :data:`SWEEP_FIRST_STAGE` (1 and 2) and then the rest (4 and 8), the later only
    when the first showed anything: a policy whose every pattern has a zero bound at 1 and 2 times the
    horizon (nothing for the sweep to choose between; a correct policy whose actions barely depend on one
    reward) is not run at 4 and 8 times it, which cost 12/15 of the sweep. Any positive bound runs every
    stage, so the rows and the choice are then those of one stage; each (pattern, horizon) keeps its seed
    either way. (Running the later stage for the first stage's leading pattern only, tried for one-run
    classes, lost NoResetEpisodicUCB's leak where another pattern grows with the rounds: 3 of 8 seeds it
    missed were flagged with every pattern swept.) This only
    chooses: the bound comes from fresh samples of the chosen attack at the chosen horizon
    (:func:`dpaudit.attacks.membership.evaluate`). Returns the pattern, the horizon, the fitted attack
    and one row per (pattern, horizon) tried."""
    planned: list[tuple[PairSpec, int]] = []
    spent = 0
    for f in factors:
        T = int(horizon * f)
        if T > HORIZON_CAP:
            break
        for spec in specs:
            cost = 4 * n * T
            if spec.round >= T - 1 or (planned and spent + cost > cells):
                continue
            planned.append((spec, T))
            spent += cost
    seeds = seed.spawn(len(planned))
    first = {int(horizon * f) for f in factors[:SWEEP_FIRST_STAGE]}
    stages = [[i for i, (_, T) in enumerate(planned) if T in first], [i for i, (_, T) in enumerate(planned) if T not in first]]
    done: list[int] = []
    results: list[Ranked] = []
    for stage in stages:
        if not stage:
            continue
        if done and max(cand.selection_bound for cand, _, _ in results) <= 0:  # the first stage showed nothing
            break
        horizons = ", ".join(str(T) for T in sorted({planned[i][1] for i in stage}))
        on_result = progress_counter(progress, f"horizon sweep (T = {horizons}): {{done}}/{{total}} run-rounds of the "
                                     "best pairs", [4 * n * planned[i][1] for i in stage])
        results += engine.map(_rank, [(policy_for(planned[i][1]), protocol, planned[i][0], seeds[i], planned[i][1],
                                       reward_range, delta, confidence, n, n, None, alphabet) for i in stage],
                              on_result=on_result)
        done += stage
    tried = [planned[i] for i in done]
    rows: list[SweepRow] = [{"pair": spec.label(), "horizon": T, "pilot_bound": float(cand.selection_bound),
                             "separation": round(float(cand.extra.get("separation", 0.0)), 3)}
                            for (spec, T), (cand, _, _) in zip(tried, results)]
    # ties (a zero bound everywhere) stay at the first horizon
    best = max(range(len(rows)), key=lambda i: (rows[i]["pilot_bound"], rows[i]["horizon"] == horizon))
    return tried[best][0], tried[best][1], results[best][0], rows


def leakage_vs_horizon(
    make_policy: Callable[[], PolicyLike],
    protocol: Protocol,
    spec: PairSpec,
    horizons: Sequence[int],
    *,
    delta: float,
    confidence: float,
    seed: np.random.SeedSequence,
    n_train: int = 2000,
    n_select: int = 2000,
    n_test: int = 20000,
    n_likelihood: int = 20000,
) -> list[dict[str, float | None]]:
    """The best pair's pattern rebuilt at each horizon T: membership and likelihood bounds against T.

    Each horizon is its own audit at ``confidence`` (one row each; a reader comparing rows should
    correct for the number of horizons).
    """
    rows = []
    for T, ss in zip(horizons, seed.spawn(len(horizons))):
        policy = make_policy()
        K = int(policy.n_arms)
        rr = audit_range(policy)
        pair = make_pair(PairSpec(min(spec.round, T - 2), spec.background, spec.adversary, spec.means), protocol, K,
                         int(T), rr)
        s_fit, s_eval, s_lik = ss.spawn(3)
        has_ledger = _has_ledger(policy)
        conf_m = 1 - (1 - confidence) / (2 if has_ledger else 1)
        cand = fit_select(policy, protocol, pair, s_fit, delta=delta, confidence=conf_m,
                          n_train=n_train, n_select=n_select)
        mem = evaluate(policy, protocol, cand, s_eval, n_test=n_test, delta=delta, confidence=conf_m)
        row = {"horizon": int(T), "membership": mem.epsilon_lower, "likelihood": None}
        if has_ledger:
            lik = likelihood_attack(policy, protocol, pair, delta=delta, confidence=conf_m,
                                    n_runs=n_likelihood, seed=s_lik)
            row["likelihood"] = lik.epsilon_lower
        rows.append(row)
    return rows
