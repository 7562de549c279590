"""Locally differentially private bandits: Zheng et al. (2020), Alg. 1, 3 and 5, and baselines.

The paper is Zheng, Cai, Huang, Li & Wang (2020), "Locally Differentially Private (Contextual) Bandits
Learning" (full reference: :mod:`dpaudit.papers`).

Every user privatises her own data through a *channel* (:mod:`dpaudit.mechanisms`, "Local
channels") before the server sees it; the server (the batched policy) only ever touches the
messages. The users are simulated inside ``observe``: the reward the protocol hands over is user t's
private data z_t, it goes through the channel (recorded in the ledger, one entry per message) and
only the message reaches the server's update.

Plug-in contract for ``dpaudit check policy NAME --protocol local`` (kept small):

* ``channel(z_batch, rng) -> messages``: user data (one user per row) to messages, exactly what a
  user sends; the audit queries it as a black box.
* ``domain``: ``(low, high)`` of the scalar user data (a reward); the audit takes z, z' at its
  extremes. Policies with vector data (Alg. 5) also give ``domain_pairs() -> [(z, z'), ...]``.
* optional: ``channel_table() -> (inputs, outputs, P)`` for a finite channel (exact audit; None when
  the channel is not finite), and ``transcript()`` (n_runs, T, m): what the server received at each
  step (set ``keep_transcript = True`` before ``reset``).

Policies (``ldp-*``) and their non-private twins (same black box, no channel):

==================== =======================================================================
``ldp-ucb``          Alg. 1 (Zheng et al. 2020, Sec. 3.1) with UCB as the black box; Gaussian channel
                     sigma = 2B sqrt(2 ln(1.25/delta))/eps, B = 1/2 (Thm 11)
``ldp-ucb-laplace``  the same with a Laplace channel b = 1/eps (eps-LDP baseline)
``ldp-ucb-rr``       the same with randomised response (eps-LDP baseline)
``ldp-tsallis-inf``  Alg. 1 with Tsallis-INF (Zimmert & Seldin 2019) as the black box (Thm 11)
``ldp-lilucb``       Alg. 1 with lil'UCB (Jamieson et al. 2014), best-arm identification (Thm 12)
``ldp-linucb``       Alg. 5 (App. D): LDP LinUCB, users send x x^T + B_t and y x + xi_t
``ldp-gloc``         Alg. 3 (Sec. 4.2): GLOC-LDP, logistic link, noisy online gradient descent
twins                ``ucb-onepoint``, ``tsallis-inf``, ``lilucb``, ``linucb``, ``gloc``
==================== =======================================================================

Choices the paper leaves open, made here:

* Rewards r in [0, 1] are the user data; Alg. 1's loss is f = 1/2 - r, so |f| <= B = 1/2 and the
  domain's sensitivity is 2B = 1 (Thm 11's B = 0.5). The message is r + Z; the black box turns it
  into a loss or a reward estimate (post-processing).
* UCB black box: the asymptotically optimal UCB of Lattimore & Szepesvári (2020, Alg. 6) for
  sub-Gaussian rewards with variance proxy v: index mean + sqrt(2 v log(1 + t log^2 t) / N). By the
  proof of Thm 11 the noisy rewards are sub-Gaussian with v = 1/4 + sigma^2; for the Laplace channel
  we use v = 1/4 + 2 b^2 (its variance; Laplace noise is only sub-exponential); for randomised
  response the debiased message (o - q)/(p - q) lies in an interval of length 1/(p - q), so
  v = 1/(4 (p - q)^2). Initial pulls: arms 0..K-1 in order; ties to the lowest arm.
* Tsallis-INF: 1/2-Tsallis entropy, eta_t = 2/sqrt(t) (t = 1, 2, ...), importance-weighted loss
  estimates, weights by batched Newton steps (at most 30, until |sum w - 1| < 1e-10) on
  sum_i 4 (eta (L_i - x))^-2 = 1 from x = min L - 2/eta (monotone convergence: the left side is
  convex and increasing in x), sampling by inverse CDF.
* Alg. 5: x_t is the chosen arm's feature (unit norm), y_t in [-2, 2]; Upsilon_t, c_t, beta_t as
  in App. D with failure probability alpha (default 0.05) and the horizon T as given; at t = 1 the
  paper's c_0 = 0 would leave a zero matrix, so c_{max(t, 1)} is used. A negative quadratic form
  (noisy matrix not positive definite) gives bonus 0. A matrix message that is not symmetric is
  refused (the algorithm assumes B(j, i) = B(i, j)). The non-private twin uses ridge 1 and the
  OFUL radius 1 + sqrt(2 log T + d log(1 + t/d)) (Abbasi-Yadkori et al. 2011, S = R = 1).
* Alg. 3: the logistic link g(a) = 1/(1 + e^-a) (the paper's example), rewards y in [0, 1], W the unit
  ball, zeta = 1/sqrt(T), C = 1 (|g - y| < 1), mu = g'(1) = inf of g' on [-1, 1]; the paper leaves
  beta_t as O~(sqrt(C sigma sqrt(d t) / mu)): we take
  beta_t = sqrt(C sigma sqrt(d t) ln(2T/alpha) / mu); Upsilon_t and c_t as in Alg. 5. The black-box audit queries the users' map at the public estimate
  theta_hat = e_1 (on the boundary of W, where |z| = |x^T theta_hat| can reach 1).
* lil'UCB (Jamieson et al. 2014, Fig. 1): eps = 0.01, beta = 1, lambda = ((2 + beta)/beta)^2 = 9
  (their theorem's values), confidence parameter delta = gamma, log log((1 + eps) T_i) read as
  log log(max((1 + eps) T_i, e)) so that it is defined and >= 0 for the first pulls, sub-Gaussian
  scale sigma_0^2 = 1/4 + sigma^2 (Zheng et al. 2020, Thm 12); after the stopping rule fires the run keeps
  playing (and its users keep sending) the recommended arm, the most pulled one, since a policy must act at
  every step; ``recommendation`` and ``stopped_at`` hold the outcome. BCO (Alg. 1 with FKM, Alg. 2) plays points of a convex body, not
  one of K arms: it is in :mod:`dpaudit.policies.bco`, on the continuous-action contract of :mod:`dpaudit.bco`.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit import deprecations
from dpaudit.accountants import ApproxDP, PureDP
from dpaudit.errors import DPAuditError, check_delta, check_int, check_positive
from dpaudit.mechanisms import (Channel, GaussianChannel, GLOCChannel, LaplaceChannel, Ledger, LinearStatsChannel,
                                RandomizedResponse)
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import register

__all__ = ["batched_inverse", "LDPPolicy", "OnePointUCB", "LDPUCB", "LDPUCBLaplace", "LDPUCBRR", "TsallisINF", "LDPTsallisINF",
           "LinUCB", "LDPLinUCB", "GLOC", "LDPGLOC", "LilUCB", "LDPLilUCB"]


class LDPPolicy(Policy):
    """Base of the local-DP policies: users privatise through ``self._chan``; the server sees messages only."""

    reward_range = (0.0, 1.0)
    #: the protocol its claim is about: local DP (Zheng et al. 2020), the non-private twins' too (they are compared there)
    notion = "local"
    _chan: Channel | None = None
    keep_transcript = False

    # ---- the plug-in contract of --protocol local ------------------------------------------------
    def channel(self, z_batch: np.ndarray, rng: np.random.Generator, ledger: Ledger | None = None) -> np.ndarray:
        """What users with data ``z_batch`` send (one user per row); its releases recorded in ``ledger`` if given
        (the local audit's channel likelihood part reads them)."""
        if self._chan is None:
            raise DPAuditError(f"{self.name} is non-private: it has no channel.")
        return self._chan.send(z_batch, rng, ledger=ledger, label=f"{self.name}: user message")

    @property
    def local_channel(self) -> Channel | None:
        """The channel every user sends through (None for a non-private twin)."""
        return self._chan

    @property
    def domain(self) -> tuple[float, float]:
        return tuple(self._chan.domain) if self._chan is not None else tuple(self.reward_range)

    def channel_table(self):
        """(inputs, outputs, P) of a finite channel (randomised response), None when the channel is not finite."""
        table = getattr(self._chan, "table", None)
        return None if table is None else table()

    def transcript(self) -> np.ndarray:
        """What the server received at each step, (n_runs, T, m) (needs ``keep_transcript = True``)."""
        if not self._received:
            raise DPAuditError("no transcript was kept; set keep_transcript = True before reset().")
        return np.stack([np.asarray(m, dtype=float).reshape(self.n_runs, -1) for m in self._received], axis=1)

    # ---- the users ------------------------------------------------------------------------------
    def _send(self, t: int, data: np.ndarray) -> np.ndarray:
        """User t's message (through the channel, recorded in the ledger), or her raw data for a twin."""
        if self._chan is None:
            return data
        return self._chan.send(data, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message")

    def _received_hook(self, t: int, msg: np.ndarray) -> np.ndarray:
        if self.keep_transcript:
            self._received.append(np.array(msg, copy=True))
        return msg

    def _reset(self) -> None:
        self._received: list[np.ndarray] = []
        self._reset_server()

    def _reset_server(self) -> None:
        raise NotImplementedError

    def _observe(self, t: int, actions: np.ndarray, rewards: np.ndarray) -> None:
        msg = self._received_hook(t, self._server_input(t, rewards))
        self._update(t, msg)

    def _server_input(self, t: int, rewards: np.ndarray) -> np.ndarray:
        return self._send(t, rewards)

    def _update(self, t: int, msg: np.ndarray) -> None:
        raise NotImplementedError


def batched_inverse(M: np.ndarray) -> np.ndarray:
    """``np.linalg.inv`` of stacked (n, d, d) matrices; for d <= 3 by the adjugate over the determinant (the
    closed form, a few array operations instead of one LAPACK call per matrix; equal to LAPACK's inverse up
    to rounding for the well-conditioned matrices of the LinUCB-type policies, whose ridge dominates).
    A zero or non-finite determinant goes to ``np.linalg.inv`` (which raises for a singular matrix)."""
    d = M.shape[-1]
    if d > 3 or M.ndim != 3:
        return np.linalg.inv(M)
    if d == 1:
        det = M[:, 0, 0]
        adj = np.ones_like(M)
    elif d == 2:
        a, b, c, e = M[:, 0, 0], M[:, 0, 1], M[:, 1, 0], M[:, 1, 1]
        det = a * e - b * c
        adj = np.stack([e, -b, -c, a], axis=1).reshape(-1, 2, 2)
    else:
        a, b, c = M[:, 0, 0], M[:, 0, 1], M[:, 0, 2]
        p, q, r = M[:, 1, 0], M[:, 1, 1], M[:, 1, 2]
        x, y, z = M[:, 2, 0], M[:, 2, 1], M[:, 2, 2]
        c00, c01, c02 = q * z - r * y, r * x - p * z, p * y - q * x  # cofactors of the first row
        det = a * c00 + b * c01 + c * c02
        adj = np.stack([c00, c * y - b * z, b * r - c * q,
                        c01, a * z - c * x, c * p - a * r,
                        c02, b * x - a * y, a * q - b * p], axis=1).reshape(-1, 3, 3)
    if not np.all(np.isfinite(det)) or not np.all(det != 0):
        return np.linalg.inv(M)
    return adj / det[:, None, None]


def _quad_mean3(Mf: np.ndarray, xx: np.ndarray, X1: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x^T M^-1 x`` and ``<x, theta>`` of every run and arm for d = 3, as ``np.add.reduce`` over the last axis
    forms them (the same products, summed in numpy's order: pairwise over the 9 entries, (8 of them in pairs of
    pairs) + the last, and left to right over 3), one (n, K) array per entry instead of an (n, K, 9) one."""
    e = [Mf[:, i, None] * xx[:, :, i] for i in range(9)]
    quad = (((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7]))) + e[8]
    mean = (X1[:, :, 0] * theta[:, 0, None] + X1[:, :, 1] * theta[:, 1, None]) + X1[:, :, 2] * theta[:, 2, None]
    return quad, mean


#: the rows of :func:`_inverse3_entries`' six distinct entries that make a 3 x 3 symmetric matrix, row-major
_MIRROR3 = [0, 1, 2, 1, 3, 4, 2, 4, 5]


def _inverse3_entries(V: np.ndarray, ridge: float) -> np.ndarray | None:
    """The distinct entries 00, 01, 02, 11, 12, 22 of ``(V + ridge I)^-1`` for exactly symmetric 3 x 3 matrices V
    ``(n, 3, 3)``, as ``(6, n)``: the adjugate over the determinant, each cofactor formed once (the adjugate of a
    symmetric matrix is symmetric bit for bit: each mirrored cofactor is the same products in swapped order; M's
    off-diagonal entries are V's, since V + 0.0 = V for V never -0.0). None when a determinant is zero or not
    finite (the caller then takes the reference path)."""
    n = V.shape[0]
    Vf = V.reshape(n, 9)
    a, b, c = Vf[:, 0] + ridge, Vf[:, 1], Vf[:, 2]
    q, r, z = Vf[:, 4] + ridge, Vf[:, 5], Vf[:, 8] + ridge
    c00, c01, c02 = q * z - r * r, r * c - b * z, b * r - q * c
    det = a * c00 + b * c01 + c * c02
    ad = np.abs(det)
    if not (ad.min() > 0 and ad.max() < math.inf):
        return None
    m = np.empty((6, n))
    np.divide(c00, det, out=m[0])
    np.divide(c01, det, out=m[1])
    np.divide(c02, det, out=m[2])
    np.divide(a * z - c * c, det, out=m[3])
    np.divide(c * b - a * r, det, out=m[4])
    np.divide(a * q - b * b, det, out=m[5])
    return m


def _index3_symmetric(V: np.ndarray, ridge: float, u: np.ndarray, xx: np.ndarray,
                      X1: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``x^T M^-1 x`` and ``<x, theta>`` (theta = M^-1 u, M = V + ridge I) for d = 3 and an exactly symmetric V,
    bit for bit what :func:`batched_inverse` and :func:`_quad_mean3` give on M, in fewer array operations: the
    inverse's distinct entries once (:func:`_inverse3_entries`), theta by the same ``einsum`` and the quadratic
    form with the mirrored products reused. None when :func:`_inverse3_entries` is."""
    n = V.shape[0]
    m = _inverse3_entries(V, ridge)
    if m is None:
        return None
    Mf = np.ascontiguousarray(m[_MIRROR3].T)  # (n, 9), row-major
    theta = np.einsum("nij,nj->ni", Mf.reshape(n, 3, 3), u)
    e0, e1, e2 = Mf[:, 0, None] * xx[:, :, 0], Mf[:, 1, None] * xx[:, :, 1], Mf[:, 2, None] * xx[:, :, 2]
    e4, e5, e8 = Mf[:, 4, None] * xx[:, :, 4], Mf[:, 5, None] * xx[:, :, 5], Mf[:, 8, None] * xx[:, :, 8]
    quad = (((e0 + e1) + (e2 + e1)) + ((e4 + e5) + (e2 + e5))) + e8
    mean = (X1[:, :, 0] * theta[:, 0, None] + X1[:, :, 1] * theta[:, 1, None]) + X1[:, :, 2] * theta[:, 2, None]
    return quad, mean


def _arms3_fixed(V: np.ndarray, ridge: float, u: np.ndarray, X0: np.ndarray, beta: float) -> np.ndarray | None:
    """The LinUCB arm of every run for d = 3, an exactly symmetric V and one action set X0 (K, 3) shared by the
    runs: :func:`_index3_symmetric`'s arithmetic laid out arm by run, (K, n), so that every product runs along
    the runs (contiguous) instead of along 5 arms; the same index values, the same argmax (first maximum)."""
    n = V.shape[0]
    m = _inverse3_entries(V, ridge)
    if m is None:
        return None
    Mf = m[_MIRROR3].T  # (n, 9) view of the (9, n) copy: theta by the reference's einsum
    theta = np.einsum("nij,nj->ni", Mf.reshape(n, 3, 3), u)
    th = theta.T.copy()
    xx = (X0[:, :, None] * X0[:, None, :]).reshape(-1, 9)
    e0, e1, e2 = xx[:, 0, None] * m[0], xx[:, 1, None] * m[1], xx[:, 2, None] * m[2]
    e4, e5, e8 = xx[:, 4, None] * m[3], xx[:, 5, None] * m[4], xx[:, 8, None] * m[5]
    quad = (((e0 + e1) + (e2 + e1)) + ((e4 + e5) + (e2 + e5))) + e8
    mean = (X0[:, 0, None] * th[0] + X0[:, 1, None] * th[1]) + X0[:, 2, None] * th[2]
    index = mean + beta * np.sqrt(np.maximum(quad, 0.0))
    return np.argmax(index, axis=0)


def _symmetric3(flat: np.ndarray) -> bool:
    """Whether every row of ``flat`` (n, 9 or more: a 3 x 3 matrix first, row-major) is exactly symmetric."""
    return bool((flat[:, 1] == flat[:, 3]).all() and (flat[:, 2] == flat[:, 6]).all()
                and (flat[:, 5] == flat[:, 7]).all())


def _check_eps_delta(epsilon: float, delta: float) -> tuple[float, float]:
    return check_positive("epsilon", epsilon), check_delta(delta)


# ---- Alg. 1 with UCB --------------------------------------------------------------------------------

@register("ucb-onepoint", family="ldp")
class OnePointUCB(LDPPolicy):
    """The UCB black box of Zheng et al. (2020), Alg. 1, without privacy (the non-private twin of ``ldp-ucb``).

    Index mean + sqrt(2 v log(1 + t log^2 t) / N) with v = 1/4 (rewards in [0, 1]; Lattimore &
    Szepesvári 2020, Alg. 6).
    """

    non_private_twin = "ucb-onepoint"

    def __init__(self, n_arms: int = 2) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self._params = {"n_arms": self.n_arms}

    def twin_params(self) -> dict[str, object]:
        return {"n_arms": self.n_arms}

    def variance_proxy(self) -> float:
        return 0.25

    def _decode(self, msg: np.ndarray) -> np.ndarray:
        """The server's unbiased reward estimate from a message."""
        return msg

    def _reset_server(self) -> None:
        self.sums = np.zeros((self.n_runs, self.n_arms))
        self.counts = np.zeros((self.n_runs, self.n_arms))
        self._rows = np.arange(self.n_runs)
        self._last = np.zeros(self.n_runs, dtype=np.int64)
        self._v = self.variance_proxy()

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if t < self.n_arms:
            self._last = np.full(self.n_runs, t, dtype=np.int64)
        else:
            lt = math.log(t)
            bonus = np.sqrt(2.0 * self._v * math.log(1.0 + t * lt * lt) / self.counts)
            self._last = np.argmax(self.sums / self.counts + bonus, axis=1)
        return self._last.copy()

    def _update(self, t: int, msg: np.ndarray) -> None:
        # the message is credited to the arm the server played (under Interactive DP the adversary's
        # query decides which reward the user holds, not which arm the server thinks it played)
        self.sums[self._rows, self._last] += self._decode(msg)
        self.counts[self._rows, self._last] += 1


@register("ldp-ucb", family="ldp")
class LDPUCB(OnePointUCB):
    """Zheng et al. (2020), Alg. 1 with UCB: user t sends r_t + N(0, sigma^2), sigma = 2B sqrt(2 ln(1.25/delta))/eps, B = 1/2.

    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 2), hence (eps, delta)-DP of the actions (Thm 1).
    The calibration is the classical one (Dwork & Roth Thm A.1), proven for eps < 1; the audit's
    calibration lint says whether it still holds above. The default ``calibration="zheng-2020"`` is that
    of Zheng et al. (2020); ``calibration="gaussian-channel"`` uses the Gaussian channel of the interactive
    joint/local DP definitions instead (Priv[Delta], sigma_a = 2 sqrt(log(1.25/beta))/alpha with alpha =
    eps, beta = delta: sqrt(2) more noise), linted by ``lint_gaussian_channel``.
    """

    non_private_twin = "ucb-onepoint"
    #: the calibrations by name (old names still read for one release: :mod:`dpaudit.deprecations`)
    CALIBRATIONS = ("zheng-2020", "gaussian-channel")

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, delta: float = 1e-5,
                 calibration: str = "zheng-2020") -> None:
        super().__init__(n_arms)
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta)
        calibration = deprecations.calibration(calibration)
        if calibration not in self.CALIBRATIONS:
            raise DPAuditError(f"calibration must be 'zheng-2020' (Zheng et al. 2020, Alg. 1: sigma = 2B sqrt(2 "
                               "ln(1.25/delta))/eps) or 'gaussian-channel' (the Gaussian channel calibration "
                               "sigma = 2 sqrt(log(1.25/delta))/eps of the interactive joint/local DP definitions), "
                               f"got {calibration!r}.")
        self.calibration = calibration
        self._chan = self._make_channel()
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta, calibration=calibration)

    def params(self) -> dict[str, object]:
        out = super().params()
        if "calibration" in out:  # reported by its name in CALIBRATIONS, whatever name was given
            out["calibration"] = self.calibration
        return out

    def _make_channel(self) -> Channel:
        if self.calibration == "gaussian-channel":  # sigma = 2 sigma_a Delta, sigma_a = 2 sqrt(log(1.25/beta))/alpha
            return GaussianChannel.gaussian_channel(self.epsilon, self.delta, self.reward_range)
        return GaussianChannel.zheng_2020(self.epsilon, self.delta, self.reward_range)

    def variance_proxy(self) -> float:
        return 0.25 + self._chan.sigma ** 2  # type: ignore[union-attr]


