"""Every joint-DP / shuffle-DP policy and mutant audited at its defaults, as the CLI runs it (issue 13).

Equivalent to ``dpaudit check policy NAME --protocol joint|shuffle`` with every default (delta 1e-5,
confidence 0.95, seed 0, --runs 50000 capped by the audit at 20000 (joint) / 40000 (shuffle) fresh
runs per side, joint horizon 16), timed end to end on the shared 2-core machine (wall clock, and this process's CPU time: the
audit runs in one process, so the CPU time is what it costs on an idle core).

Run:  python benchmarks/joint_defaults.py [--protocol joint|shuffle]   (writes joint_defaults.md and .json here;
with --protocol, only that protocol's rows are re-measured and the others are kept from the .json)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from dpaudit.runner import check as audit_policy

HERE = Path(__file__).resolve().parent
CASES = [("jdp-glm", "joint"), ("shuffle-glm", "shuffle"), ("mutant-tree-reused-noise", "joint"),
         ("mutant-tree-no-leaf-noise", "joint"), ("mutant-noisy-det-switch", "joint"),
         ("mutant-shuffle-arrival-order", "shuffle")]


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--protocol", choices=["joint", "shuffle"], default=None)
    only = ap.parse_args().protocol
    old = {}
    if only is not None and (HERE / "joint_defaults.json").exists():
        old = {(r["policy"], r["protocol"]): r for r in json.loads((HERE / "joint_defaults.json").read_text())}
    rows = []
    for name, proto in CASES:
        if only is not None and proto != only and (name, proto) in old:
            rows.append(old[(name, proto)])
            continue
        t0, c0 = time.perf_counter(), time.process_time()
        out = audit_policy(name, {}, protocol=proto, runs=50000)
        rows.append({"policy": name, "protocol": proto, "claimed_eps": out["epsilon_claimed"],
                     "epsilon_lower": out["epsilon_lower"], "by": out["witness"]["attack"], "verdict": out["verdict"],
                     "central": (out.get("central") or {}).get("epsilon_lower"),
                     "ledger_epsilon": (out.get("ledger") or {}).get("implied_epsilon"),
                     "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0})
        print(rows[-1], flush=True)
    lines = ["# Joint-DP and shuffle-DP audits at the defaults", "",
             "`python benchmarks/joint_defaults.py` (the CLI's defaults; shared 2-core machine, other jobs running)."
             + (f" The {only} rows were re-measured with `--protocol {only}`; the others are kept from the last full run."
                if only is not None else ""), "",
             "| policy | protocol | claimed eps | best lower bound | by | central view a_t..a_T | verdict | wall s | CPU s |",
             "| --- | --- | ---: | ---: | --- | ---: | --- | ---: | ---: |"]
    for r in rows:
        c = "-" if r["central"] is None else f"{r['central']:.3g}"
        lines.append(f"| {r['policy']} | {r['protocol']} | {r['claimed_eps']:.4g} | {r['epsilon_lower']:.4g} | {r['by']} | "
                     f"{c} | {r['verdict']} | {r['seconds']:.0f} | {r['cpu_seconds']:.0f} |")
    (HERE / "joint_defaults.md").write_text("\n".join(lines) + "\n")
    (HERE / "joint_defaults.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
