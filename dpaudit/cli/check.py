"""``dpaudit check policy``: argument parsing and printing (the work is in :mod:`dpaudit.check`).

Finite policies (a ``dpaudit.finite-policy/1`` JSON spec, or a bundled spec name) are audited
exactly by enumeration (:mod:`dpaudit.attacks.exact`): delta at ``--epsilon``, epsilon at
``--delta``, the Rényi divergence of order ``--alpha``, each with its witness, under the chosen
protocol. Registered policies and plug-ins go through the sampling attacks and the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

from dpaudit.runner import DEFAULTS
from dpaudit.cli import print_json
from dpaudit.errors import DPAuditError, check_int, check_positive

__all__ = ["register_cli", "is_finite_spec", "check_finite", "check_named", "EXIT_STATUS"]

from dpaudit.runner.findings import EXIT_STATUS  # noqa: E402  exit status by verdict (2: bad input)


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="audit a policy: its claim, what attacks measure, and a verdict")
    what = p.add_subparsers(dest="what", metavar="WHAT")
    what.required = True
    c = what.add_parser(
        "policy",
        help="audit one policy",
        description="Audit a policy. POLICY is a finite-policy JSON spec (or a bundled spec such as "
        "seed001-counterexample, the T = 3 counterexample of Azize & Basu 2023a, Prop. 1(e)), a registered name "
        "(see `dpaudit list`), or a plug-in path/to/file.py:ClassName or package.module:ClassName.",
    )
    c.add_argument("policy", metavar="POLICY")
    c.add_argument("--protocol", choices=["table", "view", "interactive", "local", "joint", "shuffle"], default="table",
                   help="privacy definition (table, view, interactive: Azize & Basu 2023a, Sec. III; local: per-user "
                        "LDP as in Zheng et al. 2020 and Duchi, Jordan & Wainwright 2013; joint: anticipating joint DP "
                        "as in Shariff & Sheffet 2018 and Vietri et al. 2020; shuffle: Sarmasarkar 2026; "
                        "default: table)")
    c.add_argument("--epsilon", type=float, default=None, help="finite specs: evaluate delta(epsilon) here (default 1)")
    c.add_argument("--delta", type=float, default=1e-5, help="report the smallest epsilon at this delta (default 1e-5)")
    c.add_argument("--alpha", type=float, default=None, help="finite specs: Rényi order to report (default 2; 'inf' allowed)")
    c.add_argument("--max-work", type=float, default=None,
                   help="ceiling on elementary operations of an exact enumeration (default 2e9)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    add_named_options(c)
    c.set_defaults(func=_run)


def is_finite_spec(spec: str) -> bool:
    from dpaudit.policies.finite import BUNDLED

    return spec in BUNDLED or spec.endswith(".json")


#: options of one path only; each defaults to None, so "given explicitly" is "not None"
FINITE_ONLY = ("epsilon", "alpha", "max_work")
FINITE_DEFAULTS = {"epsilon": 1.0, "alpha": 2.0}
#: options both paths use; every other option belongs to the named-policy / plug-in path
COMMON = {"command", "what", "func", "policy", "protocol", "delta", "json", "debug"}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse_inapplicable(args: argparse.Namespace, finite: bool) -> None:
    """Refuse, in one sentence, options given explicitly that the path taken would ignore."""
    if finite:
        given = [d for d, v in vars(args).items()
                 if d not in COMMON and d not in FINITE_ONLY and v is not None and v is not False and v != []]
        why = "a finite spec is audited exactly by enumeration, which has no sampling, seed, workers or report"
    else:
        given = [d for d in FINITE_ONLY if getattr(args, d, None) is not None]
        why = "only the exact enumeration of a finite spec uses it; a named policy or plug-in is judged at --delta"
    if given:
        flags = ", ".join(_flag(d) for d in sorted(given))
        raise DPAuditError(f"{flags} {'does' if len(given) == 1 else 'do'} not apply to {args.policy!r}: {why}.")


def _run(args: argparse.Namespace) -> int:
    from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL, is_contextual_spec

    if args.protocol == "joint" and is_contextual_spec(args.policy):  # issue 13: exact joint-DP enumeration
        refuse_inapplicable(args, True)
        _check_max_work(args)
        for dest, value in FINITE_DEFAULTS.items():
            if getattr(args, dest) is None:
                setattr(args, dest, value)
        return check_finite_joint(args)
    if args.policy in BUNDLED_CONTEXTUAL:
        raise DPAuditError(f"{args.policy!r} is a finite contextual policy, audited exactly under --protocol joint only "
                           f"(got --protocol {args.protocol}).")
    finite = is_finite_spec(args.policy)
    if finite and args.protocol == "local":
        raise DPAuditError(f"{args.policy!r} is a finite policy spec without channels, so it cannot be audited under "
                           "--protocol local; use table, view or interactive.")
    refuse_inapplicable(args, finite)
    if finite:
        _check_max_work(args)
        for dest, value in FINITE_DEFAULTS.items():
            if getattr(args, dest) is None:
                setattr(args, dest, value)
        return check_finite(args)
    if getattr(args, "method", None) == "one-run" and args.runs is None:
        args.runs = ONE_RUN_RUNS
    for dest, value in NAMED_DEFAULTS.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, value)
    return check_named(args)


def _check_max_work(args: argparse.Namespace) -> None:
    """--max-work is a ceiling: a positive finite number (NaN compared False with every size and let any
    enumeration run; inf or a negative one is no ceiling at all)."""
    if args.max_work is not None:
        args.max_work = check_positive("--max-work", args.max_work)


def _progress_printer(unit: str):
    """A ``(done, total)`` progress callback: a tqdm bar with an ETA on a terminal, plain lines otherwise."""
    from dpaudit.progress import ProgressBar

    bar = ProgressBar("dpaudit check")

    def show(done: int, total: int) -> None:
        if total > 1:
            bar(f"exact enumeration: {done}/{total} {unit}")
        if done >= total:
            bar.close()

    return show


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _event(seqs: list[list[int]]) -> str:
    return "{" + ", ".join("".join(map(str, s)) for s in seqs) + "}"


def check_finite(args: argparse.Namespace) -> int:
    from dpaudit.attacks.exact import DEFAULT_MAX_WORK, exact_profile
    from dpaudit.attacks.result import jsonable
    from dpaudit.policies.finite import load_spec
    from dpaudit.protocols import get_protocol

    policy = load_spec(args.policy)
    prof = exact_profile(
        policy,
        args.protocol,
        epsilons=[args.epsilon],
        deltas=[args.delta],
        alphas=[args.alpha],
        max_work=args.max_work if args.max_work is not None else DEFAULT_MAX_WORK,
        progress=_progress_printer("adversaries") if args.protocol == "interactive" else None,
    )
    w_delta, w_eps, w_renyi = (prof.witnesses[k][0] if prof.witnesses[k] else None
                               for k in ("delta", "epsilon", "renyi"))
    if args.json:
        out: dict[str, Any] = {
            "policy": args.policy,
            "protocol": args.protocol,
            "method": "exact enumeration",
            "epsilon": prof.epsilon_at[0],
            "delta": prof.delta_at[0],
            "renyi": prof.renyi[0],
            "at": {"epsilon": args.epsilon, "delta": args.delta, "alpha": args.alpha},
            "witness": {
                "delta": w_delta.to_dict() if w_delta else None,
                "epsilon": w_eps.to_dict() if w_eps else None,
                "renyi": w_renyi.to_dict() if w_renyi else None,
            },
            "sizes": prof.sizes,
            "seconds": prof.seconds,
        }
        print_json(jsonable(out), "dpaudit.exact/1", indent=2)
        return 0
    s = prof.sizes
    rewards = ", ".join(f"{r:g}" for r in policy.rewards)
    print(f"policy    {args.policy}  (finite: T = {policy.horizon}, K = {policy.n_arms}, rewards {{{rewards}}})")
    print(f"protocol  {args.protocol}: {get_protocol(args.protocol).summary}")
    adv = f", {s['adversaries']} deterministic adversaries" if args.protocol == "interactive" else ""
    print(f"method    exact enumeration: {s['inputs']} inputs, {s['neighbouring_pairs']} neighbouring pairs, "
          f"{s['views']} views{adv} ({prof.seconds:.3f} s)")
    print()
    rows = [
        (f"delta(eps = {args.epsilon:g})", prof.delta_at[0], w_delta),
        (f"eps(delta = {args.delta:g})", prof.epsilon_at[0], w_eps),
        (f"D_alpha(alpha = {args.alpha:g})", prof.renyi[0], w_renyi),
    ]
    for label, value, w in rows:
        print(f"{label:<24} {_fmt(value)}")
        if w is not None and (value > 0):
            print(f"{'':<24} witness: round {w.round} differs; input {w.input} vs {w.neighbour}")
            if args.protocol == "interactive":
                print(f"{'':<24}          adversary {w.adversary}")
            print(f"{'':<24}          event {_event(w.event)}: P = {w.p_event:.6g}, Q = {w.q_event:.6g}")
    return 0


# ---- registered policies and plug-ins --------------------------------------------------------

#: the named path's defaults, filled in after :func:`refuse_inapplicable` (argparse defaults are None)
NAMED_DEFAULTS: dict[str, Any] = {"param": [], "confidence": DEFAULTS["confidence"], "runs": DEFAULTS["runs"], "seed": 0,
                                  "method": "multi-run"}
#: --runs of --method one-run when not given: runs in all, one of them the pilot
ONE_RUN_RUNS = 10


def add_named_options(c: argparse.ArgumentParser) -> None:
    """The options only the named-policy / plug-in path uses (added to the lead's parser)."""
    c.add_argument("--param", action="append", default=None, metavar="K=V",
                   help="a policy parameter, repeatable (named policies and plug-ins)")
    c.add_argument("--confidence", type=float, default=None,
                   help="confidence of every lower bound (default 0.95)")
    c.add_argument("--runs", type=int, default=None,
                   help="fresh runs per side for the final attack evaluations (default 50000); with --method one-run, "
                        f"the runs in all, one of them the pilot (default {ONE_RUN_RUNS})")
    c.add_argument("--method", choices=["multi-run", "one-run"], default=None,
                   help="multi-run (default): thousands of runs per side of the most revealing neighbouring pair. "
                        "one-run: for code that can only run a few times (Steinke, Nasr & Jagielski, \"Privacy "
                        "Auditing with One (1) Training Run\", 2023; Mahloujifar, Melis & Chaudhuri, \"Auditing "
                        "f-Differential Privacy in One Run\", 2025), --runs R runs (one pilot) with many canaries each "
                        "(rounds 2^k - 1 whose reward is high or low, or every user under local), guessed from what "
                        "follows them; table, view and local only. It can show a violation when many guesses are "
                        "right, up to the cap its guesses allow (reported as its power); it cannot catch a leak of tens "
                        "of percent, nor a policy that decides once per run (one informative guess per counted run: "
                        "the 9 counted runs of 10 show at most eps = 0.93)")
    c.add_argument("--horizon", type=int, default=None,
                   help="horizon T of the neighbouring inputs (default: 48, or for a policy with a ledger "
                        "whose first release comes later, just past that release; with --method one-run, 4096 "
                        "rounds, or users under local)")
    c.add_argument("--seed", type=int, default=None, help="seed of every random draw, an integer >= 0 (default 0)")
    c.add_argument("--report", default=None, metavar="PATH.md",
                   help="also write a Markdown report (and a self-contained HTML page beside it)")
    c.add_argument("--horizons", default=None, metavar="T1,T2,...",
                   help="also measure leakage against the horizon: the witness pair rebuilt at each T and "
                        "attacked afresh (a figure in the report)")
    c.add_argument("--adapter", default=None, metavar="per-run[:KEY=VALUE,...]",
                   help="per-run: POLICY is a one-run class (select_arm()/update(arm, reward), pull(), step(...)), "
                        "or a function FILE.py:FUNCTION / module:FUNCTION returning one (typed by its signature, the "
                        "horizon to the parameter that names it); dpaudit runs N seeded copies of it as a batched "
                        "policy (give its claim with --claim). Options: select=NAME,update=NAME or step=NAME (its "
                        "methods); update_args=TOKENS or step_args=TOKENS (the feedback call's arguments in its "
                        "order, tokens arm, reward and t, NAME:TOKEN for a keyword: update_args=t,arm,reward, "
                        "step_args=reward,arm); first_round=1 (it counts rounds from 1); n_arms=K; horizon=NAME (the "
                        "parameter that receives T); globals=off|redirect|swap; randomizer=NAME,domain=LOW,HIGH (a "
                        "local-DP class: the method that turns a user's datum into her message, for --protocol "
                        "local). A list value runs to the next KEY=")
    c.add_argument("--claim", default=None, metavar="CLAIM",
                   help="the guarantee to check, replacing any the policy declares: pure:eps=E, zcdp:rho=R, "
                        "approx:eps=E,delta=D or rdp:alpha=A,eps=E")
    c.add_argument("--pair", default=None, metavar="PAIR.json",
                   help="audit exactly this neighbouring pair (format dpaudit.pair/1: two reward tables or lists "
                        "differing in one round, optional contexts; under joint, per-round contexts T x K x d and "
                        "optional contexts_prime; under shuffle, one batch: rewards, contexts B x d) instead of "
                        "searching for one")
    c.add_argument("--rewards", default=None, metavar="R1,R2,...",
                   help="the only rewards the policy accepts (e.g. 0,1); every audit input is built from them "
                        "(default: the policy's reward_alphabet, else any value in its reward range; K-armed "
                        "protocols: table, view, interactive, local)")
    c.add_argument("--workers", type=int, default=None,
                   help="local processes that run the audit's independent pieces (default: one per core); "
                        "the findings do not depend on it")
    # reliability options (issue 12): where the pieces run, resumable audits, up-front cost limits
    c.add_argument("--force-workers", action="store_true", default=None,
                   help="allow --workers beyond the cores this process may use")
    c.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help='run the pieces on a Dask distributed cluster (pip install "dpaudit[dask]")')
    c.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="record each finished piece in DIR; rerunning the same command resumes from it")
    c.add_argument("--max-hours", type=float, default=None,
                   help="refuse, before starting, an audit estimated to take longer (default 24)")
    c.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                   help="end the audit when one call into a plug-in's code (its act, observe, ...) runs longer, "
                        "naming the call (default 600)")


