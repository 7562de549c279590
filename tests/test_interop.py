"""dp-accounting interop: Guarantee <-> DpEvent round trips, composition with + and * n, and dpaudit's
answers against dp-accounting's own accountants on the same events."""

from __future__ import annotations

import math

import pytest
from dp_accounting import dp_event as ev
from dp_accounting import privacy_accountant as pa
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from dpaudit.accountants import (ZCDP, ApproxDP, Composed, DPAuditError, Guarantee, MechanismDP, PureDP,
                                 compose_sequential)

DELTAS = [1e-3, 1e-5, 1e-8]

EVENTS = [
    ev.ZCDpEvent(0.3),
    ev.GaussianDpEvent(1.7),
    ev.LaplaceDpEvent(2.5),
    ev.RandomizedResponseDpEvent(0.25, 2),
    ev.SelfComposedDpEvent(ev.GaussianDpEvent(2.0), 5),
    ev.ComposedDpEvent([ev.GaussianDpEvent(2.0), ev.LaplaceDpEvent(4.0), ev.ZCDpEvent(0.1)]),
    ev.ComposedDpEvent([ev.SelfComposedDpEvent(ev.ZCDpEvent(0.05), 3), ev.RandomizedResponseDpEvent(0.5, 2)]),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip(event):
    g = Guarantee.from_dp_event(event)
    back = g.to_dp_event()
    if not any(isinstance(e, ev.RandomizedResponseDpEvent) for e in _leaves(event)):
        assert back == event and Guarantee.from_dp_event(back) == g  # exact, floats included
    else:  # eps = log(2/p - 1) and p = 2/(e^eps + 1) agree to rounding
        assert type(Guarantee.from_dp_event(back)) is type(g)
    for d in DELTAS:
        assert Guarantee.from_dp_event(back).epsilon_at(d) == pytest.approx(g.epsilon_at(d), rel=1e-12)


def test_types_of_the_converted_events():
    assert Guarantee.from_dp_event(ev.ZCDpEvent(0.3)) == ZCDP(0.3)
    assert Guarantee.from_dp_event(ev.GaussianDpEvent(2.0)) == MechanismDP(gaussian_mu=(0.5,))
    assert Guarantee.from_dp_event(ev.LaplaceDpEvent(4.0)) == MechanismDP(laplace_eps=(0.25,))
    assert Guarantee.from_dp_event(ev.RandomizedResponseDpEvent(0.5, 2)).epsilon == pytest.approx(math.log(3))
    assert PureDP(1.0).to_dp_event() == ev.RandomizedResponseDpEvent(2 / (math.e + 1), 2)
    assert ZCDP(0.2).to_dp_event() == ev.ZCDpEvent(0.2)
    assert MechanismDP((0.5, 0.5, 0.5)).to_dp_event() == ev.SelfComposedDpEvent(ev.GaussianDpEvent(2.0), 3)
    assert isinstance(Guarantee.from_dp_event(EVENTS[5]), Composed)


def _pld(event, relation=pa.NeighboringRelation.ADD_OR_REMOVE_ONE) -> PLDAccountant:
    acc = PLDAccountant(relation)
    acc.compose(event)
    return acc


@pytest.mark.parametrize("event", [
    ev.GaussianDpEvent(1.7),
    ev.SelfComposedDpEvent(ev.GaussianDpEvent(3.0), 8),
    ev.ComposedDpEvent([ev.GaussianDpEvent(1.0), ev.GaussianDpEvent(2.5), ev.GaussianDpEvent(4.0)]),
    ev.LaplaceDpEvent(2.5),
    ev.ComposedDpEvent([ev.GaussianDpEvent(2.0), ev.SelfComposedDpEvent(ev.LaplaceDpEvent(4.0), 3)]),
], ids=["gaussian", "gaussian-x8", "gaussians", "laplace", "gaussian+laplace-x3"])
def test_mechanism_events_match_dp_accountings_pld(event):
    """Gaussians: dpaudit's analytic profile is exact, dp-accounting's PLD a pessimistic discretisation
    (never below the exact answer); Laplace and mixes: both are PLDs of the same events."""
    g = Guarantee.from_dp_event(event)
    acc = _pld(event)
    for d in DELTAS:
        ours, theirs = g.epsilon_at(d), acc.get_epsilon(d)
        assert ours == pytest.approx(theirs, rel=2e-3, abs=2e-4)
        if not any(isinstance(e, ev.LaplaceDpEvent) for e in _leaves(event)):
            assert ours <= theirs + 1e-9  # exact <= pessimistic


def _leaves(event):
    if isinstance(event, ev.ComposedDpEvent):
        return [x for e in event.events for x in _leaves(e)]
    if isinstance(event, ev.SelfComposedDpEvent):
        return _leaves(event.event)
    return [event]


def test_pure_dp_matches_randomized_response_under_replace_one():
    g = PureDP(1.2)
    acc = _pld(g.to_dp_event(), pa.NeighboringRelation.REPLACE_ONE)
    for d in DELTAS:
        assert g.epsilon_at(d) == pytest.approx(acc.get_epsilon(d), abs=2e-4)
    three = g * 3  # composition of three eps-DP: tighter than 3 eps (PLD of randomized response)
    assert three.to_dp_event() == ev.SelfComposedDpEvent(g.to_dp_event(), 3)
    # compared with the composition spelled out: dp-accounting 0.6.0's PLDAccountant ignores the count of a
    # SelfComposedDpEvent of randomized response (it answers 1.2 for three 1.2-DP releases)
    acc3 = _pld(ev.ComposedDpEvent([g.to_dp_event()] * 3), pa.NeighboringRelation.REPLACE_ONE)
    assert three.epsilon_at(1e-5) == pytest.approx(acc3.get_epsilon(1e-5), abs=1e-3)
    assert three.epsilon_at(1e-5) <= 3 * 1.2 + 1e-9


@pytest.mark.parametrize("event", [
    ev.ZCDpEvent(0.1),
    ev.SelfComposedDpEvent(ev.ZCDpEvent(0.02), 10),
    ev.ComposedDpEvent([ev.ZCDpEvent(0.1), ev.GaussianDpEvent(3.0)]),
], ids=["zcdp", "zcdp-x10", "zcdp+gaussian"])
def test_zcdp_events_match_dp_accountings_rdp(event):
    """No closed form: dpaudit converts the (summed) Rényi curve over continuous orders, dp-accounting's
    RdpAccountant over its grid of orders, so dpaudit's answer is never above it and close to it."""
    g = Guarantee.from_dp_event(event)
    acc = RdpAccountant(neighboring_relation=pa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(event)
    for d in DELTAS:
        ours, theirs = g.epsilon_at(d), acc.get_epsilon(d)
        assert ours <= theirs * (1 + 1e-9)
        assert ours == pytest.approx(theirs, rel=0.05)


def test_composition_operators():
    assert (ZCDP(0.1) + ZCDP(0.2)).rho == pytest.approx(0.3)
    assert ZCDP(0.1) * 3 == 3 * ZCDP(0.1) and (ZCDP(0.1) * 3).rho == pytest.approx(0.3)
    assert sum([ZCDP(0.1), ZCDP(0.1), ZCDP(0.1)]).rho == pytest.approx(0.3)
    # n Gaussians with the same sigma are one Gaussian with sigma / sqrt(n), exactly
    four = Guarantee.from_dp_event(ev.GaussianDpEvent(2.0)) * 4
    one = Guarantee.from_dp_event(ev.GaussianDpEvent(1.0))
    assert four.epsilon_at(1e-5) == pytest.approx(one.epsilon_at(1e-5), rel=1e-12)
    mixed = ZCDP(0.1) + ev.GaussianDpEvent(2.0)  # a DpEvent composes with a Guarantee
    assert isinstance(mixed, Composed) and mixed.renyi(3.0) == pytest.approx(3 * 0.1 + 3 * 0.125)
    assert "cks" in mixed.conversion(1e-5).method  # no closed form: the summed Rényi curve, converted
    assert (PureDP(0.5) + PureDP(0.5)).conversion(1e-5).method.startswith("pld")
    assert ApproxDP(1.0, 1e-6) + ApproxDP(0.5, 1e-6) == ApproxDP(1.5, 2e-6)
    assert compose_sequential(ev.GaussianDpEvent(2.0)) == MechanismDP((0.5,))  # a lone event, not a TypeError
    assert compose_sequential(ev.ZCDpEvent(0.1), ev.ZCDpEvent(0.2)).rho == pytest.approx(0.3)


def test_what_has_no_exact_counterpart_is_refused():
    with pytest.raises(DPAuditError, match="no exact dp-accounting DpEvent"):
        ApproxDP(1.0, 1e-5).to_dp_event()
    with pytest.raises(DPAuditError, match="has no exact dpaudit Guarantee"):
        Guarantee.from_dp_event(ev.PoissonSampledDpEvent(0.1, ev.GaussianDpEvent(1.0)))
    with pytest.raises(DPAuditError, match="count must be|positive integer"):
        ZCDP(0.1) * 0
    with pytest.raises(TypeError):
        ZCDP(0.1) * 1.5  # type: ignore[operator]


def test_testing_assertions_read_a_dp_event_claim():
    from dpaudit.testing import assert_renyi_bound

    assert_renyi_bound(0.2, ev.GaussianDpEvent(2.0), 2.0)  # D_2 of a Gaussian with mu = 0.5 is 0.25
    with pytest.raises(AssertionError, match="above the bound 0.25"):
        assert_renyi_bound(0.3, ev.GaussianDpEvent(2.0), 2.0)
