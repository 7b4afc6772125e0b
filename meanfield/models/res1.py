"""Res-1 networks trained on data: the weights along depth after training (Marion, Fermanian,
Biau and Vert, "Scaling ResNets in the large-depth regime", the part "beyond
initialisation").

**The network** (width d, depth L, classes C):

    h_0 = A x,    h_k = h_{k-1} + L^{-β} V_k σ(h_{k-1}),  k = 1..L,    logits = B h_L,

`A` (d×d_in) and `B` (C×d) with i.i.d. N(0, 1/d_in) and N(0, 1/d) entries, the residual
weights `V_1..V_L` (d×d) drawn from a depth law (`meanfield.laws.depth`: i.i.d., smooth
Gaussian-process or fractional-Brownian weights, every entry of variance 1/d), and every
part trained (A, V and B) on the cross-entropy. The scale `L^{-β}` is data, not a static
field, so networks of different β (and the same shapes) vmap together.

**Training** (`train_res1`): optax Adam or SGD on minibatches (a fresh permutation of the
training set every epoch, drawn from an explicit key), a fixed number of steps; optional
early stopping on a validation share of the training set (the parameters of the best
validation accuracy are kept, and training stops after `patience` evaluations without a
gain); an explosion (a non-finite loss) stops the updates and is reported in `exploded`,
never averaged into the accuracies. Jittable and vmappable over models and keys.
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import optax
from jax import lax
from jaxtyping import Array, Float, PRNGKeyArray

from .._validation import check_finite_array, check_positive_int
from ..blocks.activations import resolve_activation
from ..laws.depth.base import AbstractDepthLaw


class Res1Classifier(eqx.Module):
    """`logits = B h_L(A x)` with `h_k = h_{k-1} + scale · V_k σ(h_{k-1})` (module docstring).

    Concrete `A`, `V`, `B`, `scale` and inputs `x` must be finite: a one-line error naming
    the first NaN or inf (traced ones, under `jit` or `vmap`, are not checked)."""

    A: Float[Array, "d d_in"]
    V: Float[Array, "L d d"]
    B: Float[Array, "C d"]
    scale: Float[Array, ""]
    activation: str | Callable = eqx.field(static=True, default="relu")

    def __check_init__(self):
        for name, value in (("A", self.A), ("V", self.V), ("B", self.B), ("scale", self.scale)):
            check_finite_array(value, name, colon=True)

    @classmethod
    def sample(
        cls,
        key: PRNGKeyArray,
        law: AbstractDepthLaw,
        *,
        L: int,
        d_in: int,
        classes: int,
        beta: float,
        activation: str | Callable = "relu",
    ) -> "Res1Classifier":
        """Draw A, B (i.i.d. Gaussian) and V_1..V_L from `law` (width `law.d`); the scale
        is `L^{-β}`."""
        check_positive_int(L, "L")
        check_positive_int(d_in, "d_in")
        check_positive_int(classes, "classes")
        if not isinstance(law, AbstractDepthLaw):
            raise ValueError(f"law: must be a meanfield.laws.depth law, got {type(law).__name__}")
        if not (isinstance(beta, int | float) and math.isfinite(beta) and beta >= 0):
            raise ValueError(f"beta: must be a finite number >= 0, got {beta!r}")
        resolve_activation(activation)
        ka, kv, kb = jr.split(key, 3)
        d = law.d
        A = jr.normal(ka, (d, d_in)) / math.sqrt(d_in)
        B = jr.normal(kb, (classes, d)) / math.sqrt(d)
        V = law.weights(kv, L)
        return cls(A, V, B, jnp.asarray(float(L) ** -beta, V.dtype), activation)

    def hidden(self, x: Float[Array, "n d_in"]) -> Float[Array, "n d"]:
        """The last state `h_L` of each input."""
        check_finite_array(x, "x", colon=True)
        sigma = resolve_activation(self.activation)

        def layer(h, V):
            return h + self.scale * sigma(h) @ V.T, None

        h, _ = lax.scan(layer, x @ self.A.T, self.V)
        return h

    def __call__(self, x: Float[Array, "n d_in"]) -> Float[Array, "n C"]:
        return self.hidden(x) @ self.B.T


def cross_entropy(model: Res1Classifier, x, labels) -> Array:
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model(x), labels))


def accuracy(model: Res1Classifier, x, labels) -> Array:
    hits = jnp.argmax(model(x), axis=-1) == labels
    return jnp.mean(hits.astype(jnp.result_type(float)))
