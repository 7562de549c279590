"""benchmarks/run.py, the benchmarks' one entry point: every script is listed, and NAME ARGS... runs it with ARGS."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"


def _run_module():
    spec = importlib.util.spec_from_file_location("benchmarks_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _python(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_script_is_described_once():
    run = _run_module()
    found = run.scripts()
    assert {p.parent.name for p in found.values()} == set(run.FOLDERS)
    assert set(found) == set(run.BENCHMARKS), set(found) ^ set(run.BENCHMARKS)
    assert all(q.endswith("?") and t for q, t in run.BENCHMARKS.values())


def test_list_gives_name_folder_runtime_and_question(tmp_path):
    run = _run_module()
    res = _python(str(RUN), "--list", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = {line.split()[0]: line for line in res.stdout.splitlines()[1:]}
    assert set(lines) == set(run.BENCHMARKS)
    for name, path in run.scripts().items():
        question, runtime = run.BENCHMARKS[name]
        assert f" {path.parent.name} " in lines[name] and question in lines[name] and runtime in lines[name]


def test_arguments_reach_the_script_and_its_status_comes_back(tmp_path):
    res = _python(str(RUN), "defaults_compare", "--help", cwd=tmp_path)
    assert res.returncode == 0 and "usage: defaults_compare.py" in res.stdout and "--old-label" in res.stdout
    res = _python(str(RUN), "defaults_compare", "a.json", "b.json", "--no-such-option", cwd=tmp_path)
    assert res.returncode == 2 and "unrecognized arguments: --no-such-option" in res.stderr


def test_a_script_importing_a_sibling_folder_runs_both_ways(tmp_path):
    """speed/defaults.py imports validation/tightness_policies.py: through run.py and run directly, from anywhere."""
    for argv in ([str(RUN), "defaults", "--help"], [str(ROOT / "benchmarks" / "speed" / "defaults.py"), "--help"]):
        res = _python(*argv, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "usage: defaults.py" in res.stdout


def test_an_unknown_name_is_refused_with_the_names(tmp_path):
    res = _python(str(RUN), "no-such-benchmark", cwd=tmp_path)
    assert res.returncode == 2
    assert "'no-such-benchmark'" in res.stderr and "controls" in res.stderr and "--list" in res.stderr


def test_the_readme_describes_every_benchmark_and_every_result():
    """benchmarks/README.md has a row per benchmark, names every file of results/, and its paths exist."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    run = _run_module()
    missing = [name for name in run.BENCHMARKS if f"| `{name}`" not in text]
    unnamed = [p.name for p in (ROOT / "benchmarks" / "results").iterdir() if f"`{p.stem}." not in text]
    paths = re.findall(r"(?<![\w/])((?:speed|validation|studies)/[\w/]+(?:\.py|/))", text)
    absent = [p for p in paths if not (ROOT / "benchmarks" / p).exists()]
    assert not missing and not unnamed and not absent and len(paths) >= 3, (missing, unnamed, absent)
