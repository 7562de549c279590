"""Symmetric matrices: symmetric Gaussian noise (:func:`symmetric_gaussian`), a stack of symmetric matrices
packed as upper triangles and back (:func:`pack_symmetric`, :func:`unpack_symmetric`), and the index tables
they share with the local channels (:func:`triu`, :func:`packed_index`, :func:`upper_flat`).
"""

from __future__ import annotations

import functools

import numpy as np

from dpaudit.errors import DPAuditError

__all__ = ["symmetric_gaussian", "pack_symmetric", "unpack_symmetric", "triu", "packed_index", "upper_flat",
           "check_dim"]


def symmetric_gaussian(rng: np.random.Generator, shape_prefix: tuple[int, ...], d: int, sigma: float | np.ndarray) -> np.ndarray:
    """Symmetric Gaussian matrices Z (shape ``shape_prefix + (d, d)``): Z_ij = Z_ji i.i.d. N(0, sigma^2) for i <= j.

    The interactive joint/local DP definitions ("Further, for any symmetric matrix V ... Z_ij = Z_ji ~
    N(0, 4 sigma_a^2 Delta^2) independently") and Zheng, Cai, Huang, Li & Wang (2020) "Locally Differentially
    Private (Contextual) Bandits Learning", Alg. 5 line 9 (B_t(i, j) i.i.d. for i <= j, B(j, i) = B(i, j)):
    the upper triangle (diagonal included) is drawn, row by row, and mirrored.
    """
    d = check_dim("d", d)
    prefix = tuple(int(s) for s in shape_prefix)
    full = packed_index(d)  # entry (i, j) of the matrix is packed coordinate (min(i, j), max(i, j))
    upper = rng.standard_normal(prefix + (d * (d + 1) // 2,)) * np.asarray(sigma, dtype=float)[..., None] \
        if np.ndim(sigma) else rng.standard_normal(prefix + (d * (d + 1) // 2,)) * float(sigma)
    return upper.take(full, axis=-1).reshape(prefix + (d, d))


@functools.lru_cache(maxsize=64)
def triu(d: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(d)``, computed once per d (read-only)."""
    iu = np.triu_indices(d)
    for a in iu:
        a.flags.writeable = False
    return iu


@functools.lru_cache(maxsize=64)
def packed_index(d: int) -> np.ndarray:
    """(d * d,) flat: the packed upper-triangle coordinate (``np.triu_indices`` order) of each entry (i, j)."""
    iu = triu(d)
    full = np.empty((d, d), dtype=np.intp)
    full[iu[0], iu[1]] = np.arange(iu[0].size)
    full[iu[1], iu[0]] = np.arange(iu[0].size)
    full = full.ravel()
    full.flags.writeable = False
    return full


def check_dim(name: str, value: object) -> int:
    """``value`` as an int >= 1 (a dimension), else DPAuditError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise DPAuditError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


@functools.lru_cache(maxsize=64)
def upper_flat(d: int) -> np.ndarray:
    """Flat indices (i d + j) of the upper triangle in ``np.triu_indices`` order (read-only)."""
    iu = triu(d)
    flat = iu[0] * d + iu[1]
    flat.flags.writeable = False
    return flat


def pack_symmetric(m: np.ndarray) -> np.ndarray:
    """The upper triangles (``np.triu_indices`` order) of stacked symmetric ``(..., d, d)`` matrices."""
    m = np.asarray(m)
    d = m.shape[-1]
    return m.reshape(m.shape[:-2] + (d * d,)).take(upper_flat(d), axis=-1)


def unpack_symmetric(u: np.ndarray, d: int) -> np.ndarray:
    """Inverse of :func:`pack_symmetric`: ``(..., d(d+1)/2)`` -> ``(..., d, d)``."""
    u = np.asarray(u)
    return u.take(packed_index(d), axis=-1).reshape(u.shape[:-1] + (d, d)).astype(float, copy=False)
