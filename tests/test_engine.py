"""The engine: every depth loop against independent computations, on CPU in float64.

`ScanLoop` (unroll 1 and 3) and `FusedLoop` (the Pallas kernels in interpret mode)
against a plain Python loop over layers written here and `jax.grad` of it; the fused
kernels also against the scan (the reference semantics). Every shape below needs
padding in every axis of the kernels (n, d, M not powers of two, L not a multiple of
the layers per step).
"""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import meanfield as mf
from meanfield.blocks.activations import ACTIVATIONS, resolve_activation
from meanfield.engine import kernels
from meanfield.runtime.compilation import CompileCounter

SCAN = mf.ScanLoop()
SMALL = mf.FusedLoop(block_batch=4, layers_per_step=4)
# every loop under test: the scan one layer per step, unrolled (3 does not divide L = 13),
# and the fused kernels (interpret mode on a CPU)
LOOPS = {"scan": SCAN, "unroll": mf.ScanLoop(unroll=3), "pallas": SMALL}


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


def _close_trees(a, b, rtol=1e-12):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        _close(x, y, rtol)


def _with(net, loop, params=None):
    """`net` run by `loop` (and with `params` instead of its own, if given)."""
    params = net.params if params is None else params
    return mf.ResNet(
        net.block, params, net.alpha, embedding=net.embedding, readout=net.readout, loop=loop
    )


def _outputs(net, xs):
    """The outputs of a batch, its depth loop run once for the whole batch (the loop's
    `forward`, as a batched program runs it)."""
    h0 = jax.vmap(net.embed)(xs)
    return jax.vmap(net.output)(net.loop.forward(net.block, net.params, net.alpha, h0))


# the compiled helpers below are module-level functions, not lambdas made at each call: a
# network of the same structure (loop, block, shapes) run twice, in one test or in two,
# runs one compiled program (a new lambda traced and compiled it again)
_forward = jax.jit(_outputs)


@jax.jit
def _states(net, xs):
    return net.states(xs)


@jax.jit
def _adjoint(net, xs, ws):
    return net.adjoint(xs, ws)


@jax.jit
def _per_input_outputs(net, xs):
    return jax.vmap(net)(xs)  # `net(x)` of every input


@jax.jit
def _per_input_adjoint(scan, xs, ws):
    return jax.vmap(lambda x, w: scan.adjoint(x[None], w[None]))(xs, ws)


def _per_input(net, xs, ws):
    """The scan's adjoint of every input alone (batches of one, vmapped): per-input
    gradients, leaves `(n, ...)`."""
    adj = _per_input_adjoint(_with(net, SCAN), xs, ws)
    return mf.Adjoint(h=adj.h[:, 0], b=adj.b[:, 0], grads=adj.grads)


def _sum_of_outputs_times(params, net, xs, ws):
    """`Σ_i ws_i · f(x_i)` of `net` with `params` (its own loop)."""
    return jnp.sum(_outputs(_with(net, net.loop, params), xs) * ws)


_grad_of_outputs_times = jax.jit(jax.grad(_sum_of_outputs_times))


def _mean_squared_error(params, xs, net, ys):
    """`½ mean_i ‖f(x_i) − y_i‖²` of `net` with `params` (its own loop)."""
    out = _outputs(_with(net, net.loop, params), xs)
    return 0.5 * jnp.mean(jnp.sum((out - ys) ** 2, axis=-1))


# in the parameters and the inputs; one program per loop, shared by the tests below
_grad_of_mean_squared_error = jax.jit(jax.grad(_mean_squared_error, argnums=(0, 1)))


