"""The UCB family: adaptive-episode private UCB (Azize & Basu 2023a, App. C; Azize & Basu 2023b, Sec. 4) and baselines.

The papers are Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits", and Azize &
Basu (2023b), "Rényi Differentially Private Bandits" (full references: :mod:`dpaudit.papers`).
All private variants follow one blueprint (Azize & Basu 2023a, App. C-B, Alg. 4; Azize & Basu 2023b, Alg. 2):

1. *Initialisation*: play each arm once (arms 0, 1, ..., K-1 in that order), so t = K.
2. *Arm-dependent doubling*: episode l starts at round t_l = t + 1 (1-based) and plays
   a_l = argmax_a I_a(t_l - 1, beta) until N_{a_l}(t) = 2 N_{a_l}(t_l - 1), i.e. for
   N_{a_l}(t_l - 1) rounds.
3. *Forgetting*: the index of arm a uses only the rewards of the last episode in which a was
   played (its initial pull counts as an episode of length 1).
4. *Noise*: the mean of that episode is released once, when the episode ends, through a
   mechanism of :mod:`dpaudit.mechanisms`; the stored noisy mean is reused by every later index
   until the arm's next episode ends. Each round therefore feeds exactly one release (rounds of
   an episode cut short by the horizon feed none), which is what the privacy lemma (Azize & Basu 2023a,
   Lemma 1; Azize & Basu 2023b, Lemma 11) needs.

Index of Azize & Basu (2023a), Eq. (14) / Azize & Basu (2023b), Eq. (6), with n the last episode's length::

    I_a = mu_hat_a + N(0, c / n^2) + sqrt((1/(2n) + 2c/n^2) beta log t_l)

where c = 1/(2 rho) for rho-zCDP (Azize & Basu 2023a, App. C-B), c = alpha/(2 eps) for (alpha, eps)-RDP
(Azize & Basu 2023b, Alg. 2) and c = 2 log(1.25/delta)/eps^2 for (eps, delta)-DP (Azize & Basu 2023a,
App. C-E, Thm 18).

Choices the papers leave open, made here:

- The papers write the last episode's length as N_a(t_l - 1)/2. That is exact for every episode
  after the initial pull; for the initial pull (one reward, N_a = 1) we use its true length 1,
  i.e. the mean's true sensitivity, not 1/2 (which would double the noise of the first index).
- The mechanism releases the episode's reward *sum* (L2 sensitivity 1 for rewards in [0, 1],
  noise N(0, c)); the index uses sum/n, which is exactly mu_hat + N(0, c/n^2) of Eq. (14). The
  ledger therefore records centre = the episode sum, coefficient 1 per fed round, and noise scale
  sqrt(c) (= 1/sqrt(2 rho) for AdaC-UCB); the paper's sigma_{a,l} is that scale divided by n.
- Ties in the argmax go to the lowest arm index; rewards must lie in [0, 1] (refused otherwise).
- The noise of the k-th release of arm a in run i is the (i, a) entry of the k-th block of
  standard draws from the policy's generator (blocks drawn on first use, in order). This makes the
  per-step path and the episode-level fast path (``plan``/``complete``, used by
  :func:`dpaudit.simulate.simulate`) consume randomness identically, so on fixed inputs both give
  the same trajectory for the same seed. It costs 8 K (log2 T + 2) bytes per run.

AdaP-UCB (pure eps-DP) is the blueprint with Laplace noise of reference [8] of Azize & Basu (2023a) (Azize &
Basu 2022): the episode sum gets Lap(1/eps) (L1 sensitivity 1), i.e. the mean Lap(1/(eps n)), and
the bonus is sqrt(beta log t_l / (2n)) + beta log t_l / (eps n); the second term is the Laplace
tail P(Lap(b) > b beta log t) = t^-beta / 2 with b = 1/(eps n).
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.accountants import RDP, ZCDP, ApproxDP, PureDP
from dpaudit.errors import DPAuditError, check_delta, check_int, check_order, check_positive
from dpaudit.mechanisms import Fed, GaussianMechanism, LaplaceMechanism, PreDrawn
from dpaudit.mechanisms.additive import AdditiveMechanism
from dpaudit.policies.base import Policy, check_rewards
from dpaudit.policies.registry import register

__all__ = ["EpisodeUCB", "AdaCUCB", "AdaRUCB", "AdaEDUCB", "AdaPUCB", "UCB1"]


def _fast_rewards(rewards: object, n_runs: int, lo: float, hi: float, who: str, t: int) -> np.ndarray:
    """``check_rewards`` with a quick path: min/max in range (NaN fails both) means valid."""
    r = np.asarray(rewards, dtype=float)
    if r.shape == (n_runs,) and r.min() >= lo and r.max() <= hi:
        return r
    return check_rewards(r, n_runs, (lo, hi), who, t)


@register("ucb-episodes", family="ucb")
class EpisodeUCB(Policy):
    """UCB with adaptive episodes and forgetting, no noise: the non-private twin of AdaC-UCB (Azize & Basu 2023a, Sec. VII-A).

    Same episodes (per-arm doubling after one initial pull per arm) and forgetting as the private
    variants; the index is mu_hat_a + sqrt(beta log t_l / (2 n)) on the last episode's mean.
    ``beta`` is the optimism parameter (the theorem of Azize & Basu 2023a needs beta > 3; its experiments use 1).
    """

    reward_range = (0.0, 1.0)
    #: the protocol its claim is about (DESIGN.md, "Policy"): Table DP, as Azize & Basu (2023a) prove the AdaC blueprint
    notion = "table"
    fast_path = True  # offers plan()/complete() for dpaudit.simulate's episode-level path
    valid_actions = True  # act() returns arms in [0, K) by construction (simulate skips its check)
    non_private_twin = "ucb-episodes"
    noise_kind: str | None = None  # "gaussian" / "laplace" for the private variants
    _mech: AdditiveMechanism | None = None  # the mechanism applied to an episode's reward sum

    def __init__(self, n_arms: int = 2, beta: float = 4.0) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self.beta = check_positive("beta", beta)
        self._params = {"n_arms": self.n_arms, "beta": self.beta}

    # ---- parameters of the index -------------------------------------------------------------
    def _bonus(self, n: np.ndarray, log_t: np.ndarray) -> np.ndarray:
        """Exploration bonus for last-episode lengths ``n`` (m, K) at log t_l (m, 1)."""
        return np.sqrt(self.beta * log_t / (2.0 * n))

    def twin_params(self) -> dict[str, object]:
        """Parameters of the non-private twin with the same arms and optimism."""
        return {"n_arms": self.n_arms, "beta": self.beta}

    # ---- state ------------------------------------------------------------------------------
    def _reset(self) -> None:
        n, K = self.n_runs, self.n_arms
        self.counts = np.zeros((n, K), dtype=np.int64)  # N_a(t)
        self.last_len = np.ones((n, K), dtype=np.int64)  # length of the arm's last episode
        self.stat = np.zeros((n, K))  # released (noisy) mean of that episode
        self.releases = np.zeros((n, K), dtype=np.int64)  # episodes of the arm released so far
        self.cur = np.zeros(n, dtype=np.int64)  # arm of the current episode
        self.ep_start = np.zeros(n, dtype=np.int64)  # its first round (0-based)
        self.ep_end = np.ones(n, dtype=np.int64)  # one past its last round
        self.ep_sum = np.zeros(n)
        self._t = 0
        self._next_end = 1
        self._blocks: np.ndarray | None = None  # (levels, n_runs, K) standard draws
        self._levels = 0

    def _draws(self, runs: np.ndarray, arms: np.ndarray) -> np.ndarray:
        """Standard noise draws for the next release of (run, arm): entry (run, arm) of block k."""
        level = self.releases[runs, arms]
        need = int(level.max()) + 1 if level.size else 0
        if need > self._levels:
            shape = (need - self._levels, self.n_runs, self.n_arms)
            new = []
            for _ in range(shape[0]):  # one (n, K) block per level, drawn in level order
                if self.noise_kind == "gaussian":
                    new.append(self.rng.standard_normal(shape[1:]))
                else:
                    new.append(self.rng.laplace(0.0, 1.0, shape[1:]))
            blocks = np.stack(new)
            self._blocks = blocks if self._blocks is None else np.concatenate([self._blocks, blocks])
            self._levels = need
        return self._blocks[level, runs, arms]

    def _release(self, runs: np.ndarray, arms: np.ndarray, sums: np.ndarray, start: np.ndarray,
                 stop: np.ndarray) -> np.ndarray:
        """The index statistic of each finished episode: its (noisy) reward sum."""
        if self._mech is None:
            return sums
        z = self._draws(runs, arms)
        label = f"{self.name}: episode reward sum"
        if not (self.ledger is not None and self.ledger.enabled):
            return self._mech.release(sums, PreDrawn(z), ledger=None, label=label)
        out = np.empty(runs.size)
        steps = stop - 1
        order = np.argsort(steps, kind="stable")
        bounds = np.flatnonzero(np.diff(steps[order])) + 1
        for g in np.split(order, bounds):  # one release per end step (the ledger's step is a scalar)
            out[g] = self._mech.release(
                sums[g], PreDrawn(z[g]), ledger=self.ledger, label=label, step=int(steps[g[0]]),
                runs=runs[g], fed=Fed.interval(start[g], stop[g], 1.0), arm=arms[g],
            )
        return out

    # ---- the blueprint ----------------------------------------------------------------------
    def complete(self, runs: np.ndarray, sums: np.ndarray) -> None:
        """The current episodes of ``runs`` ended with reward sums ``sums``: release, then plan the next."""
        runs = np.asarray(runs, dtype=np.int64)
        if runs.size == 0:
            return
        sums = np.asarray(sums, dtype=float).reshape(runs.size)
        length = self.ep_end[runs] - self.ep_start[runs]
        lo, hi = self.reward_range
        # block sums are prefix-sum differences, exact up to rounding: allow (and clip) 1e-9 per reward
        tol = 1e-9 * max(1.0, abs(lo), abs(hi)) * length
        if not (np.all(sums >= lo * length - tol) and np.all(sums <= hi * length + tol)):  # NaN fails too
            raise DPAuditError(
                f"an episode's reward sum is outside [{lo:g}, {hi:g}] x its length: rewards leave [{lo:g}, {hi:g}], "
                f"the range {self.name}'s sensitivity assumes."
            )
        self._complete(runs, np.clip(sums, lo * length, hi * length))

    def _complete(self, runs: np.ndarray, sums: np.ndarray) -> None:
        """:meth:`complete` for sums whose rewards were each checked already (the per-step path)."""
        arms = self.cur[runs]
        start = self.ep_start[runs]
        stop = self.ep_end[runs]
        length = stop - start
        value = self._release(runs, arms, sums, start, stop)
        self.stat[runs, arms] = value / length
        self.last_len[runs, arms] = length
        self.counts[runs, arms] += length
        self.releases[runs, arms] += 1
        # next episode: initial pulls first, then the argmax of the index (Alg. 4, lines 5-7)
        nxt = stop
        if nxt.min() >= self.n_arms:  # every run is past its initial pulls (all but the first K steps)
            arm_next = self._best_index(runs, nxt)
            length_next = self.counts[runs, arm_next]
        else:
            arm_next = np.minimum(nxt, self.n_arms - 1)
            later = nxt >= self.n_arms
            if later.any():
                arm_next[later] = self._best_index(runs[later], nxt[later])
            length_next = np.where(later, self.counts[runs, arm_next], 1)
        self.cur = self.cur.copy()  # copy on write: act() hands out self.cur without copying
        self.cur[runs] = arm_next
        self.ep_start[runs] = nxt
        self.ep_end[runs] = nxt + length_next
        self.ep_sum[runs] = 0.0

    def _best_index(self, runs: np.ndarray, nxt: np.ndarray) -> np.ndarray:
        """argmax of the index of ``runs`` whose next episode starts at round ``nxt`` (t_l, 1-based: nxt + 1)."""
        log_t = np.log(nxt + 1.0)[:, None]
        return np.argmax(self.stat[runs] + self._bonus(self.last_len[runs].astype(float), log_t), axis=1)

    def plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each run's current episode as (start (n,), arms (n, 1), lengths (n, 1))."""
        return self.ep_start, self.cur[:, None], (self.ep_end - self.ep_start)[:, None]

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if t != self._t:
            raise DPAuditError(f"{self.name} expects steps 0, 1, 2, ... in order; got step {t} where {self._t} was next.")
        return self.cur  # never modified in place (complete() replaces it)

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        lo, hi = self.reward_range
        self._observe(t, actions, _fast_rewards(rewards, self.n_runs, lo, hi, self.name, t))

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        # The reward is credited to the arm this policy chose (under Interactive DP ``actions``
        # are the adversary's queries, which the policy does not see).
        self.ep_sum += rewards
        self._t = t + 1
        if self._t >= self._next_end:
            done = np.flatnonzero(self.ep_end == self._t)
            if done.size:
                self._complete(done, self.ep_sum[done])  # each reward was range-checked as it came
            self._next_end = int(self.ep_end.min())


