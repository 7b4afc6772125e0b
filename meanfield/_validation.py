"""Argument checks shared by the configuration classes (tier 1 errors: ValueError)."""

import math
import numbers

import jax
import numpy as np


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


def concrete(value):
    """`value` as a numpy array, or None where it is traced (checked by the caller's
    caller, or not at all)."""
    try:
        return np.asarray(value, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None
    except (TypeError, ValueError):
        return np.asarray(np.nan)


def check_finite(value, name: str, *, least: float | None = None) -> None:
    """A one-line error unless every concrete entry of `value` is finite (and >= `least`)."""
    v = concrete(value)
    if v is None:
        return
    if not np.all(np.isfinite(v)) or (least is not None and np.any(v < least)):
        bound = f" >= {least:g}" if least is not None else ""
        raise ValueError(f"{name} must be finite{bound}, got {value!r}")
