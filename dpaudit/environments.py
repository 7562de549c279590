"""Sources of rewards: stochastic environments for regret experiments, fixed inputs for audits.

Every environment is batched over runs, like the policies::

    env.reset(n_runs, rng)
    arms = env.arms(t)                 # (n_runs, K, d) action features, or None for K-armed bandits
    rewards = env.rewards(t, actions)  # (n_runs,) the rewards of the chosen arms
    means = env.means(t)               # (n_runs, K) expected rewards (for pseudo-regret), or None

Audits use fixed, adversarially chosen inputs (``RewardTable``, ``RewardList``), regret
experiments use the stochastic ones (``BernoulliBandit``, ``GaussianBandit``).

Episode-level fast path (used by :func:`dpaudit.simulate.simulate`): an environment with
``supports_segments = True`` answers ``segment_sums(runs, arms, start, length)``, the sum of the
rewards of arm ``arms[i, j]`` played ``length[i, j]`` times back to back from round
``start[i, j]`` in run ``runs[i]``. Stochastic environments draw it in one go (a Binomial or a
Normal variable: the same distribution as the per-step sum, not the same draws); fixed inputs
answer with a prefix-sum difference (the same rewards as the per-step path).

Environments are also registered by name (``make_environment("bernoulli", means=[...])``) so the
command line can build them; other modules add theirs with :func:`register_environment`.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from dpaudit.errors import DPAuditError, check_int, check_nonnegative, check_positive

__all__ = [
    "Environment",
    "RewardTable",
    "RewardList",
    "BernoulliBandit",
    "GaussianBandit",
    "PAPER_MEANS",
    "LossSequence",
    "unit_vectors",
    "project_ball",
    "make_losses",
    "register_environment",
    "make_environment",
    "environment_names",
]

#: The 5-armed Bernoulli instance of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits",
#: Sec. VII-A (from its reference [7]).
PAPER_MEANS = (0.75, 0.625, 0.5, 0.375, 0.25)


class Environment:
    """Base class of reward sources."""

    n_arms: int
    dim: int | None = None  # feature dimension for linear environments, None for K-armed ones
    horizon: int | None = None  # rounds available for fixed inputs, None when unlimited
    supports_segments: bool = False  # True when segment_sums is available (episode fast path)
    regret_kind: str | None = "pseudo"  # "pseudo" (means known), "hindsight" (fixed table) or None

    def reset(self, n_runs: int, rng: np.random.Generator) -> None:
        self.n_runs = int(n_runs)
        self.rng = rng

    def arms(self, t: int) -> np.ndarray | None:
        return None

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def means(self, t: int) -> np.ndarray | None:
        return None

    def stationary_means(self) -> np.ndarray | None:
        """The (K,) expected rewards when they are the same at every step and in every run, else None."""
        return None

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float] | None:
        """(min, max) of the rewards this source can produce in its first ``horizon`` rounds, or None if unknown.

        The episode fast path never shows single rewards to the policy, so the simulator checks
        these bounds against the policy's ``reward_range`` instead.
        """
        return None

    def segment_sums(self, runs: np.ndarray, arms: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Reward sums of back-to-back plays (see the module docstring); shape of ``arms``."""
        raise DPAuditError(f"{type(self).__name__} has no episode-level fast path; use the per-step path.")

    def describe(self) -> str:
        return type(self).__name__


def _check_runs(env: Environment) -> None:
    if not hasattr(env, "n_runs"):
        raise DPAuditError(f"{type(env).__name__}.reset(n_runs, rng) must be called before drawing rewards.")


