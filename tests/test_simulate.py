"""The simulator: both paths, seeds, regret bookkeeping, memory, bad input, and the regret CLI."""

from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from dpaudit.errors import DPAuditError
from dpaudit.cli import main
from dpaudit.environments import BernoulliBandit, GaussianBandit, RewardList, RewardTable, make_environment
from dpaudit.policies import make_policy
from dpaudit.simulate import simulate, twin_of

MEANS = [0.75, 0.625, 0.5, 0.375, 0.25]


def test_pseudo_regret_is_sum_of_gaps_of_played_arms():
    env = BernoulliBandit(MEANS)
    res = simulate(make_policy("adac-ucb", {"n_arms": 5, "rho": 0.2}), env, 700, 30, 4, path="step",
                   trajectory=True, checkpoints=[100, 350])
    gaps = 0.75 - np.asarray(MEANS)
    full = gaps[res.actions].sum(axis=1)
    assert np.allclose(res.regret, full)
    assert np.allclose(res.regret_at[:, 0], gaps[res.actions[:, :100]].sum(axis=1))
    assert np.allclose(res.regret_at[:, 1], gaps[res.actions[:, :350]].sum(axis=1))
    assert np.allclose(res.reward_sum, res.rewards.sum(axis=1))
    assert list(res.checkpoints) == [100, 350, 700]


def test_episode_path_checkpoints_match_trajectory():
    env = BernoulliBandit(MEANS)
    res = simulate(make_policy("adac-ucb", {"n_arms": 5, "rho": 0.2}), env, 5000, 20, 4, path="episode",
                   trajectory=True, checkpoints=[7, 1234])
    acts = res.trajectory_actions()
    assert np.all(acts >= 0)
    gaps = 0.75 - np.asarray(MEANS)
    for j, c in enumerate(res.checkpoints):
        assert np.allclose(res.regret_at[:, j], gaps[acts[:, :c]].sum(axis=1))


def test_same_seed_same_result_different_seed_differs():
    env = BernoulliBandit(MEANS)
    pol = make_policy("adac-ucb", {"n_arms": 5, "rho": 0.1})
    for path in ("step", "episode"):
        a = simulate(pol, env, 2000, 10, 7, path=path)
        b = simulate(pol, env, 2000, 10, 7, path=path)
        c = simulate(pol, env, 2000, 10, 8, path=path)
        assert np.array_equal(a.regret, b.regret) and np.array_equal(a.reward_sum, b.reward_sum)
        assert not np.array_equal(a.regret, c.regret)


@pytest.mark.parametrize("name,params", [("adac-ucb", {"rho": 0.05}), ("adap-ucb", {"epsilon": 0.5}),
                                         ("ucb-episodes", {})])
def test_episode_path_same_distribution_as_step_path(name, params):
    # Binomial episode sums vs per-step Bernoulli draws: two-sample KS on final regret and reward.
    env = BernoulliBandit([0.7, 0.5, 0.45])
    pol = make_policy(name, dict(params, n_arms=3, beta=1.0))
    a = simulate(pol, env, 1500, 1500, 1, path="step")
    b = simulate(pol, env, 1500, 1500, 2, path="episode")
    # round away float accumulation differences (per-step sums of gaps vs gap x length), which
    # would otherwise split the atoms of these discrete distributions
    assert stats.ks_2samp(a.regret.round(6), b.regret.round(6)).pvalue > 1e-3
    assert stats.ks_2samp(a.reward_sum, b.reward_sum).pvalue > 1e-3


def test_ks_detects_a_wrong_episode_distribution():
    # Control: the same KS test rejects when the episode sums come from the wrong means.
    class Shifted(BernoulliBandit):
        def segment_sums(self, runs, arms, start, length):
            return self.rng.binomial(np.asarray(length), np.clip(self.mu[arms] + 0.1, 0, 1)).astype(float)

    pol = make_policy("ucb-episodes", {"n_arms": 3, "beta": 1.0})
    a = simulate(pol, BernoulliBandit([0.7, 0.5, 0.45]), 1500, 1500, 1, path="step")
    b = simulate(pol, Shifted([0.7, 0.5, 0.45]), 1500, 1500, 2, path="episode")
    assert stats.ks_2samp(a.reward_sum, b.reward_sum).pvalue < 1e-6


