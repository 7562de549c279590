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
from typing import TYPE_CHECKING

from dpaudit.runner import DEFAULTS
from dpaudit.cli import print_json
from dpaudit.errors import DPAuditError, check_int, check_positive

__all__ = ["register_cli", "is_finite_spec", "check_finite", "check_named", "EXIT_STATUS"]

from dpaudit.runner.findings import EXIT_STATUS  # noqa: E402  exit status by verdict (2: bad input)
from dpaudit.runner.one_run import ONE_RUN_DEFAULTS  # noqa: E402

if TYPE_CHECKING:
    from dpaudit.accountants import Guarantee
    from dpaudit.jsontypes import JSONObject
    from dpaudit.runner.findings import Findings, Upper


#: the protocols, as --protocol spells them
PROTOCOLS = ("table", "view", "interactive", "local", "joint", "shuffle")
#: the metavar of the policy-parameter option, the same in every command
PARAM_METAVAR = "NAME=VALUE"
#: seconds without a progress line after which the audit says which stage is still running
HEARTBEAT = 8.0


def _wrapped(text: str) -> str:
    """A paragraph wrapped for a help screen whose epilog keeps its own layout (RawDescriptionHelpFormatter)."""
    import textwrap

    return "\n\n".join(textwrap.fill(" ".join(par.split()), 100) for par in text.split("\n\n"))


