"""Every registered private policy audited at its defaults under every protocol it supports, as a user runs it.

Each row is one ``dpaudit check policy NAME --protocol P --json --seed S`` in a fresh process with the
CLI's defaults (one worker process per core, no --horizon, no pair), timed from outside (``--repeat 3``: the
median of three runs, the machine's speed swinging by tens of percent between minutes; the package's bytecode
compiled first, as ``pip install`` does for a user): wall seconds,
and CPU seconds of the process and of every worker it started (``RUSAGE_CHILDREN``), so CPU / wall
shows how many cores the audit kept busy. Beside each row, the previous table's verdict, bound and
time for the same audit (``defaults.json`` in the folder ``--previous``, by default
``benchmarks/results/``: the table this run replaces).

Which protocols a policy supports: the central K-armed and linear policies (UCB, GOPE, OFUL,
elimination families and their mutants) under table and view, and interactive where the policy accepts
an adversary's queries; local-DP policies (K-armed and BCO) under local (whose audit includes the
central Table-DP part); the joint-DP GLM policy under joint; the shuffle-DP GLM policy under shuffle.

Also the bundled per-run example (``examples/per_run_ucb.py``, a one-run class on global ``np.random``,
correct and leaky) through ``--adapter per-run`` at the horizon the audit finds, as docs/outside-code.md runs it.

With ``--thirdparty``, also the one-run classes of ``tests/thirdparty/`` (code written the way other
authors write it, correct and buggy) through ``--adapter per-run`` at their defaults, the loop-shaped
functions of ``tests/thirdparty/loops.py`` through ``--adapter loop`` and the Node.js reference policy
``examples/process_ucb.js`` (and its ``--leaky`` flag) through ``--adapter process``. ``--only LABEL ...``
with those rows' labels (``thirdparty/loops.py:dp_etc``, ``examples/process_ucb.js --leaky``) runs just them.

Run:  python benchmarks/speed/defaults.py [--seed 0] [--mutants] [--only NAME ...] [--protocols table,local]
      [--no-examples] [--thirdparty] [--append] [--repeat 3] [--out defaults]   (writes defaults.md and defaults.json in
      benchmarks/results/, and with --out defaults also tightness-policies.md/.json:
      benchmarks/validation/tightness_policies.py)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))
from tightness_policies import tightness_fields, write as write_tightness  # noqa: E402  (benchmarks/validation/)


def supported(name: str) -> list[str]:
    """The protocols ``name``'s audit applies to (module docstring)."""
    from dpaudit.policies.registry import entry_of, make_policy

    p = make_policy(name)
    if hasattr(p, "batch_release"):
        return ["shuffle"]
    if callable(getattr(p, "channel", None)) and getattr(p, "local_channel", True) is not None:
        return ["local"]
    if getattr(p, "continuous_actions", False):
        return []
    if entry_of(name).family == "glm":
        return ["joint"]
    return ["table", "view"] + (["interactive"] if getattr(p, "accepts_queries", True) else [])


def private_policies(mutants: bool) -> list[str]:
    from dpaudit.policies.registry import make_policy, registered

    names = [e.name for e in registered()] + ([e.name for e in registered(mutants=True)] if mutants else [])
    return sorted(n for n in names if getattr(make_policy(n), "claim", None) is not None)


#: the bundled per-run example (examples/per_run_ucb.py: a one-run class on global np.random) through the
#: per-run adapter at its discovered horizon, as docs/outside-code.md runs it: (row label, policy spec, options)
EXAMPLE = ROOT / "examples" / "per_run_ucb.py"
PER_RUN = [(f"examples/per_run_ucb.py:{cls}", f"{EXAMPLE}:{cls}",
            ["--adapter", "per-run", "--param", "n_arms=2", "--param", "epsilon=1", "--claim", "pure:eps=1"])
           for cls in ("PrivateUCB", "LeakyUCB")]
