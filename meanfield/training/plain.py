"""Training the classifiers of `meanfield.models.plain` (plain or residual) and
`meanfield.models.staged` (widening, with shortcuts) by gradient descent on the
cross-entropy."""

import equinox as eqx
import jax
import optax

from .._validation import check_finite_arguments
from ..models.plain import Classifier, accuracy, cross_entropy
from ..models.staged import StagedClassifier
from .loop import gd_loop


def _trained_parts(m) -> tuple:
    """The trained arrays of a classifier: every weight and bias (and batch
    normalisation's γ, a projection shortcut's S where there is one), never α or a weight
    scale."""
    if isinstance(m, StagedClassifier):
        parts = (m.A, m.first.W, m.first.b, m.W, m.b, m.S, m.second.W, m.second.b, m.C)
    else:
        parts = (m.A, m.net.W, m.net.b, m.net.gamma, m.C)
    return tuple(a for a in parts if a is not None)


def _trained(model):
    """The filter of `_trained_parts` (True there, False everywhere else)."""
    spec = jax.tree.map(lambda _: False, model)
    return eqx.tree_at(_trained_parts, spec, replace=(True,) * len(_trained_parts(model)))


def train_classifier(model: Classifier | StagedClassifier, data, *, steps: int, lr: float):
    """`steps` full-batch Adam steps (learning rate `lr`) on the cross-entropy of
    `data = (x_train, y_train, x_test, y_test)` (labels integers), through `meanfield.gd_loop`;
    the weights A, W, b, C (and batch normalisation's γ; of a `StagedClassifier`, every
    stage's, the widening layer's and a projection's S) are trained, the residual scale α
    is not; with batch normalisation every step normalises by the training set's
    statistics, and the test inputs are classified with them.

    **Returns:** `(model, losses, test_accuracy)`: the trained model, the training loss
    before each step (steps,), and the final test accuracy. Jittable and vmappable."""
    x, y, x_test, y_test = data
    check_finite_arguments(x_train=x, y_train=y, x_test=x_test, y_test=y_test, lr=lr)
    # the weights A, W, b, C are trained; the residual scale α and the weights' scale are
    # not, whether Python floats or (under jit, vmap) arrays: partitioning by "is an
    # inexact array" trained α in a compiled call and not in an eager one
    params, static = eqx.partition(model, _trained(model))

    def grad_fn(p, _):
        loss, g = jax.value_and_grad(lambda p_: cross_entropy(eqx.combine(p_, static), x, y))(p)
        return g, loss

    final, losses = gd_loop(grad_fn, params, optax.adam(lr), steps, history=False)
    model = eqx.combine(final, static)
    return model, losses, accuracy(model, x_test, y_test, reference=x)
