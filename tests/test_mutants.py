"""Positive controls: every mutant is registered as one, and the attack that should catch it does.

Fast subset (fixed seeds, small samples, the pair that exposes each bug); the full detection rates
over many seeds are measured by benchmarks/validation/controls.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attacks.likelihood import likelihood_attack
from dpaudit.attacks.membership import membership_attack
from dpaudit.protocols import PairSpec, make_pair
from dpaudit.runner.setup import claimed_epsilon
from dpaudit.policies import registered
from dpaudit.policies.registry import make_policy
from dpaudit.protocols import TableDP

MUTANTS = {
    "mutant-shared-noise", "mutant-sqrt2-noise", "mutant-no-forgetting",
    "mutant-mean-sensitivity", "mutant-laplace-eps-scale", "mutant-first-unnoised",
}
DELTA = 1e-5


def test_mutants_are_listed_only_as_mutants():
    names = {e.name for e in registered(mutants=True)}
    assert MUTANTS <= names
    assert not MUTANTS & {e.name for e in registered()}


def _lik(name, spec, T, n=6000, params=None):
    pol = make_policy(name, params or {"n_arms": "2"})
    pair = make_pair(spec, TableDP(), 2, T)
    r = likelihood_attack(pol, TableDP(), pair, delta=DELTA, confidence=0.95, n_runs=n, seed=11, claim=pol.claim)
    return r, claimed_epsilon(pol.claim, DELTA)[0]


def _mem(name, spec, T, n=3000, params=None):
    pol = make_policy(name, params or {"n_arms": "2"})
    pair = make_pair(spec, TableDP(), 2, T)
    r = membership_attack(pol, TableDP(), pair, delta=DELTA, confidence=0.95, n_train=1000, n_select=1000,
                          n_test=n, seed=12)
    return r, claimed_epsilon(pol.claim, DELTA)[0]


@pytest.mark.parametrize("name", ["mutant-sqrt2-noise", "mutant-no-forgetting", "mutant-mean-sensitivity",
                                  "mutant-laplace-eps-scale"])
def test_gray_box_catches_ledger_visible_bugs(name):
    # round 0 is arm 0's initial pull; round 8 lies in a multi-round episode on a T = 16 table
    spec = PairSpec(8, "low") if name == "mutant-mean-sensitivity" else PairSpec(0, "mid")
    r, claimed = _lik(name, spec, 16)
    assert r.details["renyi_violation"] or r.epsilon_lower > claimed, (name, r.epsilon_lower, claimed)


@pytest.mark.parametrize("name", ["mutant-shared-noise", "mutant-first-unnoised"])
def test_black_box_catches_bugs_that_bypass_the_ledger(name):
    r, claimed = _mem(name, PairSpec(1, "low"), 8)
    assert r.epsilon_lower > claimed, (name, r.epsilon_lower, claimed)
    # ... and the gray-box attack cannot see them: the bug is outside the ledger
    r2, _ = _lik(name, PairSpec(1, "low"), 8, n=3000)
    assert not r2.details["renyi_violation"] and r2.epsilon_lower <= claimed


@pytest.mark.parametrize("name,params", [("adac-ucb", {"n_arms": "2", "rho": "0.1"}),
                                         ("adap-ucb", {"n_arms": "2", "epsilon": "0.5"})])
def test_the_correct_twins_pass_the_same_attacks(name, params):
    for spec, T in ((PairSpec(0, "mid"), 16), (PairSpec(8, "low"), 16)):
        r, claimed = _lik(name, spec, T, params=params)
        assert not r.details["renyi_violation"] and r.epsilon_lower <= claimed
    r, claimed = _mem(name, PairSpec(1, "low"), 8, params=params)
    assert r.epsilon_lower <= claimed


def test_no_forgetting_feeds_a_round_to_several_releases():
    pol = make_policy("mutant-no-forgetting", {"n_arms": "2"})
    pair = make_pair(PairSpec(0, "high"), TableDP(), 2, 16)
    TableDP().run(pol, pair.d0, 50, np.random.default_rng(0))
    assert pol.ledger.round_usage(16)[:, 0].max() >= 2
    ok = make_policy("adac-ucb", {"n_arms": "2"})
    TableDP().run(ok, pair.d0, 50, np.random.default_rng(0))
    assert ok.ledger.round_usage(16).max() == 1
