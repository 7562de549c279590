"""What a one-run local audit can show about a Gaussian channel: the bound against the users per run.

A local one-run audit (``--method one-run --protocol local``) sees each user's message once; on a Gaussian
channel of mu-GDP (the message of a user holding the top of the domain against one holding the bottom, in
units of the noise's sd) every canary is one draw of N(+-mu/2, 1). This simulates exactly that, without a
policy: one pilot run and 9 counted runs of ``users`` canaries each, the guess rule chosen on the pilot by
``dpaudit.attacks.one_run.choose_rule`` (with the coarse fractions of the table/view audits, and with the
finer fractions a local pilot offers, ``FINE_FRACTIONS``), and the f-DP bound of the (eps, delta)-DP curve at
delta = 1e-5 (Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run", 2025) on the
counted canaries, beside an oracle that knows the bits and takes the best symmetric top/bottom fraction of
the counted canaries (an upper envelope of any pilot's choice at that sample size, not a valid bound).

The channels: ``ldp-ucb``'s (the classical calibration at eps = 1, delta = 1e-5: mu = 0.206, exact eps at
delta 0.75), ``mutant-ldp-sqrt2-noise``'s (mu = 0.292, exact eps 1.10) and ``mutant-ldp-half-sensitivity``'s
(mu = 0.413, exact eps 1.61); each claims eps = 1 at delta = 1e-5.

With ``--audit-seeds N``, also the real one-run audits of the three registered policies at ``--audit-users``
users per run (``dpaudit.audit(NAME, protocol="local", method="one-run", horizon=USERS, seed=S)``, S < N).

With ``--part table``, the same for the first releases of AdaC-UCB (Azize & Basu 2023a, App. C, Alg. 4) in the
first-pulls layout of a table/view one-run audit: each arm's first pull is a canary released alone with
Gaussian noise, so reading those releases directly is the most any adversary of that layout can do. The
correct policy at rho = 0.1 releases sqrt(2 rho) = 0.447-GDP per canary (its claim, eps 1.91 at delta = 1e-5),
``mutant-sqrt2-noise`` 0.632-GDP (sigma too small by sqrt 2); one pilot and 8 counted runs (the first-pulls
layout's), of K canaries each (256 arms at the audit's default T = 4096), judged by the f-DP test of Gaussian DP.

    python benchmarks/studies/one_run_gaussian.py [--part local|table] [--seeds 12] [--users 4096 16384 65536]
        [--audit-seeds 5] [--audit-users 65536] [--out one_run_gaussian]
    (writes benchmarks/results/one_run_gaussian.{json,md}, or --out's stem there)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from dpaudit.attacks import one_run as o

RESULTS = Path(__file__).resolve().parents[1] / "results"
DELTA, CONFIDENCE, CLAIM, COUNTED = 1e-5, 0.95, 1.0, 9
CHANNELS = (("ldp-ucb", 1 / math.sqrt(2 * math.log(1.25 / DELTA))),
            ("mutant-ldp-sqrt2-noise", math.sqrt(2) / math.sqrt(2 * math.log(1.25 / DELTA))),
            ("mutant-ldp-half-sensitivity", 2 / math.sqrt(2 * math.log(1.25 / DELTA))))
ORACLE_FRACTIONS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
#: the table part: AdaC-UCB's first releases at rho = 0.1, the correct one and mutant-sqrt2-noise's
RHO = 0.1
TABLE_CHANNELS = (("adac-ucb (rho = 0.1)", math.sqrt(2 * RHO)), ("mutant-sqrt2-noise", math.sqrt(4 * RHO)))
#: per part: the channels, the analysis, its claim (eps at DELTA), the counted runs, what a run's canaries are
PARTS = {"local": {"channels": CHANNELS, "analysis": "fdp-approx", "claim": CLAIM, "counted": COUNTED,
                   "unit": "users per run"},
         "table": {"channels": TABLE_CHANNELS, "analysis": "fdp-gaussian", "claim": None, "counted": 8,
                   "unit": "arms (canaries) per run"}}
ANALYSIS = "fdp-approx"


def _bound(m: int, r: int, v: int) -> float:
    return o.bound(ANALYSIS, m, r, v, DELTA, CONFIDENCE)["epsilon"]


def one_seed(mu: float, users: int, seed: int, counted: int = COUNTED) -> dict:
    rng = np.random.default_rng([seed, users, int(mu * 1e4)])
    ps = rng.choice(np.array([-1, 1]), users)
    px = rng.normal(ps * mu / 2, 1.0)
    cs = rng.choice(np.array([-1, 1]), counted * users)
    cx = rng.normal(cs * mu / 2, 1.0)
    m = cs.size
    out = {}
    for grid in ("coarse", "fine"):
        saved = o.FINE_FRACTIONS
        o.FINE_FRACTIONS = saved if grid == "fine" else ()
        try:
            rule, _, _ = o.choose_rule({"message": px}, ps, m, np.random.default_rng(seed), CONFIDENCE)
        finally:
            o.FINE_FRACTIONS = saved
        g = o.guesses(cx, *rule.counts(m)[:2], np.random.default_rng(seed + 1))
        r, v = int(np.count_nonzero(g)), int(np.count_nonzero(g * cs > 0))
        out[grid] = _bound(m, r, v)
    order = np.argsort(cx)
    best = 0.0
    for f in ORACLE_FRACTIONS:
        k = max(1, int(round(f * m / 2)))
        v = int((cs[order[-k:]] == 1).sum() + (cs[order[:k]] == -1).sum())
        best = max(best, _bound(m, 2 * k, v))
    out["oracle"] = best
    return out


#: the real policies of the table part (name, params), beside their simulated first releases
TABLE_POLICIES = (("adac-ucb (rho = 0.1)", "adac-ucb", {"rho": RHO}), ("mutant-sqrt2-noise", "mutant-sqrt2-noise", {}))
#: the fractions of the first-pull canaries guessed (half on each side) when the return order is compared with
#: the releases
RANK_FRACTIONS = (0.05, 0.1, 0.35, 1.0)


def _audit_arms() -> int:
    """The arms of the first-pulls layout at the one-run audit's default horizon."""
    from dpaudit.runner.one_run import ONE_RUN_DEFAULTS, wide_arms

    return wide_arms(ONE_RUN_DEFAULTS["horizon"])


