"""The plan of local DP: a local-DP claim audited per user.

The definition is "Local DP" of the interactive joint/local DP definitions and Def. 1 of Zheng, Cai,
Huang, Li & Wang (2020), "Locally Differentially Private (Contextual) Bandits Learning"
(:mod:`dpaudit.papers`).

Under local DP each user's data z_t is private and the adversary sees the server's whole transcript:
every message o_1..o_T and every action. A claim of (eps, delta)-LDP says that every user's channel
z -> o is (eps, delta)-DP over the whole data domain. Parts:

1. *ledger* (exact, judged): every message the policy sent through :mod:`dpaudit.mechanisms`'s channels
   on an audit table, composed per user (:func:`dpaudit.accounting.ledger_per_user`), and the
   calibration lint of the closed-form Gaussian rule the channel used. A figure above the claim is a
   violation: it is exact arithmetic on the noise the users' channels recorded;
2. *channel* (black box): the plug-in's ``channel(z_batch, rng)`` queried with z and z' at the
   extremes of its ``domain`` (or the pairs of ``domain_pairs()``), a threshold test on the message
   (on its projection onto the mean difference learnt on a split, for vector messages); and *channel
   likelihood* (gray box) for a channel that records its Gaussian or Laplace releases
   (``channel(z_batch, rng, ledger=...)``): the exact loss of each fresh message
   (:func:`channel_losses`), bounded as the central likelihood attack bounds its losses
   (:func:`dpaudit.attacks.likelihood.loss_bounds`), the two sharing the channel's error budget;
3. *finite channel* (exact, judged): ``channel_table()`` gives P(o | z), the exact eps(delta) over every
   ordered pair of inputs (:func:`dpaudit.attacks.exact.exact_channel_epsilon`);
4. *transcript* (black box on the view): for users t in {0, 1, T/2, T-2}, neighbouring tables that
   differ in user t's row (domain extremes) are run and what the server received from user t
   (``transcript()``) is tested as in 2. This is what catches a server that peeks at a raw value;
5. *central* (Table DP: Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits", Def. 3):
   LDP implies DP of the action sequence with the same (eps, delta) (Zheng et al. 2020, Thm 1), so the
   central plan runs with ``protocol="table"`` on the same engine and its bounds enter the verdict as
   ``central membership`` / ``central likelihood``.

A BCO policy (continuous actions, :mod:`dpaudit.protocols.continuous`) has parts 1, 2, 4 and 5 with
loss-sequence neighbours; its transcript features are the message (times the exploration
direction for two-point policies) and its central part tests the point sequence.

Sample sizes: ``20 x runs`` fresh channel messages per side, ``runs / 5`` fresh transcript runs per
side and user, ``runs / 5`` fresh runs per side for the central part. The confidence is split
between the sampling parts (2, 4, 5).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Protocol, Sequence, Union

import numpy as np

from dpaudit.accounting import calibration_lints, ledger_per_user, policy_upper
from dpaudit.attacks.bounds import split_confidence
from dpaudit.attacks.exact import exact_channel_epsilon
from dpaudit.attacks.likelihood import loss_bounds
from dpaudit.attacks.limits import gaussian_profile, likelihood_limit, sufficient_size
from dpaudit.attacks.membership import threshold_attack
from dpaudit.attacks.result import AuditResult
from dpaudit.engine import Engine
from dpaudit.errors import DPAuditError, InternalError
from dpaudit.mechanisms import Ledger, Release
from dpaudit.protocols import LocalDP, PairSpec, TableDP, make_pair
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols.local import LocalPluginInfo, ask_transcript, check_local_plugin, real_array
from dpaudit.protocols.continuous import action_space, central_features, loss_pair, play, transcript_features

from .context import DEFAULTS, Context, confidence_each, runs_text
from .findings import Exact, Findings, Verdict
from .sections import Arms, JSONObject, Sections
from .setup import with_features

__all__ = ["audit", "preflight", "channel_attack", "LOCAL_DEFAULTS", "ChannelSource", "TranscriptSource", "LossSource",
           "channel_likelihood", "channel_losses", "channel_mu", "records_channel"]

#: fresh channel samples per side = ``channel_factor`` x runs; transcript and central runs per side = runs / 5
LOCAL_DEFAULTS = {"channel_factor": 20, "transcript_div": 5, "central_div": 5}
class ChannelPolicy(Protocol):
    """What the channel parts use of a local-DP policy: its users' channel (``channel(z_batch, rng)``, with
    ``ledger=`` when it records its releases) and the domain of their data."""

    domain: tuple[float, float]
    channel: Callable[..., np.ndarray]


class PointsPolicy(Protocol):
    """What the BCO parts use of a policy that plays points: how many per round, in how many dimensions, and the
    bound of its users' losses."""

    n_points: int
    d: int
    loss_bound: float


#: what the findings keep of the central Table-DP part's own findings (its ``central`` section)
CENTRAL_KEYS = ("verdict", "reason", "epsilon_claimed", "epsilon_lower", "gap", "witness", "attacks", "ledger", "notes",
                "seconds", "horizon", "epsilon_upper", "upper")


