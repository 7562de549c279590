"""Bandit convex optimisation under local DP: Zheng et al. (2020), Alg. 1 (one-point) and Alg. 2 (two-point).

The paper is Zheng, Cai, Huang, Li & Wang (2020), "Locally Differentially Private (Contextual) Bandits
Learning" (full reference: :mod:`dpaudit.papers`).

BCO plays *points* of a convex body, not one of K arms, so these policies follow dpaudit's
continuous-action contract (:mod:`dpaudit.bco`, DESIGN.md "Continuous actions"):

* ``continuous_actions = True``; ``d`` (dimension), ``radius`` R (the decision set X = R B, the
  ball of radius R in R^d, so r B inside X with r = R), ``n_points`` m (1 or 2 queries per round),
  ``loss_bound`` B (|f_t| <= B on X), ``lipschitz`` G, ``horizon`` T;
* ``act(t) -> (n_runs, m, d)`` points of X; ``observe(t, points, losses)`` with the users' loss
  values ``(n_runs, m)``, refused (never clipped) outside [-B, B], non-finite, or with a point
  outside X;
* the LDP plug-in of ``--protocol local`` (:mod:`dpaudit.policies.ldp`): ``channel(z_batch, rng)``,
  ``domain`` (of the scalar user datum z), ``local_channel``, ``keep_transcript`` and
  ``transcript()`` (the messages, (n_runs, T, 1)), plus ``trajectory()`` (the points, (n_runs, T, m, d)).

The user datum z_t (what a user privatises) is her loss value f_t(x_t) in [-B, B] (Alg. 1) or her
loss difference f_t(x_{t,1}) - f_t(x_{t,2}) in [-2 rho G, 2 rho G] (Alg. 2, by G-Lipschitzness and
x_{t,1} - x_{t,2} = 2 rho u_t with ||u_t|| = 1).

==================== =======================================================================
``ldp-bco-fkm``      Alg. 1 (Sec. 3.1, line 2: sigma = 2B sqrt(2 ln(1.25/delta))/eps) with FKM as the
                     black box (Thm 3; Table 1's T^{3/4}/eps row); twin ``bco-fkm``
``ldp-bco-2pt``      Alg. 2 (Sec. 3.2) with Alg. 4 (App. C; Agarwal, Dekel & Xiao 2010): message
                     f1 - f2 + n^T (x1 - x2), n ~ N(0, sigma^2 I_d), sigma = 2G sqrt(2 ln(1.25/delta))/eps;
                     twin ``bco-2pt``
==================== =======================================================================

Choices the paper leaves open, made here:

* X is the ball of radius R (default 1) centred at 0; projections onto (1 - xi) X are radial.
  Uniform unit vectors: normalised standard normal draws (d = 1: +-1 with probability 1/2 each).
* FKM (Flaxman, Kalai & McMahan 2005, "BGD", Thm 3.3 for L-Lipschitz losses): y_1 = 0,
  x_t = y_t + delta u_t, y_{t+1} = Pi_{(1 - alpha) X}(y_t - nu o_t u_t), i.e. online gradient descent
  with step nu delta / d on the sphere-sampling estimate (d / delta) o_t u_t, where o_t is what the
  server received; nu = R / (C sqrt T), delta = T^{-1/4} sqrt(R d C r / (3 (L r + C))), alpha = delta / r,
  with C the loss range the black box is tuned for: C = B for the twin and, following the proof of
  Zheng et al. (2020), Thm 3 (eq. 18), C = B + sigma sqrt(2 ln(2 T^2)) for the private policy (the range of
  the pseudo losses f_t + Z_t outside an event of probability 1/T). delta is capped at r/2 (FKM's
  theorem assumes T large enough for delta <= r). FKM's text was not at hand, so the
  constants are those of FKM's Thm 3.3 as recalled; they only tune utility, never privacy.
* Alg. 2 / Alg. 4: y_1 = 0, x_{t,1} = y_t + rho u_t, x_{t,2} = y_t - rho u_t,
  g_t = d / (2 rho) o_t u_t, y_{t+1} = Pi_{(1 - xi) X}(y_t - eta g_t) with Alg. 2's line 2:
  eta = 1/sqrt T, rho = ln T / T (natural log), xi = rho / r; the twin uses the same parameters so
  that the channel is the only difference.
* Losses outside [-B, B] are refused for both algorithms (Sec. 3.1's standing assumption); for
  Alg. 2 a loss difference outside [-2 rho G, 2 rho G] (a loss that is not G-Lipschitz) is refused
  by the channel's domain. The twins send their raw datum (no channel, no ledger entry).
* Ledger: one Gaussian entry per user message, with the domain sensitivity (2B for Alg. 1, 4 rho G
  for Alg. 2) and the message's real noise scale (sigma; for Alg. 2 sigma ||x_{t,1} - x_{t,2}|| =
  2 rho sigma, the law of n^T (x1 - x2)), so the local audit's ledger part gives the exact per-user eps.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit import deprecations
from dpaudit.accountants import ApproxDP
from dpaudit.environments import project_ball, unit_vectors
from dpaudit.errors import DPAuditError, check_delta, check_int, check_positive
from dpaudit.mechanisms import Channel, GaussianChannel, Noise, Release, user_fed
from dpaudit.policies.base import Policy
from dpaudit.policies.registry import get_policy_class, register

__all__ = ["is_bco", "BCOPolicy", "FKM", "LDPFKM", "TwoPoint", "LDPTwoPoint", "SCS", "LDPSCS", "TwoPointChannel",
]


@deprecations.add_aliases  # its old constructor name, for one release
class TwoPointChannel(Channel):
    """Zheng et al. (2020), Alg. 2 line 5: z = f1 - f2 in [-2 rho G, 2 rho G] goes in, z + n^T gap comes out, n ~ N(0, sigma^2 I_d).

    ``gap`` is x_{t,1} - x_{t,2} (norm 2 rho); the noise n^T gap is N(0, sigma^2 ||gap||^2), recorded in
    the ledger as a Gaussian message of that scale with the domain sensitivity 4 rho G (the
    proof of Zheng et al. 2020, Thm 5). ``gap_factor`` (1 for the paper) multiplies the gap the noise is computed with:
    the mutant ``mutant-bco-2pt-half-gap`` uses 1/2 (noise n^T (x1 - y_t)), and its ledger records that
    real, smaller scale.
    """

    kind = "gaussian"

    def __init__(self, d: int, rho: float, lipschitz: float, sigma: float, gap_factor: float = 1.0) -> None:
        self.d = check_int("d", d, minimum=1)
        self.rho = check_positive("rho", rho)
        self.G = check_positive("lipschitz", lipschitz)
        self.sigma = check_positive("sigma", sigma)
        self.gap_factor = check_positive("gap_factor", gap_factor)
        self.domain = (-2 * self.rho * self.G, 2 * self.rho * self.G)
        self.sensitivity = 4 * self.rho * self.G
        self.calibration: tuple[str, float, float] | None = None

    @classmethod
    def zheng_2020(cls, d: int, rho: float, lipschitz: float, epsilon: float, delta: float, **kw) -> "TwoPointChannel":
        """sigma = 2G sqrt(2 ln(1.25/delta))/eps (Zheng et al. 2020, Alg. 2 line 2)."""
        epsilon = check_positive("epsilon", epsilon)
        delta = check_delta(delta)
        G = check_positive("lipschitz", lipschitz)
        ch = cls(d, rho, G, 2 * G * math.sqrt(2 * math.log(1.25 / delta)) / epsilon, **kw)
        ch.calibration = ("zheng-2020", epsilon, delta)
        return ch

    def check_data(self, z, label="user data"):
        """The datum f(x1) - f(x2) is computed in floating point: a value within 1e-9 of the domain's width beyond
        +-2 rho G (the rounding of a loss that is exactly G-Lipschitz along u_t) is set to the boundary; anything
        further is refused (:meth:`Channel.check_data`)."""
        z = np.asarray(z, dtype=float)
        lo, hi = self.domain
        tol = 1e-9 * (hi - lo)
        if z.size and np.all(np.isfinite(z)) and z.min() >= lo - tol and z.max() <= hi + tol:
            return np.clip(z, lo, hi)
        return Channel.check_data(self, z, label)

    def message_scale(self) -> float:
        """The standard deviation of the noise n^T (gap_factor gap) for a gap of norm 2 rho."""
        return self.sigma * self.gap_factor * 2 * self.rho

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label="", gap=None):
        z = self.check_data(z).reshape(-1)
        n = z.shape[0]
        if gap is None:  # the black-box query: any gap of norm 2 rho gives the same law (n is isotropic)
            gap = np.zeros((n, self.d))
            gap[:, 0] = 2 * self.rho
        gap = np.asarray(gap, dtype=float).reshape(n, self.d) * self.gap_factor
        noise = np.einsum("nd,nd->n", rng.standard_normal((n, self.d)) * self.sigma, gap)
        o = z + noise
        if ledger is not None and ledger.enabled:
            scale = self.sigma * np.linalg.norm(gap, axis=1)
            ledger.record(Release(label or "Alg. 2 two-point message", int(step), Noise("gaussian", scale),
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        return gaussian_epsilon(delta, self.message_scale(), self.sensitivity).epsilon

    def describe(self) -> str:
        return (f"two-point channel z + n^T (x1 - x2), sigma = {self.sigma:.4g} (message noise sd "
                f"{self.message_scale():.4g}) on [{self.domain[0]:.4g}, {self.domain[1]:.4g}]")


class BCOPolicy(Policy):
    """Base of the BCO policies: the continuous-action contract (module docstring) and the users' side."""

    continuous_actions = True
    accepts_queries = False
    #: the protocol its claim is about: local DP (Zheng et al. 2020, Alg. 1, 2); the only protocol BCO policies run under
    notion = "local"
    n_points = 1
    keep_transcript = False
    _chan: Channel | None = None

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0) -> None:
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.horizon = check_int("horizon", horizon, minimum=2)
        self.radius = check_positive("radius", radius)
        self.loss_bound = check_positive("loss_bound", loss_bound)
        self.lipschitz = check_positive("lipschitz", lipschitz)
        self.r_inner = self.radius  # X = R B contains r B with r = R
        self._params: dict[str, object] = {"d": self.d, "horizon": self.horizon, "radius": self.radius,
                                        "loss_bound": self.loss_bound, "lipschitz": self.lipschitz}

    def params(self) -> dict[str, object]:
        """Every constructor parameter of this instance (the problem's, and eps, delta for a private one)."""
        out = self.twin_params()
        out.update({k: getattr(self, k) for k in ("strong_convexity", "smoothness", "epsilon", "delta", "peek_round")
                    if hasattr(self, k)})
        return out

    def twin_params(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in ("d", "horizon", "radius", "loss_bound", "lipschitz")}

    # ---- the LDP plug-in -------------------------------------------------------------------------
    def channel(self, z_batch: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """What users with data ``z_batch`` send (one user per row); no ledger entry."""
        if self._chan is None:
            raise DPAuditError(f"{self.name} is non-private: it has no channel.")
        return self._chan.send(np.asarray(z_batch, dtype=float).reshape(-1), rng)

    @property
    def local_channel(self) -> Channel | None:
        return self._chan

    @property
    def domain(self) -> tuple[float, float]:
        return tuple(self._chan.domain) if self._chan is not None else self.data_domain()

    def data_domain(self) -> tuple[float, float]:
        """The interval of the user datum z (a loss value, or a two-point difference)."""
        return (-self.loss_bound, self.loss_bound)

    def transcript(self) -> np.ndarray:
        """What the server received from each user, (n_runs, T, 1) (needs ``keep_transcript = True``)."""
        if not self._received:
            raise DPAuditError("no transcript was kept; set keep_transcript = True before reset().")
        return np.stack(self._received, axis=1)[:, :, None]

    def trajectory(self) -> np.ndarray:
        """The points the server played, (n_runs, T, m, d) (needs ``keep_transcript = True``)."""
        if not self._points:
            raise DPAuditError("no trajectory was kept; set keep_transcript = True before reset().")
        return np.stack(self._points, axis=1)

    # ---- the contract ----------------------------------------------------------------------------
    def _reset(self) -> None:
        self._received: list[np.ndarray] = []
        self._points: list[np.ndarray] = []
        self.y = np.zeros((self.n_runs, self.d))
        self._u = np.zeros((self.n_runs, self.d))
        self._last = np.zeros((self.n_runs, self.n_points, self.d))

    def act(self, t: int, arms: np.ndarray | None = None) -> np.ndarray:
        self._u = unit_vectors(self.rng, self.n_runs, self.d)
        self._last = self._play(self._u)
        if self.keep_transcript:
            self._points.append(self._last.copy())
        return self._last.copy()

    def observe(self, t: int, points: np.ndarray, losses: np.ndarray) -> None:
        who = type(self).name or type(self).__name__
        P = np.asarray(points, dtype=float)
        if P.shape != (self.n_runs, self.n_points, self.d):
            raise DPAuditError(f"{who}: points at step {t} have shape {P.shape}; expected "
                               f"(n_runs, m, d) = ({self.n_runs}, {self.n_points}, {self.d}).")
        check_points(P, self.radius, who, t)
        L = np.asarray(losses, dtype=float)
        if L.shape != (self.n_runs, self.n_points):
            raise DPAuditError(f"{who}: losses at step {t} have shape {L.shape}; expected (n_runs, m) = "
                               f"({self.n_runs}, {self.n_points}).")
        check_losses(L, self.loss_bound, who, t)
        self._observe_checked(t, L)

    def observe_checked(self, t: int, points: np.ndarray, losses: np.ndarray) -> None:
        """``observe`` for a caller (:func:`dpaudit.bco.simulate_bco`) that checked the points and losses once."""
        self._observe_checked(t, losses)

    def _observe_checked(self, t: int, losses: np.ndarray) -> None:
        z = self._user_datum(losses)
        msg = self._send(t, z)
        if self.keep_transcript:
            self._received.append(np.array(msg, dtype=float, copy=True))
        self._update(t, msg)

    # ---- subclass hooks --------------------------------------------------------------------------
    def _play(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _user_datum(self, losses: np.ndarray) -> np.ndarray:
        return losses[:, 0]

    def _send(self, t: int, z: np.ndarray) -> np.ndarray:
        if self._chan is None:
            return z
        return self._chan.send(z, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message")

    def _update(self, t: int, msg: np.ndarray) -> None:
        raise NotImplementedError


def check_points(P: np.ndarray, radius: float, who: str, t: int) -> None:
    """Refuse non-finite points and points outside the ball of radius ``radius`` (never projected silently)."""
    if not np.all(np.isfinite(P)):
        raise DPAuditError(f"{who}: a point at step {t} contains NaN or inf; points must be finite.")
    norms = np.linalg.norm(P, axis=-1)
    if norms.size and norms.max() > radius * (1 + 1e-9):
        raise DPAuditError(f"{who}: a point of norm {norms.max():.6g} at step {t} lies outside the decision set, "
                           f"the ball of radius {radius:g}.")


def check_losses(L: np.ndarray, bound: float, who: str, t: int) -> None:
    """Refuse non-finite losses and losses outside [-B, B] (never clipped)."""
    if not np.all(np.isfinite(L)):
        raise DPAuditError(f"{who}: losses at step {t} contain NaN or inf; losses must be finite numbers.")
    if L.size and np.abs(L).max() > bound:
        bad = L.flat[int(np.argmax(np.abs(L)))]
        raise DPAuditError(f"{who}: loss {bad:g} at step {t} is outside [-{bound:g}, {bound:g}], the range "
                           f"(loss_bound B = {bound:g}) its privacy calibration assumes.")


# ---- Alg. 1 with FKM ---------------------------------------------------------------------------------

@register("bco-fkm", family="ldp")
class FKM(BCOPolicy):
    """FKM one-point bandit gradient descent (Flaxman, Kalai & McMahan 2005), non-private: the twin of ``ldp-bco-fkm``.

    x_t = y_t + delta u_t, y_{t+1} = Pi_{(1 - alpha) X}(y_t - nu f_t(x_t) u_t), tuned for the loss range C = B
    (module docstring).
    """

    non_private_twin = "bco-fkm"
    n_points = 1

    def _tuning_range(self) -> float:
        """C, the loss range FKM's parameters are tuned for."""
        return self.loss_bound

    def _tune(self) -> None:
        T, d, R, r, L = self.horizon, self.d, self.radius, self.r_inner, self.lipschitz
        C = self._tuning_range()
        self.nu = R / (C * math.sqrt(T))
        self.delta_ = min(T ** -0.25 * math.sqrt(R * d * C * r / (3 * (L * r + C))), r / 2)
        self.alpha = self.delta_ / r

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0) -> None:
        super().__init__(d, horizon, radius, loss_bound, lipschitz)
        self._tune()

    def _play(self, u):
        return (self.y + self.delta_ * u)[:, None, :]

    def _update(self, t, msg):
        # OGD with step nu delta / d on the sphere-sampling estimate (d / delta) o u: y - nu o u
        self.y = project_ball(self.y - self.nu * msg[:, None] * self._u, (1 - self.alpha) * self.radius)


@register("ldp-bco-fkm", family="ldp")
class LDPFKM(FKM):
    """Zheng et al. (2020), Alg. 1 with FKM (Thm 3, Table 1's T^{3/4}/eps row): user t sends f_t(x_t) + N(0, sigma^2), sigma = 2B sqrt(2 ln(1.25/delta))/eps.

    FKM is tuned for the pseudo-loss range C = B + sigma sqrt(2 ln(2 T^2)) (proof of Thm 3, eq. 18).
    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 2), hence (eps, delta)-DP of the points (Thm 1).
    """

    non_private_twin = "bco-fkm"

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0, epsilon: float = 1.0, delta: float = 1e-5) -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta(delta)
        BCOPolicy.__init__(self, d, horizon, radius, loss_bound, lipschitz)
        self._chan = self._make_channel()
        self.sigma = self._chan.sigma  # type: ignore[union-attr]
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta)
        self._tune()

    def _make_channel(self) -> Channel:
        return GaussianChannel.zheng_2020(self.epsilon, self.delta, (-self.loss_bound, self.loss_bound))

    def _tuning_range(self) -> float:
        sigma = 2 * self.loss_bound * math.sqrt(2 * math.log(1.25 / self.delta)) / self.epsilon
        return self.loss_bound + sigma * math.sqrt(2 * math.log(2 * self.horizon ** 2))


