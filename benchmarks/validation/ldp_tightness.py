"""How tight the local audit's black-box channel attack is on a Gaussian channel with known exact eps.

For each (eps, delta): a Gaussian channel on [0, 1] calibrated *exactly* (dpaudit.accountants'
gaussian_sigma, so its exact epsilon at delta is eps), attacked black-box by
dpaudit.runner.local.channel_attack with z = 0 vs z' = 1: 10^6 selection samples per side pick the
threshold, 10^7 fresh samples per side give the Clopper-Pearson bound (confidence 0.95). Beside it:
the best any threshold test can reach with 10^7 samples per side (the exact error rates of every
threshold plugged into the same bound). Writes benchmarks/results/ldp_tightness.{json,md}.

    python benchmarks/validation/ldp_tightness.py [--fresh 10000000] [--seed 0] [--deltas 1e-5 1e-3 1e-2]
        [--out ldp_tightness]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

from dpaudit.accountants.gaussian import gaussian_epsilon, gaussian_sigma
from dpaudit.attacks.bounds import oracle_threshold_bound
from dpaudit.runner.local import channel_attack
from dpaudit.mechanisms import GaussianChannel


class _Chan:
    """A minimal plug-in: the channel contract only."""

    def __init__(self, sigma: float) -> None:
        self._c = GaussianChannel((0.0, 1.0), sigma)
        self.domain = (0.0, 1.0)

    def channel(self, z, rng):
        return self._c.send(z, rng)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fresh", type=int, default=10_000_000)
    ap.add_argument("--select", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deltas", type=float, nargs="+", default=[1e-5, 1e-3, 1e-2])
    ap.add_argument("--out", default="ldp_tightness", help="stem of the .json/.md written in benchmarks/results/")
    args = ap.parse_args()
    rows = []
    for delta in args.deltas:
        for eps in (0.5, 1.0, 2.0, 4.0):
            sigma = gaussian_sigma(eps, delta)
            exact = gaussian_epsilon(delta, sigma).epsilon
            thr = np.linspace(-12 * sigma, 12 * sigma + 1, 400_001)
            oracle = oracle_threshold_bound(norm.sf(thr / sigma), norm.cdf((thr - 1) / sigma), args.fresh, delta, 0.95)
            t0 = time.perf_counter()
            res = channel_attack(_Chan(sigma), delta=delta, confidence=0.95, n_fresh=args.fresh, n_select=args.select,
                                 seed=np.random.SeedSequence([args.seed, int(eps * 10), int(-np.log10(delta))]))
            secs = time.perf_counter() - t0
            rows.append({"epsilon_exact": exact, "delta": delta, "sigma": sigma, "black_box": res.epsilon_lower,
                         "ratio": res.epsilon_lower / exact, "oracle_threshold": oracle, "fpr": res.details["fpr"],
                         "fnr": res.details["fnr"], "seconds": secs})
            print(rows[-1], flush=True)
    results = Path(__file__).resolve().parents[1] / "results"
    (results / f"{args.out}.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))
    lines = ["# Black-box channel attack vs the exact epsilon of a Gaussian channel", "",
             f"`python benchmarks/validation/ldp_tightness.py --fresh {args.fresh} --select {args.select} --seed {args.seed} "
             f"--deltas {' '.join(f'{d:g}' for d in args.deltas)} --out {args.out}` "
             "(confidence 0.95; 2-core machine shared with other jobs, so the seconds are indicative).", "",
             "| delta | exact eps | sigma | black-box lower bound | ratio | best threshold test (oracle) | s |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['delta']:g} | {r['epsilon_exact']:.4g} | {r['sigma']:.4g} | {r['black_box']:.4f} | "
                     f"{r['ratio']:.3f} | {r['oracle_threshold']:.4f} | {r['seconds']:.1f} |")
    (results / f"{args.out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
