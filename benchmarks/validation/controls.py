"""Positive and negative controls of `dpaudit check policy`, for every protocol: false alarms and detection.

* False-alarm rate: every correct private policy of a suite, audited with ``--seed s`` for
  s = 0..S-1; a ``violation`` is a false alarm. The rate must stay below 1 - confidence = 0.05; the
  table gives the upper 95% Clopper-Pearson bound on the rate from the S audits, and how many audits
  were ``inconclusive`` (no power: the audit earned no ``consistent``).
* Detection rate: every mutant (a real bug in a correct policy) audited over the same seeds; each must
  be flagged, and the table says which part flagged it.
* AdaC-UCB's exact eps is known (every round feeds one release of N(0, 1/(2 rho)) noise on a sum of
  sensitivity 1), so the ucb suite also counts how often the likelihood bound exceeds *that* (allowed at
  most at rate 0.025, its share of the budget): a sharper test of the statistics than the claim.

Suites (one protocol each; settings smaller than the CLI defaults so that 50 seeds fit in minutes on
2 cores -- the defaults only use more samples):

* ``ucb`` (table): the UCB family of Azize & Basu (2023a) "Concentrated Differential Privacy for Bandits" and
  Azize & Basu (2023b) "Rényi Differentially Private Bandits", K = 3, T = 24, 5,000 fresh runs per side;
* ``blackbox`` (table): outside-style policies without a ledger (elimination, explore-then-commit;
  horizon chosen by the audit), 5,000 runs;
* ``local``: the K-armed LDP bandits of Zheng, Cai, Huang, Li & Wang (2020) "Locally Differentially Private
  (Contextual) Bandits Learning", K = 2, T = 24, 10,000 runs, without the central part;
* ``bco`` (local): Zheng et al.'s (2020) BCO policies, d = 2, T = 24, 10,000 runs, with the central part;
* ``joint``: the joint-DP GLM bandit of Sarmasarkar (2026) "Shuffle and Joint Differential Privacy for
  Generalized Linear Contextual Bandits", K = 2, d = 2, T = 8 (16 for the switching mutant), 2,000 runs;
* ``shuffle``: Sarmasarkar's (2026) shuffle-DP GLM bandit, d = 1, K = 2 (6,000 runs; the mutant 2,000), and at its
  defaults (d = 5, K = 20, 40,000 runs; 5 seeds).
* ``subtle`` (table, view, local, shuffle, joint): mutants whose true eps exceeds the claim by only 1.3-3x (one
  realistic slip each: half the sensitivity, a noise-multiplier typo, a budget not split, an amplification over
  the wrong batch; :mod:`dpaudit.policies.mutants`), each beside its correct twin, at the CLI's defaults (the
  shuffle mutants on at most 10 seeds, the joint ones on 3, jdp-glm on 10);
* ``thirdparty`` (table, and local for the click servers): the classes of tests/thirdparty/, written
  the way code outside dpaudit is written (one-run classes on the global ``np.random`` through the
  per-run adapter, the claim on the command line; batched local-DP servers), each correct one beside a
  buggy one; 5,000 runs, horizon chosen by the audit; correct ones over all seeds, buggy ones over 20 (at most
  --seeds; a per-run audit of a one-run Python class takes about a minute of CPU).

Audits run two at a time (one process each: the findings do not depend on it).

Run:  python benchmarks/validation/controls.py --suite ucb [--seeds 50] [--only LABEL ...] [--runs N] [--out STEM]
      (writes controls-<suite>.md and controls-<suite>.json in benchmarks/results/, or STEM.md / STEM.json)
      python benchmarks/validation/controls.py --merge PART.json ... --out STEM   (parts of one suite run with --only)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
RESULTS = ROOT / "benchmarks" / "results"

K3 = {"n_arms": "3"}
JOINT = {"n_arms": "2", "dim": "2"}
SHUFFLE = {"n_arms": "2", "dim": "1"}
TP = str(ROOT / "tests" / "thirdparty")
#: a one-run class on the global np.random, its claim on the command line (``--adapter per-run --claim``)
PER_RUN = {"adapter": "per-run", "claim": "pure:eps=1"}
LOCAL = {"protocol": "local", "horizon": 24}
#: suite -> (protocol, settings, cases); a case is (label, policy, params, correct?, overrides)
SUITES: dict[str, tuple[str, dict, list[tuple]]] = {
    "ucb": ("table", {"horizon": 24, "runs": 5000}, [
        ("adac-ucb", "adac-ucb", {**K3, "rho": "0.1"}, True, {}),
        ("adac-ucb (rho = 1)", "adac-ucb", {**K3, "rho": "1"}, True, {}),
        ("adar-ucb", "adar-ucb", {**K3, "alpha": "2", "epsilon": "0.5"}, True, {}),
        ("adaed-ucb", "adaed-ucb", {**K3, "epsilon": "0.5", "delta": "1e-5"}, True, {}),
        ("adap-ucb", "adap-ucb", {**K3, "epsilon": "0.5"}, True, {}),
        ("mutant-shared-noise", "mutant-shared-noise", K3, False, {}),
        ("mutant-sqrt2-noise", "mutant-sqrt2-noise", K3, False, {}),
        ("mutant-no-forgetting", "mutant-no-forgetting", K3, False, {}),
        ("mutant-mean-sensitivity", "mutant-mean-sensitivity", K3, False, {}),
        ("mutant-laplace-eps-scale", "mutant-laplace-eps-scale", K3, False, {}),
        ("mutant-first-unnoised", "mutant-first-unnoised", K3, False, {}),
    ]),
    "blackbox": ("table", {"horizon": None, "runs": 5000}, [
        ("dp-se", "dp-se", {}, True, {}),
        ("dp-etc", "dp-etc", {}, True, {}),
        ("mutant-se-shared-noise", "mutant-se-shared-noise", {}, False, {}),
        ("mutant-etc-raw-commit", "mutant-etc-raw-commit", {}, False, {}),
        ("mutant-counter-double-noise", "mutant-counter-double-noise", {}, False, {}),
    ]),
    "local": ("local", {"horizon": 24, "runs": 10000, "central": False}, [
        ("ldp-ucb", "ldp-ucb", {}, True, {}),
        ("ldp-ucb-laplace", "ldp-ucb-laplace", {}, True, {}),
        ("ldp-ucb-rr", "ldp-ucb-rr", {}, True, {}),
        ("ldp-tsallis-inf", "ldp-tsallis-inf", {}, True, {}),
        ("mutant-ldp-sqrt2-noise", "mutant-ldp-sqrt2-noise", {}, False, {}),
        ("mutant-ldp-half-sensitivity", "mutant-ldp-half-sensitivity", {}, False, {}),
        ("mutant-ldp-peek", "mutant-ldp-peek", {}, False, {}),
    ]),
    "bco": ("local", {"horizon": 24, "runs": 10000}, [
        ("ldp-bco-fkm", "ldp-bco-fkm", {}, True, {}),
        ("ldp-bco-2pt", "ldp-bco-2pt", {}, True, {}),
        ("ldp-bco-scs", "ldp-bco-scs", {}, True, {}),
        ("mutant-bco-fkm-half-sensitivity", "mutant-bco-fkm-half-sensitivity", {}, False, {}),
        ("mutant-bco-2pt-half-gap", "mutant-bco-2pt-half-gap", {}, False, {}),
        ("mutant-bco-fkm-peek", "mutant-bco-fkm-peek", {}, False, {}),
    ]),
    "joint": ("joint", {"horizon": 8, "runs": 2000}, [
        ("jdp-glm", "jdp-glm", JOINT, True, {}),
        ("jdp-glm, probit", "jdp-glm", {**JOINT, "link": "probit"}, True, {}),
        ("mutant-tree-reused-noise", "mutant-tree-reused-noise", JOINT, False, {}),
        ("mutant-tree-no-leaf-noise", "mutant-tree-no-leaf-noise", JOINT, False, {}),
        ("mutant-noisy-det-switch", "mutant-noisy-det-switch", JOINT, False, {"horizon": 16}),
    ]),
    "shuffle": ("shuffle", {"runs": 6000}, [
        ("shuffle-glm", "shuffle-glm", SHUFFLE, True, {}),
        ("mutant-shuffle-arrival-order", "mutant-shuffle-arrival-order", SHUFFLE, False, {"runs": 2000}),
        ("shuffle-glm at its defaults (d = 5, K = 20)", "shuffle-glm", {}, True, {"runs": 40000, "seeds": 5}),
    ]),
    # mutants whose true eps is 1.3-3x the claim, each beside its correct twin, at the CLI's defaults (each must
    # be flagged by `dpaudit check policy NAME`); shuffle audits on a few seeds only
    "subtle": ("table", {}, [
        ("adac-ucb (twin, rho = 0.1, K = 2)", "adac-ucb", {"n_arms": "2", "rho": "0.1"}, True, {}),
        ("mutant-sqrt2-noise", "mutant-sqrt2-noise", {}, False, {}),
        ("mutant-ucb-prefix-off-by-one", "mutant-ucb-prefix-off-by-one", {}, False, {}),
        ("adac-oful (twin)", "adac-oful", {}, True, {}),
        ("mutant-oful-half-sensitivity", "mutant-oful-half-sensitivity", {}, False, {}),
        ("adar-ucb (twin)", "adar-ucb", {}, True, {"protocol": "view"}),
        ("mutant-adar-ucb-sqrt2-noise", "mutant-adar-ucb-sqrt2-noise", {}, False, {"protocol": "view"}),
        ("ldp-ucb (twin)", "ldp-ucb", {}, True, {"protocol": "local"}),
        ("mutant-ldp-half-sensitivity", "mutant-ldp-half-sensitivity", {}, False, {"protocol": "local"}),
        ("ldp-ucb-laplace (twin)", "ldp-ucb-laplace", {}, True, {"protocol": "local"}),
        ("mutant-ldp-laplace-half-sensitivity", "mutant-ldp-laplace-half-sensitivity", {}, False,
         {"protocol": "local"}),
        ("mutant-ldp-laplace-std-scale", "mutant-ldp-laplace-std-scale", {}, False, {"protocol": "local"}),
        ("shuffle-glm (twin, d = 1, K = 2)", "shuffle-glm", SHUFFLE, True, {"protocol": "shuffle", "seeds": 50}),
        ("mutant-shuffle-arrival-order", "mutant-shuffle-arrival-order", {}, False,
         {"protocol": "shuffle", "seeds": 10}),
        ("shuffle-glm (twin, d = 1, K = 2, eps0 = 3)", "shuffle-glm", {**SHUFFLE, "eps0": "3"}, True,
         {"protocol": "shuffle", "seeds": 50}),
        ("mutant-shuffle-grad-whole-budget", "mutant-shuffle-grad-whole-budget", {}, False,
         {"protocol": "shuffle", "seeds": 10}),
        ("shuffle-glm (twin, d = 1, K = 2, eps0 = 3, groups = 50)", "shuffle-glm",
         {**SHUFFLE, "eps0": "3", "groups": "50"}, True, {"protocol": "shuffle", "seeds": 50}),
        ("mutant-shuffle-group-claim", "mutant-shuffle-group-claim", {}, False, {"protocol": "shuffle", "seeds": 10}),
        # joint DP at the defaults (K = 20, d = 5, T = 16): the calibration mutants beside jdp-glm
        ("jdp-glm (twin)", "jdp-glm", {}, True, {"protocol": "joint", "seeds": 10}),
        ("mutant-jdp-sigma-typo", "mutant-jdp-sigma-typo", {}, False, {"protocol": "joint", "seeds": 3}),
        ("mutant-jdp-add-remove-sensitivity", "mutant-jdp-add-remove-sensitivity", {}, False,
         {"protocol": "joint", "seeds": 3}),
        ("mutant-jdp-pgd-steps-unsplit", "mutant-jdp-pgd-steps-unsplit", {}, False, {"protocol": "joint", "seeds": 3}),
    ]),
    "thirdparty": ("table", {"horizon": None, "runs": 5000}, [
        (f"{tp}:{cls}", f"{TP}/{mod}.py:{cls}", params, correct, dict(over, **({} if correct else {"seeds": 20})))
        for tp, mod, cls, params, correct, over in [
            ("elimination", "elimination", "BlockEliminationDP", {"n_arms": 2}, True, PER_RUN),
            ("elimination", "elimination", "SharedNoiseBlockElimination", {"n_arms": 2}, False, PER_RUN),
            ("etc", "etc", "PrivateETC", {"n_arms": 2}, True, PER_RUN),
            ("etc", "etc", "WrongScaleETC", {"n_arms": 2}, False, PER_RUN),
            ("ucb_counter", "ucb_counter", "EpisodicLaplaceUCB", {"n_arms": 2}, True, PER_RUN),
            ("ucb_counter", "ucb_counter", "NoResetEpisodicUCB", {"n_arms": 2}, False, PER_RUN),
            ("greedy", "greedy", "TreeCounterGreedy", {"n_arms": 2}, True, PER_RUN),
            ("greedy", "greedy", "DoubleDividedGreedy", {"n_arms": 2}, False, PER_RUN),
            ("ldp_logging", "ldp_logging", "RRClickServer", {}, True, LOCAL),
            ("ldp_logging", "ldp_logging", "LoggingRRClickServer", {}, False, LOCAL),
        ]]),
}
DELTA, CONFIDENCE = 1e-5, 0.95


def _audit(policy: str, params: dict, protocol: str, settings: dict, seed: int) -> dict:
    from dpaudit.runner import check

    t0 = _cpu()
    settings = dict(settings)
    protocol = settings.pop("protocol", protocol)
    out = check(policy, params, protocol=protocol, seed=seed, delta=DELTA, confidence=CONFIDENCE, workers=1,
                **settings)
    out["_cpu"] = _cpu() - t0
    return out


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (a plug-in's audit runs in a forked
    process of its own, which time.process_time() would not count)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _flagged_by(out: dict) -> str:
    w = out.get("witness") or {}
    return str(w.get("attack", "-"))


def run(suite: str, seeds: int, only: list[str] | None, runs: int | None = None) -> dict:
    from dpaudit.accountants import gaussian_epsilon
    from dpaudit.attacks.bounds import cp_upper

    protocol, base, cases = SUITES[suite]
    if runs is not None:
        base = {**base, "runs": runs}
    res: dict = {"suite": suite, "protocol": protocol, "settings": base, "seeds": seeds, "rows": []}
    with ProcessPoolExecutor(max_workers=min(2, len(os.sched_getaffinity(0)))) as pool:
        for label, policy, params, correct, over in cases:
            if only and label not in only:
                continue
            n = min(over.get("seeds", seeds), seeds)  # a case's own seed count, at most --seeds
            settings = {**base, **{k: v for k, v in over.items() if k != "seeds" and not (k == "runs" and runs)}}
            t0 = time.perf_counter()
            outs = list(pool.map(_audit, [policy] * n, [params] * n, [protocol] * n, [settings] * n, range(n)))
            wall = (time.perf_counter() - t0) / n
            verdicts = [o["verdict"] for o in outs]
            lower = [float(o["epsilon_lower"] or 0.0) for o in outs]
            flagged = verdicts.count("violation")
            by: dict[str, int] = {}
            for o in outs:
                if o["verdict"] == "violation":
                    by[_flagged_by(o)] = by.get(_flagged_by(o), 0) + 1
            row = {"case": label, "policy": policy.replace(str(ROOT) + "/", ""), "params": params, "correct": correct, "settings": settings,
                   "seeds": n, "claimed": outs[0]["epsilon_claimed"], "flagged": flagged,
                   "rate_upper95": float(cp_upper(flagged, n, 0.05)), "inconclusive": verdicts.count("inconclusive"),
                   "median_lower": statistics.median(lower), "min_lower": min(lower), "max_lower": max(lower),
                   "flagged_by": by, "upper": outs[0].get("epsilon_upper"), "horizons": sorted({o["horizon"] for o in outs if o.get("horizon") is not None}),
                   "wall_seconds_per_audit": wall, "cpu_seconds_per_audit": statistics.mean(o["_cpu"] for o in outs)}
            if policy == "adac-ucb":
                exact = gaussian_epsilon(DELTA, sigma=1 / math.sqrt(2 * float(params["rho"]))).epsilon
                row["likelihood_over_exact"] = sum(
                    any(a["attack"] == "likelihood" and float(a["epsilon_lower"]) > exact for a in o["attacks"])
                    for o in outs)
            res["rows"].append(row)
            print(f"{label:<44} {flagged}/{n} flagged, {row['inconclusive']} inconclusive, median bound "
                  f"{row['median_lower']:.3g} (claim {row['claimed']:.3g}), {wall:.1f} s/audit", file=sys.stderr,
                  flush=True)
    return res


def _f1(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(res: dict, command: str) -> str:
    s = res["settings"]
    head = [f"# Controls ({res['suite']}, --protocol {res['protocol']}): false alarms and detection", "",
            f"Generated by `{command}`: each case audited with `dpaudit check policy NAME --protocol {res['protocol']}"
            + (" (unless the row says otherwise)" if any("protocol" in r["settings"] for r in res["rows"]) else "") + " "
            + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in s.items() if v is not None and k != "central")
            + (" (without the central part)" if s.get("central") is False else "")
            + f" --delta {DELTA:g} --confidence {CONFIDENCE:g} --seed S` for S = 0..(seeds - 1), overrides per row; "
            "two audits at a time on a shared 2-core machine.", "",
            "| case | correct? | claimed eps | seeds | flagged | 95% upper bound on the false-alarm rate | "
            "inconclusive | lower bound: median (min-max) | flagged by | s per audit (CPU) |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for r in res["rows"]:
        rate = f"{r['rate_upper95']:.3f}" if r["correct"] else "-"
        by = ", ".join(f"{k} {v}" for k, v in sorted(r["flagged_by"].items())) or "-"
        over = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in r["settings"].items()
                        if k != "central" and (k not in s or v != s[k]))
        case = f"{r['case']} ({over})" if over else r["case"]
        head.append(f"| {case} | {'yes' if r['correct'] else 'mutant'} | {r['claimed']:.4g} | {r['seeds']} | "
                    f"{r['flagged']}/{r['seeds']} | {rate} | {r['inconclusive']}/{r['seeds']} | "
                    f"{r['median_lower']:.3g} ({r['min_lower']:.3g}-{r['max_lower']:.3g}) | {by} | "
                    f"{r['wall_seconds_per_audit']:.1f} ({_f1(r['cpu_seconds_per_audit'])}) |")
    extra = [f"{r['case']}: {r['likelihood_over_exact']}/{r['seeds']}" for r in res["rows"] if "likelihood_over_exact" in r]
    if extra:
        head += ["", "Likelihood bound above the *exact* eps of AdaC-UCB's mechanism (a sharper test of the statistics "
                 "than the claim; allowed rate 0.025): " + "; ".join(extra) + "."]
    if res["suite"] == "subtle":
        ups = [f"{r['case']}: {r['upper']:.4g}" for r in res["rows"] if r.get("upper") is not None]
        head += ["", "epsilon_upper of seed 0's audit (the tightest eps dpaudit proves from the noise actually added; "
                 "for a ledger policy the exact eps, and for a refuted figure none): " + "; ".join(ups) + "."]
    fa = sum(r["flagged"] for r in res["rows"] if r["correct"])
    na = sum(r["seeds"] for r in res["rows"] if r["correct"])
    det = sum(r["flagged"] for r in res["rows"] if not r["correct"])
    nd = sum(r["seeds"] for r in res["rows"] if not r["correct"])
    head += ["", f"{fa} false alarm{'' if fa == 1 else 's'} in {na} audits of correct policies (the 95% confidence "
             f"allows about {0.05 * na:.0f}); {det} of {nd} mutant audits flagged.", ""]
    if res.get("note"):
        head += [res["note"], ""]
    return "\n".join(head)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="ucb")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--only", action="append", default=None, metavar="LABEL", help="only this case (repeatable)")
    ap.add_argument("--runs", type=int, default=None, help="fresh runs per side for every case (default: the suite's)")
    ap.add_argument("--out", default=None, help="file stem of the tables (default controls-SUITE, -only with --only)")
    ap.add_argument("--render", default=None, metavar="JSON", help="only write the Markdown table of a recorded JSON")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="only merge recorded JSONs of one suite (parts run with --only) into --out's tables; a case "
                         "in a later file replaces the same case's row of an earlier one")
    args = ap.parse_args()
    if args.merge:
        recs = [json.loads(Path(p).read_text()) for p in args.merge]
        rows: dict[str, dict] = {}
        for x in recs:  # a case run again in a later part replaces the earlier row, in the earlier row's place
            rows.update({r["case"]: r for r in x["rows"]})
        rec = {**recs[0], "rows": list(rows.values()), "seeds": max(x["seeds"] for x in recs),
               "command": f"python benchmarks/validation/controls.py --suite {recs[0]['suite']} --seeds S` with S as in each row's "
                          "seeds column (run in parts with --only, merged with `--merge"}
        stem = args.out or f"controls-{rec['suite']}"
        (RESULTS / f"{stem}.json").write_text(json.dumps(rec, indent=1, default=str))
        (RESULTS / f"{stem}.md").write_text(markdown(rec, rec["command"]))
        return
    if args.render:
        rec = json.loads(Path(args.render).read_text())
        Path(args.render).with_suffix(".md").write_text(markdown(rec, rec["command"]))
        return
    res = run(args.suite, args.seeds, args.only, args.runs)
    command = shlex.join(["python", "benchmarks/validation/controls.py"] + sys.argv[1:])
    stem = args.out or (f"controls-{args.suite}" + ("-only" if args.only else ""))
    (RESULTS / f"{stem}.json").write_text(json.dumps({**res, "command": command}, indent=1, default=str))
    (RESULTS / f"{stem}.md").write_text(markdown(res, command))


if __name__ == "__main__":
    main()
