"""``dpaudit account``: what a guarantee, a noise calibration or a policy's ledger implies.

Argument parsing and printing; the arithmetic is in :mod:`dpaudit.accountants` and the ledger
accounting in :mod:`dpaudit.accounting`. Commands::

    dpaudit account zcdp --rho R --delta D
    dpaudit account rdp --alpha A --epsilon E --delta D
    dpaudit account gaussian --sigma S [--sensitivity 1] [--compositions n] --delta D
    dpaudit account policy NAME [--param NAME=VALUE ...] --delta D
    dpaudit account calibrate --epsilon E --delta D [--sensitivity 1] [--compositions n]
    dpaudit account lint --epsilon E --delta D

Each prints a short table, or with ``--json`` one object with at least ``epsilon``, ``method`` and
``order`` (None where no Rényi order is involved).
"""

from __future__ import annotations

import argparse
import math
import time
from numbers import Integral
from typing import TYPE_CHECKING

from dpaudit.cli import print_json
from dpaudit.errors import DPAuditError, check_delta, check_int, check_positive

if TYPE_CHECKING:
    from dpaudit.accounting import LedgerAccount
    from dpaudit.jsontypes import JSONValue

__all__ = ["register_cli"]


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("account", help="what a guarantee, a noise level or a policy's ledger implies",
                       description="Convert and compose privacy guarantees exactly; compare a policy's claim "
                       "with what its ledger implies.")
    what = p.add_subparsers(dest="what", metavar="WHAT")
    what.required = True

    z = what.add_parser("zcdp", help="rho-zCDP -> (eps, delta), optimal over continuous orders")
    z.add_argument("--rho", type=float, required=True, help="the zCDP parameter rho >= 0 (D_alpha <= alpha rho)")
    z.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    z.add_argument("--compare", action="store_true",
                   help="also show dp-accounting's answer on its default grid of orders")
    z.set_defaults(func=_cmd_zcdp)

    r = what.add_parser("rdp", help="(alpha, eps)-RDP -> (eps, delta) (Canonne-Kamath-Steinke 2020, Prop. 12)")
    r.add_argument("--alpha", type=float, required=True, help="the Rényi order alpha > 1 ('inf' allowed)")
    # --epsilon, as everywhere else; --eps is the old spelling, still accepted (hidden)
    eps = r.add_mutually_exclusive_group(required=True)
    eps.add_argument("--epsilon", type=float, help="the Rényi divergence bound at that order (>= 0)")
    eps.add_argument("--eps", dest="epsilon", type=float, help=argparse.SUPPRESS)
    r.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    r.set_defaults(func=_cmd_rdp)

    g = what.add_parser("gaussian", help="exact (eps, delta) of n Gaussian releases (Balle & Wang 2018)")
    g.add_argument("--sigma", type=float, required=True, help="standard deviation of the Gaussian noise (> 0)")
    g.add_argument("--sensitivity", type=float, default=1.0,
                   help="L2 sensitivity of the statistic over neighbouring inputs (default 1)")
    g.add_argument("--compositions", type=int, default=1,
                   help="number of releases with this sigma, composed exactly (default 1)")
    g.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    g.set_defaults(func=_cmd_gaussian)

    c = what.add_parser("calibrate", help="sigma (exact) and rho (zCDP) for a target (eps, delta)")
    c.add_argument("--epsilon", type=float, required=True, help="target epsilon (> 0)")
    c.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    c.add_argument("--sensitivity", type=float, default=1.0,
                   help="L2 sensitivity of the statistic over neighbouring inputs (default 1)")
    c.add_argument("--compositions", type=int, default=1,
                   help="number of releases sharing the budget, composed exactly (default 1)")
    c.set_defaults(func=_cmd_calibrate)

    li = what.add_parser("lint", help="check the classical Gaussian calibration and the Gaussian channel calibration "
                         "sigma = 2 sqrt(log(1.25/delta))/eps of the interactive joint/local DP definitions at (eps, delta)")
    li.add_argument("--epsilon", type=float, required=True, help="the epsilon the calibration targets (> 0)")
    li.add_argument("--delta", type=float, required=True, help="the delta the calibration targets, in (0, 1)")
    li.set_defaults(func=_cmd_lint)

    pol = what.add_parser("policy", help="a policy's claim beside what its ledger implies",
                          description="Run the policy on a fixed Bernoulli reward table and compare its declared "
                          "claim with the per-round composition of its ledger. Exit status 1 when the ledger "
                          "implies more than the claim.")
    pol.add_argument("policy", metavar="NAME", help="registered name, path/to/file.py:Class or module:Class")
    pol.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="a constructor parameter of the policy, repeatable (`dpaudit describe NAME` lists them)")
    pol.add_argument("--delta", type=float, required=True, help="delta at which claim and ledger are compared, in (0, 1)")
    pol.add_argument("--horizon", type=int, default=2000, help="steps to run (default 2000)")
    pol.add_argument("--runs", type=int, default=4, help="independent runs (default 4)")
    pol.add_argument("--seed", type=int, default=0, help="seed of the reward table and the noise (default 0)")
    pol.set_defaults(func=_cmd_policy)

    for sp in (z, r, g, c, li, pol):
        sp.add_argument("--json", action="store_true", help="print one JSON object")


