"""A locally private LinUCB as a batched dpaudit plug-in, written outside dpaudit (no ledger).

Batched contract (DESIGN.md, "The plug-in contract"): ``n_arms``, ``dim``, ``claim``,
``reset(n_runs, rng)``, ``act(t, arms)`` with ``arms`` of shape (n_runs, K, d), and
``observe(t, actions, rewards)``. Every random draw comes from the ``rng`` given to ``reset``. It
draws its noise itself (no :mod:`dpaudit.mechanisms`), so an audit judges it black-box only.

``LocalGaussianLinUCB``, K = 5 arms, d = 3, rewards in [0, 1], arm features with ||x|| <= 1:

* User t, shown the played arm's feature x_t (public: the server chose it), holds her reward r_t
  and sends m_t = r_t x_t + xi_t, xi_t ~ N(0, sigma^2 I_d), with the classical calibration
  (Dwork & Roth 2014, Thm A.1) for the L2 sensitivity Delta = max ||x|| (hi - lo) = 1:

      sigma = Delta sqrt(2 ln(1.25 / delta)) / epsilon      (4.845 at epsilon = 1, delta = 1e-5).

* The server keeps V = lam I + sum x x^T (lam = 2, this file's regulariser; public: actions and
  features only) and b = sum m_t, estimates theta = V^-1 b, and plays the arm maximising

      x^T theta + beta_t ||x||_{V^-1},
      beta_t = R sqrt(d log(1 + t / (lam d)) + 2 log(1 / alpha)) + sqrt(lam),

  R = sqrt(1/4 + sigma^2) the noisy reward's sub-Gaussian scale, alpha = 0.1; ties to the lowest arm.
  V^-1 is kept by Sherman-Morrison updates.

Why (epsilon, delta)-DP: each user's message is the Gaussian mechanism on r x (L2 sensitivity 1
for r in [0, 1], ||x|| <= 1), (epsilon, delta)-DP for epsilon <= 1 by the classical bound (at
epsilon = 1, delta = 1e-5 the exact epsilon of sigma = 4.845 is 0.752); a user sends one message,
so the protocol is (epsilon, delta)-LDP and the actions, a function of the messages and public
features, are (epsilon, delta)-DP under Table DP. Claim: ``ApproxDP(epsilon, delta)``. A feature
outside the unit ball is refused (the sensitivity assumes ||x|| <= 1), never rescaled.

For ``--protocol local`` it also has ``channel(z_batch, rng)`` (the message of a user with reward z
shown the feature e_1: every unit feature is a rotation of it, so this is the worst case),
``domain = (0, 1)``, and ``transcript()`` with ``keep_transcript``.
"""

import math

import numpy as np

from dpaudit.accountants import ApproxDP


class LocalGaussianLinUCB:
    """LDP LinUCB, Gaussian messages r x + N(0, sigma^2 I): (epsilon, delta)-DP (correct), batched."""

    reward_range = (0.0, 1.0)
    domain = (0.0, 1.0)
    keep_transcript = False

    def __init__(self, n_arms: int = 5, dim: int = 3, epsilon: float = 1.0, delta: float = 1e-5,
                 lam: float = 2.0, alpha: float = 0.1):
        if n_arms < 2 or dim < 1:
            raise ValueError("need n_arms >= 2 and dim >= 1")
        if not epsilon > 0 or not 0 < delta < 1 or not lam > 0 or not 0 < alpha < 1:
            raise ValueError("need epsilon > 0, 0 < delta < 1, lam > 0 and 0 < alpha < 1")
        self.n_arms = int(n_arms)
        self.dim = int(dim)
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.lam = float(lam)
        self.alpha = float(alpha)
        sensitivity = 1.0 * (self.reward_range[1] - self.reward_range[0])
        self.sigma = sensitivity * math.sqrt(2.0 * math.log(1.25 / self.delta)) / self.epsilon
        self.R = math.sqrt(0.25 + self.sigma ** 2)
        self.claim = ApproxDP(self.epsilon, self.delta)

    def params(self):
        return {"n_arms": self.n_arms, "dim": self.dim, "epsilon": self.epsilon, "delta": self.delta,
                "lam": self.lam, "alpha": self.alpha}

    # --- the users ----------------------------------------------------------------------------------
    def _messages(self, r, x, rng):
        return r[:, None] * x + rng.normal(0.0, self.sigma, size=x.shape)

    def channel(self, z_batch, rng):
        """Messages of users with rewards ``z_batch`` shown the feature e_1 (one user per row)."""
        z = np.asarray(z_batch, dtype=float).reshape(-1)
        x = np.zeros((z.size, self.dim))
        x[:, 0] = 1.0
        return self._messages(z, x, rng)

    # --- the server ---------------------------------------------------------------------------------
    def reset(self, n_runs, rng):
        self.n_runs = int(n_runs)
        self.rng = rng
        self.V_inv = np.broadcast_to(np.eye(self.dim) / self.lam, (self.n_runs, self.dim, self.dim)).copy()
        self.b = np.zeros((self.n_runs, self.dim))
        self._arms = None
        self._received = []

    def beta(self, t):
        d = self.dim
        return self.R * math.sqrt(d * math.log(1.0 + t / (self.lam * d)) + 2.0 * math.log(1.0 / self.alpha)) \
            + math.sqrt(self.lam)

    def act(self, t, arms):
        x = np.asarray(arms, dtype=float)
        if x.shape != (self.n_runs, self.n_arms, self.dim):
            raise ValueError(f"arms must have shape {(self.n_runs, self.n_arms, self.dim)}, got {x.shape}")
        if np.any(np.linalg.norm(x, axis=2) > 1.0 + 1e-9):
            raise ValueError("arm features must lie in the unit ball (the noise assumes ||x|| <= 1)")
        self._arms = x
        theta = np.einsum("nij,nj->ni", self.V_inv, self.b)
        mean = np.einsum("nkd,nd->nk", x, theta)
        Vx = np.einsum("nij,nkj->nki", self.V_inv, x)
        width = np.sqrt(np.maximum(np.einsum("nki,nki->nk", x, Vx), 0.0))
        return np.argmax(mean + self.beta(t) * width, axis=1)

    def observe(self, t, actions, rewards):
        r = np.asarray(rewards, dtype=float)
        lo, hi = self.reward_range
        if r.shape != (self.n_runs,) or not np.all((r >= lo) & (r <= hi)):
            raise ValueError(f"rewards must be {self.n_runs} values in [{lo}, {hi}]")
        a = np.asarray(actions)
        x = self._arms[np.arange(self.n_runs), a]
        msg = self._messages(r, x, self.rng)        # what the users send: all the server sees of r
        if self.keep_transcript:
            self._received.append(msg.copy())
        self.b += msg
        Vx = np.einsum("nij,nj->ni", self.V_inv, x)
        denom = 1.0 + np.einsum("ni,ni->n", x, Vx)
        self.V_inv -= Vx[:, :, None] * Vx[:, None, :] / denom[:, None, None]

    def transcript(self):
        """What the server received from each user, (n_runs, T, d) (set keep_transcript = True first)."""
        if not self._received:
            raise RuntimeError("no transcript kept; set keep_transcript = True before reset()")
        return np.stack(self._received, axis=1)
