"""One-run audits (``--method one-run``): the bounds of Steinke, Nasr & Jagielski (2023) and Mahloujifar, Melis &
Chaudhuri (2025) against exact binomial computations and closed forms, their false-alarm rate over seeds on
mechanisms with a known epsilon, the guesses, and the audit end to end (a mutant flagged, refusals, the per-run
adapter)."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from dpaudit.attacks import one_run as o
from dpaudit.errors import DPAuditError


def _p_value_by_definition(m, r, v, eps, delta):
    """Steinke et al.'s App. D p-value written out term by term with exact binomial pmfs (math.comb)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.comb(r, j) * q ** j * (1 - q) ** (r - j) for j in range(r + 1)]
    beta = sum(pmf[v:])
    alpha = max((sum(pmf[v - i:v]) / i for i in range(1, v + 1)), default=0.0)
    return min(1.0, beta + alpha * delta * 2 * m)


@pytest.mark.parametrize("m, r, v, eps, delta", [(100, 10, 10, 1.0, 0.0), (100, 10, 7, 0.5, 1e-3), (1000, 60, 45, 1.2, 1e-5),
                                                  (50, 50, 30, 0.0, 0.01), (20, 12, 1, 2.0, 1e-2)])
def test_steinke_p_value_is_the_papers_formula(m, r, v, eps, delta):
    assert o.steinke_p_value(m, r, v, eps, delta) == pytest.approx(_p_value_by_definition(m, r, v, eps, delta),
                                                                  rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("r", [5, 10, 40, 200])
def test_all_correct_guesses_give_the_closed_form(r):
    # delta = 0, v = r: p = q^r, so the bound is the eps where q^r = 1 - confidence: logit((1 - c)^(1/r))
    q = 0.05 ** (1 / r)
    exact = math.log(q / (1 - q))
    assert o.steinke_epsilon(10 * r, r, r, 0.0, 0.95) == pytest.approx(exact, abs=1e-6)
    # the f-DP test of the pure curve reaches the same value when every guess is right
    assert o.fdp_lower(o.Tradeoff("pure"), 10 * r, r, r, 0.95) == pytest.approx(exact, abs=1e-6)
    # the caps the docs' table quotes (9 counted runs of 10 with one perfect guess each: 0.929)
    assert o.cap("steinke", 10 * r, r, 0.0, 0.95) == pytest.approx(exact, abs=1e-9)
    assert o.cap("steinke", 90, 9, 0.0, 0.95) == pytest.approx(0.9290, abs=1e-4)
    if r == 10:
        assert exact == pytest.approx(1.0519, abs=1e-4)


def test_bound_is_the_first_crossing_of_the_p_value():
    m, r, v, delta, c = 2000, 300, 240, 1e-5, 0.95
    e = o.steinke_epsilon(m, r, v, delta, c)
    assert o.steinke_p_value(m, r, v, e, delta) < 0.05 <= o.steinke_p_value(m, r, v, e + 1e-6, delta)
    # every eps below the bound is rejected (the bound is an infimum, valid without monotonicity)
    assert all(o.steinke_p_value(m, r, v, x, delta) < 0.05 for x in np.linspace(0, e, 30)[:-1])
    # the delta term costs: with many canaries Steinke et al.'s bound drops, the f-DP test's much less
    assert o.steinke_epsilon(10 ** 6, 1000, 1000, 1e-5, 0.95) < 1.0 < o.fdp_lower(o.Tradeoff("approx", 1e-5), 10 ** 6,
                                                                                   1000, 1000, 0.95)


def test_pure_bound_is_the_logit_of_clopper_pearson():
    """At delta = 0 the bound is closed-form (the logit of the one-sided Clopper-Pearson lower limit of v / r);
    the generic first-crossing search on the p-value finds the same value."""
    for r, v in ((10, 9), (100, 80), (1000, 731), (50, 26)):
        crossing = o._first_crossing(lambda e: o.steinke_p_value(10 * r, r, v, e, 0.0) < 0.05)
        assert o.steinke_epsilon(10 * r, r, v, 0.0, 0.95) == pytest.approx(crossing, abs=1e-6)


def test_more_correct_guesses_never_lower_the_bound():
    for analysis, d in (("steinke", 0.0), ("steinke", 1e-5), ("fdp-approx", 1e-5), ("fdp-gaussian", 1e-5)):
        b = [o.bound(analysis, 500, 100, v, d, 0.95)["epsilon"] for v in range(50, 101, 10)]
        assert b == sorted(b) and b[0] == 0.0 and b[-1] > 2, (analysis, b)


def test_gdp_epsilon_matches_its_delta():
    from scipy.stats import norm

    for mu in (0.3, 1.0, 2.5):
        e = o.gdp_epsilon(mu, 1e-5)
        d = norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
        assert d == pytest.approx(1e-5, rel=1e-6)


# ---- false alarms over seeds on mechanisms with a known epsilon (statistical, small sizes) ------------------

def _rr(eps, m, rng):
    s = rng.choice(np.array([-1, 1]), size=m)
    keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    return s, np.where(keep, s, -s)


def test_randomised_response_is_rarely_over_its_eps():
    """eps-DP randomised response on every canary, every canary guessed: the bound at 0.9 confidence exceeds
    the true eps in at most 10% of 500 seeds (asserted at the binomial's 0.999 quantile), and it is tight
    (median within 25% of eps): the binomial domination of Steinke et al. is exact for this mechanism."""
    rng = np.random.default_rng(0)
    eps, m, trials = 1.0, 400, 500
    over, bounds = 0, []
    for _ in range(trials):
        s, x = _rr(eps, m, rng)
        v = int(np.count_nonzero(s == x))
        b = o.steinke_epsilon(m, m, v, 0.0, 0.9)
        bounds.append(b)
        over += b > eps
    assert over <= binom.ppf(0.999, trials, 0.1)
    assert 0.75 * eps < np.median(bounds) <= eps


def test_fdp_tests_reject_the_true_curve_rarely():
    """The f-DP recursion at the mechanism's own curve: randomised response under the pure and (eps, delta)
    curves, and the Gaussian mechanism (mu-GDP, top and bottom k guessed) under Gaussian DP, each rejected in
    at most 10% of seeds at 0.9 confidence."""
    rng = np.random.default_rng(1)
    trials, m = 250, 300
    rej = {"pure": 0, "approx": 0, "gaussian": 0}
    pure, approx, gauss = o.Tradeoff("pure"), o.Tradeoff("approx", 1e-4), o.Tradeoff("gaussian")
    mu = 1.0
    for _ in range(trials):
        s, x = _rr(1.0, m, rng)
        v = int(np.count_nonzero(s == x))
        rej["pure"] += o.fdp_rejects(pure.inverse_blowup(1.0), m, m, v, 0.9)
        rej["approx"] += o.fdp_rejects(approx.inverse_blowup(1.0), m, m, v, 0.9)
        s = rng.choice(np.array([-1, 1]), size=m)
        score = mu * (s > 0) + rng.standard_normal(m)  # N(0, 1) vs N(mu, 1): exactly mu-GDP per canary
        t = o.guesses(score, 30, 30, rng)
        r, v = int(np.count_nonzero(t)), int(np.count_nonzero(t * s > 0))
        rej["gaussian"] += o.fdp_rejects(gauss.inverse_blowup(mu), m, r, v, 0.9)
    for k, n in rej.items():
        assert n <= binom.ppf(0.999, trials, 0.1), (k, n)
    # and the same tests do reject a mechanism beyond the curve: randomised response at eps = 1.8 against 1-DP,
    # the Gaussian mechanism at mu = 3 against 1-GDP
    power = {"pure": 0, "gaussian": 0}
    for _ in range(50):
        s, x = _rr(1.8, m, rng)
        power["pure"] += o.fdp_rejects(pure.inverse_blowup(1.0), m, m, int(np.count_nonzero(s == x)), 0.9)
        s = rng.choice(np.array([-1, 1]), size=m)
        t = o.guesses(3.0 * (s > 0) + rng.standard_normal(m), 30, 30, rng)
        power["gaussian"] += o.fdp_rejects(gauss.inverse_blowup(mu), m, int(np.count_nonzero(t)),
                                           int(np.count_nonzero(t * s > 0)), 0.9)
    assert power["pure"] >= 45 and power["gaussian"] >= 25, power


def test_gaussian_test_sees_a_larger_mu():
    """The Gaussian test has power: 4-GDP canaries reject 1-GDP."""
    rng = np.random.default_rng(2)
    m = 400
    s = rng.choice(np.array([-1, 1]), size=m)
    t = o.guesses(4.0 * (s > 0) + rng.standard_normal(m), 60, 60, rng)
    r, v = int(np.count_nonzero(t)), int(np.count_nonzero(t * s > 0))
    assert o.fdp_rejects(o.Tradeoff("gaussian").inverse_blowup(1.0), m, r, v, 0.95)
    assert o.fdp_lower(o.Tradeoff("gaussian"), m, r, v, 0.95) > 1.2


# ---- guesses, the pilot's choice, layouts and scores ----------------------------------------------------------

def test_guesses_are_exactly_top_and_bottom_k_with_random_ties():
    rng = np.random.default_rng(3)
    scores = np.array([0, 0, 0, 1, 1, 2, 5, 5, -3, 0], dtype=float)
    t = o.guesses(scores, 3, 2, rng)
    assert np.count_nonzero(t == 1) == 3 and np.count_nonzero(t == -1) == 2
    assert set(np.flatnonzero(t == 1)) >= {6, 7} and t[8] == -1
    seen = {tuple(o.guesses(scores, 3, 2, rng)) for _ in range(40)}
    assert len(seen) > 1  # ties broken at random
    with pytest.raises(DPAuditError):
        o.guesses(np.array([1.0, np.nan]), 1, 0, rng)
    with pytest.raises(DPAuditError):
        o.guesses(scores, 8, 3, rng)


@pytest.mark.parametrize("kp, km", [(1, 0), (0, 7), (50, 50), (999, 1), (500, 0)])
def test_guesses_by_partition_are_the_sorted_guesses_with_the_same_draws(kp, km):
    """Scores without ties take the partition path: the same guesses as the full sort, the same draws left."""
    s = np.random.default_rng(kp + km).standard_normal(1000)
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    fast = o.guesses(s, kp, km, a, distinct=True)
    slow = o.guesses(s, kp, km, b, distinct=False)
    assert np.array_equal(fast, slow) and a.random() == b.random()
    assert np.array_equal(o.guesses(s, kp, km, np.random.default_rng(9)), fast)  # found out: no ties


def test_signed_guesses_follow_the_sign_of_the_largest_scores():
    rng = np.random.default_rng(5)
    scores = np.array([0.4, -0.5, 0.1, -0.05, 0.0, 0.3, -0.45], dtype=float)
    t = o.guesses(scores, 0, 0, rng, either=4)
    assert np.count_nonzero(t) == 4 and t.tolist() == [1, -1, 0, 0, 0, 1, -1]
    # a zero score guessed gets a random sign; still exactly `either` guesses
    seen = {tuple(o.guesses(np.zeros(6), 0, 0, rng, either=3)) for _ in range(40)}
    assert len(seen) > 1 and all(sum(map(abs, g)) == 3 for g in seen)
    with pytest.raises(DPAuditError):
        o.guesses(scores, 1, 0, rng, either=2)  # a signed rule is not mixed with top and bottom ones
    rule = o.GuessRule("x", 0.0, 0.0, 0.5)
    assert rule.counts(99) == (0, 0, 50) and "sign" in rule.describe()


def test_signed_guesses_keep_the_fdp_test_valid_and_powerful():
    """Signed guesses (the sign of the largest |scores|) are a function of the output with a fixed count, so
    the f-DP test of the mechanism's own curve rejects at most as often as the confidence allows: Gaussian
    canaries (score = mu (S + 1)/2 - mu/2 + N(0, 1): N(-mu/2, 1) against N(mu/2, 1), exactly mu-GDP each), 40 of 300 guessed, rejected at 0.9 confidence in
    at most the 99.9% quantile of Binomial(200, 0.1) trials; and 3-GDP canaries reject 1-GDP in most trials."""
    rng = np.random.default_rng(6)
    trials, m, mu = 200, 300, 1.0
    gauss = o.Tradeoff("gaussian")
    rejected = power = 0
    for i in range(trials):
        s = rng.choice(np.array([-1, 1]), size=m)
        t = o.guesses(mu * (s > 0) - mu / 2 + rng.standard_normal(m), 0, 0, rng, either=40)
        rejected += o.fdp_rejects(gauss.inverse_blowup(mu), m, 40, int(np.count_nonzero(t * s > 0)), 0.9)
        if i < 40:
            t = o.guesses(3.0 * (s > 0) - 1.5 + rng.standard_normal(m), 0, 0, rng, either=40)
            power += o.fdp_rejects(gauss.inverse_blowup(mu), m, 40, int(np.count_nonzero(t * s > 0)), 0.9)
    assert rejected <= binom.ppf(0.999, trials, 0.1), rejected
    assert power >= 30, power


def test_pilot_picks_the_informative_feature():
    rng = np.random.default_rng(4)
    bits = rng.choice(np.array([-1, 1]), size=200)
    pilot = {"noise": rng.standard_normal(200), "signal": 2.0 * bits + rng.standard_normal(200)}
    rule, predicted, rows = o.choose_rule(pilot, bits, 2000, rng, 0.95)
    assert rule.feature == "signal" and predicted > 0.5
    assert rule.plus > 0 and rule.minus > 0 and len(rows) > 10


def test_finer_fractions_only_where_the_pilot_guesses_with_them():
    """A pilot of a dozen canaries (a table/view run) is offered the coarse fractions only; a pilot of
    thousands of users (a local run) the finer ones too, and on a Gaussian channel whose evidence is in
    its tails (0.41-GDP) it takes one of them."""
    rng = np.random.default_rng(0)
    small = rng.choice(np.array([-1, 1]), size=12)
    _, _, rows = o.choose_rule({"x": rng.standard_normal(12)}, small, 108, rng, 0.95)
    assert {r["plus"] for r in rows} | {r["minus"] for r in rows} <= set(o.FRACTIONS)
    big = rng.choice(np.array([-1, 1]), size=16384)
    tails = big * 0.4128 / 2 + rng.standard_normal(16384)
    rule, _, rows = o.choose_rule({"message": tails}, big, 9 * 16384, rng, 0.95)
    offered = {r["plus"] for r in rows} | {r["minus"] for r in rows}
    assert set(o.FINE_FRACTIONS) <= offered
    assert 0 < rule.plus + rule.minus < 0.02 and "0." in rule.describe()
    # randomised response's two values: its top 0.1% is a random part of its ties, never offered
    rr = np.where(rng.random(16384) < np.where(big > 0, 0.73, 0.27), 1.0, 0.0)
    _, _, rows = o.choose_rule({"message": rr}, big, 9 * 16384, rng, 0.95)
    assert {r["plus"] for r in rows} | {r["minus"] for r in rows} <= set(o.FRACTIONS)


def test_layouts_and_scores():
    rounds = o.dyadic_rounds(4096)
    assert rounds.tolist() == [2 ** k - 1 for k in range(1, 12)]
    bits = np.array([[1, -1], [-1, 1]])
    d = o.canary_inputs(False, 3, 8, np.array([1, 3]), bits, 0.0, 1.0, np.full((8, 3), 0.5))
    assert d.shape == (2, 8, 3) and d[0, 1].tolist() == [1, 1, 1] and d[0, 3].tolist() == [0, 0, 0]
    assert d[1, 1].tolist() == [0, 0, 0] and np.all(d[:, [0, 2, 4, 5, 6, 7]] == 0.5)
    v = np.array([[0, 1, 1, 1, 0, 0, 0, 0]])
    f = o.action_features(v, np.array([1, 3]))
    assert np.sign(f["next, later first"]).tolist() == [[1.0, -1.0]]
    assert np.sign(f["-next, earlier first"]).tolist() == [[-1.0, 1.0]]
    # among equal scores the later (earlier) canaries are guessed first: two runs, every canary's next
    # action repeats its arm; the top 2 are the two later canaries of run 1 under "later first"
    v2 = np.zeros((2, 16), dtype=int)
    f2 = o.action_features(v2, np.array([1, 3, 7]))
    rng = np.random.default_rng(0)
    assert o.guesses(f2["next, later first"], 2, 0, rng).reshape(2, 3)[:, 2].tolist() == [1, 1]
    assert o.guesses(f2["next, earlier first"], 2, 0, rng).reshape(2, 3)[:, 0].tolist() == [1, 1]
    # the first-pulls layout: every arm's first pull, then the dyadic rounds past them
    assert o.first_pull_rounds(4096, 64).tolist() == list(range(64)) + [127, 255, 511, 1023, 2047]
    assert o.first_pull_rounds(4096, 2).tolist() == [0, 1] + rounds[1:].tolist()
    # ``return``: the sooner a canary's arm is played again, the higher (arms 0, 1, 2 at rounds 0-2; 2 comes
    # back at once, 0 after two rounds, 1 never); offered only with returns=True
    v3 = np.array([[0, 1, 2, 2, 0, 2, 2, 2]])
    f3 = o.action_features(v3, np.array([0, 1, 2]), returns=True)
    assert np.argsort(f3["return, later first"][0]).tolist() == [1, 0, 2]
    assert np.allclose(f3["-return, later first"], -f3["return, later first"])
    assert not any(k.startswith(("next", "share")) or "earlier first" in k for k in f3)
    # ``plays``: the canary arm's share of every later round (2: 4 of 5, 0: 1 of 7, 1: none)
    assert np.argsort(f3["plays, later first"][0]).tolist() == [1, 0, 2]
    # ``ranks``: blocks 0@0 1@1 2@2-3 0@4-5 1@6 2@7; second blocks ranked 0, 1, 2 by start: 1, 1/2, 0; an arm
    # with no later block scores 1/2 (arm 1 in the first six rounds)
    assert o._block_ranks(v3[:, :6], np.array([0, 1, 2])).tolist() == [[1.0, 0.5, 0.0]]
    assert o._block_ranks(np.array([[0, 1, 2, 2, 0, 0, 1, 2]]), np.array([0, 1, 2])).tolist() == [[1.0, 0.5, 0.0]]
    assert "return, later first" not in o.action_features(v3, np.array([0, 1, 2]))
    # discrete messages: the likelihood ratio; continuous ones: the projection on the mean difference
    y = np.array([1, 1, -1, -1] * 50)
    name, score = o.message_scorer(np.where(y > 0, 1.0, 0.0)[:, None], y)
    assert "likelihood ratio" in name and score(np.array([[1.0], [0.0], [0.5]])).tolist()[2] == 0.0
    name, score = o.message_scorer(y[:, None] + np.random.default_rng(0).standard_normal((200, 1)), y)
    assert "projection" in name and score(np.array([[2.0]]))[0] > score(np.array([[-2.0]]))[0]


# ---- the audit, end to end -----------------------------------------------------------------------------------

def test_one_run_flags_a_mutant_and_types_its_findings():
    import dpaudit

    a = dpaudit.audit("mutant-shared-noise", method="one-run", horizon=1024, workers=1, seed=0)
    assert a.verdict == "violation", a.reason
    res = a.attacks[0]
    assert res.attack == "one-run" and res.epsilon_lower > a.epsilon_claimed and res.samples == 10
    d = res.details
    # its n_arms is free: one pilot in each layout (2 arms, dyadic; 64 arms, first pulls), 8 runs counted
    tried = a.extra["one_run"]["layouts_tried"]
    assert [(t["layout"], t["n_arms"]) for t in tried] == [("dyadic", 2), ("first pulls", 64)]
    assert d["runs"] == 10 and d["pilot_runs"] == 2 and d["counted_runs"] == 8
    assert d["canaries_per_run"] in (len(o.dyadic_rounds(1024)), len(o.first_pull_rounds(1024, 64))) == (9, 67)
    assert d["correct"] <= d["guesses"] <= d["canaries_counted"] == 8 * d["canaries_per_run"]
    assert a.power.largest_bound == pytest.approx(d["cap"]) and d["cap"] >= res.epsilon_lower
    assert [p.name for p in a.parts] == ["one-run"] and a.extra["one_run"]["counted_runs"] == 8
    assert "method='one-run'" in a.command  # the recorded call reproduces a one-run audit, not a multi-run one
    md = a.to_markdown()
    assert "One-run audit: what it can and cannot show" in md and "cannot show" in md
    back = dpaudit.Audit.from_dict(a.to_dict())
    assert back.attacks[0].details["guesses"] == d["guesses"]


@pytest.mark.slow
def test_one_run_flags_block_leaks_and_spares_a_correct_policy():
    """The latest canaries first and signed guesses (benchmarks/results/one_run.md): mutant-mean-sensitivity (its
    noise shrinks with the episode, so the later canaries leak most) and mutant-shared-noise (a deterministic
    argmax) flagged in at least 4 of seeds 0-4 each (measured over 10 seeds: 9 and 10 of 10 with the
    dyadic layout and the first-pulls layout piloted side by side; a pilot of one run sometimes picks the
    weaker layout or score); the correct AdaC-UCB at the same seeds is never a violation (each audit is a false alarm with
    probability at most 5%; measured 0 of 50 seeds, table and view)."""
    import dpaudit

    for name in ("mutant-mean-sensitivity", "mutant-shared-noise"):
        verdicts = [dpaudit.audit(name, protocol="table", method="one-run", workers=1, seed=seed).verdict
                    for seed in range(5)]
        assert verdicts.count("violation") >= 4, (name, verdicts)
    for seed in range(3):
        a = dpaudit.audit("adac-ucb", protocol="table", method="one-run", workers=1, seed=seed)
        assert a.verdict != "violation", (seed, a.reason)


@pytest.mark.slow
def test_first_pulls_layout_flags_leaks_of_the_first_releases():
    """A policy whose n_arms is free is also piloted with 256 arms, one canary per arm's first pull, scored by
    the order the arms come back (benchmarks/results/one_run.md): mutant-first-unnoised (its first releases unnoised)
    flagged at seeds 0-2 (the dyadic layout alone flagged it in 0 of 10 seeds: its 2 arms give 2 informative
    canaries per run)."""
    import dpaudit

    for seed in range(3):
        a = dpaudit.audit("mutant-first-unnoised", protocol="table", method="one-run", workers=1, seed=seed)
        assert a.verdict == "violation", (seed, a.reason)
        assert a.extra["n_arms"] == 256 and a.extra["one_run"]["layout_name"] == "first pulls"
        assert any("n_arms = 256" in n for n in a.notes)


def test_the_first_pulls_arms_follow_the_horizon():
    """T / 16 arms, at most 256 (64 at T = 1024, as the audits of short horizons above); none under 8 arms."""
    from dpaudit.runner.one_run import wide_arms
    import dpaudit

    assert [wide_arms(T) for T in (127, 128, 1024, 2048, 4096, 65536)] == [7, 8, 64, 128, 256, 256]
    a = dpaudit.audit("adap-ucb", protocol="table", method="one-run", workers=1, runs=3, horizon=100, seed=0)
    assert a.extra["one_run"]["layouts_tried"] == []
    assert any("under 16 rounds for each of 8 arms" in n for n in a.notes)


def test_first_pulls_layout_respects_the_users_arms():
    """n_arms given by the user is kept: 2 arms, one pilot (the dyadic layout only); 16 arms, both
    layouts with 16."""
    import dpaudit

    a = dpaudit.audit("adap-ucb", params={"n_arms": 2}, protocol="view", method="one-run", workers=1, runs=4,
                      horizon=512, seed=0)
    assert a.extra["one_run"]["layouts_tried"] == [] and a.attacks[0].details["pilot_runs"] == 1
    assert any("only the dyadic canary layout ran" in n and "n_arms = 2 was given" in n for n in a.notes)
    a = dpaudit.audit("adap-ucb", params={"n_arms": 16}, protocol="view", method="one-run", workers=1, runs=4,
                      horizon=512, seed=0)
    assert [(t["layout"], t["n_arms"]) for t in a.extra["one_run"]["layouts_tried"]] == [("dyadic", 16),
                                                                                        ("first pulls", 16)]
    assert a.attacks[0].details["counted_runs"] == 2 and a.extra["n_arms"] == 16


@pytest.mark.slow
def test_first_pulls_layout_keeps_a_pure_claim_at_its_true_eps():
    """AdaP-UCB releases each episode sum with Laplace noise of scale 1/eps, so each reward (each canary) is
    exactly eps-DP and the claim eps = 1 is tight: each audit, pilot choice between the layouts included, is a
    false alarm with probability at most 5%; 3 or more in 10 seeds has probability
    P[Binomial(10, 0.05) >= 3] = 0.012. And the audit has power: a bound above 0 rejects eps = 0, which guesses
    at chance do with probability at most 5% (measured with 256 arms: 8 of 10 above 0, up to 1.01, one
    violation; 7 in the first-pulls layout, 3 in the dyadic one)."""
    import dpaudit

    violations, positive, layouts = 0, 0, set()
    for seed in range(10):
        a = dpaudit.audit("adap-ucb", protocol="table", method="one-run", workers=1, seed=200 + seed)
        violations += a.verdict == "violation"
        positive += a.epsilon_lower > 0
        layouts.add(a.extra["one_run"]["layout_name"])
    assert binom.sf(2, 10, 0.05) < 0.012
    assert violations <= 2
    assert positive >= 5 and layouts == {"dyadic", "first pulls"}


def test_correct_policy_with_known_eps_keeps_its_claim_over_seeds():
    """A local randomised-response bandit whose users' channel is exactly 1-DP, claimed at eps = 1.25: never a
    violation over seeds (the attack-level tests above count false alarms at the claim itself), and the bounds
    come close to the true eps = 1 (the messages are the mechanism's whole leak)."""
    import dpaudit

    bounds = []
    for seed in range(4):
        a = dpaudit.audit("ldp-ucb-rr", params={"epsilon": 1.0}, claim="pure:eps=1.25", protocol="local",
                          method="one-run", runs=3, horizon=1024, seed=seed, workers=1)
        assert a.verdict == "consistent", a.reason
        bounds.append(a.epsilon_lower)
    assert max(bounds) <= 1.0 + 0.1 and float(np.median(bounds)) > 0.6, bounds


def test_correct_channel_claimed_at_its_true_eps_rarely_violates():
    """End to end, pilot choice included: the randomised-response channel is exactly 1-DP per user and claimed
    at eps = 1, so each audit is a false alarm with probability at most 5%; over 10 seeds at least 4 violations
    would have probability P[Binomial(10, 0.05) >= 4] = 0.001 (the long study: benchmarks/results/one_run.md, 50 seeds
    of every correct case)."""
    import dpaudit

    violations = 0
    bounds = []
    for seed in range(10):
        a = dpaudit.audit("ldp-ucb-rr", params={"epsilon": 1.0}, claim="pure:eps=1", protocol="local",
                          method="one-run", runs=2, horizon=256, seed=100 + seed, workers=1)
        violations += a.verdict == "violation"
        bounds.append(a.epsilon_lower)
    assert binom.sf(3, 10, 0.05) < 0.0011
    assert violations <= 3, bounds
    assert float(np.median(bounds)) > 0.4, bounds  # and the audit has power: the bounds are not all 0


@pytest.mark.slow
def test_default_local_users_show_a_gaussian_channel_at_twice_its_calibration():
    """mutant-ldp-half-sensitivity (0.41-GDP, eps 1.61 at delta = 1e-5, against the claim eps = 1) shows only in
    its tails: at the default 65,536 users per run it is flagged (at 4,096 it is flagged in 1 seed of 10,
    benchmarks/results/one_run.md), and its correct twin is not."""
    import dpaudit
    from dpaudit.runner.one_run import ONE_RUN_DEFAULTS

    assert ONE_RUN_DEFAULTS["local_horizon"] == 65536
    bug = [dpaudit.audit("mutant-ldp-half-sensitivity", protocol="local", method="one-run", seed=s, workers=1)
           for s in range(3)]
    assert sum(a.verdict == "violation" for a in bug) >= 2, [a.epsilon_lower for a in bug]
    assert all(a.extra["one_run"]["horizon"] == 65536 for a in bug)
    ok = dpaudit.audit("ldp-ucb", protocol="local", method="one-run", seed=0, workers=1)
    assert ok.verdict == "consistent" and 0.2 < ok.epsilon_lower < 1.0


@pytest.mark.slow
def test_bco_policies_are_audited_in_one_run_through_their_users_channel():
    """A BCO policy's users hold loss functions; the one-run audit judges the channel every user sends through,
    at its datum's two ends: a Gaussian channel at half its calibrated noise (0.41-GDP against eps = 1) is
    flagged, the correct one keeps its claim, and a note says only the channel is judged."""
    import dpaudit

    for name in ("mutant-bco-fkm-half-sensitivity", "mutant-bco-2pt-half-gap"):
        flagged = [dpaudit.audit(name, protocol="local", method="one-run", seed=s, workers=1).verdict == "violation"
                   for s in range(4)]
        assert sum(flagged) >= 3, (name, flagged)
    for name in ("ldp-bco-fkm", "ldp-bco-2pt"):
        a = dpaudit.audit(name, protocol="local", method="one-run", seed=1, workers=1)
        assert a.verdict == "consistent" and a.epsilon_lower > 0.2, (name, a.epsilon_lower)
        assert a.extra["n_arms"] is None and "points of the ball" in a.extra["action_space"]
        assert any("loss functions" in n and "judges the users' channel" in n for n in a.notes)
    with pytest.raises(DPAuditError, match="convex body"):
        dpaudit.audit("ldp-bco-fkm", protocol="table", method="one-run")


def test_zcdp_claim_read_as_gaussian_only_with_gaussian_noise():
    from dpaudit.accountants import PureDP, RDP, ZCDP

    assert o.analyses_for(ZCDP(0.1), 1e-5, gaussian=True) == (("fdp-gaussian", 1e-5),)
    assert [a for a, _ in o.analyses_for(ZCDP(0.1), 1e-5)] == ["steinke", "fdp-approx"]
    assert o.analyses_for(PureDP(1.0), 1e-5) == (("steinke", 0.0),)
    assert [a for a, _ in o.analyses_for(RDP({2.0: 1.0}), 1e-5)] == ["steinke", "fdp-approx"]


def test_one_run_class_through_the_per_run_adapter():
    import dpaudit

    a = dpaudit.audit("examples/per_run_ucb.py:LeakyUCB", params={"n_arms": 2, "epsilon": 1}, adapter="per-run",
                      claim="pure:eps=1", method="one-run", horizon=512, runs=4, workers=1)
    d = a.attacks[0].details
    assert a.attacks[0].attack == "one-run" and d["runs"] == 4 and d["counted_runs"] == 3
    assert d["canaries_per_run"] == len(o.dyadic_rounds(512)) == 8 and d["canaries_counted"] == 24
    assert 0 < d["guesses"] <= 24 and d["correct"] <= d["guesses"]
    # the verdict follows the one rule: violation iff the bound passes the claim, consistent only below the cap
    assert (a.verdict == "violation") == (a.epsilon_lower > a.epsilon_claimed)
    if a.verdict != "violation":
        assert a.verdict == ("consistent" if d["cap"] > a.epsilon_claimed else "inconclusive")
    assert any("per-run" in n or "copies" in n or "np.random" in n for n in a.notes)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["joint", "shuffle"])
