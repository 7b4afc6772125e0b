"""Argument checks shared by the configuration classes (tier 1 errors: ValueError)."""

import math
import numbers
from typing import Any

import jax
import numpy as np


def as_number(value: Any) -> Any:
    """Converter for static numeric fields: numpy/JAX scalars become Python numbers
    (typed `Any`: the field's own annotation says what it holds once checked)."""
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
    """A one-line error unless `value` is an integer >= 1 (numpy integers too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
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
    caller, or not at all); NaN for what is not a number (a string or a bool too)."""
    if isinstance(value, str | bytes | bool):
        return np.asarray(np.nan)
    try:
        return np.asarray(value, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None
    except (TypeError, ValueError):
        return np.asarray(np.nan)


def check_finite(value, name: str, *, least: float | None = None, positive: bool = False) -> None:
    """A one-line error unless every concrete entry of `value` is finite (and >= `least`,
    and > 0 if `positive`); traced values pass."""
    v = concrete(value)
    if v is None:
        return
    bad = not np.all(np.isfinite(v)) or (least is not None and np.any(v < least))
    if bad or (positive and np.any(v <= 0)):
        bound = " > 0" if positive else f" >= {least:g}" if least is not None else ""
        raise ValueError(f"{name} must be finite{bound}, got {value!r}")
