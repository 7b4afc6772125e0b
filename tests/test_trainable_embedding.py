"""The deep ResNet on an embedding with a trainable embedding (`W_in`, `W_out` trained at
`η · D · ∇`): the finite network (`meanfield.training.deep_embedded.train`) and its
limits (`meanfield.limits.deep_embedded`, the embedding kept in the span of its initial
columns)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from meanfield.coupling import deep_embedded as de_coupling
from meanfield.limits import deep_embedded as de_limits
from meanfield.models import deep_embedded as de
from meanfield.training import deep_embedded as de_training

X = jnp.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
Y = jnp.array([[1.0], [-0.5]])


def test_one_step_closed_form_at_infinite_dimension():
    """ρ = identity, D → ∞: f_0 = 0 and, with the embedding trained too,
    f_1(x) = [(η_u s_v² + η_v s_u²) σ_in² σ_out² + η_out σ_in² + η_in σ_out²]
    (1/n) Σ_i ⟨x, x_i⟩ y_i (the embedding's two updates add W_out's change
    (η_out/n) Σ_i W_in x_i y_iᵀ and W_in's (η_in/n) Σ_i W_out y_i x_iᵀ; their cross terms
    vanish as W_inᵀ W_out / D → 0)."""
    rates = {"eta_u": 0.2, "eta_v": 0.45, "s_u": 1.3, "s_v": 0.7, "sigma_in": 0.9,
             "sigma_out": 1.2, "eta_in": 0.3, "eta_out": 0.15}  # fmt: skip
    lim = de_limits.linear_limit(X, Y, steps=1, **rates)
    units = rates["eta_u"] * rates["s_v"] ** 2 + rates["eta_v"] * rates["s_u"] ** 2
    embedding = (
        rates["eta_out"] * rates["sigma_in"] ** 2 + rates["eta_in"] * rates["sigma_out"] ** 2
    )
    c = units * rates["sigma_in"] ** 2 * rates["sigma_out"] ** 2 + embedding
    closed = c * (X @ X.T) @ Y / 2
    np.testing.assert_allclose(lim.outputs[0], 0.0, atol=1e-14)
    np.testing.assert_allclose(lim.outputs[1], closed, rtol=0, atol=1e-9)
    frozen = de_limits.linear_limit(X, Y, steps=1, **{**rates, "eta_in": 0.0, "eta_out": 0.0})
    assert float(jnp.max(jnp.abs(frozen.outputs[1] - lim.outputs[1]))) > 0.1


def _errors(L, M, D, key, activation, lim_kwargs, **rates):
    """Mean over 4 draws of (E_f, E_h) after the last of 3 steps, against the fixed-D limit
    at each draw's embedding, trainable or frozen (`lim_kwargs`)."""

    def one(k):
        net = de.DeepEmbeddedResNet.sample(k, L=L, M=M, D=D, d_in=X.shape[1], d_out=1,
                                           activation=activation)  # fmt: skip
        outputs, hidden = de_training.train(net, X, Y, eta_u=0.3, eta_v=0.3, steps=3, **rates)
        lim = de_limits.limit(X, Y, activation=activation, steps=3, eta_u=0.3, eta_v=0.3,
                              gram=de_limits.basis_gram(net.embedding),
                              ts=jnp.arange(L + 1) / L, **lim_kwargs)  # fmt: skip
        return de_coupling.errors(outputs, hidden, lim, net.embedding)

    e_f, e_h = jax.vmap(one)(jr.split(key, 4))
    return float(jnp.mean(e_f[:, -1])), float(jnp.mean(e_h[:, -1]))


def test_the_finite_network_converges_to_the_limit_with_a_trainable_embedding():
    """ρ = identity, D = 32, the embedding trained at η_in = 0.4, η_out = 0.6: after 3
    steps the finite networks approach the trainable-embedding limit as L·M grows (both
    errors fall by more than 3× from L = M = 8 to 64), and lie closer to it than to the
    frozen-embedding limit, which the test would match if the embedding did not train:
    the outputs by 47× (measured), the hidden fields by 1.7× (their error, ~sqrt(D/(LM))
    = 0.09 here, is mostly the units' Monte-Carlo spread)."""
    rates = {"eta_in": 0.4, "eta_out": 0.6}
    small = _errors(8, 8, 32, jr.key(0), "identity", rates, **rates)
    large = _errors(64, 64, 32, jr.key(1), "identity", rates, **rates)
    frozen = _errors(64, 64, 32, jr.key(1), "identity", {}, **rates)
    assert large[0] < small[0] / 3 and large[1] < small[1] / 3, (small, large)
    assert large[0] < frozen[0] / 10 and large[1] < frozen[1] / 1.4, (large, frozen)


