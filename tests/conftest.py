"""Test-suite settings.

Hypothesis runs derandomized by default, so that CI (and anyone rerunning the README's test
command) sees the same examples every time; ``HYPOTHESIS_PROFILE=explore pytest`` draws fresh
random examples to hunt for new failures (keep any it finds as an explicit example, as
``test_zcdp_conversion_is_zero_where_the_optimum_over_orders_is_negative`` does).
"""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("repro", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repro"))


def _contextual_regret(policy, env, n_runs: int, T: int, seed: int) -> np.ndarray:
    """Per-run pseudo-regret of a contextual policy on ``env`` (uniform play when ``policy`` is None)."""
    env.reset(n_runs, np.random.default_rng([seed, 1]))
    if policy is not None:
        policy.reset(n_runs, np.random.default_rng([seed, 2]), record=False)
    rng = np.random.default_rng([seed, 3])
    reg = np.zeros(n_runs)
    for t in range(T):
        x = env.arms(t)
        a = policy.act(t, x) if policy is not None else rng.integers(0, env.n_arms, n_runs)
        m = env.means(t)
        reg += m.max(axis=1) - m[np.arange(n_runs), a]
        r = env.rewards(t, a)
        if policy is not None:
            policy.observe(t, a, r)
    return reg


@pytest.fixture
def contextual_regret():
    """``contextual_regret(policy, env, n_runs, T, seed)``: per-run pseudo-regret, step by step."""
    return _contextual_regret


@pytest.fixture
def dpaudit_cli(tmp_path):
    """``dpaudit_cli(*args)``: ``python -m dpaudit ARGS`` as a user runs it, from outside the repository.

    From the repository root, ``python -m`` puts the source folder ``dpaudit/`` (which has no
    ``attacks/`` or ``accountants/`` inside; see DESIGN.md) first on ``sys.path``, where it would
    shadow the installed package under a non-editable install such as CI's.
    """
    import subprocess
    import sys

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dpaudit", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=timeout)

    return run


def installed_tree(tmp: Path) -> Path:
    """The installed package laid out as one folder tree in ``tmp``: dpaudit/ with accountants/ and attacks/ inside.

    dpaudit.accountants and dpaudit.attacks live in top-level folders mapped into the package at
    install time, so tools that read source trees (import-linter, mypy) are given this copy, made from
    the modules' own paths whatever the install (editable or not).
    """
    import dpaudit
    import dpaudit.accountants
    import dpaudit.attacks

    dest = tmp / "dpaudit"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(Path(dpaudit.__file__).parent, dest, ignore=ignore)
    for sub in (dpaudit.accountants, dpaudit.attacks):
        target = dest / sub.__name__.split(".")[-1]
        if not target.exists():
            shutil.copytree(Path(sub.__file__).parent, target, ignore=ignore)
    return tmp