def _f(x: Any) -> str:
    return "inf" if isinstance(x, float) and math.isinf(x) else f"{x:.4g}"


def print_findings(a: Any) -> None:
    """Print an audit's typed findings, one line each, the same way for every protocol."""
    acts = a.extra.get("action_space") or f"K = {a.extra.get('n_arms', '?')}"  # BCO: points, not arms
    print(f"policy      {a.policy}  {a.params or ''}  ({acts}, T = {a.horizon}, protocol {a.protocol})")
    if a.epsilon_claimed is not None:
        print(f"claim       {a.claim_method}: eps = {a.epsilon_claimed:.4g} at delta = {a.delta:g}")
    if a.extra.get("channel"):
        print(f"channel     {a.extra['channel']}")
    led = a.ledger
    if led and led.get("kind") == "per-user":
        if led.get("epsilon") is not None:
            print(f"ledger      {led['messages']} messages, at most {led['max_messages_per_user']} per user; exact "
                  f"per-user eps = {led['epsilon']:.4g} ({led['method']})")
        else:
            print("ledger      no message recorded (the channel does not use dpaudit.mechanisms)")
    elif led:
        if led.get("implied"):
            per = "by design every round feeds one node per tree level" if led.get("tree") else \
                f"{led['shared_rounds']} (run, round) pairs fed more than one release"
            print(f"ledger      implied {led['implied']} (eps = {_f(led.get('implied_epsilon', math.nan))}); {per}")
        if led.get("releases_without_fed"):
            print(f"            {led['releases_without_fed']} releases do not say which rounds fed them")
    elif a.verdict != "interrupted" and a.protocol in ("table", "view", "interactive") and \
            a.extra.get("method") != "one-run":
        print("ledger      none (the policy does not use dpaudit's mechanisms; black-box attacks only)")
    for e in a.exact:
        if e.part.endswith("ledger"):
            continue
        print(f"exact       {e.part}: eps = {_f(e.epsilon)} at delta = {a.delta:g} ({e.method})")
    for res, role in [(x, "") for x in a.attacks] + [(x, " (beside the verdict)") for x in a.beside]:
        d = res.details
        if "renyi" in d and res.attack.endswith("likelihood"):
            r = d["renyi"]
            extra = "; D_alpha lower: " + ", ".join(
                f"{o:g}:{v if isinstance(v, str) else f'{v:.3g}'}" for o, v in zip(r["orders"], r["lower"]))
        else:
            label = res.witness.get("label")
            stat = res.witness.get("statistic")
            extra = (f"; {label}" if label and res.attack not in ("membership", "likelihood") else "") + \
                (f"; statistic {stat}" if stat and res.attack == "membership" else "") + \
                (f", FPR {d['fpr']:.4g}, FNR {d['fnr']:.4g}" if "fpr" in d else "")
        print(f"{res.attack:<11} eps >= {res.epsilon_lower:.4g} at {res.confidence:.4g} confidence ({res.samples} "
              f"samples, {res.seconds:.1f} s{extra}){role}")
    central = a.extra.get("central")
    if isinstance(central, dict) and central.get("verdict"):
        low = central.get("epsilon_lower")
        print(f"central     Table DP: {central['verdict']}, {'no bound' if low is None else f'eps >= {low:.4g}'} "
              f"({central.get('seconds', 0):.1f} s)")
    pw = a.power
    if pw is not None and pw.details.get("method") == "one-run":
        print(f"power       {pw.note}")
    elif pw is not None:
        print(f"power       {pw.pairs_tried} pairs tried; with {pw.fresh_runs_per_side} fresh runs per side the "
              f"black-box attack can show eps from {pw.smallest_detectable:.3g} up to {pw.largest_bound:.3g}"
              + (f"; it stopped after {pw.fresh_runs_used}, its answer settled" if pw.fresh_runs_used else ""))
    cp = a.extra.get("checkpoint")
    if isinstance(cp, dict) and "pieces_reused" in cp:
        bad = cp.get("pieces_damaged_recomputed") or 0
        print(f"checkpoint  {cp.get('dir')}: {cp['pieces_reused']} pieces reused, {cp['pieces_computed']} computed"
              + (f" ({bad} of them damaged on disk and recomputed)" if bad else ""))
    if a.verdict == "interrupted" and a.extra.get("search"):
        print(f"search      {len(a.extra['search'])} candidate pairs ranked before the interruption")
    w = a.witness
    if w:
        print(f"witness     {w.get('label', '')} ({w.get('attack')})")
    for note in a.notes:
        print(f"note        {note}")
    print(f"verdict     {a.verdict.upper()}: {a.reason}.")


