"""Why jdp-glm's regret gap to its non-private twin scales like 1/eps: an ablation of its noise sources.

Sarmasarkar (2026) "Shuffle and Joint Differential Privacy for Generalized Linear Contextual Bandits" says
the gap should scale like 1/sqrt(eps); ``dpaudit reproduce glm-bandits`` measured a log-log
slope near -1. jdp-glm has two noise sources, both with scale ~ 1/eps at fixed delta:

* the binary trees for V and H (sigma_tree), whose noise the policy covers with the regulariser shift
  (lam + shift) I, shift ~ sigma_tree sqrt(levels)(2 sqrt(d) + sqrt(2 log 2T));
* the PGD gradients (sigma_grad; max_updates x pgd_steps releases share rho / 2).

The non-private twin also differs structurally (exact sums, 20 PGD steps instead of 5, no cap of 8 updates).
This script separates the pieces with **diagnostic variants that are not private** (never registered):

* ``private``: jdp-glm as shipped;
* ``gradient noise only``: the trees exact and no shift (sigma_tree = shift = 0), the PGD noise of eps;
* ``tree noise only``: the trees and shift of eps, exact PGD gradients;
* ``shift only``: exact trees and gradients, but the regulariser shift of eps (what the noise costs
  through the regulariser that covers it, without the noise itself);
* ``structure only``: no noise at all but the private policy's cap and 5 PGD steps (eps-free);
* ``twin``: jdp-glm-np (eps-free).

For each eps it reports the mean final regret; the gaps private - twin, private - structure only (the
effect of the noise alone), and each single-noise variant - structure only; and the log-log slope of each
gap against eps (least squares over eps, needs every gap > 0). Common random numbers: every curve uses
the same environment and policy seeds. Logistic link, d = 5, K = 20, S = 2.

Run:  python benchmarks/studies/eps_ablation.py [--horizon 5000] [--runs 30] [--eps 2 4 6 8] [--tag NAME]
(writes eps_ablation[-TAG].md and .json in benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from dpaudit.policies.glm import JointDPGLM, JointGLM
from dpaudit.reproduce.glm_bandits import run_built

RESULTS = Path(__file__).resolve().parents[1] / "results"
ENV = {"link": "logistic", "S": 2.0, "n_arms": 20, "dim": 5}


class Timed(JointDPGLM):
    """jdp-glm unchanged, plus the round of each run's first Criterion II update (``first``; T if none)."""

    def _reset(self) -> None:
        super()._reset()
        self.first = np.full(self.n_runs, self.horizon)

    def _pgd(self, t: int, idx: np.ndarray) -> None:
        self.first[idx] = np.minimum(self.first[idx], t)
        super()._pgd(t, idx)


class GradientNoiseOnly(Timed):
    """Diagnostic, NOT private: exact trees and no shift; PGD gradients noisy as for epsilon."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.sigma_tree, self.shift = 0.0, 0.0


class TreeNoiseOnly(Timed):
    """Diagnostic, NOT private: trees and shift as for epsilon; PGD gradients exact."""

    def _reset(self) -> None:
        super()._reset()
        self._grad_mech = None


class ShiftOnly(Timed):
    """Diagnostic, NOT private: exact trees and exact gradients, but the regulariser shift of epsilon."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.sigma_tree = 0.0  # the shift was computed from the calibrated sigma_tree and is kept

    def _reset(self) -> None:
        super()._reset()
        self._grad_mech = None


class StructureOnly(GradientNoiseOnly):
    """Diagnostic, NOT private: no noise anywhere, but jdp-glm's update cap and PGD steps."""

    def _reset(self) -> None:
        super()._reset()
        self._grad_mech = None


VARIANTS = {"private": Timed, "gradient noise only": GradientNoiseOnly, "tree noise only": TreeNoiseOnly,
            "shift only": ShiftOnly}


def slope(eps: list[float], gaps: list[float]) -> float:
    g = np.asarray(gaps)
    return float(np.polyfit(np.log(eps), np.log(g), 1)[0]) if np.all(g > 0) else float("nan")


