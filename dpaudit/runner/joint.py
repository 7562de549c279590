"""The plan of joint DP: the view is every action after the canary round.

The definition is "Anticipating JDP" of the interactive joint/local DP definitions (:mod:`dpaudit.papers`).

The adversary fixes every context and reward (:class:`dpaudit.protocols.ContextInput`): the history
before the canary round t and the future; its pairs are :func:`dpaudit.protocols.joint.joint_pairs`
and the PGD read-out adversary :func:`~dpaudit.protocols.joint.readout_pairs`, or a reviewer's pair
(``--pair`` with per-round contexts). Parts, the confidence split equally between those that sample:

* ``membership`` (black box, the JDP view a_{t+1}..a_T): :class:`dpaudit.attacks.membership.ViewScorer`
  statistics fitted on a training split, the best (pair, statistic, threshold) chosen on a selection
  split, Clopper-Pearson counts on fresh runs (:func:`dpaudit.attacks.membership.view_attack`; the pairs
  screened on a quarter of the pilot size, the two best fitted on all of it); it runs after the tree
  likelihood, whose bound is the floor below which its count may stop as futile;
* ``tree-releases`` (black box on the releases, policies whose ledger holds binary-tree nodes): the
  values of the tree nodes containing the canary round and of their siblings
  (:func:`dpaudit.protocols.joint.canary_nodes`), each projected on the canary's known difference (the
  shift of its centre, read from replayed pilot runs), scored by Fisher's discriminant on those few
  projections (:func:`dpaudit.attacks.discriminant.projected_lda_direction`), the threshold chosen for the
  fresh sample size. It trusts only the released values, so it is what catches a tree whose noise is
  missing or reused while its ledger says Gaussian (a noise-free direction the discriminant finds). It
  runs after the tree-likelihood part, whose bound is the floor below which its fresh count may stop as
  futile (:class:`dpaudit.attacks.sampling.Stop`);
* ``tree-likelihood`` (gray box, policies built on dpaudit's mechanisms): the exact privacy loss of
  every recorded release, each run replayed on the other input with its releases held fixed
  (:mod:`dpaudit.attacks.joint_likelihood`), on the worst-case canaries of
  :func:`~dpaudit.protocols.joint.canary_pairs`, bounded as the central likelihood attack does. It counts
  every fresh run (no early stop), so its bound is what its sample can show. It is valid when the replay
  is exact (every release's centre under d' computed as a run on d' would, given the same releases) and
  the ledger's noise is true (:mod:`dpaudit.attacks.joint_likelihood` says when);
* ``ledger`` (exact, judged): the per-round composition of every release the policy recorded, each
  mechanism at the larger of its recorded sensitivity and the one the replayed canaries realise
  (:func:`_implied_sensitivities`);
* ``long-horizon ledger`` (exact, judged): the same composition for the policy built for a longer horizon
  (:data:`LONG_LEDGER`) and run on :func:`~dpaudit.protocols.joint.growth_background`, the input that makes
  data-dependent releases (Alg. 2's PGD updates) happen, which the short audit's input never does;
* beside the verdict, the central view a_t..a_T on a pair whose canary swaps which arm carries e1:
  joint DP does not promise to hide a_t, and the report shows how much it reveals.

Actions are post-processing of the releases, so the claim (which the policy proves for its releases)
bounds the two release parts too. The tree parts choose on pilot runs of the canary pairs: a training
split (replayed: the discriminant's projections and fit, the likelihood's candidates and eps grid) and
a selection split (the discriminant's pair and threshold); only fresh runs make the bounds.

A finite contextual policy (``dpaudit.finite-contextual-policy/1``) is audited exactly instead
(:func:`dpaudit.attacks.exact_joint.exact_joint_profile`): every history, pair of canary triples and
future enumerated; no sampling.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.accounting import ledger_audit, policy_upper
from dpaudit.attacks.discriminant import lda_attack
from dpaudit.attacks.joint_likelihood import (implied_sensitivities, joint_likelihood_attack, release_losses,
                                              replay_losses, replay_run)
from dpaudit.attacks.membership import view_attack
from dpaudit.attacks.result import AuditResult
from dpaudit.attacks.sampling import draw_many
from dpaudit.engine import SERIAL, Engine
from dpaudit.errors import DPAuditError, check_int
from dpaudit.policies.base import PolicyLike
from dpaudit.mechanisms import ReplayMismatch
from dpaudit.protocols import JointDP
from dpaudit.protocols.joint import (JointPair, canary_nodes, canary_pairs, growth_background, joint_pairs, readout_pairs,
                                     tree_features)

from .context import Context, NoClaim, confidence_each, runs_text
from .cost import Estimate
from .findings import Exact
from .sections import Arms, JSONObject, JSONValue, Sections
from .setup import convert_claim

if TYPE_CHECKING:
    from dpaudit.attacks.exact_joint import JointProfile, JointWitness
    from dpaudit.policies.finite_contextual import FiniteContextualPolicy

__all__ = ["audit", "preflight", "JOINT_DEFAULTS", "JointViewSource", "TreeSource", "TreePilotSource", "LossSource",
           "membership_only", "EXACT_TOLERANCE"]

#: a joint audit's horizon, and the most fresh runs per side it uses (larger --runs are capped, with a note)
JOINT_DEFAULTS = {"horizon": 16, "runs": 20000}
#: relative tolerance of the exact comparison with the claim (float rounding of e^eps and of sums of
#: products of table entries; a finite spec's rows themselves are checked to sum to 1 within 1e-9)
EXACT_TOLERANCE = 1e-9
_CHUNK_CELLS = 4_000_000
#: the chunk of the replayed sources (a run and its replay per run): larger, since a replay's cost per run falls
#: by about 40% from 750 to 2,300 runs a chunk (the ledger's per-release work is per chunk, not per run)
_REPLAY_CHUNK_CELLS = 12_000_000


@dataclass(frozen=True)
class LongLedger:
    """The long-horizon ledger (:func:`_long_ledger`): the policy built for ``horizon`` rounds and run ``runs``
    times on an input that drives its updates, composed per round to ``epsilon``."""

    horizon: int
    runs: int
    epsilon: float
    max_releases_per_round: int
    implied: JSONValue
    sensitivity_factor: dict[str, float]


@dataclass
class JointSections(Sections):
    """The joint plan's sections of the findings, in their order."""

    arms: Arms | None = None
    confidence_per_attack: float | None = None
    long_horizon_ledger: LongLedger | None = None
    renyi_violation: list[dict[str, float]] | None = None


