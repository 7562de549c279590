"""dpaudit.accountants: what a policy claims.

Guarantee types, their conversions and composition, built on Google's ``dp_accounting`` where it
has what is needed. This package depends on nothing else in dpaudit but its leaves (:mod:`dpaudit.errors`,
:mod:`dpaudit.deprecations`).
"""

from typing import TYPE_CHECKING

from dpaudit import deprecations
from dpaudit.errors import DPAuditError
from .guarantees import RDP, ZCDP, ApproxDP, Composed, Guarantee, MechanismDP, PureDP, as_guarantee, compose
from .conversions import Conversion, rdp_to_approx, zcdp_rho_for_epsilon, zcdp_to_approx
from .gaussian import gaussian_epsilon, gaussian_sigma, lint_classical_gaussian, lint_gaussian_channel
from .guarantees import compose_parallel, compose_sequential
from .noise import NoiseAccount
from .composition import per_round_account
from .shuffle import (clones_composed_epsilon, clones_delta, clones_epsilon, clones_epsilon_closed_form,
                      shuffle_guarantee, tree_max_nodes, tree_sigma, tree_zcdp)
from .upper import compose_epsilon, worst_group_epsilon
from .shuffle import CanaryProfile, shuffled_canary_profile

__all__ = [
    "DPAuditError", "Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP",
    "Conversion", "zcdp_to_approx", "rdp_to_approx", "zcdp_rho_for_epsilon",
    "gaussian_epsilon", "gaussian_sigma", "lint_classical_gaussian", "lint_gaussian_channel",
    "NoiseAccount", "compose_sequential", "compose_parallel", "per_round_account",
    "clones_delta", "clones_epsilon", "clones_epsilon_closed_form", "shuffle_guarantee",
    "tree_max_nodes", "tree_zcdp", "tree_sigma",
    "MechanismDP", "Composed", "compose", "as_guarantee",
    "compose_epsilon", "worst_group_epsilon", "clones_composed_epsilon",
]
__all__ += ["CanaryProfile", "shuffled_canary_profile"]


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error there too

    def __getattr__(name: str) -> object:
        """An old name of :mod:`dpaudit.deprecations` (with its warning)."""
        return deprecations.attribute(__name__, name, globals())
