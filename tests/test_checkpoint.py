"""--checkpoint DIR: a killed audit resumes from its finished pieces to identical findings."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpaudit.runner import findings_json
from dpaudit.engine import Checkpoint, Engine
from dpaudit.errors import DPAuditError

DPAUDIT = shutil.which("dpaudit") or str(Path(sys.executable).with_name("dpaudit"))
ARGS = ["check", "policy", "adac-ucb", "--param", "n_arms=3", "--runs", "2000", "--horizon", "12", "--seed", "7",
        "--json"]


_stable = findings_json  # the findings, without how the audit ran (checkpoint use included)


def _run(*extra: str, timeout: float = 300) -> dict:
    proc = subprocess.run([DPAUDIT, *ARGS, *extra], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _pieces(directory: Path) -> list[Path]:
    return list(directory.glob("*/*.pkl"))


def test_a_killed_audit_resumes_to_identical_findings(tmp_path):
    cp = tmp_path / "cp"
    proc = subprocess.Popen([DPAUDIT, *ARGS, "--workers", "1", "--checkpoint", str(cp)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_pieces(cp)) < 6 and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the audit finished before it could be killed"
    proc.send_signal(signal.SIGKILL)  # no chance to clean up: only atomically renamed pieces survive
    proc.wait(30)
    kept = len(_pieces(cp))
    assert kept >= 6  # only whole pieces carry the .pkl name (a killed write leaves at most a .tmp- file)
    resumed = _run("--workers", "1", "--checkpoint", str(cp))
    assert resumed["checkpoint"]["pieces_reused"] >= kept
    assert resumed["checkpoint"]["pieces_computed"] > 0
    fresh = _run("--workers", "2", "--force-workers")  # no checkpoint, other workers: the same findings
    assert _stable(resumed) == _stable(fresh)
    again = _run("--workers", "1", "--checkpoint", str(cp))
    assert again["checkpoint"]["pieces_computed"] == 0 and _stable(again) == _stable(fresh)


def test_pieces_are_keyed_by_the_audit_and_by_their_inputs(tmp_path):
    tasks = [(2, k) for k in range(6)]
    first = Checkpoint(tmp_path, {"audit": 1})
    assert Engine(1, checkpoint=first).map(pow, tasks) == [2**k for k in range(6)]
    assert first.summary()["pieces_computed"] == 6
    again = Checkpoint(tmp_path, {"audit": 1})
    assert Engine(2, checkpoint=again).map(pow, tasks) == [2**k for k in range(6)]
    assert again.summary() == {"dir": str(first.dir), "pieces_reused": 6, "pieces_computed": 0}
    other = Checkpoint(tmp_path, {"audit": 2})  # another command or seed: its own directory
    Engine(1, checkpoint=other).map(pow, tasks)
    assert other.dir != first.dir and other.reused == 0
    changed = Checkpoint(tmp_path, {"audit": 1})  # same audit, different inputs: recomputed, never reused
    assert Engine(1, checkpoint=changed).map(pow, [(3, k) for k in range(6)]) == [3**k for k in range(6)]
    assert changed.reused == 0


def test_a_damaged_piece_is_recomputed(tmp_path):
    cp = Checkpoint(tmp_path, {"audit": "x"})
    Engine(1, checkpoint=cp).map(pow, [(2, 5), (2, 6)])
    victim = sorted(cp.dir.glob("*.pkl"))[0]
    victim.write_bytes(b"\x80\x04truncated")
    cp2 = Checkpoint(tmp_path, {"audit": "x"})
    assert Engine(1, checkpoint=cp2).map(pow, [(2, 5), (2, 6)]) == [32, 64]
    assert (cp2.reused, cp2.computed) == (1, 1)


def test_a_checkpoint_path_that_cannot_be_used_is_one_sentence(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(DPAuditError, match="exists and is not a directory"):
        Checkpoint(f, {})
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(DPAuditError, match="cannot be written"):
            Checkpoint(ro / "cp", {})


def test_editing_a_plugin_changes_the_key(tmp_path):
    from dpaudit.sandbox import plugin_digest

    src = tmp_path / "p.py"
    src.write_text("class P: pass\n")
    before = plugin_digest(f"{src}:P")
    src.write_text("class P:\n    x = 1\n")
    assert before is not None and plugin_digest(f"{src}:P") != before
    assert plugin_digest("adac-ucb") is None  # a registered policy: dpaudit's version is in the key
    assert plugin_digest("dpaudit.policies.ucb:AdaCUCB") is not None  # an importable module: its source
