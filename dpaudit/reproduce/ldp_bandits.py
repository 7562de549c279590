"""``dpaudit reproduce ldp-bandits``: the price of local privacy that seed 003's theorems predict.

Seed 003 (Zheng et al. 2020) has no experiments. Its Thm 11 says Alg. 1 with a non-private black box
A keeps A's regret up to a factor: in the stochastic setting O(sum_i log T / (Delta_i eps^2) log 1/delta)
for Tsallis-INF, i.e. the same log T growth with the variance proxy 1/4 + sigma^2 instead of 1/4. This
runs that experiment: regret against T for Alg. 1 with UCB (``ldp-ucb``) and with Tsallis-INF
(``ldp-tsallis-inf``) at eps in {0.5, 1, 2, 4} (delta = 1e-5), beside their non-private twins
(``ucb-onepoint``, ``tsallis-inf``) and beside a *central*-DP policy at the same (eps, delta):
AdaC-UCB (seed 001) with the largest rho whose zCDP converts to eps at delta = 1e-5.

Setting: seed 001 Sec. VII-A's five Bernoulli arms (0.75, 0.625, 0.5, 0.375, 0.25), 100 runs,
T = 10^4 with checkpoints at 10^2..10^4, every policy from the same seed (common random numbers: the
same environment stream). AdaC-UCB uses beta = 1 as in seed 001's experiments. Not run here (see
the README): Alg. 3 (GLOC-LDP, not implemented) and Alg. 5 (implemented, audited, but its regret
experiment needs a contextual environment run that did not fit the time budget).
Figures and tables go to ``--out`` (default ``reports``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ldp_bandits", "MEANS", "EPSILONS"]

MEANS = (0.75, 0.625, 0.5, 0.375, 0.25)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-5


def _run(name: str, params: dict[str, Any], horizon: int, runs: int, seed: int, cps: list[int]) -> dict[str, Any]:
    from dpaudit.environments import BernoulliBandit
    from dpaudit.policies import make_policy
    from dpaudit.simulate import simulate

    pol = make_policy(name, {k: str(v) for k, v in params.items()})
    res = simulate(pol, BernoulliBandit(MEANS), horizon, runs, seed, checkpoints=cps)
    R = res.regret_at
    half = 1.96 * R.std(axis=0, ddof=1) / math.sqrt(runs)
    return {"policy": name, "params": params, "checkpoints": res.checkpoints.tolist(), "mean": R.mean(axis=0).tolist(),
            "ci95": half.tolist(), "seconds": res.seconds}


def ldp_bandits(args: argparse.Namespace) -> int:
    from dpaudit.accountants import zcdp_rho_for_epsilon

    quick = bool(getattr(args, "quick", False))
    seed = int(getattr(args, "seed", 0))
    horizon, runs = (1000, 20) if quick else (10_000, 100)
    eps_grid = (1.0, 4.0) if quick else EPSILONS
    cps = [c for c in (100, 300, 1000, 3000, 10_000) if c <= horizon]
    t0 = time.perf_counter()
    K = len(MEANS)
    rows: list[dict[str, Any]] = []
    for box, twin in (("ldp-ucb", "ucb-onepoint"), ("ldp-tsallis-inf", "tsallis-inf")):
        rows.append({**_run(twin, {"n_arms": K}, horizon, runs, seed, cps), "family": box, "epsilon": None})
        for eps in eps_grid:
            rows.append({**_run(box, {"n_arms": K, "epsilon": eps, "delta": DELTA}, horizon, runs, seed, cps),
                         "family": box, "epsilon": eps})
    for eps in eps_grid:
        rho = zcdp_rho_for_epsilon(eps, DELTA)
        rows.append({**_run("adac-ucb", {"n_arms": K, "rho": rho, "beta": 1.0}, horizon, runs, seed, cps),
                     "family": "central", "epsilon": eps})
    out = {"experiment": "ldp-bandits", "means": MEANS, "delta": DELTA, "horizon": horizon, "runs": runs, "seed": seed,
           "command": f"dpaudit reproduce ldp-bandits --seed {seed}" + (" --quick" if quick else ""), "rows": rows,
           "seconds": time.perf_counter() - t0}
    folder = Path(getattr(args, "out", "reports"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ldp_bandits.json").write_text(json.dumps(out, indent=2))
    md = _table(out)
    (folder / "ldp_bandits.md").write_text(md)
    _figure(out, folder / "ldp_bandits.png")
    if getattr(args, "json", False):
        print(json.dumps(out, indent=2))
    else:
        print(md)
        print(f"figure: {folder / 'ldp_bandits.png'}  ({out['seconds']:.0f} s)")
    return 0


def _label(r: dict[str, Any]) -> str:
    if r["family"] == "central":
        return f"adac-ucb (central, rho = {r['params']['rho']:.4g})"
    return r["policy"]


def _table(out: dict[str, Any]) -> str:
    cps = out["rows"][0]["checkpoints"]
    lines = [f"# Seed 003: regret of LDP bandits against T (Bernoulli {', '.join(map(str, out['means']))})", "",
             f"`{out['command']}` ({out['runs']} runs, delta = {out['delta']:g}, mean regret +- 95% half-width; "
             f"{out['seconds']:.0f} s on a 2-core machine shared with other jobs).", "",
             "| policy | eps | " + " | ".join(f"T = {c}" for c in cps) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in cps) + " |"]
    for r in out["rows"]:
        eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
        cells = " | ".join(f"{m:.1f} +- {h:.1f}" for m, h in zip(r["mean"], r["ci95"]))
        lines.append(f"| {_label(r)} | {eps} | {cells} |")
    return "\n".join(lines) + "\n"


def _figure(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colours = dict(zip(EPSILONS, ("tab:red", "tab:orange", "tab:green", "tab:blue")))
    for ax, box in zip(axes, ("ldp-ucb", "ldp-tsallis-inf")):
        for r in out["rows"]:
            x = r["checkpoints"]
            if r["family"] == box:
                style = dict(color="black", lw=2, label=f"{r['policy']} (non-private)") if r["epsilon"] is None else \
                    dict(color=colours.get(r["epsilon"], "grey"), label=f"{box}, eps = {r['epsilon']:g}")
                ax.plot(x, r["mean"], marker="o", **style)
            elif r["family"] == "central":
                ax.plot(x, r["mean"], ls="--", color=colours.get(r["epsilon"], "grey"),
                        label=f"adac-ucb (central), eps = {r['epsilon']:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("T")
        ax.set_title(f"Alg. 1 with {'UCB' if box == 'ldp-ucb' else 'Tsallis-INF'} (local DP) vs central AdaC-UCB")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("mean regret")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
