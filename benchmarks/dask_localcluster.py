"""One audit on this process, on local worker processes, and on a Dask LocalCluster: time and findings.

    python benchmarks/dask_localcluster.py [--runs 400000] [--workers 2]

The cluster is a ``distributed.LocalCluster`` with ``--workers`` single-threaded worker processes on
loopback (what ``dask scheduler`` + ``dask worker`` give on real machines); its start-up and the
workers' first import of dpaudit are timed separately and not counted in the audit's time. The
findings (everything but run times and the engine's description) must be identical on all three.
Writes ``benchmarks/dask_localcluster.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from dpaudit.runner import check as audit_policy, findings_json

HERE = Path(__file__).resolve().parent


stable = findings_json  # the findings, without how the audit ran


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--policy", default="adac-ucb")
    ap.add_argument("--param", action="append", default=["n_arms=5", "rho=0.1"])
    ap.add_argument("--horizon", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    params = dict(p.split("=", 1) for p in args.param)
    kw = dict(runs=args.runs, horizon=args.horizon, seed=args.seed)
    rows = []
    t = time.perf_counter()
    serial = audit_policy(args.policy, params, workers=1, **kw)
    rows.append(("this process", time.perf_counter() - t))
    t = time.perf_counter()
    local = audit_policy(args.policy, params, workers=args.workers, **kw)
    rows.append((f"{args.workers} local processes", time.perf_counter() - t))
    t = time.perf_counter()
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, silence_logs=50) as cluster, \
            Client(cluster.scheduler_address, set_as_default=False) as client:
        client.run(lambda: __import__("dpaudit.check"))
        startup = time.perf_counter() - t
        t = time.perf_counter()
        dask = audit_policy(args.policy, params, scheduler=cluster.scheduler_address, **kw)
        rows.append((f"Dask LocalCluster, {args.workers} worker processes", time.perf_counter() - t))
    same = stable(serial) == stable(local) == stable(dask)
    base = rows[0][1]
    out = {"command": "python benchmarks/dask_localcluster.py " + " ".join(
               f"--{k} {v}" for k, v in (("runs", args.runs), ("workers", args.workers))),
           "policy": args.policy, "params": params, **kw, "identical_findings": same,
           "cluster_startup_seconds": startup, "epsilon_lower": serial["epsilon_lower"], "verdict": serial["verdict"],
           "rows": [{"where": w, "seconds": s, "speedup": base / s} for w, s in rows],
           "machine": {"python": platform.python_version(), "cores": __import__("os").cpu_count()}}
    (HERE / "dask_localcluster.json").write_text(json.dumps(out, indent=2) + "\n")
    md = ["# One audit on a Dask LocalCluster\n", f"`{out['command']}`: {args.policy} {params}, T = {args.horizon}, "
          f"{args.runs:,} fresh runs per side, seed {args.seed}; verdict {serial['verdict']}, best lower bound "
          f"{serial['epsilon_lower']:.4g}; findings identical on all three: **{same}**. Cluster start-up "
          f"(not counted): {startup:.1f} s.\n", "| where the pieces ran | seconds | speed-up |", "| --- | ---: | ---: |"]
    md += [f"| {w} | {s:.1f} | {base / s:.2f}x |" for w, s in rows]
    (HERE / "dask_localcluster.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
