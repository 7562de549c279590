"""Packaging, guarantees, mechanisms and ledger, registry and plug-in loading, protocols."""

from __future__ import annotations

import importlib.util
import math
import textwrap

import numpy as np
import pytest

from dpaudit.accountants import RDP, ZCDP, ApproxDP, PureDP
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import Fed, GaussianMechanism, LaplaceMechanism, Ledger, laplace_renyi
from dpaudit.policies.registry import coerce_params, load_policy_class, make_policy, parse_params
from dpaudit.protocols import ConstantAdversary, InteractiveDP, TableAdversary, TableDP, ViewDP, get_protocol


def test_top_level_folders_install_only_as_subpackages() -> None:
    import dpaudit.accountants
    import dpaudit.attacks

    assert importlib.util.find_spec("attacks") is None
    assert importlib.util.find_spec("accountants") is None
    assert dpaudit.attacks.AuditResult and dpaudit.accountants.ZCDP


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ZCDP(-0.1), r"rho must be a non-negative finite number, got -0.1"),
        (lambda: ApproxDP(1.0, 1.0), r"delta must lie in \[0, 1\), got 1.0"),
        (lambda: PureDP(float("nan")), "epsilon must be a number, got NaN"),
        (lambda: RDP({1.0: 0.5}), "must be greater than 1, got 1.0"),
        (lambda: RDP({}), "at least one"),
    ],
)
def test_guarantees_validate(make, message) -> None:
    with pytest.raises(DPAuditError, match=message):
        make()


def test_guarantee_renyi_curves() -> None:
    assert ZCDP(0.5).renyi(3.0) == pytest.approx(1.5)
    assert PureDP(1.0).renyi(2.0) == pytest.approx(1.0)  # min(eps, alpha eps^2 / 2)
    assert PureDP(0.1).renyi(2.0) == pytest.approx(0.01)
    assert ApproxDP(1.0, 1e-5).renyi(2.0) == math.inf
    r = RDP.point(4.0, 0.3)
    assert r.renyi(2.0) == 0.3 and r.renyi(4.0) == 0.3 and r.renyi(5.0) == math.inf
    assert RDP(lambda a: 0.1 * a).renyi(3.0) == pytest.approx(0.3)


def test_gaussian_mechanism_calibration_and_ledger() -> None:
    mech = GaussianMechanism.for_zcdp(0.5, sensitivity=0.2)
    assert float(mech.sigma) == pytest.approx(0.2)  # Delta / sqrt(2 rho)
    assert mech.guarantee().rho == pytest.approx(0.5)
    ledger = Ledger(3)
    rng = np.random.default_rng(0)
    out = mech.release(np.array([1.0, 2.0]), rng, ledger=ledger, label="mean", step=4, runs=np.array([0, 2]),
                       fed=Fed.interval(np.array([0, 1]), np.array([2, 4]), np.array([0.5, 1 / 3])))
    assert out.shape == (2,)
    rel = ledger.releases[0]
    np.testing.assert_array_equal(rel.fed.rounds, [0, 1, 1, 2, 3])
    np.testing.assert_allclose(rel.fed.coef[:, 0], [0.5, 0.5, 1 / 3, 1 / 3, 1 / 3])
    usage = ledger.round_usage(5)
    np.testing.assert_array_equal(usage, [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 0]])


def test_fed_blocks_answer_as_their_coordinate_form() -> None:
    """A release fed by blocks of rounds (Fed.blocks, Fed.interval) gives the same rounds and coefficients,
    per round (at_round, what the likelihood attack asks) and expanded, as the coordinate form."""
    rng = np.random.default_rng(1)
    B = 40
    pos, start, length = rng.integers(0, 7, B), rng.integers(0, 30, B), rng.integers(0, 6, B)
    coef = rng.standard_normal((B, 2))
    blocks = Fed.blocks(pos, start, length, coef)
    rows = [(p, s + k, c) for p, s, n, c in zip(pos, start, length, coef) for k in range(n)]
    coords = Fed(np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))
    np.testing.assert_array_equal(blocks.pos, coords.pos)
    np.testing.assert_array_equal(blocks.rounds, coords.rounds)
    np.testing.assert_array_equal(blocks.coef, coords.coef)
    for j in range(-1, 37):
        (p0, c0), (p1, c1) = blocks.at_round(j), coords.at_round(j)
        order0, order1 = np.lexsort((c0[:, 0], p0)), np.lexsort((c1[:, 0], p1))
        np.testing.assert_array_equal(p0[order0], p1[order1])
        np.testing.assert_array_equal(c0[order0], c1[order1])
    with pytest.raises(DPAuditError, match="start <= stop"):
        Fed.interval(np.array([3]), np.array([2]), 1.0)


