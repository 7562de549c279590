"""`dpaudit check policy NAME_OR_PLUGIN`: verdicts, exit statuses, JSON, reports and plug-ins."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from dpaudit.cli import main

FAST = ["--horizon", "6", "--runs", "1500", "--param", "n_arms=2"]


def _json(capsys, argv):
    code = main(argv + ["--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_correct_policy_is_consistent(capsys):
    code, out = _json(capsys, ["check", "policy", "adac-ucb", "--param", "rho=0.5", "--seed", "3"] + FAST)
    assert code == 0 and out["verdict"] == "consistent"
    for key in ("verdict", "epsilon_claimed", "epsilon_lower", "delta", "confidence", "seed", "witness", "attacks"):
        assert key in out
    assert out["seed"] == 3 and out["delta"] == 1e-5 and out["confidence"] == 0.95
    assert {a["attack"] for a in out["attacks"]} == {"membership", "likelihood"}
    for a in out["attacks"]:
        assert a["samples"] > 0 and a["seconds"] >= 0 and a["epsilon_lower"] <= out["epsilon_claimed"]
    assert out["gap"] == pytest.approx(out["epsilon_claimed"] - out["epsilon_lower"])
    assert out["ledger"]["implied"] == "0.5-zCDP" and out["ledger"]["shared_rounds"] == 0


def test_mutant_is_a_violation_with_witness(capsys):
    code, out = _json(capsys, ["check", "policy", "mutant-shared-noise"] + FAST)
    assert code == 1 and out["verdict"] == "violation"
    assert out["epsilon_lower"] > out["epsilon_claimed"]
    assert out["witness"]["attack"] == "membership" and "round" in out["witness"]


@pytest.mark.slow
def test_same_seed_same_answer(capsys):
    a = _json(capsys, ["check", "policy", "adac-ucb", "--seed", "5"] + FAST)[1]
    b = _json(capsys, ["check", "policy", "adac-ucb", "--seed", "5"] + FAST)[1]
    assert a["epsilon_lower"] == b["epsilon_lower"] and a["witness"] == b["witness"]


PLUGIN = '''
import numpy as np
from dpaudit.accountants import PureDP

class Leaky:
    """No ledger: plays the arm whose first reward was highest (leaks it completely)."""

    def __init__(self, n_arms: int = 2, epsilon: float = 0.5):
        self.n_arms = n_arms
        self.claim = PureDP(epsilon)

    def reset(self, n_runs, rng):
        self.n, self.rng = n_runs, rng
        self.first = np.zeros((n_runs, self.n_arms))

    def act(self, t, arms=None):
        if t < self.n_arms:
            return np.full(self.n, t)
        return np.argmax(self.first, axis=1)

    def observe(self, t, actions, rewards):
        if t < self.n_arms:
            self.first[np.arange(self.n), actions] = rewards

class Blind(Leaky):
    """No ledger, ignores its data: can never violate its claim."""

    def act(self, t, arms=None):
        return self.rng.integers(0, self.n_arms, self.n)

class NoClaim(Blind):
    def __init__(self, n_arms: int = 2):
        self.n_arms = n_arms
'''


@pytest.fixture()
def plugin(tmp_path):
    path = tmp_path / "myplug.py"
    path.write_text(textwrap.dedent(PLUGIN))
    return str(path)


@pytest.mark.slow
def test_plugin_without_ledger_is_judged_black_box(capsys, plugin):
    code, out = _json(capsys, ["check", "policy", f"{plugin}:Leaky", "--horizon", "6", "--runs", "3000"])
    assert code == 1 and out["ledger"] is None
    assert [a["attack"] for a in out["attacks"]] == ["membership"]
    assert out["confidence_per_attack"] == out["confidence"]  # one attack: the whole budget
    # ignoring its data it cannot violate its claim, but an audit that sees nothing has no evidence
    # that it keeps it either: inconclusive, exit 3, never "consistent"
    code, out = _json(capsys, ["check", "policy", f"{plugin}:Blind", "--horizon", "6", "--runs", "3000"])
    assert code == 3 and out["verdict"] == "inconclusive" and out["epsilon_lower"] == 0


@pytest.mark.parametrize("argv", [
    ["check", "policy", "adac-ucb", "--delta", "1.5"],
    ["check", "policy", "adac-ucb", "--confidence", "1"],
    ["check", "policy", "adac-ucb", "--runs", "5"],
    ["check", "policy", "adac-ucb", "--horizon", "1"],
    ["check", "policy", "adac-ucbb"],
    ["check", "policy", "adac-ucb", "--param", "rho=-1"],
    ["check", "policy", "adac-ucb", "--report", "out.txt"],
])
def test_bad_input_exits_2(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpaudit: error:") and err.count("\n") == 1


def test_plugin_without_claim_exits_2(capsys, plugin):
    assert main(["check", "policy", f"{plugin}:NoClaim", "--horizon", "6", "--runs", "500"]) == 2
    assert "declares no claim" in capsys.readouterr().err


@pytest.mark.slow
def test_report_is_written(tmp_path, capsys):
    md = tmp_path / "r" / "audit.md"
    code = main(["check", "policy", "mutant-first-unnoised", "--report", str(md)] + FAST)
    assert code == 1
    text = md.read_text()
    assert "dpaudit check policy mutant-first-unnoised" in text and "**VIOLATION**" in text
    assert "## The claim" in text and "## Witness" in text and "numpy" in text and "| seed | 0 |" in text
    page = md.with_suffix(".html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    # the Markdown's figures are PNG files beside it, linked (the membership test's ROC among them)
    assert (md.parent / "audit.fig-roc.png").read_bytes()[:4] == b"\x89PNG" and "](audit.fig-roc.png)" in text
    assert "PNG figures beside the Markdown" in capsys.readouterr().out


def test_horizon_is_raised_past_a_late_first_release():
    """GOPE's first phase outlasts the default 48 rounds; without --horizon the audit must reach its release."""
    import numpy as np

    from dpaudit.runner.central import audit_horizon, first_release_step
    from dpaudit.runner.setup import build_policy as _build_policy, with_features as _with_features
    from dpaudit.protocols import get_protocol

    proto = get_protocol("table")
    params = {"n_arms": "3", "dim": "2"}
    build = lambda T: _with_features(_build_policy("adac-gope", dict(params), T), 0)  # noqa: E731
    T, how, _ = audit_horizon(build, proto, np.random.SeedSequence(1), (0.0, 1.0))
    assert T > 48 and "first release at step" in how
    step = int(how.split("first release at step ")[1].split(",")[0])
    assert T == step + 1 + 48
    # the release really is the first one: nothing before `step`, something at it
    from dpaudit.protocols import PairSpec, make_pair

    d = make_pair(PairSpec(0, "mid"), proto, 3, T, (0.0, 1.0)).d0
    assert first_release_step(build(T), proto, d, np.random.SeedSequence(1)) == step
    # a policy that releases early keeps the default
    ucb = lambda T: _build_policy("adac-ucb", {"n_arms": "2"}, T)  # noqa: E731
    assert audit_horizon(ucb, proto, np.random.SeedSequence(1), (0.0, 1.0)) == (48, "default", None)


