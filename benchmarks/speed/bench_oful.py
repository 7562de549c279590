"""Speed of the batched OFUL family: run-steps per second at K = 10, d = 3, 10^3 runs.

Three measurements per policy, best of ``--repeat`` timings of ``--steps`` steps after a warm-up:

* ``start`` / ``steady``: act + observe only, on a bank of 32 pre-drawn context sets and reward
  tables from the context distribution of Azize & Basu (2023a) "Concentrated Differential Privacy
  for Bandits" (so the environment's random draws are not
  counted), right after the start (frequent switches) and after a long warm-up (rare switches);
* ``end-to-end``: the same loop with :class:`dpaudit.environments.ContextualLinearBandit`
  drawing fresh contexts and rewards every step (what ``dpaudit.simulate``'s step path does);
* a straightforward per-run, per-step Python loop of RS-OFUL (numpy on one 3 x 3 system at a
  time), for scale.

BLAS keeps to one thread (``dpaudit.engine.one_blas_thread``), as in dpaudit's CLI, audits and
``simulate``: with OpenBLAS's default threads these tiny batched products run at about half the speed.

Target: at least 2 x 10^6 run-steps per second. Wall-clock and CPU-time (``process_time``)
rates are both reported: the machine is shared, and wall time counts other processes' time. Writes
``benchmarks/results/bench_oful.md`` and ``bench_oful.json``.

    python benchmarks/speed/bench_oful.py [--runs 1000] [--steps 1000] [--steady 10000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np

from dpaudit.environments import ContextualLinearBandit
from dpaudit.policies.oful import OFUL, RSOFUL, AdaCOFUL, AdaROFUL

K, D = 10, 3
TARGET = 2e6


def make_bank(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    env = ContextualLinearBandit(n_arms=K, dim=D, noise="bernoulli", normalize=True)
    env.reset(n, np.random.default_rng(seed))
    arms, rewards = [], []
    for t in range(size):
        arms.append(env.arms(t).copy())
        rewards.append(np.stack([env.rewards(t, np.full(n, a)) for a in range(K)], axis=1))
    return np.stack(arms), np.stack(rewards)


def time_policy(policy, bank, n: int, steps: int, repeat: int, record: bool, warmup: int) -> tuple[float, float]:
    """(wall, cpu) run-steps per second over ``steps`` steps after ``warmup`` steps; best of ``repeat``."""
    arms_bank, rew_bank = bank
    rows = np.arange(n)
    best_wall = best_cpu = math.inf
    for rep in range(repeat):
        policy.reset(n, np.random.default_rng(rep), record=record)
        for t in range(warmup):
            j = t % len(arms_bank)
            a = policy.act(t, arms_bank[j])
            policy.observe(t, a, rew_bank[j][rows, a])
        w0, c0 = time.perf_counter(), time.process_time()
        for t in range(warmup, warmup + steps):
            j = t % len(arms_bank)
            a = policy.act(t, arms_bank[j])
            policy.observe(t, a, rew_bank[j][rows, a])
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return n * steps / best_wall, n * steps / best_cpu


def time_end_to_end(policy, n: int, steps: int, repeat: int) -> tuple[float, float]:
    env = ContextualLinearBandit(n_arms=K, dim=D, noise="bernoulli", normalize=True)
    best_wall = best_cpu = math.inf
    for rep in range(repeat):
        env.reset(n, np.random.default_rng(100 + rep))
        policy.reset(n, np.random.default_rng(rep), record=False)
        w0, c0 = time.perf_counter(), time.process_time()
        for t in range(steps):
            a = policy.act(t, env.arms(t))
            policy.observe(t, a, env.rewards(t, a))
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return n * steps / best_wall, n * steps / best_cpu


def naive_rs_oful(bank, steps: int, lam: float = 0.1, C: float = 1.0, delta: float = 0.001) -> float:
    """One run at a time, one step at a time: the straightforward implementation, for scale."""
    arms_bank, rew_bank = bank
    t0 = time.perf_counter()
    V = lam * np.eye(D)
    b = np.zeros(D)
    V_tau_det = np.linalg.det(V)
    W = np.linalg.inv(V)
    theta = np.zeros(D)
    beta = math.sqrt(2 * math.log(1 / delta)) + math.sqrt(lam)
    for t in range(steps):
        j = t % len(arms_bank)
        if np.linalg.det(V) > (1 + C) * V_tau_det:
            W = np.linalg.inv(V)
            theta = W @ b
            V_tau_det = np.linalg.det(V)
            beta = math.sqrt(2 * math.log(1 / delta) + math.log(V_tau_det / lam**D)) + math.sqrt(lam)
        X = arms_bank[j][0]
        ucb = [X[k] @ theta + beta * math.sqrt(X[k] @ W @ X[k]) for k in range(K)]
        a = int(np.argmax(ucb))
        r = rew_bank[j][0, a]
        V = V + np.outer(X[a], X[a])
        b = b + X[a] * r
    return steps / (time.perf_counter() - t0)


def main() -> None:
    from dpaudit.engine import one_blas_thread

    with one_blas_thread():
        _main()


def _main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--steady", type=int, default=10000, help="warm-up steps before the steady-state window")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n = args.runs
    bank = make_bank(n, 32, seed=0)
    policies = {
        "oful": OFUL,
        "rs-oful": RSOFUL,
        "adac-oful": lambda: AdaCOFUL(rho=1.0),
        "adar-oful": lambda: AdaROFUL(alpha=2.0, epsilon=1.0),
    }
    rows = []
    for name, make in policies.items():
        start = time_policy(make(), bank, n, args.steps, args.repeat, record=False, warmup=50)
        steady = time_policy(make(), bank, n, args.steps, 1, record=False, warmup=args.steady)
        e2e = time_end_to_end(make(), n, args.steps, args.repeat)
        rows.append({
            "policy": name,
            "start_wall": start[0], "start_cpu": start[1],
            "steady_wall": steady[0], "steady_cpu": steady[1],
            "end_to_end_wall": e2e[0], "end_to_end_cpu": e2e[1],
        })
    rec = time_policy(AdaCOFUL(rho=1.0), bank, n, args.steps, args.repeat, record=True, warmup=50)
    naive = naive_rs_oful(make_bank(1, 32, seed=0), 3000)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cols = ("start_wall", "start_cpu", "steady_wall", "steady_cpu", "end_to_end_wall", "end_to_end_cpu")
    print(f"run-steps/s; K={K}, d={D}, runs={n}, {args.steps} timed steps; load average {load:.2f} on "
          f"{os.cpu_count()} cores")
    print(f"{'policy':<11}" + "".join(f"{c:>17}" for c in cols))
    for r in rows:
        print(f"{r['policy']:<11}" + "".join(f"{r[c]:>17.3g}" for c in cols))
    print(f"adac-oful recording the ledger (record=True), from the start: wall {rec[0]:.3g}, cpu {rec[1]:.3g}")
    print(f"straightforward per-run loop (RS-OFUL, one run): {naive:.3g} steps/s")
    print(f"target: {TARGET:.0e} run-steps/s")
    out = {
        "K": K, "d": D, "runs": n, "steps": args.steps, "steady_warmup": args.steady, "repeat": args.repeat,
        "target": TARGET, "load_average": load, "rows": rows,
        "adac_record_start": {"wall": rec[0], "cpu": rec[1]}, "naive_rs_oful_steps_per_s": naive,
        "python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
    }
    results = Path(__file__).resolve().parents[1] / "results"
    (results / "bench_oful.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [
        "# OFUL family speed (benchmarks/speed/bench_oful.py)",
        "",
        f"K = {K}, d = {D}, {n} runs, {args.steps} timed steps; run-steps per second. Target:",
        f"{TARGET:.0e}. BLAS limited to one thread, as in dpaudit's CLI, audits and simulate.",
        f"Measured with load average {load:.2f} on {os.cpu_count()} shared cores, so the",
        "wall-clock rates include time taken by other processes; the CPU-time rates (process_time) are",
        "this process's own speed.",
        "",
        "- start: steps 50..50+steps, policy only (pre-drawn contexts and rewards); many runs switch",
        "  at almost every step here;",
        f"- steady: the same after {args.steady} warm-up steps (switches are rare, as over most of a long run);",
        "- end-to-end: from step 0 with ContextualLinearBandit drawing fresh Gaussian contexts and",
        "  rewards every step.",
        "",
        "| policy | start wall | start cpu | steady wall | steady cpu | end-to-end wall | end-to-end cpu |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += ["| " + r["policy"] + " | " + " | ".join(f"{r[c]:.3g}" for c in cols) + " |" for r in rows]
    lines += [
        "",
        f"- adac-oful recording the ledger (record=True), from the start: wall {rec[0]:.3g}, cpu {rec[1]:.3g}",
        f"- straightforward per-run, per-step loop (RS-OFUL, one run): {naive:.3g} steps/s",
        f"- Python {out['python']}, numpy {out['numpy']}, {out['machine']}",
        "",
    ]
    (results / "bench_oful.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
