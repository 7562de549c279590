"""The per-run adapter's whole-run path (PerRun.run_copies: each copy through all its rounds, copy by copy)
gives the views the round-by-round path gives for the same seeds, for every shape and generator mode; and
the feedback call's arguments are mapped by name, with a note naming any order that was not given."""

from __future__ import annotations

import random

import numpy as np
import pytest
from numpy.random import laplace as _laplace

from dpaudit.adapters import PerRun, make_per_run
from dpaudit.errors import DPAuditError
from dpaudit.protocols import TableDP
from dpaudit.protocols.base import offers_copies
from dpaudit.protocols.interactive import InteractiveDP
from dpaudit.protocols.view import ViewDP
from dpaudit.sandbox import wrap_plugin

from thirdparty import elimination, etc, greedy, styles, ucb_counter


def _both_paths(proto, pol, data, n, seed):
    """The views of ``n`` runs on ``data`` whole run by whole run and round by round (same seed)."""
    assert offers_copies(pol)
    fast = proto.run(pol, data, n, np.random.default_rng(seed), None)
    proto.fixed_rewards = False  # the instance's attribute: the round-by-round path
    try:
        slow = proto.run(pol, data, n, np.random.default_rng(seed), None)
    finally:
        del proto.fixed_rewards
    return fast, slow


CASES = [(elimination.SharedNoiseBlockElimination, {}, {}), (etc.WrongScaleETC, {}, {}),
         (ucb_counter.NoResetEpisodicUCB, {}, {}), (greedy.DoubleDividedGreedy, {}, {}),
         (styles.RewardFirstStepUCB, {}, {}), (styles.RoundFirstUCB, {}, {"first_round": 1}),
         (styles.ModuleRngUCB, {}, {}), (ucb_counter.EpisodicLaplaceUCB, {}, {"globals_mode": "swap"})]


@pytest.mark.parametrize("cls, kw, options", CASES, ids=[c[0].__name__ + str(c[2]) for c in CASES])
@pytest.mark.parametrize("proto", [TableDP(), ViewDP()], ids=["table", "view"])
def test_whole_runs_give_the_round_by_round_views(cls, kw, options, proto):
    pol = PerRun(cls, kw, "pure:eps=1", **options)
    g = np.random.default_rng(3)
    T, K = 60, pol.n_arms
    data = g.integers(0, 2, size=(T,) if proto.list_input else (T, K)).astype(float)
    fast, slow = _both_paths(proto, pol, data, 40, 11)
    assert fast.shape == (40, T) and np.array_equal(fast, slow)


class EveryRoute:
    """Draws through every route the redirection covers: np.random's functions, one imported by name into
    this module, random's, a reseed from its own stream and a state read (numpy's MT19937) mid-run."""

    n_arms = 2

    def __init__(self, n_arms=2):
        self.s, self.t = [0.0, 0.0], 0

    def step(self, arm, reward):
        if arm is not None:
            self.s[arm] += reward + _laplace(0.0, 1.0)
        self.t += 1
        if self.t == 5:
            np.random.seed(int(1000 * np.random.random()))
        if self.t == 9:
            np.random.get_state()
        if random.random() < 0.3:
            return int(np.random.randint(2))
        return int(self.s[1] > self.s[0])


def test_whole_runs_bind_each_copys_generators_straight_and_draw_the_same_numbers():
    from dpaudit.adapters.seeding import NP_INST, PY_INST

    pol = PerRun(EveryRoute, {}, "pure:eps=1")
    data = np.random.default_rng(4).random((30, 2))
    fast, slow = _both_paths(TableDP(), pol, data, 25, 7)
    assert np.array_equal(fast, slow) and len({tuple(v) for v in fast}) > 20  # the copies' own streams
    # the whole-run path reached the copy's generators straight (no redirection left in between) ...
    g = pol._globals
    g.seed_copies(np.array([1]))
    g.enter()
    try:
        g.pin(0)
        np.random.random()
        _laplace(0.0, 1.0)
        assert np.random.random.__self__ is g.target.np_gens[0] and _laplace_now().__self__ is g.target.np_gens[0]
        random.random()
        assert random.random.__self__ is g.target.py_gens[0]
        np.random.seed(3)  # a reseed replaces the copy's generator: the bound functions follow it
        assert np.random.random.__self__ is g.target.np_gens[0]
        g.pin(0)  # the next copy starts from the redirections again
        assert getattr(np.random.random, "__self__", None) is None
    finally:
        g.leave()
    # ... and gives back the module functions as they were
    assert np.random.random.__self__ is NP_INST and random.random.__self__ is PY_INST and _laplace_now().__self__ is NP_INST


