"""Running a computation op by op, in reasonable time: the self-check's route.

Under `jax.disable_jit()` every primitive is compiled and run on its own, so no fusion,
tiling or layout decision of the compiler spans two operations: the independent route
against which a study checks its compiled results (`meanfield.harness.runner`). But JAX
runs `lax.scan` op by op by slicing its inputs with a static index, compiling a new
slice for every step: a depth loop of L layers compiles L programs (0.1 s a layer here,
minutes for one study point). `op_by_op()` runs `lax.scan` and `lax.map` as Python
loops that index with `lax.dynamic_index_in_dim` (one compiled slice for every step) while
it is in force; the values are those of the primitives run one by one either way.

And each primitive compiled on its own costs about 50 ms of XLA's time (a study's point
runs 400 to 1,200 distinct ones): `op_by_op(numpy=True)`, the default, evaluates the
primitives NumPy implements with NumPy (`meanfield._numpy_ops`), with no compiler at all,
and compiles only the rest one by one.
"""

import contextlib
import threading
from collections import Counter
from collections.abc import Iterable, Iterator

import jax
import jax.numpy as jnp
from jax import lax

from ._numpy_ops import evaluate_jaxpr, numpy_primitives

_real_scan = lax.scan
_real_map = lax.map
_lock = threading.Lock()
_depth = 0


def _disabled() -> bool:
    return bool(getattr(jax.config, "jax_disable_jit"))  # noqa: B009 (pyright: Config)


def _index(tree, i):
    index = jnp.asarray(i)
    return jax.tree.map(lambda a: lax.dynamic_index_in_dim(a, index, keepdims=False), tree)


def _stack(outputs):
    if not outputs:
        return None
    return jax.tree.map(lambda *a: jnp.stack(a), *outputs)


def _scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kwargs):
    """`lax.scan` as a Python loop with dynamic indexing, where jit is disabled."""
    if not _disabled():
        return _real_scan(f, init, xs, length=length, reverse=reverse, unroll=unroll, **kwargs)
    leaves = jax.tree.leaves(xs)
    n = length if length is not None else leaves[0].shape[0]
    carry, outputs = init, []
    for i in reversed(range(n)) if reverse else range(n):
        carry, y = f(carry, None if xs is None else _index(xs, i))
        outputs.append(y)
    if reverse:
        outputs.reverse()
    if n == 0:  # the shapes of no output: from the real scan, which runs nothing (it
        # refuses to run with jit disabled, not knowing its outputs' types)
        with jax.disable_jit(False):
            return _real_scan(f, init, xs, length=length, reverse=reverse)
    return carry, _stack(outputs)


def _map(f, xs, *, batch_size=None):
    """`lax.map` as a Python loop over batches (`batch_size` at a time, vmapped)."""
    if not _disabled():
        return _real_map(f, xs, batch_size=batch_size)
    n = jax.tree.leaves(xs)[0].shape[0]
    size = n if not batch_size else min(batch_size, n)
    chunks = []
    for start in range(0, n, size):
        width = min(size, n - start)
        part = jax.tree.map(lambda a, s=start, w=width: lax.dynamic_slice_in_dim(a, s, w), xs)
        chunks.append(jax.vmap(f)(part))
    return jax.tree.map(lambda *a: jnp.concatenate(a), *chunks)


@contextlib.contextmanager
def op_by_op(numpy: bool = True) -> Iterator[Counter | None]:
    """Everything inside runs op by op (`jax.disable_jit()`), its scans and maps as Python
    loops with one compiled slice each; with `numpy` (the default) every primitive NumPy
    implements evaluated by NumPy (`meanfield._numpy_ops`), the others compiled one by one.
    Yields the primitive calls by route (`{("numpy" | "jax", name): calls}`, filled when
    the block ends; None without `numpy`). Re-entrant; other threads, which do not
    disable jit, keep the compiled loops."""
    global _depth
    with _lock:
        if _depth == 0:
            lax.scan, lax.map = _scan, _map
        _depth += 1
    try:
        with jax.disable_jit(), numpy_primitives() if numpy else _no_counts() as calls:
            yield calls
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                lax.scan, lax.map = _real_scan, _real_map


@contextlib.contextmanager
def _no_counts() -> Iterator[None]:
    yield None


def traced_op_by_op(fn, *args, compiled: Iterable[str] = ()):
    """`fn(*args)` as JAX traces it to compile it (its jaxpr, traced with jit on), then
    evaluated equation by equation, inside `op_by_op`: the compiled program's own
    operations, each by NumPy where it can be (`meanfield._numpy_ops.evaluate_jaxpr`, its
    calls, branches and loops included), without running `fn`'s Python again — whose per-operation
    overhead, in a library's solver loop (diffrax's), is 10 to 50 times the operation's.
    `compiled`: primitives XLA computes one by one even where NumPy could
    (`evaluate_jaxpr`)."""
    if not _disabled():
        raise RuntimeError("traced_op_by_op runs inside op_by_op()")
    with jax.disable_jit(False):
        if hasattr(fn, "trace"):  # a jitted function: the very jaxpr it compiles
            traced = fn.trace(*args)
            closed, shape = traced.jaxpr, traced.out_info
        else:
            closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    out = evaluate_jaxpr(closed, *jax.tree.leaves(args), compiled=compiled)
    return jax.tree.unflatten(jax.tree.structure(shape), out)
