"""The one audit runner, for every protocol: ``dpaudit check policy`` and :func:`dpaudit.audit` call :func:`run`.

An audit is the same pipeline under every protocol (DESIGN.md, "The audit pipeline"):

1. the request's options are checked once, and an option a protocol has no use for is refused with
   the protocol's reason (:data:`PLANS`' ``refuses``), never ignored;
2. the policy is built (:mod:`.setup`), its claim read at delta, and the work estimated up front
   (:mod:`.cost`: memory, and time against ``max_hours``);
3. the engine is set up once: this process, local processes, any executor or a Dask scheduler, with
   checkpoints (:mod:`dpaudit.engine`); every part's sampling runs on it;
4. the protocol's *plan* runs its parts (:mod:`.central` for table, view and interactive; :mod:`.local`
   for local DP, K-armed and continuous; :mod:`.joint`; :mod:`.shuffle`), each filling the typed slots
   of a :class:`Context`: bounds that enter the verdict, bounds beside it, exact figures, the ledger,
   the power, what ran;
5. one verdict rule (:mod:`.verdict`) decides, and the findings are typed (:mod:`.findings`).

Ctrl-C (SIGTERM, SIGHUP through the CLI) raises :class:`~.findings.AuditInterrupted` carrying the
findings of every part that had finished; with a checkpoint, rerunning resumes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from dpaudit.attacks.bounds import check_confidence, largest_bound, smallest_detectable, split_confidence
from dpaudit.attacks.result import AuditResult
from dpaudit.engine import Checkpoint, Engine, dask_executor, one_blas_thread
from dpaudit.errors import DPAuditError, check_delta, check_int
from dpaudit.protocols import Protocol, get_protocol
from dpaudit.sandbox import file_digest, plugin_digest

from .findings import Claim, Exact, Findings, Part, Power, AuditInterrupted
from .setup import build_policy, claimed_epsilon, versions
from .verdict import decide

__all__ = ["Request", "Context", "run", "check", "DEFAULTS", "findings_json", "RUN_KEYS"]

#: default sample sizes and horizon (the horizon is where the central plan's choice starts)
DEFAULTS = {"runs": 50000, "horizon": 48, "confidence": 0.95, "delta": 1e-5}

#: keys of an audit's findings that describe how it ran, not what it found
RUN_KEYS = ("seconds", "workers", "checkpoint", "attacks_seconds", "command", "versions")


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

    def given(self) -> dict[str, Any]:
        """The options given explicitly, by their command-line names (for the refusals)."""
        opts = {"--scheduler": self.scheduler, "--checkpoint": self.checkpoint, "--max-hours": self.max_hours,
                "--rewards": self.rewards, "--claim": self.claim, "--adapter": self.adapter, "--pair": self.pair}
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
    unseen: str | None = None
    blackbox_only: bool = False
    stage: str = "setup"
    started: float = field(default_factory=time.perf_counter)
    #: what long parts have finished so far (the search's ``ranking``, its ``membership`` and ``likelihood``
    #: results), so that an interrupted audit reports them
    finished: dict[str, Any] = field(default_factory=dict)
    #: the plan's own state between its preflight and its parts
    state: dict[str, Any] = field(default_factory=dict)

    def build(self, horizon: int, **kw: Any) -> Any:
        """The policy at ``horizon`` (the request's claim and adapter applied)."""
        r = self.request
        return build_policy(r.policy, dict(r.params), horizon, kw.get("adapter", r.adapter), kw.get("claim", r.claim))

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

    def ran(self, name: str, kind: str, summary: str, seconds: float = 0.0) -> None:
        self.parts.append(Part(name, kind, summary, round(float(seconds), 3)))

    def set_power(self, attack: AuditResult | None, pairs_tried: int, runs: int, confidence: float,
                  note: str = "", **details: Any) -> Power:
        """The black-box attack's power at ``runs`` fresh runs per side (what it can show, what it showed)."""
        self.power = Power(pairs_tried, runs, smallest_detectable(runs, self.delta, confidence),
                           largest_bound(runs, self.delta, confidence),
                           None if attack is None else float(attack.epsilon_lower), note, details)
        return self.power


# ---- the plans: which protocol runs which parts, and the options each refuses (with the reason) ------

#: options of the K-armed audits only
_CONTEXTUAL = ("the {p} audit builds its own contextual inputs (the adversary's contexts and rewards), so the "
               "K-armed {o} does not apply")
PLANS: dict[str, dict[str, Any]] = {
    "table": {"module": "central", "refuses": {}},
    "view": {"module": "central", "refuses": {}},
    "interactive": {"module": "central", "refuses": {}},
    "local": {"module": "local", "refuses": {}},
    "joint": {"module": "joint", "refuses": {"--rewards": _CONTEXTUAL, "--adapter": _CONTEXTUAL}},
    "shuffle": {"module": "shuffle", "refuses": {"--rewards": _CONTEXTUAL, "--adapter": _CONTEXTUAL}},
}


def _plan(protocol: str) -> Any:
    import importlib

    return importlib.import_module(f"dpaudit.runner.{PLANS[protocol]['module']}")


def _refuse(request: Request) -> None:
    refused = PLANS[request.protocol]["refuses"]
    for option in request.given():
        why = refused.get(option)
        if why is not None:
            raise DPAuditError(f"{option} does not apply to --protocol {request.protocol}: "
                               f"{why.format(p=request.protocol, o=option)}; drop it.")


def _checked(request: Request) -> Request:
    from dpaudit.policies.bco import is_bco

    if request.protocol not in PLANS:
        get_protocol(request.protocol)  # the one sentence naming the protocols
    if request.protocol != "local" and is_bco(request.policy):
        raise DPAuditError(f"{request.policy!r} plays points of a convex body (BCO), not one of K arms, so the "
                           f"{request.protocol} audit's reward tables do not apply; its central Table-DP view (the "
                           "point sequence) is audited as the 'central' part of --protocol local.")
    _refuse(request)
    if not request.central and request.protocol != "local":
        raise DPAuditError("central=False skips the central part of the local-DP audit; the "
                           f"{request.protocol} audit has none to skip.")
    if request.scheduler is not None and request.executor is not None:
        raise DPAuditError("an executor and a Dask scheduler exclude each other: give one of them.")
    return replace(request, delta=check_delta(request.delta), confidence=check_confidence(request.confidence),
                   runs=check_int("--runs", request.runs, minimum=100), seed=check_int("--seed", request.seed, minimum=0),
                   workers=check_int("workers", request.workers, minimum=1),
                   horizon=None if request.horizon is None else check_int("--horizon", request.horizon, minimum=2),
                   params=dict(request.params or {}))


def _checkpoint(request: Request) -> Checkpoint | None:
    r = request
    if r.checkpoint is None:
        return None
    spec = r.policy if isinstance(r.policy, str) else f"{type(r.policy).__module__}:{getattr(r.policy, '__qualname__', '')}"
    return Checkpoint(r.checkpoint, {  # everything that determines the findings
        "policy": spec, "params": {k: str(v) for k, v in r.params.items()},
        "plugin_sha256": plugin_digest(r.policy) if isinstance(r.policy, str) else None, "protocol": r.protocol,
        "delta": r.delta, "confidence": r.confidence, "runs": r.runs, "horizon": r.horizon, "seed": r.seed,
        "rewards": None if r.rewards is None else [float(x) for x in r.rewards],
        "claim": None if r.claim is None else str(r.claim), "adapter": r.adapter, "pair": r.pair,
        "pair_sha256": file_digest(r.pair) if r.pair else None, "dpaudit": versions()})


def run(request: Request, progress: Callable[[str], None] | None = None) -> Findings:
    """Run one audit (module docstring) and return its typed findings; raises :class:`DPAuditError` on bad
    input and :class:`~.findings.AuditInterrupted` (with the partial findings) on Ctrl-C."""
    request = _checked(request)
    plan = _plan(request.protocol)
    cp = _checkpoint(request)
    close_scheduler, health, executor = None, None, request.executor
    if request.scheduler is not None:
        executor, health, close_scheduler = dask_executor(request.scheduler)
    engine = Engine(request.workers, executor, checkpoint=cp, health=health)
    ctx = Context(request, get_protocol(request.protocol), engine, progress, request.delta, request.confidence)
    where = engine.describe() if request.scheduler is None else f"Dask cluster {request.scheduler}"
    try:
        with one_blas_thread():
            plan.preflight(ctx)
            plan.audit(ctx)
    except KeyboardInterrupt:
        partial = _findings(ctx, interrupted=True)
        raise AuditInterrupted(replace(partial, extra={**partial.extra, "workers": where,
                                                       **({"checkpoint": cp.summary()} if cp else {})})) from None
    finally:
        engine.close()
        if close_scheduler is not None:
            close_scheduler()
    out = _findings(ctx)
    return replace(out, extra={"workers": where, **out.extra, **({"checkpoint": cp.summary()} if cp else {})})


def _findings(ctx: Context, interrupted: bool = False) -> Findings:
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
        verdict, reason, witness = ("interrupted",
                                    f"interrupted during the {stage} after {time.perf_counter() - ctx.started:.0f} s, "
                                    "so there is no verdict; the parts that finished are reported here, and rerunning "
                                    "the same command reproduces them exactly", None)
        lower = best
    elif claim is None:  # an exact enumeration with no claim to judge
        verdict, reason, witness = ("exact", ctx.extra.pop("_reason", "the policy states no claim, so there is "
                                                          "nothing to judge; the exact numbers stand alone"),
                                    ctx.extra.pop("_witness", None))
        lower = best if best is not None else (ctx.exact[0].epsilon if ctx.exact else None)
    else:
        v = decide(claim.epsilon, ctx.delta, ctx.attacks, ctx.exact, renyi_violation=ctx.renyi_violation,
                   unseen=ctx.unseen, blackbox_only=ctx.blackbox_only,
                   ceiling=ctx.power.largest_bound if ctx.power else math.inf,
                   runs=ctx.power.fresh_runs_per_side if ctx.power else None,
                   pairs_tried=ctx.power.pairs_tried if ctx.power else None, confidence=ctx.confidence)
        verdict, reason, witness, lower = v.verdict, v.reason, v.witness, v.epsilon_lower
        extra_reason = ctx.extra.pop("_reason_suffix", None)
        if extra_reason and verdict != "violation":
            reason += extra_reason
    ctx.extra.pop("_reason_suffix", None)
    stated = getattr(ctx.policy, "claim", None)
    if claim is not None and stated is not None and "claim_curves" not in ctx.extra:
        from .setup import claim_curves

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
        power=ctx.power, parts=tuple(ctx.parts), extra=dict(ctx.extra))