@dataclass(frozen=True)
class ExactAt:
    """Where the exact audit evaluates: eps at the audit's delta, delta at ``epsilon``, D_alpha at ``alpha``."""

    epsilon: float
    delta: float
    alpha: float


@dataclass(frozen=True)
class ExactFigures:
    """One neighbouring relation's exact figures (at :class:`ExactAt`) and the witness of each."""

    epsilon: float
    delta_at_epsilon: float
    renyi: float
    witness_epsilon: JSONObject | None
    witness_delta: JSONObject | None
    witness_renyi: JSONObject | None


@dataclass(frozen=True)
class ClaimPoint:
    """The claim's own (eps, delta) point and the exact eps at its delta."""

    epsilon: float
    delta_claimed: float
    epsilon_exact: float


@dataclass(frozen=True)
class CentralExact:
    """The exact eps of the central view a_t..a_T (not promised by joint DP) and its witness."""

    epsilon: float
    witness: JSONObject | None


@dataclass
class FiniteJointSections(Sections):
    """The sections of the exact joint audit of a finite contextual policy, in their order."""

    method: str = "exact enumeration"
    arms: Arms | None = None
    contexts: list[str] | None = None
    rewards: list[float] | None = None
    at: ExactAt | None = None
    exact_joint: dict[str, ExactFigures] | None = None
    sizes: JSONObject | None = None
    protocol_summary: str | None = None
    claim_point: ClaimPoint | None = None
    central_exact: CentralExact | None = None


class JointViewSource:
    """The actions a_1..a_T of runs on each pair's contextual inputs (candidate i: ``pairs[i]``)."""

    chunk_cells = _CHUNK_CELLS

    def __init__(self, policy: PolicyLike, pairs: list[JointPair], horizon: int) -> None:
        self.policy, self.pairs = policy, pairs
        self.cells_per_run = horizon * int(policy.n_arms)

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        p = self.pairs[candidate]
        return JointDP().run(self.policy, p.d1 if side else p.d0, n, np.random.default_rng(seed), record=False)

    def describe(self, candidate: int) -> JSONObject:
        return self.pairs[candidate].describe()


