"""``dpaudit reproduce zcdp-bandits --quick``: figures, tables and the paper's two trends."""

from __future__ import annotations

import json

import pytest

from dpaudit.cli import main
from dpaudit.environments import BernoulliBandit
from dpaudit.reproduce.zcdp_bandits import run_panel


@pytest.mark.slow
def test_reproduce_quick(tmp_path, capsys):
    assert main(["reproduce", "zcdp-bandits", "--quick", "--out", str(tmp_path), "--json", "--seed", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == json.loads((tmp_path / "zcdp_bandits.json").read_text())
    md = (tmp_path / "zcdp_bandits.md").read_text()
    assert "beta > 3" in md and "Reg_priv - Reg_nonpriv" in md
    panels = {p["key"]: p for p in out["panels"]}
    assert set(panels) == {"ucb", "gope", "oful"}
    for p in panels.values():
        if "missing" not in p:
            png = tmp_path / f"zcdp_bandits_{p['key']}.png"
            assert png.read_bytes()[:4] == b"\x89PNG"
    ucb = panels["ucb"]
    assert ucb["runs"] == 100 and ucb["path"] == "episode"
    T = str(ucb["horizons"][-1])
    rhos = sorted(ucb["diff"], key=float)
    strong, weak = ucb["diff"][rhos[0]][T], ucb["diff"][rhos[-1]][T]
    # privacy costs regret at small rho (CI above 0) and is nearly free at large rho (CI covers 0)
    assert strong[1] > 0 and weak[1] <= 0 <= weak[2]
    assert strong[0] > 5 * abs(weak[0])
    # the price of privacy shrinks over time for a fixed rho
    pop = ucb["pop"]["0.5"]
    assert pop[-1] < pop[len(pop) // 10]


def test_panel_reports_missing_policies():
    panel = run_panel("x", "test", lambda: BernoulliBandit(), "no-such-policy", {}, "ucb-episodes", {"n_arms": 5},
                      100, [100], [1.0], [1.0], 2, 0)
    assert panel["missing"] == ["no-such-policy"]
    assert any("no-such-policy" in n for n in panel["notes"])
