"""False alarms and detection of the joint-DP and shuffle-DP audits (issue 13).

Every correct policy and every mutant is audited with ``--seed s`` for s = 0..S-1. A ``violation`` of a
correct policy is a false alarm (allowed rate: 1 - confidence = 5%); a mutant must be flagged.

Settings (smaller than the CLI defaults so that the table fits in minutes on 2 cores): joint audits
with K = 2, d = 2, T = 8 (T = 16 for the switching mutant, whose extra updates need a few more
rounds), 2,000 fresh runs per side; delta = 1e-5, confidence 0.95. The shuffle-DP controls moved to
shuffle_controls.py (50 seeds; the code below still runs a shuffle case if one is added to CASES).

Run:  python benchmarks/joint_controls.py [--seeds 10]   (writes joint_controls.md and .json here)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from dpaudit.attacks.bounds import cp_upper
from functools import partial

from dpaudit.runner import check

audit_joint = partial(check, protocol="joint")
audit_shuffle = partial(check, protocol="shuffle")

HERE = Path(__file__).resolve().parent
JOINT = {"n_arms": "2", "dim": "2"}
SHUFFLE = {"n_arms": "2", "dim": "1"}
CASES = [
    # (label, policy, protocol, params, horizon, correct?)
    ("jdp-glm", "jdp-glm", "joint", JOINT, 8, True),
    ("jdp-glm, probit", "jdp-glm", "joint", {**JOINT, "link": "probit"}, 8, True),
    ("tree reuses a node's noise", "mutant-tree-reused-noise", "joint", JOINT, 8, False),
    ("tree without leaf noise", "mutant-tree-no-leaf-noise", "joint", JOINT, 8, False),
    ("switching on the current noisy det", "mutant-noisy-det-switch", "joint", JOINT, 16, False),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    rows = []
    for label, name, proto, params, horizon, correct in CASES:
        t0 = time.perf_counter()
        outs = []
        for s in range(args.seeds):
            if proto == "joint":
                outs.append(audit_joint(name, params, runs=2000, horizon=horizon, seed=s))
            else:
                outs.append(audit_shuffle(name, params, runs=3000, seed=s))
        flagged = sum(o["verdict"] == "violation" for o in outs)
        inconclusive = sum(o["verdict"] == "inconclusive" for o in outs)
        rows.append({
            "case": label, "policy": name, "protocol": proto, "correct": correct, "seeds": args.seeds,
            "claimed_eps": outs[0]["epsilon_claimed"], "flagged": flagged, "inconclusive": inconclusive,
            "flag_rate_upper95": float(cp_upper(flagged, args.seeds, 0.05)),
            "median_lower": statistics.median(o["epsilon_lower"] for o in outs),
            "by": sorted({o["witness"]["attack"] for o in outs if o["verdict"] == "violation"}),
            "seconds_per_audit": (time.perf_counter() - t0) / args.seeds,
        })
        print(rows[-1], flush=True)
    lines = ["# Joint-DP and shuffle-DP audits: false alarms and detection", "",
             f"`python benchmarks/joint_controls.py --seeds {args.seeds}` (seeds 0..{args.seeds - 1}; settings in the "
             "script's docstring; measured on a shared 2-core machine).", "",
             "| case | protocol | claimed eps | flagged | inconclusive | median lower bound | flagged by | s per audit |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in rows:
        lines.append(f"| {r['case']}{'' if r['correct'] else ' (mutant)'} | {r['protocol']} | {r['claimed_eps']:.4g} | "
                     f"{r['flagged']}/{r['seeds']} | {r['inconclusive']}/{r['seeds']} | {r['median_lower']:.4g} | {', '.join(r['by']) or '-'} | "
                     f"{r['seconds_per_audit']:.1f} |")
    (HERE / "joint_controls.md").write_text("\n".join(lines) + "\n")
    (HERE / "joint_controls.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
