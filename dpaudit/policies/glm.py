"""Generalized linear contextual bandits of Sarmasarkar (2026): joint DP, shuffle DP, and baselines.

The paper is Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized Linear
Contextual Bandits" (full reference: :mod:`dpaudit.papers`).

Registered policies (all batched over runs; ``act(t, arms)`` takes the (n_runs, K, d) contexts):

================== =================================================================================
``jdp-glm``        Sarmasarkar (2026), Alg. 2 (joint DP, adversarial contexts): binary trees for V_t and H_t,
                   private projected gradient descent (PGD), Criterion I (uncertainty) and
                   Criterion II (running *maximum* determinant doubling)
``jdp-glm-np``     its non-private twin (exact sums, exact gradients, no cap on updates)
``shuffle-glm``    Sarmasarkar (2026), Alg. 1 (shuffle DP, stochastic contexts): doubling batches, G-optimal
                   design on the active arms, shuffled sums of the outer products and of the
                   gradient information, shuffle-private PGD, UCB/LCB elimination
``shuffle-glm-np`` its non-private twin (exact batch sums)
``glm-ucb``        GLM-UCB (Filippi et al. 2010), non-private baseline
``glm-gloc``       GLOC with ONS-GLM (Jun et al. 2017), non-private baseline (section at the end)
``rs-glinucb``     RS-GLinCB (Sawarni et al. 2024, Alg. 2), non-private baseline (section at the end)
================== =================================================================================

Links: ``logistic`` (mu = 1/(1+e^-z), mu' <= 1/4) and ``probit`` (mu = Phi(z), mu' <= 1/sqrt(2 pi)).
Rewards lie in [0, 1] and contexts in the unit ball (the GLM setting of Sarmasarkar 2026); anything else is
refused by name, never clipped.

We implement from a structured summary of Sarmasarkar (2026), not the full paper; where the summary leaves a
step open we chose, and say so:

* Loss. The estimate minimises the regularised GLM quasi-likelihood whose gradient is
  ``sum_s (mu(x_s^T theta) - r_s) x_s + lam theta`` over ``||theta|| <= S`` (the MLE equation of
  GLM-UCB; for the logistic link it is the log-likelihood). PGD step ``eta = 1 / (L_mu n + lam)``
  (the loss's smoothness bound for ``||x|| <= 1``), warm-started at the previous estimate.
* Joint-DP privacy (Alg. 2). Everything round t's data reaches is released through Gaussian noise:
  the two trees (each ``rho / 4``-zCDP per round, :func:`dpaudit.accountants.tree_sigma`, L2-
  sensitivity sqrt(2) of the packed outer product, at most the Frobenius norm of a difference of two
  unit rank-one PSD matrices) and every PGD gradient (sensitivity 2: each round's term has norm <= 1),
  whose ``max_updates * pgd_steps`` releases share ``rho / 2``. Sarmasarkar (2026) bounds the number of updates
  by "count cutoffs"; we enforce the cap ``max_updates`` (after it the estimate is frozen), so the
  claim ``rho``-zCDP (``rho`` from (epsilon, delta) by the tight conversion) holds for any input.
  Actions after round t are post-processing of these releases and of later contexts: joint DP.
* Criterion I: explore (play the arm of largest ``||x||_{V~^{-1}}``) when that width exceeds
  ``gamma``; V~ is the tree's noisy sum of the exploration rounds' outer products. Otherwise
  exploit with ``argmax x^T theta + beta ||x||_{H~_tau^{-1}}``. Criterion II: re-estimate when the
  running maximum of ``det H~_s`` exceeds twice its value at the last update.
* Noisy matrices are regularised with ``(lam + shift) I`` where ``shift = sigma sqrt(levels)
  (2 sqrt(d) + sqrt(2 log 2T))`` (times ``shift_scale``, default 1) bounds the tree noise's operator
  norm with high probability, and then projected to eigenvalues ``>= lam`` (post-processing).
* Shuffle DP (Alg. 1). Batch k has ``batch0 2^(k-1)`` users (default first batch 1000, so that at
  T = 5000 two batches release: 1000 and 2000 users); only full batches release. Each user sends two
  messages, each one uniformly sampled coordinate of her vector through the Piecewise Mechanism at
  ``eps0`` (:class:`dpaudit.mechanisms.PiecewiseShuffler`: exactly ``eps0``-DP, an unbiased analyzer):
  one coordinate of her packed outer product ``x x^T`` (diagonal in [0, 1], off-diagonal in
  [-1/2, 1/2], since ``x_i^2 + x_j^2 <= 1``), shuffled with the whole batch's, and one coordinate of
  her gradient term ``(mu(x^T theta) - r) x`` in [-1, 1]^d at the current iterate (the batch splits
  into ``groups`` consecutive groups, default 1; group g's messages are shuffled together and give PGD
  step g, so each user feeds one step). One sampled coordinate at the whole ``eps0``, not ``eps0`` split
  over the d(d+1)/2 coordinates each rounded to a bit: with the split the batch sums are noise and the
  policy does not learn. The claim is
  the basic composition of the two amplified guarantees (Feldman-McMillan-Talwar numerical bound,
  :func:`dpaudit.accountants.shuffle_guarantee`, at delta/2 each) for the smallest shuffles (the first
  batch and its groups); users are in one batch only (parallel composition), and each message's
  randomizer is ``eps0``-DP whatever the iterate, which depends only on earlier batches. At the
  defaults (eps0 = 3.5, first batch 1000) the claim is (3.62, 1e-5). It keeps no ledger (the noise is
  not additive), so table/view audits judge it black-box. The G-optimal design is Frank-Wolfe
  (``fw_iters`` Kiefer-Wolfowitz steps, batched) on each user's active arms.
* Shuffle-DP estimation (post-processing of the analyzer's sums, our choices): the design matrix is
  shrunk toward ``(tr/d) I`` by the Ledoit-Wolf weight that the randomizer's public noise bound
  implies and its eigenvalues clipped to [0, B] (:meth:`ShuffleGLM.design_estimate`); the PGD step is
  ``1 / L`` with ``L = L_mu lambda_max(M) / B + lam / size`` (the smoothness of the group's mean loss
  as the estimated design matrix bounds it; the constant ``L_mu`` alone ignores that ``E[x x^T]``
  has eigenvalues near ``1/d``, with which two steps would go a fraction ``2/d`` of the way), scaled by
  ``B / (B + prior)`` where ``prior`` counts the earlier batches' users the warm start summarises.
* Widths: ``beta`` (default 1) scales ``||x||_{M^{-1}}`` in every UCB/LCB; the papers' theoretical
  constants are far too large at these horizons.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpaudit.accountants import ZCDP, ApproxDP, Guarantee, shuffle_guarantee, tree_max_nodes, tree_sigma, zcdp_rho_for_epsilon
from dpaudit.environments import project_ball
from dpaudit.errors import DPAuditError, check_delta, check_int, check_nonnegative, check_positive
from dpaudit.mechanisms import (BinaryTreeMechanism, Fed, GaussianMechanism, Ledger, PiecewiseShuffler, pack_symmetric,
                                unpack_symmetric)
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import register

__all__ = ["LINKS", "link_mean", "JointDPGLM", "JointGLM", "ShuffleGLM", "ShuffleGLMNonPrivate", "GLMUCB",
           "GLOCONS", "RSGLinUCB"]

#: link -> the bound L_mu on mu'
LINKS = {"logistic": 0.25, "probit": 1.0 / math.sqrt(2 * math.pi)}
_NORM_TOL = 1e-9


def check_link(link: object) -> str:
    if link not in LINKS:
        raise DPAuditError(f"unknown link {link!r}; the GLM policies know: {', '.join(LINKS)}.")
    return link


def link_mean(link: str, z: np.ndarray) -> np.ndarray:
    """mu(z): the logistic sigmoid or the standard normal cdf."""
    return special.expit(z) if link == "logistic" else special.ndtr(z)


#: the largest d for which the factorisations below are unrolled (beyond it, LAPACK's batched calls)
_UNROLL_MAX_DIM = 8


def _cholesky_rows(Mt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Cholesky factors of stacked symmetric matrices laid out as ``(d, d, n)`` (each entry a contiguous
    row over the n matrices), unrolled over the entries: (L in the same layout, which are positive definite).
    A matrix is positive definite exactly when every pivot is positive; a failed pivot is replaced by 1 so the
    others go on (that matrix's factor is then meaningless)."""
    d, n = Mt.shape[0], Mt.shape[-1]
    L = np.zeros_like(Mt)
    ok = np.ones(n, dtype=bool)
    for j in range(d):
        pivot = Mt[j, j] - (L[j, :j] ** 2).sum(axis=0) if j else Mt[j, j]
        ok &= pivot > 0
        L[j, j] = np.sqrt(np.where(ok, pivot, 1.0))
        for i in range(j + 1, d):
            L[i, j] = (Mt[i, j] - (L[i, :j] * L[j, :j]).sum(axis=0) if j else Mt[i, j]) / L[j, j]
    return L, ok


