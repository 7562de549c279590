"""How long exact enumeration takes: T = 3, 4, 5, K = 2, R = 2, each protocol.

    python benchmarks/speed/exact.py      # prints a table and writes benchmarks/results/exact.md

Each cell is the best of 3 runs of one exact_profile call asking for delta at one epsilon, epsilon at
one delta and one Rényi divergence, on a random policy with full-support decision rules.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np

from dpaudit.attacks.exact import estimate_work, exact_profile
from dpaudit.policies.finite import FinitePolicy, bundled_spec


def random_policy(T: int, K: int = 2, R: int = 2, seed: int = 0) -> FinitePolicy:
    rng = np.random.default_rng(seed)
    rules = [rng.dirichlet(np.ones(K), size=(K * R) ** t).tolist() for t in range(T)]
    return FinitePolicy(rules, list(range(R)))


def timed(policy: FinitePolicy, protocol: str, repeats: int = 3, method: str = "tree") -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        exact_profile(policy, protocol, epsilons=[1.0], deltas=[0.1], alphas=[2.0], method=method, max_work=1e12)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rows = []
    cases = [("table-vs-view counterexample", bundled_spec("table-vs-view-counterexample"))]
    cases += [(f"random, T = {T}", random_policy(T)) for T in (3, 4, 5)]
    for label, pol in cases:
        for protocol, method in (("view", "tree"), ("table", "tree"), ("interactive", "tree"), ("interactive", "brute")):
            sizes = estimate_work(pol, protocol, method)
            name = protocol + (f" ({method})" if protocol == "interactive" else "")
            if sizes["work"] > 2e9:
                rows.append((name, label, sizes, None))
                continue
            rows.append((name, label, sizes, timed(pol, protocol, 1 if sizes["work"] > 1e8 else 3, method)))
    lines = [
        "# Exact enumeration: time per audit (K = 2, R = 2)",
        "",
        f"Measured by `python benchmarks/speed/exact.py` on {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, one process.",
        "",
        "Interactive DP: `tree` enumerates adversaries up to their last query and optimises the last",
        "query per output prefix (exact; the default); `brute` enumerates every deterministic adversary.",
        "",
        "| protocol (method) | policy | inputs | neighbouring pairs | adversaries (enumerated) | views | seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for protocol, label, s, sec in rows:
        t = "refused (over 2e9 operations)" if sec is None else f"{sec:.4f}"
        lines.append(f"| {protocol} | {label} | {s['inputs']} | {s['neighbouring_pairs']} | "
                     f"{s['adversaries']:.3g} ({s['adversaries_enumerated']:.3g}) | {s['views']} | {t} |")
    text = "\n".join(lines) + "\n"
    print(text)
    (Path(__file__).resolve().parents[1] / "results" / "exact.md").write_text(text)


if __name__ == "__main__":
    main()
