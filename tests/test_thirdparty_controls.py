"""Fast checks of the third-party-style controls in tests/thirdparty/ (no dpaudit verdicts here).

Each class runs for a few hundred rounds over several seeds, is reproducible under a fixed numpy
seed, plays arms in range and refuses rewards out of range; each bug is checked numerically where
its docstring derives it. Whether dpaudit's audits flag them is measured by
``benchmarks/validation/thirdparty_controls.py``, not asserted here.
"""

import math

import numpy as np
import pytest

from thirdparty import elimination, etc, greedy, ldp_logging, linucb, styles, ucb_counter

MEANS = (0.7, 0.4, 0.55)


def _rewards(seed, T, K):
    """A (T, K) Bernoulli reward table from its own generator (the policies' draws stay on np.random)."""
    g = np.random.default_rng([seed, 99])
    return (g.random((T, K)) < np.array(MEANS[:K])[None, :]).astype(float)


def drive_select(obj, select, update, T, seed, K):
    """Run a select()/update(arm, reward) object for T rounds on a fixed table; returns the arms."""
    table = _rewards(seed, T, K)
    arms = []
    for t in range(T):
        a = getattr(obj, select)()
        assert isinstance(a, (int, np.integer)) and 0 <= a < K
        getattr(obj, update)(a, float(table[t, a]))
        arms.append(int(a))
    return arms


def drive_step(obj, T, seed, K):
    """Run a step(last_arm, last_reward) -> arm object for T rounds."""
    table = _rewards(seed, T, K)
    arms, last = [], (None, None)
    for t in range(T):
        a = obj.step(*last)
        assert isinstance(a, (int, np.integer)) and 0 <= a < K
        last = (int(a), float(table[t, a]))
        arms.append(int(a))
    return arms


# one-run classes: (class, kwargs, select, update) -- "step" for the step shape
ONE_RUN = [
    (elimination.BlockEliminationDP, {"n_arms": 3}, "select_arm", "update"),
    (elimination.SharedNoiseBlockElimination, {"n_arms": 3}, "select_arm", "update"),
    (etc.PrivateETC, {"n_arms": 2, "T": 300}, "pull", "receive_reward"),
    (etc.WrongScaleETC, {"n_arms": 2, "T": 300}, "pull", "receive_reward"),
    (ucb_counter.EpisodicLaplaceUCB, {"n_arms": 3}, "choose_arm", "update"),
    (ucb_counter.NoResetEpisodicUCB, {"n_arms": 3}, "choose_arm", "update"),
    (greedy.TreeCounterGreedy, {"n_arms": 3, "horizon": 400}, "step", None),
    (greedy.DoubleDividedGreedy, {"n_arms": 3, "horizon": 400}, "step", None),
    (styles.ModuleRngUCB, {"n_arms": 2}, "select_arm", "update"),
    (styles.IntEpsilonUCB, {"n_arms": 2, "epsilon": 1}, "select_arm", "update"),
]


def _run_one(cls, kw, select, update, T, seed):
    obj = cls(**kw)
    K = obj.n_arms
    if select == "step":
        return drive_step(obj, T, seed, K)
    return drive_select(obj, select, update, T, seed, K)


@pytest.mark.parametrize("cls,kw,select,update", ONE_RUN, ids=[c[0].__name__ for c in ONE_RUN])
def test_one_run_classes_run_and_repeat_under_a_seed(cls, kw, select, update):
    T = 300
    for seed in range(3):
        np.random.seed(seed)
        if cls is styles.ModuleRngUCB:
            styles.rng = np.random.default_rng(seed)  # its generator is the module's, not np.random
        first = _run_one(cls, kw, select, update, T, seed)
        np.random.seed(seed)
        if cls is styles.ModuleRngUCB:
            styles.rng = np.random.default_rng(seed)
        assert _run_one(cls, kw, select, update, T, seed) == first


@pytest.mark.parametrize("cls,kw,select,update", ONE_RUN, ids=[c[0].__name__ for c in ONE_RUN])
def test_one_run_classes_refuse_rewards_out_of_range(cls, kw, select, update):
    obj = cls(**kw)
    with pytest.raises(ValueError):
        if select == "step":
            a = obj.step(None, None)
            obj.step(a, 1.5)
        else:
            a = getattr(obj, select)()
            getattr(obj, update)(a, -0.1)


# ---- elimination ----------------------------------------------------------------------------------

