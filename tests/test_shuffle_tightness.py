"""The shuffle audit's gray-box part: the exact likelihood ratio of a shuffled canary, its exact privacy-loss
distribution, the calibrated canaries, and that the bound never exceeds the pair's exact eps beyond its budget."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from dpaudit.accountants import clones_epsilon, shuffled_canary_profile
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import PiecewiseShuffler
from dpaudit.policies import make_policy
from dpaudit.protocols import ShuffleDP
from dpaudit.protocols.base import ContextInput
from dpaudit.protocols.shuffle import ShufflePair, calibrated_pairs, canary_model, shuffle_pairs
from dpaudit.runner import check
from dpaudit.attacks.likelihood import epsilon_from_losses
from dpaudit.runner.shuffle import gray_box_limit, gray_box_runs, loss_bound, statistical_limit


def _pair(policy, canary, other, background, batch):
    """A batch where every user but the first holds ``background``; the first holds ``canary`` (d0) or ``other``."""
    (x0, r0), (x1, r1), (xb, rb) = canary, other, background
    d = policy.dim
    X = np.tile(np.asarray(xb, dtype=float), (batch, 1))[:, None, :]
    R = np.full((batch, 1), float(rb))
    X0, R0, X1, R1 = X.copy(), R.copy(), X.copy(), R.copy()
    X0[0, 0], R0[0, 0], X1[0, 0], R1[0, 0] = np.reshape(x0, d), r0, np.reshape(x1, d), r1
    return ShufflePair(ContextInput(X0, R0), ContextInput(X1, R1), 0, "test", "test")


# ---- the randomizer's calibration ---------------------------------------------------------------------------

@pytest.mark.parametrize("eps0", [0.7, 3.5])
def test_ratio_classes_against_a_fine_grid_and_the_counts_against_the_densities(eps0):
    """ratio_classes integrates the background's density over each class (checked on a grid of 400,001 points per
    coordinate); ratio_class_counts classifies every message as the log-densities do."""
    sh = PiecewiseShuffler(eps0, 3, lo=np.array([0.0, -0.5, -1.0]), hi=np.array([1.0, 0.5, 1.0]))
    x, x2, b = np.array([0.9, 0.3, -0.2]), np.array([0.1, -0.1, 0.5]), np.array([0.5, 0.45, -1.0])
    cls = sh.ratio_classes(x, x2, b)
    assert sum(cls.values()) == pytest.approx(1.0, abs=1e-12)
    y = np.linspace(-sh.C, sh.C, 400_001)
    ref: dict = {}
    for j in range(3):
        msgs = j * sh.W + y + sh.C
        ld = sh.message_log_density(msgs, np.stack([x, x2, b]))
        a = np.rint((ld[0] - ld[2]) / eps0).astype(int)
        c = np.rint((ld[1] - ld[2]) / eps0).astype(int)
        w = np.exp(ld[2]) * (y[1] - y[0])  # density times dy (J's 1/m included)
        for key in set(zip(a, c)):
            sel = (a == key[0]) & (c == key[1])
            ref[key] = ref.get(key, 0.0) + w[sel].sum()
    for key in set(cls) | set(ref):
        assert cls.get(key, 0.0) == pytest.approx(ref.get(key, 0.0), abs=2e-5), key
    rng = np.random.default_rng(1)
    msgs = sh.randomize(rng, np.broadcast_to(b, (40, 50, 3)))
    counts = sh.ratio_class_counts(msgs, x, x2, b)
    ld = sh.message_log_density(msgs, np.stack([x, x2, b]))
    code = 3 * (np.rint((ld[0] - ld[2]) / eps0).astype(int) + 1) + np.rint((ld[1] - ld[2]) / eps0).astype(int) + 1
    np.testing.assert_array_equal(counts, np.stack([np.bincount(row, minlength=9) for row in code]))
    # messages next to every piece end (the table's cells around them are resolved one by one)
    lefts = sh._left(np.stack([sh.scaled(v) for v in (x, x2, b)]))
    ends = (lefts[..., None] + np.array([0.0, sh.C - 1.0]))  # (3, m, 2)
    near = [j * sh.W + sh.C + e + off for j in range(3) for e in ends[:, j].ravel() for off in (-1e-9, 1e-9, -1e-4, 1e-4)]
    near = np.clip(np.array(near), 0.0, 2 * sh.W + 2 * sh.C)[:, None]  # one message per run: classified one by one
    ld = sh.message_log_density(near, np.stack([x, x2, b]))
    code = 3 * (np.rint((ld[0] - ld[2]) / eps0).astype(int) + 1) + np.rint((ld[1] - ld[2]) / eps0).astype(int) + 1
    np.testing.assert_array_equal(sh.ratio_class_counts(near, x, x2, b), np.eye(9, dtype=int)[code[:, 0]])
    # over many messages the class frequencies are the classes' probabilities (a 5-sigma check)
    freq = counts.sum(axis=0) / counts.sum()
    for (a, c), q in cls.items():
        assert abs(freq[3 * (a + 1) + c + 1] - q) < 5 * math.sqrt(q * (1 - q) / counts.sum()) + 1e-12


def test_separation_is_the_non_overlap_of_the_high_pieces():
    sh = PiecewiseShuffler(3.5, 1)
    gap = 2 * (sh.C - 1) / (sh.C + 1)  # the scaled distance past which the pieces stop overlapping (about 0.35)
    assert gap == pytest.approx(0.3475, abs=1e-3)
    assert float(sh.separation(np.array([0.2]), np.array([0.2 - gap]))) == pytest.approx(1.0)
    assert float(sh.separation(np.array([0.2]), np.array([0.2 - gap / 2]))) == pytest.approx(0.5)
    assert float(sh.separation(np.array([0.9]), np.array([-0.9]))) == 1.0
    cls = sh.ratio_classes(np.array([0.2]), np.array([0.2 - gap / 2]), np.array([0.2 - gap / 2]))
    s = sh.s
    assert cls[(1, 0)] == pytest.approx(0.5 / (s * (s + 1))) and cls[(-1, 0)] == pytest.approx(0.5 * s / (s + 1))


def test_message_values_are_what_batch_release_randomizes():
    """A batch where every user holds one datum: the share of messages on the high piece of the stated vectors is
    the Piecewise Mechanism's s / (s + 1) (about 0.85 at eps0 = 3.5; vectors read wrongly put far fewer there)."""
    pol = make_policy("shuffle-glm", {"batch0": 200})
    x = np.array([0.3, -0.5, 0.2, 0.1, -0.4])
    for r in (0.0, 1.0):
        view = ShuffleDP().run(pol, ContextInput(np.tile(x, (200, 1))[:, None], np.full((200, 1), r)), 50,
                               np.random.default_rng(3))
        vals = pol.message_values(x[None], np.array([r]))
        for sh, msgs, v in ((pol.shuffler_outer, view["outer"], vals["outer"][0]),
                            (pol.shuffler_grad, view["grads"][0], vals["grad"][0])):
            high = sh.message_log_density(msgs, v) == np.max(sh.message_log_density(msgs, v))
            share, p = high.mean(), sh.s / (sh.s + 1)
            assert abs(share - p) < 5 * math.sqrt(p * (1 - p) / high.size), (r, share)


