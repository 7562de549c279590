"""The per-run adapter on the shapes public code comes in (tests/thirdparty/styles.py, ldp_onerun.py,
elimination.py): each audited as it is, with the documented options, reproducibly, and every refusal
one sentence that says what to do.

Each shape is audited on a hand-given neighbouring pair (T = 24, 500 runs, one worker), so that an
audit takes well under a second; the search itself is the runner's, tested elsewhere.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dpaudit import audit
from dpaudit.adapters import PerRun, make_per_run, parse_adapter, parse_arg_map
from dpaudit.cli import main
from dpaudit.errors import DPAuditError
from dpaudit.policies.registry import coerce_params
from dpaudit.protocols import TableDP
from dpaudit.protocols.local import check_local_plugin
from dpaudit.runner import check, findings_json

from thirdparty import elimination, styles

HERE = Path(__file__).resolve().parent
STYLES = HERE / "thirdparty" / "styles.py"
LDP = HERE / "thirdparty" / "ldp_onerun.py"
T = 24


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """User 2 prefers arm 1 in d and arm 0 in d'; everyone else is indifferent (T = 24, K = 2)."""
    d = [[0.5, 0.5] for _ in range(T)]
    d_prime = [list(r) for r in d]
    d[2], d_prime[2] = [0.0, 1.0], [1.0, 0.0]
    path = tmp_path_factory.mktemp("pair") / "pair.json"
    path.write_text(json.dumps({"format": "dpaudit.pair/1", "d": d, "d_prime": d_prime}))
    return str(path)


def one_sentence(msg: str) -> bool:
    """One sentence: it ends with a full stop and no other sentence starts inside it."""
    return msg.endswith(".") and re.search(r"[.!?]\s+[A-Z]", msg) is None


def run_twice(spec, pair, adapter, params=None, **kw):
    """The audit twice with the same seed: the findings must be identical (reproducible)."""
    common = dict(params=params or {}, adapter=adapter, claim="pure:eps=1", runs=500, pair=pair, workers=1, seed=3)
    a = audit(spec, **common, **kw)
    b = audit(spec, **common, **kw)
    assert findings_json(a) == findings_json(b)
    assert a.verdict in ("consistent", "violation", "inconclusive") and a.horizon == T
    return a


def views(p, data, n=200, seed=1):
    return TableDP().run(p, data, n, np.random.default_rng(seed))


def global_states():
    return np.random.get_state(), styles.rng.bit_generator.state


def same_states(before):
    (np_b, rng_b), (np_a, rng_a) = before, global_states()
    return np.array_equal(np_b[1], np_a[1]) and np_b[2] == np_a[2] and rng_a == rng_b


# ---- 1. step(last_reward, last_arm): the reward first ------------------------------------------

@pytest.mark.slow
def test_reward_first_step_is_driven_by_its_parameter_names_and_audited_reproducibly(pair):
    a = run_twice(f"{STYLES}:RewardFirstStepUCB", pair, "per-run")
    assert any("step(last_reward, last_arm)" in n and "names of its parameters" in n for n in a.notes)


@pytest.mark.slow
def test_reward_first_step_mapped_on_the_command_line(pair, capsys):
    argv = ["check", "policy", f"{STYLES}:RewardFirstStepUCB", "--adapter", "per-run:step_args=reward,arm",
            "--claim", "pure:eps=1", "--runs", "500", "--pair", pair, "--workers", "1", "--json"]
    assert main(argv) in (0, 1, 3)
    out = json.loads(capsys.readouterr().out)
    assert out["horizon"] == T and out["verdict"] in ("consistent", "inconclusive")
    assert "per-run:step_args=reward,arm" in out["command"]


class XYRewardFirst(styles.RewardFirstStepUCB):
    """The same reward-first step with names that say nothing: step(x, y), x the reward, y its arm."""

    def step(self, x, y):
        return super().step(x, y)