class _EpsAlias:
    @property
    def eps(self) -> float:
        """Alias of ``epsilon``."""
        return self.epsilon  # type: ignore[attr-defined]


class _GaussianEpisodeUCB(EpisodeUCB):
    noise_kind = "gaussian"
    variance: float  # c: the variance of the noise on an episode's reward sum

    def _bonus(self, n, log_t):
        return np.sqrt((1.0 / (2.0 * n) + 2.0 * self.variance / n**2) * self.beta * log_t)

    def noise_std_of_mean(self, n: np.ndarray | int) -> np.ndarray:
        """sigma_{a,l} of Eq. (14) for a last episode of length n."""
        return math.sqrt(self.variance) / np.asarray(n, dtype=float)


@register("adac-ucb", family="ucb")
class AdaCUCB(_GaussianEpisodeUCB):
    """AdaC-UCB: rho-zCDP UCB with per-arm doubling, forgetting and Gaussian noise (Azize & Basu 2023a, App. C, Alg. 4, Eq. 14).

    sigma_{a,l}^2 = 1/(2 rho n^2) on the last episode's mean (n its length); bonus
    sqrt((1/(2n) + 1/(rho n^2)) beta log t_l). Claim: rho-zCDP (Azize & Basu 2023a, Thm 12) for rewards in [0, 1],
    under Table DP: Azize & Basu (2023a) state it in the Interactive form (Def. 4), which implies Table DP (Prop. 2(a))
    and, for its non-overlapping adaptive episodes (Lemma 1), holds with it (the remark after Prop. 2).
    ``--protocol interactive`` audits the Interactive form.
    """

    def __init__(self, n_arms: int = 2, rho: float = 1.0, beta: float = 4.0) -> None:
        super().__init__(n_arms, beta)
        self.rho = check_positive("rho", rho)
        self._mech = GaussianMechanism.for_zcdp(self.rho, sensitivity=1.0)
        self.variance = 1.0 / (2.0 * self.rho)
        self.claim = ZCDP(self.rho)
        self._params["rho"] = self.rho


