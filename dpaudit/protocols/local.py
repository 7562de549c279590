"""Local DP (seed 000 "Local DP", seed 003 Def. 1): each user's data is private even from the server.

The server observes only the channel's message o_t = channel(z_t); the adversary sees the server's
whole transcript (every message and action); neighbours differ in one user's data, changed to any
value of its domain. A local-DP plug-in exposes its channel (``channel(z_batch, rng)``, ``domain``
or ``domain_pairs()``, optionally ``channel_table()``) and its transcript (``keep_transcript``,
``transcript()``); see the README, "Local DP".
"""

from __future__ import annotations

from .table import TableDP

__all__ = ["LocalDP"]


class LocalDP(TableDP):
    """Local DP: each user's data z_t is private; the server observes only the channel's message o_t.

    ============ ================================================ ===========================================
    private      policy observes at t                             view (what the adversary sees)
    ============ ================================================ ===========================================
    z_t per user the message o_t ~ channel(z_t) (never z_t itself) the server's whole transcript: o_1..o_T and
                                                                   every action
    ============ ================================================ ===========================================

    Neighbours: user t's data changed to any other value of its domain, everything else fixed. The
    input is the same T x K table of potential rewards as Table DP (user t's data is her row; she
    holds the reward of whichever arm the server plays), so :meth:`run` is Table DP's; the audit
    (:mod:`dpaudit.check_local`) reads the messages through the policy's channel and transcript.
    """

    name = "local"
    summary = ("input: each user's data (user t's row of a T x K reward table); view: the server's whole "
               "transcript (messages and actions); neighbours: one user's data changed to any value of its domain")