def test_a_swapped_order_is_caught_by_the_probe_and_the_fix_named():
    # rewards 0.5, 0.25, ... are never arm numbers: the swapped call fails in the probe, before any audit,
    # where rewards equal to the arm played would have passed silently; the order that runs is named
    with pytest.raises(DPAuditError) as e:
        PerRun(XYRewardFirst, {}, "pure:eps=1")
    msg = str(e.value)
    assert one_sentence(msg) and "feedback for arm 0.5" in msg
    assert "it runs when called as step(last_reward, last_arm): add step_args=reward,arm" in msg
    p = PerRun(XYRewardFirst, {}, "pure:eps=1", step_args="reward,arm")
    data = np.tile([1.0, 0.0], (T, 1))  # arm 0's reward 1, arm 1's 0: a swap would pass silently here
    assert np.array_equal(views(p, data), views(p, data))
    assert (views(p, data)[:, 16:] == 0).mean() > 0.9  # it learnt arm 0 is better: the rewards went in as rewards


# ---- 2. update(t, arm, r): the round first ----------------------------------------------------

@pytest.mark.slow
def test_round_first_update_is_detected_and_audited(pair):
    a = run_twice(f"{STYLES}:RoundFirstUCB", pair, "per-run:first_round=1")
    assert any("select_arm(t) + update(t, arm, reward)" in n and "counted from 1" in n for n in a.notes)
    b = run_twice(f"{STYLES}:RoundFirstUCB", pair, "per-run:update_args=t,arm,reward,first_round=1")
    assert b.verdict == a.verdict and b.epsilon_lower == a.epsilon_lower  # the same calls, said explicitly


def test_round_first_update_without_first_round_says_to_add_it():
    with pytest.raises(DPAuditError) as e:
        make_per_run(f"{STYLES}:RoundFirstUCB", {}, "pure:eps=1", horizon=T)
    msg = str(e.value)
    assert one_sentence(msg) and "expected round 1, got 0" in msg and "add first_round=1" in msg


