"""The OFUL family for linear contextual bandits: AdaC-OFUL, AdaR-OFUL, RS-OFUL and OFUL.

All four follow one batched blueprint, the Rarely-Switching OFUL of Abbasi-Yadkori, Pál and
Szepesvári (2011) as written in Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits"
(Alg. 3), and Azize & Basu (2023b), "Rényi Differentially Private Bandits" (Alg. 4):

* ``V_0 = lambda I``; after round s the design matrix is ``V_s = V_{s-1} + a_s a_s^T``.
* At step t, if ``det V_{t-1} > (1 + C) det V_tau`` (Line 6) the estimate is refreshed:
  ``theta_tau = V_{t-1}^{-1} (sum_s a_s r_s [+ sum_m Y_m])`` and ``tau <- t - 1``.
* The action is ``argmax_a <theta_tau, a> + beta_tau ||a||_{V_tau^{-1}}`` (Line 11).

``oful`` is the same loop with ``C = 0``: the determinant grows after every round with a non-zero
action, so the estimate is refreshed at every step (OFUL itself).

The private variants never touch the raw sum ``sum_s a_s r_s``: at each switch they release the sum
over the *episode* just closed through a Gaussian mechanism (L2-sensitivity ``2 B L`` for rewards in
``[-B, B]`` and features of norm ``<= L``; Azize & Basu 2023a, App. D-C, give 2 for ``B = L = 1``) and add
the release to a running noisy sum (post-processing; Azize & Basu 2023a, App. D-C, show the cumulative sums
are rho-zCDP). Each round's reward therefore feeds exactly one release (the one closing its episode).

Indexing: rounds are ``t = 0 .. T-1`` (the papers count from 1). ``act(t)`` sees the design matrix
after the rounds ``0 .. t-1`` (the paper's ``V_{t-1}`` with 1-based t). Episodes are the rounds
``[tau, t)`` between two switches.

Choices the papers leave open (each stated where it is made):

* beta_t (Azize & Basu 2023a, App. F, Thm 14 Step 4): ``beta_t = sqrt(2 log(1/delta) + log(det V_t / lambda^d))
  + sqrt(lambda) S`` with ``S`` the bound on ``||theta*||`` (Assumption 1(3): ``S = 1``).
* The privacy width ``gamma_t / sqrt(t)`` of App. F bounds ``||N_t||_{V_t^{-1}}`` through
  ``lambda_min(V_t) >= lambda + lambda_min(G_t)`` and a lower bound on ``lambda_min(G_t)`` that needs
  the unknown ``lambda_0`` of Assumption 2. We use the observed ``lambda_min(V_tau)`` instead (public:
  it depends only on contexts and past actions), which is the bound before that last step, so
  ``||N||_{V^{-1}} <= sigma sqrt(l f(d, delta_l) / lambda_min(V_tau))`` with ``f(d, delta) = d +
  2 sqrt(d log(1/delta)) + 2 log(1/delta)`` (App. F, event E_3). ``N`` takes one value per episode,
  so we union-bound over episodes with ``delta_l = delta / (l (l + 1))`` rather than ``delta / T``;
  this needs no horizon (the papers' Algorithm inputs list T only for this).
* Ties in the argmax go to the lowest arm index.
"""

from __future__ import annotations

import math
import numpy as np

from dpaudit.accountants import RDP, ZCDP
from dpaudit.errors import DPAuditError, check_delta, check_int, check_nonnegative, check_order, check_positive
from dpaudit.mechanisms import Fed, GaussianMechanism
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import register

__all__ = ["AdaCOFUL", "AdaROFUL", "RSOFUL", "OFUL", "batched_det", "batched_inv", "smallest_eigenvalue"]

_FEATURE_TOL = 1e-9


def batched_det(V: np.ndarray) -> np.ndarray:
    """Determinants of stacked ``(n, d, d)`` matrices; closed form for ``d <= 3`` (speed)."""
    d = V.shape[-1]
    if d == 1:
        return V[:, 0, 0].copy()
    if d == 2:
        return V[:, 0, 0] * V[:, 1, 1] - V[:, 0, 1] * V[:, 1, 0]
    if d == 3:
        return _det3(*_entries3(V))
    return np.linalg.det(V)


