"""Shuffle amplification (Feldman-McMillan-Talwar) and the shuffler, checked against independent computations."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from dpaudit.accountants import (
    ApproxDP,
    clones_delta,
    clones_epsilon,
    clones_epsilon_closed_form,
    shuffle_guarantee,
)
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import Shuffler


def brute_force_clones_delta(n: int, eps0: float, eps: float) -> float:
    """FMT's pair enumerated outcome by outcome, with exact binomials (no conditioning on C, no sorting)."""
    p = math.exp(-eps0)
    a = math.exp(eps0) / (math.exp(eps0) + 1)
    P: dict[tuple[int, int], float] = defaultdict(float)
    Q: dict[tuple[int, int], float] = defaultdict(float)
    for c in range(n):
        pc = math.comb(n - 1, c) * p**c * (1 - p) ** (n - 1 - c)
        for A in range(c + 1):
            pa = pc * math.comb(c, A) / 2**c
            for D, pd in ((1, a), (0, 1 - a)):
                P[(A + D, c - A + 1 - D)] += pa * pd
                Q[(A + 1 - D, c - A + D)] += pa * pd
    keys = set(P) | set(Q)
    d1 = sum(max(P[k] - math.exp(eps) * Q[k], 0.0) for k in keys)
    d2 = sum(max(Q[k] - math.exp(eps) * P[k], 0.0) for k in keys)
    return max(d1, d2)


@pytest.mark.parametrize("n", [1, 2, 7, 25])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.5])
def test_clones_delta_matches_brute_force(n, eps0):
    for eps in (0.0, 0.1, 0.4, 1.0):
        assert clones_delta(n, eps0, eps) == pytest.approx(brute_force_clones_delta(n, eps0, eps), rel=1e-9, abs=1e-15)


def shuffled_rr_delta(n: int, eps0: float, eps: float, others_one: int) -> float:
    """Exact delta(eps) of n shuffled binary randomized responses (the count of ones is the shuffled
    multiset); neighbours: the canary's bit 0 vs 1, ``others_one`` of the other users hold 1."""
    q1 = math.exp(eps0) / (math.exp(eps0) + 1)  # P(report 1 | bit 1)
    q0 = 1 - q1
    k = np.arange(n + 1)
    ones = stats.binom.pmf(k, others_one, q1) if others_one else (k == 0).astype(float)
    zeros = stats.binom.pmf(k, n - 1 - others_one, q0) if n - 1 - others_one else (k == 0).astype(float)
    others = np.convolve(ones, zeros)[: n + 1]
    shifted = np.r_[0.0, others[:-1]]
    P = (1 - q0) * others + q0 * shifted  # canary bit 0
    Q = (1 - q1) * others + q1 * shifted  # canary bit 1
    return max(np.maximum(P - math.exp(eps) * Q, 0).sum(), np.maximum(Q - math.exp(eps) * P, 0).sum())


@pytest.mark.parametrize("n,eps0", [(50, 1.0), (200, 2.0), (1000, 3.0), (1000, 0.5)])
def test_clones_bound_is_valid_for_shuffled_randomized_response(n, eps0):
    """The FMT bound holds for every eps0-DP randomizer, so it must bound the exact shuffled RR profile."""
    for eps in (0.05, 0.2, 0.5):
        bound = clones_delta(n, eps0, eps)
        for others in (0, (n - 1) // 2, n - 1):
            assert shuffled_rr_delta(n, eps0, eps, others) <= bound + 1e-12


@pytest.mark.parametrize("n,eps0,delta", [(1000, 1.0, 1e-6), (5000, 2.0, 1e-5), (20000, 0.5, 1e-8), (300, 1.5, 1e-3)])
def test_numerical_bound_inverts_and_beats_closed_form(n, eps0, delta):
    eps = clones_epsilon(n, eps0, delta)
    assert 0 < eps < eps0
    assert clones_delta(n, eps0, eps) <= delta
    assert clones_delta(n, eps0, max(eps - 1e-6, 0)) > delta
    closed = clones_epsilon_closed_form(n, eps0, delta)
    assert eps <= closed <= eps0
    g = shuffle_guarantee(n, eps0, delta)
    assert isinstance(g, ApproxDP) and g.epsilon == pytest.approx(eps) and g.delta == delta
    assert shuffle_guarantee(n, eps0, delta, "closed-form").epsilon == pytest.approx(closed)


def test_closed_form_known_value_and_condition():
    # FMT Thm 3.1 at n = 10^4, eps0 = 1, delta = 1e-6, evaluated by hand
    e = math.e
    expected = math.log1p((e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4e6)) / 100 + 8 * e / 1e4))
    assert clones_epsilon_closed_form(10_000, 1.0, 1e-6) == pytest.approx(expected, rel=1e-12)
    # outside eps0 <= log(n / (16 log(2/delta))) the closed form claims nothing beyond eps0
    assert clones_epsilon_closed_form(100, 3.0, 1e-6) == 3.0


