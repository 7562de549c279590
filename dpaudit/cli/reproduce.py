"""``dpaudit reproduce NAME``: re-derive a source paper's numbers (the reproductions are in :mod:`dpaudit.reproduce`)."""

from __future__ import annotations

import argparse
import importlib

from dpaudit.errors import DPAuditError, check_int, check_output_folder
from dpaudit.reproduce import EXACT, EXPERIMENTS, OUTPUTS

__all__ = ["register_cli"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a result of one of the papers dpaudit implements",
                       description="Reproduce a result of one of the papers dpaudit implements. Experiments: "
                       + "; ".join(f"{k}: {v[1]}" for k, v in EXPERIMENTS.items()))
    p.add_argument("experiment", metavar="EXPERIMENT", help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--out", default=None, help="folder for figures and tables (default: reports; checked before the "
                                                "run)")
    p.add_argument("--seed", type=int, default=None, help="seed of every random draw, an integer >= 0 (default 0)")
    p.add_argument("--quick", action="store_true", default=None, help="a smaller grid, for smoke tests")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.experiment not in EXPERIMENTS:
        import difflib

        close = difflib.get_close_matches(args.experiment, list(EXPERIMENTS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DPAuditError(f"unknown experiment {args.experiment!r}.{hint} Choose one of: {', '.join(EXPERIMENTS)}.")
    check_options(args)
    target = EXPERIMENTS[args.experiment][0]
    module, _, func = target.partition(":")
    return int(getattr(importlib.import_module(module), func)(args) or 0)


def check_options(args: argparse.Namespace) -> None:
    """Before the experiment runs: refuse the options it has no use for, check the seed and the output
    folder (and the files it will write there), then fill in the defaults."""
    name = args.experiment
    if name in EXACT:
        given = [flag for flag, value in (("--out", args.out), ("--seed", args.seed), ("--quick", args.quick))
                 if value is not None]
        if given:
            raise DPAuditError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to {name}: "
                               f"{EXACT[name]}; drop {'it' if len(given) == 1 else 'them'}.")
    args.seed = 0 if args.seed is None else check_int("--seed", args.seed, minimum=0)
    args.quick = bool(args.quick)
    if name in OUTPUTS:
        args.out = str(check_output_folder("reports" if args.out is None else args.out, "the figures and tables",
                                           OUTPUTS[name]))
