"""The plan of the central protocols (table, view, interactive): horizon, ledger, neighbouring search, attacks.

Parts, in order (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits", Sec. III;
DESIGN.md, "The audit pipeline"):

1. *horizon* -- ``--horizon``, the pair file's T, or :func:`audit_horizon`: 48, or for a policy whose
   first release comes later (phase-based policies such as GOPE) that release plus 48 rounds; for a
   policy without a ledger (or whose ledger shows no release within :data:`MAX_AUTO_HORIZON` rounds) the
   first round at which its actions depend on the input plus 48
   (:func:`dpaudit.attacks.neighbours.discover_horizon`);
2. *rewards* -- ``--rewards``, the policy's ``reward_alphabet``, or a probe: a policy that refuses the
   middle of its range but accepts its ends is fed only the ends;
3. *ledger* (reported, not judged: per-round composition can be looser than a claim's own analysis) --
   :func:`dpaudit.accounting.ledger_audit` of 200 runs;
4. *search and attacks* -- the protocol's candidate pairs (:func:`dpaudit.protocols.candidate_pairs`),
   under Table DP the threshold backgrounds (:func:`dpaudit.attacks.neighbours.threshold_pairs`), or the
   reviewer's pair (``--pair``); every pair ranked on small samples, then the membership (black-box) and,
   with a ledger, the likelihood (gray-box) attacks on fresh samples
   (:func:`dpaudit.attacks.neighbours.search`), the confidence split between them.

Everything samples on the audit's engine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from dpaudit.accounting import ledger_audit, policy_upper
from dpaudit.engine import SERIAL, Engine
from dpaudit.errors import DPAuditError, check_int
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols import FixedActionSet, Pair, PairSpec, Protocol, audit_range, candidate_pairs, make_pair
from dpaudit.protocols.table import readout_pairs

if TYPE_CHECKING:
    from dpaudit.attacks.neighbours import HorizonChoice as DiscoveredHorizon
    from dpaudit.attacks.neighbours import SearchResult, ThresholdSearch
    from dpaudit.protocols.pairs import UserPair

from .context import DEFAULTS, Context, Request, confidence_each, runs_text
from .cost import Searches
from .sections import Arms, JSONObject, Sections
from .setup import convert_claim, probe_alphabet, reward_alphabet_for, with_features

__all__ = ["audit", "preflight", "audit_horizon", "first_release_step", "search_summary", "MAX_AUTO_HORIZON",
           "small_sample", "CentralSections", "HorizonChoice", "HorizonSearch", "FamilySearch"]

@dataclass(frozen=True)
class HorizonSearch:
    """What the horizon discovery found: the first round whose action depends on the input (None: none within
    the rounds it tried, ``tried_up_to``)."""

    first_dependent_round: int | None
    tried_up_to: int


@dataclass
class HorizonChoice(Sections):
    """How the audit's horizon was chosen (``horizon_reason``), and the discovery's findings when it ran
    (``horizon_search``)."""

    horizon_reason: str
    horizon_search: HorizonSearch | None = None


@dataclass
class FamilySearch:
    """What the search tried of one family of pairs: how many pairs, at which horizon, how many ranked again on
    the full sample, and the best pilot and ranked (selection) bound, with the best ranked pair."""

    family: str
    horizon: int
    pairs: int = 0
    ranked: int = 0
    best_pilot: float = 0.0
    best_ranked: float | None = None
    best: str | None = None


@dataclass
class CentralSections(Sections):
    """The central plan's sections of the findings, in their order."""

    reward_alphabet: list[float] | None = None
    horizon: HorizonChoice | None = None
    threshold_search: JSONObject | None = None
    arms: Arms | None = None
    confidence_per_attack: float | None = None
    #: where the pieces ran, when the policy could not travel to the workers
    workers: str | None = None
    horizon_sweep: list[JSONObject] | None = None
    renyi_violation: list[dict[str, float]] | None = None
    search: list[JSONObject] | None = None
    search_summary: list[FamilySearch] | None = None

    def dependent_round(self) -> int | None:
        """The horizon discovery's first round whose action depends on the input (None: it did not run, or found
        none)."""
        found = self.horizon.horizon_search if self.horizon is not None else None
        return found.first_dependent_round if found is not None else None