def _plain(net, params, xs, eps=None):
    """h^0..h^L `(n, L + 1, d)` of a 2LP network without embedding by a plain Python loop
    over layers, independent of every loop under test; `eps` `(n, L + 1, d)` is added to
    each h^l, so that the gradient of `Σ w·h^L` in it is the adjoint b^l."""
    rho, c = resolve_activation(net.block.activation), net.block.inner_scale
    eps = jnp.zeros((xs.shape[0], net.L + 1, xs.shape[1])) if eps is None else eps
    hs = [xs + eps[:, 0]]
    for l in range(net.L):
        u, v = params.u[l], params.v[l]
        hs.append(hs[-1] + net.alpha * rho(c * hs[-1] @ u.T) @ v + eps[:, l + 1])
    return jnp.stack(hs, axis=1)


@pytest.mark.parametrize("activation", ["tanh", "relu", "erf"])
def test_loops_match_a_plain_loop_forward(key, activation):
    net = _net(key, activation=activation, inner_scale=0.8)
    xs = _inputs(key)
    # a plain Python loop over layers, independent of every loop under test
    h = xs
    rho = resolve_activation(activation)
    for l in range(net.L):
        u, v = net.params.u[l], net.params.v[l]
        h = h + net.alpha * rho(0.8 * h @ u.T) @ v
    ref = _forward(_with(net, SCAN), xs)
    _close(ref, h)
    for loop in LOOPS.values():
        net_l = _with(net, loop)
        _close(_forward(net_l, xs), ref)  # the whole batch in one loop
        _close(jax.jit(jax.vmap(net_l))(xs), ref)  # one input per call, vmapped
        _close(_states(net_l, xs)[:, -1], ref)


def test_loops_match_scan_all_states_and_readout(key):
    d_in, D = 2, 3
    emb = jr.normal(jr.fold_in(key, 1), (D, d_in))
    read = jr.normal(jr.fold_in(key, 2), (D, 2))
    net = _net(key, d=D, embedding=emb, readout=read)
    xs = _inputs(key, d=d_in)
    ref_out = _forward(_with(net, SCAN), xs)
    ref_all = _states(_with(net, SCAN), xs)
    assert ref_all.shape == (7, net.L + 1, D)
    _close(ref_all[:, 0], xs @ emb.T)
    _close(ref_out, ref_all[:, -1] @ read / D)
    for name in ("unroll", "pallas"):
        net_l = _with(net, LOOPS[name])
        _close(_forward(net_l, xs), ref_out)
        _close(jax.jit(jax.vmap(net_l))(xs), ref_out)
        _close(_states(net_l, xs), ref_all)


def test_gradient_of_kernel_states_is_refused_clearly(key):
    """The fused kernels' states have no backward rule: `jax.grad` through them raises a
    one-line error that points to the adjoint (it was JAX's 'Linearization failed'),
    while the outputs of the same kernels stay differentiable."""
    net, xs = _with(_net(key), SMALL), _inputs(key)
    states = lambda xs: jnp.sum(net.states(xs))
    with pytest.raises(ValueError, match="adjoint") as err:
        jax.grad(states)(xs)
    assert len(str(err.value).splitlines()) == 1
    out = lambda loop: lambda xs: jnp.sum(_outputs(_with(net, loop), xs))
    ref = jax.grad(out(SCAN))(xs)
    _close(jax.grad(out(SMALL))(xs), ref)
    per_input = lambda xs: jnp.sum(jax.vmap(net)(xs))  # `net(x)` vmapped: differentiable too
    _close(jax.grad(per_input)(xs), ref)


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

    def run(loop):
        f = lambda p: _outputs(mf.ResNet(block, p, alpha, loop=loop), xs)
        return jax.jit(jax.vmap(f))(params)

    one_seed = jax.jit(lambda p: jax.vmap(mf.ResNet(block, p, alpha, loop=SCAN))(xs))
    ref = np.stack([one_seed(jax.tree.map(lambda a, s=s: a[s], params)) for s in range(3)])
    for name in ("unroll", "pallas"):
        _close(run(LOOPS[name]), ref)


