"""The one audit runner, for every protocol: ``dpaudit check policy`` and :func:`dpaudit.audit` call :func:`run`.

An audit is the same pipeline under every protocol (DESIGN.md, "The audit pipeline"):

1. the request's options are checked once, and an option a protocol has no use for is refused with
   the protocol's reason (:data:`PLANS`' ``refuses``), never ignored;
2. the policy is built (:mod:`.setup`), its claim read at delta, and the work estimated up front
   (:mod:`.cost`: memory, and time against ``max_hours``);
3. the engine is set up once: this process, local processes, any executor or a Dask scheduler, with
   checkpoints (:mod:`dpaudit.engine`); every part's sampling runs on it;
4. the protocol's *plan* runs its parts (:mod:`.central` for table, view and interactive; :mod:`.local`
   for local DP, K-armed and continuous; :mod:`.joint`; :mod:`.shuffle`; with ``method="one-run"``,
   :mod:`.one_run` under table, view and local), each filling the typed slots
   of a :class:`Context`: bounds that enter the verdict, bounds beside it, exact figures, the ledger,
   the power, what ran;
5. one verdict rule (:mod:`.verdict`) decides, and the findings are typed (:mod:`.findings`).

Ctrl-C (SIGTERM, SIGHUP through the CLI) raises :class:`~.findings.AuditInterrupted` carrying the
findings of every part that had finished; with a checkpoint, rerunning resumes.
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Callable, Mapping, TypedDict

from dpaudit.engine import Checkpoint, Engine, dask_executor, one_blas_thread
from dpaudit.errors import DPAuditError, check_confidence, check_delta, check_int, check_positive
from dpaudit.policies.base import PolicySource
from dpaudit.protocols import get_protocol
from dpaudit.sandbox import (call_limit, can_isolate, check_call_timeout, explain_worker_death, file_digest,
                             is_plugin_spec, overdue, own_numerics, plugin_digest, run_isolated, watch_signals)

from . import central, joint, local, one_run, shuffle
from .context import DEFAULTS, Context, Request
from .findings import AuditInterrupted, Findings
from .sections import JSONObject
from .setup import versions

__all__ = ["Request", "Context", "run", "check", "DEFAULTS", "findings_json", "RUN_KEYS", "METHODS"]

#: keys of an audit's findings that describe how it ran, not what it found
RUN_KEYS = ("seconds", "workers", "checkpoint", "attacks_seconds", "command", "versions", "estimate")


# ---- the plans: which protocol runs which parts, and the options each refuses (with the reason) ------

#: options of the K-armed audits only
_CONTEXTUAL = ("the {p} audit builds its own contextual inputs (the adversary's contexts and rewards), so the "
               "K-armed {o} does not apply")
class Plan(TypedDict):
    """A protocol's plan: the runner module that runs it, and the options it refuses with the reason for each."""

    module: str
    refuses: dict[str, str]


PLANS: dict[str, Plan] = {
    "table": {"module": "central", "refuses": {}},
    "view": {"module": "central", "refuses": {}},
    "interactive": {"module": "central", "refuses": {}},
    "local": {"module": "local", "refuses": {}},
    "joint": {"module": "joint", "refuses": {"--rewards": _CONTEXTUAL, "--adapter": _CONTEXTUAL}},
    "shuffle": {"module": "shuffle", "refuses": {"--rewards": _CONTEXTUAL, "--adapter": _CONTEXTUAL}},
}


#: the audit methods: "multi-run" (each protocol's plan above) and "one-run" (:mod:`.one_run`, a few runs with many
#: canaries each, under the protocols of :data:`.one_run.PROTOCOLS`)
METHODS = ("multi-run", "one-run")


