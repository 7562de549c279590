"""How tight the shuffle audit is: its lower bound against the audited pair's exact eps and the statistical limit.

For ``shuffle-glm`` at its defaults (d = 5, K = 20, eps0 = 3.5 per message, a first batch of 1,000 users,
claim (3.62, 1e-5) by Feldman-McMillan-Talwar amplification of each message set, composed):

* the pairs: the calibrated canary the audit chooses (dpaudit.protocols.shuffle.calibrated_pairs, ranked by
  their exact profiles) and the one-coordinate canaries it also tries; for each, the separation of its
  messages (per message set), its exact eps at delta = 1e-5 in both directions
  (dpaudit.accountants.shuffled_canary_profile), and the statistical limit of the gray-box test at several
  fresh sample sizes (dpaudit.runner.shuffle.statistical_limit: the bound the test shows when its counts are
  their expectations; with the error share of a 128-point grid at confidence 0.975, and "oracle": one
  point at the whole 0.025);
* a background the audit does not use: a third datum, distinct from both of the canary's values (every
  message set then has more than three ratio classes, past what the enumeration handles), found by a
  search over the calibrated grid; its delta(eps) by Monte Carlo of the class counts (the view's likelihood
  ratio is a function of them), 4 million views per side, with 99.9% intervals;
* the audit itself, ``dpaudit check policy shuffle-glm --protocol shuffle --seed S --json`` for S = 0..9
  (the CLI's defaults: 50,000 runs asked, capped at 40,000 per side), one at a time: the gray-box bound and
  the limit for its own grid, the black-box bound, the verdict, wall and CPU seconds (the audit's process and
  its workers), and the load average of the shared machine when it ran.

Run:  python benchmarks/validation/shuffle_tightness.py [--seeds 10] [--out STEM]
      (writes benchmarks/results/shuffle_tightness.md/.json, or STEM.md/.json there)
      python benchmarks/validation/shuffle_tightness.py --audits-only --seeds 5
      (the audits over seeds alone, with the chosen gray-box sample size: no pair table, no Monte Carlo;
      writes benchmarks/results/shuffle_tightness-audits.md/.json)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
DELTA = 1e-5
SIZES = (2000, 10000, 40000, 400000)


def pair_table() -> list[dict]:
    from dpaudit.policies import make_policy
    from dpaudit.protocols.shuffle import calibrated_pairs, canary_model, shuffle_pairs
    from dpaudit.runner.shuffle import statistical_limit

    rows = []
    for params, label in (({}, "d = 5, K = 20 (defaults)"), ({"dim": 1, "n_arms": 2}, "d = 1, K = 2 (controls)")):
        pol = make_policy("shuffle-glm", params)
        B = int(pol.batch0)
        cal = calibrated_pairs(pol, B)
        for kind, pairs in (("calibrated", cal), ("one-coordinate", shuffle_pairs(B, int(pol.dim)))):
            for p in pairs:
                model, why = canary_model(pol, p)
                if model is None:
                    continue
                t0 = time.perf_counter()
                prof = model.profile()
                eps = [prof.epsilon(DELTA, s) for s in (0, 1)]
                side = int(eps[1] > eps[0])
                row = {"setting": label, "kind": kind, "pair": p.label, "background": p.background,
                       "separation": model.separation(), "exact_eps_side0": eps[0], "exact_eps_side1": eps[1],
                       "exact_eps": max(eps), "exact_eps_lower_end": prof.epsilon(DELTA, None, "lower"),
                       "sampled_side": side, "seconds": time.perf_counter() - t0,
                       "limit_128": {n: statistical_limit(prof, side, n, DELTA, 0.025 / 128) for n in SIZES},
                       "limit_oracle": {n: statistical_limit(prof, side, n, DELTA, 0.025) for n in SIZES}}
                rows.append(row)
    return rows


def third_datum(views: int = 4_000_000) -> dict:
    """delta(eps) of a canary whose other value and background are three distinct data (module docstring)."""
    import numpy as np

    from dpaudit.policies import make_policy

    pol = make_policy("shuffle-glm", {})
    d, B = int(pol.dim), int(pol.batch0)
    alt, alt2 = np.array([1, -1, 1, -1, 1.0]), np.array([1, 1, -1, -1, 1.0])
    data = {"canary": (0.36 * alt / np.sqrt(d), 0.0), "other": (alt / np.sqrt(d), 1.0), "background": (alt2 / np.sqrt(d), 0.0)}
    X = np.stack([v[0] for v in data.values()])
    R = np.array([v[1] for v in data.values()])
    vals = pol.message_values(X, R)
    sets = [(pol.shuffler_outer, vals["outer"]), (pol.shuffler_grad, vals["grad"])]
    rng = np.random.default_rng(2024)
    eps_grid = [0.9, 1.0, 1.1]
    out = {"data": {k: [list(map(float, v[0])), v[1]] for k, v in data.items()}, "views_per_side": views,
           "classes": [], "delta": {}}
    chunk = 200_000
    for side in (0, 1):
        sums = np.zeros((len(eps_grid), 2))
        for _ in range(views // chunk):
            L = np.zeros(chunk)
            for sh, v in sets:
                cls = sh.ratio_classes(*v)
                if side == 0:
                    out["classes"].append({f"{a},{b}": q for (a, b), q in sorted(cls.items())})
                keys = sorted(cls)
                q = np.array([cls[k] for k in keys])
                q /= q.sum()
                ra = np.exp(sh.eps0 * np.array([k[0] for k in keys], dtype=float))
                rb = np.exp(sh.eps0 * np.array([k[1] for k in keys], dtype=float))
                counts = rng.multinomial(B - 1, q, size=chunk)
                pc = q * (ra if side == 0 else rb)
                counts[np.arange(chunk), rng.choice(len(keys), size=chunk, p=pc / pc.sum())] += 1
                L += np.log(counts @ ra) - np.log(counts @ rb)
            L = L if side == 0 else -L
            for i, e in enumerate(eps_grid):
                y = np.maximum(0.0, -np.expm1(e - L))
                sums[i] += (y.sum(), (y * y).sum())
        n = (views // chunk) * chunk
        mean = sums[:, 0] / n
        se = np.sqrt(np.maximum(sums[:, 1] / n - mean**2, 0.0) / n)
        out["delta"][side] = [{"eps": e, "delta": float(m), "low": float(max(m - 3.29 * s_, 0.0)),
                               "high": float(m + 3.29 * s_)} for e, m, s_ in zip(eps_grid, mean, se)]
    out["classes"] = out["classes"][:2]
    return out


def audit(seed: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = subprocess.run([str(Path(sys.executable).parent / "dpaudit"), "check", "policy", "shuffle-glm", "--protocol", "shuffle",
                          "--seed", str(seed), "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"seed {seed}: exit {out.returncode}: {out.stderr[-2000:]}")
    d = json.loads(out.stdout)
    gb = next(a for a in d["attacks"] if a["attack"].startswith("likelihood"))
    bb = next(a for a in d["attacks"] if a["attack"].startswith("membership"))
    return {"seed": seed, "verdict": d["verdict"], "lower": d["epsilon_lower"], "gray_box": gb["epsilon_lower"],
            "limit": gb["details"]["statistical_limit"], "exact": d["shuffle_tightness"]["exact_epsilon"],
            "black_box": bb["epsilon_lower"], "black_box_family": bb["witness"].get("features"),
            "black_box_runs": bb["details"].get("fresh_runs_used"), "gray_box_runs": gb["details"]["fresh_runs_used"],
            "limit_of_planned_runs": gb["details"].get("statistical_limit_of_planned_runs"),
            "wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "load": load}


def _audit_lines(runs: list[dict], generated: str | None = None) -> list[str]:
    L = []
    if generated:
        L.append("# Shuffle audit over seeds: the gray-box bound against its statistical limit\n")
        L.append(f"Generated by `{generated}`. delta = 1e-5; the pairs, the exact eps and the limits at other sizes "
                 "are in shuffle_tightness.md.\n")
    L.append("## The default audit over seeds\n")
    L.append("`dpaudit check policy shuffle-glm --protocol shuffle --seed S --json` (at most 40,000 fresh runs per "
             "side; the gray-box part's own sample size chosen on the pair's exact profile), 2 local processes, one at "
             "a time on a shared 2-core machine (its 1-minute load average when each started is given: CPU seconds "
             "are the comparable number). The statistical limit is the median of the gray-box bound at its runs.\n")
    L.append("| seed | verdict | lower bound | gray-box bound (runs) | its statistical limit | exact eps | black-box bound "
             "(family, fresh runs) | wall s | CPU s | load |")
    L.append("| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for r in runs:
        L.append(f"| {r['seed']} | {r['verdict']} | {r['lower']:.4f} | {r['gray_box']:.4f} ({r['gray_box_runs']}) | {r['limit']:.4f} | "
                 f"{r['exact']:.4f} | {r['black_box']:.4f} ({r['black_box_family']}, {r['black_box_runs']}) | "
                 f"{r['wall']:.1f} | {r['cpu']:.1f} | {r['load']:.1f} |")
    gbs = [r["gray_box"] for r in runs]
    ratio = [r["gray_box"] / r["limit"] for r in runs if r["limit"] > 0]
    L.append("")
    L.append(f"Gray-box bound: median {statistics.median(gbs):.3f} (min {min(gbs):.3f}, max {max(gbs):.3f}); as a "
             f"share of its statistical limit: median {statistics.median(ratio):.2f} (min {min(ratio):.2f}, max "
             f"{max(ratio):.2f}). CPU seconds per audit: median {statistics.median(r['cpu'] for r in runs):.1f}; "
             f"wall: median {statistics.median(r['wall'] for r in runs):.1f}.")
    return L


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=None, help="file stem of the tables written in benchmarks/results "
                    "(default shuffle_tightness, or shuffle_tightness-audits with --audits-only)")
    ap.add_argument("--audits-only", action="store_true", help="only the default audit over seeds")
    args = ap.parse_args()
    out = str(RESULTS / (args.out or ("shuffle_tightness-audits" if args.audits_only else "shuffle_tightness")))
    runs = []
    for s in range(args.seeds):
        runs.append(audit(s))
        r = runs[-1]
        print(f"seed {s}: gray box {r['gray_box']:.3f} (limit {r['limit']:.3f}, exact {r['exact']:.3f}), black box "
              f"{r['black_box']:.3f}, {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU, load {r['load']:.1f}", flush=True)
    if args.audits_only:
        Path(out + ".json").write_text(json.dumps({"delta": DELTA, "audits": runs}, indent=1))
        Path(out + ".md").write_text("\n".join(_audit_lines(runs, f"python benchmarks/validation/shuffle_tightness.py "
                                                                       f"--audits-only --seeds {args.seeds}")) + "\n")
        return
    pairs = pair_table()
    third = third_datum()
    Path(out + ".json").write_text(json.dumps({"delta": DELTA, "pairs": pairs, "third_datum": third, "audits": runs},
                                                     indent=1))
    L = []
    L.append("# Shuffle audit: lower bound against the pair's exact eps and the statistical limit\n")
    L.append(f"Generated by `python benchmarks/validation/shuffle_tightness.py --seeds {args.seeds}`. `shuffle-glm` (Sarmasarkar "
             "2026, Alg. 1): eps0 = 3.5 per message, a first batch of 1,000 users, claim (3.62, 1e-5) (Feldman, "
             "McMillan and Talwar's amplification of each of the two shuffled message sets, composed). delta = 1e-5.\n")
    L.append("## The pairs: exact eps and statistical limits\n")
    L.append("Exact eps of the shuffled view for the pair (every other user at the background's datum; "
             "`dpaudit.accountants.shuffled_canary_profile`, both directions: side 0 = the canary's first value "
             "sampled, side 1 = the background's), and the statistical limit of the gray-box test on the larger "
             "direction at n fresh runs (the bound it shows when its counts are their expectations; a 128-point "
             "grid at confidence 0.975 as in the audit, and the oracle: one eps at the whole 0.025).\n")
    L.append("| setting | pair | separation (outer, gradient) | exact eps (side 0, side 1) | "
             + " | ".join(f"limit at {n:,} (oracle)" for n in SIZES) + " | s |")
    L.append("| --- | --- | --- | --- | " + " | ".join("---:" for _ in SIZES) + " | ---: |")
    for p in pairs:
        sep = ", ".join(f"{x:.3g}" for x in p["separation"])
        name = p["pair"] if p["pair"].startswith(p["kind"]) else f"{p['kind']}: {p['pair']}"
        L.append(f"| {p['setting']} | {name}; {p['background']} | {sep} | "
                 f"{p['exact_eps_side0']:.4f}, **{p['exact_eps_side1']:.4f}** | "
                 + " | ".join(f"{p['limit_128'][n]:.3f} ({p['limit_oracle'][n]:.3f})" for n in SIZES)
                 + f" | {p['seconds']:.2f} |")
    L.append("")
    L.append("## A third background datum (not audited)\n")
    c = third["data"]
    L.append(f"The canary {c['canary']} vs {c['other']} (context, reward), every other user at {c['background']}: "
             "three distinct data, so each message set has more than three ratio classes and the enumeration does "
             f"not apply. delta(eps) by Monte Carlo of the class counts ({third['views_per_side']:,} views per side; "
             "99.9% intervals):\n")
    L.append("| eps | delta, side 0 sampled | delta, side 1 sampled |")
    L.append("| ---: | --- | --- |")
    for a, b in zip(third["delta"][0], third["delta"][1]):
        L.append(f"| {a['eps']} | {a['delta']:.3g} [{a['low']:.3g}, {a['high']:.3g}] | {b['delta']:.3g} "
                 f"[{b['low']:.3g}, {b['high']:.3g}] |")
    L.append("")
    L += _audit_lines(runs)
    Path(out + ".md").write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