#: the longest horizon :func:`audit_horizon` will choose on its own
MAX_AUTO_HORIZON = 16384


#: the horizon sweep tries the best pattern of this many families of pairs
SWEEP_FAMILIES = 3


def small_sample(runs: int) -> int:
    """The training, selection and screening sizes of the search for ``runs`` fresh runs per side."""
    return max(500, min(2000, runs // 10))


#: the search's training, selection and screening size for a one-run class through the per-run adapter
#: (a Python call per run and step): the size the third-party controls measured their power at
#: (benchmarks/results/controls-thirdparty.md). Fixed, not timed, so that an audit reproduces on any machine.
PER_RUN_SMALL = 500


def pilot_budgets(probe: PolicyLike, runs: int) -> tuple[int, int, bool]:
    """(pilot cells, search sample size, whether it is a one-run class) for the policy ``probe``: a one-run
    class through the per-run adapter (also behind the plug-in sandbox or a fixed action set) searches on
    :data:`PER_RUN_SMALL` runs per split; the pilot run-rounds of the horizon discovery, threshold search
    and horizon sweep are a batched policy's (a thirtieth of them missed the leak that grows with the
    rounds of an episodic counter that is never reset: 6 of 10 seeds flagged instead of 9)."""
    from dpaudit.adapters import PerRun
    from dpaudit.attacks.neighbours import PILOT_CELLS

    inner = probe
    for _ in range(3):
        inner = getattr(inner, "wrapped", inner)
    if isinstance(inner, PerRun) or getattr(inner, "per_copy", False) is True:  # the loop adapter too
        return PILOT_CELLS, min(small_sample(runs), PER_RUN_SMALL), True
    return PILOT_CELLS, small_sample(runs), False


def first_release_step(policy: PolicyLike, protocol: Protocol, data: np.ndarray, seed: np.random.SeedSequence,
                       n_runs: int = 20) -> int | None:
    """The earliest step at which any of ``n_runs`` runs on ``data`` releases (None: no release)."""
    protocol.run(policy, data, n_runs, np.random.default_rng(seed), None, record=True)
    ledger = getattr(policy, "ledger", None)
    steps = [int(r.step) for r in getattr(ledger, "releases", [])]
    return min(steps) if steps else None


def audit_horizon(policy_for: Callable[[int], PolicyLike], protocol: Protocol, seed: np.random.SeedSequence,
                  reward_range: tuple[float, float], alphabet: Sequence[float] | None = None,
                  cells: int | None = None, engine: Engine = SERIAL,
                  progress: Callable[[str], None] | None = None) -> tuple[int, str, DiscoveredHorizon | None]:
    """Choose the audit horizon. Returns (horizon, how it was chosen, the discovery's findings or None).

    A policy with a ledger: 48, or for one that releases nothing by then the first release step plus
    48 rounds, so that the view shows what the release changed (a horizon without a release audits
    nothing private). A policy without a ledger, or whose ledger shows no release within
    :data:`MAX_AUTO_HORIZON` rounds (a policy may touch its data without recording it):
    :func:`dpaudit.attacks.neighbours.discover_horizon`, the first round whose action depends on the
    input, plus 48 rounds.
    """
    from dpaudit.attacks.neighbours import discover_horizon

    T = DEFAULTS["horizon"]
    tail = DEFAULTS["horizon"]
    while hasattr(policy_for(T), "ledger"):
        policy = policy_for(T)
        d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), T, reward_range, alphabet).d0
        step = first_release_step(policy, protocol, d, seed)
        if step is not None:
            if T == DEFAULTS["horizon"]:
                return T, "default", None
            return min(step + 1 + tail, T), (f"first release at step {step}, so the audit runs {tail} rounds past "
                                             f"it (the default {DEFAULTS['horizon']} sees no release)"), None
        if T >= MAX_AUTO_HORIZON:
            break
        T *= 2
    kw = {} if cells is None else {"cells": cells}
    choice = discover_horizon(policy_for, protocol, seed, reward_range, alphabet, start=DEFAULTS["horizon"], tail=tail,
                              engine=engine, progress=progress, **kw)
    why = choice.reason
    if T >= MAX_AUTO_HORIZON:
        why = f"its ledger shows no release within {MAX_AUTO_HORIZON} rounds, so the horizon comes from its actions: " + why
    return choice.horizon, why, choice