#: with --thirdparty: the one-run classes written the way other authors write them (tests/thirdparty/, the
#: controls' per-run cases), each at the CLI's defaults with its horizon found by the audit
THIRDPARTY = [(f"thirdparty/{mod}.py:{cls}", f"{ROOT / 'tests' / 'thirdparty' / mod}.py:{cls}",
               ["--adapter", "per-run", "--param", "n_arms=2", "--claim", "pure:eps=1"])
              for mod, cls in (("elimination", "BlockEliminationDP"), ("elimination", "SharedNoiseBlockElimination"),
                               ("etc", "PrivateETC"), ("etc", "WrongScaleETC"),
                               ("ucb_counter", "EpisodicLaplaceUCB"), ("ucb_counter", "NoResetEpisodicUCB"),
                               ("greedy", "TreeCounterGreedy"), ("greedy", "DoubleDividedGreedy"))]
#: with --thirdparty: loop-shaped functions (tests/thirdparty/loops.py) through --adapter loop, and the Node.js
#: reference policy (examples/process_ucb.js, correct and --leaky) through --adapter process, at the defaults
JS = ROOT / "examples" / "process_ucb.js"
NEW_ADAPTERS = ([(f"thirdparty/loops.py:{fn}", f"{ROOT / 'tests' / 'thirdparty' / 'loops'}.py:{fn}",
                  ["--adapter", "loop", "--claim", "pure:eps=1"]) for fn in ("dp_etc", "dp_etc_mean_noise")]
                + [(f"examples/process_ucb.js{flag}", f"node {JS}{flag}", ["--adapter", "process"])
                   for flag in ("", " --leaky")])
THIRDPARTY += NEW_ADAPTERS


def compile_package() -> None:
    """Compile dpaudit's modules to bytecode before timing, as ``pip install`` does for a user (and as the first
    import does wherever ``PYTHONDONTWRITEBYTECODE`` is unset); on a machine that sets it, every audit would
    otherwise compile the package's ~70 modules again (about 0.45 s each time)."""
    import compileall

    import dpaudit.accountants
    import dpaudit.attacks

    roots = {Path(dpaudit.__file__).resolve().parent, Path(dpaudit.attacks.__file__).resolve().parent,
             Path(dpaudit.accountants.__file__).resolve().parent}
    for root in sorted(roots):
        compileall.compile_dir(str(root), quiet=1)


def run_repeated(name: str, protocol: str, seed: int, repeat: int, spec: str | None = None,
                 options: list[str] | None = None) -> dict:
    """:func:`run_one` ``repeat`` times in a row: the first run's row with the median wall and CPU seconds (the
    machine's speed swings by tens of percent from one minute to the next), every run's wall seconds beside
    them, and a check that every run found the same (an audit is reproducible from its seed)."""
    rows = [run_one(name, protocol, seed, spec, options) for _ in range(repeat)]
    first = dict(rows[0])
    if repeat == 1:
        return first
    keys = ("verdict", "epsilon_lower", "best", "blackbox_bound", "exit")
    for r in rows[1:]:
        if any(r.get(k) != first.get(k) for k in keys):
            raise SystemExit(f"{name} ({protocol}) found different results on the same seed: "
                             f"{[{k: x.get(k) for k in keys} for x in rows]}")
    walls = sorted(r["wall_seconds"] for r in rows)
    cpus = sorted(r["cpu_seconds"] for r in rows)
    first.update(wall_seconds=walls[len(walls) // 2], cpu_seconds=cpus[len(cpus) // 2],
                 wall_seconds_runs=[r["wall_seconds"] for r in rows], repeat=repeat)
    return first


def run_one(name: str, protocol: str, seed: int, spec: str | None = None, options: list[str] | None = None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "dpaudit", "check", "policy", spec or name, "--protocol", protocol,
                          "--seed", str(seed), "--json", *(options or [])], capture_output=True, text=True, cwd="/")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return row_of(name, protocol, res.returncode, res.stdout, res.stderr, wall, cpu, os.getloadavg()[0])


