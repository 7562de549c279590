"""A local-DP click server with randomised response, as a batched plug-in written outside dpaudit.

Batched contract (``n_arms``, ``claim``, ``reset(n_runs, rng)``, ``act(t, arms)``,
``observe(t, actions, rewards)``; every draw from the ``rng`` of ``reset``) plus the members that
``dpaudit check policy ... --protocol local`` reads (README "Local DP"; the same names as dpaudit's
local-DP policies): ``channel(z_batch, rng) -> messages`` (exactly what users send), ``domain`` of
a user's datum, ``channel_table()`` for the finite channel, and ``transcript()`` with
``keep_transcript``: what the server received from each user. No ledger.

``RRClickServer``, K arms, users' rewards (click probabilities) r in [0, 1], privacy ``epsilon``:

* User t draws her click c_t ~ Bernoulli(r_t) (the identity for binary rewards) and sends
  o_t = c_t with probability p = e^eps / (1 + e^eps), else 1 - c_t (randomised response).
* The server only sees o_t; its unbiased estimate of the click is (o_t - q) / (p - q), q = 1 - p.
  It plays arms 0 .. K-1 once, then the arm with the largest index
  mean_a + sqrt(1.5 log(t + 1) / n_a) / (p - q) (this file's constants); ties to the lowest arm.

Why epsilon-LDP (and so epsilon-DP of the whole transcript, and of the actions): P(o = 1 | r) =
q + (p - q) r lies in [q, p] for every r in [0, 1], so for any two data and any message the
probabilities differ by a factor at most p / q = e^eps; a user sends one message, and the server's
state is a function of the messages. Claim: ``PureDP(epsilon)``.

``LoggingRRClickServer`` is the bug: the raw click of every 10th user is logged and used.
"""

import math

import numpy as np

from dpaudit.accountants import PureDP


class RRClickServer:
    """Randomised-response click server with a UCB on debiased clicks: epsilon-LDP (correct), batched."""

    reward_range = (0.0, 1.0)
    domain = (0.0, 1.0)
    keep_transcript = False

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0):
        if n_arms < 2 or not epsilon > 0:
            raise ValueError("need n_arms >= 2 and epsilon > 0")
        self.n_arms = int(n_arms)
        self.epsilon = float(epsilon)
        self.p = math.exp(self.epsilon) / (1.0 + math.exp(self.epsilon))
        self.claim = PureDP(self.epsilon)

    def params(self):
        return {"n_arms": self.n_arms, "epsilon": self.epsilon}

    # --- the users ----------------------------------------------------------------------------------
    def _clicks(self, z, rng):
        return (rng.random(z.shape) < z).astype(float)

    def _randomise(self, c, rng):
        keep = rng.random(c.shape) < self.p
        return np.where(keep, c, 1.0 - c)

    def channel(self, z_batch, rng):
        """What users with click probabilities ``z_batch`` send (one user per row)."""
        z = np.asarray(z_batch, dtype=float)
        return self._randomise(self._clicks(z, rng), rng)

    def channel_table(self):
        """(inputs, outputs, P[input, output]) at the domain's extremes: the channel is finite."""
        p, q = self.p, 1.0 - self.p
        return np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([[p, q], [q, p]])

    # --- the server ---------------------------------------------------------------------------------
    def reset(self, n_runs, rng):
        self.n_runs = int(n_runs)
        self.rng = rng
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.counts = np.zeros((self.n_runs, self.n_arms))
        self._rows = np.arange(self.n_runs)
        self._last = np.zeros(self.n_runs, dtype=np.int64)
        self._received = []

    def act(self, t, arms=None):
        if t < self.n_arms:
            self._last = np.full(self.n_runs, t, dtype=np.int64)
        else:
            bonus = np.sqrt(1.5 * math.log(t + 1) / self.counts) / (2 * self.p - 1)
            self._last = np.argmax(self.sums / self.counts + bonus, axis=1)
        return self._last.copy()

    def _estimates(self, t, messages, clicks):
        """The server's per-user click estimates from what it received."""
        return (messages - (1.0 - self.p)) / (2 * self.p - 1)

    def _record(self, t, messages, clicks):
        if self.keep_transcript:
            self._received.append(messages.reshape(self.n_runs, 1).copy())

    def observe(self, t, actions, rewards):
        r = np.asarray(rewards, dtype=float)
        if r.shape != (self.n_runs,) or not np.all((r >= 0.0) & (r <= 1.0)):
            raise ValueError(f"rewards must be {self.n_runs} values in [0, 1]")
        clicks = self._clicks(r, self.rng)            # on the user's device
        messages = self._randomise(clicks, self.rng)  # what she sends
        self._record(t, messages, clicks)
        # the user's click is credited to the arm the server played
        self.sums[self._rows, self._last] += self._estimates(t, messages, clicks)
        self.counts[self._rows, self._last] += 1

    def transcript(self):
        """What the server received from each user, (n_runs, T, m) (set keep_transcript = True first)."""
        if not self._received:
            raise RuntimeError("no transcript kept; set keep_transcript = True before reset()")
        return np.stack(self._received, axis=1)


class LoggingRRClickServer(RRClickServer):
    """BUG: the raw click of every 10th user is logged, and the server's estimates use it (claim still eps-LDP).

    A "quality sample" added for debugging: the client of every 10th user (t = 0, 10, 20, ...) also
    ships her raw click c_t in a log record, and the server, having the ground truth, uses c_t
    instead of the debiased message for that user ("less variance"). The log is part of what the
    server received, so ``transcript()`` has two columns: the message, and the logged click (-1
    where none was logged). (Had the author left the log out of ``transcript()``, only the central
    audit of the actions could see the leak.)

    True epsilon for a logged user: infinite. Her transcript contains c_t, and with r = 1 vs r = 0
    the click is 1 with probability 1 vs 0: no finite epsilon and no delta < 1 covers it (the
    claim's e^eps bound needs every message's probability to be positive under both data). The
    users in between are still epsilon-LDP. Through the actions alone the logged click moves an arm's
    estimate by (c - (o - q)/(p - q))/n_a, without noise for that user; the central epsilon is
    finite (the other users' randomisation makes every action sequence possible) and not derived.
    """

    log_every = 10

    def _estimates(self, t, messages, clicks):
        est = super()._estimates(t, messages, clicks)
        if t % self.log_every == 0:
            return clicks.copy()  # BUG: the logged raw click replaces the private estimate
        return est

    def _record(self, t, messages, clicks):
        if self.keep_transcript:
            logged = clicks if t % self.log_every == 0 else np.full(self.n_runs, -1.0)
            self._received.append(np.stack([messages, logged], axis=1))
