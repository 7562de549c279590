"""dpaudit's version (one place; ``dpaudit.__version__`` and the reports read it)."""

__version__ = "0.1.0"