# ---- the exact likelihood ratio and the exact profile against brute force -----------------------------------

TINY = {"dim": 1, "n_arms": 2, "batch0": 3}


def _tiny_pair(pol, background=(1.0, 0.0)):
    """The canary (0, 0) vs (0.72, 1); the background (1, 0) is a third datum whose messages are disjoint from both
    in both message sets (3 ratio classes), or (0.72, 1), the canary's other value (2 classes)."""
    return _pair(pol, ([0.0], 0.0), ([0.72], 1.0), ([background[0]], background[1]), 3)


def test_loss_of_a_view_is_the_multiset_likelihood_by_brute_force():
    """3 users, d = 1: the model's log-ratio of each view equals the log-ratio of the multiset's densities summed
    over every assignment of the messages to the users (the definition, 3! terms per message set)."""
    pol = make_policy("shuffle-glm", TINY)
    pair = _tiny_pair(pol)
    model, why = canary_model(pol, pair)
    assert model is not None, why
    view = ShuffleDP().run(pol, pair.d0, 200, np.random.default_rng(0))
    brute = np.zeros(200)
    for st, msgs in ((model.sets[0], view["outer"]), (model.sets[1], view["grads"][0])):
        sh, (v0, v1, vb) = st["shuffler"], st["values"]
        dens = {k: np.exp(sh.message_log_density(msgs, v)) for k, v in (("0", v0), ("1", v1), ("b", vb))}
        side = []
        for first in ("0", "1"):
            users = [first, "b", "b"]
            side.append(sum(np.prod([dens[users[i]][:, perm[i]] for i in range(3)], axis=0)
                            for perm in itertools.permutations(range(3))))
        brute += np.log(side[0]) - np.log(side[1])
    np.testing.assert_allclose(model.losses(view), brute, rtol=0, atol=1e-12)


