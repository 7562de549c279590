"""The layering of DESIGN.md, enforced: import-linter's contracts in pyproject.toml, and no underscore imports.

dpaudit.accountants and dpaudit.attacks live in top-level folders mapped into the package at install
time, so the tests lay the installed package out in a temporary folder (from the modules' own paths,
whatever the install: editable or not) and lint that copy.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import installed_tree as _layout

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def _lint(tree: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: pip install '.[test]' installs import-linter")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([exe, "--config", str(CONFIG), "--no-cache"], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.tooling
def test_the_layers_of_design_md_hold(tmp_path):
    res = _lint(_layout(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


@pytest.mark.tooling
def test_the_contract_catches_an_import_upwards(tmp_path):
    """The lint can fail: an accountant that imports the runner breaks the layers contract."""
    tree = _layout(tmp_path)
    bad = tree / "dpaudit" / "accountants" / "conversions.py"
    bad.write_text(bad.read_text() + "\n\ndef _upwards():\n    from dpaudit.runner import run\n    return run\n")
    res = _lint(tree)
    assert res.returncode != 0 and "dpaudit.accountants.conversions -> dpaudit.runner" in res.stdout


def _underscore_imports(tree: Path) -> list[str]:
    found = []
    for path in sorted((tree / "dpaudit").rglob("*.py")):
        rel = path.relative_to(tree).with_suffix("")
        parts = list(rel.parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if parts[-1] == "__init__" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("dpaudit"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{module} imports {target}.{alias.name}")
    return found


@pytest.mark.tooling
def test_no_module_imports_another_modules_underscore_names(tmp_path):
    assert _underscore_imports(_layout(tmp_path)) == []


@pytest.mark.tooling
def test_the_underscore_check_can_fail(tmp_path):
    tree = _layout(tmp_path)
    (tree / "dpaudit" / "leaky.py").write_text("from dpaudit.runner.setup import _private\n")
    assert _underscore_imports(tree) == ["dpaudit.leaky imports dpaudit.runner.setup._private"]
