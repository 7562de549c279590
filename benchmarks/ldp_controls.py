"""False alarms and detection of the local audit (``dpaudit check policy NAME --protocol local``).

Every correct seed 003 policy (Alg. 1 with UCB or Tsallis-INF, Gaussian / Laplace / randomised-
response channels) and every LDP mutant is audited with seeds 0..S-1 by
dpaudit.check_local.audit_local (ledger, channel attack, exact finite channel, transcript attack and
with --central, the central Table-DP audit; for BCO policies the point-sequence test of dpaudit.bco), K = 2
(BCO: d = 2), eps = 1, delta = 1e-5, confidence 0.95. Writes
benchmarks/ldp_controls.{json,md}.

    python benchmarks/ldp_controls.py [--seeds 50] [--runs 10000] [--horizon 24]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from functools import partial

from dpaudit.runner import check

audit_local = partial(check, protocol="local")

CORRECT = ["ldp-ucb", "ldp-ucb-laplace", "ldp-ucb-rr", "ldp-tsallis-inf", "ldp-bco-fkm", "ldp-bco-2pt",
           "ldp-bco-scs"]
MUTANTS = ["mutant-ldp-sqrt2-noise", "mutant-ldp-half-sensitivity", "mutant-ldp-peek", "mutant-bco-fkm-half-sensitivity",
           "mutant-bco-2pt-half-gap", "mutant-bco-fkm-peek"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--horizon", type=int, default=24)
    ap.add_argument("--only", default=None, help="comma-separated policy names (default: all)")
    ap.add_argument("--out", default="ldp_controls", help="output name in benchmarks/ (default ldp_controls)")
    ap.add_argument("--central", action="store_true", help="also run the central Table-DP audit in every audit")
    args = ap.parse_args()
    rows = []
    for name in CORRECT + MUTANTS:
        if args.only and name not in args.only.split(","):
            continue
        verdicts, lowers, why, secs, parts = [], [], {}, [], {}
        for s in range(args.seeds):
            t0 = time.perf_counter()
            out = audit_local(name, {}, runs=args.runs, horizon=args.horizon, seed=s, central=args.central)
            secs.append(time.perf_counter() - t0)
            verdicts.append(out["verdict"])
            lowers.append(out["epsilon_lower"])
            claimed = out["epsilon_claimed"]
            for a in out["attacks"]:
                if a["epsilon_lower"] > claimed:
                    parts[a["attack"]] = parts.get(a["attack"], 0) + 1
            if (out.get("ledger") or {}).get("epsilon", 0) > claimed * (1 + 1e-12):
                parts["ledger"] = parts.get("ledger", 0) + 1
            if out.get("central") and out["central"]["epsilon_lower"] > claimed:
                parts["central"] = parts.get("central", 0) + 1
            if out["verdict"] == "violation":
                key = out["reason"].split(" exceeds")[0].split(" (")[0]
                key = key.split("'s")[0].replace("the ", "")
                why[key] = why.get(key, 0) + 1
        rows.append({"policy": name, "mutant": name in MUTANTS, "claimed": out["epsilon_claimed"],
                     "ledger_epsilon": (out.get("ledger") or {}).get("epsilon"), "violations": verdicts.count("violation"),
                     "seeds": args.seeds, "median_lower": statistics.median(lowers), "max_lower": max(lowers),
                     "flagged_by": why, "exceeded_by": parts, "median_seconds": statistics.median(secs)})
        print(rows[-1], flush=True)
    here = Path(__file__).parent
    (here / f"{args.out}.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    lines = ["# Local audit: false alarms and detection", "",
             f"`python benchmarks/ldp_controls.py --seeds {args.seeds} --runs {args.runs} --horizon {args.horizon}"
             + (" --central" if args.central else "") + (f" --only {args.only}" if args.only else "")
             + (f" --out {args.out}" if args.out != "ldp_controls" else "") + "` "
             "(K = 2; BCO: d = 2; eps = 1, delta = 1e-5, confidence 0.95; " + ("with" if args.central else "without")
             + " the central Table-DP part; 2-core machine shared with other jobs).", "",
             "| policy | claimed eps | ledger per-user eps | violations | median best lower bound | max | "
             "part above the claim (seeds) | median s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        by = ", ".join(f"{k} {v}" for k, v in r["exceeded_by"].items()) or "-"
        lines.append(f"| {r['policy']} | {r['claimed']:.4g} | {r['ledger_epsilon']:.4g} | {r['violations']}/{r['seeds']} | "
                     f"{r['median_lower']:.4g} | {r['max_lower']:.4g} | {by} | {r['median_seconds']:.1f} |")
    (here / f"{args.out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
