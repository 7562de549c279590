"""The UCB family: each algorithm's defining behaviour against the papers' formulas.

Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits", App. C (Alg. 4, Eq. 14) and App. C-E;
Azize & Basu (2023b), "Rényi Differentially Private Bandits", Alg. 2; and AdaP-UCB (Azize & Basu 2023a, its
ref. [8]).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpaudit.accountants import RDP, ZCDP, ApproxDP, PureDP
from dpaudit.errors import DPAuditError
from dpaudit.environments import BernoulliBandit, RewardTable
from dpaudit.policies import get_policy_class, make_policy, registered
from dpaudit.simulate import simulate

PRIVATE = {
    "adac-ucb": {"rho": 0.3},
    "adar-ucb": {"alpha": 3.0, "epsilon": 0.7},
    "adaed-ucb": {"epsilon": 0.5, "delta": 1e-4},
    "adap-ucb": {"epsilon": 0.8},
}
# sigma of the noise on an episode's reward sum (sensitivity 1): the paper's sigma_{a,l} times n
SUM_SCALE = {
    "adac-ucb": 1 / math.sqrt(2 * 0.3),
    "adar-ucb": math.sqrt(3.0 / (2 * 0.7)),
    "adaed-ucb": math.sqrt(2 * math.log(1.25 / 1e-4)) / 0.5,
    "adap-ucb": 1 / 0.8,
}


def _table(T: int, K: int, seed: int, means=None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mu = np.linspace(0.8, 0.2, K) if means is None else np.asarray(means)
    return (rng.random((T, K)) < mu).astype(float)


def _run(name: str, table: np.ndarray, n_runs: int, seed: int, path: str = "step", **params):
    pol = make_policy(name, dict(params, n_arms=table.shape[1]))
    return simulate(pol, RewardTable(table), table.shape[0], n_runs, seed, path=path, trajectory=True, record=True)


def _releases(ledger):
    """Flatten a ledger into per-entry arrays: run, arm, start, stop, centre, value, scale."""
    cols = {k: [] for k in ("run", "arm", "start", "stop", "centre", "value", "scale", "kind")}
    for rel in ledger.releases:
        fed = rel.fed
        first = np.full(rel.runs.size, np.iinfo(np.int64).max)
        last = np.full(rel.runs.size, -1)
        np.minimum.at(first, fed.pos, fed.rounds)
        np.maximum.at(last, fed.pos, fed.rounds)
        cols["run"].append(rel.runs)
        cols["arm"].append(rel.arm)
        cols["start"].append(first)
        cols["stop"].append(last + 1)
        cols["centre"].append(rel.centre[:, 0])
        cols["value"].append(rel.value[:, 0])
        cols["scale"].append(np.broadcast_to(rel.noise.scale, rel.runs.shape))
        cols["kind"].append(np.full(rel.runs.size, rel.noise.kind))
    return {k: np.concatenate(v) for k, v in cols.items()}


def test_registered_with_claims():
    names = {e.name for e in registered() if e.family == "ucb"}
    assert {"adac-ucb", "adar-ucb", "adaed-ucb", "adap-ucb", "ucb-episodes", "ucb1"} <= names
    assert make_policy("adac-ucb", {"rho": "0.25"}).claim == ZCDP(0.25)
    assert make_policy("adar-ucb", {"alpha": "4", "epsilon": "0.5"}).claim.renyi(4) == 0.5
    assert isinstance(make_policy("adar-ucb", {}).claim, RDP)
    assert make_policy("adaed-ucb", {"epsilon": "0.5", "delta": "1e-6"}).claim == ApproxDP(0.5, 1e-6)
    assert make_policy("adap-ucb", {"epsilon": "2"}).claim == PureDP(2.0)
    assert make_policy("ucb-episodes", {}).claim is None
    assert make_policy("ucb1", {}).claim is None


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("adac-ucb", {"rho": "0"}, "rho"),
        ("adac-ucb", {"rho": "-1"}, "rho"),
        ("adar-ucb", {"alpha": "1"}, "alpha"),
        ("adar-ucb", {"alpha": "0.5"}, "alpha"),
        ("adar-ucb", {"alpha": "inf"}, "finite Rényi order"),
        ("adar-gope", {"alpha": "inf"}, "finite Rényi order > 1 for AdaR-GOPE"),
        ("adar-oful", {"alpha": "inf"}, "finite Rényi order > 1 for AdaR-OFUL"),
        ("adar-ucb", {"epsilon": "0"}, "epsilon"),
        ("adaed-ucb", {"delta": "0"}, "delta"),
        ("adaed-ucb", {"delta": "1"}, "delta"),
        ("adaed-ucb", {"epsilon": "1.5"}, "epsilon"),
        ("adap-ucb", {"epsilon": "-0.1"}, "epsilon"),
        ("adac-ucb", {"n_arms": "1"}, "n_arms"),
        ("ucb1", {"n_arms": "1"}, "n_arms"),
        ("ucb-episodes", {"beta": "0"}, "beta"),
    ],
)
def test_bad_parameters(name, params, match):
    with pytest.raises(DPAuditError, match=match):
        make_policy(name, params)


def test_unknown_name_suggests_closest():
    with pytest.raises(DPAuditError, match="adac-ucb"):
        get_policy_class("adac-ucbb")


@pytest.mark.parametrize("name", ["adac-ucb", "ucb-episodes", "ucb1"])
def test_rewards_outside_unit_interval_are_refused(name):
    pol = make_policy(name, {"n_arms": 2})
    pol.reset(3, np.random.default_rng(0))
    a = pol.act(0)
    with pytest.raises(DPAuditError, match=r"outside \[0, 1\]"):
        pol.observe(0, a, np.array([0.5, 1.5, 0.0]))
    with pytest.raises(DPAuditError, match="NaN"):
        pol.observe(0, a, np.array([0.5, np.nan, 0.0]))


def test_episode_sums_outside_range_refused():
    pol = make_policy("adac-ucb", {"n_arms": 2})
    pol.reset(2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="outside"):
        pol.complete(np.array([0, 1]), np.array([0.5, 1.5]))  # both episodes have length 1


def test_steps_out_of_order_refused():
    pol = make_policy("adac-ucb", {})
    pol.reset(2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="in order"):
        pol.act(3)


@pytest.mark.parametrize("name", sorted(PRIVATE) + ["ucb-episodes"])
def test_episode_lengths_double_and_every_round_feeds_one_release(name):
    T, K = 1500, 3
    table = _table(T, K, 1)
    res = _run(name, table, 20, 5, **PRIVATE.get(name, {}))
    acts = res.actions
    pol = res.policy
    # episodes read off the trajectory: per run, maximal constant blocks are unions of episodes
    for i in range(acts.shape[0]):
        # counts after the last completed episode equal 2^j (one initial pull, then doubling)
        for a in range(K):
            n = int(pol.counts[i, a])
            assert n >= 1 and n & (n - 1) == 0, (i, a, n)
    if name == "ucb-episodes":
        assert len(pol.ledger) == 0
        return
    rel = _releases(pol.ledger)
    usage = pol.ledger.round_usage(T)
    assert usage.max() == 1  # forgetting: no round feeds two releases
    for i in range(acts.shape[0]):
        m = rel["run"] == i
        # released rounds are exactly [0, end of the last completed episode)
        end = int(rel["stop"][m].max())
        assert np.all(usage[i, :end] == 1) and np.all(usage[i, end:] == 0)
        assert end == pol.ep_start[i] and pol.ep_end[i] > T  # only the episode cut by T is unreleased
        for a in range(K):
            ma = m & (rel["arm"] == a)
            order = np.argsort(rel["start"][ma])
            lengths = (rel["stop"][ma] - rel["start"][ma])[order]
            expect = [1] + [2**j for j in range(lengths.size - 1)]
            assert lengths.tolist() == expect, (i, a, lengths.tolist())
            # each release is about the arm actually played in its rounds
            for s, e in zip(rel["start"][ma], rel["stop"][ma]):
                assert np.all(acts[i, s:e] == a)


@pytest.mark.parametrize("name", sorted(PRIVATE))
def test_ledger_noise_scale_centre_and_distribution(name):
    T, K = 2000, 3
    table = _table(T, K, 2)
    res = _run(name, table, 200, 11, **PRIVATE[name])
    rel = _releases(res.policy.ledger)
    # the noise scale on the sum is the paper's sigma_{a,l} times the episode length n
    assert np.allclose(rel["scale"], SUM_SCALE[name])
    n = rel["stop"] - rel["start"]
    pol = res.policy
    if name != "adap-ucb":
        assert np.allclose(pol.noise_std_of_mean(n), SUM_SCALE[name] / n)
        if name == "adac-ucb":  # Eq. (14): sigma^2 = 1 / (2 rho (N_a / 2)^2), N_a = 2n after the episode
            N = 2 * n[n >= 2]
            assert np.allclose(pol.noise_std_of_mean(n[n >= 2]) ** 2, 1 / (2 * 0.3 * (N / 2) ** 2))
    else:
        assert np.allclose(pol.noise_scale_of_mean(n), 1 / (0.8 * n))
    # the centre is the exact reward sum of the episode's rounds on the played arm
    prefix = np.vstack([np.zeros(K), np.cumsum(table, axis=0)])
    assert np.allclose(rel["centre"], prefix[rel["stop"], rel["arm"]] - prefix[rel["start"], rel["arm"]])
    # standardised noise: N(0, 1) or Laplace(0, 1)
    z = (rel["value"] - rel["centre"]) / rel["scale"]
    dist = stats.laplace if name == "adap-ucb" else stats.norm
    assert set(rel["kind"]) == {"laplace" if name == "adap-ucb" else "gaussian"}
    assert stats.kstest(z, dist.cdf).pvalue > 1e-3
    assert z.size > 2000


def _reference_actions(table, K, beta, bonus_c, noise_per_release, laplace_eps=None):
    """Independent per-run re-implementation of Alg. 4 / Eq. (14) given the released noise values."""
    T = table.shape[0]
    counts = [0] * K
    last = [1] * K
    stat = [0.0] * K
    nrel = [0] * K
    actions = []
    t = 0
    # initialisation: each arm once
    queue = list(range(K))
    while t < T:
        if queue:
            a, length = queue.pop(0), 1
        else:
            logt = math.log(t + 1)
            best, a = -math.inf, 0
            for b in range(K):
                n = last[b]
                if laplace_eps is None:
                    idx = stat[b] + math.sqrt((1 / (2 * n) + bonus_c / n**2) * beta * logt)
                else:
                    idx = stat[b] + math.sqrt(beta * logt / (2 * n)) + beta * logt / (laplace_eps * n)
                if idx > best + 1e-12:
                    best, a = idx, b
            length = counts[a]
        end = min(T, t + length)
        actions.extend([a] * (end - t))
        if t + length <= T:
            s = table[t : t + length, a].sum() + noise_per_release[(a, nrel[a])]
            stat[a] = s / length
            last[a] = length
            counts[a] += length
            nrel[a] += 1
        t = end
    return np.array(actions)


@pytest.mark.parametrize("name,bonus_c", [("adac-ucb", 1 / 0.3), ("adar-ucb", 3.0 / 0.7), ("adaed-ucb", None), ("adap-ucb", None)])
def test_index_of_eq14_reproduced_by_independent_reference(name, bonus_c):
    T, K = 600, 3
    table = _table(T, K, 3, means=[0.6, 0.5, 0.45])
    res = _run(name, table, 6, 21, beta=2.0, **PRIVATE[name])
    rel = _releases(res.policy.ledger)
    if name == "adaed-ucb":
        bonus_c = 2 * 2 * math.log(1.25 / 1e-4) / 0.5**2
    for i in range(6):
        m = rel["run"] == i
        noise = {}
        for a in range(K):
            ma = m & (rel["arm"] == a)
            order = np.argsort(rel["start"][ma])
            for k, v in enumerate((rel["value"][ma] - rel["centre"][ma])[order]):
                noise[(a, k)] = v
        ref = _reference_actions(table, K, 2.0, bonus_c, noise, laplace_eps=0.8 if name == "adap-ucb" else None)
        assert np.array_equal(ref, res.actions[i])


@pytest.mark.parametrize("name", sorted(PRIVATE) + ["ucb-episodes"])
def test_fast_path_identical_on_tables(name):
    T, K = 3000, 4
    # non-dyadic rewards too: sums by prefix differences and by accumulation agree to rounding
    rng = np.random.default_rng(9)
    table = np.round(rng.random((T, K)) * np.linspace(1.0, 0.6, K), 3)
    a = _run(name, table, 40, 13, path="step", **PRIVATE.get(name, {}))
    b = _run(name, table, 40, 13, path="episode", **PRIVATE.get(name, {}))
    assert b.path == "episode"
    assert np.array_equal(a.actions, b.trajectory_actions())
    assert np.allclose(a.reward_sum, b.reward_sum) and np.allclose(a.regret, b.regret)
    if name != "ucb-episodes":
        ra, rb = _releases(a.policy.ledger), _releases(b.policy.ledger)
        ka = np.lexsort((ra["start"], ra["run"]))
        kb = np.lexsort((rb["start"], rb["run"]))
        for key in ("run", "arm", "start", "stop"):
            assert np.array_equal(ra[key][ka], rb[key][kb])
        assert np.allclose(ra["value"][ka], rb["value"][kb], rtol=0, atol=1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), K=st.integers(2, 5), T=st.integers(1, 200), rho=st.floats(0.01, 100))
def test_fast_path_identical_property(seed, K, T, rho):
    table = _table(T, K, seed)
    a = _run("adac-ucb", table, 5, seed, path="step", rho=rho)
    b = _run("adac-ucb", table, 5, seed, path="episode", rho=rho)
    assert np.array_equal(a.actions, b.trajectory_actions())
    assert np.array_equal(a.policy.ledger.round_usage(T), b.policy.ledger.round_usage(T))


def test_interactive_queries_credit_the_policy_own_arm():
    # Under Interactive DP the policy observes d[t, q_t] for the adversary's query q_t: the reward is
    # credited to the arm the policy chose, whatever ``actions`` says.
    pol = make_policy("adac-ucb", {"n_arms": 2, "rho": 1.0})
    pol.reset(1, np.random.default_rng(0), record=True)
    for t in range(2):
        pol.act(t)
        pol.observe(t, np.array([1 - t]), np.array([float(t)]))
    arms = [int(r.arm[0]) for r in pol.ledger.releases]
    assert arms == [0, 1]
    assert [float(r.centre[0, 0]) for r in pol.ledger.releases] == [0.0, 1.0]


def test_privacy_costs_regret_and_vanishes_as_rho_grows():
    env = BernoulliBandit([0.75, 0.625, 0.5, 0.375, 0.25])
    T, n = 10**5, 200
    reg = {}
    for rho in (0.01, 100.0):
        reg[rho] = simulate(make_policy("adac-ucb", {"n_arms": 5, "rho": rho, "beta": 1}), env, T, n, 3).regret
    base = simulate(make_policy("ucb-episodes", {"n_arms": 5, "beta": 1}), env, T, n, 3).regret
    # strong privacy costs regret (Welch test), weak privacy is within noise of the twin
    assert stats.ttest_ind(reg[0.01], base, equal_var=False).pvalue < 1e-6 and reg[0.01].mean() > base.mean()
    assert abs(reg[100.0].mean() - base.mean()) < 4 * math.sqrt(reg[100.0].var() / n + base.var() / n)


def test_ucb1_index_and_logarithmic_pulls():
    # arm 1 always pays 1, arm 0 never: UCB1 pulls arm 0 about log(t) times (8 ln T / Delta^2 bound)
    T = 4000
    table = np.column_stack([np.zeros(T), np.ones(T)])
    res = _run("ucb1", table, 3, 0)
    pulls0 = (res.actions == 0).sum(axis=1)
    assert np.all(pulls0 <= 8 * math.log(T) + 1) and np.all(pulls0 >= 2)
    # reference UCB1 on one run of a random table
    table = _table(500, 3, 4)
    res = _run("ucb1", table, 1, 0)
    sums, counts, acts = np.zeros(3), np.zeros(3), []
    for t in range(500):
        a = t if t < 3 else int(np.argmax(sums / counts + np.sqrt(2 * math.log(t) / counts)))
        acts.append(a)
        sums[a] += table[t, a]
        counts[a] += 1
    assert np.array_equal(res.actions[0], acts)


def test_ucb1_has_no_fast_path():
    with pytest.raises(DPAuditError, match="episode-level path"):
        simulate(make_policy("ucb1", {"n_arms": 5}), BernoulliBandit(), 100, 2, 0, path="episode")


def test_these_checks_catch_the_known_bug_classes():
    # The deliberately broken UCB variants (dpaudit.policies.mutants) fail the checks above.
    T, K = 800, 3
    table = _table(T, K, 1)
    nf = _run("mutant-no-forgetting", table, 10, 0, rho=0.3)
    assert nf.policy.ledger.round_usage(T).max() > 1  # a round feeds several releases
    fu = _run("mutant-first-unnoised", table, 10, 0, rho=0.3)
    used = fu.policy.ledger.round_usage(T)
    assert np.any(used[:, :K] == 0)  # the initial pulls were released outside the mechanisms
    for mutant in ("mutant-sqrt2-noise", "mutant-mean-sensitivity"):
        rel = _releases(_run(mutant, table, 10, 0, rho=0.3).policy.ledger)
        assert not np.allclose(rel["scale"], SUM_SCALE["adac-ucb"])
