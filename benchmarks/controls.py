"""Positive and negative controls of `dpaudit check policy` (issue 5).

* False-alarm rate: every correct private policy of the UCB family, audited with ``--seed s`` for
  s = 0..S-1; a ``violation`` is a false alarm. The rate must stay below 1 - confidence = 0.05;
  the table also gives the upper 95% Clopper-Pearson bound on the rate from the S audits.
  A sharper check of the statistics themselves: for AdaC-UCB the exact eps of its mechanism is
  known (every round feeds one release of N(0, 1/(2 rho)) noise on a sum of sensitivity 1; the
  per-round worst case is that one Gaussian), so we also count how often the likelihood bound
  exceeds *that* (it never may, at rate above 0.025, its share of the budget).
* Detection rate: every mutant audited over the same seeds; each must be flagged.

Settings (smaller than the CLI defaults so that 50 seeds x 10 policies fit in minutes on 2 cores;
the defaults only use more samples): K = 3 arms, T = 24, --runs 5000, delta = 1e-5, confidence 0.95.

``--suite blackbox`` (issue 9): the outside-style policies of ``dpaudit.policies.elimination``
(no ledger, judged by the black-box attack alone; first decisions at round 1,000 or 1,300) and
their mutants, at their default parameters with the horizon chosen by the audit (no ``--horizon``,
no hand-given pair), --runs 5000. A correct policy must be ``consistent`` (never ``violation``;
``inconclusive`` would mean the audit had no power) and every mutant flagged.

Run:  python benchmarks/controls.py [--seeds 50]   (writes controls.md and controls.json here)
      python benchmarks/controls.py --suite blackbox [--seeds 50]   (controls-blackbox.md/.json)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from dpaudit.accountants import gaussian_epsilon
from dpaudit.attacks.bounds import cp_upper
from dpaudit.runner import check as audit_policy

HERE = Path(__file__).resolve().parent

CORRECT = {
    "adac-ucb": {"n_arms": "3", "rho": "0.1"},
    "adac-ucb (rho = 1)": {"n_arms": "3", "rho": "1"},
    "adar-ucb": {"n_arms": "3", "alpha": "2", "epsilon": "0.5"},
    "adaed-ucb": {"n_arms": "3", "epsilon": "0.5", "delta": "1e-5"},
    "adap-ucb": {"n_arms": "3", "epsilon": "0.5"},
}
MUTANTS = {
    "mutant-shared-noise": {"n_arms": "3"},
    "mutant-sqrt2-noise": {"n_arms": "3"},
    "mutant-no-forgetting": {"n_arms": "3"},
    "mutant-mean-sensitivity": {"n_arms": "3"},
    "mutant-laplace-eps-scale": {"n_arms": "3"},
    "mutant-first-unnoised": {"n_arms": "3"},
}
SETTINGS = {"horizon": 24, "runs": 5000, "delta": 1e-5, "confidence": 0.95}

BLACKBOX_CORRECT = {"dp-se": {}, "dp-etc": {}}
BLACKBOX_MUTANTS = {"mutant-se-shared-noise": {}, "mutant-etc-raw-commit": {}, "mutant-counter-double-noise": {}}
BLACKBOX_SETTINGS = {"horizon": None, "runs": 5000, "delta": 1e-5, "confidence": 0.95}
SUITES = {"ucb": (CORRECT, MUTANTS, SETTINGS), "blackbox": (BLACKBOX_CORRECT, BLACKBOX_MUTANTS, BLACKBOX_SETTINGS)}


def _name(label: str) -> str:
    return label.split(" ")[0]


def run(seeds: int, only: list[str] | None = None, suite: str = "ucb") -> dict:
    correct, mutants, settings = SUITES[suite]
    res: dict = {"suite": suite, "settings": settings, "seeds": seeds, "correct": {}, "mutants": {}}
    for group, table in (("correct", correct), ("mutants", mutants)):
        for label, params in table.items():
            if only and label not in only:
                continue
            t0 = time.perf_counter()
            flags, lower, claimed, lik_over_exact, inconclusive, horizons = 0, [], None, 0, 0, set()
            for s in range(seeds):
                out = audit_policy(_name(label), params, seed=s, **settings)
                flags += out["verdict"] == "violation"
                inconclusive += out["verdict"] == "inconclusive"
                horizons.add(out["horizon"])
                lower.append(out["epsilon_lower"])
                claimed = out["epsilon_claimed"]
                if _name(label) == "adac-ucb":
                    rho = float(params["rho"])
                    exact = gaussian_epsilon(SETTINGS["delta"], sigma=1 / math.sqrt(2 * rho)).epsilon
                    lik = next((a for a in out["attacks"] if a["attack"] == "likelihood"), None)
                    lik_over_exact += lik is not None and lik["epsilon_lower"] > exact
            row = {"flagged": flags, "rate": flags / seeds, "rate_upper95": float(cp_upper(flags, seeds, 0.05)),
                   "inconclusive": inconclusive, "horizons": sorted(horizons), "claimed": claimed, "median_lower": sorted(lower)[len(lower) // 2], "max_lower": max(lower),
                   "seconds_per_audit": (time.perf_counter() - t0) / seeds}
            if _name(label) == "adac-ucb":
                row["likelihood_over_exact"] = lik_over_exact
            res[group][label] = row
            print(f"{label:<26} {flags}/{seeds} flagged  claimed {claimed:.3f}  median lower "
                  f"{row['median_lower']:.3f}  ({row['seconds_per_audit']:.1f} s/audit)", file=sys.stderr, flush=True)
    return res


def markdown(res: dict) -> str:
    s = res["settings"]
    n = res["seeds"]
    correct = SUITES[res.get("suite", "ucb")][0]
    horizon = f"--horizon {s['horizon']}" if s["horizon"] is not None else "(horizon chosen by the audit)"
    k = " --param n_arms=3 ..." if res.get("suite", "ucb") == "ucb" else ""
    md = ["# Controls: false alarms of correct policies, detection of mutants", "",
          f"Generated by `{res.get('command', f'python benchmarks/controls.py --seeds {n}')}`: each policy audited with "
          f"`dpaudit check policy NAME{k} {horizon} --runs {s['runs']} "
          f"--delta {s['delta']:g} --confidence {s['confidence']:g} --seed S` for S = 0..{n - 1}.", "",
          "## False-alarm rate (correct policies; must be <= 1 - confidence = 0.05)", "",
          "| policy | parameters | claimed eps | violations | rate | 95% upper bound on rate | inconclusive | "
          "median eps lower bound | largest | horizons | s / audit |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, r in res["correct"].items():
        params = ", ".join(f"{k}={v}" for k, v in correct[label].items()) or "defaults"
        md.append(f"| {_name(label)} | {params} | {r['claimed']:.3f} | {r['flagged']}/{n} | {r['rate']:.2f} | "
                  f"{r['rate_upper95']:.3f} | {r.get('inconclusive', 0)}/{n} | {r['median_lower']:.3f} | "
                  f"{r['max_lower']:.3f} | {', '.join(map(str, r.get('horizons', [])))} | {r['seconds_per_audit']:.1f} |")
    extra = [f"{label}: {r['likelihood_over_exact']}/{n}" for label, r in res["correct"].items()
             if "likelihood_over_exact" in r]
    if extra:
        md += ["", "Likelihood bound above the *exact* eps of AdaC-UCB's mechanism (a sharper test of the "
               "statistics than the claim; allowed rate 0.025): " + "; ".join(extra) + "."]
    md += ["", "## Detection rate (mutants; each must be flagged)", "",
           "| mutant | claimed eps | flagged | rate | inconclusive | median eps lower bound | horizons | s / audit |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, r in res["mutants"].items():
        md.append(f"| {label} | {r['claimed']:.3f} | {r['flagged']}/{n} | {r['rate']:.2f} | {r.get('inconclusive', 0)}/{n} | "
                  f"{r['median_lower']:.3f} | {', '.join(map(str, r.get('horizons', [])))} | {r['seconds_per_audit']:.1f} |")
    md += ["", "Timings were taken on a 2-core machine shared with other work; the verdicts do not depend on load."]
    return "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--runs", type=int, default=SETTINGS["runs"], help="fresh runs per side (default 5000)")
    ap.add_argument("--only", action="append", default=None, metavar="LABEL",
                    help="audit only this policy or mutant (repeatable); results go to controls-<runs>.md")
    ap.add_argument("--suite", choices=sorted(SUITES), default="ucb",
                    help="ucb: the seed 001/004 UCB family; blackbox: the outside-style controls (issue 9)")
    args = ap.parse_args()
    SUITES[args.suite][2]["runs"] = args.runs
    res = run(args.seeds, args.only, args.suite)
    res["command"] = " ".join(["python benchmarks/controls.py"] + sys.argv[1:])
    stem = "controls" if not args.only else f"controls-runs{args.runs}"
    if args.suite != "ucb":
        stem += f"-{args.suite}"
    (HERE / f"{stem}.json").write_text(json.dumps(res, indent=2))
    text = markdown(res)
    (HERE / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
