"""The GOPE family for linear bandits with a fixed finite action set: AdaC-GOPE, AdaR-GOPE, GOPE.

G-Optimal design-based Phased Elimination (Lattimore and Szepesvári 2020, Alg. 12) as written in
Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits" (Alg. 2, AdaC-GOPE, rho-zCDP),
and Azize & Basu (2023b), "Rényi Differentially Private Bandits" (Alg. 3, AdaR-GOPE, (alpha,
eps)-RDP). Phase
``l = 1, 2, ...`` with target ``beta_l = 2^-l``:

1. a G-optimal design ``pi_l`` on the active set ``A_l`` (Frank-Wolfe, cached per active set);
2. each support arm ``a`` is played ``T_l(a) = ceil(c_l pi_l(a))`` times, with ``c_l`` from
   Azize & Basu (2023a), Eq. (4) (AdaC), Azize & Basu (2023b), Eq. (8) (AdaR) or Eq. (4) without its private term (GOPE);
3. ``theta_l = V_l^{-1} sum_{phase} a_s r_s`` with ``V_l = sum_a T_l(a) a a^T``, made private:
   AdaC (Alg. 2 Line 12, App. D-C): ``theta + V^{-1/2} N``, ``N ~ N(0, (2/rho) g_l^2 I)``,
   ``g_l = max_{b in A_l} ||b||_{V_l^{-1}}``; AdaR (Alg. 3 Line 11): ``theta + V^{-1} sum_a a N_a``,
   ``N_a ~ N(0, 2 alpha / eps)`` i.i.d. per support arm;
4. elimination: ``A_{l+1} = {a in A_l : max_b <theta_l, b - a> <= 2 beta_l}``.

A phase only uses its own rewards (forgetting), so each round's reward feeds exactly one release.

Mechanisms as recorded in the ledger (rewards in ``[-B, B]``, ``B = reward_bound = 1`` in the papers):

* AdaC releases ``phi / g_l`` with ``phi = V_l^{-1/2} sum a_s r_s`` (App. D-C's statistic, scaled so
  that its L2-sensitivity is ``2 B`` for every run) with ``sigma = 2B / sqrt(2 rho)``; then
  ``theta_tilde = g_l V_l^{-1/2} release``, which is exactly App. D-C's ``theta_hat + V^{-1/2} N``.
  The coefficient of round s is ``V_l^{-1/2} a_s / g_l``.
* AdaR releases the per-arm reward sums of the phase (a K-vector; arms outside the support have sum
  0 and their noisy values are not used) with ``sigma = 2B sqrt(alpha / (2 eps))``, i.e.
  ``N(0, 2 alpha / eps)`` at ``B = 1``: L2-sensitivity ``2B`` since a round feeds one coordinate.
  The coefficient of round s is the unit vector of its arm.

Choices the papers leave open, or where we deviate (each deliberate):

* Noise of AdaC: Alg. 2 Line 12 writes ``N ~ N(0, 2d/(rho c_l) I)``, which equals App. D-C's
  ``(2/rho) g_l^2`` only for an exact G-optimal design without rounding (then ``g_l^2 = d / c_l``).
  Frank-Wolfe stops at ``g(pi)^2 <= d (1 + tol)``, for which Line 12's sigma would be slightly too
  small; we use App. D-C's ``g_l`` computed from the actual ``V_l`` (the exact sensitivity; with the
  ceilings it is at most ``sqrt(d (1 + tol) / c_l)``).
* Phase bookkeeping: Alg. 2 Line 10 sets ``t_{l+1} = t_l + T_l + 1``; we start the next phase right
  after the ``T_l`` plays of this one. Within a phase the support arms are played in blocks, in
  increasing arm index.
* Design: Frank-Wolfe with away steps (Todd and Yildirim 2007) to relative tolerance ``fw_tol`` on
  ``max_a ||a||^2_{V(pi)^{-1}} / r``, ``r = dim span(A_l)``; the support is not forced below
  ``d(d+1)/2`` (Eq. (5)'s constraint), though away steps drop most spurious points. When the
  active set does not span R^d (e.g. one arm left) everything is done in its span, with
  pseudo-inverses; c_l still uses the ambient d.
* Reward bound ``B`` other than 1: the private term of c_l is multiplied by ``B`` (the noise scales
  with ``B``); at ``B = 1`` the formulas are the papers'.
* GOPE's c_l is Eq. (4)'s first term ``8 d / beta^2 log(4 / delta_{K,l})`` (the twin that Azize & Basu 2023a,
  Sec. VII, compare against); the textbook Alg. 12 uses ``2 d / eps^2 log(K l (l+1) / delta)``.

Action sets: ``act(t, arms)`` takes ``(n_runs, K, d)`` features that must stay the same across
steps (a fixed action set, Alg. 2 Line 1); different runs may have different sets. Designs are
cached by (action set, active subset) and phase matrices by (action set, active subset, l), so
the cache survives ``reset`` and is shared by all runs that agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpaudit.accountants import RDP, ZCDP
from dpaudit.errors import DPAuditError, check_delta, check_int, check_order, check_positive
from dpaudit.mechanisms import Fed, GaussianMechanism, PreDrawn
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import register

__all__ = ["g_optimal_design", "AdaCGOPE", "AdaRGOPE", "GOPE", "PhasePlan"]

_FEATURE_TOL = 1e-9
_RANK_TOL = 1e-10


def g_optimal_design(X: np.ndarray, tol: float = 1e-4, max_iter: int = 100_000) -> np.ndarray:
    """A G-optimal (equivalently D-optimal, Kiefer-Wolfowitz) design on the rows of ``X`` (m, d).

    Frank-Wolfe with away steps on ``log det V(pi)`` in the span of the rows (dimension r), stopped
    when ``max_a ||a||^2_{V(pi)^+} <= r (1 + tol)``. Returns the weights (m,), summing to one.
    """
    X = np.asarray(X, dtype=float)
    m = X.shape[0]
    if m == 1:
        return np.ones(1)
    _, s, vt = np.linalg.svd(X, full_matrices=False)
    r = int(np.sum(s > s[0] * _RANK_TOL)) if s.size and s[0] > 0 else 0
    if r == 0:
        return np.full(m, 1.0 / m)  # all-zero actions: every design is optimal
    Y = X @ vt[:r].T  # coordinates in the span, (m, r)
    w = np.full(m, 1.0 / m)
    for _ in range(max_iter):
        Vinv = np.linalg.inv(Y.T @ (w[:, None] * Y))
        g = np.einsum("ij,jk,ik->i", Y, Vinv, Y)
        j = int(np.argmax(g))
        supp = np.flatnonzero(w > 0)
        k = int(supp[np.argmin(g[supp])])
        if g[j] <= r * (1 + tol):
            break
        if g[j] - r >= r - g[k] or supp.size == 1:
            step = (g[j] / r - 1.0) / (g[j] - 1.0)
            w *= 1.0 - step
            w[j] += step
        else:
            drop = w[k] / (1.0 - w[k])
            step = drop if g[k] <= 1.0 else min((1.0 - g[k] / r) / (g[k] - 1.0), drop)
            w *= 1.0 + step
            w[k] -= step
            if step == drop:
                w[k] = 0.0
        w[w < 1e-15] = 0.0
        w /= w.sum()
    return w


@dataclass(frozen=True)
class PhasePlan:
    """What a phase of one (action set, active subset, l) looks like; shared by the runs that agree."""

    counts: np.ndarray  # (K,) T_l(a), zero off the support
    V: np.ndarray  # (d, d) sum_a T_l(a) a a^T
    V_pinv: np.ndarray  # (d, d) V^+
    V_pinv_sqrt: np.ndarray  # (d, d) (V^+)^{1/2}
    g: float  # max_{b in A_l} ||b||_{V^+}
    c: float  # c_l


class _GOPEBase(Policy):
    """Shared batched machinery of the phased-elimination blueprint (see the module docstring).

    Two paths: per step (``act``/``observe``) and per phase (``plan``/``complete``, the protocol of
    :mod:`dpaudit.simulate`'s episode path; call ``set_arms(env.arms(0))`` first, since that path
    never calls ``act``). A phase is K back-to-back segments, arm a played ``T_l(a)`` times.
    """

    private = False
    #: the protocol its claim is about: Table DP (Azize & Basu (2023a) prove AdaC-GOPE in the Interactive form, which
    #: implies it, Prop. 2(a); dpaudit cannot feed it an adversary's queries, see ``accepts_queries``)
    notion = "table"
    accepts_queries = False  # its phase schedule fixes the arm observed at every step
    fast_path = True
    #: runs share their phases (a plan per action set, active set and phase): the block path writes views by group
    shared_blocks = True

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        delta: float = 0.001,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
        fw_tol: float = 1e-4,
    ) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms (K)", n_arms, minimum=2)
        self.dim = check_int("dim (d)", dim, minimum=1)
        self.delta = check_delta(delta)
        self.reward_bound = check_positive("reward_bound", reward_bound)
        self.feature_bound = check_positive("feature_bound", feature_bound)
        self.fw_tol = check_positive("fw_tol", fw_tol)
        if self.private:
            self.reward_range = (-self.reward_bound, self.reward_bound)
        self._design_cache: dict[tuple[bytes, bytes], np.ndarray] = {}
        self._plan_cache: dict[tuple[bytes, bytes, int], PhasePlan] = {}

    # -- the phase length ---------------------------------------------------------------------
    def _log_term(self, ell: int) -> float:
        """``log(4 / delta_{K,l}) = log(4 K l (l + 1) / delta)`` (Eq. (4) and Eq. (8))."""
        return math.log(4.0 * self.n_arms * ell * (ell + 1) / self.delta)

    def private_length(self, ell: int) -> float:
        """The private term of c_l (blue in Eq. (4)); zero for non-private GOPE."""
        return 0.0

    def phase_constant(self, ell: int) -> float:
        """``c_l = 8 d / beta_l^2 log(4 / delta_{K,l})`` plus the private term."""
        beta = 2.0 ** (-ell)
        return 8.0 * self.dim / beta**2 * self._log_term(ell) + self.private_length(ell)

    # -- designs and plans --------------------------------------------------------------------
    def design(self, actions: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The cached G-optimal design (K,) of ``actions`` (K, d) restricted to ``mask`` (K,)."""
        key = (actions.tobytes(), np.packbits(mask).tobytes())
        pi = self._design_cache.get(key)
        if pi is None:
            pi = np.zeros(self.n_arms)
            pi[mask] = g_optimal_design(actions[mask], tol=self.fw_tol)
            self._design_cache[key] = pi
        return pi

    def phase_plan(self, actions: np.ndarray, mask: np.ndarray, ell: int) -> PhasePlan:
        """Counts, design matrix and sensitivity of phase ``ell`` on active set ``mask`` (cached)."""
        key = (actions.tobytes(), np.packbits(mask).tobytes(), int(ell))
        plan = self._plan_cache.get(key)
        if plan is None:
            pi = self.design(actions, mask)
            c = self.phase_constant(ell)
            counts = np.where(pi > 0, np.ceil(c * pi), 0.0).astype(np.int64)
            V = (actions.T * counts) @ actions
            evals, evecs = np.linalg.eigh(V)
            keep = evals > evals.max() * _RANK_TOL if evals.max() > 0 else np.zeros_like(evals, dtype=bool)
            inv = np.where(keep, 1.0 / np.where(keep, evals, 1.0), 0.0)
            V_pinv = (evecs * inv) @ evecs.T
            V_pinv_sqrt = (evecs * np.sqrt(inv)) @ evecs.T
            act = actions[mask]
            g = float(np.sqrt(np.max(np.einsum("id,de,ie->i", act, V_pinv, act))))
            if not g > 0:
                raise DPAuditError("every active action is the zero vector; GOPE needs actions that span some direction.")
            plan = PhasePlan(counts, V, V_pinv, V_pinv_sqrt, g, c)
            self._plan_cache[key] = plan
        return plan

    # -- state --------------------------------------------------------------------------------
    def _reset(self) -> None:
        n, K, d = self.n_runs, self.n_arms, self.dim
        self._arms: np.ndarray | None = None
        self._rows = np.arange(n)
        self._acted: tuple[int, np.ndarray] | None = None  # (step, actions) of the last act, for observe
        self.set_id = np.zeros(n, dtype=np.int64)
        self._sets: list[np.ndarray] = []
        self.ell = np.ones(n, dtype=np.int64)
        self.start = np.zeros(n, dtype=np.int64)
        self.active = np.ones((n, K), dtype=bool)
        self.counts = np.zeros((n, K), dtype=np.int64)
        self.cum = np.zeros((n, K), dtype=np.int64)
        self.length = np.zeros(n, dtype=np.int64)
        self.sums = np.zeros((n, K))  # per-arm reward sums of the current phase
        self.theta = np.zeros((n, d))  # last (private) estimate
        self.g = np.zeros(n)
        self.V_pinv = np.zeros((n, d, d))
        self.V_pinv_sqrt = np.zeros((n, d, d))
        self._mech = self._mechanism()
        self._blocks = np.zeros((0, n, 0))  # (levels, n_runs, width) standard draws, see _noise

    def _mechanism(self) -> GaussianMechanism | None:
        return None

    def _noise(self, runs: np.ndarray, width: int) -> PreDrawn:
        """Standard draws for the releases of ``runs`` at their current phases.

        Run i's phase-l release uses row i of the l-th (n_runs, width) block of standard normals,
        blocks drawn from the policy's generator on first use, in phase order. The per-step path
        and the phase path group phase ends differently (runs in different phases can end at the
        same step), so the draws must not depend on the grouping: this way both paths release
        identical values on fixed inputs for the same seed, with no per-run generator.
        """
        level = self.ell[runs] - 1
        need = int(level.max(initial=-1)) + 1
        if need > self._blocks.shape[0]:
            new = np.stack([self.rng.standard_normal((self.n_runs, width))
                            for _ in range(need - self._blocks.shape[0])])
            self._blocks = new if self._blocks.shape[0] == 0 else np.concatenate([self._blocks, new])
        return PreDrawn(self._blocks[level, runs])

    # -- episode-level path ---------------------------------------------------------------------
    def set_arms(self, arms: np.ndarray) -> None:
        """Give the fixed action set (n_runs, K, d) before using ``plan``/``complete``."""
        arr = self._check_arms(0, arms)
        if self._arms is None:
            self._init_arms(0, arr)
            self._arms = arms

    def plan(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each run's current phase: start (n,), arms (n, K) = 0..K-1, lengths (n, K) = T_l(a)."""
        if self._arms is None:
            raise DPAuditError("the phase path needs the action set: call set_arms(env.arms(0)) before plan().")
        arms = np.broadcast_to(np.arange(self.n_arms), (self.n_runs, self.n_arms))
        return self.start.copy(), arms, self.counts.copy()

    def complete(self, runs: np.ndarray, sums: np.ndarray) -> None:
        """Finish the phases of ``runs`` given their per-arm reward sums (m, K), in order of end step."""
        runs = np.asarray(runs, dtype=np.int64)
        sums = np.asarray(sums, dtype=float)
        if sums.shape != (runs.size, self.n_arms):
            raise DPAuditError(f"complete() needs sums of shape ({runs.size}, {self.n_arms}), got {sums.shape}.")
        if self.private:
            lo, hi = self.reward_range
            bound = np.maximum(abs(lo), abs(hi)) * self.counts[runs]
            if np.any(np.abs(sums) > bound + 1e-9 * np.maximum(bound, 1)) or not np.all(np.isfinite(sums)):
                raise DPAuditError(
                    f"a phase reward sum exceeds count x {hi:g}; the rewards leave [{lo:g}, {hi:g}], the range the sensitivity assumes."
                )
        ends = self.start[runs] + self.length[runs] - 1
        order = np.argsort(ends, kind="stable")
        runs, sums, ends = runs[order], sums[order], ends[order]
        for t_end in np.unique(ends):
            sel = ends == t_end
            self.sums[runs[sel]] = sums[sel]
            self._end_phase(int(t_end), runs[sel])

    def _load_plans(self, runs: np.ndarray) -> None:
        """Fill the phase schedule of ``runs`` from the (cached) plans of their active sets."""
        packed = np.packbits(self.active[runs], axis=1).astype(np.int64)
        keys = np.column_stack([self.set_id[runs], self.ell[runs], packed])
        # the rows as one integer each (digits in the rows' order, so the groups come in the same order), when it fits
        radix = np.maximum(keys.max(axis=0, initial=0) + 1, [1, 1] + [256] * packed.shape[1])
        if float(np.prod(radix.astype(float))) < 2.0**62:
            place = np.cumprod(np.r_[radix[1:], 1][::-1])[::-1]
            uniq, first, inverse = np.unique(keys @ place, return_index=True, return_inverse=True)
            uniq = keys[first]
        else:
            uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        for u in range(uniq.shape[0]):
            sel = runs[inverse == u]
            r0 = sel[0]
            plan = self.phase_plan(self._sets[self.set_id[r0]], self.active[r0], int(self.ell[r0]))
            self.counts[sel] = plan.counts
            self.g[sel] = plan.g
            self.V_pinv[sel] = plan.V_pinv
            self.V_pinv_sqrt[sel] = plan.V_pinv_sqrt
        self.cum[runs] = np.cumsum(self.counts[runs], axis=1)
        self.length[runs] = self.cum[runs, -1]

    def _init_arms(self, t: int, arms: np.ndarray) -> None:
        n = self.n_runs
        if arms.strides[0] == 0 or np.all(arms == arms[:1]):
            self._sets = [np.ascontiguousarray(arms[0])]
            self.set_id[:] = 0
        else:
            flat = arms.reshape(n, -1)
            uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
            self._sets = [np.ascontiguousarray(u.reshape(self.n_arms, self.dim)) for u in uniq]
            self.set_id[:] = inverse.reshape(-1)
        self._arms = arms
        self.start[:] = t
        self._load_plans(np.arange(n))

    def _check_arms(self, t: int, arms: np.ndarray | None) -> np.ndarray:
        who = type(self).name or type(self).__name__
        if arms is None:
            raise DPAuditError(f"{who} needs the action features: arms must be an (n_runs, K, d) array, got None.")
        if self._arms is not None and arms is self._arms:
            return arms
        arr = np.asarray(arms, dtype=float)
        want = (self.n_runs, self.n_arms, self.dim)
        if arr.shape != want:
            raise DPAuditError(f"{who} got arms of shape {arr.shape} at step {t}; expected (n_runs, K, d) = {want}.")
        if not np.all(np.isfinite(arr)):
            raise DPAuditError(f"{who} got NaN or inf action features at step {t}.")
        if self._arms is not None:
            if not np.array_equal(arr, self._arms):
                raise DPAuditError(f"{who} needs a fixed action set, but the arms changed at step {t}.")
            self._arms = arms  # same content, remember the new object for the identity shortcut
            return arr
        if self.private:
            norms = np.linalg.norm(arr, axis=-1)
            if np.any(norms > self.feature_bound * (1 + _FEATURE_TOL)):
                raise DPAuditError(
                    f"{who} got an action of norm {norms.max():g}, above feature_bound={self.feature_bound:g} "
                    "(Azize & Basu 2023a, Assumption 1); rescale the actions or raise feature_bound."
                )
        return arr

    # -- the loop -----------------------------------------------------------------------------
    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        arr = self._check_arms(t, arms)
        if self._arms is None:
            self._init_arms(t, arr)
            self._arms = arms if arms is not None else arr
        pos = t - self.start
        self._acted = (t, np.sum(self.cum <= pos[:, None], axis=1))
        return self._acted[1].copy()

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        acted = self._acted
        if acted is None or acted[0] != t or not np.array_equal(actions, acted[1]):
            raise DPAuditError(f"observe at step {t} got actions that differ from the phase schedule act returned.")
        self._acted = None
        self.sums[self._rows, actions] += rewards
        ended = np.flatnonzero(t + 1 - self.start == self.length)
        if ended.size:
            self._end_phase(t, ended)

    def _estimate(self, t: int, runs: np.ndarray, arms: np.ndarray) -> np.ndarray:
        """Non-private least squares ``V^+ sum_a a S_a`` (Step 3)."""
        b = np.einsum("nk,nkd->nd", self.sums[runs], arms)
        return np.einsum("nde,ne->nd", self.V_pinv[runs], b)

    def _end_phase(self, t: int, runs: np.ndarray) -> None:
        """Steps 3-5 for the runs whose phase ended at step t, then plan their next phase."""
        arms = np.asarray(self._arms)[runs]
        theta = self._estimate(t, runs, arms)
        self.theta[runs] = theta
        vals = np.einsum("nkd,nd->nk", arms, theta)
        act = self.active[runs]
        best = np.max(np.where(act, vals, -np.inf), axis=1)
        beta = 2.0 ** (-self.ell[runs].astype(float))
        self.active[runs] = act & (best[:, None] - vals <= 2.0 * beta[:, None])
        self.ell[runs] += 1
        self.start[runs] = t + 1
        self.sums[runs] = 0.0
        self._load_plans(runs)

    def _fed(self, runs: np.ndarray, coef: np.ndarray) -> Fed:
        """Rounds of each run's phase, block by block, with ``coef[i, a]`` (m,) for arm a's block."""
        counts = self.counts[runs]  # (n_r, K)
        starts = self.start[runs][:, None] + self.cum[runs] - counts
        return Fed.blocks(np.repeat(np.arange(runs.size), self.n_arms), starts.reshape(-1), counts.reshape(-1),
                          coef.reshape(counts.size, -1))


@register("gope", family="gope")
class GOPE(_GOPEBase):
    """GOPE (G-optimal design phased elimination): the non-private twin of Azize & Basu (2023a), Alg. 2.

    Phase constant c_l = 8 d / beta_l^2 log(4 K l (l + 1) / delta) (Eq. (4) without its private
    term); no noise.
    """

    def __init__(self, n_arms: int = 10, dim: int = 3, delta: float = 0.001, fw_tol: float = 1e-4) -> None:
        super().__init__(n_arms, dim, delta, fw_tol=fw_tol)
        self.claim = None


@register("adac-gope", family="gope")
class AdaCGOPE(_GOPEBase):
    """AdaC-GOPE (Azize & Basu 2023a, Alg. 2, phase length Eq. (4)): Gaussian noise on V^{-1/2}-whitened estimates, rho-zCDP.

    ``c_l = 8d/beta_l^2 log(4/delta_{K,l}) + (2d/beta_l) sqrt((2/rho) f(d, delta_{K,l}))`` with
    ``delta_{K,l} = delta / (K l (l+1))`` and ``f(d, x) = d + 2 sqrt(d log(2/x)) + 2 log(2/x)``.
    Claim: rho-zCDP (Azize & Basu 2023a, Thm 3) under Table DP, which its Interactive form implies (Prop. 2(a)).
    """

    private = True

    def __init__(
        self,
        rho: float = 1.0,
        n_arms: int = 10,
        dim: int = 3,
        delta: float = 0.001,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
        fw_tol: float = 1e-4,
    ) -> None:
        self.rho = check_positive("rho", rho)
        super().__init__(n_arms, dim, delta, reward_bound, feature_bound, fw_tol)
        self.claim = ZCDP(self.rho)

    def private_length(self, ell: int) -> float:
        beta = 2.0 ** (-ell)
        x = self.delta / (self.n_arms * ell * (ell + 1))
        lg = math.log(2.0 / x)
        f = self.dim + 2.0 * math.sqrt(self.dim * lg) + 2.0 * lg
        return 2.0 * self.dim / beta * math.sqrt(2.0 / self.rho * f) * self.reward_bound

    def _mechanism(self) -> GaussianMechanism:
        return GaussianMechanism.for_zcdp(self.rho, 2.0 * self.reward_bound)

    def _estimate(self, t: int, runs: np.ndarray, arms: np.ndarray) -> np.ndarray:
        assert self._mech is not None
        S = self.V_pinv_sqrt[runs]  # (n_r, d, d)
        g = self.g[runs]
        b = np.einsum("nk,nkd->nd", self.sums[runs], arms)
        centre = np.einsum("nde,ne->nd", S, b) / g[:, None]
        fed = None
        if self.record:
            coef = np.einsum("nde,nke->nkd", S, arms) / g[:, None, None]  # (n_r, K, d)
            fed = self._fed(runs, coef)
        value = self._mech.release(
            centre, self._noise(runs, self.dim), ledger=self.ledger, label="whitened phase estimate V^-1/2 sum a_s r_s / g",
            step=t, runs=runs, fed=fed,
        )
        return g[:, None] * np.einsum("nde,ne->nd", S, value)


@register("adar-gope", family="gope")
class AdaRGOPE(_GOPEBase):
    """AdaR-GOPE (Azize & Basu 2023b, Alg. 3, phase length Eq. (8)): Gaussian noise on per-arm phase sums, (alpha, eps)-RDP.

    ``T_l(a) = ceil(8 d pi(a)/beta^2 L + (2 d pi(a)/beta) sqrt((2 alpha/eps) d (d+1) L))`` with
    ``L = log(4 K l (l+1) / delta)``; ``theta = V^{-1} sum_{a in supp} a (S_a + N_a)``.
    Claim: (alpha, eps)-RDP under View DP (Azize & Basu 2023b, Def. 3: reward sequences that differ in one step).
    """

    private = True
    notion = "view"

    def __init__(
        self,
        alpha: float = 2.0,
        epsilon: float = 1.0,
        n_arms: int = 10,
        dim: int = 3,
        delta: float = 0.001,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
        fw_tol: float = 1e-4,
    ) -> None:
        self.alpha = check_order(alpha, finite_for="AdaR-GOPE")
        self.epsilon = check_positive("epsilon", epsilon)
        super().__init__(n_arms, dim, delta, reward_bound, feature_bound, fw_tol)
        self.claim = RDP.point(self.alpha, self.epsilon)

    def private_length(self, ell: int) -> float:
        beta = 2.0 ** (-ell)
        d = self.dim
        return 2.0 * d / beta * math.sqrt(2.0 * self.alpha / self.epsilon * d * (d + 1) * self._log_term(ell)) * self.reward_bound

    def _mechanism(self) -> GaussianMechanism:
        return GaussianMechanism.for_rdp(self.alpha, self.epsilon, 2.0 * self.reward_bound)

    def _estimate(self, t: int, runs: np.ndarray, arms: np.ndarray) -> np.ndarray:
        assert self._mech is not None
        fed = None
        if self.record:
            coef = np.broadcast_to(np.eye(self.n_arms), (runs.size, self.n_arms, self.n_arms))
            fed = self._fed(runs, coef)
        value = self._mech.release(
            self.sums[runs], self._noise(runs, self.n_arms), ledger=self.ledger, label="per-arm phase reward sums", step=t,
            runs=runs, fed=fed,
        )
        value = np.where(self.counts[runs] > 0, value, 0.0)
        b = np.einsum("nk,nkd->nd", value, arms)
        return np.einsum("nde,ne->nd", self.V_pinv[runs], b)
