"""NaN and ±inf in the arrays a user hands the public API are refused at once, in one line
naming the argument (issue 46, item 8); finite arrays still run to finite results; and
under `jax.jit` (traced values, never checked) the same calls still trace and run."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import meanfield as mf
from meanfield._validation import _all_finite_on_device, check_finite_array
from meanfield.laws.depth import IIDGaussianLaw
from meanfield.limits import deep_embedded as de_limits
from meanfield.limits import perceptron as shallow_limits
from meanfield.models import deep_embedded as de
from meanfield.models import perceptron as shallow
from meanfield.models import plain as P
from meanfield.models import res1
from meanfield.theory import gradients as P_theory
from meanfield.training import deep_embedded as de_training
from meanfield.training import perceptron as shallow_training
from meanfield.training import plain as P_training
from meanfield.training import res1 as res1_training

KEY = jr.key(0)
BLOCK = mf.TwoLayerBlock("tanh")
LAW = mf.TwoLayerGaussianLaw(2)
BAD = pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
XS = jnp.array([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.2]])
YS = 0.5 * XS
LABELS = jnp.array([0, 1, 0])


def _refused(match, call, *args, **kwargs):
    """`call(*args, **kwargs)` raises a one-line ValueError matching `match`."""
    with pytest.raises(ValueError, match=match) as err:
        call(*args, **kwargs)
    assert "\n" not in str(err.value), str(err.value)


def _set(a, index, value):
    """A numpy copy of `a` with `a[index] = value` (numpy: no JAX op to compile per shape)."""
    a = np.array(a, dtype=float)
    a[index] = value
    return a


def _finite(tree):
    leaves = [x for x in jax.tree.leaves(tree) if eqx.is_inexact_array(x)]
    assert leaves and all(bool(jnp.all(jnp.isfinite(x))) for x in leaves)


def _net(**kw):
    return mf.ResNet.sample(BLOCK, LAW, L=2, M=3, scaling=0.1, key=KEY, **kw)


# ---------------------------------------------------------------- the helper


def test_the_message_names_the_argument_and_the_first_bad_entry():
    both = jnp.asarray(_set(_set(XS, (0, 1), np.nan), (2, 0), np.inf))  # a JAX array
    first = r"\(the first at index \(0, 1\): nan\)$"
    _refused(
        rf"^xs must be finite: 2 of its 6 entries are NaN or inf {first}",
        check_finite_array,
        both,
        "xs",
    )
    last = r"\(1 of its 3 entries; the first at index 2: -inf\)$"
    _refused(
        rf"^ys: contains NaN or inf {last}",
        check_finite_array,
        [1.0, 2.0, -np.inf],
        "ys",
        colon=True,
    )
    _refused(r"^lr must be finite, got nan$", check_finite_array, float("nan"), "lr")
    _refused(
        r"^lr: must be finite, got inf$", check_finite_array, np.float32(np.inf), "lr", colon=True
    )
    tree = {"u": jnp.ones(3), "v": _set(jnp.ones(3), 1, np.nan)}
    _refused(r"^params\['v'\] must be finite", check_finite_array, tree, "params")
    # what is not a floating array is left to the other checks
    for value in (None, "text", np.arange(3), np.ones(2, bool), jax.ShapeDtypeStruct((2,), float)):
        check_finite_array(value, "value")


def test_traced_values_pass_and_the_device_reduction_runs_inside_a_trace():
    good, bad = jnp.ones(3), jnp.ones(3).at[1].set(np.nan)

    @jax.jit
    def f(x):
        check_finite_array(x, "x")  # a tracer: not checked, no host round trip
        # a concrete array seen while tracing: reduced now (the path of a GPU array)
        assert _all_finite_on_device(good) and not _all_finite_on_device(bad)
        return 2 * x

    out = f(bad)
    assert bool(jnp.isnan(out[1])) and float(out[0]) == 2.0


# ---------------------------------------------------------------- ResNet


@BAD
def test_resnet_refuses_non_finite_params_embedding_readout(bad):
    params = _net().params
    u_bad = eqx.tree_at(lambda p: p.u, params, _set(params.u, (1, 0, 1), bad))
    at = r"\(the first at index \(1, 0, 1\): "
    _refused(
        rf"^params\.u must be finite: 1 of its 12 entries are NaN or inf {at}",
        mf.ResNet,
        BLOCK,
        u_bad,
        0.1,
    )
    block = mf.FunctionBlock(lambda h, z: z["v"] * jnp.tanh(z["u"] @ h))
    as_dict = {"u": params.u, "v": _set(params.v, (0, 2, 0), bad)}
    _refused(r"^params\['v'\] must be finite", mf.ResNet, block, as_dict, 0.1)
    emb, read = np.ones((2, 3)), np.ones((2, 4))
    _refused(r"^embedding must be finite", _net, embedding=_set(emb, (1, 2), bad))
    _refused(r"^readout must be finite", _net, embedding=emb, readout=_set(read, 0, bad))
    _refused(r"^readout must be finite", mf.ResNet, BLOCK, params, 0.1, readout=_set(read, 1, bad))


@BAD
def test_resnet_refuses_non_finite_inputs(bad):
    net = _net()
    _refused(r"^x must be finite: 1 of its 2 entries .* index 1: ", net, _set(XS[0], 1, bad))
    _refused(r"^x must be finite", net.embed, _set(XS[0], 0, bad))
    _refused(r"^xs must be finite", net.states, _set(XS, (2, 1), bad))
    _refused(r"^xs must be finite", net.adjoint, _set(XS, (0, 0), bad), YS)
    _refused(r"^final must be finite", net.adjoint, XS, _set(YS, (1, 1), bad))


def test_resnet_finite_and_under_jit():
    emb, read = 0.5 * jnp.ones((2, 3)), jnp.ones((2, 4))
    _finite(jax.vmap(_net(embedding=emb, readout=read))(jnp.ones((2, 3))))
    params = _net().params

    @jax.jit
    def run(params, emb, x):  # every array traced: built and run inside the trace
        fresh = mf.ResNet.sample(BLOCK, LAW, L=2, M=3, scaling=0.1, key=KEY, embedding=emb)
        return mf.ResNet(BLOCK, params, 0.1, embedding=emb)(x) + fresh(x)

    _finite(run(params, emb, jnp.ones(3)))
    # traced values are not checked: a NaN input under jit runs through (as before)
    assert bool(jnp.all(jnp.isnan(run(params, emb, jnp.full(3, np.nan)))))


# ---------------------------------------------------------------- training


@BAD
def test_training_refuses_non_finite_data_rates_and_parameters(bad):
    net, opt = _net(), optax.sgd(0.1)
    _refused(
        r"^xs must be finite", mf.train, net, _set(XS, (1, 0), bad), YS, optimizer=opt, steps=1
    )
    _refused(
        r"^ys must be finite", mf.train, net, XS, _set(YS, (2, 1), bad), optimizer=opt, steps=1
    )
    _refused(r"^xs must be finite", mf.loss_and_gradients, net, _set(XS, (0, 0), bad), YS)
    _refused(r"^ys must be finite", mf.loss_and_gradients, net, XS, _set(YS, (0, 1), bad))
    _refused(r"^learning_rate must be finite, got", mf.mean_ode_sgd, bad, L=2, M=3)
    _refused(r"^L must be finite", mf.mean_ode_sgd, 0.1, L=bad, M=3)
    theta0 = {"w": _set(np.ones(2), 1, bad)}
    _refused(r"^theta0\['w'\] must be finite", mf.gd_loop, lambda t, k: (t, None), theta0, opt, 1)


def test_training_finite_under_jit_and_a_divergence_is_still_a_result():
    opt = mf.mean_ode_sgd(0.5, L=2, M=3)
    res = eqx.filter_jit(mf.train)(_net(), XS, YS, optimizer=opt, steps=2)
    _finite((res.losses, res.net.params))
    # training that blows up returns its non-finite losses and parameters, as before: the
    # library's own results (trained parameters, gradients) are never refused
    big = mf.ResNet(mf.MatrixBlock("identity"), 30.0 * jnp.ones((2, 2, 2)), 1.0)
    blown = mf.train(big, XS, YS, optimizer=optax.sgd(1e30), steps=3)
    assert not bool(jnp.all(jnp.isfinite(blown.losses)))
    assert not bool(jnp.all(jnp.isfinite(blown.net.params)))


# ---------------------------------------------------------------- the mean ODE, coupling


def _particles():
    return mf.monte_carlo_particles(LAW, 4, key=KEY)


@BAD
def test_mean_ode_refuses_non_finite_data_and_particles(bad):
    Pt = _particles()
    _refused(r"^xs must be finite", mf.MeanODE, BLOCK, Pt, _set(XS, (0, 1), bad), YS, 0.1)
    _refused(r"^ys must be finite", mf.MeanODE, BLOCK, Pt, XS, _set(YS, (2, 0), bad), 0.1)
    z_bad = eqx.tree_at(lambda p: p.z.u, Pt, _set(Pt.z.u, (3, 1), bad))
    _refused(r"^particles\.z\.u must be finite", mf.MeanODE, BLOCK, z_bad, XS, YS, 0.1)
    w_bad = eqx.tree_at(lambda p: p.weights, Pt, _set(Pt.weights, 0, bad))
    _refused(r"^particles\.weights must be finite", mf.MeanODE, BLOCK, w_bad, XS, YS, 0.1)
    sol = mf.MeanODESolution(model=mf.MeanODE(BLOCK, Pt, XS, YS, 0.1), forward=(), backward=())
    _refused(r"^s must be finite", sol.fields, np.array([0.0, bad]))
    _refused(r"^s must be finite", sol.h, 0, bad)
    _refused(r"^z0\.u must be finite", sol.params, z_bad.z, 0, 0.5)


def test_mean_ode_finite_and_under_jit():
    Pt = _particles()
    assert mf.MeanODE(BLOCK, Pt, XS, YS, 0.1).xs is XS

    @jax.jit
    def velocity(xs, z):  # built from traced arrays inside the trace
        model = mf.MeanODE(BLOCK, mf.Particles(z=z, weights=Pt.weights), xs, xs, 0.1)
        return model.velocity(xs, z)

    _finite(velocity(XS, Pt.z))


@BAD
def test_coupling_refuses_non_finite_inputs(bad):
    Pt, net = _particles(), mf.ResNet.sample(BLOCK, LAW, L=2, M=3, scaling=1 / 6, key=KEY)
    grid = mf.LimitOnGrid(h=jnp.zeros((2, 3, 3, 2)), b=jnp.zeros((2, 3, 3, 2)))
    bad_grid = mf.LimitOnGrid(h=_set(grid.h, (1, 2, 0, 0), bad), b=grid.b)
    probes = jax.vmap(LAW.sample)(jr.split(KEY, 2))
    coupled = lambda xs=XS, ys=YS, grid=grid: mf.coupled_errors(
        net, xs, ys, grid, learning_rate=0.1
    )
    _refused(r"^xs must be finite", coupled, xs=_set(XS, 0, bad))
    _refused(r"^ys must be finite", coupled, ys=_set(YS, 0, bad))
    _refused(r"^grid\.h must be finite", coupled, grid=bad_grid)
    inputs = {"particles": Pt, "xs": XS, "ys": YS, "grid": grid, "probes": probes}
    euler = lambda **a: mf.euler_errors(BLOCK, **{**inputs, **a}, learning_rate=0.1)
    _refused(r"^xs must be finite", euler, xs=_set(XS, (1, 1), bad))
    _refused(r"^ys must be finite", euler, ys=_set(YS, (1, 1), bad))
    _refused(r"^grid\.h must be finite", euler, grid=bad_grid)
    z_bad = eqx.tree_at(lambda p: p.z.v, Pt, _set(Pt.z.v, 0, bad))
    _refused(r"^particles\.z\.v must be finite", euler, particles=z_bad)
    probes_bad = eqx.tree_at(lambda p: p.u, probes, _set(probes.u, 0, bad))
    _refused(r"^probes\.u must be finite", euler, probes=probes_bad)
    assert callable(mf.euler_errors.lower)  # pyright: ignore[reportFunctionMemberAccess]


# ---------------------------------------------------------------- neural SDE / ODE


@BAD
def test_neural_sde_refuses_non_finite_paths_inputs_weights(bad):
    path, x = np.zeros((5, 2, 2)), np.ones(2)
    sde = mf.NeuralSDE()
    _refused(r"^path must be finite", sde.solve, _set(path, (3, 0, 1), bad), x, save=4)
    _refused(r"^x must be finite", sde.solve, path, _set(x, 1, bad), save=4)
    _refused(r"^weights must be finite", mf.matrix_resnet, _set(path[:4], (0, 0, 0), bad), 0.5)
    _refused(r"^beta must be finite", mf.matrix_resnet, path[:4], bad)
    _refused(r"^x must be finite", mf.NeuralODE().solve, None, _set(x, 0, bad), save=2)


def test_neural_sde_finite_and_under_jit():
    path = 0.1 * jr.normal(KEY, (5, 2, 2)).cumsum(0)
    x = jnp.array([0.3, -0.2])
    _finite(jax.jit(lambda p, x: mf.NeuralSDE().solve(p, x, save=4).ys)(path, x))
    _finite(jax.jit(lambda w, x: mf.matrix_resnet(w, 0.5)(x))(path[1:], x))
    _finite(mf.matrix_resnet(path[1:], 0.5)(x))


# ---------------------------------------------------------------- the two-layer perceptron


@BAD
def test_perceptron_refuses_non_finite_units_inputs_rates(bad):
    net = shallow.Perceptron.sample(KEY, M=4, D=6, d_in=2, d_out=2)
    at = r"\(1 of its 24 entries; the first at index \(2, 3\): "
    u_bad = _set(net.u, (2, 3), bad)
    _refused(
        rf"^u: contains NaN or inf {at}", shallow.Perceptron, net.embedding, u_bad, net.v, jnp.tanh
    )
    emb = eqx.tree_at(lambda e: e.w_out, net.embedding, _set(net.embedding.w_out, (0, 0), bad))
    _refused(r"^embedding\.w_out: contains NaN", shallow.Perceptron, emb, net.u, net.v, jnp.tanh)
    _refused(r"^xs: contains NaN or inf", net, _set(XS, (0, 0), bad))
    kw = {"lr_u": 0.1, "lr_v": 0.1, "steps": 1}
    _refused(
        r"^ys: contains NaN or inf", shallow_training.train, net, XS, _set(YS, (1, 0), bad), **kw
    )
    _refused(
        r"^lr_u: must be finite, got", shallow_training.train, net, XS, YS, **{**kw, "lr_u": bad}
    )
    _refused(r"^xs: contains NaN or inf", shallow.check_data, _set(XS, (2, 1), bad), YS)
    _refused(r"^xs: contains NaN or inf", shallow_limits.infinite_d_grams, _set(XS, 0, bad), 2)
    g_in, g_out = np.eye(3), np.eye(2)
    g_in_bad, g_out_bad = _set(g_in, (0, 0), bad), _set(g_out, (1, 1), bad)
    _refused(
        r"^g_in: contains NaN or inf", shallow_limits.gaussian_limit, g_in_bad, g_out, YS, **kw
    )
    nodes = {"s_u": 1.0, "s_v": 1.0}
    _refused(
        r"^g_out: contains NaN", shallow_limits.gaussian_nodes, g_in, g_out_bad, **nodes, order=2
    )
    _refused(
        r"^g_in: contains NaN",
        shallow_limits.monte_carlo_nodes,
        KEY,
        g_in_bad,
        g_out,
        **nodes,
        particles=4,
    )
    p0, a0, w = np.ones((4, 3)), np.ones((4, 2)), np.full(4, 0.25)
    dynamics = lambda p0=p0, **a: shallow_limits.particle_dynamics(
        p0, a0, w, g_in, g_out, YS, "tanh", **{**kw, **a}
    )
    _refused(r"^p0: contains NaN or inf", dynamics, p0=_set(p0, (0, 0), bad))
    _refused(r"^lr_v: must be finite", dynamics, lr_v=bad)


def test_perceptron_finite_and_under_jit():
    net = shallow.Perceptron.sample(KEY, M=4, D=6, d_in=2, d_out=2)
    _finite(net(XS))
    run = jax.jit(
        lambda net, x, y: shallow_training.train(net, x, y, lr_u=0.1, lr_v=0.1, steps=1)[1:]
    )
    _finite(run(net, XS, YS))
    p0, a0 = shallow.reduce(net, XS)
    g_in, g_out = net.embedding.grams(XS)
    rates = {"lr_u": 0.1, "lr_v": 0.1, "steps": 1}
    _finite(
        shallow_limits.particle_dynamics(
            p0, a0, jnp.full(4, 0.25), g_in, g_out, YS, "tanh", **rates
        )
    )


# ---------------------------------------------------------------- the deep ResNet on an embedding


def _deep():
    return de.DeepEmbeddedResNet.sample(KEY, L=2, M=2, D=4, d_in=2, d_out=2, activation="tanh")


@BAD
def test_deep_embedded_refuses_non_finite_units_inputs_rates(bad):
    net = _deep()
    v_bad = _set(net.v, (1, 1, 3), bad)
    _refused(
        r"^v: contains NaN or inf", de.DeepEmbeddedResNet, net.embedding, net.u, v_bad, jnp.tanh
    )
    _refused(r"^xs: contains NaN or inf", net, _set(XS, (1, 1), bad))
    kw = {"eta_u": 0.1, "eta_v": 0.1, "steps": 1}
    _refused(r"^ys: contains NaN or inf", de_training.train, net, XS, _set(YS, 0, bad), **kw)
    _refused(r"^eta_u: must be finite", de_training.train, net, XS, YS, **{**kw, "eta_u": bad})
    _refused(
        r"^xs: contains NaN or inf", de_limits.linear_limit, _set(XS, (0, 0), bad), YS, steps=1
    )
    gram = _set(np.eye(4), (3, 3), bad)
    _refused(r"^gram: contains NaN or inf", de_limits.limit, XS, YS, steps=1, gram=gram)
    _refused(
        r"^eta_v: must be finite", de_limits.limit, XS, YS, steps=1, eta_v=bad, activation="tanh"
    )
    _refused(
        r"^ts: contains NaN or inf", de_limits.linear_limit, XS, YS, steps=1, ts=np.array([0, bad])
    )


def test_deep_embedded_finite_and_under_jit():
    net = _deep()
    _finite(net(XS))
    train = jax.jit(lambda net, x, y: de_training.train(net, x, y, eta_u=0.1, eta_v=0.1, steps=1))
    _finite(train(net, XS, YS))
    # the limits' shared checks pass finite data through (their solves are tested elsewhere)
    _finite(de_limits._problem(XS, YS, None, None, 1.0, 1.0, eta_u=0.1, eta_v=0.1))


# ---------------------------------------------------------------- plain and residual networks


@BAD
def test_plain_refuses_non_finite_weights_inputs_rates(bad):
    net = P.LayeredNet.sample(KEY, L=2, N=3, architecture="pre-activation", activation="tanh")
    W_bad = _set(net.W, (1, 2, 0), bad)
    _refused(r"^W must be finite", P.LayeredNet, W_bad, net.b, 0.5, "plain", "relu")
    _refused(r"^alpha must be finite, got", P.LayeredNet, net.W, net.b, bad, "plain", "relu")
    _refused(r"^x must be finite", net, _set(np.ones(3), 2, bad))
    _refused(
        r"^readout must be finite", net.gradient_log_norms, np.ones(3), _set(np.ones(3), 0, bad)
    )
    model = P.Classifier.sample(KEY, d_in=2, classes=2, L=1, N=3)
    _refused(r"^C must be finite", P.Classifier, model.A, model.net, _set(model.C, (1, 1), bad))
    _refused(r"^xs must be finite", model, _set(XS, (0, 0), bad))
    data = (XS, LABELS, _set(XS, 0, bad), LABELS)
    _refused(r"^x_test must be finite", P_training.train_classifier, model, data, steps=1, lr=0.1)
    data = (XS, LABELS, XS, LABELS)
    _refused(r"^lr must be finite", P_training.train_classifier, model, data, steps=1, lr=bad)
    _refused(r"^q must be finite", P_theory.gaussian_moments, "tanh", bad)
    _refused(
        r"^alpha must be finite",
        P_theory.predicted_log_ratio,
        "plain",
        "relu",
        "he",
        N=4,
        L=2,
        alpha=bad,
    )


def test_plain_finite_and_under_jit():
    net = P.LayeredNet.sample(KEY, L=2, N=3, architecture="pre-activation", activation="tanh")
    _finite((net(jnp.ones(3)), net.gradient_log_norms(jnp.ones(3), jnp.ones(3))))
    layered = lambda W, x: P.LayeredNet(W, jnp.zeros((2, 3)), 0.5, "pre-activation", "tanh")(x)
    _finite(jax.jit(layered)(net.W, jnp.ones(3)))
    model = P.Classifier.sample(KEY, d_in=2, classes=2, L=1, N=3)
    _finite(jax.jit(lambda m, x: m(x))(model, XS))


# ---------------------------------------------------------------- res-1 networks


@BAD
def test_res1_refuses_non_finite_weights_and_data(bad):
    model = res1.Res1Classifier.sample(KEY, IIDGaussianLaw(3), L=2, d_in=2, classes=2, beta=0.5)
    A, V, B = model.A, model.V, model.B
    _refused(
        r"^V: contains NaN or inf", res1.Res1Classifier, A, _set(V, (0, 1, 2), bad), B, model.scale
    )
    _refused(r"^scale: must be finite, got", res1.Res1Classifier, A, V, B, jnp.asarray(bad))
    _refused(r"^x: contains NaN or inf", model, _set(XS, (2, 0), bad))
    data = (_set(XS, (1, 1), bad), LABELS, XS, LABELS)
    _refused(
        r"^data: x_train: contains NaN",
        res1_training.train_res1,
        model,
        data,
        key=KEY,
        steps=1,
        batch_size=2,
    )


def test_res1_finite_and_under_jit():
    model = res1.Res1Classifier.sample(KEY, IIDGaussianLaw(3), L=2, d_in=2, classes=2, beta=0.5)
    _finite(model(XS))
    _finite(jax.jit(lambda m, x: m(x))(model, XS))
