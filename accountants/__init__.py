"""dpaudit.accountants: what a policy claims.

Guarantee types, their conversions and composition, built on Google's ``dp_accounting`` where it
has what is needed. This package depends on nothing else in dpaudit.
"""

from .errors import DPAuditError
from .guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP

__all__ = ["DPAuditError", "Guarantee", "PureDP", "ApproxDP", "ZCDP", "RDP"]
