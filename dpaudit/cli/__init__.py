"""The ``dpaudit`` command line.

One module per command in this package (argument parsing and printing only; the work is in the
library modules), each registering itself through ``register_cli(subparsers)`` (add it to
``COMMAND_MODULES``); a registered command sets ``func`` to a callable ``args -> exit status``. Bad input raises :class:`DPAuditError`, which
is printed as one sentence with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from dpaudit import __version__
from dpaudit.errors import DPAuditError

COMMAND_MODULES = [
    "dpaudit.cli.list",
    "dpaudit.cli.check",
    "dpaudit.cli.reproduce",
    "dpaudit.cli.account",
    "dpaudit.cli.regret",
    "dpaudit.cli.describe",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpaudit",
        description="Audit differentially private bandit algorithms: what they claim and what they leak.",
    )
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
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
