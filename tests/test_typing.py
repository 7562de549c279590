"""The Python API examples (README.md's and docs/reference.md's) type-check under ``mypy --strict``, as a
user's code would be checked, and so do dpaudit's public modules themselves.

mypy reads a copy of the installed package (``installed_tree``: the top-level accountants/ and
attacks/ folders are mapped into it at install time). For the example it reports only the example's own
errors; for the public modules it reports theirs (pyproject.toml's ``[tool.mypy]``). dp-accounting ships
no type information, so its imports are taken as untyped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

import pytest
from conftest import installed_tree

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the public modules (what README.md and docs/ show), each checked with mypy --strict
PUBLIC_MODULES = ["dpaudit", "dpaudit.api", "dpaudit.testing", "dpaudit.errors", "dpaudit.papers",
                  "dpaudit.deprecations", "dpaudit.policies.base"]
PUBLIC_PACKAGES = ["dpaudit.accountants"]
CONFIG = """[mypy]
strict = True
cache_dir = {cache}
[mypy-dpaudit.*]
follow_imports = silent
[mypy-dp_accounting.*]
ignore_missing_imports = True
"""


def _mypy(tmp: Path, code: str) -> subprocess.CompletedProcess:
    tree = installed_tree(tmp / "tree")
    (tmp / "example.py").write_text(code)
    (tmp / "mypy.ini").write_text(CONFIG.format(cache=tmp / "cache"))
    env = {**os.environ, "MYPYPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "example.py"], cwd=tmp,
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.tooling
@pytest.mark.parametrize("doc", [README, README.parent / "docs" / "reference.md"], ids=["README", "reference"])
def test_the_readme_python_example_passes_mypy_strict(doc, tmp_path):
    """The Python API block of README.md and of docs/reference.md, under ``mypy --strict``."""
    block = re.search(r"```python\n(.*?)```", doc.read_text().split("## Python API", 1)[1], re.S).group(1)
    res = _mypy(tmp_path, block)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


@pytest.mark.tooling
def test_mypy_sees_a_wrong_use(tmp_path):
    """The check can fail: an Optional field used as a float, and a name dpaudit does not export."""
    res = _mypy(tmp_path, "import dpaudit\n\nr = dpaudit.audit('adac-ucb')\nx: float = r.epsilon_lower + 1\n"
                          "y = dpaudit.not_a_name\n")
    assert res.returncode == 1
    assert re.search(r'example.py:4: error: Unsupported operand types for \+ \("None" and "int"\)', res.stdout), res.stdout
    assert "example.py:5: error" in res.stdout and "not_a_name" in res.stdout, res.stdout


@pytest.mark.tooling
def test_dpaudit_all_matches_its_lazy_names():
    import dpaudit

    assert sorted(dpaudit.__all__) == sorted(["__version__", *dpaudit._LAZY])
    for name in dpaudit.__all__:
        assert getattr(dpaudit, name) is not None


@pytest.mark.tooling
def test_the_public_modules_pass_mypy_strict(tmp_path):
    """``mypy --strict`` on exactly the public modules, with pyproject.toml's settings, reports nothing."""
    tree = installed_tree(tmp_path / "tree")
    (tree / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    targets = [a for m in PUBLIC_MODULES for a in ("-m", m)] + [a for p in PUBLIC_PACKAGES for a in ("-p", p)]
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", "pyproject.toml",
                          "--cache-dir", str(tmp_path / "cache"), *targets], cwd=tree, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout, res.stdout


@pytest.mark.tooling
@pytest.mark.skipif(tomllib is None, reason="tomllib is Python 3.11+")
def test_pyproject_names_the_same_public_modules():
    """``mypy`` run by hand with pyproject.toml's [tool.mypy] checks the modules the test above checks."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    assert config["modules"] == PUBLIC_MODULES and config["packages"] == PUBLIC_PACKAGES