# ---- Alg. 2 with Alg. 4 (two-point feedback) -----------------------------------------------------------

@register("bco-2pt", family="ldp")
class TwoPoint(BCOPolicy):
    """Alg. 4 of Zheng et al. (2020), App. C (Agarwal, Dekel & Xiao 2010), two queries per round, non-private: the twin of ``ldp-bco-2pt``.

    x_{t,1/2} = y_t +- rho u_t, g_t = d/(2 rho) (f_t(x_{t,1}) - f_t(x_{t,2})) u_t, y_{t+1} = Pi_{(1 - xi) X}(y_t - eta g_t),
    with Alg. 2's line 2: eta = 1/sqrt T, rho = ln T / T, xi = rho / r.
    """

    non_private_twin = "bco-2pt"
    n_points = 2

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0) -> None:
        super().__init__(d, horizon, radius, loss_bound, lipschitz)
        T = self.horizon
        self.eta = 1.0 / math.sqrt(T)
        self.rho = math.log(T) / T
        self.xi = self.rho / self.r_inner

    def data_domain(self) -> tuple[float, float]:
        return (-2 * self.rho * self.lipschitz, 2 * self.rho * self.lipschitz)

    def _play(self, u):
        return np.stack([self.y + self.rho * u, self.y - self.rho * u], axis=1)

    def _user_datum(self, losses):
        z = losses[:, 0] - losses[:, 1]
        lo, hi = self.data_domain()
        tol = 1e-9 * (hi - lo)  # floating-point rounding of an exactly G-Lipschitz difference, as in the channel
        if self._chan is None and z.size and (z.min() < lo - tol or z.max() > hi + tol):
            bad = z[(z < lo) | (z > hi)][0]
            raise DPAuditError(f"{self.name}: loss difference {bad:g} lies outside [{lo:.4g}, {hi:.4g}] = +-2 rho G: "
                               f"the losses are not G-Lipschitz with G = {self.lipschitz:g}.")
        return z

    def _send(self, t, z):
        if self._chan is None:
            return z
        gap = self._last[:, 0, :] - self._last[:, 1, :]
        return self._chan.send(z, self.rng, ledger=self.ledger, step=t, label=f"{self.name}: user message",  # type: ignore[call-arg]
                               gap=gap)

    def _update(self, t, msg):
        g = (self.d / (2 * self.rho)) * msg[:, None] * self._u
        self.y = project_ball(self.y - self.eta * g, (1 - self.xi) * self.radius)


