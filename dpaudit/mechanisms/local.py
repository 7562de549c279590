"""Local channels: per-user mechanisms z -> o for local DP (:class:`Channel` and its subclasses).

User t's private data z_t goes in, one message o_t comes out. Each message is recorded in the ledger with
its noise, its scale and the sensitivity over the whole data domain (sup over z, z' of |F(z) - F(z')|), so
the per-user guarantee is computable from the ledger alone. The definitions ("DP channel", "Gaussian
channel") are those of the interactive joint/local DP definitions (anticipating local DP as in Duchi,
Jordan & Wainwright 2013); the calibrations and the contextual channels are Zheng, Cai, Huang, Li & Wang
(2020) "Locally Differentially Private (Contextual) Bandits Learning", Algs. 1, 3 and 5.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit import deprecations
from dpaudit.errors import DPAuditError, check_positive
from dpaudit.mechanisms.ledger import Ledger, Noise, Release, user_fed
from dpaudit.mechanisms.symmetric import check_dim, packed_index, triu, upper_flat

__all__ = ["Channel", "GaussianChannel", "LaplaceChannel", "RandomizedResponse", "LinearStatsChannel",
           "GLOCChannel"]


def _check_domain(domain: object) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in domain)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise DPAuditError(f"a channel's domain must be a pair (low, high) of numbers, got {domain!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"a channel's domain must be finite with low < high, got {domain!r}.")
    return lo, hi


def _matrix_rows(rows: np.ndarray, xt: np.ndarray, noise: np.ndarray) -> None:
    """``rows`` (d * d, n) = vec(x x^T + Z) of every user, one row per entry (row-major (i, j)), from ``xt`` = x^T
    (d, n) and ``noise`` (n, m): with m = d (d + 1) / 2, Z's upper triangles (``np.triu_indices`` order) and
    Z symmetric, each upper entry fl(x_i x_j + z_ij) formed once and mirrored (x_j x_i = x_i x_j exactly), so
    every matrix is exactly symmetric; with m = d * d, every entry's own noise. The same values as
    ``x x^T + symmetric_gaussian(...)`` elementwise. One row per entry runs every operation along the users
    (contiguous); a broadcast x x^T over (n, d, d) runs 3-long inner loops and costs 3 times as much."""
    d = xt.shape[0]
    if noise.shape[1] == d * d:
        i, j = np.divmod(np.arange(d * d), d)
        np.multiply(xt[i], xt[j], out=rows)
        rows += noise.T
        return
    iu = triu(d)
    if xt.shape[1] >= 512:  # many users: entry by entry into its row, mirrored by a copy (no (m, n) temporary)
        nt = noise.T
        for p, (i, j) in enumerate(zip(iu[0].tolist(), iu[1].tolist())):
            row = rows[i * d + j]
            np.multiply(xt[i], xt[j], out=row)
            row += nt[p]
            if i != j:
                rows[j * d + i] = row
        return
    up = xt[iu[0]]  # (m, n)
    up *= xt[iu[1]]
    up += noise.T
    np.take(up, packed_index(d), axis=0, out=rows)


class Channel:
    """A per-user mechanism z -> o (the interactive joint/local DP definitions, Def. "DP channel"; Zheng et al.
    2020, Def. 1 "LDP").

    ``domain`` is the interval of user data the channel accepts (data outside it is refused, never
    clipped); ``sensitivity`` is sup over the domain of |F(z) - F(z')|; ``send`` privatises a batch
    of user data (one user per run) and records one ledger entry per batch; ``epsilon(delta)`` is the
    channel's *exact* epsilon at ``delta`` (from the exact privacy profile of its noise).
    """

    kind: str = ""
    domain: tuple[float, float]
    sensitivity: float
    #: the paper's calibration this channel was built with, for the calibration lint: (rule, eps, delta)
    calibration: tuple[str, float, float] | None = None

    def check_data(self, z: np.ndarray, label: str = "user data") -> np.ndarray:
        z = np.asarray(z, dtype=float)
        lo, hi = self.domain
        # the domain is finite, so min >= lo and max <= hi fail for NaN and inf too
        if z.size and not (z.min() >= lo and z.max() <= hi):
            if not np.all(np.isfinite(z)):
                raise DPAuditError(f"{label} contains NaN or inf; a channel's input must be finite.")
            bad = z[(z < lo) | (z > hi)].flat[0]
            raise DPAuditError(f"{label} value {bad:g} lies outside the channel's declared domain [{lo:g}, {hi:g}]; "
                               "the channel's guarantee covers only its domain, so it is refused (not clipped).")
        return z

    def send(self, z: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None, step: int = -1,
             runs: np.ndarray | None = None, label: str = "") -> np.ndarray:
        raise NotImplementedError

    def epsilon(self, delta: float) -> float:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@deprecations.add_aliases  # its old constructor names, for one release
class GaussianChannel(Channel):
    """o = z + N(0, sigma^2) for scalar z in [lo, hi] (sensitivity hi - lo); exact profile: Balle & Wang 2018.

    Calibrations: :meth:`zheng_2020` (Zheng et al. 2020, Alg. 1, sigma = 2B sqrt(2 ln(1.25/delta))/eps with
    |f| <= B, i.e. B = (hi - lo)/2 after centring) and :meth:`gaussian_channel` (the interactive joint/local DP
    definitions, Def. "Gaussian channel",
    Priv[Delta]{v} = N(v, 4 sigma_a^2 Delta^2), sigma_a = 2 sqrt(log(1.25/beta))/alpha, ||F(z)|| <= Delta,
    i.e. Delta = (hi - lo)/2 after centring and sigma = 2 sigma_a Delta).
    """

    kind = "gaussian"

    def __init__(self, domain: tuple[float, float], sigma: float) -> None:
        self.domain = _check_domain(domain)
        self.sigma = check_positive("sigma", sigma)
        self.sensitivity = self.domain[1] - self.domain[0]

    @classmethod
    def zheng_2020(cls, epsilon: float, delta: float, domain: tuple[float, float] = (0.0, 1.0)) -> "GaussianChannel":
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        lo, hi = _check_domain(domain)
        B = (hi - lo) / 2
        ch = cls((lo, hi), 2 * B * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
        ch.calibration = ("zheng-2020", epsilon, delta)
        return ch

    @classmethod
    def gaussian_channel(cls, alpha: float, beta: float, domain: tuple[float, float] = (0.0, 1.0)) -> "GaussianChannel":
        alpha = check_positive("alpha", alpha)
        from dpaudit.errors import check_delta

        beta = check_delta(beta, "beta")
        lo, hi = _check_domain(domain)
        sigma_a = 2 * math.sqrt(math.log(1.25 / beta)) / alpha
        ch = cls((lo, hi), 2 * sigma_a * (hi - lo) / 2)
        ch.calibration = ("gaussian-channel", alpha, beta)
        return ch

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        o = z + rng.standard_normal(z.shape) * self.sigma
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "gaussian channel", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        return gaussian_epsilon(delta, self.sigma, self.sensitivity).epsilon

    def describe(self) -> str:
        return f"Gaussian channel sigma = {self.sigma:.4g} on [{self.domain[0]:g}, {self.domain[1]:g}]"


class LaplaceChannel(Channel):
    """o = z + Lap(b) for scalar z in [lo, hi]: (hi - lo)/b-LDP (the usual pure-LDP baseline)."""

    kind = "laplace"

    def __init__(self, domain: tuple[float, float], b: float) -> None:
        self.domain = _check_domain(domain)
        self.b = check_positive("b", b)
        self.sensitivity = self.domain[1] - self.domain[0]

    @classmethod
    def for_pure(cls, epsilon: float, domain: tuple[float, float] = (0.0, 1.0)) -> "LaplaceChannel":
        epsilon = check_positive("epsilon", epsilon)
        lo, hi = _check_domain(domain)
        return cls((lo, hi), (hi - lo) / epsilon)

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        o = z + rng.laplace(0.0, 1.0, z.shape) * self.b
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "Laplace channel", int(step), Noise("laplace", np.full(n, self.b)),
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import laplace_epsilon

        return laplace_epsilon(delta, self.sensitivity / self.b).epsilon

    def describe(self) -> str:
        return f"Laplace channel b = {self.b:.4g} on [{self.domain[0]:g}, {self.domain[1]:g}]"


class RandomizedResponse(Channel):
    """Randomised response for a reward z in [0, 1]: draw a bit b ~ Bernoulli(z), send b with probability
    p = e^eps/(1 + e^eps), else 1 - b (Warner 1965; the LDP baseline for binary rewards).

    P(o = 1 | z) = q + (p - q) z with q = 1 - p, so the worst pair is z = 0 vs z = 1 and the channel is
    exactly eps-LDP on [0, 1] (on binary rewards the first draw is the identity). A finite channel:
    :meth:`table` gives P(o | z) at the domain's extremes for the exact audit. Ledger entries carry
    noise kind ``"randomized_response"`` with scale 1/eps (so sensitivity/scale = eps, the pure
    epsilon, as for Laplace) and the user's round as ``fed``. The per-round accountant of
    :mod:`dpaudit.accountants.composition` knows only Gaussian and Laplace curves and treats this
    entry as Laplace of the same eps: its pure epsilon (and so the implied eps-DP) is exact, but its
    Rényi curve at finite orders is below randomised response's (at eps = 1, order 2: 0.619 vs 0.735),
    so use the pure guarantee, not that curve; the local audit accounts it exactly.
    """

    kind = "randomized_response"

    def __init__(self, epsilon: float) -> None:
        self.eps = check_positive("epsilon", epsilon)
        self.domain = (0.0, 1.0)
        self.sensitivity = 1.0
        self.p = 1.0 / (1.0 + math.exp(-self.eps))

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        b = rng.random(z.shape) < z
        keep = rng.random(z.shape) < self.p
        o = np.where(keep, b, ~b).astype(float)
        if ledger is not None and ledger.enabled:
            n = z.shape[0]
            ledger.record(Release(label or "randomised response", int(step),
                                  Noise("randomized_response", np.full(n, 1.0 / self.eps)),  # type: ignore[arg-type]
                                  self.sensitivity, np.arange(n) if runs is None else np.asarray(runs),
                                  z.reshape(n, 1), o.reshape(n, 1), user_fed(n, step, np.ones((n, 1)))))
        return o

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(inputs, outputs, P[input, output]) at the domain's extremes z in {0, 1}, outputs {0, 1}."""
        p, q = self.p, 1.0 - self.p
        return np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([[p, q], [q, p]])

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.conversions import pure_to_approx

        return pure_to_approx(self.eps, delta).epsilon

    def describe(self) -> str:
        return f"randomised response eps = {self.eps:g} on [0, 1]"


@deprecations.add_aliases  # its old constructor names, for one release
class LinearStatsChannel(Channel):
    """Zheng et al. (2020), Alg. 5 line 9: user (x, y), ||x||_2 <= 1, |y| <= y_bound, sends (x x^T + B, y x + xi).

    B is :func:`~dpaudit.mechanisms.symmetric.symmetric_gaussian` with scale ``sigma`` (upper triangle i.i.d.,
    mirrored); xi ~ N(0, sigma^2 I_d). Data: rows ``[x_1..x_d, y]``; messages: rows
    ``[vec(x x^T + B) (d*d), y x + xi (d)]``. Sensitivities over the domain, recorded in the ledger: the
    upper triangle of x x^T moves by at most sqrt(2) in L2 (x = e_1 vs e_2; Zheng et al.'s (2020) proof of
    Thm 7 uses the looser 2), y x by at most 2 y_bound (Zheng et al. use y in [-2, 2], so 4). Two ledger
    entries per user, composed by the local audit.
    ``symmetric=False`` draws every entry of the matrix noise independently (a mutant: the lower
    triangle's noise is then not the upper one's, which the ledger still records as symmetric).
    """

    kind = "gaussian"

    def __init__(self, d: int, sigma: float, y_bound: float = 2.0, *, symmetric: bool = True) -> None:
        self.d = check_dim("d", d)
        self.sigma = check_positive("sigma", sigma)
        self.y_bound = check_positive("y_bound", y_bound)
        self.domain = (-self.y_bound, self.y_bound)  # of y; x is checked against the unit ball
        self.symmetric = bool(symmetric)
        self.sens_matrix = math.sqrt(2.0)
        self.sens_vector = 2.0 * self.y_bound
        self.sensitivity = math.hypot(self.sens_matrix, self.sens_vector)

    @classmethod
    def zheng_2020(cls, d: int, epsilon: float, delta: float, y_bound: float = 2.0, **kw) -> "LinearStatsChannel":
        """sigma = 6 sqrt(2 ln(2.5/delta))/eps (Zheng et al. 2020, Alg. 5 line 2)."""
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        ch = cls(d, 6 * math.sqrt(2 * math.log(2.5 / delta)) / epsilon, y_bound, **kw)
        ch.calibration = ("zheng-2020-alg5", epsilon, delta)
        return ch

    def check_data(self, z, label="user data"):
        z = np.asarray(z, dtype=float)
        if z.ndim != 2 or z.shape[1] != self.d + 1:
            raise DPAuditError(f"{label} for Alg. 5's channel must have shape (n, d + 1) = (n, {self.d + 1}), got {z.shape}.")
        if not np.isfinite(z.sum()) and not np.all(np.isfinite(z)):  # a finite sum: every entry is finite
            raise DPAuditError(f"{label} contains NaN or inf; a channel's input must be finite.")
        x = z[:, : self.d]
        if x.size and np.einsum("nd,nd->n", x, x).max() > (1 + 1e-9) ** 2:  # a squared norm above (1 + 1e-9)^2
            norms = np.sqrt(np.add.reduce(x * x, axis=1))
            raise DPAuditError(f"a context of norm {norms.max():.6g} lies outside the channel's domain (the unit ball); "
                               "it is refused, not clipped.")
        Channel.check_data(self, z[:, self.d], label)
        return z

    def contexts_in_ball(self, x: np.ndarray) -> bool:
        """Whether every row of ``x`` (k, d) lies in the unit ball with room to spare: squared norms at most
        (1 + 1e-9)^2 - d 1e-13, so that :meth:`check_data`'s test (squared norms at most (1 + 1e-9)^2) passes for
        these rows however their squares are summed (the rounding of a sum of d squares of numbers below 1.01
        is below d 1e-15). A policy whose contexts are rows of one small action set tests the set with this
        and hands the gathered rows to :meth:`send_xy` with ``x_in_ball=True``."""
        x = np.asarray(x, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.d:
            return False
        return bool(np.add.reduce(x * x, axis=1).max(initial=0.0) <= (1 + 1e-9) ** 2 - self.d * 1e-13)

    def _parts(self, x: np.ndarray, y: np.ndarray, label: str = "user data") -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of :meth:`send_xy` with ``x_in_ball=True``: the shapes and y's domain checked as :meth:`check_data`
        does; x's rows need no test (the caller established them by :meth:`contexts_in_ball`, which also implies
        they are finite)."""
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.ndim != 2 or x.shape[1] != self.d or y.shape != (x.shape[0],):
            raise DPAuditError(f"{label} for this channel must be contexts (n, {self.d}) and rewards (n,), got "
                               f"{x.shape} and {y.shape}.")
        Channel.check_data(self, y, label)  # finite and in the domain
        return x, y

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label=""):
        z = self.check_data(z)
        return self._release(z[:, : self.d], z[:, self.d], rng, ledger, step, runs, label)

    def send_xy(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None,
                step: int = -1, runs: np.ndarray | None = None, label: str = "", x_in_ball: bool = False) -> np.ndarray:
        """:meth:`send` of the rows ``[x, y]`` without building them: the same messages, draws and ledger entries.
        ``x_in_ball=True``: the caller vouches that every row of ``x`` passed :meth:`contexts_in_ball` (rows
        gathered from an action set it tested), so the unit-ball test per user is skipped; y is checked."""
        if not x_in_ball:
            return self.send(np.concatenate([x, np.asarray(y, dtype=float)[:, None]], axis=1), rng, ledger=ledger,
                             step=step, runs=runs, label=label)
        x, y = self._parts(x, y)
        return self._release(x, y, rng, ledger, step, runs, label)

    def _release(self, x, y, rng, ledger, step, runs, label):
        n, d = x.shape[0], self.d
        # the matrix noise's draws, then xi's, from one call: the same stream as one call each
        m = d * (d + 1) // 2 if self.symmetric else d * d
        draws = rng.standard_normal(n * (m + d))
        draws *= self.sigma
        # the message built as rows (entry, user), then written out (n, d * d + d): the same values elementwise
        rows = np.empty((d * d + d, n))
        xt = x.T
        _matrix_rows(rows[: d * d], xt, draws[: n * m].reshape(n, m))
        ut = rows[d * d:]
        np.multiply(xt, y, out=ut)
        ut += draws[n * m:].reshape(n, d).T
        out = np.empty((n, d * d + d))
        out[...] = rows.T
        u = out[:, d * d:]
        if ledger is not None and ledger.enabled:
            iu = triu(d)
            r = np.arange(n) if runs is None else np.asarray(runs)
            ledger.record(Release(label or "Alg. 5 matrix x x^T + B", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sens_matrix, r, x.take(iu[0], axis=1) * x.take(iu[1], axis=1),
                                  out.take(upper_flat(d), axis=1),
                                  user_fed(n, step, np.zeros((n, iu[0].size)))))
            ledger.record(Release(label or "Alg. 5 vector y x + xi", int(step), Noise("gaussian", np.full(n, self.sigma)),
                                  self.sens_vector, r, y[:, None] * x, u.copy(), user_fed(n, step, x.copy())))
        return out

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        return gaussian_epsilon(delta, mu=self.sensitivity / self.sigma).epsilon

    def describe(self) -> str:
        sym = "symmetric" if self.symmetric else "NON-symmetric"
        return f"Alg. 5 channel ({sym} matrix noise) sigma = {self.sigma:.4g}, d = {self.d}, |y| <= {self.y_bound:g}"


@deprecations.add_aliases  # its old constructor names, for one release
class GLOCChannel(Channel):
    """Zheng et al. (2020), Alg. 3 line 9 (GLOC-LDP, logistic link): user (x, y), ||x|| <= 1, y in [0, 1], given
    the public estimate theta_hat (||theta_hat|| <= 1), sends x x^T + B_t (symmetric), z x + xi_t with
    z = x^T theta_hat, and grad l_t(theta_hat) + r_t = (g(x^T theta_hat) - y) x + r_t, g the logistic function.

    Noise: B_t as :func:`~dpaudit.mechanisms.symmetric.symmetric_gaussian` with scale sigma, xi_t ~
    N(0, sigma^2 I), r_t ~ N(0, C^2 sigma^2 I) with C = 1 (|g - y| < 1 for the logistic link and y in [0, 1],
    so the loss is 1-Lipschitz on the unit ball). Sensitivities over the domain, recorded in the ledger:
    sqrt(2) for the matrix (Zheng et al. use 2), 2 for z x (|z| <= 1) and 2 for the gradient. Data rows
    ``[x_1..x_d, y]``; messages
    ``[vec(x x^T + B) (d*d), z x + xi (d), grad + r (d)]``. Three ledger entries per user.
    """

    kind = "gaussian"

    def __init__(self, d: int, sigma: float, lipschitz: float = 1.0) -> None:
        self.d = check_dim("d", d)
        self.sigma = check_positive("sigma", sigma)
        self.C = check_positive("lipschitz", lipschitz)
        self.domain = (0.0, 1.0)  # of y; x is checked against the unit ball
        self.sens = (math.sqrt(2.0), 2.0, 2.0)
        self.sensitivity = math.sqrt(2.0 + 4.0 + 4.0 / self.C**2)  # the joint multiplier is this / sigma

    @classmethod
    def zheng_2020(cls, d: int, epsilon: float, delta: float) -> "GLOCChannel":
        """sigma = 6 sqrt(2 ln(3.75/delta))/eps (Zheng et al. 2020, Alg. 3 line 2): each message (eps/3, delta/3)."""
        epsilon = check_positive("epsilon", epsilon)
        from dpaudit.errors import check_delta

        delta = check_delta(delta)
        ch = cls(d, 6 * math.sqrt(2 * math.log(3.75 / delta)) / epsilon)
        ch.calibration = ("zheng-2020-alg3", epsilon, delta)
        return ch

    check_data = LinearStatsChannel.check_data
    contexts_in_ball = LinearStatsChannel.contexts_in_ball
    _parts = LinearStatsChannel._parts

    def send(self, z, rng, *, ledger=None, step=-1, runs=None, label="", theta_hat=None):
        z = self.check_data(z)
        return self._release(z[:, : self.d], z[:, self.d], rng, ledger, step, runs, label, theta_hat, False)

    def send_xy(self, x: np.ndarray, y: np.ndarray, rng: np.random.Generator, *, ledger: Ledger | None = None,
                step: int = -1, runs: np.ndarray | None = None, label: str = "", theta_hat: np.ndarray | None = None,
                x_in_ball: bool = False, theta_in_ball: bool = False) -> np.ndarray:
        """:meth:`send` of the rows ``[x, y]`` without building them: the same messages, draws and ledger entries.
        ``x_in_ball=True``: the caller vouches that every row of ``x`` passed :meth:`contexts_in_ball`;
        ``theta_in_ball=True``: that ``theta_hat`` (n, d) is its own projection onto the unit ball W (Alg. 3's
        Pi_W, whose rounding is some 1e-15 while the test allows 1e-9); those tests are then skipped."""
        if not x_in_ball:
            return self.send(np.concatenate([x, np.asarray(y, dtype=float)[:, None]], axis=1), rng, ledger=ledger,
                             step=step, runs=runs, label=label, theta_hat=theta_hat)
        x, y = self._parts(x, y)
        return self._release(x, y, rng, ledger, step, runs, label, theta_hat, theta_in_ball)

    def _release(self, x, y, rng, ledger, step, runs, label, theta_hat, theta_in_ball):
        n, d = x.shape[0], self.d
        if isinstance(theta_hat, np.ndarray) and theta_hat.shape == (n, d) and theta_hat.dtype == np.float64:
            th = theta_hat  # the server's estimates, one per user (np.broadcast_to's checks cost more than the step)
        else:
            th = np.zeros((n, d)) if theta_hat is None else np.broadcast_to(np.asarray(theta_hat, dtype=float), (n, d))
            theta_in_ball = False
        th0 = th[:1] if n > 1 and th.strides[0] == 0 else th  # one estimate broadcast to every user: check it once
        if not theta_in_ball and np.einsum("nd,nd->n", th0, th0).max(initial=0.0) > (1 + 1e-9) ** 2:  # a squared norm above (1 + 1e-9)^2
            raise DPAuditError("the public estimate theta_hat must lie in the unit ball (the set W of Zheng et al. 2020, Alg. 3).")
        zt = np.einsum("nd,nd->n", x, th)
        # B's upper triangle, xi and r drawn by one call (the same stream as one call each)
        m = d * (d + 1) // 2
        draws = rng.standard_normal(n * (m + 2 * d))
        # the message built as rows (entry, user), then written out (n, d * d + 2 d): the same values elementwise
        rows = np.empty((d * d + 2 * d, n))
        xt = x.T
        ut, gt = rows[d * d: d * d + d], rows[d * d + d:]
        # the gradient (g(z) - y) x, g(z) = 1 / (1 + e^-z): the same operations as the formula
        g = np.negative(zt)
        np.exp(g, out=g)
        g += 1.0
        np.divide(1.0, g, out=g)
        g -= y
        np.multiply(xt, g, out=gt)
        grad = gt.T.copy() if ledger is not None and ledger.enabled else None
        scaled = draws[: n * (m + d)]
        scaled *= self.sigma
        _matrix_rows(rows[: d * d], xt, scaled[: n * m].reshape(n, m))
        np.multiply(xt, zt, out=ut)
        ut += scaled[n * m:].reshape(n, d).T
        r_noise = draws[n * (m + d):]
        r_noise *= self.C * self.sigma
        gt += r_noise.reshape(n, d).T
        out = np.empty((n, d * d + 2 * d))
        out[...] = rows.T
        u, gr = out[:, d * d: d * d + d], out[:, d * d + d:]
        if grad is not None:
            iu = triu(d)
            r = np.arange(n) if runs is None else np.asarray(runs)
            sig = np.full(n, self.sigma)
            ledger.record(Release((label or "Alg. 3") + ": x x^T + B", int(step), Noise("gaussian", sig), self.sens[0],
                                  r, x.take(iu[0], axis=1) * x.take(iu[1], axis=1), out.take(upper_flat(d), axis=1),
                                  user_fed(n, step, np.zeros((n, iu[0].size)))))
            ledger.record(Release((label or "Alg. 3") + ": z x + xi", int(step), Noise("gaussian", sig), self.sens[1],
                                  r, zt[:, None] * x, u.copy(), user_fed(n, step, np.zeros((n, d)))))
            ledger.record(Release((label or "Alg. 3") + ": gradient + r", int(step), Noise("gaussian", self.C * sig),
                                  self.sens[2], r, grad, gr.copy(), user_fed(n, step, -x)))
        return out

    def epsilon(self, delta: float) -> float:
        from dpaudit.accountants.gaussian import gaussian_epsilon

        mu = math.sqrt(self.sens[0] ** 2 + self.sens[1] ** 2 + (self.sens[2] / self.C) ** 2) / self.sigma
        return gaussian_epsilon(delta, mu=mu).epsilon

    def describe(self) -> str:
        return f"Alg. 3 channel (logistic GLOC) sigma = {self.sigma:.4g}, d = {self.d}"
