"""Argument checks shared by the configuration classes (tier 1 errors: ValueError)."""

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer


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


# the largest size or count a field may hold: an array index of 32 bits (no array of that
# many entries fits a machine's memory, and JAX indexes with int32 by default)
MAX_SIZE = 2**31 - 1


def check_positive_int(value, name: str) -> None:
    """A one-line error unless `value` is an integer >= 1 and at most `MAX_SIZE` (numpy
    integers too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if int(value) > MAX_SIZE:
        raise ValueError(f"{name} must be at most 2^31 - 1, got {value!r}")


def check_number(value, name: str, *, positive: bool = False, non_negative: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and positive:
        ok = value > 0
    if ok and non_negative:
        ok = value >= 0
    if not ok:
        kind = "positive " if positive else "non-negative " if non_negative else ""
        raise ValueError(f"{name} must be a finite {kind}number, got {value!r}")


def check_fields(module, *, ints=(), positive=(), non_negative=(), optional=()) -> None:
    """The checks of a module's static numbers, in this order: every field named in `ints`
    a positive integer (`check_positive_int`), in `positive` a finite number > 0, in
    `non_negative` a finite number >= 0 (`check_number`); a field named in `optional` may
    also be None (its default applies). One-line errors naming the field."""
    checks = (
        (ints, check_positive_int),
        (positive, lambda value, name: check_number(value, name, positive=True)),
        (non_negative, lambda value, name: check_number(value, name, non_negative=True)),
    )
    for names, check in checks:
        for name in names:
            value = getattr(module, name)
            if value is not None or name not in optional:
                check(value, name)


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


def _inexact(dtype) -> bool:
    """Floating or complex, bfloat16 and the other ml_dtypes included (numpy's kind 'V')."""
    return bool(jax.numpy.issubdtype(dtype, jax.numpy.inexact))


def _all_finite_on_device(leaf: jax.Array) -> bool:
    """Whether a concrete JAX array is finite, reduced where it lives (one boolean comes
    back), evaluated now even while a `jit` is being traced around it (a constant)."""
    with jax.ensure_compile_time_eval():
        return bool(jax.numpy.all(jax.numpy.isfinite(leaf)))


def _host_values(leaf) -> np.ndarray | None:
    """A concrete floating (or complex) array leaf as a numpy array, or None where there
    is nothing to check: a tracer (under `jit`, `vmap`, `grad`), an integer or boolean
    array, or no array at all (a `ShapeDtypeStruct`, a string, a function: other checks
    judge those). A JAX array off the CPU is reduced on its device first, so that only
    one boolean crosses to the host unless it holds a non-finite entry."""
    if isinstance(leaf, Tracer):
        return None
    if isinstance(leaf, jax.Array):
        if not _inexact(leaf.dtype):
            return None
        on_cpu = all(d.platform == "cpu" for d in leaf.devices())
        if not (on_cpu and leaf.is_fully_addressable):
            if _all_finite_on_device(leaf):
                return None
            if not leaf.is_fully_addressable:
                return np.asarray(np.nan)  # its entries live on other processes too
        return np.asarray(leaf)
    if isinstance(leaf, np.ndarray | np.generic | numbers.Number | list) and not isinstance(
        leaf, bool
    ):
        try:
            v = np.asarray(leaf)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            return None  # a list holding tracers
        except (TypeError, ValueError):
            return None  # a ragged list: not an array, judged elsewhere
        return v if _inexact(v.dtype) else None
    return None


def check_finite_array(value, name: str, *, colon: bool = False) -> None:
    """A one-line ValueError if a concrete `value` holds NaN or ±inf: an array (JAX or
    numpy), a nested list, a number, or a pytree of them (each leaf named by its path,
    `params.u`, `params['u']`). The message names `name`, how many entries are bad and
    the first: `xs must be finite: 1 of its 4 entries are NaN or inf (the first at index
    (0, 1): nan)`, or with `colon` (the style of the modules whose errors read
    `name: ...`) `xs: contains NaN or inf (...)`.

    Traced values (under `jit`, `vmap`, `grad`) pass unchecked: a check there would need
    a host round trip on every call of a compiled program. The cost on a concrete array
    is one `isfinite` reduction: call it once where the user's array enters."""
    if isinstance(value, jax.Array | np.ndarray | np.generic | numbers.Number | list):
        leaves = [("", value)]
    else:
        flat, _ = jax.tree_util.tree_flatten_with_path(value)
        leaves = [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]
    for path, leaf in leaves:
        v = _host_values(leaf)
        if v is None:
            continue
        bad = ~np.isfinite(v)
        if not bad.any():
            continue
        where = f"{name}{path}"
        if v.ndim == 0:
            must = ": must be finite" if colon else " must be finite"
            raise ValueError(f"{where}{must}, got {v.item()!r}")
        at = np.unravel_index(int(np.argmax(bad)), v.shape)
        index = str(int(at[0])) if len(at) == 1 else str(tuple(int(i) for i in at))
        count, first = f"{int(bad.sum())} of its {v.size} entries", f"{v[at].item()!r}"
        if colon:
            raise ValueError(
                f"{where}: contains NaN or inf ({count}; the first at index {index}: {first})"
            )
        raise ValueError(
            f"{where} must be finite: {count} are NaN or inf (the first at index {index}: {first})"
        )


def check_finite_arguments(*, colon: bool = False, **arrays) -> None:
    """`check_finite_array` on each keyword argument in turn, named by its keyword: the
    first concrete one holding NaN or inf raises (traced ones, under `jit`, `vmap`,
    `grad`, pass: no host round trip there). `colon=True` words the message
    `name: contains NaN or inf (...)`, else `name must be finite: ...`."""
    for name, value in arrays.items():
        check_finite_array(value, name, colon=colon)


def check_choice(value, choices, name: str) -> None:
    """`name=value: use one of a, b, c` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(choices)}")


def check_callable(value, name: str, form: str = "") -> None:
    """`name must be callable (form), got TYPE` unless `value` is callable; `form` says
    what it maps (as "(L, M) -> alpha"), where given."""
    if not callable(value):
        what = f" {form}" if form else ""
        raise ValueError(f"{name} must be callable{what}, got {type(value).__name__}")


def check_key(key, name: str = "key") -> None:
    """A one-line `ValueError` naming `name` unless `key` is a JAX random key: a typed key
    (`jax.random.key(0)`) or a raw one (`jax.random.PRNGKey(0)`, uint32 of last axis 2),
    traced or not. An integer is refused with the call that makes it a key: the library
    never turns a seed into a key silently (two calls with `key=0` would draw the same)."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None:
        if jnp.issubdtype(dtype, jax.dtypes.prng_key):
            return
        if dtype == np.uint32 and tuple(getattr(key, "shape", ()))[-1:] == (2,):
            return
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        raise ValueError(f"{name}: a JAX random key, got the integer {key!r}: pass "
                         f"jax.random.key({key!r})")  # fmt: skip
    shown = f"{type(key).__name__} of dtype {dtype}" if dtype is not None else type(key).__name__
    raise ValueError(f"{name}: a JAX random key (jax.random.key(0)), got {shown}")
