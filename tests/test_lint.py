"""ruff, with the small rule set of pyproject.toml's ``[tool.ruff]``, finds nothing in the repository.

The rules are syntax errors, pyflakes (unused imports and variables, undefined names) and bugbear's likely
bugs; formatting is not enforced. Run ``ruff check .`` from the repository root to see what this test sees.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.tooling


def _ruff() -> list[str]:
    found = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(found).exists():
        pytest.fail("ruff is not installed: pip install '.[test]' installs it")
    return [found]


def test_ruff_finds_nothing():
    proc = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_would_find_an_unused_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n")
    proc = subprocess.run([*_ruff(), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "F401" in proc.stdout, proc.stdout + proc.stderr
