"""Subtle mutants: each docstring's true eps, recomputed exactly from the noise the policy
really adds (no sampling), lies 1.3-3x above the claim; two cheap ones are flagged at small size.

Detection and the twins' false alarms over seeds: ``python benchmarks/validation/controls.py --suite subtle``.
"""

from __future__ import annotations

import math

import pytest

from dpaudit.accountants import gaussian_epsilon
from dpaudit.accountants.gaussian import laplace_epsilon
from dpaudit.accountants.shuffle import clones_composed_epsilon, shuffle_guarantee
from dpaudit.policies import registered
from dpaudit.policies.registry import make_policy
from dpaudit.runner.setup import claimed_epsilon

DELTA = 1e-5


def _fmt(x: float) -> str:
    return f"{x:#.4g}"  # four significant digits, trailing zeros kept: the docstrings' format


def _gauss(mu: float) -> float:
    return gaussian_epsilon(DELTA, mu=mu).epsilon


def _pair_exact(pol) -> float:
    """The largest exact eps (rounded down) over the calibrated canary pairs the shuffle audit considers: a lower
    bound on the policy's true eps."""
    from dpaudit.protocols.shuffle import calibrated_pairs, canary_model

    return max(canary_model(pol, p)[0].profile().epsilon(DELTA, bound="lower")
               for p in calibrated_pairs(pol, pol.batch0))


