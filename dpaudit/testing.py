"""Hypothesis strategies and assertion helpers for checking privacy from any pytest suite.

Use them to test your own policy or mechanism against its claim::

    from hypothesis import given, settings
    from dpaudit.testing import assert_ledger_within_claim, assert_pair_within_claim, neighbouring_tables

    @settings(max_examples=20, deadline=None)
    @given(neighbouring_tables(horizon=20, arms=3))
    def test_my_policy(pair):
        d, d_prime, row = pair
        assert_pair_within_claim(MyPolicy(n_arms=3, rho=0.5), d, d_prime, confidence=1 - 0.05 / 20)
        assert_ledger_within_claim(MyPolicy(n_arms=3, rho=0.5), d)

Strategies: neighbouring reward tables (Table DP: one row differs), reward lists (View DP: one
entry differs) and context streams (Joint DP: round t's context and reward differ), privacy
parameters, and small finite policies (:class:`~dpaudit.policies.finite.FinitePolicy`).

Assertions (each raises ``AssertionError`` whose first line is one sentence with the numbers and what to
do next; an argument of the wrong kind is a :class:`~dpaudit.errors.DPAuditError` naming it):

* :func:`assert_renyi_bound` — a measured D_alpha (or two distributions) within a bound/guarantee;
* :func:`assert_mechanism_renyi` — a Gaussian or Laplace mechanism's D_alpha, computed by
  numerical integration of the two output densities, equals the analytic value
  (Gaussian alpha Delta^2/(2 sigma^2); Laplace by Mironov 2017, Prop. 6) and lies within
  the mechanism's declared guarantee;
* :func:`assert_pair_within_claim` — run a policy on both sides of a neighbouring pair and check that
  no lower bound on the pair's (eps, delta) (black-box on the actions, gray-box on the ledger, at a
  stated confidence; exact for small finite policies) exceeds its claim;
* :func:`assert_ledger_within_claim` — run a policy on an input and check that the per-round
  composition of its ledger stays within its claim at every order (and that there is a ledger to check);
* :func:`assert_finite_policy_renyi` — exact D_alpha of a finite policy (by enumeration,
  :mod:`dpaudit.attacks.exact`) within a guarantee.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence, overload

import numpy as np

try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - exercised in a subprocess by tests/test_api.py
    raise ImportError('dpaudit.testing needs hypothesis, which is not installed: pip install "dpaudit[testing]"') from None

# Imported here, not inside the assertions: a first import inside a hypothesis example would count
# against hypothesis's deadline (scipy.integrate and the attacks take up to seconds to import).
from scipy import integrate

from dpaudit.accountants import Guarantee
from dpaudit.accountants.composition import per_round_account
from dpaudit.accountants.guarantees import is_dp_event, as_guarantee
from dpaudit.accounting import ledger_entries
from dpaudit.adapters import parse_claim
from dpaudit.attacks.bounds import check_confidence, largest_bound, split_confidence
from dpaudit.attacks.exact import epsilon_for_delta, exact_profile, view_distribution
from dpaudit.attacks.exact import renyi_divergence as exact_renyi_divergence
from dpaudit.attacks.likelihood import likelihood_attack
from dpaudit.attacks.membership import evaluate, fit_select
from dpaudit.attacks.result import AuditResult
from dpaudit.attacks.sampling import LOOKS
from dpaudit.errors import DPAuditError, InternalError, check_delta, check_int, check_order, shorten
from dpaudit.mechanisms import gaussian_renyi, laplace_renyi
from dpaudit.policies.base import check_actions
from dpaudit.policies.finite import FinitePolicy
from dpaudit.protocols import FixedActionSet, Pair, Protocol, TableDP, ViewDP
from dpaudit.runner.setup import claimed_epsilon

if TYPE_CHECKING:
    from dpaudit.accountants.composition import RoundAccount
    from dpaudit.mechanisms import GaussianMechanism, LaplaceMechanism, Ledger
    from dpaudit.policies.base import PolicyLike

__all__ = [
    "deltas",
    "rhos",
    "orders",
    "sigmas",
    "privacy_params",
    "neighbouring_tables",
    "neighbouring_lists",
    "neighbouring_context_streams",
    "finite_policies",
    "renyi_divergence",
    "renyi_divergence_1d",
    "assert_renyi_bound",
    "assert_mechanism_renyi",
    "assert_ledger_within_claim",
    "assert_pair_within_claim",
    "PairCheck",
    "assert_finite_policy_renyi",
    "run_on_table",
]


# ---- strategies: privacy parameters ---------------------------------------------------------------

def _bounds(name: str, lo: float, hi: float, *, above: float, below: float = math.inf,
            what: str) -> tuple[float, float]:
    """Check a strategy's bounds: ``above < lo <= hi < below`` (finite), in one sentence."""
    for label, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v):
            raise DPAuditError(f"{name}({label}={v!r}): the bounds must be finite numbers.")
    lo, hi = float(lo), float(hi)
    if not (above < lo <= hi < below):
        rng = f"({above:g}, {below:g})" if math.isfinite(below) else f"({above:g}, inf)"
        raise DPAuditError(f"{name}(lo={lo:g}, hi={hi:g}): {what} needs {rng} to contain lo <= hi.")
    return lo, hi


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(math.log(lo), math.log(hi), allow_nan=False, allow_infinity=False).map(
        lambda x: min(max(math.exp(x), lo), hi))  # exp(log(x)) can round just outside [lo, hi]


def deltas(lo: float = 1e-12, hi: float = 0.1) -> st.SearchStrategy[float]:
    """delta, log-uniform in [lo, hi] (default [1e-12, 0.1]); 0 < lo <= hi < 1."""
    return _log_uniform(*_bounds("deltas", lo, hi, above=0.0, below=1.0, what="delta"))


def rhos(lo: float = 1e-4, hi: float = 1e3) -> st.SearchStrategy[float]:
    """zCDP rho, log-uniform in [lo, hi] (default [1e-4, 1e3]); 0 < lo <= hi."""
    return _log_uniform(*_bounds("rhos", lo, hi, above=0.0, what="rho"))


def orders(lo: float = 1.01, hi: float = 1e3) -> st.SearchStrategy[float]:
    """Rényi orders alpha > 1, with alpha - 1 log-uniform; 1 < lo <= hi."""
    lo, hi = _bounds("orders", lo, hi, above=1.0, what="a Rényi order")
    return _log_uniform(lo - 1, hi - 1).map(lambda x: min(max(1 + x, lo), hi))


def sigmas(lo: float = 0.05, hi: float = 100.0) -> st.SearchStrategy[float]:
    """Gaussian noise standard deviations, log-uniform; 0 < lo <= hi."""
    return _log_uniform(*_bounds("sigmas", lo, hi, above=0.0, what="a standard deviation"))


def _size(name: str, label: str, value: int | tuple[int, int], minimum: int) -> tuple[int, int]:
    """An int or an (lo, hi) range of ints, each >= minimum and lo <= hi."""
    pair = (value, value) if not isinstance(value, (tuple, list)) else tuple(value)
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in pair) \
            or not (minimum <= pair[0] <= pair[1]):
        raise DPAuditError(f"{name}({label}={value!r}): give an integer >= {minimum} or a range (lo, hi) of them "
                           "with lo <= hi.")
    return int(pair[0]), int(pair[1])