@register("ldp-ucb-laplace", family="ldp")
class LDPUCBLaplace(OnePointUCB):
    """Alg. 1 with UCB and a Laplace channel: user t sends r_t + Lap(1/eps); claim eps-LDP (pure)."""

    non_private_twin = "ucb-onepoint"

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0) -> None:
        super().__init__(n_arms)
        self.epsilon = check_positive("epsilon", epsilon)
        self._chan = LaplaceChannel.for_pure(self.epsilon, self.reward_range)
        self.claim = PureDP(self.epsilon)
        self._params["epsilon"] = self.epsilon

    def variance_proxy(self) -> float:
        return 0.25 + 2 * self._chan.b ** 2  # type: ignore[union-attr]


@register("ldp-ucb-rr", family="ldp")
class LDPUCBRR(OnePointUCB):
    """Alg. 1 with UCB and randomised response: user t sends a bit, truthful w.p. e^eps/(1+e^eps); claim eps-LDP.

    The server debiases: r_hat = (o - q)/(p - q), q = 1 - p. Rewards in [0, 1] are first rounded to a
    Bernoulli(r) bit by the user (the identity on binary rewards).
    """

    non_private_twin = "ucb-onepoint"

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0) -> None:
        super().__init__(n_arms)
        self.epsilon = check_positive("epsilon", epsilon)
        self._chan = RandomizedResponse(self.epsilon)
        self.claim = PureDP(self.epsilon)
        self._params["epsilon"] = self.epsilon

    def _decode(self, msg):
        p = self._chan.p  # type: ignore[union-attr]
        return (msg - (1 - p)) / (2 * p - 1)

    def variance_proxy(self) -> float:
        p = self._chan.p  # type: ignore[union-attr]
        return 1.0 / (4 * (2 * p - 1) ** 2)