def preflight(ctx: Context) -> None:
    """Memory and time up front (:func:`dpaudit.runner.cost.audit_preflight`), at the audit's horizon (the
    pair file's, with ``--pair``) or the default."""
    from .cost import audit_preflight

    r = ctx.request
    ctx.estimate = audit_preflight(lambda T: with_features(ctx.build(T), r.seed), ctx.protocol, runs=r.runs,
                                   horizon=estimate_horizon(r), workers=r.workers, local=r.on_this_machine,
                                   max_hours=r.max_hours, search=lambda policy: searches(policy, r, ctx.protocol.name))


def say_estimate(ctx: Context, policy: PolicyLike, horizon: int) -> None:
    """The up-front estimate redone at the chosen horizon (:func:`dpaudit.runner.cost.refresh_estimate`), said."""
    from .cost import duration, refresh_estimate

    r = ctx.request
    est = ctx.estimate
    if est is None or r.pair is not None:
        return
    elapsed = sum(float(p.seconds) for p in ctx.parts)
    rests = refresh_estimate(est, r.runs, horizon, len(candidate_pairs(ctx.protocol, int(policy.n_arms), horizon)),
                             searches(policy, r, ctx.protocol.name), elapsed)
    if rests is None or rests[1] < 10:  # a short audit needs no estimate (and a failing one shows only its error)
        return
    least, rest = rests
    if duration(least) == duration(rest):
        ctx.say(f"horizon T = {horizon}: about {duration(rest)} to go (estimated)")
    else:  # the fresh runs stop at the first look that settles the answer: the plan's least and whole cost
        ctx.say(f"horizon T = {horizon}: {duration(least)} to {duration(rest)} to go (estimated: the first if the "
                "fresh runs settle at their first look)")


def searches(policy: PolicyLike, r: Request, protocol: str) -> Searches:
    """The searches :func:`audit` runs for ``policy`` under request ``r``, as :func:`dpaudit.runner.cost.run_steps`'
    keywords (:class:`~dpaudit.runner.cost.Searches`): the search's sample size, the threshold search (Table DP
    without a pair), the horizon sweep (a black-box audit that chooses its horizon)."""
    auto = r.horizon is None and r.pair is None
    from .cost import HORIZON_MULTIPLES

    threshold = 0 if protocol != "table" or r.pair is not None else HORIZON_MULTIPLES if auto else 1
    _, small, per_run = pilot_budgets(policy, r.runs)
    return {"small": small, "threshold": threshold, "sweep": auto and not hasattr(policy, "ledger"), "frugal": per_run}


def estimate_horizon(r: Request) -> int:
    """The horizon the up-front estimate assumes: ``--horizon``, else the pair file's T (it fixes the
    horizon), else the default."""
    if r.horizon is not None:
        return int(r.horizon)
    if r.pair is not None:
        from dpaudit.protocols.pairs import pair_horizon

        T = pair_horizon(r.pair)
        if T is not None:
            return T
    return int(DEFAULTS["horizon"])


@dataclass(frozen=True)
class _Seeds:
    """The central plan's seeds, each part its own (spawned once from the audit's seed)."""

    ledger: np.random.SeedSequence
    search: np.random.SeedSequence
    horizon: np.random.SeedSequence
    threshold: np.random.SeedSequence
    sweep: np.random.SeedSequence
    sweep_final: np.random.SeedSequence

    @classmethod
    def of(cls, seed: int) -> "_Seeds":
        ledger, search, horizon, threshold = np.random.SeedSequence(seed).spawn(4)
        sweep, sweep_final = np.random.SeedSequence([seed, 0x5EE9]).spawn(2)
        return cls(ledger, search, horizon, threshold, sweep, sweep_final)


