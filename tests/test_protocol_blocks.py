"""The protocols' block path: same views and the same ledger as the per-step path, or not taken at all."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.errors import DPAuditError, InternalError
from dpaudit.attacks.likelihood import privacy_losses
from dpaudit.protocols import PairSpec, make_pair
from dpaudit.runner.setup import build_policy as _build_policy, with_features as _with_features
from dpaudit.policies import registered
from dpaudit.policies.registry import make_policy
from dpaudit.policies.ucb import AdaCUCB
from dpaudit.protocols import ConstantAdversary, InteractiveDP, TableDP, ViewDP, background_table, offers_blocks

BLOCK_POLICIES = [e.name for e in registered(mutants=False) + registered(mutants=True)
                  if not getattr(e.cls, "continuous_actions", False)  # BCO plays points, not arms (dpaudit.bco)
                  and offers_blocks(_with_features(_build_policy(e.name, {"n_arms": "3"}, 64), 0))]


def _audit_policy(name: str):
    return _with_features(_build_policy(name, {"n_arms": "3"}, 64), 0)


def _releases(policy) -> list[tuple[int, int, bytes, bytes]]:
    """Every (run, step, centre, value) of the ledger, whatever the grouping into Release objects."""
    out = []
    for rel in policy.ledger.releases:
        for i, run in enumerate(np.asarray(rel.runs)):
            out.append((int(run), int(rel.step), rel.centre[i].tobytes(), rel.value[i].tobytes()))
    return sorted(out)


def test_every_episode_policy_and_mutant_takes_the_block_path():
    assert {"adac-ucb", "adar-ucb", "adaed-ucb", "adap-ucb", "ucb-episodes", "adac-gope", "adar-gope", "gope",
            "mutant-no-forgetting", "mutant-sqrt2-noise", "dp-se", "mutant-se-shared-noise"} <= set(BLOCK_POLICIES)
    assert not offers_blocks(_audit_policy("adac-oful"))  # OFUL switches on determinants: step by step


@pytest.mark.parametrize("name", BLOCK_POLICIES)
@pytest.mark.parametrize("proto", [TableDP(), ViewDP()], ids=["table", "view"])
def test_block_path_gives_the_step_paths_views_and_ledger(name, proto):
    policy = _audit_policy(name)
    rr = tuple(getattr(policy, "reward_range", (0.0, 1.0)))
    rr = rr if all(np.isfinite(rr)) else (0.0, 1.0)
    # GOPE's first phase lasts about 1,200 rounds at K = 3, d = 3: the horizon covers two phases
    T = 3000 if "gope" in name else 200
    for bg in ("low", "high"):
        pair = make_pair(PairSpec(1, bg), proto, 3, T, rr)
        v_step = proto.run(policy, pair.d0, 300, np.random.default_rng(11), path="step")
        l_step = _releases(policy) if hasattr(policy, "ledger") else None  # DP-SE keeps none (black box only)
        v_blocks = proto.run(policy, pair.d0, 300, np.random.default_rng(11), path="blocks")
        l_blocks = _releases(policy) if hasattr(policy, "ledger") else None
        assert np.array_equal(v_step, v_blocks)
        assert l_step == l_blocks
        # the comparison covered real releases (these three release nothing through the ledger)
        if l_step is not None:
            assert (len(l_step) > 0) == (name not in ("gope", "ucb-episodes", "mutant-shared-noise"))


def test_auto_takes_blocks_and_the_attacks_see_the_same_losses():
    policy = AdaCUCB(n_arms=3, rho=0.5)
    pair = make_pair(PairSpec(1, "low"), TableDP(), 3, 100)
    loss_auto, _ = privacy_losses(policy, TableDP(), pair, 400, np.random.SeedSequence(3))
    # the same computation forced step by step
    run = TableDP.run

    def step_run(self, *a, **k):
        k["path"] = "step"
        return run(self, *a, **k)

    TableDP.run = step_run
    try:
        loss_step, _ = privacy_losses(policy, TableDP(), pair, 400, np.random.SeedSequence(3))
    finally:
        TableDP.run = run
    assert np.array_equal(loss_auto, loss_step)
    assert np.any(loss_auto != 0)


def test_block_path_is_refused_where_it_does_not_apply():
    d = np.zeros((20, 3))
    with pytest.raises(DPAuditError, match="block path"):
        InteractiveDP().run(AdaCUCB(n_arms=3), d, 5, np.random.default_rng(0),
                            ConstantAdversary(tuple([0] * 20)), path="blocks")
    with pytest.raises(DPAuditError, match="block path"):
        TableDP().run(_audit_policy("adac-oful"), d, 5, np.random.default_rng(0), path="blocks")
    with pytest.raises(DPAuditError, match="path must be"):
        TableDP().run(AdaCUCB(n_arms=3), d, 5, np.random.default_rng(0), path="fast")


def test_plugins_run_step_by_step_even_when_they_offer_blocks():
    """A plug-in's plan()/complete() is code the audit has not checked against its act()/observe()."""

    class Liar(AdaCUCB):
        pass

    Liar.__module__ = "my_plugin"
    assert offers_blocks(AdaCUCB(n_arms=3))
    assert not offers_blocks(Liar(n_arms=3))


