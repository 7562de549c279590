"""Gray-box likelihood attack: the exact privacy loss of every sampled run, from the ledger.

For neighbouring inputs d, d' that differ at round j, sample runs under d with the ledger on. A
run's releases R_1, R_2, ... are what its actions are computed from; under the *same history*
(same releases, hence the same episode boundaries and actions) the centre of every release moves
only through round j's contribution: ``centre' = centre + coef * (r'_j - r_j)`` where r_j is the
reward the policy observed at round j (``Release.fed``). The privacy loss of the run is then exact::

    L = sum_i [ log p_d(R_i | past) - log p_d'(R_i | past) ]

(the noise densities of the releases, Gaussian or Laplace, at their recorded scale). Following
Balle & Wang (2018) and Steinke's privacy-loss-distribution view, from samples of L under d:

* the privacy profile delta(eps) = E[(1 - e^(eps - L))_+] (hockey-stick divergence), and
* the Rényi divergence D_alpha = log E[e^((alpha - 1) L)] / (alpha - 1).

Confidence bounds (our choices; honest for any distribution of L): a [0, 1]-valued Y_i is turned
into an exact Bernoulli(E[Y]) draw by comparing it with an independent uniform U_i, and the
Clopper-Pearson bounds of those counts are the interval. delta(eps) uses Y = (1 - e^(eps - L))_+, and
since U_i < Y_i(eps) exactly when eps < W_i = L_i + log(1 - U_i), the counts at every eps at once are
those of one sample of W, whose survival function is delta(eps): the largest eps whose lower bound
exceeds delta is an order statistic of W, valid at the error of one test whatever eps it lands on
(:func:`epsilon_from_losses`; its exact law, hence the statistical limit at n runs, is
:func:`dpaudit.attacks.limits.likelihood_limit`). D_alpha uses Y = min(e^((alpha-1)L), c) / c with the
truncation c chosen on a first half of the runs and the bound counted on the second half (truncation
only lowers the mean, so the lower bound stays valid; no honest *upper* bound on an unbounded mean
exists from samples, so D_alpha gets a lower bound and a point estimate). The eps bound gets
:data:`EPSILON_SHARE` of the error budget and the orders split the rest (Bonferroni): every order's
bound holds, and can enter the verdict, without starving the eps bound (:func:`loss_bounds`, for any attack
that samples losses; the shuffle plan's gray-box part still counts on a pilot grid).

What it trusts: the ledger. Releases without ``fed`` are counted and reported (their dependence on
round j is unknown, so a bound from such a ledger may be too low, never too high). A mechanism
that bypasses the ledger (noise shared across arms, an un-noised release) is invisible here; the
black-box attack (:mod:`dpaudit.attacks.membership`) is what judges those.

The bound is about the releases, which is what a privacy proof of the papers' policies covers (the
actions are post-processing of them).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.errors import DPAuditError, InternalError, check_delta
from dpaudit.engine import SERIAL, Engine, progress_counter
from dpaudit.mechanisms import Ledger
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols import Adversary, Protocol, ViewDP

from .bounds import check_confidence, cp_lower, cp_upper
from .membership import Pair, chunk_seeds
from .result import AuditResult

__all__ = ["privacy_losses", "empirical_profile", "profile_bounds", "renyi_bounds", "pilot_grid", "likelihood_attack",
           "DEFAULT_ORDERS", "EPSILON_SHARE", "LossBounds", "loss_bounds", "epsilon_from_losses"]

DEFAULT_ORDERS: tuple[float, ...] = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)
_NO_LEDGER = "the likelihood attack needs a policy that records a ledger (uses dpaudit's mechanisms); this one has none."


def _observed_rewards(protocol: Protocol, data: np.ndarray, views: np.ndarray, j: int,
                      adversary: Adversary | None) -> np.ndarray:
    data = np.asarray(data, dtype=float)
    if isinstance(protocol, ViewDP) or data.ndim == 1:
        return np.full(views.shape[0], data[j])
    q = views[:, j] if adversary is None else adversary.query(j, views[:, : j + 1])
    return data[j, q]


def _loss_from_ledger(ledger: Ledger, n_runs: int, j: int, dr: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Per-run privacy loss of the releases fed by round j; also (releases fed by j, releases without fed)."""
    loss = np.zeros(n_runs)
    used = np.zeros(n_runs, dtype=np.int64)
    no_fed = 0
    for rel in ledger.releases:
        if rel.fed is None:
            no_fed += 1
            continue
        pos, coef = rel.fed.at_round(j)
        if not pos.size:
            continue
        runs = np.asarray(rel.runs)
        shift = np.zeros_like(rel.centre, dtype=float)
        np.add.at(shift, pos, coef * dr[runs[pos]][:, None])
        rows = np.unique(pos)
        c0 = rel.centre[rows]
        c1 = c0 + shift[rows]
        v = rel.value[rows]
        scale = np.asarray(rel.noise.scale, dtype=float)
        if scale.ndim == 0:
            s = scale
        elif scale.ndim == 1:
            s = scale[rows][:, None]
        else:
            s = scale[rows]
        z0 = (v - c0) / s
        z1 = (v - c1) / s
        if rel.noise.kind == "gaussian":
            lr = 0.5 * (z1**2 - z0**2)
        elif rel.noise.kind == "laplace":
            lr = np.abs(z1) - np.abs(z0)
        elif rel.noise.kind == "randomized_response":  # P(o = 1 | c) = q + (p - q) c, p = 1/(1 + e^-eps)
            p = 1.0 / (1.0 + np.exp(-1.0 / s))
            P0, P1 = (np.where(v > 0.5, 1 - p + (2 * p - 1) * c, p - (2 * p - 1) * c) for c in (c0, c1))
            lr = np.log(P0) - np.log(P1)
        else:  # pragma: no cover - Noise only has these kinds
            raise InternalError(f"the likelihood attack met the noise kind {rel.noise.kind!r}, which dpaudit's ledger "
                                "does not make")
        np.add.at(loss, runs[rows], lr.sum(axis=1))
        np.add.at(used, runs[rows], 1)
    return loss, int(used.max(initial=0)), no_fed


