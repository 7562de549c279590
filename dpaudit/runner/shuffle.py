"""The plan of shuffle DP (Sarmasarkar 2026, Alg. 1): the view is what the analyzer receives from one batch.

The policy's ``batch_release`` runs on a first batch (the smallest, where amplification is weakest)
fixed by the adversary, or on a reviewer's pair (``--pair``: the batch's contexts and rewards). Two
parts share the error budget (:func:`dpaudit.attacks.bounds.split_confidence`, Bonferroni; one part when
the gray-box part cannot run):

* **black box** (:func:`dpaudit.attacks.discriminant.screened_lda_attack`): the pairs are the best
  calibrated canary (:func:`dpaudit.protocols.shuffle.calibrated_pairs`) and the extreme one-coordinate
  canaries (:func:`dpaudit.protocols.shuffle.shuffle_pairs`); each view is read as feature families
  (:func:`dpaudit.protocols.shuffle.shuffle_features`: the binned multiset, the messages at the canary's
  arrival position, and for a pair with a constant background its exact log-likelihood ratio, one
  column). For each (pair, family) a screened discriminant is fitted on a training split, its threshold
  chosen on a selection split for the fresh sample size, and the best candidate counted once on fresh
  views (looks, with the early stops of :mod:`dpaudit.attacks.sampling`). Trusts nothing the policy says;
  it is what catches a shuffler that keeps the arrival order.
* **gray box** (the likelihood attack's statistics on the shuffled multiset): for a pair whose other users
  all hold one datum, the multiset's privacy loss is exact (:class:`dpaudit.protocols.shuffle.CanaryModel`),
  so ``runs`` fresh views of one side give the loss of each, and the bound is the central likelihood
  attack's (:func:`dpaudit.attacks.likelihood.loss_bounds`): an order statistic of L + log(1 - U), whose
  survival function is the sampled side's privacy profile (the runs are i.i.d. and each loss exact under the
  model), valid at the part's whole error budget with no grid and no correction for the eps it lands on.
  No early stop: the bound is that of the whole sample. It runs before the black-box count, which may then
  stop as futile once its projected bound stays below the gray-box one (:class:`dpaudit.attacks.sampling.Stop`'s
  ``floor``). The pair and the side are chosen without data: among the calibrated candidates, the one whose
  exact privacy-loss distribution (:func:`dpaudit.accountants.shuffled_canary_profile`) gives the largest
  statistical limit at ``runs`` (:func:`gray_box_limit`, the median of the bound, whose law is exact).
  Skipped, with a note, for a policy without ``message_values`` or Piecewise shufflers, or a ``--pair`` whose
  other users differ.

Beside the bounds, the audited pair's exact eps (an :class:`~dpaudit.runner.findings.Exact` the verdict does
not judge: the truth of that pair, not a proof for every pair) and the statistical limit, so a reader sees
bound against truth. The bounds are compared with the amplified claim at the policy's delta (an (eps,
delta)-DP claim says nothing at a smaller delta); ``consistent`` needs a positive bound. Defaults: at most
40,000 fresh runs per side and 2,500 fitting runs per side and split (a batch of users is simulated per run).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from dpaudit.accounting import policy_upper
from dpaudit.attacks.bounds import split_confidence
from dpaudit.attacks.discriminant import screened_lda_attack
from dpaudit.attacks.likelihood import loss_bounds, pilot_grid, smallest_count
from dpaudit.attacks.limits import likelihood_limit, sufficient_size
from dpaudit.attacks.result import AuditResult
from dpaudit.attacks.sampling import draw, draw_pilots
from dpaudit.engine import SERIAL, Engine
from dpaudit.errors import DPAuditError
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols import ShuffleDP
from dpaudit.protocols.shuffle import (FAMILIES, LOSS, CanaryModel, ShufflePair, calibrated_pairs, canary_model,
                                       shuffle_features, shuffle_pairs)

from .context import Context, runs_text
from .cost import Estimate
from .findings import Exact
from .sections import Arms, JSONObject, Sections

if TYPE_CHECKING:
    from dpaudit.accountants.shuffle import CanaryProfile
    from dpaudit.mechanisms import PiecewiseShuffler
    from dpaudit.attacks.likelihood import LossBounds

__all__ = ["audit", "preflight", "SHUFFLE_CAPS", "ShuffledViewSource", "statistical_limit", "choose_gray_box",
           "loss_bound", "gray_box_limit"]

#: a shuffle audit simulates a whole batch per run, so it caps the fresh runs per side and the fitting sizes
SHUFFLE_CAPS = {"runs": 40000, "fit": 2500}
#: the part name of the gray-box bound
GRAY_BOX = "likelihood (shuffled multiset)"


@dataclass
class ShuffleTightness:
    """The gray-box bound against what its test can show (``statistical_limit``, the median of its bound at its
    ``fresh_runs`` runs of ``side``) and the audited pair's exact eps, with every calibrated candidate's row."""

    gray_box_bound: float
    statistical_limit: float | None
    exact_epsilon: float | None
    side: int
    fresh_runs: int
    candidates: list[JSONObject]


@dataclass
class ShuffleSections(Sections):
    """The shuffle plan's sections of the findings, in their order."""

    batch: int | None = None
    arms: Arms | None = None
    confidence_per_attack: float | None = None
    shuffle_tightness: ShuffleTightness | None = None