def test_tanh_with_a_trainable_embedding_against_its_quadrature_limit():
    """ρ = tanh, d_in = d_out = 1 (the limit by Gauss–Hermite quadrature in 2p = 4
    dimensions, 12 nodes per input dimension), D = 16: the errors fall with L·M, and the
    outputs lie 10× closer to the trainable limit than to the frozen one (measured at
    L = M = 48: 190×), the hidden fields 1.4× (3.6×)."""
    global X, Y
    saved = X, Y
    X, Y = jnp.array([[1.0], [0.5]]), jnp.array([[0.8], [-0.3]])
    try:
        rates = {"eta_in": 0.5, "eta_out": 0.5}
        small = _errors(8, 8, 16, jr.key(2), "tanh", {**rates, "order": 12}, **rates)
        large = _errors(48, 48, 16, jr.key(3), "tanh", {**rates, "order": 12}, **rates)
        frozen = _errors(48, 48, 16, jr.key(3), "tanh", {"order": 12}, **rates)
    finally:
        X, Y = saved
    assert large[0] < small[0] / 2.5 and large[1] < small[1] / 2.5, (small, large)
    assert large[0] < frozen[0] / 10 and large[1] < frozen[1] / 1.4, (large, frozen)


def test_frozen_by_default():
    """η_in = η_out = 0 (the default) trains u and v only: the same outputs as before the
    embedding could train, and the frozen limit unchanged."""
    net = de.DeepEmbeddedResNet.sample(jr.key(4), L=4, M=3, D=8, d_in=3, d_out=1)
    a = de_training.train(net, X, Y, eta_u=0.2, eta_v=0.2, steps=2)
    b = de_training.train(net, X, Y, eta_u=0.2, eta_v=0.2, steps=2, eta_in=0.0, eta_out=0.0)
    np.testing.assert_array_equal(a[0], b[0])
    c = de_training.train(net, X, Y, eta_u=0.2, eta_v=0.2, steps=2, eta_in=0.1, eta_out=0.0)
    assert float(jnp.max(jnp.abs(c[0][-1] - a[0][-1]))) > 1e-4


def test_backward_fields_against_the_gradients_of_the_embedding():
    """`backward_fields` (the gradient in a perturbation of every hidden state) against two
    independent computations: at the last layer `b^L = W_out g` exactly, and with the
    inputs the identity (x_i = e_i) `b^0(x_i) = n D ∂𝓛/∂W_in[:, i]` (jax.grad of the loss in
    W_in); after training with a trainable embedding too (`final=True`)."""
    xs, ys = jnp.eye(3), jnp.array([[1.0], [-0.5], [0.2]])
    net = de.DeepEmbeddedResNet.sample(jr.key(5), L=6, M=5, D=12, d_in=3, d_out=1,
                                       activation="tanh")  # fmt: skip
    *_, net = de_training.train_with_final(net, xs, ys, eta_u=0.3, eta_v=0.3, steps=2,
                                           eta_in=0.2, eta_out=0.2)  # fmt: skip
    b = de_training.backward_fields(net, xs, ys)
    g = net(xs) - ys
    np.testing.assert_allclose(b[:, -1], g @ net.embedding.w_out.T, rtol=1e-12, atol=1e-13)

    def loss(w_in):
        moved = eqx.tree_at(lambda m: m.embedding.w_in, net, w_in)
        return 0.5 * jnp.mean(jnp.sum((moved(xs) - ys) ** 2, axis=-1))

    grad = jax.grad(loss)(net.embedding.w_in)  # (D, 3): column i is ∂𝓛/∂h^0(x_i)
    np.testing.assert_allclose(b[:, 0], 3 * 12 * grad.T, rtol=1e-11, atol=1e-13)