def test_explicit_horizon_without_release_is_flagged(capsys):
    code, out = _json(capsys, ["check", "policy", "adac-gope", "--param", "n_arms=3", "--param", "dim=2",
                               "--horizon", "6", "--runs", "500"])
    # no release within 6 rounds: nothing private to see, so no evidence either way
    assert code == 3 and out["verdict"] == "inconclusive" and out["ledger"]["releases"] == 0
    assert any("no release happened within T = 6" in n for n in out["notes"])


@pytest.mark.parametrize("name", ["adac-gope", "adac-oful"])
def test_interactive_protocol_is_refused_for_fixed_schedule_policies(capsys, name):
    import numpy as np

    from dpaudit.policies import make_policy
    from dpaudit.protocols import ConstantAdversary, get_protocol

    assert main(["check", "policy", name, "--protocol", "interactive", "--runs", "500"]) == 2
    err = capsys.readouterr().err
    assert "cannot be audited under Interactive DP" in err and "--protocol table" in err
    with pytest.raises(Exception, match="Interactive-DP adversary"):
        get_protocol("interactive").run(make_policy(name), np.zeros((4, 10)), 2, np.random.default_rng(0),
                                        ConstantAdversary((0, 1, 0, 1)))


def test_a_one_run_class_gets_the_per_run_pilot_budgets_behind_the_sandbox():
    """A plug-in runs behind the sandbox's PluginPolicy (the per-run budgets must reach the policy through it); the
    budgets are fixed, not timed, so that an audit reproduces on any machine."""
    from pathlib import Path

    from dpaudit.adapters import build_policy
    from dpaudit.attacks.neighbours import PILOT_CELLS
    from dpaudit.policies import make_policy
    from dpaudit.runner.central import PER_RUN_SMALL, pilot_budgets, small_sample
    from dpaudit.sandbox import wrap_plugin

    spec = str(Path(__file__).resolve().parents[1] / "examples" / "per_run_ucb.py") + ":PrivateUCB"
    one_run = build_policy(spec, {"n_arms": "2", "epsilon": "1"}, 48, adapter="per-run", claim="pure:eps=1")
    for probe in (one_run, wrap_plugin(one_run, spec)):
        assert pilot_budgets(probe, 50000) == (PILOT_CELLS, PER_RUN_SMALL, True)
    assert pilot_budgets(make_policy("adac-ucb"), 50000) == (PILOT_CELLS, small_sample(50000), False)


def test_a_missing_claim_is_refused_before_the_searches_run(capsys):
    # the loop-shaped function declares no claim: the refusal must not wait for the horizon and threshold
    # searches (about 25 s), which print their progress first
    loops = Path(__file__).parent / "thirdparty" / "loops.py"
    assert main(["check", "policy", f"{loops}:dp_etc", "--adapter", "loop", "--seed", "0", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "declares no claim" in err and "horizon T =" not in err and "search" not in err.split("error:")[0]