# ---- Alg. 1 with Tsallis-INF ------------------------------------------------------------------------

@register("tsallis-inf", family="ldp")
class TsallisINF(LDPPolicy):
    """Tsallis-INF (Zimmert & Seldin 2019, Alg. 1, alpha = 1/2, eta_t = 2/sqrt(t)) on losses 1 - r, non-private.

    The black box of Zheng et al. (2020), Thm 11; the non-private twin of ``ldp-tsallis-inf``.
    """

    non_private_twin = "tsallis-inf"
    newton_steps = 30

    def __init__(self, n_arms: int = 2) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self._params = {"n_arms": self.n_arms}

    def twin_params(self) -> dict[str, object]:
        return {"n_arms": self.n_arms}

    def _reset_server(self) -> None:
        self.L = np.zeros((self.n_runs, self.n_arms))  # cumulative importance-weighted loss estimates
        self._rows = np.arange(self.n_runs)
        self._last = np.zeros(self.n_runs, dtype=np.int64)
        self._w_last = np.ones(self.n_runs)

    def weights(self, t: int) -> np.ndarray:
        """w_{t,i} = 4 (eta_t (L_i - x))^-2 with x such that sum_i w_i = 1 (batched Newton)."""
        eta = 2.0 / math.sqrt(t + 1)
        L = self.L
        x = L.min(axis=1, keepdims=True) - 2.0 / eta
        for _ in range(self.newton_steps):
            inv = 1.0 / (eta * (L - x))
            w = 4.0 * inv * inv
            f = w.sum(axis=1, keepdims=True) - 1.0
            if np.abs(f).max() < 1e-10:  # quadratic convergence: usually 5-8 steps
                break
            x = x - f / (2.0 * eta * (w * inv).sum(axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        w = self.weights(t)
        u = self.rng.random((self.n_runs, 1))
        arm = np.minimum((np.cumsum(w, axis=1) < u).sum(axis=1), self.n_arms - 1)
        self._last = arm
        self._w_last = w[self._rows, arm]
        return arm.copy()

    def _update(self, t: int, msg: np.ndarray) -> None:
        self.L[self._rows, self._last] += (1.0 - msg) / self._w_last


@register("ldp-tsallis-inf", family="ldp")
class LDPTsallisINF(TsallisINF):
    """Zheng et al. (2020), Alg. 1 with Tsallis-INF (Thm 11): user t sends r_t + N(0, sigma^2), sigma = 2B sqrt(2 ln(1.25/delta))/eps, B = 1/2.

    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 2).
    """

    non_private_twin = "tsallis-inf"

    def __init__(self, n_arms: int = 2, epsilon: float = 1.0, delta: float = 1e-5) -> None:
        super().__init__(n_arms)
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta)
        self._chan = GaussianChannel.zheng_2020(self.epsilon, self.delta, self.reward_range)
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta)


