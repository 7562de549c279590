"""Where the time of the two greedy per-run audits goes, and whether a futility stop could cut it.

``tests/thirdparty/greedy.py``'s ``TreeCounterGreedy`` (correct) and ``DoubleDividedGreedy`` (buggy) are the two
per-run audits of ``benchmarks/speed/defaults.py --thirdparty`` over 2 minutes. Three measurements:

1. **Per-step cost**: the class's own Python (one object driven through ``step``, global ``np.random`` seeded per
   run, no dpaudit) against the audit's path for the same runs (:class:`dpaudit.protocols.TableDP`'s ``run`` of
   the per-run adapter, as every pilot and fresh chunk calls it), CPU seconds per run-round, median of
   ``--reps`` alternating repetitions. What is left between them is dpaudit's own overhead per step.
2. **Phases**: from the findings of a ``dpaudit check policy ... --json`` run of each class (``--findings``): each
   part's seconds and the run-rounds it sampled (threshold search, search, horizon sweep, fresh test).
3. **Futility**: for the fresh membership test of a findings file whose bound is 0 (``TreeCounterGreedy``), the
   counts expected at each look of :data:`dpaudit.attacks.sampling.LOOKS` at the test's measured error rates, and
   at each the upper confidence limit of the bound the whole planned sample could show: the Clopper-Pearson lower
   limits of both error rates (two-sided at ``alpha``; :meth:`dpaudit.attacks.sampling.Stop.optimistic`'s
   rates) scaled to the planned size and bounded as the last look bounds them. A futility stop that never cuts
   the reported bound below what the whole sample could show (at error ``alpha``) may stop only where that
   limit is 0.

Run:  python benchmarks/speed/greedy_costs.py --findings tcg.json ddg.json [--reps 3] [--out greedy_costs]
      (each findings file from ``dpaudit check policy tests/thirdparty/greedy.py:CLASS --protocol table --seed 0
      --json --adapter per-run --param n_arms=2 --claim pure:eps=1``); writes greedy_costs.md and .json in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository
RESULTS = ROOT / "benchmarks" / "results"
GREEDY = ROOT / "tests" / "thirdparty"


def class_alone(cls: type, rows: list[list[float]], n: int) -> float:
    """CPU seconds of ``n`` runs of ``cls`` driven by hand on the reward table ``rows`` (no dpaudit)."""
    t0 = time.process_time()
    T = len(rows)
    for i in range(n):
        np.random.seed(i)
        o = cls(n_arms=2, epsilon=1.0, horizon=T)
        a = r = None
        for t in range(T):
            a = o.step(a, r)
            r = rows[t][a]
    return time.process_time() - t0


def audit_path(cls: type, d: np.ndarray, n: int, seed: int) -> float:
    """CPU seconds of the same number of runs through the per-run adapter and the protocol's ``run``."""
    from dpaudit.adapters import PerRun
    from dpaudit.protocols import TableDP

    proto = TableDP()
    p = PerRun(cls, {"n_arms": 2, "horizon": len(d)}, "pure:eps=1")
    proto.run(p, d, 20, np.random.default_rng(seed), None, record=False)  # warm: imports, caches
    t0 = time.process_time()
    proto.run(p, d, n, np.random.default_rng(seed), None, record=False)
    return time.process_time() - t0


def per_step(reps: int) -> list[dict]:
    from dpaudit.protocols import PairSpec, TableDP, make_pair

    sys.path.insert(0, str(GREEDY))
    import greedy  # noqa: E402  (tests/thirdparty/greedy.py)

    rows = []
    for name in ("TreeCounterGreedy", "DoubleDividedGreedy"):
        cls = getattr(greedy, name)
        for T, n in ((48, 1500), (384, 200), (768, 100)):
            d = make_pair(PairSpec(1, "mid"), TableDP(), 2, T, (0.0, 1.0)).d0
            table = d.tolist()
            alone, adapted = [], []
            for k in range(reps):
                alone.append(class_alone(cls, table, n) / (n * T))
                adapted.append(audit_path(cls, d, n, k) / (n * T))
            a, b = statistics.median(alone), statistics.median(adapted)
            rows.append({"class": name, "T": T, "runs": n, "class_alone_us_per_step": a * 1e6,
                         "audit_path_us_per_step": b * 1e6, "overhead": b / a - 1,
                         "alone_all": [x * 1e6 for x in alone], "audit_all": [x * 1e6 for x in adapted]})
    return rows


def run_rounds(f: dict) -> dict[str, float]:
    """Run-rounds each phase sampled, from the findings (threshold search, horizon sweep, fresh test)."""
    out: dict[str, float] = {}
    ts = f.get("threshold_search") or {}
    from dpaudit.runner.cost import THRESHOLD_CELLS

    out["threshold search"] = float(sum(THRESHOLD_CELLS * int(r["horizon"]) for r in ts.get("tried", [])
                                        if "skipped" not in r))
    sweep = f.get("horizon_sweep") or []
    out["horizon sweep"] = float(sum(4 * 500 * int(r["horizon"]) for r in sweep))
    mem = next((a for a in f.get("attacks", []) if a["attack"] == "membership"), None)
    if mem is not None:
        out["fresh test"] = float(2 * int(mem["details"]["n_fresh_per_side"]) * int(f["horizon"]))
    return out