def _rows(M: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(M, (-2, -1), (0, 1)))


def positive_definite(A: np.ndarray) -> np.ndarray:
    """Which of the stacked symmetric ``(n, d, d)`` matrices are positive definite: (n,) booleans.

    An unrolled Cholesky factorisation over the batch (one vectorised operation per matrix entry): a
    matrix is positive definite exactly when every pivot is positive. Unlike ``np.linalg.cholesky``,
    which raises when any one matrix of the batch fails, it answers for each matrix."""
    A = np.asarray(A, dtype=float)
    if A.shape[-1] > _UNROLL_MAX_DIM:
        return np.all(np.linalg.eigvalsh(A) > 0, axis=-1)
    return _cholesky_rows(_rows(A))[1]


def psd_floor(M: np.ndarray, floor: float) -> np.ndarray:
    """Symmetric matrices with every eigenvalue raised to at least ``floor`` (post-processing).

    A matrix whose eigenvalues are all above ``floor`` (``M - floor I`` has a Cholesky factor, a few times
    cheaper than an eigendecomposition) is returned as it is; only the others are rebuilt from their
    floored spectrum, so each matrix's result depends on that matrix alone, not on the batch it came in.
    Gershgorin's discs decide most matrices in a few operations (a diagonal that exceeds its row's other
    absolute values proves every eigenvalue positive); only the others are factorised."""
    shifted = M - floor * np.eye(M.shape[-1])
    diag = np.diagonal(shifted, axis1=-2, axis2=-1)
    undecided = np.flatnonzero(~(2 * diag - np.abs(shifted).sum(axis=-1) > 0).all(axis=-1))
    if undecided.size == 0:
        return M
    bad = undecided[~positive_definite(shifted[undecided])]
    if bad.size == 0:
        return M
    w, U = np.linalg.eigh(M[bad])
    out = M.copy()
    out[bad] = np.einsum("nij,nj,nkj->nik", U, np.maximum(w, floor), U)
    return out


def spd_inverse(M: np.ndarray, with_det: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Inverses of stacked symmetric positive definite ``(n, d, d)`` matrices (and, with ``with_det``, their
    determinants), through a Cholesky factor ``M = L L^T``: ``M^-1 = L^-T L^-1`` and ``det M = prod diag(L)^2``.

    For d up to :data:`_UNROLL_MAX_DIM` the factorisation and the triangular inverse are unrolled over the
    matrix entries, each step one vectorised operation over the n matrices: at the audits' batches (10^3-10^4
    runs, d = 5) several times faster than ``np.linalg.inv`` and ``np.linalg.det``, whose per-matrix LAPACK
    calls dominate at d = 5. Each matrix's result depends on that matrix alone (not on the batch it came
    in). The matrices must be positive definite (the policies call it on regularised Gram matrices whose
    eigenvalues are floored at lam > 0)."""
    M = np.asarray(M, dtype=float)
    d = M.shape[-1]
    if d > _UNROLL_MAX_DIM:
        inv = np.linalg.inv(M)
        return (inv, np.linalg.det(M)) if with_det else inv
    L, _ = _cholesky_rows(_rows(M))
    W = np.zeros_like(L)  # L^-1, lower triangular, by forward substitution
    for i in range(d):
        for c in range(i + 1):
            s = (1.0 if c == i else 0.0) - ((L[i, c:i] * W[c:i, c]).sum(axis=0) if i > c else 0.0)
            W[i, c] = s / L[i, i]
    inv = np.empty_like(L)
    for a in range(d):
        for b in range(a, d):
            inv[a, b] = inv[b, a] = (W[b:, a] * W[b:, b]).sum(axis=0)
    inv = np.ascontiguousarray(np.moveaxis(inv, (0, 1), (-2, -1)))
    if not with_det:
        return inv
    return inv, np.prod(np.stack([L[i, i] for i in range(d)]), axis=0) ** 2


def quad_forms(x: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``x_k^T A x_k`` for every run's arms: x (n, K, d), A (n, d, d) -> (n, K).

    The same numbers as ``np.einsum("nkd,nde,nke->nk", x, A, x)``, through one batched matmul (the
    three-operand einsum runs an unoptimised loop, several times slower at the audits' sizes)."""
    if x.ndim == 3 and x.strides[0] == 0:  # every run sees the same contexts (a broadcast view): one BLAS product,
        x0 = x[0]                           # sum_ab A_ab (x_a x_b), of the (n, d^2) entries and the (d^2, K) products
        n, d = A.shape[0], A.shape[-1]
        return A.reshape(n, d * d) @ (x0[:, :, None] * x0[:, None, :]).reshape(-1, d * d).T
    return np.einsum("nkd,nkd->nk", np.matmul(x, A), x)


def check_contexts(arms: object, n_runs: int, n_arms: int, dim: int, who: str, t: int) -> np.ndarray:
    """(n_runs, K, d) finite contexts in the unit ball, or one sentence saying what is wrong."""
    if arms is None:
        raise DPAuditError(f"{who} needs the contexts of step {t} as an (n_runs, K, d) array, got none.")
    x = np.asarray(arms, dtype=float)
    if x.shape != (n_runs, n_arms, dim):
        raise DPAuditError(f"{who} got contexts of shape {x.shape} at step {t}; expected {(n_runs, n_arms, dim)} (runs, K, d).")
    y = x[:1] if x.strides[0] == 0 else x  # every run sees the same contexts (a broadcast view): check them once
    if not np.all(np.isfinite(y)):
        raise DPAuditError(f"{who} got NaN or inf contexts at step {t}.")
    sq = np.einsum("nkd,nkd->nk", y, y)
    if sq.max() > 1 + _NORM_TOL:
        raise DPAuditError(f"{who} got a context of norm {math.sqrt(float(sq.max())):g} at step {t}; contexts must lie "
                           "in the unit ball (||x|| <= 1), which the sensitivity analysis assumes.")
    return x


