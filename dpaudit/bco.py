"""Continuous actions: bandit convex optimisation (BCO) losses, simulator, and the local audit of BCO policies.

Why a separate contract (DESIGN.md, "Continuous actions"). dpaudit's Policy contract plays one of
K arms and takes a reward table; seed 003's BCO algorithms (Alg. 1 with a BCO black box, Alg. 2)
play points of a convex body and the users' data are loss *functions*, evaluated at the points
played. Discretising the body into arms would change the algorithms, so BCO policies
(:mod:`dpaudit.policies.bco`) keep the same batched shape with points for arms:

* ``act(t) -> (n_runs, m, d)``: m = 1 (one-point) or 2 (two-point) points of X = R B (radius R);
* ``observe(t, points, losses)``: the users' loss values ``(n_runs, m)``, in [-B, B];
* ``continuous_actions = True`` marks them; ``d``, ``radius``, ``n_points``, ``loss_bound``,
  ``lipschitz``, ``horizon`` describe the problem.

The environment is a :class:`LossSequence`: f_t(x) = a_t + <c_t, x> + (mu_t / 2) ||x - x*||^2 + q_t,
an oblivious sequence (fixed before the game, the same for every run) of convex losses, with an
optional stochastic part q_t ~ U[-s, s] drawn per run and round (bounded noise, so |f_t| <= B holds
without clipping; it is the same for the m points of a round, it is part of f_t). The family covers
the seed's two settings (stochastic BCO: a_t = c_t = 0, f(x) + q_t; adversarial: varying c_t) with a
closed-form best point, so :func:`simulate_bco` gives the exact regret
sum_t (1/m) sum_k f_t(x_{t,k}) - min_x sum_t f_t(x) (seed 003 eq. 2; the noise-free f_t).

The local audit (``dpaudit check policy ldp-bco-fkm --protocol local``), :func:`audit_local_bco`,
runs :mod:`dpaudit.check_local`'s parts on BCO:

1. *ledger*: 200 runs on the audit's background losses, every message composed per user (exact);
2. *channel*: :func:`dpaudit.check_local.channel_attack` on the user datum's domain extremes;
4. *transcript*: for users j in {0, 1, T/2, T-2}, neighbouring loss sequences that differ in user
   j's loss only (the other users' losses are 0): constants -B vs +B for one-point policies (the
   datum's extremes), linear -g<e_1, x> vs +g<e_1, x> (g = min(G, B/R)) for two-point ones (their
   difference 2 rho g <e_1, u_j> reaches the extremes only when u_j = +-e_1: no fixed loss does
   better). The features are the message o_j and, for m = 2, o_j times the unit direction of
   x_{j,1} - x_{j,2}; a threshold test on their projection onto the mean difference learnt on a split;
5. *central* (Table DP, seed 003 Thm 1; the view is the point sequence): the same neighbouring
   sequences, features the centre of round j + 1's points and its outer product with round j's
   exploration direction (x_{j,1} - x_{j,2})/2, or x_j itself for m = 1, projected on the learnt mean
   difference; a threshold test as above. This is what the central audit of K-armed policies does
   with its own attacks; here it is one learnt projection.

The verdict rule is :func:`dpaudit.check_local.audit_local`'s.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from dpaudit.errors import DPAuditError, check_int, check_nonnegative

__all__ = ["LossSequence", "simulate_bco", "is_bco", "audit_local_bco", "audit_pair", "run_for_account"]


class LossSequence:
    """An oblivious sequence of convex losses f_t(x) = a_t + <c_t, x> + (mu_t/2)||x - x*||^2 + q_t, q_t ~ U[-s, s]."""

    def __init__(self, a: Any, c: Any, mu: Any = 0.0, x_star: Any = None, noise: float = 0.0) -> None:
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
    def stochastic(cls, d: int, horizon: int, mu: float = 0.5, x_star: Any = None, noise: float = 0.25) -> "LossSequence":
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
        from dpaudit.policies.bco import unit_vectors

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
            from dpaudit.policies.bco import project_ball

            x = project_ball(self.x_star - C / M, radius)
        else:
            n = float(np.linalg.norm(C))
            x = -radius * C / n if n > 0 else np.zeros(self.d)
        diff = x - self.x_star
        return x, float(A + C @ x + 0.5 * M * diff @ diff)


def is_bco(obj: Any) -> bool:
    """Whether ``obj`` (a registered name, a class or an instance) follows the continuous-action contract."""
    if isinstance(obj, str):
        if ":" in obj:
            return False  # plug-ins are K-armed unless built; the local audit checks the built policy
        from dpaudit.policies.registry import get_policy_class

        try:
            obj = get_policy_class(obj)
        except DPAuditError:
            return False
    return bool(getattr(obj, "continuous_actions", False))


def _check_env(policy: Any, losses: LossSequence, horizon: int) -> None:
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


def simulate_bco(policy: Any, losses: LossSequence, n_runs: int, seed: int = 0, *, horizon: int | None = None,
                 record: bool = False) -> dict[str, Any]:
    """Run a BCO policy on ``losses`` for ``horizon`` rounds (default: all) in ``n_runs`` runs.

    Returns ``regret`` (n_runs,): sum_t (1/m) sum_k f_t(x_{t,k}) - min_x sum_t f_t(x) with the noise-free
    f_t (the pseudo-regret; seed 003 eq. 2), ``best`` (the minimiser and its value) and ``seconds``.
    The losses are checked once against the policy's B (and G for two-point policies).
    """
    from dpaudit.policies.bco import check_points

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


def run_for_account(policy: Any, horizon: int, n_runs: int, seed: int) -> dict[str, Any]:
    """``dpaudit account policy`` for a BCO policy: run it on the stochastic losses (recording its ledger).

    ``reward_span`` is the width of the user datum's domain (what one unit of ledger coefficient spans).
    """
    losses = LossSequence.stochastic(policy.d, horizon)
    scale = min(1.0, policy.loss_bound / losses.bound(policy.radius),
                policy.lipschitz / max(losses.lipschitz(policy.radius), 1e-300))
    losses = LossSequence(losses.a * scale, losses.c * scale, losses.mu * scale, losses.x_star, losses.noise * scale)
    simulate_bco(policy, losses, n_runs, seed, record=True)
    lo, hi = policy.domain
    return {"table": None, "features": None, "reward_span": float(hi - lo)}


# ---- the local audit ------------------------------------------------------------------------------------

def audit_pair(policy: Any, horizon: int, j: int) -> tuple[LossSequence, LossSequence]:
    """Neighbouring loss sequences differing in user j's loss only (module docstring, part 4)."""
    T, d = horizon, policy.d
    if policy.n_points == 1:
        a0, a1 = np.zeros(T), np.zeros(T)
        a0[j], a1[j] = -policy.loss_bound, policy.loss_bound
        return LossSequence(a0, np.zeros((T, d))), LossSequence(a1, np.zeros((T, d)))
    g = min(policy.lipschitz, policy.loss_bound / policy.radius)
    c0, c1 = np.zeros((T, d)), np.zeros((T, d))
    c0[j, 0], c1[j, 0] = -g, g
    return LossSequence(np.zeros(T), c0), LossSequence(np.zeros(T), c1)