class TreeSource(JointViewSource):
    """The binary-tree releases at and beside each pair's canary round, from the policy's ledger."""

    def __init__(self, policy: PolicyLike, pairs: list[JointPair], horizon: int, dim: int) -> None:
        super().__init__(policy, pairs, horizon)
        self.horizon = horizon
        # what a recorded run holds: every node's centre and value (its Fed one block per run), about
        # 2 T (d(d+1)/2 + 1) cells for each of two trees, and the policy's own arrays
        self.cells_per_run = 4 * horizon * (dim * (dim + 1) // 2 + 1) + horizon * int(policy.n_arms) * dim

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        p = self.pairs[candidate]
        JointDP().run(self.policy, p.d1 if side else p.d0, n, np.random.default_rng(seed), record=True)
        return tree_features(self.policy, p.round, self.horizon)


class TreePilotSource(TreeSource):
    """Pilot runs of the tree parts. Candidate ``c < len(pairs)``: the canary nodes' values of recorded runs
    (``{"tree"}``, the discriminant's selection split); candidate ``len(pairs) + c``: runs of pair c replayed on
    the other side (:func:`dpaudit.attacks.joint_likelihood.replay_run`): the nodes' values, their centres'
    shift from d to d' (``shift``) and :func:`~dpaudit.attacks.joint_likelihood.release_losses`' ``loss``,
    ``mu2`` and ``moved`` (the discriminant's training split, the likelihood's pilots)."""

    def __init__(self, policy: PolicyLike, pairs: list[JointPair], horizon: int, dim: int, *,
                 trees: bool = True) -> None:
        super().__init__(policy, pairs, horizon, dim)
        self.trees = trees
        self.cells_per_run *= 2  # two ledgers per run when replayed
        self.chunk_cells = _REPLAY_CHUNK_CELLS

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> dict[str, np.ndarray]:
        P = len(self.pairs)
        if candidate < P:
            return {"tree": super().sample(candidate, side, n, seed)}
        p = self.pairs[candidate - P]
        _, rec, _, twin = replay_run(self.policy, p, side, n, seed)
        loss, mu2, moved = release_losses(rec, twin, n)
        out = {"loss": loss, "mu2": mu2, "moved": moved}
        if self.trees:
            nodes = canary_nodes(rec, p.round)
            sign = 1.0 if side == 0 else -1.0  # the shift from d to d' whichever side ran
            out["tree"] = np.hstack([rec[x["index"]].value for x in nodes])
            out["shift"] = sign * np.hstack([twin[x["index"]].centre - rec[x["index"]].centre for x in nodes])
        return out


class LossSource(TreeSource):
    """Privacy losses of runs of each pair replayed on the other side (:func:`~dpaudit.attacks.joint_likelihood.replay_losses`)."""

    def __init__(self, policy: PolicyLike, pairs: list[JointPair], horizon: int, dim: int) -> None:
        super().__init__(policy, pairs, horizon, dim)
        self.cells_per_run *= 2
        self.chunk_cells = _REPLAY_CHUNK_CELLS

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> dict[str, np.ndarray]:
        return replay_losses(self.policy, self.pairs[candidate], side, n, seed)


def _projections(nodes: list[JSONObject], widths: list[int], shift: np.ndarray) -> np.ndarray | None:
    """(features, q): each canary node's values projected on the unit mean shift of its path node (a sibling
    on its path neighbour's), the known difference the canary makes; nodes whose shift is zero are left out.
    None when no node moved (then the discriminant fits every coordinate)."""
    delta = shift.mean(axis=0)
    offsets = np.concatenate([[0], np.cumsum(widths)])
    cols = []
    for node, off, w in zip(nodes, offsets, widths):
        j = node["parent"]
        if j is None:
            continue
        dp = delta[offsets[j]: offsets[j] + widths[j]]
        norm = float(np.linalg.norm(dp))
        if norm <= 1e-9 or widths[j] != w:
            continue
        col = np.zeros(delta.size)
        col[off: off + w] = dp / norm
        cols.append(col)
    return np.stack(cols, axis=1) if cols else None


def _probe(policy: PolicyLike, pair: JointPair) -> tuple[bool, bool, str]:
    """Whether the policy's ledger holds binary-tree nodes near the canary, and whether its runs replay
    (every release made by a dpaudit mechanism): two runs, recorded and replayed; and why not."""
    try:
        _, rec, _, twin = replay_run(policy, pair, 0, 2, np.random.SeedSequence(0))
        release_losses(rec, twin, 2)
    except ReplayMismatch as exc:
        JointDP().run(policy, pair.d0, 2, np.random.default_rng(0), record=True)
        rec = list(getattr(policy.ledger, "releases", []))
        return bool(canary_nodes(rec, pair.round)), False, str(exc)
    if not rec:
        return False, False, "the ledger recorded no release"
    return bool(canary_nodes(rec, pair.round)), True, ""


def _dim(policy: PolicyLike, spec: str) -> int:
    dim = getattr(policy, "dim", None)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
        raise DPAuditError(f"policy {spec!r} has no context dimension `dim`, so it is not a contextual policy and "
                           "cannot be audited under joint DP; use --protocol table.")
    return int(dim)


def preflight(ctx: Context) -> None:
    """The time up front: a pilot of the view sampling, scaled to the audit's runs, against --max-hours."""
    from dpaudit.policies.finite_contextual import is_contextual_spec

    from .cost import check_time

    r = ctx.request
    if isinstance(r.policy, str) and is_contextual_spec(r.policy):
        return
    T = r.horizon if r.horizon is not None else JOINT_DEFAULTS["horizon"]
    if r.horizon is None and r.pair is not None:  # the pair file fixes the horizon
        from dpaudit.protocols.pairs import pair_horizon

        T = max(3, pair_horizon(r.pair) or T)
    from dpaudit.sandbox import TimeBoxExceeded

    from .cost import estimating, overran

    t0 = time.perf_counter()
    try:
        with estimating(r.max_hours) as box:  # a slow constructor or act cannot make the estimate itself long
            policy = ctx.build(T)
            dim = _dim(policy, str(r.policy))
            pairs = joint_pairs(int(policy.n_arms), dim, T)
            src = JointViewSource(policy, pairs, T)
            t0 = time.perf_counter()
            src.sample(0, 0, 200, np.random.SeedSequence(0))
    except TimeBoxExceeded as exc:
        ctx.estimate = Estimate(note=overran(exc, r.max_hours, box, at_least=time.perf_counter() - t0))
        return
    per_run = (time.perf_counter() - t0) / 200
    runs = min(r.runs, JOINT_DEFAULTS["runs"])
    small = max(500, min(4000, runs // 5))
    views = (len(pairs) + 1) * 4 * small + 4 * runs  # membership and central
    if hasattr(policy, "ledger"):
        # the tree parts: pilots (a replayed training split and a selection split of each canary pair), the
        # discriminant's fresh runs and the likelihood's fresh runs with their replays, recorded (about 1.3 x)
        tree_small = _tree_small(runs)
        views += int(1.3 * (len(canary_pairs(int(policy.n_arms), dim, T)) * 6 * tree_small + 4 * runs))
    ctx.estimate = check_time(per_run * views, f"{views} runs of T = {T} at a measured {1 / max(per_run, 1e-9):.3g} "
                                               "runs per second on one process",
                              max_hours=r.max_hours, workers=r.workers, local=r.on_this_machine)


@dataclass(frozen=True)
class _Seeds:
    """The joint plan's seeds, each part its own (spawned once from the audit's seed)."""

    ledger: np.random.SeedSequence
    view: np.random.SeedSequence
    tree: np.random.SeedSequence
    central: np.random.SeedSequence
    likelihood: np.random.SeedSequence
    implied: np.random.SeedSequence
    long: np.random.SeedSequence

    @classmethod
    def of(cls, seed: int) -> "_Seeds":
        return cls(*np.random.SeedSequence(seed).spawn(7))


@dataclass
class _Plan:
    """The joint plan's state between its steps (:func:`audit`)."""

    ctx: Context
    sections: JointSections
    seeds: _Seeds
    policy: PolicyLike
    T: int
    K: int
    dim: int
    #: fresh runs per side (capped) and the pilot size of the membership test
    runs: int
    small: int
    user_pair: JointPair | None
    #: the pairs of the ledger, of the membership test on the actions, and of the tree parts
    pairs: list[JointPair] = field(default_factory=list)
    view_pairs: list[JointPair] = field(default_factory=list)
    tree_pairs: list[JointPair] = field(default_factory=list)
    has_ledger: bool = False
    #: whether the ledger holds tree nodes near the canary, and whether the policy's runs replay
    has_tree: bool = False
    replayable: bool = False
    conf_each: float = 1.0
    engine: Engine = SERIAL
    #: each mechanism's sensitivity factor the replayed canaries realise beyond the recorded one
    raised: dict[str, float] = field(default_factory=dict)
    #: the tree parts' pilot runs (:func:`_pilots`), and the gray-box result (:func:`_tree_likelihood`)
    drawn: list[dict[str, np.ndarray]] = field(default_factory=list)
    likelihood: AuditResult | None = None

    @property
    def floor(self) -> float:
        """The gray-box bound, below which a black-box count may stop as futile (0 without it)."""
        return float(self.likelihood.epsilon_lower) if self.replayable and self.likelihood is not None else 0.0


def audit(ctx: Context) -> None:
    """The joint plan (module docstring), filling ``ctx``: the policy at the horizon (the pair's), the pairs, the
    release probe, the ledgers, the tree parts' pilots, the gray box, the membership test on the actions, the
    tree discriminant, the central view beside."""
    from dpaudit.policies.finite_contextual import is_contextual_spec

    r = ctx.request
    if isinstance(r.policy, str) and is_contextual_spec(r.policy):
        return audit_finite(ctx)
    p = _start(ctx)
    _choose_pairs(p)
    _probe_releases(p)
    _ledger(p)
    ctx.set_upper(policy_upper(p.policy, p.T, ctx.delta, protocol="joint"))  # from the ledger just recorded
    if p.has_ledger and p.user_pair is None and p.T < LONG_LEDGER["horizon"] and ctx.ledger is not None:
        _long_ledger(ctx, p.sections, p.K, p.dim, p.raised, p.seeds.long)
    _pilots(p)
    # the gray box first: its bound is the floor below which the black-box counts (the membership test on the
    # actions, the tree discriminant) may stop as futile
    projectable = p.replayable  # the pilots replayed, so the discriminant has its known differences
    _tree_likelihood(p)
    mem = _membership(p)
    if p.has_tree:
        _tree_releases(p, projectable)
    _record_likelihood(p)
    if p.user_pair is None:
        _central_view(p)
    note = _power_note(mem, p.runs, ctx, p.T, p.has_tree or p.replayable, p.conf_each)
    ctx.set_power(mem, len(p.view_pairs), p.runs, p.conf_each, note=note)
    if note:
        ctx.notes.append(note)


def _start(ctx: Context) -> _Plan:
    """The plan's start: the horizon (``--horizon``, the pair file's, or 16), the policy built there and its
    claim read, the fresh runs capped at :data:`JOINT_DEFAULTS`."""
    r, spec = ctx.request, ctx.request.spec
    T = check_int("--horizon", r.horizon if r.horizon is not None else JOINT_DEFAULTS["horizon"], minimum=3)
    user_pair = None
    if r.pair is not None:
        from dpaudit.protocols.pairs import load_joint_pair

        probe = ctx.build(T)
        user_pair = load_joint_pair(r.pair, n_arms=int(probe.n_arms), dim=_dim(probe, spec))
        T_pair = int(user_pair.d0.X.shape[0])
        if r.horizon is not None and r.horizon != T_pair:
            raise DPAuditError(f"--horizon {r.horizon} differs from the pair's T = {T_pair}; the pair file fixes the "
                               "horizon, so leave --horizon out.")
        T = T_pair
    sections = JointSections()
    ctx.sections = sections
    ctx.horizon = T
    policy = ctx.build(T)
    ctx.policy = policy
    dim = _dim(policy, spec)
    ctx.read_claim(policy, spec)
    ctx.params = dict(r.params)
    runs = r.runs
    if runs > JOINT_DEFAULTS["runs"]:
        ctx.notes.append(f"fresh runs capped at {JOINT_DEFAULTS['runs']} per side (asked {runs}) to keep the audit "
                         "within two minutes; the bounds hold at their confidence whatever the sample size.")
        runs = JOINT_DEFAULTS["runs"]
    return _Plan(ctx, sections, _Seeds.of(r.seed), policy, T, int(policy.n_arms), dim, runs,
                 max(500, min(4000, runs // 5)), user_pair, has_ledger=hasattr(policy, "ledger"))


def _choose_pairs(p: _Plan) -> None:
    """The reviewer's pair, else the joint adversaries' pairs, the PGD read-out pair for the membership test and
    the worst-case canaries for the tree parts."""
    if p.user_pair is not None:
        p.pairs, p.view_pairs, p.tree_pairs = [p.user_pair], [p.user_pair], [p.user_pair]
        p.ctx.notes.append(f"audited on the neighbouring pair given in {p.ctx.request.pair} (round "
                           f"{p.user_pair.round} differs); no search.")
        return
    p.pairs = joint_pairs(p.K, p.dim, p.T)
    p.view_pairs = p.pairs + readout_pairs(p.K, p.dim, p.T)  # + the PGD read-out adversary
    p.tree_pairs = canary_pairs(p.K, p.dim, p.T)


def _probe_releases(p: _Plan) -> None:
    """Which release parts can run (:func:`_probe`: tree nodes near the canary, runs that replay), the
    confidence split between the parts that sample, and the engine (this process when the policy cannot
    travel)."""
    ctx = p.ctx
    if p.has_ledger:
        try:
            p.has_tree, p.replayable, why = _probe(p.policy, p.tree_pairs[0])
        except ReplayMismatch:
            raise
        except DPAuditError as exc:  # the policy refuses contexts that change from round to round
            raise DPAuditError(f"policy {ctx.request.spec!r} cannot be audited under joint DP: a run on the joint "
                               "adversary's input, whose contexts change from round to round, failed "
                               f"({exc})") from exc
        if not p.replayable:
            ctx.notes.append(f"no tree-likelihood part: replaying the policy's runs on the other input failed ({why})")
    p.conf_each = confidence_each(ctx, 1 + int(p.has_tree) + int(p.replayable))
    p.sections.arms, p.sections.confidence_per_attack = Arms(p.K), p.conf_each
    p.engine = ctx.engine
    try:
        p.engine.check_picklable(p.policy)
    except DPAuditError as exc:
        ctx.notes.append(f"ran in this process only: {exc}")
        p.engine = p.engine.serial()


def _ledger(p: _Plan) -> None:
    """The per-round ledger (exact, judged), each mechanism at the larger of its recorded sensitivity and the
    one the replayed canaries realise (:func:`_implied_sensitivities`)."""
    ctx, policy = p.ctx, p.policy
    if not p.has_ledger:
        return
    ctx.say("joint: ledger accounting")
    t0 = time.perf_counter()
    d = p.pairs[0].d0
    led = ledger_audit(policy, JointDP(), d, p.seeds.ledger)
    implied = _implied_sensitivities(policy, p.tree_pairs, p.seeds.implied) if p.replayable else {}
    p.raised = raised = {k: v for k, v in implied.items() if v > 1 + 1e-9}
    if led is not None and raised:  # composed again with the sensitivities the canaries realise
        led = {**ledger_audit(policy, JointDP(), d, p.seeds.ledger, sensitivity_factor=raised),
               "recorded_implied": led.get("implied"), "sensitivity_factor": raised}
    if led is None:
        return
    g = led.pop("implied_guarantee", None)
    led = {"kind": "per-round", "tree": p.has_tree, **led}
    if g is not None:
        eps = float(convert_claim(g, ctx.delta)[0])
        led["implied_epsilon"] = eps
        ctx.exact.append(Exact("per-round ledger", eps, _ledger_method(ctx, led, raised), True, {}, {}))
    ctx.ledger = led
    what = " (a tree ledger: every round feeds one node per tree level by design)" if p.has_tree else ""
    ctx.ran("ledger", "exact", f"{led.get('releases', 0)} releases composed per round{what}",
            time.perf_counter() - t0)


def _ledger_method(ctx: Context, led: JSONObject, raised: dict[str, float]) -> str:
    """How the per-round ledger figure was composed; with sensitivities the canaries raised, a note says so."""
    how = f"every release composed per round: {led['implied']}"
    if raised:
        how += (" (each release at the larger of its recorded sensitivity and the one the replayed canaries "
                "realise: " + ", ".join(f"{k} x {v:.4g}" for k, v in sorted(raised.items()))
                + f"; {led['recorded_implied']} at the recorded ones)")
        ctx.notes.append("the canaries of joint DP's neighbours (a round's context and reward replaced) move "
                         "releases by more than the sensitivities the ledger records ("
                         + ", ".join(f"{k}: {v:.4g} times" for k, v in sorted(raised.items()))
                         + "); the per-round ledger composes each at the larger one, a lower bound on its true "
                         "sensitivity, so the figure is what the policy's own noise costs for these neighbours.")
    return how


def _pilots(p: _Plan) -> None:
    """One set of pilot runs of the canary pairs for both release parts: a training split replayed on the other
    side (the known differences the discriminant projects on, its fit, the likelihood's candidates and grid) and
    a selection split (the discriminant's pair and threshold); the pilots only choose tests."""
    ctx = p.ctx
    if not (p.has_tree or p.replayable):
        return
    ctx.say("joint: pilot runs for the tree attacks")
    t0 = time.perf_counter()
    P, tree_small = len(p.tree_pairs), _tree_small(p.runs)
    src = TreePilotSource(p.policy, p.tree_pairs, p.T, p.dim, trees=p.has_tree)
    seeds = [ss.spawn(4) for ss in p.seeds.tree.spawn(P)]
    reqs = [(P + c, 0, tree_small, sc[0]) for c, sc in enumerate(seeds)]
    reqs += [(P + c, 1, tree_small, sc[1]) for c, sc in enumerate(seeds)]
    if p.has_tree:
        reqs += [(c, side, tree_small, sc[2 + side]) for c, sc in enumerate(seeds) for side in (0, 1)]
    try:
        p.drawn = draw_many(src, reqs, p.engine)
    except ReplayMismatch as exc:  # a run the two-run probe did not meet: the release parts go without replays
        p.replayable = False
        ctx.notes.append(f"no tree-likelihood part: replaying a pilot run on the other input failed ({exc})")
        reqs = [(c - P if c >= P else c, side, m, sd) for c, side, m, sd in reqs]
        p.drawn = draw_many(src, reqs, p.engine) if p.has_tree else []
    ctx.ran("pilots", "setup", f"{tree_small} training runs per side of each of {P} canary pairs, replayed on the "
                               "other side" + (f", and {tree_small} selection runs per side" if p.has_tree else "")
            + ", which choose the release attacks' tests", time.perf_counter() - t0)


def _tree_likelihood(p: _Plan) -> None:
    """The gray box (``tree-likelihood``): the exact privacy loss of every release of fresh runs replayed on the
    other input (:func:`dpaudit.attacks.joint_likelihood.joint_likelihood_attack`); a replay that fails leaves its
    share of the confidence unspent (the other bounds only get safer)."""
    ctx = p.ctx
    if not p.replayable:
        return
    ctx.say("joint: the exact privacy loss of the releases (gray box)")
    P = len(p.tree_pairs)
    cands = [(c, side) for c in range(P) for side in (0, 1)]
    pilots = [p.drawn[side * P + c]["loss"] for c, side in cands]
    try:
        p.likelihood = joint_likelihood_attack(LossSource(p.policy, p.tree_pairs, p.T, p.dim), cands, pilots,
                                               p.seeds.likelihood, delta=ctx.delta, confidence=p.conf_each,
                                               n_runs=p.runs, claim=getattr(p.policy, "claim", None), engine=p.engine,
                                               progress=ctx.progress)
    except ReplayMismatch as exc:
        p.replayable = False
        ctx.notes.append(f"no tree-likelihood bound: replaying a fresh run on the other input failed ({exc})")


def _membership(p: _Plan) -> AuditResult:
    """The black box on the JDP view a_{t+1}..a_T (:func:`dpaudit.attacks.membership.view_attack`), its count
    free to stop below the gray-box bound."""
    ctx = p.ctx
    assert ctx.claim is not None
    ctx.say("joint: membership attack on a_{t+1}..a_T")
    src = JointViewSource(p.policy, p.view_pairs, p.T)
    mem = view_attack(src, list(range(len(p.view_pairs))), [pair.round for pair in p.view_pairs], p.K, p.T,
                      p.seeds.view, delta=ctx.delta, confidence=p.conf_each, small=p.small, runs=p.runs,
                      name="membership", engine=p.engine, progress=ctx.progress, claim=ctx.claim.epsilon,
                      floor=p.floor, screen=_screen(p.small), keep=2)
    ctx.attacks.append(mem)
    ctx.ran("membership", "bound", f"black-box on a_(t+1)..a_T, {len(p.view_pairs)} pairs, {runs_text(mem, p.runs)} "
                                   "fresh runs per side", mem.seconds)
    return mem


def _tree_releases(p: _Plan, projectable: bool) -> None:
    """The black box on the releases (``tree-releases``): the tree nodes at and beside the canary, each projected
    on the canary's known difference when the pilots replayed (``projectable``), scored by Fisher's discriminant
    (:func:`dpaudit.attacks.discriminant.lda_attack`)."""
    ctx = p.ctx
    assert ctx.claim is not None
    ctx.say("joint: the tree releases at the canary (black box on the releases)")
    P, tree_small = len(p.tree_pairs), _tree_small(p.runs)
    train, select = p.drawn[:2 * P], p.drawn[2 * P:]
    pilots, project = [], []
    for c, pair in enumerate(p.tree_pairs):
        tr0, tr1 = train[c], train[P + c]
        se0, se1 = select[2 * c], select[2 * c + 1]
        pilots += [tr0["tree"], tr1["tree"], se0["tree"], se1["tree"]]
        if projectable:
            nodes, widths = _node_widths(p.policy, pair)
            project.append(_projections(nodes, widths, np.vstack([tr0["shift"], tr1["shift"]])))
        else:
            project.append(None)
    tree = lda_attack(TreeSource(p.policy, p.tree_pairs, p.T, p.dim), list(range(P)), p.seeds.tree, delta=ctx.delta,
                      confidence=p.conf_each, n_train=tree_small, n_select=tree_small, n_test=p.runs,
                      name="tree-releases", engine=p.engine, progress=ctx.progress, claim=ctx.claim.epsilon,
                      pilots=pilots, project=project, threshold_for_fresh=True, floor=p.floor)
    ctx.attacks.append(tree)
    ctx.ran("tree-releases", "bound", "black box on the releases: the tree nodes at and beside the canary, "
                                      f"projected on its known difference, {runs_text(tree, p.runs)} fresh runs per "
                                      "side", tree.seconds)


def _record_likelihood(p: _Plan) -> None:
    """The gray-box bound into the verdict, after the black-box counts it floored: its Rényi orders above the
    claim, what its replays saw (actions that read the canary other than through the releases, releases moved
    beyond their recorded sensitivity, which refutes the ledger's upper bound)."""
    ctx, lik, runs = p.ctx, p.likelihood, p.runs
    if not p.replayable or lik is None:
        return
    ctx.attacks.append(lik)
    ctx.renyi_violation = list(lik.details.get("renyi_violation", []))
    p.sections.renyi_violation = ctx.renyi_violation
    if lik.details.get("views_not_post_processing"):
        ctx.notes.append(f"in {lik.details['views_not_post_processing']} of {runs} replayed runs the actions after "
                         "the canary round changed although every release was the same: the actions read the "
                         "canary other than through the releases, which the tree-likelihood part cannot see.")
    if lik.details.get("sensitivity_excess_runs"):
        excess = lik.details["sensitivity_excess_max"]
        ctx.notes.append(f"in {lik.details['sensitivity_excess_runs']} of {runs} replayed runs the canary moved a "
                         f"release's centre by up to {excess:.4g} times the sensitivity its ledger records: the "
                         "policy's own accounting understates that release's cost for joint DP's neighbours (a "
                         "round's context and reward replaced); releases no canary moved keep their recorded "
                         "sensitivity in the ledger figure.")
        if ctx.upper is not None and ctx.upper.epsilon is not None:  # its sensitivity assumption is refuted
            ctx.set_upper(None, reason="no upper bound: the ledger's composition assumes every release's sensitivity "
                                       "is right for joint DP's neighbours, and the replay moved a release's centre by "
                                       f"{excess:.4g} times the sensitivity its ledger records")
    ctx.ran("tree-likelihood", "bound", "gray box: the exact privacy loss of every release, each run replayed on "
                                        f"the other input, {lik.details['n_fresh']} fresh runs (all counted); "
                                        "valid when the replay is exact and the ledger's noise true", lik.seconds)


def _central_view(p: _Plan) -> None:
    """Beside the verdict: the central view a_t..a_T on a pair whose canary swaps which arm carries e1 (joint DP
    does not promise to hide a_t); with a claim, its count stops once the view is settled below it."""
    ctx = p.ctx
    ctx.say("joint: the central view a_t..a_T (beside the verdict)")
    cpairs = joint_pairs(p.K, p.dim, p.T, central=True)
    central = view_attack(JointViewSource(p.policy, cpairs, p.T), [0], [cpairs[0].round - 1], p.K, p.T,
                          p.seeds.central, delta=ctx.delta, confidence=ctx.confidence, small=_screen(p.small),
                          runs=p.runs, name="central view", engine=p.engine, progress=ctx.progress,
                          claim=ctx.claim.epsilon if ctx.claim else None)
    ctx.beside.append(central)
    ctx.notes.append(f"central view a_t..a_T (not promised by joint DP): eps >= {central.epsilon_lower:.4g} on "
                     f"the pair '{cpairs[0].label}' ({runs_text(central, p.runs)} fresh runs per side).")
    ctx.ran("central view", "beside", f"black-box on a_t..a_T (joint DP does not hide a_t), "
                                      f"{runs_text(central, p.runs)} fresh runs per side", central.seconds)


#: the long-horizon ledger: its horizon and runs (the per-round composition is a maximum over runs and rounds,
#: and on :func:`~dpaudit.protocols.joint.growth_background` every run releases alike, so a few runs suffice)
LONG_LEDGER = {"horizon": 768, "runs": 8}


def _long_ledger(ctx: Context, sections: JointSections, K: int, dim: int, raised: dict[str, float],
                 seed: np.random.SeedSequence) -> None:
    """The per-round ledger of the policy built for a longer horizon and run on an input that drives its
    data-dependent releases (:func:`dpaudit.protocols.joint.growth_background`), judged like the ledger.

    The claim holds at every horizon, and a policy that releases again when its data has grown enough (Alg. 2's
    PGD updates) releases nothing data-dependent at the audit's short horizon: there, a gradient budget not split
    over its updates' steps composes within the claim. Each mechanism is composed at the sensitivity factor the
    short audit's canaries realised (``raised``). A policy that cannot be built or run at that horizon is
    skipped with a note."""
    T_long = LONG_LEDGER["horizon"]
    ctx.say(f"joint: the ledger at T = {T_long} on an input that drives the policy's updates")
    t0 = time.perf_counter()
    try:
        long_policy = ctx.build(T_long)
        data = growth_background(K, dim, T_long)
        led = ledger_audit(long_policy, JointDP(), data, seed, n_runs=LONG_LEDGER["runs"], sensitivity_factor=raised)
    except DPAuditError as exc:
        ctx.notes.append(f"no long-horizon ledger: the policy built for T = {T_long} could not run ({exc})")
        return
    g = None if led is None else led.get("implied_guarantee")
    if g is None:
        return
    eps = float(convert_claim(g, ctx.delta)[0])
    claimed = ctx.claim.epsilon if ctx.claim is not None else math.inf
    usage = int(led.get("max_releases_per_round", 0))
    method = (f"the policy built for T = {T_long} and run on every arm's context e_(t mod d) at round t (the input "
              "whose design matrix grows fastest, so its data-dependent releases happen), every release composed per "
              "round")
    sections.long_horizon_ledger = LongLedger(T_long, LONG_LEDGER["runs"], eps, usage, led.get("implied"), dict(raised))
    if eps > claimed * (1 + EXACT_TOLERANCE) + EXACT_TOLERANCE:  # the verdict's own comparison
        ctx.exact.append(Exact("long-horizon ledger", eps, method, True, {}, {"horizon": T_long}))
        short = ctx.upper.proved if ctx.upper is not None else None
        ctx.set_upper(None, reason=f"no upper bound: the policy built for T = {T_long} composes to eps = {eps:.4g} on an "
                                   "input that drives its updates, above the claim"
                                   + (f"; the ledger's {short:.4g} at T = {ctx.horizon} holds for that horizon only"
                                      if short is not None else ""))
    what = (f"{LONG_LEDGER['runs']} runs at T = {T_long} on an input that drives the policy's updates: the most releases "
            f"a round feeds {usage}, eps = {eps:.4g} per round")
    ctx.ran("long-horizon ledger", "exact", what, time.perf_counter() - t0)


#: replayed runs per canary pair and side that measure the sensitivities the canaries realise
IMPLIED_RUNS = 200


def _implied_sensitivities(policy: PolicyLike, pairs: list[JointPair], seed: np.random.SeedSequence) -> dict[str, float]:
    """Per mechanism, the largest factor by which a replayed canary moves a release beyond its recorded
    sensitivity (:func:`dpaudit.attacks.joint_likelihood.implied_sensitivities`), over :data:`IMPLIED_RUNS` runs of
    each pair and side; {} when a replay fails (the gray-box part then says why)."""
    out: dict[str, float] = {}
    seeds = seed.spawn(2 * len(pairs))
    try:
        for i, (pair, side) in enumerate((p, sd) for p in pairs for sd in (0, 1)):
            _, rec, _, twin = replay_run(policy, pair, side, IMPLIED_RUNS, seeds[i])
            for k, v in implied_sensitivities(rec, twin).items():
                out[k] = max(out.get(k, 0.0), v)
    except ReplayMismatch:
        return {}
    return out


def _screen(small: int) -> int:
    """Views per side and split that screen the membership test's pairs (the two best go on to ``small``), and
    the central view's pilots (one pair, beside the verdict)."""
    return max(250, small // 4)


def _tree_small(runs: int) -> int:
    """Pilot runs per side of each canary pair and split for the tree parts (few weights to fit)."""
    return max(500, min(1000, runs // 20))


def _node_widths(policy: PolicyLike, pair: JointPair) -> tuple[list[JSONObject], list[int]]:
    """The canary nodes of ``pair`` and their widths (the layout of the tree features), from a 1-run recording."""
    JointDP().run(policy, pair.d0, 1, np.random.default_rng(0), record=True)
    rels = policy.ledger.releases
    nodes = canary_nodes(rels, pair.round)
    return nodes, [int(rels[x["index"]].value.shape[1]) for x in nodes]


def _power_note(mem: AuditResult, runs: int, ctx: Context, T: int, has_ledger: bool, conf_each: float) -> str:
    """A plain note when the claim lies beyond what the actions revealed (the verdict then rests on the
    gray-box and ledger parts)."""
    from dpaudit.attacks.bounds import largest_bound, smallest_detectable

    got, claim = float(mem.epsilon_lower), ctx.claim.epsilon if ctx.claim else math.inf
    if got > claim:
        return ""
    runs = int(mem.details.get("fresh_runs_used") or runs)  # what the test counted, if it stopped once settled
    seen = "shows nothing (bound 0)" if got <= 0 else f"shows eps >= {got:.3g}"
    return (f"power: the black-box attack on a_{{t+1}}..a_T {seen} at T = {T} with {runs} fresh runs per side (it "
            f"could show eps from {smallest_detectable(runs, ctx.delta, conf_each):.3g} up to "
            f"{largest_bound(runs, ctx.delta, conf_each):.3g}); the claimed eps = {claim:.4g} is beyond what the "
            "actions revealed, so " + ("this verdict rests on the release attacks and the ledger" if has_ledger
                                       else "with no release attack for this policy (no ledger, or none the "
                                            "release attacks can read), nothing in this audit tests the claim near "
                                            "its value"))


# ---- the exact audit of finite contextual policies -------------------------------------------------

def _f(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _wd(w: JointWitness | None) -> JSONObject | None:
    return None if w is None else w.to_dict()


def _witness_label(w: JSONObject | None) -> str:
    if not w:
        return "no pair differs"
    return (f"round {w['round']}: {tuple(w['canary'])} vs {tuple(w['neighbour'])} after history {w['history']}, "
            f"future contexts {w['future_contexts']}")


def audit_finite(ctx: Context) -> None:
    """The exact joint-DP audit of a finite contextual policy: the exact eps at delta, delta at ``epsilon``
    and D_alpha under the definition of anticipating JDP, and, for a pure or (eps, delta) claim, the exact eps at
    the claim's own delta; every figure is judged against the claim (exact, no sampling)."""
    from dpaudit.policies.finite_contextual import load_contextual

    from .findings import Claim
    from .setup import claimed_epsilon

    r = ctx.request
    if r.params:
        raise DPAuditError(f"a finite contextual policy has no parameters (its rules are its spec), got {dict(r.params)}.")
    policy = load_contextual(r.policy)  # type: ignore[arg-type]
    ctx.policy = policy
    ctx.horizon = policy.horizon
    claim = policy.claim
    at = ExactAt(float(r.epsilon if r.epsilon is not None else 1.0), ctx.delta,
                 float(r.alpha if r.alpha is not None else 2.0))
    point = _claimed_point(claim, ctx.delta)
    prof = _enumerate(ctx, policy, at, point)
    exact = {m: ExactFigures(prof.epsilon_at[m][0], prof.delta_at[m][0], prof.renyi[m][0],
                             _wd(prof.witnesses[m]["epsilon"][0]), _wd(prof.witnesses[m]["delta"][0]),
                             _wd(prof.witnesses[m]["renyi"][0])) for m in prof.epsilon_at}
    ctx.params = {}
    sections = FiniteJointSections(
        arms=Arms(policy.n_arms), contexts=list(policy.contexts), rewards=[float(x) for x in policy.rewards],
        at=at, exact_joint=exact, sizes=prof.sizes,
        protocol_summary=("input: per round a context label and per-arm rewards; view: a_{t+1}..a_T; neighbours: "
                          "round t's (context, action, reward) changed, the history before t and every future context "
                          "and reward fixed by the adversary (anticipating joint DP, as in Shariff & Sheffet 2018 and "
                          "Vietri et al. 2020)"))
    ctx.sections = sections
    ctx.confidence = 1.0
    _exact_findings(ctx, sections, prof, exact, at, point, judged=claim is not None)
    ctx.ran("exact enumeration", "exact", f"every history, canary pair and future of T = {policy.horizon}: eps = "
                                          f"{_f(exact['history'].epsilon)}", prof.seconds)
    ctx.set_upper({"epsilon": exact["history"].epsilon, "method": "exact enumeration",
                   "details": {"source": "exact enumeration"}})
    sections.central_exact = CentralExact(exact["central"].epsilon, exact["central"].witness_epsilon)
    if claim is None:
        ctx.no_claim = NoClaim("the spec states no claim, so there is nothing to judge; the exact numbers stand alone",
                               {"attack": "joint enumeration", **(exact["history"].witness_epsilon or {})})
    else:
        eps_claim, how = claimed_epsilon(claim, ctx.delta)
        ctx.claim = Claim(claim.describe(), eps_claim, ctx.delta, how)


def _claimed_point(claim: object, delta: float) -> tuple[float, float] | None:
    """The claim's own (eps, delta) point, checked exactly as well, when it is not at the audit's delta (a pure
    claim's delta is 0); None otherwise."""
    from dpaudit.accountants import ApproxDP, PureDP

    point = None
    if isinstance(claim, PureDP):
        point = (claim.epsilon, 0.0)
    elif isinstance(claim, ApproxDP):
        point = (claim.epsilon, claim.delta)
    return point if point is not None and point[1] != delta else None


def _enumerate(ctx: Context, policy: FiniteContextualPolicy, at: ExactAt,
               point: tuple[float, float] | None) -> JointProfile:
    """Every history, pair of canary triples and future enumerated (:func:`dpaudit.attacks.exact_joint.
    exact_joint_profile`), at the audit's delta and the claim's own."""
    from dpaudit.attacks.exact import DEFAULT_MAX_WORK
    from dpaudit.attacks.exact_joint import exact_joint_profile

    max_work = ctx.request.max_work
    ctx.say("joint: exact enumeration")
    return exact_joint_profile(policy, epsilons=[at.epsilon], deltas=[ctx.delta] + ([point[1]] if point else []),
                               alphas=[at.alpha], max_work=DEFAULT_MAX_WORK if max_work is None else max_work)


def _exact_findings(ctx: Context, sections: FiniteJointSections, prof: JointProfile, exact: dict[str, ExactFigures],
                    at: ExactAt, point: tuple[float, float] | None, judged: bool) -> None:
    """The enumeration's figures in the findings: the notes (the user-data neighbours and the central view
    beside), the exact eps at delta (judged when there is a claim) and at the claim's own delta."""
    history = exact["history"]
    ctx.notes += [f"exact enumeration ({prof.seconds:.3g} s): every canary round, every history before it the policy "
                  "can produce, every pair of round-t triples (context, action, reward), every future of contexts and "
                  "per-arm rewards; no sampling.",
                  f"user-data neighbours (a_t drawn by the policy): eps = {_f(exact['data'].epsilon)} at delta = "
                  f"{ctx.delta:g}; the central view a_t..a_T (not promised by joint DP): eps = "
                  f"{_f(exact['central'].epsilon)}."]
    w = history.witness_epsilon
    ctx.exact.append(Exact("joint enumeration", history.epsilon, f"exact eps at delta = {ctx.delta:g} (anticipating "
                                                                 "joint DP as in Shariff & Sheffet 2018 and Vietri et "
                                                                 "al. 2020, enumerated)", judged,
                           {"label": _witness_label(w), **(w or {})},
                           {"renyi": {"orders": [at.alpha], "value": [history.renyi]},
                            "delta_at_epsilon": {"epsilon": at.epsilon, "delta": history.delta_at_epsilon}}))
    if point is not None:
        e_pt = prof.epsilon_at["history"][1]  # the claim's delta is the second one enumerated
        ctx.exact.append(Exact("joint enumeration at the claim's delta", e_pt,
                               f"exact eps at the claim's own delta = {point[1]:g}", True, {}, {}, claimed=point[0]))
        sections.claim_point = ClaimPoint(point[0], point[1], e_pt)


def membership_only(spec: str, params: dict[str, str] | None = None, *, horizon: int, pairs: str = "all",
                    delta: float = 1e-5, confidence: float = 0.95, runs: int = 20000, fit: int | None = None,
                    seed: int = 0) -> AuditResult:
    """The joint audit's black-box attack alone (for measuring its power, ``benchmarks/studies/joint_power.py``):
    ``pairs`` is ``"all"`` (the audit's pairs and the read-out pair), ``"default"`` or ``"readout"``;
    ``fit`` the views per side for fitting and for selection (default as the audit: runs/5 in [500, 4000])."""
    from dpaudit.engine import one_blas_thread

    from .setup import build_policy

    T = check_int("--horizon", horizon, minimum=3)
    runs = check_int("--runs", runs, minimum=100)
    policy = build_policy(spec, dict(params or {}), T)
    K, dim = int(policy.n_arms), _dim(policy, spec)
    chosen = {"all": joint_pairs(K, dim, T) + readout_pairs(K, dim, T), "default": joint_pairs(K, dim, T),
              "readout": readout_pairs(K, dim, T)}.get(pairs)
    if not chosen:
        raise DPAuditError(f"pairs must be 'all', 'default' or 'readout' (the read-out pair needs d >= 2 and T >= 8), "
                           f"got {pairs!r} at d = {dim}, T = {T}.")
    small = fit if fit is not None else max(500, min(4000, runs // 5))
    with one_blas_thread():
        return view_attack(JointViewSource(policy, chosen, T), list(range(len(chosen))), [p.round for p in chosen],
                           K, T, np.random.SeedSequence(seed), delta=delta, confidence=confidence, small=small,
                           runs=runs, name="membership")