def slope_ci(eps: list[float], gaps: list[np.ndarray], seed: int, B: int = 2000) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the slope, resampling runs (paired across eps: common random numbers)."""
    G = np.stack(gaps)  # (n_eps, runs)
    rng = np.random.default_rng([seed, 77])
    idx = rng.integers(0, G.shape[1], size=(B, G.shape[1]))
    means = G[:, idx].mean(axis=2)  # (n_eps, B)
    ok = np.all(means > 0, axis=0)
    if ok.sum() < 0.9 * B:
        return float("nan"), float("nan")
    x = np.log(eps) - np.mean(np.log(eps))
    sl = (x @ np.log(means[:, ok])) / (x @ x)
    return float(np.percentile(sl, 2.5)), float(np.percentile(sl, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--eps", type=float, nargs="+", default=[2.0, 4.0, 6.0, 8.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tag", default="")
    ap.add_argument("--max-updates", type=int, default=8, help="jdp-glm's cap on PGD updates (default 8, as shipped)")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    help="which of the noisy variants to run (default: all three)")
    args = ap.parse_args()
    T, runs, seed = args.horizon, args.runs, args.seed
    common = {"n_arms": ENV["n_arms"], "dim": ENV["dim"], "horizon": T, "link": ENV["link"]}
    private_kw = {"max_updates": args.max_updates}
    t0 = time.perf_counter()

    def final(pol) -> np.ndarray:
        r = run_built(pol, ENV, T, runs, seed)
        if isinstance(pol, Timed) and type(pol) is Timed:
            stats["updates"], stats["first"] = pol.updates.mean(), pol.first.mean()
            # regret accumulated before each run's first update (theta = 0 until then)
            stats["startup"] = r["curve"][np.arange(runs), np.maximum(pol.first, 1) - 1].mean()
        return r["curve"][:, -1]

    stats: dict[str, float] = {}
    twin = final(JointGLM(**common))
    # epsilon only sets noise scales, all zeroed here
    structure = final(StructureOnly(**common, **private_kw, epsilon=4.0)) if "gradient noise only" in args.variants else None
    rows = []
    for eps in args.eps:
        row = {"epsilon": eps}
        for label in args.variants:
            pol = VARIANTS[label](**common, **private_kw, epsilon=eps)
            if label == "private":
                row["sigma_tree"], row["sigma_grad"], row["shift"] = pol.sigma_tree, pol.sigma_grad, pol.shift
            row[label] = final(pol)
        row["updates"], row["first_update"] = stats.get("updates", float("nan")), stats.get("first", float("nan"))
        row["startup_regret"] = stats.get("startup", float("nan"))
        rows.append(row)
        print(f"eps {eps:g} done ({time.perf_counter() - t0:.0f} s)", flush=True)

    def mean_hw(x: np.ndarray) -> tuple[float, float]:
        return float(x.mean()), 1.96 * float(x.std(ddof=1)) / math.sqrt(x.size)

    gaps = {f"{v} - twin": [r[v] - twin for r in rows] for v in args.variants}
    if structure is not None and {"private", "gradient noise only", "tree noise only"} <= set(args.variants):
        gaps.update({
            "private - structure only (all noise)": [r["private"] - structure for r in rows],
            "gradient noise only - structure only": [r["gradient noise only"] - structure for r in rows],
            "tree noise only - structure only": [r["tree noise only"] - structure for r in rows],
        })
    eps = [r["epsilon"] for r in rows]
    result = {"horizon": T, "runs": runs, "seed": seed, "max_updates": args.max_updates, "twin": mean_hw(twin),
              "structure only": mean_hw(structure) if structure is not None else None,
              "rows": [{k: (mean_hw(v) if isinstance(v, np.ndarray) else v) for k, v in r.items()} for r in rows],
              "gaps": {k: [mean_hw(g) for g in v] for k, v in gaps.items()},
              "slopes": {k: slope(eps, [g.mean() for g in v]) for k, v in gaps.items()},
              "slope_ci": {k: slope_ci(eps, v, seed) for k, v in gaps.items()},
              "sigma_slope": slope(eps, [r["sigma_tree"] for r in rows])}
    result["seconds"] = time.perf_counter() - t0
    import sys

    cmd = "python benchmarks/studies/eps_ablation.py " + " ".join(sys.argv[1:])
    lines = [f"# jdp-glm's gap over epsilon, decomposed (`{cmd.strip()}`)", "",
             f"Logistic, d = 5, K = 20, S = 2, T = {T}, max_updates = {args.max_updates}, {runs} runs per cell, seed {seed}; "
             "mean final regret with 95% half-widths (the gaps are paired: common random numbers).", "",
             f"Twin (jdp-glm-np): {result['twin'][0]:.1f} ± {result['twin'][1]:.1f}."]
    if structure is not None:
        lines[-1] += (f" Structure only (no noise, no shift, the cap and 5 PGD steps): {result['structure only'][0]:.1f} ± "
                      f"{result['structure only'][1]:.1f}.")
    lines += ["", "| eps | sigma_tree | shift | sigma_grad | first update (round) | private's regret before it | updates | "
              + " | ".join(args.variants) + " |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              + " | ".join("---:" for _ in args.variants) + " |"]
    for r in result["rows"]:
        lines.append(f"| {r['epsilon']:g} | {r['sigma_tree']:.2f} | {r['shift']:.0f} | {r['sigma_grad']:.1f} | "
                     f"{r['first_update']:.0f} | {r['startup_regret']:.1f} | {r['updates']:.1f} | "
                     + " | ".join(f"{r[k][0]:.1f} ± {r[k][1]:.1f}" for k in args.variants) + " |")
    lines += ["", "| gap | " + " | ".join(f"eps = {e:g}" for e in eps) + " | log-log slope [95% bootstrap] |",
              "| --- | " + " | ".join("---:" for _ in eps) + " | ---: |"]
    for k, v in result["gaps"].items():
        lo, hi = result["slope_ci"][k]
        lines.append(f"| {k} | " + " | ".join(f"{m:.1f} ± {h:.1f}" for m, h in v)
                     + f" | {result['slopes'][k]:.2f} [{lo:.2f}, {hi:.2f}] |")
    lines += ["", f"Noise scale sigma_tree (and sigma_grad) against eps: log-log slope {result['sigma_slope']:.2f} "
              "(the tight zCDP conversion at delta = 1e-5).", "",
              f"Total {result['seconds']:.0f} s on the shared 2-core machine."]
    name = "eps_ablation" + (f"-{args.tag}" if args.tag else "")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
