"""shuffle-glm's randomizer (one sampled coordinate, Piecewise Mechanism), its claim, that it learns, and its audit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accountants import clones_delta, clones_epsilon
from functools import partial

from dpaudit.runner import check

audit_shuffle = partial(check, protocol="shuffle")
from dpaudit.environments import GLMContextualBandit
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import PiecewiseShuffler
from dpaudit.policies import make_policy
from dpaudit.policies.glm import shuffle_eps0_for


# ---- the local randomizer ------------------------------------------------------------------------------

@pytest.mark.parametrize("eps0", [0.5, 2.0, 3.5, 6.0])
def test_piecewise_density_is_exactly_eps0_dp_and_normalised(eps0):
    """Enumerate a grid of inputs and outputs: the largest log-density ratio is eps0 (attained), and the
    density integrates to one (two pieces, computed analytically)."""
    sh = PiecewiseShuffler(eps0, 1)
    u = np.linspace(-1, 1, 41)
    y = np.linspace(-sh.C, sh.C, 2001)
    L = sh.log_density(y[None, :], u[:, None])  # (inputs, outputs)
    ratio = (L[:, None, :] - L[None, :, :]).max()
    assert ratio == pytest.approx(eps0, abs=1e-12)
    p = sh.p_high
    assert p * (sh.C - 1) + p * math.exp(-eps0) * (sh.C + 1) == pytest.approx(1.0, abs=1e-12)
    # the sampled coordinate J is data-independent, so the message (J, y) has the same worst-case ratio
    assert PiecewiseShuffler(eps0, 7).local_guarantee().epsilon == eps0


def test_piecewise_samples_follow_the_density():
    sh = PiecewiseShuffler(2.0, 1)
    rng = np.random.default_rng(0)
    n = 400_000
    for u in (-1.0, -0.3, 0.0, 0.8):
        msgs = sh.randomize(rng, np.full((1, n, 1), u))
        J, y = sh.decode(msgs)
        assert np.all(J == 0) and y.min() >= -sh.C - 1e-12 and y.max() <= sh.C + 1e-12
        left = sh._left(np.array(u))
        high = ((y >= left) & (y <= left + sh.C - 1)).mean()
        expect = sh.s / (sh.s + 1)
        assert abs(high - expect) < 5 * math.sqrt(expect * (1 - expect) / n)
        # E[y | u] = u and Var[y | u] = u^2/(s-1) + (s+3)/(3(s-1)^2) (Wang et al. Lemma 2)
        var = u * u / (sh.s - 1) + (sh.s + 3) / (3 * (sh.s - 1) ** 2)
        assert abs(y.mean() - u) < 5 * math.sqrt(var / n)
        assert y.var() == pytest.approx(var, rel=0.02)


@pytest.mark.slow
def test_analyzer_is_unbiased_over_many_seeds():
    lo, hi = np.array([0.0, -0.5, -1.0]), np.array([1.0, 0.5, 1.0])
    sh = PiecewiseShuffler(3.0, 3, lo=lo, hi=hi)
    rng = np.random.default_rng(1)
    vals = np.stack([rng.random(200), rng.uniform(-0.5, 0.5, 200), rng.uniform(-1, 1, 200)], axis=1)
    runs = 20_000
    _, est = sh.run(rng, np.broadcast_to(vals, (runs, 200, 3)))
    se = est.std(axis=0) / math.sqrt(runs)
    z = (est.mean(axis=0) - vals.sum(axis=0)) / se
    assert np.all(np.abs(z) < 4.5), z
    # the per-user variance stays below the bound the policy's shrinkage uses
    assert np.all(est.var(axis=0) <= 200 * sh.variance_bound())


@pytest.mark.slow
def test_sampled_randomizer_beats_the_split_one():
    """Why the sampled randomizer: the split-and-round randomizer's batch sums are far noisier."""
    from dpaudit.mechanisms import Shuffler

    rng = np.random.default_rng(2)
    vals = np.broadcast_to(rng.uniform(-0.3, 0.3, (1, 500, 15)), (2000, 500, 15))
    new = PiecewiseShuffler(2.0, 15).run(rng, vals)[1]
    old = Shuffler(2.0, 15).run(rng, vals)[1]
    assert old.var(axis=0).mean() > 15 * new.var(axis=0).mean()  # about 22 times at eps0 = 2 (analytic)


