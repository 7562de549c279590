"""``dpaudit reproduce ldp-bandits``: the price of local privacy that the theorems of Zheng et al. (2020) predict.

Zheng, Cai, Huang, Li & Wang (2020), "Locally Differentially Private (Contextual) Bandits Learning", has no
experiments. Its Thm 11 says Alg. 1 with a non-private black box A keeps A's regret up to a factor: in the
stochastic setting O(sum_i log T / (Delta_i eps^2) log 1/delta) for Tsallis-INF, i.e. the same log T growth
with the variance proxy 1/4 + sigma^2 instead of 1/4. This runs that experiment: regret against T for Alg. 1
with UCB (``ldp-ucb``) and with Tsallis-INF (``ldp-tsallis-inf``) at eps in {0.5, 1, 2, 4} (delta = 1e-5),
beside their non-private twins (``ucb-onepoint``, ``tsallis-inf``) and beside a *central*-DP policy at the
same (eps, delta): AdaC-UCB (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits") with the
largest rho whose zCDP converts to eps at delta = 1e-5.

Setting: the five Bernoulli arms of Azize & Basu (2023a), Sec. VII-A (0.75, 0.625, 0.5, 0.375, 0.25), 100
runs, T = 10^4 with checkpoints at 10^2..10^4, every policy from the same seed (common random numbers: the
same environment stream). AdaC-UCB uses beta = 1 as in the experiments of Azize & Basu (2023a).

Contextual panels (Zheng et al. 2020, Sec. 4, regret O~(T^(3/4)/eps)): Alg. 5 (``ldp-linucb`` vs ``linucb``)
on the contextual linear bandit of Azize & Basu (2023a) (K = 10, d = 3, fresh contexts N(1/sqrt(d) 1, I/10)
rescaled to norm <= 1, theta* on the unit sphere, rewards in {-1, +1} with mean <x, theta*>), and Alg. 3
(``ldp-gloc`` vs ``gloc``) on the same contexts with logistic rewards y ~ Bernoulli(g(<x, theta*>)), regret in
g; 50 runs, T = 3000 (the per-step d x d solves make these the slow part). There is no central-DP contextual
policy at the same (eps, delta) here (Zheng et al. 2020, Sec. 1: central DP costs Omega(T) regret in
contextual bandits), so these panels show the twin only.
BCO panels (Zheng et al. 2020, Sec. 3, Table 1): Alg. 1 with FKM (``ldp-bco-fkm`` vs ``bco-fkm``, expected
O~(T^(3/4)/eps)) and Alg. 2 (``ldp-bco-2pt`` vs ``bco-2pt``, expected O~(d^3 sqrt(T)/eps^2)) on an
oblivious adversarial sequence of linear losses f_t(x) = <c_t, x> on the unit disc (d = 2,
c_t = 0.5 v + 0.25 w_t with v, w_t unit vectors drawn once from the seed; :meth:`dpaudit.bco.LossSequence.adversarial`),
100 runs; each T in {300, 1000, 3000, 10^4} is a separate game (both algorithms tune their parameters
to T), and the slope of log mean regret against log T is fitted by least squares over those four T.
Figures and tables go to ``--out`` (default ``reports``).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from dpaudit.jsontypes import JSONObject
from dpaudit.papers import PAPERS

__all__ = ["ldp_bandits", "MEANS", "EPSILONS"]

MEANS = (0.75, 0.625, 0.5, 0.375, 0.25)
EPSILONS = (0.5, 1.0, 2.0, 4.0)
DELTA = 1e-5


def _logistic_env():
    """The contextual action sets of Azize & Basu (2023a) with logistic rewards y ~ Bernoulli(g(<x, theta*>)), regret in g."""
    from dpaudit.environments import ContextualLinearBandit

    class LogisticContextual(ContextualLinearBandit):
        def rewards(self, t, actions):
            self._current(t)
            mu = self._mu[np.arange(self.n_runs), actions]
            return (self.rng.random(mu.shape) < 1.0 / (1.0 + np.exp(-mu))).astype(float)

        def means(self, t):
            self._current(t)
            return 1.0 / (1.0 + np.exp(-self._mu))

        def reward_bounds(self, horizon=None):
            return 0.0, 1.0

        def describe(self):
            return f"logistic contextual bandit (K={self.n_arms}, d={self.dim})"

    return LogisticContextual(10, 3, noise="bernoulli", normalize=True)


def _env(kind: str):
    from dpaudit.environments import BernoulliBandit, ContextualLinearBandit

    if kind == "mab":
        return BernoulliBandit(MEANS)
    if kind == "linear":
        return ContextualLinearBandit(10, 3, noise="bernoulli", normalize=True)
    return _logistic_env()


def _run(name: str, params: dict[str, object], horizon: int, runs: int, seed: int, cps: list[int],
         env: str = "mab") -> JSONObject:
    from dpaudit.policies import make_policy
    from dpaudit.simulate import simulate

    pol = make_policy(name, {k: str(v) for k, v in params.items()})
    res = simulate(pol, _env(env), horizon, runs, seed, checkpoints=cps)
    R = res.regret_at
    half = 1.96 * R.std(axis=0, ddof=1) / math.sqrt(runs)
    return {"policy": name, "params": params, "checkpoints": res.checkpoints.tolist(), "mean": R.mean(axis=0).tolist(),
            "ci95": half.tolist(), "seconds": res.seconds}


BCO_HORIZONS = (300, 1000, 3000, 10_000)


def _run_bco(name: str, params: dict[str, object], horizons: tuple[int, ...], runs: int, seed: int) -> JSONObject:
    """Mean regret of a BCO policy at each T (a separate game per T) and the fitted log-log slope."""
    from dpaudit.environments import LossSequence
    from dpaudit.simulate import simulate_bco
    from dpaudit.policies import make_policy

    means, halves, secs = [], [], 0.0
    for T in horizons:
        pol = make_policy(name, {**{k: str(v) for k, v in params.items()}, "horizon": str(T)})
        res = simulate_bco(pol, LossSequence.adversarial(pol.d, T, seed=seed), runs, seed)
        R = res["regret"]
        means.append(float(R.mean()))
        halves.append(1.96 * float(R.std(ddof=1)) / math.sqrt(runs))
        secs += res["seconds"]
    slope = float(np.polyfit(np.log(horizons), np.log(np.maximum(means, 1e-12)), 1)[0]) if len(horizons) > 1 else None
    return {"policy": name, "params": params, "checkpoints": list(horizons), "mean": means, "ci95": halves,
            "slope": slope, "seconds": secs}


def ldp_bandits(args: argparse.Namespace) -> int:
    from dpaudit.accountants import zcdp_rho_for_epsilon

    quick = bool(getattr(args, "quick", False))
    seed = int(getattr(args, "seed", 0))
    horizon, runs = (1000, 20) if quick else (10_000, 100)
    eps_grid = (1.0, 4.0) if quick else EPSILONS
    cps = [c for c in (100, 300, 1000, 3000, 10_000) if c <= horizon]
    t0 = time.perf_counter()
    from dpaudit.progress import counted

    run, bar = counted(_run, "ldp-bandits", 5 * len(eps_grid) + 4)
    K = len(MEANS)
    rows: list[JSONObject] = []
    for box, twin in (("ldp-ucb", "ucb-onepoint"), ("ldp-tsallis-inf", "tsallis-inf")):
        rows.append({**run(twin, {"n_arms": K}, horizon, runs, seed, cps), "family": box, "epsilon": None})
        for eps in eps_grid:
            rows.append({**run(box, {"n_arms": K, "epsilon": eps, "delta": DELTA}, horizon, runs, seed, cps),
                         "family": box, "epsilon": eps})
    for eps in eps_grid:
        rho = zcdp_rho_for_epsilon(eps, DELTA)
        rows.append({**run("adac-ucb", {"n_arms": K, "rho": rho, "beta": 1.0}, horizon, runs, seed, cps),
                     "family": "central", "epsilon": eps})
    h2, r2 = (300, 10) if quick else (3000, 50)
    cps2 = [c for c in (100, 300, 1000, 3000) if c <= h2]
    for box, twin, env in (("ldp-linucb", "linucb", "linear"), ("ldp-gloc", "gloc", "logistic")):
        base = {"n_arms": 10, "dim": 3, "horizon": h2}
        rows.append({**run(twin, base, h2, r2, seed, cps2, env), "family": box, "epsilon": None})
        for eps in eps_grid:
            rows.append({**run(box, {**base, "epsilon": eps, "delta": DELTA}, h2, r2, seed, cps2, env),
                         "family": box, "epsilon": eps})
    bar.close()
    horizons, r3 = ((300, 1000), 20) if quick else (BCO_HORIZONS, 100)
    run_bco, bar = counted(_run_bco, "ldp-bandits BCO", 2 * (len(eps_grid) + 1))
    for box, twin in (("ldp-bco-fkm", "bco-fkm"), ("ldp-bco-2pt", "bco-2pt")):
        rows.append({**run_bco(twin, {"d": 2}, horizons, r3, seed), "family": box, "epsilon": None})
        for eps in eps_grid:
            rows.append({**run_bco(box, {"d": 2, "epsilon": eps, "delta": DELTA}, horizons, r3, seed),
                         "family": box, "epsilon": eps})
    bar.close()
    out = {"experiment": "ldp-bandits", "paper": PAPERS["zheng-2020"].narrative,
           "reference": PAPERS["zheng-2020"].reference, "means": MEANS, "delta": DELTA, "horizon": horizon, "runs": runs, "seed": seed,
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


def _label(r: JSONObject) -> str:
    if r["family"] == "central":
        return f"adac-ucb (central, rho = {r['params']['rho']:.4g})"
    return r["policy"]


def _table(out: JSONObject) -> str:
    lines = [f"# {out['paper']}: regret of LDP bandits against T", "",
             f"Reference: {out['reference']}", "",
             f"`{out['command']}` (delta = {out['delta']:g}, mean regret +- 95% half-width; {out['seconds']:.0f} s on a "
             "2-core machine shared with other jobs).", ""]
    panels = [("MAB: Bernoulli " + ", ".join(map(str, out["means"])) + f", {out['runs']} runs",
               ("ldp-ucb", "ldp-tsallis-inf", "central")),
              ("contextual: Alg. 5 on the linear, Alg. 3 on the logistic contextual bandit (K = 10, d = 3)",
               ("ldp-linucb", "ldp-gloc")),
              ("BCO: Alg. 1 with FKM (expected slope 3/4) and Alg. 2 (expected slope 1/2) on oblivious linear losses "
               "on the unit disc, one game per T; last column: fitted slope of log regret against log T",
               ("ldp-bco-fkm", "ldp-bco-2pt"))]
    for title, fams in panels:
        rows = [r for r in out["rows"] if r["family"] in fams]
        if not rows:
            continue
        cps = rows[0]["checkpoints"]
        slopes = "slope" in rows[0]
        lines += [f"## {title}", "", "| policy | eps | " + " | ".join(f"T = {c}" for c in cps) + (" | slope |" if slopes else " |"),
                  "| --- | ---: | " + " | ".join("---:" for _ in cps) + (" | ---: |" if slopes else " |")]
        for r in rows:
            eps = "-" if r["epsilon"] is None else f"{r['epsilon']:g}"
            cells = " | ".join(f"{m:.1f} +- {h:.1f}" for m, h in zip(r["mean"], r["ci95"]))
            if slopes:
                cells += " | -" if r.get("slope") is None else f" | {r['slope']:.2f}"
            lines.append(f"| {_label(r)} | {eps} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _figure(out: JSONObject, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(3, 2, figsize=(11, 12.6))
    axes = grid.ravel()
    colours = dict(zip(EPSILONS, ("tab:red", "tab:orange", "tab:green", "tab:blue")))
    titles = {"ldp-ucb": "Alg. 1 with UCB (local) vs central AdaC-UCB",
              "ldp-tsallis-inf": "Alg. 1 with Tsallis-INF (local) vs central AdaC-UCB",
              "ldp-linucb": "Alg. 5, LDP LinUCB (linear contextual)", "ldp-gloc": "Alg. 3, GLOC-LDP (logistic contextual)",
              "ldp-bco-fkm": "Alg. 1 with FKM (BCO, one point; one game per T)",
              "ldp-bco-2pt": "Alg. 2 (BCO, two points; one game per T)"}
    for ax, box in zip(axes, ("ldp-ucb", "ldp-tsallis-inf", "ldp-linucb", "ldp-gloc", "ldp-bco-fkm", "ldp-bco-2pt")):
        for r in out["rows"]:
            x = r["checkpoints"]
            if r["family"] == box:
                style = dict(color="black", lw=2, label=f"{r['policy']} (non-private)") if r["epsilon"] is None else \
                    dict(color=colours.get(r["epsilon"], "grey"), label=f"{box}, eps = {r['epsilon']:g}")
                ax.plot(x, r["mean"], marker="o", **style)
            elif r["family"] == "central" and box in ("ldp-ucb", "ldp-tsallis-inf"):
                ax.plot(x, r["mean"], ls="--", color=colours.get(r["epsilon"], "grey"),
                        label=f"adac-ucb (central), eps = {r['epsilon']:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("T")
        ax.set_title(titles[box], fontsize=9)
        ax.set_ylabel("mean regret")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