def _laplace_now():
    return globals()["_laplace"]


def test_whole_runs_behind_the_sandbox_and_in_run_batch():
    spec = "examples/per_run_ucb.py:LeakyUCB"
    pol = wrap_plugin(make_per_run(spec, {"n_arms": "2", "epsilon": "1"}, "pure:eps=1", horizon=50), spec)
    proto = InteractiveDP()
    d = np.random.default_rng(0).random((50, 2))
    fast, slow = _both_paths(proto, pol, d, 30, 5)
    assert np.array_equal(fast, slow)
    inputs = np.stack([d, 1 - d])
    a = proto.run_batch(pol, inputs, 20, np.random.default_rng(9))
    proto.fixed_rewards = False
    b = proto.run_batch(pol, inputs, 20, np.random.default_rng(9))
    assert a.shape == (2, 20, 50) and np.array_equal(a, b)


@pytest.mark.parametrize("cls, kw, options", CASES, ids=[c[0].__name__ + str(c[2]) for c in CASES])
def test_slices_of_a_batch_give_the_whole_batchs_rows(cls, kw, options):
    """run_batch(copies=(lo, hi)) builds and runs only those copies, seeded as in the whole batch: the slices'
    views, in order, are the whole batch's, in every generator mode (redirected, module-level, swapped)."""
    from dpaudit.protocols import splits_copies

    pol = PerRun(cls, kw, "pure:eps=1", **options)
    assert splits_copies(pol) and splits_copies(wrap_plugin(pol, "x"))
    proto, T = TableDP(), 40
    g = np.random.default_rng(4)
    tabs = g.integers(0, 2, size=(3, T, pol.n_arms)).astype(float)
    whole = proto.run_batch(pol, tabs, 30, np.random.default_rng(8)).reshape(90, T)
    parts = [proto.run_batch(wrap_plugin(pol, "x"), tabs, 30, np.random.default_rng(8), copies=c)
             for c in ((0, 1), (1, 44), (44, 90))]
    assert [p.shape for p in parts] == [(1, T), (43, T), (46, T)]
    assert np.array_equal(np.concatenate(parts), whole)
    with pytest.raises(ValueError, match="copies must be a range"):
        proto.run_batch(pol, tabs, 30, np.random.default_rng(8), copies=(5, 91))


@pytest.mark.slow
def test_the_search_ranks_a_one_run_class_on_two_workers_as_on_one():
    """The search's ranking of a one-run class splits each group's batch of runs over the workers (slices seeded
    as in the whole batch): the rows, the chosen test and its selection bound are those of one process."""
    from dpaudit.attacks.neighbours import _rank_all
    from dpaudit.engine import SERIAL, Engine
    from dpaudit.protocols import PairSpec, candidate_pairs

    pol = PerRun(greedy.DoubleDividedGreedy, {"horizon": 40}, "pure:eps=1")
    proto, T = TableDP(), 40
    specs = [s for s in candidate_pairs(proto, 2, T) if isinstance(s, PairSpec)][:5]

    def rank(engine):
        return _rank_all(pol, proto, specs, np.random.SeedSequence(21), T, (0.0, 1.0), 1e-5, 0.95, 60, 60, None,
                         None, engine, None, [], 0.0, "ranked")

    one = rank(SERIAL)
    with Engine(workers=2) as eng:
        two = rank(eng)
    assert [r for _, r, _ in one] == [r for _, r, _ in two]
    assert [(c.test, c.selection_bound) for c, _, _ in one] == [(c.test, c.selection_bound) for c, _, _ in two]
    assert any(c.selection_bound > 0 for c, _, _ in one)  # the pairs are told apart: the comparison is not vacuous


def test_rewards_outside_the_range_still_step_and_are_refused_by_name():
    pol = PerRun(etc.PrivateETC, {}, "pure:eps=1")
    d = np.full((20, 2), 0.5)
    d[7, :] = 2.0
    with pytest.raises(DPAuditError, match="reward 2 at step 7 is outside"):
        TableDP().run(pol, d, 5, np.random.default_rng(0), None)


class BadArm:
    n_arms = 2

    def __init__(self):
        self.t = 0

    def select_arm(self):
        self.t += 1
        return -1 if self.t == 6 else np.int64(self.t % 2)

    def update(self, arm, reward):
        pass


def test_an_arm_out_of_range_is_refused_with_its_round_and_copy():
    with pytest.raises(DPAuditError, match=r"returned arm -1 at round 5 \(copy 0\)"):
        TableDP().run(PerRun(BadArm, {}, "pure:eps=1", probe_steps=3), np.full((10, 2), 0.5), 4,
                      np.random.default_rng(0), None)