def test_cli_refuses_one_run_where_it_does_not_apply(dpaudit_cli, protocol):
    res = dpaudit_cli("check", "policy", "adac-ucb", "--method", "one-run", "--protocol", protocol)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()[-1]
    assert f"not {protocol}" in err and "drop --method" in err and err.count(". ") == 0


def test_api_refuses_one_run_under_interactive():
    import dpaudit

    with pytest.raises(DPAuditError, match="not interactive"):
        dpaudit.audit("adac-ucb", protocol="interactive", method="one-run")


@pytest.mark.slow
def test_cli_one_run_and_bad_runs(dpaudit_cli):
    res = dpaudit_cli("check", "policy", "mutant-shared-noise", "--method", "one-run", "--horizon", "1024", "--workers",
                      "1")
    assert res.returncode == 1, res.stderr[-500:]
    assert "one-run" in res.stdout and "guesses among" in res.stdout
    from dpaudit.cli.check import reproduce_command

    assert "--method one-run" in reproduce_command("adac-ucb", {"method": "one-run", "runs": 4}, 0)
    bad = dpaudit_cli("check", "policy", "adac-ucb", "--method", "one-run", "--runs", "1")
    assert bad.returncode == 2 and "runs must be an integer >= 2" in bad.stderr
    with pytest.raises(DPAuditError, match="horizons"):
        import dpaudit

        dpaudit.audit("adac-ucb", method="one-run", horizons=[8, 16])
    with pytest.raises(DPAuditError, match="method must be"):
        import dpaudit

        dpaudit.audit("adac-ucb", method="few-runs")
