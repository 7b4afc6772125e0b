"""The self-check's NumPy route (`meanfield._numpy_ops`): every rule against JAX's own
primitive, compiled by XLA, on the shapes, dtypes and parameters the studies use; a whole
computation (random draws, a depth loop, its gradient, float32 and float64) equal to its
compiled result to round-off; the primitives NumPy lacks still run (compiled on their own),
and a rule that is wrong is caught by the comparison."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from meanfield import _numpy_ops
from meanfield._eager import op_by_op

RNG = np.random.default_rng(0)


def _f64(*shape):
    return jnp.asarray(RNG.normal(size=shape))


def _u32(*shape):
    return jnp.asarray(RNG.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32))


# (primitive name, a function of arrays binding it, its arguments); each is run compiled
# (jax.jit: XLA's code) and under op_by_op (NumPy's), and the two compared
CASES = [
    ("add", lax.add, (_f64(3, 4), _f64(3, 4))),
    ("sub", lax.sub, (_f64(5), _f64(5))),
    ("mul", lax.mul, (_f64(2, 3), _f64(2, 3))),
    ("div", lax.div, (_f64(4), _f64(4))),
    ("div", lax.div, (jnp.array([7, -7, 7, -7, 0]), jnp.array([2, 2, -2, -2, 3]))),
    ("rem", lax.rem, (jnp.array([7.5, -7.5, 3.0]), jnp.array([2.0, 2.0, -2.5]))),
    ("max", lax.max, (jnp.array([1.0, jnp.nan, -2.0]), jnp.array([0.5, 1.0, -3.0]))),
    ("min", lax.min, (_f64(6), _f64(6))),
    ("pow", lax.pow, (jnp.abs(_f64(5)) + 0.1, _f64(5))),
    ("atan2", lax.atan2, (_f64(5), _f64(5))),
    ("neg", lax.neg, (_f64(3),)),
    ("exp", lax.exp, (_f64(3, 3),)),
    ("log", lax.log, (jnp.abs(_f64(7)) + 0.01,)),
    ("log1p", lax.log1p, (jnp.abs(_f64(7)),)),
    ("expm1", lax.expm1, (_f64(7),)),
    ("sin", lax.sin, (_f64(9),)),
    ("cos", lax.cos, (_f64(9),)),
    ("tan", lax.tan, (_f64(9) * 0.5,)),
    ("tanh", lax.tanh, (_f64(9) * 3,)),
    ("sinh", lax.sinh, (_f64(4),)),
    ("cosh", lax.cosh, (_f64(4),)),
    ("asin", lax.asin, (jnp.tanh(_f64(4)),)),
    ("acos", lax.acos, (jnp.tanh(_f64(4)),)),
    ("atan", lax.atan, (_f64(4),)),
    ("asinh", lax.asinh, (_f64(4),)),
    ("acosh", lax.acosh, (jnp.abs(_f64(4)) + 1,)),
    ("atanh", lax.atanh, (jnp.tanh(_f64(4)),)),
    ("sqrt", lax.sqrt, (jnp.abs(_f64(8)),)),
    ("rsqrt", lax.rsqrt, (jnp.abs(_f64(8)) + 0.1,)),
    ("cbrt", lax.cbrt, (_f64(8),)),
    ("abs", lax.abs, (_f64(8),)),
    ("sign", lax.sign, (jnp.array([-2.0, 0.0, 3.0, -0.0]),)),
    ("floor", lax.floor, (_f64(8) * 3,)),
    ("ceil", lax.ceil, (_f64(8) * 3,)),
    (
        "round",
        lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
        (jnp.array([0.5, 1.5, -0.5, -2.5, 2.4]),),
    ),
    (
        "round",
        lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        (jnp.array([0.5, 1.5, -0.5, -2.5, 2.4]),),
    ),
    ("is_finite", lax.is_finite, (jnp.array([1.0, jnp.inf, jnp.nan]),)),
    ("logistic", lax.logistic, (_f64(6) * 5,)),
    ("erf", lax.erf, (_f64(6),)),
    ("erfc", lax.erfc, (_f64(6) * 3,)),
    ("erf_inv", lax.erf_inv, (jnp.tanh(_f64(6)),)),
    ("lgamma", lax.lgamma, (jnp.abs(_f64(6)) + 0.1,)),
    ("digamma", lax.digamma, (jnp.abs(_f64(6)) + 0.1,)),
    ("square", lax.square, (_f64(5),)),
    ("integer_pow", lambda x: lax.integer_pow(x, 3), (_f64(5),)),
    ("integer_pow", lambda x: lax.integer_pow(x, -2), (_f64(5) + 3,)),
    ("and", lax.bitwise_and, (_u32(6), _u32(6))),
    ("or", lax.bitwise_or, (_u32(6), _u32(6))),
    ("xor", lax.bitwise_xor, (_u32(6), _u32(6))),
    ("not", lax.bitwise_not, (jnp.array([True, False]),)),
    ("shift_left", lax.shift_left, (_u32(6), jnp.array([0, 1, 13, 31, 32, 40], jnp.uint32))),
    (
        "shift_right_logical",
        lax.shift_right_logical,
        (_u32(6), jnp.array([0, 1, 13, 31, 32, 40], jnp.uint32)),
    ),
    (
        "shift_right_logical",
        lax.shift_right_logical,
        (jnp.array([-8, 8, -1], jnp.int32), jnp.array([1, 2, 31], jnp.int32)),
    ),
    (
        "shift_right_arithmetic",
        lax.shift_right_arithmetic,
        (jnp.array([-8, 8, -1, -5], jnp.int32), jnp.array([1, 2, 31, 40], jnp.int32)),
    ),
    ("lt", lax.lt, (_f64(5), _f64(5))),
    ("le", lax.le, (_f64(5), _f64(5))),
    ("gt", lax.gt, (_f64(5), _f64(5))),
    ("ge", lax.ge, (_f64(5), _f64(5))),
    ("eq", lax.eq, (jnp.array([1.0, 2.0]), jnp.array([1.0, 3.0]))),
    ("ne", lax.ne, (jnp.array([1.0, 2.0]), jnp.array([1.0, 3.0]))),
    ("select_n", lax.select_n, (jnp.array([True, False, True]), _f64(3), _f64(3))),
    ("select_n", lax.select_n, (jnp.array([0, 2, 1], jnp.int32), _f64(3), _f64(3), _f64(3))),
    ("clamp", lax.clamp, (-0.5, _f64(7), 0.5)),
    ("convert_element_type", lambda x: lax.convert_element_type(x, jnp.float32), (_f64(5),)),
    (
        "convert_element_type",
        lambda x: lax.convert_element_type(x, jnp.float64),
        (jnp.array([1, -3], jnp.int32),),
    ),
    ("convert_element_type", lambda x: lax.convert_element_type(x, jnp.uint64), (_u32(4),)),
    (
        "convert_element_type",
        lambda x: lax.convert_element_type(x, jnp.uint32),
        (jnp.array([2**33 + 5, 7], jnp.uint64),),
    ),
    (
        "convert_element_type",
        lambda x: lax.convert_element_type(x, jnp.bool_),
        (jnp.array([0.0, 2.0, -0.0]),),
    ),
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)), (_f64(3, 1),)),
    ("reshape", lambda x: lax.reshape(x, (6, 2)), (_f64(3, 4),)),
    ("reshape", lambda x: lax.reshape(x, (12,), dimensions=(1, 0)), (_f64(3, 4),)),
    ("squeeze", lambda x: lax.squeeze(x, (0, 2)), (_f64(1, 3, 1),)),
    ("broadcast_in_dim", lambda x: lax.expand_dims(x, (0, 2)), (_f64(3, 2),)),
    ("transpose", lambda x: lax.transpose(x, (2, 0, 1)), (_f64(2, 3, 4),)),
    ("rev", lambda x: lax.rev(x, (0,)), (_f64(3, 2),)),
    ("slice", lambda x: lax.slice(x, (1, 0), (5, 3), (2, 1)), (_f64(6, 3),)),
    (
        "dynamic_slice",
        lambda x, i: lax.dynamic_slice(x, (i, 1), (2, 2)),
        (_f64(5, 4), jnp.array(4)),
    ),  # the start clamped: rows 3 and 4
    (
        "dynamic_slice",
        lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 4)),
        (_f64(5, 4), jnp.array(-3)),
    ),
    (
        "dynamic_update_slice",
        lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0)),
        (_f64(5, 3), _f64(2, 3), jnp.array(9)),
    ),
    ("concatenate", lambda a, b: lax.concatenate([a, b], 1), (_f64(2, 3), _f64(2, 1))),
    ("pad", lambda x: lax.pad(x, 0.5, ((1, 2, 0), (0, 0, 1))), (_f64(2, 3),)),
    ("pad", lambda x: lax.pad(x, -1.0, ((-1, 1, 0), (2, -1, 2))), (_f64(3, 3),)),
    ("iota", lambda: lax.broadcasted_iota(jnp.int32, (3, 4), 1), ()),
    ("reduce_sum", lambda x: jnp.sum(x, axis=(0, 2)), (_f64(3, 4, 5),)),
    ("reduce_prod", lambda x: jnp.prod(x, axis=1), (_f64(3, 4),)),
    ("reduce_max", lambda x: jnp.max(x, axis=0), (_f64(3, 4),)),
    ("reduce_min", lambda x: jnp.min(x), (_f64(3, 4),)),
    ("reduce_and", lambda x: jnp.all(x > 0, axis=1), (_f64(3, 4),)),
    ("reduce_or", lambda x: jnp.any(x > 0, axis=1), (_f64(3, 4),)),
    ("argmax", lambda x: jnp.argmax(x, axis=1), (_f64(3, 4),)),
    ("argmin", lambda x: jnp.argmin(x, axis=0), (_f64(3, 4),)),
    ("cumsum", lambda x: lax.cumsum(x, axis=1), (_f64(3, 4),)),
    ("cumsum", lambda x: lax.cumsum(x, axis=0, reverse=True), (_f64(3, 4),)),
    ("cumprod", lambda x: lax.cumprod(x, axis=1), (_f64(3, 4),)),
    ("cummax", lambda x: lax.cummax(x, axis=1), (_f64(3, 4),)),
    ("cummin", lambda x: lax.cummin(x, axis=1, reverse=True), (_f64(3, 4),)),
    ("cumlogsumexp", lambda x: lax.cumlogsumexp(x, axis=1), (_f64(3, 4),)),
    ("dot_general", jnp.matmul, (_f64(5, 3), _f64(3, 4))),
    ("dot_general", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (_f64(2, 3, 4), _f64(2, 4, 5))),
    ("dot_general", lambda a, b: jnp.einsum("ijb,kjb->bki", a, b), (_f64(3, 4, 2), _f64(5, 4, 2))),
    ("dot_general", jnp.dot, (_f64(4), _f64(4))),
    ("dot_general", lambda a, b: jnp.einsum("i,j->ij", a, b), (_f64(3), _f64(2))),
    (
        "dot_general",
        lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32),
        (_f64(3, 3).astype(jnp.float32), _f64(3, 2).astype(jnp.float32)),
    ),
    (
        "threefry2x32",
        lambda a, b, c, d: jax._src.prng.threefry2x32_p.bind(a, b, c, d),
        (_u32(7), _u32(7), _u32(7), _u32(7)),
    ),
    (
        "threefry2x32",
        lambda a, b: jax._src.prng.threefry_2x32(
            jnp.stack([a, b]), jnp.arange(10, dtype=jnp.uint32)
        ),
        (_u32(), _u32()),
    ),  # fmt: skip
    ("sort", lambda x: jnp.sort(x, axis=1), (_f64(3, 6),)),
    ("sort", lambda x, y: lax.sort((x, y), num_keys=1), (_f64(7), _f64(7))),
    ("split", lambda x: lax.split(x, (1, 3, 2), axis=1), (_f64(2, 6),)),
    ("stack", lambda a, b: jnp.stack([a, b], axis=1), (_f64(3), _f64(3))),
    ("iota_2x32_shape", lambda: jax._src.prng.iota_2x32_shape((3, 5)), ()),
    ("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, jnp.int32), (_u32(5),)),
    ("reduce_precision", lambda x: lax.reduce_precision(x, 11, 52), (_f64(3),)),
]


def _ids():
    seen: dict[str, int] = {}
    out = []
    for name, *_ in CASES:
        seen[name] = seen.get(name, 0) + 1
        out.append(f"{name}-{seen[name]}")
    return out


@pytest.mark.parametrize(("name", "fn", "args"), CASES, ids=_ids())
def test_each_rule_equals_xlas_primitive(name, fn, args):
    """Each rule against the primitive compiled by XLA: equal shapes, dtypes and weak
    types, values to a few ulps; the primitive is evaluated by NumPy, not by JAX."""
    compiled = jax.jit(fn)(*args)
    with op_by_op() as calls:
        eager = fn(*args)
    assert calls[("numpy", name)] >= 1, dict(calls)
    for a, b in zip(jax.tree.leaves(compiled), jax.tree.leaves(eager), strict=True):
        assert (b.shape, b.dtype, b.aval.weak_type) == (a.shape, a.dtype, a.aval.weak_type)
        a, b = np.asarray(a), np.asarray(b)
        if np.issubdtype(a.dtype, np.floating):
            tol = 64 * np.finfo(a.dtype).eps
            np.testing.assert_allclose(b, a, rtol=tol, atol=tol * np.nanmax(np.abs(a), initial=1))
        else:
            np.testing.assert_array_equal(b, a)


def _study_like(key, w, x0):
    """Random draws, a depth loop (`lax.scan`), its gradient, a float32 part."""
    k1, k2 = jax.random.split(key)
    z = jax.random.normal(k1, (16, 8))
    u = jax.random.uniform(k2, (8,), dtype=jnp.float32)

    def loss(w):
        def layer(h, zl):
            return h + jnp.tanh(h @ w + zl[:, None].T) / 8, jnp.mean(h**2)

        h, means = lax.scan(layer, jnp.broadcast_to(x0, (4, 8)), z)
        return jnp.mean(jax.nn.softplus(h)) + 1e-2 * jnp.sum(means)

    value, grad = jax.value_and_grad(loss)(w)
    return value, grad, jnp.sort(u * 2.0), jnp.argmax(z, axis=1)


def test_a_computation_agrees_with_its_compiled_result_and_says_what_ran_where():
    """The whole computation by NumPy op by op equals the compiled one to round-off, and
    agrees with op by op through XLA (the route it replaces); the calls are counted."""
    args = (jax.random.key(3), jnp.eye(8) * 0.5 + 0.01, jnp.linspace(-1, 1, 8))
    compiled = jax.jit(_study_like)(*args)
    with op_by_op() as calls:
        by_numpy = _study_like(*args)
    with op_by_op(numpy=False) as none:
        by_xla = _study_like(*args)
    assert none is None  # nothing counted: every primitive compiled one by one
    for a, b, c in zip(compiled, by_numpy, by_xla, strict=True):
        assert a.dtype == b.dtype == c.dtype
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(np.asarray(b), np.asarray(c), rtol=1e-12, atol=1e-14)
    numpy_calls = sum(n for (route, _), n in calls.items() if route == "numpy")
    assert numpy_calls > 100
    # what JAX still runs itself: the key's wrapping and bits (no program of their own)
    assert {name for (route, name) in calls if route == "jax"} <= {
        "random_bits",
        "random_wrap",
        "random_unwrap",
        "random_split",
        "random_seed",
    }


def test_a_primitive_numpy_lacks_runs_compiled_and_float_to_int_stays_xlas():
    """A primitive without a rule (the FFT) and a float→int conversion (XLA's rounding and
    saturation) run as JAX runs them, compiled one by one; the values are XLA's."""
    x = jnp.array([2.7, -2.7, 1e30, 0.5])

    def f(x):
        return jnp.fft.rfft(x).real, x.astype(jnp.int32)

    with op_by_op() as calls:
        got = f(x)
    assert calls[("jax", "fft")] == 1 and calls[("jax", "convert_element_type")] == 1
    for a, b in zip(got, jax.jit(f)(x), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_wrong_rule_is_caught_by_the_comparison(monkeypatch):
    """A rule that is wrong (tanh off by 1e-6) makes the NumPy route differ from the
    compiled one beyond round-off: the comparison above can fail."""
    monkeypatch.setitem(_numpy_ops.NUMPY_RULES, "tanh", lambda x, **_: np.tanh(x) * (1 + 1e-6))
    args = (jax.random.key(3), jnp.eye(8) * 0.5 + 0.01, jnp.linspace(-1, 1, 8))
    compiled = jax.jit(_study_like)(*args)
    with op_by_op():
        wrong = _study_like(*args)
    assert abs(float(wrong[0]) - float(compiled[0])) > 1e-9 * abs(float(compiled[0]))


def test_the_rules_are_off_outside_op_by_op_and_in_other_threads():
    """Outside `op_by_op` (and in threads that do not disable jit) nothing is counted and
    JAX's own primitives run."""
    before = _numpy_ops.counts()
    jnp.tanh(jnp.ones(3)).block_until_ready()
    assert _numpy_ops.counts() == before
    import threading

    with op_by_op():
        seen = []
        t = threading.Thread(target=lambda: seen.append(jax.jit(jnp.sin)(jnp.ones(2))))
        t.start()
        t.join()
    assert _numpy_ops.counts() == before and len(seen) == 1


_X = jnp.asarray(RNG.normal(size=(5, 4, 3)))
_I, _J = jnp.array([4, 0, 2, 2]), jnp.array([[1, 3], [0, 0]])
GATHERS_AND_SCATTERS = {  # name: (function of _X, the primitive it binds)
    "take": (lambda x: x[_I], "gather"),
    "take, then an index": (lambda x: x[_I, 1], "gather"),
    "a 2-d index array": (lambda x: x[:, _J], "gather"),
    "indices around a slice": (lambda x: x[_I, :, _J[0, 0]], "gather"),
    "out of bounds, clipped": (
        lambda x: jnp.take(x, jnp.array([7, -9]), axis=0, mode="clip"), "gather"),
    "out of bounds, filled": (
        lambda x: jnp.take(x, jnp.array([7, 1]), axis=0, mode="fill"), "gather"),
    "negative indices": (lambda x: x[jnp.array([-1, -2])], "gather"),
    "take_along_axis": (
        lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1), "gather"),
    "vmapped (batching dimensions)": (
        lambda x: jax.vmap(lambda r, k: r[k])(x, jnp.array([0, 3, 2, 1, 1])), "gather"),
    "set": (lambda x: x.at[_I].set(1.5), "scatter"),
    "add, repeated indices": (lambda x: x.at[_I].add(jnp.ones((4, 4, 3))), "scatter-add"),
    "add at a 2-d index array": (lambda x: x.at[:, _J].add(2.0), "scatter-add"),
    "multiply": (lambda x: x.at[_I, 1].multiply(3.0), "scatter-mul"),
    "min": (lambda x: x.at[_I].min(0.0), "scatter-min"),
    "max, one index out of bounds": (lambda x: x.at[jnp.array([9, 1])].max(0.0), "scatter-max"),
    "add, one index out of bounds (dropped)": (
        lambda x: x.at[jnp.array([9, 1])].add(1.0), "scatter-add"),
    "the gradient of a gather": (
        lambda x: jax.grad(lambda x: jnp.sum(x[_I] ** 2))(x), "scatter-add"),
    "vmapped set": (
        lambda x: jax.vmap(lambda r, k: r.at[k].set(0.0))(x, jnp.array([0, 3, 2, 1, 1])),
        "scatter"),
    "segment_sum": (
        lambda x: jax.ops.segment_sum(x[:, 0, 0], jnp.array([0, 1, 0, 2, 1]), 3), "scatter-add"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(GATHERS_AND_SCATTERS))
def test_gathers_and_scatters_equal_xlas(case):
    """XLA's gather and scatter semantics (windows, clamped or filled or dropped indices,
    batching dimensions, repeated indices) by NumPy, against the compiled primitive."""
    fn, name = GATHERS_AND_SCATTERS[case]
    compiled = jax.jit(fn)(_X)
    with op_by_op() as calls:
        eager = fn(_X)
    assert calls[("numpy", name)] >= 1 and not any(r == "jax" for r, _ in calls), dict(calls)
    assert (eager.shape, eager.dtype) == (compiled.shape, compiled.dtype)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(compiled), rtol=1e-14,
                               equal_nan=True)  # fmt: skip


