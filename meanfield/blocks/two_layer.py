"""The two-layer-perceptron (2LP) unit block φ(h, (u, v)) = v ρ(s · uᵀh)."""

from collections.abc import Callable

import equinox as eqx
from jaxtyping import Array, Float

from .._validation import as_number, check_number
from .activations import resolve_activation
from .base import AbstractUnitBlock


class TwoLayerParams(eqx.Module):
    """Parameters z = (u, v) of one 2LP unit, `u, v ∈ R^d`."""

    u: Float[Array, "... d"]
    v: Float[Array, "... d"]


class TwoLayerBlock(AbstractUnitBlock):
    """The 2LP unit `φ(h, (u, v)) = v · ρ(inner_scale · uᵀh)` (docs: Mathematics §1).

    **Arguments:**

    - `activation`: ρ, one of `relu, tanh, erf, gelu, softplus, sigmoid,
      identity`, or any scalar callable.
    - `inner_scale`: multiplies the pre-activation; `1/D` gives the normalised
      product ⟨u, h⟩_D of Mathematics §6. Default 1.
    """

    activation: str | Callable = eqx.field(static=True, default="relu")
    inner_scale: float = eqx.field(static=True, converter=as_number, default=1.0)

    def __check_init__(self):
        resolve_activation(self.activation)
        check_number(self.inner_scale, "inner_scale", positive=True)

    def __call__(self, h: Float[Array, " d"], z: TwoLayerParams) -> Float[Array, " d"]:
        rho = resolve_activation(self.activation)
        return z.v * rho(self.inner_scale * (z.u @ h))
