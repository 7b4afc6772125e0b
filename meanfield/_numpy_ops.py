"""JAX's primitives evaluated by NumPy: the self-check's op-by-op route without a compiler.

Under `jax.disable_jit()` JAX runs every primitive as a program of its own, compiled by
XLA: no fusion or tiling spans two operations, but every distinct primitive, shape and
parameter set is a compilation of its own, about 50 ms each on a 2-core CPU — a study's
self-check compiled 400 to 1,200 of them, most of its time. `numpy_primitives()` evaluates
the common primitives with NumPy (and SciPy's special functions) instead, one operation at
a time, with no compiler at all: an independent implementation of each operation, not
only an independent schedule of XLA's, in microseconds. A primitive this table lacks, or
one on JAX's extended types (PRNG keys), runs as before: compiled on its own by XLA.

Results have the shape, dtype and weak type JAX's own abstract evaluation gives, so the
computation around them (dtype promotion included) is unchanged. Values agree with XLA's
to round-off (a transcendental function may differ by an ulp; sums are added in another
order); `tests/test_numpy_ops.py` compares every rule with JAX's own, compiled. In
float32, through many layers and a few optimiser steps, those ulps can grow past
float32's bound where XLA's own kernels one by one would agree exactly: a study then asks
XLA for those operations alone (`evaluate_jaxpr(..., compiled=("dot_general",))`: the
trained-weights study's matrix products) or for every one (`run_points(numpy=False)`).

`evaluate_jaxpr` evaluates a traced program (a closed jaxpr) the same way, its values
held as NumPy arrays between equations (`meanfield._eager.traced_op_by_op`): no `bind`,
no JAX array and no library Python per operation.

Why this file is long: it is one table, a rule for each of JAX's primitives (most of them
one line, XLA's gather and scatter semantics forty), and the hook that looks it up.
"""

import contextlib
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jax
import numpy as np
import scipy.special as sp
from jax._src import core, dtypes
from jax.sharding import SingleDeviceSharding
from jaxlib import xla_client

__all__ = ["NUMPY_RULES", "counts", "evaluate_jaxpr", "numpy_primitives"]


def _unary(f: Callable) -> Callable:
    return lambda x, **_: f(x)


def _binary(f: Callable) -> Callable:
    return lambda x, y, **_: f(x, y)


def _div(x, y, **_):
    """`lax.div`: integers round toward zero (C), not toward -inf (Python)."""
    if np.issubdtype(x.dtype, np.integer):
        q = np.abs(x) // np.where(y == 0, 1, np.abs(y))
        return np.where(y == 0, -1, np.where((x < 0) != (y < 0), -q, q)).astype(x.dtype)
    return np.true_divide(x, y)


def _shift(kind: str) -> Callable:
    def shift(x, s, **_):
        bits = x.dtype.itemsize * 8
        big = (s < 0) | (s >= bits)
        s = np.where(big, 0, s).astype(x.dtype)
        if kind == "left":
            return np.where(big, 0, np.left_shift(x, s)).astype(x.dtype)
        if kind == "logical":
            unsigned = x.view(np.dtype(f"uint{bits}"))
            out = np.right_shift(unsigned, s.view(unsigned.dtype)).view(x.dtype)
            return np.where(big, 0, out).astype(x.dtype)
        return np.where(big, np.where(x < 0, -1, 0), np.right_shift(x, s)).astype(x.dtype)

    return shift


def _round(x, rounding_method=0, **_):
    if int(rounding_method) == 1:  # to nearest even
        return np.round(x)
    whole = np.trunc(x)  # away from zero: ties away, the rest to nearest (exactly)
    return np.where(np.abs(x - whole) == 0.5, whole + np.sign(x), np.round(x)).astype(x.dtype)


def _convert(x, new_dtype=None, **_):
    new = np.dtype(new_dtype)
    if np.issubdtype(x.dtype, np.floating) and not np.issubdtype(new, np.floating):
        if new == np.bool_:
            return x != 0
        raise _Unsupported  # float to integer: XLA's saturation and NaN rules, compiled
    return x.astype(new)


def _broadcast_in_dim(x, shape=(), broadcast_dimensions=(), **_):
    expanded = [1] * len(shape)
    for axis, dim in zip(broadcast_dimensions, x.shape, strict=True):
        expanded[axis] = dim
    return np.broadcast_to(x.reshape(expanded), tuple(shape))


def _reshape(x, new_sizes=(), dimensions=None, **_):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return x.reshape(tuple(new_sizes))


