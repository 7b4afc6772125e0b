"""The explicit backward recursion (B) against jax.grad of the forward pass."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from test_resnet import SineBlock, sine_law

import meanfield as mf


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def _nets(key, d=4, L=6, M=3, loop=None):
    nets = {
        act: mf.ResNet.sample(
            mf.TwoLayerBlock(act),
            mf.TwoLayerNonCentredLaw(d, sigma_u=0.7),
            L=L,
            M=M,
            scaling=mf.CriticalScaling(),
            key=key,
            loop=loop,
        )
        for act in ("tanh", "gelu", "softplus", "erf")
    }
    nets["sine"] = mf.ResNet.sample(
        SineBlock(), sine_law(d), L=L, M=M, scaling=0.2, key=key, loop=loop
    )
    nets["dense"] = mf.ResNet.sample(
        mf.DenseBlock("erf"), mf.DenseGaussianLaw(d, 1.25, 0.05), L=L, scaling=0.3, key=key,
        loop=loop,
    )  # fmt: skip
    return nets


@pytest.mark.parametrize("unroll", [1, 4])  # 4 does not divide L = 6
@pytest.mark.parametrize("name", ["tanh", "gelu", "softplus", "erf", "sine", "dense"])
def test_backward_recursion_matches_jax_grad(name, unroll, key):
    net = _nets(key, loop=mf.ScanLoop(unroll=unroll))[name]
    d = 4
    x = jr.normal(jr.fold_in(key, 1), (d,))
    w = jr.normal(jr.fold_in(key, 2), (d,))
    adj = net.adjoint(x[None], w[None])  # a batch of one: its gradients are the input's
    assert adj.h.shape == adj.b.shape == (1, net.L + 1, d)
    # b^0 = (∂h^L/∂h^0)ᵀ w  and  ∇_θ (w · h^L)
    b0 = jax.grad(lambda x_: w @ net(x_))(x)
    assert _rel(adj.b[0, 0], b0) < 1e-10
    assert np.array_equal(np.asarray(adj.b[0, -1]), np.asarray(w))
    gparams = jax.grad(lambda p: w @ eqx.tree_at(lambda n: n.params, net, p)(x))(net.params)
    for g, r in zip(jax.tree.leaves(adj.grads), jax.tree.leaves(gparams), strict=True):
        assert g.shape == r.shape
        assert _rel(g, r) < 1e-10
    # every intermediate b^l = (∂h^L/∂h^l)ᵀ w: check l = L/2 by differentiating the tail
    hs = net.states(x[None])[0]
    np.testing.assert_array_equal(np.asarray(adj.h[0]), np.asarray(hs))
    half = net.L // 2
    tail = eqx.tree_at(lambda n: n.params, net, jax.tree.map(lambda p: p[half:], net.params))
    bl = jax.grad(lambda h: w @ tail(h))(hs[half])
    assert _rel(adj.b[0, half], bl) < 1e-10


def test_loss_and_gradients_matches_jax_grad_with_embedding_and_readout(key):
    d_in, D, d_out, n = 3, 5, 2, 7
    k = jr.split(key, 5)
    net = mf.ResNet.sample(
        mf.TwoLayerBlock("tanh", inner_scale=1 / D),
        mf.TwoLayerGaussianLaw(D),
        L=4,
        M=3,
        scaling=mf.MeanODEScaling(),
        key=k[0],
        embedding=jr.normal(k[1], (D, d_in)),
        readout=jr.normal(k[2], (D, d_out)),
    )
    xs, ys = jr.normal(k[3], (n, d_in)), jr.normal(k[4], (n, d_out))

    def huber(y, p):
        r = p - y
        return jnp.sum(jnp.where(jnp.abs(r) < 1, 0.5 * r**2, jnp.abs(r) - 0.5))

    g = mf.loss_and_gradients(net, xs, ys, huber)

    def total(n_):
        return jnp.mean(jax.vmap(lambda x, y: huber(y, n_(x)))(xs, ys))

    ref = eqx.filter_grad(total)(net)
    assert abs(float(g.loss) - float(total(net))) < 1e-12
    assert _rel(g.grads.embedding, ref.embedding) < 1e-10
    assert _rel(g.grads.readout, ref.readout) < 1e-10
    for a, b in zip(jax.tree.leaves(g.grads.params), jax.tree.leaves(ref.params), strict=True):
        assert _rel(a, b) < 1e-10
    assert g.adjoint.b.shape == (n, 5, D)


def _scans(jaxpr) -> int:
    """Number of `scan` equations in a closed jaxpr, nested ones included."""
    return len(re.findall(r"\bscan\[", str(jaxpr)))


def test_loss_and_gradients_runs_one_forward_loop(key):
    """One loop over layers forward and one backward: the forward states that give h^L
    (hence the loss gradient w) are the states the backward recursion reuses. A final
    cotangent given as a function of h^L equals the same cotangent given as an array."""
    net = _nets(key, loop=mf.ScanLoop())["tanh"]  # a GPU's default loop is the kernels
    xs, ys = jr.normal(jr.fold_in(key, 1), (3, 4)), jr.normal(jr.fold_in(key, 2), (3, 4))
    jaxpr = jax.make_jaxpr(lambda n_: mf.loss_and_gradients(n_, xs, ys))(net)
    assert _scans(jaxpr) == 2
    jaxpr = jax.make_jaxpr(lambda n_: n_.adjoint(xs, lambda hL: hL - ys))(net)
    assert _scans(jaxpr) == 2
    hs = net.states(xs)
    w = hs[:, -1] - ys
    a, b = net.adjoint(xs, lambda hL: hL - ys), net.adjoint(xs, w)
    for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    np.testing.assert_array_equal(np.asarray(a.h), np.asarray(hs))
    with pytest.raises(ValueError, match=r"^final must give the shape of h\^L"):
        net.adjoint(xs, w[1:])
    with pytest.raises(ValueError, match=r"^final must give the shape of h\^L"):
        net.adjoint(xs, lambda hL: hL[:, 1:])


def test_per_unit_gradient_formula_for_two_layer(key):
    """∇_{z^{j,l}} = α D_2φ(h^{l-1}, z)ᵀ b^l, written out for the 2LP unit by hand."""
    d, L, M = 3, 5, 4
    net = mf.ResNet.sample(
        mf.TwoLayerBlock("tanh"),
        mf.TwoLayerNonCentredLaw(d),
        L=L,
        M=M,
        scaling=mf.MeanODEScaling(),
        key=key,
    )
    x, w = jnp.array([0.3, -0.2, 1.0]), jnp.array([1.0, 2.0, -1.0])
    adj = net.adjoint(x[None], w[None])
    U, V = np.asarray(net.params.u), np.asarray(net.params.v)
    H, B = np.asarray(adj.h[0]), np.asarray(adj.b[0])
    alpha = 1 / (L * M)
    for l in range(L):
        for j in range(M):
            pre = U[l, j] @ H[l]
            gv = alpha * np.tanh(pre) * B[l + 1]
            gu = alpha * (1 - np.tanh(pre) ** 2) * (V[l, j] @ B[l + 1]) * H[l]
            np.testing.assert_allclose(np.asarray(adj.grads.v[l, j]), gv, atol=1e-14)
            np.testing.assert_allclose(np.asarray(adj.grads.u[l, j]), gu, atol=1e-14)
