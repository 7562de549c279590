"""Every seed 003 policy audited under ``--protocol local`` at the command line's defaults.

Equivalent to ``dpaudit check policy NAME --protocol local --workers 1`` (runs 50000, T = 48,
delta = 1e-5, confidence 0.95, seed 0; the findings do not depend on the workers) for each registered
LDP policy; records the verdict, the figures, the wall time and the CPU time of the one process (on a
machine shared with other jobs the wall time measures the contention, the CPU time the work).
Writes benchmarks/ldp_defaults.{json,md}; ``--only a,b`` re-audits those policies and keeps the other
rows of the existing benchmarks/ldp_defaults.json.

    python benchmarks/ldp_defaults.py [--only NAME,...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dpaudit.runner import check as audit_policy

POLICIES = ["ldp-ucb", "ldp-ucb-laplace", "ldp-ucb-rr", "ldp-tsallis-inf", "ldp-lilucb", "ldp-linucb", "ldp-gloc",
            "ldp-bco-fkm", "ldp-bco-2pt", "ldp-bco-scs"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="comma-separated policy names; the other rows are kept from the json")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    here = Path(__file__).parent
    kept = {}
    if only and (here / "ldp_defaults.json").exists():
        kept = {r["policy"]: r for r in json.loads((here / "ldp_defaults.json").read_text())["rows"]}
    rows = []
    workers = 1
    for name in POLICIES:
        if only is not None and name not in only:
            if name in kept:
                rows.append(kept[name])
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        out = audit_policy(name, {}, protocol="local", workers=workers)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        att = {a["attack"]: a["epsilon_lower"] for a in out["attacks"]}
        rows.append({"policy": name, "verdict": out["verdict"], "claimed": out["epsilon_claimed"],
                     "ledger": out["ledger"]["epsilon"], "exact": (out.get("exact") or {}).get("epsilon"),
                     "channel": att.get("channel"), "transcript": att.get("transcript"),
                     "central": out["central"]["epsilon_lower"], "central_verdict": out["central"]["verdict"],
                     "seconds": secs, "cpu_seconds": cpu})
        print(rows[-1], flush=True)
    (here / "ldp_defaults.json").write_text(json.dumps({"workers": workers, "rows": rows}, indent=2))
    f = (lambda x: "-" if x is None else f"{x:.4g}")
    lines = ["# Local audits at the defaults", "",
             "`python benchmarks/ldp_defaults.py` (= `dpaudit check policy NAME --protocol local --workers 1`; a 2-core "
             "machine: wall time, and CPU time, the work, which does not grow when other jobs load the machine)."
             + (f" Rows {', '.join(sorted(only))} re-recorded with `--only {args.only}` on the machine shared with "
                "other jobs; the other rows are kept from the previous run." if only else ""), "",
             "| policy | verdict | claimed eps | ledger per-user eps | exact (finite) | channel lower | transcript lower "
             "| central (Table DP) lower | wall s | CPU s |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['policy']} | {r['verdict']} | {f(r['claimed'])} | {f(r['ledger'])} | {f(r['exact'])} | "
                     f"{f(r['channel'])} | {f(r['transcript'])} | {f(r['central'])} ({r['central_verdict']}) | "
                     f"{r['seconds']:.0f} | {r['cpu_seconds']:.0f} |")
    (here / "ldp_defaults.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
