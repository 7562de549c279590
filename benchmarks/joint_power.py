"""The power of the joint audit's black-box attack (on a_{t+1}..a_T) against jdp-glm and its mutants (issue 13).

For each policy at its defaults (K = 20, d = 5, eps = 4): the membership attack exactly as
``audit_joint`` runs it (fit, select, count on fresh runs; Clopper-Pearson at 95%), once at the audit's
horizon T = 16 with all its pairs (the audit's and the PGD read-out pair) and 20,000 fresh runs per
side, and once at T = 256 with the read-out pair alone (``dpaudit.check_joint.readout_pairs``), where
Criterion II has fired in most runs, with ``--runs`` fresh runs per side (fit/selection 2,000 each).
Times are wall clock on the shared 2-core machine (other jobs running).

Run:  python benchmarks/joint_power.py [--runs 10000]   (writes joint_power.md and .json here)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dpaudit.check_joint import membership_only

HERE = Path(__file__).resolve().parent
POLICIES = ["jdp-glm", "mutant-tree-reused-noise", "mutant-tree-no-leaf-noise", "mutant-noisy-det-switch"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--long", type=int, default=256)
    args = ap.parse_args()
    rows = []
    settings = [(16, "all", 20000, None), (args.long, "readout", args.runs, 2000)]
    for name in POLICIES:
        for T, pairs, runs, fit in settings:
            t0 = time.perf_counter()
            a = membership_only(name, {}, horizon=T, pairs=pairs, runs=runs, fit=fit, seed=0)
            d = a["details"]
            rows.append({"policy": name, "horizon": T, "pairs": pairs, "runs": runs, "epsilon_lower": a["epsilon_lower"],
                         "pair": a["witness"]["label"], "statistic": a["witness"]["statistic"], "fpr": d["fpr"],
                         "fnr": d["fnr"], "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
            (HERE / "joint_power.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["# The black-box joint attack's power on jdp-glm and its mutants", "",
             f"`python benchmarks/joint_power.py --runs {args.runs} --long {args.long}` (seed 0; claimed eps = 4 at "
             "delta = 1e-5 for every policy; shared 2-core machine, other jobs running).", "",
             "| policy | T | pairs | fresh runs per side | membership lower bound | witness pair | statistic | FPR | FNR | wall s |",
             "| --- | ---: | --- | ---: | ---: | --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['policy']} | {r['horizon']} | {r['pairs']} | {r['runs']} | {r['epsilon_lower']:.4g} | "
                     f"{r['pair']} | {r['statistic']} | {r['fpr']:.4f} | {r['fnr']:.4f} | {r['seconds']:.0f} |")
    (HERE / "joint_power.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