def _brute_profile(model, eps, direction):
    """delta(eps) of the view of 3 users by enumeration: every ordered assignment of ratio classes to the
    canary and the two others, per message set, gathered into multisets (the view's likelihood ratio is a
    function of them), then the two sets' product; independent of the accountant's formulas."""
    per_set = []
    for n, eps0, cls in model.classes():
        keys = sorted(cls)
        q = np.array([cls[k] for k in keys])
        side = [q * np.exp(np.array([k[0] for k in keys]) * eps0), q * np.exp(np.array([k[1] for k in keys]) * eps0)]
        dist: dict = {}
        for t in itertools.product(range(len(keys)), repeat=n):
            key = tuple(sorted(t))
            rest = np.prod([q[i] for i in t[1:]])
            p0, p1 = side[0][t[0]] * rest, side[1][t[0]] * rest
            a, b = dist.get(key, (0.0, 0.0))
            dist[key] = (a + p0, b + p1)
        per_set.append(list(dist.values()))
    total = 0.0
    for combo in itertools.product(*per_set):
        p0 = np.prod([c[0] for c in combo])
        p1 = np.prod([c[1] for c in combo])
        p, qq = (p0, p1) if direction == 0 else (p1, p0)
        total += max(p - math.exp(eps) * qq, 0.0)
    return total


@pytest.mark.parametrize("background", [(1.0, 0.0), (0.72, 1.0)])
def test_exact_profile_of_a_tiny_batch_against_enumeration_and_monte_carlo(background):
    """The accountant's delta(eps) for 3 users brackets the enumeration (within its 1e-5 loss grid) in both
    directions, with the background a third datum (3 ratio classes) or the canary's other value; the pair's eps
    at delta = 0.05 matches the enumeration's; and Monte Carlo of the policy's own views agrees (5 se)."""
    pol = make_policy("shuffle-glm", TINY)
    pair = _tiny_pair(pol, background)
    model, _ = canary_model(pol, pair)
    prof = model.profile()
    for direction in (0, 1):
        for eps in (0.0, 0.3, 0.8, 1.5, 3.0):
            ref = _brute_profile(model, eps, direction)
            hi, lo = prof.delta(eps, direction, "upper"), prof.delta(eps, direction, "lower")
            assert lo - 1e-12 <= ref * (1 + 1e-9) and ref <= hi * (1 + 2e-5) + 1e-12, (direction, eps, lo, ref, hi)
            assert hi - lo < 1e-4
        target = 0.05
        lo_e, hi_e = 0.0, 8.0  # the enumeration's eps(0.05) by bisection
        for _ in range(50):
            mid = 0.5 * (lo_e + hi_e)
            lo_e, hi_e = (lo_e, mid) if _brute_profile(model, mid, direction) <= target else (mid, hi_e)
        assert prof.epsilon(target, direction) == pytest.approx(hi_e, abs=1e-4)
        views = ShuffleDP().run(pol, pair.d1 if direction else pair.d0, 100_000, np.random.default_rng(5 + direction))
        loss = (1 if direction == 0 else -1) * model.losses(views)
        for eps in (0.3, 0.8):
            y = np.maximum(0.0, -np.expm1(eps - loss))
            assert abs(y.mean() - prof.delta(eps, direction)) < 5 * y.std() / math.sqrt(y.size) + 1e-6


def test_exact_eps_of_one_message_and_below_the_clone_bound():
    """n = 1 (no shuffle): the exact profile of one disjoint message is q+ (e^eps0 - e^eps), so eps(delta) =
    log(e^eps0 - delta / q+); and for n users FMT's bound (which holds for every pair and background) is never
    below a pair's exact eps."""
    sh = PiecewiseShuffler(2.0, 1)
    cls = sh.ratio_classes(np.array([1.0]), np.array([-1.0]), np.array([-1.0]))
    prof = shuffled_canary_profile([(1, 2.0, cls)])
    qp = cls[(1, 0)]
    assert prof.epsilon(1e-3, 0) == pytest.approx(math.log(math.exp(2.0) - 1e-3 / qp), abs=1e-4)
    for n, eps0 in ((50, 2.0), (300, 3.5), (1000, 1.0)):
        sh = PiecewiseShuffler(eps0, 1)
        cls = sh.ratio_classes(np.array([1.0]), np.array([-1.0]), np.array([-1.0]))
        exact = shuffled_canary_profile([(n, eps0, cls)]).epsilon(1e-5)
        assert 0 < exact <= clones_epsilon(n, eps0, 1e-5)
    with pytest.raises(DPAuditError, match="at most 3"):
        shuffled_canary_profile([(10, 1.0, {(1, 0): 0.1, (0, 1): 0.1, (-1, -1): 0.1, (1, 1): 0.1, (0, 0): 0.6})])


