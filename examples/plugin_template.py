"""A plug-in template: a private bandit policy written outside dpaudit, audited as it is.

Copy this file, keep the members the contract names (DESIGN.md, "The plug-in contract"), and run::

    dpaudit check policy examples/plugin_template.py:MyPolicy --param rho=0.5
    dpaudit describe examples/plugin_template.py:MyPolicy

or from Python: ``dpaudit.audit("examples/plugin_template.py:MyPolicy", params={"rho": 0.5})``.

The algorithm (ours, a deliberately simple explore-then-exploit with forgetting): time is cut into
blocks of ``K * m`` rounds that alternate between *explore* (play the arms round robin, m pulls
each) and *exploit* (play the arm whose noisy explore sum was largest). At the end of each explore
block, each arm's reward sum over that block is released once with Gaussian noise
sigma = 1 / sqrt(2 rho) (sensitivity 1 for rewards in [0, 1]; Azize & Basu 2023a, "Concentrated
Differential Privacy for Bandits", App. C, Lemma 4) and the block's rewards are then forgotten.
Every round feeds at most one release, so under Table DP the policy is rho-zCDP (parallel
composition over rounds, Azize & Basu 2023a, Lemma 1), and the actions are post-processing of the
releases. Exploit rounds' rewards are never used.

Releasing through :class:`dpaudit.mechanisms.GaussianMechanism` with a :class:`~dpaudit.mechanisms.Fed`
record is optional: it gives the policy a ledger, so the gray-box likelihood attack and the
per-round accounting apply too. A policy without ``ledger`` is judged by the black-box attack alone.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import ZCDP
from dpaudit.mechanisms import Fed, GaussianMechanism, Ledger


class MyPolicy:
    """Explore-then-exploit with forgetting: rho-zCDP, Gaussian noise on per-arm block sums (template).

    Noise sigma = 1/sqrt(2 rho) on each sum of rewards in [0, 1] (Azize & Basu 2023a, App. C, Lemma 4);
    each round feeds one release, so rho-zCDP per round (parallel composition, Azize & Basu 2023a, Lemma 1).
    """

    #: rewards the sensitivity analysis assumes; the audit feeds rewards only from this range
    reward_range = (0.0, 1.0)
    #: the explore schedule fixes which arm is observed, so Interactive DP (adversary's queries) is refused
    accepts_queries = False

    def __init__(self, n_arms: int = 2, rho: float = 0.5, m: int = 4) -> None:
        if n_arms < 2 or m < 1 or not rho > 0:
            raise ValueError(f"need n_arms >= 2, m >= 1 and rho > 0, got {n_arms}, {m}, {rho}")
        self.n_arms, self.rho, self.m = int(n_arms), float(rho), int(m)
        self.claim = ZCDP(self.rho)  # what the policy declares; the audit judges it
        self.mechanism = GaussianMechanism(1.0, 1.0 / math.sqrt(2 * self.rho))
        self.ledger: Ledger | None = None

    def reset(self, n_runs: int, rng: np.random.Generator) -> None:
        """Fresh state for ``n_runs`` independent runs; every random draw comes from ``rng``."""
        self.n, self.rng = int(n_runs), rng
        self.ledger = Ledger(self.n)
        self.sums = np.zeros((self.n, self.n_arms))
        self.best = np.zeros(self.n, dtype=np.int64)

    def _block(self, t: int) -> tuple[bool, int]:
        length = self.n_arms * self.m
        return (t // length) % 2 == 0, t - t % length  # (explore?, first round of the block)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        explore, start = self._block(t)
        if explore:
            return np.full(self.n, (t - start) % self.n_arms, dtype=np.int64)
        return self.best.copy()

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        explore, start = self._block(t)
        if not explore:
            return  # exploit rounds' rewards are never used
        self.sums[np.arange(self.n), actions] += rewards
        if t == start + self.n_arms * self.m - 1:  # end of the explore block: release, then forget
            noisy = np.empty_like(self.sums)
            runs = np.arange(self.n)
            for a in range(self.n_arms):
                rounds = start + a + self.n_arms * np.arange(self.m)  # the rounds that fed arm a's sum
                fed = Fed(np.repeat(runs, self.m), np.tile(rounds, self.n), np.ones((self.n * self.m, 1)))
                noisy[:, a] = self.mechanism.release(self.sums[:, a:a + 1], self.rng, ledger=self.ledger,
                                                     label=f"sum of arm {a}", step=t, fed=fed)[:, 0]
            self.best = np.argmax(noisy, axis=1)
            self.sums[:] = 0.0