@overload
def _alphabet(name: str, alphabet: Sequence[float]) -> list[float]: ...
@overload
def _alphabet(name: str, alphabet: Sequence[float] | None) -> list[float] | None: ...
def _alphabet(name: str, alphabet: Sequence[float] | None) -> list[float] | None:
    if alphabet is None:
        return None
    try:
        values = [float(v) for v in alphabet]
    except (TypeError, ValueError):
        raise DPAuditError(f"{name}(alphabet={alphabet!r}): the alphabet must be a list of numbers.") from None
    if len(set(values)) < 2 or not all(math.isfinite(v) for v in values):
        raise DPAuditError(f"{name}(alphabet={alphabet!r}): give at least 2 distinct finite rewards, so that "
                           "neighbours can differ.")
    return values


@st.composite
def privacy_params(draw: st.DrawFn) -> dict[str, float]:
    """A dict with ``rho``, ``delta``, ``alpha``, ``epsilon`` and ``sigma`` drawn independently."""
    return {"rho": draw(rhos()), "delta": draw(deltas()), "alpha": draw(orders()),
            "epsilon": draw(_log_uniform(1e-3, 50.0)), "sigma": draw(sigmas())}


# ---- strategies: neighbouring inputs ---------------------------------------------------------------

@st.composite
def neighbouring_tables(draw: st.DrawFn, horizon: int | tuple[int, int] = (1, 12), arms: int | tuple[int, int] = (2, 4),
                        alphabet: Sequence[float] | None = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray, int]:
    """(d, d', t): two T x K reward tables that differ exactly in row t (Table DP, Azize & Basu 2023a, Def. 3).

    The definition is that of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits".

    Rewards come from ``alphabet`` or, with ``alphabet=None``, are floats in [0, 1].
    """
    T = draw(st.integers(*_size("neighbouring_tables", "horizon", horizon, 1)))
    K = draw(st.integers(*_size("neighbouring_tables", "arms", arms, 2)))
    alphabet = _alphabet("neighbouring_tables", alphabet)
    cell = st.sampled_from(alphabet) if alphabet is not None else st.floats(0.0, 1.0)
    d = np.array(draw(st.lists(st.lists(cell, min_size=K, max_size=K), min_size=T, max_size=T)), dtype=float)
    t = draw(st.integers(0, T - 1))
    row = draw(st.lists(cell, min_size=K, max_size=K).filter(lambda r: not np.array_equal(r, d[t])))
    d2 = d.copy()
    d2[t] = row
    return d, d2, t


@st.composite
def neighbouring_lists(draw: st.DrawFn, horizon: int | tuple[int, int] = (1, 12),
                       alphabet: Sequence[float] | None = (0.0, 1.0)) -> tuple[np.ndarray, np.ndarray, int]:
    """(r, r', t): two reward lists that differ exactly in entry t (View DP, Azize & Basu 2023a, Def. 3)."""
    T = draw(st.integers(*_size("neighbouring_lists", "horizon", horizon, 1)))
    alphabet = _alphabet("neighbouring_lists", alphabet)
    cell = st.sampled_from(alphabet) if alphabet is not None else st.floats(0.0, 1.0)
    r = np.array(draw(st.lists(cell, min_size=T, max_size=T)), dtype=float)
    t = draw(st.integers(0, T - 1))
    v = draw(cell.filter(lambda x: x != r[t]))
    r2 = r.copy()
    r2[t] = v
    return r, r2, t


@st.composite
def neighbouring_context_streams(draw: st.DrawFn, horizon: int | tuple[int, int] = (1, 10), dim: int = 2,
                                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """Two streams {contexts (T, d) in the unit ball, rewards (T,) in [0, 1]} differing in round t (JDP)."""
    T = draw(st.integers(*_size("neighbouring_context_streams", "horizon", horizon, 1)))
    dim = _size("neighbouring_context_streams", "dim", dim, 1)[0]
    vec = st.lists(st.floats(-1.0, 1.0), min_size=dim, max_size=dim)

    def unit(v: list[float]) -> np.ndarray:
        a = np.array(v, dtype=float)
        n = np.linalg.norm(a)
        return a / n if n > 1 else a

    x = np.array([unit(draw(vec)) for _ in range(T)]).reshape(T, dim)
    r = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=T, max_size=T)), dtype=float)
    t = draw(st.integers(0, T - 1))
    x2, r2 = x.copy(), r.copy()
    x2[t] = unit(draw(vec))
    r2[t] = draw(st.floats(0.0, 1.0).filter(lambda v: v != r[t]))
    return {"contexts": x, "rewards": r}, {"contexts": x2, "rewards": r2}, t


@st.composite
def finite_policies(draw: st.DrawFn, horizon: int | tuple[int, int] = (1, 3), arms: int = 2,
                    rewards: Sequence[float] = (0.0, 1.0), grain: int = 8) -> FinitePolicy:
    """A small FinitePolicy with random decision rules (probabilities on a grid of 1/grain).

    Keep T * log(K R) small: the rules have (K R)^(t-1) rows at step t.
    """
    T = draw(st.integers(*_size("finite_policies", "horizon", horizon, 1)))
    K = _size("finite_policies", "arms", arms, 2)[0]
    grain = _size("finite_policies", "grain", grain, 1)[0]
    alphabet = _alphabet("finite_policies", rewards)
    R = len(alphabet)
    if T * math.log(K * R) > math.log(2e5):
        raise DPAuditError(f"finite_policies(horizon={horizon!r}, arms={K}, {R} rewards): the last step would have "
                           f"(K R)^(T-1) = {(K * R) ** (T - 1):,} rows; keep T log(K R) small.")
    rules = []
    for t in range(T):
        rows = []
        for _ in range((K * R) ** t):
            w = np.array(draw(st.lists(st.integers(0, grain), min_size=K, max_size=K)), dtype=float) + 1e-3
            rows.append((w / w.sum()).tolist())
        rules.append(rows)
    return FinitePolicy(rules, list(alphabet))


# ---- divergences -------------------------------------------------------------------------------

def _distribution(name: str, x: object) -> np.ndarray:
    """A probability vector, refused (one sentence) unless finite, >= 0 and summing to 1 (1e-9)."""
    try:
        a = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError):
        raise DPAuditError(f"{name} must be an array of probabilities, got {type(x).__name__}.") from None
    if a.size == 0:
        raise DPAuditError(f"{name} is empty; a distribution needs at least one outcome.")
    if not np.all(np.isfinite(a)):
        raise DPAuditError(f"{name} contains NaN or inf; probabilities must be finite.")
    if np.any(a < 0):
        raise DPAuditError(f"{name} contains the negative probability {a[a < 0][0]:g}.")
    total = float(a.sum())
    if abs(total - 1.0) > 1e-9:
        raise DPAuditError(f"{name} sums to {total:.12g}, not 1; pass a normalised distribution.")
    return a


