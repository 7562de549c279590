"""``dpaudit account``: what a guarantee, a noise calibration or a policy's ledger implies.

The arithmetic lives in :mod:`dpaudit.accountants` (which imports nothing from dpaudit's core);
this module adds the part that needs dpaudit objects: turning a :class:`~dpaudit.mechanisms.Ledger`
into per-round accounting arrays, running a policy on a fixed reward table, and comparing its
declared ``claim`` with what its ledger implies. Commands::

    dpaudit account zcdp --rho R --delta D
    dpaudit account rdp --alpha A --eps E --delta D
    dpaudit account gaussian --sigma S [--sensitivity 1] [--compositions n] --delta D
    dpaudit account policy NAME [--param k=v ...] --delta D
    dpaudit account calibrate --epsilon E --delta D [--sensitivity 1] [--compositions n]
    dpaudit account lint --epsilon E --delta D

Each prints a short table, or with ``--json`` one object with at least ``epsilon``, ``method`` and
``order`` (None where no Rényi order is involved).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dpaudit.accountants import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpaudit.accountants.composition import NoiseAccount, RoundAccount, per_round_account
from dpaudit.accountants.conversions import (
    rdp_to_approx,
    simple_zcdp_epsilon,
    zcdp_rho_for_epsilon,
    zcdp_to_approx,
)
from dpaudit.accountants.errors import DPAuditError, check_delta, check_int, check_positive
from dpaudit.accountants.gaussian import (
    gaussian_epsilon,
    gaussian_mu,
    gaussian_sigma,
    lint_classical_gaussian,
    lint_seed000_channel,
)
from dpaudit.mechanisms import Ledger

__all__ = [
    "ledger_entries",
    "ledger_account",
    "LedgerAccount",
    "claim_vs_ledger",
    "run_policy",
    "register_cli",
]


# ---- ledger -> per-round accounting ---------------------------------------------------------------

def ledger_entries(ledger: Ledger, horizon: int, reward_span: float | None = None) -> dict[str, np.ndarray]:
    """Flatten a ledger into one entry per (release, run, round fed): run, rnd, kind, ratio.

    ``ratio`` is sensitivity / noise scale. With a finite ``reward_span`` (the width of the reward
    range the policy accepts) it is the larger of the declared ratio and the one the release's
    coefficients imply (span * ||coef / scale||_2 for Gaussian, _1 for Laplace), so a release whose
    declared sensitivity is too small is accounted at its real one; ``understated`` counts the
    entries where that happened. A release without ``fed`` information is charged to every round
    up to its step (it might have used any of them).
    """
    runs, rnds, kinds, ratios = [], [], [], []
    understated = 0
    for rel in ledger.releases:
        n = rel.runs.size
        if n == 0:
            continue
        scale = np.asarray(rel.noise.scale, dtype=float)
        scale2 = np.broadcast_to(scale, (n,)).reshape(n, 1) if scale.ndim <= 1 else scale.reshape(n, -1)
        declared = rel.sensitivity / scale2.min(axis=1)  # (n,)
        gauss = rel.noise.kind == "gaussian"
        if rel.fed is None:
            last = horizon if rel.step < 0 else min(rel.step + 1, horizon)
            pos = np.repeat(np.arange(n), last)
            rnd = np.tile(np.arange(last), n)
            ratio = declared[pos]
        else:
            pos = np.asarray(rel.fed.pos, dtype=np.int64)
            rnd = np.asarray(rel.fed.rounds, dtype=np.int64)
            ratio = declared[pos]
            if reward_span is not None and math.isfinite(reward_span) and pos.size:
                coef = np.asarray(rel.fed.coef, dtype=float).reshape(pos.size, -1)
                sc = scale2[pos]
                if gauss:
                    eff = reward_span * np.sqrt(np.sum((coef / sc) ** 2, axis=1))
                else:
                    eff = reward_span * np.sum(np.abs(coef) / sc, axis=1)
                understated += int(np.sum(eff > ratio * (1 + 1e-9)))
                ratio = np.maximum(ratio, eff)
        runs.append(rel.runs[pos])
        rnds.append(rnd)
        kinds.append(np.full(pos.size, gauss))
        ratios.append(ratio)
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt))
    return {
        "run": cat(runs, np.int64),
        "rnd": cat(rnds, np.int64),
        "kind": cat(kinds, bool),
        "ratio": cat(ratios, float),
        "understated": np.array(understated),
    }


def ledger_account(ledger: Ledger, horizon: int, reward_span: float | None = None) -> RoundAccount:
    """Per-round accounting of a ledger (see :func:`dpaudit.accountants.per_round_account`)."""
    e = ledger_entries(ledger, horizon, reward_span)
    return per_round_account(ledger.n_runs, horizon, e["run"], e["rnd"], e["kind"], e["ratio"])


@dataclass
class LedgerAccount:
    """A claim and what the ledger implies, side by side, at one delta."""

    delta: float
    claim: str
    claim_epsilon: float
    claim_method: str
    claim_order: float | None
    ledger: str
    epsilon: float  # the ledger-implied epsilon at delta (exact for the worst round)
    method: str
    order: float | None
    worst_run: int
    worst_round: int
    worst_round_releases: int
    shared_rounds: int  # (run, round) pairs fed to more than one release
    shared_examples: list[tuple[int, int, int]]
    max_usage: int
    understated_sensitivities: int
    renyi_ratio: float  # max over orders of ledger D_alpha / claim D_alpha (> 1: the claim is exceeded)
    status: str  # "consistent", "exceeds-claim", "no-claim", "empty-ledger"
    finding: str
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shared_examples"] = [list(map(int, x)) for x in self.shared_examples]
        return d


_ORDERS = 1 + np.geomspace(1e-3, 1e4, 120)


def _renyi_ratio(claim: Guarantee, account: RoundAccount) -> float:
    """max over orders of (the ledger's D_alpha, worst over every run and round) / claim.renyi(alpha)."""
    orders = np.array(sorted(set(getattr(claim, "orders", ()) or ()) | set(_ORDERS.tolist())))
    ledger = account.renyi(orders).reshape(-1, orders.size).max(axis=0)
    worst = 0.0
    for a, l_ in zip(orders, ledger):
        c = claim.renyi(float(a))
        if math.isinf(c):
            continue
        worst = max(worst, (math.inf if l_ > 0 else 0.0) if c == 0 else float(l_) / c)
    return worst


def claim_vs_ledger(claim: Guarantee | None, ledger: Ledger, horizon: int, delta: float,
                    reward_span: float | None = None) -> LedgerAccount:
    """Compare a declared claim with the guarantee the ledger implies (worst round over all runs).

    The claim holds for the recorded runs when, at the worst round, the ledger's Rényi curve lies
    below the claim's at every order (for RDP/zCDP/pure claims) or its exact epsilon at the claim's
    delta is within the claimed epsilon (for (eps, delta) claims). A mismatch is a finding with the
    numbers; the converted epsilons at ``delta`` are shown side by side either way.
    """
    delta = check_delta(delta)
    t0 = time.perf_counter()
    e = ledger_entries(ledger, horizon, reward_span)
    account = per_round_account(ledger.n_runs, horizon, e["run"], e["rnd"], e["kind"], e["ratio"])
    shared = account.shared_rounds()
    if claim is not None:
        cconv = claim.conversion(delta)
    if account.usage.sum() == 0:
        return LedgerAccount(delta, str(claim), cconv.epsilon if claim else math.nan, cconv.method if claim else "",
                             cconv.order if claim else None, "no releases", 0.0, "empty", None, -1, -1, 0, 0, [], 0,
                             0, 0.0, "empty-ledger", "the ledger recorded no release that used a round.",
                             time.perf_counter() - t0)
    run, rnd = account.worst_round()
    worst = account.round_account(run, rnd)
    lconv = worst.epsilon(delta)
    order = None
    if not worst.laplace_eps:
        order = zcdp_to_approx(worst.rho, delta).order
    ledger_g = worst.guarantee()
    n_shared = int(shared.shape[0])
    examples = [tuple(int(v) for v in row) for row in shared[:5]]
    understated = int(e["understated"])
    if claim is None:
        status, ratio = "no-claim", math.nan
        finding = "the policy declares no claim; the ledger implies " + ledger_g.describe() + "."
    else:
        if isinstance(claim, ApproxDP) and claim.delta > 0:
            led = worst.epsilon(claim.delta).epsilon
            ratio = led / claim.epsilon if claim.epsilon > 0 else (math.inf if led > 0 else 0.0)
        else:
            ratio = _renyi_ratio(claim, account)
        exceeded = ratio > 1 + 1e-9
        status = "exceeds-claim" if exceeded else "consistent"
        if exceeded:
            finding = (f"the ledger implies {ledger_g.describe()} at run {run}, round {rnd} "
                       f"({int(account.usage[run, rnd])} releases used it), beyond the claim {claim.describe()} "
                       f"(Rényi ratio {ratio:.4g}; eps at delta={delta:g}: ledger {lconv.epsilon:.4g} vs claim "
                       f"{cconv.epsilon:.4g}).")
        else:
            finding = (f"the worst round (run {run}, round {rnd}) implies {ledger_g.describe()}, within the claim "
                       f"{claim.describe()} (Rényi ratio {ratio:.4g}).")
        if n_shared:
            finding += f" {n_shared} (run, round) pairs fed more than one release (max {int(account.usage.max())})."
        if understated:
            finding += f" {understated} ledger entries declared a sensitivity below what their coefficients imply."
    return LedgerAccount(
        delta, claim.describe() if claim is not None else "none",
        cconv.epsilon if claim is not None else math.nan, cconv.method if claim is not None else "",
        cconv.order if claim is not None else None,
        ledger_g.describe(), lconv.epsilon, lconv.method, order, run, rnd, int(account.usage[run, rnd]),
        n_shared, examples, int(account.usage.max()), understated, ratio, status, finding,
        time.perf_counter() - t0,
    )


# ---- running a policy on a fixed reward table ------------------------------------------------------

def run_policy(policy: Any, horizon: int, n_runs: int, seed: int) -> dict[str, Any]:
    """Run ``policy`` for ``horizon`` steps on a fixed Bernoulli reward table; return its ledger and inputs.

    The table holds Bernoulli(p_k) draws (p_k uniform in [0.2, 0.8], one per arm) mapped to the
    end points of the policy's ``reward_range`` (0/1 when unbounded), drawn from a Generator spawned
    from ``seed``; a second spawned Generator drives the policy. Linear policies that need action
    features get fixed features drawn uniformly on the unit sphere (dimension ``policy.dim`` or
    ``policy.d``), the same for every run.
    """
    horizon = check_int("horizon", horizon, minimum=1)
    n_runs = check_int("runs", n_runs, minimum=1)
    data_rng, policy_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    K = int(policy.n_arms)
    lo, hi = getattr(policy, "reward_range", (0.0, 1.0))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    p = data_rng.uniform(0.2, 0.8, K)
    table = np.where(data_rng.random((horizon, K)) < p, hi, lo)
    dim = getattr(policy, "dim", None) or getattr(policy, "d", None)
    feats = None
    if isinstance(dim, (int, np.integer)) and dim > 0:
        f = data_rng.standard_normal((K, int(dim)))
        feats = np.broadcast_to(f / np.linalg.norm(f, axis=1, keepdims=True), (n_runs, K, int(dim)))
    # Table DP's run: episode policies advance block by block, the others step by step (same ledger)
    from dpaudit.protocols import FixedActionSet, TableDP

    TableDP().run(policy if feats is None else FixedActionSet(policy, feats[0]), table, n_runs, policy_rng,
                  record=True)
    return {"table": table, "features": feats, "reward_span": float(hi - lo)}


# ---- CLI ----------------------------------------------------------------------------------------

def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("account", help="what a guarantee, a noise level or a policy's ledger implies",
                       description="Convert and compose privacy guarantees exactly; compare a policy's claim "
                       "with what its ledger implies.")
    what = p.add_subparsers(dest="what", metavar="WHAT")
    what.required = True

    z = what.add_parser("zcdp", help="rho-zCDP -> (eps, delta), optimal over continuous orders")
    z.add_argument("--rho", type=float, required=True)
    z.add_argument("--delta", type=float, required=True)
    z.add_argument("--compare", action="store_true",
                   help="also show dp-accounting's answer on its default grid of orders")
    z.set_defaults(func=_cmd_zcdp)

    r = what.add_parser("rdp", help="(alpha, eps)-RDP -> (eps, delta) (Canonne-Kamath-Steinke 2020, Prop. 12)")
    r.add_argument("--alpha", type=float, required=True)
    r.add_argument("--eps", type=float, required=True)
    r.add_argument("--delta", type=float, required=True)
    r.set_defaults(func=_cmd_rdp)

    g = what.add_parser("gaussian", help="exact (eps, delta) of n Gaussian releases (Balle & Wang 2018)")
    g.add_argument("--sigma", type=float, required=True)
    g.add_argument("--sensitivity", type=float, default=1.0)
    g.add_argument("--compositions", type=int, default=1)
    g.add_argument("--delta", type=float, required=True)
    g.set_defaults(func=_cmd_gaussian)

    c = what.add_parser("calibrate", help="sigma (exact) and rho (zCDP) for a target (eps, delta)")
    c.add_argument("--epsilon", type=float, required=True)
    c.add_argument("--delta", type=float, required=True)
    c.add_argument("--sensitivity", type=float, default=1.0)
    c.add_argument("--compositions", type=int, default=1)
    c.set_defaults(func=_cmd_calibrate)

    li = what.add_parser("lint", help="check the classical Gaussian and seed 000 calibrations at (eps, delta)")
    li.add_argument("--epsilon", type=float, required=True)
    li.add_argument("--delta", type=float, required=True)
    li.set_defaults(func=_cmd_lint)

    pol = what.add_parser("policy", help="a policy's claim beside what its ledger implies",
                          description="Run the policy on a fixed Bernoulli reward table and compare its declared "
                          "claim with the per-round composition of its ledger. Exit status 1 when the ledger "
                          "implies more than the claim.")
    pol.add_argument("policy", metavar="NAME", help="registered name, path/to/file.py:Class or module:Class")
    pol.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    pol.add_argument("--delta", type=float, required=True)
    pol.add_argument("--horizon", type=int, default=2000, help="steps to run (default 2000)")
    pol.add_argument("--runs", type=int, default=4, help="independent runs (default 4)")
    pol.add_argument("--seed", type=int, default=0)
    pol.set_defaults(func=_cmd_policy)

    for sp in (z, r, g, c, li, pol):
        sp.add_argument("--json", action="store_true", help="print one JSON object")


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating,)):
        return _jsonable(float(x))
    if isinstance(x, (np.integer,)):
        return int(x)
    return x


