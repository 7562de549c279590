"""Black-box audits that see real bugs in outside-style code, and no `consistent` without power.

The controls are the ledger-less policies of `dpaudit.policies.elimination` and their mutants: an
elimination test whose noise cancels, a commit 1,000 rounds in, a counter whose noise vanishes.
"""

import numpy as np
import pytest

from dpaudit.accountants import PureDP
from dpaudit.attacks.neighbours import discover_horizon, run_tables, threshold_pairs
from dpaudit.runner import check as audit_policy
from dpaudit.cli import main
from dpaudit.errors import DPAuditError
from dpaudit.policies import make_policy
from dpaudit.policies.elimination import DPExploreThenCommit, DPSuccessiveElimination
from dpaudit.protocols import PairSpec, TableDP, background_table, make_pair


def test_dp_se_epoch_lengths_and_first_decision_follow_sajed_sheffet():
    p = DPSuccessiveElimination(n_arms=2, epsilon=1.0, beta=0.1)
    # R_1 = max(32 ln(8 K/beta)/(1/2)^2, 8 ln(4 K/beta)/(eps/2)) = max(649.6, 70.1) -> 650
    assert p.epoch_length(np.array([1]))[0] == 650
    d = np.tile([0.95, 0.05], (1400, 1))
    v = TableDP().run(p, d, 200, np.random.default_rng(0))
    assert np.all(v[:, :1300] == np.arange(1300) % 2)  # round robin through epoch 1
    assert np.all(v[:, 1300:] == 0)  # gap 0.9 > Delta_1 + noise: arm 1 eliminated at the epoch's end


def test_dp_se_elimination_is_noisy_but_shared_noise_mutant_is_deterministic():
    T = 1350
    d = background_table([0.75, 0.25], T, (0.0, 1.0))  # gap exactly Delta_1 = 0.5
    fair = TableDP().run(make_policy("dp-se", {}), d, 400, np.random.default_rng(1))
    share = (fair[:, -1] == 0).mean()
    assert 0.3 < share < 0.7  # at the threshold the Laplace noise decides about half the time
    d2 = d.copy()
    d2[0] = 1.0  # one more unit on arm 0: past the threshold
    bug = TableDP().run(make_policy("mutant-se-shared-noise", {}), d2, 400, np.random.default_rng(1))
    assert np.all(bug[:, -1] == 0)
    d2[0] = 0.0
    bug = TableDP().run(make_policy("mutant-se-shared-noise", {}), d2, 400, np.random.default_rng(1))
    assert np.all(bug[:, -1] != 0) or np.all(bug[:, 1300:] == np.arange(1300, T) % 2)


def test_etc_commits_at_k_times_pulls_and_raw_commit_ignores_its_noise():
    p = DPExploreThenCommit(n_arms=3, epsilon=1.0, pulls=10)
    d = np.tile([0.5, 0.5, 0.5], (40, 1))
    v = TableDP().run(p, d, 3000, np.random.default_rng(0))
    assert np.all(v[:, :30] == np.arange(30) % 3)
    assert set(np.unique(v[:, 30])) == {0, 1, 2}  # ties broken by the noise
    raw = TableDP().run(make_policy("mutant-etc-raw-commit", {"n_arms": 3, "pulls": 10}), d, 300,
                        np.random.default_rng(0))
    assert np.all(raw[:, 30:] == 0)  # the argmax of equal raw means, whatever the noise


def test_background_table_uses_only_the_alphabet_and_is_nested_in_the_means():
    lo = background_table([0.3, 0.6], 500, (0.0, 1.0), alphabet=(0.0, 1.0))
    hi = background_table([0.31, 0.6], 500, (0.0, 1.0), alphabet=(0.0, 1.0))
    assert set(np.unique(lo)) <= {0.0, 1.0}
    assert np.all(hi >= lo)  # raising a mean only turns lo entries into hi ones
    assert abs(lo[:, 0].mean() - 0.3) < 0.06 and abs(lo[:, 1].mean() - 0.6) < 0.06
    assert np.array_equal(background_table([0.3, 0.6], 4, (0.0, 1.0)), np.tile([0.3, 0.6], (4, 1)))
    pair = make_pair(PairSpec(0, "mid"), TableDP(), 2, 50, (0.0, 1.0), alphabet=(0.0, 1.0))
    assert set(np.unique(pair.d0)) <= {0.0, 1.0} and set(np.unique(pair.d1)) <= {0.0, 1.0}