def renyi_divergence(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_alpha(P || Q) of two discrete distributions, in log space (inf when P is not << Q).

    P and Q must be probability vectors of the same size (finite, >= 0, summing to 1 within 1e-9);
    anything else is refused with a :class:`DPAuditError` rather than given a meaningless number.
    """
    alpha = check_order(alpha)
    p = _distribution("P", p)
    q = _distribution("Q", q)
    if p.shape != q.shape:
        raise DPAuditError(f"P and Q have different sizes {p.size} and {q.size}.")
    support = p > 0
    if np.any(q[support] == 0):
        return math.inf
    if math.isinf(alpha):
        return float(np.max(np.log(p[support]) - np.log(q[support])))
    lp, lq = np.log(p[support]), np.log(q[support])
    m = np.max(alpha * lp + (1 - alpha) * lq)
    return float((m + math.log(np.sum(np.exp(alpha * lp + (1 - alpha) * lq - m)))) / (alpha - 1))


def renyi_divergence_1d(logpdf_p: Callable[[float], float], logpdf_q: Callable[[float], float], alpha: float,
                        lo: float, hi: float,
                        points: Sequence[float] = ()) -> float:
    """D_alpha(P || Q) of two densities on [lo, hi] by adaptive quadrature (scipy.integrate.quad)."""

    alpha = check_order(alpha)
    # scale by the integrand's largest value on a grid to avoid under/overflow
    grid = np.concatenate([np.linspace(lo, hi, 4001), np.asarray(points, dtype=float)])
    c = max(alpha * logpdf_p(float(x)) + (1 - alpha) * logpdf_q(float(x)) for x in grid)
    f = lambda x: math.exp(alpha * logpdf_p(x) + (1 - alpha) * logpdf_q(x) - c)  # noqa: E731
    val, _ = integrate.quad(f, lo, hi, points=list(points) or None, limit=400, epsabs=0, epsrel=1e-11)
    return float((c + math.log(val)) / (alpha - 1))


def _bound_of(bound: object, alpha: float) -> float:
    """D_alpha a bound checked by :func:`_check_bound` allows."""
    if is_dp_event(bound):  # a claim stated as a dp-accounting DpEvent
        bound = as_guarantee(bound)
    if isinstance(bound, Guarantee):
        return bound.renyi(alpha)
    if isinstance(bound, (int, float, np.integer, np.floating)):
        return float(bound)
    raise InternalError(f"a bound on D_alpha was used unchecked: {shorten(bound)}")


#: what to do when a measured Rényi divergence is above its bound (the end of the failure's sentence)
_RENYI_HINT = ("add noise (or correct its calibration) until the divergence is within the bound, or state the "
               "weaker guarantee that holds")


def assert_renyi_bound(measured: float | tuple[np.ndarray, np.ndarray], bound: float | Guarantee, alpha: float,
                       *, rtol: float = 1e-9, atol: float = 1e-12, what: str = "D_alpha",
                       hint: str = _RENYI_HINT) -> float:
    """Assert D_alpha <= bound (Rényi DP at order alpha: Mironov 2017, Def. 4); ``measured`` is a number or
    a pair (P, Q) of discrete distributions (then D_alpha(P || Q) is computed).

    ``bound`` is a number or a Guarantee / DpEvent (its ``renyi(alpha)``). Returns the measured divergence;
    fails with one sentence that ends in ``hint`` (what to do next).
    """
    fn = "assert_renyi_bound"
    alpha = check_order(alpha)
    rtol = _check_real(fn, "rtol", rtol, minimum=0.0)
    atol = _check_real(fn, "atol", atol, minimum=0.0)
    checked = _check_bound(fn, bound)
    if isinstance(measured, tuple):
        if len(measured) != 2:
            raise DPAuditError(f"{fn}: measured must be a number or a pair (P, Q) of distributions, got a tuple of "
                               f"{len(measured)}.")
        value = renyi_divergence(*measured, alpha)
    else:
        value = _check_real(fn, "measured", measured, allow_inf=True)
    b = _bound_of(checked, alpha)
    if not value <= b * (1 + rtol) + atol:
        of = f" of {bound.describe()}" if isinstance(bound, Guarantee) else ""
        raise AssertionError(f"{what} at order {alpha:g} is {value:.10g}, above the bound {b:.10g}{of}: {hint}.")
    return value


def assert_mechanism_renyi(mechanism: GaussianMechanism | LaplaceMechanism, alpha: float, *, centre: float = 0.0,
                           rtol: float = 1e-6) -> float:
    """Integrate D_alpha between a 1-d Gaussian or Laplace mechanism's outputs at neighbouring centres.

    The centres are ``centre`` and ``centre + sensitivity`` (the worst neighbours of a 1-d statistic).
    Asserts the numerical value equals the analytic one (Gaussian alpha D^2/(2 s^2), Laplace
    Mironov 2017 Prop. 6) to ``rtol`` and lies within ``mechanism.guarantee()`` (Rényi DP at order
    alpha of the two centres). Returns it.
    """
    fn = "assert_mechanism_renyi"
    alpha = check_order(alpha)
    kind = getattr(mechanism, "kind", None)
    if kind not in ("gaussian", "laplace") or not all(hasattr(mechanism, m) for m in ("scale", "sensitivity",
                                                                                         "guarantee")):
        raise DPAuditError(f"{fn}: mechanism must be a Gaussian or Laplace mechanism of dpaudit.mechanisms (e.g. "
                           f"GaussianMechanism(sensitivity=1.0, sigma=2.0)), got {shorten(mechanism)}.")
    centre = _check_real(fn, "centre", centre)
    rtol = _check_real(fn, "rtol", rtol, minimum=0.0)
    s = float(np.max(mechanism.scale))
    D = float(mechanism.sensitivity)
    a, b = centre, centre + D
    if math.isinf(alpha):
        return _assert_mechanism_dinf(mechanism, kind, s, D, a, b, rtol)
    if kind == "gaussian":
        z = math.log(s * math.sqrt(2 * math.pi))
        lp = lambda x: -0.5 * ((x - a) / s) ** 2 - z  # noqa: E731
        lq = lambda x: -0.5 * ((x - b) / s) ** 2 - z  # noqa: E731
        width = 40 * s + alpha * D * (1 + s * s)
        analytic = gaussian_renyi(alpha, s, D)
        pts = [a, b, a - (alpha - 1) * D]  # the tilted density peaks at alpha a + (1 - alpha) b
    else:
        z = math.log(2 * s)
        lp = lambda x: -abs(x - a) / s - z  # noqa: E731
        lq = lambda x: -abs(x - b) / s - z  # noqa: E731
        width = 60 * s + D
        analytic = laplace_renyi(alpha, s, D)
        pts = [a, b]
    lo, hi = min(a, b) - width, max(a, b) + width
    pts = [p for p in pts if lo < p < hi]
    numeric = renyi_divergence_1d(lp, lq, alpha, lo, hi, pts)
    if not math.isclose(numeric, analytic, rel_tol=rtol, abs_tol=1e-12):
        raise AssertionError(f"numerical D_{alpha:g} = {numeric:.12g} of the {kind} mechanism differs from the analytic "
                             f"{analytic:.12g} for scale {s:g} and sensitivity {D:g}: {_MECH_HINT}.")
    assert_renyi_bound(numeric, mechanism.guarantee(), alpha, rtol=max(rtol, 1e-9), what=f"{kind} mechanism D_alpha",
                       hint=_GUARANTEE_HINT)
    return numeric


_MECH_HINT = ("its scale or sensitivity is not what its densities use, or the integration range misses mass; "
              "compare the scale the mechanism samples with against its declared one")
_GUARANTEE_HINT = ("its guarantee() promises more than its noise gives; derive the guarantee from the scale and "
                   "the sensitivity (Gaussian: rho = Delta^2 / (2 sigma^2); Laplace: eps = Delta / b)")


def _assert_mechanism_dinf(mechanism: GaussianMechanism | LaplaceMechanism, kind: str, s: float, D: float, a: float,
                           b: float, rtol: float) -> float:
    """alpha = inf: D_inf = sup_x log p(x)/q(x), the largest log density ratio.

    Laplace: the ratio is (|x - b| - |x - a|)/s, largest (= D/s, i.e. eps exactly) for x <= min(a, b);
    it is evaluated on a grid through and beyond both centres and compared with the analytic D/s.
    Gaussian: the ratio is linear in x, so D_inf = inf (no pure-DP guarantee), which the guarantee's
    own D_inf (zCDP: inf) must allow.
    """

    if kind == "laplace":
        x = np.concatenate([np.linspace(min(a, b) - 60 * s, max(a, b) + 60 * s, 20001), [a, b]])
        numeric = float(np.max((np.abs(x - b) - np.abs(x - a)) / s))
        analytic = laplace_renyi(math.inf, s, D)
        if not math.isclose(numeric, analytic, rel_tol=rtol, abs_tol=1e-12):
            raise AssertionError(f"numerical D_inf = {numeric:.12g} of the laplace mechanism differs from the analytic "
                                 f"{analytic:.12g} for scale {s:g} and sensitivity {D:g}: {_MECH_HINT}.")
    else:
        numeric = math.inf
    assert_renyi_bound(numeric, mechanism.guarantee(), math.inf, rtol=max(rtol, 1e-9),
                       what=f"{kind} mechanism D_inf", hint=_GUARANTEE_HINT)
    return numeric


# ---- arguments: refused in one sentence that names them -------------------------------------------

def _check_real(fn: str, name: str, value: object, *, minimum: float = -math.inf, allow_inf: bool = False) -> float:
    """A real number (not a bool, not NaN; infinite only with ``allow_inf``) that is >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or math.isnan(value) \
            or (math.isinf(value) and not allow_inf) or value < minimum:
        need = "a real number" + (f" >= {minimum:g}" if minimum > -math.inf else "")
        raise DPAuditError(f"{fn}: {name} must be {need}, got {shorten(value)}.")
    return float(value)


def _check_flag(fn: str, name: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise DPAuditError(f"{fn}: {name} must be True or False, got {shorten(value)}.")
    return bool(value)


@overload
def _check_seed(fn: str, seed: object) -> int: ...
@overload
def _check_seed(fn: str, seed: object, *, sequence: bool) -> int | np.random.SeedSequence: ...
def _check_seed(fn: str, seed: object, *, sequence: bool = False) -> int | np.random.SeedSequence:
    """An integer >= 0 (or, with ``sequence``, a numpy SeedSequence): fixed, so that a failure replays."""
    if sequence and isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        also = " or a numpy SeedSequence" if sequence else ""
        raise DPAuditError(f"{fn}: seed must be an integer >= 0{also}, fixed so that a failure replays, got "
                           f"{shorten(seed)}.")
    return int(seed)


def _check_alphas(fn: str, alphas: object) -> list[float]:
    if isinstance(alphas, (str, bytes)) or not isinstance(alphas, (Sequence, np.ndarray)) or len(alphas) == 0:
        raise DPAuditError(f"{fn}: alphas must be a non-empty list of Rényi orders > 1, got {shorten(alphas)}.")
    return [check_order(a, "alphas") for a in alphas]


def _check_features(fn: str, features: object, K: int) -> np.ndarray | None:
    """None, or a linear policy's fixed action set: (K, d) or (n_runs, K, d) finite numbers."""
    if features is None:
        return None
    try:
        f = np.array(features, dtype=float)
    except (TypeError, ValueError):
        f = np.zeros(0)
    if f.ndim not in (2, 3) or f.shape[-2] != K or f.shape[-1] < 1 or not np.all(np.isfinite(f)):
        raise DPAuditError(f"{fn}: features must be the policy's fixed action set, an array of finite numbers of "
                           f"shape ({K}, d), got {shorten(features)}.")
    return f


def _check_bound(fn: str, bound: object) -> object:
    """A bound on D_alpha: a number >= 0 (inf allowed) as a float, a Guarantee, or a dp-accounting DpEvent
    (untyped, so the result is an object; :func:`_bound_of` reads it)."""
    if isinstance(bound, Guarantee) or is_dp_event(bound):
        return bound
    if isinstance(bound, bool) or not isinstance(bound, (int, float, np.integer, np.floating)) \
            or math.isnan(bound) or bound < 0:
        raise DPAuditError(f"{fn}: bound must be a number >= 0, a Guarantee from dpaudit.accountants (e.g. "
                           f"ZCDP(0.5)) or a dp-accounting DpEvent, got {shorten(bound)}.")
    return float(bound)


# ---- policies: the inputs a policy is run on ------------------------------------------------------

def _who(policy: object) -> str:
    return getattr(policy, "name", "") or type(policy).__name__


def _check_policy(policy: object, fn: str) -> int:
    """The policy's K, after checking it has the members the assertions call (one sentence otherwise)."""
    if policy is None or isinstance(policy, (str, bytes)):
        raise DPAuditError(f"{fn}: policy must be a policy instance (with n_arms, reset, act and observe), got "
                           f"{shorten(policy)}; build it first, e.g. MyPolicy(rho=0.5) or "
                           "dpaudit.policies.registry.make_policy('adac-ucb', {'n_arms': 3}).")
    if isinstance(policy, type):
        raise DPAuditError(f"{fn}: got the class {policy.__name__}, not a policy; pass an instance built with its "
                           f"parameters, e.g. {policy.__name__}(rho=0.5).")
    missing = [m for m in ("n_arms", "reset", "act", "observe") if not hasattr(policy, m)]
    if missing:
        raise DPAuditError(f"{fn}: {_who(policy)} lacks {', '.join(missing)}; a policy needs n_arms, reset, act and "
                           "observe (DESIGN.md, 'The plug-in contract').")
    K = getattr(policy, "n_arms")  # noqa: B009 (policy is any object here: its members were checked above)
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 2:
        raise DPAuditError(f"{fn}: {_who(policy)}.n_arms is {K!r}; a policy needs an integer number of arms K >= 2.")
    return int(K)


def _reward_bounds(policy: object, K: int, fn: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-arm (lo, hi) of the policy's ``reward_range`` ((0, 1) when it declares none, as the plug-in
    contract says); infinite ends allowed."""
    rr = getattr(policy, "reward_range", (0.0, 1.0))
    try:
        a = np.asarray(rr, dtype=float)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.shape not in ((2,), (K, 2)) or np.any(np.isnan(a)) or np.any(a[..., 0] >= a[..., 1]):
        raise DPAuditError(f"{fn}: {_who(policy)}.reward_range is {rr!r}; it must be (low, high) with low < high, "
                           "the rewards its sensitivity analysis assumes.")
    a = np.broadcast_to(a, (K, 2))
    return a[:, 0], a[:, 1]


def _check_input(policy: object, data: object, name: str, K: int, list_input: bool, fn: str) -> np.ndarray:
    """``data`` as the policy's input (a T x K table, or a list of T rewards under View DP), refused in one
    sentence unless its shape matches the policy's K (and horizon, if it has one), every value is finite
    and inside the policy's reward range (and alphabet, if it declares one)."""
    who = _who(policy)
    if data is None or isinstance(data, (str, bytes)):
        what = "a list of T rewards" if list_input else f"a T x {K} table of rewards"
        raise DPAuditError(f"{fn}: {name} must be {what}, got {shorten(data)}.")
    try:
        d = np.array(data, dtype=float)
    except (TypeError, ValueError):
        raise DPAuditError(f"{fn}: {name} must be an array of rewards, got {type(data).__name__}.") from None
    if list_input:
        if d.ndim != 1 or d.size < 1:
            raise DPAuditError(f"{fn}: {name} must be a list of T >= 1 rewards (View DP), got shape {d.shape}.")
    elif d.ndim != 2 or d.shape[0] < 1:
        raise DPAuditError(f"{fn}: {name} must be a T x K reward table (T >= 1), got shape {d.shape}.")
    elif d.shape[1] != K:
        raise DPAuditError(f"{fn}: {name} has {d.shape[1]} columns (arms) but {who} has n_arms = {K}; build the "
                           f"policy with n_arms={d.shape[1]} or draw tables with arms={K}.")
    T = d.shape[0]

    def where(i: int) -> str:
        return f"entry {i}" if list_input else f"row {i // K}, arm {i % K}"

    bad = np.flatnonzero(~np.isfinite(d.ravel()))
    if bad.size:
        raise DPAuditError(f"{fn}: {name} holds {d.ravel()[bad[0]]} at {where(int(bad[0]))}; rewards must be finite "
                           "numbers.")
    lo, hi = _reward_bounds(policy, K, fn)
    if list_input:
        lo, hi = np.full(T, lo.max()), np.full(T, hi.min())
        flat_lo, flat_hi = lo, hi
    else:
        flat_lo, flat_hi = np.tile(lo, T), np.tile(hi, T)
    out = np.flatnonzero((d.ravel() < flat_lo) | (d.ravel() > flat_hi))
    if out.size:
        i = int(out[0])
        raise DPAuditError(f"{fn}: {name} holds the reward {d.ravel()[i]:g} at {where(i)}, outside "
                           f"[{flat_lo[i]:g}, {flat_hi[i]:g}], the reward_range {who}'s sensitivity assumes; draw "
                           "rewards inside it (e.g. neighbouring_tables(alphabet=...)) or declare the range the policy "
                           "is calibrated for.")
    alphabet = getattr(policy, "reward_alphabet", None)
    if alphabet is not None:
        letters = np.asarray(sorted({float(v) for v in alphabet}), dtype=float)
        foreign = np.flatnonzero(~np.isin(d.ravel(), letters))
        if foreign.size:
            i = int(foreign[0])
            raise DPAuditError(f"{fn}: {name} holds the reward {d.ravel()[i]:g} at {where(i)}, which is not in "
                               f"{who}'s reward_alphabet {letters.tolist()}; draw rewards from it "
                               f"(neighbouring_tables(alphabet={letters.tolist()})).")
    h = getattr(policy, "horizon", None)
    if isinstance(h, (int, np.integer)) and not isinstance(h, bool) and T > h:
        raise DPAuditError(f"{fn}: {name} has T = {T} rounds but {who} was built for horizon = {int(h)}; build it "
                           f"with horizon={T} or draw inputs with horizon <= {int(h)}.")
    return d


def _play(policy: PolicyLike, table: np.ndarray, n_runs: int, seed: int, features: np.ndarray | None,
          list_input: bool = False) -> np.ndarray:
    """Run ``policy`` on ``table`` (n_runs runs from ``seed``); its actions (n_runs, T), each checked."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    policy.reset(n_runs, rng)
    K, who = int(policy.n_arms), _who(policy)
    if features is not None and np.ndim(features) == 2:  # one fixed action set (K, d), as the pair assertion takes
        features = np.broadcast_to(np.asarray(features, dtype=float), (n_runs,) + np.shape(features))
    elif features is not None and np.shape(features)[0] != n_runs:
        raise DPAuditError(f"features has shape {np.shape(features)}: one action set per run needs {n_runs} of them "
                           "(n_runs), or give one fixed set of shape (K, d).")
    views = np.empty((n_runs, table.shape[0]), dtype=np.int64)
    for t in range(table.shape[0]):
        actions = check_actions(policy.act(t, features), n_runs, K, who, t)
        views[:, t] = actions
        policy.observe(t, actions, np.full(n_runs, table[t]) if list_input else table[t, actions])
    return views


def run_on_table(policy: PolicyLike, table: np.ndarray, n_runs: int = 4, seed: int = 0,
                 features: np.ndarray | None = None) -> Ledger | None:
    """Run ``policy`` on a fixed T x K reward table (Table DP: it observes table[t, a_t]); return its ledger.

    The table is checked against the policy first (its K columns, finite rewards inside the policy's
    ``reward_range``, default (0, 1), and its ``horizon`` if it has one), and every action it returns
    must be an arm 0..K-1: anything else is refused in one sentence (:class:`DPAuditError`).
    """
    K = _check_policy(policy, "run_on_table")
    d = _check_input(policy, table, "the table", K, False, "run_on_table")
    n_runs = check_int("n_runs", n_runs, minimum=1)
    _play(policy, d, n_runs, _check_seed("run_on_table", seed), _check_features("run_on_table", features, K))
    return getattr(policy, "ledger", None)


def _probe_tables(d: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Tables to rerun a policy on with the same seed: all low, all high, each arm alone high, each arm
    alone low (the policy's reward range; [0, 1] where it is unbounded)."""
    T, K = d.shape
    lo = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi - 1.0, 0.0))
    hi = np.where(np.isfinite(hi), hi, lo + 1.0)
    out = [("the all-low table", np.broadcast_to(lo, (T, K)).copy()),
           ("the all-high table", np.broadcast_to(hi, (T, K)).copy())]
    for a in range(K):
        up, down = lo.copy(), hi.copy()
        up[a], down[a] = hi[a], lo[a]
        out += [(f"the table with only arm {a} high", np.broadcast_to(up, (T, K)).copy()),
                (f"the table with only arm {a} low", np.broadcast_to(down, (T, K)).copy())]
    return out