class XYUpdate:
    """update(x, y): x the reward, y the arm (names that say nothing); indexes its counts by y."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, late=0):
        self.n_arms, self.late, self.t = n_arms, late, 0
        self.sums, self.counts = [0.0] * n_arms, [0] * n_arms

    def select_arm(self):
        return self.t % self.n_arms

    def update(self, x, y):
        self.t += 1
        if self.t > self.late:
            self.counts[y] += 1  # a list: an index must be an int
            self.sums[y] += x


def test_an_argument_order_error_says_how_to_map_the_arguments():
    # in the probe: the order that runs is found and named
    with pytest.raises(DPAuditError) as e:
        PerRun(XYUpdate, {})
    msg = str(e.value)
    assert one_sentence(msg) and "list indices must be integers or slices, not float" in msg
    assert "add update_args=reward,arm" in msg
    assert PerRun(XYUpdate, {}, update_args="reward,arm").n_arms == 2
    # during the audit (it fails only after the probe's 32 rounds): the error says how to map them
    p = PerRun(XYUpdate, {"late": 40})
    with pytest.raises(DPAuditError) as e:
        views(p, np.full((48, 2), 0.5), n=3)
    msg = str(e.value)
    assert one_sentence(msg) and "XYUpdate.update raised TypeError at round 40" in msg
    assert "called it as update(arm, reward)" in msg and "update_args=TOKENS" in msg and "first_round=1" in msg


# ---- 3 and 4. a factory; a constructor that takes objects --------------------------------------

@pytest.mark.slow
def test_a_factory_is_audited_with_the_horizon_given_to_its_parameter(pair):
    a = run_twice(f"{STYLES}:make_env_params_ucb", pair, "per-run", params={"n_arms": "2", "epsilon": "1"})
    assert a.params == {"n_arms": 2, "epsilon": 1.0, "n": T}  # typed by its signature, T to n
    assert any("make_env_params_ucb is a factory" in n and "its parameter n" in n for n in a.notes)


def test_a_constructor_taking_objects_names_the_factory_to_audit():
    with pytest.raises(DPAuditError) as e:
        make_per_run(f"{STYLES}:EnvParamsUCB", {}, "pure:eps=1", horizon=T)
    msg = str(e.value)
    assert one_sentence(msg) and "needs env and params" in msg and "(n receives the horizon)" in msg
    assert f"{STYLES}:make_env_params_ucb in the same module builds one" in msg


# ---- 5. a module-level generator made at import ------------------------------------------------

@pytest.mark.slow
def test_a_module_level_generator_is_kept_apart_per_copy_and_said_so(pair):
    before = global_states()
    a = run_twice(f"{STYLES}:ModuleRngUCB", pair, "per-run")
    assert same_states(before)  # the module's own generator and np.random are left as they were
    assert any("draws from the module-level generator rng of" in n and "each copy got its own" in n for n in a.notes)
    p = PerRun(styles.ModuleRngUCB, {}, "pure:eps=1")
    data = np.full((T, 2), 0.5)
    v = views(p, data)
    assert np.array_equal(v, views(p, data)) and not np.array_equal(v, views(p, data, seed=2))
    assert len({tuple(r) for r in v}) > 1  # the copies' noise differs: each has its own generator
    assert same_states(before)
    # the findings do not depend on the worker processes (each copy's generator goes with its seed)
    c = audit(f"{STYLES}:ModuleRngUCB", adapter="per-run", claim="pure:eps=1", runs=500, pair=pair, workers=2, seed=3)
    assert findings_json(c) == findings_json(a)


#: module-level generators of this test module, made at import without a seed (as public code makes them)
_PY_RNG = __import__("random").Random()
_NP_RNG = np.random.default_rng()
_draw = _NP_RNG.laplace  # a bound method taken at import: it holds the object, whatever the name is bound to


class PyModuleRng(styles.ModuleRngUCB):
    """Laplace noise as the difference of two exponentials from a module-level random.Random."""

    def __init__(self, n_arms=2, epsilon=1.0):
        super().__init__(n_arms, epsilon)
        self._laplace = lambda scale: scale * (_PY_RNG.expovariate(1.0) - _PY_RNG.expovariate(1.0))


class HeldModuleRng(styles.ModuleRngUCB):
    """Draws through a bound method of a module-level Generator taken at import."""

    def __init__(self, n_arms=2, epsilon=1.0):
        super().__init__(n_arms, epsilon)
        self._laplace = lambda scale: _draw(0.0, scale)


def test_module_level_random_random_is_replaced_and_a_held_generator_is_swapped():
    data = np.full((T, 2), 0.5)
    for cls, mode in ((PyModuleRng, "replace"), (HeldModuleRng, "swap")):
        states = (_PY_RNG.getstate(), _NP_RNG.bit_generator.state)
        p = PerRun(cls, {}, "pure:eps=1")
        assert f"({'a random.Random' if cls is PyModuleRng else 'a numpy Generator'}): {mode}" in p.describe()
        v = views(p, data)
        assert np.array_equal(v, views(p, data)) and len({tuple(r) for r in v}) > 1
        assert (_PY_RNG.getstate(), _NP_RNG.bit_generator.state) == states  # the module's objects end as they began
    assert any("its state swapped into that object" in n for n in p.audit_notes)


class OSSeeded(styles.ModuleRngUCB):
    """Draws from a generator seeded from the OS in its constructor: nothing can seed it."""

    def __init__(self, n_arms=2, epsilon=1.0):
        super().__init__(n_arms, epsilon)
        self.gen = np.random.default_rng()
        self._laplace = lambda scale: self.gen.laplace(0.0, scale)


def test_randomness_the_adapter_cannot_seed_is_refused_naming_where_the_copies_differ():
    with pytest.raises(DPAuditError) as e:
        PerRun(OSSeeded, {})
    msg = str(e.value)
    assert one_sentence(msg) and "cannot seed" in msg
    # not two identical lists of arms: the first round that differs, or the generator that does
    assert re.search(r"from round \d+ on \(arm \d vs arm \d\)|different states of its generator gen", msg)


# ---- 6. --param widened from an int default ----------------------------------------------------

@pytest.mark.slow
def test_a_fractional_param_for_an_int_default_is_passed_as_a_float_with_a_note(pair):
    a = run_twice(f"{STYLES}:IntEpsilonUCB", pair, "per-run", params={"epsilon": "0.5"})
    assert a.params["epsilon"] == 0.5 and isinstance(a.params["epsilon"], float)
    assert any("epsilon=0.5 is not an integer" in n and "passed as the float 0.5" in n for n in a.notes)
    with pytest.raises(DPAuditError, match=r"^parameter epsilon='abc' must be a number\.$"):
        coerce_params(styles.IntEpsilonUCB, {"epsilon": "abc"})
    assert coerce_params(styles.IntEpsilonUCB, {"n_arms": "3.0"}) == {"n_arms": 3}

    def annotated(n_arms: int = 2):
        return n_arms

    with pytest.raises(DPAuditError, match=r"must be an integer \(its annotation says int\)"):
        coerce_params(annotated, {"n_arms": "2.5"})


# ---- 7. a one-run local-DP class: its randomizer is the channel --------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("cls, verdict", [("RROneRunUCB", "consistent"), ("TwoReportsRROneRunUCB", "violation")])
def test_a_one_run_ldp_class_is_audited_under_local_through_its_randomizer(cls, verdict):
    spec = f"{LDP}:{cls}"
    kw = dict(protocol="local", runs=500, horizon=T, adapter="per-run:randomizer=privatize,domain=0,1",
              claim="pure:eps=1", central=False, seed=5)
    a, b = check(spec, {"epsilon": "1"}, **kw), check(spec, {"epsilon": "1"}, **kw)
    assert findings_json(a) == findings_json(b) and a["verdict"] == verdict
    assert [x["attack"] for x in a["attacks"]] == ["channel"]
    assert any("the channel is" in n and ".privatize(z)" in n for n in a["notes"])
    p = make_per_run(spec, {}, "pure:eps=1", horizon=T, randomizer="privatize")
    info = check_local_plugin(p, horizon=T)  # the local plug-in contract, member by member
    assert info.domain == (0.0, 1.0) and info.message_shape == () and not info.transcript


def test_without_a_randomizer_a_one_run_class_has_no_channel_and_a_bad_randomizer_is_one_sentence():
    with pytest.raises(DPAuditError, match="exposes no channel"):
        check(f"{LDP}:RROneRunUCB", {}, protocol="local", runs=500, horizon=T, adapter="per-run",
              claim="pure:eps=1", central=False)
    for adapter, pattern in (("per-run:randomizer=update", r"RROneRunUCB.update\(arm, reward\) must take one argument"),
                             ("per-run:randomizer=privatise", r"has no method 'privatise' to serve as its randomizer"),
                             ("per-run:randomizer=privatize,domain=1,0", r"LOW < HIGH")):
        with pytest.raises(DPAuditError) as e:
            check(f"{LDP}:RROneRunUCB", {}, protocol="local", runs=500, horizon=T, adapter=adapter,
                  claim="pure:eps=1", central=False)
        assert re.search(pattern, str(e.value)) and one_sentence(str(e.value))


# ---- 8. a draw from np.random after the probe ---------------------------------------------------

def test_a_draw_from_np_random_after_the_probe_is_kept_apart_and_off_names_redirect():
    before = global_states()
    data = np.tile([0.3, 0.7], (60, 1))
    p = PerRun(elimination.BlockEliminationDP, {}, "pure:eps=1")  # first draw at round 41, after the probe
    v = views(p, data, n=100)
    noisy = [tuple(o.last_means.values()) for o in p._objs]  # the noisy means of the first batch (round 41)
    assert np.array_equal(v, views(p, data, n=100)) and same_states(before)
    assert noisy == [tuple(o.last_means.values()) for o in p._objs]  # reproducible
    assert len(set(noisy)) == 100  # and each copy drew its own noise
    with pytest.raises(DPAuditError) as e:
        views(PerRun(elimination.BlockEliminationDP, {}, "pure:eps=1", globals_mode="off"), data, n=3)
    msg = str(e.value)
    assert one_sentence(msg) and "at round 41" in msg and "globals=redirect" in msg and "globals=swap" not in msg
    assert same_states(before)


# ---- 9. the up-front estimate measures the class ------------------------------------------------

@pytest.mark.slow
def test_the_estimate_measures_the_class_and_refuses_up_front(pair):
    a = audit(f"{STYLES}:ModuleRngUCB", adapter="per-run", claim="pure:eps=1", runs=500, pair=pair, workers=1)
    est = a.extra["estimate"]  # recorded in the findings (a run key: not part of the reproducible JSON)
    assert 1e2 < est["run_steps_per_second"] < 1e8 and est["seconds"] > 0  # measured, not a speed requirement
    with pytest.raises(DPAuditError) as e:
        # 7.2 s: longer than the estimate's own calibration, far shorter than 50,000 runs of this class
        audit(f"{STYLES}:ModuleRngUCB", adapter="per-run", claim="pure:eps=1", workers=1, max_hours=2e-3)
    msg = str(e.value)
    assert one_sentence(msg) and re.search(r"at a measured [\d.e+]+ per second on 1 process", msg), msg
    assert "more than --max-hours 0.002" in msg


def test_a_one_run_class_gets_the_frugal_searches_and_its_estimate_counts_them():
    """The threshold search's noise stop is a one-run class's (a Python call per pilot run-round); a batched
    policy keeps the full search and its estimate."""
    from types import SimpleNamespace

    from dpaudit.policies import make_policy
    from dpaudit.runner.central import searches
    from dpaudit.runner.cost import run_steps

    r = SimpleNamespace(horizon=None, pair=None, runs=50_000)
    per_run = searches(PerRun(elimination.BlockEliminationDP, {}, "pure:eps=1"), r, "table")
    batched = searches(make_policy("dp-se", {}), r, "table")
    assert per_run["frugal"] is True and batched["frugal"] is False
    assert per_run["threshold"] == batched["threshold"] > 1 and per_run["sweep"]
    assert run_steps(50_000, 48, 20, **per_run) < run_steps(50_000, 48, 20, **{**per_run, "frugal": False})


# ---- the options' syntax --------------------------------------------------------------------------

def test_adapter_options_parse_lists_up_to_the_next_key():
    assert parse_adapter("per-run:update_args=t,arm,reward,first_round=1") == (
        "per-run", {"update_args": "t,arm,reward", "first_round": 1})
    assert parse_adapter("per-run:randomizer=privatize,domain=0,1") == (
        "per-run", {"randomizer": "privatize", "domain": (0.0, 1.0)})
    assert parse_adapter("per-run:step_args=reward,arm,horizon=n") == (
        "per-run", {"step_args": "reward,arm", "horizon_name": "n"})
    assert parse_arg_map("t,a:arm,r:reward", "update_args") == ((None, "t"), ("a", "arm"), ("r", "reward"))
    assert parse_arg_map({"r": "reward"}, "update_args") == (("r", "reward"),)
    for text, pattern in (("per-run:update_args=t,arm,rew", r"item 'rew' must be one of the tokens"),
                          ("per-run:update_args=arm,arm,reward", r"must name reward once"),
                          ("per-run:domain=0", r"domain must be two numbers"),
                          ("per-run:first_round=1,2", r"KEY=VALUE"),
                          ("per-run:update_args=a:arm,reward", r"positional 'reward' after a keyword")):
        with pytest.raises(DPAuditError) as e:
            parse_adapter(text)
        assert re.search(pattern, str(e.value)) and one_sentence(str(e.value))


class KeywordFeedback:
    n_arms = 2

    def select_arm(self):
        return 0

    def update(self, *, chosen, payoff):
        self.last = (chosen, payoff)


def test_feedback_arguments_by_keyword():
    p = PerRun(KeywordFeedback, {}, update_args="chosen:arm,payoff:reward")
    v = views(p, np.tile([0.25, 0.75], (6, 1)), n=2)
    assert v.shape == (2, 6) and p._objs[1].last == (0, 0.25)
