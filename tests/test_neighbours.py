"""Neighbouring-input search: the pairs it builds, the adversaries, and that it finds the leaking round."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.errors import DPAuditError
from dpaudit.attacks.neighbours import horizon_sweep, leakage_vs_horizon, search
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


class ReplayingVote:
    """A leak that grows with the rounds: from round 1 on, every round plays arm 1 when the reward of round
    0 plus fresh Laplace noise of scale 2 exceeds 1/2 (each round one more eps = 1/2 release of the same
    reward; the claim of one release, eps = 1/2, is wrong from T = 3 on)."""

    n_arms = 2
    reward_range = (0.0, 1.0)

    def __init__(self):
        from dpaudit.accountants import PureDP
        self.claim = PureDP(0.5)

    def reset(self, n_runs, rng):
        self.rng, self.first = rng, np.zeros(n_runs)

    def act(self, t, arms=None):
        if t == 0:
            return np.zeros(self.first.size, dtype=int)
        return (self.first + self.rng.laplace(0.0, 2.0, self.first.size) > 0.5).astype(int)

    def observe(self, t, actions, rewards):
        if t == 0:
            self.first = np.asarray(rewards, dtype=float).copy()


def test_horizon_sweep_moves_to_the_horizon_where_the_leak_is_largest():
    rows_seen = []
    for seed in range(2):
        spec, T, cand, rows = horizon_sweep(lambda T: ReplayingVote(), TableDP(), [PairSpec(0, "low")], 4,
                                            np.random.SeedSequence(seed), (0.0, 1.0), delta=1e-3, confidence=0.95,
                                            n=500, factors=(1, 2, 4, 8))
        assert [r["horizon"] for r in rows] == [4, 8, 16, 32]
        assert T >= 16 and spec == PairSpec(0, "low") and cand.selection_bound == max(r["pilot_bound"] for r in rows)
        rows_seen.append(rows)
    # the pilot bound grows with the rounds (every round one more release of the same reward)
    assert all(rows[-1]["pilot_bound"] > rows[0]["pilot_bound"] + 0.5 for rows in rows_seen)
    # a budget of run-rounds stops the sweep (the first horizon is always tried)
    _, T, _, rows = horizon_sweep(lambda T: ReplayingVote(), TableDP(), [PairSpec(0, "low")], 4,
                                  np.random.SeedSequence(0), (0.0, 1.0), delta=1e-3, confidence=0.95, n=500,
                                  cells=4 * 500 * 12)
    assert [r["horizon"] for r in rows] == [4, 8] and T in (4, 8)


class CoinFlip(ReplayingVote):
    """Actions independent of the input (fair coins): every pattern's pilot bound is 0 at every horizon."""

    def act(self, t, arms=None):
        return self.rng.integers(0, 2, self.first.size)


def test_horizon_sweep_stops_after_two_horizons_that_show_nothing():
    seeds = [np.random.SeedSequence(s) for s in range(2)]
    args = dict(delta=1e-3, confidence=0.95, n=500, factors=(1, 2, 4, 8))
    # no pattern shows anything at 1 and 2 x the horizon: 4 and 8 x it are not run, the first horizon kept
    spec, T, cand, rows = horizon_sweep(lambda T: CoinFlip(), TableDP(), [PairSpec(0, "low"), PairSpec(1, "high")],
                                        4, seeds[0], (0.0, 1.0), **args)
    assert [r["horizon"] for r in rows] == [4, 4, 8, 8] and all(r["pilot_bound"] == 0 for r in rows)
    assert T == 4 and spec == PairSpec(0, "low")
    # a positive bound in the first stage runs the rest, with the rows (and seeds) it would have had anyway
    _, _, _, grown = horizon_sweep(lambda T: ReplayingVote(), TableDP(), [PairSpec(0, "low")], 4, seeds[1],
                                   (0.0, 1.0), **args)
    assert [r["horizon"] for r in grown] == [4, 8, 16, 32] and grown[0]["pilot_bound"] > 0
    _, _, _, first = horizon_sweep(lambda T: ReplayingVote(), TableDP(), [PairSpec(0, "low")], 4,
                                   np.random.SeedSequence(1), (0.0, 1.0), **dict(args, factors=(1, 2)))
    assert first == grown[:2]


class ReplayingVoteClaim(ReplayingVote):
    def __init__(self):
        from dpaudit.accountants import PureDP
        self.claim = PureDP(1.5)  # right for 3 releases (T = 4), wrong from T = 5 on


@pytest.mark.slow
def test_a_black_box_audit_tests_once_at_the_horizon_its_sweep_chose():
    import dpaudit
    a = dpaudit.audit(ReplayingVoteClaim, runs=5000, seed=0, workers=1)
    sweep = a.to_dict()["horizon_sweep"]
    assert len({r["horizon"] for r in sweep}) >= 3
    best = max(sweep, key=lambda r: r["pilot_bound"])
    assert a.horizon == best["horizon"] > min(r["horizon"] for r in sweep)
    assert any("leaked most there" in n for n in a.notes)
    assert a.verdict == "violation" and a.epsilon_lower > 1.5
    # a policy with a ledger, or a horizon given by the user, is not swept
    assert "horizon_sweep" not in dpaudit.audit(ReplayingVoteClaim, runs=5000, seed=0, workers=1,
                                                horizon=8).to_dict()