@register("ldp-bco-2pt", family="ldp")
class LDPTwoPoint(TwoPoint):
    """Zheng et al. (2020), Alg. 2: user t sends f_t(x_{t,1}) - f_t(x_{t,2}) + n_t^T (x_{t,1} - x_{t,2}), n_t ~ N(0, sigma^2 I_d), sigma = 2G sqrt(2 ln(1.25/delta))/eps.

    The message noise is N(0, 4 rho^2 sigma^2) and the datum's domain [-2 rho G, 2 rho G] (proof of Thm 5).
    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 5).
    """

    non_private_twin = "bco-2pt"
    gap_factor = 1.0

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0, epsilon: float = 1.0, delta: float = 1e-5) -> None:
        super().__init__(d, horizon, radius, loss_bound, lipschitz)
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta(delta)
        self._chan = TwoPointChannel.zheng_2020(self.d, self.rho, self.lipschitz, self.epsilon, self.delta,
                                             gap_factor=self.gap_factor)
        self.sigma = self._chan.sigma
        self.claim = ApproxDP(self.epsilon, self.delta)
        self._params.update(epsilon=self.epsilon, delta=self.delta)


# ---- Alg. 1 with BCO-SCS (Cor. 4: strongly convex and smooth losses) --------------------------------------

#: the dyadic bisection's first levels settled at once (:func:`_settled_levels`), the rest run as in the loop
SETTLED_LEVELS = 32
_U = 2.0 ** -53


