"""The depth loop as a `lax.scan` over layers: the reference semantics, for every block."""

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._validation import check_positive_int
from ..blocks.base import AbstractBlock
from .base import AbstractDepthLoop, Adjoint, depth_of, final_cotangent

ACCELERATOR_UNROLL = 8  # layers per loop step on a GPU/TPU, where a step costs launches


def default_unroll(unroll: int | None = None) -> int:
    """`unroll` if given (checked), else the default of the backend: 1 on a CPU (a loop
    step costs about as much as a kernel call), `ACCELERATOR_UNROLL` on a GPU/TPU."""
    if unroll is not None:
        check_positive_int(unroll, "unroll")
        return unroll
    return 1 if jax.default_backend() == "cpu" else ACCELERATOR_UNROLL


class ScanLoop(AbstractDepthLoop):
    """(R) and (B) as `lax.scan`s over layers, the batch vmapped inside each layer.

    The oracle every other loop is tested against, and the loop of a CPU, where a loop
    step costs about as much as a kernel call and nothing is gained by fusing layers.
    The adjoint applies `D_h layer` and `D_θ layer` as vector-Jacobian products of the
    block (`jax.vjp`), never written by hand; it agrees with `jax.grad` of `forward` to
    round-off (tested).

    **Arguments:**

    - `unroll`: layers per loop step (`lax.scan(unroll=...)`): changes the speed,
      never the values. Default 1. On a GPU, where each loop step costs kernel
      launches, 8 ran a launch-bound forward pass 2.2× faster (benchmarks/RESULTS.md)
      at a longer compile; on a CPU it gains nothing.
    """

    unroll: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        check_positive_int(self.unroll, "unroll")

    def _states(self, block: AbstractBlock, params: PyTree, alpha, h0, return_all: bool):
        """h^L, and with `return_all` the states h^1..h^L layer-major `(L, n, d)`."""
        layer = jax.vmap(block.layer, in_axes=(0, None))

        def step(h, theta):
            h = h + alpha * layer(h, theta)
            return h, (h if return_all else None)

        return lax.scan(step, h0, params, unroll=min(self.unroll, depth_of(params)))

    def forward(self, block, params, alpha, h0, *, return_all=False) -> Array:
        hL, hs = self._states(block, params, alpha, h0, return_all)
        if hs is None:
            return hL
        return jnp.concatenate([h0[:, None], jnp.swapaxes(hs, 0, 1)], axis=1)

    def adjoint(self, block, params, alpha, h0, final) -> Adjoint:
        hL, hs = self._states(block, params, alpha, h0, True)
        assert hs is not None
        w = final_cotangent(final, hL)
        h = jnp.concatenate([h0[:, None], jnp.swapaxes(hs, 0, 1)], axis=1)  # (n, L+1, d)
        unroll = min(self.unroll, depth_of(params))

        def one(h_i, w_i):
            """(B) for one input: its b^0..b^{L-1} and its own parameter gradients."""

            def step(b, inputs):
                h_prev, theta = inputs
                _, vjp = jax.vjp(block.layer, h_prev, theta)
                gh, gtheta = vjp(b)
                b = b + alpha * gh
                return b, (b, jax.tree.map(lambda g: alpha * g, gtheta))

            _, out = lax.scan(step, w_i, (h_i[:-1], params), reverse=True, unroll=unroll)
            return out

        # every input's recursion, vmapped, and the gradients summed over the inputs after
        # the loop: per layer an elementwise product per input, which XLA fuses (a VJP of
        # the batched layer contracts over the batch in every step instead: 17% slower
        # for one 128 x 16384-unit network on a 2-core CPU). It holds the inputs'
        # gradients, n times the parameters, until they are summed.
        bs, grads = jax.vmap(one)(h, w)
        b = jnp.concatenate([bs, w[:, None]], axis=1)
        return Adjoint(h=h, b=b, grads=jax.tree.map(lambda g: jnp.sum(g, axis=0), grads))