def test_a_block_outside_the_arms_is_refused():
    class Broken(AdaCUCB):
        def plan(self):
            start, arms, lengths = super().plan()
            return start, arms + 7, lengths

    Broken.__module__ = "dpaudit.policies.ucb"  # pretend it is ours, so that the block path is taken
    with pytest.raises(InternalError, match="planned a block"):  # dpaudit's own policy broke its contract
        TableDP().run(Broken(n_arms=3), np.zeros((20, 3)), 5, np.random.default_rng(0))


@pytest.mark.parametrize("proto", [TableDP(), ViewDP()], ids=["table", "view"])
def test_out_of_range_rewards_are_refused_on_both_paths(proto):
    """An episode with rewards 1.5 and -0.5 has an in-range sum; the block path must still refuse it."""
    d = np.full((12, 2), 0.5) if isinstance(proto, TableDP) else np.full(12, 0.5)
    d[5], d[6] = 1.5, -0.5  # rounds 5 and 6 fall inside one episode of every run
    for path in ("step", "blocks"):
        with pytest.raises(DPAuditError, match=r"reward (1.5|-0.5) at step [56] is outside \[0, 1\]"):
            proto.run(AdaCUCB(n_arms=2), d, 20, np.random.default_rng(0), path=path)


def test_block_sums_rounded_past_the_range_are_not_refused():
    """A prefix-sum difference can land one ulp above hi x length (0.965... then a 1.0 in one column):
    the block path must not call that a reward outside the range (seed 2 of the ucb controls gives such a sum)."""
    from dpaudit.protocols import TableDP

    from dpaudit.policies.registry import make_policy

    pol = make_policy("adac-ucb", {"n_arms": "3", "rho": "0.1"})
    d = np.tile([0.034572034637003424, 0.9654279653629966, 0.9654279653629966], (24, 1))
    d[2] = 1.0  # a threshold background (arm 0 the worse arm) with the canary row at the top
    prefix = TableDP().prefix(d)
    assert prefix[3, 1] - prefix[2, 1] > 1.0  # the rounding this test is about
    views = TableDP().run(pol, d, 50, np.random.default_rng(0))
    assert views.shape == (50, 24)


