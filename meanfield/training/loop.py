"""The one gradient-descent loop (`gd_loop`: any optax optimiser on any gradient function)
and the squared loss; every model's training runs through it."""

from collections.abc import Callable

import jax
import jax.lax as lax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Int, PyTree

from .._validation import MAX_SIZE, check_finite_array


def squared_loss(y: Array, prediction: Array) -> Array:
    """`½ ‖prediction − y‖²`, so that its gradient is `prediction − y`."""
    return 0.5 * jnp.sum((prediction - y) ** 2)


def gd_loop(
    grad_fn: Callable[[PyTree, Int[Array, ""]], tuple[PyTree, PyTree]],
    theta0: PyTree,
    optimizer: optax.GradientTransformation,
    steps: int,
    *,
    last: bool = True,
    history: bool = True,
) -> tuple[PyTree, PyTree]:
    """`steps` optimiser steps from `theta0`, in one `lax.scan`.

    `grad_fn(theta, k)` returns `(grads, aux)` at step k: the gradients of the
    parameters `theta`, and anything to keep (a loss, states). With `last` (default) it
    runs `steps + 1` times, the last after the last update, so that `aux` is also known
    there; that last update is computed and dropped (the loop body is compiled once,
    not twice; a `grad_fn` whose gradients cost more than its `aux` can skip them at
    `k == steps` with `lax.cond`). Without `last` it runs `steps` times.

    **Returns:** `(thetas, auxes)`: the parameters before step k, k = 0..steps (index
    `steps`: after the last), and the aux at every step `grad_fn` ran. With
    `history=False`, `thetas` is the parameters after the last update only (long
    trainings, whose history would not fit in memory) and `last` does not apply: `aux`
    at each of the `steps` updates.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    if steps > MAX_SIZE:
        raise ValueError(f"steps must be at most 2^31 - 1, got {steps!r}")
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            f"optimizer must be an optax.GradientTransformation, got {type(optimizer).__name__}"
        )
    check_finite_array(theta0, "theta0")  # concrete leaves only: traced ones pass

    def step(carry, k):
        theta, state = carry
        grads, aux = grad_fn(theta, k)
        updates, state = optimizer.update(grads, state, theta)
        return (optax.apply_updates(theta, updates), state), ((theta if history else None), aux)

    init = (theta0, optimizer.init(theta0))
    if not history:
        (final, _), (_, auxes) = lax.scan(step, init, jnp.arange(steps))
        return final, auxes
    if last:
        _, (thetas, auxes) = lax.scan(step, init, jnp.arange(steps + 1))
        return thetas, auxes
    (final, _), (thetas, auxes) = lax.scan(step, init, jnp.arange(steps))
    thetas = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), thetas, final)
    return thetas, auxes
