"""GOPE family: design, phase lengths (Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits",
Eq. 4; Azize & Basu 2023b, "Rényi Differentially Private Bandits", Eq. 8), elimination, noise in the ledger,
forgetting, the phase-level fast path against the per-step path, regret, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpaudit.accountants import RDP, ZCDP
from dpaudit.errors import DPAuditError
from dpaudit.environments import Environment, LinearBandit
from dpaudit.policies import make_policy
from dpaudit.policies.gope import AdaCGOPE, AdaRGOPE, GOPE, g_optimal_design


class FixedLinear(Environment):
    """A fixed (T, K) reward table with fixed action features: the audit-style input for GOPE."""

    supports_segments = True
    regret_kind = None

    def __init__(self, actions: np.ndarray, table: np.ndarray) -> None:
        self.actions = np.asarray(actions, float)
        self.table = np.asarray(table, float)
        self.horizon, self.n_arms = self.table.shape
        self.dim = self.actions.shape[1]
        self.prefix = np.vstack([np.zeros(self.n_arms), np.cumsum(self.table, axis=0)])

    def arms(self, t):
        return np.broadcast_to(self.actions, (self.n_runs, self.n_arms, self.dim))

    def rewards(self, t, actions):
        return self.table[t][actions]

    def segment_sums(self, runs, arms, start, length):
        return self.prefix[start + length, arms] - self.prefix[start, arms]


def run_steps(policy, env, T, n, seed=0, record=True):
    """Per-step loop (what dpaudit.simulate's step path does); returns actions (n, T)."""
    e_ss, p_ss = np.random.SeedSequence(seed).spawn(2)
    env.reset(n, np.random.default_rng(e_ss))
    policy.reset(n, np.random.default_rng(p_ss), record=record)
    acts = np.empty((n, T), dtype=np.int64)
    for t in range(T):
        a = policy.act(t, env.arms(t))
        acts[:, t] = a
        policy.observe(t, a, env.rewards(t, a))
    return acts


def run_phases(policy, env, T, n, seed=0, record=True):
    """Phase-level loop with plan()/complete() and segment sums (the episode path's protocol)."""
    e_ss, p_ss = np.random.SeedSequence(seed).spawn(2)
    env.reset(n, np.random.default_rng(e_ss))
    policy.reset(n, np.random.default_rng(p_ss), record=record)
    policy.set_arms(env.arms(0))
    acts = np.full((n, T), -1, dtype=np.int64)
    live = np.ones(n, dtype=bool)
    while live.any():
        idx = np.flatnonzero(live)
        start, arms, lengths = policy.plan()
        s, A, L = start[idx], arms[idx], lengths[idx]
        seg_start = s[:, None] + np.cumsum(L, axis=1) - L
        seg_len = np.clip(np.minimum(L, T - seg_start), 0, None)
        sums = env.segment_sums(idx, A, seg_start, seg_len).reshape(A.shape)
        for i, r in enumerate(idx):
            for j in range(A.shape[1]):
                acts[r, seg_start[i, j]: seg_start[i, j] + seg_len[i, j]] = A[i, j]
        end = s + L.sum(axis=1)
        full = end <= T
        if full.any():
            policy.complete(idx[full], sums[full])
        live[idx[end >= T]] = False
    return acts


def c_eq4(ell, d, K, delta, rho=None):
    """Azize & Basu (2023a), Eq. (4), written out independently of the implementation."""
    beta = 2.0**-ell
    dkl = delta / (K * ell * (ell + 1))
    c = 8 * d / beta**2 * math.log(4 / dkl)
    if rho is not None:
        f = d + 2 * math.sqrt(d * math.log(2 / dkl)) + 2 * math.log(2 / dkl)
        c += 2 * d / beta * math.sqrt(2 / rho * f)
    return c


def t_eq8(pi, ell, d, K, delta, alpha, eps):
    """Azize & Basu (2023b), Eq. (8) per arm."""
    beta = 2.0**-ell
    L = math.log(4 * K * ell * (ell + 1) / delta)
    raw = 8 * d * pi / beta**2 * L + 2 * d * pi / beta * math.sqrt(2 * alpha / eps * d * (d + 1) * L)
    return np.where(pi > 0, np.ceil(raw), 0).astype(int)


# ---- design ------------------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=3, max_value=12), st.integers(min_value=1, max_value=4), st.integers(0, 10**6))
def test_design_meets_kiefer_wolfowitz(m, d, seed):
    X = np.random.default_rng(seed).standard_normal((m, d))
    w = g_optimal_design(X, tol=1e-6)
    assert np.all(w >= 0) and abs(w.sum() - 1) < 1e-12
    r = np.linalg.matrix_rank(X)
    V = X.T @ (w[:, None] * X)
    g2 = np.einsum("id,de,ie->i", X, np.linalg.pinv(V), X)
    # Kiefer-Wolfowitz: the G-optimal value is the dimension of the span
    assert g2.max() <= r * (1 + 1e-6) + 1e-9
    assert g2.max() >= r * (1 - 1e-9)


def test_design_on_non_spanning_and_single_sets():
    X = np.array([[1.0, 0, 0], [0, 1.0, 0], [0.6, 0.8, 0]])  # spans a plane in R^3
    w = g_optimal_design(X, tol=1e-8)
    g2 = np.einsum("id,de,ie->i", X, np.linalg.pinv(X.T @ (w[:, None] * X)), X)
    assert g2.max() == pytest.approx(2.0, rel=1e-6)
    assert np.array_equal(g_optimal_design(X[:1]), np.ones(1))


# ---- phase lengths ---------------------------------------------------------------------------


def test_adac_phase_lengths_follow_eq4_and_releases_end_phases():
    env = LinearBandit(noise="bernoulli", instance_seed=3)
    K, d, delta, rho = 10, 3, 0.001, 0.5
    pol = AdaCGOPE(rho=rho, delta=delta)
    T = 6000
    run_steps(pol, env, T, 3)
    for ell in (1, 2, 3):
        assert pol.phase_constant(ell) == pytest.approx(c_eq4(ell, d, K, delta, rho), rel=1e-12)
    full = np.ones(K, dtype=bool)
    pi = pol.design(env.actions, full)
    plan = pol.phase_plan(env.actions, full, 1)
    assert np.array_equal(plan.counts, np.where(pi > 0, np.ceil(c_eq4(1, d, K, delta, rho) * pi), 0))
    # the first release of every run is at the last round of phase 1
    first = pol.ledger.releases[0]
    assert first.step == plan.counts.sum() - 1 and set(first.runs.tolist()) == {0, 1, 2}


def test_adar_phase_lengths_follow_eq8():
    env = LinearBandit(noise="bernoulli", instance_seed=4)
    K, d, delta, alpha, eps = 10, 3, 0.01, 3.0, 0.7
    pol = AdaRGOPE(alpha=alpha, epsilon=eps, delta=delta)
    run_steps(pol, env, 10, 2)
    full = np.ones(K, dtype=bool)
    pi = pol.design(env.actions, full)
    for ell in (1, 2, 4):
        assert np.array_equal(pol.phase_plan(env.actions, full, ell).counts, t_eq8(pi, ell, d, K, delta, alpha, eps))


def test_nonprivate_gope_uses_eq4_without_the_private_term():
    pol = GOPE(delta=0.05)
    for ell in (1, 3):
        assert pol.phase_constant(ell) == pytest.approx(c_eq4(ell, 3, 10, 0.05), rel=1e-12)
    assert AdaCGOPE(rho=1.0).phase_constant(2) > GOPE().phase_constant(2)


# ---- elimination -----------------------------------------------------------------------------


def test_elimination_with_exact_rewards_keeps_exactly_the_near_optimal_arms():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((6, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    theta = np.array([0.9, 0.3])
    T = 2000
    env = FixedLinear(X, np.tile(X @ theta, (T, 1)))  # noiseless rewards: theta_hat = theta exactly
    pol = GOPE(n_arms=6, dim=2)
    run_steps(pol, env, T, 2, record=False)
    assert pol.ell[0] >= 2
    np.testing.assert_allclose(pol.theta[0], theta, atol=1e-10)
    mu = X @ theta
    # after phase 1 (beta = 1/2), arms with gap > 2 beta = 1 are gone; later phases tighten.
    expect = np.ones(6, dtype=bool)
    for ell in range(1, int(pol.ell[0])):
        expect &= mu.max() - mu <= 2 * 2.0**-ell + 1e-12
    assert np.array_equal(pol.active[0], expect)


def test_private_elimination_uses_the_released_estimate():
    env = LinearBandit(noise="bernoulli", instance_seed=1)
    pol = AdaCGOPE(rho=0.05)
    run_steps(pol, env, 2500, 40, record=False)
    done = pol.ell == 2
    assert done.any()
    vals = np.einsum("kd,nd->nk", env.actions, pol.theta)
    expect = vals.max(axis=1, keepdims=True) - vals <= 2 * 0.5
    assert np.array_equal(pol.active[done], expect[done])


# ---- noise in the ledger ---------------------------------------------------------------------


@pytest.mark.slow
def test_adac_noise_scale_and_effective_covariance_match_app_dc():
    rho, d, K = 0.3, 3, 10
    env = LinearBandit(noise="bernoulli", instance_seed=2)
    pol = AdaCGOPE(rho=rho)
    full = np.ones(K, dtype=bool)
    T = int(pol.phase_plan(env.actions, full, 1).counts.sum())
    n = 3000
    run_steps(pol, env, T, n)
    (rel,) = pol.ledger.releases
    assert rel.sensitivity == 2.0
    np.testing.assert_allclose(rel.noise.scale, math.sqrt(2 / rho))  # sigma = 2 / sqrt(2 rho)
    plan = pol.phase_plan(env.actions, full, 1)
    # App. D-C: theta_tilde - theta_hat ~ N(0, (2/rho) g^2 V^-1); Alg. 2's 2d/(rho c) is the same up to rounding
    c = c_eq4(1, d, K, 0.001, rho)
    assert plan.g**2 <= d * (1 + 1e-4) / c and plan.g**2 >= 0.9 * d / c
    diff = plan.g * (rel.value - rel.centre) @ plan.V_pinv_sqrt.T
    cov = np.cov(diff.T)
    target = 2 / rho * plan.g**2 * plan.V_pinv
    assert np.abs(cov - target).max() <= 0.12 * np.abs(target).max()
    # the coefficient of a round is V^-1/2 a / g: its norm is at most 1 (sensitivity 2 for |r| <= 1)
    norms = np.linalg.norm(rel.fed.coef, axis=1)
    assert norms.max() <= 1 + 1e-9 and norms.max() >= 0.99
    # centre = V^-1/2 sum a r / g, recomputed from the per-round coefficients and rewards is linear
    assert rel.fed.rounds.max() == T - 1 and np.bincount(rel.fed.pos).tolist() == [T] * n


def test_adar_noise_scale_and_coefficients():
    alpha, eps = 4.0, 0.5
    env = LinearBandit(noise="bernoulli", instance_seed=2)
    pol = AdaRGOPE(alpha=alpha, epsilon=eps)
    T = int(pol.phase_plan(env.actions, np.ones(10, dtype=bool), 1).counts.sum())
    run_steps(pol, env, T, 200)
    (rel,) = pol.ledger.releases
    np.testing.assert_allclose(rel.noise.scale, math.sqrt(2 * alpha / eps))  # N(0, 2 alpha / eps), Azize & Basu 2023b, Alg. 3
    coef = rel.fed.coef
    assert np.all(np.sort(coef, axis=1)[:, -1] == 1) and np.all(coef.sum(axis=1) == 1)
    z = (rel.value - rel.centre) / math.sqrt(2 * alpha / eps)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3


def test_forgetting_each_round_feeds_exactly_one_release():
    env = LinearBandit(noise="bernoulli", instance_seed=5)
    for pol in (AdaCGOPE(rho=2.0), AdaRGOPE(alpha=2, epsilon=2)):
        T = 9000
        run_steps(pol, env, T, 4)
        usage = pol.ledger.round_usage(T)
        assert usage.max() == 1
        for i in range(4):
            assert usage[i, : pol.start[i]].min() == 1 and usage[i, pol.start[i]:].max() == 0


# ---- fast path ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [AdaCGOPE, AdaRGOPE, GOPE])
def test_phase_path_gives_identical_trajectories_on_fixed_inputs(cls):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((5, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    T = 12000
    table = np.clip(X @ np.array([0.7, -0.5]) + 0.4 * rng.standard_normal((T, 5)), -1, 1)
    kw = {"n_arms": 5, "dim": 2}
    a, b = cls(**kw), cls(**kw)
    step_acts = run_steps(a, FixedLinear(X, table), T, 6, seed=3)
    fast_acts = run_phases(b, FixedLinear(X, table), T, 6, seed=3)
    assert np.array_equal(step_acts, fast_acts)  # the view is identical
    # estimates agree up to summation order (running sums vs prefix-sum differences)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-9, atol=1e-12)
    assert np.array_equal(a.active, b.active) and np.array_equal(a.ell, b.ell)
    if cls is not GOPE:
        assert len(a.ledger) > 0
        va = {(int(r.step), int(run)): v for r in a.ledger.releases for run, v in zip(r.runs, r.value)}
        vb = {(int(r.step), int(run)): v for r in b.ledger.releases for run, v in zip(r.runs, r.value)}
        assert va.keys() == vb.keys()
        for k in va:
            np.testing.assert_allclose(va[k], vb[k], rtol=1e-9, atol=1e-12)


def test_phase_path_has_the_per_step_distribution():
    env = LinearBandit(noise="gaussian", instance_seed=8)
    T = 3000
    a, b = GOPE(), GOPE()
    n = 300
    run_steps(a, env, T, n, seed=1, record=False)
    run_phases(b, env, T, n, seed=2, record=False)
    for j in range(3):
        assert stats.ks_2samp(a.theta[:, j], b.theta[:, j]).pvalue > 1e-3
    # and the test has power: a shifted estimate is detected
    assert stats.ks_2samp(a.theta[:, 0], b.theta[:, 0] + 0.3).pvalue < 1e-3


# ---- regret ----------------------------------------------------------------------------------


def pseudo_regret(acts, env):
    gap = env.mu.max() - env.mu
    return gap[acts].sum(axis=1)


def test_regret_sanity_private_vs_nonprivate():
    env = LinearBandit(noise="bernoulli", instance_seed=0)
    T, n = 60000, 30
    reg = {}
    for name, pol in {"gope": GOPE(), "big-rho": AdaCGOPE(rho=100.0), "small-rho": AdaCGOPE(rho=0.001),
                      "adar": AdaRGOPE(alpha=2, epsilon=100.0)}.items():
        reg[name] = pseudo_regret(run_phases(pol, env, T, n, record=False), env).mean()
    uniform = T * (env.mu.max() - env.mu.mean())
    assert reg["gope"] < 0.2 * uniform
    assert reg["big-rho"] < 1.3 * reg["gope"]
    assert reg["adar"] < 1.5 * reg["gope"]
    assert reg["small-rho"] > 1.5 * reg["gope"]


# ---- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: AdaCGOPE(rho=0),
        lambda: AdaCGOPE(rho=-1),
        lambda: AdaRGOPE(alpha=1.0),
        lambda: AdaRGOPE(alpha=0.5),
        lambda: AdaRGOPE(epsilon=0),
        lambda: GOPE(n_arms=1),
        lambda: GOPE(delta=1.5),
        lambda: GOPE(dim=0),
    ],
)
def test_bad_parameters(build):
    with pytest.raises(DPAuditError):
        build()


def test_bad_inputs_while_running():
    env = LinearBandit(noise="gaussian")
    pol = AdaCGOPE(rho=1)
    pol.reset(2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="shape"):
        pol.act(0, np.zeros((2, 10, 4)))
    with pytest.raises(DPAuditError, match="None"):
        pol.act(0, None)
    env.reset(2, np.random.default_rng(0))
    a = pol.act(0, env.arms(0))
    with pytest.raises(DPAuditError, match="outside"):
        pol.observe(0, a, np.array([0.5, 1.5]))
    with pytest.raises(DPAuditError, match="fixed action set"):
        pol.act(1, env.arms(0) * 0.5)
    big = AdaCGOPE(rho=1)
    big.reset(1, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="norm"):
        big.act(0, 2 * env.actions[None])
    fresh = GOPE()
    fresh.reset(1, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="set_arms"):
        fresh.plan()


def test_registry_and_claims():
    p = make_policy("adac-gope", {"rho": "0.25"})
    assert isinstance(p, AdaCGOPE) and p.claim == ZCDP(0.25)
    q = make_policy("adar-gope", {"alpha": "3", "epsilon": "0.5"})
    assert q.claim == RDP.point(3.0, 0.5)
    assert make_policy("gope").claim is None