def test_amplification_grows_with_n():
    eps = [clones_epsilon(n, 2.0, 1e-6) for n in (500, 2000, 8000)]
    assert eps[0] > eps[1] > eps[2]


@pytest.mark.parametrize("call", [
    lambda: clones_delta(0, 1.0, 0.1),
    lambda: clones_delta(10, -1.0, 0.1),
    lambda: clones_delta(10, 1.0, -0.1),
    lambda: clones_epsilon(10, 1.0, 1.5),
    lambda: shuffle_guarantee(10, 1.0, 1e-6, "guess"),
])
def test_bad_input_is_one_sentence(call):
    with pytest.raises(DPAuditError):
        call()


# ---- the shuffler ----------------------------------------------------------------------------------

def test_randomizer_probabilities_are_eps0_dp():
    """Each coordinate's P(+1) lies in [1, e^eps1] / (e^eps1 + 1) whatever the value: eps0/m-DP."""
    sh = Shuffler(1.2, 3)
    rng = np.random.default_rng(0)
    n = 200_000
    for v, expect in ((1.0, sh.keep), (-1.0, 1 - sh.keep), (0.0, 0.5)):
        msgs = sh.randomize(rng, np.full((1, n, 3), v))
        freq = (msgs == 1).mean()
        assert abs(freq - expect) < 5 * math.sqrt(expect * (1 - expect) / (3 * n))
    assert sh.keep / (1 - sh.keep) == pytest.approx(math.exp(1.2 / 3))


def test_analyzer_is_unbiased():
    lo, hi = np.array([0.0, -1.0]), np.array([1.0, 1.0])
    sh = Shuffler(2.0, 2, lo=lo, hi=hi)
    rng = np.random.default_rng(1)
    vals = np.stack([rng.random(300), rng.uniform(-1, 1, 300)], axis=1)
    runs = 4000
    _, est = sh.run(rng, np.broadcast_to(vals, (runs, 300, 2)))
    se = est.std(axis=0) / math.sqrt(runs)
    assert np.all(np.abs(est.mean(axis=0) - vals.sum(axis=0)) < 5 * se)


def test_shuffle_is_a_uniform_permutation_and_the_mutant_keeps_order():
    rng = np.random.default_rng(2)
    n, b = 30_000, 6
    msgs = -np.ones((n, b, 1), dtype=np.int8)
    msgs[:, 0] = 1  # the canary's message
    out = Shuffler(1.0, 1).permute(rng, msgs)
    assert np.all(out.sum(axis=1) == msgs.sum(axis=1))  # the multiset is kept
    pos = np.argmax(out[:, :, 0] == 1, axis=1)
    counts = np.bincount(pos, minlength=b)
    assert stats.chisquare(counts).pvalue > 1e-3
    same = Shuffler(1.0, 1, shuffle=False).permute(rng, msgs)
    assert np.array_equal(same, msgs)


def test_shuffler_refuses_values_out_of_range():
    with pytest.raises(DPAuditError, match="outside the range"):
        Shuffler(1.0, 1).randomize(np.random.default_rng(0), np.full((1, 2, 1), 1.5))
    with pytest.raises(DPAuditError, match="NaN"):
        Shuffler(1.0, 1).randomize(np.random.default_rng(0), np.full((1, 2, 1), np.nan))