def register_cli(sub: argparse._SubParsersAction) -> None:
    from dpaudit.cli import EXIT_STATUSES

    p = sub.add_parser("check", help="audit a policy: its claim, what attacks measure, and a verdict")
    what = p.add_subparsers(dest="what", metavar="WHAT")
    what.required = True
    c = what.add_parser(
        "policy",
        help="audit one policy",
        description=_wrapped(
            "Audit a policy: its claim at --delta, what the attacks measure (lower bounds on epsilon at "
            "--confidence), and a verdict. POLICY is a registered name (see `dpaudit list`), a plug-in "
            "path/to/file.py:ClassName or package.module:ClassName, or a finite policy spec (a bundled name "
            "such as table-vs-view-counterexample, the T = 3 counterexample of Azize & Basu 2023a, Prop. 1(e), or a "
            "file.json), audited exactly by enumeration.\n\n"
            "Without --protocol the audit runs under the notion the policy's claim is about (`dpaudit describe "
            "POLICY` shows it; table for a plug-in that names none), and its first note says which protocol ran "
            "and why. Options that only one protocol uses say so; an option the chosen path has no use for is "
            "refused, never ignored."),
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = c.add_argument_group("what to audit")
    target.add_argument("policy", metavar="POLICY",
                        help="a registered name, path/to/file.py:ClassName, package.module:ClassName, or a finite "
                             "policy spec (bundled name or file.json)")
    target.add_argument("--protocol", choices=PROTOCOLS, default=None,
                        help="the privacy notion audited: table, view or interactive (Azize & Basu 2023a, Sec. III: "
                             "neighbouring reward tables, observed reward lists, or an adversary's queries), local "
                             "(per-user LDP: Zheng et al. 2020; Duchi, Jordan & Wainwright 2013), joint (anticipating "
                             "joint DP: Shariff & Sheffet 2018; Vietri et al. 2020) or shuffle (Sarmasarkar 2026). "
                             "Default: the notion the policy's claim is about (table for a plug-in that names none, "
                             "joint for a finite contextual spec); another one is audited as asked, with a note when "
                             "the claim is about a different notion")
    add_named_options(c, target)
    finite = c.add_argument_group("finite specs only (exact enumeration)")
    finite.add_argument("--epsilon", type=float, default=None,
                        help="report the exact delta(epsilon) at this epsilon (default 1)")
    finite.add_argument("--alpha", type=float, default=None,
                        help="report the exact Rényi divergence of this order (default 2; 'inf' allowed)")
    finite.add_argument("--max-work", type=float, default=None,
                        help="refuse an enumeration of more elementary operations than this (default 2e9)")
    add_execution_options(c)
    c.set_defaults(func=_run)


def is_finite_spec(spec: str) -> bool:
    from dpaudit import deprecations
    from dpaudit.policies.finite import BUNDLED

    spec = deprecations.spec(spec)
    return spec in BUNDLED or spec.endswith(".json")


#: options of one path only; each defaults to None, so "given explicitly" is "not None"
FINITE_ONLY = ("epsilon", "alpha", "max_work")
FINITE_DEFAULTS = {"epsilon": 1.0, "alpha": 2.0}
#: options both paths use (and what _run records); every other option belongs to the named-policy / plug-in path
COMMON = {"command", "what", "func", "policy", "protocol", "delta", "json", "debug", "given", "protocol_note"}
#: the options that determine an audit's findings, in the order the reproduce command writes them, then the
#: report it writes (the rest say where it runs, how long it may take, or how the findings are printed)
FINDING_OPTIONS = ("protocol", "param", "delta", "confidence", "runs", "horizon", "seed", "epsilon", "alpha",
                   "max_work", "adapter", "claim", "pair", "rewards", "horizons", "method")
RECORDED_OPTIONS = FINDING_OPTIONS + ("report",)


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


def _given(args: argparse.Namespace) -> dict[str, object]:
    """The options that determine the findings (and the report path), as the user gave them (argparse
    defaults are None)."""
    return {d: getattr(args, d) for d in RECORDED_OPTIONS if getattr(args, d, None) not in (None, [])}


def _arg(value: object) -> str:
    """An option's value as the reproduce command writes it: floats exactly (``repr``), the rest as given."""
    return repr(value) if isinstance(value, float) else str(value)


def reproduce_command(policy: str, given: dict[str, object], seed: int | None = None) -> str:
    """The command line that reproduces an audit: the policy, the options the user gave that determine the
    findings (:data:`FINDING_OPTIONS`, each as given: never a default filled in or a horizon the audit
    chose, which would change what the audit searches), the seed, and the report it wrote."""
    argv = ["dpaudit", "check", "policy", policy]
    opts = dict(given)
    if seed is not None:
        opts["seed"] = seed
    for dest in RECORDED_OPTIONS:
        if dest not in opts:
            continue
        values = opts[dest] if isinstance(opts[dest], list) else [opts[dest]]
        for v in values:
            argv += [_flag(dest), _arg(v)]
    return " ".join(shlex.quote(a) for a in argv)


def _run(args: argparse.Namespace) -> int:
    from dpaudit import deprecations
    from dpaudit.api import finite_notion
    from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL, is_contextual_spec

    args.policy = deprecations.spec(args.policy)  # an old spec name: the audit and its command use the new one
    args.given = _given(args)  # before any default is filled in: the reproduce command names only these
    args.protocol_note = None
    if args.protocol is None:  # a finite spec's notion; a policy's is read by dpaudit.audit
        notion = finite_notion(args.policy)
        if notion is not None:
            args.protocol = notion
            args.protocol_note = ("the default for a finite contextual spec" if notion == "joint" else
                                  "the default for a finite policy spec; --protocol view or interactive asks for "
                                  "the others")
    if args.delta is None:
        args.delta = DEFAULTS["delta"]
    if args.protocol == "joint" and is_contextual_spec(args.policy):  # exact joint-DP enumeration
        refuse_inapplicable(args, True)
        _check_max_work(args)
        for dest, value in FINITE_DEFAULTS.items():
            if getattr(args, dest) is None:
                setattr(args, dest, value)
        return check_finite_joint(args)
    if args.policy in BUNDLED_CONTEXTUAL:
        raise DPAuditError(f"{args.policy!r} is a finite contextual policy, audited exactly under --protocol joint "
                           f"only (got --protocol {args.protocol}).")
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
        out: JSONObject = {
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
            # an exact enumeration is its own upper bound: the exact value brackets the truth from both sides
            "epsilon_upper": prof.epsilon_at[0],
            "upper": {"epsilon": prof.epsilon_at[0], "delta": args.delta, "method": "exact enumeration"},
        }
        print_json(jsonable(out), "dpaudit.exact/1", indent=2)
        return 0
    s = prof.sizes
    rewards = ", ".join(f"{r:g}" for r in policy.rewards)
    print(f"policy    {args.policy}  (finite: T = {policy.horizon}, K = {policy.n_arms}, rewards {{{rewards}}})")
    print(f"protocol  {args.protocol}: {get_protocol(args.protocol).summary}"
          + (f" ({args.protocol_note})" if args.protocol_note else ""))
    adv = f", {s['adversaries']} deterministic adversaries" if args.protocol == "interactive" else ""
    print(f"method    exact enumeration: {s['inputs']} inputs, {s['neighbouring_pairs']} neighbouring pairs, "
          f"{s['views']} views{adv} ({prof.seconds:.3f} s)")
    print(f"upper     eps <= {_fmt(prof.epsilon_at[0])} at delta = {args.delta:g} (exact enumeration: the exact value "
          "is both the lower and the upper bound)")
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

#: the named path's defaults, filled in after :func:`refuse_inapplicable` (argparse defaults are None, so that
#: "given" is "not None": the reproduce command names what was given, never a default)
NAMED_DEFAULTS: dict[str, object] = {"param": [], "confidence": DEFAULTS["confidence"], "runs": DEFAULTS["runs"], "seed": 0,
                                  "method": "multi-run"}
#: --runs of --method one-run when not given: runs in all, one of them the pilot
ONE_RUN_RUNS = ONE_RUN_DEFAULTS["runs"]


def add_named_options(c: argparse.ArgumentParser, target: argparse._ActionsContainer | None = None) -> None:
    """The options of the named-policy / plug-in path, in their groups (``target``: the "what to audit"
    group the policy and --protocol are in)."""
    from dpaudit.runner.joint import JOINT_DEFAULTS
    from dpaudit.runner.local import LOCAL_DEFAULTS
    from dpaudit.runner.shuffle import SHUFFLE_CAPS

    target = target if target is not None else c
    target.add_argument("--param", action="append", default=None, metavar=PARAM_METAVAR,
                        help="a constructor parameter of the policy, repeatable (`dpaudit describe POLICY` lists them "
                             "with their types and defaults); every protocol")
    target.add_argument("--claim", default=None, metavar="CLAIM",
                        help="the guarantee to check, replacing any the policy declares: pure:eps=E, zcdp:rho=R, "
                             "approx:eps=E,delta=D or rdp:alpha=A,eps=E; every protocol")
    target.add_argument("--adapter", default=None, metavar="per-run|loop|process[:NAME=VALUE,...]",
                        help="per-run: POLICY is a one-run class (select_arm()/update(arm, reward), pull(), "
                             "step(...)), or a function FILE.py:FUNCTION / module:FUNCTION returning one (typed by its "
                             "signature, the horizon to the parameter that names it); dpaudit runs N seeded copies of "
                             "it as a batched policy (give its claim with --claim). Options: select=NAME,update=NAME "
                             "or step=NAME (its methods); update_args=TOKENS or step_args=TOKENS (the feedback call's "
                             "arguments in its order, tokens arm, reward and t, NAME:TOKEN for a keyword: "
                             "update_args=t,arm,reward, step_args=reward,arm); first_round=1 (it counts rounds from "
                             "1); n_arms=K; horizon=NAME (the parameter that receives T); globals=off|redirect|swap; "
                             "randomizer=NAME,domain=LOW,HIGH (a local-DP class: the method that turns a user's datum "
                             "into her message; then local is the default protocol). A list value runs to the next "
                             "NAME=. Table, view, interactive and local; refused under joint and shuffle (they build "
                             "contextual inputs). loop: POLICY is a function (or a class with run()) that runs its "
                             "own loop over an environment it is given (env.pull(arm), reward(t, arm), gym-like "
                             "step(action)); options env=NAME, factory=NAME, pull=NAME, step=NAME, reward=NAME, "
                             "run=NAME, n_arms=K, horizon=NAME, globals=off|redirect|swap (table and view). process: "
                             "POLICY is a command speaking the line-delimited JSON protocol dpaudit.process/1 "
                             "(docs/outside-code.md), e.g. \"node examples/process_ucb.js\"; options batch=on|off, "
                             "n_arms=K, timeout=SECONDS")
    target.add_argument("--pair", default=None, metavar="PAIR.json",
                        help="audit exactly this neighbouring pair instead of searching for one (format "
                             "dpaudit.pair/1): table, view, interactive: two reward tables or lists differing in one "
                             "round (optional contexts: one fixed action set), and its T is the horizon; joint: "
                             "per-round contexts T x K x d and optional contexts_prime; shuffle: one batch (rewards, "
                             "contexts B x d); refused under local (it compares one user's data at its domain's ends)")
    stats = c.add_argument_group("sampling and statistics")
    stats.add_argument("--method", choices=["multi-run", "one-run"], default=None,
                       help="multi-run (default): thousands of runs per side of the most revealing neighbouring pair. "
                            "one-run: for code that can only run a few times (Steinke, Nasr & Jagielski, \"Privacy "
                            "Auditing with One (1) Training Run\", 2023; Mahloujifar, Melis & Chaudhuri, \"Auditing "
                            "f-Differential Privacy in One Run\", 2025), --runs R runs (one or two pilots) with many "
                            "canaries each (rounds 2^k - 1 whose reward is high or low, and each arm's first pull where "
                            "the policy has or may be given many arms, T / 16 up to 256; or every user under local), "
                            "guessed from what follows them; table, view and local only. It can show a violation when many guesses "
                            "are right, up to the cap its guesses allow (reported as its power); it cannot catch a leak "
                            "of tens of percent, nor a policy that decides once per run (one informative guess per "
                            "counted run: 9 counted runs show at most eps = 0.93)")
    stats.add_argument("--delta", type=float, default=None,
                       help="the delta of every epsilon: the claim is converted to eps at it and every lower bound "
                            "is on eps at it (default 1e-5); for a finite spec, the exact eps(delta) is read there")
    stats.add_argument("--confidence", type=float, default=None,
                       help="the probability that the verdict's lower bounds all hold, split over the audit's "
                            "bounds (Bonferroni; default 0.95)")
    stats.add_argument("--runs", type=int, default=None,
                       help=f"fresh runs per side of the final tests (default {DEFAULTS['runs']}; a test stops "
                            "early once its answer is settled); the central search ranks its pairs on a tenth of "
                            f"it (500 to 2,000 runs); local audits test the channel on {LOCAL_DEFAULTS['channel_factor']} x it and "
                            f"the transcript and central view on 1/{LOCAL_DEFAULTS['transcript_div']} of it; joint "
                            f"audits cap it at {JOINT_DEFAULTS['runs']:,} and shuffle audits at "
                            f"{SHUFFLE_CAPS['runs']:,}; with --method one-run, the runs in all, one of them the "
                            f"pilot (default {ONE_RUN_RUNS})")
    stats.add_argument("--horizon", type=int, default=None, metavar="T",
                       help=f"rounds of every audited input. Default: table, view, interactive: chosen by the audit "
                            f"({DEFAULTS['horizon']}; for a policy whose ledger releases later, just past its first "
                            f"release; without a ledger, {DEFAULTS['horizon']} rounds past its first input-dependent "
                            "action, then the search may extend it while a pair's sides act alike), an explicit T is "
                            f"kept as given; local: {DEFAULTS['horizon']}; joint: {JOINT_DEFAULTS['horizon']}; "
                            "shuffle: the policy's own (it only places the later batches; the first batch is the "
                            f"view); --method one-run: {ONE_RUN_DEFAULTS['horizon']} rounds, or "
                            f"{ONE_RUN_DEFAULTS['local_horizon']} users under local")
    stats.add_argument("--seed", type=int, default=None,
                       help="seed of every random draw, an integer >= 0 (default 0): the same options and seed give "
                            "the same findings whatever --workers or --scheduler")
    special = c.add_argument_group("protocol-specific")
    special.add_argument("--rewards", default=None, metavar="R1,R2,...",
                         help="the only rewards the policy accepts (e.g. 0,1); every audit input is built from them "
                              "(default: the policy's reward_alphabet, else any value in its reward range). K-armed "
                              "protocols: table, view, interactive, local; refused under joint and shuffle")
    special.add_argument("--horizons", default=None, metavar="T1,T2,...",
                         help="table and view: also measure leakage against the horizon, the witness pair rebuilt at "
                              "each T and attacked afresh (a figure in the report; its own seed, so the verdict is "
                              "unchanged)")


def add_execution_options(c: argparse.ArgumentParser) -> None:
    """Where the audit runs, how long it may take, and what it writes (none changes the findings)."""
    run = c.add_argument_group("execution (where and how long; the findings do not depend on these)")
    run.add_argument("--workers", type=int, default=None,
                     help="local processes that run the audit's independent pieces (default: one per core)")
    run.add_argument("--force-workers", action="store_true", default=None,
                     help="allow --workers beyond the cores this process may use")
    run.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                     help='run the pieces on a Dask distributed cluster instead (pip install "dpaudit[dask]")')
    run.add_argument("--checkpoint", default=None, metavar="DIR",
                     help="record each finished piece in DIR; rerunning the same command resumes from it")
    run.add_argument("--max-hours", type=float, default=None,
                     help="refuse, before starting, an audit estimated to take longer (default 24)")
    run.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                     help="end the audit when one call into a plug-in's code (its act, observe, ...) runs longer, "
                          "naming the call (at most 1e6; default: a watchdog scaled to the calls it measured, 100 "
                          "times the slowest, at least 30 s, and 60 s before the first call returns)")
    out = c.add_argument_group("output")
    out.add_argument("--json", action="store_true",
                     help="print the findings as one JSON object (format dpaudit.audit/2; dpaudit.exact/1 for a "
                          "finite spec under table, view or interactive)")
    out.add_argument("--report", default=None, metavar="PATH.md",
                     help="also write a Markdown report (its figures as PNG files beside it) and a self-contained "
                          "HTML page beside it; not for finite specs")


