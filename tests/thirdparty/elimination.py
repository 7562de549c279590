"""Private successive elimination in blocks (a third-party style port; numpy only).

Written as a small research repository would write it: one run per object, ``select_arm()`` /
``update(arm, reward)``, noise from the global ``np.random``. Not a port of dpaudit's ``dp-se``: the
schedule, the constants and the test are this file's own.

Algorithm (``BlockEliminationDP``), rewards in [0, 1], K arms, privacy budget ``epsilon``:

* Batches r = 0, 1, 2, ... In batch r every still-active arm is pulled ``n_r`` times *in a block*
  (all n_r pulls of the lowest active arm, then all of the next one, ...), with

      n_r = ceil(c_batch * 2^r * log(4 K (r + 1)^2 / beta) / epsilon),   c_batch = 4, beta = 0.05.

* At the end of batch r each active arm a has the sum S_a of its n_r rewards *of this batch*. The
  correct version releases S~_a = S_a + Lap(1/epsilon), independently for every arm, and forms the
  noisy mean m_a = S~_a / n_r.
* Confidence width (Hoeffding for a mean of n_r rewards, plus a Laplace tail bound on the noise):

      w_r = sqrt(log(4 K (r + 1)^2 / beta) / (2 n_r)) + log(2 K (r + 1)^2 / beta) / (epsilon n_r)

  and arm a is eliminated when max_b m_b - m_a > 2 w_r. Sums restart at zero in the next batch.
* When one arm is left it is played for ever.

With K = 2, epsilon = 1 the batches have n_0 = 21 and n_1 = 52 pulls per arm, so the first test
comes after round 42 and the first test that a real gap (about 0.72) can pass after round 146.

Why the correct version is epsilon-DP (Table DP: neighbouring reward tables differ in one user's
row, rewards in [0, 1]): a user's reward is observed once, enters exactly one batch sum of one arm
(L1 sensitivity 1), and that sum is released once with Lap(1/epsilon): an epsilon-DP release. The
other releases read other users' rewards only (parallel composition over the disjoint batches and
arms, adaptively: the batch schedule is a function of earlier releases), and the actions are a
function of the releases. Claim: ``pure:eps=<epsilon>``.

``SharedNoiseBlockElimination`` is the bug (see its docstring): one Laplace draw per batch, added to
every arm's sum. Its true epsilon is infinite.
"""

import math

import numpy as np

C_BATCH = 4.0
BETA = 0.05


class BlockEliminationDP:
    """Successive elimination with per-arm Laplace noise on each batch sum: epsilon-DP (correct)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0, beta=BETA, c_batch=C_BATCH):
        if n_arms < 2:
            raise ValueError("need at least two arms")
        if epsilon <= 0 or not 0 < beta < 1 or c_batch <= 0:
            raise ValueError("need epsilon > 0, 0 < beta < 1 and c_batch > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.beta = float(beta)
        self.c_batch = float(c_batch)
        self.active = list(range(self.n_arms))
        self.batch = 0
        self.batch_size = self.size_of_batch(0)
        self.block = 0          # index into self.active of the arm whose block is being played
        self.left = self.batch_size
        self.sums = np.zeros(self.n_arms)
        self.eliminated_at = {}  # arm -> batch at whose end it was eliminated
        self.last_means = None

    # --- the schedule ---------------------------------------------------------------------------
    def _log_term(self, r, c=4.0):
        return math.log(c * self.n_arms * (r + 1) ** 2 / self.beta)

    def size_of_batch(self, r):
        """n_r, the pulls of every active arm in batch r."""
        return int(math.ceil(self.c_batch * 2 ** r * self._log_term(r) / self.epsilon))

    def width(self, r):
        """w_r: the confidence width of a noisy batch mean after n_r pulls."""
        n = self.size_of_batch(r)
        return math.sqrt(self._log_term(r) / (2 * n)) + self._log_term(r, 2.0) / (self.epsilon * n)

    # --- the privacy step -------------------------------------------------------------------------
    def noisy_sums(self, sums):
        """One independent Lap(1/epsilon) per active arm's batch sum (sensitivity 1 each)."""
        return sums + np.random.laplace(0.0, 1.0 / self.epsilon, size=len(sums))

    # --- the bandit interface ---------------------------------------------------------------------
    def select_arm(self):
        if len(self.active) == 1:
            return self.active[0]
        return self.active[self.block]

    def update(self, arm, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward} outside [0, 1]")
        if len(self.active) == 1:
            return  # nothing left to learn
        if arm != self.active[self.block]:
            raise ValueError(f"expected feedback for arm {self.active[self.block]}, got arm {arm}")
        self.sums[arm] += reward
        self.left -= 1
        if self.left > 0:
            return
        self.block += 1
        self.left = self.batch_size
        if self.block == len(self.active):
            self._end_batch()

    def _end_batch(self):
        r, n = self.batch, self.batch_size
        act = np.array(self.active)
        means = self.noisy_sums(self.sums[act]) / n
        self.last_means = dict(zip(self.active, means))
        gap = means.max() - means
        keep = gap <= 2 * self.width(r)
        for a in act[~keep]:
            self.eliminated_at[int(a)] = r
        self.active = [int(a) for a in act[keep]]
        self.sums[:] = 0.0
        self.batch += 1
        self.batch_size = self.size_of_batch(self.batch)
        self.block = 0
        self.left = self.batch_size


class SharedNoiseBlockElimination(BlockEliminationDP):
    """BUG: one scalar Laplace draw per batch, added to every arm's sum (claim still ``pure:eps``).

    The author reasoned "each batch makes one release, so one draw of Lap(1/epsilon) per batch" and
    added the same draw Z to every active arm's sum. The elimination test compares differences,

        max_b m_b - m_a = (max_b (S_b + Z) - (S_a + Z)) / n_r = (max_b S_b - S_a) / n_r,

    so Z cancels: every elimination is an exact, deterministic function of the raw batch sums. On
    neighbouring tables whose batch sums put max_b S_b - S_a on either side of 2 w_r n_r (one user's
    reward moves S_a by up to 1), arm a is eliminated with probability 1 under one table and 0 under
    the other, and the action sequences differ from the next batch on. No finite epsilon (and no
    delta < 1) covers that: the true epsilon is infinite. The leak is invisible on backgrounds with
    equal arm means (nothing is ever eliminated there): only a background whose gap sits at the
    threshold 2 w_r shows it.
    """

    def noisy_sums(self, sums):
        z = np.random.laplace(0.0, 1.0 / self.epsilon)  # BUG: one draw shared by all arms
        return sums + z