def _at_threshold(cls, gap_offset):
    """A 2-arm policy at the end of batch 1 whose raw sums differ by 2 w_1 n_1 + gap_offset."""
    p = cls(n_arms=2)
    p.batch = 1
    p.batch_size = n = p.size_of_batch(1)
    p.sums[:] = [n * 0.9, n * 0.9 - 2 * p.width(1) * n - gap_offset]
    return p


def test_shared_noise_elimination_is_a_deterministic_function_of_the_raw_sums():
    for offset, eliminated in ((0.5, True), (-0.5, False)):
        outcomes = set()
        for seed in range(200):
            np.random.seed(seed)
            p = _at_threshold(elimination.SharedNoiseBlockElimination, offset)
            p._end_batch()
            outcomes.add(tuple(p.active))
        assert outcomes == ({(0,)} if eliminated else {(0, 1)})


def test_correct_elimination_decision_is_random_at_the_threshold():
    outcomes = []
    for seed in range(200):
        np.random.seed(seed)
        p = _at_threshold(elimination.BlockEliminationDP, 0.5)
        p._end_batch()
        outcomes.append(tuple(p.active))
    share = outcomes.count((0,)) / len(outcomes)
    assert 0.2 < share < 0.8  # the independent noises decide, one user's half reward does not


def test_elimination_schedule():
    p = elimination.BlockEliminationDP(n_arms=2, epsilon=1.0)
    assert [p.size_of_batch(r) for r in range(3)] == [21, 52, 117]
    arms = drive_select(p, "select_arm", "update", 42, 0, 2)
    assert arms == [0] * 21 + [1] * 21  # blocks, not round robin


# ---- explore-then-commit --------------------------------------------------------------------------

def test_etc_exploration_length_and_commit_round():
    assert etc.exploration_length(2000, 2, 1.0) == 65
    assert etc.exploration_length(48, 2, 1.0) == 12
    np.random.seed(0)
    p = etc.PrivateETC(n_arms=2, T=48)
    arms = drive_select(p, "pull", "receive_reward", 48, 0, 2)
    assert arms[:24] == [0, 1] * 12 and len(set(arms[24:])) == 1


@pytest.mark.parametrize("cls,factor", [(etc.PrivateETC, 1.0), (etc.WrongScaleETC, None)])
def test_etc_noise_scale_on_the_sum(cls, factor):
    np.random.seed(1)
    noise = []
    for _ in range(400):
        p = cls(n_arms=2, epsilon=1.0, T=48)
        for _ in range(p.explore_rounds):
            p.receive_reward(p.pull(), 0.5)
        noise.extend(p.noisy_totals - p.totals)
    b = 1.0 if factor else 1.0 / 12  # the wrong scale is 1/(eps m), m = 12 at T = 48
    assert np.std(noise) == pytest.approx(math.sqrt(2) * b, rel=0.15)


# ---- UCB with episode counters --------------------------------------------------------------------

def test_episode_counter_reset_and_the_missing_reset():
    lengths = [ucb_counter.episode_length(k) for k in range(20)]
    bounds = np.cumsum(lengths)
    for cls in (ucb_counter.EpisodicLaplaceUCB, ucb_counter.NoResetEpisodicUCB):
        np.random.seed(3)
        p = cls(n_arms=2)
        arms = np.array(drive_select(p, "choose_arm", "update", 200, 3, 2))
        done = int(bounds[bounds <= 200][-1])  # rounds in completed episodes
        for a in range(2):
            starts = [0] + list(bounds[:-1])
            last = max(k for k in range(p.episode) if arms[starts[k]] == a)
            if cls is ucb_counter.EpisodicLaplaceUCB:
                assert p.n[a] == lengths[last] and p.counter_n[a] == (arms[done:] == a).sum()
            else:  # the statistic rests on every completed pull of the arm, the counter on all its pulls
                assert p.n[a] == (arms[:bounds[last]] == a).sum() and p.counter_n[a] == (arms == a).sum()


def test_no_reset_release_reuses_rewards():
    """Arm 0's second release includes its first episode's rewards: the reward of user 0 moves it."""
    out = []
    for first in (0.0, 1.0):
        np.random.seed(5)
        p = ucb_counter.NoResetEpisodicUCB(n_arms=2)
        p.counter_sum[0] = first  # user 0's reward, already released once in episode 0
        p.counter_n[0] = 1
        p.release(0)
        p.release(0)  # the next release of the same arm, without new data
        out.append(p.mu[0] * p.n[0])
    assert out[1] - out[0] == pytest.approx(1.0)  # the same noise, shifted by the reused reward


