"""Private UCB on episode counters grown by a factor 1.5 (a third-party style port; numpy only).

One run per object, ``choose_arm()`` / ``update(arm, reward)``, noise from the global
``np.random``. Its schedule is this file's own, not dpaudit's per-arm doubling: *global* episodes
whose lengths grow geometrically by 1.5,

    L_k = ceil(L0 * 1.5^k),  L0 = 4   (4, 6, 9, 14, 21, 31, 46, 69, ...),

each episode playing one arm throughout.

``EpisodicLaplaceUCB``, rewards in [0, 1], K arms, privacy budget ``epsilon``:

* Episodes 0 .. K-1 play arms 0 .. K-1 in order; every later episode plays the arm with the largest
  index, computed once at the episode's start (round t, 1-based t = rounds played + 1):

      index_a = mu~_a + sqrt(1.25 log t / n_a) + 2 log t / (epsilon n_a),

  ties to the lowest arm.
* During an episode the played arm's *episode counter* accumulates the reward sum and the count.
  At the episode's end the counter's sum is released once, S~ = sum + Lap(1/epsilon), the arm's
  statistic becomes mu~_a = S~ / n_a with n_a the counter's count (forgetting: only the last episode
  of each arm is used), and the counter is reset to zero.

Why the correct version is epsilon-DP (Table DP, rewards in [0, 1]): each user's reward enters one
episode counter, released once with Lap(1/epsilon) on a sum of L1 sensitivity 1; the episode
schedule is fixed and the arm of each episode a function of earlier releases, so by (adaptive)
parallel composition over the disjoint episodes the actions are epsilon-DP. Rewards of an episode
the horizon cuts short are never released. Claim: ``pure:eps=<epsilon>``.

``NoResetEpisodicUCB`` is the bug: the counter is never reset, so rewards are reused in every later
release of their arm and the loss composes (see its docstring).
"""

import math

import numpy as np

L0 = 4
GROWTH = 1.5


def episode_length(k, first=L0, growth=GROWTH):
    """L_k, the length of global episode k (0-based)."""
    return int(math.ceil(first * growth ** k))


class EpisodicLaplaceUCB:
    """UCB with Laplace-noised episode counters, global episodes grown by 1.5: epsilon-DP (correct)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0):
        if n_arms < 2 or epsilon <= 0:
            raise ValueError("need n_arms >= 2 and epsilon > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.mu = np.zeros(self.n_arms)          # noisy mean of each arm's last released counter
        self.n = np.ones(self.n_arms)            # the count behind it
        self.releases = np.zeros(self.n_arms, dtype=int)
        self.counter_sum = np.zeros(self.n_arms)
        self.counter_n = np.zeros(self.n_arms, dtype=int)
        self.t = 0
        self.episode = 0
        self.arm = 0
        self.left = episode_length(0)

    def choose_arm(self):
        return self.arm

    def update(self, arm, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward} outside [0, 1]")
        a = self.arm  # the episode's arm (the one this policy played)
        self.counter_sum[a] += reward
        self.counter_n[a] += 1
        self.t += 1
        self.left -= 1
        if self.left > 0:
            return
        self.release(a)
        self.episode += 1
        self.left = episode_length(self.episode)
        if self.episode < self.n_arms:
            self.arm = self.episode
            return
        log_t = math.log(self.t + 1)
        index = self.mu + np.sqrt(1.25 * log_t / self.n) + 2.0 * log_t / (self.epsilon * self.n)
        self.arm = int(np.argmax(index))

    def release(self, a):
        """Release arm a's episode counter with Lap(1/epsilon) and start a fresh one."""
        noisy = self.counter_sum[a] + np.random.laplace(0.0, 1.0 / self.epsilon)
        self.mu[a] = noisy / self.counter_n[a]
        self.n[a] = self.counter_n[a]
        self.releases[a] += 1
        self.counter_sum[a] = 0.0
        self.counter_n[a] = 0


class NoResetEpisodicUCB(EpisodicLaplaceUCB):
    """BUG: the episode counter is not reset after its release (claim still ``pure:eps``).

    ``release`` forgets the two lines that zero the counter, so arm a's counter holds *all* of its
    rewards so far: each release is Lap(1/epsilon) on the arm's running sum, and mu~_a becomes a
    running mean (its regret is, if anything, better, which is why such a bug survives). A reward
    observed in arm a's j-th episode now feeds releases j, j+1, ..., E_a of that arm.

    True epsilon: each of those releases is an epsilon-DP Laplace release of a sum that the user
    moves by 1, so by composition the vector of arm a's releases is (E epsilon)-DP with E the
    number of releases a reward feeds, and no better (the Laplace privacy losses of the E releases
    reach epsilon each together with positive probability): the release-level epsilon is exactly
    epsilon * E, E = the number of the arm's episodes from the user's on. With this schedule and
    K = 2 there are 4 complete episodes by round 48 and 11 by round 1000, so for a user of an arm's
    first episode E reaches 3 at T = 48 and 10 at T = 1000 (every episode but the other arm's
    first one, when UCB keeps choosing the same arm). The actions are a post-processing of the
    releases, so their epsilon is at most that; it is not derived in closed form. A simulation of
    the view (``benchmarks/validation/thirdparty_ucb_counter_sim.py``: user 0's reward 0 vs 1 on constant
    backgrounds, events selected on 1e5 runs, counted on 2e6 fresh runs per side) puts it at about
    2.2-2.3 at T = 300 (lower bound 2.2 at 95%), where the correct class's best events sit at its
    claim (log ratios 0.97-1.01).
    """

    def release(self, a):
        noisy = self.counter_sum[a] + np.random.laplace(0.0, 1.0 / self.epsilon)
        self.mu[a] = noisy / self.counter_n[a]
        self.n[a] = self.counter_n[a]
        self.releases[a] += 1
        # BUG: the counter is not reset, so its rewards are released again at the arm's next episode end
