"""dpaudit.attacks: what a policy leaks, as lower bounds at a stated confidence."""

from .result import AuditResult

__all__ = ["AuditResult"]
