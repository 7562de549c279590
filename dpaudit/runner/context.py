"""One audit in progress: the request, and the typed slots a protocol's plan fills (:class:`Context`).

:meth:`Context.conclude` applies the one verdict rule (:mod:`.verdict`) and returns the typed findings
(:mod:`.findings`); the runner (:func:`dpaudit.runner.run`) calls it once the plan has run, or with
``interrupted=True`` for the parts that had finished. The plan's own sections (:mod:`.sections`) and the
up-front estimate (:class:`.cost.Estimate`) become the findings' ``extra`` there, and only there.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypedDict

from dpaudit.attacks.bounds import largest_bound, smallest_detectable, split_confidence
from dpaudit.attacks.result import AuditResult
from dpaudit.engine import Engine
from dpaudit.errors import DPAuditError
from dpaudit.policies.base import PolicyLike, PolicySource
from dpaudit.protocols import Protocol

from .cost import Estimate
from .findings import Claim, Exact, Findings, Part, Power, Upper, Verdict
from .sections import JSONObject, Sections
from .setup import ClaimSource, build_policy, claim_curves, claimed_epsilon, versions
from .verdict import decide

if TYPE_CHECKING:
    from dpaudit.protocols.local import LocalPluginInfo

__all__ = ["Request", "Context", "DEFAULTS", "Finished", "NoClaim", "confidence_each"]

class Defaults(TypedDict):
    """An audit's default fresh runs per side, horizon, confidence and delta."""

    runs: int
    horizon: int
    confidence: float
    delta: float


#: default sample sizes and horizon (the horizon is where the central plan's choice starts)
DEFAULTS: Defaults = {"runs": 50000, "horizon": 48, "confidence": 0.95, "delta": 1e-5}


@dataclass(frozen=True)
class Request:
    """What the user asked for: the options of ``dpaudit check policy`` (and :func:`dpaudit.audit`)."""

    policy: PolicySource
    params: dict[str, object] = field(default_factory=dict)
    protocol: str = "table"
    delta: float = DEFAULTS["delta"]
    confidence: float = DEFAULTS["confidence"]
    runs: int = DEFAULTS["runs"]
    horizon: int | None = None
    seed: int = 0
    workers: int = 1
    executor: Executor | None = None
    scheduler: str | None = None
    checkpoint: str | None = None
    max_hours: float | None = None
    rewards: Sequence[float] | None = None
    claim: ClaimSource | None = None
    adapter: str | None = None
    pair: str | None = None
    command: str = ""
    #: exact audits only: delta at ``epsilon``, the Rényi order ``alpha``, the enumeration's work ceiling
    epsilon: float | None = None
    alpha: float | None = None
    max_work: float | None = None
    #: local DP only: also run the central Table-DP part (``False`` skips it, for quick measurements)
    central: bool = True
    #: seconds one call into plug-in code may run before the audit ends (None: the default, the scaled
    #: watchdog of :func:`dpaudit.sandbox.scaled_limit`; :func:`dpaudit.sandbox.call_limit`)
    call_timeout: float | str | None = None
    #: "multi-run" (the default: thousands of runs per side) or "one-run" (``runs`` runs in all, many canaries
    #: in each: :mod:`dpaudit.runner.one_run`)
    method: str = "multi-run"

    def given(self) -> dict[str, object]:
        """The options given explicitly, by their command-line names (for the refusals)."""
        opts = {"--scheduler": self.scheduler, "--checkpoint": self.checkpoint, "--max-hours": self.max_hours,
                "--rewards": self.rewards, "--claim": self.claim, "--adapter": self.adapter, "--pair": self.pair,
                "--method": None if self.method == "multi-run" else self.method}
        return {k: v for k, v in opts.items() if v is not None}

    @property
    def spec(self) -> str:
        """The policy as the findings and the messages name it (its spec, or the object's text)."""
        return self.policy if isinstance(self.policy, str) else str(self.policy)

    @property
    def on_this_machine(self) -> bool:
        """Whether the pieces run in this machine's processes (no executor, no Dask scheduler)."""
        return self.executor is None and self.scheduler is None


