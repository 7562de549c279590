"""A one-run local-DP click bandit, written the way public code is (numpy only; one object per run,
noise from the global ``np.random``), for the per-run adapter's ``randomizer`` option.

``RROneRunUCB``, K arms, users' data (click probabilities) z in [0, 1], privacy ``epsilon``:

* ``privatize(z)`` is what runs on user t's device: her click c ~ Bernoulli(z), sent as o = c with
  probability p = e^eps / (1 + e^eps), else 1 - c (randomised response). It returns the message.
* The server's ``update(arm, reward)`` calls ``privatize(reward)`` for the round's user and learns
  only from the message: its estimate of her click is (o - q) / (p - q), q = 1 - p.
* ``select_arm()`` plays arms 0 .. K-1 once, then the largest mean_a + sqrt(2 log(t + 1) / n_a) / (p - q)
  (t the number of users so far); ties to the lowest arm.

Why epsilon-LDP: P(o = 1 | z) = q + (p - q) z lies in [q, p] for every z in [0, 1], so for any message
and any two data the probabilities differ by a factor at most p / q = e^eps; a user sends one
message, and the server's state is a function of the messages (so the actions are epsilon-DP too).
Claim ``pure:eps=<epsilon>``.

Audited as it is::

    dpaudit check policy tests/thirdparty/ldp_onerun.py:RROneRunUCB --protocol local \\
        --adapter per-run:randomizer=privatize,domain=0,1 --claim pure:eps=1

``TwoReportsRROneRunUCB`` is the bug (see its docstring): true epsilon 2 epsilon.
"""

import math

import numpy as np


class RROneRunUCB:
    """Randomised response on the device, a UCB on the debiased clicks at the server: epsilon-LDP (correct)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0):
        if n_arms < 2 or not epsilon > 0:
            raise ValueError("need n_arms >= 2 and epsilon > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.p = math.exp(self.epsilon) / (1.0 + math.exp(self.epsilon))
        self.sums = np.zeros(self.n_arms)
        self.counts = np.zeros(self.n_arms)
        self.t = 0

    # --- the user's device ----------------------------------------------------------------------
    def _respond(self, click):
        return click if np.random.random() < self.p else 1.0 - click

    def privatize(self, z):
        """The message a user with click probability z sends."""
        click = float(np.random.random() < z)
        return self._respond(click)

    def _estimate(self, message):
        return (message - (1.0 - self.p)) / (2.0 * self.p - 1.0)

    # --- the server -----------------------------------------------------------------------------
    def select_arm(self):
        if self.t < self.n_arms:
            return self.t
        bonus = np.sqrt(2.0 * math.log(self.t + 1) / self.counts) / (2.0 * self.p - 1.0)
        return int(np.argmax(self.sums / self.counts + bonus))

    def update(self, arm, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward} outside [0, 1]")
        message = self.privatize(reward)  # all the server ever sees of this user
        self.sums[arm] += self._estimate(message)
        self.counts[arm] += 1
        self.t += 1


class TwoReportsRROneRunUCB(RROneRunUCB):
    """BUG: each user sends two independent randomised responses of her click, averaged "to halve the variance".

    Each report is epsilon-LDP, but a user now sends both: by composition the pair is (2 epsilon)-LDP,
    and the bound is reached. At the domain's ends (z = 1: c = 1; z = 0: c = 0) the message is 1 with
    probability p^2 against q^2, a ratio (p / q)^2 = e^(2 epsilon). True epsilon: 2 epsilon (claim still
    ``pure:eps=<epsilon>``). The server's estimate is unbiased all the same, so the bandit works.
    """

    def privatize(self, z):
        click = float(np.random.random() < z)
        return 0.5 * (self._respond(click) + self._respond(click))  # BUG: two reports of one click