class ShufflePolicy(PolicyLike, Protocol):
    """What the shuffle plan uses of a policy (Sarmasarkar 2026, Alg. 1): its first batch's users (``batch0``),
    its PGD groups per batch, the context dimension and its two shufflers
    (:class:`dpaudit.mechanisms.PiecewiseShuffler`)."""

    batch0: int
    groups: int
    dim: int
    shuffler_outer: PiecewiseShuffler
    shuffler_grad: PiecewiseShuffler


class ShuffledViewSource:
    """The analyzer's view of the first batch on each pair's data, as feature families (the exact loss too for
    the pairs with a :class:`~dpaudit.protocols.shuffle.CanaryModel`)."""

    chunk_cells = 4_000_000

    def __init__(self, policy: ShufflePolicy, pairs: list[ShufflePair], families: tuple[str, ...] | None = None,
                 models: list[CanaryModel | None] | None = None) -> None:
        self.policy, self.pairs = policy, pairs
        self.models = list(models) if models is not None else [None] * len(pairs)
        self.families = None if families is None else tuple(families)
        self.batch = int(policy.batch0)
        self.group_size = self.batch // int(policy.groups)
        self.cells_per_run = self.batch * 8

    def _families(self, candidate: int) -> tuple[str, ...]:
        if self.families is not None:
            return self.families
        return FAMILIES + ((LOSS,) if self.models[candidate] is not None else ())

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> dict[str, np.ndarray]:
        p = self.pairs[candidate]
        view = ShuffleDP().run(self.policy, p.d1 if side else p.d0, n, np.random.default_rng(seed))
        return shuffle_features(self.policy, view, p.pos, self.group_size, self._families(candidate),
                                self.models[candidate])

    def for_family(self, family: str) -> "ShuffledViewSource":
        """The same views (same seeds, same runs) read as one feature family only: what a test fitted on that
        family counts on its fresh views."""
        return ShuffledViewSource(self.policy, self.pairs, (family,), self.models)

    def describe(self, candidate: int) -> JSONObject:
        return self.pairs[candidate].describe()


def _policy(ctx: Context) -> ShufflePolicy:
    """The policy at its own horizon unless given (it only places the later batches; the view is the first),
    refused unless it has a shuffle pipeline the audit reads, with first-batch sizes it can build."""
    spec = ctx.request.spec
    policy = cast(ShufflePolicy, ctx.build(ctx.request.horizon))
    if not all(hasattr(policy, a) for a in ("batch_release", "batch0", "shuffler_outer", "shuffler_grad")):
        raise DPAuditError(f"policy {spec!r} has no shuffle pipeline (batch_release, batch0 and its shufflers), so it "
                           "cannot be audited under shuffle DP.")
    if not all(hasattr(sh, "decode") and hasattr(sh, "C") for sh in (policy.shuffler_outer, policy.shuffler_grad)):
        raise DPAuditError(f"policy {spec!r} shuffles messages the shuffle audit cannot read: it reads the messages of "
                           "dpaudit.mechanisms.PiecewiseShuffler (one sampled coordinate per message).")
    _check_batches(policy, spec)
    return policy