def _chunk_losses(policy: PolicyLike, protocol: Protocol, pair: Pair, m: int,
                  ss: np.random.SeedSequence) -> tuple[np.ndarray, int, int]:
    """One chunk of runs under ``pair.d0``: their privacy losses (a task of :func:`privacy_losses`)."""
    views = protocol.run(policy, pair.d0, m, np.random.default_rng(ss), pair.adversary, record=True)
    ledger = getattr(policy, "ledger", None)
    if ledger is None or not hasattr(ledger, "releases"):
        raise DPAuditError(_NO_LEDGER)
    r0 = _observed_rewards(protocol, pair.d0, views, pair.round, pair.adversary)
    r1 = _observed_rewards(protocol, pair.d1, views, pair.round, pair.adversary)
    return _loss_from_ledger(ledger, m, pair.round, r1 - r0)


def privacy_losses(
    policy: PolicyLike,
    protocol: Protocol,
    pair: Pair,
    n_runs: int,
    seed: np.random.SeedSequence,
    progress: Callable[[str], None] | None = None,
    engine: Engine = SERIAL,
) -> tuple[np.ndarray, dict[str, int]]:
    """Sample ``n_runs`` runs under ``pair.d0`` and return each run's exact privacy loss L."""
    if not hasattr(policy, "ledger"):
        raise DPAuditError(_NO_LEDGER)
    T = int(np.asarray(pair.d0).shape[0])
    tasks = [(policy, protocol, pair, m, ss) for m, ss in chunk_seeds(n_runs, T, seed)]
    counter = progress_counter(progress, "likelihood: {done}/{total} runs", [t[3] for t in tasks])
    parts = engine.map(_chunk_losses, tasks, on_result=counter)
    loss = np.concatenate([p[0] for p in parts])
    return loss, {"max_releases_fed_by_round": max(p[1] for p in parts),
                  "releases_without_fed": sum(p[2] for p in parts)}


