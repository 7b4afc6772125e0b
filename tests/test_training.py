"""Gradient descent conventions, optax optimisers, and the training loop."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import meanfield as mf


def _problem(key, d=3, n=8, L=6, M=4):
    k1, k2, k3 = jr.split(key, 3)
    net = mf.ResNet.sample(
        mf.TwoLayerBlock("tanh"),
        mf.TwoLayerNonCentredLaw(d, sigma_u=0.8),
        L=L,
        M=M,
        scaling=mf.MeanODEScaling(),
        key=k1,
    )
    xs = jr.normal(k2, (n, d))
    ys = jnp.sin(xs) + 0.1 * jr.normal(k3, (n, d))
    return net, xs, ys


def test_mean_ode_step_is_raw_gradient_times_LM(key):
    net, xs, ys = _problem(key)
    lr = 0.05
    res = mf.train(net, xs, ys, optimizer=mf.mean_ode_sgd(lr, L=net.L, M=net.M), steps=1)
    raw = eqx.filter_grad(
        lambda n: jnp.mean(jax.vmap(lambda x, y: mf.squared_loss(y, n(x)))(xs, ys))
    )(net)
    expected = jax.tree.map(lambda p, g: p - lr * net.L * net.M * g, net.params, raw.params)
    for a, b in zip(jax.tree.leaves(res.net.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)
    # plain GD takes the raw step
    plain = mf.train(net, xs, ys, optimizer=optax.sgd(lr), steps=1)
    expected = jax.tree.map(lambda p, g: p - lr * g, net.params, raw.params)
    for a, b in zip(jax.tree.leaves(plain.net.params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)


def test_history_matches_repeated_single_steps(key):
    net, xs, ys = _problem(key)
    opt = mf.mean_ode_sgd(0.1, L=net.L, M=net.M)
    res = mf.train(net, xs, ys, optimizer=opt, steps=3)
    assert res.losses.shape == (4,)
    assert jax.tree.leaves(res.params)[0].shape[0] == 4

    def mean_loss(n):
        return jnp.mean(jax.vmap(lambda x, y: mf.squared_loss(y, n(x)))(xs, ys))

    current = net
    for k in range(4):
        at_k = [leaf[k] for leaf in jax.tree.leaves(res.params)]
        for a, b in zip(at_k, jax.tree.leaves(current.params), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-13)
        np.testing.assert_allclose(float(res.losses[k]), float(mean_loss(current)), rtol=1e-12)
        current = mf.train(current, xs, ys, optimizer=opt, steps=1).net


def test_loss_decreases_over_20_steps(key):
    net, xs, ys = _problem(key)
    res = eqx.filter_jit(
        lambda n: mf.train(n, xs, ys, optimizer=mf.mean_ode_sgd(0.2, L=n.L, M=n.M), steps=20)
    )(net)
    losses = np.asarray(res.losses)
    assert np.all(np.diff(losses) < 0), losses
    assert losses[-1] < 0.8 * losses[0]


def test_optax_optimiser_under_jit(key):
    net, xs, ys = _problem(key)
    opt = optax.adam(1e-2)
    run = eqx.filter_jit(lambda n: mf.train(n, xs, ys, optimizer=opt, steps=15))
    res = run(net)
    assert bool(jnp.all(jnp.isfinite(res.losses)))
    assert float(res.losses[-1]) < float(res.losses[0])


def _embedded(key, embedding, readout=None):
    """A small tanh 2LP network (L 3, M 2, α 0.3) on the embedding's width D."""
    D = embedding.shape[0]
    law = mf.TwoLayerGaussianLaw(D)
    return mf.ResNet.sample(
        mf.TwoLayerBlock("tanh"), law, L=3, M=2, scaling=0.3, key=key,
        embedding=embedding, readout=readout,
    )  # fmt: skip


def test_train_embedding_flag(key):
    d_in, D = 2, 4
    k = jr.split(key, 4)
    net = _embedded(k[0], jr.normal(k[1], (D, d_in)))
    xs, ys = jr.normal(k[2], (5, d_in)), jr.normal(k[3], (5, D))
    frozen = mf.train(net, xs, ys, optimizer=optax.sgd(0.1), steps=2)
    assert np.array_equal(np.asarray(frozen.net.embedding), np.asarray(net.embedding))
    trained = mf.train(net, xs, ys, optimizer=optax.sgd(0.1), steps=2, train_embedding=True)
    assert not np.allclose(np.asarray(trained.net.embedding), np.asarray(net.embedding))