class RewardTable(Environment):
    """A fixed T x K table of potential rewards, the same for every run (Table DP's input).

    Its regret is measured in hindsight: the best fixed arm's column sum minus the rewards
    collected (``regret_kind = "hindsight"``).
    """

    supports_segments = True
    regret_kind = "hindsight"

    def __init__(self, table: np.ndarray) -> None:
        d = np.asarray(table, dtype=float)
        if d.ndim != 2 or d.shape[0] < 1 or d.shape[1] < 2:
            raise DPAuditError(f"a reward table must have shape (T, K) with T >= 1 and K >= 2, got {d.shape}.")
        if not np.all(np.isfinite(d)):
            raise DPAuditError("the reward table contains NaN or inf; rewards must be finite numbers.")
        self.table = d
        self.horizon, self.n_arms = d.shape
        self._prefix: np.ndarray | None = None

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        if t >= self.horizon:
            raise DPAuditError(f"step {t} is beyond the reward table's {self.horizon} rows.")
        return self.table[t].take(actions)

    def means(self, t: int) -> np.ndarray:
        return np.broadcast_to(self.table[t], (self.n_runs, self.n_arms))

    def prefix(self) -> np.ndarray:
        """(T + 1, K) column prefix sums, computed once."""
        if self._prefix is None:
            p = np.zeros((self.horizon + 1, self.n_arms))
            np.cumsum(self.table, axis=0, out=p[1:])
            self._prefix = p
        return self._prefix

    def segment_sums(self, runs, arms, start, length):
        p = self.prefix()
        start = np.asarray(start, dtype=np.int64)
        stop = start + np.asarray(length, dtype=np.int64)
        if stop.size and int(stop.max()) > self.horizon:
            raise DPAuditError(f"an episode reaches round {int(stop.max())}, beyond the table's {self.horizon} rows.")
        return p[stop, arms] - p[start, arms]

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        d = self.table[: self.horizon if horizon is None else horizon]
        return float(d.min()), float(d.max())

    def best_sums(self, stops: Sequence[int]) -> np.ndarray:
        """The best fixed arm's reward sum over rounds [0, stop) for each stop."""
        p = self.prefix()
        return np.array([p[int(s)].max() for s in stops])

    def describe(self) -> str:
        return f"RewardTable(T={self.horizon}, K={self.n_arms})"


class RewardList(Environment):
    """A fixed list r of T rewards: the policy observes r[t] whatever it played (View DP's input)."""

    supports_segments = True
    regret_kind = None

    def __init__(self, rewards: Sequence[float], n_arms: int = 2) -> None:
        r = np.asarray(rewards, dtype=float)
        if r.ndim != 1 or r.size < 1:
            raise DPAuditError(f"a reward list must be one-dimensional with T >= 1 entries, got shape {r.shape}.")
        if not np.all(np.isfinite(r)):
            raise DPAuditError("the reward list contains NaN or inf; rewards must be finite numbers.")
        if isinstance(n_arms, bool) or int(n_arms) != n_arms or n_arms < 2:
            raise DPAuditError(f"n_arms must be an integer >= 2, got {n_arms!r}.")
        self.values = r
        self.horizon = r.size
        self.n_arms = int(n_arms)
        self._prefix = np.concatenate([[0.0], np.cumsum(r)])

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        if t >= self.horizon:
            raise DPAuditError(f"step {t} is beyond the reward list's {self.horizon} entries.")
        return np.full(np.shape(actions), self.values[t])

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        v = self.values[: self.horizon if horizon is None else horizon]
        return float(v.min()), float(v.max())

    def segment_sums(self, runs, arms, start, length):
        start = np.asarray(start, dtype=np.int64)
        stop = start + np.asarray(length, dtype=np.int64)
        if stop.size and int(stop.max()) > self.horizon:
            raise DPAuditError(f"an episode reaches round {int(stop.max())}, beyond the list's {self.horizon} entries.")
        return self._prefix[stop] - self._prefix[start]

    def describe(self) -> str:
        return f"RewardList(T={self.horizon}, K={self.n_arms})"


def _check_means(means: Sequence[float], lo: float | None, hi: float | None, what: str) -> np.ndarray:
    try:
        mu = np.asarray(means, dtype=float)
    except (TypeError, ValueError):
        raise DPAuditError(f"{what} means must be a list of numbers, got {means!r}.") from None
    if mu.ndim != 1 or mu.size < 2:
        raise DPAuditError(f"{what} bandit needs K >= 2 arm means, got {mu.size if mu.ndim == 1 else mu.shape}.")
    if not np.all(np.isfinite(mu)):
        raise DPAuditError(f"{what} means must be finite numbers, got {mu.tolist()}.")
    if lo is not None and hi is not None and np.any((mu < lo) | (mu > hi)):
        bad = mu[(mu < lo) | (mu > hi)][0]
        raise DPAuditError(f"{what} mean {bad:g} is outside [{lo:g}, {hi:g}]; Bernoulli means must be probabilities.")
    return mu


