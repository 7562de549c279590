"""dpaudit.pairs: user-supplied neighbouring pairs (dpaudit.pair/1), good files and every kind of bad one."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dpaudit.protocols.pairs as pairs
from dpaudit.protocols import Pair
from dpaudit.errors import DPAuditError
from dpaudit.protocols.pairs import UserPair, load_pair
from dpaudit.protocols import TableDP, get_protocol


def _write(tmp_path, doc, name="pair.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _table_doc(**extra):
    d = [[0.5, 0.5], [0.0, 1.0], [0.5, 0.5], [0.5, 0.5]]
    dp = [[0.5, 0.5], [1.0, 0.0], [0.5, 0.5], [0.5, 0.5]]
    return {"format": "dpaudit.pair/1", "d": d, "d_prime": dp, **extra}


def test_a_table_pair_loads_as_a_pair(tmp_path):
    p = load_pair(_write(tmp_path, _table_doc(label="flip user 1")), n_arms=2, protocol="table")
    assert isinstance(p, Pair) and isinstance(p, UserPair)
    assert p.round == 1 and p.label == "flip user 1" and p.adversary is None and p.contexts is None
    assert p.d0.shape == (4, 2) and p.d0.dtype == float
    assert np.array_equal(p.d1[1], [1.0, 0.0])
    assert p.describe()["row_d_prime"] == [1.0, 0.0]
    # and the protocols run it
    assert TableDP().check_input(p.d0, 4, 2).shape == (4, 2)


def test_a_view_pair_with_integers_and_the_protocol_object(tmp_path):
    doc = {"format": "dpaudit.pair/1", "d": [0, 1, 1, 0, 1], "d_prime": [0, 1, 0, 0, 1]}
    p = load_pair(_write(tmp_path, doc), n_arms=3, protocol=get_protocol("view"), alphabet=(0, 1))
    assert p.round == 2 and p.d0.shape == (5,) and "entry 2" in p.label


def test_contexts_fixed_set_and_per_round(tmp_path):
    p = load_pair(_write(tmp_path, _table_doc(contexts=[[1, 0, 0], [0, 1, 0]])), n_arms=2, protocol="interactive")
    assert p.contexts.shape == (2, 3)
    per_round = np.ones((4, 2, 3)).tolist()
    q = load_pair(_write(tmp_path, _table_doc(contexts=per_round)), n_arms=2, protocol="table")
    assert q.contexts.shape == (4, 2, 3) and "shape [4, 2, 3]" in q.describe()["contexts"]


def test_per_arm_ranges_and_alphabets(tmp_path):
    doc = {"format": "dpaudit.pair/1", "d": [[0, 2], [0, 4], [1, 2]], "d_prime": [[1, 4], [0, 4], [1, 2]]}
    p = load_pair(_write(tmp_path, doc), n_arms=2, protocol="table", reward_range=[(0, 1), (2, 4)],
                  alphabet=(0, 1, 2, 4))
    assert p.round == 0
    with pytest.raises(DPAuditError, match=r"d\[0\]\[1\] = 2 lies outside the reward range \[0, 1\] \(arm 1\)"):
        load_pair(_write(tmp_path, doc), n_arms=2, protocol="table")
    with pytest.raises(DPAuditError, match=r"d\[1\]\[1\] = 4 is not in the policy's reward alphabet \(0.0, 1.0, 2.0\)"):
        load_pair(_write(tmp_path, doc), n_arms=2, protocol="table", reward_range=(0, 5), alphabet=(0, 1, 2))
    # View DP: an entry is observed whatever arm plays, so it must fit every arm's range
    view = {"format": "dpaudit.pair/1", "d": [0.5, 0.7, 0.5], "d_prime": [0.9, 0.7, 0.5]}
    with pytest.raises(DPAuditError, match=r"d_prime\[0\] = 0.9 lies outside the reward range \[0.2, 0.8\]"):
        load_pair(_write(tmp_path, view), n_arms=2, protocol="view", reward_range=[(0, 0.8), (0.2, 1)])


BAD_DOCS = [
    ("[1, 2]", "one JSON object"),
    ("{\"format\": \"dpaudit.pair/1\", \"d\": [[0, 1]],", "not valid JSON: .* line 1"),
    (dict(_table_doc(), extra=1), "unknown key 'extra'"),
    (dict(_table_doc(), format="dpaudit.pair/2"), "format must be 'dpaudit.pair/1'"),
    ({"format": "dpaudit.pair/1", "d": [[0, 1], [0, 1]]}, "'d_prime' is missing"),
    (dict(_table_doc(), d="0,1"), "d must be a T x 2 table"),
    (dict(_table_doc(), d=[]), "d is an empty list"),
    (dict(_table_doc(), d=[[0.5, 0.5], [0.0], [0.5, 0.5], [0.5, 0.5]]), r"d\[1\] has 1 entries where d\[0\] has 2"),
    (dict(_table_doc(), d=[[0.5, 0.5], [0.0, "1"], [0.5, 0.5], [0.5, 0.5]]), r"d\[1\]\[1\] is \"1\", not a number"),
    (dict(_table_doc(), d=[[0.5, 0.5], [0.0, True], [0.5, 0.5], [0.5, 0.5]]), r"d\[1\]\[1\] is true, not a number"),
    (dict(_table_doc(), d=[[0.5, 0.5], [0.0, None], [0.5, 0.5], [0.5, 0.5]]), r"d\[1\]\[1\] is null"),
    (dict(_table_doc(), d=[[0.5, 0.5], 0.0, [0.5, 0.5], [0.5, 0.5]]), r"d\[1\] must be a list"),
    (json.dumps(_table_doc()).replace("[0.0, 1.0]", "[NaN, 1.0]"), r"d\[1\]\[0\] is nan; values must be finite"),
    (json.dumps(_table_doc()).replace("[1.0, 0.0]", "[Infinity, 0.0]"), r"d_prime\[1\]\[0\] is inf"),
    (dict(_table_doc(), d=[[0.5, 0.5, 0.5]] * 4, d_prime=[[0.5, 0.5, 0.5]] * 4), "d has 3 columns but the policy has 2"),
    (dict(_table_doc(), d_prime=[[0.5, 0.5]] * 3), r"d_prime has shape \[3, 2\] but d has \[4, 2\]"),
    (dict(_table_doc(), d_prime=_table_doc()["d"]), "identical; neighbouring inputs differ in exactly one row"),
    (dict(_table_doc(), d_prime=[[1, 1], [1, 0], [0.5, 0.5], [1, 1]]), r"differ in rows 0 and 1 \(and 1 more\)"),
    (dict(_table_doc(), d_prime=[[0.5, 0.5], [0.0, 1.0], [0.5, 0.5], [1, 1]]), r"only in the last row \(3\).*0..2"),
    ({"format": "dpaudit.pair/1", "d": [[0, 1]], "d_prime": [[1, 0]]}, "needs T >= 2"),
    (dict(_table_doc(), d=[[0.5, 0.5], [0.0, 1.5], [0.5, 0.5], [0.5, 0.5]]), r"d\[1\]\[1\] = 1.5 lies outside the reward range \[0, 1\] \(arm 1\)"),
    (dict(_table_doc(), d=[[0.5, -0.5], [0.0, 1.0], [0.5, 0.5], [0.5, 0.5]]), r"d\[0\]\[1\] = -0.5 lies outside"),
    (dict(_table_doc(), contexts=[[1, 0], [0, 1], [1, 1]]), r"contexts has shape \[3, 2\]; as a K x d array it must start with \[2\]"),
    (dict(_table_doc(), contexts=[[[1, 0]] * 2] * 3), r"contexts has shape \[3, 2, 2\]; as a T x K x d array it must start with \[4, 2\]"),
    (dict(_table_doc(), contexts=[1, 2]), "contexts must be a K x d action set or a T x K x d array of numbers, got 1 level"),
    (dict(_table_doc(), contexts=[[1, "x"], [0, 1]]), r"contexts\[0\]\[1\] is \"x\", not a number"),
    (json.dumps(_table_doc(contexts=[[1, 0], [0, 1]])).replace("[0, 1]]", "[0, NaN]]"), r"contexts\[1\]\[1\] is nan"),
    (dict(_table_doc(), contexts={"a": 1}), "contexts must be a K x d action set"),
    (dict(_table_doc(), label=3), "label must be text"),
    ("[" * 100000 + "]" * 100000, "nests its JSON too deeply|one JSON object"),
]


@pytest.mark.parametrize("doc, pattern", BAD_DOCS, ids=[f"bad{i}" for i in range(len(BAD_DOCS))])
def test_bad_files_are_refused_in_one_sentence_naming_the_field(tmp_path, doc, pattern):
    path = _write(tmp_path, doc)
    with pytest.raises(DPAuditError, match=pattern) as info:
        load_pair(path, n_arms=2, protocol="table")
    msg = str(info.value)
    assert msg.endswith(".") and "\n" not in msg and str(path) in msg


def test_view_pair_shape_errors(tmp_path):
    doc = {"format": "dpaudit.pair/1", "d": [[0, 1], [1, 0]], "d_prime": [[0, 1], [1, 1]]}
    with pytest.raises(DPAuditError, match=r"d\[0\] is \[0, 1\], not a number"):
        load_pair(_write(tmp_path, doc), n_arms=2, protocol="view")
    doc = {"format": "dpaudit.pair/1", "d": [0, 1, 0], "d_prime": [1, 1, 1]}
    with pytest.raises(DPAuditError, match="differ in entries 0 and 2"):
        load_pair(_write(tmp_path, doc), n_arms=2, protocol="view")


def test_files_that_are_not_regular_small_utf8_files(tmp_path, monkeypatch):
    with pytest.raises(DPAuditError, match="cannot be read: No such file"):
        load_pair(tmp_path / "missing.json", n_arms=2, protocol="table")
    with pytest.raises(DPAuditError, match="is not a regular file"):
        load_pair(tmp_path, n_arms=2, protocol="table")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(DPAuditError, match="is not a regular file"):  # never opened, so never blocks
        load_pair(fifo, n_arms=2, protocol="table")
    bin_path = tmp_path / "bin.json"
    bin_path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(DPAuditError, match=r"is not UTF-8 text \(byte 0\)"):
        load_pair(bin_path, n_arms=2, protocol="table")
    path = _write(tmp_path, _table_doc())
    monkeypatch.setattr(pairs, "MAX_PAIR_BYTES", 100)
    with pytest.raises(DPAuditError, match=r"has \d+ bytes, more than the 100"):
        load_pair(path, n_arms=2, protocol="table")


def test_unknown_protocol_is_refused(tmp_path):
    with pytest.raises(DPAuditError, match="unknown protocol 'tabel'"):
        load_pair(_write(tmp_path, _table_doc()), n_arms=2, protocol="tabel")


def test_the_shipped_example_pair_loads():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "pair_table.json"
    p = load_pair(path, n_arms=2, protocol="table", alphabet=(0.0, 0.5, 1.0))
    assert p.round == 2 and p.d0.shape == (8, 2) and p.describe()["background"] == "every other row = [0.5, 0.5]"