# ---- Alg. 5: LDP LinUCB -----------------------------------------------------------------------------

@register("linucb", family="ldp")
class LinUCB(LDPPolicy):
    """LinUCB / OFUL with ridge 1 (Abbasi-Yadkori et al. 2011), non-private: the twin of ``ldp-linucb``.

    Rewards y in [-2, 2] (Zheng et al. 2020, Sec. 4: |x^T theta*| <= 1 and noise in [-1, 1]); features of unit
    norm at most, given as ``act(t, arms)`` with arms (n_runs, K, d).
    """

    reward_range = (-2.0, 2.0)
    non_private_twin = "linucb"

    def __init__(self, n_arms: int = 5, dim: int = 3, horizon: int = 1000) -> None:
        super().__init__()
        self.n_arms = check_int("n_arms", n_arms, minimum=2)
        self.dim = check_int("dim", dim, minimum=1)
        self.horizon = check_int("horizon", horizon, minimum=1)
        self._params = {"n_arms": self.n_arms, "dim": self.dim, "horizon": self.horizon}

    def twin_params(self) -> dict[str, object]:
        return {"n_arms": self.n_arms, "dim": self.dim, "horizon": self.horizon}

    def domain_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Extreme pairs of user data (x, y): same context with y = +-y_max, and orthogonal contexts."""
        d, Y = self.dim, self.reward_range[1]
        e1 = np.eye(d)[0]
        e2 = np.eye(d)[1] if d > 1 else -e1
        return [(np.r_[e1, Y], np.r_[e1, -Y]), (np.r_[e1, Y], np.r_[e2, -Y])]

    def _reset_server(self) -> None:
        n, d = self.n_runs, self.dim
        self.V = np.zeros((n, d, d))
        self.u = np.zeros((n, d))
        self._rows = np.arange(n)
        self._x = np.zeros((n, d))
        self._t = 0
        self._arms_checked = None  # the read-only features object whose norms were checked (the same every round)
        #: V is exactly symmetric (every matrix message was): the index's fast d = 3 path applies
        self._v_symmetric = True
        #: every row of _x passed the channel's contexts_in_ball (rows gathered from a tested action set); only for
        #: dpaudit's own Alg. 3/5 channels, whose send_xy then skips the per-user unit-ball test
        self._x_in_ball = False
        self._ball_rows: np.ndarray | None = None
        chan = self._chan
        self._ball_chan = chan if type(chan) in (LinearStatsChannel, GLOCChannel) else None
        # dpaudit's Alg. 5 channel with symmetric noise sends exactly symmetric matrices (_matrix_rows mirrors each
        # upper entry of x x^T + B, all finite: the channel refuses non-finite data): no symmetry check per round
        self._lin_symmetric_by_construction = (type(self)._server_input is LinUCB._server_input
                                               and type(chan) is LinearStatsChannel and chan.symmetric)

    def _ridge(self, t: int) -> float:
        return 1.0

    def _beta(self, t: int) -> float:
        d = self.dim
        return 1.0 + math.sqrt(2 * math.log(max(self.horizon, 2)) + d * math.log(1 + t / d))

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if arms is None:
            raise DPAuditError(f"{self.name} needs the arms' features (n_runs, K, d) at every step; got None.")
        X = np.asarray(arms, dtype=float)
        if X.ndim != 3 or X.shape[1:] != (self.n_arms, self.dim):
            raise DPAuditError(f"{self.name} expects features of shape (n_runs, {self.n_arms}, {self.dim}), got {X.shape}.")
        X1 = X[:1] if X.shape[0] > 1 and X.strides[0] == 0 else X  # a fixed action set broadcast to every run
        if arms is not self._arms_checked or X.flags.writeable:  # a read-only set checked once per run
            if np.sqrt(np.add.reduce(X1 * X1, axis=2)).max() > 1 + 1e-9:  # np.linalg.norm(X, axis=2), without its dispatch
                raise DPAuditError(f"{self.name}: a feature vector has norm above 1; Zheng et al. (2020) assume the unit ball.")
            self._arms_checked = arms
        d = self.dim
        if d == 3 and self._v_symmetric and X1 is not X:
            arm = _arms3_fixed(self.V, self._ridge(t), self.u, X1[0], self._beta(t))
            if arm is not None:
                self._gather_x(X1[0], arm)
                return arm
        # x^T M^-1 x = <vec M^-1, vec x x^T>; a fixed action set (X1, one row broadcast to every run) forms x x^T
        # once, and both paths reduce the same products in the same order (the same index either way)
        xx = (X1[..., :, None] * X1[..., None, :]).reshape(X1.shape[0], -1, d * d)
        fast = _index3_symmetric(self.V, self._ridge(t), self.u, xx, X1) if d == 3 and self._v_symmetric else None
        if fast is not None:
            quad, mean = fast
        else:
            M = self.V + self._ridge(t) * np.eye(d)
            Minv = batched_inverse(M)
            theta = np.einsum("nij,nj->ni", Minv, self.u)
            if d == 3:
                quad, mean = _quad_mean3(Minv.reshape(-1, d * d), xx, X1, theta)
            else:
                quad = np.add.reduce(Minv.reshape(-1, 1, d * d) * xx, axis=2)
                mean = np.add.reduce(X1 * theta[:, None, :], axis=2)
        index = mean + self._beta(t) * np.sqrt(np.maximum(quad, 0.0))
        arm = np.argmax(index, axis=1)
        if X1 is not X:
            self._gather_x(X1[0], arm)
        else:
            self._x = X[np.arange(X.shape[0]), arm]
            self._x_in_ball = False
        return arm

    def _gather_x(self, X0: np.ndarray, arm: np.ndarray) -> None:
        """The chosen features ``X0[arm]`` of the one action set X0 (K, d), and whether the channel may skip its
        per-user unit-ball test on them: X0's K rows are tested now (contexts_in_ball), and the gather copies
        them, so every row of ``_x`` is a tested row whatever happens to X0 later."""
        self._x = X0[arm]
        ref = self._ball_rows  # a private copy of the last set that passed the test: equal rows pass it too
        if ref is not None and ref.shape == X0.shape and (X0 == ref).all():
            self._x_in_ball = True
        elif self._ball_chan is not None and self._ball_chan.contexts_in_ball(X0):
            self._ball_rows = np.array(X0, dtype=float, copy=True)
            self._x_in_ball = True
        else:
            self._x_in_ball = False

    def _server_input(self, t: int, rewards: np.ndarray) -> np.ndarray:
        if self._chan is None:
            d = self.dim
            xx = (self._x[:, :, None] * self._x[:, None, :]).reshape(-1, d * d)
            return np.concatenate([xx, rewards[:, None] * self._x], axis=1)
        if self._x_in_ball:
            return self._ball_chan.send_xy(self._x, rewards, self.rng, ledger=self.ledger, step=t,  # type: ignore[union-attr]
                                           label=f"{self.name}: user message", x_in_ball=True)
        z = np.concatenate([self._x, rewards[:, None]], axis=1)
        return self._chan.send(z, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message")

    def _update(self, t: int, msg: np.ndarray) -> None:
        d = self.dim
        M = msg[:, : d * d].reshape(-1, d, d)
        if not self._lin_symmetric_by_construction and not (_symmetric3(msg) if d == 3 else
                                                             np.array_equal(M, np.swapaxes(M, 1, 2))):
            raise DPAuditError(f"user {t}'s matrix message x x^T + B_t is not symmetric, but Zheng et al. (2020), Alg. 5, assume "
                               "B(j, i) = B(i, j); it is refused.")
        self.V += M
        self.u += msg[:, d * d:]


@register("ldp-linucb", family="ldp")
class LDPLinUCB(LinUCB):
    """Zheng et al. (2020), Alg. 5 (LDP LinUCB): user t sends x x^T + B_t (symmetric) and y x + xi_t, sigma = 6 sqrt(2 ln(2.5/delta))/eps.

    Server: V_t = V_{t-1} + x x^T + B_t, u_t = u_{t-1} + y x + xi_t, theta_t = (V_t + c_t I)^-1 u_t;
    action argmax <theta_{t-1}, x> + beta_t ||x||_{(V_{t-1} + c_{t-1} I)^-1} (App. D, lines 7-12), with
    Upsilon_t = sigma sqrt(t) (4 sqrt(d) + 2 ln(2T/alpha)), c_t = 2 Upsilon_t and
    beta_t = 2 sigma sqrt(d ln T) + (sqrt(3 Upsilon_t) + sigma sqrt(d t / Upsilon_t)) d ln T.
    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 7).
    """

    non_private_twin = "linucb"
    _symmetric = True

    def __init__(self, n_arms: int = 5, dim: int = 3, horizon: int = 1000, epsilon: float = 1.0,
                 delta: float = 1e-5, alpha: float = 0.05) -> None:
        super().__init__(n_arms, dim, horizon)
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta)
        self.alpha = check_delta(alpha, "alpha")
        self._chan = LinearStatsChannel.zheng_2020(self.dim, self.epsilon, self.delta, self.reward_range[1],
                                                symmetric=self._symmetric)
        self.sigma = self._chan.sigma
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta, alpha=self.alpha)

    def _upsilon(self, t: int) -> float:
        t = max(t, 1)
        return self.sigma * math.sqrt(t) * (4 * math.sqrt(self.dim) + 2 * math.log(2 * self.horizon / self.alpha))

    def _ridge(self, t: int) -> float:
        return 2.0 * self._upsilon(t)  # c_{t-1} with t the 0-based step = rounds seen so far

    def _beta(self, t: int) -> float:
        t1 = t + 1
        d, s = self.dim, self.sigma
        lnT = math.log(max(self.horizon, 2))
        ups = self._upsilon(t1)
        return 2 * s * math.sqrt(d * lnT) + (math.sqrt(3 * ups) + s * math.sqrt(d * t1 / ups)) * d * lnT


# ---- Alg. 3: GLOC-LDP (logistic) -------------------------------------------------------------------

@register("gloc", family="ldp")
class GLOC(LinUCB):
    """GLOC (Jun et al. 2017) with online gradient descent, logistic link, non-private: the twin of ``ldp-gloc``.

    Relabels z_t = x_t^T theta_hat_t, ridge regression of z on x for the UCB step, and
    theta_hat_{t+1} = Pi_W(theta_hat_t - zeta grad l_t(theta_hat_t)) (Zheng et al. 2020, Alg. 3 without noise).
    """

    reward_range = (0.0, 1.0)
    non_private_twin = "gloc"

    def domain_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The reward pair, and the calibrated one at the channel's public estimate theta_hat = e1: x = e1 (so
        z = 1) with y = 0 against x' = e2 (z' = 0) with y' = 1, whose messages differ by sqrt(2) (x x^T), 1
        (z x) and 0.886 (the gradient): 1.95 in all, near the largest any two data give (about 1.98, by
        numerical search; the declared sensitivities sqrt(2), 2, 2 add to 3.16)."""
        d = self.dim
        e1 = np.eye(d)[0]
        e2 = np.eye(d)[1] if d > 1 else -e1
        return [(np.r_[e1, 1.0], np.r_[e1, 0.0]), (np.r_[e1, 0.0], np.r_[e2, 1.0])]

    def channel(self, z_batch, rng, ledger=None):
        if self._chan is None:
            raise DPAuditError(f"{self.name} is non-private: it has no channel.")
        e1 = np.eye(self.dim)[0]
        return self._chan.send(z_batch, rng, theta_hat=e1, ledger=ledger,  # type: ignore[call-arg]
                               label=f"{self.name}: user message")

    def _reset_server(self) -> None:
        super()._reset_server()
        # dpaudit's Alg. 3 channel (or the twin's x x^T) sends exactly symmetric matrices: no check per round
        self._symmetric_by_construction = (type(self)._server_input is GLOC._server_input
                                           and (self._chan is None or type(self._chan) is GLOCChannel))
        self.theta_hat = np.zeros((self.n_runs, self.dim))
        self.zeta = 1.0 / math.sqrt(self.horizon)
        # theta_hat is GLOC._update's own projection onto W (or the zeros above) while it is this object: the
        # channel may skip its unit-ball test on it (an overridden _update may set anything, so not then)
        self._theta_projected = self.theta_hat if type(self)._update is GLOC._update else None

    def _server_input(self, t, rewards):
        x = self._x
        if self._x_in_ball and type(self._chan) is GLOCChannel:
            return self._chan.send_xy(x, rewards, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message",
                                      theta_hat=self.theta_hat, x_in_ball=True,
                                      theta_in_ball=self.theta_hat is self._theta_projected)
        if self._chan is None:
            d = self.dim
            zt = np.einsum("nd,nd->n", x, self.theta_hat)
            grad = (1.0 / (1.0 + np.exp(-zt)) - rewards)[:, None] * x
            xx = (x[:, :, None] * x[:, None, :]).reshape(-1, d * d)
            return np.concatenate([xx, zt[:, None] * x, grad], axis=1)
        z = np.concatenate([x, rewards[:, None]], axis=1)
        return self._chan.send(z, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message",  # type: ignore[call-arg]
                               theta_hat=self.theta_hat)

    def _update(self, t, msg):
        d = self.dim
        if d == 3 and self._v_symmetric and not self._symmetric_by_construction and not _symmetric3(msg):
            self._v_symmetric = False  # the index takes the general path from now on
        self.V += msg[:, : d * d].reshape(-1, d, d)
        self.u += msg[:, d * d: d * d + d]
        # theta_hat - zeta g, then Pi_W: th / max(1, ||th||), in one buffer (the same operations)
        th = msg[:, d * d + d:] * self.zeta
        np.subtract(self.theta_hat, th, out=th)
        nrm = np.add.reduce(th * th, axis=1, keepdims=True)
        np.sqrt(nrm, out=nrm)
        np.maximum(nrm, 1.0, out=nrm)
        th /= nrm
        self.theta_hat = th
        if self._theta_projected is not None:
            self._theta_projected = th