def test_gaussian_noise_has_the_calibrated_scale() -> None:
    mech = GaussianMechanism.for_rdp(alpha=3.0, epsilon=0.5)
    rng = np.random.default_rng(1)
    x = mech.release(np.zeros(200_000), rng)
    sigma = math.sqrt(3.0 / (2 * 0.5))
    assert np.std(x) == pytest.approx(sigma, rel=0.01)


def test_laplace_renyi_limits() -> None:
    # alpha -> 1 is KL = t + e^{-t} - 1; alpha -> inf is t (Mironov 2017, Prop. 6).
    assert laplace_renyi(1.0001, 1.0) == pytest.approx(1 + math.exp(-1) - 1, rel=1e-3)
    assert laplace_renyi(1e6, 1.0) == pytest.approx(1.0, rel=1e-4)
    assert LaplaceMechanism.for_pure(0.5, 2.0).guarantee().epsilon == pytest.approx(0.5)


def test_params_are_typed_by_the_constructor() -> None:
    class P:
        def __init__(self, rho: float = 0.1, arms: int = 5, forget: bool = True, name="x"):
            pass

    raw = parse_params(["rho=0.25", "arms=3", "forget=no", "name=abc"])
    assert coerce_params(P, raw) == {"rho": 0.25, "arms": 3, "forget": False, "name": "abc"}
    with pytest.raises(DPAuditError, match="has no parameter 'beta'; its parameters are: rho, arms, forget, name"):
        coerce_params(P, {"beta": "1"})
    with pytest.raises(DPAuditError, match="arms='three' must be an integer"):
        coerce_params(P, {"arms": "three"})
    with pytest.raises(DPAuditError, match="must have the form NAME=VALUE"):
        parse_params(["rho"])


def test_plugin_from_file(tmp_path) -> None:
    path = tmp_path / "myplugin.py"
    path.write_text(textwrap.dedent("""
        import numpy as np
        class Greedy:
            def __init__(self, arms: int = 2):
                self.n_arms = arms
                self.claim = None
            def reset(self, n_runs, rng):
                self.n = n_runs
            def act(self, t, arms=None):
                return np.zeros(self.n, dtype=int)
            def observe(self, t, actions, rewards):
                pass
    """))
    pol = make_policy(f"{path}:Greedy", {"arms": "3"})
    assert pol.n_arms == 3
    views = TableDP().run(pol, np.zeros((4, 3)), 5, np.random.default_rng(0))
    assert views.shape == (5, 4) and not views.any()
    with pytest.raises(DPAuditError, match="has no class 'Nope'; it defines Greedy"):
        load_policy_class(f"{path}:Nope")
    with pytest.raises(DPAuditError, match="does not exist"):
        load_policy_class(str(tmp_path / "missing.py") + ":Greedy")
    with pytest.raises(DPAuditError, match="cannot be imported"):
        load_policy_class("no_such_package_xyz.mod:Greedy")


def test_out_of_range_arm_is_refused(tmp_path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("import numpy as np\nclass Bad:\n    n_arms = 2\n    def reset(self, n, rng): self.n = n\n"
                    "    def act(self, t, arms=None): return np.full(self.n, 7)\n    def observe(self, t, a, r): pass\n")
    pol = make_policy(f"{path}:Bad")
    with pytest.raises(DPAuditError, match="returned arm 7 at step 0; allowed arms are 0..1"):
        TableDP().run(pol, np.zeros((2, 2)), 3, np.random.default_rng(0))


def test_protocol_observations_and_neighbours() -> None:
    from dpaudit.policies.finite import bundled_spec

    pol = bundled_spec("table-vs-view-counterexample")
    d = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    assert sum(1 for _ in TableDP().neighbours(d, [0, 1])) == 3 * 3
    assert sum(1 for _ in ViewDP().neighbours(np.zeros(3), [0, 1])) == 3
    views = InteractiveDP().run(pol, d, 100, np.random.default_rng(0), ConstantAdversary((1, 1, 1)))
    assert views.shape == (100, 3)
    adv = TableAdversary(((1, 0),), 2)
    np.testing.assert_array_equal(adv.query(0, np.array([[0], [1]])), [1, 0])
    with pytest.raises(DPAuditError, match="unknown protocol .jointdp."):
        get_protocol("jointdp")
    with pytest.raises(DPAuditError, match=r"must have shape \(T, K\) = \(T, 2\)"):
        TableDP().run(pol, np.zeros((3, 3)), 2, np.random.default_rng(0))
