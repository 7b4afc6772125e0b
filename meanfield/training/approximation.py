"""Fitting a function with a fully connected ReLU network (the lecture "Universal
approximation & going deep"): `mlp_shape` (the width that spends a parameter budget at a
given depth), `sample_mlp` (equinox's `eqx.nn.MLP`, its default initialisation) and
`fit_mlp` (full-batch Adam on the mean squared error, or on the cross-entropy of a
classifier's logits, through `meanfield.gd_loop`).

A network of `depth` hidden layers of `width` ReLU units, input dimension `d`, `outputs`
outputs (one by default):

    parameters = (d + 1) width + (depth − 1)(width + 1) width + (width + 1) outputs.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from .._validation import check_finite_arguments
from .loop import gd_loop


def mlp_parameters(d: int, width: int, depth: int, outputs: int = 1) -> int:
    """The number of weights and biases of `depth` hidden ReLU layers of `width` units on
    `d` inputs, with `outputs` outputs."""
    for name, value in (("d", d), ("width", width), ("depth", depth), ("outputs", outputs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return (d + 1) * width + (depth - 1) * (width + 1) * width + (width + 1) * outputs


def mlp_shape(budget: int, d: int, depth: int) -> tuple[int, int]:
    """The largest width whose network of `depth` hidden layers on `d` inputs has at most
    `budget` parameters. **Returns:** `(width, parameters)`; a one-line ValueError naming
    `budget` where even width 1 exceeds it."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    smallest = mlp_parameters(d, 1, depth)
    if smallest > budget:
        raise ValueError(
            f"budget: {budget} parameters are fewer than the {smallest} of a width-1 network "
            f"of depth {depth} on {d} input(s)"
        )
    # parameters = (depth − 1) w² + (d + depth + 1) w + 1: the positive root, then exact
    a, b, c = depth - 1, d + depth + 1, 1 - budget
    root = -c / b if a == 0 else (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    width = max(1, int(root))
    while width > 1 and mlp_parameters(d, width, depth) > budget:
        width -= 1
    while mlp_parameters(d, width + 1, depth) <= budget:
        width += 1
    return width, mlp_parameters(d, width, depth)


def sample_mlp(key, *, d: int, width: int, depth: int, outputs: int | None = None) -> eqx.nn.MLP:
    """`eqx.nn.MLP(d, outputs, width, depth, relu)` with its default initialisation (each
    layer's weights and biases uniform on ±1/sqrt(fan_in)); one scalar output by default."""
    out = "scalar" if outputs is None else outputs
    return eqx.nn.MLP(d, out, width, depth, activation=jax.nn.relu, key=key)


def predict(model: eqx.nn.MLP, xs):
    """The network at each row of `xs` `(n, d)`: shape `(n,)` (`(n, outputs)` with
    several outputs)."""
    return jax.vmap(model)(xs)


LOSSES = ("mse", "cross_entropy")


def fit_mlp(model: eqx.nn.MLP, xs, ys, *, steps: int, lr, loss: str = "mse"):
    """`steps` full-batch Adam steps (learning rate `lr`, a number or a traced scalar) on
    the mean squared error of `model` on `(xs, ys)`, or (`loss="cross_entropy"`) on the
    cross-entropy of its logits against the integer labels `ys`. Jittable and vmappable
    (over keys and learning rates).

    **Returns:** `(model, losses)`: the trained model and the loss before each step,
    `(steps,)`."""
    check_finite_arguments(xs=xs, ys=ys, lr=lr)
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: use one of {', '.join(LOSSES)}")
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def mean_loss(p):
        out = predict(eqx.combine(p, static), xs)
        if loss == "cross_entropy":
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(out, ys))
        return jnp.mean((out - ys) ** 2)

    def grad_fn(p, _):
        value, g = jax.value_and_grad(mean_loss)(p)
        return g, value

    final, losses = gd_loop(grad_fn, params, optax.adam(lr), steps, history=False)
    return eqx.combine(final, static), losses