def test_run_tables_matches_the_protocol_run_on_each_input():
    pol = make_policy("ucb1", {"n_arms": 3})  # deterministic: the views must match run by run
    rng = np.random.default_rng(0)
    tabs = rng.random((4, 30, 3))
    v = run_tables(pol, TableDP(), tabs, 5, np.random.default_rng(0))
    assert v.shape == (4, 5, 30)
    for i in range(4):
        ref = TableDP().run(make_policy("ucb1", {"n_arms": 3}), tabs[i], 5, np.random.default_rng(1))
        assert np.array_equal(v[i], ref)


def test_horizon_discovery_finds_the_first_decision_of_late_deciders():
    rr = (0.0, 1.0)
    se = discover_horizon(lambda T: make_policy("dp-se", {}), TableDP(), np.random.SeedSequence(0), rr)
    assert se.first_dependent_round == 1300 and se.horizon == 1349
    etc = discover_horizon(lambda T: make_policy("dp-etc", {"pulls": 300}), TableDP(), np.random.SeedSequence(0), rr)
    assert etc.first_dependent_round == 600 and etc.horizon == 649
    ucb = discover_horizon(lambda T: make_policy("adap-ucb", {}), TableDP(), np.random.SeedSequence(0), rr)
    assert ucb.horizon == 48 and ucb.reason == "default"


class RoundRobinClaimsDP:
    """Never looks at its rewards, claims eps = 1: nothing for an audit to see."""

    n_arms = 2
    claim = PureDP(1.0)

    def reset(self, n_runs, rng):
        self.n = n_runs

    def act(self, t, arms=None):
        return np.full(self.n, t % 2)

    def observe(self, t, actions, rewards):
        pass


def test_horizon_discovery_names_its_cap_when_nothing_depends_on_the_input():
    got = discover_horizon(lambda T: RoundRobinClaimsDP(), TableDP(), np.random.SeedSequence(0), (0.0, 1.0),
                           cap=3000)
    assert got.first_dependent_round is None and got.tried == 1536
    assert "1536 rounds" in got.reason


def test_threshold_search_puts_the_shared_noise_elimination_at_its_threshold():
    pol = make_policy("mutant-se-shared-noise", {})
    found = threshold_pairs(lambda T: pol, TableDP(), 1349, np.random.SeedSequence(3), (0.0, 1.0))
    a, b = found.info["tried"][0]["better"]["gap_interval"]
    # the canary moves arm 0's epoch mean by at most 1/650: the bracket must be that close to 0.5
    assert a <= 0.5 + 1 / 650 and b >= 0.5 - 1 / 650 and b - a < 1e-3
    # the shared noise cancels in the test: a canary at the threshold decides it, so the two sides separate
    assert found.info["separated"] and found.horizon == 1349 and all(s.means is not None for s in found.specs)
    assert found.info["best"][0]["separation"] >= 5