@pytest.mark.parametrize("name", ["unroll", "pallas"])
def test_gradients_match_jax_grad_of_scan(key, name):
    net = _net(key, activation="gelu", inner_scale=0.3)  # c enters every backward product
    xs = _inputs(key)
    ys = jnp.roll(xs, 1, axis=1)
    ref = _grad_of_mean_squared_error(net.params, xs, _with(net, SCAN), ys)
    got = _grad_of_mean_squared_error(net.params, xs, _with(net, LOOPS[name]), ys)
    _close_trees(got, ref)


@pytest.mark.parametrize("name", list(LOOPS))
def test_adjoint_matches_jax_grad_of_a_plain_loop(key, name):
    """The explicit adjoint of every loop against `jax.grad` of the forward pass written
    as a plain Python loop here: the states h^l, every b^l (the gradient of `Σ_i w_i·h_i^L`
    in a perturbation of h^l), the gradients summed over the batch; from an array `w` and
    from a function of h^L (a loss gradient). The loop's own forward differentiates to the
    same gradients (`jax.grad` through the scan, or the kernels' custom VJP)."""
    net = _with(_net(key, activation="gelu", inner_scale=0.3), LOOPS[name])
    xs = _inputs(key)
    ws = jr.normal(jr.fold_in(key, 3), xs.shape)
    ys = jnp.roll(xs, 1, axis=1)
    eps = jnp.zeros((7, net.L + 1, 3))
    adj = _adjoint(net, xs, ws)
    _close(adj.h, _plain(net, net.params, xs))
    b = jax.grad(lambda e: jnp.sum(ws * _plain(net, net.params, xs, e)[:, -1]))(eps)
    _close(adj.b, b)
    np.testing.assert_array_equal(np.asarray(adj.b[:, -1]), np.asarray(ws))
    grads = jax.grad(lambda p: jnp.sum(ws * _plain(net, p, xs)[:, -1]))(net.params)
    _close_trees(adj.grads, grads)
    # b^L a loss gradient, from the final states
    loss = lambda hL: 0.5 * jnp.sum((hL - ys) ** 2)
    adj = jax.jit(lambda net: net.adjoint(xs, lambda hL: hL - ys))(net)
    b = jax.grad(lambda e: loss(_plain(net, net.params, xs, e)[:, -1]))(eps)
    _close(adj.b, b)
    grads = jax.grad(lambda p: loss(_plain(net, p, xs)[:, -1]))(net.params)
    _close_trees(adj.grads, grads)
    # the loop's own: `loss` is n × the mean squared error (the gradients test's program)
    own, _ = _grad_of_mean_squared_error(net.params, xs, net, ys)
    _close_trees(jax.tree.map(lambda g: xs.shape[0] * g, own), grads)


@pytest.mark.parametrize("name", ["unroll", "pallas"])
def test_batch_adjoint_matches_per_input_scan(key, name):
    """The batch's adjoint against the scan's adjoint of every input alone (batches of
    one, vmapped): the same states, and gradients that are the per-input ones summed."""
    net = _net(key, activation="softplus", inner_scale=0.3)
    xs = _inputs(key)
    ws = jr.normal(jr.fold_in(key, 3), xs.shape)
    ref = _per_input(net, xs, ws)
    got = _adjoint(_with(net, LOOPS[name]), xs, ws)
    _close(got.h, ref.h)
    _close(got.b, ref.b)
    for a, b in zip(jax.tree.leaves(got.grads), jax.tree.leaves(ref.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))