def _entries3(V: np.ndarray) -> tuple[np.ndarray, ...]:
    """The nine entries of stacked 3 x 3 matrices, row by row (each an (n,) view)."""
    return tuple(V[:, r, k] for r in range(3) for k in range(3))


def _det3(a, b, c, e, f, g, h, i, j) -> np.ndarray:
    """The determinant of [[a, b, c], [e, f, g], [h, i, j]] by the first row's cofactors, entrywise."""
    return a * (f * j - g * i) - b * (e * j - g * h) + c * (e * i - f * h)


def _inv3(a, b, c, e, f, g, h, i, j, det: np.ndarray) -> np.ndarray:
    """The inverse of [[a, b, c], [e, f, g], [h, i, j]] (each entry (n,)) as its adjugate over ``det``: (n, 3, 3)."""
    out = np.empty((a.shape[0], 3, 3))
    out[:, 0, 0] = f * j - g * i
    out[:, 0, 1] = c * i - b * j
    out[:, 0, 2] = b * g - c * f
    out[:, 1, 0] = g * h - e * j
    out[:, 1, 1] = a * j - c * h
    out[:, 1, 2] = c * e - a * g
    out[:, 2, 0] = e * i - f * h
    out[:, 2, 1] = b * h - a * i
    out[:, 2, 2] = a * f - b * e
    return out / det[:, None, None]


def batched_inv(V: np.ndarray) -> np.ndarray:
    """Inverses of stacked ``(n, d, d)`` matrices; adjugate formula for ``d <= 3`` (speed)."""
    d = V.shape[-1]
    if d > 3:
        return np.linalg.inv(V)
    det = batched_det(V)
    if d == 3:
        return _inv3(*_entries3(V), det)
    out = np.empty_like(V)
    if d == 1:
        out[:, 0, 0] = 1.0 / det
        return out
    if d == 2:
        out[:, 0, 0] = V[:, 1, 1]
        out[:, 1, 1] = V[:, 0, 0]
        out[:, 0, 1] = -V[:, 0, 1]
        out[:, 1, 0] = -V[:, 1, 0]
        return out / det[:, None, None]


