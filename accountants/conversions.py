"""Conversions between privacy guarantees, and inverse calibration.

Every conversion here returns a *valid* (epsilon, delta) guarantee; the aim is to be as tight as the
best known conversion for the stated guarantee, never looser than needed and never invalid.

* RDP at order alpha -> (eps, delta): Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for
  differential privacy"), Prop. 12: if ``D_alpha <= tau`` then the mechanism is (eps, delta)-DP with

      delta = exp((alpha - 1)(tau - eps)) / alpha * (1 - 1/alpha)^(alpha - 1),

  i.e. ``eps = tau + log(1 - 1/alpha) - (log(delta) + log(alpha)) / (alpha - 1)``.
* rho-zCDP -> (eps, delta): the same bound with ``tau = alpha rho`` minimised over *continuous*
  orders alpha > 1 (CKS 2020, Cor. 13). dp-accounting (``rdp_privacy_accountant.compute_epsilon``)
  evaluates the same formula, but only on a fixed grid of orders, which is what makes it loose at
  very small and very large rho; the continuous minimisation is written here by hand because
  dp-accounting lacks it.
* Both also use the order-1 (KL) bound: ``KL <= D_alpha`` for every alpha > 1 and, by the
  Bretagnolle-Huber inequality, TV <= sqrt(1 - exp(-KL)); (0, delta)-DP holds when TV <= delta.
  Where this gives eps = 0 it is below the CKS optimum (and reported as method ``"kl-tv"``).
* eps-DP -> (eps', delta): the privacy profile of randomized response, which dominates every
  eps-DP mechanism (Kairouz, Oh & Viswanath 2015, Thm 2.1); (eps0, delta0)-DP -> (eps', delta') for
  delta' >= delta0 likewise from their four-output dominating mechanism.

Open choices made here: the minimisation runs over x = log(alpha - 1) in [-30, 30] (alpha in
(1 + 1e-13, 1 + 1e13)), first on a grid of 241 points, then with Brent's bounded method between
the grid neighbours of the best point (absolute tolerance 1e-12 in x). The returned epsilon is the
formula's value at the returned order, so it is a valid bound whatever the minimiser does.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, asdict
from types import ModuleType

import numpy as np

from dpaudit.errors import DPAuditError, check_delta, check_nonnegative, check_order, check_positive

__all__ = [
    "Conversion",
    "cks_epsilon",
    "cks_log_delta",
    "kl_tv_delta",
    "simple_zcdp_epsilon",
    "zcdp_to_approx",
    "zcdp_delta",
    "rdp_to_approx",
    "rdp_curve_to_approx",
    "pure_to_approx",
    "approx_to_approx",
    "zcdp_rho_for_epsilon",
    "pure_to_zcdp",
]

_X_LO, _X_HI = -30.0, 30.0
_GRID = np.linspace(_X_LO, _X_HI, 241)


@dataclass(frozen=True)
class Conversion:
    """An (epsilon, delta) guarantee and how it was obtained.

    ``method`` names the conversion, ``order`` the Rényi order it was achieved at (None where no
    order is involved).
    """

    epsilon: float
    delta: float
    method: str
    order: float | None = None

    def as_dict(self) -> dict[str, float | str | None]:
        return asdict(self)


def _optimize() -> ModuleType:
    """scipy.optimize, imported on first use (it costs ~0.3 s, which `import dpaudit` should not pay)."""
    return importlib.import_module("scipy.optimize")



def cks_epsilon(alpha: np.ndarray | float, tau: np.ndarray | float, delta: float) -> np.ndarray | float:
    """eps of CKS 2020 Prop. 12 for ``D_alpha <= tau`` at ``delta`` (vectorised; alpha = inf gives tau)."""
    a = np.asarray(alpha, dtype=float)
    t = np.asarray(tau, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = t + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    eps = np.where(np.isinf(a), t, eps)
    return float(eps) if eps.ndim == 0 else eps


def cks_log_delta(alpha: float, tau: float, epsilon: float) -> float:
    """log delta of CKS 2020 Prop. 12: log[exp((a-1)(tau-eps)) / a * (1-1/a)^(a-1)]."""
    if math.isinf(alpha):
        return 0.0 if tau > epsilon else -math.inf
    return (alpha - 1) * (tau - epsilon) - math.log(alpha) + (alpha - 1) * math.log1p(-1 / alpha)


def kl_tv_delta(kl: float) -> float:
    """Smallest delta with (0, delta)-DP implied by ``KL <= kl`` (Bretagnolle-Huber): sqrt(1 - e^-kl)."""
    return math.sqrt(-math.expm1(-kl))


def simple_zcdp_epsilon(rho: float, delta: float) -> float:
    """The textbook conversion rho + 2 sqrt(rho log(1/delta)) (Bun & Steinke 2016, Prop. 1.3)."""
    rho = check_nonnegative("rho", rho)
    delta = check_delta(delta)
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def _minimise_over_orders(fun_x: Callable[[np.ndarray], np.ndarray]) -> tuple[float, float]:
    """Minimise ``fun_x`` over x = log(alpha - 1) in [-30, 30]: grid, then bounded Brent."""
    values = np.asarray(fun_x(_GRID), dtype=float)
    values = np.where(np.isnan(values), np.inf, values)
    i = int(np.argmin(values))
    lo = _GRID[max(i - 1, 0)]
    hi = _GRID[min(i + 1, _GRID.size - 1)]
    best_x, best_v = float(_GRID[i]), float(values[i])
    if math.isfinite(best_v):
        res = _optimize().minimize_scalar(
            lambda x: float(fun_x(np.array([x]))[0]), bounds=(lo, hi), method="bounded",
            options={"xatol": 1e-12, "maxiter": 500},
        )
        if res.success and float(res.fun) < best_v:
            best_x, best_v = float(res.x), float(res.fun)
    return best_x, best_v


def zcdp_to_approx(rho: float, delta: float) -> Conversion:
    """rho-zCDP -> (eps, delta): CKS 2020 Cor. 13 minimised over continuous orders, or the KL/TV bound.

    Never below the continuous-order infimum of the CKS bound except where the KL/TV bound gives
    eps = 0 (which is then valid and better).
    """
    rho = check_nonnegative("rho", rho)
    delta = check_delta(delta)
    if rho == 0:
        return Conversion(0.0, delta, "zero", None)
    if delta >= kl_tv_delta(rho):
        return Conversion(0.0, delta, "kl-tv", 1.0)

    def f(x: np.ndarray) -> np.ndarray:
        a = 1.0 + np.exp(x)
        return np.asarray(cks_epsilon(a, a * rho, delta))

    x, eps = _minimise_over_orders(f)
    return Conversion(max(0.0, eps), delta, "cks-continuous", 1.0 + math.exp(x))


def zcdp_delta(rho: float, epsilon: float) -> Conversion:
    """The smallest delta with (eps, delta)-DP implied by rho-zCDP (CKS 2020 Cor. 13, continuous orders)."""
    rho = check_nonnegative("rho", rho)
    epsilon = check_nonnegative("epsilon", epsilon)
    if rho == 0:
        return Conversion(epsilon, 0.0, "zero", None)

    def g(x: np.ndarray) -> np.ndarray:
        a = 1.0 + np.exp(x)
        return np.asarray((a - 1) * (a * rho - epsilon) - np.log(a) + (a - 1) * np.log1p(-1 / a))

    x, log_d = _minimise_over_orders(g)
    d = min(math.exp(min(log_d, 0.0)), kl_tv_delta(rho))
    method = "kl-tv" if d == kl_tv_delta(rho) and d < math.exp(min(log_d, 0.0)) else "cks-continuous"
    return Conversion(epsilon, d, method, 1.0 + math.exp(x))


def rdp_to_approx(alpha: float, tau: float, delta: float) -> Conversion:
    """(alpha, tau)-RDP at one order -> (eps, delta) by CKS 2020 Prop. 12 (and the KL/TV bound)."""
    alpha = check_order(alpha)
    tau = check_nonnegative("RDP epsilon", tau)
    delta = check_delta(delta)
    if tau == 0:
        return Conversion(0.0, delta, "zero", alpha)
    if delta >= kl_tv_delta(tau):
        return Conversion(0.0, delta, "kl-tv", alpha)
    return Conversion(max(0.0, float(cks_epsilon(alpha, tau, delta))), delta, "cks", alpha)


def rdp_curve_to_approx(
    curve: Callable[[float], float], delta: float, orders: tuple[float, ...] | None = None
) -> Conversion:
    """An RDP curve -> (eps, delta): CKS over the tabulated ``orders`` or, without them, over continuous orders.

    For a table, the curve is the step function of :class:`~dpaudit.accountants.RDP`: for fixed tau
    the CKS epsilon decreases in alpha up to alpha = 1/delta (its derivative is
    (log delta + log alpha)/(alpha - 1)^2), so the candidates are the table's orders and 1/delta.
    For a callable the minimisation is the same as for zCDP (grid then Brent); a non-convex curve
    may hide a better order, but the answer is always valid since it is the bound at the order found.
    """
    delta = check_delta(delta)
    if orders:
        cands = sorted(set(orders) | {1 / delta} if 1 / delta < max(orders) else set(orders))
        taus = [curve(a) for a in cands]
        eps_at = [float(cks_epsilon(a, t, delta)) if math.isfinite(t) else math.inf for a, t in zip(cands, taus)]
        i = int(np.argmin(eps_at))
        best = Conversion(max(0.0, eps_at[i]), delta, "cks-orders", cands[i])
        tmin = min(taus)
        if math.isfinite(tmin) and delta >= kl_tv_delta(tmin):
            return Conversion(0.0, delta, "kl-tv", cands[int(np.argmin(taus))])
        return best

    def tau_of(a: np.ndarray) -> np.ndarray:
        return np.array([float(curve(float(v))) for v in a])

    def f(x: np.ndarray) -> np.ndarray:
        a = 1.0 + np.exp(x)
        return np.asarray(cks_epsilon(a, tau_of(a), delta))

    x, eps = _minimise_over_orders(f)
    alpha = 1.0 + math.exp(x)
    tau_small = float(curve(1.0 + math.exp(_X_LO)))
    if math.isfinite(tau_small) and delta >= kl_tv_delta(tau_small):
        return Conversion(0.0, delta, "kl-tv", 1.0 + math.exp(_X_LO))
    if not math.isfinite(eps):
        return Conversion(math.inf, delta, "cks-continuous", None)
    return Conversion(max(0.0, eps), delta, "cks-continuous", alpha)


def pure_to_approx(epsilon: float, delta: float) -> Conversion:
    """eps-DP -> (eps', delta), tight: randomized response's profile delta(eps') = (e^eps - e^eps')/(1 + e^eps)."""
    epsilon = check_nonnegative("epsilon", epsilon)
    delta = check_delta(delta)
    # e^eps' = e^eps (1 - delta) - delta, in log space.
    inner = math.log1p(-delta) + epsilon
    if inner <= math.log(delta) or math.log(delta) - inner >= 0:
        return Conversion(0.0, delta, "pure-rr-profile", None)
    eps2 = inner + math.log1p(-math.exp(math.log(delta) - inner))
    return Conversion(min(epsilon, max(0.0, eps2)), delta, "pure-rr-profile", None)


def approx_to_approx(epsilon: float, delta0: float, delta: float) -> Conversion:
    """(eps0, delta0)-DP -> (eps', delta) for delta >= delta0 (Kairouz et al. 2015's dominating mechanism).

    Profile: delta(eps') = delta0 + (1 - delta0)(e^eps0 - e^eps')/(1 + e^eps0). Below delta0 the
    claim promises nothing and eps' = inf.
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    delta0 = check_delta(delta0, "delta0", allow_zero=True)
    delta = check_delta(delta)
    if delta < delta0:
        return Conversion(math.inf, delta, "below-claimed-delta", None)
    if delta0 == 0:
        return pure_to_approx(epsilon, delta)
    extra = (delta - delta0) / (1 - delta0)
    val = math.exp(epsilon) - extra * (1 + math.exp(epsilon)) if epsilon < 700 else math.inf
    eps2 = epsilon if math.isinf(val) else (math.log(val) if val > 1 else 0.0)
    return Conversion(min(epsilon, eps2), delta, "approx-dominating-profile", None)


def pure_to_zcdp(epsilon: float) -> float:
    """eps-DP => (eps^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    return check_nonnegative("epsilon", epsilon) ** 2 / 2


def zcdp_rho_for_epsilon(epsilon: float, delta: float) -> float:
    """Inverse calibration: the largest rho whose continuous-order conversion gives ``epsilon`` at ``delta``.

    The converted epsilon is increasing in rho; solved by Brent's method on log rho, then nudged
    down until the conversion is within the target (never above it).
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)

    def h(log_rho: float) -> float:
        return zcdp_to_approx(math.exp(log_rho), delta).epsilon - epsilon

    lo, hi = math.log(1e-12), math.log(max(epsilon, 1.0))
    while h(lo) > 0:
        lo -= 10
        if lo < -200:
            raise DPAuditError(f"no rho > 0 reaches epsilon = {epsilon!r} at delta = {delta!r}.")
    while h(hi) < 0:
        hi += 2
    log_rho = _optimize().brentq(h, lo, hi, xtol=1e-14, rtol=1e-13)
    rho = math.exp(log_rho)
    # step down until the converted epsilon is within the target (brentq may land a hair above)
    while zcdp_to_approx(rho, delta).epsilon > epsilon:
        rho *= 1 - 1e-12
    return rho
