"""Full-batch gradient descent on the finite ResNet (SPEC §2).

Every optimiser is an `optax.GradientTransformation`:

* `mean_ode_sgd(η, L=L, M=M)`: the mean-ODE convention, the raw gradient step
  multiplied by L·M, so the limit moves at rate Θ(1) when α = 1/(LM);
* `plain_sgd(η)`: plain gradient descent;
* any other optax optimiser (`optax.adam(1e-3)`, ...).

Gradients come from the explicit backward recursion (`loss_and_gradients`), or with
`method=` from the batched depth loops of `meanfield.depth_loop` (the fused kernels on
a GPU).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import optax
from jaxtyping import Array, Float, PyTree

from .backward import Adjoint, squared_loss
from .depth_loop import METHODS, PallasOptions, loss_and_gradients_batch
from .resnet import ResNet


def mean_ode_sgd(learning_rate: float, *, L: int, M: int) -> optax.GradientTransformation:
    """GD in the mean-ODE convention: `Z ← Z − η · L · M · ∇_Z 𝓛` (SPEC §2).

    The convention is defined for the units Z only. It is one `optax.sgd`, so with
    `train(..., train_embedding=True)` the embedding and readout take the same
    `η · L · M` step. To give them their own rate, label the trainable tuple
    `(params, embedding, readout)`: `optax.multi_transform({"units":
    mean_ode_sgd(η, L=L, M=M), "ends": optax.sgd(η_ends)}, ("units", "ends", "ends"))`.
    """
    return optax.sgd(learning_rate * L * M)


def plain_sgd(learning_rate: float) -> optax.GradientTransformation:
    """Plain gradient descent `θ ← θ − η ∇𝓛`."""
    return optax.sgd(learning_rate)


class TrainResult(eqx.Module):
    """The outcome of `train`.

    - `net`: the network after the last step.
    - `params`: the params history, every leaf with a leading axis of length
      `steps + 1` (index k holds the parameters after k steps).
    - `losses`: `(steps + 1,)`, the loss before each step and after the last.
    - `adjoint`: with `return_adjoint=True`, the `Adjoint` (forward states h, backward
      states b, gradients) of every input at every step, leaves with leading axes
      `(steps + 1, n)`; otherwise `None`. Its per-input gradients are `None` when the
      steps ran a batched method (`loss_and_gradients_batch`; `"auto"` is the scan on
      a CPU).
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
    if train_embedding:
        params, embedding, readout = values
        return ResNet(
            net.block, params, net.alpha, embedding=embedding, readout=readout, unroll=net.unroll
        )
    return ResNet(
        net.block,
        values[0],
        net.alpha,
        embedding=net.embedding,
        readout=net.readout,
        unroll=net.unroll,
    )


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
    method: str = "scan",
    options: PallasOptions | None = None,
) -> TrainResult:
    """Run `steps` full-batch optimiser steps on `(1/n) Σ_i loss(y_i, net(x_i))`.

    The loop over steps is a `lax.scan`; wrap the call in `eqx.filter_jit` (or
    `jax.jit` with the network as an argument) to compile it. The embedding and
    readout, if any, are trained only when `train_embedding` is true. With
    `return_adjoint`, the forward and backward states computed at every step are kept
    (they cost nothing extra: the gradients need them).

    `method` runs each step's depth loops (one of `meanfield.depth_loop.METHODS`,
    `options` for `"pallas"`): `"scan"` (default) is `loss_and_gradients`, the
    others `loss_and_gradients_batch` (`"auto"`: the fused kernels on a GPU where they
    apply). The values agree up to rounding.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}"
        )
    theta0 = _trainable(net, train_embedding)
    state0 = optimizer.init(theta0)

    # steps + 1 evaluations in one loop: the last one (the loss and states after the last
    # step) shares the loop body, so the compiled program holds one forward and one
    # backward loop over layers, not two of each; its update is computed and dropped
    def step(carry, _):
        theta, state = carry
        current = _with_trainable(net, theta, train_embedding)
        g = loss_and_gradients_batch(current, xs, ys, loss, method=method, options=options)
        updates, state = optimizer.update(_trainable(g.grads, train_embedding), state, theta)
        kept = g.adjoint if return_adjoint else None
        return (optax.apply_updates(theta, updates), state), (theta, g.loss, kept)

    _, (thetas, losses, adjoints) = lax.scan(step, (theta0, state0), None, length=steps + 1)
    final = _with_trainable(net, jax.tree.map(lambda a: a[-1], thetas), train_embedding)
    return TrainResult(net=final, params=thetas[0], losses=losses, adjoint=adjoints)
