"""OFUL family: the rarely-switching determinant rule, the estimate and width, noise in the ledger
(Azize & Basu 2023a, "Concentrated Differential Privacy for Bandits", Alg. 3; Azize & Basu 2023b, "Rényi
Differentially Private Bandits", Alg. 4), forgetting, regret, bad input, and the batched linear algebra."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpaudit.accountants import RDP, ZCDP
from dpaudit.errors import DPAuditError
from dpaudit.environments import ContextualLinearBandit
from dpaudit.policies import make_policy
from dpaudit.policies.oful import OFUL, RSOFUL, AdaCOFUL, AdaROFUL, batched_det, batched_inv, smallest_eigenvalue


def drive(policy, env, T, n, seed=0, record=True, watch=None):
    """Per-step loop; ``watch(t, policy, arms, actions, rewards)`` sees every step after act."""
    e_ss, p_ss = np.random.SeedSequence(seed).spawn(2)
    env.reset(n, np.random.default_rng(e_ss))
    policy.reset(n, np.random.default_rng(p_ss), record=record)
    regret = np.zeros(n)
    for t in range(T):
        arms = env.arms(t)
        a = policy.act(t, arms)
        mu = env.means(t)
        regret += mu.max(axis=1) - mu[np.arange(n), a]
        r = env.rewards(t, a)
        if watch is not None:
            watch(t, policy, arms, a, r)
        policy.observe(t, a, r)
    return regret


def bounded_env(seed=0):
    return ContextualLinearBandit(noise="bernoulli", normalize=True, instance_seed=seed)


# ---- the switching rule ---------------------------------------------------------------------


@pytest.mark.parametrize("cls,C", [(RSOFUL, 1.0), (RSOFUL, 0.3), (AdaCOFUL, 1.0)])
def test_switch_exactly_when_det_grows_by_one_plus_c(cls, C):
    lam, n = 0.1, 8
    pol = cls(C=C, lam=lam) if cls is RSOFUL else cls(rho=1.0, C=C, lam=lam)
    V = np.broadcast_to(lam * np.eye(3), (n, 3, 3)).copy()
    V_tau = V.copy()
    switches = []

    def watch(t, p, arms, a, r):
        expect = np.linalg.det(V) > (1 + C) * np.linalg.det(V_tau)  # Line 6 with V_{t-1}, recomputed here
        assert np.array_equal(p.tau == t, expect | (t == 0))
        V_tau[expect] = V[expect]
        x = arms[np.arange(n), a]
        V[:] += x[:, :, None] * x[:, None, :]
        switches.append(expect.sum())

    drive(pol, bounded_env(), 400, n, watch=watch)
    total = int(np.sum(switches))
    # det V_t <= (lambda + t/d)^d, so at most d log(1 + t/(lambda d)) / log(1 + C) switches per run (App. F, Step 5)
    assert 0 < total <= n * (3 * math.log(1 + 400 / (lam * 3)) / math.log(1 + C) + 1)


def test_oful_refreshes_every_step_and_matches_least_squares():
    n, lam = 5, 0.1
    pol = OFUL(lam=lam)
    V = np.broadcast_to(lam * np.eye(3), (n, 3, 3)).copy()
    b = np.zeros((n, 3))

    def watch(t, p, arms, a, r):
        assert np.all(p.tau == t)
        np.testing.assert_allclose(p.theta, np.linalg.solve(V, b[:, :, None])[:, :, 0], rtol=1e-8, atol=1e-10)
        beta = np.sqrt(2 * math.log(1 / 0.001) + np.linalg.slogdet(V)[1] - 3 * math.log(lam)) + math.sqrt(lam)
        np.testing.assert_allclose(p.beta, beta, rtol=1e-10)  # Azize & Basu 2023a, App. F, Thm 14 Step 4 (S = 1)
        ucb = np.einsum("nkd,nd->nk", arms, p.theta) + beta[:, None] * np.sqrt(
            np.einsum("nkd,nde,nke->nk", arms, np.linalg.inv(V), arms))
        assert np.array_equal(a, ucb.argmax(axis=1))
        x = arms[np.arange(n), a]
        V[:] += x[:, :, None] * x[:, None, :]
        b[:] += x * r[:, None]

    drive(pol, ContextualLinearBandit(instance_seed=2), 150, n, watch=watch)


# ---- private releases -------------------------------------------------------------------------


@pytest.mark.parametrize("make,sigma", [
    (lambda: AdaCOFUL(rho=0.2), math.sqrt(2 / 0.2)),  # Y ~ N(0, 2/rho I), Azize & Basu 2023a, Alg. 3 Line 7
    (lambda: AdaROFUL(alpha=3.0, epsilon=0.4), math.sqrt(2 * 3.0 / 0.4)),  # N(0, 2 alpha/eps I), Azize & Basu 2023b, Alg. 4
])
def test_releases_are_episode_sums_with_the_papers_noise(make, sigma):
    n, T = 6, 300
    pol = make()
    feats, rews = [], []

    def watch(t, p, arms, a, r):
        feats.append(arms[np.arange(n), a].copy())
        rews.append(r.copy())

    drive(pol, bounded_env(1), T, n, watch=watch)
    F, R = np.stack(feats, 1), np.stack(rews, 1)  # (n, T, d), (n, T)
    assert len(pol.ledger) > 0
    prev = np.zeros(n, dtype=np.int64)
    noisy = np.zeros((n, 3))
    for rel in pol.ledger.releases:
        np.testing.assert_allclose(rel.noise.scale, sigma)
        assert rel.sensitivity == 2.0
        for i, run in enumerate(rel.runs):
            rounds = rel.fed.rounds[rel.fed.pos == i]
            assert rounds.tolist() == list(range(prev[run], rel.step))  # the episode [tau, t)
            np.testing.assert_allclose(rel.fed.coef[rel.fed.pos == i], F[run, rounds])  # coef of round s is a_s
            np.testing.assert_allclose(rel.centre[i], (F[run, rounds] * R[run, rounds, None]).sum(0), atol=1e-12)
            prev[run] = rel.step
            noisy[run] += rel.value[i]
    # theta_tau = V_tau^{-1} (sum a_s r_s + sum_m Y_m), Line 8
    np.testing.assert_allclose(pol.theta, np.einsum("nde,ne->nd", pol.W_tau, noisy), rtol=1e-9, atol=1e-12)
    z = np.concatenate([(r.value - r.centre).ravel() for r in pol.ledger.releases]) / sigma
    assert stats.kstest(z, "norm").pvalue > 1e-3


def test_forgetting_each_round_feeds_exactly_one_release():
    T, n = 500, 10
    pol = AdaCOFUL(rho=1.0)
    drive(pol, bounded_env(3), T, n)
    usage = pol.ledger.round_usage(T)
    assert usage.max() == 1
    for i in range(n):
        assert usage[i, : pol.tau[i]].min() == 1 and usage[i, pol.tau[i]:].max() == 0


def test_width_adds_the_privacy_term():
    pol = AdaCOFUL(rho=0.5)
    drive(pol, bounded_env(4), 200, 4, record=False)
    base = np.sqrt(2 * math.log(1000) + pol.logdet_tau - 3 * math.log(0.1)) + math.sqrt(0.1)
    ell = pol.n_switches
    f = 3 + 2 * np.sqrt(3 * np.log(ell * (ell + 1) / 0.001)) + 2 * np.log(ell * (ell + 1) / 0.001)
    lam_min = np.linalg.eigvalsh(np.linalg.inv(pol.W_tau))[:, 0]
    np.testing.assert_allclose(pol.beta, base + math.sqrt(2 / 0.5) * np.sqrt(ell * f / lam_min), rtol=1e-8)


# ---- regret -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_regret_sanity_private_vs_nonprivate():
    T, n = 1500, 40
    env = bounded_env(5)
    reg = {name: drive(p, env, T, n, seed=9, record=False).mean() for name, p in {
        "rs": RSOFUL(), "oful": OFUL(), "big": AdaCOFUL(rho=1e4), "small": AdaCOFUL(rho=1e-3),
        "adar": AdaROFUL(alpha=2.0, epsilon=1e4)}.items()}
    random_regret = drive(_Random(), env, T, n, seed=9).mean()
    assert reg["rs"] < 0.5 * random_regret and reg["oful"] < 0.5 * random_regret
    assert reg["big"] < 1.3 * reg["rs"] + 5 and reg["adar"] < 1.3 * reg["rs"] + 5
    assert reg["small"] > 1.5 * reg["rs"]


class _Random:
    n_arms = 10

    def reset(self, n_runs, rng, record=True):
        self.n, self.rng = n_runs, rng

    def act(self, t, arms):
        return self.rng.integers(0, 10, self.n)

    def observe(self, t, a, r):
        pass


# ---- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("build", [
    lambda: AdaCOFUL(rho=0), lambda: AdaCOFUL(rho=-0.1), lambda: AdaROFUL(alpha=1.0),
    lambda: AdaROFUL(epsilon=-1), lambda: RSOFUL(n_arms=1), lambda: RSOFUL(lam=0),
    lambda: RSOFUL(C=-1), lambda: OFUL(delta=0), lambda: OFUL(dim=0),
])
def test_bad_parameters(build):
    with pytest.raises(DPAuditError):
        build()


def test_bad_inputs_while_running():
    pol = AdaCOFUL(rho=1.0)
    pol.reset(2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="shape"):
        pol.act(0, np.zeros((2, 10, 2)))
    with pytest.raises(DPAuditError, match="None"):
        pol.act(0, None)
    with pytest.raises(DPAuditError, match="norm"):
        pol.act(0, np.full((2, 10, 3), 1.0))  # norm sqrt(3) > feature_bound = 1
    x = np.full((2, 10, 3), 0.5)
    a = pol.act(0, x)
    with pytest.raises(DPAuditError, match="outside"):
        pol.observe(0, a, np.array([0.0, -1.2]))
    with pytest.raises(DPAuditError, match="differ"):
        pol.observe(0, (a + 1) % 10, np.array([0.0, 0.1]))
    plain = RSOFUL()
    plain.reset(1, np.random.default_rng(0))
    plain.observe(0, plain.act(0, np.full((1, 10, 3), 2.0)), np.array([5.0]))  # non-private: no bound


def test_registry_and_claims():
    assert make_policy("adac-oful", {"rho": "0.5", "C": "2"}).claim == ZCDP(0.5)
    assert make_policy("adar-oful", {"alpha": "2", "epsilon": "1"}).claim == RDP.point(2.0, 1.0)
    assert make_policy("rs-oful").claim is None and make_policy("oful").claim is None


# ---- batched linear algebra -------------------------------------------------------------------


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 5), st.integers(0, 10**6))
def test_batched_det_and_inv_match_numpy(d, seed):
    A = np.random.default_rng(seed).standard_normal((7, d, d))
    V = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(d)
    np.testing.assert_allclose(batched_det(V), np.linalg.det(V), rtol=1e-9)
    np.testing.assert_allclose(batched_inv(V), np.linalg.inv(V), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(smallest_eigenvalue(V), np.linalg.eigvalsh(V)[:, 0], rtol=1e-6, atol=1e-9)
    # repeated eigenvalues (a multiple of the identity) take the closed form's special branch
    np.testing.assert_allclose(smallest_eigenvalue(np.broadcast_to(2.5 * np.eye(d), (2, d, d))), 2.5)


def test_packed_inverse_and_eigenvalue_are_the_unpacked_ones_bit_for_bit():
    """The switch's packed d = 3 formulas (and the fallback for other d) give exactly the values of
    batched_inv and smallest_eigenvalue on the full matrices, down to the last bit."""
    from dpaudit.policies.oful import _packed_inv, _packed_smallest_eigenvalue

    rng = np.random.default_rng(11)
    for d in (1, 2, 3, 4):
        iu = np.triu_indices(d)
        for n in (1, 2, 9, 300):
            A = rng.standard_normal((n, 4, d)) * 10.0 ** rng.uniform(-2, 2, (n, 1, 1))
            V = np.einsum("nsd,nse->nde", A, A) + 0.1 * np.eye(d)
            U = np.ascontiguousarray(V[:, iu[0], iu[1]].T)
            assert np.array_equal(_packed_inv(U, d, iu), batched_inv(V))
            assert np.array_equal(_packed_smallest_eigenvalue(U, d, iu), smallest_eigenvalue(V))
    iu = np.triu_indices(3)
    U = np.ascontiguousarray((2.5 * np.eye(3))[iu][:, None].repeat(2, axis=1))
    assert np.array_equal(_packed_smallest_eigenvalue(U, 3, iu), np.full(2, 2.5))


def test_stacked_d3_helpers_are_the_unpacked_ones_bit_for_bit():
    """The switch's stacked d = 3 helpers (one gather for all cofactors) give exactly the values of
    batched_det, batched_inv and smallest_eigenvalue on the full matrices, down to the last bit, on random matrices over many
    magnitudes, near-singular ones, multiples of the identity (lambda_min's p = 0 branch) and one run."""
    from dpaudit.policies.oful import _SYM_PERM, _packed_det3, _sym_inv3, _sym_smallest_eigenvalue3, batched_det

    rng = np.random.default_rng(12)
    iu = np.triu_indices(3)
    cases = []
    for n in (1, 2, 7, 64, 1000):
        A = rng.standard_normal((n, rng.integers(1, 6), 3)) * 10.0 ** rng.uniform(-3, 3, (n, 1, 1))
        cases.append(np.einsum("nsd,nse->nde", A, A) + 10.0 ** rng.uniform(-3, 1, (n, 1, 1)) * np.eye(3))
    x = rng.standard_normal((50, 3))
    cases.append(np.einsum("nd,ne->nde", x, x) + 1e-9 * np.eye(3))  # rank one plus a tiny ridge
    cases.append(np.concatenate([np.broadcast_to(c * np.eye(3), (1, 3, 3)) for c in (0.1, 2.5, 1e6)]))  # p = 0
    for V in cases:
        U = np.ascontiguousarray(V[:, iu[0], iu[1]].T)
        det = batched_det(V)
        assert np.array_equal(_packed_det3(U), det)
        X = U[_SYM_PERM]
        W = _sym_inv3(X, det)
        assert W.flags.c_contiguous and np.array_equal(W, batched_inv(V))
        assert np.array_equal(_sym_smallest_eigenvalue3(X), smallest_eigenvalue(V))
    assert np.array_equal(_sym_smallest_eigenvalue3((2.5 * np.eye(3))[iu][_SYM_PERM][:, None].repeat(2, axis=1)),
                          np.full(2, 2.5))


class _FullRecompute:
    """The step without the index cache: every run's index recomputed at every step from the
    action set, the switch's inverse and lambda_min from the unpacked matrices and the chi2 radius
    computed afresh (the reference)."""

    def act(self, t, arms=None):
        self._ucb = None  # never reuse an index: every run's is computed afresh from the same arrays
        return super().act(t, arms)

    def _radius(self, ell):
        from dpaudit.policies.oful import chi2_radius

        return chi2_radius(self.dim, self.delta / (ell * (ell + 1.0)))

    def _switch(self, t, runs):
        """The switch without the stacked d = 3 path: the inverse and lambda_min of the unpacked
        matrices (their own determinants), every state array written by fancy index, the index's rows
        gathered back from ``M`` and ``beta``."""
        from dpaudit.policies.oful import _unpack

        U = self.U[:, runs]
        V = _unpack(U, self.dim, self._iu)
        W = batched_inv(V)
        if self._mech is None:
            b = self.sum_ar[runs]
            extra = 0.0
        else:
            ell = self.n_switches[runs] + 1
            self.n_switches[runs] = ell
            released = self._release(t, runs)
            b = self.noisy_sum[runs] + released
            self.noisy_sum[runs] = b
            self.sum_ar[runs] = 0.0
            lam_min = smallest_eigenvalue(V)
            sigma = float(self._mech.sigma)
            extra = sigma * np.sqrt(ell * self._radius(ell) / lam_min)
        theta = np.einsum("nde,ne->nd", W, b)
        self.theta[runs] = theta
        self.M[runs] = np.concatenate([W, theta[:, :, None]], axis=2)
        self.logdet_tau[runs] = self.logdet[runs]
        self.beta[runs] = self._beta_np(self.logdet[runs]) + extra
        self.tau[runs] = t
        self.pending[runs] = False
        return self.M[runs], self.beta[runs]

    def _observe(self, t, actions, rewards):
        super()._observe(t, actions, rewards)
        self.logdet = np.log(batched_det(self.V))  # det V_t of the unpacked matrices, not the packed rows
        self.pending = self.logdet > self.logdet_tau + self.log1p_C


@pytest.mark.parametrize("name", ["adac-oful", "adar-oful", "rs-oful", "oful"])
@pytest.mark.parametrize("shared", [True, False])
def test_cached_index_plays_the_reference_actions(name, shared):
    """The index cache (a shared action set: only switched runs recomputed) and the packed switch give the
    actions, releases and estimates of the full recomputation, bit for bit, over many runs and seeds;
    with per-run contexts (not shared) the cache is bypassed and the same holds."""
    from dpaudit.protocols import FixedActionSet, TableDP

    cls = type(make_policy(name))
    ref_cls = type("Ref", (_FullRecompute, cls), {})
    for seed in range(3):
        feats = np.random.default_rng([seed, 7]).standard_normal((10, 3))
        feats /= np.linalg.norm(feats, axis=1, keepdims=True)
        data = np.where(np.random.default_rng(seed).random((40, 10)) < 0.5, -1.0, 1.0)
        views, ledgers, thetas = [], [], []
        for c in (cls, ref_cls):
            pol = c()
            if shared:
                wrapped = FixedActionSet(pol, feats)
                views.append(TableDP().run(wrapped, data, 400, np.random.default_rng(seed)))
            else:
                ctx = np.random.default_rng([seed, 8]).standard_normal((40, 400, 10, 3))
                ctx /= np.linalg.norm(ctx, axis=-1, keepdims=True)
                pol.reset(400, np.random.default_rng(seed))
                acts = []
                for t in range(40):
                    a = pol.act(t, ctx[t])
                    pol.observe(t, a, data[t, a])
                    acts.append(a)
                views.append(np.stack(acts, axis=1))
            ledgers.append([(r.step, np.concatenate([r.runs[:, None], r.centre, r.value], axis=1),
                             np.concatenate([r.fed.pos[:, None], r.fed.rounds[:, None], r.fed.coef], axis=1))
                            for r in pol.ledger.releases])
            thetas.append((pol.theta.copy(), pol.beta.copy(), pol.M.copy()))
        assert np.array_equal(views[0], views[1])
        if make_policy(name).private:  # many distinct histories were compared (the others are deterministic)
            assert len(set(map(tuple, views[0][:, 5:].tolist()))) > 50
        assert len(ledgers[0]) == len(ledgers[1])
        assert all(s0 == s1 and np.array_equal(v0, v1) and np.array_equal(f0, f1)
                   for (s0, v0, f0), (s1, v1, f1) in zip(*ledgers))
        assert all(np.array_equal(x, y) for x, y in zip(*thetas))


def test_index_cache_follows_a_changed_action_set():
    """A shared action set that changes between steps (a read-out pair's per-round contexts) is noticed:
    the index is recomputed for every run, so the actions are those of a fresh computation."""
    pol, ref = AdaCOFUL(), type("Ref", (_FullRecompute, AdaCOFUL), {})()
    rng = np.random.default_rng(5)
    sets = rng.standard_normal((3, 10, 3))
    sets /= np.linalg.norm(sets, axis=-1, keepdims=True)
    for p in (pol, ref):
        p.reset(300, np.random.default_rng(1))
    for t in range(30):
        feats = np.broadcast_to(sets[(t // 4) % 3], (300, 10, 3))  # the same set for 4 steps, then another
        a, b = pol.act(t, feats), ref.act(t, feats)
        assert np.array_equal(a, b)
        r = np.where(a % 2 == 0, 1.0, -1.0)
        pol.observe(t, a, r)
        ref.observe(t, b, r)
