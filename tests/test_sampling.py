"""Counting a test's fresh samples in looks (attacks.sampling): valid at every look, and stopping only when settled."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.attacks.bounds import TestCounts
from dpaudit.attacks.sampling import LOOKS, Stop, count
from dpaudit.engine import Engine


class RR:
    """Randomised response at ``eps``: side 0 sends 1 w.p. 1/(1+e^eps), side 1 w.p. e^eps/(1+e^eps)."""

    cells_per_run = 1
    chunk_cells = 1000

    def __init__(self, eps: float) -> None:
        self.p = 1 / (1 + math.exp(eps))

    def sample(self, candidate: int, side: int, n: int, seed: np.random.SeedSequence) -> np.ndarray:
        q = 1 - self.p if side else self.p
        return (np.random.default_rng(seed).random(n) < q).astype(float)[:, None]

    def describe(self, candidate: int) -> dict:
        return {"label": "rr"}


class Identity:
    def scores(self, x: np.ndarray) -> dict:
        return {"x": x[:, 0]}


TEST = TestCounts("x", 0.5, 1, False)


def test_the_shares_of_the_looks_add_up_to_one():
    assert math.isclose(sum(share for _, share in LOOKS), 1.0) and LOOKS[-1][0] == 1.0


def test_a_settled_answer_stops_early_either_way():
    src = RR(1.0)
    def seeds():
        return tuple(np.random.SeedSequence(0).spawn(2))

    easy = count(src, 0, 20000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=5.0))
    assert easy.stopped == "futile" and easy.n < 20000 and 0 < easy.bound(1e-5, 0.95) < 1.0
    hard = count(src, 0, 20000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=0.2))  # the claim is broken
    assert hard.stopped == "violation" and hard.n < 20000 and hard.bound(1e-5, 0.95) > 0.2
    near = count(src, 0, 20000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=0.97))  # too close to settle
    assert near.stopped is None and near.n == 20000
    whole = count(src, 0, 20000, seeds(), Identity(), TEST)  # no claim: one look, the whole budget
    assert whole.looks == 1 and whole.share == 1.0 and whole.n == 20000


def test_the_counts_do_not_depend_on_the_engine():
    src = RR(1.0)
    stop = Stop(1e-5, 0.95, claim=4.0)
    one = count(src, 0, 8000, tuple(np.random.SeedSequence(3).spawn(2)), Identity(), TEST, stop=stop)
    with Engine(2) as e:  # (a SeedSequence spawns children once: each count gets its own, equal, seeds)
        two = count(src, 0, 8000, tuple(np.random.SeedSequence(3).spawn(2)), Identity(), TEST, engine=e, stop=stop)
    assert one == two


@pytest.mark.parametrize("claim", [0.5, 5.0])
def test_the_bound_holds_at_its_confidence_whenever_it_stops(claim):
    """Randomised response at eps = 1 with the ideal threshold: the reported bound may exceed the true eps 1
    at most at rate 1 - confidence (here 0.2, over 300 audits), whichever look the audit stops at."""
    src = RR(1.0)
    over = 0
    for s in range(300):
        c = count(src, 0, 4000, tuple(np.random.SeedSequence([7, s]).spawn(2)), Identity(), TEST,
                  stop=Stop(0.0, 0.8, claim=claim))
        over += c.bound(0.0, 0.8) > 1.0
    assert over / 300 <= 0.2 + 3 * math.sqrt(0.2 * 0.8 / 300)


def test_attacks_given_their_pilots_find_what_they_would_have_drawn():
    """view_attack and lda_attack with ``pilots`` (e.g. shared with another attack) give exactly the findings
    they give when they draw the same pilots themselves; a wrong number of pilots is refused."""
    from dpaudit.attacks.discriminant import lda_attack
    from dpaudit.attacks.membership import view_attack
    from dpaudit.attacks.sampling import draw_many
    from dpaudit.policies import make_policy
    from dpaudit.protocols.joint import joint_pairs
    from dpaudit.runner.joint import JointViewSource, TreeSource

    T = 4
    policy = make_policy("jdp-glm", {"n_arms": "3", "dim": "2", "horizon": str(T)})
    pairs = joint_pairs(3, 2, T)
    small, runs = 200, 400

    def pilots_of(seed: np.random.SeedSequence, family: str) -> list:
        seeds = [ss.spawn(4) for ss in seed.spawn(len(pairs))]
        source = JointViewSource(policy, pairs, T) if family == "actions" else TreeSource(policy, pairs, T, 2)
        return draw_many(source, [(c, side, small, sd[k]) for c, sd in enumerate(seeds)
                                  for side, k in ((0, 0), (1, 1), (0, 2), (1, 3))])

    src = JointViewSource(policy, pairs, T)
    kw = dict(delta=1e-5, confidence=0.95, small=small, runs=runs, name="membership")
    own = view_attack(src, list(range(len(pairs))), [p.round for p in pairs], 3, T, np.random.SeedSequence(5), **kw)
    given = view_attack(src, list(range(len(pairs))), [p.round for p in pairs], 3, T, np.random.SeedSequence(5),
                        pilots=pilots_of(np.random.SeedSequence(5), "actions"), **kw)
    assert given.epsilon_lower == own.epsilon_lower and given.details == own.details

    tsrc = TreeSource(policy, pairs, T, 2)
    kw2 = dict(delta=1e-5, confidence=0.95, n_train=small, n_select=small, n_test=runs, name="tree")
    own = lda_attack(tsrc, list(range(len(pairs))), np.random.SeedSequence(6), **kw2)
    given = lda_attack(tsrc, list(range(len(pairs))), np.random.SeedSequence(6),
                       pilots=pilots_of(np.random.SeedSequence(6), "tree"), **kw2)
    assert given.epsilon_lower == own.epsilon_lower and given.details == own.details
    with pytest.raises(ValueError, match="pilot samples"):
        lda_attack(tsrc, list(range(len(pairs))), np.random.SeedSequence(6), pilots=[], **kw2)


def test_a_futile_stop_keeps_the_bound_within_its_stated_margin_of_the_whole_sample():
    """A count stops as futile only where the bound its whole sample would give at the rates counted exceeds the
    bound shown by at most max(FUTILITY_GAIN x bound, FUTILITY_GAIN_OF_CLAIM x claim) (or stays below the floor).
    Randomised response at eps = 1 with a claim of 3, 40 seeds: every futile stop obeys the rule, and the bound
    it reports is, in the median, within that margin of the bound the same seeds give when counted to the end."""
    from dpaudit.attacks.sampling import FUTILITY_GAIN, FUTILITY_GAIN_OF_CLAIM

    class Never(Stop):
        def futile(self, fp, tp, n, planned, share):
            return False

    src, claim, n = RR(1.0), 3.0, 16000
    stopped, shortfall = 0, []
    for s in range(40):
        c = count(src, 0, n, tuple(np.random.SeedSequence([9, s]).spawn(2)), Identity(), TEST,
                  stop=Stop(1e-5, 0.95, claim))
        full = count(src, 0, n, tuple(np.random.SeedSequence([9, s]).spawn(2)), Identity(), TEST,
                     stop=Never(1e-5, 0.95, claim))
        assert full.n == n and full.stopped is None
        b = c.bound(1e-5, 0.95)
        if c.stopped == "futile":
            stopped += 1
            assert c.projected is not None and c.projected - b <= max(FUTILITY_GAIN * b, FUTILITY_GAIN_OF_CLAIM * claim)
            shortfall.append(full.bound(1e-5, 0.95) - b)
        else:
            assert c.n == n and c.bound(1e-5, 0.95) == full.bound(1e-5, 0.95)  # same looks, same counts
    assert stopped >= 20  # the rule still saves time where the bound is settled
    assert float(np.median(shortfall)) <= max(FUTILITY_GAIN * 1.0, FUTILITY_GAIN_OF_CLAIM * claim)


def test_a_floor_stops_a_count_that_cannot_raise_the_audits_bound():
    """With a floor (a bound the audit already shows by another test) above the count's projection, the count
    stops at its first look where no violation is possible; without it, it goes on."""
    src = RR(1.0)

    def seeds():
        return tuple(np.random.SeedSequence(4).spawn(2))

    low = count(src, 0, 32000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=1.5))
    high = count(src, 0, 32000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=1.5, floor=1.2))
    assert high.stopped == "futile" and high.n < low.n
    assert high.projected is not None and high.projected <= 1.2
    assert high.details()["projected_full_sample_bound"] == high.projected


def test_a_test_that_does_not_separate_stops_at_its_first_look_and_shows_no_power():
    """Identical sides (randomised response at eps = 0): the bound is 0 at the first look and the whole sample
    would show 0 too, so the count stops there (the verdict is inconclusive either way); a leak that the first
    look cannot yet show but the whole sample can (eps = 0.08 from 3,000 and 48,000 views per side) is counted on."""
    def seeds():
        return tuple(np.random.SeedSequence(11).spawn(2))

    none = count(RR(0.0), 0, 48000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=1.0))
    assert none.stopped == "futile" and none.n == 48000 // 16 and none.bound(1e-5, 0.95) == 0.0
    assert none.projected == 0.0
    weak = count(RR(0.08), 0, 48000, seeds(), Identity(), TEST, stop=Stop(1e-5, 0.95, claim=1.0))
    assert weak.n > 48000 // 16 and weak.bound(1e-5, 0.95) > 0
