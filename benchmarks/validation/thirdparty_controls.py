"""Audit every third-party-style control of tests/thirdparty/ with ``dpaudit.audit`` at the defaults.

The controls are written the way code outside dpaudit is written (one-run classes on the global
``np.random`` audited through the per-run adapter, batched plug-ins without a ledger, a local-DP
server with the ``--protocol local`` members), each correct version beside a buggy one whose
docstring derives its true epsilon (tests/thirdparty/*.py). This script records what the audit
says of each: verdict, best lower bound, claim, horizon, wall time, or the exact error text. It
asserts nothing: a buggy control judged ``consistent`` or ``inconclusive`` is a miss to fix in the
search, and a control that cannot be audited at all is a finding about the adapter.

Each audit runs in its own subprocess (one worker, BLAS on one thread) under a wall-clock limit
(``--max-seconds``), so one slow audit cannot hang the table; one audit at a time. When the per-run
adapter refuses a class because its global generator moved after the adapter's probe (the error
names ``globals=swap``), the audit is retried once with ``per-run:globals=redirect`` and both rows are
kept.

    python benchmarks/validation/thirdparty_controls.py [--seeds N] [--only NAME,...] [--runs R] [--max-seconds S]
        [--out thirdparty_controls] [--diagnostics]

writes benchmarks/results/<out>.json and benchmarks/results/<out>.md. ``--only`` takes control names (first
column) or module names (``elimination``, ``etc``, ...); the other rows of the existing output are kept (and
the command line recorded is the last one). ``--diagnostics`` audits, instead of the defaults,
the missed positive controls and their correct twins at a hand-given neighbouring pair
(benchmarks/validation/thirdparty_pairs/) or a longer horizon (``DIAGNOSTICS``; written to
benchmarks/results/thirdparty_controls-diagnostics.*), to tell a miss of the search from a leak the
default horizon cannot show. The committed tables carry their date in their title: rerun the script for
what the current code says.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
RESULTS = ROOT / "benchmarks" / "results"
TP = "tests/thirdparty"

#: name, module, class (or factory), kind, protocol, adapter, claim (None: the plug-in's own), params, true eps
CONTROLS = [
    # -- successive elimination in blocks (per-run, global np.random)
    dict(name="elim-laplace-per-arm", module="elimination", cls="BlockEliminationDP", kind="correct",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="elim-shared-noise", module="elimination", cls="SharedNoiseBlockElimination", kind="buggy",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="inf"),
    # -- explore-then-commit (per-run; its horizon parameter T receives the audit's horizon)
    dict(name="etc-laplace-sum", module="etc", cls="PrivateETC", kind="correct",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="etc-mean-scale-on-sum", module="etc", cls="WrongScaleETC", kind="buggy",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0},
         true_eps="~eps*m: 11.91 at T = 48 (m = 12), 64.98 at T = 2000"),
    # -- UCB on episode counters grown by 1.5
    dict(name="ucb-episode-counter", module="ucb_counter", cls="EpisodicLaplaceUCB", kind="correct",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="ucb-counter-no-reset", module="ucb_counter", cls="NoResetEpisodicUCB", kind="buggy",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0},
         true_eps="releases: eps*E (E <= 3 at T = 48); actions <= that"),
    # -- epsilon-greedy on a tree counter (step shape)
    dict(name="greedy-tree-counter", module="greedy", cls="TreeCounterGreedy", kind="correct",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="greedy-double-divided", module="greedy", cls="DoubleDividedGreedy", kind="buggy",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0},
         true_eps="unbounded in T (one release at n = 2^k: eps*n/levels)"),
    # -- LDP LinUCB, batched plug-in (central view, then the local protocol)
    dict(name="ldp-linucb-gaussian", module="linucb", cls="LocalGaussianLinUCB", kind="correct",
         adapter=None, claim=None, params={}, true_eps="<= 1 (exact 0.752 at delta 1e-5)"),
    dict(name="ldp-linucb-gaussian/local", module="linucb", cls="LocalGaussianLinUCB", kind="correct",
         protocol="local", adapter=None, claim=None, params={}, true_eps="<= 1 (exact 0.752 at delta 1e-5)"),
    # -- randomised-response click server, batched, --protocol local
    dict(name="rr-click-server", module="ldp_logging", cls="RRClickServer", kind="correct",
         protocol="local", adapter=None, claim=None, params={}, true_eps="1 (exact)"),
    dict(name="rr-click-server-logging", module="ldp_logging", cls="LoggingRRClickServer", kind="buggy",
         protocol="local", adapter=None, claim=None, params={}, true_eps="inf (logged users)"),
    # -- the awkward shapes (a correct fixed-episode Laplace UCB in each)
    dict(name="shape-step-reward-first", module="styles", cls="RewardFirstStepUCB", kind="shape",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="shape-update-with-round", module="styles", cls="RoundFirstUCB", kind="shape",
         adapter="per-run:first_round=1", claim="pure:eps=1", params={"K": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="shape-factory", module="styles", cls="make_env_params_ucb", kind="shape",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="shape-env-n-params", module="styles", cls="EnvParamsUCB", kind="shape",
         adapter="per-run", claim="pure:eps=1", params={}, true_eps="<= 1"),
    dict(name="shape-module-rng", module="styles", cls="ModuleRngUCB", kind="shape",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2, "epsilon": 1.0}, true_eps="<= 1"),
    dict(name="shape-int-epsilon", module="styles", cls="IntEpsilonUCB", kind="shape",
         adapter="per-run", claim="pure:eps=0.5", params={"n_arms": "2", "epsilon": "0.5"}, true_eps="<= 0.5"),
    dict(name="shape-int-epsilon-default-0", module="styles", cls="IntEpsilonUCB", kind="buggy",
         adapter="per-run", claim="pure:eps=1", params={"n_arms": 2}, true_eps="inf (epsilon=0: no noise)"),
]

#: ``--diagnostics``: not the defaults. The missed positive controls (and their correct twins, for the
#: false-alarm side) at a hand-given pair or a longer horizon, to tell a miss of the search from a bug
#: that the default horizon cannot show.
_BY_NAME = {c["name"]: c for c in CONTROLS}
DIAGNOSTICS = [
    dict(_BY_NAME["elim-laplace-per-arm"], name="elim-laplace-per-arm/pair", adapter="per-run:globals=redirect",
         pair="benchmarks/validation/thirdparty_pairs/elimination_threshold.json"),
    dict(_BY_NAME["elim-shared-noise"], name="elim-shared-noise/pair", adapter="per-run:globals=redirect",
         pair="benchmarks/validation/thirdparty_pairs/elimination_threshold.json"),
    dict(_BY_NAME["elim-shared-noise"], name="elim-shared-noise/T=400", adapter="per-run:globals=redirect",
         horizon=400),
    dict(_BY_NAME["ucb-episode-counter"], name="ucb-episode-counter/T=300", horizon=300),
    dict(_BY_NAME["ucb-counter-no-reset"], name="ucb-counter-no-reset/T=300", horizon=300,
         true_eps="releases: eps*E (E <= 7 at T = 300); actions <= that"),
    dict(_BY_NAME["ucb-episode-counter"], name="ucb-episode-counter/pair",
         pair="benchmarks/validation/thirdparty_pairs/ucb_counter_user0.json"),
    dict(_BY_NAME["ucb-counter-no-reset"], name="ucb-counter-no-reset/pair",
         pair="benchmarks/validation/thirdparty_pairs/ucb_counter_user0.json",
         true_eps="actions: ~2.2-2.3 at T = 300 (simulation: thirdparty_ucb_counter_sim.md)"),
    dict(_BY_NAME["greedy-tree-counter"], name="greedy-tree-counter/T=300", horizon=300),
    dict(_BY_NAME["greedy-double-divided"], name="greedy-double-divided/T=300", horizon=300),
]


def _spec(c: dict) -> str:
    return f"{TP}/{c['module']}.py:{c['cls']}"


def child(payload: str) -> None:
    """Run one audit (in this subprocess) and print its summary as one JSON line."""
    c = json.loads(payload)
    os.chdir(ROOT)
    import dpaudit  # noqa: E402  (after the BLAS thread limits of the parent's environment)

    t0 = time.perf_counter()
    row = {"error": None}
    try:
        a = dpaudit.audit(_spec(c), params=c["params"], protocol=c["protocol"], runs=c["runs"], seed=c["seed"],
                          workers=1, claim=c["claim"], adapter=c["adapter"], horizon=c.get("horizon"),
                          pair=c.get("pair"))
        d = a.to_dict()
        row.update(verdict=d["verdict"], bound=d.get("epsilon_lower"), claimed=d.get("epsilon_claimed"),
                   claim_audited=d.get("claim"), horizon=d.get("horizon"), reason=d.get("reason"),
                   attacks={x.get("attack", "?"): x.get("epsilon_lower") for x in d.get("attacks") or []},
                   central=(d.get("central") or {}).get("epsilon_lower") if isinstance(d.get("central"), dict) else None,
                   horizon_reason=d.get("horizon_reason"), notes=d.get("notes"))
    except BaseException as exc:  # noqa: BLE001 -- the error text is the finding
        row.update(verdict="error", error=f"{type(exc).__name__}: {exc}")
    row["seconds"] = time.perf_counter() - t0
    print("@@ROW@@" + json.dumps(row, default=str), flush=True)


def run_one(c: dict, max_seconds: float) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT / "tests") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(c)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=ROOT)
    try:
        out, err = proc.communicate(timeout=max_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it started, nothing else
        proc.communicate()
        return {"verdict": "timeout", "error": f"no result within {max_seconds:g} s (killed)",
                "seconds": time.perf_counter() - t0}
    for line in reversed(out.splitlines()):
        if line.startswith("@@ROW@@"):
            row = json.loads(line[len("@@ROW@@"):])
            row["wall_seconds"] = time.perf_counter() - t0
            return row
    tail = (err.strip().splitlines() or ["(no output)"])[-1]
    return {"verdict": "error", "error": f"child exited {proc.returncode}: {tail}",
            "seconds": time.perf_counter() - t0}


def fmt(x, digits=4):
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def write_tables(rows: list[dict], meta: dict, out: str) -> None:
    (RESULTS / f"{out}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    title = ("diagnostics: hand-given pairs and fixed horizons" if meta.get("diagnostics")
             else "at the audit's defaults")
    lines = [f"# Third-party-style controls, {title} ({meta['date']})", "",
             f"`{meta['command']}`: every control of `tests/thirdparty/` audited with `dpaudit.audit(...)` "
             f"(runs = {meta['runs']} fresh runs per side, delta = 1e-5, confidence 0.95, "
             + ("the horizon or pair each row names" if meta.get("diagnostics") else "horizon chosen by the audit")
             + f", one worker, one audit at a time, each in a subprocess killed after {meta['max_seconds']:g} s), "
             f"seeds {meta['seeds']}, on a 2-core machine shared with other work (wall times are pessimistic). "
             "`kind`: correct (negative control), buggy (positive control: its docstring derives the true epsilon), "
             "shape (a correct algorithm in an awkward one-run shape, for the adapter). A buggy control judged "
             "`consistent` or `inconclusive` is a miss; an `error` row is a finding about the adapter.", "",
             "| control | kind | protocol | adapter | claim | true eps | seed | verdict | lower bound | claimed eps "
             "| T | wall s |",
             "| --- | --- | --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['kind']} | {r['protocol']} | {r['adapter'] or 'batched plug-in'} | "
                     f"{r['claim'] or 'its own: ' + str(r.get('claim_audited') or '-')} | {r['true_eps']} | {r['seed']} | {r['verdict']} | {fmt(r.get('bound'))} | "
                     f"{fmt(r.get('claimed'))} | {fmt(r.get('horizon'))} | {fmt(r.get('wall_seconds', r.get('seconds')), 3)} |")
    paired = sorted({r["pair"] for r in rows if r.get("pair")})
    if paired:
        lines += ["", "Rows named `/pair` audit the hand-given neighbouring pair " + ", ".join(f"`{p}`" for p in paired)
                  + " (no search; its T is the horizon); rows named `/T=...` fix the horizon."]
    errs = [r for r in rows if r.get("error")]
    if errs:
        lines += ["", "## Errors and timeouts (exact text)", ""]
        for r in errs:
            lines.append(f"- **{r['name']}** (seed {r['seed']}, adapter `{r['adapter']}`): {r['error']}")
    local = [r for r in rows if r["protocol"] == "local" and r.get("attacks")]
    if local:
        lines += ["", "## Local-protocol parts", "", "| control | seed | parts (lower bounds) | central |",
                  "| --- | ---: | --- | ---: |"]
        for r in local:
            parts = ", ".join(f"{k} {fmt(v)}" for k, v in r["attacks"].items())
            lines.append(f"| {r['name']} | {r['seed']} | {parts} | {fmt(r.get('central'))} |")
    reasons = [r for r in rows if r.get("reason") and r["verdict"] in ("inconclusive", "consistent") and r["kind"] == "buggy"]
    if reasons:
        lines += ["", "## Why the missed positive controls were missed (the audit's own words)", ""]
        for r in reasons:
            lines.append(f"- **{r['name']}** (seed {r['seed']}, T = {r.get('horizon')}): {r['reason']}")
    (RESULTS / f"{out}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--seeds", type=int, default=1, help="audit seeds 0..N-1 (default 1)")
    ap.add_argument("--only", default=None, help="comma-separated control or module names")
    ap.add_argument("--runs", type=int, default=50000, help="fresh runs per side (the audit's default 50000)")
    ap.add_argument("--max-seconds", type=float, default=600.0, help="wall-clock limit of one audit (default 600)")
    ap.add_argument("--out", default=None, help="output base name under benchmarks/results/ (default thirdparty_controls, "
                    "or thirdparty_controls-diagnostics with --diagnostics)")
    ap.add_argument("--diagnostics", action="store_true", help="audit the DIAGNOSTICS list (hand-given pairs, longer "
                    "horizons) instead of the defaults")
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    only = set(args.only.split(",")) if args.only else None
    args.out = args.out or ("thirdparty_controls-diagnostics" if args.diagnostics else "thirdparty_controls")
    pool = DIAGNOSTICS if args.diagnostics else CONTROLS
    chosen = [c for c in pool if only is None or c["name"] in only or c["module"] in only]
    if not chosen:
        sys.exit(f"--only {args.only!r} matches no control; names: {', '.join(c['name'] for c in CONTROLS)}")
    rows = []
    t_all = time.perf_counter()
    for seed in range(args.seeds):
        for c in chosen:
            job = dict(c, protocol=c.get("protocol", "table"), seed=seed, runs=args.runs)
            attempts = [job]
            while attempts:
                job = attempts.pop(0)
                res = run_one(job, args.max_seconds)
                row = {k: job.get(k) for k in ("name", "module", "cls", "kind", "protocol", "adapter", "claim",
                                               "params", "true_eps", "seed", "runs", "horizon", "pair")}
                row.update(res)
                rows.append(row)
                print(f"{row['name']:<30} seed {seed} {str(row['adapter']):<28} {row['verdict']:<12} "
                      f"bound {fmt(row.get('bound'))} T {fmt(row.get('horizon'))} {fmt(row.get('seconds'), 3)} s"
                      + (f"  [{row['error'][:160]}]" if row.get("error") else ""), flush=True)
                if (row.get("error") and "globals=swap" in row["error"] and job["adapter"]
                        and "globals=" not in job["adapter"]):
                    sep = "," if ":" in job["adapter"] else ":"
                    attempts.append(dict(job, adapter=job["adapter"] + sep + "globals=redirect"))
    previous = ""
    if only is not None and (RESULTS / f"{args.out}.json").exists():  # --only: keep the other rows of the last run
        done = {c["name"] for c in chosen}
        old = json.loads((RESULTS / f"{args.out}.json").read_text())
        kept = [r for r in old["rows"] if r["name"] not in done]
        order = {c["name"]: i for i, c in enumerate(pool)}
        rows = sorted(kept + rows, key=lambda r: (r["seed"], order.get(r["name"], len(order))))
        print(f"kept {len(kept)} rows of the previous {args.out}.json")
        previous = old["meta"]["command"]
    command = "python benchmarks/validation/thirdparty_controls.py " + " ".join(sys.argv[1:])
    if only is not None and (RESULTS / f"{args.out}.json").exists():
        command = f"{previous}`, then `{command}"
    meta = {"date": time.strftime("%Y-%m-%d"), "command": command, "runs": args.runs, "seeds": list(range(args.seeds)),
            "max_seconds": args.max_seconds, "python": platform.python_version(), "diagnostics": args.diagnostics,
            "total_seconds": time.perf_counter() - t_all}
    write_tables(rows, meta, args.out)
    print(f"wrote {RESULTS / args.out}.md and .json ({meta['total_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
