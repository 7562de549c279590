"""The Gaussian (and single Laplace) mechanism's exact privacy profile, inverse calibration, and lints.

Exact profile (Balle & Wang 2018, "Improving the Gaussian mechanism", Thm 8): for noise N(0, s^2)
on a statistic of L2-sensitivity D, with mu = D / s,

    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu).

n Gaussian releases with multipliers mu_i compose exactly into one Gaussian with
mu = sqrt(sum mu_i^2) (the privacy loss of each is N(mu_i^2/2, mu_i^2), and sums of independent
Gaussians are Gaussian; Dong, Roth & Su 2019, Cor. 3.3), so n releases with the same sigma are one
release with sigma / sqrt(n).

dp-accounting's ``gaussian_mechanism.get_epsilon_gaussian`` evaluates the same profile; it is written
here by hand to take mu (so heterogeneous compositions need no PLD), to return its own inverse in
mu, and to validate with :class:`DPAuditError`. Everything is in log space
(``scipy.special.log_ndtr``), and the inverse problems are solved with Brent's method to a relative
tolerance of 1e-14 inside a bracket whose upper end is the (valid) CKS zCDP conversion.

Single Laplace release with eps0 = D / b (Laplace scale b, L1-sensitivity D):
delta(eps) = 1 - exp((eps - eps0)/2) for 0 <= eps <= eps0 (the privacy loss is eps0 with probability
1/2 under P and otherwise is at most eps0 in a way that integrates to this closed form).
"""

from __future__ import annotations

import importlib
import math
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from .conversions import Conversion, zcdp_to_approx
from dpaudit import deprecations
from dpaudit.errors import DPAuditError, check_delta, check_int, check_nonnegative, check_positive

__all__ = [
    "gaussian_mu",
    "gaussian_log_delta",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu_for",
    "gaussian_sigma",
    "laplace_delta",
    "laplace_epsilon",
    "laplace_renyi",
    "classical_gaussian_sigma",
    "CalibrationLint",
    "lint_classical_gaussian",
    "lint_gaussian_channel",
]


def _optimize() -> ModuleType:
    """scipy.optimize, imported on first use (it costs ~0.3 s, which `import dpaudit` should not pay)."""
    return importlib.import_module("scipy.optimize")



def gaussian_mu(sigma: float, sensitivity: float = 1.0, compositions: int = 1) -> float:
    """mu of n Gaussian releases with the same sigma and sensitivity: D sqrt(n) / sigma."""
    sigma = check_positive("sigma", sigma)
    sensitivity = check_nonnegative("sensitivity", sensitivity)
    n = check_int("compositions", compositions, minimum=1)
    return sensitivity * math.sqrt(n) / sigma


def gaussian_log_delta(epsilon: float, mu: float) -> float:
    """log delta(eps) of a Gaussian with multiplier mu (Balle & Wang 2018, Thm 8), in log space."""
    if mu == 0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    la = float(special.log_ndtr(mu / 2 - epsilon / mu))
    lb = epsilon + float(special.log_ndtr(-mu / 2 - epsilon / mu))
    if lb >= la:  # only from rounding when the two terms agree to machine precision
        return -math.inf
    return la + math.log1p(-math.exp(lb - la))


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0, compositions: int = 1) -> float:
    """Exact delta(eps) of n Gaussian releases (Balle & Wang 2018, Thm 8)."""
    epsilon = check_nonnegative("epsilon", epsilon)
    return math.exp(gaussian_log_delta(epsilon, gaussian_mu(sigma, sensitivity, compositions)))


def _epsilon_for_mu(mu: float, delta: float) -> float:
    if mu == 0:
        return 0.0
    log_d = math.log(delta)
    if gaussian_log_delta(0.0, mu) <= log_d:
        return 0.0
    hi = max(zcdp_to_approx(mu * mu / 2, delta).epsilon, 1e-300)
    while gaussian_log_delta(hi, mu) > log_d:  # cannot happen for a valid upper bound; guard anyway
        hi *= 2
    return float(_optimize().brentq(lambda e: gaussian_log_delta(e, mu) - log_d, 0.0, hi, xtol=1e-300, rtol=1e-14,
                                    maxiter=500))