def _f(x: float) -> str:
    return "inf" if isinstance(x, float) and math.isinf(x) else f"{x:.4g}"


def upper_line(up: Upper | None) -> str:
    """The ``upper`` line's text: the tightest eps dpaudit proves and how, or why there is none."""
    if up is None:
        return ""
    if up.epsilon is None:
        return f"none: {up.details.get('reason', 'nothing dpaudit can prove beyond the claim')}"
    if up.refuted:
        src = str(up.details.get("source", "policy")).split(",")[0]
        return (f"NOT A PROOF: the {src} would give eps <= {_f(up.epsilon)}, but a lower bound exceeds it: evidence "
                f"that the {src} misstates the policy (see the note)")
    return f"eps <= {_f(up.epsilon)} at delta = {up.delta:g} ({up.method})"


def print_upper(a: Findings) -> None:
    text = upper_line(getattr(a, "upper", None))
    if text:
        print(f"upper       {text}")


def print_findings(a: Findings) -> None:
    """Print an audit's typed findings, one line each, the same way for every protocol."""
    acts = a.extra.get("action_space") or f"K = {a.extra.get('n_arms', '?')}"  # BCO: points, not arms
    print(f"policy      {a.policy}  {a.params or ''}  ({acts}, T = {a.horizon}, protocol {a.protocol})")
    if a.epsilon_claimed is not None:
        print(f"claim       {a.claim_method}: eps = {a.epsilon_claimed:.4g} at delta = {a.delta:g}")
    print_upper(a)
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