def _slice(x, start_indices=(), limit_indices=(), strides=None, **_):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides,
                                                      strict=True))]  # fmt: skip


def _clamped_starts(shape, sizes, starts) -> list[int]:
    """XLA's dynamic slices clamp their starts so that the slice fits."""
    return [int(min(max(int(s), 0), d - n)) for s, d, n in zip(starts, shape, sizes, strict=True)]


def _dynamic_slice(x, *starts, slice_sizes=(), **_):
    at = _clamped_starts(x.shape, slice_sizes, starts)
    return x[tuple(slice(a, a + n) for a, n in zip(at, slice_sizes, strict=True))]


def _dynamic_update_slice(x, update, *starts, **_):
    at = _clamped_starts(x.shape, update.shape, starts)
    out = np.array(x, copy=True)
    out[tuple(slice(a, a + n) for a, n in zip(at, update.shape, strict=True))] = update
    return out


def _pad(x, value, padding_config=(), **_):
    """`lax.pad`: low, high and interior padding, each low/high possibly negative."""
    for axis, (_, _, interior) in enumerate(padding_config):
        if interior and x.shape[axis] > 1:
            n = x.shape[axis]
            shape = list(x.shape)
            shape[axis] = n + (n - 1) * interior
            spread = np.full(shape, value, dtype=x.dtype)
            index = [slice(None)] * x.ndim
            index[axis] = slice(None, None, interior + 1)
            spread[tuple(index)] = x
            x = spread
    for axis, (low, high, _) in enumerate(padding_config):
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(low, 0), max(high, 0))
        x = np.pad(x, widths, constant_values=value)
        index = [slice(None)] * x.ndim
        index[axis] = slice(max(-low, 0), x.shape[axis] - max(-high, 0))
        x = x[tuple(index)]
    return x


def _iota(dtype=None, shape=(), dimension=0, **_):
    line = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(expanded), tuple(shape))


def _select_n(which, *cases, **_):
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    return np.choose(which.astype(np.int64), cases)


def _reduce(f: Callable) -> Callable:
    return lambda x, axes=(), **_: f(x, axis=tuple(axes))


def _arg(f: Callable) -> Callable:
    def arg(x, axes=(), index_dtype=None, **_):
        (axis,) = axes
        if np.issubdtype(x.dtype, np.floating) and np.isnan(x).any():
            raise _Unsupported  # XLA's NaN rule, compiled
        return f(x, axis=axis).astype(index_dtype)

    return arg


def _cumulative(f: Callable) -> Callable:
    def cumulative(x, axis=0, reverse=False, **_):
        if reverse:
            return np.flip(f(np.flip(x, axis), axis=axis), axis)
        return f(x, axis=axis)

    return cumulative


def _logcumsumexp(x, axis=0):
    return np.logaddexp.accumulate(x, axis=axis)


