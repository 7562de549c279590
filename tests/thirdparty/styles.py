"""The awkward shapes public bandit code comes in, for the per-run adapter (numpy only).

Every class here runs the same simple, correct private algorithm, a Laplace UCB with fixed
episodes, so that only the *shape* differs:

* Episodes of fixed length ``EPISODE = 8`` rounds; the first K episodes play arms 0 .. K-1, every
  later one the arm with the largest index at its start (round t, 1-based):
  total~_a / n_a + sqrt(2 log t / n_a) + sqrt(2 E_a) log t / (epsilon n_a), n_a the arm's pulls in
  completed episodes and E_a their number; ties to the lowest arm.
* At an episode's end its reward sum is released once with Lap(1/epsilon) and added to the arm's
  noisy total total~_a (a sum of independent releases: post-processing).

Why it is epsilon-DP (Table DP, rewards in [0, 1]): each user's reward is in one episode sum
(sensitivity 1), released once with Lap(1/epsilon); episodes are disjoint and the schedule fixed
(parallel composition); the actions are functions of the releases. Claim ``pure:eps=<epsilon>``.

The shapes (each documents a form the adapter meets in the wild; they need not all be auditable):

``RewardFirstStepUCB``  ``step(last_reward, last_arm) -> next arm``: the reward comes *first*
                        (the adapter's step shape passes (last_arm, last_reward)).
``RoundFirstUCB``       ``select_arm(t)`` and ``update(t, arm, r)``: the round as the first argument of
                        the feedback call too.
``EnvParamsUCB``        ``EnvParamsUCB(env, n, params)``: objects, not keywords (an environment with
                        ``n_arms``, the horizon ``n``, a dict of parameters), built by the factory
                        ``make_env_params_ucb(n_arms=2, epsilon=1.0, n=1000)``.
``ModuleRngUCB``        draws from a module-level ``rng = np.random.default_rng()`` made at import
                        (seeded from the OS); its first draw comes after construction, at the end of
                        the first episode.
``IntEpsilonUCB``       ``epsilon=0`` as its default, an int; 0 switches the noise off (the author's
                        "non-private baseline" switch), so the default is *not* private.
"""

import math

import numpy as np

EPISODE = 8

#: the module-level generator of ModuleRngUCB: made at import, seeded from the OS
rng = np.random.default_rng()


class _FixedEpisodeCore:
    """The shared algorithm: state and the two steps (what to play, what to learn)."""

    def _setup(self, n_arms, epsilon, laplace):
        if n_arms < 2 or not epsilon >= 0:
            raise ValueError("need n_arms >= 2 and epsilon >= 0")
        self._k = int(n_arms)
        self._eps = epsilon
        self._laplace = laplace          # a function scale -> one Laplace(0, scale) draw
        self._totals = np.zeros(self._k)
        self._counts = np.zeros(self._k)
        self._episodes = np.zeros(self._k)
        self._played = 0
        self._arm = 0
        self._left = EPISODE
        self._sum = 0.0

    def _next_arm(self):
        return self._arm

    def _learn(self, reward):
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"reward {reward} outside [0, 1]")
        self._sum += reward
        self._played += 1
        self._left -= 1
        if self._left:
            return
        a = self._arm
        noise = self._laplace(1.0 / self._eps) if self._eps > 0 else 0.0
        self._totals[a] += self._sum + noise
        self._counts[a] += EPISODE
        self._episodes[a] += 1
        self._sum = 0.0
        self._left = EPISODE
        done = self._played // EPISODE
        if done < self._k:
            self._arm = done
            return
        log_t = math.log(self._played + 1)
        n = self._counts
        eps = self._eps if self._eps > 0 else math.inf
        index = self._totals / n + np.sqrt(2 * log_t / n) + np.sqrt(2 * self._episodes) * log_t / (eps * n)
        self._arm = int(np.argmax(index))


def _np_laplace(scale):
    return np.random.laplace(0.0, scale)


class RewardFirstStepUCB(_FixedEpisodeCore):
    """``step(last_reward, last_arm)``: reward first, then the arm it was for; returns the next arm."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0):
        self.n_arms = n_arms
        self.epsilon = epsilon
        self._setup(n_arms, epsilon, _np_laplace)

    def step(self, last_reward, last_arm):
        if last_arm is not None:
            if last_arm != self._arm:
                raise ValueError(f"feedback for arm {last_arm}, but arm {self._arm} was played")
            self._learn(last_reward)
        return self._next_arm()


class RoundFirstUCB(_FixedEpisodeCore):
    """``select_arm(t)`` and ``update(t, arm, r)``, rounds counted from 1."""

    reward_range = (0.0, 1.0)

    def __init__(self, K=2, epsilon=1.0):
        self.K = K
        self.epsilon = epsilon
        self._setup(K, epsilon, _np_laplace)
        self._t = 0

    def select_arm(self, t):
        if t != self._t + 1:
            raise ValueError(f"expected round {self._t + 1}, got {t}")
        return self._next_arm()

    def update(self, t, arm, r):
        if t != self._t + 1:
            raise ValueError(f"expected round {self._t + 1}, got {t}")
        self._t = t
        self._learn(r)


class BernoulliEnv:
    """The small environment object EnvParamsUCB expects (only ``n_arms`` is read)."""

    def __init__(self, means):
        self.means = list(means)
        self.n_arms = len(self.means)

    def pull(self, arm):
        return float(np.random.random() < self.means[arm])


class EnvParamsUCB(_FixedEpisodeCore):
    """``EnvParamsUCB(env, n, params)``: an environment object, the horizon and a dict of parameters."""

    reward_range = (0.0, 1.0)

    def __init__(self, env, n, params):
        self.env = env
        self.n = n
        self.params = dict(params)
        self.epsilon = float(self.params.get("epsilon", 1.0))
        self._setup(env.n_arms, self.epsilon, _np_laplace)

    def get_action(self):
        return self._next_arm()

    def feedback(self, arm, reward):
        self._learn(reward)


def make_env_params_ucb(n_arms=2, epsilon=1.0, n=1000):
    """The factory the repository's scripts call: ``make_env_params_ucb(n_arms=2, epsilon=1.0, n=1000)``."""
    env = BernoulliEnv([0.5] * int(n_arms))
    return EnvParamsUCB(env, n, {"epsilon": epsilon})


class ModuleRngUCB(_FixedEpisodeCore):
    """Draws its Laplace noise from the module-level ``rng`` (made at import, seeded from the OS)."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=1.0):
        self.n_arms = n_arms
        self.epsilon = epsilon
        self._setup(n_arms, epsilon, lambda scale: rng.laplace(0.0, scale))

    def select_arm(self):
        return self._next_arm()

    def update(self, arm, reward):
        self._learn(reward)


class IntEpsilonUCB(_FixedEpisodeCore):
    """``epsilon=0`` (an int) by default; 0 means "no noise", any positive value the private algorithm."""

    reward_range = (0.0, 1.0)

    def __init__(self, n_arms=2, epsilon=0):
        self.n_arms = n_arms
        self.epsilon = epsilon
        self._setup(n_arms, epsilon, _np_laplace)

    def select_arm(self):
        return self._next_arm()

    def update(self, arm, reward):
        self._learn(reward)
