"""The GLM bandits of Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized Linear
Contextual Bandits": batched runs, claims, ledgers, regret against random play, and bad input."""

from __future__ import annotations


import numpy as np
import pytest

from dpaudit.accountants import ZCDP, shuffle_guarantee
from dpaudit.accounting import ledger_audit
from dpaudit.runner.setup import claimed_epsilon
from dpaudit.protocols.joint import joint_pairs
from dpaudit.environments import GLMContextualBandit, make_environment
from dpaudit.errors import DPAuditError
from dpaudit.policies import make_policy, registered
from dpaudit.protocols import JointDP

GLM = ["jdp-glm", "jdp-glm-np", "glm-ucb", "shuffle-glm", "shuffle-glm-np"]
SMALL = {"n_arms": 5, "dim": 3, "horizon": 300}


def _params(name: str) -> dict:
    p = dict(SMALL)
    if name.startswith("shuffle"):
        p["batch0"] = 50
    return p


def test_registered():
    names = {e.name for e in registered()}
    assert set(GLM) <= names
    mutants = {e.name for e in registered(mutants=True)}
    assert {"mutant-tree-reused-noise", "mutant-tree-no-leaf-noise", "mutant-noisy-det-switch",
            "mutant-shuffle-arrival-order", "mutant-jdp-add-remove-sensitivity", "mutant-jdp-sigma-typo",
            "mutant-jdp-pgd-steps-unsplit"} <= mutants


@pytest.mark.parametrize("name", GLM)
@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_runs_batched_and_reproducibly(name, link, contextual_regret):
    env = make_environment("glm", n_arms=5, dim=3, link=link, S=2.0)
    pol = make_policy(name, {**_params(name), "link": link})
    r1 = contextual_regret(pol, env, 8, 120, 0)
    r2 = contextual_regret(pol, env, 8, 120, 0)
    assert np.array_equal(r1, r2)
    assert np.all(r1 >= 0)


@pytest.mark.parametrize("name", ["glm-ucb", "jdp-glm-np", "shuffle-glm-np"])
def test_non_private_policies_learn(name, contextual_regret):
    """Over 40 runs of T = 300 they beat uniform play by a wide margin (random: ~300 x the mean gap)."""
    env = GLMContextualBandit(n_arms=5, dim=3, link="logistic", S=3.0)
    ours = contextual_regret(make_policy(name, _params(name)), env, 40, 300, 1).mean()
    rand = contextual_regret(None, env, 40, 300, 1).mean()
    assert ours < 0.6 * rand


def test_jdp_claim_is_the_calibrated_epsilon_and_the_ledger_stays_within_it():
    pol = make_policy("jdp-glm", {"n_arms": 2, "dim": 2, "horizon": 16, "epsilon": 3.0, "delta": 1e-6})
    assert isinstance(pol.claim, ZCDP)
    eps, _ = claimed_epsilon(pol.claim, 1e-6)
    assert eps == pytest.approx(3.0, abs=1e-6) and eps <= 3.0 + 1e-12
    pair = joint_pairs(2, 2, 16)[0]
    led = ledger_audit(pol, JointDP(), pair.d0, np.random.SeedSequence(0), n_runs=100)
    g = led["implied_guarantee"]
    # the two trees alone are rho/2 per round (each rho/4, one node per level); PGD adds at most rho/2
    assert pol.rho / 2 - 1e-12 <= g.rho <= pol.rho + 1e-12
    assert led["max_releases_per_round"] <= 2 * 5 + pol.max_updates * pol.pgd_steps


def test_update_cap_is_enforced_and_the_mutant_exceeds_it():
    X = np.zeros((200, 2, 2))
    X[:, 0, 0], X[:, 1, 0] = 1.0, -1.0
    counts = {}
    for name in ("jdp-glm", "mutant-noisy-det-switch"):
        pol = make_policy(name, {"n_arms": 2, "dim": 2, "horizon": 32, "max_updates": 4, "shift_scale": 0.0})
        pol.reset(200, np.random.default_rng(5), record=False)
        for t in range(32):
            a = pol.act(t, X)
            pol.observe(t, a, np.full(200, 0.5))
        counts[name] = pol.updates
    assert counts["jdp-glm"].max() <= 4
    assert (counts["mutant-noisy-det-switch"] > 4).mean() > 0.1


def test_shuffle_claim_is_the_amplified_composition():
    pol = make_policy("shuffle-glm", {"batch0": 1000, "groups": 4, "eps0": 1.5, "delta": 1e-6})
    a = shuffle_guarantee(1000, 1.5, 5e-7).epsilon
    b = shuffle_guarantee(250, 1.5, 5e-7).epsilon
    assert pol.claim.epsilon == pytest.approx(a + b) and pol.claim.delta == 1e-6
    assert pol.claim.epsilon < 2 * 1.5  # amplification helps: below the two local guarantees


def test_shuffle_batches_double_and_only_full_batches_release(contextual_regret):
    pol = make_policy("shuffle-glm", {"batch0": 10, "horizon": 75, "n_arms": 2, "dim": 2})
    assert pol.batch_bounds() == [(0, 10), (10, 30), (30, 70)]
    pol.capture = True
    env = GLMContextualBandit(n_arms=2, dim=2)
    contextual_regret(pol, env, 3, 75, 0)
    assert [v["stop"] - v["start"] for v in pol.views] == [10, 20, 40]
    assert pol.views[0]["outer"].shape == (3, 10)  # one encoded message per user (PiecewiseShuffler)