@dataclass(frozen=True)
class CentralPart:
    """The central Table-DP part of a K-armed local audit: its own findings, of which the local findings keep
    :data:`CENTRAL_KEYS`."""

    findings: Findings

    def to_json(self) -> JSONObject:
        return {k: v for k, v in self.findings.to_dict().items() if k in CENTRAL_KEYS}


@dataclass(frozen=True)
class PointsCentral:
    """The central part of a BCO policy's local audit: one threshold test on the points played."""

    verdict: Verdict
    epsilon_claimed: float
    epsilon_lower: float
    gap: float
    witness: JSONObject
    attacks: list[AuditResult]
    reason: str
    ledger: None
    seconds: float


@dataclass
class LocalSections(Sections):
    """The local plan's sections of the findings, in their order."""

    channel: str | None = None
    arms: Arms | None = None
    confidence_per_attack: float | None = None
    lints: list[JSONObject] | None = None
    central: CentralPart | PointsCentral | None = None


def domain_pairs(policy: ChannelPolicy) -> list[tuple[np.ndarray, np.ndarray]]:
    """The pairs of user data the channel attack compares: ``domain_pairs()``, else the domain's ends."""
    pairs = getattr(policy, "domain_pairs", None)
    if callable(pairs):
        out = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs()]
        if not out:
            raise DPAuditError("domain_pairs() returned no pair of user data to compare.")
        return out
    try:
        lo, hi = (float(x) for x in policy.domain)
    except (TypeError, ValueError):
        raise DPAuditError(f"the policy's domain must be (low, high) for scalar data, or give domain_pairs(); "
                           f"got {policy.domain!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"the policy's domain must be finite with low < high, got {policy.domain!r}.")
    return [(np.array(lo), np.array(hi))]


def messages(policy: ChannelPolicy, z: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` messages of a user with data ``z`` as (n, m) floats, checked for shape and finiteness."""
    batch = np.broadcast_to(z, (n,) + z.shape).copy()
    try:
        m = real_array(policy.channel(batch, rng), "the policy's channel", "a message is finite real numbers")
    except (DPAuditError, InternalError):
        raise
    except Exception as exc:  # the plug-in's channel failed on data from its own domain
        raise DPAuditError(f"the policy's channel raised {type(exc).__name__} on data {z.tolist()} from its own "
                           f"domain: {exc}.") from exc
    if m.shape[:1] != (n,):
        raise DPAuditError(f"the policy's channel returned messages of shape {m.shape} for {n} users; expected ({n}, ...).")
    if not np.all(np.isfinite(m)):
        raise DPAuditError("the policy's channel returned NaN or inf messages.")
    return m.reshape(n, -1)


class ChannelSource:
    """Messages of the channel for the user data of each domain pair (candidate i: ``pairs[i]``)."""

    cells_per_run = 8
    chunk_cells = 2_000_000

    def __init__(self, policy: ChannelPolicy, pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
        self.policy, self.pairs = policy, pairs

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        return messages(self.policy, self.pairs[candidate][side], n, np.random.default_rng(seed))

    def describe(self, candidate: int) -> JSONObject:
        z0, z1 = self.pairs[candidate]
        return {"label": f"user data z = {z0.tolist()} vs z' = {z1.tolist()}", "z": z0.tolist(), "z_prime": z1.tolist()}


class TranscriptSource:
    """What the server received from user ``rounds[i]`` on tables that differ in that user's row.

    The server is causal: what it received from user j depends on rounds 0..j only, so the runs stop
    at round j + 1 (exact, and much cheaper for small j).
    """

    chunk_cells = 4_000_000

    def __init__(self, policy: PolicyLike, rounds: list[int], horizon: int, lo: float, hi: float,
                 background: str) -> None:
        self.policy, self.rounds, self.lo, self.hi, self.background = policy, rounds, lo, hi, background
        K = int(policy.n_arms)
        self.cells_per_run = horizon * K
        proto = LocalDP()
        self.pairs = [make_pair(PairSpec(j, background), proto, K, min(horizon, j + 2), (lo, hi)) for j in rounds]
        ask_transcript(policy)

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        nb = self.pairs[candidate]
        LocalDP().run(self.policy, nb.d1 if side else nb.d0, n, np.random.default_rng(seed), None, record=False)
        tr = real_array(self.policy.transcript(), "the policy's transcript()",
                        "a transcript holds the finite real messages the server received")
        j = self.rounds[candidate]
        if tr.ndim != 3 or tr.shape[0] != n or tr.shape[1] <= j:
            raise DPAuditError(f"the policy's transcript() returned shape {tr.shape} after {n} runs of {j + 2} rounds; "
                               f"expected ({n}, rounds, message size).")
        if not np.all(np.isfinite(tr[:, j, :])):
            raise DPAuditError(f"the policy's transcript() holds NaN or inf for user {j}; a transcript must hold the "
                               "finite messages the server received.")
        return tr[:, j, :]

    def describe(self, candidate: int) -> JSONObject:
        other = (self.lo + self.hi) / 2 if self.background == "mid" else self.lo
        j = self.rounds[candidate]
        return {"label": f"user {j}'s row all {self.lo:g} vs all {self.hi:g} (other rows {other:g})", "round": j}


class LossSource:
    """BCO views on loss sequences that differ in user ``rounds[i]``'s loss: ``kind`` "transcript" (the
    message, times the exploration direction for two-point policies) or "central" (the next points)."""

    chunk_cells = 4_000_000

    def __init__(self, policy: PointsPolicy, rounds: list[int], horizon: int, kind: str) -> None:
        self.policy, self.rounds, self.kind = policy, rounds, kind
        self.cells_per_run = horizon * policy.n_points * policy.d
        self.pairs = [loss_pair(policy, horizon, j) for j in rounds]
        ask_transcript(policy)

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        j, losses = self.rounds[candidate], self.pairs[candidate][side]
        rng = np.random.default_rng(seed)
        if self.kind == "transcript":
            return transcript_features(play(lambda: self.policy, losses, n, rng, j + 1), j)
        return central_features(play(lambda: self.policy, losses, n, rng, j + 2), j)

    def describe(self, candidate: int) -> JSONObject:
        j, p = self.rounds[candidate], self.policy
        what = (f"user {j}'s loss f = -{p.loss_bound:g} vs +{p.loss_bound:g}" if p.n_points == 1
                else f"user {j}'s loss f(x) = -g<e_1, x> vs +g<e_1, x>")
        return {"label": f"{what} (other users' losses 0)", "round": j}


#: a local part's source of views, by candidate (a pair of user data, or a user)
_Source = Union["ChannelSource", "TranscriptSource", "LossSource"]


def _rows_result(name: str, rows: list[JSONObject], source: _Source, delta: float, confidence: float,
                 n_select: int, seconds: float, statistic: str | None = None) -> AuditResult:
    best = max(rows, key=lambda r: r["epsilon_lower"])
    scores = best.get("scores")
    for row in rows:  # the binned scores are the result's (its ROC), not a column of the rows' table
        row.pop("scores", None)
    desc = source.describe(best["candidate"])
    for row in rows:
        row.update({k: v for k, v in source.describe(row["candidate"]).items() if k != "label"})
    witness = {"label": desc["label"], "statistic": statistic or best["score"], "threshold": best["threshold"],
               "direction": best["direction"], "reject_when": best["direction"].replace("reject if ", "")}
    return AuditResult(name, best["epsilon_lower"], delta, confidence, witness,
                       samples=2 * len(rows) * (best["n"] + n_select + max(1, n_select // 2)), seconds=seconds,
                       details={"false_positives": best["fp"], "false_negatives": best["fn"],
                                "n_fresh_per_side": best["n"], "fpr": best["fpr"], "fnr": best["fnr"],
                                "selection_bound": best["selection_bound"], "tests_corrected_for": len(rows),
                                **{k: best[k] for k in ("fresh_runs_used", "fresh_runs_planned", "looks",
                                                        "budget_share_of_last_look", "stopped_early") if k in best},
                                ("pairs" if name == "channel" else "rounds"): rows},
                       scores=scores)


#: users screened by the transcript part (every user up to this many; else this many spread over the horizon)
MAX_SCREENED_USERS = 64
#: the users the transcript part evaluates on fresh samples, after the screening
KEEP_USERS = 4


def _user_rounds(horizon: int, last: int) -> list[int]:
    """Every user the transcript part may test (a server may misbehave for any one of them): all of
    0..last, or :data:`MAX_SCREENED_USERS` spread over them."""
    if last + 1 <= MAX_SCREENED_USERS:
        return list(range(last + 1))
    return sorted({int(j) for j in np.linspace(0, last, MAX_SCREENED_USERS).round()})


def _screened(source: TranscriptSource | LossSource, ctx: Context, seed: np.random.SeedSequence, n_fresh: int,
              conf_each: float, engine: Engine) -> tuple[list[int], list[JSONObject]]:
    """Every user is a candidate: screen them on pilot runs, keep the most promising few."""
    from dpaudit.attacks.membership import screen_candidates

    cands = list(range(len(source.rounds)))
    if len(cands) <= KEEP_USERS:
        return cands, []
    kept, rows = screen_candidates(source, cands, seed, n=max(200, min(1000, n_fresh // 20)), keep=KEEP_USERS,
                                   n_fresh=n_fresh, delta=ctx.delta, confidence=conf_each, engine=engine)
    for row in rows:
        row["user"] = source.rounds[row.pop("candidate")]
    return kept, rows


def preflight(ctx: Context) -> None:
    """Up-front estimate of the central part (the costliest): the central plan's at runs / 5."""
    from .cost import audit_preflight, bco_preflight

    r = ctx.request
    T = r.horizon or DEFAULTS["horizon"]
    probe = with_features(ctx.build(T), r.seed)
    spec = r.policy if isinstance(r.policy, str) else str(r.policy)
    # the local plug-in contract first: a malformed member is one sentence before anything runs it
    ctx.local_info = check_local_plugin(probe, horizon=T, rng_seed=r.seed, rewards=r.rewards, name=spec)
    if getattr(probe, "continuous_actions", False):  # BCO: the parts' run-rounds (_audit_bco) at a measured rate
        n = max(1000, r.runs // LOCAL_DEFAULTS["transcript_div"])
        users = len(_user_rounds(T, T - 2))
        per_part = 2 * (users * max(200, min(1000, n // 20)) * (T / 2 + 2) + KEEP_USERS * (max(1000, n // 5) + n) * T)
        ctx.estimate = bco_preflight(lambda: ctx.build(T), T, 200 * T + (1 + int(r.central)) * per_part,
                                     max_hours=r.max_hours, workers=r.workers, local=r.on_this_machine)
        return
    if not r.central:
        return  # without the central part, nothing long
    ctx.estimate = audit_preflight(lambda T: with_features(ctx.build(T), r.seed), TableDP(),
                                   runs=max(1000, r.runs // LOCAL_DEFAULTS["central_div"]),
                                   horizon=r.horizon if r.horizon is not None else DEFAULTS["horizon"],
                                   workers=r.workers, local=r.on_this_machine, max_hours=r.max_hours)


@dataclass(frozen=True)
class _KArmed:
    """A K-armed local audit's state between its steps: the policy at horizon ``T`` and its plug-in contract
    (``info``), the confidence of each sampling part, the user data fed (``lo_hi``, the alphabet's or the range's
    ends) and the other users' background."""

    ctx: Context
    sections: LocalSections
    policy: PolicyLike
    T: int
    info: LocalPluginInfo
    conf_each: float
    lo_hi: tuple[float, float]
    background: str


def audit(ctx: Context) -> None:
    """The local plan (module docstring), filling ``ctx``: the policy and its plug-in contract; a K-armed policy's
    ledger per user, channel, finite channel, transcript and central part; a BCO policy's (:func:`_audit_bco`)."""
    r = ctx.request
    T = r.horizon if r.horizon is not None else DEFAULTS["horizon"]
    ctx.horizon = T
    if r.pair is not None:
        raise DPAuditError("--pair gives a neighbouring pair of reward tables, but --protocol local compares one "
                           "user's data at its domain's extremes; drop --pair or use --protocol table.")
    policy = with_features(ctx.build(T), r.seed)
    ctx.policy = policy
    # the local plug-in contract, checked member by member before any part relies on it (protocols.local)
    info = ctx.local_info or check_local_plugin(policy, horizon=T, rng_seed=r.seed, rewards=r.rewards, name=r.spec)
    ctx.read_claim(policy, r.spec)
    ctx.notes.extend(getattr(policy, "audit_notes", ()))  # what the per-run adapter did
    params = getattr(policy, "params", None)
    ctx.params = params() if callable(params) else dict(r.params)
    sections = LocalSections()
    ctx.sections = sections
    chan = getattr(policy, "local_channel", None)
    if chan is not None:
        sections.channel = chan.describe()
    if getattr(policy, "continuous_actions", False):
        if r.rewards is not None or r.adapter is not None:
            raise DPAuditError("--rewards and --adapter apply to K-armed policies; a BCO policy's users hold loss "
                               "functions, so drop them.")
        return _audit_bco(ctx, sections, policy, T, r.central, info)
    if r.rewards is not None and info.vector_data:
        raise DPAuditError("--rewards applies to scalar user data; this policy's users send vectors "
                           "(domain_pairs()), so it cannot be restricted to a reward alphabet.")
    s_ledger, s_channel, s_transcript = np.random.SeedSequence(r.seed).spawn(3)
    conf_each = confidence_each(ctx, 1 + int(info.transcript) + int(r.central))
    sections.arms, sections.confidence_per_attack = Arms(int(policy.n_arms)), conf_each
    alphabet = info.alphabet  # --rewards, else the policy's reward_alphabet (scalar data only)
    lo_hi = getattr(policy, "reward_range", policy.domain)  # type: ignore[attr-defined]
    ends = (alphabet[0], alphabet[-1]) if alphabet else (float(lo_hi[0]), float(lo_hi[1]))
    k = _KArmed(ctx, sections, policy, T, info, conf_each, ends,
                "low" if alphabet else "mid")  # an alphabet need not contain the middle value
    _ledger_per_user(k, s_ledger)
    ctx.say("local: channel attack")
    _channel_part(ctx, policy, conf_each, s_channel, info)
    _finite_channel(ctx, info)
    _transcript(k, s_transcript)
    if r.central:
        _central_part(ctx, sections, conf_each)


def _ledger_per_user(k: _KArmed, seed: np.random.SeedSequence) -> None:
    """Part 1: every message the policy's channels recorded on an audit table, 200 runs, composed per user."""
    ctx, policy, T = k.ctx, k.policy, k.T
    ctx.say("local: ledger")
    if not hasattr(policy, "ledger"):
        _ledger_part(ctx, k.sections, policy, None, 200 * T)
        return
    t0 = time.perf_counter()
    d = make_pair(PairSpec(0, k.background), TableDP(), int(policy.n_arms), T, k.lo_hi).d0
    TableDP().run(policy, d, 200, np.random.default_rng(seed), None, record=True)
    _ledger_part(ctx, k.sections, policy, ledger_per_user(policy.ledger, ctx.delta), 200 * T,  # type: ignore[attr-defined]
                 time.perf_counter() - t0)
    ctx.set_upper(policy_upper(policy, T, ctx.delta, protocol="local", per="user"))


def _finite_channel(ctx: Context, info: LocalPluginInfo) -> None:
    """Part 3: a finite channel's exact eps(delta) over every ordered pair of inputs (``channel_table()``)."""
    if info.table is None:  # checked by check_local_plugin; None: the channel is not finite
        return
    inputs, outputs, P = info.table
    t0 = time.perf_counter()
    e, (i, j) = exact_channel_epsilon(P, ctx.delta)
    ctx.exact.append(Exact("finite channel", e, "exact eps(delta) over every ordered pair of inputs", True,
                           {"z": float(inputs[i]), "z_prime": float(inputs[j])},
                           {"inputs": np.asarray(inputs).tolist(), "outputs": np.asarray(outputs).tolist(),
                            "table": np.asarray(P).tolist()}))
    ctx.ran("finite channel", "exact", f"the channel table's exact eps = {e:.4g}", time.perf_counter() - t0)


def _transcript(k: _KArmed, seed: np.random.SeedSequence) -> None:
    """Part 4: what the server received from each user, on tables that differ in her row, every user screened on
    pilot runs and the most promising few counted (a policy without ``transcript()`` says so)."""
    ctx, r = k.ctx, k.ctx.request
    if not k.info.transcript:
        ctx.notes.append("the policy keeps no transcript() of what its server received, so only its channel was "
                         "attacked black-box (a server that also reads raw data would show only in the central audit).")
        return
    assert ctx.claim is not None
    ctx.say("local: transcript attack")
    n_tr = max(1000, r.runs // LOCAL_DEFAULTS["transcript_div"])
    t0 = time.perf_counter()
    source = TranscriptSource(k.policy, _user_rounds(k.T, k.T - 2), k.T, k.lo_hi[0], k.lo_hi[1], k.background)
    s_screen, s_eval = seed.spawn(2)
    engine = _engine(ctx, k.policy)
    kept, screen = _screened(source, ctx, s_screen, n_tr, k.conf_each, engine)
    rows = threshold_attack(source, kept, s_eval, delta=ctx.delta, confidence=k.conf_each,
                            n_select=max(1000, n_tr // 5), n_fresh=n_tr, engine=engine, progress=ctx.progress,
                            what="transcript: fresh runs", claim=ctx.claim.epsilon, floor=_shown(ctx))
    res = _rows_result("transcript", rows, source, ctx.delta, k.conf_each, max(1000, n_tr // 5),
                       time.perf_counter() - t0)
    if screen:
        res = replace(res, details={**res.details, "screened_users": screen})
    ctx.attacks.append(res)
    ctx.ran("transcript", "bound", f"what the server received from a user: {len(source.rounds)} users screened "
                                   f"on pilot runs, users {[source.rounds[c] for c in kept]} counted on "
                                   f"{runs_text(res, n_tr)} fresh runs per side each", res.seconds)


def _shown(ctx: Context) -> float:
    """The largest bound the audit already shows (the channel's): a later test's count may stop once it
    cannot raise the audit's bound above it (:class:`dpaudit.attacks.sampling.Stop`)."""
    return max((float(a.epsilon_lower) for a in ctx.attacks), default=0.0)


def _engine(ctx: Context, policy: object) -> Engine:
    try:
        ctx.engine.check_picklable(policy)
        return ctx.engine
    except DPAuditError as exc:
        note = f"the local parts ran in this process only: {exc}"
        if note not in ctx.notes:
            ctx.notes.append(note)
        return ctx.engine.serial()


def _ledger_part(ctx: Context, sections: LocalSections, policy: object, ledger: JSONObject | None, users: int,
                 seconds: float = 0.0) -> None:
    if ledger is not None and ledger["messages"] and ledger.get("users", 0) < users:
        ctx.notes.append(f"only {ledger['users']} of {users} (run, user) pairs sent a recorded message.")
    if ledger is not None:
        ctx.ledger = {"kind": "per-user", **ledger}
        if ledger.get("epsilon") is not None:
            ctx.exact.append(Exact("per-user ledger", float(ledger["epsilon"]), ledger["method"], True,
                                   {"messages": ledger["messages"]}, {}))
            ctx.ran("ledger", "exact", f"{ledger['messages']} recorded messages composed per user: eps = "
                                       f"{ledger['epsilon']:.4g}", seconds)
    lints = calibration_lints(policy)
    sections.lints = lints
    ctx.notes.extend(ln["message"] for ln in lints if ln["flagged"])


def channel_attack(policy: ChannelPolicy, *, delta: float, confidence: float, n_fresh: int, n_select: int,
                   seed: np.random.SeedSequence, pair: tuple[float, float] | None = None, engine: Engine | None = None,
                   progress: Callable[[str], None] | None = None,
                   pairs: Sequence[tuple[np.ndarray | float, np.ndarray | float]] | None = None,
                   claim: float | None = None) -> AuditResult:
    """The channel part alone: a black-box lower bound on the channel's epsilon, z and z' at the domain's
    extremes (or ``pair``, or ``pairs``, or the pairs of ``domain_pairs()``), a threshold test on the message."""
    from dpaudit.engine import SERIAL

    t0 = time.perf_counter()
    if pairs is None:
        pairs = domain_pairs(policy) if pair is None else [(np.array(float(pair[0])), np.array(float(pair[1])))]
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs]
    source = ChannelSource(policy, pairs)
    rows = threshold_attack(source, list(range(len(pairs))), seed, delta=delta, confidence=confidence,
                            n_select=n_select, n_fresh=n_fresh, engine=engine or SERIAL, progress=progress,
                            what="channel: fresh messages", claim=claim)
    return _rows_result("channel", rows, source, delta, confidence, n_select, time.perf_counter() - t0)


#: messages per task of the channel likelihood part
CHANNEL_CHUNK = 100_000
#: pilot messages per pair that choose the channel likelihood part's pair (never counted)
CHANNEL_PILOT = 2000
#: a Gaussian channel's likelihood sample: the smallest of n / 4, n / 2, n whose median bound is within this share
#: of all n's (:func:`dpaudit.attacks.limits.sufficient_size`)
CHANNEL_GAIN = 0.05


def records_channel(policy: object) -> bool:
    """Whether the policy's ``channel`` records its releases in a ledger (``channel(z, rng, ledger=...)``, as
    dpaudit's own LDP policies do), so the channel likelihood part can compute each message's exact loss."""
    import inspect

    fn = getattr(policy, "channel", None)
    try:
        return callable(fn) and "ledger" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _channel_releases(policy: ChannelPolicy, z: np.ndarray, n: int, seed: np.random.SeedSequence) -> list[Release]:
    """The releases the channel records for ``n`` users with data ``z``."""
    led = Ledger(n)
    policy.channel(np.broadcast_to(z, (n,) + np.shape(z)).copy(), np.random.default_rng(seed), ledger=led)
    return led.releases


def _matched(r0: list[Release], r1: list[Release]) -> None:
    if not r0 or len(r0) != len(r1) or any(a.label != b.label or a.noise.kind != b.noise.kind
                                           or a.centre.shape != b.centre.shape for a, b in zip(r0, r1)):
        raise DPAuditError("the channel's recorded releases differ between the two user data (their number, labels "
                           "or shapes), so their exact loss is unknown.")
    if any(a.noise.kind not in ("gaussian", "laplace") for a in r0):
        raise DPAuditError("the channel records a release that is neither Gaussian nor Laplace.")


def channel_losses(policy: ChannelPolicy, z0: np.ndarray, z1: np.ndarray, n: int, seed: np.random.SeedSequence) -> np.ndarray:
    """The exact privacy loss log p(m | z0) / p(m | z1) of ``n`` messages a user with data ``z0`` sends: the
    channel's releases for z0 are recorded (value, centre, noise), its releases for z1 give their centres
    under z1 (their values are not used), and each message's loss is the sum over its releases of the
    recorded noise's log-density ratio (:meth:`dpaudit.mechanisms.Release.logpdf`). Exact when every
    release is Gaussian or Laplace with the recorded scale and its centre a function of the user's data."""
    s0, s1 = seed.spawn(2)
    r0, r1 = _channel_releases(policy, z0, n, s0), _channel_releases(policy, z1, n, s1)
    _matched(r0, r1)
    loss = np.zeros(n)
    for a, b in zip(r0, r1):
        loss += a.logpdf() - a.logpdf(b.centre)
    return loss


def channel_mu(policy: ChannelPolicy, z0: np.ndarray, z1: np.ndarray) -> float | None:
    """For a channel whose releases are all Gaussian: how far apart the two data's messages are in noise scales,
    mu = sqrt(sum ((c0 - c1) / s)^2) (the loss is then N(mu^2 / 2, mu^2) exactly, Balle & Wang 2018); None
    otherwise."""
    r0 = _channel_releases(policy, z0, 1, np.random.SeedSequence(0))
    r1 = _channel_releases(policy, z1, 1, np.random.SeedSequence(1))
    _matched(r0, r1)
    if any(a.noise.kind != "gaussian" for a in r0):
        return None
    return float(math.sqrt(sum(float(np.sum(((a.centre - b.centre) / np.reshape(a.noise.scale, (-1, 1))) ** 2))
                               for a, b in zip(r0, r1))))


def channel_likelihood(policy: ChannelPolicy, pairs: list[tuple[np.ndarray, np.ndarray]], *, delta: float,
                       confidence: float, n: int, seed: np.random.SeedSequence, engine: Engine) -> AuditResult:
    """The channel's gray-box part: the central likelihood attack's bound
    (:func:`dpaudit.attacks.likelihood.loss_bounds`, the order statistic of L + log(1 - U), no grid) on the
    exact losses of ``n`` fresh messages (:func:`channel_losses`; i.i.d., since every message is one user's,
    each with its own noise) of the pair whose pilot messages (:data:`CHANNEL_PILOT` per pair, never counted)
    have the largest mean loss; for a Gaussian channel (:func:`channel_mu`) only as many of the ``n`` as
    :func:`dpaudit.attacks.limits.sufficient_size` chooses on its exact profile (:data:`CHANNEL_GAIN`). It
    trusts the channel's ledger (its noise and scale), as the central likelihood attack trusts a policy's."""
    t0 = time.perf_counter()
    s_pilot, s_fresh, s_u = seed.spawn(3)
    kl = [float(np.mean(channel_losses(policy, a, b, CHANNEL_PILOT, ss)))
          for (a, b), ss in zip(pairs, s_pilot.spawn(len(pairs)))]
    best = int(np.argmax(kl))
    z0, z1 = pairs[best]
    planned, mu, full = n, channel_mu(policy, z0, z1), None
    if mu:  # a Gaussian channel: its profile is exact, so the sample is sized on it (no data)
        n, full = sufficient_size(lambda m: likelihood_limit(gaussian_profile(mu), m, delta, confidence), n,
                                  CHANNEL_GAIN)
    sizes = [min(CHANNEL_CHUNK, n - i) for i in range(0, n, CHANNEL_CHUNK)]
    parts = engine.map(channel_losses, [(policy, z0, z1, m, ss) for m, ss in zip(sizes, s_fresh.spawn(len(sizes)))])
    loss = np.concatenate(parts)
    u = np.random.default_rng(s_u).random(loss.size)
    b = loss_bounds(loss, u, delta=delta, confidence=confidence, orders=())
    return AuditResult("channel likelihood", b.epsilon_lower, delta, confidence,
                       {"label": f"user data z = {z0.tolist()} vs z' = {z1.tolist()}", "z": z0.tolist(),
                        "z_prime": z1.tolist(), "statistic": "the exact privacy loss of the message (the channel's "
                                                             "recorded noise)"},
                       samples=int(loss.size), seconds=time.perf_counter() - t0,
                       details={**b.details(), "mean_loss_kl": float(loss.mean()), "max_loss": float(loss.max()),
                                "fresh_runs_used": int(loss.size), "fresh_runs_planned": int(planned),
                                "gaussian_mu": mu, "statistical_limit": None if mu is None else
                                likelihood_limit(gaussian_profile(mu), int(loss.size), delta, confidence),
                                "statistical_limit_of_planned_runs": full, "pilot_messages_per_pair": CHANNEL_PILOT,
                                "pilot_mean_loss": kl, "pair_chosen": best})


def _channel_part(ctx: Context, policy: ChannelPolicy, conf_each: float, seed: np.random.SeedSequence,
                  info: LocalPluginInfo) -> None:
    """The channel's black-box test and, for a channel that records its releases, its gray-box likelihood part,
    the two sharing the channel's error budget (Bonferroni)."""
    n_fresh = LOCAL_DEFAULTS["channel_factor"] * ctx.request.runs
    pairs = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
             for a, b in (info.pairs if info.pairs is not None else domain_pairs(policy))]
    gray = records_channel(policy)
    if gray:  # decided before any counted sample: the budget is split only when the part can run
        try:
            channel_losses(policy, *pairs[0], 2, np.random.SeedSequence(0))
        except DPAuditError as exc:
            gray = False
            ctx.notes.append(f"no channel likelihood part: {exc}")
    conf = split_confidence(conf_each, 2) if gray else conf_each
    s_black, s_gray = seed.spawn(2) if gray else (seed, None)
    engine = _engine(ctx, policy)
    res = channel_attack(policy, delta=ctx.delta, confidence=conf, n_fresh=n_fresh,
                         n_select=max(2000, ctx.request.runs // 2), seed=s_black, pairs=info.pairs,
                         engine=engine, progress=ctx.progress)  # messages are cheap: every one counts
    ctx.attacks.append(res)
    ctx.ran("channel", "bound", f"the channel's messages for {len(res.details['pairs'])} pair(s) of user data, "
                                f"{n_fresh} fresh messages per side", res.seconds)
    if gray:
        lik = channel_likelihood(policy, pairs, delta=ctx.delta, confidence=conf, n=n_fresh, seed=s_gray, engine=engine)
        ctx.attacks.append(lik)
        ctx.ran("channel likelihood", "bound", f"the exact loss of {n_fresh} fresh messages of one pair of user data "
                                               "(the channel's recorded noise), an order statistic of L + log(1 - U)",
                lik.seconds)


def _central_part(ctx: Context, sections: LocalSections, conf_each: float) -> None:
    """The central Table-DP audit on the same engine, at its share of the confidence (part 5)."""
    from dataclasses import replace as dreplace

    from dpaudit.protocols import get_protocol

    from . import central as central_plan

    r = ctx.request
    ctx.say("local: central Table-DP audit")
    sub_request = dreplace(r, protocol="table", confidence=conf_each,
                           runs=max(1000, r.runs // LOCAL_DEFAULTS["central_div"]), horizon=ctx.horizon)
    sub = Context(sub_request, get_protocol("table"), ctx.engine, ctx.progress, ctx.delta, conf_each)
    sub.finished = ctx.finished
    central_plan.audit(sub)
    found = sub.conclude()
    for a in sub.attacks:
        ctx.attacks.append(replace(a, attack=f"central {a.attack}"))
    ctx.renyi_violation += sub.renyi_violation
    sections.central = CentralPart(found)
    low = found.epsilon_lower if found.epsilon_lower is not None else 0.0
    ctx.ran("central", "bound", "the central Table-DP audit: " + (f"{found.verdict}, eps >= {low:.4g}" if low > 0 else
                                                                 "no power, every lower bound 0"), found.seconds)


def _audit_bco(ctx: Context, sections: LocalSections, policy: PolicyLike, T: int, central: bool,
               info: LocalPluginInfo) -> None:
    """The local plan of a BCO policy (module docstring): ledger, channel, transcript, central points."""
    from dpaudit.simulate import simulate_bco

    s_ledger, s_channel, s_transcript, s_central = np.random.SeedSequence(ctx.request.seed).spawn(4)
    conf_each = confidence_each(ctx, 2 + int(central))
    sections.arms, sections.confidence_per_attack = Arms(None, action_space(policy)), conf_each
    # 1. ledger: the background losses (0, and user 0 at the low extreme), 200 runs
    ctx.say("local: ledger")
    t_ledger = time.perf_counter()
    pol = ctx.build(T)
    simulate_bco(pol, loss_pair(pol, T, 0)[0], 200, int(s_ledger.generate_state(1)[0]), record=True)
    _ledger_part(ctx, sections, policy, ledger_per_user(pol.ledger, ctx.delta), 200 * T,  # type: ignore[attr-defined]
                 time.perf_counter() - t_ledger)
    ctx.set_upper(policy_upper(pol, T, ctx.delta, protocol="local", per="user"))
    # 2. channel
    ctx.say("local: channel attack")
    _channel_part(ctx, policy, conf_each, s_channel, info)
    # 4. transcript, 5. central (the points)
    _bco_view(ctx, sections, policy, T, "transcript", s_transcript, LOCAL_DEFAULTS["transcript_div"], conf_each)
    if central:
        _bco_view(ctx, sections, policy, T, "central", s_central, LOCAL_DEFAULTS["central_div"], conf_each)
        ctx.notes.append("central part: the view is the sequence of points played (BCO), one learnt-projection "
                         "threshold test, not the K-armed audit's attacks.")


def _bco_view(ctx: Context, sections: LocalSections, policy: PolicyLike, T: int, kind: str,
              seed: np.random.SeedSequence, div: int, conf_each: float) -> None:
    """A BCO policy's ``transcript`` (what the server received from a user) or ``central`` (the points played
    after the user's round) part: loss sequences that differ in one user's loss, every user screened on pilot
    runs, a learnt-projection threshold test on the most promising few."""
    assert ctx.claim is not None
    rounds = _user_rounds(T, T - 2)  # the central features need round j + 1
    ctx.say(f"local: {kind} attack" + (" (points)" if kind == "central" else ""))
    n = max(1000, ctx.request.runs // div)
    t0 = time.perf_counter()
    source = LossSource(ctx.build(T), rounds, T, kind)
    s_screen, s_eval = seed.spawn(2)
    engine = _engine(ctx, source.policy)
    kept, screen = _screened(source, ctx, s_screen, n, conf_each, engine)
    rows = threshold_attack(source, kept, s_eval, delta=ctx.delta, confidence=conf_each,
                            n_select=max(1000, n // 5), n_fresh=n, engine=engine, progress=ctx.progress,
                            what=f"{kind}: fresh runs", claim=ctx.claim.epsilon, floor=_shown(ctx))
    stat = None
    if kind == "transcript" and policy.n_points == 2:  # type: ignore[attr-defined]
        stat = "projection of (message, message x direction of x1 - x2) onto the learnt mean difference"
    elif kind == "central":
        stat = ("projection of (centre of the next points, its outer product with the exploration direction) "
                "onto the learnt mean difference")
    res = _rows_result(kind, rows, source, ctx.delta, conf_each, max(1000, n // 5), time.perf_counter() - t0, stat)
    if screen:
        res = replace(res, details={**res.details, "screened_users": screen})
    ctx.attacks.append(res)
    if kind == "central":
        low, eps_claim = res.epsilon_lower, ctx.claim.epsilon
        sections.central = PointsCentral(
            Verdict.VIOLATION if low > eps_claim else Verdict.CONSISTENT, eps_claim, low, eps_claim - low,
            res.witness, [res], f"the point-sequence attack's lower bound eps >= {low:.4g} "
                                f"{'exceeds' if low > eps_claim else 'is within'} the claimed eps = {eps_claim:.4g}",
            None, res.seconds)
    what = "what the server received" if kind == "transcript" else "the points played after the user's round"
    ctx.ran(kind, "bound", f"{what}: {len(rounds)} users screened, users {[rounds[c] for c in kept]} counted "
                           f"on {runs_text(res, n)} fresh runs per side each", res.seconds)
