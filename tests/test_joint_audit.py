"""``--protocol joint`` and ``--protocol shuffle``: consistent at the defaults, every mutant flagged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpaudit.check_joint import audit_joint, audit_shuffle, joint_pairs
from dpaudit.cli import main
from dpaudit.errors import DPAuditError
from dpaudit.policies import make_policy
from dpaudit.protocols import ContextInput, JointDP, ShuffleDP, get_protocol

TINY = {"n_arms": "2", "dim": "2"}


def test_protocols_are_registered_and_check_their_input():
    assert isinstance(get_protocol("joint"), JointDP) and isinstance(get_protocol("shuffle"), ShuffleDP)
    pol = make_policy("jdp-glm", {"n_arms": 2, "dim": 2, "horizon": 4})
    with pytest.raises(DPAuditError, match="contexts must have shape"):
        JointDP().run(pol, ContextInput(np.zeros((4, 3, 2)), np.zeros((4, 3))), 2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="NaN"):
        JointDP().run(pol, ContextInput(np.full((4, 2, 2), np.nan), np.zeros((4, 2))), 2, np.random.default_rng(0))
    views = JointDP().run(pol, joint_pairs(2, 2, 4)[0].d0, 5, np.random.default_rng(0))
    assert views.shape == (5, 4)


def test_joint_pairs_differ_only_at_the_canary_round():
    for pair in joint_pairs(3, 2, 8):
        diff = np.flatnonzero(np.any(pair.d0.X != pair.d1.X, axis=(1, 2)) | np.any(pair.d0.R != pair.d1.R, axis=1))
        assert diff.tolist() == [pair.round]


@pytest.mark.parametrize("seed", [0, 1])
def test_jdp_glm_is_consistent(seed):
    out = audit_joint("jdp-glm", TINY, runs=2000, horizon=8, seed=seed)
    assert out["verdict"] == "consistent", out["reason"]
    assert 0 <= out["epsilon_lower"] < out["epsilon_claimed"]
    assert {a["attack"] for a in out["attacks"]} == {"membership", "tree-releases"}
    assert out["ledger"]["implied_epsilon"] <= out["epsilon_claimed"] + 1e-9
    # joint DP does not hide a_t itself: the central view leaks far beyond the claim
    assert out["central"]["epsilon_lower"] > out["epsilon_claimed"]


@pytest.mark.parametrize("name,horizon,by", [
    ("mutant-tree-reused-noise", 8, "tree-releases"),
    ("mutant-tree-no-leaf-noise", 8, "tree-releases"),
    ("mutant-noisy-det-switch", 16, "ledger"),
])
def test_joint_mutants_are_flagged(name, horizon, by):
    out = audit_joint(name, TINY, runs=2000, horizon=horizon, seed=0)
    assert out["verdict"] == "violation", out["reason"]
    assert out["witness"]["attack"] == by


def test_shuffle_glm_is_consistent_and_the_arrival_order_mutant_is_not():
    params = {"dim": "1", "n_arms": "2"}
    ok = audit_shuffle("shuffle-glm", params, runs=3000, seed=0)
    bad = audit_shuffle("mutant-shuffle-arrival-order", params, runs=3000, seed=0)
    assert ok["epsilon_claimed"] == pytest.approx(bad["epsilon_claimed"])
    # never a violation of the correct policy (tests/test_shuffle_glm.py checks it earns consistent with power)
    assert ok["verdict"] in ("consistent", "inconclusive") and ok["epsilon_lower"] < ok["epsilon_claimed"]
    assert bad["verdict"] == "violation" and bad["epsilon_lower"] > bad["epsilon_claimed"]


def test_cli_joint_json_report_and_exit_codes(capsys, tmp_path):
    report = tmp_path / "joint.md"
    code = main(["check", "policy", "mutant-tree-no-leaf-noise", "--protocol", "joint", "--param", "n_arms=2",
                 "--param", "dim=2", "--horizon", "8", "--runs", "1000", "--json", "--report", str(report)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["verdict"] == "violation" and out["protocol"] == "joint"
    text = report.read_text()
    assert "VIOLATION" in text and "--protocol joint" in text and "### tree-releases" in text
    assert main(["check", "policy", "adac-ucb", "--protocol", "joint", "--runs", "1000"]) == 2
    assert "not a contextual policy" in capsys.readouterr().err
    assert main(["check", "policy", "jdp-glm", "--protocol", "shuffle", "--runs", "1000"]) == 2
    assert "no shuffle pipeline" in capsys.readouterr().err


def test_options_of_the_table_audit_are_refused_under_joint_and_shuffle(capsys):
    for proto in ("joint", "shuffle"):
        assert main(["check", "policy", "jdp-glm", "--protocol", proto, "--rewards", "0,1", "--runs", "1000"]) == 2
        assert "cannot be combined with --protocol" in capsys.readouterr().err


def test_python_api_audits_under_joint_and_shuffle():
    import dpaudit

    a = dpaudit.audit("mutant-tree-reused-noise", params=TINY, protocol="joint", runs=1000, horizon=8, workers=1)
    assert a.verdict == "violation" and a.epsilon_lower > a.epsilon_claimed
    b = dpaudit.audit("mutant-shuffle-arrival-order", protocol="shuffle", runs=1000, workers=1)
    assert b.verdict == "violation" and b.epsilon_lower > b.epsilon_claimed