class _StationaryBandit(Environment):
    supports_segments = True
    regret_kind = "pseudo"
    mu: np.ndarray

    def stationary_means(self) -> np.ndarray:
        return self.mu

    def means(self, t: int) -> np.ndarray:
        _check_runs(self)
        return np.broadcast_to(self.mu, (self.n_runs, self.n_arms))


class BernoulliBandit(_StationaryBandit):
    """K arms with Bernoulli(mu_a) rewards, i.i.d. over rounds and runs (Azize & Basu 2023a, Sec. VII-A)."""

    def __init__(self, means: Sequence[float] = PAPER_MEANS) -> None:
        self.mu = _check_means(means, 0.0, 1.0, "a Bernoulli")
        self.n_arms = self.mu.size

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        return 0.0, 1.0

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        _check_runs(self)
        p = self.mu[actions]
        return (self.rng.random(p.shape) < p).astype(float)

    def segment_sums(self, runs, arms, start, length):
        _check_runs(self)
        return self.rng.binomial(np.asarray(length, dtype=np.int64), self.mu[arms]).astype(float)

    def describe(self) -> str:
        return "Bernoulli(" + ", ".join(f"{m:g}" for m in self.mu) + ")"


class GaussianBandit(_StationaryBandit):
    """K arms with N(mu_a, sigma^2) rewards (unbounded: policies calibrated for [0, 1] refuse them)."""

    def __init__(self, means: Sequence[float], sigma: float = 1.0) -> None:
        self.mu = _check_means(means, None, None, "a Gaussian")
        self.sigma = check_positive("sigma", sigma)
        self.n_arms = self.mu.size

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        return -math.inf, math.inf

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        _check_runs(self)
        mu = self.mu[actions]
        return mu + self.sigma * self.rng.standard_normal(mu.shape)

    def segment_sums(self, runs, arms, start, length):
        _check_runs(self)
        n = np.asarray(length, dtype=float)
        mu = self.mu[arms]
        return n * mu + self.sigma * np.sqrt(n) * self.rng.standard_normal(mu.shape)

    def describe(self) -> str:
        return "Gaussian(" + ", ".join(f"{m:g}" for m in self.mu) + f"; sigma={self.sigma:g})"


# Named environments for the command line: name -> (factory(**params), one-line summary).
_ENVIRONMENTS: dict[str, tuple[Callable[..., Environment], str]] = {}


def register_environment(name: str, factory: Callable[..., Environment], summary: str = "") -> None:
    """Make ``factory(**params)`` available as ``make_environment(name, **params)``."""
    _ENVIRONMENTS[name] = (factory, summary)


def environment_names() -> list[str]:
    return sorted(_ENVIRONMENTS)


