"""``dpaudit reproduce NAME``: re-derive a source paper's numbers (the reproductions are in :mod:`dpaudit.reproduce`)."""

from __future__ import annotations

import argparse
import importlib

from dpaudit.errors import DPAuditError
from dpaudit.reproduce import EXPERIMENTS

__all__ = ["register_cli"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a result of one of the papers dpaudit implements",
                       description="Reproduce a result of one of the papers dpaudit implements. Experiments: "
                       + "; ".join(f"{k}: {v[1]}" for k, v in EXPERIMENTS.items()))
    p.add_argument("experiment", metavar="EXPERIMENT", help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--out", default="reports", help="folder for figures and tables (default: reports)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    p.add_argument("--quick", action="store_true", help="a smaller grid, for smoke tests")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.experiment not in EXPERIMENTS:
        import difflib

        close = difflib.get_close_matches(args.experiment, list(EXPERIMENTS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DPAuditError(f"unknown experiment {args.experiment!r}.{hint} Choose one of: {', '.join(EXPERIMENTS)}.")
    target = EXPERIMENTS[args.experiment][0]
    module, _, func = target.partition(":")
    return int(getattr(importlib.import_module(module), func)(args) or 0)