def test_adam_trains_embedding_and_readout_like_a_plain_loop(key):
    """Adam over (units, embedding, readout) against a loop written here: `jax.grad` of
    the mean loss through the network's own forward pass, the optimiser state carried
    from step to step; every parameter history and loss to 1e-12."""
    d_in, D, d_out, n, steps = 2, 4, 3, 5, 4
    k = jr.split(key, 5)
    net = _embedded(k[0], jr.normal(k[1], (D, d_in)), readout=jr.normal(k[2], (D, d_out)))
    xs, ys = jr.normal(k[3], (n, d_in)), jr.normal(k[4], (n, d_out))
    opt = optax.adam(0.05)
    res = mf.train(net, xs, ys, optimizer=opt, steps=steps, train_embedding=True)

    def mean_loss(theta):
        p, e, r = theta
        current = mf.ResNet(net.block, p, net.alpha, embedding=e, readout=r)
        return jnp.mean(jax.vmap(lambda x, y: 0.5 * jnp.sum((current(x) - y) ** 2))(xs, ys))

    close = lambda a, b: np.testing.assert_allclose(
        np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13
    )
    theta = (net.params, net.embedding, net.readout)
    state = opt.init(theta)
    for step in range(steps + 1):
        for a, b in zip(jax.tree.leaves(res.params), jax.tree.leaves(theta[0]), strict=True):
            close(a[step], b)  # the units' history
        np.testing.assert_allclose(float(res.losses[step]), float(mean_loss(theta)), rtol=1e-12)
        if step < steps:
            updates, state = opt.update(jax.grad(mean_loss)(theta), state, theta)
            theta = optax.apply_updates(theta, updates)
    close(res.net.embedding, theta[1])
    close(res.net.readout, theta[2])
    assert not np.allclose(np.asarray(res.net.readout), np.asarray(net.readout))


def test_separate_rates_for_units_and_ends_as_documented(key):
    """`mean_ode_sgd`'s docstring recipe: the units take η·L·M times their gradient, the
    embedding and readout their own rate, checked against `jax.grad` written here."""
    d_in, D, d_out, n = 2, 4, 3, 5
    k = jr.split(key, 5)
    net = _embedded(k[0], jr.normal(k[1], (D, d_in)), readout=jr.normal(k[2], (D, d_out)))
    xs, ys = jr.normal(k[3], (n, d_in)), jr.normal(k[4], (n, d_out))
    eta, eta_ends = 0.05, 0.01
    opt = optax.multi_transform(
        {"units": mf.mean_ode_sgd(eta, L=net.L, M=net.M), "ends": optax.sgd(eta_ends)},
        ("units", "ends", "ends"),
    )
    res = mf.train(net, xs, ys, optimizer=opt, steps=1, train_embedding=True)

    def mean_loss(p, e, r):
        current = mf.ResNet(net.block, p, net.alpha, embedding=e, readout=r)
        return jnp.mean(jax.vmap(lambda x, y: 0.5 * jnp.sum((current(x) - y) ** 2))(xs, ys))

    g = jax.grad(mean_loss, argnums=(0, 1, 2))(net.params, net.embedding, net.readout)
    units = jax.tree.map(lambda p, q: p - eta * net.L * net.M * q, net.params, g[0])
    for a, b in zip(jax.tree.leaves(res.net.params), jax.tree.leaves(units), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)
    for a, p, q in ((res.net.embedding, net.embedding, g[1]), (res.net.readout, net.readout, g[2])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(p - eta_ends * q), rtol=1e-12)


def test_train_states_and_one_loop_pair(key):
    """The kept states of step k are those of the network after k steps (a plain loop of
    `loss_and_gradients` here), and the compiled loop holds one forward and one backward
    loop over layers for all steps + 1 evaluations (the steps loop plus 2 scans; the
    final evaluation outside the loop made it 5)."""
    net, xs, ys = _problem(key)
    # the scan over layers (a GPU's default loop runs the fused kernels instead)
    net = mf.ResNet(net.block, net.params, net.alpha, loop=mf.ScanLoop())
    opt = mf.mean_ode_sgd(0.1, L=net.L, M=net.M)
    res = mf.train(net, xs, ys, optimizer=opt, steps=2, return_adjoint=True)
    current = net
    for k in range(3):
        g = mf.loss_and_gradients(current, xs, ys)
        for name in ("h", "b"):
            got, want = getattr(res.adjoint, name)[k], getattr(g.adjoint, name)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-14)
        current = eqx.tree_at(
            lambda n: n.params,
            current,
            jax.tree.map(lambda p, u: p - 0.1 * net.L * net.M * u, current.params, g.grads.params),
        )
    for a, b in zip(jax.tree.leaves(res.net.params), jax.tree.leaves(res.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b[-1]))
    jaxpr = jax.make_jaxpr(lambda n: mf.train(n, xs, ys, optimizer=opt, steps=2))(net)
    assert len(re.findall(r"\bscan\[", str(jaxpr))) == 3