@pytest.mark.parametrize("name", ["unroll", "pallas"])
def test_loss_and_gradients_matches_the_scan(key, name):
    """Loss, gradients (units, embedding, readout) and every state of every loop against
    `loss_and_gradients` with the scan (itself tested against `jax.grad`)."""
    D = 4
    emb = jr.normal(jr.fold_in(key, 5), (D, 3))
    read = jr.normal(jr.fold_in(key, 6), (D, 2))
    net = _net(key, d=D, activation="gelu", embedding=emb, readout=read)
    xs = _inputs(key)
    ys = jr.normal(jr.fold_in(key, 7), (7, 2))
    ref = jax.jit(mf.loss_and_gradients)(_with(net, SCAN), xs, ys)
    got = jax.jit(mf.loss_and_gradients)(_with(net, LOOPS[name]), xs, ys)
    _close(got.loss, ref.loss)
    _close(got.adjoint.h, ref.adjoint.h)
    _close(got.adjoint.b, ref.adjoint.b)
    assert got.adjoint.grads is None and ref.adjoint.grads is None  # they are in `grads`
    assert got.grads.loop == LOOPS[name]  # the gradients' network keeps the loop
    leaves = lambda g: jax.tree.leaves((g.params, g.embedding, g.readout))
    assert len(leaves(got.grads)) == len(leaves(ref.grads)) == 4
    for a, b in zip(leaves(got.grads), leaves(ref.grads), strict=True):
        _close(a, b)


def test_weighted_units_run_in_the_kernels(key):
    """A `WeightedUnits` 2LP (how `coupled_errors` pads a network: weights 0 and a common
    weight) takes the fused kernels, as a 2LP with v scaled by the weights: outputs,
    adjoint states and gradients equal the scan's, and no gradient reaches the weights."""
    from meanfield.blocks.base import WeightedUnits

    # tanh: the weights enter the kernels through v, whatever ρ (gelu's kernels, which
    # take 2.5 times as long to compile in interpret mode, run in the gradient, adjoint
    # and loss tests); the kernel configuration of the auto-loop test's `supports` probe
    base = _net(key)
    weights = jnp.where(jr.bernoulli(jr.fold_in(key, 8), 0.7, (base.L, base.M)), 2.5, 0.0)
    net = mf.ResNet(WeightedUnits(base.block), (base.params, weights), base.alpha, loop=SCAN)
    assert SMALL.supports(net.block, net.params, 7) == (True, "ok")
    assert mf.AutoLoop(fused=SMALL, cpu=True).resolve(net.block, net.params, 7) == SMALL
    xs = _inputs(key)
    ys = jnp.roll(xs, 1, axis=1)
    fused = _with(net, SMALL)
    _close(_forward(fused, xs), _forward(net, xs))
    ws = jr.normal(jr.fold_in(key, 3), xs.shape)
    ref = _adjoint(net, xs, ws)
    got = _adjoint(fused, xs, ws)
    _close(got.h, ref.h)
    _close(got.b, ref.b)
    flat = lambda t: jax.tree.leaves(t)  # u, v, weights
    assert float(jnp.max(jnp.abs(flat(ref.grads)[1]))) > 0  # v of weighted units moves
    _close(flat(got.grads)[0], flat(ref.grads)[0])
    _close(flat(got.grads)[1], flat(ref.grads)[1])
    np.testing.assert_array_equal(flat(ref.grads)[2], 0.0)
    np.testing.assert_array_equal(flat(got.grads)[2], 0.0)

    def loss(params, loop):
        return 0.5 * jnp.sum((_outputs(_with(net, loop, params), xs) - ys) ** 2)

    g_ref = jax.jit(jax.grad(loss), static_argnums=1)(net.params, SCAN)
    g_got = jax.jit(jax.grad(loss), static_argnums=1)(net.params, SMALL)
    for a, b in zip(flat(g_got)[:2], flat(g_ref)[:2], strict=True):
        _close(a, b)
    np.testing.assert_array_equal(flat(g_got)[2], 0.0)
    shapes = jax.eval_shape(lambda: net)  # the check needs shapes only
    assert SMALL.supports(shapes.block, shapes.params, 7) == (True, "ok")
    with pytest.raises(ValueError, match="w must have shape"):
        kernels.fused_states(xs, base.params.u, base.params.v, lambda hL: hL[:2], _config(net))


def _config(net):
    return kernels.KernelConfig(alpha=net.alpha, activation="gelu", interpret=True, block_batch=8)