def _packed_det(U: np.ndarray, d: int, iu: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Determinants from the packed upper triangles ``U`` (m, n) of symmetric matrices."""
    if d == 1:
        return U[0].copy()
    if d == 2:
        return U[0] * U[2] - U[1] * U[1]
    if d == 3:
        return _packed_det3(U)
    return np.linalg.det(_unpack(U, d, iu))


def _unpack(U: np.ndarray, d: int, iu: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Full ``(n, d, d)`` symmetric matrices from packed upper triangles ``(m, n)``."""
    V = np.empty((U.shape[1], d, d))
    V[:, iu[0], iu[1]] = U.T
    V[:, iu[1], iu[0]] = U.T
    return V


def _packed_inv(U: np.ndarray, d: int, iu: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """:func:`batched_inv` of the symmetric matrices packed in ``U`` (m, n), entry for entry: for d = 3 the
    stacked adjugate (:func:`_sym_inv3`) on the packed rows."""
    if d != 3:
        return batched_inv(_unpack(U, d, iu))
    return _sym_inv3(U.take(_SYM_PERM, axis=0), _packed_det3(U))


def _packed_smallest_eigenvalue(U: np.ndarray, d: int, iu: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """:func:`smallest_eigenvalue` of the symmetric matrices packed in ``U`` (m, n), value for value: for d = 3
    the same closed form (Smith 1961) on the stacked packed rows (:func:`_sym_smallest_eigenvalue3`)."""
    if d != 3:
        return smallest_eigenvalue(_unpack(U, d, iu))
    return _sym_smallest_eigenvalue3(U.take(_SYM_PERM, axis=0))


# The d = 3 switch on a handful of runs is bound by the count of numpy calls, not by arithmetic: the helpers
# below do the cofactor arithmetic of _det3 / _inv3 / smallest_eigenvalue on stacked rows (one
# gather, one product, one difference for all cofactors), the same products and differences in the same
# order, so every value is the same bit for bit (tests/test_oful.py compares them with the reference).
#: _packed_det's cofactors f j - g g, b j - g c, b g - f c as (first x second) - (third x fourth), rows of
#: the packed [a, b, c, f, g, j] = [V00, V01, V02, V11, V12, V22]
_DET_COF = np.array([[[3, 1, 1], [5, 5, 4]], [[4, 4, 3], [4, 2, 2]]])
#: the order of the stacked rows the switch gathers: [V00, V11, V22, V01, V02, V12] (diagonal first)
_SYM_PERM = np.array([0, 3, 5, 1, 2, 4])
#: _inv3's nine adjugate entries (row by row) on the symmetric rows in _SYM_PERM order (a f j b c g):
#: f j - g g, c g - b j, b g - c f, (c g - b j), a j - c c, c b - a g, (b g - c f), (c b - a g), a f - b b
_SYM_ADJ = np.array([[[1, 4, 3, 4, 0, 4, 3, 4, 0], [2, 5, 5, 5, 2, 3, 5, 3, 1]],
                     [[5, 3, 4, 3, 4, 0, 4, 0, 3], [5, 2, 1, 2, 4, 5, 1, 5, 3]]])
#: the cofactors of _packed_det in _SYM_PERM order, and the first row's entries (a, b, c) they multiply
_SYM_COF = np.array([[[1, 3, 3], [2, 2, 5]], [[5, 5, 1], [5, 4, 4]]])
_SYM_ROW0 = np.array([0, 3, 4])
# flat forms for np.take (a take along axis 0 costs a fraction of the equivalent fancy index on small arrays)
_DET_COF_FLAT, _SYM_ADJ_FLAT, _SYM_COF_FLAT = _DET_COF.ravel(), _SYM_ADJ.ravel(), _SYM_COF.ravel()


def _stacked_det3(X: np.ndarray, cof: np.ndarray, row0: np.ndarray) -> np.ndarray:
    """:func:`_det3` of symmetric matrices from their stacked entries ``X`` (6, n): ``cof`` (flat, 12) gathers
    the three cofactors' factors, ``row0`` (3, n) is the first row; ``a cof0 - b cof1 + c cof2``, left to right
    as in _det3."""
    G = X.take(cof, axis=0).reshape(2, 2, 3, X.shape[1])
    P = G[:, 0] * G[:, 1]
    P = P[0] - P[1]
    P *= row0
    out = P[0] - P[1]
    out += P[2]
    return out


def _packed_det3(U: np.ndarray) -> np.ndarray:
    """:func:`_det3` of the symmetric matrices packed in ``U`` (6, n), with the cofactors stacked: the same value
    as :func:`batched_det` on the full matrices, bit for bit, in fewer numpy calls."""
    return _stacked_det3(U, _DET_COF_FLAT, U[:3])


def _sym_inv3(X: np.ndarray, det: np.ndarray) -> np.ndarray:
    """``_packed_inv`` (d = 3) from the rows ``X`` (6, n) in ``_SYM_PERM`` order and the determinants ``det``
    (those of ``_packed_det``): each adjugate entry is _inv3's product difference (products commute
    exactly), divided by the determinant, copied into a C-ordered (n, 3, 3)."""
    G = X.take(_SYM_ADJ_FLAT, axis=0).reshape(2, 2, 9, X.shape[1])
    P = G[:, 0] * G[:, 1]
    adj = P[0] - P[1]  # (9, n), row by row
    adj /= det
    return np.ascontiguousarray(adj.T).reshape(-1, 3, 3)


def _sym_smallest_eigenvalue3(X: np.ndarray) -> np.ndarray:
    """``_packed_smallest_eigenvalue`` (d = 3) from the rows ``X`` (6, n) in ``_SYM_PERM`` order, operation for
    operation on stacked rows; ``X`` is overwritten (it becomes the packed ``(V - q I) / p``)."""
    q = ((X[0] + X[1]) + X[2]) / 3.0
    X[:3] -= q
    S = X ** 2
    p2 = ((S[0] + S[1]) + S[2]) + 2.0 * ((S[3] + S[4]) + S[5])
    p = np.sqrt(p2 / 6.0)
    pos = p > 0
    X /= np.where(pos, p, 1.0)
    r = _stacked_det3(X, _SYM_COF_FLAT, X.take(_SYM_ROW0, axis=0)) / 2.0
    np.maximum(r, -1.0, out=r)  # np.clip(r, -1, 1), value for value (NaN stays NaN), without clip's overhead
    np.minimum(r, 1.0, out=r)
    phi = np.arccos(r) / 3.0
    return np.where(pos, q + 2.0 * p * np.cos(phi + 2.0 * math.pi / 3.0), q)


def smallest_eigenvalue(V: np.ndarray) -> np.ndarray:
    """lambda_min of stacked symmetric ``(n, d, d)`` matrices; closed form (Smith 1961) for d <= 3."""
    d = V.shape[-1]
    if d == 1:
        return V[:, 0, 0].copy()
    if d == 2:
        h = 0.5 * (V[:, 0, 0] + V[:, 1, 1])
        return h - np.sqrt(np.maximum(h * h - batched_det(V), 0.0))
    if d > 3:
        return np.linalg.eigvalsh(V)[:, 0]
    q = np.trace(V, axis1=1, axis2=2) / 3.0
    p1 = V[:, 0, 1] ** 2 + V[:, 0, 2] ** 2 + V[:, 1, 2] ** 2
    p2 = (V[:, 0, 0] - q) ** 2 + (V[:, 1, 1] - q) ** 2 + (V[:, 2, 2] - q) ** 2 + 2.0 * p1
    p = np.sqrt(p2 / 6.0)
    safe = np.where(p > 0, p, 1.0)
    B = (V - q[:, None, None] * np.eye(3)) / safe[:, None, None]
    r = np.clip(batched_det(B) / 2.0, -1.0, 1.0)
    phi = np.arccos(r) / 3.0
    return np.where(p > 0, q + 2.0 * p * np.cos(phi + 2.0 * math.pi / 3.0), q)


def chi2_radius(d: int, delta: np.ndarray | float) -> np.ndarray:
    """``f(d, delta) = d + 2 sqrt(d log(1/delta)) + 2 log(1/delta)``: ``P(chi2_d >= f) <= delta``
    (Laurent and Massart 2000; Azize & Basu 2023a, App. F, event E_3)."""
    lg = np.log(1.0 / np.asarray(delta, dtype=float))
    return d + 2.0 * np.sqrt(d * lg) + 2.0 * lg


class _OFULBase(Policy):
    """Shared batched machinery of the rarely-switching OFUL blueprint (see the module docstring)."""

    private = False
    #: the protocol its claim is about: Table DP (Azize & Basu (2023a) prove AdaC-OFUL in the Interactive form, which
    #: implies it, Prop. 2(a); dpaudit cannot feed it an adversary's queries, see ``accepts_queries``)
    notion = "table"
    accepts_queries = False  # its design matrix and episode sums are built from the features it played

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        lam: float = 0.1,
        C: float = 1.0,
        delta: float = 0.001,
        theta_bound: float = 1.0,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
    ) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms (K)", n_arms, minimum=2)
        self.dim = check_int("dim (d)", dim, minimum=1)
        self.lam = check_positive("lam (the regulariser lambda)", lam)
        self.C = check_nonnegative("C (the switching constant)", C)
        self.delta = check_delta(delta)
        self.theta_bound = check_nonnegative("theta_bound", theta_bound)
        self.reward_bound = check_positive("reward_bound", reward_bound)
        self.feature_bound = check_positive("feature_bound", feature_bound)
        self.log1p_C = math.log1p(self.C)
        if self.private:
            self.reward_range = (-self.reward_bound, self.reward_bound)

    # -- noise: overridden by the private variants -------------------------------------------
    def _mechanism(self) -> GaussianMechanism | None:
        return None

    @property
    def sensitivity(self) -> float:
        """L2-sensitivity of an episode's ``sum a_s r_s``: ``2 B L`` (Azize & Basu 2023a, App. D-C: 2)."""
        return 2.0 * self.reward_bound * self.feature_bound

    # -- state --------------------------------------------------------------------------------
    def _reset(self) -> None:
        n, d = self.n_runs, self.dim
        eye = np.eye(d)
        self._iu = np.triu_indices(d)
        # the design matrix V_t, packed: upper-triangle entries (m, n), coordinate-major (speed)
        self.U = np.where((self._iu[0] == self._iu[1])[:, None], self.lam, 0.0) * np.ones((1, n))
        self._det = _packed_det(self.U, d, self._iu)  # det V_t (the switch's inverse divides by it)
        self.logdet = np.full(n, d * math.log(self.lam))
        self.logdet_tau = self.logdet.copy()
        self.M = np.concatenate([np.broadcast_to(eye / self.lam, (n, d, d)), np.zeros((n, d, 1))], axis=2)  # [V_tau^{-1} | theta]
        self.beta = np.full(n, self._beta_np(self.logdet))
        self.tau = np.zeros(n, dtype=np.int64)
        self.n_switches = np.zeros(n, dtype=np.int64)
        self.pending = np.zeros(n, dtype=bool)
        self.sum_ar = np.zeros((n, d))  # raw sum over the current episode (private) or all rounds
        self.noisy_sum = np.zeros((n, d))  # released sums + noise (private variants)
        self._mech = self._mechanism()
        self._sigma = None if self._mech is None else float(self._mech.sigma)
        self._played = np.zeros((n, d))
        self._actions: np.ndarray | None = None
        # played features per round (rows from round _hist_start on), kept only while recording: a buffer that
        # grows by doubling, so that a release reads its episode's rows without stacking them
        self._hist = np.empty((0, n, d))
        self._hist_len = 0
        self._hist_start = 0
        self._row_base = np.arange(n) * self.n_arms
        # the index of every run and arm at its last full computation, kept while the action set is shared (a switch
        # recomputes its runs' rows and keeps only their argmax, _best: nothing reads the rows again)
        self._ucb: np.ndarray | None = None
        self._ucb_arms: np.ndarray | None = None
        self._best = np.zeros(n, dtype=np.int64)  # its argmax
        self._arm_sq: np.ndarray | None = None  # the squared norms of a shared set with an arm above L
        self._radii = np.empty(0)  # chi2 radii by episode count (_radius)
        self._switch_calls = 0  # private switches since reset: a bound on every run's episode count
        self._played_shared = False

    @property
    def V(self) -> np.ndarray:
        """The design matrices ``lambda I + sum_s a_s a_s^T`` of every run, ``(n_runs, d, d)``."""
        return _unpack(self.U, self.dim, self._iu)

    @property
    def theta(self) -> np.ndarray:
        """``theta_tau`` of every run at its last switch, ``(n_runs, d)`` (a view of the index's matrices)."""
        return self.M[:, :, self.dim]

    @property
    def W_tau(self) -> np.ndarray:
        """``V_tau^{-1}`` of every run at its last switch, ``(n_runs, d, d)`` (a view of the index's matrices)."""
        return self.M[:, :, : self.dim]

    def _beta_np(self, logdet: np.ndarray | float) -> np.ndarray:
        """beta_t of Azize & Basu (2023a), App. F (Thm 14, Step 4), from ``log det V_t``."""
        inner = 2.0 * math.log(1.0 / self.delta) + np.asarray(logdet) - self.dim * math.log(self.lam)
        return np.sqrt(np.maximum(inner, 0.0)) + math.sqrt(self.lam) * self.theta_bound

    # -- the loop -----------------------------------------------------------------------------
    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        arms = self._check_arms(t, arms)
        runs = np.flatnonzero(self.pending)
        if runs.size:
            fresh_M, fresh_beta = self._switch(t, runs)
        # the index of a run changes only at its switches while the action set stays the same: one set shared by
        # every run (a fixed action set) has its index and argmax recomputed only for the runs that switched, by
        # the same arithmetic as for all runs (the other runs' actions are the ones of the step before)
        who = type(self).name or type(self).__name__
        shared = arms.shape[0] == 1 or arms.strides[0] == 0
        # the values are compared, never the identity: a read-only view (FixedActionSet's) may still show a buffer
        # its owner rewrites; (==).all() is np.array_equal here (both (K, d)) without its overhead
        if shared and self._ucb is not None and (arms[0] == self._ucb_arms).all():
            if runs.size:
                fresh = self._index(self._ucb_view[: runs.size], fresh_M, fresh_beta)  # the shared set as a stride-0 stack
                if not np.isfinite(fresh).all():
                    raise DPAuditError(f"{who} got NaN or inf action features at step {t}.")
                self._best[runs] = np.argmax(fresh, axis=1)
            actions = self._best.copy()
        else:
            ucb = self._index(arms, self.M, self.beta)
            if not np.isfinite(ucb).all():
                raise DPAuditError(f"{who} got NaN or inf action features at step {t}.")
            actions = np.argmax(ucb, axis=1)
            if shared:
                self._ucb, self._ucb_arms, self._best = ucb, arms[0].copy(), actions.copy()
                self._ucb_view = np.broadcast_to(self._ucb_arms, arms.shape)
                aT = self._ucb_arms.T
                self._arm_outer = aT[self._iu[0]] * aT[self._iu[1]]  # each arm's packed a a^T, (m, K)
                sq = np.einsum("kd,kd->k", arms[0], arms[0])
                self._arm_sq = sq if self.private and sq.max() > (self.feature_bound * (1.0 + _FEATURE_TOL)) ** 2 else None
            else:
                self._ucb = self._ucb_arms = None
        if shared:
            played = np.take(arms[0], actions, axis=0)  # (n, d)
        else:
            played = np.take(arms.reshape(-1, self.dim), self._row_base + actions, axis=0)
        if self.private and (not shared or self._arm_sq is not None):
            # the sensitivity 2 B L needs ||a_s|| <= L for every played action (Assumption 1(1)); a shared set
            # whose arms are all within L needs no check per step
            sq = self._arm_sq[actions] if shared else np.einsum("nd,nd->n", played, played)
            bound = self.feature_bound * (1.0 + _FEATURE_TOL)
            if not np.all(sq <= bound * bound):
                raise DPAuditError(
                    f"{who} would play an action of norm {math.sqrt(float(np.max(sq))):g} at step {t}, above "
                    f"feature_bound={self.feature_bound:g} that its sensitivity assumes; rescale the features or "
                    "raise feature_bound."
                )
        self._played, self._actions, self._played_shared = played, actions, shared
        return actions

    def _index(self, arms: np.ndarray, M: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """``<theta_tau, a> + beta_tau ||a||_{V_tau^{-1}}`` of every arm (Line 11) from the runs' ``M = [V_tau^{-1} | theta]``
        (C-ordered) and ``beta``: all runs' (``self.M``, ``self.beta``) or the rows just written by a switch."""
        AM = np.matmul(arms, M)  # (n, K, d+1): [a^T V_tau^{-1} | <a, theta>]
        ucb = np.einsum("nkd,nkd->nk", AM[:, :, : self.dim], arms)  # ||a||^2_{V_tau^{-1}}
        np.maximum(ucb, 0.0, out=ucb)
        np.sqrt(ucb, out=ucb)
        ucb *= beta[:, None]
        ucb += AM[:, :, self.dim]
        return ucb

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        if self._actions is None or (actions is not self._actions and not np.array_equal(actions, self._actions)):
            raise DPAuditError(
                f"observe at step {t} got actions that differ from the ones act returned; "
                "call act(t) and feed back its actions."
            )
        a = self._played
        self._actions = None
        self.sum_ar += a * rewards[:, None]
        if self._played_shared:  # the same products, formed once per arm of the shared set
            self.U += np.take(self._arm_outer, actions, axis=1)
        else:
            aT = a.T
            self.U += aT[self._iu[0]] * aT[self._iu[1]]
        self._det = _packed_det3(self.U) if self.dim == 3 else _packed_det(self.U, self.dim, self._iu)
        with np.errstate(divide="ignore"):
            self.logdet = np.log(self._det)
        self.pending = self.logdet > self.logdet_tau + self.log1p_C
        if self._mech is not None and self.record:
            if self._hist_len == self._hist.shape[0]:
                grown = np.empty((max(8, 2 * self._hist_len),) + a.shape)
                grown[: self._hist_len] = self._hist[: self._hist_len]
                self._hist = grown
            self._hist[self._hist_len] = a
            self._hist_len += 1

    def _switch(self, t: int, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Refresh the estimate of ``runs`` at step t (Alg. 3/4, Lines 6-9); return their new rows of ``M`` and ``beta``.

        For d = 3 the inverse divides by the determinant ``_observe`` computed on the same ``V`` and the
        inverse and lambda_min come from one gather of the runs' entries (``_sym_inv3``,
        ``_sym_smallest_eigenvalue3``): the values of ``_packed_inv`` and ``_packed_smallest_eigenvalue``, bit for bit."""
        d = self.dim
        if d == 3:
            X = self.U.take(runs, axis=1).take(_SYM_PERM, axis=0)  # (6, n): V00 V11 V22 V01 V02 V12 of the runs
            W = _sym_inv3(X, self._det.take(runs))
        else:
            U = self.U[:, runs]
            W = _packed_inv(U, d, self._iu)
        if self._mech is None:
            b = self.sum_ar[runs]
            extra = 0.0
        else:
            ell = self.n_switches.take(runs) + 1
            self.n_switches[runs] = ell
            released = self._release(t, runs)
            b = self.noisy_sum.take(runs, axis=0) + released
            self.noisy_sum[runs] = b
            self.sum_ar[runs] = 0.0
            lam_min = _sym_smallest_eigenvalue3(X) if d == 3 else _packed_smallest_eigenvalue(U, d, self._iu)
            self._switch_calls += 1  # every count in ell is at most this (a run gains one per switch call)
            extra = ell * self._radius(ell, self._switch_calls)
            extra /= lam_min
            np.sqrt(extra, out=extra)
            extra *= self._sigma  # sigma sqrt(l f(d, delta_l) / lambda_min(V_tau))
        theta = np.einsum("nde,ne->nd", W, b)
        M = np.concatenate([W, theta[:, :, None]], axis=2)
        self.M[runs] = M
        logdet = self.logdet.take(runs)
        self.logdet_tau[runs] = logdet
        beta = self._beta_np(logdet)
        beta += extra
        self.beta[runs] = beta
        self.tau[runs] = t
        self.pending[runs] = False
        return M, beta

    def _radius(self, ell: np.ndarray, bound: int | None = None) -> np.ndarray:
        """``chi2_radius(d, delta / (l (l + 1)))`` at the episode counts ``ell`` (>= 1), from a table of the same values.

        ``bound`` (optional) is an upper bound on ``ell``: a table longer than it needs no look at ``ell.max()`` (the
        table grows at the same counts, to the same lengths, either way)."""
        if bound is not None and bound < self._radii.size:
            return self._radii[ell]
        top = int(ell.max())
        if top >= self._radii.size:
            ls = np.arange(1, 2 * top + 1)
            self._radii = np.concatenate([[np.nan], chi2_radius(self.dim, self.delta / (ls * (ls + 1.0)))])
        return self._radii[ell]

    def _release(self, t: int, runs: np.ndarray) -> np.ndarray:
        """Release each run's episode sum ``sum_{s in [tau, t)} a_s r_s`` through the mechanism."""
        assert self._mech is not None
        fed = None
        if self.record:
            starts = self.tau[runs]
            lengths = t - starts
            pos = np.repeat(np.arange(runs.size), lengths)
            offsets = np.arange(pos.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            rounds = starts[pos] + offsets
            coef = self._hist[rounds - self._hist_start, runs[pos]]
            fed = Fed(pos, rounds, coef)
        value = self._mech.release(
            self.sum_ar.take(runs, axis=0), self.rng, ledger=self.ledger, label="episode sum of a_s r_s", step=t,
            runs=runs, fed=fed,
        )
        if self.record:
            new_tau = self.tau.copy()
            new_tau[runs] = t
            keep_from = int(new_tau.min())
            if keep_from > self._hist_start:
                drop = keep_from - self._hist_start
                self._hist = self._hist[drop:]
                self._hist_len -= drop
                self._hist_start = keep_from
        return value

    def _check_arms(self, t: int, arms: np.ndarray | None) -> np.ndarray:
        who = type(self).name or type(self).__name__
        if arms is None:
            raise DPAuditError(f"{who} needs action features at step {t}: arms must be an (n_runs, K, d) array, got None.")
        arms = np.asarray(arms, dtype=float)
        want = (self.n_runs, self.n_arms, self.dim)
        if arms.shape != want:
            raise DPAuditError(f"{who} got arms of shape {arms.shape} at step {t}; expected (n_runs, K, d) = {want}.")
        return arms


@register("oful", family="oful")
class OFUL(_OFULBase):
    """OFUL (Abbasi-Yadkori et al. 2011): optimistic least squares refreshed every step; non-private.

    Implemented as the rarely-switching loop with ``C = 0`` (see the module docstring); beta_t as in
    Azize & Basu (2023a), App. F. Parameters: K, d, lambda, delta, S = theta_bound.
    """

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        lam: float = 0.1,
        delta: float = 0.001,
        theta_bound: float = 1.0,
    ) -> None:
        super().__init__(n_arms, dim, lam, 0.0, delta, theta_bound)
        self.claim = None


@register("rs-oful", family="oful")
class RSOFUL(_OFULBase):
    """Rarely-Switching OFUL (Abbasi-Yadkori et al. 2011): refresh when det V grows by 1 + C; non-private.

    Azize & Basu (2023a), Alg. 3 without the noise (Lines 7 and the Y sum removed): the non-private twin of
    AdaC-OFUL that their Sec. VII compares with.
    """

    def __init__(
        self,
        n_arms: int = 10,
        dim: int = 3,
        lam: float = 0.1,
        C: float = 1.0,
        delta: float = 0.001,
        theta_bound: float = 1.0,
    ) -> None:
        super().__init__(n_arms, dim, lam, C, delta, theta_bound)
        self.claim = None


@register("adac-oful", family="oful")
class AdaCOFUL(_OFULBase):
    """AdaC-OFUL (Azize & Basu 2023a, Alg. 3): rarely-switching OFUL with Gaussian episode sums, rho-zCDP.

    At each switch the episode sum ``sum a_s r_s`` is released with ``Y ~ N(0, (2/rho) I_d)``
    (Line 7; ``sigma = 2 B L / sqrt(2 rho)`` for rewards in ``[-B, B]`` and features of norm
    ``<= L``, which is ``sqrt(2/rho)`` at the paper's ``B = L = 1``), and
    ``theta = V^{-1}(sum a_s r_s + sum_m Y_m)`` (Line 8). Rewards outside ``[-B, B]`` and features of
    norm above ``L`` are refused (Assumption 1). Claim: rho-zCDP (Azize & Basu 2023a, Thm 3) under Table DP, which its
    Interactive form implies (Prop. 2(a)).
    """

    private = True

    def __init__(
        self,
        rho: float = 1.0,
        n_arms: int = 10,
        dim: int = 3,
        lam: float = 0.1,
        C: float = 1.0,
        delta: float = 0.001,
        theta_bound: float = 1.0,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
    ) -> None:
        self.rho = check_positive("rho", rho)
        super().__init__(n_arms, dim, lam, C, delta, theta_bound, reward_bound, feature_bound)
        self.claim = ZCDP(self.rho)

    def _mechanism(self) -> GaussianMechanism:
        return GaussianMechanism.for_zcdp(self.rho, self.sensitivity)


@register("adar-oful", family="oful")
class AdaROFUL(_OFULBase):
    """AdaR-OFUL (Azize & Basu 2023b, Alg. 4): rarely-switching OFUL with Gaussian episode sums, (alpha, eps)-RDP.

    Identical to AdaC-OFUL except ``Y ~ N(0, (2 alpha / eps) I_d)`` (Line 7), i.e.
    ``sigma = 2 B L sqrt(alpha / (2 eps))``, so each episode's release has D_alpha = eps exactly.
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
        lam: float = 0.1,
        C: float = 1.0,
        delta: float = 0.001,
        theta_bound: float = 1.0,
        reward_bound: float = 1.0,
        feature_bound: float = 1.0,
    ) -> None:
        self.alpha = check_order(alpha, finite_for="AdaR-OFUL")
        self.epsilon = check_positive("epsilon", epsilon)
        super().__init__(n_arms, dim, lam, C, delta, theta_bound, reward_bound, feature_bound)
        self.claim = RDP.point(self.alpha, self.epsilon)

    def _mechanism(self) -> GaussianMechanism:
        return GaussianMechanism.for_rdp(self.alpha, self.epsilon, self.sensitivity)
