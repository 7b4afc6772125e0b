"""Gradient descent on the deep ResNet on an embedding (`meanfield.models.deep_embedded`),
recording the outputs and hidden states per step."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from .._validation import check_finite_arguments
from ..engine.scan import default_unroll
from ..models.deep_embedded import DeepEmbeddedResNet

# ---------------------------------------------------------------- the finite network


def train(
    net: DeepEmbeddedResNet,
    xs,
    ys,
    *,
    eta_u: float,
    eta_v: float,
    steps: int,
    unroll: int | None = None,
    eta_in: float = 0.0,
    eta_out: float = 0.0,
    size: tuple | None = None,
) -> tuple[Float[Array, "K+1 n d_out"], Float[Array, "K+1 n L+1 D"]]:
    """`steps` GD steps in the joint-limit convention (`η · LMD · ∇`, `jax.grad` of
    `𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` on `u`, `v`), in a `lax.scan` (`unroll`: layers per
    loop step of the depth scans, as in `DeepEmbeddedResNet.hidden`). `W_in`, `W_out` are
    frozen unless `eta_in` or `eta_out` is not 0: then they train too, at `η · D · ∇` (their
    gradients have entries of order 1/D: `Σ_i ∂𝓛/∂h^0_i x_iᵀ`, `(1/n) Σ_i h^L_i g_iᵀ / D`),
    as the limit with a trainable embedding assumes (`meanfield.limits.deep_embedded`).

    `size = (L, M, D)` (Python or traced integers): `net`'s arrays hold a network of that
    shape in their corner, zero elsewhere (`DeepEmbeddedResNet.hidden`): it trains with its
    own scales and rates (`η · LMD`), its padded entries stay zero, and the hidden states
    come padded (rows beyond L repeat `h^L`, coordinates beyond D are 0), so one compiled
    program serves every shape its arrays hold.

    **Returns:** `(outputs, hidden)` after k = 0..steps updates: outputs (steps + 1, n,
    d_out) and hidden states (steps + 1, n, L + 1, D). Jittable and vmappable over `net`.
    """
    outputs, hidden, _ = train_with_final(
        net, xs, ys, eta_u=eta_u, eta_v=eta_v, steps=steps, unroll=unroll, eta_in=eta_in,
        eta_out=eta_out, size=size,
    )  # fmt: skip
    return outputs, hidden


def train_with_final(
    net: DeepEmbeddedResNet,
    xs,
    ys,
    *,
    eta_u: float,
    eta_v: float,
    steps: int,
    unroll: int | None = None,
    eta_in: float = 0.0,
    eta_out: float = 0.0,
    size: tuple | None = None,
) -> tuple[Float[Array, "K+1 n d_out"], Float[Array, "K+1 n L+1 D"], DeepEmbeddedResNet]:
    """`train`, returning also the network after the last update (its embedding too):
    `(outputs, hidden, net_K)`."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {steps!r}")
    check_finite_arguments(
        colon=True, xs=xs, ys=ys, eta_u=eta_u, eta_v=eta_v, eta_in=eta_in, eta_out=eta_out
    )
    unroll = default_unroll(unroll)
    L, M, D = net.u.shape if size is None else size
    frozen = all(isinstance(e, int | float) and e == 0 for e in (eta_in, eta_out))
    # the parameters trained and the scale of each one's gradient step
    rates = (eta_u * L * M * D, eta_v * L * M * D) + (() if frozen else (eta_in * D, eta_out * D))

    def forward(theta):
        new = eqx.tree_at(lambda m: (m.u, m.v), net, theta[:2])
        if not frozen:
            new = eqx.tree_at(lambda m: (m.embedding.w_in, m.embedding.w_out), new, theta[2:])
        hs = new.hidden(xs, unroll=unroll, size=size)
        return new.embedding.readout(hs[:, -1], None if size is None else D), hs

    def loss(theta):
        f, hs = forward(theta)
        return 0.5 * jnp.mean(jnp.sum((f - ys) ** 2, axis=-1)), (f, hs)

    def step(theta, _):
        grads, aux = jax.grad(loss, has_aux=True)(theta)
        return tuple(t - r * g for t, r, g in zip(theta, rates, grads, strict=True)), aux

    theta = (net.u, net.v) + (() if frozen else (net.embedding.w_in, net.embedding.w_out))
    # K gradient steps, then the outputs after the K-th update from a forward pass alone
    theta, (outputs, hidden) = lax.scan(step, theta, None, length=steps)
    f, hs = forward(theta)
    last = eqx.tree_at(lambda m: (m.u, m.v), net, theta[:2])
    if not frozen:
        last = eqx.tree_at(lambda m: (m.embedding.w_in, m.embedding.w_out), last, theta[2:])
    return jnp.concatenate([outputs, f[None]]), jnp.concatenate([hidden, hs[None]]), last


def backward_fields(net: DeepEmbeddedResNet, xs, ys) -> Float[Array, "n L+1 D"]:
    """The rescaled backward fields `b^l(x_i) = n D ∂𝓛/∂h^l(x_i)`, l = 0..L (the limit's
    `b`, of order 1 per coordinate): the gradient of the loss in a perturbation added to
    every hidden state, taken at zero."""
    L, M, D = net.u.shape
    n = xs.shape[0]

    def loss(deltas):
        h = net.embedding.embed(xs) + deltas[0]

        def layer(h, inputs):
            (u, v), delta = inputs
            h = h + net.activation(h @ u.T / D) @ v / (L * M) + delta
            return h, None

        h, _ = lax.scan(layer, h, ((net.u, net.v), deltas[1:]))
        f = net.embedding.readout(h)
        return 0.5 * jnp.mean(jnp.sum((f - ys) ** 2, axis=-1))

    grads = jax.grad(loss)(jnp.zeros((L + 1, n, D), net.u.dtype))
    return n * D * jnp.moveaxis(grads, 0, 1)
