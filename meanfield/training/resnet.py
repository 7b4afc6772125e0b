"""Gradient descent (docs: Mathematics §2): one GD loop, for finite networks and for limit copies.

`gd_loop` runs any optax optimiser on any gradient function; `train` is that loop on
the loss of a `ResNet`, with the gradients from the network's depth loop
(`ResNet.adjoint`: the explicit recursion (B), or the fused kernels on a GPU);
`meanfield.coupling` runs the limit copies of a network's units through the same loop.

Optimisers are `optax.GradientTransformation`s: `mean_ode_sgd(η, L=L, M=M)` (the
mean-ODE convention, the raw gradient step multiplied by L·M, so that the limit moves
at rate Θ(1) when α = 1/(LM)), `optax.sgd(η)` (plain GD), or any other
(`optax.adam(1e-3)`, ...).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PyTree

from .._validation import check_finite_array, check_positive_int
from ..engine import Adjoint
from ..models.resnet import ResNet
from .loop import gd_loop, squared_loss


def mean_ode_sgd(
    learning_rate: float, *, L: int | Array, M: int | Array
) -> optax.GradientTransformation:
    """GD in the mean-ODE convention: `Z ← Z − η · L · M · ∇_Z 𝓛` (docs: Mathematics §2).

    The convention is defined for the units Z only. It is one `optax.sgd`, so with
    `train(..., train_embedding=True)` the embedding and readout take the same
    `η · L · M` step. To give them their own rate, label the trainable tuple
    `(params, embedding, readout)`: `optax.multi_transform({"units":
    mean_ode_sgd(η, L=L, M=M), "ends": optax.sgd(η_ends)}, ("units", "ends", "ends"))`.
    A concrete `learning_rate`, `L` or `M` that is NaN or inf is refused (one line).
    """
    for name, value in (("learning_rate", learning_rate), ("L", L), ("M", M)):
        check_finite_array(value, name)
    for name, value in (("L", L), ("M", M)):  # a depth and a width given as numbers
        if not hasattr(value, "shape"):
            check_positive_int(value, name)
    return optax.sgd(learning_rate * L * M)


class Gradients(eqx.Module):
    """Loss and gradients of `𝓛(θ) = (1/n) Σ_i loss(y_i, f(x_i))`.

    - `loss`: the scalar 𝓛.
    - `grads`: a `ResNet`-shaped pytree of gradients (params, embedding and
      readout), ready for `optax` and `eqx.apply_updates`.
    - `adjoint`: the `Adjoint` states h and b of every input (`grads=None`: the
      gradients are in `grads`).
    """

    loss: Float[Array, ""]
    grads: ResNet
    adjoint: Adjoint


def check_data(net: ResNet, xs: Array, ys: Array) -> None:
    """Raise a one-line `ValueError` if `(xs, ys)` does not fit the network, or if a
    concrete `xs` or `ys` holds NaN or inf (traced ones, under `jit`, are not checked)."""
    if jnp.ndim(xs) != 2:
        raise ValueError(f"xs must have shape (n, d_in), got {jnp.shape(xs)}")
    if jnp.ndim(ys) != 2:
        raise ValueError(f"ys must have shape (n, d_out), got {jnp.shape(ys)}")
    if jnp.shape(xs)[0] != jnp.shape(ys)[0]:
        raise ValueError(
            f"xs and ys must hold the same number of examples, got {jnp.shape(xs)[0]} "
            f"and {jnp.shape(ys)[0]}"
        )
    check_finite_array(xs, "xs")
    check_finite_array(ys, "ys")
    out = jax.eval_shape(net, xs[0])
    if out.shape != jnp.shape(ys)[1:]:
        raise ValueError(
            f"ys rows must have the network's output shape {out.shape}, got {jnp.shape(ys)[1:]}"
        )


def loss_and_gradients(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    loss: Callable = squared_loss,
) -> Gradients:
    """Mean loss over the data set and its gradients by the explicit recursion (B).

    The forward and backward loops run once for the whole batch (`ResNet.adjoint`,
    with the loss gradient as the final cotangent), by the network's depth loop.
    `loss(y, prediction)` is any differentiable scalar function; its gradient in the
    prediction comes from `jax.grad`.
    """
    check_data(net, xs, ys)
    n = jnp.shape(xs)[0]

    def head(hL, y):
        """(loss value, w = ∇_{h^L} loss, ∇_prediction loss) of one input."""
        pred, out_vjp = jax.vjp(net.output, hL)
        value, dpred = jax.value_and_grad(lambda p: loss(y, p))(pred)
        (w,) = out_vjp(dpred)
        return value, w, dpred

    heads = jax.vmap(head)
    adj = net.adjoint(xs, lambda hL: heads(hL, ys)[1])
    hL = adj.h[:, -1]
    values, _, dpred = heads(hL, ys)
    g_emb = g_read = None
    if net.embedding is not None:
        g_emb = jnp.einsum("nd,ne->de", adj.b[:, 0], xs) / n
    if net.readout is not None:
        g_read = jnp.einsum("nd,no->do", hL, dpred) / (n * net.readout.shape[0])
    # the gradients in the network's shape (not checked for NaN: a result, not an input)
    grads = net.with_params(jax.tree.map(lambda g: g / n, adj.grads), g_emb, g_read)
    return Gradients(loss=jnp.mean(values), grads=grads, adjoint=Adjoint(h=adj.h, b=adj.b))


class TrainResult(eqx.Module):
    """The outcome of `train`.

    - `net`: the network after the last step.
    - `params`: the params history, every leaf with a leading axis of length
      `steps + 1` (index k holds the parameters after k steps).
    - `losses`: `(steps + 1,)`, the loss before each step and after the last.
    - `adjoint`: with `return_adjoint=True`, the `Adjoint` states h and b of every input
      at every step, leaves with leading axes `(steps + 1, n)`; otherwise `None`.
    """

    net: ResNet
    params: PyTree
    losses: Float[Array, " steps+1"]
    adjoint: Adjoint | None = None


def _trainable(net: ResNet, train_embedding: bool):
    if train_embedding:
        return (net.params, net.embedding, net.readout)
    return (net.params,)


def _with_trainable(net: ResNet, values, train_embedding: bool) -> ResNet:
    embedding, readout = (values[1], values[2]) if train_embedding else (net.embedding, net.readout)
    # not checked for NaN: trained parameters that diverged are a result to report
    return net.with_params(values[0], embedding, readout)


def train(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    *,
    optimizer: optax.GradientTransformation,
    steps: int,
    loss: Callable = squared_loss,
    train_embedding: bool = False,
    return_adjoint: bool = False,
) -> TrainResult:
    """Run `steps` full-batch optimiser steps on `(1/n) Σ_i loss(y_i, net(x_i))`.

    `gd_loop` with the gradients of `loss_and_gradients` (the network's own depth
    loop, `net.loop`); wrap the call in `eqx.filter_jit` (or `jax.jit` with the
    network as an argument) to compile it. The embedding and readout, if any, are
    trained only when `train_embedding` is true. With `return_adjoint`, the forward
    and backward states computed at every step are kept (they cost nothing extra: the
    gradients need them).
    """
    check_data(net, xs, ys)

    def grad_fn(theta, k):
        g = loss_and_gradients(_with_trainable(net, theta, train_embedding), xs, ys, loss)
        kept = g.adjoint if return_adjoint else None
        return _trainable(g.grads, train_embedding), (g.loss, kept)

    thetas, (losses, adjoints) = gd_loop(
        grad_fn, _trainable(net, train_embedding), optimizer, steps
    )
    final = _with_trainable(net, jax.tree.map(lambda a: a[-1], thetas), train_embedding)
    return TrainResult(net=final, params=thetas[0], losses=losses, adjoint=adjoints)
