"""One audit in progress: the request, and the typed slots a protocol's plan fills (:class:`Context`).

:meth:`Context.conclude` applies the one verdict rule (:mod:`.verdict`) and returns the typed findings
(:mod:`.findings`); the runner (:func:`dpaudit.runner.run`) calls it once the plan has run, or with
``interrupted=True`` for the parts that had finished.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from dpaudit.attacks.bounds import largest_bound, smallest_detectable, split_confidence
from dpaudit.attacks.result import AuditResult
from dpaudit.engine import Engine
from dpaudit.errors import DPAuditError
from dpaudit.protocols import Protocol

from .findings import Claim, Exact, Findings, Part, Power, Upper, Verdict
from .setup import build_policy, claim_curves, claimed_epsilon, versions
from .verdict import decide

__all__ = ["Request", "Context", "DEFAULTS", "confidence_each"]

#: default sample sizes and horizon (the horizon is where the central plan's choice starts)
DEFAULTS = {"runs": 50000, "horizon": 48, "confidence": 0.95, "delta": 1e-5}


@dataclass(frozen=True)
class Request:
    """What the user asked for: the options of ``dpaudit check policy`` (and :func:`dpaudit.audit`)."""

    policy: Any
    params: dict[str, Any] = field(default_factory=dict)
    protocol: str = "table"
    delta: float = DEFAULTS["delta"]
    confidence: float = DEFAULTS["confidence"]
    runs: int = DEFAULTS["runs"]
    horizon: int | None = None
    seed: int = 0
    workers: int = 1
    executor: Any = None
    scheduler: str | None = None
    checkpoint: str | None = None
    max_hours: float | None = None
    rewards: Sequence[float] | None = None
    claim: Any = None
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

    def given(self) -> dict[str, Any]:
        """The options given explicitly, by their command-line names (for the refusals)."""
        opts = {"--scheduler": self.scheduler, "--checkpoint": self.checkpoint, "--max-hours": self.max_hours,
                "--rewards": self.rewards, "--claim": self.claim, "--adapter": self.adapter, "--pair": self.pair,
                "--method": None if self.method == "multi-run" else self.method}
        return {k: v for k, v in opts.items() if v is not None}


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
    policy: Any = None
    claim: Claim | None = None
    params: dict[str, Any] = field(default_factory=dict)
    attacks: list[AuditResult] = field(default_factory=list)
    beside: list[AuditResult] = field(default_factory=list)
    exact: list[Exact] = field(default_factory=list)
    ledger: dict[str, Any] | None = None
    power: Power | None = None
    parts: list[Part] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    renyi_violation: list[dict[str, Any]] = field(default_factory=list)
    #: the upper side: the tightest eps dpaudit can prove (:meth:`set_upper`); None: nothing beyond the claim
    upper: Upper | None = None
    unseen: str | None = None
    #: what an inconclusive verdict advises trying (None: the multi-run audit's advice)
    advice: str | None = None
    blackbox_only: bool = False
    stage: str = "setup"
    started: float = field(default_factory=time.perf_counter)
    #: what long parts have finished so far (the search's ``ranking``, its ``membership`` and ``likelihood``
    #: results), so that an interrupted audit reports them
    finished: dict[str, Any] = field(default_factory=dict)
    #: the plan's own state between its preflight and its parts
    state: dict[str, Any] = field(default_factory=dict)

    def build(self, horizon: int, **kw: Any) -> Any:
        """The policy at ``horizon`` (the request's claim and adapter applied; ``params`` added to the request's)."""
        r = self.request
        return build_policy(r.policy, {**r.params, **kw.get("params", {})}, horizon, kw.get("adapter", r.adapter),
                            kw.get("claim", r.claim))

    def say(self, message: str) -> None:
        """Record the current stage (what an interruption names) and show it as progress."""
        self.stage = message
        if self.progress is not None:
            self.progress(message)

    def read_claim(self, policy: Any, spec_label: str) -> Claim:
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
                  note: str = "", **details: Any) -> Power:
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
        ctx = self
        r = ctx.request
        claim = ctx.claim
        best = max((a.epsilon_lower for a in ctx.attacks), default=None)
        if interrupted:
            stage = ctx.stage
            done = [a for k, a in ctx.finished.items() if isinstance(a, AuditResult) and a not in ctx.attacks]
            ctx.attacks += done
            if "membership" in ctx.finished and "likelihood" not in ctx.finished:
                stage = "likelihood attack (the membership attack had finished)"
            elif "ranking" in ctx.finished and "membership" not in ctx.finished:
                stage += f" ({len(ctx.finished['ranking'])} candidate pairs ranked)"
            if "ranking" in ctx.finished:
                ctx.extra.setdefault("search", ctx.finished["ranking"])
            best = max((a.epsilon_lower for a in ctx.attacks), default=None)
            verdict, reason, witness = (Verdict.INTERRUPTED,
                                        f"interrupted during the {stage} after {time.perf_counter() - ctx.started:.0f} s, "
                                        "so there is no verdict; the parts that finished are reported here, and rerunning "
                                        "the same command reproduces them exactly", None)
            lower = best
        elif claim is None:  # an exact enumeration with no claim to judge
            verdict, reason, witness = (Verdict.EXACT, ctx.extra.pop("_reason", "the policy states no claim, so there is "
                                                              "nothing to judge; the exact numbers stand alone"),
                                        ctx.extra.pop("_witness", None))
            lower = best if best is not None else (ctx.exact[0].epsilon if ctx.exact else None)
        else:
            v = decide(claim.epsilon, ctx.delta, ctx.attacks, ctx.exact, renyi_violation=ctx.renyi_violation,
                       unseen=ctx.unseen, blackbox_only=ctx.blackbox_only,
                       ceiling=ctx.power.largest_bound if ctx.power else math.inf,
                       runs=ctx.power.fresh_runs_per_side if ctx.power else None,
                       pairs_tried=ctx.power.pairs_tried if ctx.power else None, confidence=ctx.confidence,
                       advice=ctx.advice)
            verdict, reason, witness, lower = v.verdict, v.reason, v.witness, v.epsilon_lower
            extra_reason = ctx.extra.pop("_reason_suffix", None)
            if extra_reason and verdict is not Verdict.VIOLATION:
                reason += extra_reason
        ctx.extra.pop("_reason_suffix", None)
        upper = upper_side(ctx, claim, interrupted)
        stated = getattr(ctx.policy, "claim", None)
        if claim is not None and stated is not None and "claim_curves" not in ctx.extra:
            ctx.extra["claim_curves"] = claim_curves(stated)
        return Findings(
            verdict=verdict, reason=reason, policy=r.policy if isinstance(r.policy, str) else str(r.policy),
            params=ctx.params or dict(r.params), protocol=r.protocol, claim=claim.text if claim else None,
            epsilon_claimed=claim.epsilon if claim else None, epsilon_lower=lower,
            gap=(claim.epsilon - lower) if claim and lower is not None else None,
            delta=ctx.delta, confidence=ctx.confidence, horizon=ctx.horizon, seed=r.seed, witness=witness,
            attacks=tuple(ctx.attacks), ledger=ctx.ledger, notes=tuple(ctx.notes), versions=versions(),
            seconds=time.perf_counter() - ctx.started, command=r.command,
            claim_method=claim.method if claim else None, exact=tuple(ctx.exact), beside=tuple(ctx.beside),
            power=ctx.power, parts=tuple(ctx.parts), epsilon_upper=upper.proved if upper else None, upper=upper,
            extra=dict(ctx.extra))


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