def _dot_general(lhs, rhs, dimension_numbers: Any = None, preferred_element_type=None, **_):
    """`lax.dot_general`: batch dimensions first, then the free ones of lhs, then rhs's."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [a for a in range(lhs.ndim) if a not in lc and a not in lb]
    rf = [a for a in range(rhs.ndim) if a not in rc and a not in rb]
    dtype = np.dtype(preferred_element_type) if preferred_element_type else np.result_type(lhs, rhs)
    lhs, rhs = lhs.astype(dtype, copy=False), rhs.astype(dtype, copy=False)
    batch = [lhs.shape[a] for a in lb]
    size = lambda axes, x: int(np.prod([x.shape[a] for a in axes], dtype=np.int64))  # noqa: E731
    a = np.transpose(lhs, [*lb, *lf, *lc]).reshape((*batch, size(lf, lhs), size(lc, lhs)))
    b = np.transpose(rhs, [*rb, *rc, *rf]).reshape((*batch, size(rc, rhs), size(rf, rhs)))
    out = np.matmul(a, b)
    return out.reshape((*batch, *[lhs.shape[i] for i in lf], *[rhs.shape[i] for i in rf]))


def _rotate_left(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _threefry2x32(k1, k2, x1, x2, **_):
    """The Threefry-2x32 hash (20 rounds), JAX's counter-based random bits."""
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x = [x1 + ks[0], x2 + ks[1]]
    for i in range(5):
        for r in rotations[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = _rotate_left(x[1], r) ^ x[0]
        x[0] = x[0] + ks[(i + 1) % 3]
        x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x


def _sort(*operands, dimension=0, is_stable=True, num_keys=1, **_):
    if num_keys != 1 or any(np.issubdtype(o.dtype, np.complexfloating) for o in operands):
        raise _Unsupported
    order = np.argsort(operands[0], axis=dimension, kind="stable")
    return [np.take_along_axis(o, order, axis=dimension) for o in operands]


def _window_starts(operand_shape, indices, index_map, operand_batching, indices_batching):
    """Every window's start in the operand (`indices`' batch shape + (operand rank,)):
    the index vector (`indices`' last axis) placed at `index_map`; an operand batching
    dimension starts at the window's position along its indices batching dimension."""
    batch = indices.shape[:-1]
    starts = np.zeros((*batch, len(operand_shape)), dtype=np.int64)
    for k, axis in enumerate(index_map):
        starts[..., axis] = indices[..., k]
    for axis, along in zip(operand_batching, indices_batching, strict=True):
        shape = [1] * len(batch)
        shape[along] = batch[along]
        starts[..., axis] = np.arange(batch[along]).reshape(shape)
    return starts


def _window_grids(starts, sizes) -> tuple:
    """Advanced indices of every window's elements: (batch..., *sizes) per operand axis."""
    nb, rank = starts.ndim - 1, len(sizes)
    grids = []
    for axis in range(rank):
        at = starts[..., axis].reshape(starts.shape[:-1] + (1,) * rank)
        step = [1] * rank
        step[axis] = sizes[axis]
        grids.append(at + np.arange(sizes[axis]).reshape((1,) * nb + tuple(step)))
    return tuple(grids)


def _out_of_bounds(starts, operand_shape, sizes):
    return np.any((starts < 0) | (starts > np.asarray(operand_shape) - np.asarray(sizes)), -1)


def _mode(mode) -> str:
    from jax.lax import GatherScatterMode

    mode = GatherScatterMode.from_any(mode)
    return {GatherScatterMode.CLIP: "clip", GatherScatterMode.FILL_OR_DROP: "fill",
            GatherScatterMode.PROMISE_IN_BOUNDS: "promise"}.get(mode, "other")  # fmt: skip


def _gather(operand, indices, dimension_numbers: Any = None, slice_sizes=(), mode=None,
            fill_value=None, **_):  # fmt: skip
    """`lax.gather`: a window of `slice_sizes` at each index vector, starts clamped into
    the operand (`clip`, `promise_in_bounds`) or out-of-bounds windows filled (`fill`)."""
    dn, how = dimension_numbers, _mode(mode)
    if how == "other" or indices.ndim == 0:
        raise _Unsupported
    starts = _window_starts(operand.shape, indices, dn.start_index_map,
                            dn.operand_batching_dims, dn.start_indices_batching_dims)  # fmt: skip
    limit = np.asarray(operand.shape) - np.asarray(slice_sizes)
    out = operand[_window_grids(np.clip(starts, 0, limit), slice_sizes)]
    batch = indices.shape[:-1]
    if how == "fill":
        if fill_value is None:
            fill_value = _default_fill(operand.dtype)
        bad = _out_of_bounds(starts, operand.shape, slice_sizes)
        out = np.where(bad.reshape(batch + (1,) * operand.ndim), fill_value, out)
    gone = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    out = out.reshape(batch + tuple(n for a, n in enumerate(slice_sizes) if a not in gone))
    rank = len(batch) + len(dn.offset_dims)
    order = [0] * rank
    for j, at in enumerate([a for a in range(rank) if a not in dn.offset_dims]):
        order[at] = j
    for j, at in enumerate(dn.offset_dims):
        order[at] = len(batch) + j
    return np.transpose(out, order)


def _default_fill(dtype):
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.signedinteger) else np.iinfo(dtype).max


def _scatter(combine) -> Callable:
    def scatter(operand, indices, updates, dimension_numbers: Any = None, mode=None, **_):
        """`lax.scatter` (and -add, -mul, -min, -max): every update window written into the
        operand at its start (clamped under `clip`; a window out of bounds dropped
        otherwise, as XLA does)."""
        dn, how = dimension_numbers, _mode(mode)
        if how == "other" or indices.ndim == 0:
            raise _Unsupported
        starts = _window_starts(
            operand.shape, indices, dn.scatter_dims_to_operand_dims, dn.operand_batching_dims,
            dn.scatter_indices_batching_dims,
        )  # fmt: skip
        inserted = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        scatter_dims = [a for a in range(updates.ndim) if a not in dn.update_window_dims]
        windows = np.transpose(updates, [*scatter_dims, *dn.update_window_dims])
        batch = windows.shape[: len(scatter_dims)]
        window = iter(windows.shape[len(scatter_dims) :])
        sizes = tuple(1 if a in inserted else next(window) for a in range(operand.ndim))
        windows = windows.reshape(batch + sizes)
        if how == "clip":
            starts = np.clip(starts, 0, np.asarray(operand.shape) - np.asarray(sizes))
        keep = ~_out_of_bounds(starts, operand.shape, sizes)
        grids = tuple(g[keep] for g in _window_grids(starts, sizes))
        out = np.array(operand, copy=True)
        if combine is None:
            out[grids] = windows[keep]
        else:
            combine.at(out, grids, windows[keep])
        return out

    return scatter