def test_the_default_calibrated_pair_and_the_one_coordinate_canaries():
    """At the defaults (d = 5, K = 20, eps0 = 3.5, 1,000 users) the calibrated canary's messages are disjoint from
    the background's in every outer-product coordinate and mostly in the gradient ones, and its exact eps is
    about 0.97 (the one-coordinate canaries' are about 0.31 and 0.26)."""
    pol = make_policy("shuffle-glm", {})
    pairs = calibrated_pairs(pol, 1000)
    assert 1 <= len(pairs) <= 4
    best = canary_model(pol, pairs[0])[0]
    sep = best.separation()
    assert sep[0] == pytest.approx(1.0) and sep[1] > 0.85
    for p in pairs:  # one background, the canary first, every datum admissible
        bg = p.common_background()
        assert bg is not None and p.pos == 0 and np.linalg.norm(bg[0]) <= 1 + 1e-12
        assert np.array_equal(p.d1.X[0], p.d1.X[1]) and not np.array_equal(p.d0.X[0], p.d1.X[0])
    eps_new = best.profile().epsilon(1e-5)
    assert 0.95 < eps_new < 1.0
    for old in shuffle_pairs(1000, 5):  # the one-coordinate canaries: 0.31 (context e1 vs 0) and 0.26 (reward)
        model = canary_model(pol, old)[0]
        assert model is not None and model.profile().epsilon(1e-5) < 0.35 < 0.5 * eps_new


# ---- the bound: valid against the exact eps, near its statistical limit --------------------------------------

@pytest.mark.slow
def test_no_false_exceedance_of_the_exact_eps_over_many_seeds():
    """20 users, d = 1, 1,500 runs per seed, 120 seeds: the gray-box bound (the order statistic of
    attacks.likelihood.loss_bounds, at 95% confidence) exceeds the exact eps of the side it samples in at most 5%
    of seeds in expectation; more than 14 of 120 would happen with probability below 0.2% if that held. Its
    law is exact, so the bound's seeds above the median limit are also about half."""
    pol = make_policy("shuffle-glm", {"dim": 1, "n_arms": 2, "batch0": 20})
    pair = calibrated_pairs(pol, 20)[0]
    model, _ = canary_model(pol, pair)
    prof = model.profile()
    side = 1
    exact_eps = prof.epsilon(1e-3, side)
    limit = gray_box_limit(prof, side, 1500, 1e-3, 0.95)
    assert 0 < limit < exact_eps
    bad_eps = positive = above = 0
    for seed in range(120):
        rng = np.random.default_rng([seed, 7])
        loss = -model.losses(ShuffleDP().run(pol, pair.d1, 1500, rng))
        u = rng.random(loss.size)
        b = loss_bound(loss, u, 1e-3, 0.95)
        eps = b.epsilon_lower
        assert eps == epsilon_from_losses(loss, u, 1e-3, 0.05)[0]  # the central attack's bound, one code path
        bad_eps += eps > exact_eps
        positive += eps > 0
        above += eps > limit
    assert bad_eps <= 14
    assert positive >= 100  # the test has power at this size
    assert 40 <= above <= 80  # the median of the bound's exact law (Binomial(120, 1/2): outside with p < 0.05%)


def test_the_sample_size_is_chosen_on_the_exact_profile():
    """The default pair at 40,000 planned runs: 20,000 runs' median bound is within 5% of 40,000's, 10,000's is
    not; a pair without an enumerated profile keeps every run."""
    pol = make_policy("shuffle-glm", {})
    prof = canary_model(pol, calibrated_pairs(pol, 1000)[0])[0].profile()
    n, full = gray_box_runs(prof, 1, 40000, 1e-5, 0.975)
    assert n == 20000 and full == pytest.approx(gray_box_limit(prof, 1, 40000, 1e-5, 0.975))
    assert gray_box_limit(prof, 1, n, 1e-5, 0.975) >= 0.95 * full > gray_box_limit(prof, 1, 10000, 1e-5, 0.975)
    assert gray_box_runs(None, 1, 40000, 1e-5, 0.975) == (40000, None)