class Finished(TypedDict, total=False):
    """What long parts have finished so far, filled as they finish (:func:`dpaudit.attacks.neighbours.search`
    fills ``ranking``, ``likelihood`` and ``membership``; the central plan's horizon sweep ``membership``), so
    that an interrupted audit reports them."""

    ranking: list[JSONObject]
    likelihood: AuditResult
    membership: AuditResult


@dataclass(frozen=True)
class NoClaim:
    """Why an exact audit with no claim has no verdict to give, and the witness of its figure."""

    reason: str
    witness: JSONObject | None


@dataclass
class Context:
    """One audit in progress: the request, the protocol and engine, and the typed slots the plan fills."""

    request: Request
    protocol: Protocol
    engine: Engine
    progress: Callable[[str], None] | None = None
    delta: float = DEFAULTS["delta"]
    confidence: float = DEFAULTS["confidence"]
    # filled by the plan
    horizon: int | None = None
    policy: PolicyLike | None = None
    claim: Claim | None = None
    params: dict[str, object] = field(default_factory=dict)
    attacks: list[AuditResult] = field(default_factory=list)
    beside: list[AuditResult] = field(default_factory=list)
    exact: list[Exact] = field(default_factory=list)
    ledger: JSONObject | None = None
    power: Power | None = None
    parts: list[Part] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the up-front estimate (the plan's preflight), the first of the findings' sections
    estimate: Estimate | None = None
    #: the plan's own sections of the findings (its dataclass of :class:`~.sections.Sections`)
    sections: Sections = field(default_factory=Sections)
    #: the likelihood attack's Rényi orders whose lower bound exceeds the claim's curve
    renyi_violation: list[dict[str, float]] = field(default_factory=list)
    #: the upper side: the tightest eps dpaudit can prove (:meth:`set_upper`); None: nothing beyond the claim
    upper: Upper | None = None
    unseen: str | None = None
    #: what an inconclusive verdict advises trying (None: the multi-run audit's advice)
    advice: str | None = None
    #: what the plan adds to the reason of a verdict that is not a violation (the shuffle plan's power)
    reason_suffix: str | None = None
    #: an exact audit with no claim: its reason and witness (None: the policy states no claim, the default reason)
    no_claim: NoClaim | None = None
    #: the local plug-in contract, checked by the local plan's preflight for its parts
    local_info: LocalPluginInfo | None = None
    blackbox_only: bool = False
    stage: str = "setup"
    started: float = field(default_factory=time.perf_counter)
    #: what long parts have finished so far, so that an interrupted audit reports them
    finished: Finished = field(default_factory=Finished)

    def build(self, horizon: int | None, params: Mapping[str, object] | None = None) -> PolicyLike:
        """The policy at ``horizon`` (the request's claim and adapter applied; ``params`` added to the request's;
        ``None``: the policy's own default horizon)."""
        r = self.request
        return build_policy(r.policy, {**r.params, **(params or {})}, horizon, r.adapter, r.claim)

    def say(self, message: str) -> None:
        """Record the current stage (what an interruption names) and show it as progress."""
        self.stage = message
        if self.progress is not None:
            self.progress(message)

    def read_claim(self, policy: PolicyLike, spec_label: str) -> Claim:
        """The policy's claim at the audit's delta (a claim's own larger delta is used instead, with a note)."""
        from dpaudit.accountants import ApproxDP, Guarantee

        claim = getattr(policy, "claim", None)
        if not isinstance(claim, Guarantee):
            raise DPAuditError(
                f"policy {spec_label!r} declares no claim (its `claim` is {claim!r}); give the guarantee to check with "
                "--claim (e.g. --claim pure:eps=1 or --claim zcdp:rho=0.1; claim= in dpaudit.audit), or have the "
                "policy state a Guarantee from dpaudit.accountants.")
        cd = getattr(claim, "delta", None)
        if isinstance(claim, ApproxDP) and cd is not None and cd > self.delta:
            self.notes.append(f"the claim's own delta = {cd:g} exceeds the audit's delta = {self.delta:g}, where no "
                              f"finite epsilon is claimed; the audit compares at delta = {cd:g} instead.")
            self.delta = float(cd)
        eps, method = claimed_epsilon(claim, self.delta)
        self.claim = Claim(claim.describe(), eps, self.delta, method)
        return self.claim

    def set_upper(self, found: Mapping[str, Any] | None, reason: str | None = None) -> Upper | None:
        """Fill the upper side from what an accounting function returned (``epsilon``, ``method``,
        ``assumptions``, ``details``: :func:`dpaudit.accounting.ledger_upper`, :func:`~dpaudit.accounting.shuffle_upper`,
        or an exact enumeration's figure); None leaves it empty, with ``reason`` saying why."""
        if found is None:
            self.upper = None if reason is None else Upper(None, self.delta, "none", (), {"reason": reason})
            return self.upper
        eps = found.get("epsilon")
        self.upper = Upper(None if eps is None else float(eps), float(found.get("delta", self.delta)),
                           str(found.get("method", "")), tuple(found.get("assumptions") or ()),
                           dict(found.get("details") or {}))
        return self.upper

    def ran(self, name: str, kind: str, summary: str, seconds: float = 0.0) -> None:
        self.parts.append(Part(name, kind, summary, round(float(seconds), 3)))

    def set_power(self, attack: AuditResult | None, pairs_tried: int, runs: int, confidence: float,
                  note: str = "", **details: object) -> Power:
        """The black-box attack's power at ``runs`` fresh runs per side (what it can show, what it showed).
        A test that stopped once settled (:class:`dpaudit.attacks.sampling.Stop`) says so in the note."""
        used = None if attack is None else attack.details.get("fresh_runs_used")
        if used is not None and int(used) < runs:
            used = int(used)
            why = attack.details.get("stopped_early") if attack is not None else None
            if why == "violation":
                stop = (f"the test stopped after {used} of {runs} fresh runs per side: its bound already exceeded the "
                        "claim there, so the violation was settled (more runs would only raise the bound); the bound "
                        "holds at its confidence at the look it stopped at.")
            else:
                stop = (f"the test stopped after {used} of {runs} fresh runs per side: its counts already placed its "
                        "eps below the claim even at the most favourable error rates they allow (Clopper-Pearson at "
                        "1e-3), so more runs were unlikely to reach the claim; its bound holds at its confidence at "
                        "the look it stopped at.")
            projected = attack.details.get("projected_full_sample_bound") if attack is not None else None
            if projected is not None:
                stop += (f" At the rates it counted, all {runs} runs per side would have shown eps >= "
                         f"{float(projected):.4g}.")
            note = f"{note} {stop}".strip()
        else:
            used = None
        self.power = Power(pairs_tried, runs, smallest_detectable(runs, self.delta, confidence),
                           largest_bound(runs, self.delta, confidence),
                           None if attack is None else float(attack.epsilon_lower), note, details, used)
        return self.power

    def conclude(self, interrupted: bool = False) -> Findings:
        """The findings: the verdict by the one rule (or ``interrupted``), every typed slot as it stands."""
        r, claim = self.request, self.claim
        if interrupted:
            verdict, reason, witness, lower = self._interrupted()
        elif claim is None:  # an exact enumeration with no claim to judge
            no_claim = self.no_claim or NoClaim("the policy states no claim, so there is nothing to judge; the exact "
                                                "numbers stand alone", None)
            verdict, reason, witness = Verdict.EXACT, no_claim.reason, no_claim.witness
            best = max((a.epsilon_lower for a in self.attacks), default=None)
            lower = best if best is not None else (self.exact[0].epsilon if self.exact else None)
        else:
            verdict, reason, witness, lower = self._decided(claim)
        upper = upper_side(self, claim, interrupted)
        return Findings(
            verdict=verdict, reason=reason, policy=r.spec, params=self.params or dict(r.params), protocol=r.protocol,
            claim=claim.text if claim else None, epsilon_claimed=claim.epsilon if claim else None,
            epsilon_lower=lower, gap=(claim.epsilon - lower) if claim and lower is not None else None,
            delta=self.delta, confidence=self.confidence, horizon=self.horizon, seed=r.seed, witness=witness,
            attacks=tuple(self.attacks), ledger=self.ledger, notes=tuple(self.notes), versions=versions(),
            seconds=time.perf_counter() - self.started, command=r.command,
            claim_method=claim.method if claim else None, exact=tuple(self.exact), beside=tuple(self.beside),
            power=self.power, parts=tuple(self.parts), epsilon_upper=upper.proved if upper else None, upper=upper,
            extra=self.sections_json(interrupted))

    def _interrupted(self) -> tuple[Verdict, str, None, float | None]:
        """An interrupted audit's verdict, its reason (the stage it stopped in) and its best bound: the parts
        that had finished (:attr:`finished`) join its attacks."""
        stage, finished = self.stage, self.finished
        for done in (finished.get("likelihood"), finished.get("membership")):  # in the order they finish
            if done is not None and done not in self.attacks:
                self.attacks.append(done)
        if "membership" in finished and "likelihood" not in finished:
            stage = "likelihood attack (the membership attack had finished)"
        elif "ranking" in finished and "membership" not in finished:
            stage += f" ({len(finished['ranking'])} candidate pairs ranked)"
        reason = (f"interrupted during the {stage} after {time.perf_counter() - self.started:.0f} s, so there is no "
                  "verdict; the parts that finished are reported here, and rerunning the same command reproduces them "
                  "exactly")
        return Verdict.INTERRUPTED, reason, None, max((a.epsilon_lower for a in self.attacks), default=None)

    def _decided(self, claim: Claim) -> tuple[Verdict, str, JSONObject | None, float]:
        """The one verdict rule (:func:`.verdict.decide`) on what the plan found, and the plan's own addition to
        a reason that is not a violation's (:attr:`reason_suffix`)."""
        power = self.power
        v = decide(claim.epsilon, self.delta, self.attacks, self.exact, renyi_violation=self.renyi_violation,
                   unseen=self.unseen, blackbox_only=self.blackbox_only,
                   ceiling=power.largest_bound if power else math.inf,
                   runs=power.fresh_runs_per_side if power else None,
                   pairs_tried=power.pairs_tried if power else None, confidence=self.confidence, advice=self.advice)
        reason = v.reason
        if self.reason_suffix and v.verdict is not Verdict.VIOLATION:
            reason += self.reason_suffix
        return v.verdict, reason, v.witness, v.epsilon_lower

    def sections_json(self, interrupted: bool = False) -> JSONObject:
        """The findings' sections (their ``extra``), the one place they become JSON: the up-front estimate, the
        plan's own sections in their order, an interrupted search's ranking, and the claim's curves."""
        out: JSONObject = {}
        if self.estimate is not None:
            out["estimate"] = self.estimate.to_json()
        out.update(self.sections.to_json())
        if interrupted and "ranking" in self.finished:
            out.setdefault("search", list(self.finished["ranking"]))
        stated = getattr(self.policy, "claim", None)
        if self.claim is not None and stated is not None:
            out["claim_curves"] = claim_curves(stated)
        return out


#: "the claim is looser than what dpaudit proves" when it exceeds the upper bound by more than this (relative)
LOOSE_TOLERANCE = 1e-3
#: a lower bound "exceeds" the upper bound beyond this relative margin (exact figures equal to it do not)
REFUTE_TOLERANCE = 1e-6
#: why an audit of a policy without a ledger has no upper bound
NO_LEDGER = "the policy keeps no ledger: nothing dpaudit can prove beyond the claim"


def _lowers(ctx: Context) -> list[tuple[float, str]]:
    """Every lower bound the upper bound must lie above: the verdict's attacks, and the exact figures that are
    not themselves upper bounds (a finite channel's eps; not a ledger's composition) at the audit's delta. Bounds
    beside the verdict (e.g. the central view of a joint audit, which joint DP does not promise to hide) are of
    another view and are left out."""
    out = [(float(a.epsilon_lower), f"the {a.attack} attack's lower bound eps >= {a.epsilon_lower:.4g} (at "
                                    f"{a.confidence:g} confidence)") for a in ctx.attacks]
    out += [(float(e.epsilon), f"the {e.part}'s exact eps = {e.epsilon:.6g}") for e in ctx.exact
            if not e.part.endswith("ledger") and e.claimed is None]
    return out


def _source(up: Upper) -> str:
    return str(up.details.get("source", "policy")).split(",")[0]


def upper_side(ctx: Context, claim: Claim | None, interrupted: bool = False) -> Upper | None:
    """The audit's upper side, checked against its lower bounds, with the notes it calls for.

    No upper bound recorded: a policy without a ledger (nothing to prove beyond the claim; the reason is
    kept). A lower bound above it: the figure is marked refuted (it cannot hold for a correct policy, so it
    is evidence that the ledger misstates the policy) and a note says so. Else, a claim looser than the
    upper bound (beyond :data:`LOOSE_TOLERANCE`) gets a note with both numbers, and an upper bound above the
    claim a note that the ledger alone does not prove the claim. The verdict is not changed."""
    from dataclasses import replace

    up = ctx.upper
    if up is None:
        if ctx.policy is None or interrupted:
            return None
        has_ledger = hasattr(ctx.policy, "ledger")
        up = Upper(None, ctx.delta, "none", (), {"reason": NO_LEDGER if not has_ledger else (
            f"dpaudit computes no upper bound for this policy under the {ctx.request.protocol} protocol")})
    if up.epsilon is None:
        return up
    eps = up.epsilon
    over = [(v, what) for v, what in _lowers(ctx) if v > eps * (1 + REFUTE_TOLERANCE) + REFUTE_TOLERANCE]
    if over:
        v, what = max(over)
        src = _source(up)
        text = (f"{what} exceeds eps = {eps:.4g}, what the {src} would prove ({up.method}); for a correct policy "
                f"this cannot happen (but with the lower bound's error probability), so it is evidence that the {src} "
                "misstates the policy (a sensitivity too small, or a use of the data it does not record), and that "
                "figure is no proof of anything")
        ctx.notes.append(f"upper bound refuted: {text}.")
        return replace(up, refuted=text)
    if claim is not None and not interrupted:
        short = up.details.get("short") or up.method
        if claim.epsilon > eps * (1 + LOOSE_TOLERANCE):
            ctx.notes.append(f"the claim eps = {claim.epsilon:.4g} is looser than what dpaudit proves from the "
                             f"{_source(up)}, {eps:.4g} ({short}) at delta = {up.delta:g}.")
        elif eps > claim.epsilon * (1 + LOOSE_TOLERANCE) and math.isfinite(eps):
            ctx.notes.append(f"what dpaudit can prove from the {_source(up)}, eps <= {eps:.4g} ({short}), is above "
                             f"the claim eps = {claim.epsilon:.4g}: the claim relies on an analysis this composition "
                             "does not reproduce, or is wrong; the verdict judges the claim by its own tests.")
    return up


def runs_text(attack: AuditResult, planned: int) -> str:
    """``planned``, or "used of planned" for a test that stopped once its answer was settled."""
    used = attack.details.get("fresh_runs_used")
    return f"{int(used)} of {planned}" if used is not None and int(used) < planned else f"{planned}"


def confidence_each(ctx: Context, parts: int) -> float:
    """The confidence each of ``parts`` verdict parts runs at (:func:`dpaudit.attacks.bounds.split_confidence`)."""
    return split_confidence(ctx.confidence, parts)