def _while(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    """`lax.while_loop` bound as a primitive (under `vmap`, where JAX cannot run it as a
    Python loop: its predicate is batched) as a Python loop whose predicate and body run
    op by op, their primitives evaluated here like every other; a batched predicate's
    stopped elements keep their carry."""
    from jax import lax

    cond_consts, rest = args[:cond_nconsts], args[cond_nconsts:]
    body_consts, carry = rest[:body_nconsts], list(rest[body_nconsts:])
    while True:
        (go,) = core.eval_jaxpr(cond_jaxpr.jaxpr, cond_jaxpr.consts, *cond_consts, *carry)
        if not np.any(np.asarray(go)):
            return carry
        new = core.eval_jaxpr(body_jaxpr.jaxpr, body_jaxpr.consts, *body_consts, *carry)
        if not go.shape:
            carry = new
            continue
        # a batched predicate (XLA's lowering does the same): the loop runs while any
        # element goes on, and an element that has stopped keeps its carry
        carry = [
            lax.select(lax.broadcast_in_dim(go, c.shape, tuple(range(go.ndim))), n, c)
            for n, c in zip(new, carry, strict=True)
        ]


def _closed(closed, *args) -> list:
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _scan_loop(*args, jaxpr, num_consts, num_carry, length, reverse=False, **_):
    """`lax.scan` bound as a primitive (a traced program's): its body evaluated at every
    step, the outputs stacked."""
    from jax import lax

    consts, carry = args[:num_consts], list(args[num_consts : num_consts + num_carry])
    xs = args[num_consts + num_carry :]
    ys = []
    for i in reversed(range(length)) if reverse else range(length):
        out = _closed(jaxpr, *consts, *carry, *[lax.index_in_dim(x, i, keepdims=False) for x in xs])
        carry, y = out[:num_carry], out[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    outs = jaxpr.out_avals[num_carry:]
    if not ys:
        return carry + [_as_jax(np.zeros((0, *a.shape), a.dtype), a.update(shape=(0, *a.shape)))
                        for a in outs]  # fmt: skip
    return carry + [lax.concatenate([lax.expand_dims(y, (0,)) for y in col], 0)
                    for col in zip(*ys, strict=True)]  # fmt: skip


# primitives holding jaxprs (a traced program's calls, branches and loops): evaluated
# equation by equation, every primitive inside them by the rules above
HIGHER_ORDER: dict[str, Callable] = {
    "jit": lambda *args, jaxpr, **_: _closed(jaxpr, *args),
    "pjit": lambda *args, jaxpr, **_: _closed(jaxpr, *args),
    "closed_call": lambda *args, call_jaxpr, **_: _closed(call_jaxpr, *args),
    "custom_jvp_call": lambda *args, call_jaxpr, **_: _closed(call_jaxpr, *args),
    "custom_vjp_call": lambda *args, call_jaxpr, **_: _closed(call_jaxpr, *args),
    "remat2": lambda *args, jaxpr, **_: core.eval_jaxpr(jaxpr, (), *args),
    "checkpoint": lambda *args, jaxpr, **_: core.eval_jaxpr(jaxpr, (), *args),
    "cond": lambda index, *args, branches, **_: _closed(branches[int(np.asarray(index))], *args),
    "scan": _scan_loop,
    "while": lambda *args, **params: _while(*args, **params),
}


def _iota_2x32_shape(shape=(), **_):
    """`jax.random`'s counters: a uint64 iota of `shape` as its high and low 32 bits."""
    count = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint64).reshape(shape)
    return [(count >> np.uint64(32)).astype(np.uint32), count.astype(np.uint32)]


def _bitcast(x, new_dtype=None, **_):
    new = np.dtype(new_dtype)
    if new.itemsize != x.dtype.itemsize:
        raise _Unsupported
    return x.view(new)


def _split(x, sizes=(), axis=0, **_):
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _reduce_precision(x, exponent_bits=0, mantissa_bits=0, **_):
    info = np.finfo(x.dtype)
    if (exponent_bits, mantissa_bits) != (info.nexp, info.nmant):
        raise _Unsupported
    return x


def _integer_pow(x, y=1, **_):
    if y >= 0:
        return np.power(x, y) if np.issubdtype(x.dtype, np.integer) else x ** float(y)
    return np.asarray(1, x.dtype) / x ** float(-y)


class _Unsupported(Exception):
    """This call of a primitive is left to XLA (compiled on its own)."""


NUMPY_RULES: dict[str, Callable] = {
    **{
        name: _unary(f)
        for name, f in {
            "neg": np.negative,
            "sin": np.sin,
            "cos": np.cos,
            "tan": np.tan,
            "tanh": np.tanh,
            "asin": np.arcsin,
            "acos": np.arccos,
            "atan": np.arctan,
            "sinh": np.sinh,
            "cosh": np.cosh,
            "asinh": np.arcsinh,
            "acosh": np.arccosh,
            "atanh": np.arctanh,
            "exp": np.exp,
            "exp2": np.exp2,
            "log": np.log,
            "log1p": np.log1p,
            "expm1": np.expm1,
            "sqrt": np.sqrt,
            "rsqrt": lambda x: 1 / np.sqrt(x),
            "cbrt": np.cbrt,
            "abs": np.abs,
            "sign": np.sign,
            "floor": np.floor,
            "ceil": np.ceil,
            "is_finite": np.isfinite,
            "not": np.invert,
            "logistic": sp.expit,
            "erf": sp.erf,
            "erfc": sp.erfc,
            "erf_inv": sp.erfinv,
            "lgamma": sp.gammaln,
            "digamma": sp.digamma,
            "square": np.square,
            "copy": np.copy,
            "copy_p": np.copy,
            "real": np.real,
            "imag": np.imag,
            "conj": np.conj,
        }.items()
    },  # fmt: skip
    **{
        name: _binary(f)
        for name, f in {
            "add": np.add,
            "add_any": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "max": np.maximum,
            "min": np.minimum,
            "pow": np.power,
            "atan2": np.arctan2,
            "rem": np.fmod,
            "nextafter": np.nextafter,
            "and": np.bitwise_and,
            "or": np.bitwise_or,
            "xor": np.bitwise_xor,
            "eq": np.equal,
            "ne": np.not_equal,
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
        }.items()
    },  # fmt: skip
    "div": _div,
    "shift_left": _shift("left"),
    "shift_right_logical": _shift("logical"),
    "shift_right_arithmetic": _shift("arithmetic"),
    "round": _round,
    "clamp": lambda lo, x, hi, **_: np.minimum(np.maximum(x, lo), hi),
    "select_n": _select_n,
    "convert_element_type": _convert,
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape,
    "squeeze": lambda x, dimensions=(), **_: np.squeeze(x, axis=tuple(dimensions)),
    "transpose": lambda x, permutation=(), **_: np.transpose(x, permutation),
    "rev": lambda x, dimensions=(), **_: np.flip(x, tuple(dimensions)),
    "slice": _slice,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "concatenate": lambda *xs, dimension=0, **_: np.concatenate(xs, axis=dimension),
    "pad": _pad,
    "iota": _iota,
    "reduce_sum": _reduce(np.sum),
    "reduce_prod": _reduce(np.prod),
    "reduce_max": _reduce(np.max),
    "reduce_min": _reduce(np.min),
    "reduce_and": _reduce(np.all),
    "reduce_or": _reduce(np.any),
    "argmax": _arg(np.argmax),
    "argmin": _arg(np.argmin),
    "cumsum": _cumulative(np.cumsum),
    "cumprod": _cumulative(np.cumprod),
    "cummax": _cumulative(np.maximum.accumulate),
    "cummin": _cumulative(np.minimum.accumulate),
    "cumlogsumexp": _cumulative(_logcumsumexp),
    "dot_general": _dot_general,
    "threefry2x32": _threefry2x32,
    "sort": _sort,
    "split": _split,
    "gather": _gather,
    "scatter": _scatter(None),
    "scatter-add": _scatter(np.add),
    "scatter_add": _scatter(np.add),
    "scatter-mul": _scatter(np.multiply),
    "scatter_mul": _scatter(np.multiply),
    "scatter-min": _scatter(np.minimum),
    "scatter_min": _scatter(np.minimum),
    "scatter-max": _scatter(np.maximum),
    "scatter_max": _scatter(np.maximum),
    "stack": lambda *xs, axis=0, **_: np.stack(xs, axis=axis),
    "unstack": lambda x, axis=0, **_: list(np.moveaxis(x, axis, 0)),
    "iota_2x32_shape": _iota_2x32_shape,
    "bitcast_convert_type": _bitcast,
    "reduce_precision": _reduce_precision,
    "integer_pow": _integer_pow,
    # equinox's primitives, as their implementations run them outside `vmap`
    "select_if_vmap": lambda pred, x, y, **_: x,
    "nonbatchable": lambda x, **_: x,
    "stop_gradient": lambda x, **_: x,
    "unvmap_any": lambda x, **_: np.any(x),
    "unvmap_all": lambda x, **_: np.all(x),
    "unvmap_max": lambda x, **_: np.max(x),
}

_lock = threading.Lock()
_abstract_cache: dict = {}
_active = 0
_real_process_primitive = core.EvalTrace.process_primitive
# (route, primitive name) -> calls while numpy_primitives is on: "numpy", or "jax" (JAX's
# own implementation: a primitive compiled on its own, or one on PRNG keys, which compiles
# nothing itself)
_counts: Counter = Counter()
# the primitives `evaluate_jaxpr` leaves to XLA in this thread (its `compiled`)
_route = threading.local()


def _compiled_here() -> frozenset:
    """The primitives `evaluate_jaxpr` leaves to XLA in this thread, now."""
    return getattr(_route, "compiled", frozenset())


def _plain(aval) -> bool:
    return isinstance(aval, core.ShapedArray) and not dtypes.issubdtype(aval.dtype, dtypes.extended)


@functools.cache
def _placement(device) -> SingleDeviceSharding:
    return SingleDeviceSharding(device)


@functools.cache
def _default_device(configured):
    """Where `jax.device_put` places an array by default (`jax_default_device`, if it is a
    device, else the first local device)."""
    return configured if isinstance(configured, xla_client.Device) else jax.local_devices()[0]


def _as_jax(value: Any, aval: core.ShapedArray) -> jax.Array:
    """A JAX array holding `value`, of `aval`'s shape, dtype and weak type, on the default
    device, uncommitted (as `jax.device_put` places it; its Python layers take 20 times
    longer than the placement itself)."""
    value = np.asarray(value, dtype=aval.dtype, order="C")
    if value.shape != aval.shape:
        raise AssertionError(f"shape {value.shape}, JAX's {aval.shape}")
    configured = getattr(jax.config, "jax_default_device")  # noqa: B009 (pyright: Config)
    device = _default_device(configured)
    return xla_client.batched_device_put(
        aval, _placement(device), [value], [device], False,
        enable_x64=bool(jax.config.read("jax_enable_x64")),
    )  # fmt: skip


def _abstract_eval(primitive, avals: list, params: dict):
    """`primitive.abstract_eval`, kept per primitive, input types and parameters (the same
    few hundred calls repeat at every layer and step)."""
    try:
        key = (primitive, tuple(avals), tuple(sorted(params.items())))
        hash(key)
    except TypeError:  # a parameter that cannot be hashed: evaluated each time
        return primitive.abstract_eval(*avals, **params)[0]
    found = _abstract_cache.get(key)
    if found is None:
        found = _abstract_cache[key] = primitive.abstract_eval(*avals, **params)[0]
    return found


def _evaluate(trace, primitive, args, params):
    """`EvalTrace.process_primitive` by NumPy where it can (the module docstring), but
    for the primitives `evaluate_jaxpr` leaves to XLA (bound there, they arrive here)."""
    rule = None if primitive.name in _compiled_here() else NUMPY_RULES.get(primitive.name)
    if not _disabled() or primitive is core.stage_p:  # stage: a constant placed, no program
        return _real_process_primitive(trace, primitive, args, params)
    higher = HIGHER_ORDER.get(primitive.name)
    if higher is not None:  # its jaxprs evaluated here, equation by equation
        _counts[("numpy", primitive.name)] += 1
        return higher(*args, **params)
    avals = [core.typeof(a) for a in args]
    if rule is None or not all(_plain(a) for a in avals):
        _counts[("jax", primitive.name)] += 1
        return _real_process_primitive(trace, primitive, args, params)
    out_avals = _abstract_eval(primitive, avals, params)
    try:
        out = rule(*[np.asarray(a, dtype=v.dtype) for a, v in zip(args, avals, strict=True)],
                   **params)  # fmt: skip
    except _Unsupported:
        _counts[("jax", primitive.name)] += 1
        return _real_process_primitive(trace, primitive, args, params)
    _counts[("numpy", primitive.name)] += 1
    if primitive.multiple_results:
        return [_as_jax(o, v) for o, v in zip(out, out_avals, strict=True)]
    return _as_jax(out, out_avals)


def _disabled() -> bool:
    return bool(getattr(jax.config, "jax_disable_jit"))  # noqa: B009 (pyright: Config)


@contextlib.contextmanager
def numpy_primitives() -> Iterator[Counter]:
    """While in force, primitives run op by op (`jax.disable_jit()`, in this thread) are
    evaluated by NumPy where `NUMPY_RULES` has them. Yields the calls counted by route
    and primitive (`{("numpy" | "jax", name): calls}`), since it was entered."""
    global _active
    with _lock:
        if _active == 0:
            core.EvalTrace.process_primitive = _evaluate
        _active += 1
    before = Counter(_counts)
    seen: Counter = Counter()
    try:
        # XLA computes IEEE results without a word (an overflow is inf, 0/0 nan); NumPy's
        # warnings for the same values (an exploded draw, the branch a `where` drops)
        # would reach the user's terminal from the self-check alone
        with np.errstate(all="ignore"):
            yield seen
    finally:
        seen.update(_counts - before)
        with _lock:
            _active -= 1
            if _active == 0:
                core.EvalTrace.process_primitive = _real_process_primitive


def counts() -> Counter:
    """Every call counted so far by route and primitive (`numpy_primitives`)."""
    return Counter(_counts)


def evaluate_jaxpr(closed, *args, compiled: Iterable[str] = ()) -> list:
    """A closed jaxpr's outputs, equation by equation, its values held as NumPy arrays:
    each primitive by its rule (`NUMPY_RULES`; calls, branches and loops recursively)
    while `numpy_primitives` is on, the others (every one under `op_by_op(numpy=False)`)
    bound as JAX arrays (compiled one by one, under `jax.disable_jit()`); PRNG
    keys stay JAX arrays. No `bind` and no JAX array per operation: ten times cheaper per
    operation than `core.eval_jaxpr` through the hook. Outputs as JAX arrays, of the
    jaxpr's types.

    `compiled` names primitives compiled one by one by XLA even where NumPy has a rule
    (`"dot_general"`: a float32 product whose sum NumPy's BLAS orders otherwise, where a
    study's round-off would grow past its bound; still no fusion spanning two
    operations)."""
    if isinstance(compiled, str):
        raise ValueError(f"compiled: primitives' names, as a tuple, got the string {compiled!r}")
    compiled = frozenset(compiled)
    unknown = sorted(compiled - set(NUMPY_RULES))
    if unknown:
        raise ValueError(f"compiled: no NumPy rule to set aside for {', '.join(unknown)}")
    before, _route.compiled = getattr(_route, "compiled", frozenset()), compiled
    try:
        with np.errstate(all="ignore"):  # as XLA: IEEE results, no warnings (numpy_primitives)
            outs = _eval(closed.jaxpr, [_numpy_of(c) for c in closed.consts],
                         [_numpy_of(a) for a in args])  # fmt: skip
    finally:
        _route.compiled = before
    return [_to_jax(o, v.aval) for o, v in zip(outs, closed.jaxpr.outvars, strict=True)]


def _numpy_of(value):
    """A NumPy array for a plain JAX value; a PRNG key array as it is."""
    aval = core.typeof(value)
    return np.asarray(value, dtype=aval.dtype) if _plain(aval) else value


def _to_jax(value, aval):
    return _as_jax(np.asarray(value), aval) if isinstance(value, np.ndarray | np.generic) else value


def _eval(jaxpr, consts, args) -> list:
    env: dict = {}

    def read(v):
        if isinstance(v, core.Literal):
            aval: Any = v.aval
            return np.asarray(v.val, dtype=aval.dtype) if _plain(aval) else v.val
        return env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        outs = _apply(eqn, [read(v) for v in eqn.invars])
        for var, out in zip(eqn.outvars, outs, strict=True):
            if not isinstance(var, core.DropVar):
                env[var] = out
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn, values) -> list:
    """One equation's outputs (`_eval`)."""
    name, params = eqn.primitive.name, eqn.params
    higher = _NUMPY_HIGHER_ORDER.get(name)
    if higher is not None:
        _counts[("numpy", name)] += 1
        return higher(values, **params)
    # NumPy's rules while `numpy_primitives` is on (`op_by_op()`; `op_by_op(numpy=False)`:
    # every operation compiled one by one), but for those named to XLA (`compiled`)
    hooked = _active > 0
    rule = NUMPY_RULES.get(name) if hooked and name not in _compiled_here() else None
    if rule is not None and all(isinstance(v, np.ndarray | np.generic) for v in values):
        try:
            out = rule(*values, **params)
        except _Unsupported:
            pass
        else:
            _counts[("numpy", name)] += 1
            out = out if eqn.primitive.multiple_results else [out]
            return [np.asarray(o, dtype=v.aval.dtype) for o, v in zip(out, eqn.outvars,
                                                                       strict=True)]  # fmt: skip
    if any(isinstance(p, core.Jaxpr | core.ClosedJaxpr) for p in jax.tree.leaves(params)):
        raise RuntimeError(
            f"self-check: the traced route cannot evaluate {name} op by op (JAX would "
            "compile it whole, the check sharing the compiler it checks)"
        )
    if not hooked:  # (bound below, the hook `_evaluate` counts it)
        _counts[("jax", name)] += 1
    inputs = [_to_jax(x, v.aval) for x, v in zip(values, eqn.invars, strict=True)]
    with eqn.ctx.manager:
        out = eqn.primitive.bind(*inputs, **eqn.primitive.get_bind_params(params))
    out = out if eqn.primitive.multiple_results else [out]
    return [_numpy_of(o) for o in out]