@register("ldp-gloc", family="ldp")
class LDPGLOC(GLOC):
    """Zheng et al. (2020), Alg. 3 (GLOC-LDP), logistic link: users send x x^T + B_t, z x + xi_t and grad + r_t, sigma = 6 sqrt(2 ln(3.75/delta))/eps.

    Server: V_t, u_t as in Alg. 5 with z_t = x_t^T theta_hat_t in place of y_t; theta_t = (V_t + c_t I)^-1 u_t;
    theta_hat_{t+1} = Pi_W(theta_hat_t - zeta (grad + r_t)). Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 9).
    """

    non_private_twin = "gloc"
    mu_link = math.exp(-1.0) / (1.0 + math.exp(-1.0)) ** 2  # g'(1) = inf of the logistic g' on [-1, 1]

    def __init__(self, n_arms: int = 5, dim: int = 3, horizon: int = 1000, epsilon: float = 1.0,
                 delta: float = 1e-5, alpha: float = 0.05) -> None:
        super().__init__(n_arms, dim, horizon)
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta)
        self.alpha = check_delta(alpha, "alpha")
        self._chan = GLOCChannel.zheng_2020(self.dim, self.epsilon, self.delta)
        self.sigma = self._chan.sigma
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta, alpha=self.alpha)

    _upsilon = LDPLinUCB._upsilon
    _ridge = LDPLinUCB._ridge

    def _beta(self, t: int) -> float:
        t1 = max(t, 1)
        return math.sqrt(self.sigma * math.sqrt(self.dim * t1) * math.log(2 * self.horizon / self.alpha) / self.mu_link)


