"""``dpaudit list [--mutants] [--json]``: the registered policies, bundled finite specs and mutants."""

from __future__ import annotations

import argparse
from dpaudit.cli import print_json

__all__ = ["register_cli"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list registered policies (and, with --mutants, the broken controls)",
                       description="List the registered policies by family, each with the notion its claim is about "
                       "(the protocol `dpaudit check policy` audits without --protocol: table, view, interactive, "
                       "local, joint or shuffle) and its summary, then the bundled finite specs. Every name listed "
                       "can be given to `dpaudit describe` and `dpaudit check policy`.")
    p.add_argument("--mutants", action="store_true", help="list the deliberately broken policies instead")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: {policies: [{name, family, notion, summary, mutant, class}], "
                        "finite_specs, finite_contextual_specs}")
    p.set_defaults(func=_cmd_list)


def _cmd_list(args: argparse.Namespace) -> int:
    from dpaudit.policies import registered
    from dpaudit.policies.finite import BUNDLED
    from dpaudit.policies.finite_contextual import BUNDLED_CONTEXTUAL

    entries = registered(mutants=args.mutants)
    if args.json:
        print_json({
            "policies": [{"name": e.name, "family": e.family, "notion": e.notion, "summary": e.summary,
                          "mutant": e.mutant, "class": f"{e.cls.__module__}:{e.cls.__qualname__}"} for e in entries],
            "finite_specs": [] if args.mutants else list(BUNDLED),
            "finite_contextual_specs": [] if args.mutants else list(BUNDLED_CONTEXTUAL),
        }, "dpaudit.list/1", indent=2)
        return 0
    title = "Mutants (deliberately broken policies; positive controls)" if args.mutants else "Registered policies"
    print(title + " (name, the notion its claim is about: the protocol audited by default, summary)")
    width = max([len(e.name) for e in entries] + ([len(n) for n in (*BUNDLED, *BUNDLED_CONTEXTUAL)]
                                                   if not args.mutants else []), default=4)
    family = None
    for e in entries:
        if e.family != family:
            family = e.family
            print(f"\n  [{family}]")
        print(f"  {e.name:<{width}}  {e.notion:<11}  {e.summary}")
    if not args.mutants:
        print("\n  [finite specs, bundled; exact]")
        for name in BUNDLED:
            print(f"  {name:<{width}}  {'table':<11}  decision-rule tables, format dpaudit.finite-policy/1")
        print("\n  [finite contextual specs, bundled; exact]")
        for name in BUNDLED_CONTEXTUAL:
            print(f"  {name:<{width}}  {'joint':<11}  decision-rule tables, format dpaudit.finite-contextual-policy/1")
    return 0