def _horizons(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise DPAuditError(f"--horizons must be a comma-separated list of integers, got {text!r}.") from None


def _parse_claim(text: str | None) -> Any:
    if text is None:
        return None
    from dpaudit.adapters import parse_claim

    return parse_claim(text)


def _parse_rewards(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(x) for x in text.replace(";", ",").split(",") if x.strip()]
    except ValueError:
        raise DPAuditError(f"--rewards must be a comma-separated list of numbers such as 0,1, got {text!r}.") from None


def check_named(args: argparse.Namespace) -> int:
    """CLI glue over :func:`dpaudit.audit`: exit 1 on violation, 0 when consistent, 130 when interrupted
    (errors raise DPAuditError -> exit 2). The verdict is printed before the report is written."""
    import dataclasses

    from dpaudit.api import AuditInterrupted as _Interrupted
    from dpaudit.api import audit
    from dpaudit.policies.registry import parse_params
    from dpaudit.progress import ProgressBar

    # the canonical command line (every option spelled out, so the report reproduces exactly)
    argv = ["check", "policy", args.policy, "--protocol", args.protocol]
    for item in args.param:
        argv += ["--param", item]
    report_paths = None
    if args.report is not None:
        from dpaudit.report import check_report_path

        report_paths = check_report_path(args.report)  # before the audit: a bad path fails in a second
    workers = None if args.workers is None else check_int("--workers", args.workers, minimum=1)
    if args.scheduler is not None and workers is not None:
        raise DPAuditError("--workers and --scheduler exclude each other: the Dask cluster's workers run the pieces.")
    if workers is not None and not args.force_workers:
        from dpaudit.runner.cost import check_workers

        check_workers(workers)
    call_timeout = None if args.call_timeout is None else check_positive("--call-timeout", args.call_timeout)
    bar = ProgressBar("dpaudit check")
    try:
        result = audit(
            args.policy, params=parse_params(args.param), protocol=args.protocol, delta=args.delta,
            confidence=args.confidence, runs=args.runs, horizon=args.horizon, seed=args.seed,
            progress=bar, workers=workers, command="", horizons=_horizons(args.horizons),
            rewards=_parse_rewards(args.rewards), claim=_parse_claim(args.claim), adapter=args.adapter,
            pair=args.pair, scheduler=args.scheduler, checkpoint=args.checkpoint, max_hours=args.max_hours,
            call_timeout=call_timeout, method=args.method,
        )
    except _Interrupted as exc:
        result = exc.audit
    finally:
        bar.close()
    status = result.exit_status
    # the horizon written is the one used, so the command reproduces the audit even when it was chosen
    horizon = result.horizon if result.horizon is not None else args.horizon
    argv += ["--delta", f"{args.delta:g}", "--confidence", f"{args.confidence:g}", "--runs", str(args.runs)]
    argv += ["--horizon", str(horizon)] if horizon is not None else []
    argv += ["--seed", str(args.seed)]
    argv += ["--method", args.method] if args.method != "multi-run" else []
    for flag, value in (("--adapter", args.adapter), ("--claim", args.claim), ("--pair", args.pair),
                        ("--rewards", args.rewards), ("--horizons", args.horizons)):
        if value is not None:
            argv += [flag, value]
    if args.report is not None:
        argv += ["--report", str(args.report)]
    result = dataclasses.replace(result, command="dpaudit " + " ".join(shlex.quote(a) for a in argv))
    if report_paths is not None:
        result = dataclasses.replace(result, extra={**result.extra, "report": [str(p) for p in report_paths]})
    if args.json:
        print(json.dumps(result.to_dict(), indent=2), flush=True)
    else:
        print_findings(result)
        sys.stdout.flush()
    if report_paths is not None:
        written = result.write(args.report)  # the pair, then the Markdown's figures (PNG files beside it)
        if not args.json:
            pngs = len(written) - 2
            print(f"report      {', '.join(str(p) for p in written[:2])}"
                  + (f" (+ {pngs} PNG figures beside the Markdown)" if pngs > 0 else ""))
    return status


# ---- --protocol joint on a finite contextual spec (issue 13): dpaudit.check_joint.audit_joint_finite -------

def check_finite_joint(args: argparse.Namespace) -> int:
    """Print the exact joint-DP audit of a finite contextual policy (through the one runner, plan
    :mod:`dpaudit.runner.joint`); exit status by verdict (0 without a claim)."""
    from dpaudit.api import Audit
    from dpaudit.runner import Request, run

    argv = ["dpaudit", "check", "policy", args.policy, "--protocol", "joint", "--delta", f"{args.delta:g}",
            "--epsilon", f"{args.epsilon:g}", "--alpha", f"{args.alpha:g}"]
    if args.max_work is not None:
        argv += ["--max-work", f"{args.max_work:g}"]
    a = Audit.of(run(Request(args.policy, protocol="joint", delta=args.delta, epsilon=args.epsilon, alpha=args.alpha,
                             max_work=args.max_work, command=" ".join(shlex.quote(x) for x in argv))))
    if args.json:
        print(json.dumps(a.to_dict(), indent=2))
        return a.exit_status
    ex, x = a.extra["exact_joint"], a.extra
    rewards = ", ".join(f"{r:g}" for r in x["rewards"])
    print(f"policy    {a.policy}  (finite contextual: T = {a.horizon}, K = {x['n_arms']}, contexts "
          f"{{{', '.join(x['contexts'])}}}, rewards {{{rewards}}})")
    print(f"protocol  joint: {x['protocol_summary']}")
    print(f"method    exact enumeration: {x['sizes']['pairs']} (history, neighbouring round-t triples, future) cases "
          f"({a.parts[0].seconds:.3f} s)")
    if a.claim is not None:
        print(f"claim     {a.claim_method}: eps = {a.epsilon_claimed:.6g} at delta = {a.delta:g}")
    print()
    print(f"{'':<24} {'history (anticipating JDP)':>26} {'user data':>12} {'central a_t..a_T':>17}")
    for label, key in ((f"delta(eps = {args.epsilon:g})", "delta_at_epsilon"), (f"eps(delta = {args.delta:g})", "epsilon"),
                       (f"D_alpha(alpha = {args.alpha:g})", "renyi")):
        print(f"{label:<24} {_fmt(ex['history'][key]):>26} {_fmt(ex['data'][key]):>12} {_fmt(ex['central'][key]):>17}")
    w = ex["history"]["witness_epsilon"]
    if w:
        print(f"witness   round {w['round']}: {tuple(w['canary'])} vs {tuple(w['neighbour'])}; history before it "
              f"{w['history'] or 'empty'}; future contexts {w['future_contexts']}, rewards {w['future_rewards']}")
        print(f"          event {_event(w['event'])} (arms of rounds {w['round'] + 1}..{a.horizon}): "
              f"P = {w['p_event']:.6g}, Q = {w['q_event']:.6g}")
    if x.get("claim_point"):
        cp = x["claim_point"]
        print(f"claim pt  eps at the claim's own delta = {cp['delta_claimed']:g}: exact {_fmt(cp['epsilon_exact'])} vs "
              f"claimed {cp['epsilon']:.6g}")
    verdict = a.verdict.upper() if a.verdict != "exact" else "NO CLAIM"
    print(f"verdict   {verdict}: {a.reason}.")
    return a.exit_status