def make_environment(name: str, **params: object) -> Environment:
    """Build a registered environment by name; unknown names and parameters are one-sentence errors."""
    if name not in _ENVIRONMENTS:
        import difflib

        close = difflib.get_close_matches(name, list(_ENVIRONMENTS), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DPAuditError(f"unknown environment {name!r}.{hint} Choose one of: {', '.join(environment_names())}.")
    factory = _ENVIRONMENTS[name][0]
    try:
        return factory(**params)
    except TypeError as exc:
        raise DPAuditError(f"cannot build environment {name!r} with parameters {params}: {exc}.") from exc


register_environment("bernoulli", BernoulliBandit, "K Bernoulli arms (default: Azize & Basu 2023a's 0.75/0.625/0.5/0.375/0.25)")
register_environment("gaussian", GaussianBandit, "K Gaussian arms N(mu_a, sigma^2)")


# ---- linear environments
# (the settings of Azize & Basu 2023a, Sec. VII-A, for AdaC-GOPE and AdaC-OFUL)


_LINEAR_NOISE = ("gaussian", "bernoulli")


def _unit_sphere(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _check_linear_common(n_arms: object, dim: object, noise: str, noise_sd: float) -> tuple[int, int, str, float]:
    from dpaudit.errors import check_int

    k = check_int("n_arms (K)", n_arms, minimum=2)
    d = check_int("dim (d)", dim, minimum=1)
    if noise not in _LINEAR_NOISE:
        raise DPAuditError(f"noise must be one of {', '.join(_LINEAR_NOISE)}, got {noise!r}.")
    return k, d, noise, check_positive("noise_sd", noise_sd)


def _linear_rewards(rng: np.random.Generator, mean: np.ndarray, noise: str, noise_sd: float) -> np.ndarray:
    """``mean + N(0, sd^2)`` (gaussian) or a +-1 reward with that mean (bernoulli)."""
    if noise == "gaussian":
        return mean + noise_sd * rng.standard_normal(mean.shape)
    return np.where(rng.random(mean.shape) < 0.5 * (1.0 + mean), 1.0, -1.0)


class LinearBandit(Environment):
    """Linear bandit with a fixed finite action set (Azize & Basu 2023a, Sec. VII-A, the AdaC-GOPE setting).

    K actions and theta* drawn uniformly on the unit sphere of R^d (defaults K = 10, d = 3) from
    ``instance_seed``, the same instance in every run (so a policy and its non-private twin face
    the same problem); or given as ``actions`` (K, d) and ``theta`` (d,). Rewards
    ``<theta*, a> + eta``:

    * ``noise="gaussian"``: eta ~ N(0, noise_sd^2), the paper's N(0, 1). These rewards are unbounded,
      so they break Azize & Basu (2023a), Assumption 1(2) (|r| <= 1) that the private policies' sensitivity
      needs; the private GOPE/OFUL policies refuse them (the paper's experiment ignores this).
    * ``noise="bernoulli"``: r in {-1, +1} with mean <theta*, a> (P(r = 1) = (1 + <theta*, a>)/2),
      1-subgaussian and bounded as Assumption 1 requires.

    Episode fast path: ``segment_sums`` is one Normal draw (gaussian) or ``2 Binomial - n``
    (bernoulli), the exact distribution of the per-step sum.
    """

    supports_segments = True
    regret_kind = "pseudo"

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        noise: str = "gaussian",
        noise_sd: float = 1.0,
        actions: Sequence[Sequence[float]] | None = None,
        theta: Sequence[float] | None = None,
        instance_seed: int = 0,
    ) -> None:
        k, d, self.noise, self.noise_sd = _check_linear_common(n_arms, dim, noise, noise_sd)
        inst = np.random.default_rng(np.random.SeedSequence(int(instance_seed)))
        acts = _unit_sphere(inst, (k, d)) if actions is None else np.asarray(actions, dtype=float)
        th = _unit_sphere(inst, (d,)) if theta is None else np.asarray(theta, dtype=float)
        if acts.ndim != 2 or acts.shape[0] < 2:
            raise DPAuditError(f"actions must be a (K, d) array with K >= 2, got shape {acts.shape}.")
        if th.shape != (acts.shape[1],):
            raise DPAuditError(f"theta has shape {th.shape}; it must have d = {acts.shape[1]} entries like the actions.")
        if not (np.all(np.isfinite(acts)) and np.all(np.isfinite(th))):
            raise DPAuditError("actions and theta must be finite numbers.")
        self.actions, self.theta = acts, th
        self.n_arms, self.dim = acts.shape
        self.mu = acts @ th
        if self.noise == "bernoulli" and np.any(np.abs(self.mu) > 1):
            raise DPAuditError("bernoulli noise needs |<theta, a>| <= 1 for every action; rescale actions or theta.")

    def arms(self, t: int) -> np.ndarray:
        _check_runs(self)
        return np.broadcast_to(self.actions, (self.n_runs, self.n_arms, self.dim))

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        _check_runs(self)
        return _linear_rewards(self.rng, self.mu[actions], self.noise, self.noise_sd)

    def means(self, t: int) -> np.ndarray:
        _check_runs(self)
        return np.broadcast_to(self.mu, (self.n_runs, self.n_arms))

    def stationary_means(self) -> np.ndarray:
        return self.mu

    def segment_sums(self, runs, arms, start, length):
        _check_runs(self)
        n = np.asarray(length, dtype=np.int64)
        mu = self.mu[arms]
        if self.noise == "gaussian":
            return n * mu + self.noise_sd * np.sqrt(n) * self.rng.standard_normal(mu.shape)
        return 2.0 * self.rng.binomial(n, 0.5 * (1.0 + mu)) - n

    def describe(self) -> str:
        return f"LinearBandit(K={self.n_arms}, d={self.dim}, noise={self.noise})"


class ContextualLinearBandit(Environment):
    """Contextual linear bandit with fresh action sets each step (Azize & Basu 2023a, Sec. VII-A, AdaC-OFUL).

    At every step and in every run, the K actions are drawn i.i.d. from
    N((1/sqrt(d), ..., 1/sqrt(d)), (1/10) I_d) (defaults K = 10, d = 3); theta* is uniform on the
    unit sphere (from ``instance_seed``, shared by all runs) or given. Rewards as in
    :class:`LinearBandit` (``noise`` = gaussian or bernoulli).

    These contexts often have norm above 1, breaking Azize & Basu (2023a), Assumption 1(1) (||a|| <= 1) that
    the private OFUL sensitivity needs; ``normalize=True`` divides each action by max(1, ||a||)
    (an explicit change of the context distribution, off by default as in the paper), otherwise
    the private policies refuse such actions unless their ``feature_bound`` is raised.
    ``arms(t)`` must be called before ``rewards(t, ...)`` and ``means(t)``.
    """

    regret_kind = "pseudo"

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        noise: str = "gaussian",
        noise_sd: float = 1.0,
        context_sd: float = math.sqrt(0.1),
        normalize: bool = False,
        theta: Sequence[float] | None = None,
        instance_seed: int = 0,
    ) -> None:
        k, d, self.noise, self.noise_sd = _check_linear_common(n_arms, dim, noise, noise_sd)
        self.context_sd = check_positive("context_sd", context_sd)
        inst = np.random.default_rng(np.random.SeedSequence(int(instance_seed)))
        th = _unit_sphere(inst, (d,)) if theta is None else np.asarray(theta, dtype=float)
        if th.shape != (d,) or not np.all(np.isfinite(th)):
            raise DPAuditError(f"theta must be {d} finite numbers (d = {d}), got shape {th.shape}.")
        if noise == "bernoulli" and not normalize:
            raise DPAuditError("bernoulli noise needs |<theta, a>| <= 1, so it requires normalize=True.")
        if noise == "bernoulli" and np.linalg.norm(th) > 1:
            raise DPAuditError("bernoulli noise needs ||theta|| <= 1.")
        self.n_arms, self.dim, self.theta = k, d, th
        self.normalize = bool(normalize)
        self.centre = np.full(d, 1.0 / math.sqrt(d))
        self._t: int | None = None

    def reset(self, n_runs: int, rng: np.random.Generator) -> None:
        super().reset(n_runs, rng)
        self._t = None

    def arms(self, t: int) -> np.ndarray:
        _check_runs(self)
        x = self.centre + self.context_sd * self.rng.standard_normal((self.n_runs, self.n_arms, self.dim))
        if self.normalize:
            x /= np.maximum(1.0, np.sqrt(np.einsum("nkd,nkd->nk", x, x)))[:, :, None]
        self._x, self._t = x, t
        self._mu = np.einsum("nkd,d->nk", x, self.theta)
        return x

    def _current(self, t: int) -> None:
        if self._t != t:
            raise DPAuditError(f"call arms({t}) before asking the rewards or means of step {t}.")

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        self._current(t)
        mu = self._mu[np.arange(self.n_runs), actions]
        return _linear_rewards(self.rng, mu, self.noise, self.noise_sd)

    def means(self, t: int) -> np.ndarray:
        self._current(t)
        return self._mu

    def describe(self) -> str:
        return f"ContextualLinearBandit(K={self.n_arms}, d={self.dim}, noise={self.noise})"


