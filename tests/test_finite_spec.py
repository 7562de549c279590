"""The dpaudit.finite-policy/1 format: indexing, fractions, and one clear sentence per bad spec."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpaudit.errors import DPAuditError
from dpaudit.policies.finite import FORMAT, FinitePolicy, bundled_spec, load_spec


def spec(**over):
    base = {"format": FORMAT, "horizon": 2, "arms": 2, "rewards": [0, 1],
            "rules": [[["1/2", "1/2"]], [[1, 0], [0, 1], ["1/3", "2/3"], [0.25, 0.75]]]}
    base.update(over)
    return base


def test_binary_indexing_matches_the_paper() -> None:
    pol = bundled_spec("table-vs-view-counterexample")
    # Example 1: history {1, 0} is row 2 of pi_2 -> (1/4, 3/4).
    np.testing.assert_allclose(pol.rules[1][2], [0.25, 0.75])
    # Example 2: history {0, 1, 1, 1} is row 7 of pi_3 -> (0, 1).
    np.testing.assert_allclose(pol.rules[2][7], [0.0, 1.0])
    assert pol.horizon == 3 and pol.n_arms == 2 and pol.n_rewards == 2


def test_batched_run_follows_the_indexing() -> None:
    pol = FinitePolicy.from_spec(spec())
    pol.reset(3, np.random.default_rng(0))
    a = pol.act(0)
    pol.observe(0, np.array([0, 1, 1]), np.array([1.0, 0.0, 1.0]))
    # histories (0,1) -> row 1 -> arm 1; (1,0) -> row 2; (1,1) -> row 3
    assert a.shape == (3,)
    np.testing.assert_array_equal(pol._hist, [1, 2, 3])
    assert pol.act(1)[0] == 1


def test_roundtrip(tmp_path) -> None:
    path = tmp_path / "p.json"
    pol = FinitePolicy.from_spec(spec())
    path.write_text(json.dumps(pol.to_spec()))
    again = load_spec(path)
    for a, b in zip(pol.rules, again.rules):
        np.testing.assert_allclose(a, b)


@pytest.mark.parametrize(
    "over, message",
    [
        ({"format": "dpaudit.finite-policy/2"}, "spec format must be 'dpaudit.finite-policy/1'"),
        ({"horizon": 0, "rules": []}, "horizon must be an integer T >= 1, got 0"),
        ({"arms": 1}, "arms must be an integer K >= 2, got 1"),
        ({"horizon": 3}, "rules must list one decision rule per step: horizon is 3, got 2"),
        ({"rules": [[["1/2", "1/2"]], [[1, 0], [0, 1], [0, 1]]]}, r"step 2 has 3 rows; it needs \(K R\)\^1 = 4"),
        ({"rules": [[["1/2", "1/2"]], [[1, 0], [0, 1], [0.5, 0.6], [0, 1]]]}, "step 2, row 2: probabilities sum to 1.1"),
        ({"rules": [[["1/2", "1/2"]], [[1, 0], [0, 1], [1.5, -0.5], [0, 1]]]}, r"step 2, row 2: probability 1.5 is outside \[0, 1\]"),
        ({"rules": [[["1/2", "x"]], [[1, 0]] * 4]}, "step 1, row 0: probability 'x' is not a number"),
        ({"rules": [[["1/2", "1/2"]], [[1, 0, 0]] * 4]}, "step 2, row 0: a row must list K = 2 probabilities"),
        ({"rules": [[[1.0]], [[1]]]}, "K >= 2 arms, got K = 1"),
        ({"rewards": [0, 0]}, "rewards must be distinct numbers"),
    ],
)
def test_bad_specs_name_the_problem(over, message) -> None:
    with pytest.raises(DPAuditError, match=message):
        FinitePolicy.from_spec(spec(**over))


def test_missing_key_and_bad_json(tmp_path) -> None:
    s = spec()
    del s["rules"]
    with pytest.raises(DPAuditError, match="missing the key 'rules'"):
        FinitePolicy.from_spec(s)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DPAuditError, match=r"not valid JSON \(line 1"):
        load_spec(bad)
    with pytest.raises(DPAuditError, match="cannot read finite-policy spec"):
        load_spec(tmp_path / "missing.json")


def test_reward_outside_alphabet_is_refused() -> None:
    pol = FinitePolicy.from_spec(spec())
    pol.reset(2, np.random.default_rng(0))
    pol.act(0)
    with pytest.raises(DPAuditError, match=r"reward 0.5 at step 0 is not in this policy's alphabet"):
        pol.observe(0, np.array([0, 1]), np.array([0.5, 1.0]))
