"""Training a `meanfield.models.transformer.Transformer` with the optimiser of its
parametrisation table, whose per-group learning rate, ε and weight decay follow the
table (`optimizer`: `adam` or `sgd`; the rules and their sources: Mathematics §11), on
batches of token sequences (`train`, through the library's one loop `gd_loop`).

Weight decay is coupled to the learning rate in both optimisers: a step shrinks a
decayed weight of group g by `lr_g · weight_decay_g` (PyTorch's `AdamW`, as in the
tables' sources). So under μP's AdamW the hidden matrices, at `lr · m_N^{-1}` with
weight decay `weight_decay · m_N`, shrink by `lr · weight_decay` per step at every
width, as the embedding and unembedding do."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Int, PyTree

from ..models.transformer import Transformer, check_ids
from ..parametrisation import DECAYED, GROUPS
from .loop import gd_loop


def group_hyperparameters(model: Transformer, *, lr, eps=1e-8, weight_decay=0.0) -> dict[str, dict]:
    """The optimiser's `lr`, `eps`, `weight_decay` for every group at the model's size:
    each base value times the table's factor (weight decay only on `DECAYED` groups). The base
    values may be traced (vmapped learning rates)."""
    out = {}
    for g in GROUPS:
        out[g] = {
            "lr": lr * model.factor(g, "lr"),
            "eps": eps * model.factor(g, "eps"),
            "weight_decay": (
                weight_decay * model.factor(g, "weight_decay") if g in DECAYED else 0.0
            ),
        }
    return out


def adam(
    model: Transformer, *, lr, eps=1e-8, weight_decay=0.0, b1: float = 0.9, b2: float = 0.95
) -> optax.GradientTransformation:
    """AdamW (`optax.adamw`, decoupled from the gradient, scaled by the learning rate as
    PyTorch's) with each group's hyperparameters from `group_hyperparameters`."""
    hyper = group_hyperparameters(model, lr=lr, eps=eps, weight_decay=weight_decay)
    transforms: dict = {
        g: optax.adamw(h["lr"], b1=b1, b2=b2, eps=h["eps"], weight_decay=h["weight_decay"])
        for g, h in hyper.items()
    }
    return optax.multi_transform(transforms, model.labels)


def sgd(
    model: Transformer, *, lr, weight_decay=0.0, momentum: float | None = None
) -> optax.GradientTransformation:
    """SGD with each group's learning rate and weight decay from
    `group_hyperparameters`: the update `−lr_g (g + weight_decay_g · θ)` (the decay
    coupled to the learning rate, as `adam`'s), with optional heavy-ball `momentum`."""
    hyper = group_hyperparameters(model, lr=lr, weight_decay=weight_decay)
    transforms: dict = {
        g: optax.chain(
            optax.add_decayed_weights(h["weight_decay"]), optax.sgd(h["lr"], momentum=momentum)
        )
        for g, h in hyper.items()
    }
    return optax.multi_transform(transforms, model.labels)


def optimizer(
    model: Transformer, *, lr, eps=1e-8, weight_decay=0.0
) -> optax.GradientTransformation:
    """The optimiser of the model's table (`Parametrisation.optimizer`): `adam` (with
    `eps`) or `sgd` (which has no ε)."""
    if model.parametrisation.optimizer == "sgd":
        return sgd(model, lr=lr, weight_decay=weight_decay)
    return adam(model, lr=lr, eps=eps, weight_decay=weight_decay)


def train(
    model: Transformer,
    params: dict,
    x: Int[Array, "steps B T"],
    y: Int[Array, "steps B T"],
    optimizer: optax.GradientTransformation,
    *,
    history: bool = False,
    measure: Callable[[dict, Int[Array, ""], Array], PyTree] | None = None,
    last: bool = False,
):
    """`steps` optimiser steps, step k on the batch `(x[k], y[k])`, in one `lax.scan`.

    **Returns:** `(params, records)`: with `history` (False) the parameters after the
    last step, else before every step and after the last (leading axis `steps + 1`);
    `records[k]` what was measured before update k: `measure(theta, k, loss)` of the
    parameters `theta` after k updates and the batch loss `loss` there, by default the
    loss itself. With `last` (and without `history`) one more pass measures the
    parameters after the last update (its own update is computed and dropped, on the
    last batch again): `records` then has `steps + 1` entries. Both Transformer studies
    train here: the coordinate check measures the coordinates at every pass (`last`),
    the transfer study the held-out loss at its budgets.

    `x`, `y` must hold integer token ids, in `[0, vocab)`: checked here once where they
    are concrete (`meanfield.models.transformer.check_ids`), not in the compiled steps;
    traced ids (a study's vmapped draws) have their dtype checked only.
    """
    if x.shape != y.shape or x.ndim != 3:
        raise ValueError(
            f"x, y: two arrays of shape (steps, batch, tokens), got {x.shape} and {y.shape}"
        )
    check_ids(x, "x", model.vocab)
    check_ids(y, "y", model.vocab)
    steps = x.shape[0]
    grad = jax.value_and_grad(model.loss)

    def grad_fn(theta, k):
        k = jnp.minimum(k, steps - 1)
        loss, g = grad(theta, x[k], y[k])
        return g, (loss if measure is None else measure(theta, k, loss))

    if history:
        thetas, records = gd_loop(grad_fn, params, optimizer, steps, last=False)
        return thetas, records
    return gd_loop(grad_fn, params, optimizer, steps + 1 if last else steps, history=False)
