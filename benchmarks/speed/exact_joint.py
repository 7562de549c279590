"""How long the exact joint-DP enumeration takes, and where it refuses.

The randomised-response policy ``rr_wsls`` (C = 2 contexts, K = 2 arms, R = 2 rewards) at growing
horizons, plus a K = 3 variant of the one-context case (a random finite policy), each profiled at one
epsilon, one delta and one Rényi order (the CLI's defaults). The exact eps at delta = 1e-5 is checked
against the hand-derived log((3/4 - delta) / (1/4)). Wall clock on the shared 2-core machine.

Run:  python benchmarks/speed/exact_joint.py   (writes benchmarks/results/exact_joint.md)
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from dpaudit.attacks.exact import DEFAULT_MAX_WORK
from dpaudit.attacks.exact_joint import exact_joint_profile, joint_work
from dpaudit.errors import DPAuditError
from dpaudit.policies.finite_contextual import FiniteContextualPolicy, rr_wsls

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _random(T: int, C: int, K: int, R: int) -> FiniteContextualPolicy:
    rng = np.random.default_rng(0)
    return FiniteContextualPolicy([rng.dirichlet(np.ones(K), size=(C * K * R) ** t * C) for t in range(T)],
                                  [f"x{i}" for i in range(C)], list(range(R)))


def main() -> None:
    cases = [(f"rr_wsls T = {T} (C = K = R = 2)", rr_wsls(T)) for T in (3, 4, 5, 6, 7)]
    cases += [(f"random T = {T} (C = 1, K = 3, R = 2)", _random(T, 1, 3, 2)) for T in (3, 4, 5)]
    lines = ["# Exact joint-DP enumeration: time and size", "",
             "`python benchmarks/speed/exact_joint.py` (shared 2-core machine; default limit "
             f"{DEFAULT_MAX_WORK:.0e} operations).", "",
             "| policy | (history, pair, future) cases | estimated operations | seconds | eps(delta = 1e-5) | hand-derived |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    hand = math.log((0.75 - 1e-5) / 0.25)
    for label, pol in cases:
        w = joint_work(pol)
        try:
            t0 = time.perf_counter()
            prof = exact_joint_profile(pol)
            secs, eps = f"{time.perf_counter() - t0:.3f}", f"{prof.epsilon(1e-5):.6g}"
        except DPAuditError as exc:
            secs, eps = "refused", str(exc).split(" needs about ")[1].split(" operations")[0] + " ops"
        ref = f"{hand:.6g}" if label.startswith("rr") else "-"
        lines.append(f"| {label} | {w['pairs']} | {w['work']:.2g} | {secs} | {eps} | {ref} |")
        print(lines[-1], flush=True)
    (RESULTS / "exact_joint.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
