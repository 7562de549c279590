"""Neighbouring-input search: find the pair (and adversary) that maximises an attack's bound.

The search space (our choices, guided by how the seed policies use their data; seed 001 Sec. III,
App. B-D):

* canary round j: the first rounds (every arm's first pull in round-robin initialisation, whose
  reward is the whole of that arm's first episode), the rounds just after them (the first episode
  boundaries of doubling schemes), and the middle of the horizon;
* canary row: the extreme rewards of the policy's reward range (row all-low in d, all-high in d');
* background: every other row constant at the low, middle or high reward, so that the canary alone
  decides an argmax (with a low background one high reward makes its arm the leader; with a high
  background one low reward makes it the loser);
* under Interactive DP, adversaries: the identity (q_t = o_t), constant query sequences (always arm
  0; round robin), and reactive ones that follow the outputs but pin the canary round's query to a
  chosen arm, or echo the previous output.

Ranking uses small samples (the membership attack's selection bound; the mean privacy loss from the
ledger for the likelihood attack); only the best pair of each attack is then evaluated on fresh
samples, so the final bounds need no correction for the number of pairs ranked.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.engine import SERIAL, Engine
from dpaudit.protocols import Adversary, ConstantAdversary, IdentityAdversary, InteractiveDP, Protocol, ViewDP

from .likelihood import likelihood_attack, privacy_losses
from .membership import Pair, evaluate, fit_select
from .result import AuditResult

__all__ = [
    "PinAdversary",
    "EchoAdversary",
    "PairSpec",
    "make_pair",
    "candidate_pairs",
    "SearchResult",
    "search",
    "leakage_vs_horizon",
]


@dataclass(frozen=True)
class PinAdversary(Adversary):
    """Reactive: q_t = o_t, except that the canary round's query is pinned to ``arm``."""

    round: int
    arm: int

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        q = outputs[:, t]
        return np.full_like(q, self.arm) if t == self.round else q

    def describe(self) -> str:
        return f"reactive: q_t = o_t except q_{self.round} = arm {self.arm}"


class EchoAdversary(Adversary):
    """Reactive: q_t = o_{t-1} (q_0 = o_0): the policy is told the reward of its previous choice."""

    def query(self, t: int, outputs: np.ndarray) -> np.ndarray:
        return outputs[:, max(t - 1, 0)]

    def describe(self) -> str:
        return "reactive: q_t = o_(t-1)"


@dataclass(frozen=True)
class PairSpec:
    """How a pair is built, so it can be rebuilt at another horizon (leakage against T)."""

    round: int
    background: str  # "low", "mid", "high"
    adversary: str = "none"  # "none", "identity", "constant-0", "round-robin", "pin-<arm>", "echo"

    def label(self) -> str:
        adv = "" if self.adversary == "none" else f", adversary {self.adversary}"
        return f"canary round {self.round}, background {self.background}{adv}"


def _adversary(name: str, j: int, K: int, T: int) -> Adversary | None:
    if name == "none":
        return None
    if name == "identity":
        return IdentityAdversary()
    if name == "constant-0":
        return ConstantAdversary(tuple([0] * T))
    if name == "round-robin":
        return ConstantAdversary(tuple(t % K for t in range(T)))
    if name.startswith("pin-"):
        return PinAdversary(j, int(name[4:]))
    if name == "echo":
        return EchoAdversary()
    raise DPAuditError(f"unknown adversary {name!r}.")


def make_pair(spec: PairSpec, protocol: Protocol, n_arms: int, horizon: int,
              reward_range: tuple[float, float] = (0.0, 1.0)) -> Pair:
    """Build the neighbouring inputs for ``spec``: the canary row/entry goes from low to high
    (from high to low on a high background)."""
    lo, hi = reward_range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"the reward range must be finite with low < high, got {reward_range!r}.")
    if not 0 <= spec.round < horizon - 1:
        raise DPAuditError(f"canary round {spec.round} must lie in 0..T-2 = 0..{horizon - 2}.")
    level = {"low": lo, "mid": 0.5 * (lo + hi), "high": hi}[spec.background]
    a, b = (hi, lo) if spec.background == "high" else (lo, hi)
    shape = (horizon,) if isinstance(protocol, ViewDP) else (horizon, n_arms)
    d0 = np.full(shape, level, dtype=float)
    d1 = d0.copy()
    d0[spec.round] = a
    d1[spec.round] = b
    adv = _adversary(spec.adversary, spec.round, n_arms, horizon) if isinstance(protocol, InteractiveDP) else None
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
        adversaries = (["identity", "constant-0", "round-robin", "pin-0", "echo"]
                       if isinstance(protocol, InteractiveDP) else ["none"])
    specs = []
    for adv in adversaries:
        rs = rounds if adv in ("none", "identity") else rounds[: max(1, min(3, len(rounds)))]
        for j in rs:
            for bg in backgrounds:
                specs.append(PairSpec(int(j), bg, adv))
    return specs


@dataclass
class SearchResult:
    """The final (fresh-sample) results of each attack at its best pair, and the ranking."""

    membership: AuditResult
    likelihood: AuditResult | None
    best_membership_spec: PairSpec
    best_likelihood_spec: PairSpec | None
    ranking: list[dict[str, Any]] = field(default_factory=list)


def _has_ledger(policy: Any) -> bool:
    return hasattr(policy, "ledger")