def _emit(args: argparse.Namespace, obj: dict[str, Any], rows: list[tuple[str, str]]) -> int:
    if args.json:
        print(json.dumps(_jsonable(obj), sort_keys=False))
    else:
        w = max(len(k) for k, _ in rows)
        for k, v in rows:
            print(f"  {k:<{w}}  {v}")
    return 0


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _dp_accounting_grid(rho_or_curve, delta: float) -> tuple[float, float]:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = rdp.DEFAULT_RDP_ORDERS
    eps, order = rdp.compute_epsilon(orders, [o * rho_or_curve for o in orders], delta)
    return float(eps), float(order)


def _cmd_zcdp(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    conv = zcdp_to_approx(args.rho, args.delta)
    simple = simple_zcdp_epsilon(args.rho, args.delta)
    obj = {"epsilon": conv.epsilon, "delta": conv.delta, "method": conv.method, "order": conv.order,
           "rho": args.rho, "simple_bound": simple, "seconds": time.perf_counter() - t0}
    rows = [
        ("guarantee", f"{args.rho:g}-zCDP at delta = {args.delta:g}"),
        ("epsilon", f"{conv.epsilon:.6g}  ({conv.method}, order {_g(conv.order)})"),
        ("rho + 2 sqrt(rho log 1/delta)", f"{simple:.6g}"),
    ]
    if args.compare:
        grid_eps, grid_order = _dp_accounting_grid(args.rho, args.delta)
        obj.update(dp_accounting_grid=grid_eps, dp_accounting_order=grid_order)
        rows.append(("dp-accounting (grid of orders)", f"{grid_eps:.6g}  (order {grid_order:g})"))
    return _emit(args, obj, rows)


def _cmd_rdp(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    conv = rdp_to_approx(args.alpha, args.eps, args.delta)
    obj = {"epsilon": conv.epsilon, "delta": conv.delta, "method": conv.method, "order": conv.order,
           "rdp_epsilon": args.eps, "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("guarantee", f"({args.alpha:g}, {args.eps:g})-RDP at delta = {args.delta:g}"),
        ("epsilon", f"{conv.epsilon:.6g}  ({conv.method}, order {_g(conv.order)})"),
    ])


def _cmd_gaussian(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    conv = gaussian_epsilon(args.delta, args.sigma, args.sensitivity, args.compositions)
    mu = gaussian_mu(args.sigma, args.sensitivity, args.compositions)
    rho = mu * mu / 2
    z = zcdp_to_approx(rho, args.delta)
    obj = {"epsilon": conv.epsilon, "delta": conv.delta, "method": conv.method, "order": None,
           "sigma": args.sigma, "sensitivity": args.sensitivity, "compositions": args.compositions,
           "mu": mu, "rho": rho, "zcdp_epsilon": z.epsilon, "zcdp_order": z.order,
           "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("mechanism", f"{args.compositions} x N(0, {args.sigma:g}^2), sensitivity {args.sensitivity:g}"),
        ("epsilon (exact)", f"{conv.epsilon:.6g} at delta = {args.delta:g}  ({conv.method})"),
        ("as zCDP", f"rho = {rho:.6g} -> epsilon {z.epsilon:.6g} (order {_g(z.order)})"),
    ])


def _cmd_calibrate(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    sigma = gaussian_sigma(args.epsilon, args.delta, args.sensitivity, args.compositions)
    rho = zcdp_rho_for_epsilon(args.epsilon, args.delta)
    conv = gaussian_epsilon(args.delta, sigma, args.sensitivity, args.compositions)
    zsig = check_positive("sensitivity", args.sensitivity) * math.sqrt(args.compositions / (2 * rho))
    obj = {"epsilon": conv.epsilon, "delta": args.delta, "method": "gaussian-exact-inverse", "order": None,
           "sigma": sigma, "rho": rho, "sigma_via_zcdp": zsig, "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("target", f"({args.epsilon:g}, {args.delta:g})-DP, {args.compositions} release(s), sensitivity {args.sensitivity:g}"),
        ("sigma (exact profile)", f"{sigma:.6g}"),
        ("rho (zCDP, continuous CKS)", f"{rho:.6g}  -> sigma {zsig:.6g}"),
    ])


def _cmd_lint(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    a = lint_classical_gaussian(args.epsilon, args.delta)
    b = lint_seed000_channel(args.epsilon, args.delta)
    obj = {"epsilon": args.epsilon, "delta": args.delta, "method": "calibration-lint", "order": None,
           "classical": a.as_dict(), "seed000": b.as_dict(), "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("classical", ("FLAG " if a.flagged else "ok   ") + a.message),
        ("seed 000", ("FLAG " if b.flagged else "ok   ") + b.message),
    ])


def _cmd_policy(args: argparse.Namespace) -> int:
    from dpaudit.policies.registry import make_policy, parse_params

    delta = check_delta(args.delta)
    policy = make_policy(args.policy, parse_params(args.param))
    t0 = time.perf_counter()
    info = run_policy(policy, args.horizon, args.runs, args.seed)
    t_run = time.perf_counter() - t0
    ledger = getattr(policy, "ledger", None)
    claim = getattr(policy, "claim", None)
    if ledger is None:
        raise DPAuditError(f"policy {args.policy!r} keeps no ledger (it does not use dpaudit's mechanisms), so "
                           "its releases cannot be accounted; use `dpaudit check` for black-box attacks.")
    rep = claim_vs_ledger(claim, ledger, args.horizon, delta, info["reward_span"])
    obj = {"policy": args.policy, "params": parse_params(args.param), **rep.as_dict(),
           "horizon": args.horizon, "runs": args.runs, "seed": args.seed, "run_seconds": t_run}
    print_rows = [
        ("policy", f"{args.policy} {' '.join(args.param)} (T = {args.horizon}, {args.runs} runs, seed {args.seed})"),
        ("claim", f"{rep.claim}  -> epsilon {rep.claim_epsilon:.6g} at delta = {delta:g} ({rep.claim_method})"),
        ("ledger (worst round)", f"{rep.ledger}  -> epsilon {rep.epsilon:.6g} ({rep.method})"),
        ("worst round", f"run {rep.worst_run}, round {rep.worst_round}, {rep.worst_round_releases} release(s)"),
        ("shared rounds", f"{rep.shared_rounds} (max releases per round {rep.max_usage})"),
        ("status", rep.status),
        ("finding", rep.finding),
    ]
    _emit(args, obj, print_rows)
    return 1 if rep.status == "exceeds-claim" else 0