def test_shuffler_messages_are_a_permutation_and_bad_values_are_refused():
    sh = PiecewiseShuffler(1.0, 2)
    rng = np.random.default_rng(3)
    msgs = sh.randomize(rng, rng.uniform(-1, 1, (50, 30, 2)))
    out = sh.permute(rng, msgs)
    assert np.array_equal(np.sort(out, axis=1), np.sort(msgs, axis=1)) and not np.array_equal(out, msgs)
    assert np.array_equal(PiecewiseShuffler(1.0, 2, shuffle=False).permute(rng, msgs), msgs)
    with pytest.raises(DPAuditError, match="outside the range"):
        sh.randomize(rng, np.full((1, 2, 2), 1.5))
    with pytest.raises(DPAuditError, match="NaN"):
        sh.randomize(rng, np.full((1, 2, 2), np.nan))


# ---- the amplified claim against an independent computation ----------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("n,eps0", [(40, 1.5), (100, 2.5)])
def test_amplified_claim_bounds_the_shuffled_piecewise_mechanism(n, eps0):
    """Independent check of FMT's bound on this randomizer: for n users where everyone else sends u = -1 and
    the canary u = +1 vs u = -1, the shuffled multiset's likelihood ratio is exact per sample,
    L = (1/n) sum_i f(y_i | +1) / f(y_i | -1) (the canary is any of the n messages), so delta(eps) =
    E_P[(1 - e^eps / L)_+] is estimated by Monte Carlo. It must stay below FMT's numerical delta."""
    sh = PiecewiseShuffler(eps0, 1)
    rng = np.random.default_rng(4)
    runs = 200_000
    vals = np.full((runs, n, 1), -1.0)
    vals[:, 0] = 1.0
    _, y = sh.decode(sh.randomize(rng, vals))
    lr = np.exp(sh.log_density(y, 1.0) - sh.log_density(y, -1.0)).mean(axis=1)
    for eps in (0.5 * clones_epsilon(n, eps0, 1e-3), clones_epsilon(n, eps0, 1e-3)):
        mc = np.maximum(0.0, 1.0 - math.exp(eps) / lr)
        est, se = mc.mean(), mc.std() / math.sqrt(runs)
        assert est - 4 * se <= clones_delta(n, eps0, eps)


def test_shuffle_claim_and_the_eps0_search():
    pol = make_policy("shuffle-glm", {})
    assert pol.eps0 == 3.5 and pol.batch0 == 1000 and pol.groups == 1
    assert pol.claim.epsilon == pytest.approx(2 * clones_epsilon(1000, 3.5, 5e-6))
    for eps in (2.0, 4.0):
        e0 = shuffle_eps0_for(eps, 1000, 1, 1e-5)
        fits = make_policy("shuffle-glm", {"eps0": e0}).claim.epsilon
        over = make_policy("shuffle-glm", {"eps0": e0 + 2e-3}).claim.epsilon
        assert fits <= eps < over
    with pytest.raises(DPAuditError, match="epsilon"):
        shuffle_eps0_for(-1.0)


# ---- learning ---------------------------------------------------------------------------------------