def _check_batches(policy: ShufflePolicy, spec: str) -> None:
    """The sizes the view is built from, checked before anything is sized by them: ``batch0`` users (at least
    2, and one run's view must fit in memory), ``groups`` PGD groups dividing it, ``dim`` >= 1; and a horizon
    that holds the first batch. Alg. 1 of Sarmasarkar (2026) sends a batch's messages to the shuffler only
    once the batch is full (batches of batch0, 2 batch0, ... users partition the horizon), so at a horizon
    shorter than batch0 the mechanism releases nothing from its users: the shuffled batch this audit
    attacks is not part of its output there, and judging it would be judging a release that never happens
    (a 'consistent' verdict about nothing). So that is refused, not audited."""
    from dpaudit.errors import check_int

    from .cost import available_memory

    B = check_int(f"{spec}'s batch0 (the users of its first batch)", policy.batch0, minimum=2)
    groups = check_int(f"{spec}'s groups (its PGD groups per batch)", policy.groups, minimum=1)
    dim = check_int(f"{spec}'s dim", policy.dim, minimum=1)
    if B % groups:
        raise DPAuditError(f"{spec}'s batch0 = {B} does not split into groups = {groups} equal PGD groups; batch0 must "
                           "be a multiple of groups.")
    avail = available_memory()
    per_run = 8.0 * B * (dim * (dim + 1) // 2 + 2 * dim + 8)  # one run's batch: contexts, products, messages
    if avail is not None and per_run * 100 > avail:  # the up-front pilot simulates 100 runs of the batch
        raise DPAuditError(f"{spec}'s batch0 = {B} users (dim {dim}) needs about {per_run * 100 / 2**30:.3g} GB for the "
                           f"up-front pilot of 100 runs but {avail / 2**30:.3g} GB is available; give a smaller batch0.")
    T = getattr(policy, "horizon", None)
    if T is not None and int(T) < B:
        raise DPAuditError(f"{spec} at horizon {int(T)} holds no full batch (its first batch has batch0 = {B} users), so "
                           "it releases nothing from its users and there is no shuffled batch to audit; give "
                           f"--horizon {B} or more, or a smaller batch0.")


def _sizes(runs: int) -> int:
    """Fitting (and selection) runs per side of the black-box part."""
    return max(500, min(SHUFFLE_CAPS["fit"], runs // 16))


def preflight(ctx: Context) -> None:
    """The time up front: a pilot batch, scaled to the audit's runs, against --max-hours."""
    from dpaudit.sandbox import TimeBoxExceeded

    from .cost import check_time, estimating, overran

    t0 = time.perf_counter()
    try:
        with estimating(ctx.request.max_hours) as box:  # a slow constructor cannot make the estimate itself long
            policy = _policy(ctx)
            pairs = shuffle_pairs(int(policy.batch0), int(policy.dim))
            src = ShuffledViewSource(policy, pairs)
            t0 = time.perf_counter()
            src.sample(0, 0, 100, np.random.SeedSequence(0))
    except TimeBoxExceeded as exc:
        ctx.estimate = Estimate(note=overran(exc, ctx.request.max_hours, box, at_least=time.perf_counter() - t0))
        return
    per_run = (time.perf_counter() - t0) / 100
    runs = min(ctx.request.runs, SHUFFLE_CAPS["runs"])
    views = (len(pairs) + 1) * 4 * _sizes(runs) + 3 * runs  # the pairs' fitting, both sides' and the gray box's fresh
    r = ctx.request
    ctx.estimate = check_time(per_run * views, f"{views} batches of {src.batch} users at a measured "
                                               f"{1 / max(per_run, 1e-9):.3g} per second on one process",
                              max_hours=r.max_hours, workers=r.workers, local=r.on_this_machine)


def statistical_limit(profile: CanaryProfile, side: int, n: int, delta: float, alpha: float,
                      grid: np.ndarray | None = None) -> float:
    """The bound a grid-counting gray-box test (Clopper-Pearson at each point of an eps grid, the test this
    plan used before :func:`loss_bound`; kept for comparison in benchmarks/validation/shuffle_tightness.py) shows at ``n``
    runs of ``side`` if its counts were their expectations under the pair's exact profile (:func:`dpaudit.attacks.likelihood.smallest_count`): the largest eps (of ``grid``, or
    any) whose exact delta(eps) reaches the smallest count that shows delta(eps) > ``delta`` at error ``alpha``.
    It is where the test's bound sits when its counts come out as expected: a run's bound scatters around it
    (its counts do), and the exact eps above it is out of reach of this test at this sample size."""
    k = smallest_count(n, delta, alpha)
    if k > n:
        return 0.0
    top = profile.epsilon(min(k / n, 1 - 1e-12), side)  # the smallest eps with delta(eps) <= k / n
    if grid is None:
        return float(top)
    g = np.asarray(grid, dtype=float)
    ok = g[g <= top]
    ok = [e for e in ok[::-1][:3] if profile.delta(float(e), side) >= k / n]  # the grid points just below, checked
    return float(ok[0]) if ok else 0.0


def choose_gray_box(policy: PolicyLike, pairs: list[ShufflePair], runs: int, delta: float, confidence: float
                    ) -> tuple[int | None, int, list[JSONObject], dict[int, tuple[CanaryModel, CanaryProfile | None]],
                               list[str]]:
    """Among ``pairs`` with a canary model, the (pair, side) whose exact profile gives the largest statistical
    limit at ``runs`` (:func:`gray_box_limit`): no data is used, so the choice costs no validity. A pair with a model whose profile cannot be enumerated (a reviewer's pair with a
    third background datum) is taken, side 0, only when no other has one. Returns (pair index or None, side,
    a row per candidate, {index: (model, profile or None)}, notes)."""
    rows, profiles, notes = [], {}, []
    best = (None, 0, -1.0)
    fallback = None
    for i, p in enumerate(pairs):
        model, why = canary_model(policy, p)
        if model is None:
            notes.append(f"{p.label}: no gray-box part ({why}).")
            continue
        try:
            prof = model.profile()
        except DPAuditError as exc:
            notes.append(f"{p.label}: its exact privacy loss was not enumerated ({exc}), so neither its exact eps nor "
                         "the statistical limit is reported.")
            profiles[i] = (model, None)
            fallback = i if fallback is None else fallback
            continue
        profiles[i] = (model, prof)
        for side in (0, 1):
            lim = gray_box_limit(prof, side, runs, delta, confidence)
            rows.append({"pair": p.label, "side": side, "separation": model.separation(),
                         "exact_epsilon": prof.epsilon(delta, side), "statistical_limit": lim})
            if lim > best[2]:
                best = (i, side, lim)
    if best[0] is None and fallback is not None:
        return fallback, 0, rows, profiles, notes
    return best[0], best[1], rows, profiles, notes


def gray_box_limit(profile: CanaryProfile, side: int, n: int, delta: float, confidence: float) -> float:
    """The median of the gray-box bound at ``n`` runs of ``side`` under the pair's exact ``profile``
    (:func:`dpaudit.attacks.limits.likelihood_limit`: the bound is an order statistic whose law is exact), one
    test at ``confidence``: where the audit's bound sits, and the exact eps above it is out of reach of this
    test at this sample size."""
    return likelihood_limit(lambda e: np.asarray(profile.delta(float(e), side)), int(n), delta, confidence)


def loss_bound(loss: np.ndarray, u: np.ndarray, delta: float, confidence: float,
               pilot: np.ndarray | None = None) -> LossBounds:
    """The gray-box bound from sampled exact losses of one side, as the central likelihood attack's
    (:func:`dpaudit.attacks.likelihood.loss_bounds`, one code path): an order statistic of L + log(1 - U) at the
    whole error budget (no grid, no Rényi orders: an (eps, delta) claim promises nothing at an order). Valid
    because the runs are independent and each loss is the view's exact log-likelihood ratio under the model
    (every other user at the background's datum), so W = L + log(1 - U) has the sampled side's privacy profile
    as its survival function. ``pilot`` losses (never counted) only place the display band's points."""
    grid = None if pilot is None or not np.asarray(pilot).size else pilot_grid(np.asarray(pilot, dtype=float))
    return loss_bounds(np.asarray(loss, dtype=float), np.asarray(u, dtype=float), delta=delta, confidence=confidence,
                       orders=(), grid=grid)


#: the gray-box sample is the smallest of runs / 4, runs / 2 and runs whose median bound under the pair's exact
#: profile is within this fraction of the whole sample's (:func:`gray_box_runs`)
GRAY_BOX_GAIN = 0.05


def gray_box_runs(profile: CanaryProfile | None, side: int, runs: int, delta: float, confidence: float) -> tuple[int, float | None]:
    """The gray-box part's sample size, chosen on the pair's exact profile
    (:func:`dpaudit.attacks.limits.sufficient_size` with :data:`GRAY_BOX_GAIN`: the smallest of ``runs`` / 4,
    ``runs`` / 2 and ``runs`` whose median bound, :func:`gray_box_limit`, is within that share of all the
    runs'). Returns (the size, the median bound of all ``runs``; None without a profile, which keeps all
    ``runs``)."""
    if profile is None:
        return int(runs), None
    return sufficient_size(lambda n: gray_box_limit(profile, side, n, delta, confidence), int(runs), GRAY_BOX_GAIN)


def _gray_box(ctx: Context, src: ShuffledViewSource, cand: int, side: int, prof: CanaryProfile | None,
              pilot: np.ndarray | None, runs: int, confidence: float, seed: np.random.SeedSequence,
              engine: Engine) -> AuditResult:
    """The gray-box bound on fresh views of ``side`` of the source's pair ``cand`` (module docstring): as many as
    :func:`gray_box_runs` chooses, at most ``runs``."""
    t0 = time.perf_counter()
    planned = runs
    runs, full = gray_box_runs(prof, side, planned, ctx.delta, confidence)
    s_views, s_u = seed.spawn(2)
    sign = 1.0 if side == 0 else -1.0  # the loss of side 1 against side 0 is minus the model's
    ctx.say(f"shuffle: gray-box likelihood on {runs} fresh views")
    loss = sign * draw(src.for_family(LOSS), cand, side, runs, s_views, engine)[LOSS][:, 0]
    u = np.random.default_rng(s_u).random(loss.size)
    b = loss_bound(loss, u, ctx.delta, confidence, None if pilot is None else sign * np.asarray(pilot, dtype=float))
    limit = None if prof is None else gray_box_limit(prof, side, runs, ctx.delta, confidence)
    p = src.pairs[cand]
    details = b.details()
    return AuditResult(
        attack=GRAY_BOX, epsilon_lower=b.epsilon_lower, delta=ctx.delta, confidence=confidence,
        witness={"label": p.label, "pair": p.describe(), "side": side,
                 "statistic": "the exact log-likelihood ratio of the shuffled multiset (every other user at the "
                              "background's datum)"},
        samples=int(loss.size), seconds=time.perf_counter() - t0,
        details={"epsilon_point_estimate": details["epsilon_point_estimate"], "statistical_limit": limit,
                 "exact_epsilon_of_side": None if prof is None else prof.epsilon(ctx.delta, side),
                 "order_statistic": details["order_statistic"],
                 "mean_loss_kl": float(loss.mean()), "max_loss": float(loss.max()),
                 "profile": details["profile"], "fresh_runs_used": int(loss.size),
                 "fresh_runs_planned": int(planned), "statistical_limit_of_planned_runs": full,
                 "pilot_runs": 0 if pilot is None else int(np.asarray(pilot).size), "tests_corrected_for": 1})


def _limit_text(t: ShuffleTightness | None) -> str:
    """What the gray-box test could show, for an audit whose bounds are all 0."""
    if t is None or t.statistical_limit is None or t.exact_epsilon is None:
        return ""
    return (f"; the gray-box test on the audited pair (exact eps {t.exact_epsilon:.3g}) shows "
            f"{t.statistical_limit:.3g} at the median with its {t.fresh_runs} runs")


@dataclass
class _Plan:
    """The shuffle plan's state between its steps (:func:`audit`)."""

    ctx: Context
    sections: ShuffleSections
    policy: ShufflePolicy
    #: the first batch's users, the context dimension, fresh runs per side (capped) and fitting runs per side
    B: int
    dim: int
    runs: int
    n_fit: int
    #: the one-coordinate canaries and the calibrated ones (or the reviewer's batch for both)
    fixed: list[ShufflePair] = field(default_factory=list)
    calibrated: list[ShufflePair] = field(default_factory=list)
    #: the gray-box pair (an index of :attr:`calibrated`; None: no gray-box part) and side, every candidate's row,
    #: their models and exact profiles, and the seconds their enumeration took
    pick: int | None = None
    side: int = 0
    rows: list[JSONObject] = field(default_factory=list)
    profiles: dict[int, tuple[CanaryModel, CanaryProfile | None]] = field(default_factory=dict)
    t_exact: float = 0.0
    #: the pairs attacked (the gray-box pair first) and their models
    pairs: list[ShufflePair] = field(default_factory=list)
    models: list[CanaryModel | None] = field(default_factory=list)
    confidence: float = 1.0
    engine: Engine = SERIAL


def audit(ctx: Context) -> None:
    """The shuffle plan (module docstring), filling ``ctx``: the policy and its first batch, the pairs, the
    gray-box pair chosen on the exact profiles, the gray box and the black box on fresh views, the audited
    pair's exact eps beside, and the power."""
    p = _start(ctx)
    _choose_pairs(p)
    _choose_gray_box(p)
    p.engine = ctx.engine
    try:
        p.engine.check_picklable(p.policy)
    except DPAuditError as exc:
        ctx.notes.append(f"ran in this process only: {exc}")
        p.engine = p.engine.serial()
    att = _attacks(p)
    _exact_pair(p)
    parts = getattr(p.policy, "claim_parts", None)
    if parts:
        ctx.notes.append("claim = basic composition of the amplified outer-product and gradient messages: "
                         + " + ".join(c.describe() for c in parts)
                         + f" (Feldman-McMillan-Talwar numerical bound; local guarantee {p.policy.eps0:g}-DP per "  # type: ignore[attr-defined]
                         "message).")
    _power(p, att)


def _start(ctx: Context) -> _Plan:
    """The policy, its claim, its horizon and the clone bounds' upper side; the view is its first batch; the
    fresh runs capped at :data:`SHUFFLE_CAPS`."""
    r = ctx.request
    policy = _policy(ctx)
    ctx.policy = policy
    ctx.read_claim(policy, r.spec)
    B, dim, groups = int(policy.batch0), int(policy.dim), int(policy.groups)  # type: ignore[attr-defined]
    ctx.horizon = int(getattr(policy, "horizon", B))
    ctx.params = dict(r.params)
    ctx.set_upper(policy_upper(policy, ctx.horizon, ctx.delta, protocol="shuffle"))  # the clone bounds composed exactly
    sections = ShuffleSections(batch=B, arms=Arms(int(policy.n_arms)))
    ctx.sections = sections
    ctx.notes.append(f"view: the shuffled messages of the first (smallest) batch ({B} users, {groups} PGD group(s)), "
                     "where amplification is weakest.")
    runs = r.runs
    if runs > SHUFFLE_CAPS["runs"]:
        ctx.notes.append(f"fresh runs capped at {SHUFFLE_CAPS['runs']} per side (asked {runs}): every run simulates "
                         f"a batch of {B} users.")
        runs = SHUFFLE_CAPS["runs"]
    return _Plan(ctx, sections, policy, B, dim, runs, _sizes(runs))


def _choose_pairs(p: _Plan) -> None:
    """The reviewer's batch (``--pair``), else the extreme one-coordinate canaries and the calibrated ones."""
    ctx, r = p.ctx, p.ctx.request
    if r.pair is not None:
        from dpaudit.protocols.pairs import load_shuffle_pair

        given = [load_shuffle_pair(r.pair, batch=p.B, dim=p.dim, reward_range=getattr(p.policy, "reward_range", None),
                                   max_norm=1.0)]  # dpaudit's GLM policies assume ||x|| <= 1
        ctx.notes.append(f"audited on the batch given in {r.pair} (user {given[0].pos} differs); no search.")
        p.fixed, p.calibrated = given, given
        return
    p.fixed, p.calibrated = shuffle_pairs(p.B, p.dim), calibrated_pairs(p.policy, p.B)
    if not p.calibrated:
        ctx.notes.append("no calibrated canary: the policy does not say which vectors its messages carry "
                         "(message_values) or its shufflers are not Piecewise ones; the one-coordinate canaries "
                         "only, and no gray-box part.")


def _choose_gray_box(p: _Plan) -> None:
    """The gray-box pair and side, chosen on the exact profiles (no data: :func:`choose_gray_box`), so its share
    of the confidence is decided up front; the pairs attacked, the gray-box pair first."""
    ctx = p.ctx
    conf_two = split_confidence(ctx.confidence, 2)
    ctx.say("shuffle: exact privacy loss of the calibrated canaries")
    t0 = time.perf_counter()
    p.pick, p.side, p.rows, p.profiles, why = choose_gray_box(p.policy, p.calibrated, p.runs, ctx.delta, conf_two)
    p.t_exact = time.perf_counter() - t0
    ctx.notes += why
    if ctx.request.pair is not None:
        p.pairs = p.calibrated
    else:
        p.pairs = ([p.calibrated[p.pick]] if p.pick is not None else []) + p.fixed
    p.models = [p.profiles[p.pick][0] if (p.pick is not None and k == 0) else None for k in range(len(p.pairs))]
    p.confidence = conf_two if p.pick is not None else ctx.confidence
    p.sections.confidence_per_attack = p.confidence


def _attacks(p: _Plan) -> AuditResult:
    """The pilots, then the gray box first (the black-box count may then stop as futile once it cannot raise the
    audit's bound), then the screened discriminant on fresh views (:func:`screened_lda_attack`)."""
    ctx = p.ctx
    assert ctx.claim is not None
    s_bb, s_gb = np.random.SeedSequence(ctx.request.seed).spawn(2)
    src = ShuffledViewSource(p.policy, p.pairs, models=p.models)
    cands = list(range(len(p.pairs)))
    ctx.say("shuffle: attack on the analyzer's view")
    pilots = draw_pilots(src, cands, s_bb, p.n_fit, p.n_fit, p.engine)
    gb = None
    if p.pick is not None:
        prof = p.profiles[p.pick][1]
        gb = _gray_box(ctx, src, 0, p.side, prof, pilots[p.side][LOSS][:, 0], p.runs, p.confidence, s_gb, p.engine)
        p.sections.shuffle_tightness = ShuffleTightness(gb.epsilon_lower, gb.details["statistical_limit"], None,
                                                        p.side, gb.samples, p.rows)
    att = screened_lda_attack(src, cands, s_bb, delta=ctx.delta, confidence=p.confidence, n_fit=p.n_fit,
                              n_test=p.runs, engine=p.engine, progress=ctx.progress, claim=ctx.claim.epsilon,
                              pilots=pilots, floor=0.0 if gb is None else gb.epsilon_lower)
    ctx.attacks.append(att)
    ctx.ran("membership (shuffled view)", "bound", f"the first batch's shuffled messages, {len(p.pairs)} pairs, "
                                                   f"{att.details['candidates']} (pair, feature family) candidates, "
                                                   f"{runs_text(att, p.runs)} fresh runs per side", att.seconds)
    if gb is not None:
        ctx.attacks.append(gb)
        ctx.ran(GRAY_BOX, "bound", f"the exact loss of the shuffled multiset on {gb.samples} fresh runs of side "
                                   f"{p.side} of the audited pair (the sample size chosen on its exact profile), an "
                                   "order statistic of L + log(1 - U) (no grid)", gb.seconds)
    return att


def _exact_pair(p: _Plan) -> None:
    """Beside the bounds, the audited pair's exact eps (not judged: the truth of that pair, not a proof for
    every pair) and the statistical limit of its gray-box test, so a reader sees bound against truth."""
    ctx, tightness = p.ctx, p.sections.shuffle_tightness
    if p.pick is None or p.profiles[p.pick][1] is None or tightness is None:
        return
    prof = p.profiles[p.pick][1]
    exact_eps = prof.epsilon(ctx.delta)
    sides = [prof.epsilon(ctx.delta, s) for s in (0, 1)]
    ctx.exact.append(Exact(
        part="the audited pair's exact eps", epsilon=float(exact_eps),
        method="the shuffled multiset's privacy-loss distribution for this pair, enumerated over message counts "
               "(dpaudit.accountants.shuffled_canary_profile); the truth of this pair, not a bound for every pair",
        judged=False, witness=p.calibrated[p.pick].describe(),
        details={"epsilon_side_0_vs_1": sides[0], "epsilon_side_1_vs_0": sides[1],
                 "epsilon_bracket": [prof.epsilon(ctx.delta, None, "lower"), float(exact_eps)],
                 "statistical_limit": tightness.statistical_limit,
                 "statistical_limit_note": "the median of the gray-box test's bound at its "
                                           f"{tightness.fresh_runs} fresh runs of side {p.side} (its law is exact "
                                           "given this profile; same error budget)",
                 "message_sets": [dict(s, classes=dict(s["classes"])) for s in prof.sets],
                 "seconds": round(p.t_exact, 3)}))
    ctx.ran("exact eps of the audited pair", "exact", "enumerated over the message counts of the pair's two shuffled "
                                                      "message sets (not judged: one pair's truth)", p.t_exact)
    tightness.exact_epsilon = float(exact_eps)


def _power(p: _Plan, att: AuditResult) -> None:
    """The black box's power, and what the reason adds when the verdict is not a violation: with every bound 0,
    how little a shuffled canary can show at this sample size; else the power and the gray box's tightness."""
    ctx, runs, t = p.ctx, p.runs, p.sections.shuffle_tightness
    nfam = att.details["candidates"]
    pw = ctx.set_power(att, len(p.pairs), runs, p.confidence, candidates=nfam, fit_runs_per_side=p.n_fit)
    if max(a.epsilon_lower for a in ctx.attacks) <= 0:
        ctx.reason_suffix = (f"; with {runs} fresh runs per side the attack shows eps >= {pw.smallest_detectable:.3g} "
                             "at best for a pair as separable as randomised response, and a shuffled canary among "
                             f"{p.B} users is far less separable" + _limit_text(t))
        return
    tight = ""
    if t is not None and t.statistical_limit is not None and t.exact_epsilon is not None:
        tight = (f"; the gray-box bound {t.gray_box_bound:.3g} against {t.statistical_limit:.3g}, the median of what "
                 f"that test shows with its {t.fresh_runs} runs, for a pair whose exact eps is {t.exact_epsilon:.3g}")
    ctx.reason_suffix = (f"; power: {len(p.pairs)} pairs, {nfam} (pair, feature family) candidates tried, {runs} "
                         f"fresh runs per side (at most eps {pw.largest_bound:.3g} can be shown; a pair as separable "
                         f"as randomised response at eps {pw.smallest_detectable:.3g} would show a positive bound)"
                         + tight)