@pytest.mark.parametrize(
    "activation, dtype",
    [(name, "float64") for name in ACTIVATIONS] + [("gelu", "float32")],
)
def test_fused_kernels_lower_to_triton_for_a_gpu(key, activation, dtype, lower_for_cuda):
    """Every built-in ρ: the kernels of the gradient and of the adjoint lower for an H100
    from this CPU machine (Triton has no erf: gelu and erf use `meanfield.special`)."""
    net = _net(key, activation=activation)
    net = eqx.tree_at(lambda n: n.params, net, jax.tree.map(lambda p: p.astype(dtype), net.params))
    xs = _inputs(key).astype(dtype)
    gpu = mf.FusedLoop(interpret=False, block_batch=4, layers_per_step=4)

    def loss(params, xs):
        return jnp.sum(_outputs(_with(net, gpu, params), xs) ** 2)

    def adjoint(params, xs, ws):
        adj = _with(net, gpu, params).adjoint(xs, ws)
        return adj.h, adj.b, adj.grads

    triton = "xla.gpu.triton"
    assert lower_for_cuda(jax.grad(loss), net.params, xs).count(triton) == 2
    assert lower_for_cuda(adjoint, net.params, xs, xs).count(triton) == 2


@pytest.mark.parametrize(
    ("n", "groups", "padded"),
    # 6 tiles of 2 inputs: 2 programs of 3 tiles; 7 tiles (prime): padded to 8, 2
    # programs of 4 (without the padding, one program would loop over all 7)
    [(11, (2, 3), 12), (13, (2, 4), 16)],
)
def test_backward_kernel_accumulates_tiles(key, monkeypatch, n, groups, padded):
    """More input tiles than gradient partials: one program loops over several tiles."""
    monkeypatch.setattr(kernels, "MAX_PARTIALS", 2)
    net = _net(key, L=6, M=3)
    xs = _inputs(key, n=n)
    ws = jr.normal(jr.fold_in(key, 4), xs.shape)
    loop = mf.FusedLoop(block_batch=2, layers_per_step=2)
    shape = kernels._padded(n, 6, 3, 3, kernels.KernelConfig(1.0, "tanh", 1.0, 2, 2))
    assert kernels._groups(shape) == groups and shape.Bp == padded
    got = _adjoint(_with(net, loop), xs, ws)
    adj = _per_input(net, xs, ws)
    _close(got.b, adj.b)
    for a, b in zip(jax.tree.leaves(got.grads), jax.tree.leaves(adj.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))


def test_backward_kernel_keeps_its_programs_for_prime_batches():
    """One input per tile (the compiled default): a prime batch is padded so that the
    backward kernel still runs up to MAX_PARTIALS programs, not one."""
    assert kernels.MAX_PARTIALS == 64
    for n, want in ((64, (64, 1)), (67, (34, 2)), (257, (52, 5)), (1021, (64, 16))):
        shape = kernels._padded(n, 8, 16, 8, kernels.KernelConfig(1.0, "tanh", 1.0, 1, 8))
        assert kernels._groups(shape) == want, n
        assert shape.Bp - n < want[1]  # fewer padded inputs than tiles per program


