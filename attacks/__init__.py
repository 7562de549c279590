"""dpaudit.attacks: what a policy leaks, as lower bounds at a stated confidence."""

from .result import AuditResult
from .bounds import eps_lower_from_counts, eps_lower_from_rates
from .membership import Pair, membership_attack
from .likelihood import likelihood_attack
from .neighbours import PairSpec, candidate_pairs, leakage_vs_horizon, make_pair, search

__all__ = [
    "AuditResult",
    "Pair",
    "PairSpec",
    "candidate_pairs",
    "eps_lower_from_counts",
    "eps_lower_from_rates",
    "leakage_vs_horizon",
    "likelihood_attack",
    "make_pair",
    "membership_attack",
    "search",
]