def _rank(policy: Any, protocol: Protocol, spec: PairSpec, seed: np.random.SeedSequence, horizon: int,
          rr: tuple[float, float], delta: float, confidence: float, n_train: int, n_select: int,
          n_screen: int | None) -> tuple[Any, dict[str, Any], np.ndarray | None]:
    """Rank one candidate pair (a task of :func:`search`): its fitted membership test and, with
    ``n_screen``, the privacy losses of ``n_screen`` runs (None if the policy keeps no ledger)."""
    K = int(policy.n_arms)
    pair = make_pair(spec, protocol, K, horizon, rr)
    s_m, s_l = seed.spawn(2)
    cand = fit_select(policy, protocol, pair, s_m, delta=delta, confidence=confidence,
                      n_train=n_train, n_select=n_select)
    row: dict[str, Any] = {"pair": spec.label(), "membership_selection_bound": cand.selection_bound,
                           "statistic": cand.test.statistic}
    loss = None
    if n_screen is not None:
        try:
            loss, _ = privacy_losses(policy, protocol, pair, n_screen, s_l)
        except DPAuditError:
            loss = None
        else:
            row["likelihood_mean_loss"] = float(np.mean(loss))
    return cand, row, loss


def search(
    policy: Any,
    protocol: Protocol,
    *,
    horizon: int,
    delta: float,
    confidence_membership: float,
    confidence_likelihood: float | None,
    seed: np.random.SeedSequence,
    specs: Sequence[PairSpec] | None = None,
    reward_range: tuple[float, float] | None = None,
    n_train: int = 2000,
    n_select: int = 2000,
    n_test: int = 50000,
    n_screen: int = 2000,
    n_likelihood: int = 50000,
    claim: Any = None,
    progress: Callable[[str], None] | None = None,
    engine: Engine = SERIAL,
    finished: dict[str, Any] | None = None,
) -> SearchResult:
    """Rank every candidate pair on small samples, then evaluate each attack's best pair afresh.

    ``confidence_likelihood=None`` skips the gray-box attack (policies without a ledger). The
    candidates are ranked on ``engine`` (see :mod:`dpaudit.engine`); the results do not depend on
    it. ``finished``, if given, receives each piece as it completes (``ranking`` rows, then the
    ``membership`` and ``likelihood`` results), so an interrupted search can report what it did.
    """
    K = int(policy.n_arms)
    rr = reward_range or tuple(getattr(policy, "reward_range", (0.0, 1.0)))
    if not all(math.isfinite(x) for x in rr):
        rr = (0.0, 1.0)
    specs = list(specs) if specs is not None else candidate_pairs(protocol, K, horizon)
    s_rank, s_final_m, s_final_l = seed.spawn(3)
    rank_seeds = s_rank.spawn(len(specs))
    use_lik = confidence_likelihood is not None and _has_ledger(policy)
    finished = finished if finished is not None else {}
    finished["ranking"] = []
    t0 = time.perf_counter()
    tasks = [(policy, protocol, spec, ss, horizon, rr, delta, confidence_membership, n_train, n_select,
              n_screen if use_lik else None) for spec, ss in zip(specs, rank_seeds)]

    def ranked(i: int, result: tuple[Any, dict[str, Any], Any]) -> None:
        finished["ranking"].append(result[1])
        if progress is not None:
            progress(f"search: {len(finished['ranking'])}/{len(specs)} candidate pairs ranked "
                     f"({time.perf_counter() - t0:.0f} s)")

    results = engine.map(_rank, tasks, on_result=ranked)
    ranking = [row for _, row, _ in results]
    finished["ranking"] = ranking  # in candidate order
    best_m = None
    best_l: tuple[float, PairSpec, np.ndarray] | None = None
    use_lik = use_lik and all(loss is not None for _, _, loss in results)
    for spec, (cand, row, loss) in zip(specs, results):
        if best_m is None or cand.selection_bound > best_m[0]:
            best_m = (cand.selection_bound, spec, cand)
        if use_lik and (best_l is None or row["likelihood_mean_loss"] > best_l[0]):
            best_l = (row["likelihood_mean_loss"], spec, loss)
    assert best_m is not None
    mem = evaluate(policy, protocol, best_m[2], s_final_m, n_test=n_test, delta=delta,
                   confidence=confidence_membership, n_tests=1, progress=progress, engine=engine)
    finished["membership"] = mem
    lik = None
    if use_lik and best_l is not None:
        pair = make_pair(best_l[1], protocol, K, horizon, rr)
        # the screening losses of the chosen pair pick the eps grid; the bound counts fresh runs only
        lik = likelihood_attack(policy, protocol, pair, delta=delta, confidence=confidence_likelihood,
                                n_runs=n_likelihood, seed=s_final_l, claim=claim, pilot=best_l[2],
                                progress=progress, engine=engine)
        finished["likelihood"] = lik
    return SearchResult(mem, lik, best_m[1], best_l[1] if (use_lik and best_l) else None, ranking)


def leakage_vs_horizon(
    make_policy: Callable[[], Any],
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
) -> list[dict[str, Any]]:
    """The best pair's pattern rebuilt at each horizon T: membership and likelihood bounds against T.

    Each horizon is its own audit at ``confidence`` (one row each; a reader comparing rows should
    correct for the number of horizons).
    """
    rows = []
    for T, ss in zip(horizons, seed.spawn(len(horizons))):
        policy = make_policy()
        K = int(policy.n_arms)
        rr = tuple(getattr(policy, "reward_range", (0.0, 1.0)))
        if not all(math.isfinite(x) for x in rr):
            rr = (0.0, 1.0)
        pair = make_pair(PairSpec(min(spec.round, T - 2), spec.background, spec.adversary), protocol, K, int(T), rr)
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
