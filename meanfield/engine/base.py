"""The depth loop's interface: what every way of running a ResNet over depth computes.

For a batch of initial states `h0` (one row per input), a stack of `L` layers
(`block`, `params` stacked along depth, scaling `α`):

    h^l = h^{l-1} + α layer(h^{l-1}, θ_l),                     l = 1..L      (R)
    b^L = w,   b^{l-1} = b^l + α D_h layer(h^{l-1}, θ_l)ᵀ b^l                 (B)
    ∇_{θ_l} = α Σ_i D_θ layer(h_i^{l-1}, θ_l)ᵀ b_i^l

`forward` runs (R); `adjoint` runs (R) and then (B) from `b^L = w` and gives the
parameter gradients summed over the batch. How the loop runs is a subclass
(`ScanLoop`, `FusedLoop`, `AutoLoop`), chosen by the network's `loop` field, in the
way diffrax chooses how to differentiate a solve with its `adjoint=` objects.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from ..blocks.base import AbstractBlock

# the final cotangent: `(n, d)`, or a function of the final states h^L `(n, d)`
Final = Float[Array, "n d"] | Callable[[Array], Array]


class Adjoint(eqx.Module):
    """Forward states, backward states and parameter gradients of a batch (docs: Mathematics §2).

    - `h`: `(n, L + 1, d)`, h^0..h^L of every input.
    - `b`: `(n, L + 1, d)`, b^0..b^L of every input (b^L = w).
    - `grads`: the params pytree, each leaf `Σ_i α D_2φ(h_i^{l-1}, z^{j,l})ᵀ b_i^l`
      (summed over the inputs), or None where only the states were kept
      (`TrainResult.adjoint`).
    """

    h: Float[Array, "n L+1 d"]
    b: Float[Array, "n L+1 d"]
    grads: PyTree = None


def depth_of(params: PyTree) -> int:
    """L, the leading axis shared by every leaf of `params`."""
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError("params must contain at least one array")
    return int(jnp.shape(leaves[0])[0])


def final_cotangent(final: Final, hL: Array) -> Array:
    """`w`: the array `final`, or `final(hL)`; a one-line error unless it is `(n, d)`."""
    w = final(hL) if callable(final) else final
    if jnp.shape(w) != jnp.shape(hL):
        raise ValueError(f"final must give the shape of h^L {jnp.shape(hL)}, got {jnp.shape(w)}")
    return w


class AbstractDepthLoop(eqx.Module):
    """How the recursions (R) and (B) run over depth for a batch of inputs.

    Subclass it and implement `forward` and `adjoint`; `adjoint` must agree with
    `jax.grad` of `forward` (the explicit recursion (B) is the reference semantics,
    `ScanLoop`). Example, a loop that runs every layer with a Python `for` (for a
    handful of layers; it compiles L copies of the layer):

    ```python
    class PythonLoop(meanfield.AbstractDepthLoop):
        def forward(self, block, params, alpha, h0, *, return_all=False):
            hs = [h0]
            for l in range(meanfield.engine.depth_of(params)):
                theta = jax.tree.map(lambda p, l=l: p[l], params)
                hs.append(hs[-1] + alpha * jax.vmap(block.layer, (0, None))(hs[-1], theta))
            return jnp.stack(hs, axis=1) if return_all else hs[-1]

        def adjoint(self, block, params, alpha, h0, final):
            return meanfield.ScanLoop().adjoint(block, params, alpha, h0, final)
    ```
    """

    def resolve(self, block: AbstractBlock, params: PyTree, n: int) -> "AbstractDepthLoop":
        """The loop that actually runs for `n` inputs (itself; `AutoLoop` chooses)."""
        del block, params, n
        return self

    @abc.abstractmethod
    def forward(
        self,
        block: AbstractBlock,
        params: PyTree,
        alpha: float,
        h0: Float[Array, "n d"],
        *,
        return_all: bool = False,
    ) -> Array:
        """h^L `(n, d)`, or with `return_all` h^0..h^L `(n, L + 1, d)`."""

    @abc.abstractmethod
    def adjoint(
        self,
        block: AbstractBlock,
        params: PyTree,
        alpha: float,
        h0: Float[Array, "n d"],
        final: Final,
    ) -> Adjoint:
        """(R), then (B) from `b^L = final` (an `(n, d)` array or a function of h^L)."""
