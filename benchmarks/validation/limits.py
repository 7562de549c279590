"""Measured lower bounds beside the statistical limit of their sample size (dpaudit.attacks.limits).

For audits whose privacy loss is known exactly, the bound an audit reports is set beside what its test
can show at its sample size and confidence when the leak is known:

* the likelihood (gray-box) bound of AdaC-UCB at rho = 1 (one Gaussian release per round, sensitivity /
  sigma = sqrt(2 rho)) and of AdaP-UCB at epsilon = 1 (one Laplace release, eps0 = 1): the test reports an
  order statistic of the counted runs, whose law is exact (``likelihood_limit``): its median at n runs is
  the largest eps at which the Clopper-Pearson lower bound of the median count n delta(eps) exceeds delta;
* the channel (black-box threshold) bound of ldp-ucb-rr (randomized response at eps0 = 1) against the best
  threshold test on the exact channel at its fresh messages per side (``threshold_limit``), and its
  central likelihood bound (the RR messages' loss) against the likelihood limit at its runs.

Each audit is ``dpaudit check policy ... --seed s`` at the CLI's defaults, for s = 0..seeds-1. The
limit columns use each test's own error budget (the likelihood's eps bound gets 0.8 of its part's, the
Rényi orders the rest) and, as the statistical limit proper, one test at the part's confidence. The
mean and largest sampled loss are shown beside the analytic ones: the premise that the audited pair's
loss is the analytic mechanism's.

Run:  python benchmarks/validation/limits.py [--seeds 10] [--out limits]   (writes limits.md and limits.json in
      benchmarks/results/)
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
DELTA = 1e-5


def _loss_facts(kind: str, param: float) -> tuple[float, float]:
    """(mean, largest) of the analytic privacy loss under d."""
    if kind == "gaussian":
        return param**2 / 2, math.inf
    if kind == "laplace":
        return param + math.exp(-param) - 1, param
    p = 1 / (1 + math.exp(-param))  # randomized response
    return (2 * p - 1) * param, param


CASES = [
    # label, policy, params, protocol, attack, analytic loss (kind, parameter)
    ("AdaC-UCB, rho = 1", "adac-ucb", {"rho": 1.0}, "table", "likelihood", ("gaussian", math.sqrt(2.0))),
    ("AdaP-UCB, epsilon = 1", "adap-ucb", {"epsilon": 1.0}, "table", "likelihood", ("laplace", 1.0)),
    ("ldp-ucb-rr (channel)", "ldp-ucb-rr", {}, "local", "channel", ("rr", 1.0)),
    ("ldp-ucb-rr (central likelihood)", "ldp-ucb-rr", {}, "local", "central likelihood", ("rr", 1.0)),
]


def limits_of(kind: str, param: float, attack: dict) -> dict:
    """The limits at the attack's sample size and confidence."""
    from dpaudit.attacks.likelihood import EPSILON_SHARE
    from dpaudit.attacks.limits import (gaussian_profile, laplace_profile, likelihood_limit, loss_tradeoff,
                                        profile_epsilon, randomized_response_profile, threshold_limit)

    prof = {"gaussian": gaussian_profile, "laplace": laplace_profile, "rr": randomized_response_profile}[kind](param)
    conf = float(attack["confidence"])
    d = attack["details"]
    out = {"exact": profile_epsilon(prof, DELTA)}
    if "order_statistic" in d:  # the likelihood test: n runs under d
        n = int(attack["samples"])
        own = 1 - float(d["order_statistic"]["alpha"])  # the eps bound's own error (its share of the part's)
        out.update({"n": n, "confidence": conf, "own_confidence": own,
                    "limit": likelihood_limit(prof, n, DELTA, conf),
                    "limit_own": likelihood_limit(prof, n, DELTA, own),
                    "q05": likelihood_limit(prof, n, DELTA, own, 0.05),
                    "q95": likelihood_limit(prof, n, DELTA, own, 0.95)})
        assert abs((1 - own) - (1 - conf) * EPSILON_SHARE) < 1e-12
    else:  # a threshold test on n fresh views per side, corrected for its tests
        n = int(d["n_fresh_per_side"])
        tests = int(d.get("tests_corrected_for", 1))
        own = 1 - (1 - conf) / tests
        p = 1 / (1 + math.exp(-param))
        fpr, fnr = loss_tradeoff([param, -param], [p, 1 - p])
        out.update({"n": n, "confidence": conf, "own_confidence": own,
                    "limit": threshold_limit(fpr, fnr, n, DELTA, conf),
                    "limit_own": threshold_limit(fpr, fnr, n, DELTA, own), "q05": None, "q95": None})
    return out