@pytest.mark.slow
def test_threshold_search_tries_both_orientations_and_extends_the_horizon():
    """Block elimination written by another author: the canary must sit inside the deciding batch, and with arm 0
    the better arm the elimination shows only when arm 1's next block would start; arm 0 the worse arm shows at
    once (tests/thirdparty/elimination.py)."""
    import importlib.util
    from pathlib import Path

    from dpaudit.adapters import PerRun

    path = Path(__file__).parent / "thirdparty" / "elimination.py"
    spec = importlib.util.spec_from_file_location("tp_elimination", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def build(T):
        return PerRun(mod.SharedNoiseBlockElimination, {"n_arms": 2, "epsilon": 1.0}, "pure:eps=1",
                      globals_mode="redirect")

    found = threshold_pairs(build, TableDP(), 60, np.random.SeedSequence(0), (0.0, 1.0), cells=400_000)
    assert found.info["separated"] and found.horizon > 60  # the first test that can eliminate ends at round 145
    best = found.specs[0]
    assert 42 <= best.round <= 145  # inside batch 1, whose sums decide; batch 0's restart
    assert set(found.info["tried"][-1]) >= {"better", "worse"}


def _module_plugin(tmp_path, body: str) -> str:
    path = tmp_path / "plug.py"
    path.write_text("import numpy as np\nfrom dpaudit.accountants import PureDP, ApproxDP\n" + body)
    return f"{path}:P"


def test_no_power_is_inconclusive_with_its_own_exit_status(tmp_path, capsys):
    spec = _module_plugin(tmp_path, """
class P:
    n_arms = 2
    claim = PureDP(1.0)
    def reset(self, n_runs, rng):
        self.n = n_runs
    def act(self, t, arms=None):
        return np.full(self.n, t % 2)
    def observe(self, t, actions, rewards):
        pass
""")
    status = main(["check", "policy", spec, "--runs", "1000", "--horizon", "20", "--workers", "1"])
    out = capsys.readouterr().out
    assert status == 3
    assert "INCONCLUSIVE" in out and "could not be told apart" in out and "--pair" in out


def test_claim_above_the_black_box_ceiling_is_inconclusive_not_consistent(tmp_path):
    spec = _module_plugin(tmp_path, """
class P:
    n_arms = 2
    claim = PureDP(30.0)
    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng
    def act(self, t, arms=None):
        return np.full(self.n, t % 2) if t < 2 else self.best
    def observe(self, t, actions, rewards):
        if t == 0:
            self.r0 = rewards
        if t == 1:
            self.best = np.where(self.r0 + self.rng.laplace(0, 1 / 30, self.n) > rewards, 0, 1)
""")
    out = audit_policy(spec, runs=1000, horizon=12, workers=1)
    assert out["verdict"] == "inconclusive"
    assert out["epsilon_lower"] <= out["power"]["largest_bound"] < 30
    assert "largest bound" in out["reason"]


def test_a_claim_with_a_larger_delta_is_audited_at_its_own_delta(tmp_path):
    spec = _module_plugin(tmp_path, """
class P:
    n_arms = 2
    claim = ApproxDP(1.0, 1e-3)
    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng
    def act(self, t, arms=None):
        return self.rng.integers(0, 2, self.n)
    def observe(self, t, actions, rewards):
        pass
""")
    out = audit_policy(spec, runs=1000, horizon=12, delta=1e-5, workers=1)
    assert out["delta"] == 1e-3 and out["epsilon_claimed"] == pytest.approx(1.0)
    assert any("audit compares at delta = 0.001" in n for n in out["notes"])


@pytest.mark.slow
def test_binary_reward_policy_is_audited_on_binary_tables(tmp_path):
    body = """
class P:
    n_arms = 2
    claim = PureDP(1.0)
    {alphabet}
    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng
        self.s = np.zeros((n_runs, 2))
    def act(self, t, arms=None):
        return np.full(self.n, t) if t < 2 else self.best
    def observe(self, t, actions, rewards):
        if not np.all((rewards == 0) | (rewards == 1)):
            raise ValueError("rewards must be 0 or 1")
        if t < 2:
            self.s[np.arange(self.n), actions] += rewards
        if t == 1:  # report noisy max once: each sum has sensitivity 1, Lap(2) is 0.5-DP
            self.best = np.argmax(self.s + self.rng.laplace(0, 2.0, self.s.shape), axis=1)
"""
    plain = _module_plugin(tmp_path, body.format(alphabet=""))
    out = audit_policy(plain, runs=1000, horizon=12, workers=1)  # refuses 0.5: the audit notices and says so
    assert out["verdict"] == "consistent" and out["reward_alphabet"] == [0.0, 1.0]
    assert any("refused the reward 0.5" in n for n in out["notes"])
    out = audit_policy(plain, runs=1000, horizon=12, workers=1, rewards=[0, 1])
    assert out["verdict"] == "consistent" and out["reward_alphabet"] == [0.0, 1.0]
    (tmp_path / "plug.py").unlink()
    declared = _module_plugin(tmp_path, body.format(alphabet="reward_alphabet = (0.0, 1.0)"))
    assert audit_policy(declared, runs=1000, horizon=12, workers=1)["verdict"] == "consistent"
    with pytest.raises(DPAuditError, match="alphabet"):
        audit_policy(declared, runs=1000, horizon=12, workers=1, rewards=[0.5])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mutant-se-shared-noise", "mutant-etc-raw-commit", "mutant-counter-double-noise"])
def test_new_mutants_are_flagged_without_a_hand_given_horizon_or_pair(name):
    params = {"pulls": 300} if name == "mutant-etc-raw-commit" else {"beta": 0.5} if "-se-" in name else {}
    out = audit_policy(name, params, runs=2000, workers=1)
    assert out["verdict"] == "violation", out["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [("dp-se", {"beta": 0.5}), ("dp-etc", {"pulls": 300})])
def test_correct_outside_style_policies_are_consistent_with_a_positive_bound(name, params):
    out = audit_policy(name, params, runs=2000, workers=1)
    assert out["verdict"] == "consistent", out["reason"]
    assert out["epsilon_lower"] > 0


# ---- wiring: --adapter per-run, --claim, --pair, the horizon under any name -----------------------

PER_RUN = """
import numpy as np

class OneRun:
    '''A one-run noisy greedy written like public code: global np.random, select_arm/update.'''

    def __init__(self, n_arms=2, T=100, epsilon=1.0):
        self.n_arms, self.T, self.epsilon = n_arms, T, epsilon
        self.sums = np.zeros(n_arms)
        self.t = 0

    def select_arm(self):
        if self.t < self.n_arms:
            return self.t
        if self.t == self.n_arms:  # report noisy max once on the first rewards: sensitivity 1 per arm
            self.choice = int(np.argmax(self.sums + np.random.laplace(0, 1 / self.epsilon, self.n_arms)))
        return self.choice

    def update(self, arm, reward):
        if self.t < self.n_arms:
            self.sums[arm] += reward
        self.t += 1
"""


@pytest.mark.slow
def test_a_one_run_class_is_audited_unchanged_with_the_claim_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "their_bandit.py"
    path.write_text(PER_RUN)
    argv = ["check", "policy", f"{path}:OneRun", "--adapter", "per-run", "--runs", "2000", "--horizon", "12",
            "--workers", "1", "--json"]
    assert main(argv + ["--claim", "pure:eps=1"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "consistent" and out["claim"] == "1-DP" and out["epsilon_lower"] > 0
    assert "--adapter per-run --claim pure:eps=1" in out["command"]
    # the same code judged against a much smaller claim: its real leak (eps = 1) shows
    assert main(argv + ["--claim", "pure:eps=0.1"]) == 1
    capsys.readouterr()
    assert main(argv[:-1] + ["--claim", "zcdp:rho=oops"]) == 2
    assert "claim" in capsys.readouterr().err


def test_the_horizon_reaches_a_constructor_parameter_named_T(tmp_path):
    from dpaudit.runner.setup import build_policy as _build_policy

    path = tmp_path / "their_bandit.py"
    path.write_text(PER_RUN)
    policy = _build_policy(f"{path}:OneRun", {}, 37, "per-run", "pure:eps=1")
    assert policy.params()["T"] == 37


def test_a_given_pair_is_audited_exactly_and_fixes_the_horizon(capsys):
    import json
    from pathlib import Path

    pair = str(Path(__file__).resolve().parents[1] / "examples" / "pair_table.json")
    assert main(["check", "policy", "adap-ucb", "--pair", pair, "--runs", "2000", "--workers", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["horizon"] == 8 and len(out["search"]) == 1
    assert out["witness"]["round"] == 2 and out["witness"]["row_d"] == [0.0, 1.0]
    assert main(["check", "policy", "adap-ucb", "--pair", pair, "--horizon", "9"]) == 2
    assert "fixes the horizon" in capsys.readouterr().err


ODD_NAMES = """
import random

class Odd:
    '''Public code with its own method names, counting rounds from 1.'''

    def __init__(self, K=2):
        self.K, self.sums, self.counts = K, [0.0] * K, [0] * K

    def choose_arm(self, t):
        assert t >= 1
        if t <= self.K:
            return t - 1
        return max(range(self.K), key=lambda a: self.sums[a] / self.counts[a] + random.gauss(0, 1))

    def learn(self, arm, reward):
        self.sums[arm] += reward
        self.counts[arm] += 1
"""


@pytest.mark.slow
def test_adapter_options_name_the_methods_and_the_first_round(tmp_path, capsys):
    from dpaudit.adapters import parse_adapter

    assert parse_adapter("per-run") == ("per-run", {})
    assert parse_adapter("per-run:select=a,update=b,first_round=1,globals=swap") == (
        "per-run", {"select": "a", "update": "b", "first_round": 1, "globals_mode": "swap"})
    path = tmp_path / "odd.py"
    path.write_text(ODD_NAMES)
    base = ["check", "policy", f"{path}:Odd", "--claim", "pure:eps=1", "--runs", "500", "--horizon", "8",
            "--workers", "1"]
    assert main(base + ["--adapter", "per-run"]) == 2
    assert "per-run:select=NAME,update=NAME" in capsys.readouterr().err
    status = main(base + ["--adapter", "per-run:select=choose_arm,update=learn,first_round=1"])
    assert status in (0, 1, 3)
    assert "verdict" in capsys.readouterr().out
    for bad in ("per-run:colour=red", "per-run:first_round=one", "per-batch"):
        assert main(base + ["--adapter", bad]) == 2
        assert "adapter" in capsys.readouterr().err


class _CoinFlips:
    """Fair coins whatever the rewards: no gap moves the share of arm-0 plays beyond noise."""

    n_arms = 2
    reward_range = (0.0, 1.0)

    def reset(self, n_runs, rng):
        self.rng, self.n = rng, n_runs

    def act(self, t, arms=None):
        return self.rng.integers(0, 2, self.n)

    def observe(self, t, actions, rewards):
        pass


def test_threshold_search_stopping_at_noise_keeps_a_sharp_threshold_and_spares_a_flat_share():
    """``stop_at_noise`` (a one-run class's frugal search): a share that never jumps beyond noise stops after one
    level and scans one gap; a deterministic jump at the threshold is refined to the last level, as without it."""
    flat = threshold_pairs(lambda T: _CoinFlips(), TableDP(), 40, np.random.SeedSequence(1), (0.0, 1.0),
                           stop_at_noise=True, max_horizon=40)
    row = flat.info["tried"][0]
    for orient in ("better", "worse"):
        assert row[orient]["stopped_at_noise"]["level"] == 1 and row[orient]["stopped_at_noise"]["z"] < 5
        a, b = row[orient]["gap_interval"]
        assert b - a == pytest.approx(1 / 31)
    scanned = {sp.means for sp in flat.specs}
    assert len(scanned) <= 2  # one gap per orientation, not two
    pol = make_policy("mutant-se-shared-noise", {})
    found = threshold_pairs(lambda T: pol, TableDP(), 1349, np.random.SeedSequence(3), (0.0, 1.0), stop_at_noise=True)
    better = found.info["tried"][0]["better"]
    assert "stopped_at_noise" not in better
    a, b = better["gap_interval"]
    assert a <= 0.5 + 1 / 650 and b >= 0.5 - 1 / 650 and b - a < 1e-3
    assert found.info["separated"] and found.info["best"][0]["separation"] >= 5
