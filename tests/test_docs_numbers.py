"""The numbers README.md and docs/ quote are the numbers the code gives (docs/regenerate.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _regenerate():
    spec = importlib.util.spec_from_file_location("regenerate", ROOT / "docs" / "regenerate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_quote_matches_its_source():
    """Each marked number equals its run's recorded value or its benchmark's, each quoted output what its
    command printed, each example report the bound its command gave."""
    problems = _regenerate().check()
    assert problems == [], "\n".join(problems)


def test_the_documents_quote_something():
    """The check is not vacuous: the quick start's output and its prose numbers are marked."""
    reg = _regenerate()
    kinds = [(doc.name, kind) for doc, kind, _ in reg.markers()]
    assert ("README.md", "output") in kinds
    assert sum(1 for name, kind in kinds if name == "README.md" and kind == "value") >= 4
    assert any(name == "outside-code.md" and kind == "value" for name, kind in kinds)


def test_a_stale_quote_is_named(tmp_path, monkeypatch):
    """A number changed by hand (or left behind by a code change) is reported with what it should be."""
    reg = _regenerate()
    doc = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    cache = json.loads(reg.CACHE.read_text())
    upper = cache["runs"]["quick"]["values"]["epsilon_upper"]
    marked = f"<!--=quick:epsilon_upper-->{reg.formatted(upper, None)}<!--/-->"
    assert marked in text
    doc.write_text(text.replace(marked, "<!--=quick:epsilon_upper-->9.999<!--/-->", 1))
    monkeypatch.setattr(reg, "documents", lambda: [doc])
    problems = reg.check()
    assert any("'9.999'" in p and reg.formatted(upper, None) in p for p in problems), problems
    # and an output block edited by hand
    doc.write_text(text.replace("verdict     CONSISTENT", "verdict     VIOLATION", 1))
    assert any("quoted output" in p for p in reg.check())


def test_value_paths_and_formats():
    reg = _regenerate()
    data = {"rows": [{"policy": "a.py:X", "s": 25.118}, {"policy": "b", "s": 3}], "eps": 0.76912}
    assert reg.lookup(data, "rows[policy=a.py:X].s") == 25.118
    assert reg.formatted(reg.lookup(data, "rows[policy=a.py:X].s"), ".0f") == "25"
    assert reg.formatted(data["eps"], None) == "0.7691"
    assert reg.formatted(3, None) == "3" and reg.formatted("consistent", None) == "consistent"
    with pytest.raises(KeyError):
        reg.lookup(data, "rows[policy=c].s")
    assert reg.masked("eps >= 1.5 (50000 samples, 0.6 s; 12 ms)") == "eps >= 1.5 (50000 samples, T s; T s)"


@pytest.mark.slow
def test_the_quick_start_reproduces():
    """The README's quick start, run again now, prints what the README shows and gives its quoted numbers."""
    if shutil.which("dpaudit") is None:  # pragma: no cover - the package is installed in every test venv
        pytest.skip("dpaudit is not installed")
    reg = _regenerate()
    cache = json.loads(reg.CACHE.read_text())
    runs = {m["id"]: m["cmd"] for _, kind, m in reg.markers() if kind == "run"}
    problems = (reg.rerun_problems(cache, runs, only="--report reports/adac-ucb.md")  # the printed block
                + reg.rerun_problems(cache, runs, only="quick"))  # the numbers the prose quotes
    assert problems == [], "\n".join(problems)


@pytest.mark.slow
def test_every_documented_command_reproduces():
    reg = _regenerate()
    problems = reg.check(rerun=True)
    assert problems == [], "\n".join(problems)
