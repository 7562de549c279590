"""False alarms, power and detection of the shuffle-DP audit (issue 13; split from joint_controls.py).

Each case is audited with ``--seed s`` for s = 0..S-1 (``audit_shuffle``, as ``dpaudit check policy NAME
--protocol shuffle --seed s``). A ``violation`` of the correct policy is a false alarm (allowed rate:
1 - confidence = 5%); ``inconclusive`` counts the audits without power; a mutant must be flagged.

Settings: the policies' defaults (eps0 = 3.5 per message, first batch of 1,000 users, claim (3.62, 1e-5))
with d = 1 and K = 2 (the arrival-order mutant's own defaults), so that one audit costs seconds;
6,000 fresh runs per side for shuffle-glm, 2,000 for the mutant; delta = 1e-5, confidence 0.95.
The last case is the d = 5 defaults as the CLI runs them (40,000 fresh runs per side, 5 seeds: a minute
each).

Run:  python benchmarks/shuffle_controls.py [--seeds 50] [--only LABEL]   (writes shuffle_controls.md and .json
here; with --only, that case is re-measured and the others are kept from the .json)
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

audit_shuffle = partial(check, protocol="shuffle")

HERE = Path(__file__).resolve().parent
SHUFFLE = {"n_arms": "2", "dim": "1"}
CASES = [
    # (label, policy, params, fresh runs per side, correct?, seeds (None: --seeds))
    ("shuffle-glm", "shuffle-glm", SHUFFLE, 6000, True, None),
    ("shuffler keeps arrival order", "mutant-shuffle-arrival-order", SHUFFLE, 2000, False, None),
    ("shuffle-glm at its defaults (d = 5, K = 20)", "shuffle-glm", {}, 40000, True, 5),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--only", default=None, help="re-measure only the case with this label")
    args = ap.parse_args()
    old = {}
    if args.only is not None and (HERE / "shuffle_controls.json").exists():
        old = {r["case"]: r for r in json.loads((HERE / "shuffle_controls.json").read_text())}
    rows = []
    for label, name, params, runs, correct, n_seeds in CASES:
        if args.only is not None and label != args.only:
            if label in old:
                rows.append(old[label])
            continue
        seeds = n_seeds or args.seeds
        t0, c0 = time.perf_counter(), time.process_time()
        outs = [audit_shuffle(name, params, runs=runs, seed=s) for s in range(seeds)]
        flagged = sum(o["verdict"] == "violation" for o in outs)
        inconclusive = sum(o["verdict"] == "inconclusive" for o in outs)
        lows = [o["epsilon_lower"] for o in outs]
        rows.append({
            "case": label, "policy": name, "correct": correct, "seeds": seeds, "runs": runs,
            "claimed_eps": outs[0]["epsilon_claimed"], "flagged": flagged, "inconclusive": inconclusive,
            "flag_rate_upper95": float(cp_upper(flagged, seeds, 0.05)),
            "median_lower": statistics.median(lows), "min_lower": min(lows), "max_lower": max(lows),
            "smallest_detectable": outs[0]["power"]["smallest_detectable"],
            "by": sorted({o["witness"]["features"] for o in outs if o["verdict"] == "violation"}),
            "seconds_per_audit": (time.perf_counter() - t0) / seeds,
            "cpu_seconds_per_audit": (time.process_time() - c0) / seeds,
        })
        print(rows[-1], flush=True)
    lines = ["# Shuffle-DP audit: false alarms, power and detection", "",
             f"`python benchmarks/shuffle_controls.py --seeds {args.seeds}` (seeds 0..S-1, S in the table; settings in "
             "the script's docstring; measured on a shared 2-core machine with other jobs running)."
             + (f" Re-measured with `--only '{args.only}'`; the other rows are kept from the last run." if args.only else ""),
             "",
             "| case | claimed eps | fresh runs per side | flagged | inconclusive | lower bound: median (min-max) | "
             "flagged by (features) | s per audit (CPU) |",
             "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for r in rows:
        lines.append(f"| {r['case']}{'' if r['correct'] else ' (mutant)'} | {r['claimed_eps']:.4g} | {r['runs']} | "
                     f"{r['flagged']}/{r['seeds']} | {r['inconclusive']}/{r['seeds']} | {r['median_lower']:.3g} "
                     f"({r['min_lower']:.3g}-{r['max_lower']:.3g}) | {', '.join(r['by']) or '-'} | "
                     f"{r['seconds_per_audit']:.1f} ({r['cpu_seconds_per_audit']:.1f}) |")
    (HERE / "shuffle_controls.md").write_text("\n".join(lines) + "\n")
    (HERE / "shuffle_controls.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
