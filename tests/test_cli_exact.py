"""The CLI on finite specs: `dpaudit check policy SPEC.json` and `dpaudit reproduce table-vs-view`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpaudit.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_json_keys_and_values(capsys) -> None:
    code, out, _ = run(capsys, "check", "policy", "table-vs-view-counterexample", "--protocol", "table",
                       "--epsilon", "0.95", "--delta", "0.17", "--alpha", "2", "--json")
    assert code == 0
    obj = json.loads(out)
    assert {"protocol", "delta", "epsilon", "renyi", "witness"} <= set(obj)
    assert obj["protocol"] == "table"
    assert obj["delta"] > 0.17 and round(obj["epsilon"], 2) == 0.98
    assert obj["renyi"] == "inf"  # some table rows are deterministic
    assert obj["witness"]["delta"]["round"] == 1


def test_check_spec_file_human_output(capsys, tmp_path) -> None:
    from dpaudit.policies.finite import bundled_spec

    path = tmp_path / "p.json"
    path.write_text(json.dumps(bundled_spec("table-vs-view-counterexample").to_spec()))
    code, out, _ = run(capsys, "check", "policy", str(path), "--protocol", "view", "--epsilon", "0.95")
    assert code == 0
    assert "delta(eps = 0.95)" in out and "0.168783" in out and "witness: round 1" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check", "policy", "table-vs-view-counterexample", "--delta", "1.5"], r"delta must lie in \[0, 1\), got 1.5"),
        (["check", "policy", "table-vs-view-counterexample", "--alpha", "0.5"], "must be greater than 1, got 0.5"),
        (["check", "policy", "nope.json"], "cannot read finite-policy spec 'nope.json'"),
        (["check", "policy", "table-vs-view-counterexample", "--protocol", "interactive", "--max-work", "100"],
         "above the limit 1e\\+02"),
        (["reproduce", "table-vs-veiw"], "Did you mean 'table-vs-view'"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(capsys, argv, message) -> None:
    import re

    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("dpaudit: error: ") and re.search(message, err)
    assert "Traceback" not in err and err.count("\n") == 1


def test_reproduce_table_vs_view(capsys) -> None:
    code, out, _ = run(capsys, "reproduce", "table-vs-view", "--json")
    assert code == 0
    obj = json.loads(out)
    assert obj["reproduced"] is True
    rows = {r["quantity"]: r["dpaudit"] for r in obj["rows"]}
    assert rows["View delta at eps = 0.95"] <= 0.17 < rows["Table delta at eps = 0.95"]
    assert round(rows["Table eps at delta = 0.17"], 2) == 0.98
    assert rows["Interactive delta at eps = 0.95"] >= rows["Table delta at eps = 0.95"]


@pytest.mark.slow
def test_console_script_is_installed(tmp_path) -> None:
    from pathlib import Path

    script = Path(sys.executable).with_name("dpaudit")
    assert script.exists(), "the console script `dpaudit` is not installed next to the interpreter"
    res = subprocess.run([str(script), "reproduce", "table-vs-view"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0 and "Reproduced" in res.stdout