def _actions_change(policy: PolicyLike, d: np.ndarray, n_runs: int, seed: int,
                    features: np.ndarray | None) -> str | None:
    """Where the policy's actions on ``d`` change when only the rewards do (same seed, so the same
    random draws for a policy whose draws do not depend on the rewards), in words; None if they never do."""
    K = int(policy.n_arms)
    base = _play(policy, d, n_runs, seed, features)
    lo, hi = _reward_bounds(policy, K, "assert_ledger_within_claim")
    for label, other in _probe_tables(d, lo, hi):
        try:
            v = _play(policy, other, n_runs, seed, features)
        except Exception:  # a policy that refuses a probe table (e.g. a reward alphabet) is probed on the others
            continue
        diff = np.argwhere(v != base)
        if diff.size:
            r, t = (int(x) for x in diff[np.argmin(diff[:, 1])])
            return (f"run {r} played arm {int(base[r, t])} at round {t} on the given table and arm {int(v[r, t])} "
                    f"on {label}")
    return None


def assert_ledger_within_claim(policy: PolicyLike, table: np.ndarray, *, n_runs: int = 4, seed: int = 0,
                               alphas: Sequence[float] = (1.5, 2.0, 5.0, 20.0, 100.0),
                               features: np.ndarray | None = None, rtol: float = 1e-9,
                               allow_no_releases: bool = False) -> RoundAccount:
    """Run ``policy`` on ``table`` and assert the ledger's worst round stays within ``policy.claim``.

    The ledger-implied D_alpha of a round is the composition of the releases it fed (exact Rényi
    curves of Gaussian and Laplace noise, sensitivity taken as the larger of the declared one and
    what the release's coefficients imply over the policy's reward range), checked at every order of
    ``alphas``: exact, no sampling, so no confidence level is involved. Returns the
    :class:`~dpaudit.accountants.composition.RoundAccount`.

    It trusts the ledger, and refuses (``AssertionError``, one sentence saying what to do) whenever
    the ledger cannot vouch for the policy: no ``ledger`` or no ``claim``; a disabled ledger; and no
    release recorded in the run. In the last case the policy is run again with the same seed on
    extreme tables (all rewards low, all high, one arm high or low): if its actions change, it uses
    its rewards outside ``dpaudit.mechanisms`` (its own noise, or none) and always fails;
    if they never change (a horizon before the first release, or a policy that never touches its
    rewards) it fails unless ``allow_no_releases=True``. Data used outside the mechanisms *beside*
    recorded releases is invisible here: :func:`assert_pair_within_claim` is the check that trusts
    nothing the policy says.

    ``table`` is checked against the policy first (K columns, finite rewards inside its
    ``reward_range``, its ``horizon`` if it has one): a mismatch is a :class:`DPAuditError`.
    ``features`` (a linear policy's arms) is one fixed action set ``(K, d)`` or ``(n_runs, K, d)``.
    """
    fn = "assert_ledger_within_claim"
    K = _check_policy(policy, fn)
    d = _check_input(policy, table, "the table", K, False, fn)
    n_runs = check_int("n_runs", n_runs, minimum=1)
    seed = _check_seed(fn, seed)
    alphas = _check_alphas(fn, alphas)
    features = _check_features(fn, features, K)
    rtol = _check_real(fn, "rtol", rtol, minimum=0.0)
    allow_no_releases = _check_flag(fn, "allow_no_releases", allow_no_releases)
    who = _who(policy)
    if not hasattr(policy, "ledger"):
        raise AssertionError(f"{who} has no `ledger`, so assert_ledger_within_claim has nothing to check: release "
                             "through dpaudit.mechanisms with a Ledger (see examples/plugin_template.py), or test it "
                             "black-box with assert_pair_within_claim(policy, d, d_prime).")
    claim = getattr(policy, "claim", None)
    if claim is None:
        raise AssertionError(f"{who} declares no `claim`, so there is nothing to check its ledger against: give it a "
                             "Guarantee from dpaudit.accountants (e.g. claim = ZCDP(rho)).")
    _play(policy, d, n_runs, seed, features)
    ledger = getattr(policy, "ledger", None)
    if ledger is None or not hasattr(ledger, "releases") or not hasattr(ledger, "n_runs"):
        raise AssertionError(f"{who}.ledger is {ledger!r} after reset and a run, not a dpaudit.mechanisms.Ledger; "
                             "create Ledger(n_runs) in reset() and pass it to every mechanism's release(ledger=...).")
    if getattr(ledger, "enabled", True) is False:
        raise AssertionError(f"{who}'s ledger is disabled (Ledger(..., enabled=False)), so it recorded nothing to "
                             "check; create it with enabled=True in reset().")
    lo, hi = _reward_bounds(policy, K, fn)
    span = float(np.max(hi - lo)) if np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) else None
    T = d.shape[0]
    e = ledger_entries(ledger, T, span)
    acc = per_round_account(ledger.n_runs, T, e["run"], e["rnd"], e["kind"], e["ratio"])
    if acc.usage.sum() == 0:
        change = _actions_change(policy, d, n_runs, seed, features)
        if change is not None:
            raise AssertionError(
                f"{who}'s ledger recorded no release in {T} rounds of {n_runs} runs, yet its actions depend on its "
                f"rewards ({change}, from the same seed): it uses them outside dpaudit.mechanisms, so the ledger "
                "vouches for nothing; release every use through dpaudit.mechanisms, or test it black-box with "
                "assert_pair_within_claim(policy, d, d_prime).")
        if not allow_no_releases:
            raise AssertionError(
                f"{who}'s ledger recorded no release in {T} rounds of {n_runs} runs, so there was nothing to check "
                "(its actions did not depend on the rewards either): draw longer tables (horizon past its first "
                "release), or pass allow_no_releases=True if it genuinely releases nothing this early.")
        return acc
    curves = acc.renyi(np.asarray(alphas, dtype=float))  # (runs, T, orders)
    worst = curves.reshape(-1, len(alphas)).max(axis=0)
    for i, (a, v) in enumerate(zip(alphas, worst)):
        r, t = divmod(int(np.argmax(curves[..., i])), T)
        n = int(acc.usage[r, t])
        assert_renyi_bound(float(v), claim, a, rtol=rtol,
                           what=f"{who}'s ledger-implied D_alpha (run {r}, round {t}, {n} releases)",
                           hint=f"check the noise scale and sensitivity of the release{'s' if n > 1 else ''} round {t} "
                                "fed" + (" (a round that feeds several releases needs forgetting or a split budget)"
                                         if n > 1 else "") + ", or declare the claim the ledger supports")
    return acc


