"""The plan of one-run audits (``--method one-run``): a few runs, many canaries in each.

For code that can only run a few times (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1)
Training Run", 2023; Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run",
2025). ``runs`` = R runs in all: the first one or two are pilots, the rest are counted. Every canary's bit S_i is
drawn uniformly from {-1, +1} from the audit's seed.

* *table, view* (Table and View DP, Azize & Basu 2023a, Sec. III): a canary is a round whose row (entry)
  is the top of the reward range (S_i = +1) or its bottom (-1); every other row is the middle of the range,
  the pair search's constant "mid" background (:mod:`dpaudit.attacks.neighbours`), which puts the arms of a
  policy level so that one canary can decide its next comparison. The canary rounds are 2^k - 1
  (:func:`dpaudit.attacks.one_run.dyadic_rounds`), one per doubling block of the horizon; the score of a
  canary is how much the arm its reward went to is played after it, centred where it says nothing, in two
  orders among equal scores, the later canaries first or the earlier
  (:func:`~dpaudit.attacks.one_run.action_features`). A policy with many arms, or whose ``n_arms`` the user
  left free (it is then run with :func:`wide_arms`), is also offered the *first-pulls* layout
  (:func:`~dpaudit.attacks.one_run.first_pull_rounds`): rounds 0 .. K - 1 are canaries too, one per arm's
  first pull, scored by how soon the arm is played again, how often, and how early its later blocks of
  plays start (:func:`~dpaudit.attacks.one_run.action_features`). Each layout gets one pilot run,
  and the counted runs (R - 2) are run in the one whose pilot predicts the larger bound; the report says
  which, and with how many arms. A policy deciding once per run gains nothing from it; one whose first
  releases order its next plays (a UCB's or a greedy's initial pulls) gives K informative canaries per run
  instead of a few;
* *local* (each user's data private, Zheng et al. 2020): a canary is a user whose datum is the bottom or
  the top of the domain, every user of every run; the score is the user's message (what the server
  received: the policy's ``transcript()``, else its channel queried with the user's datum, one call per
  user), by its likelihood ratio or its projection fitted on the pilot
  (:func:`~dpaudit.attacks.one_run.message_features`).

The pilot chooses the score and how many of the top and bottom scores to guess, or (action scores) how
many of the largest in size to guess by their sign (:func:`~dpaudit.attacks.one_run.choose_rule`); the counted runs' canaries are pooled, guessed by that
rule and counted, and the bound is the one analysis the claim selects
(:func:`~dpaudit.attacks.one_run.analyses_for`), at the audit's whole confidence (the only bound that
enters the verdict). Its power is the cap: the bound if every guess were right
(:func:`~dpaudit.attacks.one_run.cap`); a claim at or above it makes the audit ``inconclusive``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.policies.base import PolicyLike

from .context import Context, Request
from .findings import Power
from .sections import Arms, JSONObject, Sections
from .setup import probe_alphabet, reward_alphabet_for, with_features

if TYPE_CHECKING:
    from dpaudit.attacks.one_run import GuessRule
    from dpaudit.protocols import Protocol

__all__ = ["audit", "preflight", "ONE_RUN_DEFAULTS", "PROTOCOLS", "check_request"]

#: runs in all (one pilot, the rest counted), the horizon of a table/view run and the users of a local run.
#: A local run's users are all canaries and cheap to run, and a Gaussian channel's eps above its claim shows only
#: in its tails: at 65,536 users per run the pilot's rule shows mutant-ldp-half-sensitivity's (0.41-GDP against
#: eps = 1) in 12 of 12 simulated seeds, at 4,096 in 2 (benchmarks/results/one_run_gaussian.md)
ONE_RUN_DEFAULTS = {"runs": 10, "horizon": 4096, "local_horizon": 65536}
#: the rounds of the local plug-in probe's transcript() run: the audit's own batch checks the full shape
PROBE_HORIZON = 512
#: the protocols a one-run audit runs under
PROTOCOLS = ("table", "view", "local")
#: the most runs a one-run audit takes (beyond it, the multi-run audit is the better tool)
MAX_RUNS = 1000


#: the most arms a policy is given for the first-pulls layout when its ``n_arms`` is free (not set by the user),
#: and the rounds per arm it keeps (:func:`wide_arms`: 256 arms at T = 4096). More arms are more canaries per run:
#: against 64, 256 raised the median bounds over 50 seeds (AdaC-UCB 1.84 to 2.62 against its claim 7.08, AdaP-UCB
#: 0.32 to 0.52 against its exact 1) and flagged mutant-laplace-eps-scale and mutant-shared-noise in 10 of 10 seeds
#: (8 and 9), the leaky per-run UCB in 8 (10) (benchmarks/results/one_run.md, update 3 against 5 and 6); 512 and 1,024 gained no
#: flag and lost some, and took up to four times as long (benchmarks/results/one_run_arms.md)
WIDE_ARMS = 256
WIDE_ROUNDS_PER_ARM = 16
#: the quantile of a pilot's accuracy posterior the layouts are compared at (:func:`_cautious`)
LAYOUT_QUANTILE = 0.05
#: a policy with at least this many arms (its own or the user's) is offered the first-pulls layout as it is
WIDE_MIN_ARMS = 8


@dataclass(frozen=True)
class OneRunSummary:
    """What a one-run audit did and found (its ``one_run`` section): the runs, the layout of the canaries, the
    score and the guessing rule the pilot chose, the guesses, the analysis and its bound against the cap, and
    what the method can and cannot show."""

    runs: int
    pilot_runs: int
    counted_runs: int
    horizon: int
    layouts_tried: list[JSONObject]
    canaries_per_run: int
    layout: str
    layout_name: str
    score: str
    rule: str
    guesses: int
    correct: int
    analysis: str
    analysis_text: str
    bound: float
    theta: float | None
    cap: float
    steinke_beside: float | None
    candidates: list[JSONObject]
    can_show: str
    cannot_show: str


@dataclass
class OneRunSections(Sections):
    """The one-run plan's sections of the findings, in their order."""

    arms: Arms | None = None
    method: str = "one-run"
    one_run: OneRunSummary | None = None