__all__ += ["LinearBandit", "ContextualLinearBandit"]
register_environment("linear", LinearBandit, "linear bandit, K fixed actions on the unit sphere (the GOPE setting of Azize & Basu 2023a)")
register_environment(
    "contextual-linear", ContextualLinearBandit, "contextual linear bandit, fresh Gaussian action sets (the OFUL setting of Azize & Basu 2023a)"
)


# ---- GLM contextual bandits (the synthetic probit / logistic experiments of Sarmasarkar 2026) ----------


class GLMContextualBandit(Environment):
    """The synthetic GLM bandit of Sarmasarkar (2026): K fresh contexts per step, Bernoulli rewards mu(x^T theta*).

    The paper is Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for Generalized Linear
    Contextual Bandits".

    theta* = S u with u uniform on the unit sphere (from ``instance_seed``, shared by all runs), so
    ``||theta*|| = S`` (Sarmasarkar 2026 uses S in {2, 2.5, 3}); contexts i.i.d. uniform on the unit sphere
    of R^d (Sarmasarkar 2026 leaves their law open; the sphere keeps ``||x|| <= 1`` as the analysis needs);
    ``link`` is ``logistic`` or ``probit``. Defaults d = 5, K = 20. ``arms(t)`` must be called before
    ``rewards(t, ...)`` and ``means(t)``.
    """

    regret_kind = "pseudo"

    def __init__(self, n_arms: int = 20, dim: int = 5, link: str = "logistic", S: float = 2.0,
                 instance_seed: int = 0) -> None:
        from dpaudit.errors import check_int

        self.n_arms = check_int("n_arms (K)", n_arms, minimum=2)
        self.dim = check_int("dim (d)", dim, minimum=1)
        if link not in ("logistic", "probit"):
            raise DPAuditError(f"unknown link {link!r}; choose logistic or probit.")
        self.link = link
        self.S = check_positive("S (the norm of theta*)", S)
        inst = np.random.default_rng(np.random.SeedSequence(int(instance_seed)))
        self.theta = self.S * _unit_sphere(inst, (self.dim,))
        self._t: int | None = None

    def reset(self, n_runs: int, rng: np.random.Generator) -> None:
        super().reset(n_runs, rng)
        self._t = None

    def reward_bounds(self, horizon: int | None = None) -> tuple[float, float]:
        return (0.0, 1.0)

    def _mu(self, z: np.ndarray) -> np.ndarray:
        from scipy import special

        return special.expit(z) if self.link == "logistic" else special.ndtr(z)

    def arms(self, t: int) -> np.ndarray:
        _check_runs(self)
        x = _unit_sphere(self.rng, (self.n_runs, self.n_arms, self.dim))
        self._x, self._t = x, t
        self._means = self._mu(np.einsum("nkd,d->nk", x, self.theta))
        return x

    def _current(self, t: int) -> None:
        if self._t != t:
            raise DPAuditError(f"call arms({t}) before asking the rewards or means of step {t}.")

    def rewards(self, t: int, actions: np.ndarray) -> np.ndarray:
        self._current(t)
        p = self._means[np.arange(self.n_runs), actions]
        return (self.rng.random(p.shape) < p).astype(float)

    def means(self, t: int) -> np.ndarray:
        self._current(t)
        return self._means

    def describe(self) -> str:
        return f"GLMContextualBandit(K={self.n_arms}, d={self.dim}, link={self.link}, S={self.S:g})"


