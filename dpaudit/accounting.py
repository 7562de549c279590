"""A policy's ledger as per-round accounting, and its claim beside what the ledger implies.

The arithmetic lives in :mod:`dpaudit.accountants` (which imports nothing from dpaudit's core);
this module adds the part that needs dpaudit objects: turning a :class:`~dpaudit.mechanisms.Ledger`
into per-round accounting arrays, running a policy on a fixed reward table, and comparing its
declared ``claim`` with what its ledger implies. The ``dpaudit account`` command
(:mod:`dpaudit.cli.account`) prints these.

The upper side: :func:`ledger_upper` (and :func:`policy_ledger_upper`, :func:`shuffle_upper`) give the
tightest eps dpaudit can prove for a policy at delta -- a ledger's releases composed exactly per round or
user, or a shuffle batch's clone bounds composed exactly -- with the method and the assumptions it rests on;
an audit reports it beside the claim as ``epsilon_upper``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from dpaudit import deprecations
from dpaudit.accountants import ApproxDP, Guarantee
from dpaudit.accountants.composition import RoundAccount, per_round_account
from dpaudit.accountants.conversions import pure_to_approx
from dpaudit.accountants.gaussian import (gaussian_epsilon, laplace_epsilon, lint_classical_gaussian,
                                          lint_gaussian_channel)
from dpaudit.accountants.conversions import (
    zcdp_to_approx,
)
from dpaudit.accountants.upper import GAUSSIAN, LAPLACE, PURE
from dpaudit.errors import check_delta, check_int
from dpaudit.jsontypes import JSONObject, JSONValue
from dpaudit.mechanisms import Ledger, release_family

if TYPE_CHECKING:
    from dpaudit.accountants.upper import GroupWorst
    from dpaudit.policies.base import PolicyLike
    from dpaudit.policies.bco import BCOPolicy
    from dpaudit.protocols import Protocol

__all__ = [
    "ledger_audit",
    "ledger_per_user",
    "calibration_lints",
    "ledger_entries",
    "ledger_account",
    "LedgerAccount",
    "claim_vs_ledger",
    "run_policy",
    "ledger_upper",
    "policy_ledger_upper",
    "shuffle_upper",
    "policy_upper",
    "NOISE_CODES",
    "LEDGER_ASSUMPTIONS",
]


# ---- ledger -> per-round accounting ---------------------------------------------------------------

#: a release's noise kind -> the code of :func:`dpaudit.accountants.upper.worst_group_epsilon` (any other kind is
#: accounted as a pure-DP release of eps = sensitivity / scale, the convention randomised response records)
NOISE_CODES = {"gaussian": GAUSSIAN, "laplace": LAPLACE}


def ledger_entries(ledger: Ledger, horizon: int, reward_span: float | None = None) -> dict[str, np.ndarray]:
    """Flatten a ledger into one entry per (release, run, round fed): run, rnd, kind, code, ratio.

    ``kind`` is True for a Gaussian release; ``code`` tells Gaussian, Laplace and any other (pure) noise apart
    (:data:`NOISE_CODES`: randomised response is recorded with scale 1/eps, so its ratio is its pure eps).

    ``ratio`` is sensitivity / noise scale. With a finite ``reward_span`` (the width of the reward
    range the policy accepts) it is the larger of the declared ratio and the one the release's
    coefficients imply (span * ||coef / scale||_2 for Gaussian, _1 for Laplace), so a release whose
    declared sensitivity is too small is accounted at its real one; ``understated`` counts the
    entries where that happened. A release without ``fed`` information is charged to every round
    up to its step (it might have used any of them).
    """
    runs, rnds, kinds, codes, ratios = [], [], [], [], []
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
        codes.append(np.full(pos.size, NOISE_CODES.get(rel.noise.kind, PURE)))
        ratios.append(ratio)
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dtype=dt))
    return {
        "run": cat(runs, np.int64),
        "rnd": cat(rnds, np.int64),
        "kind": cat(kinds, bool),
        "code": cat(codes, np.int64),
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
    extra: dict[str, JSONValue] = field(default_factory=dict)
    #: the tightest eps at delta dpaudit proves from the ledger (:func:`ledger_upper`: every round's releases
    #: composed exactly, the worst over every run and round), and its record (method, assumptions, details)
    epsilon_upper: float | None = None
    upper: JSONObject | None = None

    def as_dict(self) -> JSONObject:
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
    numbers; the converted epsilons at ``delta`` are shown side by side either way. Beside them,
    ``epsilon_upper`` is the tightest eps at ``delta`` the ledger proves (:func:`ledger_upper`).
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
                             time.perf_counter() - t0, epsilon_upper=0.0, upper=ledger_upper(ledger, horizon, delta, reward_span))
    run, rnd = account.worst_round()
    worst = account.round_account(run, rnd)
    lconv = worst.epsilon(delta)
    order = None
    if not worst.laplace_eps:
        order = zcdp_to_approx(worst.rho, delta).order
    ledger_g = account.round_guarantee(run, rnd)
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
    upper = ledger_upper(ledger, horizon, delta, reward_span)
    return LedgerAccount(
        delta, claim.describe() if claim is not None else "none",
        cconv.epsilon if claim is not None else math.nan, cconv.method if claim is not None else "",
        cconv.order if claim is not None else None,
        ledger_g.describe(), lconv.epsilon, lconv.method, order, run, rnd, int(account.usage[run, rnd]),
        n_shared, examples, int(account.usage.max()), understated, ratio, status, finding,
        time.perf_counter() - t0, epsilon_upper=upper["epsilon"] if upper else None, upper=upper,
    )


# ---- running a policy on a fixed reward table ------------------------------------------------------

class PolicyRun(TypedDict):
    """What :func:`run_policy` ran a policy on (its ledger is on the policy)."""

    table: np.ndarray | None  # (horizon, K) rewards; None for a BCO policy (loss functions)
    features: np.ndarray | None  # (n_runs, K, d) fixed action features of a linear policy, else None
    reward_span: float  # the width of one user's datum's domain


def run_policy(policy: PolicyLike | BCOPolicy, horizon: int, n_runs: int, seed: int) -> PolicyRun:
    """Run ``policy`` for ``horizon`` steps on a fixed Bernoulli reward table; return its ledger and inputs.

    The table holds Bernoulli(p_k) draws (p_k uniform in [0.2, 0.8], one per arm) mapped to the
    end points of the policy's ``reward_range`` (0/1 when unbounded), drawn from a Generator spawned
    from ``seed``; a second spawned Generator drives the policy. Linear policies that need action
    features get fixed features drawn uniformly on the unit sphere (dimension ``policy.dim`` or
    ``policy.d``), the same for every run.
    """
    horizon = check_int("horizon", horizon, minimum=1)
    n_runs = check_int("runs", n_runs, minimum=1)
    if getattr(policy, "continuous_actions", False):  # BCO: loss functions, not a reward table
        return run_bco_for_account(policy, horizon, n_runs, seed)
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


def run_bco_for_account(policy: BCOPolicy, horizon: int, n_runs: int, seed: int) -> PolicyRun:
    """``dpaudit account policy`` for a BCO policy: run it on the stochastic losses (recording its ledger).

    ``reward_span`` is the width of the user datum's domain (what one unit of ledger coefficient spans).
    """
    from dpaudit.environments import LossSequence
    from dpaudit.simulate import simulate_bco

    losses = LossSequence.stochastic(policy.d, horizon)
    scale = min(1.0, policy.loss_bound / losses.bound(policy.radius),
                policy.lipschitz / max(losses.lipschitz(policy.radius), 1e-300))
    losses = LossSequence(losses.a * scale, losses.c * scale, losses.mu * scale, losses.x_star, losses.noise * scale)
    simulate_bco(policy, losses, n_runs, seed, record=True)
    lo, hi = policy.domain
    return {"table": None, "features": None, "reward_span": float(hi - lo)}


# ---- the ledger part of an audit: per round (central, joint), per user (local) ----------------------

def ledger_audit(policy: PolicyLike, protocol: Protocol, data: np.ndarray, seed: np.random.SeedSequence,
                 n_runs: int = 200, sensitivity_factor: dict[str, float] | None = None) -> JSONObject | None:
    """Per-round accounting of the ledger of ``n_runs`` runs on ``data`` (None without a ledger).

    ``sensitivity_factor``: per mechanism (:attr:`dpaudit.mechanisms.Release.family`), a factor by which its
    true sensitivity is known to exceed the recorded one (the joint plan's replayed canaries realise it); each
    such release is composed at its recorded sensitivity times the factor (factors below 1 are ignored), so the
    composition shows what the policy costs under its own noise calibration for the protocol's neighbours."""
    factor = {k: float(v) for k, v in (sensitivity_factor or {}).items() if float(v) > 1.0}
    if not hasattr(policy, "ledger"):
        return None
    protocol.run(policy, data, n_runs, np.random.default_rng(seed), None, record=True)
    ledger = getattr(policy, "ledger", None)
    if ledger is None or not hasattr(ledger, "releases"):
        return None
    T = int(np.asarray(data).shape[0])
    run, rnd, kind, ratio = [], [], [], []
    no_fed = 0
    for rel in ledger.releases:
        if rel.fed is None:
            no_fed += 1
            continue
        runs = np.asarray(rel.runs)[rel.fed.pos]
        scale = np.asarray(rel.noise.scale, dtype=float)
        s = scale if scale.ndim == 0 else (scale[rel.fed.pos] if scale.ndim == 1 else scale[rel.fed.pos].max(axis=-1))
        run.append(runs)
        rnd.append(np.asarray(rel.fed.rounds))
        kind.append(np.full(runs.size, rel.noise.kind == "gaussian"))
        f = factor.get(release_family(rel.label), 1.0) if factor else 1.0
        ratio.append(np.broadcast_to(rel.sensitivity * f / s, runs.shape).astype(float))
    if not run:
        return {"releases": len(ledger.releases), "releases_without_fed": no_fed, "implied": None,
                "shared_rounds": 0}
    acc = per_round_account(n_runs, T, np.concatenate(run), np.concatenate(rnd), np.concatenate(kind),
                            np.concatenate(ratio))
    implied = acc.guarantee()
    shared = acc.shared_rounds()
    return {
        "runs": n_runs,
        "releases": len(ledger.releases),
        "releases_without_fed": no_fed,
        "implied": implied.describe(),
        "implied_guarantee": implied,
        "shared_rounds": int(shared.shape[0]),
        "max_releases_per_round": int(acc.usage.max(initial=0)),
        # per round t: the most and the mean number of releases round t fed over the runs (report figure)
        "usage_max_per_round": acc.usage.max(axis=0).astype(int).tolist(),
        "usage_mean_per_round": [round(float(x), 4) for x in acc.usage.mean(axis=0)],
    }




def ledger_per_user(ledger: Ledger, delta: float) -> JSONObject:
    """Compose every message in ``ledger`` per user (run, step) and return the worst user's exact epsilon.

    Gaussian messages: mu = sqrt(sum (sensitivity/sigma)^2) (exact; Balle & Wang 2018 Thm 8 for the
    profile, Dong, Roth & Su 2019 for the composition); one Laplace message: its exact profile;
    several pure messages (Laplace; randomised response, recorded with scale 1/eps): eps = sum, through the
    randomised-response profile (tight for pure DP); Gaussian with pure: the two parts' epsilons
    at delta/2 each, added (valid, not tight).
    """
    keys, mu2, pure, n_lap, count = [], [], [], [], []
    sens = []
    kinds: set[str] = set()
    for rel in getattr(ledger, "releases", []):
        runs = np.asarray(rel.runs)
        scale = np.broadcast_to(np.asarray(rel.noise.scale, dtype=float), runs.shape)
        kinds.add(rel.noise.kind)
        keys.append(runs * 1_000_003 + int(rel.step))
        ratio = rel.sensitivity / scale
        g = rel.noise.kind == "gaussian"
        mu2.append(np.where(g, ratio**2, 0.0))
        pure.append(np.where(g, 0.0, ratio))  # Laplace: D/b; randomised response: scale 1/eps, so eps
        n_lap.append(np.full(runs.shape, rel.noise.kind == "laplace", dtype=np.int64))
        count.append(np.ones(runs.shape, dtype=np.int64))
        sens.append(rel.sensitivity)
    if not keys:
        return {"messages": 0, "epsilon": None, "kinds": []}
    k = np.concatenate(keys)
    uniq, inv = np.unique(k, return_inverse=True)
    agg = {name: np.bincount(inv, np.concatenate(a), minlength=uniq.size)
           for name, a in (("mu2", mu2), ("pure", pure), ("lap", n_lap), ("count", count))}
    mu = float(np.sqrt(agg["mu2"].max()))
    worst_pure = float(agg["pure"].max())
    g_eps = gaussian_epsilon(delta, mu=mu).epsilon if mu > 0 else 0.0
    single_laplace = kinds == {"laplace"} and agg["count"].max() == 1
    if worst_pure == 0:
        eps, how = g_eps, f"Gaussian messages composed exactly: mu = {mu:.6g} per user"
    elif mu == 0:
        if single_laplace:
            eps, how = laplace_epsilon(delta, worst_pure).epsilon, f"one Laplace message of eps0 = {worst_pure:.6g} per user (exact profile)"
        else:
            eps, how = pure_to_approx(worst_pure, delta).epsilon, f"pure messages, eps = {worst_pure:.6g} per user"
    else:
        eps = gaussian_epsilon(delta / 2, mu=mu).epsilon + pure_to_approx(worst_pure, delta / 2).epsilon
        how = f"Gaussian (mu = {mu:.6g}) and pure (eps = {worst_pure:.6g}) messages, each at delta/2, added"
    return {"messages": int(k.size), "users": int(uniq.size), "max_messages_per_user": int(agg["count"].max()),
            "kinds": sorted(kinds), "mu": mu, "pure_epsilon": worst_pure, "epsilon": float(eps), "method": how,
            "min_recorded_sensitivity": float(min(sens))}




def calibration_lints(policy: object) -> list[dict[str, str | float | bool]]:
    """The calibration lint of the closed-form Gaussian rule a local channel used (:mod:`dpaudit.accountants.gaussian`)."""
    chan = getattr(policy, "local_channel", None)
    cal = getattr(chan, "calibration", None)
    if not cal:
        return []
    rule, e, d = cal
    rule = deprecations.CALIBRATION_TAGS.get(rule, rule)
    if rule == "gaussian-channel":
        lints = [lint_gaussian_channel(e, d)]
    elif rule == "zheng-2020-alg5":  # Zheng et al. (2020), Thm 7: the matrix at (eps/3, delta/2), the vector at (2 eps/3, delta/2)
        lints = [lint_classical_gaussian(e / 3, d / 2), lint_classical_gaussian(2 * e / 3, d / 2)]
    else:
        lints = [lint_classical_gaussian(e, d)]
    return [ln.as_dict() for ln in lints]




# ---- the upper side: the tightest eps dpaudit can prove -------------------------------------------

#: what every ledger-based upper bound assumes (the findings' ``upper.assumptions``)
LEDGER_ASSUMPTIONS = (
    "the ledger's recorded releases are every use the policy makes of its private data, and the view is a "
    "post-processing of them and of public inputs",
    "each release's sensitivity is right for the protocol's neighbouring relation (dpaudit takes the larger of the "
    "declared sensitivity and the one the release's recorded coefficients imply over the reward range)",
    "the releases a round (user) feeds, with their noise multipliers, are bounded in every execution by the worst "
    "round of the recorded runs; then composing them per round is valid although they are chosen adaptively "
    "(fully adaptive composition with the bound as a privacy filter: Whitehouse, Ramdas, Rogers & Wu 2023; Smith & "
    "Thakurta 2022 for Gaussian DP)",
    "a Laplace release of L1 sensitivity D and scale b is accounted as the one-dimensional Laplace pair at eps = D/b, "
    "and any other non-Gaussian release as an eps-DP one (binary randomised response dominates it)",
)

#: why no release is dropped for the view of a protocol (the findings' ``upper.details["view"]``)
VIEW_REFINEMENT = (
    "every recorded release is composed, none dropped for the view: under {p} a release fed by a round comes at or "
    "after that round and can move every later action; only a release fed by the last round (made after the last "
    "action, since that round's reward arrives then) cannot reach the actions, but the audit's gray-box parts read "
    "the releases themselves (the likelihood attack, the joint audit's tree attack), a view that contains every "
    "release, and the upper bound must hold for every view the audit tests")


def _finite_span(bounds: object) -> float | None:
    """hi - lo of a (low, high) pair when both are finite numbers with low < high, else None."""
    try:
        lo, hi = (float(x) for x in bounds)
    except (TypeError, ValueError):
        return None
    return hi - lo if math.isfinite(lo) and math.isfinite(hi) and lo < hi else None


def _how(worst: GroupWorst) -> tuple[str, str]:
    """(the composition's name, the worst group's releases) in words."""
    lap, pure, mu = worst.laplace_eps, worst.pure_eps, worst.gaussian_mu
    parts = ([f"Gaussian mu = {mu:.4g}"] if mu > 0 else []) + \
        ([f"Laplace eps = {', '.join(f'{e:.4g}' for e in lap)}"] if lap else []) + \
        ([f"pure eps = {', '.join(f'{e:.4g}' for e in pure)}"] if pure else [])
    short = {"gaussian-exact": "exact Gaussian composition", "laplace-exact": "exact Laplace profile",
             "pure-rr-profile": "exact pure-DP profile (randomised response)",
             "pld-pessimistic": "PLD composition (dp-accounting, pessimistic)",
             "renyi-cks": "Rényi-curve bound (too many distinct compositions to compose all exactly)",
             "unnoised release": "a release without noise (nothing finite can be proved)",
             "no release": "no release recorded"}.get(worst.method, worst.method)
    return short, " + ".join(parts)


def ledger_upper(ledger: Ledger | None, horizon: int, delta: float, reward_span: float | None = None, *,
                 protocol: str = "table", per: str = "round") -> JSONObject | None:
    """The tightest eps(delta) dpaudit can prove from a recorded ledger: every round's (user's) releases
    composed exactly, worst round over the recorded runs (:func:`dpaudit.accountants.upper.worst_group_epsilon`).

    Gaussian releases only: one Gaussian with mu = sqrt(sum mu_i^2) and its analytic profile; with Laplace or
    randomised-response members: dp-accounting's PLD accountant (pessimistic, within about 1e-3 of exact).
    Each entry's ratio is the larger of the declared sensitivity over the noise scale and the one its
    coefficients imply over ``reward_span`` (:func:`ledger_entries`); a release without ``fed`` is charged to
    every round up to its step. The assumptions are returned with the number (:data:`LEDGER_ASSUMPTIONS`):
    the ledger is right for the protocol's neighbouring relation, and the per-round composition of adaptively
    chosen releases is valid because every recorded round's budget is bounded. None without a ledger."""
    from dpaudit.accountants.upper import worst_group_epsilon

    if ledger is None or not hasattr(ledger, "releases"):
        return None
    delta = check_delta(delta)
    T = check_int("horizon", horizon, minimum=1)
    with np.errstate(divide="ignore"):  # a release with no noise: an infinite ratio, an infinite bound
        e = ledger_entries(ledger, T, reward_span)
    n_runs = int(ledger.n_runs)
    worst = worst_group_epsilon(n_runs * T, e["run"] * T + e["rnd"], e["code"], e["ratio"], delta)
    unit = "user" if per == "user" else "round"
    run, rnd = divmod(worst.group, T) if worst.group >= 0 else (-1, -1)
    short, what = _how(worst)
    method = (f"{short}, {what}; worst {unit} over {n_runs} recorded runs" if worst.group >= 0 else
              f"the ledger recorded no release in {n_runs} runs of {T} rounds")
    return {"epsilon": float(worst.epsilon), "delta": delta, "method": method,
            "assumptions": list(LEDGER_ASSUMPTIONS),
            "details": {"source": f"ledger, per {unit}", "short": short, "runs": n_runs, "horizon": T,
                        "worst_run": int(run), f"worst_{unit}": int(rnd), "releases": len(ledger.releases),
                        "entries": int(e["run"].size), f"{unit}s_with_releases": worst.groups,
                        "gaussian_mu": worst.gaussian_mu, "laplace_eps": list(worst.laplace_eps),
                        "pure_eps": list(worst.pure_eps), "composition": worst.method,
                        "composed_exactly": worst.composed_exactly, "understated_sensitivities": int(e["understated"]),
                        "reward_span": reward_span,
                        "view": VIEW_REFINEMENT.format(p="local DP (the view is the whole transcript)" if per == "user"
                                                       else f"{protocol} DP"),
                        **worst.details}}


def policy_ledger_upper(policy: object, horizon: int, delta: float, *, protocol: str = "table",
                        per: str = "round") -> JSONObject | None:
    """:func:`ledger_upper` of the ledger ``policy`` recorded last (None without one), with the reward span of its
    ``reward_range`` (``domain`` for a local policy's users, ``per="user"``)."""
    if not hasattr(policy, "ledger"):
        return None
    span = _finite_span(getattr(policy, "domain", None)) if per == "user" else None
    if span is None:
        span = _finite_span(getattr(policy, "reward_range", None))
    return ledger_upper(getattr(policy, "ledger", None), horizon, delta, span, protocol=protocol, per=per)


def shuffle_upper(policy: object, delta: float) -> JSONObject | None:
    """The tightest eps(delta) dpaudit can prove for a shuffle policy's first batch: each user sends one message
    through each of its two shufflers (``shuffler_outer`` to the whole batch of ``batch0``, ``shuffler_grad`` to
    her group of ``batch0 / groups``), each ``eps0``-DP; the two clone pairs (Feldman, McMillan & Talwar 2021,
    Thm 3.2) composed exactly (:func:`dpaudit.accountants.shuffle.clones_composed_epsilon`), not added at
    delta/2 each. A shuffler that keeps the arrival order gets no amplification: its message composes as the
    eps0-DP message it is. Later batches are larger (their clone bounds smaller) and hold other users (parallel
    composition). None when the policy has no such pipeline."""
    from dpaudit.accountants.shuffle import clones_composed_epsilon, clones_epsilon
    from dpaudit.accountants.upper import compose_epsilon

    delta = check_delta(delta)
    sh = [getattr(policy, "shuffler_outer", None), getattr(policy, "shuffler_grad", None)]
    if (any(s is None or not hasattr(s, "eps0") for s in sh) or not hasattr(policy, "batch0")
            or getattr(policy, "private", True) is False):  # a non-private twin sums the exact data instead
        return None
    B = int(policy.batch0)
    groups = int(getattr(policy, "groups", 1))
    sizes = [B, B // groups]
    eps0 = [float(s.eps0) for s in sh]
    shuffled = [bool(getattr(s, "shuffle", True)) for s in sh]
    assumptions = ["a user's private data reaches the view only through her two messages (the contexts the actions "
                   "are chosen from are public, and the iterate depends only on earlier batches)",
                   "each user of the batch sends exactly one message through each shuffler, and each message's "
                   "randomizer is eps0-DP whatever the iterate",
                   "the two message sets are shuffled and randomised independently, so the view is a post-processing "
                   "of the product of the two clone pairs",
                   "a user belongs to one batch only, and the first (smallest) batch is the worst"]
    if all(shuffled) and eps0[0] == eps0[1]:
        eps = clones_composed_epsilon(sizes, eps0[0], delta)
        basic = clones_epsilon(sizes[0], eps0[0], delta / 2) + clones_epsilon(sizes[1], eps0[1], delta / 2)
        method = (f"exact composition of the clone bounds (Feldman, McMillan & Talwar 2021) of the batch's two shuffled "
                  f"message sets ({sizes[0]} and {sizes[1]} users, eps0 = {eps0[0]:g} each)")
    else:
        pure = list(eps0)
        singles = [clones_epsilon(n, e0, delta / 2) if s else e0 for e0, n, s in zip(eps0, sizes, shuffled)]
        basic = sum(singles)
        eps = min(basic, compose_epsilon(delta, pure_eps=pure).epsilon)
        method = ("a shuffler keeps the arrival order, so its message is accounted as the eps0-DP message it is: "
                  f"the two messages composed (eps0 = {eps0[0]:g}, {eps0[1]:g}), or the clone bounds added at delta/2 "
                  "where smaller")
    return {"epsilon": float(eps), "delta": delta, "method": method, "assumptions": assumptions,
            "details": {"source": "shuffle accounting", "short": method.split(" (")[0], "users_per_shuffle": sizes, "eps0": eps0, "shuffled": shuffled,
                        "basic_composition": float(basic),
                        "view": "every message of the first batch is in the analyzer's view; none can be dropped"}}


def policy_upper(policy: object, horizon: int, delta: float, *, protocol: str = "table",
                 per: str = "round") -> JSONObject | None:
    """The upper side of an audit, computed once by each protocol's plan after its ledger part: a shuffle
    pipeline's :func:`shuffle_upper` (its users' data reach the view only through the shuffled messages, so
    it holds for every view of the protocols it runs under), else the ledger the policy recorded last
    (:func:`policy_ledger_upper`), else None (nothing dpaudit can prove beyond the claim)."""
    found = shuffle_upper(policy, delta)
    if found is not None:
        return found
    return policy_ledger_upper(policy, horizon, delta, protocol=protocol, per=per)
