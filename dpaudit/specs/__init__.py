"""Finite-policy specs shipped with dpaudit (format ``dpaudit.finite-policy/1``)."""