@dataclass
class _Plan:
    """The central plan's state between its steps (:func:`audit`)."""

    ctx: Context
    sections: CentralSections
    seeds: _Seeds
    #: the arms of the policy as first built, the reward range audited and the rewards it may feed (None: any)
    n_arms: int = 0
    rr: tuple[float, float] = (0.0, 1.0)
    alphabet: tuple[float, ...] | None = None
    #: the pilots' budgets: run-rounds per pilot, the search's sample size, whether it is a one-run class
    cells: int = 0
    small: int = 0
    per_run: bool = False
    #: the reviewer's pair (``--pair``) and its fixed action set, if it gives one
    user_pair: UserPair | None = None
    features: np.ndarray | None = None
    horizon: int | None = None
    pilot_engine: Engine = SERIAL
    threshold: ThresholdSearch | None = None
    #: the policy audited at :attr:`horizon`, once built (:func:`_build_audited`)
    policy: PolicyLike | None = None
    has_ledger: bool = False
    conf_each: float = 1.0
    engine: Engine = SERIAL
    specs: list[PairSpec | Pair] = field(default_factory=list)

    def build(self, T: int) -> PolicyLike:
        """The policy at horizon ``T`` with its action set: the pair's, else a fixed one for a linear policy."""
        policy = self.ctx.build(T)
        return FixedActionSet(policy, self.features) if self.features is not None else \
            with_features(policy, self.ctx.request.seed)

    @property
    def audited(self) -> PolicyLike:
        assert self.policy is not None, "the audited policy is built before the steps that use it"
        return self.policy

    @property
    def sweeps(self) -> bool:
        """Whether the horizon sweep runs: a black-box audit free to choose its horizon also tries the search's best
        pairs at longer horizons (a leak that grows with the rounds) before its one fresh test."""
        return not self.has_ledger and self.user_pair is None and self.ctx.request.horizon is None


def audit(ctx: Context) -> None:
    """The central plan (module docstring), filling ``ctx``: the rewards, the horizon (the pair's, or chosen), the
    threshold search, the ledger, the pair search and attacks, the horizon sweep of a black-box audit."""
    _refuse_interactive(ctx)
    p = _rewards(ctx)
    _pair_file(p)
    _pilot_engine(p)
    _choose_horizon(p)
    _threshold_search(p)
    _build_audited(p)
    _ledger(p)
    ctx.set_upper(policy_upper(p.audited, p.horizon, ctx.delta, protocol=ctx.protocol.name))  # from the ledger
    _candidates(p)
    res = _search(p)
    _record_attacks(p, res)
    _nothing_depended(p)


def _refuse_interactive(ctx: Context) -> None:
    """A policy that only observes the arm it chose cannot be fed an adversary's query (Interactive DP)."""
    if ctx.protocol.name == "interactive" and not getattr(ctx.build(DEFAULTS["horizon"]), "accepts_queries", True):
        raise DPAuditError(
            f"policy {ctx.request.spec!r} cannot be audited under Interactive DP: it only observes the arm it chose "
            "(its schedule fixes the observed arm), so an adversary's query cannot be fed back; use "
            "--protocol table or --protocol view.")


def _rewards(ctx: Context) -> _Plan:
    """The plan's start: its sections and seeds, the claim read (a missing claim is refused before any search
    runs), the reward range and alphabet (a policy that refuses the middle of its range gets its ends), and the
    pilots' budgets (one-run classes cost a Python call per run and step: smaller ones)."""
    r = ctx.request
    p = _Plan(ctx, CentralSections(), _Seeds.of(r.seed), horizon=r.horizon)
    ctx.sections = p.sections
    ctx.say("choice of the horizon")
    probe = p.build(DEFAULTS["horizon"])
    ctx.read_claim(probe, r.spec)
    p.n_arms, p.rr = int(probe.n_arms), audit_range(probe)
    p.alphabet = reward_alphabet_for(probe, r.rewards, p.rr)
    if p.alphabet is None:
        p.alphabet = probe_alphabet(probe, ctx.protocol, p.rr, ctx.notes)
    if p.alphabet is not None:
        p.sections.reward_alphabet = list(p.alphabet)
    p.cells, p.small, p.per_run = pilot_budgets(probe, r.runs)
    return p


