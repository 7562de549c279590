"""The ``dpaudit`` command line.

Each command lives in the module that does its work and registers itself through a
``register_cli(subparsers)`` function (add the module to ``COMMAND_MODULES``); a registered command
sets ``func`` to a callable ``args -> exit status``. Bad input raises :class:`DPAuditError`, which
is printed as one sentence with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from dpaudit import __version__
from dpaudit.accountants.errors import DPAuditError

COMMAND_MODULES = [
    "dpaudit.check",
    "dpaudit.reproduce",
    "dpaudit.account",
    "dpaudit.simulate",
]


def _cmd_list(args: argparse.Namespace) -> int:
    from dpaudit.policies import registered
    from dpaudit.policies.finite import BUNDLED

    entries = registered(mutants=args.mutants)
    title = "Mutants (deliberately broken policies; positive controls)" if args.mutants else "Registered policies"
    print(title)
    width = max((len(e.name) for e in entries), default=4)
    family = None
    for e in entries:
        if e.family != family:
            family = e.family
            print(f"\n  [{family}]")
        print(f"  {e.name:<{width}}  {e.summary}")
    if not args.mutants:
        print("\n  [finite specs, bundled]")
        for name in BUNDLED:
            print(f"  {name:<{width}}  decision-rule tables, format dpaudit.finite-policy/1")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpaudit",
        description="Audit differentially private bandit algorithms: what they claim and what they leak.",
    )
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("list", help="list registered policies (and, with --mutants, the broken controls)")
    p.add_argument("--mutants", action="store_true", help="list the deliberately broken policies")
    p.set_defaults(func=_cmd_list)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register_cli(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from dpaudit.engine import one_blas_thread

    try:
        with one_blas_thread():
            return int(args.func(args) or 0)
    except DPAuditError as exc:
        print(f"dpaudit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dpaudit: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