def _true_eps(name: str, pol) -> tuple[float, float, str]:
    """(lower, upper) on the true eps at DELTA from the policy object's own noise (its mechanism, channel or
    shufflers; equal when the figure is exact), and the measure: "approx" for (eps, delta), "renyi" for D_alpha at
    the claim's order."""
    if name == "mutant-sqrt2-noise":  # one release of the episode sum (sensitivity 1) per round
        e = _gauss(1.0 / float(pol._mech.sigma))
        return e, e, "approx"
    if name == "mutant-ucb-prefix-off-by-one":  # a boundary round feeds two releases of sensitivity 1
        e = _gauss(math.sqrt(2.0) / float(pol._mech.sigma))
        return e, e, "approx"
    if name == "mutant-oful-half-sensitivity":  # the episode sum of a r moves by 2 B L when r goes -B -> B
        e = _gauss(2 * pol.reward_bound * pol.feature_bound / float(pol._mechanism().sigma))
        return e, e, "approx"
    if name == "mutant-adar-ucb-sqrt2-noise":  # D_alpha of N(0, sigma^2) at sensitivity 1: alpha / (2 sigma^2)
        e = pol.alpha / (2 * float(pol._mech.sigma) ** 2)
        return e, e, "renyi"
    if name == "mutant-ldp-half-sensitivity":  # r in [0, 1] moves by 1
        lo, hi = pol.reward_range
        e = _gauss((hi - lo) / pol._make_channel().sigma)
        return e, e, "approx"
    if name in ("mutant-ldp-laplace-half-sensitivity", "mutant-ldp-laplace-std-scale"):
        lo, hi = pol.reward_range
        e = laplace_epsilon(DELTA, (hi - lo) / pol._chan.b).epsilon
        return e, e, "approx"
    if name == "mutant-shuffle-arrival-order":  # two pure eps0 messages, not shuffled
        sh = pol.shuffler_grad
        q = sh.s / (sh.s + 1)  # P(a message lands in its value's high piece)
        return 2 * sh.eps0 + math.log1p(-DELTA / q**2), 2 * sh.eps0, "approx"
    if name == "mutant-shuffle-grad-whole-budget":  # upper: the claim's accountant at the true local budgets
        up = (shuffle_guarantee(pol.batch0, pol.shuffler_outer.eps0, DELTA / 2).epsilon
              + shuffle_guarantee(pol.batch0, pol.shuffler_grad.eps0, DELTA / 2).epsilon)
        return _pair_exact(pol), up, "approx"
    if name == "mutant-shuffle-group-claim":  # upper: the clone pairs at the true sizes composed exactly
        return _pair_exact(pol), clones_composed_epsilon([pol.batch0, pol.batch0 // pol.groups], pol.eps0,
                                                         DELTA), "approx"
    raise AssertionError(name)


SUBTLE = ["mutant-sqrt2-noise", "mutant-ucb-prefix-off-by-one", "mutant-oful-half-sensitivity", "mutant-adar-ucb-sqrt2-noise",
          "mutant-ldp-half-sensitivity", "mutant-ldp-laplace-half-sensitivity", "mutant-ldp-laplace-std-scale",
          "mutant-shuffle-arrival-order", "mutant-shuffle-grad-whole-budget", "mutant-shuffle-group-claim"]
#: the registered correct policy each differs from in one line, with the parameters that make it the twin
TWINS = {"mutant-sqrt2-noise": ("adac-ucb", {"rho": "0.1", "n_arms": "2"}),
         "mutant-ucb-prefix-off-by-one": ("adac-ucb", {"rho": "0.1", "n_arms": "2"}),
         "mutant-oful-half-sensitivity": ("adac-oful", {}),
         "mutant-adar-ucb-sqrt2-noise": ("adar-ucb", {}),
         "mutant-ldp-half-sensitivity": ("ldp-ucb", {}),
         "mutant-ldp-laplace-half-sensitivity": ("ldp-ucb-laplace", {}),
         "mutant-ldp-laplace-std-scale": ("ldp-ucb-laplace", {}),
         "mutant-shuffle-arrival-order": ("shuffle-glm", {"n_arms": "2", "dim": "1"}),
         "mutant-shuffle-grad-whole-budget": ("shuffle-glm", {"n_arms": "2", "dim": "1", "eps0": "3"}),
         "mutant-shuffle-group-claim": ("shuffle-glm", {"n_arms": "2", "dim": "1", "eps0": "3", "groups": "50"})}


def _claim(pol, measure: str) -> float:
    # an RDP claim at one order is judged in its own measure, D_alpha at that order
    return pol.claim.renyi(pol.alpha) if measure == "renyi" else claimed_epsilon(pol.claim, DELTA)[0]


def test_subtle_mutants_are_registered_as_mutants():
    assert set(SUBTLE) <= {e.name for e in registered(mutants=True)}


@pytest.mark.parametrize("name", SUBTLE)
def test_documented_true_eps_is_exact_and_1_3_to_3_times_the_claim(name):
    pol = make_policy(name, {})
    lower, upper, measure = _true_eps(name, pol)
    claim = _claim(pol, measure)
    assert 1.3 <= lower / claim <= 3.0, (name, lower, claim)
    doc = " ".join(type(pol).__doc__.split())
    for x in {lower, upper}:
        assert _fmt(x) in doc, (name, _fmt(x))  # the docstring states the computed figures
    r = lower / claim
    assert f"{r:.2f}x" in doc or f"{r:.3g}x" in doc, (name, r)


@pytest.mark.parametrize("name", SUBTLE)
def test_twin_has_the_same_claim_and_true_eps_within_it(name):
    twin, params = TWINS[name]
    mut, pol = make_policy(name, {}), make_policy(twin, params)
    lower, _, measure = _true_eps(name, mut)
    claim = _claim(pol, measure)
    if name == "mutant-shuffle-group-claim":  # the bug is in the claim: the twin claims its true sizes' bound
        nogroups = make_policy(twin, {**params, "groups": "1"})
        assert _claim(mut, measure) == pytest.approx(_claim(nogroups, measure), rel=1e-12)
        assert claim >= lower
    else:
        assert _claim(mut, measure) == pytest.approx(claim, rel=1e-12)
        assert lower > 1.3 * claim
    if measure == "renyi":
        twin_eps = pol.alpha / (2 * float(pol._mech.sigma) ** 2)
    elif name.startswith("mutant-shuffle"):  # the twin's claim is the clone accountant at its true budgets
        twin_eps = sum(shuffle_guarantee(n, sh.eps0, DELTA / 2).epsilon
                       for n, sh in [(pol.batch0, pol.shuffler_outer), (pol.batch0 // pol.groups, pol.shuffler_grad)])
        assert pol.shuffle and twin_eps == pytest.approx(claim, rel=1e-9)
    elif name == "mutant-ucb-prefix-off-by-one":  # the twin feeds each round to one release
        twin_eps = _gauss(1.0 / float(pol._mech.sigma))
    else:
        twin_eps = _true_eps(name, pol)[1]  # the same derivation on the twin's noise
    assert twin_eps <= claim * (1 + 1e-9), (twin, twin_eps, claim)


def test_prefix_off_by_one_feeds_each_boundary_round_to_two_releases():
    """The ledger records what the docstring derives: an episode's last round is used twice when a release follows
    (round 0, arm 0's one-round initial pull, always), never more; the twin uses each round once."""
    import numpy as np

    from dpaudit.protocols import PairSpec, TableDP, make_pair

    pair = make_pair(PairSpec(0, "high"), TableDP(), 2, 16)
    pol = make_policy("mutant-ucb-prefix-off-by-one", {})
    TableDP().run(pol, pair.d0, 50, np.random.default_rng(0))
    usage = pol.ledger.round_usage(16)
    assert usage.max() == 2 and usage[:, 0].min() == 2
    ok = make_policy("adac-ucb", {"n_arms": "2", "rho": "0.1"})
    TableDP().run(ok, pair.d0, 50, np.random.default_rng(0))
    assert ok.ledger.round_usage(16).max() == 1


def _local(name: str, runs: int, seed: int) -> dict:
    from dpaudit.runner import check

    return check(name, {}, protocol="local", seed=seed, delta=DELTA, confidence=0.95, workers=1, runs=runs,
                 horizon=24, central=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mutant-ldp-laplace-half-sensitivity", "mutant-ldp-laplace-std-scale"])
def test_cheap_subtle_mutants_are_flagged_at_small_size(name):
    out = _local(name, 4000, 0)
    assert out["verdict"] == "violation", (name, out["epsilon_lower"], out["epsilon_claimed"])
    twin = _local("ldp-ucb-laplace", 4000, 0)
    assert twin["verdict"] != "violation", twin["epsilon_lower"]
