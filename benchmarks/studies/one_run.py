"""One-run audits (``--method one-run``) beside the multi-run audit: what a few runs can and cannot show.

Three parts, each audit ``dpaudit.audit(NAME, protocol=P, method="one-run", seed=S, workers=1)`` at the
one-run defaults (10 runs: 1 pilot and 9 counted, or 2 pilots and 8 counted where the first-pulls layout is
offered; T = 4096 rounds, or 65,536 users under local, 4,096 up to update 3), run in this
process one after the other and timed (wall seconds; CPU seconds of this process and of the forked processes
plug-ins run in):

1. *every case at seed 0*: the registered private policies (mutants included) under table, view and local, the
   bundled per-run example, the classes of tests/thirdparty/ (one-run classes through the per-run adapter, and
   the batched local-DP click servers): verdict, bound, claim, cap, guesses, seconds, beside the multi-run
   audit's verdict, bound and seconds at the CLI's defaults (``benchmarks/results/defaults.json`` where it has the row,
   else run here as ``dpaudit check policy ... --json`` in a fresh process);
2. *false alarms*: every correct case over ``--seeds`` seeds (default 50): how many violations, beside the 95%
   Clopper-Pearson upper bound on the false-alarm rate;
3. *detection*: every buggy case over ``--detect-seeds`` seeds (default 10): how many violations.

Run:  python benchmarks/studies/one_run.py [--seeds 50] [--detect-seeds 10] [--slow-seconds S --slow-seeds N
      --slow-detect-seeds N] [--only SUBSTRING ...] [--protocols P ...] [--skip-multi] [--update]
      (writes one_run.md and one_run.json in benchmarks/results/, after every case; with --update, the cases run
      replace their rows of the existing one_run.json, the other rows and their multi-run columns are kept, and the
      .md says which rows which run produced);
      python benchmarks/studies/one_run.py --render benchmarks/results/one_run.json rewrites the .md (and the
      .json's summary, the counts the README quotes);
      python benchmarks/studies/one_run.py --merge COPY.json ... folds in the last --update of copies of the
      study run in parallel (each in its own checkout, on other protocols or cases)
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

ROOT = Path(__file__).resolve().parents[2]  # the repository
RESULTS = ROOT / "benchmarks" / "results"
TP = ROOT / "tests" / "thirdparty"
#: the longest a multi-run audit missing from defaults.json may take here
MULTI_TIMEOUT = 300


def _defaults_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_defaults", ROOT / "benchmarks" / "speed" / "defaults.py")
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
    # the one-run audits leave n_arms free (every class defaults to 2), so that they pilot many arms beside 2 (the
    # first-pulls layout); the multi-run audits fix n_arms = 2, as benchmarks/speed/defaults.py does
    per_run = {"adapter": "per-run", "params": {}, "claim": "pure:eps=1"}
    per_run_cli = ["--adapter", "per-run", "--param", "n_arms=2", "--claim", "pure:eps=1"]
    example = ROOT / "examples" / "per_run_ucb.py"
    for cls, ok in (("PrivateUCB", True), ("LeakyUCB", False)):
        out.append({"label": f"examples/per_run_ucb.py:{cls}", "spec": f"{example}:{cls}", "protocol": "table",
                    "kw": {**per_run, "params": {"epsilon": "1"}},
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


def _one_run_defaults() -> dict[str, int]:
    from dpaudit.runner.one_run import ONE_RUN_DEFAULTS, wide_arms

    return {**ONE_RUN_DEFAULTS, "wide_arms": wide_arms(ONE_RUN_DEFAULTS["horizon"])}


def _defaults_note(update: dict[str, Any]) -> str:
    """The one-run defaults an update ran at (recorded from update 4 on; the study's are in the header)."""
    d = update.get("defaults")
    if not d:
        return ""
    wide = f" ({d['wide_arms']} arms in the first-pulls layout)" if "wide_arms" in d else ""
    return (f", at the defaults of its day: {d['runs']} runs, T = {d['horizon']} rounds{wide}, "
            f"{d['local_horizon']:,} users per run under local")


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
            "layout": a.extra["one_run"].get("layout_name"), "n_arms": a.extra.get("n_arms"),
            "pilot_runs": x.get("pilot_runs", 1), "seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0}


def multi_run(case: dict[str, Any], known: dict[tuple[str, str], dict[str, Any]], skip: bool) -> dict[str, Any]:
    """The multi-run audit's verdict, bound and wall seconds at the CLI's defaults: from benchmarks/results/defaults.json
    when it has the row, else run now in a fresh process (unless ``skip``)."""
    key = (case["label"], case["protocol"])
    if key in known:
        return {**known[key], "source": "benchmarks/results/defaults.json"}
    if skip:
        return {"source": "not run"}
    t0 = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, "-m", "dpaudit", "check", "policy", case["spec"], "--protocol",
                              case["protocol"], "--seed", "0", "--json", *case["cli"]], capture_output=True, text=True,
                             cwd="/", timeout=MULTI_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"source": "run here", "error": f"not finished in {MULTI_TIMEOUT} s", "seconds": MULTI_TIMEOUT}
    wall = time.perf_counter() - t0
    try:
        out = json.loads(res.stdout)
    except json.JSONDecodeError:
        return {"source": "run here", "error": (res.stderr.strip().splitlines() or ["no output"])[-1], "seconds": wall}
    return {"verdict": out["verdict"], "epsilon_lower": out.get("epsilon_lower"), "seconds": wall, "source": "run here"}


