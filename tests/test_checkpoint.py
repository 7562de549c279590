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


@pytest.mark.slow
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
    assert again.summary() == {"dir": str(first.dir), "pieces_reused": 6, "pieces_computed": 0,
                               "pieces_damaged_recomputed": 0}
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


# ---- damaged pieces: verified by their digests, recomputed, counted ------------------------------------

def _arrays(k):
    import numpy as np

    return {"k": k, "values": np.arange(40.0) * k, "label": f"piece {k}"}


def _same(a, b):
    import numpy as np

    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) if hasattr(a[k], "shape") else a[k] == b[k]
                                        for k in a)


@pytest.mark.slow
def test_a_flipped_byte_is_never_reused(tmp_path):
    """Every single-byte flip of a piece: the findings are the fresh ones, and the damage is counted."""
    tasks = [(k,) for k in range(3)]
    fresh = [_arrays(k) for k in range(3)]
    cp = Checkpoint(tmp_path, {"audit": "flip"})
    Engine(1, checkpoint=cp).map(_arrays, tasks)
    victim = sorted(cp.dir.glob("*.pkl"))[1]
    good = victim.read_bytes()
    for pos in range(len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0x01
        victim.write_bytes(bytes(bad))
        again = Checkpoint(tmp_path, {"audit": "flip"})
        got = Engine(1, checkpoint=again).map(_arrays, tasks)  # never a crash from inside pickle
        assert all(_same(g, f) for g, f in zip(got, fresh)), f"a flip at byte {pos} changed the findings"
        assert again.summary()["pieces_damaged_recomputed"] == 1, pos
        assert (again.reused, again.computed) == (2, 1)
        assert victim.read_bytes() == good  # recomputed and written back whole


def test_a_truncated_piece_is_recomputed_and_counted(tmp_path):
    tasks = [(k,) for k in range(4)]
    cp = Checkpoint(tmp_path, {"audit": "cut"})
    Engine(1, checkpoint=cp).map(_arrays, tasks)
    pieces = sorted(cp.dir.glob("*.pkl"))
    pieces[0].write_bytes(pieces[0].read_bytes()[: len(pieces[0].read_bytes()) // 2])
    pieces[2].write_bytes(b"")
    again = Checkpoint(tmp_path, {"audit": "cut"})
    got = Engine(1, checkpoint=again).map(_arrays, tasks)
    assert all(_same(g, _arrays(k)) for k, g in enumerate(got))
    assert again.summary()["pieces_damaged_recomputed"] == 2 and (again.reused, again.computed) == (2, 2)


def test_a_piece_moved_to_another_name_is_not_reused(tmp_path):
    """A piece says what it was computed for: copied over another piece's file, it is refused."""
    cp = Checkpoint(tmp_path, {"audit": "moved"})
    Engine(1, checkpoint=cp).map(_arrays, [(1,), (2,)])
    a, b = sorted(cp.dir.glob("*.pkl"))
    b.write_bytes(a.read_bytes())
    again = Checkpoint(tmp_path, {"audit": "moved"})
    got = Engine(1, checkpoint=again).map(_arrays, [(1,), (2,)])
    assert _same(got[1], _arrays(2)) and again.summary()["pieces_damaged_recomputed"] == 1


@pytest.mark.slow
def test_damaged_pieces_of_an_audit_are_recomputed_to_the_same_findings(tmp_path):
    import dpaudit

    kw = dict(params={"n_arms": 2, "rho": 0.5}, runs=600, horizon=8, seed=5, workers=1)
    first = dpaudit.audit("adac-ucb", checkpoint=str(tmp_path), **kw)
    pieces = sorted(tmp_path.glob("*/*.pkl"))
    assert len(pieces) >= 6
    for p in pieces[1::3]:  # one byte flipped in the middle of every third piece
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x10
        p.write_bytes(bytes(data))
    pieces[2].write_bytes(pieces[2].read_bytes()[:7])
    damaged = len(pieces[1::3]) + (0 if pieces[2] in pieces[1::3] else 1)
    again = dpaudit.audit("adac-ucb", checkpoint=str(tmp_path), **kw)
    assert findings_json(again) == findings_json(first)
    assert again.extra["checkpoint"]["pieces_damaged_recomputed"] == damaged
    assert again.extra["checkpoint"]["pieces_computed"] == damaged