@dataclass(frozen=True)
class _Layout:
    """A table/view canary layout: the policy it runs (its arms), the canary rounds, the background input and
    what the report says of it."""

    name: str
    policy: PolicyLike
    n_arms: int
    rounds: np.ndarray
    low: float
    high: float
    background: np.ndarray
    list_input: bool
    text: str

    @property
    def returns(self) -> bool:
        """Whether the adversary scores how soon a canary's arm comes back (the first-pulls layout's score)."""
        return self.name == "first pulls"

    def inputs(self, bits: np.ndarray) -> np.ndarray:
        from dpaudit.attacks.one_run import canary_inputs

        return canary_inputs(self.list_input, self.n_arms, len(self.background), self.rounds, bits, self.low,
                             self.high, self.background)


def _table_layout(ctx: Context, policy: PolicyLike, T: int, name: str) -> _Layout:
    """The ``dyadic`` (:func:`~dpaudit.attacks.one_run.dyadic_rounds`) or ``first pulls``
    (:func:`~dpaudit.attacks.one_run.first_pull_rounds`) layout of ``policy`` under table or view DP: canary
    rows (entries) at the bottom and the top of the reward alphabet, every other the middle."""
    from dpaudit.attacks import one_run as o
    from dpaudit.protocols import audit_range
    from dpaudit.protocols.table import background_table

    r, proto = ctx.request, ctx.protocol
    K = int(policy.n_arms)
    rr = audit_range(policy)
    alphabet = reward_alphabet_for(policy, r.rewards, rr)
    if alphabet is None:
        alphabet = probe_alphabet(policy, proto, rr, ctx.notes)
    lo, hi = (alphabet[0], alphabet[-1]) if alphabet else rr
    rounds = o.dyadic_rounds(T) if name == "dyadic" else o.first_pull_rounds(T, K)
    mid = 0.5 * (lo + hi)
    if alphabet is not None and mid not in set(map(float, alphabet)):
        background = background_table([mid] * (1 if proto.list_input else K), T, (lo, hi), alphabet)
        background = background[:, 0] if proto.list_input else background
        bg_text = f"a fixed pattern of {lo:g} and {hi:g} with mean {mid:g} (the reward alphabet has no middle)"
    else:
        background = np.full((T,) if proto.list_input else (T, K), mid)
        bg_text = f"the middle reward {mid:g}"
    what = "entry" if proto.list_input else "row"
    if name == "dyadic":
        where = f"canary rounds 2^k - 1 = {', '.join(str(int(c)) for c in rounds[:4])}, ..., {int(rounds[-1])}"
    else:
        where = (f"first-pulls layout with {K} arms: canary rounds 0 .. {min(K, T - 1) - 1} (each arm's first pull, "
                 f"when the policy plays them in turn) and 2^k - 1 from {K} on")
    text = (f"{where}: {len(rounds)} per run, each {what} {lo:g} (bit -1) or {hi:g} (bit +1); every other {what} "
            f"{bg_text}")
    if len(rounds) < 2:
        raise DPAuditError(f"a horizon of {T} rounds leaves {len(rounds)} canary rounds; give a longer --horizon.")
    return _Layout(name, policy, K, rounds, float(lo), float(hi), background, bool(proto.list_input), text)