def findings_json(findings: Findings | dict[str, Any]) -> str:
    """An audit's findings as canonical JSON without run times, the engine's description and the command:
    what must not depend on where (or whether from a checkpoint) its pieces ran."""
    import json

    from dpaudit.attacks.result import jsonable

    out = findings.to_dict() if hasattr(findings, "to_dict") else findings

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in RUN_KEYS}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return json.dumps(strip(jsonable(out)), sort_keys=True)


def subaudit_seed(seed: int, *key: int) -> np.random.SeedSequence:
    """A seed for an audit part derived from the audit's seed and a fixed key (never from the engine)."""
    return np.random.SeedSequence([int(seed), *key])


def confidence_each(ctx: Context, parts: int) -> float:
    """The confidence each of ``parts`` verdict parts runs at (:func:`dpaudit.attacks.bounds.split_confidence`)."""
    return split_confidence(ctx.confidence, parts)


def check(policy: Any, params: dict[str, Any] | None = None, *, protocol: str = "table",
          progress: Callable[[str], None] | None = None, **options: Any) -> dict[str, Any]:
    """One audit's findings as the JSON dict ``dpaudit check policy --json`` prints (for scripts and
    benchmarks): :func:`run` with the :class:`Request` options as keywords (``workers`` defaults to 1;
    the findings do not depend on it). :func:`dpaudit.audit` is the same with typed findings and reports."""
    return run(Request(policy, dict(params or {}), protocol, **options), progress).to_dict()