# gelu's kernels with the loads hoisted; prefetched (the default) with tanh, gelu's
# prefetched kernels being those of the gradient, adjoint and loss tests (compiling gelu's
# kernels in interpret mode takes 2.5 times tanh's)
@pytest.mark.parametrize(
    ("weight_loads", "activation"), [("hoisted", "gelu"), ("prefetch", "tanh")]
)
def test_weight_load_placements_give_the_same_values(key, weight_loads, activation):
    """Loads hoisted to the step's start or prefetched one step ahead: forward, the saved
    states, the adjoint kernel and the custom-VJP gradient all equal the scan's (L = 13
    is not a multiple of the 4 layers per step: the last step is padded)."""
    net = _net(key, activation=activation)
    xs = _inputs(key)
    ws = jr.normal(jr.fold_in(key, 5), xs.shape)
    loop = mf.FusedLoop(block_batch=4, layers_per_step=4, weight_loads=weight_loads)
    _close(_forward(_with(net, loop), xs), _forward(_with(net, SCAN), xs))
    _close(_states(_with(net, loop), xs), _states(_with(net, SCAN), xs))
    adj, ref = _adjoint(_with(net, loop), xs, ws), _per_input(net, xs, ws)
    _close(adj.h, ref.h)
    _close(adj.b, ref.b)
    for a, b in zip(jax.tree.leaves(adj.grads), jax.tree.leaves(ref.grads), strict=True):
        _close(a, jnp.sum(b, axis=0))

    grad = lambda loop: _grad_of_outputs_times(net.params, _with(net, loop), xs, ws)
    _close_trees(grad(loop), grad(SCAN))


def test_float32_kernel(key):
    net = _net(key)
    net32 = mf.ResNet(
        net.block, jax.tree.map(lambda a: a.astype(jnp.float32), net.params), net.alpha, loop=SMALL
    )
    xs = _inputs(key).astype(jnp.float32)
    out = _forward(net32, xs)
    assert out.dtype == jnp.float32
    _close(out, _forward(_with(net, SCAN), xs.astype(jnp.float64)), rtol=1e-5)
    # float32 weights, float64 inputs: gradients in the weights' dtype, as the scan's
    xs64 = xs.astype(jnp.float64)

    def loss(params, loop):
        return jnp.sum(_outputs(_with(net, loop, params), xs64) ** 2)

    grads = {loop: jax.grad(loss)(net32.params, loop) for loop in (SCAN, SMALL)}
    for a, b in zip(*(jax.tree.leaves(g) for g in grads.values()), strict=True):
        assert a.dtype == b.dtype == jnp.float32
        _close(b, a, rtol=1e-5)


def test_auto_loop_resolves_by_backend_and_block(key):
    """`AutoLoop`: the scan on a CPU (its `unroll`), the fused kernels of a 2LP with
    `cpu=True` (or on an accelerator), the scan for every other block; `FusedLoop.supports`
    says why the kernels do not apply."""
    net = _net(key)
    on_cpu = jax.default_backend() == "cpu"  # the suite also runs on a GPU machine
    scan = mf.ScanLoop(1 if on_cpu else 8)  # a loop step costs kernel launches on a GPU
    auto = mf.AutoLoop().resolve(net.block, net.params, 7)
    assert auto == (mf.ScanLoop() if on_cpu else mf.FusedLoop())
    assert isinstance(net.loop, mf.AutoLoop)  # the default of every network
    if on_cpu:
        assert mf.AutoLoop(unroll=4).resolve(net.block, net.params, 7) == mf.ScanLoop(4)
        # compiled (non-interpret) kernels do not lower on CPU: the probe says so
        ok, reason = mf.FusedLoop(interpret=False).supports(net.block, net.params, 7)
        assert not ok and "interpret" in reason
    assert mf.AutoLoop(cpu=True).resolve(net.block, net.params, 7) == mf.FusedLoop()
    tiny = mf.AutoLoop(fused=SMALL, cpu=True)
    assert tiny.resolve(net.block, net.params, 7) == SMALL
    big = _net(key, M=4096, d=8)
    ok, reason = mf.FusedLoop().supports(big.block, big.params, 7)
    assert not ok and "exceeds a kernel tile" in reason
    with warnings.catch_warnings():  # a 2LP left to the scan warns, once per process
        warnings.simplefilter("ignore")
        assert mf.AutoLoop(cpu=True).resolve(big.block, big.params, 7) == scan
    matrix = mf.ResNet.sample(
        mf.MatrixBlock("tanh"), mf.MatrixGaussianLaw(3), L=4, scaling=0.5, key=key
    )
    ok, reason = mf.FusedLoop().supports(matrix.block, matrix.params, 7)
    assert not ok and "not a 2LP" in reason
    assert mf.AutoLoop(cpu=True).resolve(matrix.block, matrix.params, 7) == scan
    assert mf.AutoLoop(unroll=4).resolve(matrix.block, matrix.params, 7) == mf.ScanLoop(4)
    # AutoLoop runs what it resolves to: the kernels' values (to rounding), the scan's
    xs = _inputs(key)
    _close(_forward(_with(net, tiny), xs), _forward(_with(net, SCAN), xs))
    _close(_states(_with(net, tiny), xs), _states(_with(net, SCAN), xs))