def _pair_file(p: _Plan) -> None:
    """``--pair``: the reviewer's pair fixes the horizon, and its contexts (one K x d action set) the features."""
    ctx, r = p.ctx, p.ctx.request
    if r.pair is None:
        return
    from dpaudit.protocols.pairs import load_pair

    p.user_pair = load_pair(r.pair, n_arms=p.n_arms, protocol=ctx.protocol, reward_range=p.rr, alphabet=p.alphabet)
    T_pair = int(np.asarray(p.user_pair.d0).shape[0])
    if p.horizon is not None and int(p.horizon) != T_pair:
        raise DPAuditError(f"--horizon {p.horizon} differs from the pair's T = {T_pair}; the pair file fixes the "
                           "horizon, so leave --horizon out.")
    p.horizon = T_pair
    contexts = getattr(p.user_pair, "contexts", None)
    if contexts is not None:
        contexts = np.asarray(contexts, dtype=float)
        if contexts.ndim != 2:
            raise DPAuditError("the pair's contexts must be one fixed action set (K x d) under the central "
                               "protocols; per-round contexts (T x K x d) are the joint protocol's input "
                               "(--protocol joint).")
        p.features = contexts
    p.sections.horizon = HorizonChoice(f"the horizon of the pair in {r.pair}")


def _pilot_engine(p: _Plan) -> None:
    """The pilots run on the workers when the policy can travel there, else in this process."""
    p.pilot_engine = p.ctx.engine
    try:
        p.pilot_engine.check_picklable(p.build(p.horizon if p.horizon is not None else DEFAULTS["horizon"]),
                                       p.ctx.protocol)
    except DPAuditError:
        p.pilot_engine = p.pilot_engine.serial()


def _choose_horizon(p: _Plan) -> None:
    """Without ``--horizon`` or a pair: :func:`audit_horizon` chooses it, and the findings say how."""
    ctx = p.ctx
    if p.horizon is None:
        t0 = time.perf_counter()
        p.horizon, how, choice = audit_horizon(p.build, ctx.protocol, p.seeds.horizon, p.rr, p.alphabet,
                                               cells=p.cells, engine=p.pilot_engine, progress=ctx.progress)
        p.sections.horizon = HorizonChoice(how, None if choice is None else
                                           HorizonSearch(choice.first_dependent_round, choice.tried))
        if how != "default":
            ctx.notes.append(f"horizon T = {p.horizon} chosen automatically: {how}.")
        ctx.ran("horizon", "setup", f"T = {p.horizon}: {how}", time.perf_counter() - t0)
    p.horizon = check_int("--horizon", p.horizon, minimum=2)


def _threshold_search(p: _Plan) -> None:
    """Table DP without a pair: backgrounds at the policy's decision threshold, in both orientations, with the
    canary's round searched, and the horizon extended until a pair's two sides act differently
    (:func:`dpaudit.attacks.neighbours.threshold_pairs`)."""
    from dpaudit.attacks.neighbours import threshold_pairs

    ctx, r, T = p.ctx, p.ctx.request, int(p.horizon or 0)
    if ctx.protocol.name != "table" or p.user_pair is not None:
        return
    ctx.say("threshold search")
    t0 = time.perf_counter()
    p.threshold = threshold_pairs(p.build, ctx.protocol, T, p.seeds.threshold, p.rr, p.alphabet, cells=p.cells,
                                  max_horizon=None if r.horizon is None else T, stop_at_noise=p.per_run,
                                  engine=p.pilot_engine, progress=ctx.progress)
    p.sections.threshold_search = p.threshold.info
    if p.threshold.horizon != T:
        ctx.notes.append(f"horizon T = {p.threshold.horizon}: the threshold search found pairs whose two sides act "
                         f"differently only after T = {T}.")
        p.horizon = p.threshold.horizon
    ctx.ran("threshold search", "setup", f"{len(p.threshold.specs)} threshold pairs at T = {p.horizon}",
            time.perf_counter() - t0)


