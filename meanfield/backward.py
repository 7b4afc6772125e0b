"""Explicit backward pass: the adjoint recursion (B) of SPEC §2.

    b^L = w,   b^{l-1} = b^l + α Σ_j D_1φ(h^{l-1}, z^{j,l})ᵀ b^l,
    ∇_{z^{j,l}} 𝓛_i = α D_2φ(h^{l-1}, z^{j,l})ᵀ b^l.

D_1φ and D_2φ are applied as vector-Jacobian products (`jax.vjp` of the block),
never written by hand. The result agrees with `jax.grad` of the forward pass to
round-off (tested).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .resnet import ResNet


class Adjoint(eqx.Module):
    """Forward states, backward states and parameter gradients for one input.

    - `h`: `(L + 1, d)`, the forward pass h^0..h^L.
    - `b`: `(L + 1, d)`, the backward pass b^0..b^L (b^L = w).
    - `grads`: the params pytree of the network, each leaf the gradient
      `α D_2φ(h^{l-1}, z^{j,l})ᵀ b^l` of that parameter; None where a batched depth
      loop summed the gradients over the inputs (`loss_and_gradients_batch`).
    """

    h: Float[Array, "L+1 d"]
    b: Float[Array, "L+1 d"]
    grads: PyTree


def backward(net: ResNet, x: Float[Array, " d_in"], w: Float[Array, " d"]) -> Adjoint:
    """Run the adjoint recursion (B) for one input `x` and final cotangent `w = ∇_{h^L} loss`.

    No Python loop over layers: the forward pass and the backward pass are each a
    `lax.scan`.
    """
    return backward_from_states(net, net.hidden(x, return_all=True), w)


def backward_from_states(net: ResNet, hs: Float[Array, "L+1 d"], w: Float[Array, " d"]) -> Adjoint:
    """`backward` from the forward states `hs` = h^0..h^L already computed.

    For a caller that needs h^L before it can form `w` (a loss gradient): it runs
    `net.hidden(x, return_all=True)` once and passes the states here, so the forward
    pass runs once, not twice.
    """
    if jnp.ndim(hs) != 2 or jnp.shape(hs)[0] != net.L + 1:
        raise ValueError(f"hs must have shape (L + 1, d) = ({net.L + 1}, d), got {jnp.shape(hs)}")
    if jnp.shape(w) != hs.shape[1:]:
        raise ValueError(f"w must have the shape of h^L {hs.shape[1:]}, got {jnp.shape(w)}")
    alpha = net.alpha

    def step(b, inputs):
        h_prev, theta = inputs
        _, vjp = jax.vjp(net.block.layer, h_prev, theta)
        gh, gtheta = vjp(b)
        b_prev = b + alpha * gh
        return b_prev, (b_prev, jax.tree.map(lambda g: alpha * g, gtheta))

    _, (bs, grads) = lax.scan(
        step, w, (hs[:-1], net.params), reverse=True, unroll=min(net.unroll, net.L)
    )
    return Adjoint(h=hs, b=jnp.concatenate([bs, w[None]], axis=0), grads=grads)


def squared_loss(y: Array, prediction: Array) -> Array:
    """`½ ‖prediction − y‖²`, so that its gradient is `prediction − y`."""
    return 0.5 * jnp.sum((prediction - y) ** 2)


class Gradients(eqx.Module):
    """Loss and gradients of `𝓛(θ) = (1/n) Σ_i loss(y_i, f(x_i))`.

    - `loss`: the scalar 𝓛.
    - `grads`: a `ResNet`-shaped pytree of gradients (params, embedding and
      readout), ready for `optax` and `eqx.apply_updates`.
    - `adjoint`: the per-input `Adjoint`, leaves batched over the n inputs.
    """

    loss: Float[Array, ""]
    grads: ResNet
    adjoint: Adjoint


def check_data(net: ResNet, xs: Array, ys: Array) -> None:
    """Raise a one-line `ValueError` if `(xs, ys)` does not fit the network."""
    if jnp.ndim(xs) != 2:
        raise ValueError(f"xs must have shape (n, d_in), got {jnp.shape(xs)}")
    if jnp.ndim(ys) != 2:
        raise ValueError(f"ys must have shape (n, d_out), got {jnp.shape(ys)}")
    if jnp.shape(xs)[0] != jnp.shape(ys)[0]:
        raise ValueError(
            f"xs and ys must hold the same number of examples, got {jnp.shape(xs)[0]} "
            f"and {jnp.shape(ys)[0]}"
        )
    out = jax.eval_shape(net, xs[0])
    if out.shape != jnp.shape(ys)[1:]:
        raise ValueError(
            f"ys rows must have the network's output shape {out.shape}, got {jnp.shape(ys)[1:]}"
        )


def output_cotangent(net: ResNet, hL: Array, y: Array, loss: Callable = squared_loss):
    """For one input: `(loss value, w = ∇_{h^L} loss, ∇_prediction loss)` at the final
    state `hL`; `w` is the `b^L` that starts the adjoint recursion (B)."""
    pred, out_vjp = jax.vjp(net.output, hL)
    value, dpred = jax.value_and_grad(lambda p: loss(y, p))(pred)
    (w,) = out_vjp(dpred)
    return value, w, dpred


def loss_and_gradients(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    loss: Callable = squared_loss,
) -> Gradients:
    """Mean loss over the data set and its gradients via the explicit recursion (B).

    `loss(y, prediction)` is any differentiable scalar function; its gradient in
    the prediction comes from `jax.grad`.
    """
    check_data(net, xs, ys)

    def one(x, y):
        hs = net.hidden(x, return_all=True)  # one forward pass serves both halves
        hL = hs[-1]
        value, w, dpred = output_cotangent(net, hL, y, loss)
        adj = backward_from_states(net, hs, w)
        g_emb = None if net.embedding is None else jnp.outer(adj.b[0], x)
        g_read = None
        if net.readout is not None:
            g_read = jnp.outer(hL, dpred) / net.readout.shape[0]
        return value, adj, g_emb, g_read

    values, adjs, g_emb, g_read = jax.vmap(one)(xs, ys)
    n = xs.shape[0]
    mean = lambda t: None if t is None else jax.tree.map(lambda a: jnp.sum(a, axis=0) / n, t)
    grads = ResNet(
        net.block,
        mean(adjs.grads),
        net.alpha,
        embedding=mean(g_emb),
        readout=mean(g_read),
    )
    return Gradients(loss=jnp.mean(values), grads=grads, adjoint=adjs)