def test_loop_errors(key):
    net = _net(key)
    xs = _inputs(key)
    matrix = mf.ResNet.sample(
        mf.MatrixBlock("tanh"), mf.MatrixGaussianLaw(3), L=4, scaling=0.5, key=key
    )
    _close(_states(_with(matrix, mf.ScanLoop(unroll=3)), xs), _states(_with(matrix, SCAN), xs))
    for bad in ("scan", mf.ScanLoop, 3):  # a name, the class itself, a number
        with pytest.raises(ValueError, match="^loop must be an AbstractDepthLoop") as err:
            mf.ResNet(net.block, net.params, net.alpha, loop=bad)
        assert "\n" not in str(err.value)
    for make, match in (
        (lambda: mf.FusedLoop(block_batch=3), "^block_batch must be a power of two"),
        (lambda: mf.FusedLoop(block_batch=0), "^block_batch must be a power of two"),
        (lambda: mf.FusedLoop(layers_per_step=0), "^layers_per_step must be >= 1"),
        (lambda: mf.FusedLoop(layers_per_step=2.0), "^layers_per_step must be >= 1"),
        (lambda: mf.FusedLoop(weight_loads="early"), "^weight_loads must be one of"),
        (lambda: mf.ScanLoop(unroll=0), "^unroll must be a positive integer"),
    ):
        with pytest.raises(ValueError, match=match) as err:
            make()
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="^loop: FusedLoop needs a 2LP network"):
        _with(matrix, SMALL).states(xs)
    with pytest.raises(ValueError, match="^loop: FusedLoop needs a 2LP network"):
        _with(matrix, SMALL).adjoint(xs, xs)
    with pytest.raises(ValueError, match="^loop: FusedLoop needs a 2LP network"):
        _with(matrix, SMALL)(xs[0])
    with pytest.raises(ValueError, match="xs must have shape"):
        net.states(jnp.ones(3))
    with pytest.raises(ValueError, match="xs must have shape"):
        net.adjoint(jnp.ones(3), jnp.ones(3))
    # a final cotangent of another shape than h^L (the kernels' check calls it w)
    final = r"^(final must give the shape of h\^L|w must have shape \(n, d\))"
    for loop in LOOPS.values():
        with pytest.raises(ValueError, match=final):
            _with(net, loop).adjoint(xs, jnp.ones((2, 3)))
        with pytest.raises(ValueError, match=final):
            _with(net, loop).adjoint(xs, lambda hL: hL[:2])
        # inputs of the wrong size: every loop refuses (the kernels would have padded them)
        for d_in in (2, 4):
            with pytest.raises(ValueError, match=r"^x \(state shape"):
                _with(net, loop).states(_inputs(key, d=d_in))
            with pytest.raises(ValueError, match=r"^x \(state shape"):
                _with(net, loop).adjoint(_inputs(key, d=d_in), jnp.ones((7, d_in)))

    class Shifted(mf.TwoLayerBlock):  # another layer: v ρ(uᵀh + 1)
        def __call__(self, h, z):
            return z.v * jnp.tanh(z.u @ h + 1.0)

    shifted = mf.ResNet(Shifted("tanh"), net.params, net.alpha, loop=SMALL)
    assert not SMALL.supports(shifted.block, shifted.params, 7)[0]  # the kernels: plain 2LP
    with pytest.raises(ValueError, match="^loop: FusedLoop needs a 2LP network"):
        shifted.states(xs)


