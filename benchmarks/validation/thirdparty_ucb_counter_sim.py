"""How much the no-reset bug of tests/thirdparty/ucb_counter.py leaks through the *actions*.

``NoResetEpisodicUCB``'s docstring bounds the leak of its releases (epsilon times the number of
releases a reward feeds); the actions are a post-processing, and their epsilon is not derived in
closed form. This script estimates it by simulation, outside dpaudit, for the view the audit sees.

On a constant background (arm 0 = mu0, arm 1 = mu1, rewards fixed) every episode sum is known except
the canary's: user 0 (arm 0's first episode) has reward 0 under d and 1 under d'. The script runs
both classes' algorithm at the *episode* level, vectorised over runs (the same schedule, index,
noise and counters as the classes; the decisions are the arms of the episodes that start after the
first K), checks that against the classes themselves on the first decision, then

1. selection: for every background on a 9 x 9 grid (1e5 runs per side), the events "the first j
   decisions are this pattern" with the largest |log P_d / P_d'| (patterns seen >= 300 times);
2. fresh estimate: the four best (background, event) pairs of each version re-counted on 2e6 fresh
   runs per side, with Clopper-Pearson intervals of each probability and the resulting lower bound
   log(lower(P_big) / upper(P_small)) at 95% jointly over the 8 rows (Bonferroni: each interval
   pair at 1 - 0.05/8).

    python benchmarks/validation/thirdparty_ucb_counter_sim.py [--horizon 300]

writes benchmarks/results/thirdparty_ucb_counter_sim.md. (Not an audit: the events are selected on the grid,
then their bounds computed on fresh runs.) The correct version is exactly epsilon-DP by its proof,
and its best events sit at the bound: when the canary's one release is far in the Laplace tail the
density ratio is e^epsilon, so their log ratios are close to 1 (and a lower bound can pass 1 only by
chance, which the joint confidence keeps below 5%).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

ROOT = Path(__file__).resolve().parents[2]  # the repository
sys.path.insert(0, str(ROOT / "tests"))

from thirdparty import ucb_counter  # noqa: E402

L = [ucb_counter.episode_length(k) for k in range(40)]


def simulate(mu0: float, mu1: float, canary: float, reset: bool, n: int, T: int, rng: np.random.Generator,
             eps: float = 1.0) -> np.ndarray:
    """(n, D) arms of the data-dependent episodes that *start* before T (2 arms)."""
    K = 2
    cs = np.zeros((n, K))
    cn = np.zeros((n, K))
    mu = np.zeros((n, K))
    nn = np.ones((n, K))
    rows = np.arange(n)
    means = np.array([mu0, mu1])
    t, k, out = 0, 0, []
    while t < T:
        if k < K:
            arm = np.full(n, k)
        else:
            lt = math.log(t + 1)
            arm = np.argmax(mu + np.sqrt(1.25 * lt / nn) + 2.0 * lt / (eps * nn), axis=1)
            out.append(arm)
        if t + L[k] > T:  # the horizon cuts this episode: it is played, never released
            break
        s = L[k] * means[arm]
        if k == 0:
            s = s - mu0 + canary
        cs[rows, arm] += s
        cn[rows, arm] += L[k]
        t += L[k]
        mu[rows, arm] = (cs[rows, arm] + rng.laplace(0.0, 1.0 / eps, n)) / cn[rows, arm]
        nn[rows, arm] = cn[rows, arm]
        if reset:
            cs[rows, arm] = 0.0
            cn[rows, arm] = 0.0
        k += 1
    return np.stack(out, axis=1)


def first_decision_by_class(cls: type, mu0: float, mu1: float, canary: float, n: int, seed: int) -> float:
    """P(first data-dependent episode plays arm 1) for the class itself, on np.random."""
    np.random.seed(seed)
    hits = 0
    start = L[0] + L[1]
    for _ in range(n):
        p = cls(n_arms=2)
        for t in range(start + 1):
            a = p.choose_arm()
            if t == start:
                hits += a
                break
            p.update(a, canary if t == 0 else (mu0 if a == 0 else mu1))
    return hits / n


ROWS = 4  # fresh rows per version
CONF = 1 - 0.05 / (2 * ROWS)  # each row's interval pair, so that all 8 rows hold jointly at 95%


def cp(k: int, n: int, conf: float = CONF) -> tuple[float, float]:
    a = (1 - conf) / 2
    lo = beta_dist.ppf(a, k, n - k + 1) if k > 0 else 0.0
    hi = beta_dist.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def codes(arms: np.ndarray, j: int) -> np.ndarray:
    return arms[:, :j] @ (1 << np.arange(j))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--horizon", type=int, default=300)
    args = ap.parse_args()
    T = args.horizon
    t0 = time.perf_counter()
    rng = np.random.default_rng(20261124)
    lines = [f"# Action-level leak of the episode-counter UCBs at T = {T} (simulation)", "",
             f"`python benchmarks/validation/thirdparty_ucb_counter_sim.py --horizon {T}` (see its docstring): "
             "epsilon = 1, K = 2, constant backgrounds, user 0 (arm 0's first episode) 0 vs 1.", ""]
    # sanity: the vectorised simulation against the classes, first data-dependent decision
    lines += ["Check of the simulation against the classes (P(first data-dependent episode plays arm 1), "
              "background 0.4 / 0.8, canary 1; 4000 runs of the class, 2e5 of the simulation):", ""]
    for cls, reset in ((ucb_counter.EpisodicLaplaceUCB, True), (ucb_counter.NoResetEpisodicUCB, False)):
        by_cls = first_decision_by_class(cls, 0.4, 0.8, 1.0, 4000, 1)
        by_sim = float(simulate(0.4, 0.8, 1.0, reset, 200000, T, rng)[:, 0].mean())
        lines.append(f"- {cls.__name__}: class {by_cls:.3f}, simulation {by_sim:.3f}")
    lines += ["", "| version | mu0 | mu1 | event (first j decisions, arm per episode) | selection |log ratio| "
              "| P_d (2e6 fresh) | P_d' (2e6 fresh) | log ratio | lower bound (95% jointly) |",
              "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    grid = np.linspace(0.1, 0.9, 9)
    best_lower = {}
    for name, reset in (("EpisodicLaplaceUCB (correct)", True), ("NoResetEpisodicUCB (buggy)", False)):
        cand = []
        for mu0 in grid:
            for mu1 in grid:
                a = simulate(mu0, mu1, 0.0, reset, 100000, T, rng)
                b = simulate(mu0, mu1, 1.0, reset, 100000, T, rng)
                for j in range(1, a.shape[1] + 1):
                    ca = np.bincount(codes(a, j), minlength=1 << j)
                    cb = np.bincount(codes(b, j), minlength=1 << j)
                    for c in np.flatnonzero(np.maximum(ca, cb) >= 300):
                        cand.append((abs(math.log(max(ca[c], 1) / max(cb[c], 1))), mu0, mu1, j, int(c)))
        cand.sort(reverse=True)
        for sel, mu0, mu1, j, c in cand[:ROWS]:
            n = 2000000
            x = int((codes(simulate(mu0, mu1, 0.0, reset, n, T, rng), j) == c).sum())
            y = int((codes(simulate(mu0, mu1, 1.0, reset, n, T, rng), j) == c).sum())
            big, small = (x, y) if x >= y else (y, x)
            lower = math.log(cp(big, n)[0] / cp(small, n)[1])
            best_lower[name] = max(best_lower.get(name, -math.inf), lower)
            pattern = "".join(str((c >> i) & 1) for i in range(j))
            lines.append(f"| {name} | {mu0:.1f} | {mu1:.1f} | {pattern} | {sel:.3f} | {x / n:.5f} | {y / n:.5f} | "
                         f"{math.log(max(x, 1) / max(y, 1)):+.3f} | {lower:.3f} |")
            print(lines[-1], flush=True)
    lines += ["", f"({time.perf_counter() - t0:.0f} s.) Best lower bound on fresh runs, 95% jointly over the rows "
              "(claim 1): " + "; ".join(f"{k}: {v:.3f}" for k, v in best_lower.items()) + "."]
    (ROOT / "benchmarks" / "results" / "thirdparty_ucb_counter_sim.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