def _eval_closed(closed, values) -> list:
    return _eval(closed.jaxpr, [_numpy_of(c) for c in closed.consts], values)


def _scan_values(values, *, jaxpr, num_consts, num_carry, length, reverse=False, **_):
    consts, carry = values[:num_consts], values[num_consts : num_consts + num_carry]
    xs = values[num_consts + num_carry :]
    ys = []
    for i in reversed(range(length)) if reverse else range(length):
        out = _eval_closed(jaxpr, [*consts, *carry, *[x[i] for x in xs]])
        carry, y = out[:num_carry], out[num_carry:]
        ys.append(y)
    if reverse:
        ys.reverse()
    outs = jaxpr.out_avals[num_carry:]
    stacked = [np.stack(col) for col in zip(*ys, strict=True)] if ys else [
        np.zeros((0, *a.shape), a.dtype) for a in outs]  # fmt: skip
    return [*carry, *stacked]


def _while_values(values, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    cond_consts, rest = values[:cond_nconsts], values[cond_nconsts:]
    body_consts, carry = rest[:body_nconsts], rest[body_nconsts:]
    while True:
        (go,) = _eval_closed(cond_jaxpr, [*cond_consts, *carry])
        if not np.any(go):
            return carry
        new = _eval_closed(body_jaxpr, [*body_consts, *carry])
        if np.ndim(go) == 0:
            carry = new
            continue
        carry = [  # a batched predicate: stopped elements keep their carry (`_while`)
            np.where(go.reshape(go.shape + (1,) * (np.ndim(c) - go.ndim)), n, c)
            for n, c in zip(new, carry, strict=True)
        ]


def _shard_map_values(values, *, jaxpr, mesh, in_specs, out_specs, **_):
    """`shard_map` (`runtime.shard_seeds`' seed axis over a mesh): its body on each
    device's block of the axis-0-split inputs, the split outputs joined along axis 0
    (replicated inputs passed whole, replicated outputs taken from the first block)."""
    n = mesh.size

    def split(spec) -> bool:
        return bool(spec) and spec[0] is not None

    blocks = [
        _eval(jaxpr, [], [np.split(v, n)[k] if split(spec) else v
                          for v, spec in zip(values, in_specs, strict=True)])
        for k in range(n)
    ]  # fmt: skip
    return [np.concatenate([b[i] for b in blocks]) if split(spec) else blocks[0][i]
            for i, spec in enumerate(out_specs)]  # fmt: skip


_NUMPY_HIGHER_ORDER: dict[str, Callable] = {
    "shard_map": _shard_map_values,
    "jit": lambda values, jaxpr, **_: _eval_closed(jaxpr, values),
    "pjit": lambda values, jaxpr, **_: _eval_closed(jaxpr, values),
    "closed_call": lambda values, call_jaxpr, **_: _eval_closed(call_jaxpr, values),
    "custom_jvp_call": lambda values, call_jaxpr, **_: _eval_closed(call_jaxpr, values),
    "custom_vjp_call": lambda values, call_jaxpr, **_: _eval_closed(call_jaxpr, values),
    "remat2": lambda values, jaxpr, **_: _eval(jaxpr, [], values),
    "checkpoint": lambda values, jaxpr, **_: _eval(jaxpr, [], values),
    "cond": lambda values, branches, **_: _eval_closed(branches[int(values[0])], values[1:]),
    "scan": _scan_values,
    "while": _while_values,
}