@pytest.mark.slow
def test_the_default_audit_is_near_its_statistical_limit_and_reports_the_exact_eps():
    """d = 1, 6,000 runs: the gray-box bound is within 25% of the median of what its sample can show, below the
    pair's exact eps (reported, not judged), and the black-box part still runs beside it."""
    out = check("shuffle-glm", {"dim": "1", "n_arms": "2"}, protocol="shuffle", runs=6000, seed=3)
    gb = next(a for a in out["attacks"] if a["attack"] == "likelihood (shuffled multiset)")
    ex = next(e for e in out["exact"] if e["part"] == "the audited pair's exact eps")
    assert not ex["judged"] and ex["epsilon"] > gb["epsilon_lower"] > 0
    limit = gb["details"]["statistical_limit"]
    assert ex["details"]["statistical_limit"] == limit and 0.75 * limit <= gb["epsilon_lower"]
    used = gb["details"]["fresh_runs_used"]
    assert used in (1500, 3000, 6000) and gb["details"]["fresh_runs_planned"] == 6000  # chosen on the profile
    assert out["shuffle_tightness"]["fresh_runs"] == used
    assert out["shuffle_tightness"]["exact_epsilon"] == pytest.approx(ex["epsilon"])


def test_statistical_limit_grows_with_the_sample_and_stays_below_the_exact_eps():
    pol = make_policy("shuffle-glm", {})
    prof = canary_model(pol, calibrated_pairs(pol, 1000)[0])[0].profile()
    lims = [statistical_limit(prof, 1, n, 1e-5, 0.025 / 128) for n in (2000, 10000, 40000, 400000)]
    assert all(a < b for a, b in zip(lims, lims[1:])) and lims[-1] < prof.epsilon(1e-5, 1)
    assert statistical_limit(prof, 1, 10, 1e-5, 0.025) == 0.0  # too few runs to show anything


def test_the_gray_box_part_is_skipped_with_a_note(tmp_path):
    """A pair whose other users differ: no exact likelihood, so the black-box part alone, at the full confidence."""
    pol = make_policy("shuffle-glm", {"dim": "1", "n_arms": "2"})
    B = int(pol.batch0)
    ctx = np.zeros((B, 1))
    ctx[1::2, 0] = 0.5  # two kinds of background users
    ctx0 = ctx.copy()
    ctx0[0, 0] = 1.0
    f = tmp_path / "batch.json"
    f.write_text(json.dumps({"format": "dpaudit.pair/1", "d": [0.0] * B, "d_prime": [0.0] * B,
                             "contexts": ctx0.tolist(), "contexts_prime": ctx.tolist()}))
    out = check("shuffle-glm", {"dim": "1", "n_arms": "2"}, protocol="shuffle", pair=str(f), runs=1000)
    assert [a["attack"] for a in out["attacks"]] == ["membership (shuffled view)"] and not out["exact"]
    assert out["attacks"][0]["confidence"] == pytest.approx(0.95)
    assert any("do not all hold the same datum" in n for n in out["notes"])


def test_a_reviewers_pair_with_a_third_background_datum(tmp_path):
    """Every other user at one datum, distinct from both of the canary's values with partial overlaps (4 ratio
    classes): the gray-box part runs on it, but its exact eps is not enumerated (said in a note)."""
    pol = make_policy("shuffle-glm", {"dim": "1", "n_arms": "2"})
    B = int(pol.batch0)
    ctx, r = np.full((B, 1), 0.7), np.zeros(B)
    ctx0, ctx1, r1 = ctx.copy(), ctx.copy(), r.copy()
    ctx0[0, 0], ctx1[0, 0], r1[0] = 0.0, -0.6, 1.0
    f = tmp_path / "batch.json"
    f.write_text(json.dumps({"format": "dpaudit.pair/1", "d": r.tolist(), "d_prime": r1.tolist(),
                             "contexts": ctx0.tolist(), "contexts_prime": ctx1.tolist()}))
    out = check("shuffle-glm", {"dim": "1", "n_arms": "2"}, protocol="shuffle", pair=str(f), runs=1000)
    names = [a["attack"] for a in out["attacks"]]
    assert names == ["membership (shuffled view)", "likelihood (shuffled multiset)"] and not out["exact"]
    gb = out["attacks"][1]
    assert gb["epsilon_lower"] > 0 and gb["details"]["statistical_limit"] is None
    assert any("was not enumerated" in n for n in out["notes"])
