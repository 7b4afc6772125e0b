"""Fitting a function with a fully connected ReLU network (the lecture "Universal
approximation & going deep"): `mlp_shape` (the width that spends a parameter budget at a
given depth), `sample_mlp` (equinox's `eqx.nn.MLP`, its default initialisation) and
`fit_mlp` (full-batch Adam on the mean squared error, or on the cross-entropy of a
classifier's logits, through `meanfield.gd_loop`); beside the plain network a residual
one (`ResidualMLP`, `sample_residual_mlp`), and `network_shape`/`sample_network` naming
either by its architecture (`ARCHITECTURES`).

A network of `depth` hidden layers of `width` ReLU units, input dimension `d`, `outputs`
outputs (one by default):

    parameters = (d + 1) width + (depth − 1)(width + 1) width + (width + 1) outputs.

The residual network (`ResidualMLP`, pre-activation blocks) of the same width and depth
has the same linear layers, so the same count; with its layer norms (`norm=True`) each
of its `depth` norms adds a gain and a bias per unit, 2 width depth in all:

    h ← W₀ x + b₀;  h ← h + (W_l relu(N_l h) + b_l)/sqrt(depth − 1), l = 1 … depth − 1;
    out = W_out relu(N_depth h) + b_out,

N the identity (`norm=False`) or a layer norm. At depth 1 it is the plain network.
"""

import math
from collections.abc import Callable

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
    return _solve_width(budget, d, depth, lambda w: mlp_parameters(d, w, depth))


def _solve_width(budget: int, d: int, depth: int, count, extra_per_unit: int = 0):
    """The largest width whose `count(width)` is at most `budget` (`count` =
    (depth − 1) w² + (d + depth + 1 + extra_per_unit) w + 1). **Returns:** `(width,
    parameters)`; a one-line ValueError naming `budget` where even width 1 exceeds it."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1, got {budget!r}")
    smallest = count(1)
    if smallest > budget:
        raise ValueError(
            f"budget: {budget} parameters are fewer than the {smallest} of a width-1 network "
            f"of depth {depth} on {d} input(s)"
        )
    # the positive root of the quadratic, then exact
    a, b, c = depth - 1, d + depth + 1 + extra_per_unit, 1 - budget
    root = -c / b if a == 0 else (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    width = max(1, int(root))
    while width > 1 and count(width) > budget:
        width -= 1
    while count(width + 1) <= budget:
        width += 1
    return width, count(width)


def sample_mlp(key, *, d: int, width: int, depth: int, outputs: int | None = None) -> eqx.nn.MLP:
    """`eqx.nn.MLP(d, outputs, width, depth, relu)` with its default initialisation (each
    layer's weights and biases uniform on ±1/sqrt(fan_in)); one scalar output by default."""
    out = "scalar" if outputs is None else outputs
    return eqx.nn.MLP(d, out, width, depth, activation=jax.nn.relu, key=key)


ARCHITECTURES = ("plain", "residual", "residual-norm")


def residual_parameters(d: int, width: int, depth: int, *, norm: bool = False,
                        outputs: int = 1) -> int:  # fmt: skip
    """The parameters of `ResidualMLP`: the plain network's (`mlp_parameters`), and with
    `norm` each of the `depth` layer norms' gain and bias (2 width depth)."""
    return mlp_parameters(d, width, depth, outputs) + (2 * width * depth if norm else 0)


def network_parameters(d: int, width: int, depth: int, architecture: str = "plain") -> int:
    """The parameter count of the network `sample_network` draws (one output)."""
    _check_architecture(architecture)
    return residual_parameters(d, width, depth, norm=architecture == "residual-norm")


def network_shape(budget: int, d: int, depth: int, architecture: str = "plain"):
    """`mlp_shape` for any of `ARCHITECTURES`: the largest width whose network has at most
    `budget` parameters. **Returns:** `(width, parameters)`."""
    _check_architecture(architecture)
    extra = 2 * depth if architecture == "residual-norm" else 0
    return _solve_width(budget, d, depth,
                        lambda w: network_parameters(d, w, depth, architecture), extra)  # fmt: skip


def _check_architecture(architecture: str) -> None:
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture={architecture!r}: use one of {', '.join(ARCHITECTURES)}")


class ResidualMLP(eqx.Module):
    """A pre-activation residual ReLU network of `depth` hidden layers of `width` units:
    `h ← first(x)`, then for each of the `depth − 1` blocks `h ← h + scale ·
    block(relu(N h))`, then `last(relu(N h))`, N a layer norm (`norms`) or the identity
    (`norms` None); `scale` = 1/sqrt(depth − 1), so that the sum of the blocks' branches
    keeps the variance of h of order one at initialisation whatever the depth. Called on
    one input vector, like `eqx.nn.MLP`."""

    first: eqx.nn.Linear
    blocks: list
    last: eqx.nn.Linear
    norms: list | None
    scale: float = eqx.field(static=True)

    def __call__(self, x):
        h = self.first(x)
        norms = self.norms if self.norms is not None else [lambda v: v] * (len(self.blocks) + 1)
        for block, norm in zip(self.blocks, norms[:-1], strict=True):
            h = h + self.scale * block(jax.nn.relu(norm(h)))
        return self.last(jax.nn.relu(norms[-1](h)))


def sample_residual_mlp(key, *, d: int, width: int, depth: int, norm: bool = False,
                        outputs: int | None = None) -> ResidualMLP:  # fmt: skip
    """A `ResidualMLP`, each linear layer in `eqx.nn.Linear`'s default initialisation
    (weights and biases uniform on ±1/sqrt(fan_in), as `sample_mlp`), each layer norm
    (`norm`) a gain of 1 and a bias of 0; one scalar output by default."""
    residual_parameters(d, width, depth, norm=norm)  # the sizes checked
    keys = jax.random.split(key, depth + 1)
    out = "scalar" if outputs is None else outputs
    return ResidualMLP(
        first=eqx.nn.Linear(d, width, key=keys[0]),
        blocks=[eqx.nn.Linear(width, width, key=k) for k in keys[1:depth]],
        last=eqx.nn.Linear(width, out, key=keys[depth]),
        norms=[eqx.nn.LayerNorm(width) for _ in range(depth)] if norm else None,
        scale=1.0 / math.sqrt(max(1, depth - 1)),
    )


def sample_network(key, *, d: int, width: int, depth: int, architecture: str = "plain"):
    """The network of an architecture (`ARCHITECTURES`), one scalar output: `sample_mlp`
    ("plain") or `sample_residual_mlp` without or with layer norms."""
    _check_architecture(architecture)
    if architecture == "plain":
        return sample_mlp(key, d=d, width=width, depth=depth)
    return sample_residual_mlp(key, d=d, width=width, depth=depth,
                               norm=architecture == "residual-norm")  # fmt: skip


def predict(model: Callable, xs):
    """The network (`eqx.nn.MLP`, `ResidualMLP`: any module called on one input vector) at
    each row of `xs` `(n, d)`: shape `(n,)` (`(n, outputs)` with several outputs)."""
    return jax.vmap(model)(xs)


LOSSES = ("mse", "cross_entropy")


def fit_mlp(model: Callable, xs, ys, *, steps: int, lr, loss: str = "mse"):
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