@register("adar-ucb", family="ucb")
class AdaRUCB(_EpsAlias, _GaussianEpisodeUCB):
    """AdaR-UCB: (alpha, eps)-RDP UCB with per-arm doubling, forgetting and Gaussian noise (Azize & Basu 2023b, Alg. 2, Eq. 6).

    sigma_{a,l}^2 = alpha/(2 eps n^2); bonus sqrt((1/(2n) + alpha/(eps n^2)) beta log t_l).
    Claim: (alpha, eps)-RDP at the single order alpha (Azize & Basu 2023b, Thm 4), under View DP: Azize & Basu's (2023b)
    Def. 3 takes neighbouring reward sequences that differ in one step (the View DP of Azize & Basu 2023a, which Table DP
    implies, Prop. 1(c)). alpha must be finite.
    """

    notion = "view"

    def __init__(self, n_arms: int = 2, alpha: float = 2.0, epsilon: float = 1.0, beta: float = 4.0) -> None:
        super().__init__(n_arms, beta)
        self.alpha = check_order(alpha, finite_for="AdaR-UCB")
        self.epsilon = check_positive("epsilon", epsilon)
        self._mech = GaussianMechanism.for_rdp(self.alpha, self.epsilon, sensitivity=1.0)
        self.variance = self.alpha / (2.0 * self.epsilon)
        self.claim = RDP.point(self.alpha, self.epsilon)
        self._params.update(alpha=self.alpha, epsilon=self.epsilon)