@pytest.mark.parametrize("name,params,match", [
    ("jdp-glm", {"link": "cauchit"}, "unknown link"),
    ("jdp-glm", {"epsilon": 0}, "epsilon"),
    ("jdp-glm", {"delta": 1.5}, "delta"),
    ("shuffle-glm", {"batch0": 100, "groups": 3}, "multiple of groups"),
    ("shuffle-glm", {"eps0": -1}, "eps0"),
    ("glm-ucb", {"dim": 0}, "dim"),
])
def test_bad_parameters(name, params, match):
    with pytest.raises(DPAuditError, match=match):
        make_policy(name, params)


@pytest.mark.parametrize("name", ["jdp-glm", "glm-ucb", "shuffle-glm", "glm-gloc", "rs-glinucb"])
def test_bad_contexts_and_rewards(name):
    pol = make_policy(name, {"n_arms": 2, "dim": 2, "horizon": 8})
    pol.reset(3, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="shape"):
        pol.act(0, np.zeros((3, 2, 3)))
    with pytest.raises(DPAuditError, match="unit ball"):
        pol.act(0, np.full((3, 2, 2), 0.9))
    with pytest.raises(DPAuditError, match="NaN"):
        pol.act(0, np.full((3, 2, 2), np.nan))
    with pytest.raises(DPAuditError, match="got none"):
        pol.act(0, None)
    a = pol.act(0, np.zeros((3, 2, 2)))
    for bad in (2.0, -0.5):
        with pytest.raises(DPAuditError, match="outside"):
            pol.observe(0, a, np.full(3, bad))
    with pytest.raises(DPAuditError, match="unknown link"):
        GLMContextualBandit(link="identity")


def test_reproduction_runner_counts_switches():
    from dpaudit.reproduce.glm_bandits import run_policy

    r = run_policy("jdp-glm", {"link": "probit"}, {"link": "probit", "S": 2.0, "n_arms": 4, "dim": 2}, 64, 3, 0)
    assert r["curve"].shape == (3, 64) and np.all(np.diff(r["curve"], axis=1) >= -1e-12)
    assert r["criterion2"].max() <= 8 and r["criterion1"].shape == (3,)
    assert r["claim"].endswith("-zCDP")


def test_regret_command_defaults_to_the_sarmasarkar_glm_bandit_and_its_twin(capsys):
    import json

    from dpaudit.cli import main

    assert main(["regret", "jdp-glm", "--horizon", "200", "--runs", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["environment"].startswith("GLMContextualBandit(K=20, d=5")
    assert out["twin"]["policy"] == "jdp-glm-np"


# ---- the batched linear algebra of the GLM policies ---------------------------------------------------

def test_quad_forms_equal_the_three_operand_einsum_for_shared_and_per_run_contexts():
    from dpaudit.policies.glm import quad_forms

    rng = np.random.default_rng(3)
    A = rng.standard_normal((7, 4, 4))
    shared = np.broadcast_to(rng.standard_normal((5, 4)), (7, 5, 4))
    per_run = rng.standard_normal((7, 5, 4))
    for x in (shared, per_run):
        np.testing.assert_allclose(quad_forms(x, A), np.einsum("nkd,nde,nke->nk", x, A, x), rtol=1e-12, atol=1e-12)


def test_positive_definite_answers_per_matrix_and_psd_floor_rebuilds_only_the_failing_ones():
    from dpaudit.policies.glm import positive_definite, psd_floor

    rng = np.random.default_rng(4)
    B = rng.standard_normal((200, 5, 5))
    M = (B + B.transpose(0, 2, 1)) / 2 + 2.0 * np.eye(5)  # symmetric, some above the floor, some not
    floor = 0.5
    w = np.linalg.eigvalsh(M)
    pd = positive_definite(M - floor * np.eye(5))
    assert np.array_equal(pd, w.min(axis=1) > floor)
    assert 0 < pd.sum() < len(M)  # both kinds present, so both branches are exercised
    out = psd_floor(M, floor)
    np.testing.assert_array_equal(out[pd], M[pd])  # untouched, bit for bit
    wf, U = np.linalg.eigh(M[~pd])
    np.testing.assert_allclose(out[~pd], np.einsum("nij,nj,nkj->nik", U, np.maximum(wf, floor), U), atol=1e-12)
    assert np.linalg.eigvalsh(out).min() >= floor - 1e-9
    # each matrix's result depends on that matrix only, not on the batch it came in
    np.testing.assert_array_equal(psd_floor(M[:1], floor)[0], out[0])
    good = M[pd]
    assert psd_floor(good, floor) is good


def test_spd_inverse_matches_lapack_and_depends_on_each_matrix_alone():
    """The unrolled Cholesky inverse and determinant of the GLM policies (d <= 8) against numpy's LAPACK calls
    on random SPD matrices of the policies' conditioning, batch by batch and matrix by matrix; d > 8 falls back."""
    from dpaudit.policies.glm import spd_inverse

    rng = np.random.default_rng(5)
    for d in (1, 2, 5, 8, 9):
        B = rng.standard_normal((300, d, d))
        M = B @ B.transpose(0, 2, 1) + (1.0 + 50 * rng.random((300, 1, 1))) * np.eye(d)
        inv, det = spd_inverse(M, with_det=True)
        np.testing.assert_allclose(inv, np.linalg.inv(M), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(det, np.linalg.det(M), rtol=1e-10)
        np.testing.assert_array_equal(spd_inverse(M), inv)
        one, det1 = spd_inverse(M[7:8], with_det=True)
        np.testing.assert_array_equal(one[0], inv[7])
        assert det1[0] == det[7]