def _known() -> dict[tuple[str, str], dict[str, Any]]:
    f = RESULTS / "defaults.json"
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


def _order(c: dict[str, Any]) -> tuple[int, int]:
    """Buggy cases first (detection), then the correct registered policies, then the slow outside classes: a
    study stopped early keeps the rows that matter most."""
    return (0 if not c["correct"] else 1, 1 if "/" in c["spec"] else 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50, help="seeds of the false-alarm study (correct cases)")
    ap.add_argument("--detect-seeds", type=int, default=10, help="seeds of the detection study (buggy cases)")
    ap.add_argument("--slow-seconds", type=float, default=float("inf"),
                    help="a case whose seed-0 audit takes longer than this is 'slow' (default: none is)")
    ap.add_argument("--slow-seeds", type=int, default=None, help="seeds of the false-alarm study for slow cases")
    ap.add_argument("--slow-detect-seeds", type=int, default=None, help="seeds of the detection study for slow cases")
    ap.add_argument("--only", nargs="*", default=None, help="only the cases whose label contains one of these")
    ap.add_argument("--protocols", nargs="*", default=None, help="only the cases under these protocols")
    ap.add_argument("--skip-multi", action="store_true", help="do not run multi-run audits missing from defaults.json")
    ap.add_argument("--update", action="store_true",
                    help="replace the rows of the cases run in the existing .json (keeping the others and every "
                         "kept row's multi-run column) instead of writing a new study")
    ap.add_argument("--out", default="one_run")
    ap.add_argument("--render", default=None, help="only rewrite the .md of this .json")
    ap.add_argument("--merge", nargs="*", default=None, metavar="JSON",
                    help="fold into the study the last --update of each of these copies of it (run in parallel from "
                         "the same study): its rows and its entry, as if it had run here after the others")
    args = ap.parse_args()
    if args.merge:
        merge(args.out, [Path(f) for f in args.merge])
        return
    if args.render:
        render(args.render)
        return
    all_cases = sorted((c for c in cases() if (not args.only or any(s in c["label"] for s in args.only))
                        and (not args.protocols or c["protocol"] in args.protocols)), key=_order)
    known = _known()
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    out = {"seeds": args.seeds, "detect_seeds": args.detect_seeds, "slow_seconds": args.slow_seconds,
           "slow_seeds": args.slow_seeds, "slow_detect_seeds": args.slow_detect_seeds, "python": platform.python_version(),
           "argv": sys.argv[1:], "total_seconds": 0.0, "complete": False, "rows": rows}
    old: dict[tuple[str, str], dict[str, Any]] = {}
    if args.update:
        prev = json.loads((RESULTS / f"{args.out}.json").read_text())
        old = {(r["policy"], r["protocol"]): r for r in prev["rows"]}
        out = {**prev, "complete": False, "rows": rows,
               "updates": prev.get("updates", []) + [{"argv": sys.argv[1:], "cases": len(all_cases),
                                                      "defaults": _one_run_defaults()}]}
        rows.extend(prev["rows"])
    base_seconds = out["total_seconds"]
    for c in all_cases:
        r0 = one_run(c, 0)
        key = (c["label"], c["protocol"])
        mr = old[key]["multi_run"] if key in old else multi_run(c, known, args.skip_multi)
        row = {"policy": c["label"], "protocol": c["protocol"], "correct": c["correct"], "seed0": r0, "multi_run": mr}
        if args.update:
            row["updated"] = len(out["updates"])
        print(f"{c['label']:52s} {c['protocol']:6s} {r0.get('verdict', 'refused'):12s} "
              f"bound {_f(r0.get('epsilon_lower'))} cap {_f(r0.get('cap'))} {r0['seconds']:.1f} s | multi-run "
              f"{mr.get('verdict', '-')} {_f(mr.get('epsilon_lower'))} {_f(mr.get('seconds'), 3)} s", flush=True)
        slow = r0["seconds"] > args.slow_seconds
        n_seeds = args.seeds if c["correct"] else args.detect_seeds
        if slow:
            n_seeds = (args.slow_seeds if c["correct"] else args.slow_detect_seeds) or n_seeds
        row["slow"] = slow
        if "error" not in r0 and n_seeds > 1:
            tally: dict[str, int] = {}
            layouts: dict[str, int] = {}
            bounds, secs = [], []
            for s in range(n_seeds):
                rs = r0 if s == 0 else one_run(c, s)
                tally[rs.get("verdict", "error")] = tally.get(rs.get("verdict", "error"), 0) + 1
                if rs.get("layout"):
                    layouts[rs["layout"]] = layouts.get(rs["layout"], 0) + 1
                bounds.append(rs.get("epsilon_lower") or 0.0)
                secs.append(rs["seconds"])
            row["seeds"] = {"n": n_seeds, "verdicts": tally, "bound_median": sorted(bounds)[len(bounds) // 2],
                            "bound_max": max(bounds), "seconds_median": sorted(secs)[len(secs) // 2],
                            "layouts": layouts}
            print(f"{'':52s} {n_seeds} seeds: {tally}", flush=True)
        at = next((i for i, r in enumerate(rows) if (r["policy"], r["protocol"]) == key), None)
        if at is None:
            rows.append(row)
        else:
            rows[at] = row
        out["total_seconds"] = base_seconds + time.perf_counter() - t_all
        _write(out, args.out)  # after every case: a study stopped early keeps what it measured
    out["complete"] = True
    _write(out, args.out)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The headline counts the README and docs quote (by marker): seed 0, detection over seeds, false alarms."""
    buggy = [r for r in rows if not r["correct"]]
    correct = [r for r in rows if r["correct"] and "seeds" in r]
    studied = [r for r in buggy if "seeds" in r]
    tv = [r for r in correct if r["protocol"] in ("table", "view")]
    secs = [r["seed0"]["seconds"] for r in rows if r["seed0"].get("verdict")]  # the audits that ran, seed 0
    return {"buggy": len(buggy),
            "flagged_seed0": sum(r["seed0"].get("verdict") == "violation" for r in buggy),
            "multi_flagged_seed0": sum(r["multi_run"].get("verdict") == "violation" for r in buggy),
            "buggy_studied": len(studied), "buggy_audits": sum(r["seeds"]["n"] for r in studied),
            "buggy_flagged": sum(r["seeds"]["verdicts"].get("violation", 0) for r in studied),
            "correct_audits": sum(r["seeds"]["n"] for r in correct),
            "false_alarms": sum(r["seeds"]["verdicts"].get("violation", 0) for r in correct),
            "correct_audits_table_view": sum(r["seeds"]["n"] for r in tv),
            "false_alarms_table_view": sum(r["seeds"]["verdicts"].get("violation", 0) for r in tv),
            "seconds_min": min(secs, default=None), "seconds_max": max(secs, default=None)}


def merge(name: str, others: list[Path]) -> None:
    """Fold the last ``--update`` of each copy in ``others`` into the study ``name``: the rows that update ran
    replace this study's rows of the same case, and its entry is appended to ``updates`` (renumbered)."""
    out = json.loads((RESULTS / f"{name}.json").read_text())
    base_updates, base_seconds = list(out.get("updates", [])), out["total_seconds"]
    for f in others:
        other = json.loads(f.read_text())
        if not other.get("updates") or not other.get("complete", False):
            raise SystemExit(f"{f}: no finished --update to merge (a study stopped early is not merged).")
        if other["updates"][:-1] != base_updates:
            raise SystemExit(f"{f}: not a copy of benchmarks/results/{name}.json with one --update more (its earlier updates "
                             "differ); run the update from a checkout of this study.")
        n = len(other["updates"])
        out.setdefault("updates", []).append(other["updates"][-1])
        k = len(out["updates"])
        at = {(r["policy"], r["protocol"]): i for i, r in enumerate(out["rows"])}
        for r in other["rows"]:
            if r.get("updated") != n:
                continue
            r = {**r, "updated": k}
            key = (r["policy"], r["protocol"])
            if key in at:
                out["rows"][at[key]] = r
            else:
                out["rows"].append(r)
        out["total_seconds"] += other["total_seconds"] - base_seconds  # the update's own seconds
    _write(out, name)


def _write(out: dict[str, Any], name: str) -> None:
    out["summary"] = summary(out["rows"])
    (RESULTS / f"{name}.json").write_text(json.dumps(out, indent=1, default=str))
    write_md(out, RESULTS / f"{name}.md")


#: why a buggy case is not flagged from 10 runs (the analysis behind the detection table; checked against its
#: numbers: the cap of r all-correct guesses at 95% is 0.93 for 9, 1.05 for 10, 1.71 for 18, 2.14 for 27 by
#: Steinke et al. at delta = 0; by the f-DP test of Gaussian DP at delta = 1e-5, 1.40 for 9 among 99 canaries,
#: 2.98 for 18; the per-position accuracies are over 40 runs at seed 0, python benchmarks/studies/one_run.py does not
#: measure them)
WHY_NOT = {
    "mutant-etc-raw-commit": "decides once per run: its commit after 1,000 round-robin exploration rounds is the "
                             "majority of the 9 canaries there (rounds 1 .. 511 all fall on arm 1), so a guess from "
                             "it is right with probability 1/2 + C(8,4)/2^9 = 0.64 (52 of 81 show 0.18); with one "
                             "canary in the exploration it would be one exact guess per run, and 9 counted runs "
                             "show at most 0.93 < 1 (all 10, with a rule fixed without a pilot, 1.05)",
    "thirdparty/etc.py:WrongScaleETC": "decides once per run (its commit, the majority of the exploration canaries, "
                                       "as mutant-etc-raw-commit): at most 9 informative guesses from 9 counted "
                                       "runs, eps = 0.93 < 1",
    "mutant-se-shared-noise": ("decides at most once per run at the default horizon: with 2 arms its epochs "
                               "(R_e = 650, 3,309 pulls per arm) end at rounds 1,300 and 7,918, so T = 4096 holds one "
                               "elimination test per run, as a commit (9 counted runs show at most 0.93 < 1); and "
                               "that test never fires on the constant middle background (equal means): only a "
                               "background whose gap sits at its threshold shows it, one a pilot run cannot find"),
    "thirdparty/elimination.py:SharedNoiseBlockElimination": ("as mutant-se-shared-noise: no elimination fires on "
                                                             "equal means, and with 2 arms the first one ends its "
                                                             "decisions (one arm left): at most one informative "
                                                             "decision per run"),
    "mutant-no-forgetting": ("flagged in some seeds: the first pulls' rewards feed every later release of their arms, "
                             "so in the first-pulls layout (chosen in every seed) the arm's later blocks keep "
                             "starting early, but each later release mixes the first reward with the arm's noisy "
                             "later ones: the pilots chose the ranks score at seeds 0-9 (`dpaudit check policy "
                             "mutant-no-forgetting --method one-run --seed S`), whose counted guesses were right "
                             "80-93% of the time, bounds 1.3-2.8 around the claim 1.91; the score, not the pilot's "
                             "choice, is the limit"),
    "mutant-adar-ucb-sqrt2-noise": "not an (eps, delta) violation at all: its true eps at delta = 1e-5 is 6.57, "
                                   "below the 11.13 its Renyi claim converts to, so only a Renyi bound (the multi-run "
                                   "audit's) can show it; a one-run bound is on eps at delta",
    "mutant-ucb-prefix-off-by-one": ("a leak of 1.36x (true eps 2.59 against the claim 1.91, one boundary round "
                                    "in two releases, 0.63-GDP as mutant-sqrt2-noise's canaries, whose limit at these "
                                    "sizes is below the claim even for an oracle, benchmarks/results/one_run_gaussian_table.md): "
                                    "its canaries are right 47-68% of the time per position, as the correct twin's"),
    "mutant-oful-half-sensitivity": ("the claim 7.08 (1-zCDP at delta = 1e-5) lies above the cap of the guesses "
                                    "10 runs make (5.6 at seed 0: every guess right could not pass it), and the round "
                                    "canaries barely move OFUL's actions: 38-60% right per position"),
    "mutant-sqrt2-noise": ("a leak of 1.41x in mu (2 rho-zCDP against rho): even an adversary reading every first release of "
                          "the first-pulls layout directly (256 canaries per run, 8 counted runs) shows a median of 1.59 "
                          "against the claim 1.91, and needs about 4,096 arms per run to pass it in most seeds "
                          "(benchmarks/results/one_run_gaussian_table.md); the actions only rank those releases"),
    "thirdparty/ucb_counter.py:NoResetEpisodicUCB": ("a leak of a few percent above the claim (the multi-run audit "
                                                    "bounds it at 1.04 from 50,000 runs per side): far more guesses "
                                                    "than 10 runs hold"),
    "mutant-ldp-half-sensitivity": ("missed in a seed or two: a Gaussian channel of mu = 0.41-GDP (eps 1.61 at "
                                    "delta = 1e-5) against the claim eps = 1 shows eps above 1 only in its tails, "
                                    "which the default 65,536 users per run reach (simulated, the pilot's rule passes "
                                    "the claim in 12 of 12 seeds there and in 2 of 12 at 4,096, the default before, "
                                    "benchmarks/results/one_run_gaussian.md)"),
    "mutant-ldp-sqrt2-noise": ("a Gaussian channel of mu = 0.29-GDP (eps 1.10 at delta = 1e-5): simulated at the "
                               "default 65,536 users per run the pilot's rule gives a median bound of 0.78, an oracle "
                               "rule that knows the bits 0.84 (benchmarks/results/one_run_gaussian.md)"),
    "mutant-ldp-peek": "the server reads one user's raw reward (user 0) and no other's: one leaking canary per run, "
                       "9 informative guesses show at most 0.93 < 1",
    "mutant-bco-fkm-peek": ("its users' channel is correct and the server reads one user's raw loss (user 0): the "
                            "one-run audit of a BCO policy judges the channel alone, and a leak confined to one user "
                            "per run gives at most 9 informative guesses (0.93 < 1)"),
    "mutant-mean-sensitivity": ("missed in one seed of 10: its true eps is huge (the multi-run bound is in the "
                               "table above), but one-run bounds are capped by the guesses, and the early canaries "
                               "(rounds 1 .. 15, right 57-70% of the time) pull them to about the claim 1.91 when "
                               "guessed; with two pilots 8 runs are counted, not 9"),
    "examples/per_run_ucb.py:LeakyUCB": ("missed at the two seeds whose pilots chose the first-pulls layout (1 and 8: "
                                         "its later plays rank its 256 first releases less well than one pilot run "
                                         "promised, 70-73% right, bounds 0.68 and 0.82); its leak is eps x n in an "
                                         "episode of n rounds, and the dyadic layout's 55-85 guesses give bounds "
                                         "just above the claim 1 at the other eight"),
}


def _beyond(k: int, n: int, level: float = 0.05) -> float:
    """P[Binomial(n, level) >= k]: how surprising k violations in n audits are if each is a false alarm with
    probability at most ``level`` (1 - confidence)."""
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, level)) if k else 1.0


