"""The fused depth loop against the plain scan (the oracle), on CPU in float64.

The Pallas kernels run in interpret mode; every shape below needs padding in every
axis (n, d, M not powers of two, L not a multiple of the layers per step).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield import fused_two_layer as fused

SMALL = mf.PallasOptions(block_batch=4, layers_per_step=4)


def _net(key, *, L=13, M=5, d=3, activation="tanh", inner_scale=1.0, **kw):
    block = mf.TwoLayerBlock(activation, inner_scale=inner_scale)
    law = mf.TwoLayerNonCentredLaw(d, sigma_u=1.0, sigma_xi=0.7)
    return mf.ResNet.sample(block, law, L=L, M=M, scaling=mf.CriticalScaling(), key=key, **kw)


def _inputs(key, n=7, d=3):
    return jr.normal(jr.fold_in(key, 99), (n, d))


def _close(a, b, rtol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(np.max(np.abs(b)), 1e-300)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= rtol * scale, np.max(np.abs(a - b)) / scale


def _forward(net, xs, **kw):
    return jax.jit(lambda net, xs: mf.forward_batch(net, xs, **kw))(net, xs)


def _backward(net, xs, ws):
    return jax.jit(jax.vmap(lambda x, w: mf.backward(net, x, w)))(xs, ws)


def _adjoint(net, xs, ws, **kw):
    return jax.jit(lambda net, xs, ws: mf.adjoint_batch(net, xs, ws, **kw))(net, xs, ws)


@pytest.mark.parametrize("activation", ["tanh", "relu", "erf"])
def test_methods_match_scan_forward(key, activation):
    net = _net(key, activation=activation, inner_scale=0.8)
    xs = _inputs(key)
    ref = _forward(net, xs, method="scan")
    # a plain Python loop over layers, independent of every method under test
    h = xs
    rho = mf.resolve_activation(activation)
    for l in range(net.L):
        u, v = net.params.u[l], net.params.v[l]
        h = h + net.alpha * rho(0.8 * h @ u.T) @ v
    _close(ref, h)
    for method in ("unroll", "pallas"):
        _close(_forward(net, xs, method=method, unroll=3, options=SMALL), ref)


def test_methods_match_scan_all_states_and_readout(key):
    d_in, D = 2, 3
    emb = jr.normal(jr.fold_in(key, 1), (D, d_in))
    read = jr.normal(jr.fold_in(key, 2), (D, 2))
    net = _net(key, d=D, embedding=emb, readout=read)
    xs = _inputs(key, d=d_in)
    ref_out = _forward(net, xs, method="scan")
    ref_all = _forward(net, xs, method="scan", return_all=True)
    for method in ("unroll", "pallas"):
        _close(_forward(net, xs, method=method, unroll=3, options=SMALL), ref_out)
        states = _forward(net, xs, method=method, unroll=3, return_all=True, options=SMALL)
        _close(states, ref_all)


def test_gradient_of_kernel_states_is_refused_clearly(key):
    """The fused kernels' states have no backward rule: `jax.grad` through them raises a
    one-line error that names the alternatives (it was JAX's 'Linearization failed'),
    while the outputs of the same kernels stay differentiable."""
    net, xs = _net(key), _inputs(key)
    kw = dict(method="pallas", return_all=True, options=SMALL)
    states = lambda xs: jnp.sum(mf.forward_batch(net, xs, **kw))
    with pytest.raises(ValueError, match="adjoint_batch") as err:
        jax.grad(states)(xs)
    assert len(str(err.value).splitlines()) == 1
    out = lambda m: lambda xs: jnp.sum(mf.forward_batch(net, xs, method=m, options=SMALL))
    _close(jax.grad(out("pallas"))(xs), jax.grad(out("scan"))(xs))


def test_seeds_batched_by_vmap(key):
    """All seeds of a grid point in one program: vmap over networks (the kernel's grid
    gains an axis) equals running each seed alone with the plain scan."""
    block = mf.TwoLayerBlock("tanh")
    law = mf.TwoLayerGaussianLaw(3)
    keys = jr.split(key, 3)
    params = jax.vmap(
        lambda k: mf.ResNet.sample(block, law, L=9, M=6, scaling=mf.MeanODEScaling(), key=k).params
    )(keys)
    alpha = 1.0 / (9 * 6)
    xs = _inputs(key, n=5)

    def run(method):
        f = lambda p: mf.forward_batch(
            mf.ResNet(block, p, alpha), xs, method=method, unroll=3, options=SMALL
        )
        return jax.jit(jax.vmap(f))(params)

    one_seed = jax.jit(lambda p: jax.vmap(mf.ResNet(block, p, alpha))(xs))
    ref = np.stack([one_seed(jax.tree.map(lambda a, s=s: a[s], params)) for s in range(3)])
    for method in ("unroll", "pallas"):
        _close(run(method), ref)


@pytest.mark.parametrize("method", ["unroll", "pallas"])
def test_gradients_match_jax_grad_of_scan(key, method):
    net = _net(key, activation="gelu", inner_scale=0.3)  # c enters every backward product
    xs = _inputs(key)
    ys = jnp.roll(xs, 1, axis=1)

    def loss(params, xs, how):
        out = mf.forward_batch(
            mf.ResNet(net.block, params, net.alpha), xs, method=how, options=SMALL
        )
        return 0.5 * jnp.mean(jnp.sum((out - ys) ** 2, axis=-1))

    ref = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(net.params, xs, "scan")
    got = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(net.params, xs, method)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref), strict=True):
        _close(a, b)


@pytest.mark.parametrize("method", ["unroll", "pallas"])
def test_adjoint_batch_matches_backward(key, method):
    net = _net(key, activation="softplus", inner_scale=0.3)
    xs = _inputs(key)
    ws = jr.normal(jr.fold_in(key, 3), xs.shape)
    adj = _backward(net, xs, ws)
    got = _adjoint(net, xs, ws, method=method, unroll=3, options=SMALL)
    _close(got.h, adj.h)
    _close(got.b, adj.b)
    for a, b in zip(jax.tree.leaves(got.grads), jax.tree.leaves(adj.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))


@pytest.mark.parametrize("method", ["unroll", "pallas"])
def test_loss_and_gradients_batch_matches_the_scan(key, method):
    """Loss, gradients (units, embedding, readout) and every state of the batched
    methods against `loss_and_gradients` (itself tested against `jax.grad`)."""
    D = 4
    emb = jr.normal(jr.fold_in(key, 5), (D, 3))
    read = jr.normal(jr.fold_in(key, 6), (D, 2))
    net = _net(key, d=D, activation="gelu", embedding=emb, readout=read)
    xs = _inputs(key)
    ys = jr.normal(jr.fold_in(key, 7), (7, 2))
    ref = jax.jit(mf.loss_and_gradients)(net, xs, ys)
    got = jax.jit(
        lambda net, xs, ys: mf.loss_and_gradients_batch(
            net, xs, ys, method=method, unroll=3, options=SMALL
        )
    )(net, xs, ys)
    _close(got.loss, ref.loss)
    _close(got.adjoint.h, ref.adjoint.h)
    _close(got.adjoint.b, ref.adjoint.b)
    assert got.adjoint.grads is None  # summed over the inputs as they go
    leaves = lambda g: jax.tree.leaves((g.params, g.embedding, g.readout))
    assert len(leaves(got.grads)) == len(leaves(ref.grads)) == 4
    for a, b in zip(leaves(got.grads), leaves(ref.grads), strict=True):
        _close(a, b)
    same = mf.loss_and_gradients_batch(net, xs, ys, method="scan")  # the oracle itself
    assert same.adjoint.grads is not None


def test_weighted_units_run_in_the_kernels(key):
    """A `WeightedUnits` 2LP (how `coupled_errors` pads a network: weights 0 and a common
    weight) takes the fused kernels, as a 2LP with v scaled by the weights: outputs,
    adjoint states and gradients equal the scan's, and no gradient reaches the weights."""
    from meanfield.blocks import WeightedUnits

    base = _net(key, activation="gelu")
    weights = jnp.where(jr.bernoulli(jr.fold_in(key, 8), 0.7, (base.L, base.M)), 2.5, 0.0)
    net = mf.ResNet(WeightedUnits(base.block), (base.params, weights), base.alpha)
    assert mf.choose_method(net, 7, "pallas") == "pallas"
    xs = _inputs(key)
    ys = jnp.roll(xs, 1, axis=1)
    _close(_forward(net, xs, method="pallas", options=SMALL), _forward(net, xs, method="scan"))
    ws = jr.normal(jr.fold_in(key, 3), xs.shape)
    ref = _adjoint(net, xs, ws, method="scan")
    got = _adjoint(net, xs, ws, method="pallas", options=SMALL)
    _close(got.h, ref.h)
    _close(got.b, ref.b)
    flat = lambda t: jax.tree.leaves(t)  # u, v, weights
    assert float(jnp.max(jnp.abs(flat(ref.grads)[1]))) > 0  # v of weighted units moves
    _close(flat(got.grads)[0], flat(ref.grads)[0])
    _close(flat(got.grads)[1], flat(ref.grads)[1])
    np.testing.assert_array_equal(flat(ref.grads)[2], 0.0)
    np.testing.assert_array_equal(flat(got.grads)[2], 0.0)

    def loss(params, how):
        out = mf.forward_batch(
            mf.ResNet(net.block, params, net.alpha), xs, method=how, options=SMALL
        )
        return 0.5 * jnp.sum((out - ys) ** 2)

    g_ref = jax.jit(jax.grad(loss), static_argnums=1)(net.params, "scan")
    g_got = jax.jit(jax.grad(loss), static_argnums=1)(net.params, "pallas")
    for a, b in zip(flat(g_got)[:2], flat(g_ref)[:2], strict=True):
        _close(a, b)
    np.testing.assert_array_equal(flat(g_got)[2], 0.0)
    shapes = jax.eval_shape(lambda: net)  # the check needs shapes only
    assert mf.pallas_supported(shapes, 7, SMALL) == (True, "ok")
    with pytest.raises(ValueError, match="w must have shape"):
        fused.fused_states(xs, base.params.u, base.params.v, lambda hL: hL[:2], _config(net))


def _config(net):
    return fused.KernelConfig(alpha=net.alpha, activation="gelu", interpret=True, block_batch=8)


@pytest.mark.parametrize(
    "activation, dtype",
    [(name, "float64") for name in mf.ACTIVATIONS] + [("gelu", "float32")],
)
def test_fused_kernels_lower_to_triton_for_a_gpu(key, activation, dtype, lower_for_cuda):
    """Every built-in ρ: the kernels of the gradient and of the adjoint lower for an H100
    from this CPU machine (Triton has no erf: gelu and erf use `meanfield.special`)."""
    net = _net(key, activation=activation)
    net = eqx.tree_at(lambda n: n.params, net, jax.tree.map(lambda p: p.astype(dtype), net.params))
    xs = _inputs(key).astype(dtype)
    gpu = mf.PallasOptions(interpret=False, block_batch=4, layers_per_step=4)

    def loss(params, xs):
        out = mf.forward_batch(
            mf.ResNet(net.block, params, net.alpha), xs, method="pallas", options=gpu
        )
        return jnp.sum(out**2)

    def adjoint(params, xs, ws):
        adj = mf.adjoint_batch(
            mf.ResNet(net.block, params, net.alpha), xs, ws, method="pallas", options=gpu
        )
        return adj.h, adj.b, adj.grads

    kernels = "xla.gpu.triton"
    assert lower_for_cuda(jax.grad(loss), net.params, xs).count(kernels) == 2
    assert lower_for_cuda(adjoint, net.params, xs, xs).count(kernels) == 2


@pytest.mark.parametrize(
    ("n", "groups", "padded"),
    # 6 tiles of 2 inputs: 2 programs of 3 tiles; 7 tiles (prime): padded to 8, 2
    # programs of 4 (without the padding, one program would loop over all 7)
    [(11, (2, 3), 12), (13, (2, 4), 16)],
)
def test_backward_kernel_accumulates_tiles(key, monkeypatch, n, groups, padded):
    """More input tiles than gradient partials: one program loops over several tiles."""
    monkeypatch.setattr(fused, "MAX_PARTIALS", 2)
    net = _net(key, L=6, M=3)
    xs = _inputs(key, n=n)
    ws = jr.normal(jr.fold_in(key, 4), xs.shape)
    opts = mf.PallasOptions(block_batch=2, layers_per_step=2)
    shape = fused._padded(n, 6, 3, 3, fused.KernelConfig(1.0, "tanh", 1.0, 2, 2))
    assert fused._groups(shape) == groups and shape.Bp == padded
    got = _adjoint(net, xs, ws, method="pallas", options=opts)
    adj = _backward(net, xs, ws)
    _close(got.b, adj.b)
    for a, b in zip(jax.tree.leaves(got.grads), jax.tree.leaves(adj.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))


def test_backward_kernel_keeps_its_programs_for_prime_batches():
    """One input per tile (the compiled default): a prime batch is padded so that the
    backward kernel still runs up to MAX_PARTIALS programs, not one."""
    assert fused.MAX_PARTIALS == 64
    for n, want in ((64, (64, 1)), (67, (34, 2)), (257, (52, 5)), (1021, (64, 16))):
        shape = fused._padded(n, 8, 16, 8, fused.KernelConfig(1.0, "tanh", 1.0, 1, 8))
        assert fused._groups(shape) == want, n
        assert shape.Bp - n < want[1]  # fewer padded inputs than tiles per program


@pytest.mark.parametrize("weight_loads", ["hoisted", "prefetch"])
def test_weight_load_placements_give_the_same_values(key, weight_loads):
    """Loads hoisted to the step's start or prefetched one step ahead: forward, the saved
    states, the adjoint kernel and the custom-VJP gradient all equal the scan's (L = 13
    is not a multiple of the 4 layers per step: the last step is padded)."""
    net = _net(key, activation="gelu")
    xs = _inputs(key)
    ws = jr.normal(jr.fold_in(key, 5), xs.shape)
    opts = SMALL._replace(weight_loads=weight_loads)
    _close(_forward(net, xs, method="pallas", options=opts), _forward(net, xs, method="scan"))
    adj, ref = _adjoint(net, xs, ws, method="pallas", options=opts), _backward(net, xs, ws)
    _close(adj.h, ref.h)
    _close(adj.b, ref.b)
    for a, b in zip(jax.tree.leaves(adj.grads), jax.tree.leaves(ref.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))

    def loss(params, how):
        out = mf.forward_batch(
            mf.ResNet(net.block, params, net.alpha), xs, method=how, options=opts
        )
        return jnp.sum(out * ws)

    grad = jax.jit(jax.grad(loss), static_argnums=1)
    for a, b in zip(
        jax.tree.leaves(grad(net.params, "pallas")),
        jax.tree.leaves(grad(net.params, "scan")),
        strict=True,
    ):
        _close(a, b)


def test_float32_kernel(key):
    net = _net(key)
    net32 = mf.ResNet(
        net.block, jax.tree.map(lambda a: a.astype(jnp.float32), net.params), net.alpha
    )
    xs = _inputs(key).astype(jnp.float32)
    out = _forward(net32, xs, method="pallas", options=SMALL)
    assert out.dtype == jnp.float32
    _close(out, _forward(net, xs.astype(jnp.float64), method="scan"), rtol=1e-5)
    # float32 weights, float64 inputs: gradients in the weights' dtype, as the scan's
    xs64 = xs.astype(jnp.float64)

    def loss(params, how):
        out = mf.forward_batch(
            mf.ResNet(net.block, params, net.alpha), xs64, method=how, options=SMALL
        )
        return jnp.sum(out**2)

    grads = {how: jax.grad(loss)(net32.params, how) for how in ("scan", "pallas")}
    for a, b in zip(*(jax.tree.leaves(g) for g in grads.values()), strict=True):
        assert a.dtype == b.dtype == jnp.float32
        _close(b, a, rtol=1e-5)


def test_method_choice_and_errors(key):
    net = _net(key)
    on_cpu = jax.default_backend() == "cpu"  # the suite also runs on a GPU machine
    assert mf.choose_method(net, 7) == ("scan" if on_cpu else "pallas")
    if on_cpu:  # compiled (non-interpret) kernels do not lower on CPU: the probe says so
        ok, reason = mf.pallas_supported(net, 7, mf.PallasOptions(interpret=False))
        assert not ok and "interpret" in reason
    assert not mf.pallas_supported(_net(key, M=4096, d=8), 7)[0]
    matrix = mf.ResNet.sample(
        mf.MatrixBlock("tanh"), mf.MatrixGaussianLaw(3), L=4, scaling=0.5, key=key
    )
    assert mf.choose_method(matrix, 7, "unroll") == "unroll"
    xs = _inputs(key)
    _close(_forward(matrix, xs, method="unroll", unroll=3), _forward(matrix, xs, method="scan"))
    with pytest.raises(ValueError, match="method must be one of"):
        mf.choose_method(net, 7, "fast")
    with pytest.raises(ValueError, match="needs a 2LP network"):
        mf.forward_batch(matrix, _inputs(key), method="pallas")
    with pytest.raises(ValueError, match="block_batch must be a power of two"):
        mf.forward_batch(
            net, _inputs(key), method="pallas", options=mf.PallasOptions(block_batch=3)
        )
    with pytest.raises(ValueError, match="weight_loads must be one of"):
        mf.forward_batch(
            net, _inputs(key), method="pallas", options=mf.PallasOptions(weight_loads="early")
        )
    with pytest.raises(ValueError, match="xs must have shape"):
        mf.forward_batch(net, jnp.ones(3))
    with pytest.raises(ValueError, match="ws must have one row per input"):
        mf.adjoint_batch(net, _inputs(key), jnp.ones((2, 3)))
    # inputs of the wrong size: every method refuses (the kernels would have padded them)
    for method in ("scan", "unroll", "pallas"):
        for d_in in (2, 4):
            with pytest.raises(ValueError, match=r"^x \(state shape"):
                mf.forward_batch(net, _inputs(key, d=d_in), method=method, options=SMALL)
            with pytest.raises(ValueError, match=r"^x \(state shape"):
                mf.adjoint_batch(net, _inputs(key, d=d_in), jnp.ones((7, d_in)), method=method)
    with pytest.raises(ValueError, match="^unroll must be a positive integer"):
        mf.forward_batch(net, _inputs(key), method="unroll", unroll=0)

    class Shifted(mf.TwoLayerBlock):  # another layer: v ρ(uᵀh + 1)
        def __call__(self, h, z):
            return z.v * jnp.tanh(z.u @ h + 1.0)

    shifted = mf.ResNet(Shifted("tanh"), net.params, net.alpha)
    assert not mf.pallas_supported(shifted, 7)[0]  # the kernels compute the plain 2LP
    with pytest.raises(ValueError, match="needs a 2LP network"):
        mf.forward_batch(shifted, _inputs(key), method="pallas")


@pytest.mark.parametrize("method", ["scan", "pallas"])
def test_one_program_per_shape(key, method):
    """Networks of one (L, M) shape share one compiled program whatever their weights
    (and α, a static value of the same float); a new L compiles once more."""
    xs = _inputs(key)
    nets = [_net(jr.fold_in(key, s), L=8) for s in range(3)] + [_net(key, L=12)]
    f = jax.jit(lambda net, xs: mf.forward_batch(net, xs, method=method, options=SMALL))
    with mf.CompileCounter() as counter:
        for net in nets:
            jax.block_until_ready(f(net, xs))
    assert counter.compiles == 2


def test_default_block_batch():
    # interpret mode: the largest tile of MAX_TILE elements (fewest interpreter steps)
    assert fused.default_block_batch(256, 16, 8) == fused.MAX_TILE // (16 * 8)
    assert fused.default_block_batch(3, 16, 8) == 4
    # compiled: one input per program while the programs fit on the device at once
    assert fused.default_block_batch(256, 16, 8, compiled=True) == 1
    many = 4 * fused.RESIDENT_PROGRAMS
    assert fused.default_block_batch(many, 16, 8, compiled=True) == 4
    assert fused.default_block_batch(many + 1, 16, 8, compiled=True) == 8
    assert fused.default_block_batch(many, 256, 8, compiled=True) == 1  # the tile's cap