# ---- greedy with a tree counter -------------------------------------------------------------------

@pytest.mark.parametrize("n", [16, 64])
def test_double_division_noise_std_at_count_n(n):
    stds = {}
    for cls in (greedy.TreeCounterGreedy, greedy.DoubleDividedGreedy):
        np.random.seed(n)
        vals = []
        for _ in range(3000):
            p = cls(n_arms=2, epsilon=1.0, horizon=1000)
            p.pulls[0], p.sums[0] = n, n / 2
            vals.append(p.mean(0) - 0.5)
        stds[cls] = np.std(vals)
    levels = math.floor(math.log2(1000)) + 1  # 10; a power of two is one node of Lap(levels/eps)
    assert stds[greedy.TreeCounterGreedy] == pytest.approx(math.sqrt(2) * levels / n, rel=0.1)
    assert stds[greedy.DoubleDividedGreedy] == pytest.approx(math.sqrt(2) * levels / n**2, rel=0.1)


def test_tree_counter_noise_is_consistent_over_prefixes():
    np.random.seed(0)
    tree = greedy.BinaryTreeNoise(64, 1.0)
    assert tree.levels == 7
    assert tree.noise(6) == pytest.approx(tree.nodes[(2, 0)] + tree.nodes[(1, 2)])
    assert tree.noise(4) == tree.nodes[(2, 0)]
    with pytest.raises(ValueError):
        tree.noise(65)


# ---- LDP LinUCB (batched) -------------------------------------------------------------------------

def _linucb_run(seed, n_runs=40, T=200):
    pol = linucb.LocalGaussianLinUCB()
    pol.keep_transcript = True
    pol.reset(n_runs, np.random.default_rng(seed))
    g = np.random.default_rng([seed, 7])
    feats = np.vstack([np.eye(3), np.array([[1, 1, 0], [0, 1, 1]]) / math.sqrt(2)])
    arms = np.broadcast_to(feats, (n_runs, 5, 3))
    theta = np.array([0.6, 0.2, 0.1])
    out = []
    for t in range(T):
        a = pol.act(t, arms)
        assert a.shape == (n_runs,) and a.min() >= 0 and a.max() < 5
        r = (g.random(n_runs) < feats[a] @ theta).astype(float)
        pol.observe(t, a, r)
        out.append(a)
    return pol, np.array(out)


def test_ldp_linucb_runs_and_repeats():
    pol, a = _linucb_run(0)
    assert pol.dim == 3 and pol.n_arms == 5 and pol.claim.epsilon == 1.0 and pol.claim.delta == 1e-5
    assert pol.sigma == pytest.approx(4.8448, abs=1e-3)
    assert pol.transcript().shape == (40, 200, 3)
    for seed in (1, 2):
        assert np.array_equal(_linucb_run(seed)[1], _linucb_run(seed)[1])


def test_ldp_linucb_refuses_bad_input():
    pol = linucb.LocalGaussianLinUCB()
    pol.reset(2, np.random.default_rng(0))
    with pytest.raises(ValueError):
        pol.act(0, np.full((2, 5, 3), 1.0))  # norm sqrt(3) > 1
    a = pol.act(0, np.broadcast_to(np.eye(5, 3), (2, 5, 3)))
    with pytest.raises(ValueError):
        pol.observe(0, a, np.array([0.5, 1.5]))


def test_ldp_linucb_channel_is_the_calibrated_gaussian():
    pol = linucb.LocalGaussianLinUCB()
    m = pol.channel(np.ones(20000), np.random.default_rng(0))
    assert m.shape == (20000, 3)
    assert m[:, 0].mean() == pytest.approx(1.0, abs=0.1)
    assert m.std(axis=0) == pytest.approx([pol.sigma] * 3, rel=0.03)


# ---- LDP click server -----------------------------------------------------------------------------

def _click_run(cls, seed, n_runs=30, T=120):
    pol = cls(n_arms=2, epsilon=1.0)
    pol.keep_transcript = True
    pol.reset(n_runs, np.random.default_rng(seed))
    g = np.random.default_rng([seed, 3])
    acts = []
    for t in range(T):
        a = pol.act(t, None)
        assert a.shape == (n_runs,) and set(np.unique(a)) <= {0, 1}
        pol.observe(t, a, g.random(n_runs))
        acts.append(a)
    return pol, np.array(acts)