@register("adaed-ucb", family="ucb")
class AdaEDUCB(_EpsAlias, _GaussianEpisodeUCB):
    """(eps, delta)-DP AdaC-UCB: the classical Gaussian calibration (Azize & Basu 2023a, App. C-E, Thm 18).

    sigma_{a,l}^2 = 2 log(1.25/delta)/(eps^2 n^2); bonus sqrt((1/(2n) + 4 log(1.25/delta)/(eps^2 n^2)) beta log t_l).
    The calibration is proven only for eps < 1 (Dwork & Roth 2014, Thm A.1), so eps >= 1 is refused.
    Claim: (eps, delta)-DP under Table DP, as for AdaC-UCB.
    """

    def __init__(self, n_arms: int = 2, epsilon: float = 0.5, delta: float = 1e-5, beta: float = 4.0) -> None:
        super().__init__(n_arms, beta)
        self.epsilon = check_positive("epsilon", epsilon)
        if self.epsilon >= 1:
            raise DPAuditError(
                f"epsilon must lie in (0, 1) for the classical Gaussian calibration of adaed-ucb, got {epsilon!r}; "
                "use adac-ucb (rho-zCDP) or adar-ucb for larger budgets."
            )
        self.delta = check_delta(delta)
        self.variance = 2.0 * math.log(1.25 / self.delta) / self.epsilon**2
        self._mech = GaussianMechanism(1.0, math.sqrt(self.variance))
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta)