# ---- Alg. 1 with lil'UCB: best-arm identification (Thm 12) -------------------------------------------

@register("lilucb", family="ldp")
class LilUCB(OnePointUCB):
    """lil'UCB (Jamieson, Malloy, Nowak & Bubeck 2014, Fig. 1), non-private: the twin of ``ldp-lilucb``.

    Pull each arm once, then argmax_i mu_i + (1 + beta)(1 + sqrt(eps)) sqrt(2 s^2 (1 + eps)
    log(log((1 + eps) T_i)/gamma) / T_i) until some arm has T_i >= 1 + lambda sum_{j != i} T_j; that arm is
    the recommendation.
    """

    non_private_twin = "lilucb"
    lil_eps, lil_beta = 0.01, 1.0
    lil_lambda = ((2 + lil_beta) / lil_beta) ** 2

    def __init__(self, n_arms: int = 2, gamma: float = 0.05) -> None:
        super().__init__(n_arms)
        self.gamma = check_delta(gamma, "gamma")
        self._params["gamma"] = self.gamma

    def twin_params(self) -> dict[str, object]:
        return {"n_arms": self.n_arms, "gamma": self.gamma}

    def _reset_server(self) -> None:
        super()._reset_server()
        self.stopped_at = np.full(self.n_runs, -1, dtype=np.int64)
        self.recommendation = np.full(self.n_runs, -1, dtype=np.int64)

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        if t < self.n_arms:
            self._last = np.full(self.n_runs, t, dtype=np.int64)
            return self._last.copy()
        e, b = self.lil_eps, self.lil_beta
        N = self.counts
        total = N.sum(axis=1, keepdims=True)
        done = np.any(N >= 1 + self.lil_lambda * (total - N), axis=1) & (self.stopped_at < 0)
        if done.any():
            self.stopped_at[done] = t
            self.recommendation[done] = np.argmax(N[done], axis=1)
        conf = np.log(np.log(np.maximum((1 + e) * N, math.e)) / self.gamma)
        bonus = (1 + b) * (1 + math.sqrt(e)) * np.sqrt(2 * self._v * (1 + e) * conf / N)
        arm = np.argmax(self.sums / N + bonus, axis=1)
        self._last = np.where(self.stopped_at >= 0, self.recommendation, arm)
        return self._last.copy()


@register("ldp-lilucb", family="ldp")
class LDPLilUCB(LilUCB):
    """Zheng et al. (2020), Alg. 1 with lil'UCB (Thm 12): user t sends r_t + N(0, sigma^2), sigma = 2B sqrt(2 ln(1.25/delta))/eps, B = 1/2.

    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 2); sample complexity SA(lil'UCB, 1/4 + sigma^2, gamma) (Thm 12).
    """

    non_private_twin = "lilucb"

    def __init__(self, n_arms: int = 2, gamma: float = 0.05, epsilon: float = 1.0, delta: float = 1e-5) -> None:
        super().__init__(n_arms, gamma)
        self.epsilon, self.delta = _check_eps_delta(epsilon, delta)
        self._chan = GaussianChannel.zheng_2020(self.epsilon, self.delta, self.reward_range)
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta)

    def variance_proxy(self) -> float:
        return 0.25 + self._chan.sigma ** 2  # type: ignore[union-attr]