class LossFeedback:
    """``observe_loss(t, loss)``: the round first, then the loss (not an arm)."""

    n_arms = 2
    seen: list = []

    def predict(self):
        return 1

    def observe_loss(self, t, loss):
        LossFeedback.seen.append((t, loss))


class Unnamed:
    n_arms = 2

    def select_arm(self):
        return 0

    def update(self, x, z):
        pass


def test_feedback_arguments_are_mapped_by_name_and_a_guess_is_named():
    pol = PerRun(LossFeedback, {}, "pure:eps=1", select="predict", update="observe_loss")
    assert [tok for _, tok in pol._shape.args] == ["t", "reward"]
    assert any("observe_loss(t, reward)" in n for n in pol.audit_notes)
    LossFeedback.seen.clear()
    d = np.array([[0.1, 0.25], [0.1, 0.75], [0.1, 0.5]])
    TableDP().run(pol, d, 1, np.random.default_rng(0), None)
    assert LossFeedback.seen == [(0, 0.25), (1, 0.75), (2, 0.5)]  # the round, never the arm (1)
    guessed = PerRun(Unnamed, {}, "pure:eps=1")
    assert any("update(arm, reward)" in n and "guessed" in n for n in guessed.audit_notes)


def test_a_policy_rebuilt_at_the_swept_horizon_replaces_its_notes():
    from dpaudit.runner.central import rebuilt_notes

    spec = "tests/thirdparty/styles.py:make_env_params_ucb"
    old = make_per_run(spec, {}, "pure:eps=1", horizon=48).audit_notes
    new = make_per_run(spec, {}, "pure:eps=1", horizon=192).audit_notes
    notes = ["protocol table.", *old, "horizon T = 192: swept."]
    rebuilt_notes(notes, old, new)
    factory = [n for n in notes if "is a factory" in n]
    assert len(factory) == 1 and "192" in factory[0] and "48" not in factory[0]
    assert notes[0] == "protocol table." and notes[-1] == "horizon T = 192: swept." and len(notes) == len(old) + 2


@pytest.mark.slow
def test_a_stage_that_shows_nothing_for_a_while_gets_a_heartbeat_line():
    import io
    import time

    from dpaudit.progress import ProgressBar

    buf = io.StringIO()
    bar = ProgressBar("x", buf, tty=False, heartbeat=0.3)
    bar("choice of the horizon")
    time.sleep(1.0)
    bar("search: 1/5 pairs ranked")
    bar.close()
    time.sleep(0.4)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("x: choice of the horizon [")  # once it had lasted 0.3 s
    assert any(line.startswith("x: choice of the horizon: still running [") for line in lines[1:-1])
    assert lines[-1].startswith("x: search: 1/5 pairs ranked")  # nothing after close()
    quick = io.StringIO()
    bar = ProgressBar("x", quick, tty=False, heartbeat=5.0)
    bar("choice of the horizon")
    bar("horizon T = 96: about 40 s to go (estimated)")
    bar.close()
    assert quick.getvalue().startswith("x: horizon T = 96: about 40 s to go (estimated) [")  # the stage's name did not show


@pytest.mark.slow
def test_messages_held_back_do_not_hold_back_the_heartbeat():
    import io
    import time

    from dpaudit.progress import ProgressBar

    stamps: list[float] = []

    class Stamped(io.StringIO):
        def write(self, s):
            if s.strip():
                stamps.append(time.perf_counter())
            return super().write(s)

    t0 = time.perf_counter()
    bar = ProgressBar("x", Stamped(), tty=False, heartbeat=0.3)
    while time.perf_counter() - t0 < 1.5:  # a stage's name every 50 ms, none of them shown at once
        bar("threshold search: T = 96 (up to 384)")
        time.sleep(0.05)
    bar.close()
    # a line at least every heartbeat (plus the thread's tick and a loaded machine's slack), not none at all
    gaps = np.diff([t0, *stamps])
    assert len(stamps) >= 3 and gaps.max() < 0.9
    # the heartbeat counts from when the command began (its imports took seconds before the bar existed)
    early = io.StringIO()
    bar = ProgressBar("x", early, tty=False, heartbeat=0.3, start=time.perf_counter() - 0.5)
    bar("choice of the horizon")
    time.sleep(0.25)  # under a heartbeat since the bar was made, over one since the command began
    bar.close()
    assert early.getvalue().startswith("x: choice of the horizon [")