@register("adap-ucb", family="ucb")
class AdaPUCB(_EpsAlias, EpisodeUCB):
    """AdaP-UCB: pure eps-DP UCB, the same blueprint with Laplace noise (Azize & Basu 2023a, Sec. II, its ref. [8]).

    The last episode's mean gets Lap(1/(eps n)); bonus sqrt(beta log t_l/(2n)) + beta log t_l/(eps n).
    Claim: eps-DP for rewards in [0, 1], under Table DP (for pure DP, Table and View DP coincide: Azize & Basu 2023a,
    Prop. 1(a)).
    """

    noise_kind = "laplace"

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, beta: float = 4.0) -> None:
        super().__init__(n_arms, beta)
        self.epsilon = check_positive("epsilon", epsilon)
        self._mech = LaplaceMechanism.for_pure(self.epsilon, sensitivity=1.0)
        self.claim = PureDP(self.epsilon)
        self._params["epsilon"] = self.epsilon

    def _bonus(self, n, log_t):
        return np.sqrt(self.beta * log_t / (2.0 * n)) + self.beta * log_t / (self.epsilon * n)

    def noise_scale_of_mean(self, n: np.ndarray | int) -> np.ndarray:
        """Laplace scale b = 1/(eps n) on the last episode's mean."""
        return 1.0 / (self.epsilon * np.asarray(n, dtype=float))


@register("ucb1", family="ucb")
class UCB1(Policy):
    """UCB1 (Auer, Cesa-Bianchi & Fischer 2002): non-private, every sample, index mu_hat + sqrt(2 log t / N_a).

    Plays each arm once (arm order 0..K-1), then at step t (t plays so far) the argmax of the
    index, ties to the lowest arm. Rewards must lie in [0, 1] (the bonus assumes it).
    """

    reward_range = (0.0, 1.0)
    notion = "table"
    non_private_twin = "ucb1"

    def __init__(self, n_arms: int = 2) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self._params = {"n_arms": self.n_arms}

    def twin_params(self) -> dict[str, object]:
        return {"n_arms": self.n_arms}

    def _reset(self) -> None:
        self.counts = np.zeros((self.n_runs, self.n_arms))
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self._rows = np.arange(self.n_runs)
        self._last = np.zeros(self.n_runs, dtype=np.int64)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if t < self.n_arms:
            self._last = np.full(self.n_runs, t, dtype=np.int64)
        else:
            index = self.sums / self.counts + np.sqrt(2.0 * math.log(t) / self.counts)
            self._last = np.argmax(index, axis=1)
        return self._last.copy()

    def observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        lo, hi = self.reward_range
        self._observe(t, actions, _fast_rewards(rewards, self.n_runs, lo, hi, self.name, t))

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        self.sums[self._rows, self._last] += rewards
        self.counts[self._rows, self._last] += 1