@pytest.mark.parametrize("name", ["adac-ucb", "adar-gope", "mutant-no-forgetting"])
@pytest.mark.parametrize("proto", [TableDP(), ViewDP()], ids=["table", "view"])
def test_run_batch_blocks_equal_steps_on_several_inputs(name, proto, monkeypatch):
    """The search's pilots run several inputs in one batch; block by block they equal the step path."""
    import dpaudit.protocols.base as base
    from dpaudit.runner.setup import with_features

    pol = with_features(make_policy(name), 0)
    T, K = (1500 if "gope" in name else 300), int(pol.n_arms)  # GOPE's first phase ignores the input
    lo, hi = pol.reward_range
    if proto.list_input:
        inputs = np.stack([np.full(T, 0.9), np.full(T, 0.1), np.linspace(0, 1, T)])
    else:
        inputs = np.stack([np.tile(np.r_[1.0, np.zeros(K - 1)], (T, 1)), np.tile(np.r_[0.0, np.ones(K - 1)], (T, 1)),
                           np.tile(np.linspace(0.1, 0.9, K), (T, 1))])
    inputs = lo + (hi - lo) * inputs
    assert base.offers_blocks(pol)
    blocks = proto.run_batch(pol, inputs, 40, np.random.default_rng(1))
    monkeypatch.setattr(base, "offers_blocks", lambda p: False)
    steps = proto.run_batch(pol, inputs, 40, np.random.default_rng(1))
    assert blocks.shape == (inputs.shape[0], 40, T) and np.array_equal(blocks, steps)
    assert not np.array_equal(blocks[0], blocks[1])  # the inputs matter


# ---- the cycle path: DP-SE's epochs, round robin over the active arms (Protocol._run_cycles) -------------------