# ---- policies: a neighbouring pair, attacked -----------------------------------------------------------

@dataclass(frozen=True)
class PairCheck:
    """What :func:`assert_pair_within_claim` measured on a pair it passed.

    ``epsilon_lower`` is the largest lower bound of the attacks that ran (0 when none could: see
    ``note``); each attack's :class:`~dpaudit.attacks.result.AuditResult` is in ``attacks`` and holds at
    its own confidence (``confidence`` split over them), so all hold together at ``confidence``.
    ``largest_detectable`` is the largest bound the black-box test can give at these sample sizes
    (None when it did not run): a claim at or above it could only be caught by the gray-box attack.
    For a finite policy small enough to enumerate, ``exact`` holds the pair's exact epsilon at delta
    (``"epsilon"``, also in ``epsilon_lower``) and D_alpha (``"D_<alpha>"``), and no attack runs.
    """

    epsilon_lower: float
    claim_epsilon: float
    delta: float
    confidence: float
    round: int
    attacks: tuple[AuditResult, ...]
    largest_detectable: float | None
    runs: int
    seconds: float
    note: str = ""
    exact: dict[str, float] | None = None


_PROTOCOLS = {"table": TableDP, "view": ViewDP}

#: a finite policy is enumerated exactly on a pair when it has at most this many views (K^T action sequences)
EXACT_MAX_VIEWS = 2**20

