"""Residual blocks: the extension point of the library.

Two kinds of block share one interface, `layer(h, theta)`, the residual
increment of one layer (before multiplication by the scaling α):

* a **unit block** φ(h, z) is summed over M exchangeable units,
  `layer(h, zs) = Σ_j φ(h, z^j)` (Mathematics §1, the mean-ODE setting);
* a **layer block** F(h, θ) is one map per layer, `layer(h, θ) = F(h, θ)`
  (Mathematics §4 and §5.2).

A user plugs in a block by subclassing `AbstractUnitBlock` (or
`AbstractLayerBlock`) and writing only its forward map; every derivative used by
the library (backward pass, adjoint of the limit, tangent kernel) comes from JAX.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._validation import check_callable


class AbstractBlock(eqx.Module):
    """A residual increment `layer(h, theta)` for one layer."""

    @abc.abstractmethod
    def layer(self, h: Float[Array, " d"], theta: PyTree) -> Float[Array, " d"]:
        """The un-scaled residual increment of one layer with parameters `theta`."""


class AbstractUnitBlock(AbstractBlock):
    """A unit block φ(h, z), summed over the M units of a layer.

    Subclass it and implement `__call__(h, z)`, the map of one unit; `z` is any
    pytree. Example (a block that is not a two-layer perceptron):

    ```python
    class SineBlock(meanfield.AbstractUnitBlock):
        def __call__(self, h, z):
            return z["a"] * jnp.sin(z["w"] @ h)

    law = meanfield.SamplerLaw(
        lambda key: {"a": jax.random.normal(key, (3,)),
                     "w": jax.random.normal(jax.random.fold_in(key, 1), (3,))}
    )
    net = meanfield.ResNet.sample(SineBlock(), law, L=64, M=8,
                                  scaling=meanfield.MeanODEScaling(), key=key)
    ```

    The parameters of a network built from a unit block are stacked with
    leading axes `(L, M)`.
    """

    @abc.abstractmethod
    def __call__(self, h: Float[Array, " d"], z: PyTree) -> Float[Array, " d"]:
        """φ(h, z): the contribution of one unit with parameters `z`."""

    def layer(self, h: Float[Array, " d"], theta: PyTree) -> Float[Array, " d"]:
        """Σ_j φ(h, z^j) over the units stacked on the leading axis of `theta`."""
        return jnp.sum(jax.vmap(self, in_axes=(None, 0))(h, theta), axis=0)


class AbstractLayerBlock(AbstractBlock):
    """A layer block F(h, θ) that is not a sum over exchangeable units.

    Subclass it and implement `__call__(h, theta)`. The parameters of a network
    built from a layer block are stacked with a leading axis `(L,)`.
    """

    @abc.abstractmethod
    def __call__(self, h: Float[Array, " d"], theta: PyTree) -> Float[Array, " d"]:
        """F(h, θ)."""

    def layer(self, h: Float[Array, " d"], theta: PyTree) -> Float[Array, " d"]:
        """F(h, θ) itself."""
        return self(h, theta)


class FunctionBlock(AbstractUnitBlock):
    """A unit block from a plain function `fn(h, z) -> R^d`.

    **Arguments:**

    - `fn`: the unit map φ. It must be a JAX-traceable function of `(h, z)`.
    """

    fn: Callable = eqx.field(static=True)

    def __check_init__(self):
        check_callable(self.fn, "fn")

    def __call__(self, h, z):
        return self.fn(h, z)


class WeightedUnits(AbstractUnitBlock):
    """`φ_w(h, (z, w)) = w φ(h, z)`: a layer whose units are weighted particles.

    With the particles of the limit at every layer and α = 1/L, the finite recursion
    is exactly the explicit Euler scheme of the limit's own (particle) ODE, so its
    distance to the limit is the pure depth-discretisation error. With weights 0 and
    a common weight elsewhere it pads a network (`meanfield.coupling.coupled_errors`).

    The weights are fixed, not parameters: no gradient flows to them.
    """

    block: AbstractUnitBlock

    def __call__(self, h, z):
        zz, w = z
        return lax.stop_gradient(w) * self.block(h, zz)


class LayerUnits(AbstractUnitBlock):
    """A layer block used as a unit: `φ(h, θ) = F(h, θ)`, so that a layer of the network
    sums M independent draws of the whole layer map, `h^l = h^{l-1} + α Σ_j F(h^{l-1},
    θ^{j,l})`. With α = 1/(LM) this is the mean-ODE setting (Mathematics §3) for any layer block
    (`meanfield study mean-ode --block` wraps a layer block so).

    **Arguments:**

    - `block`: the `AbstractLayerBlock` F.
    """

    block: AbstractLayerBlock

    def __check_init__(self):
        if not isinstance(self.block, AbstractLayerBlock):
            raise ValueError(
                f"block must be an AbstractLayerBlock, got {type(self.block).__name__}"
            )

    def __call__(self, h, z):
        return self.block(h, z)