def return_accuracy(spec: str, params: dict, mu: float, arms: int, runs: int) -> dict:
    """How close the actions come to the releases: the accuracy of the top and bottom fractions of the
    ``return`` score (how soon each arm is played again, :func:`dpaudit.attacks.one_run.action_features`) over
    ``runs`` runs of the real policy with ``arms`` arms in the first-pulls layout, beside the accuracy of the
    same fractions of its first releases themselves (simulated, N(+-mu/2, 1) per canary, 200,000 of them)."""
    from dpaudit.protocols import get_protocol
    from dpaudit.runner.setup import build_policy

    T = 4096
    policy = build_policy(spec, {"n_arms": arms, **params}, T)
    rounds = o.first_pull_rounds(T, arms)
    bits = np.random.default_rng(0).choice(np.array([-1, 1]), size=(runs, len(rounds)))
    inputs = o.canary_inputs(False, arms, T, rounds, bits, 0.0, 1.0, np.full((T, arms), 0.5))
    views = get_protocol("table").run_batch(policy, inputs, 1, np.random.default_rng(1), record=True).reshape(runs, T)
    score = o.action_features(views, rounds, returns=True)["return, later first"][:, :arms].ravel()
    y = bits[:, :arms].ravel()
    sim_y = np.random.default_rng(2).choice(np.array([-1, 1]), 200_000)
    sim = np.random.default_rng(3).normal(sim_y * mu / 2, 1.0)

    def acc(sc: np.ndarray, yy: np.ndarray, f: float) -> float:
        k = max(1, int(round(f * sc.size / 2)))
        order = np.argsort(sc, kind="stable")
        return float(((yy[order[-k:]] == 1).sum() + (yy[order[:k]] == -1).sum()) / (2 * k))

    return {"policy": spec, "arms": arms, "runs": runs, "canaries": int(y.size),
            "accuracy": {f"{f:.0%}": acc(score, y, f) for f in RANK_FRACTIONS},
            "release_accuracy": {f"{f:.0%}": acc(sim, sim_y, f) for f in RANK_FRACTIONS}}


