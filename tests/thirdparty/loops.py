"""Loop-shaped private bandits, written the way tutorial and paper-companion code is: a function that
takes an environment and a horizon, runs its own ``for t in range(T)`` loop, draws noise from the global
``np.random`` and returns what it played. dpaudit audits them unchanged through ``--adapter loop``.

``dp_etc(env, T, n_arms=2, epsilon=1.0)``: explore-then-commit with Laplace noise on each arm's
exploration sum.

* m = ceil(2 log(T) / epsilon) + 4 exploration pulls per arm (m = 12 for T = 48, epsilon = 1),
  round robin (arm t mod K) for the first K m rounds, each arm's sum S_a kept;
* then S~_a = S_a + Lap(1/epsilon) for every arm, independently, and the rest of the horizon plays
  argmax_a S~_a.

Why it is epsilon-DP (Table DP, rewards in [0, 1], claim ``pure:eps=<epsilon>``): one user's reward
enters one arm's exploration sum (L1 sensitivity 1), released once with Lap(1/epsilon); the sums are
disjoint (parallel composition), the exploration does not depend on the data and the commit is a
function of the noisy sums.

``dp_etc_mean_noise`` is the bug: the noise scale of a *mean*, 1/(epsilon m), added to the *sum*, so a
reward is protected at epsilon * m (12 at T = 48, epsilon = 1), not epsilon.

``GymStyleETC`` is the correct algorithm as a class over a gym-like environment (``env.step(a)`` returns
``(obs, reward, terminated, truncated, info)``), built with the environment and run by ``run()``.
``etc_with_draw`` calls its environment's ``draw_arm(a)`` (mapped with ``--adapter loop:pull=draw_arm``).
"""

import math

import numpy as np


def exploration_pulls(T, epsilon):
    return int(math.ceil(2 * math.log(T) / epsilon)) + 4


def dp_etc(env, T, n_arms=2, epsilon=1.0):
    """Explore-then-commit, Laplace(1/epsilon) on each arm's exploration sum: epsilon-DP (correct)."""
    m = exploration_pulls(T, epsilon)
    sums = np.zeros(n_arms)
    choice = None
    arms = []
    for t in range(T):
        if t < n_arms * m:
            a = t % n_arms
        else:
            if choice is None:
                noisy = sums + np.random.laplace(0.0, 1.0 / epsilon, size=n_arms)
                choice = int(np.argmax(noisy))
            a = choice
        r = env.pull(a)
        if t < n_arms * m:
            sums[a] += r
        arms.append(a)
    return arms


def dp_etc_mean_noise(env, T, n_arms=2, epsilon=1.0):
    """The same with the mean's noise scale on the sum (the bug): eps * m, not eps."""
    m = exploration_pulls(T, epsilon)
    sums = np.zeros(n_arms)
    choice = None
    for t in range(T):
        if t < n_arms * m:
            a = t % n_arms
        else:
            if choice is None:
                noisy = sums + np.random.laplace(0.0, 1.0 / (epsilon * m), size=n_arms)  # BUG: scale of a mean
                choice = int(np.argmax(noisy))
            a = choice
        r = env.pull(a)
        if t < n_arms * m:
            sums[a] += r


class GymStyleETC:
    """``dp_etc`` as an agent class over a gym-like environment (``step`` returns a 5-tuple)."""

    def __init__(self, env, horizon=1000, epsilon=1.0):
        self.env = env
        self.horizon = horizon
        self.epsilon = epsilon
        self.n_arms = env.action_space.n

    def run(self):
        K, m = self.n_arms, exploration_pulls(self.horizon, self.epsilon)
        sums = [0.0] * K
        choice = None
        for t in range(self.horizon):
            if t < K * m:
                a = t % K
            else:
                if choice is None:
                    choice = max(range(K), key=lambda b: sums[b] + np.random.laplace(0.0, 1.0 / self.epsilon))
                a = choice
            _, r, terminated, truncated, _ = self.env.step(a)
            if t < K * m:
                sums[a] += r
            if terminated or truncated:
                break


def etc_with_draw(env, T, n_arms=2, epsilon=1.0):
    """``dp_etc`` whose environment call is ``env.draw_arm(a)``."""
    m = exploration_pulls(T, epsilon)
    sums = np.zeros(n_arms)
    choice = None
    for t in range(T):
        if t < n_arms * m:
            a = t % n_arms
        else:
            if choice is None:
                choice = int(np.argmax(sums + np.random.laplace(0.0, 1.0 / epsilon, size=n_arms)))
            a = choice
        r = env.draw_arm(a)
        if t < n_arms * m:
            sums[a] += r
