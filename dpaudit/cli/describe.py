"""``dpaudit describe POLICY [--json]``: a policy's parameters with their defaults, its claim, and the
paper and algorithm it follows, with full references (the work is in :func:`dpaudit.api.describe`)."""

from __future__ import annotations

import argparse

from dpaudit.cli import print_json

__all__ = ["register_cli"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("describe", help="a policy's parameters, defaults, claim, notion and the paper it follows",
                       description="Describe a policy: its constructor parameters with their types and defaults "
                       "(what --param NAME=VALUE accepts), its claim at the defaults, the notion its claim is about "
                       "(the protocol `dpaudit check policy` audits without --protocol), and the paper (authors, "
                       "year), algorithm and equations its docstring names, with the papers' full references "
                       "(authors, title, year). A finite policy spec shows its format, sizes, description and claim.")
    p.add_argument("policy", metavar="POLICY",
                   help="a registered name or bundled finite spec (see `dpaudit list`), a finite spec file.json, "
                        "path/to/file.py:ClassName or package.module:ClassName")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from dpaudit.api import describe

    d = describe(args.policy)
    if args.json:
        print_json(d, "dpaudit.describe/1", indent=2, default=str)
        return 0
    print(f"policy      {d['policy']}" + (f"  ({d['class']})" if d["class"] != d["policy"] else ""))
    if d["registered_as"]:
        print(f"registered  {d['registered_as']} (family {d['family']}{', mutant' if d['mutant'] else ''})")
    elif d["family"]:
        print(f"kind        {d['family']}")
    print(f"notion      {d['notion']}: {d['notion_note']}")
    print(f"            (`dpaudit check policy` audits it under --protocol {d['notion']} unless told otherwise)")
    print(f"summary     {d['summary']}")
    for i, src in enumerate(d["follows"] or ["(the docstring names no paper or algorithm)"]):
        print(f"{'follows' if i == 0 else '':<11} {src}")
    for i, ref in enumerate(d["papers"]):
        print(f"{'papers' if i == 0 else '':<11} {ref}")
    print(f"claim       {d['claim'] or 'none'}" + (f"  ({d['claim_note']})" if d["claim_note"] else ""))
    print(f"ledger      {'yes (dpaudit mechanisms: gray-box and black-box attacks)' if d['has_ledger'] else 'no (black-box attack only)'}")
    if not d["parameters"]:
        return 0
    print("parameters  (--param NAME=VALUE)")
    width = max((len(p["name"]) for p in d["parameters"]), default=4)
    for p in d["parameters"]:
        default = "required" if p["required"] else f"default {p['default']!r}"
        print(f"  {p['name']:<{width}}  {p['type'] or 'any':<6} {default}")
    return 0
