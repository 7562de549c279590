"""``dpaudit check policy``: what a policy claims against what it leaks, as one command.

Finite policies (a ``dpaudit.finite-policy/1`` JSON spec, or a bundled spec name) are audited
exactly by enumeration (:mod:`dpaudit.attacks.exact`): delta at ``--epsilon``, epsilon at
``--delta``, the Rényi divergence of order ``--alpha``, each with its witness, under the chosen
protocol. Registered policies and plug-ins go through the sampling attacks and the verdict.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from dpaudit.accountants.errors import DPAuditError

__all__ = ["register_cli", "is_finite_spec", "check_finite"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="audit a policy: its claim, what attacks measure, and a verdict")
    what = p.add_subparsers(dest="what", metavar="WHAT")
    what.required = True
    c = what.add_parser(
        "policy",
        help="audit one policy",
        description="Audit a policy. POLICY is a finite-policy JSON spec (or a bundled spec such as "
        "seed001-counterexample), a registered name (see `dpaudit list`), or a plug-in "
        "path/to/file.py:ClassName or package.module:ClassName.",
    )
    c.add_argument("policy", metavar="POLICY")
    c.add_argument("--protocol", choices=["table", "view", "interactive"], default="table",
                   help="privacy definition (seed 001 Sec. III; default: table)")
    c.add_argument("--epsilon", type=float, default=1.0, help="evaluate delta(epsilon) here (default 1)")
    c.add_argument("--delta", type=float, default=1e-5, help="report the smallest epsilon at this delta (default 1e-5)")
    c.add_argument("--alpha", type=float, default=2.0, help="Rényi order to report (default 2; 'inf' allowed)")
    c.add_argument("--max-work", type=float, default=None,
                   help="ceiling on elementary operations of an exact enumeration (default 2e9)")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    _add_named_options(c)
    c.set_defaults(func=_run)


def is_finite_spec(spec: str) -> bool:
    from dpaudit.policies.finite import BUNDLED

    return spec in BUNDLED or spec.endswith(".json")


def _run(args: argparse.Namespace) -> int:
    if is_finite_spec(args.policy):
        return check_finite(args)
    return _check_named(args)


def _check_named(args: argparse.Namespace) -> int:
    from dpaudit.check_named import check_named

    return check_named(args)


def _add_named_options(c: argparse.ArgumentParser) -> None:
    from dpaudit.check_named import add_named_options

    add_named_options(c)


def _progress_printer(unit: str):
    """A progress callback that redraws one stderr line, only when stderr is a terminal."""
    import sys
    import time

    start = time.perf_counter()

    def show(done: int, total: int) -> None:
        if not sys.stderr.isatty() or total <= 1 or time.perf_counter() - start < 1.0:
            return
        end = "\n" if done >= total else ""
        print(f"\r  {done}/{total} {unit} ({100 * done / total:.0f}%)", end=end, file=sys.stderr, flush=True)

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
        print(json.dumps(jsonable(out), indent=2))
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