class _GLMBase(Policy):
    """Shared parameters and helpers of the GLM policies."""

    accepts_queries = False
    #: the protocol its claim is about: joint DP (the notion of Sarmasarkar 2026, Alg. 2; its adversarial-context setting is
    #: where the non-private baselines are compared), shuffle DP for Alg. 1 (:class:`ShuffleGLM`)
    notion = "joint"
    reward_range = (0.0, 1.0)

    def __init__(self, n_arms: int, dim: int, horizon: int, link: str, theta_bound: float, lam: float,
                 beta: float) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms (K)", n_arms, minimum=2)
        self.dim = check_int("dim (d)", dim, minimum=1)
        self.horizon = check_int("horizon (T)", horizon, minimum=2)
        self.link = check_link(link)
        self.theta_bound = check_positive("theta_bound (S)", theta_bound)
        self.lam = check_positive("lam", lam)
        self.beta = check_nonnegative("beta", beta)
        self.Lmu = LINKS[self.link]

    def _who(self) -> str:
        return type(self).name or type(self).__name__

    def _contexts(self, t: int, arms: object) -> np.ndarray:
        if t >= self.horizon:
            raise DPAuditError(f"{self._who()} was built for horizon T = {self.horizon} but was asked to act at step {t}.")
        return check_contexts(arms, self.n_runs, self.n_arms, self.dim, self._who(), t)

    def _played(self, x: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return x[np.arange(self.n_runs), actions]

    def _gradients(self, theta: np.ndarray, X: np.ndarray, R: np.ndarray) -> np.ndarray:
        """Per-round gradient terms (mu(x_s^T theta) - r_s) x_s: (n, m, d)."""
        z = np.einsum("nmd,nd->nm", X, theta)
        return (link_mean(self.link, z) - R)[..., None] * X


# ---- Sarmasarkar (2026), Alg. 2: joint DP -------------------------------------------------------

@register("jdp-glm", family="glm")
class JointDPGLM(_GLMBase):
    """Sarmasarkar (2026), Alg. 2: joint-DP GLM bandit (binary trees for V and H, private PGD, Criteria I and II)."""

    private = True
    #: Criterion II on the running maximum of det H~ (False: the current noisy determinant; a mutant)
    running_max = True
    #: stop updating after max_updates PGD calls (False: a mutant that trusts the count bound)
    enforce_cap = True
    #: the L2 sensitivities the mechanisms are calibrated with and record in the ledger: a round's packed
    #: outer product (sqrt 2) and its gradient term (2), when a neighbour replaces the round's context and reward
    tree_sensitivity = math.sqrt(2.0)
    grad_sensitivity = 2.0

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, epsilon: float = 4.0,
                 delta: float = 1e-5, link: str = "logistic", theta_bound: float = 2.0, lam: float = 1.0,
                 gamma: float = 0.5, beta: float = 1.0, max_updates: int = 8, pgd_steps: int = 5,
                 shift_scale: float = 1.0) -> None:
        super().__init__(n_arms, dim, horizon, link, theta_bound, lam, beta)
        self.shift_scale = check_nonnegative("shift_scale", shift_scale)
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta(delta)
        self.gamma = check_positive("gamma (Criterion I threshold)", gamma)
        self.max_updates = check_int("max_updates", max_updates, minimum=1)
        self.pgd_steps = check_int("pgd_steps", pgd_steps, minimum=1)
        if self.private:
            self.rho = zcdp_rho_for_epsilon(self.epsilon, self.delta)
            self.claim: Guarantee | None = ZCDP(self.rho)
            self.sigma_tree, self.sigma_grad = self._calibrate()
        else:
            self.rho, self.claim, self.sigma_tree, self.sigma_grad = 0.0, None, 0.0, 0.0
        levels = tree_max_nodes(self.horizon)
        self.shift = self.shift_scale * self.sigma_tree * math.sqrt(levels) * (2 * math.sqrt(self.dim) + math.sqrt(2 * math.log(2 * self.horizon)))

    def _calibrate(self) -> tuple[float, float]:
        """(sigma_tree, sigma_grad): each tree ``rho / 4``-zCDP per round, the ``max_updates * pgd_steps``
        gradient releases ``rho / 2`` together (mutants override this)."""
        return (tree_sigma(self.horizon, self.rho / 4, self.tree_sensitivity),
                self.grad_sensitivity / math.sqrt(2 * (self.rho / 2) / (self.max_updates * self.pgd_steps)))

    def _tree(self, label: str) -> BinaryTreeMechanism:
        return BinaryTreeMechanism(self.horizon, (self.dim,), self.sigma_tree, self.tree_sensitivity, symmetric=True,
                                   label=label)

    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        self.treeV, self.treeH = self._tree("V-tree"), self._tree("H-tree")
        # the non-private twin releases nothing (its trees add no noise), so it records nothing
        ledger = self.ledger if self.record and self.private else None
        self.treeV.reset(n, self.rng, ledger)
        self.treeH.reset(n, self.rng, ledger)
        base = self.lam + self.shift
        self.Vinv = np.broadcast_to(np.eye(d) / base, (n, d, d)).copy()
        self.Htau_inv = self.Vinv.copy()
        self.det_tau = np.full(n, base**d)
        self.maxdet = self.det_tau.copy()
        self.prev_det = self.det_tau.copy()
        self.theta = np.zeros((n, d))
        self.X = np.zeros((n, self.horizon, d))
        self.R = np.zeros((n, self.horizon))
        self.updates = np.zeros(n, dtype=np.int64)
        self.explored = np.zeros((n, self.horizon), dtype=bool)
        self._grad_mech = GaussianMechanism(self.grad_sensitivity, self.sigma_grad) if self.private else None

    def _regularise(self, M: np.ndarray) -> np.ndarray:
        d = self.dim
        return psd_floor(M + (self.lam + self.shift) * np.eye(d), self.lam)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        x = self._contexts(t, arms)
        wV = np.sqrt(np.maximum(quad_forms(x, self.Vinv), 0.0))
        wH = np.sqrt(np.maximum(quad_forms(x, self.Htau_inv), 0.0))
        explore = wV.max(axis=1) > self.gamma
        score = np.einsum("nkd,nd->nk", x, self.theta) + self.beta * wH
        actions = np.where(explore, np.argmax(wV, axis=1), np.argmax(score, axis=1))
        self._x_played = self._played(x, actions)
        self.explored[:, t] = explore
        return actions

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        x = self._x_played
        outer = x[:, :, None] * x[:, None, :]
        V = self.treeV.add(t, outer * self.explored[:, t, None, None])
        H = self.treeH.add(t, outer)
        self.X[:, t] = x
        self.R[:, t] = rewards
        # V and H in one batch (each matrix's result depends on it alone: the same numbers, half the calls)
        n = V.shape[0]
        inv, dets = spd_inverse(self._regularise(np.concatenate([V, H])), with_det=True)
        self.Vinv, Hinv, det = inv[:n], inv[n:], dets[n:]
        self.maxdet = np.maximum(self.maxdet, det)
        if self.running_max:
            cur, ref = self.maxdet, self.det_tau
        else:  # the mutant's rule: the current noisy determinant against the previous round's
            cur, ref = det, self.prev_det
        self.prev_det = det
        switch = cur > 2.0 * ref
        if self.enforce_cap and self.private:
            switch &= self.updates < self.max_updates
        idx = np.flatnonzero(switch)
        if idx.size:
            self._pgd(t, idx)
            self.Htau_inv[idx] = Hinv[idx]
            self.det_tau[idx] = cur[idx]
            self.updates[idx] += 1

    def _pgd(self, t: int, idx: np.ndarray) -> None:
        """Private PGD on rounds 0..t of the runs ``idx`` (each gradient through the Gaussian mechanism)."""
        tau = t + 1
        X, R = self.X[idx, :tau], self.R[idx, :tau]
        theta = self.theta[idx]
        eta = 1.0 / (self.Lmu * tau + self.lam)
        steps = self.pgd_steps if self.private else max(20, self.pgd_steps)
        for k in range(steps):
            g = self._gradients(theta, X, R)
            G = g.sum(axis=1)
            if self._grad_mech is not None:
                fed = None
                if self.record:
                    m = idx.size
                    # d/dr_s of the round's term (mu(x_s^T theta) - r_s) x_s is -x_s (the ledger's coef)
                    fed = Fed(np.repeat(np.arange(m), tau), np.tile(np.arange(tau), m), -X.reshape(-1, self.dim))
                G = self._grad_mech.release(G, self.rng, ledger=self.ledger, label=f"PGD gradient (step {k})",
                                            step=t, runs=idx, fed=fed)
            theta = project_ball(theta - eta * (G + self.lam * theta), self.theta_bound)
        self.theta[idx] = theta


