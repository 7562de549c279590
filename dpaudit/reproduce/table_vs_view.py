"""Azize & Basu (2023a), Prop. 1(e) (App. B): the T = 3, K = 2 policy that is View DP but not Table DP, audited exactly.

The paper is Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits" (:mod:`dpaudit.papers`); the output names it by
authors and year and gives its full reference.

``dpaudit reproduce table-vs-view`` prints the paper's statement beside dpaudit's exact numbers
(:func:`dpaudit.attacks.exact.exact_profile` under View, Table and Interactive DP).
"""

from __future__ import annotations

import argparse
import math

__all__ = ["table_vs_view"]


def table_vs_view(args: argparse.Namespace) -> int:
    """Azize & Basu (2023a), Prop. 1(e) (App. B): the paper's statement beside dpaudit's exact numbers."""
    import json

    from dpaudit.attacks.exact import exact_profile
    from dpaudit.attacks.result import jsonable
    from dpaudit.papers import PAPERS
    from dpaudit.policies.finite import bundled_spec

    eps1, delta1 = 0.95, 0.17
    policy = bundled_spec("table-vs-view-counterexample")
    prof = {p: exact_profile(policy, p, epsilons=[eps1], deltas=[delta1]) for p in ("view", "table", "interactive")}
    rows = [
        ("View delta at eps = 0.95", "<= 0.17", prof["view"].delta_at[0]),
        ("Table delta at eps = 0.95", "> 0.17", prof["table"].delta_at[0]),
        ("Table eps at delta = 0.17", "0.98", prof["table"].epsilon_at[0]),
        ("View eps at delta = 0.17", "(not given)", prof["view"].epsilon_at[0]),
        ("Interactive delta at eps = 0.95", "(not given)", prof["interactive"].delta_at[0]),
        ("Interactive eps at delta = 0.17", "(not given)", prof["interactive"].epsilon_at[0]),
    ]
    view_ok = prof["view"].delta_at[0] <= delta1 < prof["table"].delta_at[0]
    eps_ok = round(prof["table"].epsilon_at[0], 2) == 0.98
    if args.json:
        print(json.dumps(jsonable({
            "experiment": "table-vs-view",
            "paper": f"{PAPERS['azize-basu-2023a'].narrative}, Prop. 1(e) (App. B)",
            "reference": PAPERS["azize-basu-2023a"].reference,
            "rows": [{"quantity": q, "paper": p, "dpaudit": v} for q, p, v in rows],
            "reproduced": bool(view_ok and eps_ok),
            "witnesses": {p: prof[p].witnesses["delta"][0].to_dict() for p in prof},
        }), indent=2))
        return 0 if view_ok and eps_ok else 1
    print(f"{PAPERS['azize-basu-2023a'].narrative}, Prop. 1(e): the T = 3, K = 2 policy of App. B, audited exactly")
    print(f"Reference: {PAPERS['azize-basu-2023a'].reference}")
    print()
    print(f"{'quantity':<34} {'paper':>12} {'dpaudit (exact)':>16}")
    print("-" * 64)
    for q, p, v in rows:
        print(f"{q:<34} {p:>12} {v:>16.6g}")
    print()
    w = prof["table"].witnesses["delta"][0]
    print(f"Table witness: round {w.round} changes, {w.input} vs {w.neighbour};")
    print("  event " + "{" + ", ".join("".join(map(str, s)) for s in w.event) + "}"
          + f": P = {w.p_event:.6g}, e^0.95 Q + 0.17 = {math.exp(eps1) * w.q_event + delta1:.6g}")
    wi = prof["interactive"].witnesses["delta"][0]
    print(f"Interactive witness: adversary {wi.adversary}")
    print()
    if view_ok and eps_ok:
        print("Reproduced: (0.95, 0.17)-View DP holds, (0.95, 0.17)-Table DP fails, and the smallest Table")
        print(f"epsilon at delta = 0.17 is {prof['table'].epsilon_at[0]:.4f}, which rounds to the paper's 0.98.")
        return 0
    print("NOT reproduced: dpaudit's exact numbers disagree with the paper's statement.")
    return 1