def test_long_horizon_without_long_arrays():
    env = BernoulliBandit(MEANS)
    pol = make_policy("adac-ucb", {"n_arms": 5, "rho": 0.5})
    tracemalloc.start()
    res = simulate(pol, env, 10**7, 10, 0, checkpoints=[10**5, 10**6])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert res.path == "episode"
    assert peak < 2_000_000  # bytes: nothing of length T = 10^7
    assert np.all(np.diff(res.regret_at, axis=1) >= 0)
    assert np.all(res.regret > 0)


def test_hindsight_regret_on_tables_and_reward_lists():
    rng = np.random.default_rng(0)
    table = (rng.random((400, 3)) < [0.2, 0.6, 0.4]).astype(float)
    pol = make_policy("adac-ucb", {"n_arms": 3, "rho": 1.0})
    res = simulate(pol, RewardTable(table), 400, 5, 0, checkpoints=[100])
    assert res.regret_kind == "hindsight"
    assert np.allclose(res.regret, table.sum(axis=0).max() - res.reward_sum)
    rl = RewardList(table[:, 0], n_arms=3)
    a = simulate(pol, rl, 400, 5, 3, path="step")
    b = simulate(pol, rl, 400, 5, 3, path="episode")
    assert a.regret is None and np.allclose(a.reward_sum, table[:, 0].sum())
    assert np.allclose(a.reward_sum, b.reward_sum)


def test_bad_input():
    env = BernoulliBandit(MEANS)
    pol = make_policy("adac-ucb", {"n_arms": 5})
    with pytest.raises(DPAuditError, match="horizon"):
        simulate(pol, env, 0, 10, 0)
    with pytest.raises(DPAuditError, match="n_runs"):
        simulate(pol, env, 10, 0, 0)
    with pytest.raises(DPAuditError, match="arms"):
        simulate(make_policy("adac-ucb", {"n_arms": 3}), env, 10, 2, 0)
    with pytest.raises(DPAuditError, match="exceeds"):
        simulate(pol, RewardTable(np.zeros((5, 5))), 6, 2, 0)
    with pytest.raises(DPAuditError, match="checkpoints"):
        simulate(pol, env, 10, 2, 0, checkpoints=[11])
    with pytest.raises(DPAuditError, match="path"):
        simulate(pol, env, 10, 2, 0, path="fast")
    with pytest.raises(DPAuditError, match="outside"):  # Gaussian rewards are refused, not clipped
        simulate(make_policy("adac-ucb", {"n_arms": 2}), GaussianBandit([0.0, 5.0]), 50, 3, 0, path="step")
    # the fast path never shows single rewards to the policy: the source's bounds are checked instead
    with pytest.raises(DPAuditError, match="outside"):
        simulate(make_policy("adac-ucb", {"n_arms": 2}), GaussianBandit([0.0, 0.5]), 50, 3, 0, path="episode")
    bad = np.full((20, 2), 0.5)
    bad[17, 1] = 1.5
    with pytest.raises(DPAuditError, match="outside"):
        simulate(make_policy("adac-ucb", {"n_arms": 2}), RewardTable(bad), 20, 3, 0, path="episode")
    simulate(make_policy("adac-ucb", {"n_arms": 2}), RewardTable(bad), 17, 3, 0, path="episode")  # rows used are fine
    for means in ([0.5, 1.2], [-0.1, 0.5], [0.5], [0.5, float("nan")]):
        with pytest.raises(DPAuditError):
            BernoulliBandit(means)
    with pytest.raises(DPAuditError, match="Did you mean"):
        make_environment("bernouli")
    with pytest.raises(DPAuditError, match="K >= 2"):
        RewardTable(np.zeros((3, 1)))


def test_plugin_out_of_range_arm_is_refused():
    class Bad:
        n_arms = 2

        def reset(self, n_runs, rng):
            self.n = n_runs

        def act(self, t, arms=None):
            return np.full(self.n, 2)

        def observe(self, t, actions, rewards):
            pass

    with pytest.raises(DPAuditError, match="arm 2"):
        simulate(Bad(), BernoulliBandit([0.5, 0.5]), 10, 3, 0)


