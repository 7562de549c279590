"""`dpaudit account ...`: answers equal the library's, --json keys, exit status 2 on bad input,
and the claim-vs-ledger comparison for every registered policy and for two policies of our own."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dpaudit.accountants.conversions import rdp_to_approx, zcdp_rho_for_epsilon, zcdp_to_approx
from dpaudit.accountants.gaussian import gaussian_epsilon, gaussian_sigma
from dpaudit.cli import main

TEST_POLICIES = Path(__file__).with_name("test_testing.py")


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["account", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_zcdp_json(capsys):
    code, obj = run_json(capsys, "zcdp", "--rho", "0.001", "--delta", "1e-6", "--compare")
    conv = zcdp_to_approx(0.001, 1e-6)
    assert code == 0
    assert obj["epsilon"] == conv.epsilon and obj["order"] == conv.order and obj["method"] == "cks-continuous"
    assert obj["dp_accounting_grid"] > obj["epsilon"]


def test_rdp_json(capsys):
    code, obj = run_json(capsys, "rdp", "--alpha", "10", "--epsilon", "1", "--delta", "1e-5")
    assert code == 0 and obj["epsilon"] == rdp_to_approx(10, 1, 1e-5).epsilon and obj["order"] == 10


def test_rdp_takes_eps_as_a_hidden_alias_of_epsilon(capsys):
    """One spelling per flag: --epsilon, as in calibrate, lint and check; --eps still works."""
    code, obj = run_json(capsys, "rdp", "--alpha", "10", "--eps", "1", "--delta", "1e-5")
    assert code == 0 and obj["epsilon"] == rdp_to_approx(10, 1, 1e-5).epsilon
    with pytest.raises(SystemExit):
        main(["account", "rdp", "--help"])
    out = capsys.readouterr().out
    assert "--epsilon" in out and "--eps " not in out and "--eps," not in out
    with pytest.raises(SystemExit) as exc:
        main(["account", "rdp", "--alpha", "10", "--delta", "1e-5"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--epsilon" in err and "--eps " not in err


def test_gaussian_json(capsys):
    code, obj = run_json(capsys, "gaussian", "--sigma", "2", "--compositions", "10", "--delta", "1e-5")
    assert code == 0 and obj["method"] == "gaussian-exact" and "order" in obj
    assert math.isclose(obj["epsilon"], gaussian_epsilon(1e-5, 2.0, 1.0, 10).epsilon, rel_tol=1e-15)
    assert obj["epsilon"] < obj["zcdp_epsilon"]


def test_calibrate_and_lint_json(capsys):
    code, obj = run_json(capsys, "calibrate", "--epsilon", "1", "--delta", "1e-5")
    assert code == 0 and obj["sigma"] == gaussian_sigma(1.0, 1e-5) and obj["rho"] == zcdp_rho_for_epsilon(1.0, 1e-5)
    code, obj = run_json(capsys, "lint", "--epsilon", "8", "--delta", "1e-3")
    assert code == 0 and obj["classical"]["flagged"] and not obj["classical"]["holds"]


def test_human_table(capsys):
    assert main(["account", "zcdp", "--rho", "1", "--delta", "1e-6"]) == 0
    out = capsys.readouterr().out
    assert "cks-continuous" in out and "7.766" in out


@pytest.mark.parametrize("argv, needle", [
    (["zcdp", "--rho", "-1", "--delta", "1e-5"], "rho"),
    (["zcdp", "--rho", "1", "--delta", "1"], "delta"),
    (["zcdp", "--rho", "1", "--delta", "0"], "delta"),
    (["rdp", "--alpha", "1", "--epsilon", "1", "--delta", "1e-5"], "alpha"),
    (["gaussian", "--sigma", "0", "--delta", "1e-5"], "sigma"),
    (["gaussian", "--sigma", "1", "--compositions", "0", "--delta", "1e-5"], "compositions"),
    (["policy", "no-such-policy", "--delta", "1e-5"], "unknown policy"),
])
def test_bad_input_exit_2_one_sentence(capsys, argv, needle):
    assert main(["account", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and err.count("\n") == 0 and err.endswith(".")


def test_own_policy_with_forgetting_is_consistent(capsys):
    code, obj = run_json(capsys, "policy", f"{TEST_POLICIES}:ForgettingMeans", "--param", "rho=0.5",
                         "--delta", "1e-5", "--horizon", "200")
    assert code == 0 and obj["status"] == "consistent"
    assert obj["shared_rounds"] == 0 and obj["ledger"] == "0.5-zCDP"
    assert obj["epsilon"] == gaussian_epsilon(1e-5, mu=1.0).epsilon  # rho = 0.5 <=> mu = 1, exact
    assert obj["claim_epsilon"] == zcdp_to_approx(0.5, 1e-5).epsilon


def test_own_policy_without_forgetting_is_flagged(capsys):
    code, obj = run_json(capsys, "policy", f"{TEST_POLICIES}:NoForgettingMeans", "--param", "rho=0.5",
                         "--delta", "1e-5", "--horizon", "62")
    # 2 arms, episodes of 1,1,2,2,4,4,8,8,16,16 rounds: round 0 is re-released by all 5 of arm 0's episodes
    assert code == 1 and obj["status"] == "exceeds-claim"
    assert obj["worst_round_releases"] == 5 and obj["max_usage"] == 5
    assert math.isclose(obj["renyi_ratio"], 5.0, rel_tol=1e-12)
    assert obj["shared_rounds"] > 0 and "5 releases used it" in obj["finding"]


def _registered():
    from dpaudit.policies.registry import registered

    return registered()


@pytest.mark.parametrize("entry", _registered(), ids=lambda e: e.name)
def test_every_registered_policy_claim_vs_ledger(capsys, entry):
    from dpaudit.policies.registry import make_policy

    probe = make_policy(entry.name, {})
    if not hasattr(probe, "ledger"):  # outside-style controls (dp-se, dp-etc): nothing to account
        assert main(["account", "policy", entry.name, "--delta", "1e-5"]) == 2
        assert "ledger" in capsys.readouterr().err
        return
    linear = bool(getattr(probe, "dim", None) or getattr(probe, "d", None))
    argv = ["account", "policy", entry.name, "--delta", "1e-5", "--horizon", "1500" if linear else "300",
            "--runs", "2", "--json"]
    if probe.claim is None:  # a non-private policy has no claim to account against: refused
        assert main(argv) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and "declares no privacy claim" in cap.err and cap.err.count("\n") == 1
    else:
        code, obj = run_json(capsys, *argv[1:-1])
        assert {"epsilon", "method", "order", "claim", "ledger", "status"} <= set(obj)
        assert obj["status"] == "consistent", obj["finding"]
        assert obj["epsilon"] <= obj["claim_epsilon"] * (1 + 1e-9)
        assert code == 0