@pytest.mark.parametrize("name", ["scan", "pallas"])
def test_one_program_per_shape(key, name):
    """Networks of one (L, M) shape share one compiled program whatever their weights
    (and α, a static value of the same float); a new L compiles once more."""
    xs = _inputs(key)
    loop = LOOPS[name]
    nets = [_net(jr.fold_in(key, s), L=8, loop=loop) for s in range(3)]
    nets += [_net(key, L=12, loop=loop)]
    f = jax.jit(_outputs)
    with CompileCounter() as counter:
        for net in nets:
            jax.block_until_ready(f(net, xs))
    assert counter.compiles == 2


def test_default_block_batch():
    # interpret mode: the largest tile of MAX_TILE elements (fewest interpreter steps)
    assert kernels.default_block_batch(256, 16, 8) == kernels.MAX_TILE // (16 * 8)
    assert kernels.default_block_batch(3, 16, 8) == 4
    # compiled: one input per program while the programs fit on the device at once
    assert kernels.default_block_batch(256, 16, 8, compiled=True) == 1
    many = 4 * kernels.RESIDENT_PROGRAMS
    assert kernels.default_block_batch(many, 16, 8, compiled=True) == 4
    assert kernels.default_block_batch(many + 1, 16, 8, compiled=True) == 8
    assert kernels.default_block_batch(many, 256, 8, compiled=True) == 1  # the tile's cap


class PythonLoop(mf.AbstractDepthLoop):
    """The example of `AbstractDepthLoop`'s docstring, as written there."""

    def forward(self, block, params, alpha, h0, *, return_all=False):
        hs = [h0]
        for l in range(mf.engine.depth_of(params)):
            theta = jax.tree.map(lambda p: p[l], params)  # noqa: B023 (called at once)
            hs.append(hs[-1] + alpha * jax.vmap(block.layer, (0, None))(hs[-1], theta))
        return jnp.stack(hs, axis=1) if return_all else hs[-1]

    def adjoint(self, block, params, alpha, h0, final):
        return mf.ScanLoop().adjoint(block, params, alpha, h0, final)


def test_the_docstring_python_loop_is_a_loop(key):
    """A user's loop (the docstring example) runs a network like the scan: outputs, states,
    the adjoint and the training; unit and layer blocks, with an embedding and readout."""
    D = 4
    emb = jr.normal(jr.fold_in(key, 1), (D, 3))
    read = jr.normal(jr.fold_in(key, 2), (D, 2))
    xs = _inputs(key)
    ys = jr.normal(jr.fold_in(key, 3), (7, 2))
    unit = _net(key, d=D, L=5, activation="gelu", embedding=emb, readout=read)
    layer = mf.ResNet.sample(
        mf.DenseBlock("erf"), mf.DenseGaussianLaw(3, 1.25, 0.05), L=5, scaling=0.3, key=key
    )
    for net in (unit, layer):  # compiled, as `train` runs the loop (op by op: 77 programs)
        mine, scan = _with(net, PythonLoop()), _with(net, SCAN)
        assert isinstance(mine.loop, PythonLoop)
        _close(_per_input_outputs(mine, xs), _per_input_outputs(scan, xs))
        _close(_states(mine, xs), _states(scan, xs))
        _close(_forward(mine, xs), _forward(scan, xs))
    mine, scan = _with(unit, PythonLoop()), _with(unit, SCAN)
    opt = optax.sgd(0.1)
    a = mf.train(mine, xs, ys, optimizer=opt, steps=2, return_adjoint=True)
    b = mf.train(scan, xs, ys, optimizer=opt, steps=2, return_adjoint=True)
    assert isinstance(a.net.loop, PythonLoop)
    _close(a.losses, b.losses)
    _close_trees(a.params, b.params)
    _close(a.adjoint.b, b.adjoint.b)