def _parse_claim(text: str | None) -> Guarantee | None:
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
    from dpaudit.sandbox import check_call_timeout

    call_timeout = None if args.call_timeout is None else check_call_timeout(args.call_timeout)
    from dpaudit import cli

    bar = ProgressBar("dpaudit check", heartbeat=HEARTBEAT, start=cli.STARTED)  # the imports' seconds count too
    bar("setup: the policy loaded and probed, the audit's cost estimated")  # a stage the heartbeat can name
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
    # the command that reproduces the findings: what the user gave and the seed, never a horizon the audit chose
    # (an explicit horizon limits the search, so it would audit something else)
    result = dataclasses.replace(result, command=reproduce_command(args.policy, args.given, args.seed))
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


# ---- --protocol joint on a finite contextual spec: dpaudit.check_joint.audit_joint_finite ----------------

def check_finite_joint(args: argparse.Namespace) -> int:
    """Print the exact joint-DP audit of a finite contextual policy (through the one runner, plan
    :mod:`dpaudit.runner.joint`); exit status by verdict (0 without a claim)."""
    from dataclasses import replace

    from dpaudit.api import Audit
    from dpaudit.runner import Request, run

    a = Audit.of(run(Request(args.policy, protocol="joint", delta=args.delta, epsilon=args.epsilon, alpha=args.alpha,
                             max_work=args.max_work, command=reproduce_command(args.policy, args.given))))
    if args.protocol_note:
        a = replace(a, notes=(f"protocol joint: {args.protocol_note}.",) + tuple(a.notes))
    if args.json:
        print(json.dumps(a.to_dict(), indent=2))
        return a.exit_status
    ex, x = a.extra["exact_joint"], a.extra
    rewards = ", ".join(f"{r:g}" for r in x["rewards"])
    print(f"policy    {a.policy}  (finite contextual: T = {a.horizon}, K = {x['n_arms']}, contexts "
          f"{{{', '.join(x['contexts'])}}}, rewards {{{rewards}}})")
    print(f"protocol  joint: {x['protocol_summary']}" + (f" ({args.protocol_note})" if args.protocol_note else ""))
    print(f"method    exact enumeration: {x['sizes']['pairs']} (history, neighbouring round-t triples, future) cases "
          f"({a.parts[0].seconds:.3f} s)")
    if a.claim is not None:
        print(f"claim     {a.claim_method}: eps = {a.epsilon_claimed:.6g} at delta = {a.delta:g}")
    if a.upper is not None:
        print(f"upper     {upper_line(a.upper)}")
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