def _play(policy_for: Callable[[], Any], losses: LossSequence, n: int, rng: np.random.Generator, rounds: int) -> Any:
    pol = policy_for()
    pol.keep_transcript = True
    pol.reset(n, rng, record=False)
    for t in range(rounds):
        P = pol.act(t)
        pol.observe(t, P, losses.values(t, P, rng))
    return pol


def _transcript_features(pol: Any, j: int) -> np.ndarray:
    o = pol.transcript()[:, j, :]  # (n, 1)
    if pol.n_points == 1:
        return o
    P = pol.trajectory()[:, j]
    D = P[:, 0] - P[:, 1]
    D = D / np.maximum(np.linalg.norm(D, axis=1, keepdims=True), 1e-300)
    return np.concatenate([o, o * D], axis=1)


def _central_features(pol: Any, j: int) -> np.ndarray:
    P = pol.trajectory()
    centre = P[:, j + 1].mean(axis=1)  # (n, d)
    E = (P[:, j, 0] - P[:, j, 1]) / 2 if pol.n_points == 2 else P[:, j, 0]
    outer = (centre[:, :, None] * E[:, None, :]).reshape(centre.shape[0], -1)
    return np.concatenate([centre, outer], axis=1)


def _view_attack(kind: str, policy_for: Callable[[], Any], probe: Any, horizon: int, *, delta: float, confidence: float,
                 n_fresh: int, n_select: int, seed: np.random.SeedSequence):
    """Part 4 (kind "transcript": the messages) or 5 (kind "central": the points only), over users j."""
    from dpaudit.attacks.result import AuditResult
    from dpaudit.check_local import _threshold_attack

    t0 = time.perf_counter()
    last = horizon - 2  # the central features need round j + 1
    rounds = sorted({j for j in (0, 1, horizon // 2, last) if 0 <= j <= last})
    rows = []
    for j, ss in zip(rounds, seed.spawn(len(rounds))):
        pair = audit_pair(probe, horizon, j)

        def sample(side: int, n: int, rng: np.random.Generator, j: int = j, pair: Any = pair) -> np.ndarray:
            if kind == "transcript":
                return _transcript_features(_play(policy_for, pair[side], n, rng, j + 1), j)
            return _central_features(_play(policy_for, pair[side], n, rng, j + 2), j)

        res = _threshold_attack(sample, n_select, n_fresh, ss, delta, confidence, len(rounds), max(n_fresh, 1))
        res["round"] = j
        rows.append(res)
    best = max(rows, key=lambda r: r["epsilon_lower"])
    what = (f"user {best['round']}'s loss f = -{probe.loss_bound:g} vs +{probe.loss_bound:g}" if probe.n_points == 1
            else f"user {best['round']}'s loss f(x) = -g<e_1, x> vs +g<e_1, x>")
    label = f"{what} (other users' losses 0)"
    stat = ("projection of (message, message x direction of x1 - x2) onto the learnt mean difference"
            if kind == "transcript" else "projection of (centre of the next points, its outer product with the "
            "exploration direction) onto the learnt mean difference")
    if kind == "transcript" and probe.n_points == 1:
        stat = "message"
    witness = {"label": label, "statistic": stat, "threshold": best["threshold"], "direction": best["direction"]}
    return AuditResult(kind, best["epsilon_lower"], delta, confidence, witness,
                       samples=2 * len(rounds) * (n_fresh + n_select + max(1, n_select // 2)),
                       seconds=time.perf_counter() - t0, details={"fpr": best["fpr"], "fnr": best["fnr"], "rounds": rows})


def audit_local_bco(policy_for: Callable[[], Any], out: dict[str, Any], *, delta: float, confidence: float, runs: int,
                    horizon: int, seed: int, central: bool, eps_claim: float,
                    progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The local audit of a BCO policy (module docstring); ``out`` holds what audit_local filled in already."""
    from dpaudit import __version__
    from dpaudit.check_local import LOCAL_DEFAULTS, channel_attack, ledger_findings, ledger_per_user, local_verdict

    t_start = time.perf_counter()
    T = horizon
    policy = policy_for()
    notes = out["notes"]
    root = np.random.SeedSequence(seed)
    s_ledger, s_channel, s_transcript, s_central = root.spawn(4)
    n_parts = 2 + int(central)
    conf_each = 1 - (1 - confidence) / n_parts
    out.update({"n_arms": None, "action_space": f"points of the ball of radius {policy.radius:g} in R^{policy.d}, "
                f"{policy.n_points} per round", "confidence_per_attack": conf_each})

    # 1. ledger: the background losses (0, and user 0 at the low extreme), 200 runs
    if progress:
        progress("local: ledger")
    pol = policy_for()
    simulate_bco(pol, audit_pair(pol, T, 0)[0], 200, int(s_ledger.generate_state(1)[0]), record=True)
    ledger = ledger_per_user(pol.ledger, delta)
    ledger_findings(out, notes, policy, ledger, 200 * T)
    out["exact"] = None

    # 2. channel, black box
    if progress:
        progress("local: channel attack")
    attacks = [channel_attack(policy, delta=delta, confidence=conf_each, n_fresh=LOCAL_DEFAULTS["channel_factor"] * runs,
                              n_select=max(2000, runs // 2), seed=s_channel)]
    # 4. transcript
    if progress:
        progress("local: transcript attack")
    n_tr = max(1000, runs // LOCAL_DEFAULTS["transcript_div"])
    attacks.append(_view_attack("transcript", policy_for, policy, T, delta=delta, confidence=conf_each, n_fresh=n_tr,
                                n_select=max(1000, n_tr // 5), seed=s_transcript))
    # 5. central Table DP on the point sequence
    central_out = None
    if central:
        if progress:
            progress("local: central Table-DP audit (points)")
        n_c = max(1000, runs // LOCAL_DEFAULTS["central_div"])
        c = _view_attack("central", policy_for, policy, T, delta=delta, confidence=conf_each, n_fresh=n_c,
                         n_select=max(1000, n_c // 5), seed=s_central)
        low = c.epsilon_lower
        verdict = "violation" if low > eps_claim else "consistent"
        central_out = {"verdict": verdict, "epsilon_claimed": eps_claim, "epsilon_lower": low, "gap": eps_claim - low,
                       "reason": (f"the point-sequence attack's lower bound eps >= {low:.4g} "
                                  f"{'exceeds' if low > eps_claim else 'is within'} the claimed eps = {eps_claim:.4g}"),
                       "witness": c.witness, "attacks": [c.to_dict()], "ledger": None,
                       "notes": ["the view is the sequence of points played (BCO): one learnt-projection threshold "
                                 "test, not the K-armed audit's attacks"], "seconds": c.seconds}
    out["central"] = central_out

    verdict, reason, best_lower = local_verdict(eps_claim, delta, ledger, None, attacks, central_out)
    out.update({"verdict": verdict, "reason": reason, "epsilon_lower": best_lower, "gap": eps_claim - best_lower,
                "attacks": [a.to_dict() for a in attacks],
                "versions": {"dpaudit": __version__, "numpy": np.__version__},
                "seconds": out.get("seconds_before", 0.0) + time.perf_counter() - t_start})
    out.pop("seconds_before", None)
    return out


# ---- dpaudit regret for BCO policies ------------------------------------------------------------------

def make_losses(name: str | None, d: int, horizon: int, params: dict[str, str] | None = None) -> LossSequence:
    """``--env stochastic`` (default) or ``adversarial`` with ``--env-param`` values (floats; ``seed`` an int)."""
    name = name or "stochastic"
    raw = dict(params or {})
    allowed = {"stochastic": ("mu", "noise"), "adversarial": ("seed", "scale", "jitter", "mu")}
    if name not in allowed:
        raise DPAuditError(f"BCO environment {name!r} is unknown; choose stochastic or adversarial.")
    kw: dict[str, Any] = {}
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