def _ftrl_barrier_step(a: np.ndarray, c: float, eta: float, radius: float, iters: int = 50) -> np.ndarray:
    """argmin over ||x|| < R of <a, x> + (c/2)||x||^2 - (1/eta) log(R^2 - ||x||^2), batched over the rows of ``a``.

    The objective is rotation-invariant around the direction of a: x = -s a/||a|| with s in [0, R) the root of
    c s + (2 s / eta)/(R^2 - s^2) = ||a|| (the left side increases from 0 to infinity): bisection to 2^-iters R.
    For R a power of two the bisection's first :data:`SETTLED_LEVELS` levels are settled at once where that is
    provably what the loop would do (:func:`_settled_levels`) and the loop runs the rest; the result is the
    loop's bit for bit.
    """
    na = np.linalg.norm(a, axis=1)
    m, _ = math.frexp(radius)
    if m == 0.5 and iters <= 50:
        # R a power of two: every lo, hi and mid is a multiple of R 2^-iters below 2R, exact in a double, so
        # mid = lo + R 2^-(k+1) and hi = lo + R 2^-k exactly as the general loop below forms them
        K = SETTLED_LEVELS if iters > SETTLED_LEVELS else 0
        lo = np.zeros_like(na)
        if K:
            lo, ok = _settled_levels(na, c, eta, radius, K)
            bad = np.flatnonzero(~ok)
            lo = _dyadic_bisection(lo, na, c, eta, radius, K, iters)
            if bad.size:  # not provably settled: the whole loop for these rows
                lo[bad] = _dyadic_bisection(np.zeros(bad.size), na[bad], c, eta, radius, 0, iters)
        else:
            lo = _dyadic_bisection(lo, na, c, eta, radius, 0, iters)
        s = lo + radius * 2.0 ** -(iters + 1)
        return -(s / np.maximum(na, 1e-300))[:, None] * a
    return _bisection_step(a, c, eta, radius, iters)


