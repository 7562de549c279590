"""`dpaudit --help` lists the exit statuses the commands use."""

import re

import pytest


@pytest.mark.slow
def test_help_lists_every_exit_status(dpaudit_cli):
    res = dpaudit_cli("--help")
    assert res.returncode == 0, res.stderr[-500:]
    out = res.stdout
    assert "exit statuses:" in out, out[-1000:]
    listed = {int(m) for m in re.findall(r"^\s+(\d+)\s", out.split("exit statuses:")[1], re.M)}
    assert listed == {0, 1, 2, 3, 70, 130}
    # the statuses the CLI really returns for a consistent, a violation and a bad input
    base = ["check", "policy"]
    fast = ["--runs", "1000", "--horizon", "12", "--workers", "1"]
    assert dpaudit_cli(*base, "adac-ucb", *fast).returncode == 0
    assert dpaudit_cli(*base, "mutant-shared-noise", *fast).returncode == 1
    assert dpaudit_cli(*base, "adac-ucb", "--runs", "-5").returncode == 2


@pytest.mark.slow
def test_every_json_output_names_its_format(dpaudit_cli):
    import json

    for cmd, fmt in [(["list", "--json"], "dpaudit.list/1"), (["describe", "adac-ucb", "--json"], "dpaudit.describe/1"),
                     (["account", "zcdp", "--rho", "0.1", "--delta", "1e-5", "--json"], "dpaudit.account.zcdp/1"),
                     (["regret", "adac-ucb", "--horizon", "20", "--runs", "4", "--json"], "dpaudit.regret/1"),
                     (["check", "policy", "adac-ucb", "--runs", "500", "--horizon", "8", "--workers", "1", "--json"],
                      "dpaudit.audit/2")]:
        out = dpaudit_cli(*cmd)
        assert out.returncode in (0, 1), (cmd, out.stderr[-500:])
        assert json.loads(out.stdout)["format"] == fmt, (cmd, out.stderr[-300:])
