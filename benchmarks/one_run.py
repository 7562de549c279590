"""One-run audits (``--method one-run``) beside the multi-run audit: what a few runs can and cannot show.

Three parts, each audit ``dpaudit.audit(NAME, protocol=P, method="one-run", seed=S, workers=1)`` at the
one-run defaults (10 runs: 1 pilot and 9 counted; T = 4096 rounds, or 4096 users under local), run in this
process one after the other and timed (wall seconds; CPU seconds of this process and of the forked processes
plug-ins run in):

1. *every case at seed 0*: the registered private policies (mutants included) under table, view and local, the
   bundled per-run example, the classes of tests/thirdparty/ (one-run classes through the per-run adapter, and
   the batched local-DP click servers): verdict, bound, claim, cap, guesses, seconds, beside the multi-run
   audit's verdict, bound and seconds at the CLI's defaults (``benchmarks/defaults.json`` where it has the row,
   else run here as ``dpaudit check policy ... --json`` in a fresh process);
2. *false alarms*: every correct case over ``--seeds`` seeds (default 50): how many violations, beside the 95%
   Clopper-Pearson upper bound on the false-alarm rate;
3. *detection*: every buggy case over ``--detect-seeds`` seeds (default 10): how many violations.

Run:  python benchmarks/one_run.py [--seeds 50] [--detect-seeds 10] [--only SUBSTRING ...] [--skip-multi]
      (writes one_run.md and one_run.json here)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TP = ROOT / "tests" / "thirdparty"


def _defaults_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_defaults", HERE / "defaults.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def cases() -> list[dict[str, Any]]:
    """Every case: label, policy spec, protocol, the API options, whether it is correct, and its CLI options
    (for the multi-run audit)."""
    from dpaudit.policies.registry import entry_of

    d = _defaults_module()
    out = []
    for name in d.private_policies(mutants=True):
        for proto in d.supported(name):
            if proto in ("table", "view", "local"):
                out.append({"label": name, "spec": name, "protocol": proto, "kw": {}, "cli": [],
                            "correct": not entry_of(name).mutant})
    per_run = {"adapter": "per-run", "params": {"n_arms": "2"}, "claim": "pure:eps=1"}
    per_run_cli = ["--adapter", "per-run", "--param", "n_arms=2", "--claim", "pure:eps=1"]
    example = ROOT / "examples" / "per_run_ucb.py"
    for cls, ok in (("PrivateUCB", True), ("LeakyUCB", False)):
        out.append({"label": f"examples/per_run_ucb.py:{cls}", "spec": f"{example}:{cls}", "protocol": "table",
                    "kw": {**per_run, "params": {"n_arms": "2", "epsilon": "1"}},
                    "cli": per_run_cli + ["--param", "epsilon=1"], "correct": ok})
    for mod, cls, ok in (("elimination", "BlockEliminationDP", True), ("elimination", "SharedNoiseBlockElimination", False),
                         ("etc", "PrivateETC", True), ("etc", "WrongScaleETC", False),
                         ("ucb_counter", "EpisodicLaplaceUCB", True), ("ucb_counter", "NoResetEpisodicUCB", False),
                         ("greedy", "TreeCounterGreedy", True), ("greedy", "DoubleDividedGreedy", False)):
        out.append({"label": f"thirdparty/{mod}.py:{cls}", "spec": f"{TP / mod}.py:{cls}", "protocol": "table",
                    "kw": dict(per_run), "cli": per_run_cli, "correct": ok})
    for cls, ok in (("RRClickServer", True), ("LoggingRRClickServer", False)):
        out.append({"label": f"thirdparty/ldp_logging.py:{cls}", "spec": f"{TP}/ldp_logging.py:{cls}",
                    "protocol": "local", "kw": {}, "cli": [], "correct": ok})
    local_run = {"adapter": "per-run:randomizer=privatize,domain=0,1", "claim": "pure:eps=1"}
    for cls, ok in (("RROneRunUCB", True), ("TwoReportsRROneRunUCB", False)):
        out.append({"label": f"thirdparty/ldp_onerun.py:{cls}", "spec": f"{TP}/ldp_onerun.py:{cls}",
                    "protocol": "local", "kw": dict(local_run),
                    "cli": ["--adapter", local_run["adapter"], "--claim", "pure:eps=1"], "correct": ok})
    return out


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def one_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    import dpaudit
    from dpaudit.errors import DPAuditError

    t0, c0 = time.perf_counter(), _cpu()
    try:
        a = dpaudit.audit(case["spec"], protocol=case["protocol"], method="one-run", seed=seed, workers=1,
                          **case["kw"])
    except DPAuditError as exc:
        return {"error": str(exc), "seconds": time.perf_counter() - t0}
    x = a.attacks[0].details
    return {"verdict": a.verdict, "epsilon_claimed": a.epsilon_claimed, "epsilon_lower": a.epsilon_lower,
            "analysis": x["analysis"], "theta": x["theta"], "cap": x["cap"], "guesses": x["guesses"],
            "correct": x["correct"], "canaries": x["canaries_counted"], "runs": x["runs"], "horizon": a.horizon,
            "seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0}


def multi_run(case: dict[str, Any], known: dict[tuple[str, str], dict[str, Any]], skip: bool) -> dict[str, Any]:
    """The multi-run audit's verdict, bound and wall seconds at the CLI's defaults: from benchmarks/defaults.json
    when it has the row, else run now in a fresh process (unless ``skip``)."""
    key = (case["label"], case["protocol"])
    if key in known:
        return {**known[key], "source": "benchmarks/defaults.json"}
    if skip:
        return {"source": "not run"}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "dpaudit", "check", "policy", case["spec"], "--protocol",
                          case["protocol"], "--seed", "0", "--json", *case["cli"]], capture_output=True, text=True,
                         cwd="/")
    wall = time.perf_counter() - t0
    try:
        out = json.loads(res.stdout)
    except json.JSONDecodeError:
        return {"source": "run here", "error": (res.stderr.strip().splitlines() or ["no output"])[-1], "seconds": wall}
    return {"verdict": out["verdict"], "epsilon_lower": out.get("epsilon_lower"), "seconds": wall, "source": "run here"}


def _known() -> dict[tuple[str, str], dict[str, Any]]:
    f = HERE / "defaults.json"
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if f.exists():
        for r in json.loads(f.read_text()).get("rows", []):
            if "protocol" in r and "verdict" in r:
                out[(r["policy"], r["protocol"])] = {"verdict": r["verdict"], "epsilon_lower": r.get("epsilon_lower"),
                                                     "seconds": r.get("wall_seconds")}
    return out


def _f(x: Any, nd: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{nd}g}"


def _cp_upper(k: int, n: int) -> float:
    from dpaudit.attacks.bounds import cp_upper

    return float(cp_upper(k, n, 0.05))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50, help="seeds of the false-alarm study (correct cases)")
    ap.add_argument("--detect-seeds", type=int, default=10, help="seeds of the detection study (buggy cases)")
    ap.add_argument("--only", nargs="*", default=None, help="only the cases whose label contains one of these")
    ap.add_argument("--skip-multi", action="store_true", help="do not run multi-run audits missing from defaults.json")
    ap.add_argument("--out", default="one_run")
    args = ap.parse_args()
    all_cases = [c for c in cases() if not args.only or any(s in c["label"] for s in args.only)]
    known = _known()
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for c in all_cases:
        r0 = one_run(c, 0)
        mr = multi_run(c, known, args.skip_multi)
        row = {"policy": c["label"], "protocol": c["protocol"], "correct": c["correct"], "seed0": r0, "multi_run": mr}
        print(f"{c['label']:52s} {c['protocol']:6s} {r0.get('verdict', 'refused'):12s} "
              f"bound {_f(r0.get('epsilon_lower'))} cap {_f(r0.get('cap'))} {r0['seconds']:.1f} s | multi-run "
              f"{mr.get('verdict', '-')} {_f(mr.get('epsilon_lower'))} {_f(mr.get('seconds'), 3)} s", flush=True)
        n_seeds = args.seeds if c["correct"] else args.detect_seeds
        if "error" not in r0 and n_seeds > 1:
            tally: dict[str, int] = {}
            bounds, secs = [], []
            for s in range(n_seeds):
                rs = r0 if s == 0 else one_run(c, s)
                tally[rs.get("verdict", "error")] = tally.get(rs.get("verdict", "error"), 0) + 1
                bounds.append(rs.get("epsilon_lower") or 0.0)
                secs.append(rs["seconds"])
            row["seeds"] = {"n": n_seeds, "verdicts": tally, "bound_median": sorted(bounds)[len(bounds) // 2],
                            "bound_max": max(bounds), "seconds_median": sorted(secs)[len(secs) // 2]}
            print(f"{'':52s} {n_seeds} seeds: {tally}", flush=True)
        rows.append(row)
    total = time.perf_counter() - t_all
    out = {"seeds": args.seeds, "detect_seeds": args.detect_seeds, "python": platform.python_version(),
           "total_seconds": total, "rows": rows}
    (HERE / f"{args.out}.json").write_text(json.dumps(out, indent=1, default=str))
    write_md(out, HERE / f"{args.out}.md")


def write_md(out: dict[str, Any], path: Path) -> None:
    rows = out["rows"]
    L = ["# One-run audits beside the multi-run audit",
         "",
         "Generated by `python benchmarks/one_run.py` (`--seeds {s} --detect-seeds {d}`): every case audited with "
         "`dpaudit.audit(NAME, protocol=P, method=\"one-run\", seed=S, workers=1)` at the one-run defaults (10 runs "
         "in all, 1 pilot and 9 counted; T = 4096 rounds, or 4096 users per run under local), in one process, one "
         "after the other, on a shared 2-core machine (wall seconds; CPU seconds include the forked process a "
         "plug-in runs in). The multi-run columns are the CLI's default audit (`dpaudit check policy NAME --protocol "
         "P`, 50,000 runs per side planned, 2 workers), from `benchmarks/defaults.json` where it has the row, else "
         "run by this script in a fresh process.".format(s=out["seeds"], d=out["detect_seeds"]),
         "",
         "## Seed 0: every case",
         "",
         "| policy | protocol | correct? | one-run verdict | bound | claimed eps | cap (all guesses right) | right / guesses "
         "| analysis | wall s | CPU s | multi-run verdict | multi-run bound | multi-run wall s |",
         "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for r in rows:
        a, m = r["seed0"], r["multi_run"]
        if "error" in a:
            L.append(f"| {r['policy']} | {r['protocol']} | {'yes' if r['correct'] else 'bug'} | refused: {a['error']} "
                     f"| - | - | - | - | - | - | - | {m.get('verdict', '-')} | {_f(m.get('epsilon_lower'))} | "
                     f"{_f(m.get('seconds'), 3)} |")
            continue
        L.append(f"| {r['policy']} | {r['protocol']} | {'yes' if r['correct'] else 'bug'} | {a['verdict']} | "
                 f"{_f(a['epsilon_lower'])} | {_f(a['epsilon_claimed'])} | {_f(a['cap'])} | {a['correct']} / "
                 f"{a['guesses']} | {a['analysis']} | {a['seconds']:.1f} | {a['cpu_seconds']:.1f} | "
                 f"{m.get('verdict', m.get('error', '-'))} | {_f(m.get('epsilon_lower'))} | {_f(m.get('seconds'), 3)} |")
    correct = [r for r in rows if r["correct"] and "seeds" in r]
    buggy = [r for r in rows if not r["correct"] and "seeds" in r]
    fa = sum(r["seeds"]["verdicts"].get("violation", 0) for r in correct)
    n_fa = sum(r["seeds"]["n"] for r in correct)
    L += ["", f"## False alarms: every correct case over {out['seeds']} seeds", "",
          "| policy | protocol | seeds | violations | 95% upper bound on the false-alarm rate | consistent | inconclusive "
          "| bound: median (max) | wall s (median) |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in correct:
        s = r["seeds"]
        v = s["verdicts"]
        L.append(f"| {r['policy']} | {r['protocol']} | {s['n']} | {v.get('violation', 0)} | "
                 f"{_cp_upper(v.get('violation', 0), s['n']):.3g} | {v.get('consistent', 0)} | "
                 f"{v.get('inconclusive', 0)} | {_f(s['bound_median'])} ({_f(s['bound_max'])}) | "
                 f"{s['seconds_median']:.1f} |")
    L += ["", f"{fa} false alarms in {n_fa} audits of correct cases.", "",
          f"## Detection: every buggy case over {out['detect_seeds']} seeds", "",
          "| policy | protocol | seeds | flagged | consistent | inconclusive | bound: median (max) | claimed eps |",
          "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in buggy:
        s = r["seeds"]
        v = s["verdicts"]
        L.append(f"| {r['policy']} | {r['protocol']} | {s['n']} | {v.get('violation', 0)} | {v.get('consistent', 0)} | "
                 f"{v.get('inconclusive', 0)} | {_f(s['bound_median'])} ({_f(s['bound_max'])}) | "
                 f"{_f(r['seed0'].get('epsilon_claimed'))} |")
    L += ["", f"Total wall time {out['total_seconds']:.0f} s.", ""]
    path.write_text("\n".join(L))


if __name__ == "__main__":
    main()