def _build_audited(p: _Plan) -> None:
    """The policy at the chosen horizon, its claim read again, the estimate redone there, and the confidence
    split between the attacks (the likelihood attack runs only with a ledger)."""
    ctx, r = p.ctx, p.ctx.request
    ctx.horizon = p.horizon
    p.policy = policy = p.build(int(p.horizon or 0))
    ctx.policy = policy
    say_estimate(ctx, policy, int(p.horizon or 0))
    ctx.read_claim(policy, r.spec)
    # what the per-run adapter did
    ctx.notes.extend(n for n in getattr(policy, "audit_notes", ()) if n not in ctx.notes)
    p.has_ledger = hasattr(policy, "ledger")
    p.conf_each = confidence_each(ctx, 2 if p.has_ledger else 1)
    ctx.blackbox_only = not p.has_ledger
    params = getattr(policy, "params", None)
    ctx.params = params() if callable(params) else dict(r.params)
    p.sections.arms, p.sections.confidence_per_attack = Arms(int(policy.n_arms)), p.conf_each
    if p.small < small_sample(r.runs):
        ctx.notes.append(f"the search ranked its candidates on {p.small} runs per split (code run copy by copy -- a "
                         "one-run class, loop-shaped code, a process served run by run -- costs a call per run and "
                         f"step; {small_sample(r.runs)} for a batched policy); the bound comes from the "
                         f"{r.runs} fresh runs per side as usual.")


def _ledger(p: _Plan) -> None:
    """The ledger of 200 runs composed per round (:func:`dpaudit.accounting.ledger_audit`), reported beside the
    verdict; a ledger without a release says why the bounds say nothing."""
    ctx, policy, T = p.ctx, p.audited, int(p.horizon or 0)
    ctx.stage = "ledger audit"
    if not p.has_ledger:
        return
    t0 = time.perf_counter()
    d = make_pair(PairSpec(0, "mid"), ctx.protocol, int(policy.n_arms), T, p.rr, p.alphabet).d0
    ledger = ledger_audit(policy, ctx.protocol, d, p.seeds.ledger)
    if ledger is None:
        return
    if ledger.get("releases") == 0:
        if p.sections.dependent_round() is not None:
            ctx.notes.append("its ledger records no release, yet its actions depend on its input: it uses its data "
                             "outside dpaudit's mechanisms, so only the black-box attack can judge it.")
        else:
            ctx.notes.append(f"no release happened within T = {T} rounds, so the attacks saw nothing private and "
                             "their bounds say nothing about the claim; rerun with a larger --horizon (or without "
                             "it, to let dpaudit find the first release).")
    g = ledger.pop("implied_guarantee", None)
    if g is not None:
        ledger["implied_epsilon"] = float(convert_claim(g, ctx.delta)[0])  # may be inf (an unnoised release)
    ctx.ledger = ledger
    ctx.ran("ledger", "setup", f"{ledger.get('releases', 0)} releases of {ledger.get('runs', 0)} runs composed "
                               "per round (reported beside the verdict)", time.perf_counter() - t0)


def _candidates(p: _Plan) -> None:
    """The engine of the search (this process when the policy cannot travel), and its candidate pairs: the
    reviewer's pair, else the protocol's, a linear policy's read-out pairs, and the threshold pairs."""
    ctx, policy, T = p.ctx, p.audited, int(p.horizon or 0)
    ctx.say("neighbouring-pair search and attacks")
    p.engine = ctx.engine
    try:
        p.engine.check_picklable(policy, ctx.protocol)
    except DPAuditError as exc:
        ctx.notes.append(f"ran in this process only: {exc}")
        p.engine = p.engine.serial()
        p.sections.workers = p.engine.describe()
    if p.user_pair is not None:
        p.specs = [p.user_pair]
        ctx.notes.append(f"audited on the neighbouring pair given in {ctx.request.pair} (round {p.user_pair.round} "
                         "differs); no search.")
        return
    K = int(policy.n_arms)
    p.specs = list(candidate_pairs(ctx.protocol, K, T))
    dim = getattr(policy, "dim", None)
    if (ctx.protocol.name == "table" and isinstance(dim, (int, np.integer)) and dim >= 2
            and not hasattr(getattr(policy, "wrapped", policy), "set_arms")):
        # a linear policy: the read-out pair turns the canary's pull on the estimate into an action difference
        # (policies that need a fixed action set, GOPE's phases, are left to the fixed-set pairs)
        p.specs += readout_pairs(K, int(dim), T, p.rr if p.alphabet is None else (p.alphabet[0], p.alphabet[-1]))
    if p.threshold is not None:
        p.specs += p.threshold.specs


