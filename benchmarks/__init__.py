"""Standalone benchmarks of meanfield (see benchmarks/README.md); not part of the package."""