def futility(f: dict, alphas: tuple[float, ...]) -> list[dict]:
    from dpaudit.attacks.bounds import cp_lower
    from dpaudit.attacks.sampling import LOOKS, Stop

    mem = next(a for a in f["attacks"] if a["attack"] == "membership")
    det = mem["details"]
    n, fp, fn = int(det["n_fresh_per_side"]), int(det["false_positives"]), int(det["false_negatives"])
    planned = int(det["fresh_runs_planned"])
    stop = Stop(float(f["delta"]), float(mem["confidence"]), float(f["epsilon_claimed"]), 1)
    fpr, fnr = fp / n, fn / n
    out = []
    for frac, share in LOOKS[:-1]:
        m = max(1, math.ceil(frac * planned))
        efp, efn = round(fpr * m), round(fnr * m)  # the counts expected at this look at the measured rates
        row = {"look_runs_per_side": m, "expected_false_positives": efp, "expected_false_negatives": efn,
               "bound_at_look": stop.bound(efp, m - efn, m, share),
               "existing_rule_futile": stop.futile(efp, m - efn, m, planned, share),
               "projected_at_rates": stop.projected(efp, m - efn, m, planned)}
        for a in alphas:
            lo_fpr = max(float(cp_lower(efp, m, a / 2)), 0.0)
            lo_fnr = max(float(cp_lower(efn, m, a / 2)), 0.0)
            row[f"full_sample_upper_limit_alpha_{a:g}"] = stop.bound(round(lo_fpr * planned),
                                                                      planned - round(lo_fnr * planned), planned,
                                                                      LOOKS[-1][1])
        out.append(row)
    return out


def markdown(res: dict) -> str:
    L = ["# Where the greedy per-run audits spend their time", "",
         f"Generated by `python benchmarks/speed/greedy_costs.py {res['args']}` (load average {res['load']}; CPU seconds, "
         "medians of the repetitions).", "",
         "## Per-step cost: the class alone against the audit's path", "",
         "| class | T | runs | class alone us/step | audit path us/step | dpaudit overhead |",
         "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in res["per_step"]:
        L.append(f"| {r['class']} | {r['T']} | {r['runs']} | {r['class_alone_us_per_step']:.1f} | "
                 f"{r['audit_path_us_per_step']:.1f} | {100 * r['overhead']:+.0f}% |")
    for f in res["findings"]:
        L += ["", f"## {f['policy']}: {f['verdict']}, bound {f['epsilon_lower']:.4g}, T = {f['horizon']}", "",
              f"Findings from `{f['file']}` (wall {f['seconds']:.1f} s in all).", "",
              "| phase | seconds | run-rounds |", "| --- | ---: | ---: |"]
        rr = f["run_rounds"]
        for p in f["parts"]:
            key = {"threshold search": "threshold search", "horizon sweep": "horizon sweep",
                   "membership": "fresh test"}.get(p["name"])
            L.append(f"| {p['name']} | {p['seconds']:.1f} | {rr[key]:.3g} |" if key in rr else
                     f"| {p['name']} | {p['seconds']:.1f} | - |")
        if f.get("futility"):
            alphas = [k for k in f["futility"][0] if k.startswith("full_sample_upper_limit")]
            L += ["", "Futility of the fresh test (its bound is 0): at each look's expected counts, the existing rule "
                  "and the upper confidence limit of the bound all the planned runs could show (the error rates at "
                  "their Clopper-Pearson lower limits, scaled to the planned size). A stop that never cuts the bound "
                  "below what the whole sample could show needs that limit to be 0.", "",
                  "| look: runs/side | expected FP | expected FN | bound at look | existing rule stops | projected at "
                  "the rates | " + " | ".join("limit, alpha " + k.rsplit("_", 1)[1] for k in alphas) + " |",
                  "| ---: | ---: | ---: | ---: | --- | ---: | " + " | ".join("---:" for _ in alphas) + " |"]
            for r in f["futility"]:
                L.append(f"| {r['look_runs_per_side']} | {r['expected_false_positives']} | "
                         f"{r['expected_false_negatives']} | {r['bound_at_look']:.3g} | {r['existing_rule_futile']} | "
                         f"{r['projected_at_rates']:.3g} | " + " | ".join(f"{r[k]:.3g}" for k in alphas) + " |")
    return "\n".join(L) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--findings", nargs="*", default=[], help="findings JSON files of the greedy audits")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="greedy_costs")
    a = ap.parse_args()
    res = {"args": " ".join(sys.argv[1:]), "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
           "per_step": per_step(a.reps), "findings": []}
    for path in a.findings:
        f = json.loads(Path(path).read_text())
        item = {"file": Path(path).name, "policy": f["policy"], "verdict": f["verdict"],
                "epsilon_lower": f["epsilon_lower"], "horizon": f["horizon"], "seconds": f.get("seconds", 0.0),
                "parts": f.get("parts", []), "run_rounds": run_rounds(f)}
        if f["epsilon_lower"] <= 0:
            item["futility"] = futility(f, (1e-3, 0.05, 0.2))
        res["findings"].append(item)
    (RESULTS / f"{a.out}.json").write_text(json.dumps(res, indent=1) + "\n")
    (RESULTS / f"{a.out}.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