def _search(p: _Plan) -> SearchResult:
    """Every candidate ranked on small samples, then the attacks on fresh samples
    (:func:`dpaudit.attacks.neighbours.search`); with the horizon sweep, its membership test after the sweep."""
    from dpaudit.attacks.neighbours import search

    ctx, r, policy = p.ctx, p.ctx.request, p.audited
    assert ctx.claim is not None
    t0 = time.perf_counter()
    res = search(policy, ctx.protocol, horizon=int(p.horizon or 0), delta=ctx.delta, confidence_membership=p.conf_each,
                 confidence_likelihood=p.conf_each if p.has_ledger else None, seed=p.seeds.search, specs=p.specs,
                 reward_range=p.rr, n_train=p.small, n_select=p.small, n_test=r.runs, n_screen=p.small,
                 n_likelihood=r.runs, claim=getattr(policy, "claim", None), progress=ctx.progress, engine=p.engine,
                 finished=ctx.finished, alphabet=p.alphabet, claim_epsilon=ctx.claim.epsilon,  # type: ignore[arg-type]
                 test_membership=not p.sweeps)
    # the ranking's own time: the search's, less the fresh tests it ran (their parts have their own times)
    fresh = sum(a.seconds for a in (res.membership, res.likelihood) if a is not None)
    t_ranking = time.perf_counter() - t0 - fresh
    if p.sweeps:
        _horizon_sweep(p, res)
    again = sum(1 for row in res.ranking if row.get("stage") == "ranked")
    ctx.ran("search", "setup", (f"{len(p.specs)} candidate pairs ranked on pilot runs, the best {again} again on "
                                f"{p.small} runs per side" if again < len(res.ranking) else
                                f"{len(p.specs)} candidate pairs ranked on {p.small} runs per side"),
            max(0.0, t_ranking))
    return res


def _horizon_sweep(p: _Plan, res: SearchResult) -> None:
    """The best ranked pattern of :data:`SWEEP_FAMILIES` families tried at longer horizons
    (:func:`dpaudit.attacks.neighbours.horizon_sweep`), the policy rebuilt at the horizon where it leaked most,
    and the membership attack's fresh test there."""
    from dpaudit.attacks.membership import evaluate
    from dpaudit.attacks.neighbours import horizon_sweep

    ctx, r, T = p.ctx, p.ctx.request, int(p.horizon or 0)
    assert ctx.claim is not None
    ctx.say("horizon sweep")
    best_of: dict[str, tuple[float, PairSpec]] = {}  # the best ranked pattern of each family
    for row, sp in zip([x for x in res.ranking if x.get("stage") == "ranked"], res.ranked_specs):
        fam = row.get("family", "?")
        if isinstance(sp, PairSpec) and (fam not in best_of or row["membership_selection_bound"] > best_of[fam][0]):
            best_of[fam] = (row["membership_selection_bound"], sp)
    sweep_specs = [sp for _, sp in sorted(best_of.values(), key=lambda x: -x[0])[:SWEEP_FAMILIES]]
    cand = res.best_membership_candidate
    t0 = time.perf_counter()
    if sweep_specs:
        spec, best_T, cand, rows = horizon_sweep(p.build, ctx.protocol, sweep_specs, T, p.seeds.sweep, p.rr,
                                                 delta=ctx.delta, confidence=p.conf_each, n=p.small,
                                                 alphabet=p.alphabet, cells=p.cells, engine=p.engine,
                                                 progress=ctx.progress)
        p.sections.horizon_sweep = rows
        res.best_membership_spec = spec
        tried = sorted({row["horizon"] for row in rows})
        if best_T != T:
            ctx.notes.append(f"horizon T = {best_T}: the pair '{spec.label()}' leaked most there on {p.small} runs "
                             f"per side (horizons {tried} tried).")
            _rebuild_at(p, best_T)
        ctx.ran("horizon sweep", "setup", f"the best pairs of {len(sweep_specs)} families at T = {tried}: "
                                          f"T = {p.horizon}", time.perf_counter() - t0)
    ctx.say(f"membership: fresh views at T = {p.horizon}")  # the heartbeat names this stage, not the sweep's
    res.membership = evaluate(p.audited, ctx.protocol, cand, p.seeds.sweep_final, n_test=r.runs, delta=ctx.delta,
                              confidence=p.conf_each, n_tests=1, progress=ctx.progress, engine=p.engine,
                              claim=ctx.claim.epsilon)
    ctx.finished["membership"] = res.membership