def _layout(a: dict[str, Any], protocol: str) -> str:
    """The canary layout a one-run audit counted in (rows of earlier studies: the dyadic one, the only one then)."""
    name = a.get("layout") or ("users" if protocol == "local" else "dyadic")
    return name if a.get("n_arms") is None else f"{name} ({a['n_arms']})"


def _label(r: dict[str, Any]) -> str:
    return r["policy"] + (f" (update {r['updated']})" if r.get("updated") else "")


def write_md(out: dict[str, Any], path: Path) -> None:
    rows = out["rows"]
    slow_note = ""
    if out.get("slow_seeds") or out.get("slow_detect_seeds"):
        slow_note = (f" Cases whose seed-0 audit took longer than {out['slow_seconds']:g} s (the outside classes run "
                     f"through the per-run adapter, 8-16 s per audit) are studied over {out.get('slow_seeds')} seeds "
                     f"(correct) and {out.get('slow_detect_seeds')} (buggy), for time; they are marked 'slow'.")
    correct = [r for r in rows if r["correct"] and "seeds" in r]
    buggy = [r for r in rows if not r["correct"]]
    fa = sum(r["seeds"]["verdicts"].get("violation", 0) for r in correct)
    n_fa = sum(r["seeds"]["n"] for r in correct)
    flagged0 = [r for r in buggy if r["seed0"].get("verdict") == "violation"]
    studied = [r for r in buggy if "seeds" in r]
    flagged_n = sum(r["seeds"]["verdicts"].get("violation", 0) for r in studied)
    seeds_n = sum(r["seeds"]["n"] for r in studied)
    L = ["# One-run audits beside the multi-run audit",
         "",
         "Generated by `python benchmarks/studies/one_run.py {argv}`: every case audited with "
         "`dpaudit.audit(NAME, protocol=P, method=\"one-run\", seed=S, workers=1)` at the one-run defaults (10 runs "
         "in all, 1 pilot and 9 counted, or 2 pilots, one per canary layout, and 8 counted where the policy's n_arms "
         "is free and the first-pulls layout is offered; T = 4096 rounds, or 4096 users per run under local, as the rows "
         "re-run since ran unless their update names other defaults), in one process, one "
         "after the other, on a shared 2-core machine (wall seconds; CPU seconds include the forked process a "
         "plug-in runs in). The multi-run columns are the CLI's default audit (`dpaudit check policy NAME --protocol "
         "P`, 50,000 runs per side planned, 2 workers), from `benchmarks/results/defaults.json` where it has the row, else "
         "run by this script in a fresh process. The classes run through the per-run adapter are given "
         "n_arms = 2 in the multi-run audit and left free (default 2) in the one-run audit, which then pilots many "
         "arms too (the first-pulls layout: 64 arms up to update 3, T / 16 = 256 since).{slow}{partial}".format(
             argv=" ".join(out.get("argv", [])), slow=slow_note,
             partial="" if out.get("complete", True) else " **Partial: the study was stopped before every case ran.**"),
         "",
         *([] if not out.get("updates") else [
             "Rows re-run since (their own seeds counts are in the tables; the others are the study above): "
             + "; ".join(f"update {i + 1}, `python benchmarks/studies/one_run.py {' '.join(u['argv'])}` ({u['cases']} cases"
                         f"{_defaults_note(u)}, marked 'update {i + 1}' below)" for i, u in enumerate(out["updates"]))
            + ".", ""]),
         f"**Headline.** From 10 runs, the one-run audit flags {len(flagged0)} of the {len(buggy)} buggy audits (policy x "
         f"protocol) at seed 0 "
         f"({', '.join(sorted({r['policy'] for r in flagged0}))}); the multi-run audit flags "
         f"{sum(r['multi_run'].get('verdict') == 'violation' for r in buggy)} of them. Over seeds, {flagged_n} of the "
         f"{seeds_n} audits of the {len(studied)} buggy cases it runs on are violations. On the correct cases: {fa} "
         f"violations in {n_fa} audits (the 95% bounds allow up to 5% each; "
         f"P[Binomial({n_fa}, 0.05) >= {fa}] = {_beyond(fa, n_fa):.3g}).",
         "",
         "## Seed 0: every case",
         "",
         "| policy | protocol | correct? | one-run verdict | bound | claimed eps | cap (all guesses right) | right / guesses "
         "| layout (arms) | analysis | wall s | CPU s | multi-run verdict | multi-run bound | multi-run wall s |",
         "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- | ---: | ---: |"]
    for r in rows:
        a, m = r["seed0"], r["multi_run"]
        mv = m.get("verdict", m.get("error", "-"))
        if "error" in a:
            L.append(f"| {_label(r)} | {r['protocol']} | {'yes' if r['correct'] else 'bug'} | refused: {a['error']} "
                     f"| - | - | - | - | - | - | - | - | {mv} | {_f(m.get('epsilon_lower'))} | {_f(m.get('seconds'), 3)} |")
            continue
        L.append(f"| {_label(r)} | {r['protocol']} | {'yes' if r['correct'] else 'bug'} | {a['verdict']} | "
                 f"{_f(a['epsilon_lower'])} | {_f(a['epsilon_claimed'])} | {_f(a['cap'])} | {a['correct']} / "
                 f"{a['guesses']} | {_layout(a, r['protocol'])} | {a['analysis']} | {a['seconds']:.1f} | {a['cpu_seconds']:.1f} | "
                 f"{mv} | {_f(m.get('epsilon_lower'))} | {_f(m.get('seconds'), 3)} |")
    L += ["", "## False alarms: every correct case over seeds", "",
          "A case's violations are beyond the confidence when P[Binomial(seeds, 0.05) >= violations] < 0.01.", "",
          "| policy | protocol | seeds | violations | P[Binomial(seeds, 0.05) >= violations] | 95% upper bound on the "
          "false-alarm rate | consistent | inconclusive | bound: median (max) | wall s (median) |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    for r in correct:
        s = r["seeds"]
        v = s["verdicts"]
        k = v.get("violation", 0)
        L.append(f"| {_label(r)}{' (slow)' if r.get('slow') else ''} | {r['protocol']} | {s['n']} | {k} | "
                 f"{_beyond(k, s['n']):.3g} | {_cp_upper(k, s['n']):.3g} | {v.get('consistent', 0)} | "
                 f"{v.get('inconclusive', 0)} | {_f(s['bound_median'])} ({_f(s['bound_max'])}) | "
                 f"{s['seconds_median']:.1f} |")
    beyond = [r["policy"] for r in correct if _beyond(r["seeds"]["verdicts"].get("violation", 0), r["seeds"]["n"]) < 0.01]
    L += ["", f"{fa} false alarms in {n_fa} audits of correct cases; beyond the confidence: "
          f"{', '.join(beyond) if beyond else 'none'}.", "",
          "## Detection: every buggy case over seeds", "",
          "| policy | protocol | seeds | flagged | consistent | inconclusive | bound: median (max) | claimed eps | cap at seed 0 "
          "| why not flagged |",
          "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |"]
    for r in buggy:
        a = r["seed0"]
        s = r.get("seeds")
        why = "" if s and s["verdicts"].get("violation", 0) == s["n"] else WHY_NOT.get(r["policy"], "")
        if s is None:
            if "error" in a:
                L.append(f"| {_label(r)} | {r['protocol']} | - | refused | - | - | - | - | - | {why} |")
                continue
            s = {"n": 1, "verdicts": {a["verdict"]: 1}, "bound_median": a["epsilon_lower"], "bound_max": a["epsilon_lower"]}
        v = s["verdicts"]
        L.append(f"| {_label(r)}{' (slow)' if r.get('slow') else ''} | {r['protocol']} | {s['n']} | "
                 f"{v.get('violation', 0)} | {v.get('consistent', 0)} | {v.get('inconclusive', 0)} | "
                 f"{_f(s['bound_median'])} ({_f(s['bound_max'])}) | {_f(a.get('epsilon_claimed'))} | {_f(a.get('cap'))} "
                 f"| {why} |")
    L += ["", f"Total wall time {out['total_seconds']:.0f} s.", ""]
    path.write_text("\n".join(L))


def render(json_path: str) -> None:
    """Rewrite the .md of a finished (or stopped) study from its .json, and the .json's summary."""
    src = Path(json_path)
    out = json.loads(src.read_text())
    out["summary"] = summary(out["rows"])
    src.write_text(json.dumps(out, indent=1, default=str))
    write_md(out, src.with_suffix(".md"))


if __name__ == "__main__":
    main()