def row_of(name: str, protocol: str, exit_code: int, stdout: str, stderr: str, wall: float, cpu: float,
           load: float) -> dict:
    """A table row from one ``dpaudit check policy ... --json`` run: its findings, wall and CPU seconds and the
    machine's 1-minute load average when it ended (wall times are read beside it)."""
    row = {"policy": name, "protocol": protocol, "wall_seconds": wall, "cpu_seconds": cpu, "exit": exit_code,
           "loadavg_1min_after": load}
    try:
        out = json.loads(stdout)
    except json.JSONDecodeError:
        row["error"] = (stderr.strip().splitlines() or ["no output"])[-1]
        return row
    best = max(out.get("attacks") or [], key=lambda a: float(a["epsilon_lower"]), default=None)
    power = out.get("power") or {}
    runs = power.get("fresh_runs_per_side")
    row.update({"verdict": out["verdict"], "claim": out.get("claim"), "epsilon_claimed": out.get("epsilon_claimed"),
                "epsilon_lower": out.get("epsilon_lower"), "best": best["attack"] if best else None,
                "horizon": out.get("horizon"), "fresh_runs_per_side": runs, "workers": out.get("workers"),
                "fresh_runs_used": power.get("fresh_runs_used") or runs, "blackbox_bound": power.get("shown"),
                "parts": [p["name"] for p in out.get("parts", [])]})
    row.update(tightness_fields(out))
    est = out.get("estimate") or {}
    if est.get("seconds"):  # the up-front estimate the audit said, and the one redone at its chosen horizon
        row["estimate_seconds"] = float(est["seconds"])
        at = est.get("at_horizon") or {}
        if at.get("seconds"):
            row["estimate_at_horizon_seconds"] = float(at["seconds"])
        if at.get("seconds_settled"):
            row["estimate_at_horizon_settled_seconds"] = float(at["seconds_settled"])
    row["longest_silence_seconds"] = longest_silence(stderr, wall)
    return row


def longest_silence(stderr: str, wall: float) -> float | None:
    """The longest stretch without a progress line: the gaps between the ``[N s]`` stamps the CLI puts on
    its stderr lines, the start and the end (None when it printed none)."""
    import re

    stamps = [float(m) for m in re.findall(r"\[(\d+(?:\.\d+)?) s\]\s*$", stderr, flags=re.M)]
    if not stamps:
        return None
    points = [0.0, *stamps, wall]
    return max(b - a for a, b in zip(points, points[1:]))


def previous(folder: Path) -> dict[tuple[str, str], dict]:
    """The earlier tables' figures by (policy, protocol)."""
    out: dict[tuple[str, str], dict] = {}
    f = folder / "defaults.json"
    if f.exists():
        d = json.loads(f.read_text())
        for r in d.get("rows", []):
            if "protocol" in r:  # this script's own format
                out[(r["policy"], r["protocol"])] = {"verdict": r.get("verdict"), "epsilon_lower": r.get("epsilon_lower"),
                                                     "seconds": r.get("wall_seconds")}
            else:
                out[(r["policy"], "table")] = {"verdict": r["verdict"], "epsilon_lower": r["epsilon_lower"],
                                               "seconds": r.get("seconds")}
    f = folder / "ldp_defaults.json"
    if f.exists():
        for r in json.loads(f.read_text()).get("rows", []):
            bounds = [r.get(k) for k in ("channel", "transcript", "central") if r.get(k) is not None]
            out[(r["policy"], "local")] = {"verdict": r["verdict"], "epsilon_lower": max(bounds, default=None),
                                           "seconds": r.get("seconds")}
    f = folder / "joint_defaults.json"
    if f.exists():
        for r in json.loads(f.read_text()):
            out[(r["policy"], r["protocol"])] = {"verdict": r["verdict"], "epsilon_lower": r["epsilon_lower"],
                                                 "seconds": r.get("seconds")}
    return out


def _f(x, spec=".4g") -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return format(x, spec)


def _runs(r: dict) -> str:
    """Fresh runs per side of the black-box test: used (planned), or the planned count alone."""
    planned, used = r.get("fresh_runs_per_side"), r.get("fresh_runs_used")
    if planned is None:
        return "-"
    return f"{used} ({planned})" if used not in (None, planned) else f"{planned}"


def _wall(r: dict) -> str:
    """Wall seconds: the median of repeated runs with their range, or the one run's."""
    runs = r.get("wall_seconds_runs")
    if not runs:
        return f"{r['wall_seconds']:.1f}"
    return f"{r['wall_seconds']:.1f} ({min(runs):.1f}-{max(runs):.1f})"