def main() -> None:
    global ANALYSIS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=sorted(PARTS), default="local")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--users", type=int, nargs="+", default=[4096, 16384, 65536])
    ap.add_argument("--audit-seeds", type=int, default=0)
    ap.add_argument("--audit-users", type=int, default=65536)
    ap.add_argument("--out", default="one_run_gaussian")
    args = ap.parse_args()
    part = PARTS[args.part]
    ANALYSIS, claim, counted = part["analysis"], part["claim"], part["counted"]
    if claim is None:  # the audit's own reading of the zCDP claim at delta (what its verdict compares with)
        from dpaudit.accountants import ZCDP
        from dpaudit.runner.setup import claimed_epsilon

        claim = claimed_epsilon(ZCDP(RHO), DELTA)[0]
    t0 = time.perf_counter()
    rows = []
    for name, mu in part["channels"]:
        for users in args.users:
            per = [one_seed(mu, users, s, counted) for s in range(args.seeds)]
            row = {"channel": name, "mu": mu, "epsilon_exact": o.gdp_epsilon(mu, DELTA), "users_per_run": users,
                   "counted_canaries": counted * users, "seeds": args.seeds}
            for key in ("coarse", "fine", "oracle"):
                vals = np.array([p[key] for p in per])
                row[key] = {"median": float(np.median(vals)), "min": float(vals.min()), "max": float(vals.max()),
                            "above_claim": int((vals > claim).sum())}
            rows.append(row)
            print(name, users, {k: round(row[k]["median"], 3) for k in ("coarse", "fine", "oracle")}, flush=True)
    ranks = []
    for (label, spec, params), (_, mu) in zip(TABLE_POLICIES, TABLE_CHANNELS) if args.part == "table" else ():
        ranks.append({"channel": label, "mu": mu, **return_accuracy(spec, params, mu, _audit_arms(), 40)})
        print(label, "return order", ranks[-1]["accuracy"], "releases", ranks[-1]["release_accuracy"], flush=True)
    audits = []
    for name, mu in CHANNELS if args.audit_seeds and args.part == "local" else ():
        import dpaudit

        found = []
        for s in range(args.audit_seeds):
            t = time.perf_counter()
            a = dpaudit.audit(name, protocol="local", method="one-run", horizon=args.audit_users, seed=s, workers=1)
            found.append((a.verdict, float(a.epsilon_lower or 0.0), time.perf_counter() - t))
        bounds = [b for _, b, _ in found]
        audits.append({"policy": name, "mu": mu, "users_per_run": args.audit_users, "seeds": args.audit_seeds,
                       "violations": sum(v == "violation" for v, _, _ in found), "bounds": bounds,
                       "median": float(np.median(bounds)), "seconds_median": float(np.median([x for _, _, x in found]))})
        print(name, "audited", audits[-1]["violations"], "/", args.audit_seeds, flush=True)
    seconds = time.perf_counter() - t0
    cmd = "python benchmarks/studies/one_run_gaussian.py {}--seeds {} --users {}{}{}".format(
        "" if args.part == "local" else f"--part {args.part} ", args.seeds, " ".join(map(str, args.users)),
        f" --audit-seeds {args.audit_seeds} --audit-users {args.audit_users}" if args.audit_seeds else "",
        "" if args.out == "one_run_gaussian" else f" --out {args.out}")
    (RESULTS / f"{args.out}.json").write_text(json.dumps({"command": cmd, "seconds": seconds, "delta": DELTA,
                                                       "confidence": CONFIDENCE, "claim": claim, "part": args.part,
                                                       "analysis": ANALYSIS, "rows": rows, "return_order": ranks,
                                                       "audits": audits},
                                                      indent=1) + "\n")
    if args.part == "local":
        lines = ["# One-run local audits of a Gaussian channel: the bound against the users per run", "",
                 f"Generated by `{cmd}` ({seconds:.0f} s). Simulated canaries, no policy: one pilot run and "
                 f"{counted} counted runs of N users each, every user's message one draw of N(+-mu/2, 1); the rule "
                 "chosen on the pilot (`choose_rule`, coarse fractions 2-50% as a table/view pilot offers, or with "
                 "the finer 0.1-1% a pilot of thousands of users offers), the f-DP bound of the (eps, delta)-DP curve "
                 f"at delta = {DELTA:g}, confidence {CONFIDENCE}; the oracle takes the best symmetric top/bottom "
                 "fraction knowing the bits (an envelope of what any pilot could choose, not a valid bound). Every "
                 f"channel claims eps = {claim:g} at delta = {DELTA:g}; 'above' counts the seeds whose bound exceeds "
                 "it (a violation).", ""]
    else:
        lines = ["# One-run table audits of AdaC-UCB's first releases: the bound against the canaries per run", "",
                 f"Generated by `{cmd}` ({seconds:.0f} s). Simulated canaries, no policy: the first-pulls layout of a "
                 f"table/view one-run audit puts a canary on each arm's first pull, which AdaC-UCB releases alone with "
                 f"Gaussian noise; an adversary who read those releases directly (the actions only rank them) sees one "
                 f"draw of N(+-mu/2, 1) per canary. One pilot run and {counted} counted runs of K canaries (K arms; the "
                 f"audit's default is {_audit_arms()}), the rule chosen on the pilot as the audit chooses it, the f-DP test of "
                 f"Gaussian DP at delta = {DELTA:g}, confidence {CONFIDENCE}; the oracle takes the best symmetric "
                 "top/bottom fraction knowing the bits (an envelope of what any pilot could choose, not a valid bound). "
                 f"Both claim rho = {RHO:g}-zCDP: eps = {claim:.3f} at delta = {DELTA:g}, as the audit reads it (the "
                 "test bounds mu, converted to eps at delta, which a violation must pass); 'above' counts the seeds whose bound exceeds it (a violation). The mutant leaks 1.41x in mu: even "
                 "the oracle reading every release needs thousands of canaries per run to show it.", ""]
    lines += [f"| channel | mu (GDP) | exact eps at delta | {part['unit']} | counted canaries | pilot, coarse: median "
              "(min-max), above | pilot, fine: median (min-max), above | oracle: median, above |",
              "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for r in rows:
        def cell(k):
            x = r[k]
            return f"{x['median']:.3f} ({x['min']:.3f}-{x['max']:.3f}), {x['above_claim']}/{r['seeds']}"
        lines.append(f"| {r['channel']} | {r['mu']:.3f} | {r['epsilon_exact']:.3f} | {r['users_per_run']} | "
                     f"{r['counted_canaries']} | {cell('coarse')} | {cell('fine')} | {r['oracle']['median']:.3f}, "
                     f"{r['oracle']['above_claim']}/{r['seeds']} |")
    if ranks:
        lines += ["", "How much of the releases the actions show: the first-pulls layout's `return` score (how soon each "
                  f"arm is played again) of the real policy, 40 runs of {ranks[0]['arms']} arms "
                  f"(`dpaudit.runner.setup.build_policy(NAME, {{'n_arms': {ranks[0]['arms']}, ...}}, 4096)` on the "
                  "layout's table), guessing the top and bottom fraction of the "
                  "first-pull canaries, beside the same fractions of the first releases themselves (simulated):", "",
                  "| policy | fraction guessed | return order: accuracy | releases: accuracy |",
                  "| --- | ---: | ---: | ---: |"]
        lines += [f"| {r['channel']} | {f} | {r['accuracy'][f]:.3f} | {r['release_accuracy'][f]:.3f} |"
                  for r in ranks for f in r["accuracy"]]
    if audits:
        lines += ["", f"The registered policies audited for real at {args.audit_users} users per run (`dpaudit.audit(NAME, "
                  f"protocol=\"local\", method=\"one-run\", horizon={args.audit_users}, seed=S)`, S < "
                  f"{args.audit_seeds}, one process):", "",
                  "| policy | seeds | violations | bound: median (min-max) | s per audit (median) |",
                  "| --- | ---: | ---: | --- | ---: |"]
        lines += [f"| {a['policy']} | {a['seeds']} | {a['violations']} | {a['median']:.3f} ({min(a['bounds']):.3f}-"
                  f"{max(a['bounds']):.3f}) | {a['seconds_median']:.1f} |" for a in audits]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
