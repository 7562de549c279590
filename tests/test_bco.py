"""BCO under local DP, Zheng et al. (2020), "Locally Differentially Private (Contextual) Bandits Learning": Alg. 1
with FKM, Alg. 2 with Alg. 4, their twins, mutants and audit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accountants.gaussian import gaussian_epsilon
from dpaudit.environments import LossSequence, make_losses
from dpaudit.policies.bco import is_bco
from dpaudit.protocols.continuous import loss_pair as audit_pair
from dpaudit.simulate import simulate_bco
from dpaudit.accounting import ledger_per_user
from functools import partial

from dpaudit.runner import check
from dpaudit.runner.local import channel_attack

audit_local = partial(check, protocol="local")
from dpaudit.errors import DPAuditError
from dpaudit.policies.bco import (FKM, LDPFKM, LDPSCS, SCS, LDPTwoPoint, TwoPoint, TwoPointChannel, _bisection_step,
                                  _ftrl_barrier_step, project_ball)
from dpaudit.policies.registry import make_policy, registered

DELTA = 1e-5
SIG1 = 2 * math.sqrt(2 * math.log(1.25 / DELTA))  # sigma / (B / eps) of Alg. 1, sigma / (G / eps) of Alg. 2


def _run(policy, T=20, n=50, seed=0):
    losses = LossSequence.stochastic(policy.d, T, mu=0.2, noise=0.1)  # 0.5-Lipschitz on the unit ball
    return simulate_bco(policy, losses, n, seed, record=True)


# ---- the contract -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, m", [(FKM, 1), (LDPFKM, 1), (TwoPoint, 2), (LDPTwoPoint, 2), (SCS, 1), (LDPSCS, 1)])
def test_points_have_the_contract_shape_and_lie_in_the_body(cls, m):
    pol = cls(d=3, horizon=200)
    assert is_bco(pol) and is_bco(pol.name) and pol.n_points == m
    pol.reset(64, np.random.default_rng(1))
    losses = LossSequence.stochastic(3, 200)
    rng = np.random.default_rng(2)
    for t in range(200):
        y = pol.y.copy()
        P = pol.act(t)
        assert P.shape == (64, m, 3)
        assert np.linalg.norm(P, axis=-1).max() <= pol.radius + 1e-12
        pol.observe(t, P, losses.values(t, P, rng))
    if m == 2:  # x_{t,1} - x_{t,2} = 2 rho u_t with ||u_t|| = 1 (Zheng et al. 2020, App. C, line 5)
        assert np.allclose(np.linalg.norm(P[:, 0] - P[:, 1], axis=1), 2 * pol.rho)
    elif cls in (SCS, LDPSCS):  # y_t = x_t + B_t u_t inside the Dikin ellipsoid of the barrier, so strictly inside X
        assert np.linalg.norm(P, axis=-1).max() < pol.radius
    else:  # x_t = y_t + delta u_t (FKM), y_t inside (1 - alpha) X
        assert np.allclose(np.linalg.norm(P[:, 0] - y, axis=1), pol.delta_)
        assert np.linalg.norm(y, axis=1).max() <= (1 - pol.alpha) * pol.radius + 1e-12


def test_fkm_explores_at_distance_delta_and_steps_like_gradient_descent():
    pol = FKM(d=2, horizon=100)
    pol.reset(5, np.random.default_rng(0))
    P = pol.act(0)
    assert np.allclose(np.linalg.norm(P[:, 0], axis=1), pol.delta_)  # y_1 = 0
    u = P[:, 0] / pol.delta_
    pol.observe(0, P, np.full((5, 1), 0.5))
    assert np.allclose(pol.y, -pol.nu * 0.5 * u)  # y_2 = y_1 - nu f u (no projection this close to 0)


def test_two_point_update_is_algorithm_4():
    pol = TwoPoint(d=2, horizon=400)
    assert pol.eta == 1 / math.sqrt(400) and pol.rho == math.log(400) / 400 and pol.xi == pol.rho
    pol.reset(4, np.random.default_rng(0))
    P = pol.act(0)
    u = (P[:, 0] - P[:, 1]) / (2 * pol.rho)
    f = np.stack([0.3 * P[:, 0, 0], 0.3 * P[:, 1, 0]], axis=1)
    pol.observe(0, P, f)
    g = pol.d / (2 * pol.rho) * (f[:, 0] - f[:, 1])[:, None] * u
    assert np.allclose(pol.y, project_ball(-pol.eta * g, 1 - pol.xi))


def test_scs_ftrl_step_is_the_barrier_regularised_minimum():
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 3)) * np.array([[0.1], [1], [5], [30], [200], [0.0]])
    c, eta, R = 2.5, 0.05, 1.5
    x = _ftrl_barrier_step(a, c, eta, R)
    assert np.linalg.norm(x, axis=1).max() < R

    def obj(z, ai):
        return ai @ z + 0.5 * c * z @ z - math.log(R ** 2 - z @ z) / eta if z @ z < R ** 2 else np.inf

    for xi, ai in zip(x, a):
        best = minimize(obj, np.zeros(3), args=(ai,), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12,
                                                                                        "maxiter": 20000})
        assert obj(xi, ai) <= best.fun + 1e-9


@pytest.mark.parametrize("radius", [1.0, 2.0, 0.25, 1.5])
def test_scs_ftrl_step_is_the_bisection_loop_bit_for_bit(radius):
    """The barrier step (its first levels settled where provable, the dyadic loop for the rest, the whole loop for
    rows not settled) is the plain bisection loop's result bit for bit, over scales from 1e-6 to 1e5, a zero row,
    rows whose root is a grid point of the settled levels (not provably settled: the whole loop), c = 0 and c
    large; a radius that is not a power of two runs the loop itself."""
    from dpaudit.policies import bco

    rng = np.random.default_rng(7)
    unsettled = 0
    for rep in range(12):
        n = int(rng.integers(1, 3000))
        a = rng.standard_normal((n, 2)) * rng.exponential(size=(n, 1)) * 10 ** rng.uniform(-6, 5)
        a[0] = 0.0
        c = 0.0 if rep == 0 else float(rng.exponential() * 10)
        eta = float(10 ** rng.uniform(-4, 0))
        for i, g in enumerate((0.5 * radius, 0.375 * radius)[: n - 1]):  # ||a|| = F(g): the root on the grid
            a[1 + i] = [c * g + (2 * g / eta) / (radius ** 2 - g ** 2), 0.0]
        np.testing.assert_array_equal(_ftrl_barrier_step(a, c, eta, radius), _bisection_step(a, c, eta, radius))
        if radius == 1.0:
            unsettled += int((~bco._settled_levels(np.linalg.norm(a, axis=1), c, eta, radius,
                                                   bco.SETTLED_LEVELS)[1]).sum())
    if radius == 1.0:
        assert unsettled > 0  # the whole-loop rows were exercised


def test_the_loss_sequences_best_point_is_the_minimum():
    rng = np.random.default_rng(3)
    cand = project_ball(rng.uniform(-1, 1, (20000, 2)), 1.0)
    for losses in (LossSequence.stochastic(2, 50), LossSequence.adversarial(2, 50, seed=4),
                   LossSequence.adversarial(2, 50, seed=5, mu=0.3)):
        x, v = losses.best(1.0)
        total = sum(losses.mean_values(t, cand) for t in range(50))
        assert v <= total.min() + 1e-9  # no point of the ball does better
        assert abs(v - sum(losses.mean_values(t, x) for t in range(50))) < 1e-9
        assert total.min() - v < 0.05  # and the grid gets close to it


# ---- bad input: one sentence naming the value ----------------------------------------------------------

def test_bad_input_is_refused_by_name():
    with pytest.raises(DPAuditError, match="d must be an integer >= 1"):
        LDPFKM(d=0)
    with pytest.raises(DPAuditError, match="epsilon"):
        LDPTwoPoint(epsilon=-1)
    pol = LDPFKM(d=2, horizon=10)
    pol.reset(3, np.random.default_rng(0))
    P = pol.act(0)
    with pytest.raises(DPAuditError, match=r"loss 1.5 at step 0 is outside \[-1, 1\]"):
        pol.observe(0, P, np.array([[0.1], [1.5], [0.0]]))
    with pytest.raises(DPAuditError, match="NaN or inf"):
        pol.observe(0, P, np.array([[0.1], [np.nan], [0.0]]))
    with pytest.raises(DPAuditError, match="outside the decision set, the ball of radius 1"):
        pol.observe(0, P * 100, np.zeros((3, 1)))
    with pytest.raises(DPAuditError, match=r"expected \(n_runs, m\)"):
        pol.observe(0, P, np.zeros(3))
    two = LDPTwoPoint(d=2, horizon=10)
    two.reset(2, np.random.default_rng(0))
    P = two.act(0)  # a loss that is not G-Lipschitz: its difference leaves [-2 rho G, 2 rho G]
    with pytest.raises(DPAuditError, match="outside the channel's declared domain"):
        two.observe(0, P, np.array([[1.0, -1.0], [0.0, 0.0]]))
    twin = TwoPoint(d=2, horizon=10)
    twin.reset(2, np.random.default_rng(0))
    P = twin.act(0)
    with pytest.raises(DPAuditError, match="not G-Lipschitz"):
        twin.observe(0, P, np.array([[1.0, -1.0], [0.0, 0.0]]))
    with pytest.raises(DPAuditError, match="above ldp-bco-fkm's loss_bound B = 1"):
        simulate_bco(LDPFKM(d=2, horizon=10), LossSequence.stochastic(2, 10, mu=4.0), 5)
    with pytest.raises(DPAuditError, match="dimension 3"):
        simulate_bco(LDPFKM(d=2, horizon=10), LossSequence.stochastic(3, 10), 5)
    with pytest.raises(DPAuditError, match="no parameter 'sigma'"):
        make_losses("stochastic", 2, 10, {"sigma": "1"})


def test_a_difference_at_the_domain_extreme_is_accepted_despite_rounding():
    """d = 1: f(x) = -G x gives f(x1) - f(x2) = -2 rho G u up to one rounding; accepted, while a real excess is not."""
    pol = LDPTwoPoint(d=1, horizon=16)
    pol.reset(2000, np.random.default_rng(0))
    P = pol.act(0)
    pol.observe(0, P, -1.0 * P[:, :, 0])  # G = 1
    assert len(pol.ledger) == 1
    z = pol.ledger.releases[0].centre[:, 0]
    assert np.abs(z).max() <= 2 * pol.rho
    pol.reset(2000, np.random.default_rng(0))
    P = pol.act(0)
    with pytest.raises(DPAuditError, match="outside the channel's declared domain"):
        pol.observe(0, P, -1.001 * P[:, :, 0])  # 1.001-Lipschitz: refused, not clipped


def test_bco_is_refused_outside_the_local_protocol():
    from dpaudit.runner import check as audit_policy

    with pytest.raises(DPAuditError, match="plays points of a convex body"):
        audit_policy("ldp-bco-fkm", {}, protocol="table")


# ---- channels and ledger ------------------------------------------------------------------------------------

def test_the_ledger_gives_the_closed_form_per_user_epsilon():
    fkm = LDPFKM(d=2, horizon=20)
    _run(fkm)
    led = ledger_per_user(fkm.ledger, DELTA)
    assert fkm.sigma == pytest.approx(SIG1)  # sigma = 2B sqrt(2 ln(1.25/delta))/eps, B = eps = 1
    assert led["max_messages_per_user"] == 1 and led["users"] == 50 * 20
    assert led["mu"] == pytest.approx(2.0 / SIG1, rel=1e-12)  # sensitivity 2B over sigma
    assert led["epsilon"] == pytest.approx(gaussian_epsilon(DELTA, mu=2.0 / SIG1).epsilon, rel=1e-12)
    scs = LDPSCS(d=2, horizon=20, loss_bound=2.0, epsilon=0.5)
    _run(scs)
    led_s = ledger_per_user(scs.ledger, DELTA)
    assert scs.sigma == pytest.approx(2.0 * SIG1 / 0.5) and led_s["mu"] == pytest.approx(4.0 / scs.sigma, rel=1e-12)
    two = LDPTwoPoint(d=3, horizon=20, lipschitz=0.5, epsilon=2.0)
    _run(two)
    led2 = ledger_per_user(two.ledger, DELTA)
    for rel in two.ledger.releases:  # the message noise n^T (x1 - x2) ~ N(0, 4 rho^2 sigma^2); sensitivity 4 rho G
        assert np.allclose(rel.noise.scale, 2 * two.rho * two.sigma) and rel.sensitivity == pytest.approx(4 * two.rho * 0.5)
    assert two.sigma == pytest.approx(0.5 * SIG1 / 2.0)  # 2G sqrt(2 ln(1.25/delta))/eps with G = 0.5, eps = 2
    assert led2["mu"] == pytest.approx(2 * 0.5 / two.sigma, rel=1e-9)  # 4 rho G / (2 rho sigma) = 2G / sigma
    assert led2["epsilon"] == pytest.approx(two._chan.epsilon(DELTA), rel=1e-9)


def test_two_point_message_noise_is_gaussian_with_sd_2_rho_sigma():
    ch = TwoPointChannel.zheng_2020(4, 0.05, 1.0, 1.0, DELTA)
    rng = np.random.default_rng(0)
    gap = 2 * 0.05 * project_ball(rng.standard_normal((200000, 4)) * 1e6, 1.0)  # random directions, norm 2 rho
    o = ch.send(np.zeros(200000), rng, gap=gap)
    sd = 2 * 0.05 * ch.sigma
    assert abs(o.std() / sd - 1) < 0.01  # se of the sd ~ 1/sqrt(2n) = 0.0016
    assert abs(np.mean(np.abs(o) > 2 * sd) - 0.0455) < 0.003  # a Gaussian tail, not just the right variance


def test_channel_exact_epsilon_is_the_analytic_gaussian_and_the_attack_stays_below_it():
    for pol in (LDPFKM(d=2, horizon=48), LDPTwoPoint(d=2, horizon=48)):
        chan = pol.local_channel
        exact = gaussian_epsilon(DELTA, chan.sigma * (2 * pol.rho if pol.n_points == 2 else 1), chan.sensitivity).epsilon
        assert chan.epsilon(DELTA) == pytest.approx(exact, rel=1e-12)
        assert exact == pytest.approx(0.751, abs=1e-3)  # the classical rule's slack at eps = 1
        res = channel_attack(pol, delta=DELTA, confidence=0.95, n_fresh=200_000, n_select=5000,
                             seed=np.random.SeedSequence(3))
        assert 0.3 < res.epsilon_lower <= exact


def test_twins_have_no_channel_and_are_refused_under_local():
    for name in ("bco-fkm", "bco-2pt", "bco-scs"):
        pol = make_policy(name)
        assert pol.local_channel is None and pol.claim is None
        pol.reset(3, np.random.default_rng(0))
        P = pol.act(0)
        pol.observe(0, P, np.zeros((3, pol.n_points)))
        assert len(pol.ledger) == 0
        with pytest.raises(DPAuditError, match="exposes no channel"):
            audit_local(name, {})


# ---- the audit ---------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name, verdict, part", [
    ("ldp-bco-fkm", "consistent", None),
    ("ldp-bco-2pt", "consistent", None),
    ("ldp-bco-scs", "consistent", None),
    ("mutant-bco-fkm-half-sensitivity", "violation", "per-user ledger"),
    ("mutant-bco-2pt-half-gap", "violation", "per-user ledger"),
    ("mutant-bco-fkm-peek", "violation", "transcript"),
])
def test_local_audit_verdicts(name, verdict, part):
    out = audit_local(name, {}, runs=3000, horizon=16, seed=1)
    assert out["verdict"] == verdict, out["reason"]
    assert {a["attack"] for a in out["attacks"]} == {"channel", "transcript", "central"} and out["central"] is not None
    if part:
        assert out["reason"].startswith(f"the {part}")
    else:
        assert out["ledger"]["epsilon"] == pytest.approx(0.751, abs=1e-3)
        assert 0.2 < out["attacks"][0]["epsilon_lower"] <= 0.751  # power: the channel bound is not vacuous


def test_the_central_point_sequence_part_has_power():
    """In d = 1 FKM's points reveal the peeked raw loss (x_0 = delta u_0 gives u_0; y_1 = -nu f_0 u_0): the central
    part alone must exceed the claim, so its 0 on the honest policies is not a dead test."""
    out = audit_local("mutant-bco-fkm-peek", {"d": "1"}, runs=3000, horizon=16, seed=1)
    # above the claimed eps = 1 (the count stops at the first look whose bound exceeds it)
    assert out["central"]["verdict"] == "violation" and out["central"]["epsilon_lower"] > 1
    honest = audit_local("ldp-bco-fkm", {"d": "1", "epsilon": "4"}, runs=3000, horizon=16, seed=1)
    assert 0 < honest["central"]["epsilon_lower"] <= honest["ledger"]["epsilon"]


def test_mutants_are_registered_as_mutants():
    names = {e.name for e in registered(mutants=True)}
    assert {"mutant-bco-fkm-half-sensitivity", "mutant-bco-2pt-half-gap", "mutant-bco-fkm-peek"} <= names
    assert {"ldp-bco-fkm", "ldp-bco-2pt", "ldp-bco-scs", "bco-fkm", "bco-2pt", "bco-scs"} <= {e.name for e in registered()}


def test_audit_pairs_differ_in_one_user_at_the_extremes():
    pol = LDPTwoPoint(d=2, horizon=16)
    d0, d1 = audit_pair(pol, 16, 5)
    assert np.array_equal(np.nonzero(np.any(d0.c != d1.c, axis=1))[0], [5])
    assert d1.lipschitz(1.0) == pytest.approx(1.0) and d1.bound(1.0) <= pol.loss_bound
    one = LDPFKM(d=2, horizon=16)
    d0, d1 = audit_pair(one, 16, 0)
    assert d0.a[0] == -1 and d1.a[0] == 1 and not np.any(d0.a[1:]) and not np.any(d1.a[1:])


# ---- utility: regret falls as eps grows ---------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name, runs", [("ldp-bco-fkm", 1000), ("ldp-bco-2pt", 400), ("ldp-bco-scs", 400)])
def test_regret_decreases_in_epsilon(name, runs):
    """Mean regret at eps = 0.5 above eps = 4 by more than 4 (unpaired) standard errors; FKM's gap is the smallest
    (its black box barely moves at T = 400 when tuned for the noisy loss range, reports/ldp_bandits.md), hence more runs."""
    losses = LossSequence.adversarial(2, 400, seed=2)
    regs = {}
    for eps in (0.5, 4.0):
        pol = make_policy(name, {"horizon": "400", "epsilon": str(eps)})
        regs[eps] = simulate_bco(pol, losses, runs, seed=9)["regret"]
    diff = regs[0.5].mean() - regs[4.0].mean()
    se = math.sqrt(regs[0.5].var(ddof=1) / runs + regs[4.0].var(ddof=1) / runs)
    assert diff / se > 4, (regs[0.5].mean(), regs[4.0].mean())


def test_python_api_takes_a_bco_class_or_instance():
    import dpaudit

    a = dpaudit.audit(LDPTwoPoint, protocol="local", runs=1000, horizon=8)
    assert a.verdict == "consistent" and 0 <= a.epsilon_lower <= 0.751
    with pytest.raises(DPAuditError, match="plays points of a convex body"):
        dpaudit.audit(LDPFKM(), protocol="view")
