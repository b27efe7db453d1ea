"""The version of skset (one place; the package root and skset.save read it)."""

__version__ = "0.1.0"