def test_twins():
    assert twin_of(make_policy("adac-ucb", {"n_arms": 3, "rho": 0.1, "beta": 2})) == ("ucb-episodes", {"n_arms": 3, "beta": 2.0})
    assert twin_of(make_policy("adap-ucb", {}))[0] == "ucb-episodes"


def test_regret_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "r.png"
    code = main(["regret", "adac-ucb", "--param", "rho=0.05", "--horizon", "20000", "--runs", "30", "--seed", "1",
                 "--json", "--plot", str(png)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "adac-ucb" and out["twin"]["policy"] == "ucb-episodes"
    r, tr, d = out["regret"], out["twin"]["regret"], out["difference"]
    assert r["lo"] <= r["mean"] <= r["hi"] and d["lo"] <= d["mean"] <= d["hi"]
    assert math.isclose(d["mean"], r["mean"] - tr["mean"], rel_tol=1e-9, abs_tol=1e-9)
    assert d["mean"] > 0  # rho = 0.05 costs regret on the five arms of Azize & Basu (2023a), Sec. VII-A
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_regret_cli_text(capsys):
    assert main(["regret", "ucb1", "--horizon", "300", "--runs", "5", "--env-param", "means=0.9,0.1"]) == 0
    assert "mean regret" in capsys.readouterr().out


@pytest.mark.parametrize("argv,match", [
    (["regret", "adac-ucbb", "--horizon", "10"], "Did you mean 'adac-ucb'"),
    (["regret", "adac-ucb", "--param", "rho=0", "--horizon", "10"], "rho"),
    (["regret", "adac-ucb", "--horizon", "0"], "horizon"),
    (["regret", "adac-ucb", "--horizon", "10", "--env-param", "means=0.5,1.5"], "outside"),
    (["regret", "adac-ucb", "--horizon", "10", "--param", "n_arms=1"], "n_arms"),
])
def test_regret_cli_bad_input_exits_2(argv, match, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_reward_check_is_hoisted_only_where_the_environment_proves_it():
    """In-range tables skip the per-step check (observe_checked); others keep it and refuse by name."""
    table = np.zeros((30, 2))
    table[::3, 1] = 1.0
    pol = make_policy("adac-ucb", {"n_arms": 2})

    def refuse(*a, **k):
        raise AssertionError("the per-step check ran although the table's bounds prove it")

    pol.observe = refuse
    res = simulate(pol, RewardTable(table), 30, 5, seed=0, path="step")
    assert res.reward_sum.shape == (5,)
    bad = table.copy()
    bad[:, :] = 1.5  # every reward is out of [0, 1]: the first one the policy sees is refused
    with pytest.raises(DPAuditError, match=r"reward 1.5 at step 0 is outside \[0, 1\]"):
        simulate(make_policy("adac-ucb", {"n_arms": 2}), RewardTable(bad), 30, 5, seed=0, path="step")


def test_hoisted_and_checked_observe_give_the_same_trajectory():
    rng = np.random.default_rng(4)
    table = (rng.random((400, 3)) < [0.7, 0.5, 0.3]).astype(float)
    a = simulate(make_policy("adac-ucb", {"n_arms": 3}), RewardTable(table), 400, 50, seed=2, path="step",
                 trajectory=True)
    pol = make_policy("adac-ucb", {"n_arms": 3})
    pol.observe_checked = pol.observe  # force the checked path
    b = simulate(pol, RewardTable(table), 400, 50, seed=2, path="step", trajectory=True)
    assert np.array_equal(a.actions, b.actions) and np.array_equal(a.reward_sum, b.reward_sum)


@pytest.mark.parametrize("path", ["step", "episode"])
def test_simulate_reports_progress_in_rounds_up_to_the_horizon(path):
    from dpaudit.environments import make_environment
    from dpaudit.policies import make_policy

    seen: list[str] = []
    simulate(make_policy("adac-ucb", {"n_arms": "3"}), make_environment("bernoulli", means=[0.7, 0.5, 0.3]),
             5000, 50, 0, path=path, progress=seen.append)
    done = [int(m.split(": ")[1].split("/")[0]) for m in seen]
    assert seen[-1] == "simulate adac-ucb: 5000/5000 rounds"
    assert done == sorted(done) and 2 <= len(seen) <= 102