def gaussian_epsilon(delta: float, sigma: float | None = None, sensitivity: float = 1.0,
                     compositions: int = 1, *, mu: float | None = None) -> Conversion:
    """Exact eps(delta) of n Gaussian releases (or of a given multiplier ``mu``)."""
    delta = check_delta(delta)
    if mu is None:
        if sigma is None:
            raise DPAuditError("give either sigma or mu for the Gaussian mechanism, got neither.")
        mu = gaussian_mu(sigma, sensitivity, compositions)
    else:
        mu = check_nonnegative("mu", mu)
    return Conversion(_epsilon_for_mu(mu, delta), delta, "gaussian-exact", None)


def gaussian_mu_for(epsilon: float, delta: float) -> float:
    """The largest multiplier mu = D/sigma whose exact profile gives (eps, delta)-DP."""
    epsilon = check_nonnegative("epsilon", epsilon)
    delta = check_delta(delta)
    log_d = math.log(delta)

    def h(log_mu: float) -> float:
        return gaussian_log_delta(epsilon, math.exp(log_mu)) - log_d

    lo, hi = -1.0, 1.0
    while h(lo) > 0:
        lo -= 2
        if lo < -700:
            raise DPAuditError(f"no noise level gives ({epsilon!r}, {delta!r})-DP.")
    while h(hi) < 0:
        hi += 2
        if hi > 700:
            return math.inf
    log_mu = _optimize().brentq(h, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)
    mu = math.exp(log_mu)
    while gaussian_log_delta(epsilon, mu) > log_d:  # make sure we are on the valid side
        mu *= 1 - 1e-14
    return mu