def test_a_vmapped_while_loop_runs_op_by_op():
    """Under `vmap` JAX cannot run `lax.while_loop` as a Python loop (its predicate is
    batched) and binds the primitive, which JAX would compile whole: here its predicate
    and body run op by op instead, to the compiled loop's values."""

    def halve_until_small(x):
        return lax.while_loop(lambda c: c[0] > 0.1, lambda c: (c[0] / 2, c[1] + 1), (x, 0))

    xs = jnp.array([0.05, 1.0, 7.0])
    compiled = jax.jit(jax.vmap(halve_until_small))(xs)
    with op_by_op() as calls:
        eager = jax.vmap(halve_until_small)(xs)
    assert calls[("numpy", "while")] == 1 and ("jax", "while") not in calls
    for a, b in zip(compiled, eager, strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
        assert a.dtype == b.dtype


@jax.custom_jvp
def _sin(x):
    return jnp.sin(x)


_sin.defjvp(lambda p, t: (_sin(p[0]), jnp.cos(p[0]) * t[0]))


@jax.custom_vjp
def _twice(x):
    return x * 2


_twice.defvjp(lambda x: (_twice(x), None), lambda _, ct: (ct * 2,))


def _program(x, key):
    """Every kind of call, branch and loop a traced program holds, and PRNG keys."""
    y = jax.jit(lambda z: z + 1)(x) + jax.random.normal(key, x.shape)
    y = lax.cond(x[0] > 0, lambda z: z * 2, lambda z: z - 1, y)
    c, ys = lax.scan(lambda c, a: (c + a, c * a), 0.0, y)
    back, _ = lax.scan(lambda c, a: (c * a, None), 1.0, y, reverse=True)
    w = lax.while_loop(lambda c: c < 10, lambda c: c + 3, 0)
    v = jax.vmap(lambda a: lax.while_loop(lambda c: c[0] < a, lambda c: (c[0] * 2, c[1] + 1),
                                          (1.0, 0)))(jnp.abs(y) * 10)  # fmt: skip
    grad = jax.grad(lambda z: jnp.sum(_sin(z) * _twice(z) + jax.checkpoint(jnp.cos)(z)))(y)
    return {"a": _sin(y) + _twice(y), "c": c, "ys": ys, "back": back, "w": w, "v": v[0],
            "steps": v[1], "grad": grad, "f32": y.astype(jnp.float32) * 2,
            "keys": jax.random.split(key)}  # fmt: skip


def test_a_traced_program_evaluated_equation_by_equation_equals_the_compiled_one():
    """`traced_op_by_op`: the jaxpr JAX compiles, evaluated by NumPy equation by equation
    (calls, branches, loops, custom derivatives, rematerialisation, vmapped loops, keys),
    equals the compiled program: values to round-off, dtypes and weak types exactly."""
    from meanfield._eager import traced_op_by_op

    x, key = jnp.array([0.3, -0.2, 0.5]), jax.random.key(1)
    compiled = jax.jit(_program)(x, key)
    with op_by_op() as calls:
        traced = traced_op_by_op(jax.jit(_program), x, key)
    keys = compiled.pop("keys"), traced.pop("keys")
    np.testing.assert_array_equal(*[np.asarray(jax.random.key_data(k)) for k in keys])
    for name in compiled:
        a, b = compiled[name], traced[name]
        assert (b.dtype, b.aval.weak_type) == (a.dtype, a.aval.weak_type), name
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-13, err_msg=name)
    for kind in ("jit", "cond", "scan", "while", "custom_jvp_call", "custom_vjp_call"):
        assert calls[("numpy", kind)] >= 1, kind
    assert {name for route, name in calls if route == "jax"} <= {"random_bits", "random_split"}
    with pytest.raises(RuntimeError, match="inside op_by_op"):
        traced_op_by_op(jax.jit(_program), x, key)


