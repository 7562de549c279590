"""Protocols: what the private input is, what the adversary sees, and what "neighbouring" means.

One module each, after Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits", Sec. III; the
interactive joint/local DP definitions; Sarmasarkar (2026), "Shuffle and Joint Differential Privacy for
Generalized Linear Contextual Bandits"; and Zheng, Cai, Huang, Li & Wang (2020), "Locally Differentially
Private (Contextual) Bandits Learning" (full references: :mod:`dpaudit.papers`):

=================== ==================================== ======================== ============================ =====================
protocol            private input                        policy observes at t     view                         neighbours differ in
=================== ==================================== ======================== ============================ =====================
``TableDP``         table d of rewards, T x K            d[t, a_t]                a_1..a_T                     one row
``ViewDP``          list r of rewards, length T          r[t]                     a_1..a_T                     one entry
``InteractiveDP``   table d and an adversary B           d[t, q_t], q_t = B(o..)  o_1..o_T                     one row
``LocalDP``         each user's data z_t                 the channel's message    the server's transcript      user t's data
``JointDP``         contexts and rewards (x_t, r_t)      (x_t, r_t)               a_{t+1}..a_T                 round t
``ShuffleDP``       one batch of users' data             the analyzer's output    the shuffled messages        one user's data
continuous (BCO)    each user's loss function f_t        f_t at the points played the transcript / the points  user t's loss
=================== ==================================== ======================== ============================ =====================

Each module also builds its neighbouring pairs (the space the search explores) and, where the view
needs reading, its features. :mod:`.pairs` reads the pairs a reviewer hands in (``--pair``).
"""

from dpaudit.errors import DPAuditError

from .base import Adversary, ContextInput, FixedActionSet, Pair, Protocol, check_table, offers_blocks, splits_copies
from .interactive import (ConstantAdversary, EchoAdversary, IdentityAdversary, InteractiveDP, PinAdversary,
                          TableAdversary)
from .joint import JointDP
from .local import LocalDP
from .shuffle import ShuffleDP
from .table import PairSpec, TableDP, audit_range, background_table, candidate_pairs, input_range, make_pair
from .view import ViewDP

__all__ = [
    "Adversary", "IdentityAdversary", "ConstantAdversary", "TableAdversary", "PinAdversary", "EchoAdversary",
    "Protocol", "Pair", "PairSpec", "TableDP", "ViewDP", "InteractiveDP", "LocalDP", "JointDP", "ShuffleDP",
    "ContextInput", "FixedActionSet", "PROTOCOLS", "get_protocol", "offers_blocks", "splits_copies", "check_table",
    "make_pair", "candidate_pairs", "background_table", "audit_range", "input_range",
]

PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (TableDP, ViewDP, InteractiveDP, LocalDP, JointDP, ShuffleDP)}


def get_protocol(name: str) -> Protocol:
    """A fresh protocol object by name (``table``, ``view``, ``interactive``, ``local``, ``joint``, ``shuffle``)."""
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise DPAuditError(f"unknown protocol {name!r}; choose one of: {', '.join(PROTOCOLS)}.") from None