def _regret(name: str, params: dict, runs: int, T: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    env = GLMContextualBandit(n_arms=10, dim=3, link="logistic", S=2.0)
    pol = make_policy(name, {"n_arms": 10, "dim": 3, "horizon": T, **params})
    env.reset(runs, np.random.default_rng([seed, 1]))
    pol.reset(runs, np.random.default_rng([seed, 2]), record=False)
    reg, uni = np.zeros(runs), np.zeros(runs)
    for t in range(T):
        x = env.arms(t)
        a = pol.act(t, x)
        m = env.means(t)
        reg += m.max(axis=1) - m[np.arange(runs), a]
        uni += m.max(axis=1) - m.mean(axis=1)
        pol.observe_checked(t, a, env.rewards(t, a))
    return reg, uni


@pytest.mark.slow
def test_shuffle_glm_learns_far_below_uniform_play():
    """After two released batches the private policy's per-round regret is a fraction of uniform play's
    (20 runs; a one-sided 99.9% bound on the ratio)."""
    T, b0 = 2100, 300  # batches of 300 and 600 users release; rounds 900..2100 use the estimate
    reg, uni = _regret("shuffle-glm", {"batch0": b0}, 20, T, 0)
    late, _ = _regret("shuffle-glm", {"batch0": b0, "horizon": 900}, 20, 900, 0)
    per_round = (reg - late) / (T - 900)
    uni_round = uni.mean() / T
    upper = per_round.mean() + 3.1 * per_round.std(ddof=1) / math.sqrt(per_round.size)
    assert upper < 0.5 * uni_round, (per_round.mean(), uni_round)


# ---- the audit ------------------------------------------------------------------------------------

SMALL = {"dim": "1", "n_arms": "2"}  # the defaults' eps0 = 3.5 and first batch of 1000 users, with d = 1


@pytest.mark.slow
def test_shuffle_audit_is_consistent_with_power_and_flags_arrival_order():
    ok = audit_shuffle("shuffle-glm", SMALL, runs=6000, seed=2)
    assert ok["verdict"] == "consistent", ok["reason"]
    assert 0 < ok["epsilon_lower"] < ok["epsilon_claimed"]
    pw = ok["power"]
    assert pw["pairs_tried"] == 3 and pw["fresh_runs_per_side"] == 6000  # the calibrated canary and the two extreme ones
    parts = {a["attack"]: a for a in ok["attacks"]}
    assert set(parts) == {"membership (shuffled view)", "likelihood (shuffled multiset)"}
    assert all(a["confidence"] == pytest.approx(0.975) for a in ok["attacks"])  # two parts share the 5% budget
    assert 0 < pw["smallest_detectable"] < pw["largest_bound"]
    assert "power" in ok["reason"]
    bad = audit_shuffle("mutant-shuffle-arrival-order", {}, runs=6000, seed=2)  # its defaults are d = 1, K = 2
    assert bad["epsilon_claimed"] == pytest.approx(ok["epsilon_claimed"])
    assert bad["verdict"] == "violation" and bad["witness"]["features"] == "position"


def test_shuffle_audit_without_power_says_inconclusive():
    # eps0 = 0.05: the calibrated pair's exact eps is 0.0069, its delta(0) far below what 400 runs can see
    out = audit_shuffle("shuffle-glm", {"batch0": "200", "eps0": "0.05", "dim": "2", "n_arms": "2"}, runs=400, seed=0)
    assert out["verdict"] == "inconclusive" and out["epsilon_lower"] == 0
    assert "fresh runs per side" in out["reason"] and "shows 0 at the median with its 400 runs" in out["reason"]


@pytest.mark.slow
def test_shuffle_audit_at_the_defaults():
    ok = audit_shuffle("shuffle-glm", {}, runs=40000, seed=0)
    assert ok["verdict"] == "consistent" and ok["epsilon_lower"] > 0
    bad = audit_shuffle("mutant-shuffle-arrival-order", {}, runs=40000, seed=0)
    assert bad["verdict"] == "violation"


def test_shuffle_audit_refuses_a_shuffler_it_cannot_read(monkeypatch):
    import dpaudit.policies.registry as reg
    from dpaudit.mechanisms import Shuffler

    real = reg.make_policy

    def make(spec, params):  # shuffle-glm with the split-and-round shuffler for its gradient terms
        pol = real(spec, params)
        pol.shuffler_grad = Shuffler(pol.eps0, pol.dim)
        return pol

    monkeypatch.setattr(reg, "make_policy", make)
    with pytest.raises(DPAuditError, match="cannot read"):
        audit_shuffle("shuffle-glm", {}, runs=200)


# ---- the fast paths of the shuffle audit against the direct computations -----------------------------------

def _randomize_at_reference(sh, rng, J, vJ):
    """PiecewiseShuffler.randomize_at as first written (the formula, one array per step)."""
    u = (vJ - sh.mid[J]) / sh.half[J]
    left = sh._left(np.clip(u, -1.0, 1.0))
    width = sh.C - 1.0
    pick, w = rng.random(u.shape), rng.random(u.shape)
    z = w * (sh.C + 1.0) - sh.C
    y = np.where(pick < sh.s / (sh.s + 1.0), left + w * width, np.where(z < left, z, z + width))
    return J * sh.W + (y + sh.C)


@pytest.mark.parametrize("dim", [1, 3, 15])
def test_randomize_at_and_decode_are_the_formula_bit_for_bit(dim):
    lo, hi = -np.linspace(0.5, 1.0, dim), np.linspace(0.5, 2.0, dim)
    sh = PiecewiseShuffler(3.5, dim, lo=lo, hi=hi)
    rng = np.random.default_rng(5)
    J = sh.sample_coordinates(rng, 40, 300)
    vJ = rng.uniform(lo[J], hi[J])
    vJ[0, :3] = lo[J[0, :3]]  # the ends of the range
    vJ[1, :3] = hi[J[1, :3]]
    fast = sh.randomize_at(np.random.default_rng(9), J, vJ.copy())
    ref = _randomize_at_reference(sh, np.random.default_rng(9), J, vJ)
    np.testing.assert_array_equal(fast, ref)
    Jd, y = sh.decode(fast)
    Jr = np.clip(np.floor(fast / sh.W).astype(np.int64), 0, dim - 1)
    np.testing.assert_array_equal(Jd, Jr)
    np.testing.assert_array_equal(y, fast - Jr * sh.W - sh.C)
    np.testing.assert_array_equal(Jd, J)
    with pytest.raises(DPAuditError, match="NaN"):
        sh.randomize_at(rng, J[:1, :2], np.array([[np.nan, 0.0]]))
    with pytest.raises(DPAuditError, match="NaN"):
        sh.randomize_at(rng, J[:1, :2], np.array([[np.inf, 0.0]]))
    with pytest.raises(DPAuditError, match="outside the range"):
        sh.randomize_at(rng, J[:1, :1], hi[J[:1, :1]] + 1.0)


@pytest.mark.parametrize("name,groups", [("shuffle-glm", 1), ("shuffle-glm", 4), ("mutant-shuffle-arrival-order", 1),
                                         ("shuffle-glm-np", 2)])
def test_view_only_batch_release_sends_the_same_messages(name, groups):
    from dpaudit.policies.glm import _coordinates

    pol = make_policy(name, {"batch0": 40, "groups": groups, "horizon": 200})
    n, B, d = 6, 40, pol.dim
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, B, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=2, keepdims=True))
    R = rng.random((n, B))
    theta = 0.3 * rng.standard_normal((n, d))
    pol.reset(n, np.random.default_rng(0), record=False)
    full, th, V = pol.batch_release(np.random.default_rng(7), X, R, theta, prior=3)
    view, th2, V2 = pol.batch_release(np.random.default_rng(7), X, R, theta, prior=3, view_only=True)
    assert th is not None and V is not None and th2 is None
    for a, b in zip([full["outer"], *full["grads"]], [view["outer"], *view["grads"]]):
        assert (a is None and b is None) or np.array_equal(a, b)
    # the coordinate gather, on a batch shared by every run (a broadcast) and on per-run contexts
    J = rng.integers(0, d, (n, B))
    for Xs in (X, np.broadcast_to(X[0], X.shape)):
        np.testing.assert_array_equal(_coordinates(Xs, J), np.take_along_axis(Xs, J[..., None], 2)[..., 0])


@pytest.mark.parametrize("name", ["shuffle-glm", "mutant-shuffle-arrival-order"])
def test_one_feature_family_is_the_same_as_read_from_both(name):
    from dpaudit.protocols.shuffle import shuffle_pairs
    from dpaudit.runner.shuffle import ShuffledViewSource

    pol = make_policy(name, {"batch0": 60, "groups": 2 if name == "shuffle-glm" else 1})
    src = ShuffledViewSource(pol, shuffle_pairs(60, pol.dim))
    for cand in range(len(src.pairs)):
        both = src.sample(cand, 1, 25, np.random.SeedSequence(4))
        assert set(both) == {"multiset", "position"}
        for fam in ("multiset", "position"):
            one = src.for_family(fam).sample(cand, 1, 25, np.random.SeedSequence(4))
            assert list(one) == [fam]
            np.testing.assert_array_equal(one[fam], both[fam])
