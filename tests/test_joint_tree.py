"""The binary-tree mechanism, the symmetric Gaussian matrix of the interactive joint/local DP definitions, and the
tree's per-round accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.accountants import per_round_account, tree_max_nodes, tree_sigma, tree_zcdp
from dpaudit.errors import DPAuditError
from dpaudit.mechanisms import (
    BinaryTreeMechanism,
    Ledger,
    pack_symmetric,
    symmetric_gaussian,
    tree_node_counts,
    unpack_symmetric,
)
from dpaudit.policies.mutants import _NoLeafNoiseTree, _ReusedNoiseTree


def test_symmetric_gaussian_is_symmetric_with_iid_upper_triangle():
    rng = np.random.default_rng(0)
    n, d, sigma = 40_000, 3, 1.7
    Z = symmetric_gaussian(rng, (n,), d, sigma)
    assert Z.shape == (n, d, d)
    assert np.array_equal(Z, np.swapaxes(Z, -1, -2))
    U = pack_symmetric(Z)  # the 6 free entries
    var = U.var(axis=0)
    # sample variance of n normals: sd ~ sigma^2 sqrt(2/n)
    assert np.all(np.abs(var - sigma**2) < 5 * sigma**2 * math.sqrt(2 / n))
    corr = np.corrcoef(U.T)
    assert np.all(np.abs(corr - np.eye(U.shape[1])) < 5 / math.sqrt(n))
    assert np.array_equal(unpack_symmetric(U, d), Z)


def _run_tree(tree, xs, rng, ledger=None):
    tree.reset(xs.shape[0], rng, ledger)
    return np.stack([tree.add(t, xs[:, t]) for t in range(xs.shape[1])], axis=1)


def test_tree_without_noise_gives_exact_prefix_sums():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((5, 13, 2))
    out = _run_tree(BinaryTreeMechanism(13, (2,), 0.0, 1.0), xs, rng)
    np.testing.assert_allclose(out, np.cumsum(xs, axis=1), atol=1e-12)
    m = rng.standard_normal((5, 13, 3, 3))
    m = m + np.swapaxes(m, -1, -2)
    tree = BinaryTreeMechanism(13, (3,), 0.0, 1.0, symmetric=True)
    tree.reset(5, rng)
    outm = np.stack([tree.add(t, m[:, t]) for t in range(13)], axis=1)
    np.testing.assert_allclose(outm, np.cumsum(m, axis=1), atol=1e-12)


def test_prefix_noise_is_one_node_per_set_bit():
    """The noise of the prefix sum of rounds 0..t has variance popcount(t + 1) sigma^2."""
    rng = np.random.default_rng(2)
    n, T, sigma = 20_000, 12, 0.5
    out = _run_tree(BinaryTreeMechanism(T, (1,), sigma, 1.0), np.zeros((n, T, 1)), rng)
    var = out[:, :, 0].var(axis=0)
    expected = np.array([bin(t + 1).count("1") for t in range(T)]) * sigma**2
    assert np.all(np.abs(var - expected) < 5 * expected * math.sqrt(2 / n))


@pytest.mark.parametrize("T", [1, 2, 5, 8, 13, 16, 33])
def test_per_round_ledger_accounting_matches_the_closed_form(T):
    """Each round feeds at most floor(log2 T) + 1 <= ceil(log2 T) + 1 nodes; the ledger composes to tree_zcdp."""
    rng = np.random.default_rng(3)
    n, sens = 3, math.sqrt(2.0)
    sigma = tree_sigma(T, 0.25, sens)
    ledger = Ledger(n)
    tree = BinaryTreeMechanism(T, (2,), sigma, sens, symmetric=True)
    xs = np.zeros((n, T, 2, 2))
    xs[..., 0, 0] = 1.0
    tree.reset(n, rng, ledger)
    for t in range(T):
        tree.add(t, xs[:, t])
    usage = ledger.round_usage(T)
    counts = tree_node_counts(T)
    assert np.array_equal(usage, np.broadcast_to(counts, (n, T)))
    assert counts.max() == tree_max_nodes(T) == math.floor(math.log2(T)) + 1
    assert counts.max() <= math.ceil(math.log2(T)) + 1
    run, rnd, ratio = [], [], []
    for rel in ledger.releases:
        run.append(rel.runs[rel.fed.pos])
        rnd.append(rel.fed.rounds)
        ratio.append(np.full(rel.fed.pos.size, rel.sensitivity / sigma))
        # outer products do not move with the reward: every coefficient is zero
        assert not np.any(rel.fed.coef)
    acc = per_round_account(n, T, np.concatenate(run), np.concatenate(rnd), np.ones(sum(map(len, run)), dtype=bool),
                            np.concatenate(ratio))
    g = acc.guarantee()
    assert g.rho == pytest.approx(tree_zcdp(T, sigma, sens).rho, rel=1e-12)
    assert g.rho == pytest.approx(0.25, rel=1e-12)
    assert tree.guarantee().rho == pytest.approx(0.25, rel=1e-12)


def test_mutant_trees_expose_a_round_exactly():
    rng = np.random.default_rng(4)
    n, T = 4, 8
    xs = rng.standard_normal((n, T, 1))
    for cls in (_ReusedNoiseTree, _NoLeafNoiseTree):
        ledger = Ledger(n)
        tree = cls(T, (1,), 10.0, 1.0)
        tree.reset(n, rng, ledger)
        for t in range(T):
            tree.add(t, xs[:, t])
        nodes = {rel.label: rel.value[:, 0] for rel in ledger.releases}
        if cls is _NoLeafNoiseTree:
            exact = nodes["tree[level 0, rounds 0..0]"]
        else:  # parent [0, 2) minus its right child [1, 1] = the left child, round 0, without noise
            exact = nodes["tree[level 1, rounds 0..1]"] - nodes["tree[level 0, rounds 1..1]"]
        np.testing.assert_allclose(exact, xs[:, 0, 0], atol=1e-9)


def test_tree_bad_input():
    tree = BinaryTreeMechanism(4, (2,), 1.0, 1.0)
    tree.reset(2, np.random.default_rng(0))
    with pytest.raises(DPAuditError, match="shape"):
        tree.add(0, np.zeros((2, 3)))
    with pytest.raises(DPAuditError, match="in order"):
        tree.add(1, np.zeros((2, 2)))
    with pytest.raises(DPAuditError, match="NaN"):
        tree.add(0, np.full((2, 2), np.nan))
    with pytest.raises(DPAuditError):
        BinaryTreeMechanism(0, (2,), 1.0, 1.0)
    with pytest.raises(DPAuditError):
        BinaryTreeMechanism(4, (2,), -1.0, 1.0)


def test_tree_ledger_coefficients_recompute_the_centre_under_a_new_reward():
    """For a stream of x_s r_s with coef x_s, centre + coef (r' - r) is the node's sum under the new rewards."""
    rng = np.random.default_rng(6)
    n, T, d = 3, 8, 2
    x = rng.standard_normal((n, T, d))
    r, r2 = rng.random((n, T)), rng.random((n, T))
    ledger = Ledger(n)
    tree = BinaryTreeMechanism(T, (d,), 1.0, 1.0)
    tree.reset(n, rng, ledger)
    for t in range(T):
        tree.add(t, x[:, t] * r[:, t, None], coef=x[:, t])
    for rel in ledger.releases:
        moved = rel.centre.copy()
        np.add.at(moved, rel.fed.pos, rel.fed.coef * (r2 - r)[rel.runs[rel.fed.pos], rel.fed.rounds][:, None])
        lo, hi = rel.fed.rounds.min(), rel.fed.rounds.max() + 1
        np.testing.assert_allclose(moved, (x * r2[..., None])[:, lo:hi].sum(axis=1), atol=1e-12)
