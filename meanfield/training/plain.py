"""Training the classifiers of `meanfield.models.plain` (plain or residual) by gradient
descent on the cross-entropy."""

import equinox as eqx
import jax
import optax

from .._validation import check_finite_arguments
from ..models.plain import Classifier, accuracy, cross_entropy
from .loop import gd_loop


def train_classifier(model: Classifier, data, *, steps: int, lr: float):
    """`steps` full-batch Adam steps (learning rate `lr`) on the cross-entropy of
    `data = (x_train, y_train, x_test, y_test)` (labels integers), through `meanfield.gd_loop`;
    the weights A, W, b, C are trained, the residual scale α is not.

    **Returns:** `(model, losses, test_accuracy)`: the trained model, the training loss
    before each step (steps,), and the final test accuracy. Jittable and vmappable."""
    x, y, x_test, y_test = data
    check_finite_arguments(x_train=x, y_train=y, x_test=x_test, y_test=y_test, lr=lr)
    # the weights A, W, b, C are trained; the residual scale α and the weights' scale are
    # not, whether Python floats or (under jit, vmap) arrays: partitioning by "is an
    # inexact array" trained α in a compiled call and not in an eager one
    spec = jax.tree.map(lambda _: False, model)
    spec = eqx.tree_at(lambda m: (m.A, m.net.W, m.net.b, m.C), spec, replace=(True,) * 4)
    params, static = eqx.partition(model, spec)

    def grad_fn(p, _):
        loss, g = jax.value_and_grad(lambda p_: cross_entropy(eqx.combine(p_, static), x, y))(p)
        return g, loss

    final, losses = gd_loop(grad_fn, params, optax.adam(lr), steps, history=False)
    model = eqx.combine(final, static)
    return model, losses, accuracy(model, x_test, y_test)