def _cycle_inputs(K: int, T: int) -> np.ndarray:
    """Tables on which runs eliminate at different epochs, so their epochs end in different rounds."""
    rng = np.random.default_rng(5)
    border = background_table(list(np.linspace(0.75, 0.25, K)), T, (0.0, 1.0))  # best - worst = Delta_1
    return np.stack([border, background_table([1.0] + [0.0] * (K - 1), T, (0.0, 1.0)),
                     rng.random((T, K)) * np.linspace(1.0, 0.3, K), (rng.random((T, K)) < np.linspace(0.8, 0.3, K)) * 1.0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dp-se", "mutant-se-shared-noise"])
@pytest.mark.parametrize("K", [2, 3])
def test_cycle_path_gives_the_step_paths_views_and_draws_the_same_noise(name, K):
    """Same views, and the generator left in the same state: the same Laplace numbers drawn in the same order,
    so an audit's findings do not change with the path."""
    pol = make_policy(name, {"n_arms": str(K)})
    R1 = int(pol.epoch_length(np.array([1]))[0])
    for T in (K * R1, K * R1 + 1):  # the first epoch ending at the horizon, and one round before it
        for d in _cycle_inputs(K, T):
            for proto, data in ((TableDP(), d), (ViewDP(), d[:, 0])):
                g_step, g_cyc = np.random.default_rng(7), np.random.default_rng(7)
                v_step = proto.run(pol, data, 100, g_step, path="step")
                v_cyc = proto.run(pol, data, 100, g_cyc, path="blocks")
                assert np.array_equal(v_step, v_cyc)
                assert g_step.bit_generator.state == g_cyc.bit_generator.state


def test_cycle_path_completes_epochs_in_the_order_of_their_last_rounds():
    """K = 3 at the threshold: after epoch 1 some runs play 3 arms and some 2, so their second epochs end in
    different rounds (3 R_1 + 2 R_2 and 3 R_1 + 3 R_2) and the noise must be drawn in that order."""
    pol = make_policy("dp-se", {"n_arms": "3"})
    R1, R2 = (int(r) for r in pol.epoch_length(np.array([1, 2])))
    T = 3 * R1 + 3 * R2 + 40
    d = _cycle_inputs(3, T)[0]
    g_step, g_cyc = np.random.default_rng(4), np.random.default_rng(4)
    v_step = TableDP().run(pol, d, 200, g_step, path="step")
    v_cyc = TableDP().run(pol, d, 200, g_cyc, path="blocks")
    assert np.array_equal(v_step, v_cyc)
    assert g_step.bit_generator.state == g_cyc.bit_generator.state
    after1 = {len(set(r)) for r in v_cyc[:, 3 * R1:3 * R1 + 3].tolist()}
    assert after1 == {2, 3}  # both kinds of runs were there
    assert len({len(set(r)) for r in v_cyc[:, -3:].tolist()}) > 1


@pytest.mark.parametrize("proto", [TableDP(), ViewDP()], ids=["table", "view"])
def test_cycle_path_run_batch_equals_steps_on_several_inputs(proto, monkeypatch):
    import dpaudit.protocols.base as base

    pol = make_policy("dp-se", {"n_arms": "3"})
    T = 3 * int(pol.epoch_length(np.array([1]))[0]) * 3
    inputs = _cycle_inputs(3, T)
    inputs = inputs[:, :, 0] if proto.list_input else inputs
    g_cyc, g_step = np.random.default_rng(2), np.random.default_rng(2)
    cycles = proto.run_batch(pol, inputs, 50, g_cyc)
    monkeypatch.setattr(base, "offers_blocks", lambda p: False)
    steps = proto.run_batch(pol, inputs, 50, g_step)
    assert cycles.shape == (inputs.shape[0], 50, T) and np.array_equal(cycles, steps)
    assert g_cyc.bit_generator.state == g_step.bit_generator.state
    if not proto.list_input:  # under View DP every arm sees the same reward: DP-SE eliminates (almost) nothing
        assert not np.array_equal(cycles[0], cycles[1])  # the inputs matter


def test_cycle_path_refuses_what_the_step_path_refuses():
    pol = make_policy("dp-se", {})
    with pytest.raises(DPAuditError, match="sum is outside"):
        pol.reset(2, np.random.default_rng(0))
        pol.complete(np.array([0, 1]), np.array([[700.0, 0.0], [0.0, 0.0]]))  # 700 rewards above 1 in 650 pulls

    class Broken(type(pol)):
        def plan(self):
            start, arms, lengths, reps = super().plan()
            return start, arms, lengths * 2, reps

    Broken.__module__ = "dpaudit.policies.elimination"  # pretend it is ours, so that the cycle path is taken
    with pytest.raises(InternalError, match="planned a cycle"):
        TableDP().run(Broken(), np.zeros((2000, 2)), 5, np.random.default_rng(0))


def test_blocks_written_by_group_give_the_same_views_with_few_or_many_groups():
    """``shared_blocks`` (GOPE) writes views one distinct block at a time, and all at once past 64 distinct blocks:
    UCB's episodes, shared by every run at first and then per run, exercise both against the step path."""

    class Grouped(AdaCUCB):
        shared_blocks = True

    Grouped.__module__ = "dpaudit.policies.ucb"  # pretend it is ours, so that the block path is taken
    import dpaudit.protocols.base as base

    distinct = []
    write = base.Protocol._write_groups

    def counted(views, runs, start, arms, length):
        distinct.append(np.unique(np.column_stack([start, arms, length]), axis=0).shape[0])
        write(views, runs, start, arms, length)

    d = np.tile(np.linspace(0.7, 0.3, 12), (800, 1))
    v_step = TableDP().run(Grouped(n_arms=12, rho=0.3), d, 500, np.random.default_rng(8), path="step")
    base.Protocol._write_groups = staticmethod(counted)
    try:
        v_blocks = TableDP().run(Grouped(n_arms=12, rho=0.3), d, 500, np.random.default_rng(8), path="blocks")
    finally:
        base.Protocol._write_groups = staticmethod(write)
    assert np.array_equal(v_step, v_blocks)
    assert min(distinct) == 1 and max(distinct) > 64  # both ways of writing were taken
    # blocks are grouped by a hash of their row and checked: a hash that collides everywhere changes nothing
    weights = base._ROW_WEIGHTS
    base._ROW_WEIGHTS = np.zeros_like(weights)
    try:
        v_collide = TableDP().run(Grouped(n_arms=12, rho=0.3), d, 500, np.random.default_rng(8), path="blocks")
    finally:
        base._ROW_WEIGHTS = weights
    assert np.array_equal(v_step, v_collide)
