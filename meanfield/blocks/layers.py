"""Layer blocks F(h, θ_l): one map per layer, not a sum over units."""

from collections.abc import Callable

import equinox as eqx
from jaxtyping import Array, Float

from .activations import resolve_activation
from .base import AbstractLayerBlock


class MatrixBlock(AbstractLayerBlock):
    """`F(h, V) = V σ(h)` with a d×d matrix V (Mathematics §4, `g(h) = σ(h)`).

    **Arguments:**

    - `activation`: σ, a name or a callable (default `tanh`).
    """

    activation: str | Callable = eqx.field(static=True, default="tanh")

    def __check_init__(self):
        resolve_activation(self.activation)

    def __call__(self, h: Float[Array, " d"], theta: Float[Array, "d d"]) -> Float[Array, " d"]:
        return theta @ resolve_activation(self.activation)(h)


class PerceptronParams(eqx.Module):
    """Parameters (V, W) of a `PerceptronBlock`."""

    V: Float[Array, "... d m"]
    W: Float[Array, "... m d"]


class PerceptronBlock(AbstractLayerBlock):
    """`F(h, (V, W)) = V σ(W h)` (Mathematics §4 phases: σ = ReLU).

    **Arguments:**

    - `activation`: σ, a name or a callable (default `relu`).
    """

    activation: str | Callable = eqx.field(static=True, default="relu")

    def __check_init__(self):
        resolve_activation(self.activation)

    def __call__(self, h: Float[Array, " d"], theta: PerceptronParams) -> Float[Array, " d"]:
        return theta.V @ resolve_activation(self.activation)(theta.W @ h)


class DenseParams(eqx.Module):
    """Parameters (W, b) of a `DenseBlock`."""

    W: Float[Array, "... d d"]
    b: Float[Array, "... d"]


class DenseBlock(AbstractLayerBlock):
    """`F(h, (W, b)) = W φ(h) + b` (docs: Mathematics §5.2).

    **Arguments:**

    - `activation`: φ, a name or a callable (default `erf`).
    """

    activation: str | Callable = eqx.field(static=True, default="erf")

    def __check_init__(self):
        resolve_activation(self.activation)

    def __call__(self, h: Float[Array, " d"], theta: DenseParams) -> Float[Array, " d"]:
        return theta.W @ resolve_activation(self.activation)(h) + theta.b
