"""Continuous actions (BCO, Zheng et al. 2020) under local DP: users hold loss functions, the policy plays points.

The input is an oblivious loss sequence (:class:`dpaudit.environments.LossSequence`); neighbours differ
in user j's loss only (:func:`loss_pair`: constants -B vs +B for one-point policies, linear
-g<e_1, x> vs +g<e_1, x> for two-point ones). :func:`play` runs a policy on a loss sequence for the
first rounds; the views are :func:`transcript_features` (what the server received from user j) and
:func:`central_features` (the points played after round j).

Why a separate contract (DESIGN.md, "Continuous actions"). dpaudit's Policy contract plays one of K arms and
takes a reward table; the BCO algorithms of Zheng et al. (2020), "Locally Differentially Private (Contextual)
Bandits Learning" (Alg. 1 with a BCO black box, Alg. 2), play points of a convex body and the users' data are
loss *functions*, evaluated at the points played. Discretising the body into arms would change the algorithms,
so BCO policies (:mod:`dpaudit.policies.bco`) keep the same batched shape with points for arms:

* ``act(t) -> (n_runs, m, d)``: m = 1 (one-point) or 2 (two-point) points of X = R B (radius R);
* ``observe(t, points, losses)``: the users' loss values ``(n_runs, m)``, in [-B, B];
* ``continuous_actions = True`` marks them; ``d``, ``radius``, ``n_points``, ``loss_bound``,
  ``lipschitz``, ``horizon`` describe the problem.

The environment is a :class:`~dpaudit.environments.LossSequence`: f_t(x) = a_t + <c_t, x> + (mu_t / 2) ||x - x*||^2 + q_t,
an oblivious sequence (fixed before the game, the same for every run) of convex losses, with an
optional stochastic part q_t ~ U[-s, s] drawn per run and round (bounded noise, so |f_t| <= B holds
without clipping; it is the same for the m points of a round, it is part of f_t). The family covers
the paper's two settings (stochastic BCO: a_t = c_t = 0, f(x) + q_t; adversarial: varying c_t) with a
closed-form best point, so :func:`dpaudit.simulate.simulate_bco` gives the exact regret
sum_t (1/m) sum_k f_t(x_{t,k}) - min_x sum_t f_t(x) (Zheng et al. 2020, eq. 2; the noise-free f_t).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from dpaudit.environments import LossSequence

if TYPE_CHECKING:
    from dpaudit.policies.bco import BCOPolicy

__all__ = ["loss_pair", "play", "transcript_features", "central_features", "action_space"]


def action_space(policy: BCOPolicy) -> str:
    """What a BCO policy plays, for the findings (in place of K arms)."""
    return f"points of the ball of radius {policy.radius:g} in R^{policy.d}, {policy.n_points} per round"


def loss_pair(policy: BCOPolicy, horizon: int, j: int) -> tuple[LossSequence, LossSequence]:
    """Neighbouring loss sequences differing in user j's loss only (module docstring, part 4)."""
    T, d = horizon, policy.d
    if policy.n_points == 1:
        a0, a1 = np.zeros(T), np.zeros(T)
        a0[j], a1[j] = -policy.loss_bound, policy.loss_bound
        return LossSequence(a0, np.zeros((T, d))), LossSequence(a1, np.zeros((T, d)))
    g = min(policy.lipschitz, policy.loss_bound / policy.radius)
    c0, c1 = np.zeros((T, d)), np.zeros((T, d))
    c0[j, 0], c1[j, 0] = -g, g
    return LossSequence(np.zeros(T), c0), LossSequence(np.zeros(T), c1)


def play(policy_for: Callable[[], BCOPolicy], losses: LossSequence, n: int, rng: np.random.Generator,
         rounds: int) -> BCOPolicy:
    """A fresh policy from ``policy_for`` played for ``rounds`` rounds of ``losses`` in ``n`` runs, its
    transcript kept."""
    pol = policy_for()
    pol.keep_transcript = True
    pol.reset(n, rng, record=False)
    for t in range(rounds):
        P = pol.act(t)
        pol.observe(t, P, losses.values(t, P, rng))
    return pol


def transcript_features(pol: BCOPolicy, j: int) -> np.ndarray:
    """What the server received from user ``j`` (and, for two points, along which direction), per run."""
    o = pol.transcript()[:, j, :]  # (n, 1)
    if pol.n_points == 1:
        return o
    P = pol.trajectory()[:, j]
    D = P[:, 0] - P[:, 1]
    D = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-300)
    return np.concatenate([o, o * D], axis=1)


def central_features(pol: BCOPolicy, j: int) -> np.ndarray:
    """Per run: the centre of the points played in the round after user ``j``, and its outer product with
    user j's query direction (two points) or point (one)."""
    P = pol.trajectory()
    centre = P[:, j + 1].mean(axis=1)  # (n, d)
    E = (P[:, j, 0] - P[:, j, 1]) / 2 if pol.n_points == 2 else P[:, j, 0]
    outer = (centre[:, :, None] * E[:, None, :]).reshape(centre.shape[0], -1)
    return np.concatenate([centre, outer], axis=1)