@register("jdp-glm-np", family="glm")
class JointGLM(JointDPGLM):
    """Non-private twin of Sarmasarkar (2026), Alg. 2 (same criteria, exact sums and gradients, no update cap)."""

    private = False

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, link: str = "logistic",
                 theta_bound: float = 2.0, lam: float = 1.0, gamma: float = 0.5, beta: float = 1.0,
                 pgd_steps: int = 20) -> None:
        super().__init__(n_arms, dim, horizon, 1.0, 1e-5, link, theta_bound, lam, gamma, beta, 1, pgd_steps)


# ---- GLM-UCB baseline ------------------------------------------------------------------------------

@register("glm-ucb", family="glm")
class GLMUCB(_GLMBase):
    """GLM-UCB (Filippi, Cappé, Garivier and Szepesvári 2010), non-private baseline.

    Each round: one Newton step (warm start) on the regularised quasi-likelihood over all past rounds,
    projected onto ``||theta|| <= S``, then ``argmax x^T theta + beta sqrt(2 d log(1 + t)) ||x||_{V^-1}``
    with ``V = lam I + sum x x^T``. (Filippi et al. solve the MLE exactly and scale the width by
    ``rho(t) ~ kappa sqrt(d log t)``; the single warm-started Newton step and ``beta`` are our choices.)
    """

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, link: str = "logistic",
                 theta_bound: float = 2.0, lam: float = 1.0, beta: float = 1.0) -> None:
        super().__init__(n_arms, dim, horizon, link, theta_bound, lam, beta)
        self.claim = None

    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        self.V = np.broadcast_to(self.lam * np.eye(d), (n, d, d)).copy()
        self.Vinv = np.linalg.inv(self.V)
        self.theta = np.zeros((n, d))
        self.X = np.zeros((n, self.horizon, d))
        self.R = np.zeros((n, self.horizon))

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        x = self._contexts(t, arms)
        w = np.sqrt(np.maximum(np.einsum("nkd,nde,nke->nk", x, self.Vinv, x), 0.0))
        width = self.beta * math.sqrt(2 * self.dim * math.log(2 + t))
        actions = np.argmax(np.einsum("nkd,nd->nk", x, self.theta) + width * w, axis=1)
        self._x_played = self._played(x, actions)
        return actions

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        x = self._x_played
        self.X[:, t], self.R[:, t] = x, rewards
        self.V += x[:, :, None] * x[:, None, :]
        self.Vinv = np.linalg.inv(self.V)
        X, R = self.X[:, : t + 1], self.R[:, : t + 1]
        z = np.einsum("nmd,nd->nm", X, self.theta)
        mu = link_mean(self.link, z)
        dmu = mu * (1 - mu) if self.link == "logistic" else np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        g = np.einsum("nm,nmd->nd", mu - R, X) + self.lam * self.theta
        Hs = np.einsum("nm,nmd,nme->nde", dmu, X, X) + self.lam * np.eye(self.dim)
        self.theta = project_ball(self.theta - np.linalg.solve(Hs, g[..., None])[..., 0], self.theta_bound)


# ---- Sarmasarkar (2026), Alg. 1: shuffle DP -----------------------------------------------------