def _bisection_step(a: np.ndarray, c: float, eta: float, radius: float, iters: int = 50) -> np.ndarray:
    """:func:`_ftrl_barrier_step` by the plain bisection loop (any radius; the reference of the dyadic path)."""
    na = np.linalg.norm(a, axis=1)
    lo, hi = np.zeros_like(na), np.full_like(na, radius)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        f = c * mid + (2 * mid / eta) / (radius ** 2 - mid ** 2) - na
        lo, hi = np.where(f < 0, mid, lo), np.where(f < 0, hi, mid)
    s = 0.5 * (lo + hi)
    return -(s / np.maximum(na, 1e-300))[:, None] * a


def _dyadic_bisection(lo: np.ndarray, na: np.ndarray, c: float, eta: float, radius: float, start: int,
                      iters: int) -> np.ndarray:
    """Levels ``start``..``iters - 1`` of the bisection from ``lo`` (R a power of two): mid = lo + R 2^-(k+1), and
    f(mid) < 0 read as fl(c mid + g) < ||a|| (fl(x - y) < 0 exactly when x < y), the loop's decisions exactly."""
    lo = lo.copy()
    r2 = radius ** 2
    h = radius * 2.0 ** -start
    for _ in range(start, iters):
        h *= 0.5
        mid = lo + h
        g = 2 * mid
        g /= eta
        den = np.square(mid)
        np.subtract(r2, den, out=den)
        g /= den
        cm = c * mid
        cm += g
        np.copyto(lo, mid, where=cm < na)
    return lo


