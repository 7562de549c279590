"""Epsilon-greedy on tree-counted private means (a third-party style port; numpy only).

One run per object driven through ``step(last_arm, last_reward) -> next arm`` (the first call is
``step(None, None)``), noise from the global ``np.random``. Not a port of dpaudit's mutant
``mutant-counter-double-noise``: this one has a real binary-tree counter and decaying exploration.

``TreeCounterGreedy``, rewards in [0, 1], K arms, privacy budget ``epsilon``, ``horizon`` (the
longest stream a counter must count):

* Each arm has a binary-mechanism counter (Chan, Shi & Song 2011) over *its own* reward stream:
  the node (l, j) holds the sum of the arm's rewards j 2^l .. (j + 1) 2^l - 1 plus its own
  Lap(levels/epsilon) draw, levels = floor(log2(horizon)) + 1; the noisy sum of the first n rewards
  is the sum of the nodes of n's binary decomposition. As simulation code often does, the counter
  keeps the exact sum and the noise apart: ``noise(n)`` is the sum of those nodes' draws.
* Noisy mean of arm a after n_a pulls: (S_a + noise_a(n_a)) / n_a.
* Round t (1-based): the first K rounds play arms 0 .. K-1; then with probability
  min(1, 5 K / t) a uniformly random arm, else the arm with the largest noisy mean (ties to the
  lowest).

Why the correct version is epsilon-DP (Table DP, rewards in [0, 1]): a user's reward is one element
of one arm's stream, and an element lies in at most ``levels`` nodes, each released with
Lap(levels/epsilon) (sensitivity 1 each): epsilon-DP for the node values of that arm; the other
arms' nodes hold other users' rewards (parallel composition), and every action is a function of
node values and independent exploration coins. Claim: ``pure:eps=<epsilon>``.

``DoubleDividedGreedy`` is the bug: the counter noise divided by the count twice.
"""

import math

import numpy as np


class BinaryTreeNoise:
    """The noise side of a binary-mechanism counter: node draws Lap(levels/epsilon), made when first read."""

    def __init__(self, horizon, epsilon):
        if horizon < 1 or epsilon <= 0:
            raise ValueError("need horizon >= 1 and epsilon > 0")
        self.horizon = int(horizon)
        self.levels = int(math.floor(math.log2(self.horizon))) + 1
        self.scale = self.levels / float(epsilon)
        self.nodes = {}

    def noise(self, n):
        """The noise the tree adds to the sum of the first n elements (sum over n's binary decomposition)."""
        if n > self.horizon:
            raise ValueError(f"the counter was built for {self.horizon} elements, asked for {n}")
        total, start = 0.0, 0
        for level in reversed(range(self.levels)):
            if n & (1 << level):
                key = (level, start >> level)
                if key not in self.nodes:
                    self.nodes[key] = np.random.laplace(0.0, self.scale)
                total += self.nodes[key]
                start += 1 << level
        return total


class TreeCounterGreedy:
    """Epsilon-greedy on binary-tree private means: epsilon-DP (correct)."""

    reward_range = (0.0, 1.0)
    explore_c = 5.0

    def __init__(self, n_arms=2, epsilon=1.0, horizon=100000):
        if n_arms < 2 or epsilon <= 0:
            raise ValueError("need n_arms >= 2 and epsilon > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.horizon = int(horizon)
        self.counters = [BinaryTreeNoise(self.horizon, self.epsilon) for _ in range(self.n_arms)]
        self.sums = np.zeros(self.n_arms)
        self.pulls = np.zeros(self.n_arms, dtype=int)
        self.t = 0

    def mean(self, a):
        """Arm a's private mean: the tree's noisy sum over the pull count."""
        n = int(self.pulls[a])
        return (self.sums[a] + self.counters[a].noise(n)) / n

    def step(self, last_arm, last_reward):
        if last_arm is not None:
            if not 0.0 <= last_reward <= 1.0:
                raise ValueError(f"reward {last_reward} outside [0, 1]")
            self.sums[last_arm] += last_reward
            self.pulls[last_arm] += 1
        self.t += 1
        if self.t <= self.n_arms:
            return self.t - 1
        if np.random.random() < min(1.0, self.explore_c * self.n_arms / self.t):
            return int(np.random.randint(self.n_arms))
        means = [self.mean(a) for a in range(self.n_arms)]
        return int(np.argmax(means))


class DoubleDividedGreedy(TreeCounterGreedy):
    """BUG: the counter's noise divided by the count twice (claim still ``pure:eps``).

    The author "normalised the noise to the per-sample scale" before forming the mean:
    (S_a + noise_a(n)/n) / n. The noise on the mean then has standard deviation
    sqrt(2 popcount(n)) levels / (epsilon n^2) instead of sqrt(2 popcount(n)) levels / (epsilon n),
    while one user still moves the mean by 1/n.

    True epsilon: no bound independent of the horizon. The arm's mean after n pulls times n is
    S_a(n) + noise_a(n)/n: the tree's release with every node's scale shrunk from levels/epsilon to
    levels/(epsilon n). At a power-of-two count n = 2^k the decomposition is one node, so that single
    release is a Laplace mechanism of scale levels/(epsilon n) on a sum of sensitivity 1: exactly
    (epsilon n / levels)-DP on its own, e.g. 16 epsilon/17 at n = 16 and 64 epsilon/17 at n = 64
    with the default horizon; the whole sequence of means leaks more. The actions (argmax of the
    means on the greedy rounds) are a post-processing, bounded by that, not derived exactly here.
    """

    def mean(self, a):
        n = int(self.pulls[a])
        return (self.sums[a] + self.counters[a].noise(n) / n) / n  # BUG: the noise divided twice
