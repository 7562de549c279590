"""Speed of the UCB family: batched per-step AdaC-UCB vs a per-run Python loop, and a figure's grid.

The policy and the figure are Azize & Basu's (2023a) "Concentrated Differential Privacy for Bandits".

Run:  python benchmarks/speed/bench_ucb.py [--runs 10000] [--horizon 10000] [--loop-runs 100]

Measures, on one process (numpy is single-threaded for these element-wise operations):

1. per-step batched AdaC-UCB (rho = 0.5, beta = 1) on a fixed 0/1 reward table, K = 5, through
   ``dpaudit.simulate`` (action checks, reward checks and regret bookkeeping included), with the
   ledger off (regret mode) and on (audit mode);
2. the same algorithm written as a straightforward per-run, per-step Python loop (plain Python
   floats and lists; the table as lists of lists; one numpy normal draw per release), measured on
   ``--loop-runs`` runs; its non-private version is checked to give the same trajectory as the
   batched twin, so both sides compute the same thing;
3. Azize & Basu's (2023a) Fig. 4(a) grid with the episode fast path: 100 runs, T = 10^7, seven values of rho
   plus the non-private twin, on the Bernoulli instance 0.75/0.625/0.5/0.375/0.25.

Writes ``benchmarks/results/bench_ucb.md`` and ``bench_ucb.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np

from dpaudit.environments import BernoulliBandit, RewardTable
from dpaudit.policies import make_policy
from dpaudit.simulate import simulate

RESULTS = Path(__file__).resolve().parents[1] / "results"
MEANS = (0.75, 0.625, 0.5, 0.375, 0.25)


def python_loop(rows: list[list[float]], K: int, rho: float | None, beta: float, seed: int) -> tuple[float, list[int]]:
    """One run of AdaC-UCB (Azize & Basu 2023a, Alg. 4) as a plain per-step loop; rho=None drops the noise."""
    rng = np.random.default_rng(seed)
    sigma = 0.0 if rho is None else 1.0 / math.sqrt(2.0 * rho)
    c2 = 0.0 if rho is None else 1.0 / rho
    counts = [0] * K
    last_len = [1] * K
    stat = [0.0] * K
    cur, start, end, s, total = 0, 0, 1, 0.0, 0.0
    arms_played = []
    for t in range(len(rows)):
        r = rows[t][cur]
        s += r
        total += r
        if t + 1 == end:
            n = end - start
            noisy = s + sigma * float(rng.standard_normal()) if sigma else s
            stat[cur] = noisy / n
            last_len[cur] = n
            counts[cur] += n
            arms_played.append(cur)
            if end < K:
                nxt, length = end, 1
            else:
                logt = math.log(end + 1.0)
                best, nxt = -math.inf, 0
                for a in range(K):
                    m = last_len[a]
                    idx = stat[a] + math.sqrt((1.0 / (2 * m) + c2 / (m * m)) * beta * logt)
                    if idx > best:
                        best, nxt = idx, a
                length = counts[nxt]
            cur, start, end, s = nxt, end, end + length, 0.0
    return total, arms_played


def numpy_loop(table: np.ndarray, rho: float, beta: float, seed: int) -> float:
    """The same algorithm as a per-step loop written the usual way: numpy table and arrays per arm."""
    rng = np.random.default_rng(seed)
    T, K = table.shape
    sigma = 1.0 / np.sqrt(2.0 * rho)
    counts = np.zeros(K, dtype=np.int64)
    last_len = np.ones(K)
    stat = np.zeros(K)
    cur, start, end, s, total = 0, 0, 1, 0.0, 0.0
    for t in range(T):
        r = table[t, cur]
        s += r
        total += r
        if t + 1 == end:
            n = end - start
            stat[cur] = (s + rng.normal(0.0, sigma)) / n
            last_len[cur] = n
            counts[cur] += n
            if end < K:
                nxt, length = end, 1
            else:
                index = stat + np.sqrt((1 / (2 * last_len) + 1 / (rho * last_len**2)) * beta * np.log(end + 1))
                nxt = int(np.argmax(index))
                length = int(counts[nxt])
            cur, start, end, s = nxt, end, end + length, 0.0
    return total


def bench_step(table: np.ndarray, n_runs: int, record: bool, repeats: int) -> dict:
    T, K = table.shape
    env = RewardTable(table)
    times = []
    for _ in range(repeats):
        pol = make_policy("adac-ucb", {"n_arms": K, "rho": 0.5, "beta": 1.0})
        times.append(simulate(pol, env, T, n_runs, 0, path="step", record=record).seconds)
    sec = min(times)
    return {"runs": n_runs, "horizon": T, "record": record, "seconds": sec, "all_seconds": times,
            "run_steps_per_s": n_runs * T / sec}


def bench_loop(table: np.ndarray, n_runs: int, repeats: int, style: str = "lists") -> dict:
    rows = table.tolist()
    T, K = table.shape
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(n_runs):
            if style == "lists":
                python_loop(rows, K, 0.5, 1.0, i)
            else:
                numpy_loop(table, 0.5, 1.0, i)
        times.append(time.perf_counter() - t0)
    sec = min(times)
    if style != "lists":
        return {"style": style, "runs": n_runs, "horizon": T, "seconds": sec, "all_seconds": times,
                "run_steps_per_s": n_runs * T / sec}
    # same algorithm: without noise the loop's episode arms equal the batched twin's
    total, arms = python_loop(rows, K, None, 1.0, 0)
    res = simulate(make_policy("ucb-episodes", {"n_arms": K, "beta": 1.0}), RewardTable(table), T, 1, 0,
                   path="episode", trajectory=True)
    ep = res.episodes
    batched_arms = ep["arm"][np.argsort(ep["start"])].tolist()  # may end with an episode cut by T
    agree = (batched_arms[: len(arms)] == arms and len(batched_arms) - len(arms) <= 1
             and abs(total - float(res.reward_sum[0])) < 1e-9)
    return {"style": style, "runs": n_runs, "horizon": T, "seconds": sec, "all_seconds": times,
            "run_steps_per_s": n_runs * T / sec, "same_trajectory_as_batched_twin": bool(agree)}


def bench_grid(n_runs: int = 100, horizon: int = 10**7) -> dict:
    rhos = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0]
    env = BernoulliBandit(MEANS)
    cps = [10**5, 10**6, horizon]
    t0 = time.perf_counter()
    out = {}
    for rho in rhos:
        r = simulate(make_policy("adac-ucb", {"n_arms": 5, "rho": rho, "beta": 1.0}), env, horizon, n_runs, 0,
                     checkpoints=cps)
        out[f"rho={rho:g}"] = r.regret_at.mean(axis=0).round(1).tolist()
    r = simulate(make_policy("ucb-episodes", {"n_arms": 5, "beta": 1.0}), env, horizon, n_runs, 0, checkpoints=cps)
    out["non-private"] = r.regret_at.mean(axis=0).round(1).tolist()
    sec = time.perf_counter() - t0
    return {"runs": n_runs, "horizon": horizon, "configs": len(rhos) + 1, "seconds": sec,
            "checkpoints": cps, "mean_regret": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10**4)
    ap.add_argument("--horizon", type=int, default=10**4)
    ap.add_argument("--loop-runs", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3, help="timings are the best of this many repeats")
    ap.add_argument("--record-runs", type=int, default=2000, help="runs for the ledger-on measurement (memory: 24 B per run-round)")
    args = ap.parse_args()
    rng = np.random.default_rng(12345)
    table = (rng.random((args.horizon, 5)) < np.asarray(MEANS)).astype(float)

    # interleave the repeats so that both sides see the same load on a shared machine
    steps, loops = [], []
    for _ in range(args.repeats):
        steps.append(bench_step(table, args.runs, record=False, repeats=1))
        loops.append(bench_loop(table, args.loop_runs, repeats=1))
    step = min(steps, key=lambda d: d["seconds"])
    loop = min(loops, key=lambda d: d["seconds"])
    step["all_seconds"] = [d["seconds"] for d in steps]
    loop["all_seconds"] = [d["seconds"] for d in loops]
    nploop = bench_loop(table, max(2, args.loop_runs // 10), repeats=args.repeats, style="numpy")
    step_rec = bench_step(table, args.record_runs, record=True, repeats=1)
    grid = bench_grid()
    speedup = step["run_steps_per_s"] / loop["run_steps_per_s"]
    speedup_np = step["run_steps_per_s"] / nploop["run_steps_per_s"]
    results = {"python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
               "step_batched": step, "step_batched_with_ledger": step_rec, "python_loop": loop,
               "numpy_loop": nploop, "speedup_vs_loop": speedup, "speedup_vs_numpy_loop": speedup_np,
               "fig4a_grid": grid}
    lines = [
        "# UCB benchmark",
        "",
        f"Command: `python benchmarks/speed/bench_ucb.py --runs {args.runs} --horizon {args.horizon} --loop-runs {args.loop_runs}`"
        f" (Python {results['python']}, numpy {results['numpy']}, one process; best of {args.repeats} timings, "
        "on a machine shared with other jobs).",
        "",
        "| measurement | runs | T | seconds | run-steps / s |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| batched per-step AdaC-UCB, fixed table, K = 5, ledger off | {step['runs']} | {step['horizon']} | {step['seconds']:.2f} | {step['run_steps_per_s']:.3g} |",
        f"| same, ledger on | {step_rec['runs']} | {step_rec['horizon']} | {step_rec['seconds']:.2f} | {step_rec['run_steps_per_s']:.3g} |",
        f"| per-run per-step Python loop, plain floats and lists (same algorithm) | {loop['runs']} | {loop['horizon']} | {loop['seconds']:.2f} | {loop['run_steps_per_s']:.3g} |",
        f"| per-run per-step Python loop, numpy table and per-arm arrays | {nploop['runs']} | {nploop['horizon']} | {nploop['seconds']:.2f} | {nploop['run_steps_per_s']:.3g} |",
        "",
        f"Speed-up of the batched path: **{speedup:.0f}x** over the plain-Python loop, **{speedup_np:.0f}x** over the "
        f"numpy-style loop (targets: >= 3e7 run-steps/s and >= 30x). The plain loop without noise gives the same "
        f"trajectory as the batched twin: {loop['same_trajectory_as_batched_twin']}.",
        "",
        f"Fig. 4(a) grid (episode fast path): {grid['runs']} runs, T = {grid['horizon']:.0e}, {grid['configs']} "
        f"configurations (7 rho + non-private twin): **{grid['seconds']:.2f} s** (target < 5 s on 2 cores).",
        "",
        "| policy | " + " | ".join(f"regret at T={c:.0e}" for c in grid["checkpoints"]) + " |",
        "| --- | " + " | ".join("---:" for _ in grid["checkpoints"]) + " |",
    ]
    for k, v in grid["mean_regret"].items():
        lines.append(f"| {k} | " + " | ".join(f"{x:.1f}" for x in v) + " |")
    text = "\n".join(lines) + "\n"
    (RESULTS / "bench_ucb.md").write_text(text)
    (RESULTS / "bench_ucb.json").write_text(json.dumps(results, indent=2))
    print(text)


if __name__ == "__main__":
    main()
