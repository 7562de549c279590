"""The non-private baselines of Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized
Linear Contextual Bandits": GLOC (Jun et al. 2017) and RS-GLinUCB (Sawarni et al. 2024).

Known answers (the A-norm projection and the GLM estimate against scipy, GLOC's width at t = 0, a
per-run reference of GLOC's ONS learner), learning measured statistically against uniform play,
RS-GLinUCB's switch counts against their deterministic bounds and their growth in T, bad input,
determinism by seed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from dpaudit.environments import GLMContextualBandit
from dpaudit.errors import DPAuditError
from dpaudit.policies import make_policy, registered
from dpaudit.policies.glm import glm_mle, link_mean, min_slope, project_ball_in_norm

NAMES = ["glm-gloc", "rs-glinucb"]


def test_registered_non_private_glm_family():
    entries = {e.name: e for e in registered()}
    for name in NAMES:
        assert entries[name].family == "glm"
        assert make_policy(name, {}).claim is None


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_deterministic_by_seed(name, link, contextual_regret):
    env = GLMContextualBandit(n_arms=5, dim=3, link=link, S=2.0)
    pol = make_policy(name, {"n_arms": 5, "dim": 3, "horizon": 150, "link": link})
    a, b, c = (contextual_regret(pol, env, 6, 150, s) for s in (0, 0, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_learns_far_below_uniform_play(name, link, contextual_regret):
    """40 runs, T = 400, d = 3, K = 5, S = 3: regret below 0.5 x uniform's, and the one-sided Welch test
    of 'no better than half of uniform' rejects at 1e-3."""
    env = GLMContextualBandit(n_arms=5, dim=3, link=link, S=3.0)
    pol = make_policy(name, {"n_arms": 5, "dim": 3, "horizon": 400, "link": link, "theta_bound": 3.0})
    ours = contextual_regret(pol, env, 40, 400, 4)
    rand = contextual_regret(None, env, 40, 400, 4)
    assert ours.mean() < 0.5 * rand.mean()
    assert stats.ttest_ind(ours, 0.5 * rand, equal_var=False, alternative="less").pvalue < 1e-3


# ---- known answers ----------------------------------------------------------------------------------

def test_projection_in_a_norm_matches_scipy():
    rng = np.random.default_rng(0)
    n, d, S = 12, 3, 1.5
    M = rng.normal(size=(n, d, d))
    A = M @ np.swapaxes(M, 1, 2) + 0.3 * np.eye(d)
    theta = rng.normal(scale=2.0, size=(n, d))
    ours = project_ball_in_norm(theta, A, S)
    for i in range(n):
        f = lambda u: (u - theta[i]) @ A[i] @ (u - theta[i])  # noqa: E731
        con = {"type": "ineq", "fun": lambda u: S**2 - u @ u}
        ref = optimize.minimize(f, np.zeros(d), constraints=[con], method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert f(ours[i]) <= f(ref.x) + 1e-7
        assert np.linalg.norm(ours[i]) <= S + 1e-9
    inside = theta / (np.linalg.norm(theta, axis=1, keepdims=True) + 1) * 0.5
    assert np.array_equal(project_ball_in_norm(inside, A, S), inside)


@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_glm_mle_matches_scipy(link):
    """The quasi-likelihood sum m(x^T theta) - r x^T theta + lam/2 ||theta||^2, m' = mu, minimised by scipy."""
    rng = np.random.default_rng(1)
    n, m, d, lam = 3, 80, 3, 1.0
    X = rng.normal(size=(n, m, d)) / math.sqrt(d)
    R = (rng.random((n, m)) < 0.6).astype(float)
    w = (rng.random((n, m)) < 0.8).astype(float)
    ours = glm_mle(link, X, R, w, np.zeros((n, d)), lam, radius=100.0, iters=25)

    def prim(z):  # m(z) with m' = mu
        return np.logaddexp(0.0, z) if link == "logistic" else z * special.ndtr(z) + np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    for i in range(n):
        f = lambda th: np.sum(w[i] * (prim(X[i] @ th) - R[i] * (X[i] @ th))) + lam / 2 * th @ th  # noqa: E731
        g = lambda th: X[i].T @ (w[i] * (link_mean(link, X[i] @ th) - R[i])) + lam * th  # noqa: E731
        ref = optimize.minimize(f, np.zeros(d), jac=g, method="BFGS", options={"gtol": 1e-12})
        assert np.allclose(ours[i], ref.x, atol=1e-6)


def test_gloc_width_at_the_start_is_alpha_of_the_initial_ons_bound():
    pol = make_policy("glm-gloc", {"n_arms": 3, "dim": 2, "horizon": 10, "theta_bound": 2.0, "delta": 0.05})
    pol.reset(2, np.random.default_rng(0))
    k, R, S, lam, dl = min_slope("logistic", 2.0), 0.5, 2.0, 1.0, 0.05
    assert k == pytest.approx(special.expit(2.0) * (1 - special.expit(2.0)))
    B = 2 * k * S**2 * lam
    alpha = 1 + 4 * B / k + 8 * R**2 / k**2 * math.log(2 / dl * math.sqrt(1 + 2 * B / k + 4 * R**4 / (k**4 * dl**2)))
    assert np.allclose(pol.width(), math.sqrt(alpha + lam * S**2))


