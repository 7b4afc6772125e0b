"""Finite ResNet: forward pass against a plain loop, batching, jit, vmap, grad."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf


class SineBlock(mf.AbstractUnitBlock):
    """A user block with a dict parameter: φ(h, z) = z.a · sin(z.w · h)."""

    def __call__(self, h, z):
        return z["a"] * jnp.sin(z["w"] @ h)


def sine_law(d):
    def sample(key):
        ka, kw = jr.split(key)
        return {"a": jr.normal(ka, (d,)), "w": jr.normal(kw, (d,)) / np.sqrt(d)}

    return mf.SamplerLaw(sample)


def loop_forward(params_np, alpha, x, unit):
    """Plain Python/numpy reference for h^l = h^{l-1} + α Σ_j φ(h^{l-1}, z^{j,l})."""
    h = np.array(x, dtype=np.float64)
    hs = [h.copy()]
    L, M = params_np["shape"]
    for l in range(L):
        inc = np.zeros_like(h)
        for j in range(M):
            inc += unit(h, l, j)
        h = h + alpha * inc
        hs.append(h.copy())
    return np.stack(hs)


ACTS = {"relu": lambda t: np.maximum(t, 0.0), "tanh": np.tanh, "identity": lambda t: t}


@pytest.mark.parametrize("act", list(ACTS))
def test_two_layer_forward_matches_loop(act, key):
    d, L, M = 4, 7, 5
    net = mf.ResNet.sample(
        mf.TwoLayerBlock(act),
        mf.TwoLayerGaussianLaw(d),
        L=L,
        M=M,
        scaling=mf.CriticalScaling(),
        key=key,
    )
    x = jr.normal(jr.fold_in(key, 1), (d,))
    U, V = np.asarray(net.params.u), np.asarray(net.params.v)
    rho = ACTS[act]
    ref = loop_forward(
        {"shape": (L, M)},
        1 / np.sqrt(L * M),
        np.asarray(x),
        lambda h, l, j: V[l, j] * rho(U[l, j] @ h),
    )
    hs = net.states(x[None])[0]
    assert hs.shape == (L + 1, d)
    np.testing.assert_allclose(np.asarray(hs), ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(net(x)), ref[-1], rtol=0, atol=1e-12)


def test_user_block_forward_matches_loop(key):
    d, L, M = 3, 6, 4
    net = mf.ResNet.sample(SineBlock(), sine_law(d), L=L, M=M, scaling=0.3, key=key)
    A, W = np.asarray(net.params["a"]), np.asarray(net.params["w"])
    x = jr.normal(jr.fold_in(key, 2), (d,))
    ref = loop_forward(
        {"shape": (L, M)}, 0.3, np.asarray(x), lambda h, l, j: A[l, j] * np.sin(W[l, j] @ h)
    )
    np.testing.assert_allclose(np.asarray(net.states(x[None])[0]), ref, atol=1e-12)


def test_function_block_equals_subclass(key):
    d = 3
    law = sine_law(d)
    a = mf.ResNet.sample(SineBlock(), law, L=4, M=3, scaling=0.5, key=key)
    b = mf.ResNet.sample(
        mf.FunctionBlock(lambda h, z: z["a"] * jnp.sin(z["w"] @ h)),
        law,
        L=4,
        M=3,
        scaling=0.5,
        key=key,
    )
    x = jnp.arange(d, dtype=float)
    np.testing.assert_array_equal(np.asarray(a(x)), np.asarray(b(x)))


def test_layer_blocks_forward_match_loop(key):
    d, L = 5, 6
    x = jr.normal(key, (d,))
    matrix = mf.ResNet.sample(
        mf.MatrixBlock("tanh"),
        mf.MatrixGaussianLaw(d),
        L=L,
        scaling=mf.DepthPowerScaling(0.5),
        key=key,
    )
    Vs = np.asarray(matrix.params)
    assert Vs.shape == (L, d, d)
    h = np.asarray(x)
    for l in range(L):
        h = h + L**-0.5 * Vs[l] @ np.tanh(h)
    np.testing.assert_allclose(np.asarray(matrix(x)), h, atol=1e-12)

    dense = mf.ResNet.sample(
        mf.DenseBlock("erf"), mf.DenseGaussianLaw(d, 1.25, 0.05), L=L, scaling=0.2, key=key
    )
    W, b = np.asarray(dense.params.W), np.asarray(dense.params.b)
    from scipy.special import erf

    h = np.asarray(x)
    for l in range(L):
        h = h + 0.2 * (W[l] @ erf(h) + b[l])
    np.testing.assert_allclose(np.asarray(dense(x)), h, atol=1e-12)

    perc = mf.ResNet.sample(
        mf.PerceptronBlock("relu"), mf.PerceptronGaussianLaw(d, m=3), L=L, scaling=0.3, key=key
    )
    Vp, Wp = np.asarray(perc.params.V), np.asarray(perc.params.W)
    h = np.asarray(x)
    for l in range(L):
        h = h + 0.3 * Vp[l] @ np.maximum(Wp[l] @ h, 0)
    np.testing.assert_allclose(np.asarray(perc(x)), h, atol=1e-12)


def test_embedding_and_readout(key):
    d_in, D, d_out, L, M = 3, 6, 2, 5, 4
    k1, k2, k3 = jr.split(key, 3)
    emb = jr.normal(k1, (D, d_in))
    read = jr.normal(k2, (D, d_out))
    net = mf.ResNet.sample(
        mf.TwoLayerBlock("tanh", inner_scale=1 / D),
        mf.TwoLayerGaussianLaw(D),
        L=L,
        M=M,
        scaling=mf.MeanODEScaling(),
        key=k3,
        embedding=emb,
        readout=read,
    )
    x = jnp.array([0.5, -1.0, 2.0])
    U, V = np.asarray(net.params.u), np.asarray(net.params.v)
    h = np.asarray(emb) @ np.asarray(x)
    for l in range(L):
        h = h + sum(V[l, j] * np.tanh(U[l, j] @ h / D) for j in range(M)) / (L * M)
    np.testing.assert_allclose(np.asarray(net(x)), np.asarray(read).T @ h / D, atol=1e-12)


def test_readout_must_match_the_state(key):
    """A readout on a network without embedding: its D is the state's d (a (5, 2) readout
    on a d = 4 state used to fail deep inside a matrix product)."""
    net = mf.ResNet.sample(
        mf.TwoLayerBlock("tanh"), mf.TwoLayerGaussianLaw(4), L=2, M=3, scaling=0.5, key=key,
        readout=jnp.ones((5, 2)),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^readout has shape \(5, 2\) but the state"):
        net(jnp.ones(4))
    xs, ys = jnp.ones((3, 4)), jnp.ones((3, 2))
    with pytest.raises(ValueError, match="^readout has shape"):
        mf.loss_and_gradients(net, xs, ys)


# ---- one checklist for every built-in block (finite, shape, dtype, jit, vmap, grad) ----


def _nets(key, d=4):
    return {
        "2lp-relu": mf.ResNet.sample(
            mf.TwoLayerBlock("relu"),
            mf.TwoLayerGaussianLaw(d),
            L=5,
            M=3,
            scaling=mf.MeanODEScaling(),
            key=key,
        ),
        "2lp-gelu": mf.ResNet.sample(
            mf.TwoLayerBlock("gelu"),
            mf.TwoLayerNonCentredLaw(d),
            L=5,
            M=3,
            scaling=mf.CriticalScaling(),
            key=key,
        ),
        "2lp-softplus": mf.ResNet.sample(
            mf.TwoLayerBlock("softplus"), mf.TwoLayerGaussianLaw(d), L=5, M=3, scaling=0.1, key=key
        ),
        "2lp-callable": mf.ResNet.sample(
            mf.TwoLayerBlock(jnp.sin), mf.TwoLayerGaussianLaw(d), L=5, M=3, scaling=0.1, key=key
        ),
        "sine": mf.ResNet.sample(SineBlock(), sine_law(d), L=5, M=3, scaling=0.1, key=key),
        "matrix": mf.ResNet.sample(
            mf.MatrixBlock("tanh"),
            mf.MatrixGaussianLaw(d),
            L=5,
            scaling=mf.DepthPowerScaling(1.0),
            key=key,
        ),
        "perceptron": mf.ResNet.sample(
            mf.PerceptronBlock(),
            mf.PerceptronGaussianLaw(d),
            L=5,
            scaling=mf.DepthPowerScaling(0.5),
            key=key,
        ),
        "dense": mf.ResNet.sample(
            mf.DenseBlock(), mf.DenseGaussianLaw(d, 1.25, 0.05), L=5, scaling=0.3, key=key
        ),
    }


@pytest.mark.parametrize("name", list(_nets(jr.key(0))))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_block_checklist(name, dtype, key):
    net = _nets(key)[name]
    net = jax.tree.map(lambda a: a.astype(dtype) if eqx.is_inexact_array(a) else a, net)
    xs = jr.normal(jr.fold_in(key, 3), (6, 4), dtype=dtype)
    out = jax.vmap(net)(xs)
    assert out.shape == (6, 4) and out.dtype == dtype
    assert bool(jnp.all(jnp.isfinite(out)))
    jitted = eqx.filter_jit(lambda n, x: jax.vmap(n)(x))(net, xs)
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(out), rtol=tol, atol=tol)
    grads = eqx.filter_grad(lambda n: jnp.sum(jax.vmap(n)(xs) ** 2))(net)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    assert any(float(jnp.max(jnp.abs(g))) > 0 for g in jax.tree.leaves(grads.params))


def test_vmap_over_seeds_matches_individual_draws(key):
    d, L, M = 3, 4, 2
    make = lambda k: mf.ResNet.sample(
        mf.TwoLayerBlock("tanh"),
        mf.TwoLayerGaussianLaw(d),
        L=L,
        M=M,
        scaling=mf.MeanODEScaling(),
        key=k,
    )
    keys = jr.split(key, 5)
    x = jnp.ones(d)
    batched = eqx.filter_vmap(lambda k: make(k)(x))(keys)
    for i in range(5):
        np.testing.assert_allclose(np.asarray(batched[i]), np.asarray(make(keys[i])(x)), atol=1e-14)


def test_sample_builds_distinct_iid_units(key):
    net = mf.ResNet.sample(
        mf.TwoLayerBlock(),
        mf.TwoLayerGaussianLaw(2, sigma_u=2.0, sigma_v=0.5),
        L=200,
        M=50,
        scaling=mf.MeanODEScaling(),
        key=key,
    )
    u = np.asarray(net.params.u).reshape(-1, 2)
    v = np.asarray(net.params.v).reshape(-1, 2)
    n = u.shape[0]
    # sample standard deviations within 5 standard errors (se of std ≈ σ / sqrt(2n))
    assert abs(u.std() - 2.0) < 5 * 2.0 / np.sqrt(4 * n)
    assert abs(v.std() - 0.5) < 5 * 0.5 / np.sqrt(4 * n)
    assert abs(np.corrcoef(u[:, 0], v[:, 0])[0, 1]) < 5 / np.sqrt(n)


@pytest.mark.parametrize("unroll", [3, 7, 50])
def test_unroll_changes_no_value(unroll, key):
    """`ScanLoop(unroll)` layers per loop step (3 does not divide L = 7; 50 > L): the
    forward states equal the plain loop, and the backward states and gradients those of
    `unroll=1`, through `train` too (whose rebuilt networks keep the loop)."""
    d, L, M = 4, 7, 5
    kw = dict(L=L, M=M, scaling=mf.MeanODEScaling(), key=key)
    law, block = mf.TwoLayerNonCentredLaw(d), mf.TwoLayerBlock("tanh")
    one = mf.ResNet.sample(block, law, loop=mf.ScanLoop(), **kw)
    many = mf.ResNet.sample(block, law, loop=mf.ScanLoop(unroll=unroll), **kw)
    assert many.loop.unroll == unroll and one.loop.unroll == 1
    x = jr.normal(jr.fold_in(key, 1), (d,))
    U, V = np.asarray(one.params.u), np.asarray(one.params.v)
    ref = loop_forward(
        {"shape": (L, M)},
        1 / (L * M),
        np.asarray(x),
        lambda h, l, j: V[l, j] * np.tanh(U[l, j] @ h),
    )
    np.testing.assert_allclose(np.asarray(many.states(x[None])[0]), ref, rtol=0, atol=1e-12)
    xs, ys = jr.normal(jr.fold_in(key, 2), (3, d)), jr.normal(jr.fold_in(key, 3), (3, d))
    opt = mf.mean_ode_sgd(0.1, L=L, M=M)
    a = mf.train(one, xs, ys, optimizer=opt, steps=2, return_adjoint=True)
    b = jax.jit(lambda n: mf.train(n, xs, ys, optimizer=opt, steps=2, return_adjoint=True))(many)
    assert b.net.loop == mf.ScanLoop(unroll=unroll)
    # every loop over layers (forward and backward, in and after the steps) is unrolled
    jaxpr = str(jax.make_jaxpr(lambda n: mf.train(n, xs, ys, optimizer=opt, steps=2))(many))
    assert re.findall(r"\bunroll=(\w+)", jaxpr).count(str(min(unroll, L))) == 2
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(v), np.asarray(u), rtol=1e-13, atol=1e-15)
    assert float(jnp.max(jnp.abs(a.adjoint.b[-1, :, 0] - a.adjoint.b[-1, :, -1]))) > 0
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="unroll must be a positive integer"):
            mf.ResNet(block, one.params, 0.1, loop=mf.ScanLoop(unroll=bad))