def _computed_sum(x: np.ndarray, c: float, eta: float, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """fl(c x + fl(2x/eta)/fl(R^2 - x^2)) as the loop computes it at x, and a bound E(x) on its distance from the
    exact F(x) = c x + (2x/eta)/(R^2 - x^2): each operation's relative error is at most u = 2^-53, R^2 - x^2 loses
    u x^2 / (R^2 - x^2) more, so |computed - F| <= u (2 A + B (6 + 2 x^2 / D)) to first order (A = c x, B the
    barrier term, D = R^2 - x^2); E is four times that."""
    den = radius ** 2 - np.square(x)
    B = (2 * x / eta) / den
    A = c * x
    with np.errstate(divide="ignore", invalid="ignore"):
        E = 4 * _U * (2 * np.abs(A) + np.abs(B) * (6 + 2 * np.square(x) / np.abs(den)))
    return A + B, E


def _settled_levels(na: np.ndarray, c: float, eta: float, radius: float, K: int) -> tuple[np.ndarray, np.ndarray]:
    """The bisection's ``lo`` after its first K levels, and where that is provably the loop's.

    F(s) = c s + (2 s/eta)/(R^2 - s^2) is increasing and convex on [0, R), so Newton's method from an s0 >= root
    descends to the root: s0 the smaller of ||a|| / F'(0) (F(s) >= s F'(0)) and the root of the barrier term alone. Its estimate gives the level-K
    cell [lo_K, lo_K + R 2^-K] the root should lie in; the cell is certified when the computed sum at lo_K plus
    2 E(lo_K) is below ||a|| and at hi_K minus 2 E(hi_K) is at least ||a|| (:func:`_computed_sum`): F and E
    increase, and F - E does too on the grid points of levels <= K (R^2 - x^2 >= R^2 2^-K there, far above the
    u R^2 where it could not), so every mid <= lo_K the loop visits has computed sum < ||a|| and every mid >= hi_K
    has it >= ||a||: the loop's first K levels end at exactly [lo_K, hi_K]. A side with no mid to visit (lo_K = 0,
    hi_K = R) needs no check. Rows not certified are False (the caller runs the loop for them)."""
    kk = 2.0 / eta
    r2 = radius ** 2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # two upper bounds on the root: F(s) >= s F'(0), and F(s) >= the barrier term alone (its root in closed form)
        s = np.minimum(na / (c + kk / r2), 2 * na * r2 / (kk + np.sqrt(kk * kk + 4 * r2 * np.square(na))))
        for _ in range(6):
            den = r2 - s * s
            s = s - (c * s + kk * s / den - na) / (c + kk * (r2 + s * s) / (den * den))
        step = radius * 2.0 ** -K
        t = np.clip(s, 0.0, radius - step)
        lo = np.floor(t / step) * step
        hi = lo + step
        S_lo, E_lo = _computed_sum(lo, c, eta, radius)
        S_hi, E_hi = _computed_sum(hi, c, eta, radius)
        ok = ((lo == 0) | (S_lo + 2 * E_lo < na)) & ((hi >= radius) | (S_hi - 2 * E_hi >= na))
    lo = np.where(ok, lo, 0.0)
    return lo, ok


@register("bco-scs", family="ldp")
class SCS(BCOPolicy):
    """BCO-SCS (Hazan & Levy 2014, "Bandit Convex Optimization: Towards Tight Bounds", Alg. 1), non-private: the twin of ``ldp-bco-scs``.

    On X = R B with the barrier R(x) = -log(R^2 - ||x||^2) (nu = 1): x_1 = argmin R = 0;
    B_t = (hess R(x_t) + eta s t I)^{-1/2} (closed form: eigenvalues 2/(R^2 - r^2) + eta s t across x_t and
    2/(R^2 - r^2) + 4 r^2/(R^2 - r^2)^2 + eta s t along it, r = ||x_t||); play y_t = x_t + B_t u_t (inside the
    Dikin ellipsoid, hence in X); g_t = d o_t B_t^{-1} u_t; x_{t+1} = argmin_x sum_{tau <= t} (g_tau^T x +
    (s/2)||x - x_tau||^2) + R(x)/eta (:func:`_ftrl_barrier_step`, exact up to bisection). s = ``strong_convexity``,
    beta = ``smoothness``; eta = sqrt((nu + 2 beta/s) ln T / (4 d^2 C^2 T)) with C the loss range the black box
    is tuned for (B here). The search tool returned the paper's abstract only, not its pseudo-code, so the
    algorithm is as recalled from the paper and eta's constant is unverified; it tunes utility, never privacy.
    """

    non_private_twin = "bco-scs"
    n_points = 1

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0, strong_convexity: float = 0.5, smoothness: float = 0.5) -> None:
        super().__init__(d, horizon, radius, loss_bound, lipschitz)
        self.strong_convexity = check_positive("strong_convexity", strong_convexity)
        self.smoothness = check_positive("smoothness", smoothness)
        self._tune()

    def twin_params(self) -> dict[str, object]:
        return {**super().twin_params(), "strong_convexity": self.strong_convexity, "smoothness": self.smoothness}

    def _tuning_range(self) -> float:
        return self.loss_bound

    def _tune(self) -> None:
        T, d, C = self.horizon, self.d, self._tuning_range()
        self.eta = math.sqrt((1.0 + 2 * self.smoothness / self.strong_convexity) * math.log(T) / (4 * d * d * C * C * T))

    def _reset(self) -> None:
        super()._reset()
        self._G = np.zeros((self.n_runs, self.d))  # sum of g_tau
        self._S = np.zeros((self.n_runs, self.d))  # sum of x_tau
        self._t = 0
        self._scale = (np.ones(self.n_runs), np.ones(self.n_runs), np.zeros((self.n_runs, self.d)))

    def _eig(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Eigenvalues across and along x_t of hess R(x_t) + eta s t I, and the unit direction of x_t."""
        r2 = np.einsum("nd,nd->n", self.y, self.y)
        gap = self.radius ** 2 - r2
        shift = self.eta * self.strong_convexity * (self._t + 1)  # t counts rounds from 1 in the paper
        across = 2 / gap + shift
        along = across + 4 * r2 / gap ** 2
        xhat = self.y / np.maximum(np.sqrt(r2), 1e-300)[:, None]
        return across, along, xhat

    def _play(self, u):
        across, along, xhat = self._eig()
        self._scale = (across, along, xhat)
        proj = np.einsum("nd,nd->n", xhat, u)[:, None] * xhat
        return (self.y + (u - proj) / np.sqrt(across)[:, None] + proj / np.sqrt(along)[:, None])[:, None, :]

    def _update(self, t, msg):
        across, along, xhat = self._scale
        u = self._u
        proj = np.einsum("nd,nd->n", xhat, u)[:, None] * xhat
        binv_u = (u - proj) * np.sqrt(across)[:, None] + proj * np.sqrt(along)[:, None]
        self._G += self.d * msg[:, None] * binv_u
        self._S += self.y
        self._t += 1
        s = self.strong_convexity
        self.y = _ftrl_barrier_step(self._G - s * self._S, s * self._t, self.eta, self.radius)


@register("ldp-bco-scs", family="ldp")
class LDPSCS(SCS):
    """Zheng et al. (2020), Alg. 1 with BCO-SCS (Cor. 4, strongly convex and smooth): user t sends f_t(y_t) + N(0, sigma^2), sigma = 2B sqrt(2 ln(1.25/delta))/eps.

    BCO-SCS is tuned for the pseudo-loss range C = B + sigma sqrt(2 ln(2 T^2)) (proof of Thm 3, eq. 18).
    Claim: (eps, delta)-LDP (Zheng et al. 2020, Thm 2).
    """

    non_private_twin = "bco-scs"

    def __init__(self, d: int = 2, horizon: int = 1000, radius: float = 1.0, loss_bound: float = 1.0,
                 lipschitz: float = 1.0, strong_convexity: float = 0.5, smoothness: float = 0.5,
                 epsilon: float = 1.0, delta: float = 1e-5) -> None:
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = check_delta(delta)
        super().__init__(d, horizon, radius, loss_bound, lipschitz, strong_convexity, smoothness)
        self._chan = GaussianChannel.zheng_2020(self.epsilon, self.delta, (-self.loss_bound, self.loss_bound))
        self.sigma = self._chan.sigma
        self.claim = ApproxDP(self.epsilon, self.delta)

    def _tuning_range(self) -> float:
        sigma = 2 * self.loss_bound * math.sqrt(2 * math.log(1.25 / self.delta)) / self.epsilon
        return self.loss_bound + sigma * math.sqrt(2 * math.log(2 * self.horizon ** 2))


def is_bco(obj: object) -> bool:
    """Whether ``obj`` (a registered name, a class or an instance) follows the continuous-action contract."""
    if isinstance(obj, str):
        if ":" in obj:
            return False  # plug-ins are K-armed unless built; the local audit checks the built policy
        try:
            obj = get_policy_class(obj)
        except DPAuditError:
            return False
    return bool(getattr(obj, "continuous_actions", False))
