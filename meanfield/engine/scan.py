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
    - `depth`: None (default), or the number of layers that run, a Python or traced
      integer: layers from `depth` on are skipped (a `lax.cond` per layer), the identity
      in (R) and (B), with zero parameter gradients. For a network padded in depth
      whose padded layers are the identity anyway (weight 0, `coupled_errors`): it
      then costs its own layers, not the padded array's (the mean-ODE quick preset's
      small networks ran 1024 layers for 8).
    """

    unroll: int = eqx.field(static=True, default=1)
    depth: int | Array | None = None

    def __check_init__(self):
        check_positive_int(self.unroll, "unroll")
        d = self.depth
        if d is not None and (
            isinstance(d, bool)
            or jnp.ndim(d) != 0
            or not jnp.issubdtype(jnp.result_type(d), jnp.integer)
        ):
            raise ValueError(f"depth must be None or an integer, got {d!r}")

    def _scan(self, step, skip, carry, xs, *, reverse: bool = False):
        """`lax.scan` of `step` over layers (`xs`: leaves with a leading axis L), or with
        `depth`, of `skip` from layer `depth` on; both map (carry, x) to (carry, y)."""
        L = depth_of(xs)
        unroll = min(self.unroll, L)
        if self.depth is None:
            return lax.scan(step, carry, xs, reverse=reverse, unroll=unroll)
        depth = self.depth

        def layer(c, lx):
            return lax.cond(lx[0] < depth, step, skip, c, lx[1])

        return lax.scan(layer, carry, (jnp.arange(L), xs), reverse=reverse, unroll=unroll)

    def _states(self, block: AbstractBlock, params: PyTree, alpha, h0, return_all: bool):
        """h^L, and with `return_all` the states h^1..h^L layer-major `(L, n, d)`."""
        layer = jax.vmap(block.layer, in_axes=(0, None))

        def step(h, theta):
            h = h + alpha * layer(h, theta)
            return h, (h if return_all else None)

        def skip(h, theta):
            return h, (h if return_all else None)

        return self._scan(step, skip, h0, params)

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

        def one(h_i, w_i):
            """(B) for one input: its b^0..b^{L-1} and its own parameter gradients."""

            def step(b, inputs):
                h_prev, theta = inputs
                _, vjp = jax.vjp(block.layer, h_prev, theta)
                gh, gtheta = vjp(b)
                b = b + alpha * gh
                return b, (b, jax.tree.map(lambda g: alpha * g, gtheta))

            def skip(b, inputs):  # zero gradients of the types `step` gives
                grads = jax.eval_shape(step, b, inputs)[1][1]
                return b, (b, jax.tree.map(lambda g: jnp.zeros(g.shape, g.dtype), grads))

            _, out = self._scan(step, skip, w_i, (h_i[:-1], params), reverse=True)
            return out

        # every input's recursion, vmapped, and the gradients summed over the inputs after
        # the loop: per layer an elementwise product per input, which XLA fuses (a VJP of
        # the batched layer contracts over the batch in every step instead: 17% slower
        # for one 128 x 16384-unit network on a 2-core CPU). It holds the inputs'
        # gradients, n times the parameters, until they are summed.
        bs, grads = jax.vmap(one)(h, w)
        b = jnp.concatenate([bs, w[:, None]], axis=1)
        return Adjoint(h=h, b=b, grads=jax.tree.map(lambda g: jnp.sum(g, axis=0), grads))
