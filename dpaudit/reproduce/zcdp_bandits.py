"""``dpaudit reproduce zcdp-bandits``: Azize & Basu (2023a), Fig. 4 (a)-(c), the price of rho-zCDP over rho and time.

The paper is Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits". For each setting of its
Sec. VII-A a private policy is run beside its non-private twin from the same seed (common random numbers: the
same environment stream), and two things are reported, as in the paper's figure:

* left: Reg_priv - Reg_nonpriv against rho, at several horizons T (with 95% intervals of the
  mean paired difference over runs);
* right: the price of privacy PoP(t) = (Reg_priv(t) - Reg_nonpriv(t)) / Reg_nonpriv(t) over time
  for three values of rho.

Settings (Azize & Basu 2023a, Sec. VII-A, 100 runs each):

* (a) AdaC-UCB vs UCB with the same episodes and forgetting (``adac-ucb`` vs ``ucb-episodes``);
  5 Bernoulli arms 0.75/0.625/0.5/0.375/0.25; beta = 1 as in the paper's experiments (its
  Theorem 10 needs beta > 3, so the regret bound does not cover these runs); T up to 10^7.
* (b) AdaC-GOPE vs GOPE (``adac-gope`` vs ``gope``): K = 10 actions and theta* on the unit sphere
  of R^3, delta = 0.001; T up to 10^7.
* (c) AdaC-OFUL vs RS-OFUL (``adac-oful`` vs ``rs-oful``): K = 10, d = 3, lambda = 0.1, C = 1,
  delta = 0.001, fresh contexts from N((1/sqrt d) 1, I/10) each step; T up to 10^5.

Deviation, stated in the output: the paper uses N(0, 1) reward noise in (b) and (c), but the
private GOPE/OFUL policies' sensitivity needs rewards in [-1, 1] (Azize & Basu 2023a, Assumption 1), so they
refuse Gaussian rewards; we use rewards in {-1, +1} with the same means (also 1-subgaussian), and
in (c) contexts rescaled to norm <= 1 (Assumption 1 again). Both twins see the same rewards.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from dpaudit.errors import DPAuditError
from dpaudit.jsontypes import JSONObject
from dpaudit.papers import PAPERS

if TYPE_CHECKING:
    from dpaudit.environments import Environment

__all__ = ["zcdp_bandits", "run_panel"]

UCB_MEANS = (0.75, 0.625, 0.5, 0.375, 0.25)


def _registered(name: str) -> bool:
    from dpaudit.policies import get_policy_class

    try:
        get_policy_class(name)
        return True
    except DPAuditError:
        return False


def _ci(x: np.ndarray) -> tuple[float, float, float]:
    m = float(np.mean(x))
    half = 1.96 * float(np.std(x, ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0
    return m, m - half, m + half


def run_panel(
    key: str,
    title: str,
    env_factory: Callable[[], Environment],
    private: str,
    private_params: dict[str, object],
    twin: str,
    twin_params: dict[str, object],
    horizon: int,
    horizons: list[int],
    rhos: list[float],
    pop_rhos: list[float],
    runs: int,
    seed: int,
    n_curve: int = 40,
    notes: list[str] | None = None,
    progress: Callable[[], None] | None = None,
) -> JSONObject:
    """Run one panel: the twin once, the private policy for every rho; paired differences and PoP."""
    from dpaudit.policies import make_policy
    from dpaudit.simulate import simulate

    panel: JSONObject = {"key": key, "title": title, "private": private, "twin": twin, "horizon": horizon,
                             "horizons": horizons, "rhos": rhos, "pop_rhos": pop_rhos, "runs": runs,
                             "seed": seed, "notes": list(notes or [])}
    missing = [n for n in (private, twin) if not _registered(n)]
    if missing:
        panel["missing"] = missing
        panel["notes"].append(f"skipped: policies not registered: {', '.join(missing)}")
        return panel
    t0 = time.perf_counter()
    curve = np.unique(np.linspace(horizon / n_curve, horizon, n_curve).round().astype(np.int64))
    cps = np.unique(np.concatenate([curve, np.asarray(horizons, dtype=np.int64)]))
    env = env_factory()
    panel["environment"] = env.describe()
    base = simulate(make_policy(twin, twin_params), env, horizon, runs, seed, checkpoints=cps)
    if progress is not None:  # one tick per simulation (the progress bar of `dpaudit reproduce`)
        progress()
    panel["path"] = base.path
    col = {int(c): i for i, c in enumerate(base.checkpoints)}
    panel["nonpriv_regret"] = {str(T): _ci(base.regret_at[:, col[T]]) for T in horizons}
    diff: dict[str, dict[str, tuple[float, float, float]]] = {}
    pop: dict[str, list[float]] = {}
    priv_regret: dict[str, dict[str, tuple[float, float, float]]] = {}
    for rho in sorted(set(rhos) | set(pop_rhos)):
        res = simulate(make_policy(private, dict(private_params, rho=rho)), env, horizon, runs, seed, checkpoints=cps)
        if progress is not None:
            progress()
        d = res.regret_at - base.regret_at
        if rho in rhos:
            diff[f"{rho:g}"] = {str(T): _ci(d[:, col[T]]) for T in horizons}
            priv_regret[f"{rho:g}"] = {str(T): _ci(res.regret_at[:, col[T]]) for T in horizons}
        if rho in pop_rhos:
            nonpriv = base.regret_at[:, [col[int(c)] for c in curve]].mean(axis=0)
            gap = d[:, [col[int(c)] for c in curve]].mean(axis=0)
            pop[f"{rho:g}"] = (gap / np.where(nonpriv > 0, nonpriv, np.nan)).tolist()
    panel.update(diff=diff, priv_regret=priv_regret, pop=pop, pop_t=curve.tolist(), seconds=time.perf_counter() - t0)
    return panel


def _plot_panel(panel: JSONObject, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    rhos = [float(r) for r in panel["diff"]]
    for T in panel["horizons"]:
        m = np.array([panel["diff"][f"{r:g}"][str(T)][0] for r in rhos])
        lo = np.array([panel["diff"][f"{r:g}"][str(T)][1] for r in rhos])
        hi = np.array([panel["diff"][f"{r:g}"][str(T)][2] for r in rhos])
        ax1.errorbar(rhos, m, yerr=[m - lo, hi - m], marker="o", capsize=3, label=f"T = {T:.0e}")
    ax1.axhline(0.0, color="grey", lw=0.8)
    ax1.set_xscale("log")
    ax1.set_xlabel("budget rho")
    ax1.set_ylabel("Reg_priv - Reg_nonpriv")
    ax1.legend()
    t = np.asarray(panel["pop_t"])
    for r, v in panel["pop"].items():
        ax2.plot(t, v, label=f"rho = {r}")
    ax2.axhline(0.0, color="grey", lw=0.8)
    ax2.set_xlabel("step t")
    ax2.set_ylabel("PoP = (Reg_priv - Reg_nonpriv) / Reg_nonpriv")
    ax2.legend()
    fig.suptitle(f"{panel['title']}: {panel['private']} vs {panel['twin']}, {panel['runs']} runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _settings(quick: bool) -> list[dict[str, object]]:  # run_panel's keyword arguments
    from dpaudit.environments import BernoulliBandit, make_environment

    runs = 100
    if quick:
        ucb_T, ucb_Ts = 10**5, [10**3, 10**4, 10**5]
        gope_T, gope_Ts = 10**6, [10**4, 10**5, 10**6]
        oful_T, oful_Ts, oful_runs = 300, [100, 300], 10
        rhos = [0.01, 0.1, 1.0, 10.0]
        oful_rhos = [0.1, 1.0]
    else:
        ucb_T, ucb_Ts = 10**7, [10**5, 10**6, 10**7]
        gope_T, gope_Ts = 10**7, [10**4, 10**5, 10**6]
        oful_T, oful_Ts, oful_runs = 10**5, [10**3, 10**4, 10**5], runs
        rhos = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
        oful_rhos = [0.1, 0.5, 1.0, 5.0]
    return [
        dict(key="ucb", title="(a) finite-armed bandits", env_factory=lambda: BernoulliBandit(UCB_MEANS),
             private="adac-ucb", private_params={"n_arms": 5, "beta": 1.0}, twin="ucb-episodes",
             twin_params={"n_arms": 5, "beta": 1.0}, horizon=ucb_T, horizons=ucb_Ts, rhos=rhos,
             pop_rhos=[0.1, 0.5, 1.0], runs=runs,
             notes=["beta = 1 as in Azize & Basu (2023a), Sec. VII-A; its regret theorem (Thm 10) needs beta > 3, "
                    "so these runs are outside the bound's assumptions"]),
        dict(key="gope", title="(b) linear bandits", env_factory=lambda: make_environment(
                 "linear", n_arms=10, dim=3, noise="bernoulli"),
             private="adac-gope", private_params={"n_arms": 10, "dim": 3, "delta": 0.001}, twin="gope",
             twin_params={"n_arms": 10, "dim": 3, "delta": 0.001}, horizon=gope_T, horizons=gope_Ts, rhos=rhos,
             pop_rhos=[0.01, 0.1, 1.0], runs=runs,
             notes=["rewards in {-1, +1} with mean <theta*, a> instead of the paper's N(0, 1) noise: the private "
                    "policy's sensitivity needs |r| <= 1 (Azize & Basu 2023a, Assumption 1)"]),
        dict(key="oful", title="(c) contextual linear bandits", env_factory=lambda: make_environment(
                 "contextual-linear", n_arms=10, dim=3, noise="bernoulli", normalize=True),
             private="adac-oful", private_params={"n_arms": 10, "dim": 3, "lam": 0.1, "C": 1.0, "delta": 0.001},
             twin="rs-oful", twin_params={"n_arms": 10, "dim": 3, "lam": 0.1, "C": 1.0, "delta": 0.001},
             horizon=oful_T, horizons=oful_Ts, rhos=oful_rhos, pop_rhos=[r for r in (0.1, 0.5, 1.0) if r in oful_rhos],
             runs=oful_runs,
             notes=["rewards in {-1, +1} instead of N(0, 1) noise and contexts rescaled to norm <= 1: the private "
                    "policy's sensitivity needs |r| <= 1 and ||a|| <= 1 (Azize & Basu 2023a, Assumption 1)",
                    *(["quick mode: 10 runs"] if quick else [])]),
    ]


def _findings(panel: JSONObject) -> list[str]:
    """Sentences on the two trends of Azize & Basu (2023a), Sec. VII-B, read off the numbers."""
    if "diff" not in panel:
        return []
    out = []
    Tmax = str(panel["horizons"][-1])
    rhos = sorted(panel["diff"], key=float)
    lo_r, hi_r = rhos[0], rhos[-1]
    d_lo, d_hi = panel["diff"][lo_r][Tmax][0], panel["diff"][hi_r][Tmax][0]
    out.append(f"at T = {int(Tmax):.0e}, Reg_priv - Reg_nonpriv falls from {d_lo:.1f} (rho = {lo_r}) to {d_hi:.1f} "
               f"(rho = {hi_r}); non-private regret {panel['nonpriv_regret'][Tmax][0]:.1f}")
    t = panel["pop_t"]
    for r, v in panel["pop"].items():
        v = np.asarray(v, dtype=float)
        i0 = max(0, len(t) // 10 - 1)
        out.append(f"PoP for rho = {r}: {v[i0]:.3f} at t = {t[i0]:.0e}, {v[-1]:.3f} at t = {t[-1]:.0e}")
    return out


def zcdp_bandits(args: argparse.Namespace) -> int:
    """Azize & Basu (2023a), Fig. 4 (a)-(c): figures and a table of numbers in ``args.out``."""
    quick = bool(getattr(args, "quick", False))
    seed = int(getattr(args, "seed", 0))
    out = Path(getattr(args, "out", "reports"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DPAuditError(f"cannot create the output folder {str(out)!r}: {exc}.") from exc
    t0 = time.perf_counter()
    panels = []
    from dpaudit.progress import ProgressBar

    settings = list(_settings(quick))
    total = sum(1 + len(set(s["rhos"]) | set(s["pop_rhos"])) for s in settings)
    bar, done = ProgressBar("dpaudit reproduce"), [0]

    def tick() -> None:
        done[0] += 1
        bar(f"zcdp-bandits: {done[0]}/{total} simulations")

    for s in settings:
        panel = run_panel(seed=seed, progress=tick, **s)
        if "diff" in panel:
            fig = out / f"zcdp_bandits_{panel['key']}.png"
            _plot_panel(panel, fig)
            panel["figure"] = str(fig)
        panel["findings"] = _findings(panel)
        panels.append(panel)
    bar.close()
    missing = sorted({m for p in panels for m in p.get("missing", [])})
    result = {"experiment": "zcdp-bandits", "paper": f"{PAPERS['azize-basu-2023a'].narrative}, Fig. 4 (a)-(c)",
              "reference": PAPERS["azize-basu-2023a"].reference, "quick": quick, "seed": seed,
              "seconds": time.perf_counter() - t0, "missing_policies": missing, "panels": panels}
    (out / "zcdp_bandits.json").write_text(json.dumps(result, indent=2))
    text = _markdown(result)
    (out / "zcdp_bandits.md").write_text(text)
    if getattr(args, "json", False):
        print(json.dumps(result, indent=2))
    else:
        print(text)
        print(f"written: {out / 'zcdp_bandits.md'}, {out / 'zcdp_bandits.json'}"
              + "".join(f", {p['figure']}" for p in panels if "figure" in p))
    return 0


def _markdown(result: JSONObject) -> str:
    lines = [f"# {result['paper']}: the price of rho-zCDP" + (" (quick mode)" if result["quick"] else ""), "",
             f"Reference: {result['reference']}", "",
             f"seed {result['seed']}, {result['seconds']:.1f} s. Each private policy and its non-private twin run "
             "from the same seed; intervals are 95% normal intervals of the mean paired difference over runs.", ""]
    if result["missing_policies"]:
        lines += [f"**Missing policies:** {', '.join(result['missing_policies'])} (panels skipped).", ""]
    for p in result["panels"]:
        lines.append(f"## {p['title']}: {p['private']} vs {p['twin']}")
        lines.append("")
        for n in p["notes"]:
            lines.append(f"- note: {n}")
        if "diff" not in p:
            lines.append("")
            continue
        lines.append(f"- environment: {p['environment']}; {p['runs']} runs; horizon {p['horizon']:.0e}; "
                     f"{p['path']} path; {p['seconds']:.1f} s")
        lines += ["", "Reg_priv - Reg_nonpriv [95% CI]:", "",
                  "| rho | " + " | ".join(f"T = {T:.0e}" for T in p["horizons"]) + " |",
                  "| ---: | " + " | ".join("---:" for _ in p["horizons"]) + " |"]
        for r, row in p["diff"].items():
            lines.append(f"| {r} | " + " | ".join(f"{row[str(T)][0]:.1f} [{row[str(T)][1]:.1f}, {row[str(T)][2]:.1f}]"
                                                  for T in p["horizons"]) + " |")
        lines.append("| non-private regret | " + " | ".join(f"{p['nonpriv_regret'][str(T)][0]:.1f}" for T in p["horizons"]) + " |")
        t = p["pop_t"]
        idx = sorted({max(0, len(t) // 10 - 1), len(t) // 4, len(t) // 2, len(t) - 1})
        lines += ["", "Price of privacy PoP(t) = (Reg_priv - Reg_nonpriv) / Reg_nonpriv:", "",
                  "| rho | " + " | ".join(f"t = {t[i]:.2g}" for i in idx) + " |",
                  "| ---: | " + " | ".join("---:" for _ in idx) + " |"]
        for r, v in p["pop"].items():
            lines.append(f"| {r} | " + " | ".join(f"{v[i]:.3f}" for i in idx) + " |")
        lines += [""] + [f"- {f}" for f in p["findings"]] + [""]
        if "figure" in p:
            lines += [f"Figure: `{p['figure']}`", ""]
    return "\n".join(lines) + "\n"