#: the Rényi orders the exact path compares with the claim's curve
EXACT_ORDERS = (1.5, 2.0, 5.0, 20.0, 100.0)

#: what to do when a pair shows a leak (the end of the failure's first sentence)
_PAIR_HINT = ("route every use of the rewards through dpaudit.mechanisms with noise calibrated to the claim (or "
              "declare the weaker claim that holds); `dpaudit check policy` writes a full report")


def _protocol_of(protocol: object, fn: str) -> Protocol:
    if isinstance(protocol, (TableDP, ViewDP)):
        return protocol
    if isinstance(protocol, str) and protocol in _PROTOCOLS:
        return _PROTOCOLS[protocol]()
    raise DPAuditError(f"{fn}: protocol must be 'table' (T x K reward tables, neighbours differ in one row) or "
                       f"'view' (lists of T rewards, neighbours differ in one entry), got {shorten(protocol)}.")


def _claim_at(policy: object, claim: object, delta: float, fn: str) -> tuple[Guarantee, float, float, str]:
    """(the claim as a Guarantee, its epsilon at delta, the delta compared at, the conversion in words)."""
    raw = claim if claim is not None else getattr(policy, "claim", None)
    if raw is None:
        raise DPAuditError(f"{fn}: {_who(policy)} declares no claim; pass claim= (a Guarantee such as ZCDP(0.5), a "
                           "dp-accounting DpEvent, or text such as 'zcdp:rho=0.5').")
    try:
        g = parse_claim(raw) if isinstance(raw, str) else as_guarantee(raw)
    except DPAuditError as exc:
        raise DPAuditError(f"{fn}: {exc}") from None
    own = getattr(g, "delta", None)
    if isinstance(own, (int, float)) and own > delta:  # an (eps, delta') claim promises nothing below delta'
        delta = float(own)
    eps, how = claimed_epsilon(g, delta)
    return g, float(eps), delta, how