@pytest.mark.parametrize("cls", [ldp_logging.RRClickServer, ldp_logging.LoggingRRClickServer])
def test_click_servers_run_and_repeat(cls):
    for seed in range(3):
        assert np.array_equal(_click_run(cls, seed)[1], _click_run(cls, seed)[1])
    pol = cls()
    pol.reset(2, np.random.default_rng(0))
    pol.act(0, None)
    with pytest.raises(ValueError):
        pol.observe(0, np.zeros(2, dtype=int), np.array([0.0, 2.0]))


def test_randomised_response_channel():
    pol = ldp_logging.RRClickServer(epsilon=1.0)
    inputs, outputs, P = pol.channel_table()
    assert P[1, 1] / P[0, 1] == pytest.approx(math.e)
    m1 = pol.channel(np.ones(40000), np.random.default_rng(1))
    m0 = pol.channel(np.zeros(40000), np.random.default_rng(2))
    assert m1.mean() == pytest.approx(pol.p, abs=0.01) and m0.mean() == pytest.approx(1 - pol.p, abs=0.01)


def test_logging_server_keeps_and_uses_the_raw_click_of_every_tenth_user():
    good, _ = _click_run(ldp_logging.RRClickServer, 0)
    bad, _ = _click_run(ldp_logging.LoggingRRClickServer, 0)
    assert good.transcript().shape == (30, 120, 1)
    tr = bad.transcript()
    assert tr.shape == (30, 120, 2)
    logged = tr[:, :, 1]
    assert np.all(logged[:, ::10] >= 0) and np.all(np.isin(logged[:, ::10], (0.0, 1.0)))
    mask = np.ones(120, dtype=bool)
    mask[::10] = False
    assert np.all(logged[:, mask] == -1.0)
    # the estimate of a logged user is her raw click, of the others the debiased message
    pol = ldp_logging.LoggingRRClickServer()
    pol.reset(4, np.random.default_rng(0))
    clicks, msgs = np.array([0.0, 1.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.0, 0.0])
    assert np.array_equal(pol._estimates(10, msgs, clicks), clicks)
    assert not np.array_equal(pol._estimates(11, msgs, clicks), clicks)


# ---- the shapes -----------------------------------------------------------------------------------

def test_reward_first_step_shape():
    np.random.seed(0)
    p = styles.RewardFirstStepUCB(n_arms=2)
    table = _rewards(0, 200, 2)
    a = p.step(None, None)
    for t in range(200):
        a = p.step(float(table[t, a]), a)  # reward first, then the arm
        assert a in (0, 1)
    with pytest.raises(ValueError):
        p.step(1 - a, 0.5)  # the adapter's order (arm, reward): arm 0.5 is not the arm played


def test_round_first_update_shape():
    np.random.seed(0)
    p = styles.RoundFirstUCB(K=2)
    table = _rewards(0, 200, 2)
    for t in range(1, 201):
        a = p.select_arm(t)
        p.update(t, a, float(table[t - 1, a]))
    with pytest.raises(ValueError):
        p.update(5, 0, 0.5)


def test_env_params_factory_shape():
    np.random.seed(0)
    p = styles.make_env_params_ucb(n_arms=3, epsilon=0.5, n=200)
    assert isinstance(p, styles.EnvParamsUCB) and p.env.n_arms == 3 and p.epsilon == 0.5
    arms = drive_select(p, "get_action", "feedback", 200, 0, 3)
    assert set(arms) <= {0, 1, 2}


def test_module_rng_is_made_at_import_and_drawn_after_construction():
    assert isinstance(styles.rng, np.random.Generator)
    styles.rng = np.random.default_rng(0)
    p = styles.ModuleRngUCB(n_arms=2)
    state = styles.rng.bit_generator.state
    drive_select(p, "select_arm", "update", 7, 0, 2)
    assert styles.rng.bit_generator.state == state  # nothing drawn before the first episode ends
    drive_select(p, "select_arm", "update", 1, 0, 2)
    assert styles.rng.bit_generator.state != state


def test_int_epsilon_default_switches_the_noise_off():
    p = styles.IntEpsilonUCB(n_arms=2)
    assert p.epsilon == 0 and type(p.epsilon) is int
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    drive_select(p, "select_arm", "update", 100, 0, 2)
    assert np.array_equal(np.random.get_state()[1], before)  # no draw at all: not private