def _jsonable(x: object) -> JSONValue:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if type(x).__module__ == "numpy" and hasattr(x, "item"):  # numpy scalars (numpy imported lazily)
        return _jsonable(x.item())
    return x


#: the format version of each subcommand's ``--json`` object, 1 unless listed (lint: its second lint is under
#: the key ``gaussian_channel``, :data:`dpaudit.deprecations.OUTPUT_KEYS`)
FORMAT_VERSIONS = {"lint": 2}


def _emit(args: argparse.Namespace, obj: dict[str, object], rows: list[tuple[str, str]]) -> int:
    if args.json:
        print_json(_jsonable(obj), f"dpaudit.account.{args.what}/{FORMAT_VERSIONS.get(args.what, 1)}")
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
    from dpaudit.accountants.conversions import simple_zcdp_epsilon, zcdp_to_approx

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
    from dpaudit.accountants.conversions import rdp_to_approx

    t0 = time.perf_counter()
    conv = rdp_to_approx(args.alpha, args.epsilon, args.delta)
    obj = {"epsilon": conv.epsilon, "delta": conv.delta, "method": conv.method, "order": conv.order,
           "rdp_epsilon": args.epsilon, "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("guarantee", f"({args.alpha:g}, {args.epsilon:g})-RDP at delta = {args.delta:g}"),
        ("epsilon", f"{conv.epsilon:.6g}  ({conv.method}, order {_g(conv.order)})"),
    ])


def _cmd_gaussian(args: argparse.Namespace) -> int:
    from dpaudit.accountants.conversions import zcdp_to_approx
    from dpaudit.accountants.gaussian import gaussian_epsilon, gaussian_mu

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
    from dpaudit.accountants.conversions import zcdp_rho_for_epsilon
    from dpaudit.accountants.gaussian import gaussian_epsilon, gaussian_sigma

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
    from dpaudit.accountants.gaussian import lint_classical_gaussian, lint_gaussian_channel

    t0 = time.perf_counter()
    a = lint_classical_gaussian(args.epsilon, args.delta)
    b = lint_gaussian_channel(args.epsilon, args.delta)
    obj = {"epsilon": args.epsilon, "delta": args.delta, "method": "calibration-lint", "order": None,
           "classical": a.as_dict(), "gaussian_channel": b.as_dict(), "seconds": time.perf_counter() - t0}
    return _emit(args, obj, [
        ("classical", ("FLAG " if a.flagged else "ok   ") + a.message),
        ("JDP/LDP channel", ("FLAG " if b.flagged else "ok   ") + b.message),
    ])


def _upper_row(rep: LedgerAccount) -> str:
    """The tightest eps the ledger proves, beside the claim and the ledger's implied guarantee."""
    if rep.epsilon_upper is None:
        return "none"
    return f"epsilon {rep.epsilon_upper:.6g} ({rep.upper['method']})"


def _cmd_policy(args: argparse.Namespace) -> int:
    from dpaudit.accountants.guarantees import as_guarantee
    from dpaudit.accounting import claim_vs_ledger, run_policy
    from dpaudit.policies.registry import make_policy, parse_params

    delta = check_delta(args.delta)
    check_int("--seed", args.seed, minimum=0)
    policy = make_policy(args.policy, parse_params(args.param))
    if getattr(policy, "claim", None) is None:
        raise DPAuditError(f"policy {args.policy!r} declares no privacy claim (its claim is "
                           f"{getattr(policy, 'claim', None)!r}), so there is nothing to account its ledger "
                           "against; `dpaudit account policy` takes a private policy.")
    from dpaudit.runner.cost import account_preflight

    k = getattr(policy, "n_arms", None)
    account_preflight(check_int("--runs", args.runs, minimum=1), check_int("--horizon", args.horizon, minimum=1),
                      int(k) if isinstance(k, Integral) and not isinstance(k, bool) else 1)
    t0 = time.perf_counter()
    info = run_policy(policy, args.horizon, args.runs, args.seed)
    t_run = time.perf_counter() - t0
    ledger = getattr(policy, "ledger", None)
    claim = getattr(policy, "claim", None)
    claim = as_guarantee(claim) if claim is not None else None  # a dp-accounting DpEvent claim is read exactly
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
        ("upper (proved)", _upper_row(rep)),
        ("worst round", f"run {rep.worst_run}, round {rep.worst_round}, {rep.worst_round_releases} release(s)"),
        ("shared rounds", f"{rep.shared_rounds} (max releases per round {rep.max_usage})"),
        ("status", rep.status),
        ("finding", rep.finding),
    ]
    _emit(args, obj, print_rows)
    return 1 if rep.status == "exceeds-claim" else 0