def _cautious(rule: GuessRule, rows: list[JSONObject], m_counted: int, confidence: float) -> float:
    """The bound ``rule`` predicts on ``m_counted`` canaries from a low quantile (:data:`LAYOUT_QUANTILE`) of its
    pilot accuracy: how the layouts are compared, since their pilots hold very different numbers of canaries (a
    dozen right guesses in the dyadic pilot must not beat hundreds of good ones in the first-pulls pilot)."""
    from dpaudit.attacks.one_run import candidate_row, predicted_bound

    row = candidate_row(rule, rows)
    return predicted_bound(row["pilot_correct"], row["pilot_guesses"], sum(rule.counts(m_counted)), m_counted,
                           confidence, LAYOUT_QUANTILE)


def wide_arms(T: int) -> int:
    """The arms of the first-pulls layout for a policy whose ``n_arms`` is free, at horizon T: T /
    :data:`WIDE_ROUNDS_PER_ARM`, at most :data:`WIDE_ARMS` (64 at T = 1024, 256 from T = 4096)."""
    return min(WIDE_ARMS, T // WIDE_ROUNDS_PER_ARM)


def _wide_policy(ctx: Context, policy: PolicyLike, T: int, R: int) -> tuple[PolicyLike | None, str | None]:
    """The policy of the first-pulls layout: ``policy`` itself when it has :data:`WIDE_MIN_ARMS` arms or more;
    else, when the user left ``n_arms`` free, the policy built with :func:`wide_arms` arms. None if it does not
    take them, the user chose fewer, the horizon is under twice the arms (no room to come back) or too short
    for :data:`WIDE_MIN_ARMS` arms, or there are fewer than 3 runs (two pilots and one counted); then, with the
    reason, for the notes."""
    K = int(policy.n_arms)
    if R < 3:
        return None, f"--runs {R} leaves no room for a second pilot run"
    if K >= WIDE_MIN_ARMS:
        return (policy, None) if T >= 2 * K else (None, f"a horizon of {T} rounds is under twice its {K} arms")
    if "n_arms" in ctx.request.params:
        return None, (f"n_arms = {K} was given (leave n_arms free, or give {WIDE_MIN_ARMS} or more, to pilot it too: "
                      "a canary on each arm's first pull)")
    W = wide_arms(T)
    if W < WIDE_MIN_ARMS:
        return None, (f"a horizon of {T} rounds is under {WIDE_ROUNDS_PER_ARM} rounds for each of "
                      f"{WIDE_MIN_ARMS} arms")
    try:
        wide = with_features(ctx.build(T, params={"n_arms": W}), ctx.request.seed)
    except Exception as exc:  # noqa: BLE001 -- a policy that refuses many arms is audited in the dyadic layout only
        return None, f"the policy refused n_arms = {W} ({type(exc).__name__}: {exc})"
    if int(getattr(wide, "n_arms", -1)) != W:
        return None, f"the policy built with n_arms = {W} reports {getattr(wide, 'n_arms', None)} arms"
    return wide, None


def check_request(request: Request) -> None:
    """Refuse, in one sentence each, what a one-run audit cannot do."""
    if request.protocol not in PROTOCOLS:
        raise DPAuditError(f"--method one-run runs under --protocol table, view or local (where each canary is one "
                           f"reward round or one user), not {request.protocol}; drop --method to run the multi-run "
                           "audit.")
    if request.pair is not None:
        raise DPAuditError("--pair does not apply to --method one-run: its canaries are laid out by the method, not "
                           "a neighbouring pair; drop --pair.")
    if not 2 <= int(request.runs) <= MAX_RUNS:
        raise DPAuditError(f"--runs must be between 2 and {MAX_RUNS} for --method one-run (one pilot run and at least "
                           f"one counted run), got {request.runs}.")


def _horizon(ctx: Context) -> int:
    r = ctx.request
    if r.horizon is not None:
        return int(r.horizon)
    return ONE_RUN_DEFAULTS["local_horizon" if r.protocol == "local" else "horizon"]


def _batch(policy: PolicyLike, protocol: Protocol, data: np.ndarray, seed: np.random.SeedSequence,
           transcript: bool) -> tuple[np.ndarray, np.ndarray | None, list[str] | None]:
    """Runs on ``data`` (one input per run): their actions (n, T); with ``transcript``, what the server
    received from each user (n, T, w); and the noise kinds of the releases the policy's ledger recorded (None
    without a ledger)."""
    n, T = data.shape[:2]
    views = protocol.run_batch(policy, data, 1, np.random.default_rng(seed), record=True).reshape(n, T)
    messages = None
    if transcript:
        tr = np.asarray(policy.transcript(), dtype=float)
        if tr.ndim != 3 or tr.shape[:2] != (n, T):
            raise DPAuditError(f"the policy's transcript() returned shape {tr.shape} after {n} runs of {T} rounds; "
                               f"expected ({n}, {T}, message size).")
        messages = tr
    ledger = getattr(policy, "ledger", None)
    kinds = sorted({str(rel.noise.kind) for rel in getattr(ledger, "releases", [])}) if ledger is not None else None
    return views, messages, kinds


def _is_bco(policy: object) -> bool:
    return bool(getattr(policy, "continuous_actions", False))


def _refuse_bco(policy: PolicyLike, request: Request) -> None:
    if _is_bco(policy) and request.protocol != "local":
        spec = request.policy if isinstance(request.policy, str) else str(request.policy)
        raise DPAuditError(f"{spec!r} plays points of a convex body (BCO), which --method one-run audits under "
                           f"--protocol local only (its users' channel), not {request.protocol}.")


def _time_batch(ctx: Context, policy: PolicyLike, n: int, rounds: int) -> float | None:
    """Seconds for a batch of ``n`` runs of ``rounds`` rounds of ``policy`` on a constant table (None: the
    policy failed there, and the audit itself reports its error with the input it refused)."""
    K = int(policy.n_arms)
    data = np.full((n, rounds) if ctx.protocol.list_input else (n, rounds, K), 0.5)
    lo, hi = getattr(policy, "reward_range", (0.0, 1.0))
    if np.isfinite(lo) and np.isfinite(hi):
        data[...] = 0.5 * (float(lo) + float(hi))
    t0 = time.perf_counter()
    try:
        ctx.protocol.run_batch(policy, data, 1, np.random.default_rng(0))
    except DPAuditError:
        raise
    except Exception:  # noqa: BLE001
        return None
    return time.perf_counter() - t0


def preflight(ctx: Context) -> None:
    """Time the audit's batches on a short horizon and refuse, before the audit starts, one estimated beyond
    ``--max-hours``: under local one batch of every run; under table and view the pilot of each layout (one run
    each) and the counted runs' batch, in the first-pulls layout where it is offered (its many arms cost
    most)."""
    from .cost import check_time

    check_request(ctx.request)
    r = ctx.request
    T = _horizon(ctx)
    if T < 8:
        raise DPAuditError(f"--horizon must be at least 8 for --method one-run (its canaries need rounds), got {T}.")
    policy = with_features(ctx.build(T), r.seed)
    _refuse_bco(policy, r)
    t_short = min(T, 512)
    if _is_bco(policy):  # only its users' channel runs, once per run on the horizon's users
        lo, hi = policy.domain
        t0 = time.perf_counter()
        policy.channel(np.full(t_short, 0.5 * (lo + hi)), np.random.default_rng(0))
        seconds = (time.perf_counter() - t0) * (T / t_short) * int(r.runs)
        ctx.estimate = check_time(seconds, f"the channel on {t_short} users timed, scaled to {r.runs} runs of {T}",
                                  max_hours=r.max_hours, workers=r.workers, local=r.on_this_machine)
        return
    R = int(r.runs)
    if ctx.protocol.name == "local":
        batches = [(policy, R)]
        how = f"a batch of {R} runs of {t_short} users timed, scaled to {T}"
    else:
        wide, _ = _wide_policy(ctx, policy, T, R)
        batches = [(policy, 1), (policy, R - 1)]
        if wide is not None:  # timed past its first pulls too: a policy with K arms spends its first K rounds on them
            t_short = min(T, max(t_short, 4 * int(wide.n_arms)))
            batches = [(policy, 1), (wide, 1), (wide, R - 2)]
        how = (f"the pilot{'s' if wide is not None else ''} and the counted runs' batch timed on {t_short} rounds, "
               f"scaled to {T}")
    times = [_time_batch(ctx, p, n, t_short) for p, n in batches]
    if any(t is None for t in times):
        return
    ctx.estimate = check_time(sum(times) * T / t_short, how, max_hours=r.max_hours, workers=r.workers,
                              local=r.on_this_machine)


@dataclass(frozen=True)
class _Seeds:
    """The one-run plan's seeds: the canaries' bits, the runs, the ties of the guesses, the channel's messages."""

    bits: np.random.SeedSequence
    runs: np.random.SeedSequence
    tie: np.random.SeedSequence
    channel: np.random.SeedSequence

    @classmethod
    def of(cls, seed: int) -> "_Seeds":
        return cls(*np.random.SeedSequence([int(seed), 0x0E1]).spawn(4))


@dataclass
class _Counted:
    """What the canary runs give the analysis: the layout that ran (its text and name, canaries per run, pilot
    runs), the rule the pilot chose (its predicted bound, every candidate rule's row), the counted canaries'
    scores by feature and their bits, the noise kinds the ledger recorded (None: no ledger), the layouts the
    pilots tried, and the policy the counted runs ran."""

    layout: str
    layout_name: str
    per_run: int
    pilots: int
    counted: int
    rule: GuessRule
    predicted: float
    candidates: list[JSONObject]
    scores: dict[str, np.ndarray]
    bits: np.ndarray
    kinds: list[str] | None
    tried: list[JSONObject]
    policy: PolicyLike


@dataclass(frozen=True)
class _Found:
    """The counted guesses and the analysis the claim selects: its bound (``found``: eps and theta) at
    ``delta``, its cap (every guess right) and smallest positive bound, and Steinke et al.'s bound beside."""

    plus: int
    minus: int
    either: int
    guesses: int
    correct: int
    analysis: str
    delta: float
    found: dict[str, float]
    cap: float
    smallest: float
    steinke: float | None


def audit(ctx: Context) -> None:
    """The one-run plan (module docstring), filling ``ctx``: the policy, its canaries' runs (every user under local
    DP; under table and view the pilots of the layouts and the counted runs in the one they chose), the guesses,
    the analysis the claim selects, and its bound with its cap."""
    r = ctx.request
    check_request(r)
    T, R = _horizon(ctx), int(r.runs)
    policy = with_features(ctx.build(T), r.seed)
    _refuse_bco(policy, r)
    ctx.horizon = T
    ctx.policy = policy
    ctx.read_claim(policy, r.spec)
    ctx.notes.extend(n for n in getattr(policy, "audit_notes", ()) if n not in ctx.notes)
    params = getattr(policy, "params", None)
    ctx.params = params() if callable(params) else dict(r.params)
    sections = OneRunSections(_arms(policy))
    ctx.sections = sections
    seeds = _Seeds.of(r.seed)
    t_start = time.perf_counter()
    tie = np.random.default_rng(seeds.tie)
    if ctx.protocol.name == "local":
        counted = _local_canaries(ctx, policy, T, R, seeds, tie)
    else:
        counted = _table_canaries(ctx, sections, policy, T, R, seeds, tie)
    found = _analyse(ctx, counted, tie)
    _record(ctx, sections, counted, found, T, R, time.perf_counter() - t_start)


def _arms(policy: PolicyLike) -> Arms:
    """What the policy plays: its arms, or (a BCO policy) points of its action space."""
    if not _is_bco(policy):
        return Arms(int(policy.n_arms))
    from dpaudit.protocols.continuous import action_space

    return Arms(None, action_space(policy))


def _local_canaries(ctx: Context, policy: PolicyLike, T: int, R: int, seeds: _Seeds,
                    tie: np.random.Generator) -> _Counted:
    """Local DP: every user a canary, her datum the bottom or the top of the domain; her message what the server
    received (``transcript()``), else her channel queried with her datum; the first run the pilot."""
    from dpaudit.attacks import one_run as o
    from dpaudit.protocols.local import ask_transcript, check_local_plugin

    r, proto, spec = ctx.request, ctx.protocol, ctx.request.spec
    bco = _is_bco(policy)
    K = 0 if bco else int(policy.n_arms)
    info = check_local_plugin(policy, horizon=min(T, PROBE_HORIZON), rng_seed=r.seed, rewards=r.rewards, name=spec)
    if info.vector_data:
        raise DPAuditError(f"{spec!r}'s users send vectors built from their data (domain_pairs()); --method one-run "
                           "audits scalar user data only; drop --method for the multi-run local audit.")
    lo, hi = (info.alphabet[0], info.alphabet[-1]) if info.alphabet else info.domain
    rounds = np.arange(T, dtype=np.int64)
    layout = (f"every user a canary: {T} users per run, each holding {lo:g} (bit -1) or {hi:g} (bit +1) "
              + ("as her datum (the loss values her message reports)" if bco else "on every arm"))
    bits = np.random.default_rng(seeds.bits).choice(np.array([-1, 1]), size=(R, T))
    kinds: list[str] | None = None
    if info.transcript and not bco:
        inputs = o.canary_inputs(proto.list_input, K, T, rounds, bits, lo, hi, np.full((T, K), 0.5 * (lo + hi)))
        ask_transcript(policy)
        ctx.say(f"one-run: {R} runs of {T} users")
        _, messages, kinds = ctx.engine.serial().map(_batch, [(policy, proto, inputs, seeds.runs, True)])[0]
    else:
        messages = _channel_messages(ctx, policy, bits, lo, hi, seeds.channel)
    feature, pilot_scores, scores = o.message_features(messages[0], bits[0], messages[1:])
    m_counted = (R - 1) * T
    rule, predicted, candidates = o.choose_rule({feature: pilot_scores}, bits[0], m_counted, tie, ctx.confidence)
    return _Counted(layout, "users", T, 1, m_counted, rule, predicted, candidates, {feature: scores},
                    bits[1:].ravel(), kinds, [], policy)


def _channel_messages(ctx: Context, policy: PolicyLike, bits: np.ndarray, lo: float, hi: float,
                      seed: np.random.SeedSequence) -> np.ndarray:
    """No transcript (or a BCO policy): each canary user's message from the channel, one call per user with her
    datum (R x T x message size); a note says the audit judges the users' channel."""
    R, T = bits.shape
    ctx.say(f"one-run: the channel's messages of {R} x {T} users")
    z = np.where(bits > 0, hi, lo).astype(float)
    channel = policy.channel  # type: ignore[attr-defined]
    messages = np.stack([np.asarray(channel(z[j], np.random.default_rng(ss)), dtype=float).reshape(T, -1)
                         for j, ss in enumerate(seed.spawn(R))])
    if _is_bco(policy):
        datum = ("her loss at the point played" if policy.n_points == 1  # type: ignore[attr-defined]
                 else "the difference of her losses at the two points played")
        why = (f"a BCO policy's users hold loss functions, and what each sends is its channel applied to one "
               f"datum in [{lo:g}, {hi:g}] ({datum}); each canary user's message comes from the channel "
               "queried with the datum at either end")
    else:
        why = ("the policy keeps no transcript() of what its server received, so each canary user's message "
               "comes from its channel queried with her datum")
    ctx.notes.append(why + " (one call per user): the audit judges the users' channel, not what the server did with "
                     "the messages.")
    return messages


def _table_canaries(ctx: Context, sections: OneRunSections, policy: PolicyLike, T: int, R: int, seeds: _Seeds,
                    tie: np.random.Generator) -> _Counted:
    """Table and view DP: the dyadic layout, and the first-pulls one where it is offered (:func:`_wide_policy`);
    one layout runs its pilot and counted runs in one batch, two run a pilot each and the counted runs in the one
    whose pilot predicts the larger bound."""
    layouts = [_table_layout(ctx, policy, T, "dyadic")]
    wide, why_not = _wide_policy(ctx, policy, T, R)
    if wide is not None:
        layouts.append(_table_layout(ctx, wide, T, "first pulls"))
    else:
        ctx.notes.append(f"only the dyadic canary layout ran, not the first-pulls one: {why_not}.")
    # the dyadic layout's bits as a single layout always drew them; the first-pulls layout's from its own seed
    bit_seeds = [seeds.bits, np.random.SeedSequence([int(ctx.request.seed), 0x0E2]).spawn(1)[0]][:len(layouts)]
    all_bits = [np.random.default_rng(sb).choice(np.array([-1, 1]), size=(R, len(L.rounds)))
                for L, sb in zip(layouts, bit_seeds)]
    if len(layouts) == 1:
        return _one_layout(ctx, layouts[0], all_bits[0], T, R, seeds, tie)
    counted = _piloted_layouts(ctx, layouts, all_bits, T, R, seeds, tie)
    if counted.policy is not policy:
        new, n = counted.policy, int(counted.policy.n_arms)
        ctx.policy = new
        ctx.read_claim(new, ctx.request.spec)
        assert ctx.claim is not None
        params = getattr(new, "params", None)
        ctx.params = params() if callable(params) else {**ctx.request.params, "n_arms": n}
        sections.arms = Arms(n)
        ctx.notes.append(f"the pilots chose the first-pulls layout, so the counted runs ran the policy with "
                         f"n_arms = {n} (its own default is {int(policy.n_arms)}; pass --param n_arms=K to fix it): "
                         f"the claim judged is the one it states with {n} arms, {ctx.claim.text}.")
    return counted


def _one_layout(ctx: Context, L: _Layout, bits: np.ndarray, T: int, R: int, seeds: _Seeds,
                tie: np.random.Generator) -> _Counted:
    """One layout: one batch, its first run the pilot, the rest counted."""
    from dpaudit.attacks import one_run as o

    ctx.say(f"one-run: {R} runs of {T} rounds")
    views, _, kinds = ctx.engine.serial().map(_batch, [(L.policy, ctx.protocol, L.inputs(bits), seeds.runs,
                                                        False)])[0]
    feats = o.action_features(views, L.rounds, returns=L.returns)
    m_counted = (R - 1) * len(L.rounds)
    rule, predicted, candidates = o.choose_rule({k: v[0] for k, v in feats.items()}, bits[0], m_counted, tie,
                                                ctx.confidence, signed=True)
    return _Counted(L.text, L.name, len(L.rounds), 1, m_counted, rule, predicted, candidates,
                    {k: v[1:].ravel() for k, v in feats.items()}, bits[1:].ravel(), kinds, [], L.policy)


def _piloted_layouts(ctx: Context, layouts: list[_Layout], all_bits: list[np.ndarray], T: int, R: int,
                     seeds: _Seeds, tie: np.random.Generator) -> _Counted:
    """Several layouts: one pilot run each, compared at a cautious quantile of their pilot accuracy
    (:func:`_cautious`), and the counted runs in the best."""
    from dpaudit.attacks import one_run as o

    P = len(layouts)
    s_pilots = seeds.runs.spawn(P + 1)
    best = None
    tried: list[JSONObject] = []
    for i, L in enumerate(layouts):
        ctx.say(f"one-run: pilot run {i + 1} of {P} ({L.name} layout, {L.n_arms} arms, {T} rounds)")
        pb = all_bits[i][i:i + 1]
        pv, _, _ = ctx.engine.serial().map(_batch, [(L.policy, ctx.protocol, L.inputs(pb), s_pilots[i], False)])[0]
        feats = o.action_features(pv, L.rounds, returns=L.returns)
        got = o.choose_rule({k: v[0] for k, v in feats.items()}, pb[0], (R - P) * len(L.rounds), tie,
                            ctx.confidence, signed=True)
        cautious = _cautious(got[0], got[2], (R - P) * len(L.rounds), ctx.confidence)
        tried.append({"layout": L.name, "n_arms": L.n_arms, "canaries_per_run": len(L.rounds),
                      "rule": got[0].describe(), "predicted": got[1], "predicted_cautious": cautious})
        if best is None or cautious > best[0]:
            best = (cautious, L, got, i)
    assert best is not None
    _, L, (rule, predicted, candidates), chosen = best
    bits = all_bits[chosen][P:]
    ctx.say(f"one-run: {R - P} counted runs of {T} rounds ({L.name} layout)")
    views, _, kinds = ctx.engine.serial().map(_batch, [(L.policy, ctx.protocol, L.inputs(bits), s_pilots[P],
                                                        False)])[0]
    feats = o.action_features(views, L.rounds, returns=L.returns)
    return _Counted(L.text, L.name, len(L.rounds), P, (R - P) * len(L.rounds), rule, predicted, candidates,
                    {k: v.ravel() for k, v in feats.items()}, bits.ravel(), kinds, tried, L.policy)


def _analyse(ctx: Context, c: _Counted, tie: np.random.Generator) -> _Found:
    """The counted canaries guessed by the pilot's rule, and the analysis the claim selects (the pilot's
    prediction picks between two at delta): its bound, its cap, and Steinke et al.'s bound beside."""
    from dpaudit.accountants import ZCDP
    from dpaudit.attacks import one_run as o

    kp, km, ke = c.rule.counts(c.counted)
    t_guess = o.guesses(c.scores[c.rule.feature], kp, km, tie, ke)
    n_guess = int(np.count_nonzero(t_guess))
    n_correct = int(np.count_nonzero(t_guess * c.bits > 0))
    gaussian = c.kinds == ["gaussian"]
    claim = c.policy.claim  # type: ignore[attr-defined]
    options = o.analyses_for(claim, ctx.delta, gaussian=gaussian)
    if isinstance(claim, ZCDP) and not gaussian:
        ctx.notes.append("the zCDP claim is judged at delta by the assumption-free analyses, not as Gaussian DP: "
                         + ("the policy keeps no ledger, so nothing shows that its noise is Gaussian."
                            if c.kinds is None else f"its ledger recorded {', '.join(c.kinds) or 'no'} noise, not "
                            "only Gaussian."))
    if len(options) > 1:
        row = o.candidate_row(c.rule, c.candidates)
        acc = (row["pilot_correct"] + 0.5) / (row["pilot_guesses"] + 1)
        v_pred = int(math.floor(acc * (kp + km + ke)))
        analysis, a_delta = max(options, key=lambda a: o.bound(a[0], c.counted, kp + km + ke, v_pred, a[1],
                                                              ctx.confidence)["epsilon"])
    else:
        analysis, a_delta = options[0]
    beside = None
    if analysis != "steinke":
        beside = o.bound("steinke", c.counted, n_guess, n_correct, ctx.delta, ctx.confidence)["epsilon"]
    return _Found(kp, km, ke, n_guess, n_correct, analysis, a_delta,
                  o.bound(analysis, c.counted, n_guess, n_correct, a_delta, ctx.confidence),
                  o.cap(analysis, c.counted, n_guess, a_delta, ctx.confidence),
                  o.smallest_positive(analysis, c.counted, n_guess, a_delta, ctx.confidence), beside)


def _analysis_text(f: _Found) -> str:
    """The analysis that made the bound, in words."""
    from dpaudit.attacks import one_run as o

    return {"steinke": f"the bound of {o.STEINKE} at delta = {f.delta:g}",
            "fdp-approx": f"the f-DP test of (eps, {f.delta:g})-DP of {o.MAHLOUJIFAR}",
            "fdp-gaussian": f"the f-DP test of Gaussian DP of {o.MAHLOUJIFAR}, the claim's zCDP read as "
                            "sqrt(2 rho)-GDP (its ledger's noise is Gaussian)"}[f.analysis]


def _record(ctx: Context, sections: OneRunSections, c: _Counted, f: _Found, T: int, R: int, seconds: float) -> None:
    """The one-run bound (the only one of the verdict), its power (the cap), what makes the audit inconclusive,
    its part and its section."""
    from dpaudit.attacks.result import AuditResult

    P, eps = c.pilots, float(f.found["epsilon"])
    where = ("every user" if c.layout_name == "users" else "rounds 2^k - 1" if c.layout_name == "dyadic"
             else f"each of the {int(c.policy.n_arms)} arms' first pull and rounds 2^k - 1")
    label = (f"{c.per_run} canary {'users' if ctx.protocol.name == 'local' else 'rounds'} per run ({where}); "
             f"guesses: {c.rule.describe()}")
    ctx.attacks.append(AuditResult(
        "one-run", eps, float(f.delta), ctx.confidence, witness={"label": label, "statistic": c.rule.feature},
        samples=R, seconds=round(seconds, 3),
        details={"runs": R, "pilot_runs": P, "counted_runs": R - P, "canaries_per_run": c.per_run,
                 "canaries_counted": c.counted, "guesses": f.guesses, "correct": f.correct,
                 "accuracy": f.correct / f.guesses if f.guesses else None, "plus": f.plus, "minus": f.minus,
                 "either": f.either, "rule": {"feature": c.rule.feature, "plus": c.rule.plus, "minus": c.rule.minus,
                                              "either": c.rule.either},
                 "predicted": c.predicted, "analysis": f.analysis, "analysis_delta": f.delta,
                 "theta": f.found["theta"], "cap": f.cap, "smallest_positive": f.smallest, "steinke_beside": f.steinke,
                 "layout": c.layout, "horizon": T}))
    ctx.blackbox_only = True
    ctx.advice = ("try a longer --horizon (more canaries per run), more --runs, or the multi-run audit (drop --method), "
                  "which counts thousands of runs per side")
    claimed = ctx.claim.epsilon if ctx.claim is not None else math.inf
    if eps <= 0:
        ctx.unseen = (f"the counted guesses were right {f.correct} times of {f.guesses}, no more often than chance "
                      f"allows at {ctx.confidence:g} confidence (bound 0)")
    elif f.cap <= claimed:
        ctx.unseen = (f"the claim eps = {claimed:.4g} lies at or above {f.cap:.4g}, the most {f.guesses} guesses among "
                      f"{c.counted} canaries can show even if every one is right")
    what = _analysis_text(f)
    note = (f"{f.guesses} guesses among {c.counted} counted canaries ({R - P} runs) can show eps up to {f.cap:.4g} by "
            f"{what}, if every guess were right: a claim at or above it cannot be refuted by this many guesses.")
    ctx.power = Power(P, R - P, f.smallest, f.cap, eps, note,
                      {"method": "one-run", "guesses": f.guesses, "canaries": c.counted, "analysis": f.analysis})
    theta = f"; mu >= {f.found['theta']:.4g} (Gaussian DP)" if f.analysis == "fdp-gaussian" else ""
    ctx.ran("one-run", "bound", f"{R} runs ({P} pilot{'s' if P > 1 else ''}, {R - P} counted), {c.per_run} canaries "
                                f"each; {f.correct} of {f.guesses} guesses right; eps >= {f.found['epsilon']:.4g}"
                                f"{theta} (cap {f.cap:.4g})", seconds)
    sections.one_run = OneRunSummary(
        runs=R, pilot_runs=P, counted_runs=R - P, horizon=T, layouts_tried=c.tried, canaries_per_run=c.per_run,
        layout=c.layout, layout_name=c.layout_name, score=c.rule.feature, rule=c.rule.describe(), guesses=f.guesses,
        correct=f.correct, analysis=f.analysis, analysis_text=what, bound=f.found["epsilon"],
        theta=f.found["theta"], cap=f.cap, steinke_beside=f.steinke,
        candidates=sorted(c.candidates, key=lambda x: -x["predicted"])[:10],  # type: ignore[operator]
        can_show=("a violation when the guesses are right often enough that the bound passes the claim; at most "
                  f"eps = {f.cap:.4g} with these {f.guesses} guesses"),
        cannot_show=("a leak that needs many runs to see: a policy that decides once per run (a commit, an "
                     "elimination) gives at most one informative guess per run, and a leak of a few percent "
                     "above the claim needs far more guesses than a few runs hold; for those, the multi-run audit "
                     "(drop --method) counts thousands of runs per side"))
