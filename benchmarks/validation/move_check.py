"""Findings of a fixed set of small audits, one per protocol path, as canonical JSON (for refactors).

A change that only moves code must leave every audit's findings unchanged. Run this at two commits
and compare the printed digests (or ``diff`` the JSON files it writes):

    python benchmarks/validation/move_check.py --out /tmp/before   # at the old commit
    python benchmarks/validation/move_check.py --out /tmp/after    # at the new one
    python benchmarks/validation/move_check.py --compare /tmp/before /tmp/after

``--compare`` rounds every number to 9 significant digits first (a change of floating-point rounding,
e.g. one Clopper-Pearson routine for another, is not a change of findings) and names each case whose
findings differ, with the first differing key.

Run times, the engine's description and the recorded command are left out (they describe how an
audit ran, not what it found). The audits use small sample sizes: this checks identity, not power.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
#: keys that describe how an audit ran, not what it found
RUN_KEYS = {"seconds", "workers", "checkpoint", "attacks_seconds", "command", "versions", "seconds_before", "format"}

CASES = {
    "table-adac-ucb": dict(policy="adac-ucb", params={"n_arms": 3, "rho": 0.5}, runs=2000),
    "view-adac-ucb": dict(policy="adac-ucb", params={"n_arms": 3, "rho": 0.5}, runs=2000, protocol="view"),
    "interactive-adac-ucb": dict(policy="adac-ucb", params={"n_arms": 2, "rho": 0.5}, runs=1000,
                                 protocol="interactive"),
    "table-mutant-shared-noise": dict(policy="mutant-shared-noise", runs=2000),
    "table-dp-etc": dict(policy="dp-etc", runs=1000, horizon=1049),
    "table-plugin": dict(policy=str(ROOT / "examples/plugin_template.py") + ":MyPolicy", runs=1000),
    "table-pair": dict(policy="adac-ucb", params={"n_arms": 2}, runs=1000, pair=str(ROOT / "examples/pair_table.json")),
    "table-per-run": dict(policy=str(ROOT / "examples/per_run_ucb.py") + ":LeakyUCB", adapter="per-run",
                          claim="pure:eps=1", runs=500, horizon=48, params={"n_arms": 2}),
    "local-ldp-ucb": dict(policy="ldp-ucb", runs=1000, protocol="local"),
    "local-mutant-ldp-peek": dict(policy="mutant-ldp-peek", runs=1000, protocol="local"),
    "local-ldp-bco-fkm": dict(policy="ldp-bco-fkm", runs=500, protocol="local"),
    "joint-jdp-glm": dict(policy="jdp-glm", runs=500, protocol="joint", horizon=16),
    "shuffle-shuffle-glm": dict(policy="shuffle-glm", runs=500, protocol="shuffle"),
}


def strip(x):
    if isinstance(x, str):  # a time quoted inside a note, e.g. "exact enumeration (0.0455 s)"
        return re.sub(r"\(\d+(\.\d+)?(e-?\d+)? s\)", "(_ s)", x)
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in RUN_KEYS}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def rounded(x):
    if isinstance(x, float):
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def first_difference(a, b, where=""):
    if type(a) is not type(b):
        return f"{where or '/'}: {str(a)[:80]} != {str(b)[:80]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'the second' if k in b else 'the first'}"
            d = first_difference(a[k], b[k], f"{where}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for i, (u, v) in enumerate(zip(a, b)):
            d = first_difference(u, v, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {str(a)[:80]} != {str(b)[:80]}"


def compare(one: Path, two: Path) -> int:
    bad = 0
    for f in sorted(one.glob("*.json")):
        g = two / f.name
        if not g.exists():
            print(f"{f.stem:<28} missing in {two}")
            bad += 1
            continue
        d = first_difference(rounded(strip(json.loads(f.read_text()))), rounded(strip(json.loads(g.read_text()))))
        print(f"{f.stem:<28} {'same' if d is None else 'DIFFERS ' + d}")
        bad += d is not None
    return bad


def run_case(kw: dict) -> dict:
    import dpaudit

    kw = dict(kw)
    policy = kw.pop("policy")
    return dpaudit.audit(policy, seed=0, workers=1, **kw).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for one JSON file per case")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--compare", nargs=2, metavar=("DIR1", "DIR2"), help="compare two earlier runs")
    args = ap.parse_args()
    if args.compare:
        sys.exit(1 if compare(Path(args.compare[0]), Path(args.compare[1])) else 0)
    if not args.out:
        ap.error("give --out DIR (or --compare DIR1 DIR2)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, kw in CASES.items():
        if args.only and name not in args.only:
            continue
        try:
            found = strip(run_case(kw))
        except Exception as exc:  # recorded, so a refactor that breaks a case shows as a difference
            found = {"error": f"{type(exc).__name__}: {exc}"}
        text = json.dumps(found, sort_keys=True, indent=1, default=str)
        (out / f"{name}.json").write_text(text)
        print(f"{name:<28} {hashlib.sha256(text.encode()).hexdigest()[:16]}", flush=True)
    # exact audits through the command line
    for name, argv in {"exact-table-counterexample": ["table-vs-view-counterexample", "--protocol", "table"],
                       "exact-joint-rr": ["jdp-finite-rr", "--protocol", "joint"]}.items():
        if args.only and name not in args.only:
            continue
        res = subprocess.run([sys.executable, "-m", "dpaudit", "check", "policy", *argv, "--json"],
                             capture_output=True, text=True, cwd="/")
        try:
            found = strip(json.loads(res.stdout))
        except json.JSONDecodeError:
            found = {"error": res.stderr.strip()[-500:]}
        text = json.dumps(found, sort_keys=True, indent=1, default=str)
        (out / f"{name}.json").write_text(text)
        print(f"{name:<28} {hashlib.sha256(text.encode()).hexdigest()[:16]}", flush=True)


if __name__ == "__main__":
    main()
