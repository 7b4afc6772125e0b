"""Training a res-1 classifier (`meanfield.models.res1`) with Adam or SGD (optax), recording
the weights the trained-weights study analyses."""

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import optax
from jax import lax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from .._validation import check_finite_array, check_positive_int
from ..models.res1 import Res1Classifier, accuracy, cross_entropy

OPTIMIZERS = ("adam", "sgd")


class Res1Training(eqx.Module):
    """The outcome of `train_res1`.

    - `model`: the trained network (with early stopping, the one of the best validation
      accuracy).
    - `losses`: `(steps,)` the minibatch loss at each step (NaN after an explosion or a stop).
    - `train_accuracy`, `test_accuracy`: of `model` on the training (without the validation
      share) and test sets.
    - `exploded`: whether a non-finite loss stopped the training. The model is then the
      last one whose loss was finite (the parameters before the update that made it
      non-finite; the untrained ones if their loss already is), or with a validation share
      the best evaluated before the explosion, the untrained one included; its accuracies
      are not a result.
    - `steps_run`: the updates made (fewer than `steps` after an explosion or an early stop).
    """

    model: Res1Classifier
    losses: Float[Array, " steps"]
    train_accuracy: Float[Array, ""]
    test_accuracy: Float[Array, ""]
    exploded: Array
    steps_run: Int[Array, ""]


def _optimizer(name: str, lr: float) -> optax.GradientTransformation:
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer={name!r}: use one of {', '.join(OPTIMIZERS)}")
    return optax.adam(lr) if name == "adam" else optax.sgd(lr)


def _check_options(
    steps: int, batch_size: int, eval_every: int, patience: int | None, validation: int, lr: float
) -> None:
    """Refuse an invalid option of `train_res1` (ValueError naming it)."""
    for name, value in (("steps", steps), ("batch_size", batch_size), ("eval_every", eval_every)):
        check_positive_int(value, name)
    if patience is not None:
        check_positive_int(patience, "patience")
        if not validation:
            raise ValueError("patience: early stopping needs a validation share (validation > 0)")
    if isinstance(validation, bool) or not isinstance(validation, int) or validation < 0:
        raise ValueError(f"validation: must be an integer >= 0, got {validation!r}")
    if not (isinstance(lr, int | float) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: must be a finite number > 0, got {lr!r}")


def _check_data(
    x_train: Array, y_train: Array, x_test: Array, y_test: Array, batch_size: int, validation: int
) -> int:
    """The training examples left after the validation share; refuses non-finite data
    (concrete data only: traced data, under `jit`, is not checked) or a batch larger than
    that."""
    arrays = {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}
    for name, value in arrays.items():
        check_finite_array(value, f"data: {name}", colon=True)
    n = x_train.shape[0] - validation
    if n < 1 or batch_size > n:
        raise ValueError(
            f"batch_size: {batch_size} exceeds the {n} training examples "
            f"(after holding out validation={validation})"
        )
    return n


def _guarded_update(
    opt: optax.GradientTransformation, loss: Array, grads, params: tuple, stopped: Array,
    exploded: Array,
) -> tuple[Any, Any, Any, Any, Array]:  # fmt: skip
    """One update of `train_res1`, traced inside its scan, frozen once training stopped or
    exploded: `params = (p, prev, state)` (the parameters, the last ones whose loss was
    finite, the optimiser's state) updated, with `exploded` and `frozen`."""
    p, prev, state = params
    bad = ~jnp.isfinite(loss) | ~jnp.all(
        jnp.asarray([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)])
    )
    now = bad & ~stopped & ~exploded  # the loss is first non-finite at p
    exploded = exploded | now
    frozen = stopped | exploded
    updates, new_state = opt.update(grads, state, p)
    new_p = optax.apply_updates(p, updates)
    # after an explosion, the last parameters whose loss was finite (those before the
    # update that made it non-finite; the untrained ones if they already explode)
    kept = jax.tree.map(lambda a, b: jnp.where(now, a, b), prev, p)
    prev = jax.tree.map(lambda a, b: jnp.where(frozen, a, b), prev, p)
    p = jax.tree.map(lambda a, b: jnp.where(frozen, a, b), kept, new_p)
    state = jax.tree.map(lambda a, b: jnp.where(frozen, a, b), state, new_state)
    return p, prev, state, exploded, frozen


