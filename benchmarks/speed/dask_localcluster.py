"""One audit in this process, on local worker processes, and on Dask LocalClusters of 1 and 2 workers: time and findings.

    python benchmarks/speed/dask_localcluster.py [--runs 2000000] [--repeats 2]

Four places run the same audit (same seed): this process; ``--workers`` local processes (dpaudit's own
forked workers); a ``distributed.LocalCluster`` on loopback with 1 single-threaded worker process; and
one with ``--workers`` single-threaded worker processes (what ``dask scheduler`` + ``dask worker``
give on real machines: every task is pickled to another process). The ratio of the two clusters'
times is the speed-up Dask gets from more cores; the in-process row is the baseline of the others.

Each cluster is started afresh for its run; its start-up, the workers' first import of dpaudit and a
small warm-up audit are timed separately and not counted in the audit's time (reported as start-up).
A small warm-up audit in this process comes first too (imports). The places run in turn, ``--repeats``
rounds, and each row reports its best (least disturbed) time and every round's time; the load average
(``os.getloadavg``, 1 minute) before each run is recorded, since the machine may be shared. The findings
(everything but run times and the engine's description) must be identical everywhere.
Writes ``benchmarks/results/dask_localcluster.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

from dpaudit.runner import check as audit_policy, findings_json

RESULTS = Path(__file__).resolve().parents[1] / "results"

stable = findings_json  # the findings, without how the audit ran


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far (Linux /proc/stat; zeros elsewhere)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0, 0
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def _cluster(n_workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address=None, silence_logs=50)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--policy", default="adac-ucb")
    ap.add_argument("--param", action="append", default=["n_arms=5", "rho=0.1"])
    ap.add_argument("--horizon", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from distributed import Client

    params = dict(p.split("=", 1) for p in args.param)
    kw = dict(runs=args.runs, horizon=args.horizon, seed=args.seed)
    warm = dict(kw, runs=2000)
    audit_policy(args.policy, params, workers=1, **warm)  # imports, in this process

    def timed(**where: Any) -> tuple[dict[str, Any], float, float]:
        """The audit, its seconds, and the share of the machine's CPU time busy meanwhile (ours and others')."""
        b0, j0 = _cpu_ticks()
        t = time.perf_counter()
        out = audit_policy(args.policy, params, **where, **kw)
        seconds = time.perf_counter() - t
        b1, j1 = _cpu_ticks()
        return out, seconds, (b1 - b0) / (j1 - j0) if j1 > j0 else float("nan")

    def on_cluster(n: int) -> Callable[[], tuple[dict[str, Any], float, float, float]]:
        def run() -> tuple[dict[str, Any], float, float, float]:
            t = time.perf_counter()
            with _cluster(n) as cluster, Client(cluster.scheduler_address, set_as_default=False) as client:
                client.wait_for_workers(n, timeout=120)
                client.run(lambda: __import__("dpaudit.runner"))
                audit_policy(args.policy, params, scheduler=cluster.scheduler_address, **warm)
                startup = time.perf_counter() - t
                out, seconds, busy = timed(scheduler=cluster.scheduler_address)
                return out, seconds, startup, busy
        return run

    def here(workers: int) -> Callable[[], tuple[dict[str, Any], float, float | None, float]]:
        def run() -> tuple[dict[str, Any], float, float | None, float]:
            out, seconds, busy = timed(workers=workers)
            return out, seconds, None, busy
        return run

    w = args.workers
    places = [("this process", here(1)),
              (f"{w} local processes", here(w)),
              ("Dask LocalCluster, 1 worker process (1 thread)", on_cluster(1)),
              (f"Dask LocalCluster, {w} worker processes (1 thread each)", on_cluster(w))]
    rows: dict[str, dict[str, Any]] = {name: {"where": name, "rounds": []} for name, _ in places}
    findings: dict[str, str] = {}
    first = None
    for r in range(args.repeats):
        for name, run in places:
            load = os.getloadavg()[0]
            out, seconds, startup, busy = run()
            first = first or out
            findings.setdefault(name, stable(out))
            if findings[name] != stable(out):
                raise SystemExit(f"{name}: round {r + 1} gave other findings than round 1")
            rows[name]["rounds"].append({"seconds": round(seconds, 3), "load_1min_before": load,
                                         "machine_busy": round(busy, 3),
                                         **({"cluster_startup_seconds": round(startup, 3)} if startup else {})})
            print(f"round {r + 1}: {name}: {seconds:.1f} s (load before {load:.2f}, machine busy {busy:.0%})"
                  + (f", start-up {startup:.1f} s" if startup else ""), flush=True)
    assert first is not None
    same = len(set(findings.values())) == 1
    for row in rows.values():
        row["seconds"] = min(x["seconds"] for x in row["rounds"])
    names = [n for n, _ in places]
    base = rows[names[0]]["seconds"]
    for row in rows.values():
        row["speedup_vs_this_process"] = round(base / row["seconds"], 3)
    dask_ratio = rows[names[2]]["seconds"] / rows[names[3]]["seconds"]
    loads = [x["load_1min_before"] for row in rows.values() for x in row["rounds"]]
    command = ("python benchmarks/speed/dask_localcluster.py " +
               " ".join(f"--{k} {v}" for k, v in (("runs", args.runs), ("workers", w), ("repeats", args.repeats))))
    out = {"command": command, "policy": args.policy, "params": params, **kw, "repeats": args.repeats,
           "identical_findings": same, "verdict": first["verdict"], "epsilon_lower": first["epsilon_lower"],
           "dask_speedup_more_workers": round(dask_ratio, 3), "load_1min_range": [min(loads), max(loads)],
           "rows": list(rows.values()),
           "machine": {"python": platform.python_version(), "cores": os.cpu_count(),
                       "distributed": __import__("distributed").__version__}}
    (RESULTS / "dask_localcluster.json").write_text(json.dumps(out, indent=2) + "\n")
    md = ["# One audit in this process, on local processes and on Dask LocalClusters\n",
          f"`{command}`: {args.policy} {params}, T = {args.horizon}, {args.runs:,} runs per side planned, seed "
          f"{args.seed}; verdict {first['verdict']}, best lower bound {first['epsilon_lower']:.4g}; findings "
          f"identical everywhere: **{same}**. {os.cpu_count()} cores; 1-minute load average before the runs "
          f"{min(loads):.2f} to {max(loads):.2f} (the machine is shared). Best of {args.repeats} rounds; a "
          "cluster's start-up (with the workers' first import and a warm-up audit) is not counted.\n",
          f"Dask with {w} worker processes against 1: **{dask_ratio:.2f}x**. \"Machine busy\" is the share of "
          f"all {os.cpu_count()} cores' time busy during the run (this audit's processes and anyone else's): one "
          f"core of {os.cpu_count()} is {1 / (os.cpu_count() or 1):.0%}.\n",
          "| where the pieces ran | seconds (best) | every round (s) | machine busy | speed-up vs this process "
          "| cluster start-up |",
          "| --- | ---: | --- | --- | ---: | --- |"]
    for row in rows.values():
        every = ", ".join(f"{x['seconds']:.1f}" for x in row["rounds"])
        busy = ", ".join(f"{x['machine_busy']:.0%}" for x in row["rounds"])
        starts = ", ".join(f"{x['cluster_startup_seconds']:.1f} s" for x in row["rounds"]
                           if "cluster_startup_seconds" in x) or "-"
        md.append(f"| {row['where']} | {row['seconds']:.1f} | {every} | {busy} | "
                  f"{row['speedup_vs_this_process']:.2f}x | {starts} |")
    (RESULTS / "dask_localcluster.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
