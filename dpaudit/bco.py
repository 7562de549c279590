"""The local audit of BCO policies (continuous actions, seed 003; the contract: :mod:`dpaudit.protocols.continuous`).

The local audit (``dpaudit check policy ldp-bco-fkm --protocol local``), :func:`audit_local_bco`,
runs :mod:`dpaudit.check_local`'s parts on BCO:

1. *ledger*: 200 runs on the audit's background losses, every message composed per user (exact);
2. *channel*: :func:`dpaudit.check_local.channel_attack` on the user datum's domain extremes;
4. *transcript*: for users j in {0, 1, T/2, T-2}, neighbouring loss sequences that differ in user
   j's loss only (the other users' losses are 0): constants -B vs +B for one-point policies (the
   datum's extremes), linear -g<e_1, x> vs +g<e_1, x> (g = min(G, B/R)) for two-point ones (their
   difference 2 rho g <e_1, u_j> reaches the extremes only when u_j = +-e_1: no fixed loss does
   better). The features are the message o_j and, for m = 2, o_j times the unit direction of
   x_{j,1} - x_{j,2}; a threshold test on their projection onto the mean difference learnt on a split;
5. *central* (Table DP, seed 003 Thm 1; the view is the point sequence): the same neighbouring
   sequences, features the centre of round j + 1's points and its outer product with round j's
   exploration direction (x_{j,1} - x_{j,2})/2, or x_j itself for m = 1, projected on the learnt mean
   difference; a threshold test as above. This is what the central audit of K-armed policies does
   with its own attacks; here it is one learnt projection.

The verdict rule is :func:`dpaudit.check_local.audit_local`'s.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from dpaudit.attacks.membership import threshold_attack
from dpaudit.protocols.continuous import central_features, loss_pair, play, transcript_features
from dpaudit.simulate import simulate_bco

__all__ = ["audit_local_bco"]


# ---- the local audit ------------------------------------------------------------------------------------


def _view_attack(kind: str, policy_for: Callable[[], Any], probe: Any, horizon: int, *, delta: float, confidence: float,
                 n_fresh: int, n_select: int, seed: np.random.SeedSequence):
    """Part 4 (kind "transcript": the messages) or 5 (kind "central": the points only), over users j."""
    from dpaudit.attacks.result import AuditResult

    t0 = time.perf_counter()
    last = horizon - 2  # the central features need round j + 1
    rounds = sorted({j for j in (0, 1, horizon // 2, last) if 0 <= j <= last})
    rows = []
    for j, ss in zip(rounds, seed.spawn(len(rounds))):
        pair = loss_pair(probe, horizon, j)

        def sample(side: int, n: int, rng: np.random.Generator, j: int = j, pair: Any = pair) -> np.ndarray:
            if kind == "transcript":
                return transcript_features(play(policy_for, pair[side], n, rng, j + 1), j)
            return central_features(play(policy_for, pair[side], n, rng, j + 2), j)

        res = threshold_attack(sample, n_select, n_fresh, ss, delta, confidence, len(rounds), max(n_fresh, 1))
        res["round"] = j
        rows.append(res)
    best = max(rows, key=lambda r: r["epsilon_lower"])
    what = (f"user {best['round']}'s loss f = -{probe.loss_bound:g} vs +{probe.loss_bound:g}" if probe.n_points == 1
            else f"user {best['round']}'s loss f(x) = -g<e_1, x> vs +g<e_1, x>")
    label = f"{what} (other users' losses 0)"
    stat = ("projection of (message, message x direction of x1 - x2) onto the learnt mean difference"
            if kind == "transcript" else "projection of (centre of the next points, its outer product with the "
            "exploration direction) onto the learnt mean difference")
    if kind == "transcript" and probe.n_points == 1:
        stat = "message"
    witness = {"label": label, "statistic": stat, "threshold": best["threshold"], "direction": best["direction"]}
    return AuditResult(kind, best["epsilon_lower"], delta, confidence, witness,
                       samples=2 * len(rounds) * (n_fresh + n_select + max(1, n_select // 2)),
                       seconds=time.perf_counter() - t0, details={"fpr": best["fpr"], "fnr": best["fnr"], "rounds": rows})


def audit_local_bco(policy_for: Callable[[], Any], out: dict[str, Any], *, delta: float, confidence: float, runs: int,
                    horizon: int, seed: int, central: bool, eps_claim: float,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The local audit of a BCO policy (module docstring); ``out`` holds what audit_local filled in already."""
    from dpaudit import __version__
    from dpaudit.accounting import ledger_per_user
    from dpaudit.check_local import LOCAL_DEFAULTS, channel_attack, ledger_findings, local_verdict

    t_start = time.perf_counter()
    T = horizon
    policy = policy_for()
    notes = out["notes"]
    root = np.random.SeedSequence(seed)
    s_ledger, s_channel, s_transcript, s_central = root.spawn(4)
    n_parts = 2 + int(central)
    conf_each = 1 - (1 - confidence) / n_parts
    out.update({"n_arms": None, "action_space": f"points of the ball of radius {policy.radius:g} in R^{policy.d}, "
                f"{policy.n_points} per round", "confidence_per_attack": conf_each})

    # 1. ledger: the background losses (0, and user 0 at the low extreme), 200 runs
    if progress:
        progress("local: ledger")
    pol = policy_for()
    simulate_bco(pol, loss_pair(pol, T, 0)[0], 200, int(s_ledger.generate_state(1)[0]), record=True)
    ledger = ledger_per_user(pol.ledger, delta)
    ledger_findings(out, notes, policy, ledger, 200 * T)
    out["exact"] = None

    # 2. channel, black box
    if progress:
        progress("local: channel attack")
    attacks = [channel_attack(policy, delta=delta, confidence=conf_each, n_fresh=LOCAL_DEFAULTS["channel_factor"] * runs,
                              n_select=max(2000, runs // 2), seed=s_channel)]
    # 4. transcript
    if progress:
        progress("local: transcript attack")
    n_tr = max(1000, runs // LOCAL_DEFAULTS["transcript_div"])
    attacks.append(_view_attack("transcript", policy_for, policy, T, delta=delta, confidence=conf_each, n_fresh=n_tr,
                                n_select=max(1000, n_tr // 5), seed=s_transcript))
    # 5. central Table DP on the point sequence
    central_out = None
    if central:
        if progress:
            progress("local: central Table-DP audit (points)")
        n_c = max(1000, runs // LOCAL_DEFAULTS["central_div"])
        c = _view_attack("central", policy_for, policy, T, delta=delta, confidence=conf_each, n_fresh=n_c,
                         n_select=max(1000, n_c // 5), seed=s_central)
        low = c.epsilon_lower
        verdict = "violation" if low > eps_claim else "consistent"
        central_out = {"verdict": verdict, "epsilon_claimed": eps_claim, "epsilon_lower": low, "gap": eps_claim - low,
                       "reason": (f"the point-sequence attack's lower bound eps >= {low:.4g} "
                                  f"{'exceeds' if low > eps_claim else 'is within'} the claimed eps = {eps_claim:.4g}"),
                       "witness": c.witness, "attacks": [c.to_dict()], "ledger": None,
                       "notes": ["the view is the sequence of points played (BCO): one learnt-projection threshold "
                                 "test, not the K-armed audit's attacks"], "seconds": c.seconds}
    out["central"] = central_out

    verdict, reason, best_lower = local_verdict(eps_claim, delta, ledger, None, attacks, central_out)
    out.update({"verdict": verdict, "reason": reason, "epsilon_lower": best_lower, "gap": eps_claim - best_lower,
                "attacks": [a.to_dict() for a in attacks],
                "versions": {"dpaudit": __version__, "numpy": np.__version__},
                "seconds": out.get("seconds_before", 0.0) + time.perf_counter() - t_start})
    out.pop("seconds_before", None)
    return out