def _early_stopping(
    p, carry: tuple, k: Array, frozen: Array, evaluate, steps: int, eval_every: int,
    patience: int | None,
) -> tuple[Any, Array, Array, Array]:  # fmt: skip
    """One step of `train_res1`'s early stopping, traced inside its scan: the validation
    accuracy (`evaluate()`) every `eval_every` steps and after the last, and the carry
    `(best, best_acc, since, stopped)` updated: the best parameters so far, their accuracy,
    the evaluations since a gain, and the stop after `patience` of them."""
    best, best_acc, since, stopped = carry
    check = ((k + 1) % eval_every == 0) | (k == steps - 1)  # and after the last update
    acc = lax.cond(
        check & ~frozen,
        evaluate,
        lambda: jnp.asarray(-1.0, best_acc.dtype),
    )
    better = acc > best_acc
    best = jax.tree.map(lambda b, a: jnp.where(better, a, b), best, p)
    best_acc = jnp.where(better, acc, best_acc)
    since = jnp.where(better, 0, since + (check & ~frozen))
    if patience is not None:
        stopped = stopped | (since >= patience)
    return best, best_acc, since, stopped


def train_res1(
    model: Res1Classifier,
    data: tuple[Array, Array, Array, Array],
    *,
    key: PRNGKeyArray,
    steps: int,
    batch_size: int = 128,
    optimizer: str = "adam",
    lr: float = 1e-3,
    validation: int = 0,
    eval_every: int = 50,
    patience: int | None = None,
) -> Res1Training:
    """Train every part of `model` on `data = (x_train, y_train, x_test, y_test)` (labels
    integers) by minibatch `optimizer` ("adam" or "sgd") at learning rate `lr`.

    **Arguments:**

    - `key`: the minibatch order (a fresh permutation each epoch) and the validation split.
    - `steps`: optimiser updates; `batch_size`: examples per update (at most the training
      set).
    - `validation`: examples held out of the training set for early stopping (0: none).
      With `validation > 0`, the validation accuracy is evaluated before training, every
      `eval_every` steps and after the last step, the best parameters are kept, and with
      `patience` (which needs a validation share) training stops after that many
      evaluations without a gain.

    Jittable (the static choices as Python values) and vmappable over `model` and `key`.

    **Returns:** a `Res1Training`.
    """
    _check_options(steps, batch_size, eval_every, patience, validation, lr)
    opt = _optimizer(optimizer, lr)
    x_train, y_train, x_test, y_test = (jnp.asarray(a) for a in data)
    n = _check_data(x_train, y_train, x_test, y_test, batch_size, validation)
    k_split, k_batches = jr.split(key)
    order = jr.permutation(k_split, x_train.shape[0])
    x_val, y_val = x_train[order[n:]], y_train[order[n:]]
    x_fit, y_fit = x_train[order[:n]], y_train[order[:n]]
    per_epoch = n // batch_size

    params = (model.A, model.V, model.B)  # trained; the scale L^-β is not

    def rebuild(p):
        return eqx.tree_at(lambda m: (m.A, m.V, m.B), model, p)

    def loss_fn(p, xb, yb):
        return cross_entropy(rebuild(p), xb, yb)

    def step(carry, k):
        p, prev, state, best, best_acc, since, stopped, exploded = carry
        epoch, within = k // per_epoch, k % per_epoch
        perm = jr.permutation(jr.fold_in(k_batches, epoch), n)
        idx = lax.dynamic_slice_in_dim(perm, within * batch_size, batch_size)
        loss, grads = jax.value_and_grad(loss_fn)(p, x_fit[idx], y_fit[idx])
        p, prev, state, exploded, frozen = _guarded_update(
            opt, loss, grads, (p, prev, state), stopped, exploded
        )
        if validation > 0:
            best, best_acc, since, stopped = _early_stopping(
                p, (best, best_acc, since, stopped), k, frozen,
                lambda: accuracy(rebuild(p), x_val, y_val), steps, eval_every, patience,
            )  # fmt: skip
        else:
            best = p
        return (p, prev, state, best, best_acc, since, stopped, exploded), (
            jnp.where(frozen, jnp.nan, loss),
            ~frozen,
        )

    # with a validation share the untrained network is the first candidate: its accuracy
    # is the one to beat, so an explosion before the first evaluation keeps a measured model
    acc0 = (
        accuracy(rebuild(params), x_val, y_val).astype(jnp.result_type(float))
        if validation > 0
        else jnp.asarray(-1.0, jnp.result_type(float))
    )
    init = (params, params, opt.init(params), params, acc0, 0, False, False)
    (p, _, _, best, _, _, _, exploded), (losses, ran) = lax.scan(step, init, jnp.arange(steps))
    final = rebuild(best if validation > 0 else p)
    return Res1Training(
        final,
        losses,
        accuracy(final, x_fit, y_fit),
        accuracy(final, x_test, y_test),
        exploded,
        jnp.sum(ran),
    )