def _rebuild_at(p: _Plan, T: int) -> None:
    """The audited policy rebuilt at horizon ``T``, the per-run adapter's notes of its build replaced."""
    ctx = p.ctx
    p.horizon = ctx.horizon = T
    built_at = list(getattr(p.policy, "audit_notes", ()))
    p.policy = policy = p.build(T)
    ctx.policy = policy
    rebuilt_notes(ctx.notes, built_at, getattr(policy, "audit_notes", ()))
    params = getattr(policy, "params", None)
    ctx.params = params() if callable(params) else ctx.params


def _record_attacks(p: _Plan, res: SearchResult) -> None:
    """The attacks' bounds, their parts, the Rényi orders the likelihood attack found above the claim, the
    search's ranking and summary, and the black-box attack's power."""
    ctx, r = p.ctx, p.ctx.request
    ctx.attacks += [res.membership] + ([res.likelihood] if res.likelihood is not None else [])
    ctx.ran("membership", "bound", f"black-box: the best pair's views, {runs_text(res.membership, r.runs)} fresh runs "
                                   "per side", res.membership.seconds)
    if res.likelihood is not None:
        ctx.ran("likelihood", "bound", f"gray-box: the ledger's privacy loss, {r.runs} fresh runs",
                res.likelihood.seconds)
        ctx.renyi_violation = list(res.likelihood.details.get("renyi_violation", []))
    p.sections.renyi_violation = ctx.renyi_violation
    p.sections.search = res.ranking
    p.sections.search_summary = search_summary(res.ranking, int(p.horizon or 0))
    ctx.set_power(res.membership, len(p.specs), r.runs, p.conf_each)


def _nothing_depended(p: _Plan) -> None:
    """The reason must match the evidence: "nothing depended on the input" only when the horizon discovery
    found no dependent round, the threshold search separated no pair and no attack saw anything."""
    ctx = p.ctx
    searched = p.sections.horizon.horizon_search if p.sections.horizon is not None else None
    separated = p.threshold is not None and p.threshold.info.get("separated")
    if (searched is not None and searched.first_dependent_round is None and not separated
            and max((a.epsilon_lower for a in ctx.attacks), default=0.0) <= 0):
        ctx.unseen = (f"no action of the policy depended on its input within {searched.tried_up_to} rounds of the "
                      f"horizon discovery, and no attack told the sides of the {len(p.specs)} pairs tried apart at "
                      f"T = {p.horizon}")


def rebuilt_notes(notes: list[str], old: Sequence[str], new: Sequence[str]) -> None:
    """The per-run adapter's notes of the policy rebuilt at a new horizon in place of those of the policy it
    replaces (a factory's note names the horizon its copies are built at), in ``notes``."""
    fresh = [n for n in new if n not in notes]
    stale = [i for i, n in enumerate(notes) if n in old and n not in new]
    for i, n in zip(stale, fresh):
        notes[i] = n
    for i in sorted(stale[len(fresh):], reverse=True):
        del notes[i]
    notes.extend(fresh[len(stale):])


def search_summary(ranking: Sequence[JSONObject], horizon: int) -> list[FamilySearch]:
    """What the search tried, by family of pairs: how many, on which sample sizes, and the best pilot and
    ranked (selection) bound of each family."""
    families: dict[str, FamilySearch] = {}
    for row in ranking:
        fam = str(row.get("family", "?"))
        f = families.setdefault(fam, FamilySearch(fam, horizon))
        b = float(row.get("membership_selection_bound", 0.0))  # type: ignore[arg-type]
        if row.get("stage") == "ranked":
            f.ranked += 1
            if f.best_ranked is None or b > f.best_ranked:
                f.best_ranked, f.best = b, row.get("pair")  # type: ignore[assignment]
        else:
            f.pairs += 1
            f.best_pilot = max(f.best_pilot, b)
    for f in families.values():
        f.pairs = max(f.pairs, f.ranked)
    return list(families.values())