def empirical_profile(loss: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """mean((1 - e^(eps - L))_+) for every eps, in O((n + m) log n) via sorted losses and suffix sums."""
    ls = np.sort(np.asarray(loss, dtype=float))
    n = ls.size
    top = ls[-1] if n else 0.0
    # suffix sums of e^(-(L - top)) keep the exponent bounded
    w = np.exp(-(ls - top))
    suffix = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    idx = np.searchsorted(ls, eps, side="right")  # losses > eps start at idx
    count = n - idx
    with np.errstate(over="ignore"):
        val = count - np.exp(eps - top) * suffix[idx]
    return np.maximum(val, 0.0) / max(n, 1)


#: grid points of :func:`profile_bounds` computed at once
_PROFILE_ROWS = 4


def profile_bounds(loss: np.ndarray, eps_grid: np.ndarray, u: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point estimate, lower and upper Clopper-Pearson bounds on delta(eps) for each eps (error alpha each side)."""
    n = loss.size
    # Y = (1 - e^(eps - L))_+ for every grid point; U_i < Y_i is an exact Bernoulli(delta(eps)) draw. A few
    # grid points at a time (a grid x runs matrix at 400,000 runs is 400 MB of page faults, 1.5 s in the main
    # process while the workers wait), and e^(eps - L) - 1 only where L > eps (elsewhere Y is -0.0, as
    # -expm1(min(eps - L, 0)) gives): every row, hence every mean and count, is bit-identical to the one matrix.
    est = np.empty(eps_grid.shape[0])
    k = np.empty(eps_grid.shape[0], dtype=np.intp)
    for i in range(0, eps_grid.shape[0], _PROFILE_ROWS):
        d = np.subtract(eps_grid[i:i + _PROFILE_ROWS, None], loss[None, :])
        y = np.zeros_like(d)
        np.expm1(d, out=y, where=~(d >= 0))
        np.negative(y, out=y)
        est[i:i + d.shape[0]] = y.mean(axis=1)
        k[i:i + d.shape[0]] = (u[None, :] < y).sum(axis=1)
    return est, cp_lower(k, n, alpha), cp_upper(k, n, alpha)


def renyi_bounds(loss: np.ndarray, orders: Sequence[float], u: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Point estimates and lower bounds on D_alpha for each order (truncation chosen on the first half)."""
    n = loss.size
    half = n // 2
    a_loss, b_loss, b_u = loss[:half], loss[half:], u[half:]
    est, low = [], []
    for order in orders:
        lx = (order - 1.0) * loss
        m = lx.max()
        est.append(float((m + np.log(np.mean(np.exp(lx - m)))) / (order - 1.0)))
        # truncation at the largest value seen in the first half (log scale)
        log_c = float(((order - 1.0) * a_loss).max()) if half > 0 else float(lx.max())
        y = np.exp(np.minimum((order - 1.0) * b_loss - log_c, 0.0))
        k = int(np.count_nonzero(b_u < y))
        lo = float(cp_lower(k, b_loss.size, alpha))
        # D_alpha >= 0 always holds, so the clamp (like the eps bounds') changes no statistic
        low.append(max((math.log(lo) + log_c) / (order - 1.0), 0.0) if lo > 0 else 0.0)
    return np.array(est), np.array(low)


def pilot_grid(pilot: np.ndarray, size: int = 128, reach: float = 2.0) -> np.ndarray:
    """Where the profile band of :func:`loss_bounds` is drawn: ``size`` points from 0 to ``reach`` x the
    pilot's largest loss. Display only: the eps bound is an order statistic of the counted runs and does
    not depend on any grid (so a pure-DP bound is not capped below the loss's maximum, as a 128-point
    test grid would cap it at 126/127 of it)."""
    pilot = np.asarray(pilot, dtype=float)
    hi = float(np.max(pilot)) if pilot.size else 0.0
    return np.linspace(0.0, max(reach * hi, 1e-3), size)


#: the share of the likelihood test's error budget its eps bound gets; the Rényi orders split the rest
EPSILON_SHARE = 0.8


@dataclass(frozen=True)
class LossBounds:
    """What :func:`loss_bounds` shows from sampled privacy losses: the eps lower bound (the ``rank``-th
    largest of L - E, at error ``alpha_epsilon``), the Rényi lower bounds (each order at ``alpha_order``),
    the orders whose bound exceeds the claim, and the profile band for display."""

    epsilon_lower: float
    rank: int | None
    alpha_epsilon: float
    alpha_order: float
    epsilon_point_estimate: float | None
    profile: dict[str, np.ndarray | str]  # the pointwise band: eps, delta_estimate, delta_lower, delta_upper
    orders: list[float]
    renyi_estimate: np.ndarray
    renyi_lower: np.ndarray
    renyi_violation: list[dict[str, float]]
    n_tests: int

    def details(self) -> dict[str, object]:
        """The findings' details of the likelihood attack (without the sampling's own counters)."""
        return {
            "epsilon_point_estimate": self.epsilon_point_estimate,
            "order_statistic": {"rank": self.rank, "alpha": self.alpha_epsilon},
            "profile": self.profile,
            "renyi": {"orders": self.orders, "estimate": self.renyi_estimate, "lower": self.renyi_lower,
                      "alpha_each": self.alpha_order},
            "renyi_violation": self.renyi_violation,
            "tests_corrected_for": self.n_tests * (1 + len(self.orders)),
        }


def epsilon_from_losses(loss: np.ndarray, u: np.ndarray, delta: float, alpha: float) -> tuple[float, int | None]:
    """The eps lower bound at error ``alpha`` from exact losses ``loss`` and independent uniforms ``u``.

    Each run's Y(eps) = (1 - e^(eps - L))_+ in [0, 1] has mean delta(eps); U < Y(eps) is an exact
    Bernoulli(delta(eps)) draw (the Bernoulli trick), and U < Y(eps) exactly when eps < W = L + log(1 - U).
    So the count at eps is the number of W above eps, nested in eps, and W's survival function is delta:
    the largest eps whose Clopper-Pearson lower bound (at ``alpha``) exceeds ``delta``, over *every* eps at
    once, is the k-th largest W with k = :func:`dpaudit.attacks.limits.order_statistic_rank`, and it
    exceeds the true eps(delta) only when Binomial(n, delta) >= k: probability below ``alpha`` with no
    correction for the eps values it looked at (the classical distribution-free bound on a quantile). No
    grid, hence no grid to choose and no cap below the largest loss. Returns (bound, k; None when n runs
    cannot reach delta)."""
    from .limits import order_statistic_rank

    loss = np.asarray(loss, dtype=float)
    n = loss.size
    if n == 0:
        return 0.0, None
    k = order_statistic_rank(n, delta, alpha)
    if k is None:
        return 0.0, None
    w = loss + np.log1p(-np.asarray(u, dtype=float))
    kth = float(np.partition(w, n - k)[n - k])  # the k-th largest
    return max(kth, 0.0), k


def loss_bounds(loss: np.ndarray, u: np.ndarray, *, delta: float, confidence: float,
                orders: Sequence[float] = DEFAULT_ORDERS, claim: Guarantee | None = None, n_tests: int = 1,
                grid: np.ndarray | None = None) -> LossBounds:
    """Every bound of the gray-box test from sampled exact privacy losses: the one function for any attack
    that samples losses (today :func:`likelihood_attack`; the shuffle plan's gray-box part still counts on a
    pilot grid of its own).

    ``loss``: the runs' privacy losses under d (never seen before: nothing here is chosen on them but the
    display band's points when ``grid`` is None); ``u``: as many independent uniforms. The error budget
    ``(1 - confidence) / n_tests`` goes :data:`EPSILON_SHARE` to the eps bound (one test,
    :func:`epsilon_from_losses`) and the rest in equal parts to the Rényi orders (:func:`renyi_bounds`),
    whose bounds are compared with ``claim.renyi(alpha)`` when a claim is given. ``grid``: where the profile
    band is drawn (e.g. :func:`pilot_grid` of a pilot's losses); it is pointwise, each point's
    Clopper-Pearson interval at the eps bound's error, and never enters the bound.
    """
    check_delta(delta, allow_zero=True)
    check_confidence(confidence)
    if isinstance(n_tests, bool) or not isinstance(n_tests, (int, np.integer)) or n_tests < 1:
        raise DPAuditError(f"n_tests must be an integer >= 1, got {n_tests!r}.")
    loss = np.asarray(loss, dtype=float)
    u = np.asarray(u, dtype=float)
    if loss.shape != u.shape or loss.ndim != 1:
        raise DPAuditError(f"loss_bounds needs one uniform per loss, got {loss.shape} losses and {u.shape} uniforms.")
    orders = [float(o) for o in orders]
    budget = (1.0 - confidence) / int(n_tests)
    a_eps = budget * (EPSILON_SHARE if orders else 1.0)
    a_ord = budget * (1.0 - EPSILON_SHARE) / len(orders) if orders else 0.0
    eps_lower, rank = epsilon_from_losses(loss, u, delta, a_eps)

    top = max(float(loss.max()) if loss.size else 0.0, eps_lower)
    if grid is None:
        grid = np.linspace(0.0, max(1.05 * top, 1e-3), 128)
    grid = np.unique(np.concatenate([np.asarray(grid, dtype=float), [np.nextafter(eps_lower, -np.inf)] if eps_lower > 0 else []]))
    est, lo, up = profile_bounds(loss, grid, u, a_eps)
    d_est, d_low = renyi_bounds(loss, orders, u, a_ord) if orders else (np.zeros(0), np.zeros(0))

    eps_point = point_estimate(loss, delta)
    renyi_violation = renyi_violations(orders, d_low, claim)
    return LossBounds(eps_lower, rank, a_eps, a_ord, eps_point,
                      {"eps": grid, "delta_estimate": est, "delta_lower": lo, "delta_upper": up, "band": "pointwise"},
                      orders, d_est, d_low, renyi_violation, int(n_tests))


def likelihood_attack(
    policy: PolicyLike,
    protocol: Protocol,
    pair: Pair,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    n_runs: int = 20000,
    seed: int | np.random.SeedSequence = 0,
    claim: Guarantee | None = None,
    orders: Sequence[float] = DEFAULT_ORDERS,
    eps_grid: np.ndarray | None = None,
    pilot: np.ndarray | None = None,
    n_tests: int = 1,
    progress: Callable[[str], None] | None = None,
    engine: Engine = SERIAL,
) -> AuditResult:
    """Gray-box attack on one pair: lower bounds on eps(delta) and on D_alpha from exact losses.

    ``epsilon_lower`` is an order statistic of the counted runs (:func:`epsilon_from_losses`), valid at its
    share of the error budget whatever eps it lands on; the Rényi orders share the rest
    (:func:`loss_bounds`). ``eps_grid``, or else :func:`pilot_grid` of ``pilot`` losses (independent of the
    runs counted here), is where the profile band is drawn; without either, its points span the counted
    losses (display only). With a ``claim``, ``details['renyi_violation']`` lists the orders where the
    D_alpha lower bound exceeds ``claim.renyi(alpha)``. The error budget ``1 - confidence`` is divided by
    ``n_tests`` for the caller's other pairs.
    """
    check_delta(delta, allow_zero=True)
    check_confidence(confidence)
    if isinstance(n_runs, bool) or not isinstance(n_runs, (int, np.integer)) or n_runs < 2:
        raise DPAuditError(f"n_runs must be an integer >= 2, got {n_runs!r}.")
    t0 = time.perf_counter()
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_runs, s_u, _ = ss.spawn(3)  # (the third once seeded a pilot for an eps grid; the bound needs none)
    if eps_grid is None and pilot is not None:
        eps_grid = pilot_grid(np.asarray(pilot, dtype=float))
    loss, info = privacy_losses(policy, protocol, pair, int(n_runs), s_runs, progress, engine)
    u = np.random.default_rng(s_u).random(loss.size)
    b = loss_bounds(loss, u, delta=delta, confidence=confidence, orders=orders, claim=claim, n_tests=n_tests,
                    grid=None if eps_grid is None else np.asarray(eps_grid, dtype=float))
    return AuditResult(
        attack="likelihood",
        epsilon_lower=b.epsilon_lower,
        delta=delta,
        confidence=confidence,
        witness=pair.describe(),
        samples=int(loss.size),
        seconds=time.perf_counter() - t0,
        details={
            **b.details(),
            "mean_loss_kl": float(loss.mean()),
            "max_loss": float(loss.max()),
            **info,
        },
    )


def smallest_count(n: int, delta: float, alpha: float) -> int:
    """The fewest of ``n`` Bernoulli draws (the trick of :func:`profile_bounds`) whose one-sided Clopper-Pearson
    lower bound at error ``alpha`` exceeds ``delta`` (``n + 1`` if not even ``n`` do): a grid point shows
    delta(eps) > ``delta`` only with at least this count, so a test whose counts were their expectations
    ``n delta(eps)`` shows exactly the eps where ``delta(eps) >= smallest_count / n`` (the statistical limit of
    the test at ``n`` runs, given a pair's exact profile)."""
    n = int(n)
    if float(cp_lower(n, n, alpha)) <= delta:
        return n + 1
    lo, hi = 0, n  # cp_lower grows with the count: the first count past delta, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if float(cp_lower(mid, n, alpha)) > delta:
            hi = mid
        else:
            lo = mid
    return hi



def point_estimate(loss: np.ndarray, delta: float) -> float | None:
    """The eps at which the empirical profile of ``loss`` crosses ``delta`` (for information, not a bound)."""
    fine = np.linspace(0.0, max(float(loss.max()) if loss.size else 0.0, 1e-3), 2000)
    prof = empirical_profile(loss, fine)
    return float(fine[prof > delta].max()) if np.any(prof > delta) else None


def renyi_violations(orders: Sequence[float], d_low: Sequence[float] | np.ndarray,
                     claim: Guarantee | None) -> list[dict[str, float]]:
    """The orders whose Rényi lower bound exceeds what ``claim`` promises there (none without a claim)."""
    out: list[dict[str, float]] = []
    if claim is None:
        return out
    for o, low_o in zip(orders, d_low):
        try:
            bound = claim.renyi(o)
        except Exception:  # claims that promise nothing at this order
            continue
        if low_o > bound:
            out.append({"order": o, "D_alpha_lower": float(low_o), "claimed": float(bound)})
    return out

__all__ += ["smallest_count", "point_estimate", "renyi_violations"]
