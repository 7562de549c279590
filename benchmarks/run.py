"""Run any benchmark by name, or list them: the one entry point of benchmarks/.

    python benchmarks/run.py --list              # name, folder, question, typical runtime
    python benchmarks/run.py NAME [ARGS...]      # python benchmarks/FOLDER/NAME.py ARGS...

Each benchmark is one script in ``speed/`` (how fast), ``validation/`` (is the audit right) or ``studies/``
(ablations and design studies); it writes its tables to ``results/``. ``NAME ARGS...`` runs the script in a
fresh interpreter with the arguments as given (``--help`` included), exactly as running it directly does:
the script's folder first on ``sys.path`` (so scripts that import a sibling find it), the repository root
not on it (from the root, ``python -m`` would put the source folder ``dpaudit/`` ahead of the installed
package, which maps ``dpaudit.attacks`` and ``dpaudit.accountants``: DESIGN.md's layout pitfall). The exit
status is the script's. README.md beside this file says what each benchmark feeds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDERS = ("speed", "validation", "studies")

#: name -> (the question it answers, its typical runtime: measured on the shared 2-core machine at load 5-7, or
#: the figure its own results record, or not recorded)
BENCHMARKS: dict[str, tuple[str, str]] = {
    # speed: how fast
    "accounting": ("How close to the optimum, and how fast, are dpaudit's accountants beside dp-accounting?",
                   "not recorded"),
    "adapter": ("What does the per-run adapter cost against native batching?",
                "~3 min with --audit (recorded: its 2 searches 136 s)"),
    "bench_oful": ("How many run-steps per second do the batched OFUL policies make?", "not recorded"),
    "bench_ucb": ("How much faster is batched AdaC-UCB than a per-run Python loop?", "5 s (measured)"),
    "dask_localcluster": ("Does an audit find the same, and how fast, here, on local processes and on Dask?",
                          "~4 min at --repeats 3 (recorded)"),
    "defaults": ("How long does every registered policy's default audit take, and what does it find?",
                 "~30 min with --thirdparty --repeat 3 (recorded: 574 s a sweep); ~10 min without"),
    "defaults_compare": ("Row by row, is the code faster or slower than another commit swept the same day?",
                         "under 1 s (measured)"),
    "exact": ("How long does exact enumeration take, T = 3-5, under each protocol?",
              "~2 min (recorded cells, best of 3)"),
    "exact_joint": ("How long does the exact joint-DP enumeration take, and where does it refuse?",
                    "7 s (measured)"),
    "greedy_costs": ("Where does the time of the two greedy per-run audits go, and could a futility stop cut it?",
                     "not recorded; its --findings audits 5-8 min each (recorded)"),
    "process_protocol": ("What do the process protocol's messages cost, beside the loop and per-run adapters?",
                         "17 s (measured)"),
    # validation: is the audit right
    "controls": ("Over many seeds, do correct policies pass and buggy ones get flagged (per suite)?",
                 "6-60 min a suite at 50 seeds (recorded)"),
    "joint_tightness": ("How close does the joint audit's bound come to what its sample size can show?",
                        "~5 min (recorded: 40 audits, 243 s)"),
    "ldp_tightness": ("How tight is the local black-box channel attack on a Gaussian channel of known eps?",
                      "1.5 min (measured)"),
    "limits": ("How close are measured bounds to the statistical limit of their sample size?",
               "~5 min (recorded: 24 audits, 271 s)"),
    "move_check": ("Does a refactor leave the findings of a fixed set of small audits unchanged?",
                   "not recorded"),
    "shuffle_accounting": ("Is the numerical shuffle-amplification bound valid, and how much tighter than the "
                           "closed form?", "8 s (measured)"),
    "shuffle_tightness": ("How tight is the shuffle audit against the pair's exact eps and the statistical limit?",
                          "over 15 min (recorded: 10 audits 910 s); --audits-only ~3 min"),
    "thirdparty_controls": ("What does the audit say of each third-party-style control, at one seed?",
                            "~2 min at --runs 5000 (recorded); --diagnostics ~9 min"),
    "thirdparty_ucb_counter_sim": ("How much does the no-reset counter UCB leak through its actions?",
                                   "42 s (recorded)"),
    "tightness": ("How close to the truth are the lower bounds, with how many samples, how fast?",
                  "not recorded (its timed parts: 23 s)"),
    "tightness_policies": ("How tight is each default audit: lower bound, limit, proved upper bound, claim?",
                           "under 1 s from defaults.json (measured)"),
    # studies: ablations and design studies
    "eps_ablation": ("Why does jdp-glm's regret gap to its non-private twin scale like 1/eps?",
                     "~4 min (recorded: 223 s; 482 s at --horizon 20000)"),
    "glm_baselines_tuning": ("Which width scales should the GLOC and RS-GLinUCB baselines default to?",
                             "1 min (recorded: 58 s)"),
    "joint_power": ("How much power has the joint audit's black-box attack on jdp-glm and its mutants?",
                    "~25 min (recorded: 1,467 s for the first table)"),
    "one_run": ("What can one-run audits (a few runs) show beside the multi-run audit?",
                "hours (recorded: 3.7 h over its updates)"),
    "one_run_arms": ("How many arms should the first-pulls layout of a one-run audit use?",
                     "~10 min (recorded: 584 s)"),
    "one_run_gaussian": ("What can a one-run audit show about a Gaussian channel, against canaries per run?",
                         "~11 min (recorded: 686 s); --part table 25 s"),
}


def scripts() -> dict[str, Path]:
    """Every benchmark script, by name (its file name without .py), found in the three folders."""
    found: dict[str, Path] = {}
    for folder in FOLDERS:
        for path in sorted((HERE / folder).glob("*.py")):
            if path.stem in found:
                raise SystemExit(f"two benchmarks are named {path.stem!r}: {found[path.stem]} and {path}; "
                                 "rename one (names are unique across the folders).")
            found[path.stem] = path
    return found


def listing(found: dict[str, Path]) -> str:
    """The --list table: name, folder, typical runtime and question of every benchmark."""
    rows = [(name, path.parent.name, *BENCHMARKS.get(name, ("(not described in run.py)", "?"))[::-1])
            for name, path in sorted(found.items(), key=lambda kv: (FOLDERS.index(kv[1].parent.name), kv[0]))]
    head = ("name", "folder", "typical runtime", "question")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3] for r in [head, *rows])


def main(argv: list[str]) -> int:
    found = scripts()
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if argv[0] == "--list":
        print(listing(found))
        return 0
    name, args = argv[0], argv[1:]
    if name not in found:
        print(f"run.py: no benchmark is named {name!r}; the names are {', '.join(sorted(found))} "
              "(python benchmarks/run.py --list).", file=sys.stderr)
        return 2
    try:
        return subprocess.call([sys.executable, str(found[name]), *args])
    except KeyboardInterrupt:  # the script got the same Ctrl-C (one process group) and stops on its own
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
