"""Neighbouring-input search: the pairs it builds, the adversaries, and that it finds the leaking round."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.errors import DPAuditError
from dpaudit.attacks.neighbours import leakage_vs_horizon, search
from dpaudit.policies.registry import make_policy
from dpaudit.protocols import (EchoAdversary, InteractiveDP, PairSpec, PinAdversary, TableDP, ViewDP, candidate_pairs,
                               make_pair)


@pytest.mark.parametrize("proto", [TableDP(), ViewDP(), InteractiveDP()])
def test_pairs_are_neighbours(proto):
    specs = candidate_pairs(proto, 3, 20)
    assert specs
    for spec in specs:
        p = make_pair(spec, proto, 3, 20)
        diff = np.nonzero(np.any((p.d0 != p.d1).reshape(20, -1), axis=1))[0]
        assert diff.tolist() == [spec.round]  # exactly one row / entry differs
        assert 0 <= spec.round < 19
        assert (p.adversary is not None) == isinstance(proto, InteractiveDP) or spec.adversary == "none"
    if isinstance(proto, InteractiveDP):
        assert {s.adversary for s in specs} >= {"identity", "constant-0", "round-robin", "pin-0", "echo"}


def test_canary_goes_against_the_background():
    p = make_pair(PairSpec(2, "high"), TableDP(), 2, 6)
    assert p.d0[2].tolist() == [1.0, 1.0] and p.d1[2].tolist() == [0.0, 0.0] and p.d0[0, 0] == 1.0
    p = make_pair(PairSpec(2, "low"), TableDP(), 2, 6, (-1.0, 1.0))
    assert p.d0[2].tolist() == [-1.0, -1.0] and p.d1[2].tolist() == [1.0, 1.0]


def test_bad_pairs_are_refused():
    with pytest.raises(DPAuditError):
        make_pair(PairSpec(5, "mid"), TableDP(), 2, 6)  # the last round cannot influence any action
    with pytest.raises(DPAuditError):
        candidate_pairs(TableDP(), 2, 1)


def test_reactive_adversaries():
    out = np.array([[1, 0, 1], [0, 1, 1]])
    assert PinAdversary(1, 0).query(1, out[:, :2]).tolist() == [0, 0]
    assert PinAdversary(1, 0).query(2, out).tolist() == [1, 1]
    assert EchoAdversary().query(2, out).tolist() == [0, 1]


def test_search_finds_an_initial_round_of_adac_ucb():
    """AdaC-UCB's initial pulls are one-sample episodes: their means are the most exposed releases."""
    pol = make_policy("adac-ucb", {"n_arms": "2", "rho": "0.5"})
    res = search(pol, TableDP(), horizon=10, delta=1e-3, confidence_membership=0.975,
                 confidence_likelihood=0.975, seed=np.random.SeedSequence(0),
                 n_train=500, n_select=500, n_test=4000, n_screen=500, n_likelihood=4000, claim=pol.claim)
    assert res.best_likelihood_spec is not None and res.best_likelihood_spec.round < 2
    assert res.likelihood.details["renyi_violation"] == []
    # successive halving: every candidate on the pilot, the most promising on the full sizes
    pilot = [r for r in res.ranking if r["stage"] == "pilot"]
    ranked = [r for r in res.ranking if r["stage"] == "ranked"]
    assert len(pilot) == len(candidate_pairs(TableDP(), 2, 10)) and 8 <= len(ranked) <= 10
    assert {r["pair"] for r in ranked} <= {r["pair"] for r in pilot}
    assert res.membership.witness["round"] == res.best_membership_spec.round


def test_leakage_against_horizon_rows():
    rows = leakage_vs_horizon(lambda: make_policy("adac-ucb", {"n_arms": "2", "rho": "0.5"}), TableDP(),
                              PairSpec(0, "low"), [6, 12], delta=1e-3, confidence=0.95,
                              seed=np.random.SeedSequence(1), n_train=300, n_select=300, n_test=2000,
                              n_likelihood=2000)
    assert [r["horizon"] for r in rows] == [6, 12]
    assert all(r["membership"] >= 0 and r["likelihood"] is not None for r in rows)