def test_fused_depth_loop_trains_like_the_scan(key):
    """A network with `FusedLoop` (Pallas interpret mode on CPU) trains to the scan's
    parameter history, losses and states, up to rounding; the trained network keeps it."""
    net, xs, ys = _problem(key)
    opt = mf.mean_ode_sgd(0.1, L=net.L, M=net.M)
    small = mf.FusedLoop(block_batch=4, layers_per_step=4)

    def run(loop):
        fn = lambda n: mf.train(n, xs, ys, optimizer=opt, steps=2, return_adjoint=True)
        return eqx.filter_jit(fn)(mf.ResNet(net.block, net.params, net.alpha, loop=loop))

    ref, got = run(mf.ScanLoop()), run(small)
    assert got.net.loop == small and ref.net.loop == mf.ScanLoop()
    assert ref.adjoint.grads is None and got.adjoint.grads is None  # states only
    pairs = [(got.losses, ref.losses), (got.adjoint.h, ref.adjoint.h)]
    pairs += [(got.adjoint.b, ref.adjoint.b)]
    pairs += list(zip(jax.tree.leaves(got.params), jax.tree.leaves(ref.params), strict=True))
    for a, b in pairs:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    moved = jax.tree.leaves(ref.params)[0]
    assert float(jnp.max(jnp.abs(moved[2] - moved[0]))) > 1e-3  # the steps do move the units
    with pytest.raises(ValueError, match="^loop must be an AbstractDepthLoop"):
        mf.ResNet(net.block, net.params, net.alpha, loop="fast")


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_gd_loop_matches_a_plain_optax_loop(steps):
    """`gd_loop` against a Python loop of optax updates written here (Adam on a quadratic
    in a pytree of two leaves): `steps + 1` parameters (before each step, then after the
    last), the aux of index k computed at the parameters before step k, and k passed."""
    A = jnp.array([[3.0, 0.5], [0.5, 1.0]])
    c = jnp.array([1.0, -2.0])

    def value(theta):
        x = theta["x"]
        return 0.5 * x @ A @ x - c @ x + jnp.sum((theta["y"] - 2.0) ** 2)

    def grad_fn(theta, k):
        return jax.grad(value)(theta), (value(theta), k, theta["y"])

    opt = optax.adam(0.3)
    theta0 = {"x": jnp.array([0.5, 0.5]), "y": jnp.array(-1.0)}
    run = jax.jit(lambda t: mf.gd_loop(grad_fn, t, opt, steps))
    thetas, (values, ks, ys) = run(theta0)
    assert jax.tree.leaves(thetas)[0].shape[0] == steps + 1 and values.shape == (steps + 1,)
    np.testing.assert_array_equal(np.asarray(ks), np.arange(steps + 1))
    theta, state = theta0, opt.init(theta0)
    for k in range(steps + 1):
        for a, b in zip(jax.tree.leaves(thetas), jax.tree.leaves(theta), strict=True):
            np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(float(values[k]), float(value(theta)), rtol=1e-13)
        np.testing.assert_allclose(float(ys[k]), float(theta["y"]), rtol=1e-13)
        updates, state = opt.update(jax.grad(value)(theta), state, theta)
        theta = optax.apply_updates(theta, updates)
    if steps:  # Adam moves every coordinate by about its rate at the first step
        assert abs(float(thetas["y"][1] - thetas["y"][0]) - 0.3) < 1e-6
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="^steps must be an integer >= 0"):
            mf.gd_loop(grad_fn, theta0, opt, bad)
    with pytest.raises(ValueError, match="^optimizer must be an optax.GradientTransformation"):
        mf.gd_loop(grad_fn, theta0, 0.1, 1)