def _estimate(r: dict) -> str:
    """The estimate the audit said once its horizon was chosen, the least (the fresh runs settled at their first
    look) to the whole plan, else the up-front one; and the measured wall over the range's nearer end (1 when
    inside it). Rows timed before the audits recorded it: -."""
    lo, hi = r.get("estimate_at_horizon_settled_seconds"), r.get("estimate_at_horizon_seconds")
    if lo and hi:
        w = r["wall_seconds"]
        return f"{lo:.0f}-{hi:.0f} ({w / lo if w < lo else w / hi if w > hi else 1.0:.2f})"
    if not r.get("estimate_seconds"):
        return "-"
    return f"{r['estimate_seconds']:.0f} ({r['wall_seconds'] / r['estimate_seconds']:.2f})"


def markdown(rows: list[dict], prev: dict, seed: int, cores: int, prev_label: str) -> str:
    lines = ["# Every registered private policy at its defaults, under every protocol it supports", "",
             "Also the bundled per-run example, `examples/per_run_ucb.py` (a one-run class on global `np.random`; "
             "`PrivateUCB` correct, `LeakyUCB` mis-calibrated), audited with `--adapter per-run --param n_arms=2 "
             "--param epsilon=1 --claim pure:eps=1` at the horizon the audit finds.", "",
             f"Generated by `python benchmarks/speed/defaults.py --seed {seed}{' --mutants' if any('mutant' in r['policy'] for r in rows) else ''}"
             f"{' --thirdparty' if any(r['policy'].startswith('thirdparty/') for r in rows) else ''}"
             f"{(' --repeat ' + str(max(r.get('repeat', 1) for r in rows))) if any(r.get('repeat', 1) > 1 for r in rows) else ''}` "
             f"(each row = `dpaudit check policy NAME --protocol P --seed {seed} --json` in a fresh process, the "
             f"CLI's defaults: {cores} worker processes, delta 1e-5, confidence 0.95; Python "
             f"{platform.python_version()}, {cores} cores). CPU seconds include every worker process; CPU / wall "
             f"is the number of cores the audit kept busy. The previous columns are {prev_label}."
             + (f" Rows timed {max(r.get('repeat', 1) for r in rows)} times show the median wall and CPU seconds "
                "(the wall column gives the range beside it): every repeat found the same." if any(r.get("repeat", 1) > 1 for r in rows) else "")
             + " The package's bytecode is compiled before timing, as `pip install` does.", "",
             "| policy | protocol | verdict | claimed eps | bound | by | black-box bound | T | fresh runs/side: used "
             "(planned) | wall s | CPU s | CPU/wall | estimate s (wall over it) | longest silence s | previous verdict "
             "| previous bound | previous s |",
             "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | "
             "---: |"]
    for r in rows:
        p = prev.get((r["policy"], r["protocol"]), {})
        if "error" in r:
            lines.append(f"| {r['policy']} | {r['protocol']} | error: {r['error']} | | | | | | | {r['wall_seconds']:.1f} | "
                         f"{r['cpu_seconds']:.1f} | | | | {_f(p.get('verdict'))} | {_f(p.get('epsilon_lower'))} | "
                         f"{_f(p.get('seconds'), '.0f')} |")
            continue
        lines.append(f"| {r['policy']} | {r['protocol']} | {r['verdict']} | {_f(r['epsilon_claimed'])} | "
                     f"{_f(r['epsilon_lower'])} | {r['best'] or '-'} | {_f(r.get('blackbox_bound'))} | "
                     f"{_f(r['horizon'])} | {_runs(r)} | {_wall(r)} | {r['cpu_seconds']:.1f} | "
                     f"{r['cpu_seconds'] / max(r['wall_seconds'], 1e-9):.2f} | {_estimate(r)} | "
                     f"{_f(r.get('longest_silence_seconds'), '.0f')} | {_f(p.get('verdict'))} | "
                     f"{_f(p.get('epsilon_lower'))} | {_f(p.get('seconds'), '.0f')} |")
    changed = [r for r in rows if "verdict" in r and prev.get((r["policy"], r["protocol"]), {}).get("verdict")
               not in (None, r["verdict"])]
    lines += ["", f"Verdicts that differ from the previous table: {len(changed)}"
              + ("" if not changed else " (" + ", ".join(f"{r['policy']} {r['protocol']}: "
                                                          f"{prev[(r['policy'], r['protocol'])]['verdict']} -> "
                                                          f"{r['verdict']}" for r in changed) + ")") + ".",
              f"Total wall time {sum(r['wall_seconds'] for r in rows):.0f} s; total CPU {sum(r['cpu_seconds'] for r in rows):.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mutants", action="store_true", help="also audit every mutant (each must be flagged)")
    ap.add_argument("--only", nargs="*", default=None, help="only these policies (none: with --thirdparty, only its rows)")
    ap.add_argument("--protocols", default=None, help="only these protocols (comma-separated)")
    ap.add_argument("--previous", default=str(RESULTS), help="folder of the previous tables (default: benchmarks/results)")
    ap.add_argument("--previous-label", default="the tables committed before this run")
    ap.add_argument("--out", default="defaults", help="file stem of the tables written in benchmarks/results")
    ap.add_argument("--no-examples", action="store_true", help="leave out the bundled per-run example's rows")
    ap.add_argument("--thirdparty", action="store_true",
                    help="also the one-run classes of tests/thirdparty/ through --adapter per-run (about 10 minutes)")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of the existing table and replace or add the ones measured now")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each audit this many times and record the median wall and CPU seconds (odd: 3, 5)")
    args = ap.parse_args()
    if args.repeat < 1 or args.repeat % 2 == 0:
        ap.error(f"--repeat must be an odd number of runs (1, 3, 5, ...) so that the median is one of them, got {args.repeat}.")
    compile_package()
    prev = previous(Path(args.previous))
    wanted = None if args.protocols is None else set(args.protocols.split(","))
    rows = []
    kept = []
    if args.append and (RESULTS / f"{args.out}.json").exists():
        kept = json.loads((RESULTS / f"{args.out}.json").read_text())["rows"]
    labels = {label for label, _, _ in PER_RUN + THIRDPARTY}
    only_rows = None if args.only is None else [n for n in args.only if n in labels]
    for name in private_policies(args.mutants) if args.only is None else [n for n in args.only if n not in labels]:
        for proto in supported(name):
            if wanted is not None and proto not in wanted:
                continue
            row = run_repeated(name, proto, args.seed, args.repeat)
            row["kind"] = "mutant" if name.startswith("mutant-") else "registered"
            rows.append(row)
            print(f"{name:<32} {proto:<12} {row.get('verdict', row.get('error')):<13} "
                  f"{_f(row.get('epsilon_lower')):>8} {row['wall_seconds']:7.1f} s wall {row['cpu_seconds']:7.1f} s CPU",
                  flush=True)
    examples = [] if args.no_examples else PER_RUN
    if args.only is not None or (wanted is not None and "table" not in wanted):
        examples = []
    extra = THIRDPARTY if args.thirdparty else []
    if only_rows:  # --only LABEL ...: just those rows of --thirdparty (or of the bundled examples)
        extra = [row for row in PER_RUN + THIRDPARTY if row[0] in only_rows]
    for label, spec, options in examples + extra:
        row = run_repeated(label, "table", args.seed, args.repeat, spec, options)
        row["kind"] = "thirdparty" if (label, spec, options) in THIRDPARTY else "example"
        rows.append(row)
        print(f"{label:<32} {'table':<12} {row.get('verdict', row.get('error')):<13} "
              f"{_f(row.get('epsilon_lower')):>8} {row['wall_seconds']:7.1f} s wall {row['cpu_seconds']:7.1f} s CPU",
              flush=True)
    new = {(r["policy"], r["protocol"]) for r in rows}
    rows = sorted([r for r in kept if (r["policy"], r["protocol"]) not in new] + rows,
                  key=lambda r: (r["policy"], r["protocol"]))
    cores = len(os.sched_getaffinity(0))
    (RESULTS / f"{args.out}.json").write_text(json.dumps({"seed": args.seed, "cores": cores, "rows": rows}, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(rows, prev, args.seed, cores, args.previous_label))
    if args.out == "defaults":
        write_tightness(rows, args.seed)


if __name__ == "__main__":
    main()
