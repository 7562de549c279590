"""Findings of a fixed set of small audits, one per protocol path, as canonical JSON (for refactors).

A change that only moves code must leave every audit's findings unchanged. Run this at two commits
and compare the printed digests (or ``diff`` the JSON files it writes):

    python benchmarks/move_check.py --out /tmp/before   # at the old commit
    python benchmarks/move_check.py --out /tmp/after    # at the new one
    diff -r /tmp/before /tmp/after

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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
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


def run_case(kw: dict) -> dict:
    import dpaudit

    kw = dict(kw)
    policy = kw.pop("policy")
    return dpaudit.audit(policy, seed=0, workers=1, **kw).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for one JSON file per case")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
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
    for name, argv in {"exact-table-counterexample": ["seed001-counterexample", "--protocol", "table"],
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
