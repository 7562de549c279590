"""A per-run private UCB written the way public code is: one run, global ``np.random``,
``select_arm()`` / ``update(arm, reward)``. dpaudit audits it unchanged through its per-run adapter:

    dpaudit check policy examples/per_run_ucb.py:PrivateUCB --adapter per-run \\
        --param n_arms=2 --param epsilon=1 --claim pure:eps=1

``LeakyUCB`` at the end is the same code with a classic calibration bug, a positive control.

The algorithm is AdaP-UCB (Azize & Basu 2022, reference [8] of Azize & Basu 2023a, "Concentrated
Differential Privacy for Bandits"; dpaudit's ``adap-ucb``), tree-free: no binary-tree counters,
because each reward is used in exactly one noisy release.

* Play each arm once (arms 0, 1, ..., K-1).
* Then episodes: choose the arm with the largest index and play it for as many rounds as it has
  been played so far (its pull count doubles). When the episode ends, release the *sum of that
  episode's rewards* plus Laplace(1/epsilon) noise; the arm's statistic is that noisy sum divided by
  the episode's length (forgetting: older episodes are dropped).
* Index of arm a with last episode length n, at the 1-based round t where the next episode starts:
  noisy_mean_a + sqrt(beta log t / (2 n)) + beta log t / (epsilon n). Ties go to the lowest arm.

Why this is epsilon-DP (Table DP, rewards in [0, 1], the claim ``pure:eps=<epsilon>``): changing one
user's row changes at most one observed reward, which enters exactly one episode sum (L1
sensitivity 1), released once with Lap(1/epsilon) noise: an epsilon-DP release. Every other
release reads other rounds' rewards only, and the actions are post-processing of the releases, so
by parallel composition over the disjoint episodes the whole sequence of actions is epsilon-DP
(Azize & Basu 2022, Thm 3; the same argument as Azize & Basu 2023a, Lemma 1, with Laplace noise). Rewards of an
episode the horizon cuts short are never released. Rewards outside [0, 1] are refused: they would
break the sensitivity bound.
"""

import math

import numpy as np


class PrivateUCB:
    """epsilon-DP UCB with per-arm doubling episodes, forgetting and Laplace noise (AdaP-UCB)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0, beta=4.0):
        if n_arms < 2 or epsilon <= 0 or beta <= 0:
            raise ValueError("need n_arms >= 2, epsilon > 0 and beta > 0")
        self.n_arms = n_arms
        self.epsilon = epsilon
        self.beta = beta
        self.counts = [0] * n_arms  # pulls of each arm, completed episodes only
        self.last_len = [1] * n_arms  # length of each arm's last released episode
        self.noisy_mean = [0.0] * n_arms  # its noisy mean
        self.t = 0  # rounds played so far
        self.arm = 0  # arm of the current episode
        self.ep_len = 1  # its length
        self.left = 1  # rounds left in it
        self.ep_sum = 0.0  # sum of its rewards so far

    def select_arm(self):
        return self.arm

    def noise_scale(self, n):
        """Laplace scale on an episode's reward sum: sensitivity 1 over epsilon, whatever its length n."""
        return 1.0 / self.epsilon

    def update(self, arm, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError("rewards must lie in [0, 1]")
        # the reward counts for the arm of the current episode (the arm this policy chose)
        self.ep_sum += reward
        self.t += 1
        self.left -= 1
        if self.left > 0:
            return
        a, n = self.arm, self.ep_len
        noisy_sum = self.ep_sum + np.random.laplace(0.0, self.noise_scale(n))
        self.noisy_mean[a] = noisy_sum / n
        self.last_len[a] = n
        self.counts[a] += n
        self.ep_sum = 0.0
        if self.t < self.n_arms:  # initial pulls: each arm once, in order
            self.arm = self.t
            self.ep_len = self.left = 1
            return
        log_t = math.log(self.t + 1)
        best, best_index = 0, -math.inf
        for b in range(self.n_arms):
            m = self.last_len[b]
            index = (self.noisy_mean[b] + math.sqrt(self.beta * log_t / (2 * m))
                     + self.beta * log_t / (self.epsilon * m))
            if index > best_index:
                best, best_index = b, index
        self.arm = best
        self.ep_len = self.left = self.counts[best]


class LeakyUCB(PrivateUCB):
    """The same code with a classic bug, for a positive control: the noise scale meant for the *mean*,
    1/(epsilon n), is added to the *sum*. A reward in an episode of length n is then protected at
    epsilon * n, not epsilon, so the claim ``pure:eps=<epsilon>`` is false for any horizon with an
    episode longer than one round; dpaudit's black-box audit through the adapter flags it.
    """

    def noise_scale(self, n):
        return 1.0 / (self.epsilon * n)  # BUG: the mean's scale, applied to the sum
