"""Argument checks shared by the configuration classes (tier 1 errors: ValueError)."""

import math
import numbers


def as_number(value):
    """Converter for static numeric fields: numpy/JAX scalars become Python numbers."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "shape") and getattr(value, "shape", None) == () and hasattr(value, "item"):
        try:
            return value.item()
        except Exception:  # a tracer: leave it for the check to reject
            return value
    return value


def check_positive_int(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_number(value, name: str, *, positive: bool = False, non_negative: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and positive:
        ok = value > 0
    if ok and non_negative:
        ok = value >= 0
    if not ok:
        kind = "positive " if positive else "non-negative " if non_negative else ""
        raise ValueError(f"{name} must be a finite {kind}number, got {value!r}")