def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0, compositions: int = 1) -> float:
    """Inverse calibration: the smallest sigma with (eps, delta)-DP for n releases (exact profile)."""
    epsilon = check_positive("epsilon", epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    n = check_int("compositions", compositions, minimum=1)
    return sensitivity * math.sqrt(n) / gaussian_mu_for(epsilon, delta)


# ---- Laplace --------------------------------------------------------------------------------------

def laplace_delta(epsilon: float, eps0: float) -> float:
    """Exact delta(eps) of one Laplace release with eps0 = D/b: 1 - exp((eps - eps0)/2), 0 above eps0."""
    epsilon = check_nonnegative("epsilon", epsilon)
    eps0 = check_nonnegative("eps0", eps0)
    return 0.0 if epsilon >= eps0 else -math.expm1((epsilon - eps0) / 2)


def laplace_epsilon(delta: float, eps0: float) -> Conversion:
    """Exact eps(delta) of one Laplace release: max(0, eps0 + 2 log(1 - delta))."""
    delta = check_delta(delta)
    eps0 = check_nonnegative("eps0", eps0)
    return Conversion(max(0.0, eps0 + 2 * math.log1p(-delta)), delta, "laplace-exact", None)


def laplace_renyi(alpha: float | np.ndarray, eps0: float | np.ndarray) -> np.ndarray | float:
    """D_alpha(Lap(0, b) || Lap(D, b)) with eps0 = D/b (Mironov 2017, Prop. 6), vectorised, log space.

    (1/(a-1)) log[ a/(2a-1) e^{(a-1) eps0} + (a-1)/(2a-1) e^{-a eps0} ]; eps0 at alpha = inf.
    Duplicated from dpaudit.mechanisms.laplace_renyi (scalar) because the accountants import nothing
    from dpaudit's core.
    """
    a = np.asarray(alpha, dtype=float)
    e = np.asarray(eps0, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        la = np.log(a / (2 * a - 1)) + (a - 1) * e
        lb = np.log((a - 1) / (2 * a - 1)) - a * e
        out = np.logaddexp(la, lb) / (a - 1)
    out = np.where(np.isinf(a), e, out)
    out = np.where(e == 0, 0.0, out)
    return float(out) if out.ndim == 0 else out


# ---- calibration lint -----------------------------------------------------------------------------

def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """sigma = D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth 2014, Thm A.1; its proof needs eps < 1)."""
    epsilon = check_positive("epsilon", epsilon)
    delta = check_delta(delta)
    sensitivity = check_positive("sensitivity", sensitivity)
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


@dataclass(frozen=True)
class CalibrationLint:
    """The outcome of checking a closed-form Gaussian calibration against the exact profile."""

    rule: str
    epsilon: float
    delta: float
    sigma: float  # the noise multiplier the rule sets (sigma / sensitivity)
    flagged: bool  # outside the parameter range the rule's proof covers
    exact_delta: float  # the delta that sigma actually achieves at epsilon
    exact_epsilon: float  # the epsilon that sigma actually achieves at delta
    exact_sigma: float  # the smallest multiplier that achieves (epsilon, delta)
    holds: bool  # exact_delta <= delta
    message: str

    def as_dict(self) -> dict[str, str | float | bool]:
        return asdict(self)


def _lint(rule: str, epsilon: float, delta: float, sigma: float, in_range: bool, range_text: str,
          names: tuple[str, str] = ("eps", "delta")) -> CalibrationLint:
    mu = 1.0 / sigma
    exact_delta = math.exp(gaussian_log_delta(epsilon, mu))
    exact_eps = _epsilon_for_mu(mu, delta)
    exact_sigma = 1.0 / gaussian_mu_for(epsilon, delta)
    holds = exact_delta <= delta
    e, d = names
    if in_range:
        msg = f"{rule}: within {range_text}; the exact {d} at {e} = {epsilon:g} is {exact_delta:.3g}."
    else:
        verdict = "still holds" if holds else "does NOT hold"
        msg = (f"{rule}: {e} = {epsilon:g} is outside {range_text}, which its proof covers; sigma/D = {sigma:.4g} "
               f"achieves {d} = {exact_delta:.3g} at {e} = {epsilon:g} (target {delta:g}): the guarantee {verdict}; "
               f"the exact calibration needs sigma/D = {exact_sigma:.4g}.")
    return CalibrationLint(rule, epsilon, delta, sigma, not in_range, exact_delta, exact_eps, exact_sigma, holds, msg)


def lint_classical_gaussian(epsilon: float, delta: float) -> CalibrationLint:
    """Flag the classical calibration sigma = D sqrt(2 ln(1.25/delta))/eps when eps >= 1, with its exact delta.

    Dwork & Roth's Thm A.1 proves it for eps in (0, 1) only; the experiments of Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for
    Generalized Linear Contextual Bandits", use eps in {2, 4, 6, 8}.
    """
    sigma = classical_gaussian_sigma(epsilon, delta)
    return _lint("classical Gaussian sigma = D sqrt(2 ln(1.25/delta))/eps", epsilon, delta, sigma,
                 epsilon < 1, "eps in (0, 1)")


def lint_gaussian_channel(alpha: float, beta: float) -> CalibrationLint:
    """Flag the Gaussian channel sigma_a = 2 sqrt(log(1.25/beta))/alpha when alpha >= 1, with its exact delta.

    The Gaussian channel of the interactive joint/local DP definitions (Def. "Gaussian channel";
    :mod:`dpaudit.papers`) releases N(F(z), sigma_a^2 Delta^2) with Delta >= the L2
    sensitivity (and Priv[Delta]{v} = N(v, 4 sigma_a^2 Delta^2) for ||F|| <= Delta, i.e. sensitivity
    2 Delta), so in both forms the noise multiplier sigma/sensitivity is sigma_a. The definitions
    state the regime alpha, beta in (0, 1).
    """
    alpha = check_positive("alpha", alpha)
    beta = check_delta(beta, "beta")
    sigma = 2 * math.sqrt(math.log(1.25 / beta)) / alpha
    return _lint("Gaussian channel sigma_a = 2 sqrt(log(1.25/beta))/alpha of the interactive joint/local DP "
                 "definitions", alpha, beta, sigma,
                 alpha < 1, "alpha in (0, 1)", ("alpha", "beta"))


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error there too

    def __getattr__(name: str) -> object:
        """An old name of :mod:`dpaudit.deprecations` (with its warning)."""
        return deprecations.attribute(__name__, name, globals())