def _plan(protocol: str, method: str = "multi-run") -> ModuleType:
    if method == "one-run":
        return one_run
    return {"central": central, "local": local, "joint": joint, "shuffle": shuffle}[PLANS[protocol]["module"]]


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
    if request.method not in METHODS:
        raise DPAuditError(f"--method must be one of {', '.join(METHODS)}, got {request.method!r}.")
    one = request.method == "one-run"
    if one:
        one_run.check_request(replace(request, runs=check_int("--runs", request.runs, minimum=2)))
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
                   runs=check_int("--runs", request.runs, minimum=2 if one else 100),
                   seed=check_int("--seed", request.seed, minimum=0),
                   workers=check_int("workers", request.workers, minimum=1),
                   horizon=None if request.horizon is None else check_int("--horizon", request.horizon, minimum=2),
                   max_work=None if request.max_work is None else check_positive("max_work", request.max_work),
                   call_timeout=check_call_timeout(request.call_timeout),
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
        "pair_sha256": file_digest(r.pair) if r.pair else None, "dpaudit": versions(),
        **({"method": r.method} if r.method != "multi-run" else {})})


def run(request: Request, progress: Callable[[str], None] | None = None) -> Findings:
    """Run one audit (module docstring) and return its typed findings; raises :class:`DPAuditError` on bad
    input and :class:`~.findings.AuditInterrupted` (with the partial findings) on Ctrl-C.

    A plug-in (``file.py:Class``, ``module:Class``) is audited in a process of its own
    (:func:`dpaudit.sandbox.run_isolated`), with one worker too: its code, the probe and the search
    included, cannot crash dpaudit; a segfault or a call stuck in C code is one sentence naming the
    plug-in, the method and the step. dpaudit's own policies run here, as before. Its numerics run under
    numpy's default floating-point error state whatever the caller set (:func:`dpaudit.sandbox.own_numerics`).
    """
    request = _checked(request)
    with own_numerics():
        if isinstance(request.policy, str) and is_plugin_spec(request.policy) and can_isolate():
            return run_isolated(_run_here, request, progress=progress, what="the audit")
        return _run_here(request, progress=progress)


def _run_here(request: Request, progress: Callable[[str], None] | None = None) -> Findings:
    """:func:`run` in this process (``request`` checked)."""
    plan = _plan(request.protocol, request.method)
    cp = _checkpoint(request)
    close_scheduler, health, executor = None, None, request.executor
    if request.scheduler is not None:
        executor, health, close_scheduler = dask_executor(request.scheduler)
    engine = Engine(request.workers, executor, checkpoint=cp, health=health, watchdog=overdue)
    ctx = Context(request, get_protocol(request.protocol), engine, progress, request.delta, request.confidence)
    where = engine.describe() if request.scheduler is None else f"Dask cluster {request.scheduler}"
    try:
        # a plug-in's own KeyboardInterrupt is not a Ctrl-C, and no call into it runs forever (dpaudit.sandbox)
        with one_blas_thread(), watch_signals(), call_limit(request.call_timeout):
            plan.preflight(ctx)
            plan.audit(ctx)
    except DPAuditError as exc:
        named = explain_worker_death(exc)  # a worker that died in plug-in code: the plug-in, method and step
        if named is None:
            raise
        raise named from None
    except KeyboardInterrupt:
        partial = ctx.conclude(interrupted=True)
        raise AuditInterrupted(replace(partial, extra={**partial.extra, "workers": where,
                                                       **({"checkpoint": cp.summary()} if cp else {})})) from None
    finally:
        engine.close()
        if close_scheduler is not None:
            close_scheduler()
    out = ctx.conclude()
    return replace(out, extra={"workers": where, **out.extra, **({"checkpoint": cp.summary()} if cp else {})})


def findings_json(findings: Findings | Mapping[str, object]) -> str:
    """An audit's findings as canonical JSON without run times, the engine's description and the command:
    what must not depend on where (or whether from a checkpoint) its pieces ran."""
    import json

    from dpaudit.attacks.result import jsonable

    out = findings.to_dict() if hasattr(findings, "to_dict") else findings

    def strip(x: object) -> object:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in RUN_KEYS}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return json.dumps(strip(jsonable(out)), sort_keys=True)


def check(policy: PolicySource, params: Mapping[str, object] | None = None, *, protocol: str = "table",
          progress: Callable[[str], None] | None = None, **options: object) -> JSONObject:
    """One audit's findings as the JSON dict ``dpaudit check policy --json`` prints (for scripts and
    benchmarks): :func:`run` with the :class:`Request` options as keywords (``workers`` defaults to 1;
    the findings do not depend on it). :func:`dpaudit.audit` is the same with typed findings and reports."""
    return run(Request(policy, dict(params or {}), protocol, **options), progress).to_dict()