def test_gloc_matches_a_per_run_reference_of_ons_glm():
    """Three runs of the batched policy against a plain loop of Jun et al.'s Alg. 1 + 2 (scipy projection)."""
    T, K, d, S = 40, 4, 2, 1.0
    env = GLMContextualBandit(n_arms=K, dim=d, link="probit", S=1.5)
    env.reset(3, np.random.default_rng(9))
    pol = make_policy("glm-gloc", {"n_arms": K, "dim": d, "horizon": T, "link": "probit", "theta_bound": S, "beta": 0.5})
    pol.reset(3, np.random.default_rng(0))
    kappa = min_slope("probit", S)
    ref = [dict(A=np.eye(d), V=np.eye(d), th=np.zeros(d), u=np.zeros(d), zz=0.0, B=2 * kappa * S**2) for _ in range(3)]
    for t in range(T):
        x = env.arms(t)
        a = pol.act(t, x)
        for i, s in enumerate(ref):
            Vinv = np.linalg.inv(s["V"])
            th_hat = Vinv @ s["u"]
            w = np.sqrt(np.einsum("kd,de,ke->k", x[i], Vinv, x[i]))
            assert a[i] == np.argmax(x[i] @ th_hat + 0.5 * pol.width()[i] * w)
        r = env.rewards(t, a)
        for i, s in enumerate(ref):
            xi = x[i, a[i]]
            z = xi @ s["th"]
            s["u"] = s["u"] + z * xi
            s["zz"] += z * z
            s["V"] = s["V"] + np.outer(xi, xi)
            s["A"] = s["A"] + np.outer(xi, xi)
            g = link_mean("probit", z) - r[i]
            s["B"] += g * g * xi @ np.linalg.solve(s["A"], xi) / (2 * kappa)
            step = s["th"] - g / kappa * np.linalg.solve(s["A"], xi)
            if np.linalg.norm(step) > S:
                f = lambda u, A=s["A"], c=step: (u - c) @ A @ (u - c)  # noqa: E731
                con = {"type": "ineq", "fun": lambda u: S**2 - u @ u}
                step = optimize.minimize(f, step * S / np.linalg.norm(step), constraints=[con], method="SLSQP",
                                         options={"ftol": 1e-15, "maxiter": 500}).x
            s["th"] = step
        pol.observe(t, a, r)
        for i, s in enumerate(ref):
            assert np.allclose(pol.theta[i], s["th"], atol=1e-5) and pol.B[i] == pytest.approx(s["B"], rel=1e-6)


# ---- RS-GLinUCB's switches -------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_rs_glinucb_switch_counts_within_their_bounds_and_logarithmic(link):
    """Stochastic contexts: n_I and n_II never exceed switch_bounds(); n_II grows by at most d log2(8) + 1
    from T = 500 to T = 4000 (a doubling determinant), while the rounds grow eightfold."""
    env = GLMContextualBandit(n_arms=10, dim=3, link=link, S=2.0)
    pol = make_policy("rs-glinucb", {"n_arms": 10, "dim": 3, "horizon": 4000, "link": link})
    env.reset(20, np.random.default_rng(2))
    pol.reset(20, np.random.default_rng(3), record=False)
    at500 = None
    for t in range(4000):
        x = env.arms(t)
        a = pol.act(t, x)
        pol.observe(t, a, env.rewards(t, a))
        if t == 499:
            at500 = pol.updates.copy()
            n1, n2 = pol.switch_bounds(500)
            assert pol.warmups.max() <= n1 and at500.max() <= n2
    n1, n2 = pol.switch_bounds(4000)
    assert pol.warmups.max() <= n1 and pol.updates.max() <= n2
    assert pol.updates.min() >= 3  # it does refit (the bound is not met by never updating)
    assert np.all(pol.updates - at500 <= 3 * math.log2(8) + 1)
    assert pol.warmups.min() >= 1


def test_rs_glinucb_switch_bounds_hold_for_adversarial_contexts():
    """A fixed basis (every context the same every round) and rewards always 1: still within the bounds."""
    d, K, T = 3, 3, 600
    pol = make_policy("rs-glinucb", {"n_arms": K, "dim": d, "horizon": T, "gamma_scale": 0.1})
    pol.reset(4, np.random.default_rng(0))
    X = np.broadcast_to(np.eye(d)[None], (4, K, d)).copy()
    for t in range(T):
        a = pol.act(t, X)
        pol.observe(t, a, np.ones(4))
    n1, n2 = pol.switch_bounds()
    assert 1 <= pol.warmups.max() <= n1 and pol.updates.max() <= n2


# ---- bad input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,params,match", [
    ("glm-gloc", {"link": "identity"}, "unknown link"),
    ("glm-gloc", {"beta": -1}, "beta"),
    ("glm-gloc", {"delta": 1.0}, "delta"),
    ("glm-gloc", {"theta_bound": 0}, "theta_bound"),
    ("rs-glinucb", {"gamma_scale": 0}, "gamma_scale"),
    ("rs-glinucb", {"mle_iters": 0}, "mle_iters"),
    ("rs-glinucb", {"lam": -1}, "lam"),
    ("rs-glinucb", {"n_arms": 1}, "n_arms"),
])
def test_bad_parameters(name, params, match):
    with pytest.raises(DPAuditError, match=match):
        make_policy(name, params)


@pytest.mark.parametrize("name", NAMES)
def test_acting_past_the_horizon_is_refused(name):
    pol = make_policy(name, {"n_arms": 2, "dim": 2, "horizon": 8})
    pol.reset(3, np.random.default_rng(0))
    # contexts and rewards: tests/test_glm_policies.py::test_bad_contexts_and_rewards covers every GLM policy
    pol.act(0, np.zeros((3, 2, 2)))
    with pytest.raises(DPAuditError, match="horizon"):
        pol.act(8, np.zeros((3, 2, 2)))
