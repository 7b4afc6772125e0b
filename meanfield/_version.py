"""The package's version (one place; `meanfield.__version__` re-exports it)."""

__version__ = "0.3.0"
