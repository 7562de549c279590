"""Run a policy on a reward source for many independent runs, and the ``dpaudit regret`` command.

``simulate(policy, env, horizon, n_runs, seed)`` derives the environment's and the policy's
generators from one seed (``SeedSequence(seed).spawn(2)``), runs every run to ``horizon`` as one
batched computation, and returns the reward sums and (for stochastic environments) the
pseudo-regret ``sum_t (mu* - mu_{a_t})`` of each run; regret at chosen ``checkpoints`` comes at no
extra cost. Nothing of length T is stored per run unless ``trajectory=True``.

Two paths:

- ``step``: ``act``/``observe`` once per round (any policy, any environment).
- ``episode``: for policies that run in blocks of back-to-back plays (``fast_path = True`` and
  ``plan()``/``complete(runs, sums)``, e.g. the adaptive-episode UCB family) on environments with
  ``segment_sums``. One iteration advances every run by one whole block: a stochastic
  environment draws the block's reward sum at once (Binomial/Normal), a fixed table answers with a
  prefix-sum difference. The cost is O(number of episodes), not O(T).

  ``plan()`` returns ``(start (n,), arms (n, J), lengths (n, J))``: each run's current block, J
  segments of ``lengths[i, j]`` plays of ``arms[i, j]`` from round ``start[i] + sum(lengths[i, :j])``.
  ``complete(runs, sums)`` gives the policy the (m, J) segment reward sums of the blocks of
  ``runs`` that finished before the horizon; a block cut by the horizon is not completed (the
  per-step path never completes it either). On fixed inputs both paths give the same trajectory
  for the same seed; on stochastic environments the same distribution.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError, check_int
from dpaudit.engine import one_blas_thread
from dpaudit.environments import Environment, LossSequence, RewardTable
from dpaudit.policies.base import PolicyLike, check_actions
from dpaudit.policies.bco import BCOPolicy, check_points

__all__ = ["SimResult", "BCORun", "simulate", "twin_of", "simulate_bco", "mean_ci"]


@dataclass
class SimResult:
    """What a batch of runs produced. Arrays are over runs; ``regret_at`` over runs x checkpoints."""

    horizon: int
    n_runs: int
    seed: int
    path: str
    reward_sum: np.ndarray
    regret: np.ndarray | None
    regret_kind: str | None
    checkpoints: np.ndarray
    regret_at: np.ndarray | None
    seconds: float
    actions: np.ndarray | None = None  # (n_runs, T), per-step path with trajectory=True
    rewards: np.ndarray | None = None  # (n_runs, T), per-step path with trajectory=True
    episodes: dict[str, np.ndarray] | None = None  # episode path with trajectory=True
    policy: PolicyLike | None = None
    env: Environment | None = None
    extra: dict[str, np.ndarray | int] = field(default_factory=dict)  # the episode path's iterations

    def summary(self, level: float = 0.95) -> dict[str, float]:
        """Mean final regret, its standard deviation and a normal-approximation confidence interval."""
        if self.regret is None:
            raise DPAuditError(f"regret is not defined for {getattr(self.env, 'describe', lambda: 'this input')()}.")
        return mean_ci(self.regret, level)

    def trajectory_actions(self) -> np.ndarray:
        """(n_runs, T) actions, from the per-step record or expanded from the episode record."""
        if self.actions is not None:
            return self.actions
        if self.episodes is None:
            raise DPAuditError("this result has no trajectory; simulate with trajectory=True.")
        out = np.full((self.n_runs, self.horizon), -1, dtype=np.int64)
        e = self.episodes
        pos = np.repeat(np.arange(e["run"].size), e["length"])
        offs = np.arange(pos.size) - np.repeat(np.cumsum(e["length"]) - e["length"], e["length"])
        out[e["run"][pos], e["start"][pos] + offs] = e["arm"][pos]
        return out


def mean_ci(x: np.ndarray, level: float = 0.95) -> dict[str, float]:
    from scipy.stats import norm

    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    sd = float(x.std(ddof=1)) if x.size > 1 else 0.0
    half = float(norm.ppf(0.5 + level / 2)) * sd / math.sqrt(x.size)
    return {"mean": m, "sd": sd, "lo": m - half, "hi": m + half, "n": int(x.size)}


def _check_actions_fast(a: object, n_runs: int, n_arms: int, who: str, t: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.shape == (n_runs,) and arr.dtype.kind in "iu" and arr.min() >= 0 and arr.max() < n_arms:
        return arr
    return check_actions(arr, n_runs, n_arms, who, t)


def _can_fast(policy: PolicyLike, env: Environment) -> bool:
    """Both sides support blocks; a linear environment also needs the policy to take its fixed arms."""
    both = bool(getattr(policy, "fast_path", False)) and hasattr(policy, "plan") and hasattr(policy, "complete") \
        and bool(getattr(env, "supports_segments", False))
    return both and (getattr(env, "dim", None) is None or hasattr(policy, "set_arms"))


def simulate(
    policy: PolicyLike,
    env: Environment,
    horizon: int,
    n_runs: int,
    seed: int = 0,
    *,
    path: str = "auto",
    trajectory: bool = False,
    checkpoints: Sequence[int] | None = None,
    record: bool = False,
    progress: Callable[[str], None] | None = None,
) -> SimResult:
    """Run ``n_runs`` independent runs of ``policy`` on ``env`` for ``horizon`` rounds from one seed.

    ``path`` is ``"auto"`` (the episode path when both sides support it), ``"step"`` or
    ``"episode"``. ``checkpoints`` (rounds in 1..horizon, default ``[horizon]``) get the regret of
    every run after that many rounds (the horizon is always one). ``record=True`` keeps the policy's ledger (``result.policy.ledger``).
    ``progress`` (e.g. a :class:`dpaudit.progress.ProgressBar`) is told ``"simulate NAME: t/T rounds"`` about a
    hundred times per simulation.
    """
    horizon = check_int("horizon T", horizon, minimum=1)
    n_runs = check_int("n_runs", n_runs, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    if path not in ("auto", "step", "episode"):
        raise DPAuditError(f"path must be 'auto', 'step' or 'episode', got {path!r}.")
    K = int(policy.n_arms)
    if int(env.n_arms) != K:
        raise DPAuditError(f"the policy has {K} arms but the environment has {env.n_arms}; they must match.")
    if env.horizon is not None and horizon > env.horizon:
        raise DPAuditError(f"horizon T = {horizon} exceeds the {env.horizon} rounds of {env.describe()}.")
    cps = np.asarray([] if checkpoints is None else list(checkpoints), dtype=np.int64)
    if cps.size and (cps.min() < 1 or cps.max() > horizon):
        raise DPAuditError(f"checkpoints must be rounds in 1..{horizon}, got {cps.tolist()}.")
    cps = np.unique(np.append(cps, horizon))
    if path == "auto":
        path = "episode" if _can_fast(policy, env) else "step"
    elif path == "episode" and not _can_fast(policy, env):
        raise DPAuditError(
            f"the episode-level path needs a policy with plan()/complete() and an environment with segment sums; "
            f"{getattr(policy, 'name', type(policy).__name__)} on {env.describe()} has no such path."
        )
    env_ss, pol_ss = np.random.SeedSequence(seed).spawn(2)
    env.reset(n_runs, np.random.default_rng(env_ss))
    prng = np.random.default_rng(pol_ss)
    try:
        policy.reset(n_runs, prng, record=record)
    except TypeError:  # plug-ins need not accept ``record``
        policy.reset(n_runs, prng)
    run = _run_episodes if path == "episode" else _run_steps
    with one_blas_thread():  # tiny batched matrices: BLAS threads only cost (dpaudit.engine)
        t0 = time.perf_counter()
        out = run(policy, env, horizon, n_runs, cps, trajectory, _rounds_done(policy, horizon, progress))
        seconds = time.perf_counter() - t0
    reward_sum, regret_at, extra = out
    kind = env.regret_kind
    reward_at = extra.pop("reward_at")
    if kind == "hindsight" and isinstance(env, RewardTable):
        regret_at = env.best_sums(cps)[None, :] - reward_at
    elif kind != "pseudo":
        regret_at = None
    regret = None if regret_at is None else regret_at[:, -1]
    res = SimResult(horizon, n_runs, seed, path, reward_sum, regret, kind, cps, regret_at, seconds,
                    policy=policy, env=env)
    res.actions = extra.pop("actions", None)
    res.rewards = extra.pop("rewards", None)
    res.episodes = extra.pop("episodes", None)
    res.extra = extra
    return res


def _rounds_done(policy: object, horizon: int, progress: Callable[[str], None] | None) -> Callable[[int], None]:
    """``done(t)``: tell ``progress`` that t of the horizon's rounds are simulated (every 1% and at the end)."""
    if progress is None:
        return lambda t: None
    who = getattr(policy, "name", "") or type(policy).__name__
    every = max(1, horizon // 100)
    last = [-1]

    def done(t: int) -> None:
        if t == horizon or t // every != last[0] // every:
            last[0] = t
            progress(f"simulate {who}: {t}/{horizon} rounds")

    return done


def _run_steps(policy, env, horizon, n_runs, cps, trajectory, done):
    who = getattr(policy, "name", "") or type(policy).__name__
    K = int(policy.n_arms)
    reward_sum = np.zeros(n_runs)
    regret = np.zeros(n_runs)
    regret_at = np.zeros((n_runs, cps.size))
    reward_at = np.zeros((n_runs, cps.size))
    mu = env.stationary_means() if env.regret_kind == "pseudo" else None
    gap = None if mu is None else (np.max(mu) - np.asarray(mu))
    pseudo = env.regret_kind == "pseudo"
    rows = np.arange(n_runs)
    acts = np.empty((n_runs, horizon), dtype=np.int64) if trajectory else None
    rews = np.empty((n_runs, horizon)) if trajectory else None
    j, next_cp = 0, int(cps[0])
    trusted = bool(getattr(policy, "valid_actions", False)) and type(policy).__module__.startswith("dpaudit.")
    # the per-step reward check, hoisted: when the environment's rewards provably lie in the policy's
    # range (a fixed table's min and max; Bernoulli's [0, 1]), dpaudit's policies skip it
    bounds = env.reward_bounds(horizon) if hasattr(env, "reward_bounds") else None
    rr = getattr(policy, "reward_range", None)
    hoisted = (trusted and hasattr(policy, "observe_checked") and bounds is not None and rr is not None
               and rr[0] <= bounds[0] and bounds[1] <= rr[1])
    observe = policy.observe_checked if hoisted else policy.observe
    for t in range(horizon):
        arms = env.arms(t)
        a = policy.act(t, arms) if trusted else _check_actions_fast(policy.act(t, arms), n_runs, K, who, t)
        r = env.rewards(t, a)
        reward_sum += r
        if pseudo:
            if gap is not None:
                regret += gap[a]
            else:
                m = np.asarray(env.means(t))
                regret += m.max(axis=1) - m[rows, a]
        if trajectory:
            acts[:, t] = a
            rews[:, t] = r
        observe(t, a, r)
        if t + 1 == next_cp:
            regret_at[:, j] = regret
            reward_at[:, j] = reward_sum
            j += 1
            next_cp = int(cps[j]) if j < cps.size else -1
        done(t + 1)
    extra: dict[str, np.ndarray] = {"reward_at": reward_at}
    if trajectory:
        extra["actions"], extra["rewards"] = acts, rews
    return reward_sum, regret_at, extra


def _run_episodes(policy, env, horizon, n_runs, cps, trajectory, done):
    reward_sum = np.zeros(n_runs)
    regret_at = np.zeros((n_runs, cps.size))
    reward_at = np.zeros((n_runs, cps.size))
    pseudo = env.regret_kind == "pseudo"
    mu = env.stationary_means()
    gap = None if mu is None else (np.max(mu) - np.asarray(mu))
    if pseudo and gap is None:
        raise DPAuditError(f"the episode-level path needs stationary arm means; {env.describe()} has none.")
    table = env.regret_kind == "hindsight"
    rr = getattr(policy, "reward_range", None)
    bounds = env.reward_bounds(horizon) if hasattr(env, "reward_bounds") else None
    if rr is not None and bounds is not None and (bounds[0] < rr[0] or bounds[1] > rr[1]):
        who = getattr(policy, "name", "") or type(policy).__name__
        raise DPAuditError(
            f"{env.describe()} produces rewards in [{bounds[0]:g}, {bounds[1]:g}], outside [{rr[0]:g}, {rr[1]:g}], "
            f"the range {who}'s sensitivity assumes; rescale the rewards or choose a policy calibrated for that range."
        )
    if getattr(env, "dim", None) is not None:  # a fixed action set, given once (the block path never calls act)
        policy.set_arms(env.arms(0))
    active = np.ones(n_runs, dtype=bool)
    log: list[tuple[np.ndarray, ...]] = []
    iterations = 0
    while True:
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        iterations += 1
        start, arms, lengths = policy.plan()
        s = np.asarray(start, dtype=np.int64)[idx]
        A = np.asarray(arms, dtype=np.int64)[idx]
        L = np.asarray(lengths, dtype=np.int64)[idx]
        seg_start = s[:, None] + np.cumsum(L, axis=1) - L
        seg_len = np.clip(np.minimum(L, horizon - seg_start), 0, None)
        sums = np.asarray(env.segment_sums(idx, A, seg_start, seg_len), dtype=float).reshape(A.shape)
        reward_sum[idx] += sums.sum(axis=1)
        for j, c in enumerate(cps):
            upto = np.clip(np.minimum(seg_len, c - seg_start), 0, None)
            if pseudo:
                regret_at[idx, j] += (gap[A] * upto).sum(axis=1)
            elif table:
                part = sums if c >= horizon else env.segment_sums(idx, A, seg_start, upto)
                reward_at[idx, j] += np.asarray(part).reshape(A.shape).sum(axis=1)
        if trajectory:
            keep = seg_len > 0
            rr = np.broadcast_to(idx[:, None], A.shape)
            log.append((rr[keep], seg_start[keep], A[keep], seg_len[keep]))
        end = s + L.sum(axis=1)
        full = end <= horizon
        if full.any():
            policy.complete(idx[full], sums[full])
        active[idx[end >= horizon]] = False
        done(int(min(horizon, end.min())))  # every run has been simulated up to its earliest episode end
    extra: dict[str, np.ndarray | int | dict[str, np.ndarray]] = {"reward_at": reward_at, "iterations": iterations}
    if trajectory:
        cat = [np.concatenate(c) if log else np.zeros(0, dtype=np.int64) for c in zip(*log)] if log else [np.zeros(0, dtype=np.int64)] * 4
        extra["episodes"] = dict(zip(("run", "start", "arm", "length"), cat))
    return reward_sum, (regret_at if pseudo else None), extra


# ---- the non-private twin -------------------------------------------------------------------

#: Fallback twins for policies that do not name one (``non_private_twin`` attribute).
TWINS = {"adac-gope": "gope", "adar-gope": "gope", "adac-oful": "rs-oful", "adar-oful": "rs-oful",
         "jdp-glm": "jdp-glm-np", "shuffle-glm": "shuffle-glm-np"}


def twin_of(policy: object) -> tuple[str, dict[str, object]] | None:
    """(registered name, parameters) of a policy's non-private twin, or None if it has none."""
    import inspect

    from dpaudit.policies import get_policy_class

    name = getattr(policy, "non_private_twin", None) or TWINS.get(getattr(policy, "name", ""))
    if not name:
        return None
    try:
        cls = get_policy_class(name)
    except DPAuditError:
        return None
    if hasattr(policy, "twin_params"):
        params = dict(policy.twin_params())
    else:
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
        params = {k: v for k, v in (policy.params() if hasattr(policy, "params") else {}).items() if k in accepted}
    return name, params


# ---- the ``dpaudit regret`` command ----------------------------------------------------------


# ---- continuous actions (BCO, Zheng et al. 2020) --------------------------------------------------

def _check_env(policy: BCOPolicy, losses: LossSequence, horizon: int) -> None:
    who = getattr(policy, "name", "") or type(policy).__name__
    if losses.d != policy.d:
        raise DPAuditError(f"the loss sequence is in dimension {losses.d} but {who} plays points of R^{policy.d}.")
    if horizon > losses.horizon:
        raise DPAuditError(f"the loss sequence has {losses.horizon} rounds, fewer than the horizon {horizon}.")
    b = losses.bound(policy.radius)
    if b > policy.loss_bound * (1 + 1e-12):
        raise DPAuditError(f"the loss sequence reaches |f| = {b:.4g} on the ball of radius {policy.radius:g}, above "
                           f"{who}'s loss_bound B = {policy.loss_bound:g}; rescale the losses or raise loss_bound.")
    if policy.n_points == 2:
        g = losses.lipschitz(policy.radius)
        if g > policy.lipschitz * (1 + 1e-12):
            raise DPAuditError(f"the loss sequence is {g:.4g}-Lipschitz, above {who}'s lipschitz G = {policy.lipschitz:g}.")


class BCORun(TypedDict):
    """What :func:`simulate_bco` returns."""

    regret: np.ndarray  # (n_runs,)
    best: tuple[np.ndarray, float]  # the minimiser of the noise-free losses and its value
    horizon: int
    n_runs: int
    seconds: float


def simulate_bco(policy: BCOPolicy, losses: LossSequence, n_runs: int, seed: int = 0, *, horizon: int | None = None,
                 record: bool = False) -> BCORun:
    """Run a BCO policy on ``losses`` for ``horizon`` rounds (default: all) in ``n_runs`` runs.

    Returns ``regret`` (n_runs,): sum_t (1/m) sum_k f_t(x_{t,k}) - min_x sum_t f_t(x) with the noise-free
    f_t (the pseudo-regret of Zheng et al. 2020, "Locally Differentially Private (Contextual) Bandits
    Learning", eq. 2), ``best`` (the minimiser and its value) and ``seconds``.
    The losses are checked once against the policy's B (and G for two-point policies).
    """
    T = losses.horizon if horizon is None else check_int("horizon", horizon, minimum=1)
    n_runs = check_int("n_runs", n_runs, minimum=1)
    _check_env(policy, losses, T)
    t0 = time.perf_counter()
    env_rng, pol_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(check_int("seed", seed, minimum=0)).spawn(2))
    policy.reset(n_runs, pol_rng, record=record)
    total = np.zeros(n_runs)
    who = getattr(policy, "name", "") or type(policy).__name__
    for t in range(T):
        P = np.asarray(policy.act(t), dtype=float)
        if P.shape != (n_runs, policy.n_points, policy.d):
            raise DPAuditError(f"{who} returned points of shape {P.shape} at step {t}; expected "
                               f"({n_runs}, {policy.n_points}, {policy.d}).")
        check_points(P, policy.radius, who, t)
        policy.observe_checked(t, P, losses.values(t, P, env_rng))
        total += losses.mean_values(t, P).mean(axis=1)
    x_best, v_best = losses.best(policy.radius, T)
    return {"regret": total - v_best, "best": (x_best, v_best), "horizon": T, "n_runs": n_runs,
            "seconds": time.perf_counter() - t0}