@register("shuffle-glm", family="glm")
class ShuffleGLM(_GLMBase):
    """Sarmasarkar (2026), Alg. 1: shuffle-DP GLM bandit (batches, G-optimal design, shuffled sums, PGD, elimination)."""

    private = True
    shuffle = True
    notion = "shuffle"

    # No ledger: the messages carry the Piecewise Mechanism's output, not additive noise, so the claim comes from the
    # shuffle accountant and the audits treat the policy like one without a ledger (hasattr is False).
    @property
    def ledger(self) -> Ledger | None:
        raise AttributeError("shuffle-glm keeps no ledger (its noise is the local randomizers' in the shuffler)")

    @ledger.setter
    def ledger(self, value: Ledger | None) -> None:
        self._unused_ledger = value

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, eps0: float = 3.5,
                 delta: float = 1e-5, link: str = "logistic", theta_bound: float = 2.0, lam: float = 1.0,
                 beta: float = 1.0, batch0: int = 1000, groups: int = 1, fw_iters: int = 10) -> None:
        super().__init__(n_arms, dim, horizon, link, theta_bound, lam, beta)
        self.eps0 = check_positive("eps0 (local epsilon per message)", eps0)
        self.delta = check_delta(delta)
        self.batch0 = check_int("batch0 (first batch size)", batch0, minimum=1)
        self.groups = check_int("groups (PGD steps per batch)", groups, minimum=1)
        self.fw_iters = check_int("fw_iters", fw_iters, minimum=1)
        if self.batch0 % self.groups:
            raise DPAuditError(f"batch0 = {self.batch0} must be a multiple of groups = {self.groups}, so that every "
                               "batch splits into equal PGD groups.")
        m_outer = self.dim * (self.dim + 1) // 2
        iu = np.triu_indices(self.dim)
        diag = iu[0] == iu[1]
        # diagonal x_i^2 in [0, 1]; off-diagonal x_i x_j in [-1/2, 1/2] (x_i^2 + x_j^2 <= ||x||^2 <= 1)
        self._iu = iu
        self._outer_lo = np.where(diag, 0.0, -0.5)
        self._outer_hi = np.where(diag, 1.0, 0.5)
        self.shuffler_outer = PiecewiseShuffler(self.eps0, m_outer, lo=self._outer_lo, hi=self._outer_hi,
                                              shuffle=self.shuffle)
        self.shuffler_grad = PiecewiseShuffler(self.eps0, self.dim, shuffle=self.shuffle)
        if self.private:
            g1 = shuffle_guarantee(self.batch0, self.eps0, self.delta / 2)
            g2 = shuffle_guarantee(self.batch0 // self.groups, self.eps0, self.delta / 2)
            self.claim = ApproxDP(g1.epsilon + g2.epsilon, self.delta)
            self.claim_parts = (g1, g2)
        else:
            self.claim = None
        self.capture = False  # keep every released batch's shuffled messages (the shuffle protocol's view)

    def batch_bounds(self) -> list[tuple[int, int]]:
        """[start, stop) of every full batch within the horizon (sizes batch0, 2 batch0, 4 batch0, ...)."""
        out, start, size = [], 0, self.batch0
        while start + size <= self.horizon:
            out.append((start, start + size))
            start, size = start + size, 2 * size
        return out

    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        self.theta = np.zeros((n, d))
        self.Vinv = np.broadcast_to(np.eye(d) / self.lam, (n, d, d)).copy()
        self._bounds = self.batch_bounds()
        self._ends = {stop: (start, stop) for start, stop in self._bounds}
        self.X = np.zeros((n, self.horizon, d))
        self.R = np.zeros((n, self.horizon))
        self.views: list[dict[str, int | np.ndarray]] = []  # each batch's start, stop and messages
        self.first_batch = True

    def design(self, x: np.ndarray, active: np.ndarray) -> np.ndarray:
        """G-optimal design weights on each run's active arms: Frank-Wolfe (Kiefer-Wolfowitz steps)."""
        n, K, d = x.shape
        pi = active / active.sum(axis=1, keepdims=True)
        eye = 1e-9 * np.eye(d)
        for _ in range(self.fw_iters):
            M = np.einsum("nk,nkd,nke->nde", pi, x, x) + eye
            g = np.einsum("nkd,nde,nke->nk", x, np.linalg.inv(M), x)
            g = np.where(active, g, -np.inf)
            j = np.argmax(g, axis=1)
            gj = g[np.arange(n), j]
            step = np.clip((gj / d - 1.0) / np.maximum(gj - 1.0, 1e-12), 0.0, 1.0)
            step = np.where(gj > d * (1 + 1e-3), step, 0.0)
            pi = pi * (1 - step)[:, None]
            pi[np.arange(n), j] += step
        return pi

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        x = self._contexts(t, arms)
        w = self.beta * np.sqrt(np.maximum(np.einsum("nkd,nde,nke->nk", x, self.Vinv, x), 0.0))
        mean = np.einsum("nkd,nd->nk", x, self.theta)
        if self.first_batch:
            active = np.ones(mean.shape, dtype=bool)
        else:
            active = mean + w >= (mean - w).max(axis=1, keepdims=True)
        pi = self.design(x, active)
        u = self.rng.random((self.n_runs, 1))
        actions = np.minimum((np.cumsum(pi, axis=1) < u).sum(axis=1), self.n_arms - 1)
        self._x_played = self._played(x, actions)
        return actions

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        self.X[:, t], self.R[:, t] = self._x_played, rewards
        if t + 1 in self._ends:
            start, stop = self._ends[t + 1]
            view, self.theta, V = self.batch_release(self.rng, self.X[:, start:stop], self.R[:, start:stop], self.theta,
                                                     prior=start)
            self.Vinv = np.linalg.inv(V)
            self.first_batch = False
            if self.capture:
                self.views.append({"start": start, "stop": stop, **view})

    def design_estimate(self, S: np.ndarray, B: int) -> np.ndarray:
        """The analyzer's packed estimate ``S`` of ``sum x x^T`` over a batch of ``B`` users -> (n, d, d) (post-processing).

        Private: shrunk toward ``(tr/d) I`` with the Ledoit-Wolf weight ``min(1, N / ||M - (tr/d) I||_F^2)``,
        where ``N`` bounds the noise's expected squared Frobenius norm (``B`` times the randomizer's
        per-user variance bound, off-diagonal coordinates counted twice; public, so this is
        post-processing). Then, private or not, eigenvalues are clipped to ``[0, B]`` (for contexts in
        the unit ball, ``0 <= sum x x^T <= B I``).
        """
        d = self.dim
        M = unpack_symmetric(S, d)
        if self.private:
            iu = np.triu_indices(d)
            weights = np.where(iu[0] == iu[1], 1.0, 2.0)
            noise = B * float(weights @ self.shuffler_outer.variance_bound())
            nu = np.trace(M, axis1=1, axis2=2) / d
            dev = M - nu[:, None, None] * np.eye(d)
            energy = np.einsum("nij,nij->n", dev, dev)
            alpha = np.minimum(1.0, noise / np.maximum(energy, 1e-300))
            M = M - alpha[:, None, None] * dev
        w, U = np.linalg.eigh(M)
        return np.einsum("nij,nj,nkj->nik", U, np.clip(w, 0.0, float(B)), U)

    def message_values(self, X: np.ndarray, R: np.ndarray, theta: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The vectors users' messages carry (a coordinate of each is sampled and randomized in
        :meth:`batch_release`): ``outer`` the packed outer product of the context (m = d (d + 1) / 2) and ``grad``
        the gradient term ``(mu(x^T theta) - r) x`` at ``theta`` (default 0: the first batch's start), for
        contexts ``X`` (k, d) and rewards ``R`` (k,). The shuffle audit's gray-box part reads the canary's and
        the background's vectors here (as the likelihood attack reads a ledger)."""
        X = np.asarray(X, dtype=float).reshape(-1, self.dim)
        R = np.asarray(R, dtype=float).reshape(-1)
        th = np.zeros(self.dim) if theta is None else np.asarray(theta, dtype=float)
        resid = link_mean(self.link, X @ th) - R
        return {"outer": X[:, self._iu[0]] * X[:, self._iu[1]], "grad": resid[:, None] * X}

    def batch_release(self, rng: np.random.Generator, X: np.ndarray, R: np.ndarray,
                      theta: np.ndarray, prior: int = 0, *,
                      view_only: bool = False) -> tuple[dict[str, np.ndarray], np.ndarray | None, np.ndarray | None]:
        """R, S, A on one batch: the users' played contexts ``X`` (n, B, d) and rewards ``R`` (n, B).

        Returns (the analyzer's view: shuffled outer-product messages and each group's shuffled
        gradient messages; the new estimate; the regularised design matrix). The shuffle protocol's
        audit calls this directly on an adversarially fixed batch, with ``view_only=True``: the same
        random draws and the same messages, but the analyzer's work that no later message depends on
        (with one group, all of it) is skipped and the estimate and the design matrix come back as None.
        """
        n, B, d = X.shape
        if B % self.groups:
            raise DPAuditError(f"a batch of {B} users does not split into {self.groups} equal PGD groups.")
        # the later groups' gradient messages depend on the estimate after the earlier groups' steps
        estimate = not view_only or self.groups > 1
        if self.private:
            # each user's message carries one sampled coordinate of her packed outer product x x^T
            sh = self.shuffler_outer
            J = sh.sample_coordinates(rng, n, B)
            vJ = _coordinate_products(X, self._iu[0], self._iu[1], J)
            msgs_outer = sh.permute(rng, sh.randomize_at(rng, J, vJ))
            S = sh.analyze(msgs_outer) if estimate else None
        else:
            msgs_outer = None
            S = pack_symmetric(np.einsum("nbd,nbe->nde", X, X)) if estimate else None
        size = B // self.groups
        V = None
        if estimate:
            M = self.design_estimate(S, B)
            V = M + self.lam * np.eye(d)
            # step 1/L for the group's mean loss: L = L_mu lambda_max(M) / B (the batch's curvature bound) + lam/size
            lmax = np.linalg.eigvalsh(M)[:, -1]
            eta = (1.0 / (self.Lmu * np.maximum(lmax, self.lam) / B + self.lam / size))[:, None]
            # the warm start summarises the ``prior`` users of earlier batches: step on the pooled mean loss, whose
            # curvature counts them too (for a quadratic loss of equal curvature, this is the pooled minimiser)
            eta = eta * B / (B + prior)
        grads = []
        for g in range(self.groups):
            sl = slice(g * size, (g + 1) * size)
            Xg = X[:, sl]
            if self.private and n > 1 and X.strides[0] == 0 and R.strides[0] == 0 and not np.any(theta[1:] != theta[0]):
                # a broadcast batch at one estimate (the audit's view): the same residuals in every run, once
                resid = (link_mean(self.link, np.einsum("md,d->m", Xg[0], theta[0])) - R[0, sl])[None]
            else:
                resid = link_mean(self.link, np.einsum("nmd,nd->nm", Xg, theta)) - R[:, sl]
            step = estimate and (not view_only or g < self.groups - 1)
            if self.private:  # one sampled coordinate of her gradient term (mu(x^T theta) - r) x per user
                sh = self.shuffler_grad
                J = sh.sample_coordinates(rng, n, size)
                msgs = sh.permute(rng, sh.randomize_at(rng, J, resid * _coordinates(Xg, J)))
                G = sh.analyze(msgs) if step else None
            else:
                msgs, G = None, (np.einsum("nm,nmd->nd", resid, Xg) if step else None)
            grads.append(msgs)
            if step:
                theta = project_ball(theta - eta * (G / size + self.lam / size * theta), self.theta_bound)
        return {"outer": msgs_outer, "grads": grads}, (None if view_only else theta), V


def _coordinates(X: np.ndarray, J: np.ndarray) -> np.ndarray:
    """``X[i, b, J[i, b]]``: (n, B) from contexts (n, B, d) and coordinates (n, B) (``take_along_axis``, cheaper:
    one coordinate needs no gather, and contexts shared by every run (a broadcast batch) are gathered once per run
    from the one copy, by flat index)."""
    if X.shape[2] == 1:
        return X[..., 0]
    if X.shape[0] > 1 and X.strides[0] == 0:  # np.broadcast_to of one batch: the same rows in every run
        return _gather_rows(np.ascontiguousarray(X[0]), J)
    return np.take_along_axis(X, J[..., None], 2)[..., 0]


def _gather_rows(rows: np.ndarray, J: np.ndarray) -> np.ndarray:
    """``rows[b, J[i, b]]`` for rows (B, m) and J (n, B): one flat ``take``."""
    flat = np.arange(rows.shape[0]) * rows.shape[1]
    return rows.ravel().take(J + flat)


def _coordinate_products(X: np.ndarray, i: np.ndarray, j: np.ndarray, J: np.ndarray) -> np.ndarray:
    """``X[., ., i[J]] * X[., ., j[J]]``: each user's packed outer-product coordinate ``J`` (n, B)."""
    if X.shape[2] == 1:
        x = X[..., 0]
        return x * x
    if X.shape[0] > 1 and X.strides[0] == 0:  # a broadcast batch: its packed outer products once, then one gather
        X0 = X[0]
        return _gather_rows(X0[:, i] * X0[:, j], J)
    return _coordinates(X, i[J]) * _coordinates(X, j[J])


@register("shuffle-glm-np", family="glm")
class ShuffleGLMNonPrivate(ShuffleGLM):
    """Non-private twin of Sarmasarkar (2026), Alg. 1 (exact batch sums)."""

    private = False

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, link: str = "logistic",
                 theta_bound: float = 2.0, lam: float = 1.0, beta: float = 1.0, batch0: int = 1000,
                 groups: int = 1, fw_iters: int = 10) -> None:
        super().__init__(n_arms, dim, horizon, 1.0, 1e-5, link, theta_bound, lam, beta, batch0, groups, fw_iters)


def shuffle_eps0_for(epsilon: float, batch0: int = 1000, groups: int = 1, delta: float = 1e-5) -> float:
    """The largest ``eps0`` (to 1e-3, rounded down) whose ``shuffle-glm`` claim is at most ``epsilon`` at these sizes.

    The claim is ``clones_epsilon(batch0, eps0, delta/2) + clones_epsilon(batch0/groups, eps0, delta/2)``, which
    increases with ``eps0``, is at most ``2 eps0`` and reaches ``2 eps0`` once amplification fails (``eps0`` past
    about ``log(n)``); bisection between ``epsilon/2`` and the first ``epsilon 2^k`` whose claim exceeds ``epsilon``.
    """
    from dpaudit.accountants import clones_epsilon

    epsilon = check_positive("epsilon (target central epsilon)", epsilon)
    delta = check_delta(delta)
    batch0 = check_int("batch0", batch0, minimum=1)
    groups = check_int("groups", groups, minimum=1)

    def claim(e0: float) -> float:
        return clones_epsilon(batch0, e0, delta / 2) + clones_epsilon(batch0 // groups, e0, delta / 2)

    lo, hi = epsilon / 2, epsilon
    while claim(hi) <= epsilon:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if claim(mid) <= epsilon else (lo, mid)
    return lo


__all__ += ["shuffle_eps0_for"]


# ==== non-private baselines of Sarmasarkar's (2026) comparison: GLOC and RS-GLinUCB ====
#
# Sarmasarkar (2026) compares its algorithms with GLM-UCB, GLOC and RS-GLinUCB. The ``gloc`` policy of
# ``dpaudit.policies.ldp`` is *not* Jun et al.'s GLOC: it is the non-private twin of Alg. 3 of
# Zheng et al. (2020), "Locally Differentially Private (Contextual) Bandits Learning", with online
# *gradient* descent (step 1/sqrt(T)) on the unit ball, the logistic link only, rewards fed through the
# LDP channel interface, and the OFUL radius of a linear model as its width.
# Jun et al.'s GLOC runs the online *Newton* step (ONS-GLM) on the ball of radius S and converts its
# online regret bound B_t into the confidence width; so ``glm-gloc`` below is written anew (sharing
# only the GLM helpers of this module).

def link_slope(link: str, z: np.ndarray | float) -> np.ndarray:
    """mu'(z): sigma(z)(1 - sigma(z)) for the logistic link, the normal density for probit."""
    z = np.asarray(z, dtype=float)
    if link == "logistic":
        m = special.expit(z)
        return m * (1.0 - m)
    return np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def min_slope(link: str, S: float) -> float:
    """inf of mu' over |z| <= S (contexts in the unit ball, ||theta|| <= S): mu'(S), as mu' is even and decreasing in |z|."""
    return float(link_slope(link, S))


def project_ball_in_norm(theta: np.ndarray, A: np.ndarray, radius: float, iters: int = 60) -> np.ndarray:
    """argmin over ||u|| <= radius of ||u - theta||_A, batched over rows (A: (n, d, d) positive definite).

    Rows already inside the ball are returned unchanged. Outside, the KKT point is
    u = (A + nu I)^{-1} A theta with nu >= 0 such that ||u|| = radius; ||u(nu)|| decreases in nu, so nu
    is found by bisection on [0, max eig(A) ||theta|| / radius] (``iters`` halvings, relative error 2^-60).
    """
    out = theta.copy()
    norm = np.linalg.norm(theta, axis=1)
    idx = np.flatnonzero(norm > radius)
    if idx.size == 0:
        return out
    w, U = np.linalg.eigh(A[idx])
    c = np.einsum("nji,nj->ni", U, theta[idx]) * w  # U^T A theta in the eigenbasis
    lo = np.zeros(idx.size)
    hi = w.max(axis=1) * norm[idx] / radius
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        big = np.sum((c / (w + mid[:, None])) ** 2, axis=1) > radius**2
        lo, hi = np.where(big, mid, lo), np.where(big, hi, mid)
    u = np.einsum("nij,nj->ni", U, c / (w + hi[:, None]))
    out[idx] = project_ball(u, radius)  # hi is on the feasible side; this only removes rounding
    return out


def glm_mle(link: str, X: np.ndarray, R: np.ndarray, weight: np.ndarray, theta0: np.ndarray, lam: float,
            radius: float, iters: int = 10) -> np.ndarray:
    """Regularised GLM estimate over ``||theta|| <= radius``, batched over runs: projected Newton steps.

    Minimises the quasi-likelihood whose gradient is sum_s w_s (mu(x_s^T theta) - r_s) x_s + lam theta
    (this module's loss; w_s in {0, 1} selects the rounds that count), from ``theta0``, with ``iters``
    Newton steps each followed by the Euclidean projection onto the ball (the papers solve the
    constrained problem exactly; a projected Newton step from a warm start is our approximation).
    """
    theta = theta0.copy()
    eye = lam * np.eye(X.shape[-1])
    for _ in range(iters):
        z = np.einsum("nmd,nd->nm", X, theta)
        g = np.einsum("nm,nmd->nd", weight * (link_mean(link, z) - R), X) + lam * theta
        H = np.einsum("nm,nmd,nme->nde", weight * link_slope(link, z), X, X) + eye
        theta = project_ball(theta - np.linalg.solve(H, g[..., None])[..., 0], radius)
    return theta


@register("glm-gloc", family="glm")
class GLOCONS(_GLMBase):
    """GLOC with ONS-GLM (Jun, Bhargava, Nowak and Willett 2017, Alg. 1 and 2), non-private baseline.

    Online learner, ONS-GLM (Jun et al. Alg. 2): theta_1 = 0, A_0 = lam I, and after round t with
    g_t = mu(x_t^T theta_t) - y_t: A_t = A_{t-1} + x_t x_t^T,
    theta'_{t+1} = theta_t - (g_t / kappa) A_t^{-1} x_t, theta_{t+1} = argmin_{||u|| <= S} ||u - theta'_{t+1}||_{A_t}.
    Its online regret bound (Jun et al. Thm 3, data-dependent form):
    B_t = 2 kappa S^2 lam + (1 / (2 kappa)) sum_{s <= t} g_s^2 ||x_s||^2_{A_s^{-1}}.

    Conversion (Jun et al. Alg. 1 and Thm 2): z_s = x_s^T theta_s (the learner's prediction before it
    sees y_s), V_t = lam I + sum x_s x_s^T, theta_hat_t = V_t^{-1} sum z_s x_s and
    beta_t = alpha(B_t) + lam S^2 - (||z||^2 - theta_hat_t^T X^T z) with
    alpha(B) = 1 + 4 B / kappa + (8 R^2 / kappa^2) log((2 / delta) sqrt(1 + 2 B / kappa + 4 R^4 / (kappa^4 delta^2))).
    Action: argmax_x x^T theta_hat + ``beta`` sqrt(beta_t) ||x||_{V_t^{-1}} (mu is increasing, so the
    optimistic mean and the optimistic linear score pick the same arm).

    Constants: kappa = inf mu' over |z| <= S (= mu'(S)), R = 1/2 (rewards in [0, 1] are 1/2-sub-Gaussian),
    ONS regulariser eps = lam (Jun et al. keep eps and lambda separate; we use one ``lam``, default 1,
    as every GLM policy of this module), delta = 0.05. The theoretical width sqrt(beta_t) is about 60
    at d = 5, S = 2, T = 5000, far too wide to learn within T; ``beta`` (default 0.03) scales it, chosen
    on instance seed 1 (the reproduction runs instance 0) from {0.01, 0.03, 0.1, 0.3, 1}
    (``benchmarks/studies/glm_baselines_tuning.py``).
    """

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, link: str = "logistic",
                 theta_bound: float = 2.0, lam: float = 1.0, beta: float = 0.03, delta: float = 0.05) -> None:
        super().__init__(n_arms, dim, horizon, link, theta_bound, lam, beta)
        self.delta = check_delta(delta)
        self.claim = None
        self.kappa = min_slope(self.link, self.theta_bound)
        self.R = 0.5

    def _alpha(self, B: np.ndarray) -> np.ndarray:
        k, R, dl = self.kappa, self.R, self.delta
        inner = np.sqrt(1.0 + 2.0 * B / k + 4.0 * R**4 / (k**4 * dl**2))
        return 1.0 + 4.0 * B / k + (8.0 * R**2 / k**2) * np.log(2.0 / dl * inner)

    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        eye = np.broadcast_to(np.eye(d), (n, d, d))
        self.Vinv = eye / self.lam
        self.A = self.lam * eye.copy()
        self.theta = np.zeros((n, d))      # the ONS iterate theta_t
        self.u = np.zeros((n, d))          # sum z_s x_s
        self.zz = np.zeros(n)              # sum z_s^2
        self.B = np.full(n, 2.0 * self.kappa * self.theta_bound**2 * self.lam)

    def width(self) -> np.ndarray:
        """sqrt(beta_t) of Jun et al. Thm 2 for every run (before the ``beta`` scale)."""
        theta_hat = np.einsum("nij,nj->ni", self.Vinv, self.u)
        resid = self.zz - np.einsum("nd,nd->n", theta_hat, self.u)  # ||z||^2 - theta_hat^T X^T z >= 0
        b = self._alpha(self.B) + self.lam * self.theta_bound**2 - resid
        return np.sqrt(np.maximum(b, 0.0))

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        x = self._contexts(t, arms)
        theta_hat = np.einsum("nij,nj->ni", self.Vinv, self.u)
        w = np.sqrt(np.maximum(np.einsum("nkd,nde,nke->nk", x, self.Vinv, x), 0.0))
        score = np.einsum("nkd,nd->nk", x, theta_hat) + (self.beta * self.width())[:, None] * w
        actions = np.argmax(score, axis=1)
        self._x_played = self._played(x, actions)
        return actions

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        x = self._x_played
        z = np.einsum("nd,nd->n", x, self.theta)
        self.u += z[:, None] * x
        self.zz += z * z
        Vx = np.einsum("nij,nj->ni", self.Vinv, x)
        self.Vinv = self.Vinv - Vx[:, :, None] * Vx[:, None, :] / (1.0 + np.einsum("nd,nd->n", x, Vx))[:, None, None]
        g = link_mean(self.link, z) - rewards
        self.A = self.A + x[:, :, None] * x[:, None, :]
        Ax = np.linalg.solve(self.A, x[..., None])[..., 0]
        self.B += g * g * np.einsum("nd,nd->n", x, Ax) / (2.0 * self.kappa)
        step = self.theta - (g / self.kappa)[:, None] * Ax
        self.theta = project_ball_in_norm(step, self.A, self.theta_bound)


@register("rs-glinucb", family="glm")
class RSGLinUCB(_GLMBase):
    """RS-GLinUCB (Sawarni, Das, Barman and Sinha 2024, "Generalized Linear Bandits with Limited Adaptivity", Alg. 2 RS-GLinCB).

    Each round, with V = lam I + sum over warm-up rounds of x x^T and
    H = lam I + sum over the other rounds of (mu'(x^T theta_o) / e) x x^T:

    * Switching Criterion I (warm-up): if max_x ||x||^2_{V^{-1}} >= 1 / (kappa gamma^2), play that
      arm, add it to V, and refit theta_o, the regularised GLM estimate on the warm-up rounds.
    * Otherwise, Switching Criterion II: if det H > 2 det H_tau, set tau = t, H_tau = H and refit
      theta_tau on every earlier non-warm-up round. Keep the arms with
      x^T theta_o + gamma sqrt(kappa) ||x||_{V^{-1}} >= max_y (y^T theta_o - gamma sqrt(kappa) ||y||_{V^{-1}})
      and play argmax over them of x^T theta_tau + beta_w ||x||_{H_tau^{-1}}; after the reward,
      H += (mu'(x^T theta_o) / e) x x^T.

    The kappa-free leading term comes from H's weights mu'(x^T theta_o) / e (self-concordance: they
    lower-bound mu' near theta*), so the optimistic width is in the H-norm, not kappa times the V-norm.

    Constants: kappa = 1 / inf mu' over |z| <= S (the paper's kappa), gamma = ``gamma_scale`` S
    sqrt(d log(T / delta)), beta_w = ``beta`` sqrt(d log(T / delta)), delta = 0.05, lam = 1 (the same
    ridge as the other GLM policies of this module). The paper's analysis takes large absolute constants
    in gamma and beta_w; with them at T = 5000 every round would be a warm-up round (threshold
    1 / (kappa gamma^2) ~ 1e-6), so ``gamma_scale`` (default 0.03: threshold 0.51 for the logistic
    link, 0.26 for probit, at S = 2, d = 5) and ``beta`` (default 0.03) scale them, chosen on instance
    seed 1 from {0.03, 0.05, 0.1} x {0.01, 0.03, 0.1, 0.3, 1} (``benchmarks/studies/glm_baselines_tuning.py``;
    gamma_scale = 0.02 did as well there but puts the threshold above 1/lam, which switches Criterion I
    off: that is no longer RS-GLinUCB). Both estimates are :func:`glm_mle` (10 projected
    Newton steps, warm-started) over ``||theta|| <= S``.

    ``warmups`` (rounds of Criterion I) and ``updates`` (refits by Criterion II) count the switches per
    run: each warm-up round satisfies log(1 + ||x||^2_{V^{-1}}) >= log(1 + 1/(kappa gamma^2)), so
    n_I log(1 + 1/(kappa gamma^2)) <= d log(1 + n_I / (d lam)); det H_tau doubles at each update and
    det H <= (lam + T L_mu / (e d))^d, so n_II <= d log2(1 + T L_mu / (e d lam)) (:meth:`switch_bounds`).
    """

    def __init__(self, n_arms: int = 20, dim: int = 5, horizon: int = 5000, link: str = "logistic",
                 theta_bound: float = 2.0, lam: float = 1.0, beta: float = 0.03, gamma_scale: float = 0.03,
                 delta: float = 0.05, mle_iters: int = 10) -> None:
        super().__init__(n_arms, dim, horizon, link, theta_bound, lam, beta)
        self.delta = check_delta(delta)
        self.gamma_scale = check_positive("gamma_scale", gamma_scale)
        self.mle_iters = check_int("mle_iters", mle_iters, minimum=1)
        self.claim = None
        self.kappa = 1.0 / min_slope(self.link, self.theta_bound)
        logterm = self.dim * math.log(self.horizon / self.delta)
        self.gamma = self.gamma_scale * self.theta_bound * math.sqrt(logterm)
        self.width_ucb = self.beta * math.sqrt(logterm)
        self.threshold = 1.0 / (self.kappa * self.gamma**2)

    def switch_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        """(the most warm-up rounds, the most Criterion II updates) any input allows within ``horizon``."""
        T = self.horizon if horizon is None else horizon
        d, lam, c = self.dim, self.lam, math.log1p(self.threshold)

        def slack(n: float) -> float:  # concave, 0 at n = 0: the warm-up counts allowed are [0, its root]
            return d * math.log1p(n / (d * lam)) - n * c

        if slack(T) >= 0:
            n = float(T)
        else:
            lo, hi = 0.0, float(T)
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if slack(mid) >= 0 else (lo, mid)
            n = lo
        return n, d * math.log2(1.0 + T * self.Lmu / (math.e * d * lam))

    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        eye = np.broadcast_to(np.eye(d), (n, d, d))
        self.Vinv = eye / self.lam
        self.H = self.lam * eye.copy()
        self.Htau_inv = eye / self.lam
        self.det_tau = np.full(n, self.lam**d)
        self.theta_o = np.zeros((n, d))
        self.theta_tau = np.zeros((n, d))
        self.X = np.zeros((n, self.horizon, d))
        self.R = np.zeros((n, self.horizon))
        self.warm = np.zeros((n, self.horizon))   # 1 on warm-up rounds
        self.warmups = np.zeros(n, dtype=np.int64)
        self.updates = np.zeros(n, dtype=np.int64)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        x = self._contexts(t, arms)
        wV2 = np.maximum(np.einsum("nkd,nde,nke->nk", x, self.Vinv, x), 0.0)
        warm = wV2.max(axis=1) >= self.threshold
        # Criterion II on the runs that do not warm up
        switch = ~warm & (np.linalg.det(self.H) > 2.0 * self.det_tau)
        idx = np.flatnonzero(switch)
        if idx.size and t > 0:
            cold = 1.0 - self.warm[idx, :t]
            self.theta_tau[idx] = glm_mle(self.link, self.X[idx, :t], self.R[idx, :t], cold, self.theta_tau[idx],
                                          self.lam, self.theta_bound, self.mle_iters)
            self.Htau_inv[idx] = np.linalg.inv(self.H[idx])
            self.det_tau[idx] = np.linalg.det(self.H[idx])
            self.updates[idx] += 1
        # elimination with the warm-up estimate, then optimism in the H_tau-norm
        wV = np.sqrt(wV2)
        mo = np.einsum("nkd,nd->nk", x, self.theta_o)
        half = self.gamma * math.sqrt(self.kappa) * wV
        keep = mo + half >= (mo - half).max(axis=1, keepdims=True)
        wH = np.sqrt(np.maximum(np.einsum("nkd,nde,nke->nk", x, self.Htau_inv, x), 0.0))
        score = np.where(keep, np.einsum("nkd,nd->nk", x, self.theta_tau) + self.width_ucb * wH, -np.inf)
        actions = np.where(warm, np.argmax(wV2, axis=1), np.argmax(score, axis=1))
        self._x_played = self._played(x, actions)
        self._warm_now = warm
        return actions

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        x, warm = self._x_played, self._warm_now
        self.X[:, t], self.R[:, t] = x, rewards
        self.warm[:, t] = warm
        idx = np.flatnonzero(warm)
        if idx.size:
            xi = x[idx]
            Vx = np.einsum("nij,nj->ni", self.Vinv[idx], xi)
            self.Vinv[idx] -= Vx[:, :, None] * Vx[:, None, :] / (1.0 + np.einsum("nd,nd->n", xi, Vx))[:, None, None]
            self.theta_o[idx] = glm_mle(self.link, self.X[idx, : t + 1], self.R[idx, : t + 1], self.warm[idx, : t + 1],
                                        self.theta_o[idx], self.lam, self.theta_bound, self.mle_iters)
            self.warmups[idx] += 1
        rest = np.flatnonzero(~warm)
        if rest.size:
            xr = x[rest]
            wt = link_slope(self.link, np.einsum("nd,nd->n", xr, self.theta_o[rest])) / math.e
            self.H[rest] += wt[:, None, None] * xr[:, :, None] * xr[:, None, :]
