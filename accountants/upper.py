"""Upper bounds: the tightest eps(delta) dpaudit can prove for a composition of concrete releases.

An audit's lower bounds say how much a policy leaks at least; these functions say how much it can leak
at most, from the noise its releases actually carry (the *upper* side of an audit).

* :func:`compose_epsilon` -- eps(delta) of one sequential composition of Gaussian releases (multipliers
  mu_i = D_i / sigma_i), Laplace releases (eps_i = D_i / b_i) and pure eps_i-DP releases (randomised
  response, or any eps_i-DP message: binary randomised response dominates every eps-DP mechanism, Kairouz,
  Oh & Viswanath 2015). Exact where a closed form exists (Gaussians only: one Gaussian with
  mu = sqrt(sum mu_i^2), Balle & Wang 2018 Thm 8 with Dong, Roth & Su 2019 Cor. 3.3; one Laplace; one
  pure release), else dp-accounting's privacy-loss-distribution (PLD) accountant with the pessimistic
  estimate (Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022, "Connect the dots"): an upper bound on the
  exact value, within about 1e-3 of it at the discretisation used here (1e-4 per component, finer when
  there are many).
* :func:`rr_renyi` -- randomised response's exact Rényi divergence (for the pruning below).
* :func:`worst_group_epsilon` -- the largest :func:`compose_epsilon` over many groups of releases (the
  rounds of a ledger, or its users), computed exactly for every group that could be the largest: groups of
  Gaussians only are ranked by mu (the profile is monotone in mu, so the largest mu is the worst); groups
  with a Laplace or pure member get a valid upper bound each from their exact Rényi curves (Canonne, Kamath
  & Steinke 2020, Prop. 12, on a grid of orders and at alpha = inf), and are composed exactly in decreasing
  order of that bound until the next bound is below the largest exact value found (so every group is
  covered: the result is the maximum over all of them, not over a heuristic choice).

Nothing here imports dpaudit's core; :mod:`dpaudit.accounting` turns a ledger into these arrays.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dpaudit.errors import DPAuditError, InternalError, check_delta

from .conversions import Conversion, cks_epsilon, pure_to_approx
from .gaussian import gaussian_epsilon, laplace_epsilon, laplace_renyi

if TYPE_CHECKING:
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

__all__ = ["GAUSSIAN", "LAPLACE", "PURE", "compose_epsilon", "rr_renyi", "worst_group_epsilon", "GroupWorst",
           "UPPER_DISCRETISATION"]

#: the noise codes of :func:`worst_group_epsilon`'s ``code`` array
GAUSSIAN, LAPLACE, PURE = 0, 1, 2
#: the PLD accountant's value_discretization_interval per component (divided by the count beyond 10)
UPPER_DISCRETISATION = 1e-4
#: orders on which a group's Rényi curve bounds its eps (CKS 2020, Prop. 12), alpha = inf included
_ORDERS = np.concatenate([1 + np.geomspace(1e-3, 1e4, 64), [np.inf]])
#: at most this many distinct compositions are composed exactly by the PLD accountant per call
MAX_EXACT = 64


def rr_renyi(alpha: float | np.ndarray, eps: float | np.ndarray) -> np.ndarray | float:
    """D_alpha of binary randomised response at ``eps`` (both directions are equal), vectorised, log space.

    With p = e^eps / (1 + e^eps): (1/(a-1)) log(p^a (1-p)^(1-a) + (1-p)^a p^(1-a)); eps at alpha = inf."""
    a = np.asarray(alpha, dtype=float)
    e = np.asarray(eps, dtype=float)
    lp = -np.logaddexp(0.0, -e)  # log p
    lq = -np.logaddexp(0.0, e)  # log (1 - p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)
    out = np.where(np.isinf(a), e, out)
    out = np.where(e == 0, 0.0, out)
    return float(out) if out.ndim == 0 else out


def _interval(components: int) -> float:
    return UPPER_DISCRETISATION if components <= 10 else UPPER_DISCRETISATION * 10 / components


def compose_epsilon(delta: float, gaussian_mu: Sequence[float] = (), laplace_eps: Sequence[float] = (),
                    pure_eps: Sequence[float] = ()) -> Conversion:
    """eps(delta) of the sequential composition of the given releases (module docstring); a valid upper bound.

    ``method`` names how: ``gaussian-exact``, ``laplace-exact``, ``pure-rr-profile`` (one release, closed
    forms) or ``pld-pessimistic`` (dp-accounting's PLD accountant, pessimistic estimate)."""
    delta = check_delta(delta)
    mus = [float(m) for m in gaussian_mu if m > 0]
    laps = [float(e) for e in laplace_eps if e > 0]
    pures = [float(e) for e in pure_eps if e > 0]
    for name, xs in (("Gaussian multiplier", mus), ("Laplace epsilon", laps), ("pure epsilon", pures)):
        if any(not math.isfinite(x) for x in xs):
            raise DPAuditError(f"every {name} must be finite to compose, got {xs}.")
    mu = math.sqrt(sum(m * m for m in mus))
    if not laps and not pures:
        return gaussian_epsilon(delta, mu=mu)
    if mu == 0 and len(laps) + len(pures) == 1:
        return laplace_epsilon(delta, laps[0]) if laps else pure_to_approx(pures[0], delta)
    return _pld_epsilon(delta, mu, laps, pures)


def _pld_epsilon(delta: float, mu: float, laps: list[float], pures: list[float]) -> Conversion:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    h = _interval(len(laps) + len(pures) + (mu > 0))
    pld: PrivacyLossDistribution | None = None

    def add(part: PrivacyLossDistribution) -> None:
        nonlocal pld
        pld = part if pld is None else pld.compose(part)

    if mu > 0:
        add(pld_mod.from_gaussian_mechanism(1.0 / mu, 1.0, pessimistic_estimate=True, value_discretization_interval=h))
    for e, count in sorted(Counter(laps).items()):
        part = pld_mod.from_laplace_mechanism(1.0 / e, 1.0, pessimistic_estimate=True, value_discretization_interval=h)
        add(part.self_compose(count) if count > 1 else part)
    for e, count in sorted(Counter(pures).items()):
        part = pld_mod.from_randomized_response(2.0 / (math.exp(e) + 1.0), 2, pessimistic_estimate=True,
                                                value_discretization_interval=h)
        add(part.self_compose(count) if count > 1 else part)
    if pld is None:  # compose_epsilon answers a composition of one kind of release in closed form
        raise InternalError("the PLD of a composition was asked for without a release to compose")
    eps = float(pld.get_epsilon_for_delta(delta))
    return Conversion(max(0.0, eps), delta, "pld-pessimistic", None)


@dataclass(frozen=True)
class GroupWorst:
    """The largest eps(delta) over groups of releases, with the group that attains it and how it was found."""

    epsilon: float
    delta: float
    method: str  # of the worst group's composition (compose_epsilon's), or "unnoised release"
    group: int  # index of the worst group (-1: no release)
    gaussian_mu: float  # the worst group's single-Gaussian multiplier sqrt(sum mu_i^2)
    laplace_eps: tuple[float, ...]
    pure_eps: tuple[float, ...]
    groups: int  # groups with at least one release
    composed_exactly: int  # distinct compositions composed by the PLD accountant (0: closed forms only)
    pruned_by_renyi: int  # groups with a Laplace or pure member shown below the worst by their Rényi bound
    details: dict[str, str | int] = field(default_factory=dict)


def worst_group_epsilon(n_groups: int, group: np.ndarray, code: np.ndarray, ratio: np.ndarray,
                        delta: float) -> GroupWorst:
    """The largest eps(delta) over ``n_groups`` groups, each the sequential composition of its entries.

    One entry per release in a group: ``group`` (its index), ``code`` (:data:`GAUSSIAN`, :data:`LAPLACE` or
    :data:`PURE`) and ``ratio`` (sensitivity / noise scale: mu_i for a Gaussian, eps_i otherwise). An
    infinite ratio (a release without noise) makes the answer infinite. See the module docstring for why the
    result is the maximum over every group, computed exactly."""
    delta = check_delta(delta)
    group = np.asarray(group, dtype=np.int64)
    code = np.asarray(code, dtype=np.int64)
    ratio = np.asarray(ratio, dtype=float)
    if not (group.shape == code.shape == ratio.shape) or group.ndim != 1:
        raise DPAuditError("worst_group_epsilon needs three one-dimensional arrays of the same length.")
    if np.any(np.isnan(ratio)) or np.any(ratio < 0):
        raise DPAuditError("every sensitivity / noise-scale ratio must be a non-negative number.")
    if group.size and (group.min() < 0 or group.max() >= n_groups):
        raise DPAuditError(f"a release names group {int(group.max())}, outside 0..{n_groups - 1}.")
    used = np.unique(group)
    if group.size == 0:
        return GroupWorst(0.0, delta, "no release", -1, 0.0, (), (), 0, 0, 0)
    if np.any(np.isinf(ratio)):
        g = int(group[np.argmax(np.isinf(ratio))])
        return GroupWorst(math.inf, delta, "unnoised release", g, math.inf, (), (), int(used.size), 0, 0,
                          {"unnoised_releases": int(np.isinf(ratio).sum())})
    gauss = code == GAUSSIAN
    mu2 = np.bincount(group[gauss], weights=ratio[gauss] ** 2, minlength=n_groups)
    mixed = np.bincount(group[~gauss], minlength=n_groups) > 0
    best = GroupWorst(0.0, delta, "no release", -1, 0.0, (), (), int(used.size), 0, 0)
    plain = np.flatnonzero(~mixed & (np.bincount(group, minlength=n_groups) > 0))
    if plain.size:  # Gaussians only: the largest mu is the worst (the exact profile increases with mu)
        g = int(plain[np.argmax(mu2[plain])])
        conv = gaussian_epsilon(delta, mu=math.sqrt(mu2[g]))
        best = GroupWorst(conv.epsilon, delta, conv.method, g, math.sqrt(mu2[g]), (), (), int(used.size), 0, 0)
    cands = np.flatnonzero(mixed)
    if not cands.size:
        return best
    # a valid upper bound per group from its exact Rényi curve (CKS over the orders, alpha = inf included)
    local = np.full(n_groups, -1, dtype=np.int64)
    local[cands] = np.arange(cands.size)
    sel = local[group] >= 0
    lg, lc, lr = local[group[sel]], code[sel], ratio[sel]
    with np.errstate(invalid="ignore"):
        curve = np.where(mu2[cands, None] > 0, np.outer(mu2[cands], _ORDERS) / 2, 0.0)
    for c, fn in ((LAPLACE, laplace_renyi), (PURE, rr_renyi)):
        m = lc == c
        if not m.any():
            continue
        vals, inv = np.unique(lr[m], return_inverse=True)
        table = np.asarray(fn(_ORDERS[None, :], vals[:, None]))  # (distinct eps, orders)
        for j in range(_ORDERS.size):
            curve[:, j] += np.bincount(lg[m], weights=table[inv, j], minlength=cands.size)
    bound = np.min(np.asarray(cks_epsilon(_ORDERS[None, :], curve, delta)), axis=1)
    order = np.argsort(-bound, kind="stable")
    # the candidate groups' non-Gaussian entries, sorted by group, so a visited group's are one slice
    idx = np.flatnonzero(~gauss)
    idx = idx[np.argsort(local[group[idx]], kind="stable")]
    keys = local[group[idx]]
    seen: dict[tuple[float, tuple[float, ...], tuple[float, ...]], float] = {}
    top, top_g, top_conv, top_key = -1.0, -1, None, None
    visited = 0
    rest = 0.0
    for k, li in enumerate(order):
        if bound[li] <= max(top, best.epsilon):
            break
        if len(seen) >= MAX_EXACT:
            rest = float(bound[li])  # the remaining groups: their Rényi bound (valid, not exact)
            break
        g = int(cands[li])
        ents = idx[np.searchsorted(keys, li, "left"):np.searchsorted(keys, li, "right")]
        lap = tuple(sorted(float(ratio[e]) for e in ents if code[e] == LAPLACE))
        pure = tuple(sorted(float(ratio[e]) for e in ents if code[e] == PURE))
        key = (float(mu2[g]), lap, pure)
        visited = k + 1
        if key not in seen:
            conv = compose_epsilon(delta, (math.sqrt(mu2[g]),) if mu2[g] > 0 else (), lap, pure)
            seen[key] = conv.epsilon
            if conv.epsilon > top:
                top, top_g, top_conv, top_key = conv.epsilon, g, conv, key
    pruned = int(cands.size - visited) if rest == 0.0 else 0
    if top_conv is not None and top_key is not None and top > best.epsilon:
        best = GroupWorst(top, delta, top_conv.method, top_g, math.sqrt(top_key[0]), top_key[1], top_key[2],
                          int(used.size), len(seen), pruned)
    else:
        best = GroupWorst(best.epsilon, delta, best.method, best.group, best.gaussian_mu, best.laplace_eps,
                          best.pure_eps, int(used.size), len(seen), pruned)
    if rest > best.epsilon:
        return GroupWorst(rest, delta, "renyi-cks", best.group, best.gaussian_mu, best.laplace_eps, best.pure_eps,
                          best.groups, best.composed_exactly, 0,
                          {"note": f"more than {MAX_EXACT} distinct compositions could be the worst; the rest are "
                                   "bounded by their Rényi curves (valid, not exact)"})
    return best
