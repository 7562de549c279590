"""dpaudit: audit differentially private bandit algorithms.

Two questions a reviewer asks of a private bandit policy: what does it *claim* (the accountants,
:mod:`dpaudit.accountants`) and what does it *leak* (the attacks, :mod:`dpaudit.attacks`). See
DESIGN.md for the map.
"""

from dpaudit.accountants import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpaudit.errors import DPAuditError

__version__ = "0.1.0"

__all__ = ["__version__", "DPAuditError", "Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP"]
