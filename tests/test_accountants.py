"""Accountants: conversions against analytic values and an independent brute force, exact Gaussian
profiles against dp-accounting and numerical integration, composition, per-round accounting, lints."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dpaudit.accountants import RDP, ZCDP, ApproxDP, DPAuditError, PureDP
from dpaudit.accountants import NoiseAccount, compose_parallel, compose_sequential, per_round_account
from dpaudit.accountants.conversions import (
    approx_to_approx,
    kl_tv_delta,
    pure_to_approx,
    rdp_curve_to_approx,
    rdp_to_approx,
    simple_zcdp_epsilon,
    zcdp_delta,
    zcdp_rho_for_epsilon,
    zcdp_to_approx,
)
from dpaudit.accountants.gaussian import (
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_sigma,
    laplace_delta,
    laplace_epsilon,
    laplace_renyi,
    lint_classical_gaussian,
    lint_gaussian_channel,
)
from dpaudit.testing import deltas, rhos

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute_force_zcdp_epsilon(rho: float, delta: float, n: int = 400_001) -> float:
    """Independent: the paper's delta-form (CKS 2020 Prop. 12) inverted for eps on a dense order grid.

    delta = exp((a-1)(a rho - eps)) / a * (1 - 1/a)^(a-1)  <=>
    eps = a rho + [log(1/delta) - log a + (a-1) log(1 - 1/a)] / (a - 1).
    """
    a = 1.0 + np.exp(np.linspace(-16.0, 16.0, n))
    eps = a * rho + (-math.log(delta) - np.log(a) + (a - 1) * np.log1p(-1 / a)) / (a - 1)
    return float(eps.min())


def paper_log_delta(alpha: float, rho: float, eps: float) -> float:
    return (alpha - 1) * (alpha * rho - eps) - math.log(alpha) + (alpha - 1) * math.log1p(-1 / alpha)


# ---- zCDP / RDP -> (eps, delta) --------------------------------------------------------------------

def test_rdp_single_order_analytic_value():
    # alpha = 2, tau = 1, delta = 1e-5: eps = 1 + log(1/2) - (log 1e-5 + log 2) / 1
    expect = 1 + math.log(0.5) - (math.log(1e-5) + math.log(2))
    conv = rdp_to_approx(2.0, 1.0, 1e-5)
    assert math.isclose(conv.epsilon, expect, rel_tol=1e-14)
    assert conv.order == 2.0 and conv.method == "cks"
    # and alpha = inf gives tau itself
    assert rdp_to_approx(math.inf, 0.7, 1e-5).epsilon == 0.7


@pytest.mark.parametrize("rho", [1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0, 500.0, 1e3])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-3, 0.1])
def test_zcdp_conversion_matches_brute_force_over_orders(rho, delta):
    conv = zcdp_to_approx(rho, delta)
    if conv.method == "kl-tv":  # (0, delta)-DP by Bretagnolle-Huber; valid and below the CKS optimum
        assert conv.epsilon == 0.0 and delta >= math.sqrt(1 - math.exp(-rho))
        return
    bf = brute_force_zcdp_epsilon(rho, delta)
    # attained at a real order (so never below the continuous optimum) ...
    assert math.isclose(paper_log_delta(conv.order, rho, conv.epsilon), math.log(delta), rel_tol=1e-9, abs_tol=1e-9)
    # ... and as good as a dense brute-force grid (within 0.1% is the target; we get far closer)
    assert conv.epsilon <= bf * (1 + 1e-10)
    assert conv.epsilon >= bf * (1 - 1e-6)
    # and never worse than the textbook bound
    assert conv.epsilon <= simple_zcdp_epsilon(rho, delta)


@FAST
@given(rhos(), deltas())
def test_zcdp_conversion_within_target_on_random_inputs(rho, delta):
    conv = zcdp_to_approx(rho, delta)
    if conv.method == "kl-tv":
        assert delta >= kl_tv_delta(rho)
        return
    # epsilon >= 0 by definition: a negative optimum over orders means (0, delta)-DP already holds
    bf = max(brute_force_zcdp_epsilon(rho, delta, n=100_001), 0.0)
    assert bf * (1 - 1e-3) <= conv.epsilon <= bf * (1 + 1e-10)


def test_zcdp_conversion_is_zero_where_the_optimum_over_orders_is_negative():
    """Found by hypothesis: rho = e^-7.5, delta = e^-3.875 has a (slightly) negative optimum."""
    rho, delta = math.exp(-7.5), math.exp(-3.875)
    assert brute_force_zcdp_epsilon(rho, delta) < 0
    assert zcdp_to_approx(rho, delta).epsilon == 0.0


def test_dp_accounting_grid_is_looser_at_small_and_large_rho():
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = rdp.DEFAULT_RDP_ORDERS
    grid = lambda rho, d: rdp.compute_epsilon(orders, [o * rho for o in orders], d)[0]  # noqa: E731
    ours = zcdp_to_approx(1e-3, 1e-6).epsilon
    assert grid(1e-3, 1e-6) > ours * 1.03
    assert grid(500.0, 1e-6) > simple_zcdp_epsilon(500.0, 1e-6) > zcdp_to_approx(500.0, 1e-6).epsilon


def test_zcdp_delta_is_the_inverse():
    rho, delta = 0.3, 1e-7
    conv = zcdp_to_approx(rho, delta)
    back = zcdp_delta(rho, conv.epsilon)
    assert math.isclose(back.delta, delta, rel_tol=1e-6)


def test_rho_for_target_epsilon():
    for eps, delta in [(1.0, 1e-5), (0.1, 1e-9), (8.0, 1e-3)]:
        rho = zcdp_rho_for_epsilon(eps, delta)
        got = zcdp_to_approx(rho, delta).epsilon
        assert got <= eps and math.isclose(got, eps, rel_tol=1e-9)


def test_rdp_table_conversion_uses_its_orders_and_is_weaker_than_the_curve():
    rho, delta = 0.5, 1e-6
    table = RDP({a: a * rho for a in (2, 4, 8, 16, 32)})
    conv = table.conversion(delta)
    assert conv.order in (2, 4, 8, 16, 32, 1 / delta)
    assert conv.epsilon >= ZCDP(rho).epsilon_at(delta) - 1e-12
    assert math.isclose(conv.epsilon, min(rdp_to_approx(a, a * rho, delta).epsilon for a in (2, 4, 8, 16, 32)), rel_tol=1e-12)
    # a callable curve is minimised over continuous orders and agrees with zCDP
    assert math.isclose(RDP(lambda a: a * rho).conversion(delta).epsilon, ZCDP(rho).epsilon_at(delta), rel_tol=1e-9)


# ---- conversions only weaken -----------------------------------------------------------------------

@FAST
@given(st.floats(1e-3, 10.0), deltas(), st.floats(1.01, 200.0))
def test_conversions_only_weaken(eps, delta, alpha):
    pure = PureDP(eps)
    z = pure.to_zcdp()
    # Rényi curves: eps-DP <= its zCDP <= zCDP's RDP (equal)
    assert pure.renyi(alpha) <= z.renyi(alpha) + 1e-15
    assert z.renyi(alpha) == z.to_rdp().renyi(alpha)
    # (eps, delta): the tight pure conversion <= eps, and <= what the weaker zCDP promises
    pe = pure.epsilon_at(delta)
    assert pe <= eps
    assert pe <= z.epsilon_at(delta) + 1e-12
    assert z.epsilon_at(delta) <= simple_zcdp_epsilon(z.rho, delta) + 1e-12
    # a single-order RDP point promises less than the whole zCDP curve
    assert rdp_to_approx(alpha, alpha * z.rho, delta).epsilon >= z.epsilon_at(delta) - 1e-9
    # (eps, delta0) -> larger delta only helps; smaller delta promises nothing
    a = ApproxDP(eps, delta / 10)
    assert a.epsilon_at(delta) <= eps
    assert a.epsilon_at(delta / 100) == math.inf


def test_pure_conversion_is_randomized_response_profile():
    eps, delta = 1.0, 0.05
    e2 = pure_to_approx(eps, delta).epsilon
    # RR with p = e^eps/(1+e^eps): delta(e2) = p - e^e2 (1 - p)
    p = math.exp(eps) / (1 + math.exp(eps))
    assert math.isclose(p - math.exp(e2) * (1 - p), delta, rel_tol=1e-12)
    assert pure_to_approx(0.1, 0.2).epsilon == 0.0  # delta above the TV distance of RR
    assert approx_to_approx(1.0, 0.0, delta).epsilon == e2


# ---- exact Gaussian ----------------------------------------------------------------------------------

def _delta_by_integration(eps: float, mu: float) -> float:
    """delta(eps) = E_P[(1 - e^(eps - L))_+] with the privacy loss L ~ N(mu^2/2, mu^2) under P."""
    m, s = mu * mu / 2, mu
    f = lambda l: -math.expm1(eps - l) * stats.norm.pdf(l, m, s)  # noqa: E731
    val, _ = integrate.quad(f, eps, m + 40 * s, limit=400, epsabs=0, epsrel=1e-12)
    return val


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 20.0])
@pytest.mark.parametrize("eps", [0.05, 0.5, 2.0, 6.0])
def test_gaussian_delta_matches_numerical_integration(sigma, eps):
    d = gaussian_delta(eps, sigma)
    ref = _delta_by_integration(eps, 1 / sigma)
    if ref < 1e-250:
        assert d < 1e-200
    else:
        assert math.isclose(d, ref, rel_tol=1e-6)


@pytest.mark.parametrize("sigma", [0.2, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-2])
def test_gaussian_epsilon_matches_dp_accounting_to_1e6(sigma, delta):
    from dp_accounting import gaussian_mechanism

    ours = gaussian_epsilon(delta, sigma).epsilon
    ref = gaussian_mechanism.get_epsilon_gaussian(sigma, delta)
    assert math.isclose(ours, ref, rel_tol=1e-6, abs_tol=1e-12)
    if ours > 0:
        assert math.isclose(gaussian_delta(ours, sigma), delta, rel_tol=1e-8)


def test_gaussian_composition_is_one_gaussian_with_sigma_over_sqrt_n():
    for n in (1, 4, 25, 1000):
        a = gaussian_epsilon(1e-6, 3.0, 1.0, n).epsilon
        b = gaussian_epsilon(1e-6, 3.0 / math.sqrt(n)).epsilon
        assert math.isclose(a, b, rel_tol=1e-12)
    # heterogeneous: mu = sqrt(sum mu_i^2)
    acc = NoiseAccount((0.5, 1.2, 0.3))
    assert math.isclose(acc.epsilon(1e-5).epsilon, gaussian_epsilon(1e-5, mu=math.sqrt(0.25 + 1.44 + 0.09)).epsilon, rel_tol=1e-12)


def test_gaussian_sigma_inverse_calibration():
    from dp_accounting import gaussian_mechanism

    for eps, delta, n in [(1.0, 1e-5, 1), (0.3, 1e-9, 10), (8.0, 1e-3, 3)]:
        s = gaussian_sigma(eps, delta, 1.0, n)
        assert gaussian_epsilon(delta, s, 1.0, n).epsilon <= eps
        assert math.isclose(gaussian_epsilon(delta, s, 1.0, n).epsilon, eps, rel_tol=1e-9)
        assert math.isclose(s, math.sqrt(n) * gaussian_mechanism.get_sigma_gaussian(eps, delta), rel_tol=1e-6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.floats(0.5, 8.0), st.integers(1, 12), st.sampled_from([1e-9, 1e-6, 1e-3]))
def test_exact_le_pld_le_cks_le_simple(sigma, n, delta):
    from dp_accounting.pld import privacy_loss_distribution as pld

    exact = gaussian_epsilon(delta, sigma, 1.0, n).epsilon
    p = pld.from_gaussian_mechanism(sigma, 1.0, value_discretization_interval=1e-3).self_compose(n)
    pld_eps = p.get_epsilon_for_delta(delta)
    rho = n / (2 * sigma**2)
    cks = zcdp_to_approx(rho, delta).epsilon
    simple = simple_zcdp_epsilon(rho, delta)
    assert exact <= pld_eps + 1e-9
    assert pld_eps <= cks + 1e-9
    assert cks <= simple + 1e-12


@FAST
@given(st.floats(0.2, 20.0), st.floats(1.01, 3.0), st.integers(1, 50), deltas(1e-10, 0.05))
def test_monotone_in_sigma_and_compositions(sigma, factor, n, delta):
    e = gaussian_epsilon(delta, sigma, 1.0, n).epsilon
    assert gaussian_epsilon(delta, sigma * factor, 1.0, n).epsilon <= e
    assert gaussian_epsilon(delta, sigma, 1.0, n + 1).epsilon >= e
    z = zcdp_to_approx(n / (2 * sigma**2), delta).epsilon
    assert zcdp_to_approx(n / (2 * (sigma * factor) ** 2), delta).epsilon <= z
    assert e <= z + 1e-12  # the exact profile is below the zCDP conversion of the same noise


# ---- Laplace and mixed compositions ------------------------------------------------------------------

@pytest.mark.parametrize("eps0", [0.3, 1.0, 3.0])
def test_laplace_closed_form_matches_integration_and_pld(eps0):
    from dp_accounting.pld import privacy_loss_distribution as pld

    b = 1 / eps0
    for eps in (0.0, 0.5 * eps0, 0.9 * eps0):
        f = lambda x: max(stats.laplace.pdf(x, 0, b) - math.exp(eps) * stats.laplace.pdf(x, 1, b), 0.0)  # noqa: E731
        ref = integrate.quad(f, -60 * b, 1 + 60 * b, points=[0, 1], limit=400, epsrel=1e-12)[0]
        assert math.isclose(laplace_delta(eps, eps0), ref, rel_tol=1e-7)
    e = laplace_epsilon(1e-4, eps0).epsilon
    p = pld.from_laplace_mechanism(b, 1.0, value_discretization_interval=1e-4).get_epsilon_for_delta(1e-4)
    assert e <= p + 1e-9 and math.isclose(e, p, rel_tol=1e-3)


def test_laplace_renyi_matches_core_formula():
    from dpaudit.mechanisms import laplace_renyi as core

    for a in (1.01, 2.0, 7.5, 300.0):
        for e in (0.1, 1.0, 4.0):
            assert math.isclose(laplace_renyi(a, e), core(a, 1 / e, 1.0), rel_tol=1e-12)


def test_mixed_composition_pld_between_parts_and_rdp():
    acc = NoiseAccount((1.0,), (1.0, 0.5))
    conv = acc.epsilon(1e-6)
    assert conv.method == "pld"
    rdp = acc.rdp_epsilon(1e-6).epsilon
    gauss_only = gaussian_epsilon(1e-6, mu=1.0).epsilon
    assert gauss_only < conv.epsilon <= rdp + 1e-9
    assert conv.epsilon <= gauss_only + 1.5 + 1e-9  # the Laplace members add at most their eps


# ---- composition of guarantees ---------------------------------------------------------------------

def test_sequential_and_parallel_composition():
    assert compose_sequential(ZCDP(0.1), ZCDP(0.2)) == ZCDP(0.1 + 0.2)
    assert compose_parallel(ZCDP(0.1), ZCDP(0.2)) == ZCDP(0.2)  # Azize & Basu 2023a, Lemma 1(b)
    assert compose_sequential(PureDP(0.5), PureDP(0.25)) == PureDP(0.75)
    assert compose_parallel(ApproxDP(1.0, 1e-6), ApproxDP(0.5, 1e-5)) == ApproxDP(1.0, 1e-5)  # Lemma 1(a)
    mixed = compose_sequential(ZCDP(0.1), PureDP(1.0))
    assert isinstance(mixed, RDP)
    assert math.isclose(mixed.renyi(3.0), 0.3 + min(1.0, 1.5), rel_tol=1e-12)
    par = compose_parallel(RDP.point(2.0, 1.0), ZCDP(0.25))
    assert par.renyi(2.0) == 1.0 and par.renyi(1.5) == 1.0  # table promises 1 at orders <= 2
    with pytest.raises(DPAuditError):
        compose_sequential(ZCDP(0.1), ApproxDP(1.0, 1e-5))
    with pytest.raises(DPAuditError):
        compose_sequential()


# ---- per-round accounting ----------------------------------------------------------------------------

def test_per_round_accounting_hand_example():
    # run 0: release A (Gaussian, D/sigma = 1) fed rounds 0, 1; release B (ratio 2) fed rounds 1, 2.
    # run 1: one Laplace release (eps 0.5) fed round 3.
    run = np.array([0, 0, 0, 0, 1])
    rnd = np.array([0, 1, 1, 2, 3])
    kind = np.array([True, True, True, True, False])
    ratio = np.array([1.0, 1.0, 2.0, 2.0, 0.5])
    acc = per_round_account(2, 4, run, rnd, kind, ratio)
    np.testing.assert_allclose(acc.mu2[0], [1.0, 5.0, 4.0, 0.0])
    np.testing.assert_allclose(acc.lap_eps[1], [0, 0, 0, 0.5])
    assert acc.shared_rounds().tolist() == [[0, 1, 2]]
    assert acc.worst_round() == (0, 1)
    worst = acc.round_account(0, 1)
    assert math.isclose(worst.rho, 2.5)
    np.testing.assert_allclose(acc.renyi(2.0)[1, 3], laplace_renyi(2.0, 0.5))
    assert isinstance(acc.guarantee(), RDP)
    g_only = per_round_account(1, 3, run[:4] * 0, rnd[:4], kind[:4], ratio[:4])
    assert g_only.guarantee() == ZCDP(2.5)


def test_per_round_renyi_sums_laplace_releases_of_a_round():
    # round 0 of run 0 fed Laplace releases with eps 0.5 and 0.2 and a Gaussian (ratio 1); round 1
    # fed one eps-0.5 release; run 1 round 2 fed two eps-0.5 releases (the same value twice)
    run = np.array([0, 0, 0, 0, 1, 1])
    rnd = np.array([0, 0, 0, 1, 2, 2])
    kind = np.array([False, False, True, False, False, False])
    ratio = np.array([0.5, 0.2, 1.0, 0.5, 0.5, 0.5])
    acc = per_round_account(2, 3, run, rnd, kind, ratio)
    a = np.array([1.5, 2.0, 8.0])
    got = acc.renyi(a)
    np.testing.assert_allclose(got[0, 0], laplace_renyi(a, 0.5) + laplace_renyi(a, 0.2) + a / 2, rtol=1e-12)
    np.testing.assert_allclose(got[0, 1], laplace_renyi(a, 0.5), rtol=1e-12)
    np.testing.assert_allclose(got[1, 2], 2 * laplace_renyi(a, 0.5), rtol=1e-12)
    np.testing.assert_allclose(got[0, 2], 0.0)
    np.testing.assert_allclose(acc.renyi(2.0), got[..., 1])


def test_per_round_accounting_rejects_bad_entries():
    with pytest.raises(DPAuditError, match="round 5"):
        per_round_account(1, 3, np.array([0]), np.array([5]), np.array([True]), np.array([1.0]))
    with pytest.raises(DPAuditError):
        per_round_account(1, 3, np.array([0]), np.array([1]), np.array([True]), np.array([-1.0]))


# ---- calibration lint --------------------------------------------------------------------------------

def test_classical_calibration_lint():
    ok = lint_classical_gaussian(0.5, 1e-5)
    assert not ok.flagged and ok.holds
    flagged = lint_classical_gaussian(2.0, 1e-5)
    assert flagged.flagged and flagged.holds  # outside its proof's range, but it happens to hold
    s = classical_gaussian_sigma(2.0, 1e-5)
    assert math.isclose(flagged.exact_delta, gaussian_delta(2.0, s), rel_tol=1e-12)
    broken = lint_classical_gaussian(8.0, 1e-3)
    assert broken.flagged and not broken.holds and broken.exact_delta > 1e-3
    assert broken.exact_sigma > classical_gaussian_sigma(8.0, 1e-3)  # the classical sigma is too small here
    assert math.isclose(broken.exact_sigma, gaussian_sigma(8.0, 1e-3), rel_tol=1e-12)
    assert "does NOT hold" in broken.message


def test_gaussian_channel_lint():
    lint = lint_gaussian_channel(2.0, 0.1)
    sigma_a = 2 * math.sqrt(math.log(1.25 / 0.1)) / 2.0
    assert lint.flagged and math.isclose(lint.sigma, sigma_a)
    assert math.isclose(lint.exact_delta, gaussian_delta(2.0, sigma_a), rel_tol=1e-12)
    assert not lint_gaussian_channel(0.5, 1e-5).flagged


# ---- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, needle", [
    (lambda: zcdp_to_approx(-1.0, 1e-5), "rho"),
    (lambda: zcdp_to_approx(1.0, 0.0), "delta"),
    (lambda: zcdp_to_approx(1.0, 1.0), "delta"),
    (lambda: rdp_to_approx(1.0, 1.0, 1e-5), "alpha"),
    (lambda: rdp_to_approx(0.5, 1.0, 1e-5), "alpha"),
    (lambda: gaussian_epsilon(1e-5, 0.0), "sigma"),
    (lambda: gaussian_epsilon(1e-5, -2.0), "sigma"),
    (lambda: gaussian_epsilon(1e-5, 1.0, 1.0, 0), "compositions"),
    (lambda: gaussian_epsilon(1e-5, float("nan")), "sigma"),
    (lambda: gaussian_sigma(0.0, 1e-5), "epsilon"),
    (lambda: rdp_curve_to_approx(lambda a: a, 2.0), "delta"),
])
def test_bad_input_is_one_sentence(call, needle):
    with pytest.raises(DPAuditError) as info:
        call()
    msg = str(info.value)
    assert needle in msg and msg.endswith(".") and "\n" not in msg
