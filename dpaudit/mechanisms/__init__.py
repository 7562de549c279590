"""Mechanisms: the only way a policy touches private data, and the ledger that records it.

A mechanism takes a statistic (batched over runs), its sensitivity and its calibration, returns the
noisy release and appends a :class:`Release` to the run batch's :class:`Ledger`. A release records
which rounds fed it and, for each such round, how the centre moves when that round's reward
changes by one unit (``coef``). For the linear statistics of the built-in policies (sums, means,
sum of a_t r_t) this is exact, so the centre under a neighbouring input with the same history is
``centre + coef * (r' - r)`` and the gray-box attacks can compute the exact privacy loss.
Ledgers are batched: one ``Release`` per mechanism call holds arrays over the runs that released,
never one Python object per run.

Which file holds what:

* ``ledger.py``: :class:`Noise`, :class:`PreDrawn`, :class:`Fed`, :class:`FedBlocks`, :class:`Release`,
  :func:`release_family`, :class:`ReplayMismatch`, :class:`Ledger`, :func:`user_fed` (what a release records);
* ``additive.py``: the additive mechanisms' base (``centre + noise``, recorded);
* ``gaussian.py``: :class:`GaussianMechanism`, :func:`gaussian_renyi`;
* ``laplace.py``: :class:`LaplaceMechanism`, :func:`laplace_renyi`;
* ``symmetric.py``: :func:`symmetric_gaussian`, :func:`pack_symmetric`, :func:`unpack_symmetric` and their
  index tables;
* ``local.py``: the local channels :class:`Channel`, :class:`GaussianChannel`, :class:`LaplaceChannel`,
  :class:`RandomizedResponse`, :class:`LinearStatsChannel`, :class:`GLOCChannel`;
* ``tree.py``: :class:`BinaryTreeMechanism`, :func:`tree_node_counts`;
* ``shuffle.py``: :class:`Shuffler`, :class:`PiecewiseShuffler`.

Every name is importable from ``dpaudit.mechanisms`` itself.
"""

from __future__ import annotations

from dpaudit.mechanisms.gaussian import GaussianMechanism, gaussian_renyi
from dpaudit.mechanisms.laplace import LaplaceMechanism, laplace_renyi
from dpaudit.mechanisms.ledger import (Fed, FedBlocks, Ledger, Noise, PreDrawn, Release, ReplayMismatch,
                                       release_family, user_fed)
from dpaudit.mechanisms.local import (Channel, GaussianChannel, GLOCChannel, LaplaceChannel, LinearStatsChannel,
                                      RandomizedResponse)
from dpaudit.mechanisms.shuffle import PiecewiseShuffler, Shuffler
from dpaudit.mechanisms.symmetric import pack_symmetric, symmetric_gaussian, unpack_symmetric
from dpaudit.mechanisms.tree import BinaryTreeMechanism, tree_node_counts

__all__ = [
    # ledger.py
    "Noise",
    "PreDrawn",
    "Fed",
    "FedBlocks",
    "Release",
    "release_family",
    "ReplayMismatch",
    "Ledger",
    "user_fed",
    # gaussian.py, laplace.py
    "GaussianMechanism",
    "gaussian_renyi",
    "LaplaceMechanism",
    "laplace_renyi",
    # symmetric.py
    "symmetric_gaussian",
    "pack_symmetric",
    "unpack_symmetric",
    # local.py
    "Channel",
    "GaussianChannel",
    "LaplaceChannel",
    "RandomizedResponse",
    "LinearStatsChannel",
    "GLOCChannel",
    # tree.py
    "tree_node_counts",
    "BinaryTreeMechanism",
    # shuffle.py
    "Shuffler",
    "PiecewiseShuffler",
]
