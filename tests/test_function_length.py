"""No function of the audit pipeline, the attacks or the protocols is longer than a reader holds in their head.

Each module is parsed from the source tree with ``ast`` (the repository's ``attacks/`` folder is the package
``dpaudit.attacks``); a function's length is ``end_lineno - lineno + 1``, its ``def`` line to its last line,
methods and nested functions each counted on their own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the longest function allowed, in lines
MAX_LINES = 80
#: the folders checked, as paths in the repository
FOLDERS = ["dpaudit/runner", "attacks", "dpaudit/protocols"]


def long_functions(source: str, name: str, limit: int = MAX_LINES) -> list[str]:
    """Every function of ``source`` (methods and nested functions too) longer than ``limit`` lines, as
    ``"NAME:LINE FUNCTION (N lines)"`` in the order of their lines."""
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.lineno, f"{name}:{node.lineno} {node.name} ({lines} lines)"))
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_function_is_longer_than_80_lines(folder: str) -> None:
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert modules, f"no Python modules under {folder}"
    too_long = [hit for path in modules
                for hit in long_functions(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not too_long, (f"functions over {MAX_LINES} lines in {folder}; split each by meaning into named steps:\n"
                          + "\n".join(too_long))


def test_the_folders_checked_are_real_folders() -> None:
    assert all((ROOT / folder).is_dir() for folder in FOLDERS)


def _function(name: str, lines: int, indent: str = "") -> str:
    """Source of a function of exactly ``lines`` lines (its ``def`` line included)."""
    body = [f"{indent}    x{i} = {i}" for i in range(lines - 2)] + [f"{indent}    return 0"]
    return "\n".join([f"{indent}def {name}():"] + body) + "\n"


def test_the_checker_names_a_function_one_line_too_long() -> None:
    src = _function("short", 3) + "\n\n" + _function("at_the_limit", 80) + "\n\n" + _function("too_long", 81)
    assert long_functions(src, "synthetic.py") == ["synthetic.py:88 too_long (81 lines)"]


def test_the_checker_counts_methods_and_nested_functions_on_their_own() -> None:
    method = "class Box:\n" + _function("method", 90, indent="    ")
    assert long_functions(method, "box.py") == ["box.py:2 method (90 lines)"]
    # an outer function of 5 lines around a nested one of 100: both are over the limit, each named
    nested = "def outer():\n" + _function("inner", 100, indent="    ") + "    return inner\n"
    assert long_functions(nested, "n.py") == ["n.py:1 outer (102 lines)", "n.py:2 inner (100 lines)"]