__all__ += ["GLMContextualBandit"]
register_environment("glm", GLMContextualBandit, "GLM contextual bandit, logistic or probit link (Sarmasarkar 2026)")


# ---- convex losses for continuous actions (BCO, Zheng et al. 2020) ---------------------------------------
# An oblivious LossSequence f_t(x) = a_t + <c_t, x> + (mu_t/2)||x - x*||^2 + q_t with bounded stochastic
# noise q_t ~ U[-s, s] (so |f_t| <= B holds without clipping): convex, with a closed-form minimiser of
# sum_t f_t over the ball, hence exact regret (Zheng et al. 2020, "Locally Differentially Private (Contextual)
# Bandits Learning", eq. 2) from dpaudit.simulate.simulate_bco. It covers both of
# the paper's settings (stochastic f + q_t; adversarial c_t) with known B and G, and the audit's neighbours
# are members of it (dpaudit.protocols.continuous).

class LossSequence:
    """An oblivious sequence of convex losses f_t(x) = a_t + <c_t, x> + (mu_t/2)||x - x*||^2 + q_t, q_t ~ U[-s, s]."""

    def __init__(self, a: ArrayLike, c: ArrayLike, mu: ArrayLike = 0.0, x_star: ArrayLike | None = None,
                 noise: float = 0.0) -> None:
        c = np.asarray(c, dtype=float)
        if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] < 1:
            raise DPAuditError(f"a loss sequence's c must have shape (T, d) with T, d >= 1, got {c.shape}.")
        self.horizon, self.d = c.shape
        self.c = c
        self.a = np.broadcast_to(np.asarray(a, dtype=float), (self.horizon,)).copy()
        self.mu = np.broadcast_to(np.asarray(mu, dtype=float), (self.horizon,)).copy()
        self.x_star = np.zeros(self.d) if x_star is None else np.asarray(x_star, dtype=float).reshape(-1)
        if self.x_star.shape != (self.d,):
            raise DPAuditError(f"x_star must have {self.d} coordinates, got {self.x_star.shape[0]}.")
        for name, arr in (("a", self.a), ("c", self.c), ("mu", self.mu), ("x_star", self.x_star)):
            if not np.all(np.isfinite(arr)):
                raise DPAuditError(f"a loss sequence's {name} contains NaN or inf.")
        if np.any(self.mu < 0):
            raise DPAuditError(f"mu must be >= 0 (a convex loss), got {self.mu.min():g}.")
        self.noise = check_nonnegative("noise", noise)

    # ---- factories ------------------------------------------------------------------------------
    @classmethod
    def stochastic(cls, d: int, horizon: int, mu: float = 0.5, x_star: ArrayLike | None = None,
                   noise: float = 0.25) -> "LossSequence":
        """Stochastic BCO: f(x) + q_t with f(x) = (mu/2)||x - x*||^2 (x* = (0.5, 0, ..) by default), q_t ~ U[-noise, noise].

        On the unit ball with the defaults: |f| <= 0.8125, Lipschitz 0.75.
        """
        d = check_int("d", d, minimum=1)
        T = check_int("horizon", horizon, minimum=1)
        xs = np.r_[0.5, np.zeros(d - 1)] if x_star is None else x_star
        return cls(np.zeros(T), np.zeros((T, d)), check_nonnegative("mu", mu), xs, noise)

    @classmethod
    def adversarial(cls, d: int, horizon: int, seed: int = 0, scale: float = 0.5, jitter: float = 0.25,
                    mu: float = 0.0) -> "LossSequence":
        """Oblivious adversarial: f_t(x) = <c_t, x> (+ (mu/2)||x||^2), c_t = scale v + jitter w_t, v and w_t unit vectors
        drawn once from ``seed`` (the same sequence for every run). On the unit ball: |f| <= scale + jitter + mu/2."""
        d = check_int("d", d, minimum=1)
        T = check_int("horizon", horizon, minimum=1)
        rng = np.random.default_rng([check_int("seed", seed, minimum=0), 31])
        v = unit_vectors(rng, 1, d)[0]
        c = check_nonnegative("scale", scale) * v + check_nonnegative("jitter", jitter) * unit_vectors(rng, T, d)
        return cls(np.zeros(T), c, check_nonnegative("mu", mu), None, 0.0)

    # ---- values ---------------------------------------------------------------------------------
    def mean_values(self, t: int, points: np.ndarray) -> np.ndarray:
        """f_t without its stochastic part at ``points`` (..., d)."""
        P = np.asarray(points, dtype=float)
        diff = P - self.x_star
        return self.a[t] + P @ self.c[t] + 0.5 * self.mu[t] * np.einsum("...d,...d->...", diff, diff)

    def values(self, t: int, points: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """What the users at step t suffer at ``points`` (n, m, d): (n, m), one q_t per run and round."""
        v = self.mean_values(t, points)
        if self.noise > 0:
            if rng is None:
                raise DPAuditError("a stochastic loss sequence needs a generator for its noise q_t.")
            v = v + rng.uniform(-self.noise, self.noise, v.shape[:1] + (1,) * (v.ndim - 1))
        return v

    def bound(self, radius: float) -> float:
        """An upper bound on |f_t(x)| over ||x|| <= radius and all t."""
        reach = radius + float(np.linalg.norm(self.x_star))
        return float(np.max(np.abs(self.a) + np.linalg.norm(self.c, axis=1) * radius + 0.5 * self.mu * reach ** 2)
                     + self.noise)

    def lipschitz(self, radius: float) -> float:
        """The Lipschitz constant of the f_t on the ball of radius ``radius``: max_t ||c_t|| + mu_t (R + ||x*||)."""
        reach = radius + float(np.linalg.norm(self.x_star))
        return float(np.max(np.linalg.norm(self.c, axis=1) + self.mu * reach))

    def best(self, radius: float, horizon: int | None = None) -> tuple[np.ndarray, float]:
        """argmin and min over ||x|| <= radius of sum_{t < horizon} f_t(x) (noise-free), in closed form.

        sum_t f_t = A + <C, x> + (M/2)||x - x*||^2: for M > 0 an isotropic quadratic, minimised by the projection
        of x* - C/M onto the ball; for M = 0 linear, minimised at -R C/||C||.
        """
        T = self.horizon if horizon is None else horizon
        A, C, M = self.a[:T].sum(), self.c[:T].sum(axis=0), self.mu[:T].sum()
        if M > 0:
            x = project_ball(self.x_star - C / M, radius)
        else:
            n = float(np.linalg.norm(C))
            x = -radius * C / n if n > 0 else np.zeros(self.d)
        diff = x - self.x_star
        return x, float(A + C @ x + 0.5 * M * diff @ diff)



def make_losses(name: str | None, d: int, horizon: int, params: dict[str, str] | None = None) -> LossSequence:
    """``--env stochastic`` (default) or ``adversarial`` with ``--env-param`` values (floats; ``seed`` an int)."""
    name = name or "stochastic"
    raw = dict(params or {})
    allowed = {"stochastic": ("mu", "noise"), "adversarial": ("seed", "scale", "jitter", "mu")}
    if name not in allowed:
        raise DPAuditError(f"BCO environment {name!r} is unknown; choose stochastic or adversarial.")
    kw: dict[str, float | int] = {}
    for k, v in raw.items():
        if k not in allowed[name]:
            raise DPAuditError(f"the {name} BCO environment has no parameter {k!r}; its parameters are "
                               f"{', '.join(allowed[name])}.")
        try:
            kw[k] = int(v) if k == "seed" else float(v)
        except ValueError:
            raise DPAuditError(f"--env-param {k}={v!r} is not a number.") from None
    if name == "stochastic":
        return LossSequence.stochastic(d, horizon, **kw)
    return LossSequence.adversarial(d, horizon, **kw)


# ---- the ball's geometry (the BCO policies and the GLM policies use it too) ---------------------------

def unit_vectors(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """(n, d) vectors uniform on the unit sphere of R^d (normalised Gaussians)."""
    u = rng.standard_normal((n, d))
    norm = np.linalg.norm(u, axis=1, keepdims=True)
    while np.any(norm == 0):  # probability 0; redraw rather than divide by zero
        bad = norm[:, 0] == 0
        u[bad] = rng.standard_normal((int(bad.sum()), d))
        norm = np.linalg.norm(u, axis=1, keepdims=True)
    return u / norm


def project_ball(y: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of the rows of ``y`` onto the ball of the given radius (centred at 0)."""
    norm = np.linalg.norm(y, axis=-1, keepdims=True)
    return y * np.minimum(1.0, radius / np.maximum(norm, 1e-300))