def run(seeds: int) -> dict:
    import dpaudit

    rows = []
    audits: dict = {}  # one audit per (policy, params, protocol, seed), shared by its cases
    for label, name, params, protocol, attack, (kind, param) in CASES:
        per_seed = []
        t0 = time.perf_counter()
        for s in range(seeds):
            key = (name, tuple(sorted(params.items())), protocol, s)
            if key not in audits:
                t1 = time.perf_counter()
                audits[key] = (dpaudit.audit(name, params=params, protocol=protocol, seed=s), time.perf_counter() - t1)
            a, secs = audits[key]
            found = [x for x in a.to_dict()["attacks"] if x["attack"] == attack]
            if not found:
                raise SystemExit(f"{label}: no {attack!r} bound at seed {s}")
            x = found[0]
            per_seed.append({"seed": s, "epsilon_lower": float(x["epsilon_lower"]), "verdict": a.verdict,
                             "mean_loss": x["details"].get("mean_loss_kl"), "max_loss": x["details"].get("max_loss"),
                             "audit_seconds": secs, "attack": x})
        lim = limits_of(kind, param, per_seed[0]["attack"])
        mean, top = _loss_facts(kind, param)
        bounds = [r["epsilon_lower"] for r in per_seed]
        rows.append({"case": label, "policy": name, "params": params, "protocol": protocol, "attack": attack,
                     "loss": {"kind": kind, "parameter": param, "mean": mean, "max": top},
                     "seed0": bounds[0], "min": min(bounds), "median": statistics.median(bounds), "max": max(bounds),
                     "verdicts": sorted({r["verdict"] for r in per_seed}),
                     "sampled_mean_loss": per_seed[0]["mean_loss"], "sampled_max_loss": per_seed[0]["max_loss"],
                     "per_seed": [{k: v for k, v in r.items() if k != "attack"} for r in per_seed],
                     "seconds": time.perf_counter() - t0, **lim,
                     "ratio_seed0": bounds[0] / lim["limit"] if lim["limit"] > 0 else None,
                     "ratio_median": statistics.median(bounds) / lim["limit"] if lim["limit"] > 0 else None})
        print(f"{label:34s} seed 0 {bounds[0]:.5g}  median {statistics.median(bounds):.5g}  "
              f"(min {min(bounds):.5g})  limit {lim['limit']:.5g}  exact {lim['exact']:.6g}", flush=True)
    return {"delta": DELTA, "seeds": seeds, "python": platform.python_version(), "rows": rows}


def _f(x, spec=".4g") -> str:
    return "-" if x is None else (format(x, spec) if isinstance(x, float) else str(x))


def markdown(res: dict) -> str:
    lines = ["# Lower bounds beside the statistical limit of their sample size", "",
             f"Generated by `python benchmarks/validation/limits.py --seeds {res['seeds']}`: each case is `dpaudit check policy "
             f"NAME --param ... --seed S` at the CLI's defaults (delta = {res['delta']:g}, confidence 0.95 split "
             f"between the audit's parts) for S = 0..{res['seeds'] - 1}; the limits come from "
             "`dpaudit.attacks.limits` for the test's sample size n (runs under d for the likelihood test, fresh "
             "views per side for a threshold test).", "",
             "* **limit**: the statistical limit, one test at the part's confidence: for the likelihood test the "
             "largest eps at which the Clopper-Pearson lower bound of the median count n delta(eps) exceeds delta "
             "(`likelihood_limit`), for a threshold test the best bound of the median error counts over the "
             "thresholds on the exact channel (`threshold_limit`).",
             "* **at its own error**: the same at the error the test actually spends on this bound (the likelihood's "
             "eps bound gets 0.8 of its part's budget, the Rényi orders the rest; a threshold test is corrected for "
             "the tests it counts), with the 5% and 95% quantiles of the bound's exact law for the likelihood test "
             "(its bound is an order statistic: P(bound <= eps) = P(Binomial(n, delta(eps)) < k)).",
             "* **sampled loss**: the mean (KL) and largest privacy loss of the seed-0 audit's runs, beside the "
             "analytic mechanism's (the premise of the limit).", "",
             "* **ratio**: the measured lower bound over the limit (seed 0; the median over seeds).", "",
             "| case (policy) | test | n | lower, seed 0 | lower over seeds: median (min-max) | limit | ratio: seed 0 "
             "(median) | at its own error: median (5%-95%) | exact eps(delta) | sampled loss: mean / max (analytic) |",
             "| --- | --- | ---: | ---: | --- | ---: | --- | --- | ---: | --- |"]
    for r in res["rows"]:
        own = f"{r['limit_own']:.5g}" + (f" ({r['q05']:.4g}-{r['q95']:.4g})" if r["q05"] is not None else "")
        loss = "-"
        if r["sampled_mean_loss"] is not None:
            loss = (f"{r['sampled_mean_loss']:.4g} / {r['sampled_max_loss']:.4g} ({r['loss']['mean']:.4g} / "
                    f"{_f(r['loss']['max'])})")
        ratio = "-" if r["ratio_seed0"] is None else f"{r['ratio_seed0']:.4f} ({r['ratio_median']:.4f})"
        lines.append(f"| {r['case']} (`{r['policy']}`) | {r['attack']} | {r['n']} | {r['seed0']:.5g} | {r['median']:.5g} "
                     f"({r['min']:.5g}-{r['max']:.5g}) | {r['limit']:.5g} | {ratio} | {own} | {r['exact']:.6g} | {loss} |")
    secs = [x["audit_seconds"] for r in res["rows"] for x in r["per_seed"]]
    lines += ["", f"Each audit took {min(secs):.1f}-{max(secs):.1f} s (machine shared; load noted in the commit)."]
    lines += ["", "Verdicts: " + "; ".join(f"{r['case']}: {', '.join(r['verdicts'])}" for r in res["rows"]) + ".", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default="limits")
    args = ap.parse_args()
    res = run(args.seeds)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    (RESULTS / f"{args.out}.md").write_text(markdown(res))


if __name__ == "__main__":
    main()
