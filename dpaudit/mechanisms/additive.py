"""The additive mechanisms' common part: ``centre + noise``, checked, and recorded in the ledger.

:class:`AdditiveMechanism` is the base of :class:`~dpaudit.mechanisms.gaussian.GaussianMechanism` and
:class:`~dpaudit.mechanisms.laplace.LaplaceMechanism`; a subclass sets ``kind`` and its guarantee.
"""

from __future__ import annotations

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.errors import DPAuditError, check_positive
from dpaudit.mechanisms.ledger import Fed, Ledger, Noise, NoiseKind, PreDrawn, Release

__all__ = ["AdditiveMechanism"]


class AdditiveMechanism:
    """``centre + noise`` of the subclass's ``kind`` at ``scale``, for a statistic of sensitivity ``sensitivity``:
    :meth:`release` checks the statistic, draws the noise (or takes :class:`~dpaudit.mechanisms.ledger.PreDrawn`
    draws), honours a replaying ledger and records the release."""

    kind: NoiseKind

    def __init__(self, sensitivity: float, scale: float | np.ndarray) -> None:
        self.sensitivity = check_positive("sensitivity", sensitivity)
        try:
            scale = np.asarray(scale, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"the noise scale must be a positive finite number or array, got {scale!r}.") from None
        if scale.size == 0 or np.any(~(scale > 0)) or np.any(~np.isfinite(scale)):
            raise DPAuditError(f"the noise scale must be positive and finite, got {scale!r}.")
        self.scale = scale

    def release(
        self,
        centre: np.ndarray,
        rng: np.random.Generator,
        *,
        ledger: Ledger | None = None,
        label: str = "",
        step: int = -1,
        runs: np.ndarray | None = None,
        fed: Fed | None = None,
        arm: np.ndarray | None = None,
    ) -> np.ndarray:
        """Return ``centre + noise`` (same shape) and record the release in ``ledger``."""
        # a copy: the ledger keeps the centre, and a caller that reuses its buffer (zeroes its sums after
        # the release) must not rewrite history (a view of its buffer would leave its ledger wrong)
        try:
            centre = np.array(centre, dtype=float)
        except (TypeError, ValueError):
            raise DPAuditError(f"the statistic released as {label or 'a release'} must be numbers, got "
                               f"{type(centre).__name__}.") from None
        if not np.isfinite(centre).all():
            raise DPAuditError(f"the statistic released as {label or 'a release'} contains NaN or inf.")
        try:
            if self.scale.ndim:  # a scalar scale fits every shape
                np.broadcast_shapes(self.scale.shape, centre.shape)
        except ValueError:
            raise DPAuditError(f"the noise scale of shape {self.scale.shape} does not fit the statistic of shape "
                               f"{centre.shape} released as {label or 'a release'}.") from None
        if not isinstance(rng, (np.random.Generator, PreDrawn)):
            raise DPAuditError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        noise = Noise(self.kind, self.scale)
        value = centre + noise.sample(rng, centre.shape)
        if ledger is not None and ledger.replaying is not None:
            value = ledger.replayed(label, step, runs, value)
        if ledger is not None and ledger.enabled:
            c2 = centre.reshape(centre.shape[0], -1) if centre.ndim else centre.reshape(1, 1)
            v2 = value.reshape(c2.shape)
            if runs is None:
                runs = np.arange(c2.shape[0])
            if self.scale.ndim == 0:  # np.broadcast_to's values, without its cost per call (a release per step)
                scale = np.full(c2.shape[0], self.scale)
            else:
                scale = np.array(np.broadcast_to(self.scale, (c2.shape[0],)) if self.scale.ndim == 1 else self.scale, dtype=float)
            ledger.record(
                Release(label, step, Noise(self.kind, scale), self.sensitivity,
                        np.asarray(runs), c2, v2, fed, None if arm is None else np.asarray(arm))
            )
        return value

    def guarantee(self) -> Guarantee:
        raise NotImplementedError