def test_the_traced_route_leaves_the_primitives_named_to_xla():
    """`compiled=("dot_general",)`: every product, in the loop's body too, compiled one by
    one by XLA (counted on the "jax" route, none by NumPy) and bit-equal to XLA's product
    alone; the rest still by NumPy; a name NumPy has no rule for is refused in one line."""
    from meanfield._eager import traced_op_by_op

    def f(a, b):
        return lax.scan(lambda c, _: (jnp.tanh(c @ b), None), a, None, length=3)[0]

    a, b = jnp.ones((4, 5), jnp.float32) / 7, jnp.linspace(0.1, 1, 25, dtype=jnp.float32)
    b = b.reshape(5, 5)
    with op_by_op() as calls:
        traced = traced_op_by_op(jax.jit(f), a, b, compiled=("dot_general",))
        with pytest.raises(ValueError, match="^compiled: no NumPy rule to set aside for nope"):
            traced_op_by_op(jax.jit(f), a, b, compiled=("nope",))
    assert calls[("jax", "dot_general")] == 3 and calls[("numpy", "dot_general")] == 0
    assert calls[("numpy", "tanh")] == 3 and calls[("jax", "tanh")] == 0
    with pytest.raises(ValueError, match="^compiled: primitives' names, as a tuple"):
        with op_by_op():
            traced_op_by_op(jax.jit(f), a, b, compiled="dot_general")
    with op_by_op(numpy=False):  # XLA's product and tanh, each alone
        alone = f(a, b)
    np.testing.assert_allclose(np.asarray(traced), np.asarray(alone), rtol=1e-6)
    before = _numpy_ops.counts()
    with op_by_op(numpy=False):  # the traced route too: every operation by XLA
        every = traced_op_by_op(jax.jit(f), a, b)
    ran = _numpy_ops.counts() - before
    assert ran[("jax", "dot_general")] == ran[("jax", "tanh")] == 3
    assert not [k for k in ran if k[0] == "numpy" and k[1] not in ("scan", "jit", "pjit")]
    np.testing.assert_array_equal(np.asarray(every), np.asarray(alone))
    with op_by_op() as calls:  # by default NumPy's product
        traced_op_by_op(jax.jit(f), a, b)
    assert calls[("numpy", "dot_general")] == 3 and calls[("jax", "dot_general")] == 0


