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

Confidence intervals (our choices; honest for any distribution of L): a [0, 1]-valued Y_i is turned
into an exact Bernoulli(E[Y]) draw by comparing it with an independent uniform U_i, and the
Clopper-Pearson bounds of those counts are the interval. delta(eps) uses Y = (1 - e^(eps - L))_+;
D_alpha uses Y = min(e^((alpha-1)L), c) / c with the truncation c chosen on a first half of the
runs and the bound counted on the second half (truncation only lowers the mean, so the lower bound
stays valid; no honest *upper* bound on an unbounded mean exists from samples, so D_alpha gets a
lower bound and a point estimate). Every eps of the grid and every order is one test, and the
error budget is divided among them (Bonferroni). The eps grid itself is chosen on losses the bound
never sees (a pilot sample, or the neighbouring search's screening runs), so that every test is
fixed before its counts are drawn.

What it trusts: the ledger. Releases without ``fed`` are counted and reported (their dependence on
round j is unknown, so a bound from such a ledger may be too low, never too high). A mechanism
that bypasses the ledger (noise shared across arms, an un-noised release) is invisible here; the
black-box attack (:mod:`dpaudit.attacks.membership`) is what judges those.

The bound is about the releases, which is what a privacy proof of the seed policies covers (the
actions are post-processing of them).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.errors import DPAuditError, check_delta
from dpaudit.engine import SERIAL, Engine, progress_counter
from dpaudit.protocols import Adversary, Protocol, ViewDP

from .bounds import check_confidence, cp_lower, cp_upper
from .membership import Pair, chunk_seeds
from .result import AuditResult

__all__ = ["privacy_losses", "empirical_profile", "profile_bounds", "renyi_bounds", "pilot_grid", "likelihood_attack",
           "DEFAULT_ORDERS"]

DEFAULT_ORDERS: tuple[float, ...] = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)
_NO_LEDGER = "the likelihood attack needs a policy that records a ledger (uses dpaudit's mechanisms); this one has none."


def _observed_rewards(protocol: Protocol, data: np.ndarray, views: np.ndarray, j: int,
                      adversary: Adversary | None) -> np.ndarray:
    data = np.asarray(data, dtype=float)
    if isinstance(protocol, ViewDP) or data.ndim == 1:
        return np.full(views.shape[0], data[j])
    q = views[:, j] if adversary is None else adversary.query(j, views[:, : j + 1])
    return data[j, q]


def _loss_from_ledger(ledger: Any, n_runs: int, j: int, dr: np.ndarray) -> tuple[np.ndarray, int, int]:
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
        elif rel.noise.kind == "randomized_response":  # issue 10: P(o = 1 | c) = q + (p - q) c, p = 1/(1 + e^-eps)
            p = 1.0 / (1.0 + np.exp(-1.0 / s))
            P0, P1 = (np.where(v > 0.5, 1 - p + (2 * p - 1) * c, p - (2 * p - 1) * c) for c in (c0, c1))
            lr = np.log(P0) - np.log(P1)
        else:  # pragma: no cover - Noise only has these kinds
            raise DPAuditError(f"unknown noise kind {rel.noise.kind!r} in the ledger.")
        np.add.at(loss, runs[rows], lr.sum(axis=1))
        np.add.at(used, runs[rows], 1)
    return loss, int(used.max(initial=0)), no_fed


def _chunk_losses(policy: Any, protocol: Protocol, pair: Pair, m: int,
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
    policy: Any,
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
    """The eps grid of :func:`likelihood_attack`: ``size`` points from 0 to ``reach`` x the pilot's largest loss.

    delta is small, so eps(delta) sits in the far tail of the loss, beyond what a pilot a tenth the
    size of the final sample sees: a grid ending at the pilot's maximum would cap the bound (AdaC-UCB,
    K = 5, rho = 0.1: 1.38 instead of 1.54 with 50,000 runs). Points past the tail cost only their
    share of the error budget.
    """
    pilot = np.asarray(pilot, dtype=float)
    hi = float(np.max(pilot)) if pilot.size else 0.0
    return np.linspace(0.0, max(reach * hi, 1e-3), size)


def likelihood_attack(
    policy: Any,
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

    ``epsilon_lower`` is the largest eps of the grid whose delta(eps) lower bound exceeds ``delta``.
    Without ``eps_grid``, the grid is :func:`pilot_grid` of ``pilot`` losses of the same pair
    (independent of the runs counted here); without ``pilot`` either, a fresh pilot of
    ``max(200, n_runs // 10)`` runs is drawn for it.
    With a ``claim``, ``details['renyi_violation']`` lists the orders where the D_alpha lower bound
    exceeds ``claim.renyi(alpha)``. The error budget ``1 - confidence`` (divided by ``n_tests``
    for the caller's other pairs) is split over the grid and the orders.
    """
    check_delta(delta, allow_zero=True)
    check_confidence(confidence)
    if isinstance(n_runs, bool) or not isinstance(n_runs, (int, np.integer)) or n_runs < 2:
        raise DPAuditError(f"n_runs must be an integer >= 2, got {n_runs!r}.")
    t0 = time.perf_counter()
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_runs, s_u, s_pilot = ss.spawn(3)
    if eps_grid is None:
        if pilot is None:
            pilot, _ = privacy_losses(policy, protocol, pair, max(200, int(n_runs) // 10), s_pilot, engine=engine)
        eps_grid = pilot_grid(np.asarray(pilot, dtype=float))
    loss, info = privacy_losses(policy, protocol, pair, int(n_runs), s_runs, progress, engine)
    u = np.random.default_rng(s_u).random(loss.size)
    eps_grid = np.asarray(eps_grid, dtype=float)
    orders = [float(o) for o in orders]
    n_budget = eps_grid.size + len(orders)
    alpha = (1.0 - confidence) / n_tests / n_budget

    est, lo, up = profile_bounds(loss, eps_grid, u, alpha)
    above = lo > delta
    eps_lower = float(eps_grid[above].max()) if np.any(above) else 0.0
    d_est, d_low = renyi_bounds(loss, orders, u, alpha)

    # point estimate of eps(delta) from the empirical profile, for information
    fine = np.linspace(0.0, max(float(loss.max()), 1e-3), 2000)
    prof = empirical_profile(loss, fine)
    eps_point = float(fine[prof > delta].max()) if np.any(prof > delta) else None

    renyi_violation = []
    if claim is not None:
        for o, low_o in zip(orders, d_low):
            try:
                bound = claim.renyi(o)
            except Exception:  # claims that promise nothing at this order
                continue
            if low_o > bound:
                renyi_violation.append({"order": o, "D_alpha_lower": float(low_o), "claimed": float(bound)})

    return AuditResult(
        attack="likelihood",
        epsilon_lower=eps_lower,
        delta=delta,
        confidence=confidence,
        witness=pair.describe(),
        samples=int(loss.size),
        seconds=time.perf_counter() - t0,
        details={
            "epsilon_point_estimate": eps_point,
            "grid": {"points": int(eps_grid.size), "top": float(eps_grid[-1]),
                     "bound_at_top": bool(eps_grid.size and eps_lower >= eps_grid[-1])},
            "mean_loss_kl": float(loss.mean()),
            "max_loss": float(loss.max()),
            "profile": {"eps": eps_grid, "delta_estimate": est, "delta_lower": lo, "delta_upper": up},
            "renyi": {"orders": orders, "estimate": d_est, "lower": d_low},
            "renyi_violation": renyi_violation,
            "tests_corrected_for": n_tests * n_budget,
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


__all__ += ["smallest_count"]