def _differing(d0: np.ndarray, d1: np.ndarray, list_input: bool, fn: str) -> int:
    what, rel = ("entries", "View-DP neighbours differ in exactly one entry (one reward)") if list_input else \
        ("rows", "Table-DP neighbours differ in exactly one row (one user's rewards)")
    if d0.shape != d1.shape:
        raise DPAuditError(f"{fn}: d has shape {d0.shape} but d_prime has shape {d1.shape}; neighbours have the same "
                           "shape.")
    diff = np.flatnonzero(d0 != d1) if list_input else np.flatnonzero(np.any(d0 != d1, axis=1))
    if diff.size != 1:
        found = "no " + what if diff.size == 0 else f"{what} {', '.join(map(str, diff[:8].tolist()))}" + \
            (", ..." if diff.size > 8 else "")
        raise DPAuditError(f"{fn}: d and d_prime differ in {found}; {rel}: draw them with "
                           f"{'neighbouring_lists' if list_input else 'neighbouring_tables'}().")
    return int(diff[0])


def _fit_size(runs: int) -> int:
    """Views per side for the membership attack's training split, and again for its selection split."""
    return max(200, runs // 4)


def _largest_bound(runs: int, delta: float, confidence: float) -> float:
    """The largest bound the membership test can give from ``runs`` fresh runs per side when it counts them
    all (no error at all; the last look spends :data:`~dpaudit.attacks.sampling.LOOKS`' last share)."""
    return largest_bound(runs, delta, 1 - (1 - confidence) * LOOKS[-1][1])


def _runs_needed(eps: float, delta: float, confidence: float) -> int:
    n = 1000
    while _largest_bound(n, delta, confidence) <= eps and n < 10**9:
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _largest_bound(mid, delta, confidence) > eps else (mid, hi)
    return int(math.ceil(hi / 100.0) * 100)


def _row_text(d: np.ndarray, j: int) -> str:
    v = d[j]
    return f"{float(v):g}" if np.ndim(v) == 0 else "[" + ", ".join(f"{float(x):g}" for x in v) + "]"


def _attack_text(res: AuditResult) -> str:
    det = res.details
    if res.attack == "membership":
        how = (f"{det['n_fresh_per_side']:,} fresh runs per side: {det['false_positives']} false positives, "
               f"{det['false_negatives']} false negatives, rejecting when {res.witness['statistic']} "
               f"{res.witness['reject_when'].replace('score ', '').replace('threshold', format(res.witness['threshold'], 'g'))}")
        name = "the membership (black-box) attack"
    else:
        how = f"{res.samples:,} runs' exact privacy losses from the ledger, under {det.get('orientation', 'd')}"
        name = "the likelihood (gray-box) attack"
    return (f"{name} shows eps >= {res.epsilon_lower:.4g} at delta = {res.delta:g} with confidence "
            f"{res.confidence:.4g} ({how})")


def _exact_pair(policy: FinitePolicy, d0: np.ndarray, d1: np.ndarray, proto: str, g: Guarantee, claim_eps: float,
                delta: float, label: str, how: str, confidence: float, j: int, t0: float) -> PairCheck:
    """The pair's exact (eps, delta) and D_alpha from the two view distributions (both orders), against the claim."""
    P, Q = view_distribution(policy, d0, proto), view_distribution(policy, d1, proto)
    PQ = np.stack([P, Q])
    QP = np.stack([Q, P])
    eps = float(np.max(epsilon_for_delta(PQ, QP, delta)[0]))
    exact = {"epsilon": eps}
    over = []
    if eps > claim_eps * (1 + 1e-9) + 1e-12:
        over.append(f"eps = {eps:.6g} at delta = {delta:g}, above the eps = {claim_eps:.6g} its claim {g.describe()} "
                    f"allows ({how})")
    for a in EXACT_ORDERS:
        v = float(np.max(exact_renyi_divergence(PQ, QP, a)))
        exact[f"D_{a:g}"] = v
        if v > g.renyi(a) * (1 + 1e-9) + 1e-12:
            over.append(f"D_{a:g} = {v:.6g}, above the claim's {g.renyi(a):.6g}")
    if over:
        raise AssertionError(f"{_who(policy)} leaks more than its claim on this pair, by exact enumeration of its "
                             f"views: {'; '.join(over[:3])} (the pair differs in {label}): {_PAIR_HINT}.")
    return PairCheck(eps, claim_eps, delta, confidence, j, (), None, 0, time.perf_counter() - t0,
                     f"exact: the {P.size:,} views of the finite policy enumerated on both sides", exact)


def assert_pair_within_claim(policy: PolicyLike, d: np.ndarray, d_prime: np.ndarray, *,
                             claim: Guarantee | str | None = None,
                             delta: float = 1e-5, confidence: float = 0.95, runs: int = 5000,
                             seed: int | np.random.SeedSequence = 0, protocol: str | Protocol = "table",
                             features: np.ndarray | None = None, likelihood: bool = True) -> PairCheck:
    """Run ``policy`` on both sides of a neighbouring pair and assert the pair keeps the claim's (eps, delta)-DP:
    P[M(d) in S] <= e^eps P[M(d') in S] + delta for every event S, both ways round (Azize & Basu 2023a,
    Def. 3), with eps the claim's epsilon at ``delta``. It fails when a lower bound on the pair's eps, at
    ``confidence``, exceeds it (or a Rényi lower bound exceeds the claim's D_alpha).

    The pair is ``d, d_prime``: two T x K reward tables differing in exactly one row (Table DP,
    ``protocol="table"``), or two lists of T rewards differing in one entry (View DP, ``protocol="view"``),
    as :func:`neighbouring_tables` / :func:`neighbouring_lists` draw them. The claim is ``claim`` (a
    Guarantee, a dp-accounting DpEvent or text like ``'zcdp:rho=0.5'``) or the policy's own, converted to
    epsilon at ``delta`` by its own conversion (as ``dpaudit check`` does). How the pair is measured:

    * **exact**, for a :class:`~dpaudit.policies.finite.FinitePolicy` with at most
      :data:`EXACT_MAX_VIEWS` action sequences: both view distributions by enumeration
      (:func:`dpaudit.attacks.exact.view_distribution`), their exact eps at delta and D_alpha at
      :data:`EXACT_ORDERS`; no sampling, no confidence. Otherwise two attacks of the library:
    * **membership (black-box)**, M = the actions, whenever some action can depend on the differing row
      (it is not the last): :func:`dpaudit.attacks.membership.fit_select` fits its scores on
      ``max(200, runs // 4)`` views per side and chooses the test on as many more, then
      :func:`~dpaudit.attacks.membership.evaluate` counts it on ``runs`` fresh views per side (in looks,
      stopping early only once the count cannot exceed the claim) and turns the errors into a
      Clopper-Pearson lower bound. It trusts nothing the policy says about itself;
    * **likelihood (gray-box)**, M = the ledger's releases (the actions are their post-processing), when the
      policy has a ledger (and ``likelihood``): :func:`dpaudit.attacks.likelihood.likelihood_attack` on
      ``runs`` runs under d and again under d', bounding eps(delta) and the Rényi divergences from the
      exact privacy loss of the recorded releases.

    The error budget ``1 - confidence`` is split equally over the attacks that run (Bonferroni), so a
    policy that keeps its claim on this pair fails with probability at most ``1 - confidence`` per call.
    For a property test of N examples whose overall false-alarm rate should stay below 5%, pass
    ``confidence=1 - 0.05 / N``.

    With ``runs`` fresh runs per side the black-box bound cannot exceed ``PairCheck.largest_detectable``
    (at the defaults, delta = 1e-5 and 3 attacks: about 6.7 at runs = 5,000); a policy without a usable
    ledger whose claim is at or above that is refused (``DPAuditError`` naming the ``runs`` that would
    do), since the assertion could never fail. It catches a policy that uses the differing row without
    noise, or with a small fraction of the noise its claim needs; a noise scale off by a small factor is
    usually only within the gray-box attack's reach. Which pair leaks most is the caller's (or
    hypothesis's) choice; ``dpaudit check policy`` searches for it.

    Returns a :class:`PairCheck`; raises ``AssertionError`` (a first sentence saying what leaked and what to
    do, then each attack's counts) when a bound exceeds the claim, and :class:`DPAuditError` (one
    sentence naming the argument) when an argument is not what it should be or the inputs do not fit
    the policy (see :func:`assert_ledger_within_claim`).
    """
    t0 = time.perf_counter()
    fn = "assert_pair_within_claim"
    proto = _protocol_of(protocol, fn)
    K = _check_policy(policy, fn)
    d0 = _check_input(policy, d, "d", K, proto.list_input, fn)
    d1 = _check_input(policy, d_prime, "d_prime", K, proto.list_input, fn)
    j = _differing(d0, d1, proto.list_input, fn)
    check_delta(delta)
    check_confidence(confidence)
    runs = check_int("runs", runs, minimum=100)
    seed = _check_seed(fn, seed, sequence=True)
    likelihood = _check_flag(fn, "likelihood", likelihood)
    features = _check_features(fn, features, K)
    if features is not None and features.ndim != 2:
        raise DPAuditError(f"{fn}: features must be one fixed action set of shape ({K}, d), got shape "
                           f"{features.shape}.")
    g, claim_eps, delta, how = _claim_at(policy, claim, delta, fn)
    who = _who(policy)
    T = d0.shape[0]
    unit = "entry" if proto.list_input else "row"
    label = f"{unit} {j}: {_row_text(d0, j)} in d, {_row_text(d1, j)} in d'"
    if isinstance(policy, FinitePolicy) and features is None and K ** T <= EXACT_MAX_VIEWS:
        return _exact_pair(policy, d0, d1, "view" if proto.list_input else "table", g, claim_eps, delta, label, how,
                           confidence, j, t0)
    if features is not None:
        policy = FixedActionSet(policy, features)
    else:
        dim = getattr(policy, "dim", None)
        if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
            raise DPAuditError(f"{fn}: {who} is a linear policy (dim = {int(dim)}); give its fixed action set as "
                               f"features=<array of shape ({K}, {int(dim)})>.")
    black_box = j < T - 1  # round j's reward is observed after a_j: no action depends on the last row
    gray_box = likelihood and hasattr(policy, "ledger")
    parts = int(black_box) + 2 * int(gray_box)
    if parts == 0:
        return PairCheck(0.0, claim_eps, delta, confidence, j, (), None, runs, time.perf_counter() - t0,
                         f"the pair differs in the last {unit} ({j}), which no action depends on (its reward is "
                         f"observed after the last action), and {who} has no ledger: the two sides' views have the "
                         "same distribution, so the pair is within any claim.")
    each = split_confidence(confidence, parts)
    largest = _largest_bound(runs, delta, each) if black_box else None

    def powerless() -> DPAuditError:
        return DPAuditError(
            f"{fn}: with runs={runs:,} fresh runs per side the black-box test can show at most eps = {largest:.3g} "
            f"at delta = {delta:g}, not above the claim's eps = {claim_eps:.4g} ({g.describe()}), and {who} records no "
            f"release its {unit} {j} feeds, so the assertion could never fail; pass "
            f"runs={_runs_needed(claim_eps, delta, each):,} or more (or compare at a larger delta).")

    if black_box and not gray_box and largest is not None and largest <= claim_eps:
        raise powerless()
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_fit, s_test, s_lik0, s_lik1 = ss.spawn(4)
    results: list[AuditResult] = []
    if black_box:
        pair = Pair(d0, d1, j, None, label)
        n_fit = _fit_size(runs)
        cand = fit_select(policy, proto, pair, s_fit, delta=delta, confidence=each, n_train=n_fit, n_select=n_fit)
        results.append(evaluate(policy, proto, cand, s_test, n_test=runs, delta=delta, confidence=each,
                                claim=claim_eps))
    if gray_box:
        for orient, (a, b), s in (("d", (d0, d1), s_lik0), ("d'", (d1, d0), s_lik1)):
            res = likelihood_attack(policy, proto, Pair(a, b, j, None, label), delta=delta, confidence=each,
                                    n_runs=runs, seed=s, claim=g)
            res.details["orientation"] = orient
            results.append(res)
    failed = [r for r in results if r.epsilon_lower > claim_eps]
    renyi = [(r, v) for r in results for v in r.details.get("renyi_violation", [])]
    if failed or renyi:
        top = max(failed, key=lambda r: r.epsilon_lower) if failed else None
        shown = (f"eps >= {top.epsilon_lower:.4g} at delta = {delta:g} with confidence {confidence:g}, above the "
                 f"eps = {claim_eps:.4g} its claim {g.describe()} allows" if top is not None else
                 f"D_{renyi[0][1]['order']:g} >= {renyi[0][1]['D_alpha_lower']:.4g} with confidence {confidence:g}, "
                 f"above the {renyi[0][1]['claimed']:.4g} its claim {g.describe()} allows")
        lines = [f"{who} leaks more than its claim on this pair ({label}): the attacks show {shown}: {_PAIR_HINT}.",
                 f"  The claim {g.describe()} allows eps = {claim_eps:.4g} at delta = {delta:g} ({how}); T = {T}; "
                 f"each attack holds at confidence {each:.4g}:"]
        lines += [f"  {_attack_text(r)}" for r in failed]
        for r, v in renyi[:3]:
            lines.append(f"  the likelihood (gray-box) attack under {r.details.get('orientation', 'd')} shows "
                         f"D_{v['order']:g} >= {v['D_alpha_lower']:.4g} with confidence {r.confidence:.4g}, above the "
                         f"claim's {v['claimed']:.4g} at that order")
        raise AssertionError("\n".join(lines))
    fed = any(r.details.get("max_releases_fed_by_round", 0) > 0 for r in results if r.attack == "likelihood")
    # a ledger, but empty where it matters: black-box only
    if black_box and not fed and largest is not None and largest <= claim_eps:
        raise powerless()
    best = max((r.epsilon_lower for r in results), default=0.0)
    note = "" if black_box else (f"the pair differs in the last {unit} ({j}), which no action depends on: only the "
                                 "gray-box attack ran.")
    return PairCheck(best, claim_eps, delta, confidence, j, tuple(results), largest, runs,
                     time.perf_counter() - t0, note)


def assert_finite_policy_renyi(policy: FinitePolicy, bound: float | Guarantee, alpha: float,
                               protocol: str = "table") -> float:
    """Exact D_alpha of a finite policy, the maximum over every neighbouring pair of ``protocol`` (Table,
    View or Interactive DP, Azize & Basu 2023a, Def. 3-4) by enumeration
    (:func:`dpaudit.attacks.exact.exact_profile`), within ``bound`` (Rényi DP at order alpha). Returns it."""
    alpha = check_order(alpha)
    _check_bound("assert_finite_policy_renyi", bound)  # refused before the enumeration, not after it
    if not isinstance(policy, FinitePolicy):
        raise DPAuditError(f"assert_finite_policy_renyi: policy must be a FinitePolicy (decision-rule tables), got "
                           f"{shorten(policy)}; test other policies with assert_pair_within_claim.")
    prof = exact_profile(policy, protocol, alphas=[alpha])
    return assert_renyi_bound(prof.divergence(alpha), bound, alpha, what=f"the exact D_alpha under {protocol} DP",
                              hint="its decision rules let one row move the actions more than the bound allows; "
                                   "mix them towards uniform, or state the weaker bound (`dpaudit check policy` on "
                                   "its spec names the worst pair)")
