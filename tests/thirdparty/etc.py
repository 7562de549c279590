"""Private explore-then-commit (a third-party style port; numpy only).

One run per object, ``pull()`` for the arm to play and ``receive_reward(arm, reward)`` for the
feedback, noise from the global ``np.random``, and its own exploration length (not dpaudit's
``dp-etc``, which explores a fixed 500 pulls per arm and noises means).

``PrivateETC``, rewards in [0, 1], K arms, horizon ``T``, privacy budget ``epsilon``:

* Exploration length per arm (the T^(2/3) rate of explore-then-commit plus a privacy term):

      m = ceil(0.25 (T / K)^(2/3) (log T)^(1/3) + 2 log(T) / epsilon)

  e.g. m = 65 for T = 2000, K = 2, epsilon = 1 (commit at round 130), and m = 12 for T = 48.
* Rounds 0 .. K m - 1 play the arms round robin (arm t mod K); arm a's exploration sum S_a.
* At round K m the policy releases S~_a = S_a + Lap(1/epsilon) for every arm, independently, and
  commits to argmax_a S~_a (all arms have m pulls, so this is the argmax of the noisy means) for the
  rest of the horizon. Ties go to the lowest arm (probability 0).

Why the correct version is epsilon-DP (Table DP, rewards in [0, 1]): one user's reward enters one
arm's exploration sum (L1 sensitivity 1), released once with Lap(1/epsilon); the arms' sums are
disjoint (parallel composition), the exploration actions do not depend on the data, and the commit
is a function of the noisy sums. Claim: ``pure:eps=<epsilon>``.

``WrongScaleETC`` is the bug: the mean's noise scale on the sum (true epsilon = epsilon * m).
"""

import math

import numpy as np


def exploration_length(T, n_arms, epsilon):
    """m, the exploration pulls of each arm (this file's formula)."""
    if T < 2:
        raise ValueError("need a horizon T >= 2")
    return max(1, int(math.ceil(0.25 * (T / n_arms) ** (2 / 3) * math.log(T) ** (1 / 3)
                                + 2 * math.log(T) / epsilon)))


class PrivateETC:
    """Explore-then-commit with Laplace(1/epsilon) on each arm's exploration sum: epsilon-DP (correct)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0, T=2000):
        if n_arms < 2 or epsilon <= 0:
            raise ValueError("need n_arms >= 2 and epsilon > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.T = int(T)
        self.m = exploration_length(self.T, self.n_arms, self.epsilon)
        self.explore_rounds = self.m * self.n_arms
        self.t = 0
        self.totals = np.zeros(self.n_arms)
        self.committed = None
        self.noisy_totals = None

    def noise_scale(self):
        """Laplace scale on one arm's exploration sum: its sensitivity (1) over epsilon."""
        return 1.0 / self.epsilon

    def pull(self):
        if self.committed is not None:
            return self.committed
        return self.t % self.n_arms

    def receive_reward(self, arm, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward} outside [0, 1]")
        if self.committed is None:
            self.totals[arm] += reward
        self.t += 1
        if self.committed is None and self.t == self.explore_rounds:
            noise = np.random.laplace(0.0, self.noise_scale(), size=self.n_arms)
            self.noisy_totals = self.totals + noise
            self.committed = int(np.argmax(self.noisy_totals))


class WrongScaleETC(PrivateETC):
    """BUG: the noise scale of the *mean*, 1/(epsilon m), added to the *sum* (claim still ``pure:eps``).

    The author remembered that "the sensitivity of an average of m rewards is 1/m" and used the
    scale 1/(epsilon m), but adds the noise to the exploration *sum*, whose sensitivity is 1. Each
    noisy sum is then an (epsilon m)-DP release, and so is the vector of all of them (disjoint arms).

    True epsilon (K = 2): epsilon m + log((2b + m - 1)/(2b + m)) with b = 1/(epsilon m), i.e. just
    below epsilon m: 11.91 at T = 48 (m = 12) and 64.98 at T = 2000 (m = 65) for epsilon = 1. Upper
    bound epsilon m: the Laplace mechanism above. The only data-dependent action is the commit
    {S_0 - S_1 + (Z_0 - Z_1) > 0}, Z_i ~ Lap(b); X = Z_1 - Z_0 has the tail
    P(X > x) = (2b + x)/(4b) e^(-x/b) (x >= 0). On a background with S_1 - S_0 = x (arm 0 behind),
    one user raising S_0 by 1 changes P(commit to 0) from P(X > x) to P(X > x - 1), a ratio
    (2b + x - 1)/(2b + x) e^(1/b), increasing in x; rewards in [0, 1] give x <= m, so the worst pair
    (arm 1 all ones, arm 0 all zeros, the user's 0 raised to 1) attains the value above, the true
    epsilon of the commit. (With more arms epsilon m still bounds it; not derived exactly.)
    """

    def noise_scale(self):
        return 1.0 / (self.epsilon * self.m)  # BUG: the mean's scale, applied to the sum