def test_the_traced_route_refuses_a_call_it_would_compile_whole():
    """A primitive holding jaxprs the evaluator has no rule for (a custom linear solve):
    refused in one line, never bound — JAX would compile it whole, the check sharing the
    compiler it checks."""
    from meanfield._eager import traced_op_by_op

    def solve(b):
        return lax.custom_linear_solve(lambda x: 2.0 * x, b, lambda mv, r: r / 2.0)

    with op_by_op(), pytest.raises(RuntimeError, match="cannot evaluate custom_linear_solve"):
        traced_op_by_op(jax.jit(solve), jnp.ones(3))


def test_overflow_and_invalid_values_are_silent_as_in_xla():
    """An overflow (inf) and 0/0 (nan) come out as the compiled program gives them, with
    no NumPy warning reaching the terminal (the self-check of a run with an exploded
    draw printed three), on both op-by-op routes; outside them NumPy warns as before."""
    import warnings

    from meanfield._eager import traced_op_by_op

    def f(x):
        y = x * x * x  # overflows for x = 1e200
        return y, (x - x) / (x - x), jnp.where(x > 0, x, jnp.exp(-x))

    x = jnp.array([1e200, 1.0, -800.0])
    compiled = jax.jit(f)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with op_by_op():
            eager = f(x)
            traced = traced_op_by_op(jax.jit(f), x)
    for a, b, c in zip(compiled, eager, traced, strict=True):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(a))
    with pytest.warns(RuntimeWarning):
        np.asarray([1e200]) ** 3
