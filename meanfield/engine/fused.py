"""The depth loop of a 2LP ResNet in fused Pallas kernels (`meanfield.engine.kernels`)."""

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from ..blocks.base import AbstractBlock, WeightedUnits
from ..blocks.two_layer import TwoLayerBlock, TwoLayerParams
from . import kernels
from .base import AbstractDepthLoop, Adjoint, final_cotangent


class _TwoLayer(NamedTuple):
    """The parts of a 2LP stack (`weights`: the `WeightedUnits` weights, or None)."""

    block: TwoLayerBlock
    u: Array
    v: Array
    weights: Array | None

    def kernel_v(self) -> Array:
        """v as the kernels take it: `w v` for weighted units (no gradient to w)."""
        if self.weights is None:
            return self.v
        return lax.stop_gradient(self.weights)[..., None].astype(self.v.dtype) * self.v

    def grads(self, gu: Array, gv: Array) -> PyTree:
        """The kernels' gradients (of u and of the weighted v) as the stack's params
        pytree: for `WeightedUnits`, `∂/∂v = w ∂/∂(w v)` and no gradient for the weights."""
        if self.weights is None:
            return TwoLayerParams(u=gu, v=gv)
        w = self.weights[..., None].astype(gv.dtype)
        return (TwoLayerParams(u=gu, v=w * gv), jnp.zeros_like(self.weights))


def two_layer_parts(block: AbstractBlock, params: PyTree) -> _TwoLayer | None:
    """The 2LP parts of a stack, or None. A `WeightedUnits` 2LP block (params
    `(TwoLayerParams, weights)`, weights `(L, M)`) is a 2LP with `v` scaled by the
    weights: `w v ρ(c uᵀh)`, the form in which `coupled_errors` pads a network."""
    weights = None
    # exact types: a subclass may compute another layer, which the kernels would ignore
    if type(block) is WeightedUnits and isinstance(params, tuple) and len(params) == 2:
        block, (params, weights) = block.block, params
    if type(block) is not TwoLayerBlock or type(params) is not TwoLayerParams:
        return None
    u, v = params.u, params.v
    if not (u.ndim == 3 and u.shape == v.shape and jnp.issubdtype(u.dtype, jnp.floating)):
        return None
    if weights is not None and jnp.shape(weights) != u.shape[:2]:
        return None
    return _TwoLayer(block, u, v, weights)


@functools.lru_cache(maxsize=256)
def _compiles(cfg: kernels.KernelConfig, M: int, d: int, dtype: str) -> str | None:
    """Compile a tiny instance of the kernels, as `jax.grad` runs them (the custom VJP)
    and as `adjoint` runs them (every state saved); None if they compile, else why not."""
    K, n = cfg.layers_per_step, cfg.block_batch
    h0 = jax.ShapeDtypeStruct((n, d), dtype)
    w = jax.ShapeDtypeStruct((2 * K, M, d), dtype)

    def loss(h0, u, v):
        return jnp.sum(kernels.fused_hidden(h0, u, v, cfg))

    def states(h0, u, v):
        return kernels.fused_states(h0, u, v, lambda hL: hL, cfg)

    try:
        jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(h0, w, w).compile()
        jax.jit(states).lower(h0, w, w).compile()
    except Exception as err:  # any lowering/compile failure means: do not use the kernel
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


class FusedLoop(AbstractDepthLoop):
    """(R) and (B) of a 2LP stack each in one fused Pallas kernel (`engine.kernels`).

    One kernel runs all L layers with the tile of h on chip, a second the backward
    pass; `jax.grad` of `forward` uses the second through a custom VJP. For
    `TwoLayerBlock` with `TwoLayerParams` (or `WeightedUnits` of them) only
    (`supports` says whether it applies). On a CPU the kernels run in Pallas interpret
    mode (for tests; slow). The values agree with `ScanLoop`'s to rounding (tested).

    **Arguments** (the kernels' tiling: every one changes the speed, never the values):

    - `block_batch`: inputs per kernel program (a power of two; default
      `kernels.default_block_batch`: few on a GPU, many in interpret mode).
    - `layers_per_step`: layers unrolled in one step of the kernel loop (default 8).
    - `num_warps`, `num_stages`: Triton settings on GPU.
    - `interpret`: Pallas interpret mode; default: on exactly when running on CPU.
    - `weight_loads`: when the kernels load each layer's weights, one of
      `kernels.WEIGHT_LOADS`. Default `"prefetch"`: on an H100 at d 8, M 16, L 4096,
      batch 256 (float32) the forward pass took 1.00 ms against 1.42 ms `"inline"`,
      forward+backward 9.3 ms against 16.1 ms.
    """

    block_batch: int | None = eqx.field(static=True, default=None)
    layers_per_step: int = eqx.field(static=True, default=8)
    num_warps: int | None = eqx.field(static=True, default=None)
    num_stages: int | None = eqx.field(static=True, default=None)
    interpret: bool | None = eqx.field(static=True, default=None)
    weight_loads: str = eqx.field(static=True, default="prefetch")

    def __check_init__(self):
        bb = self.block_batch
        if bb is not None and (
            isinstance(bb, bool) or not isinstance(bb, int) or bb < 1 or bb & (bb - 1)
        ):
            raise ValueError(f"block_batch must be a power of two, got {bb!r}")
        lps = self.layers_per_step
        if isinstance(lps, bool) or not isinstance(lps, int) or lps < 1:
            raise ValueError(f"layers_per_step must be >= 1, got {lps!r}")
        kernels.check_weight_loads(self.weight_loads)

    def _config(self, parts: _TwoLayer, alpha: float, n: int) -> kernels.KernelConfig:
        L, M, d = parts.u.shape
        interpret = self.interpret
        if interpret is None:
            interpret = jax.default_backend() == "cpu"
        block_batch = self.block_batch or kernels.default_block_batch(n, M, d, not interpret)
        return kernels.KernelConfig(
            alpha=alpha,
            activation=parts.block.activation,
            inner_scale=float(parts.block.inner_scale),
            block_batch=block_batch,
            layers_per_step=self.layers_per_step,
            interpret=bool(interpret),
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            weight_loads=self.weight_loads,
        )

    def supports(self, block: AbstractBlock, params: PyTree, n: int) -> tuple[bool, str]:
        """Whether the kernels apply to this stack for a batch of `n` inputs, and why not.

        Checks the block (2LP, or a `WeightedUnits` 2LP), the tile size, and that both
        kernels compile on the default device (once per configuration; the answer is
        cached). `params` may hold `jax.ShapeDtypeStruct`s.
        """
        parts = two_layer_parts(block, params)
        if parts is None:
            return False, "not a 2LP network (TwoLayerBlock with TwoLayerParams)"
        L, M, d = parts.u.shape
        if not kernels.eligible(M, d):
            return False, f"one layer (M={M}, d={d}) exceeds a kernel tile ({kernels.MAX_TILE})"
        cfg = self._config(parts, 1.0, n)  # α does not affect compiling
        reason = _compiles(cfg, M, d, jnp.dtype(parts.u.dtype).name)
        return reason is None, reason or "ok"

    def _parts(self, block, params) -> _TwoLayer:
        parts = two_layer_parts(block, params)
        if parts is None:
            raise ValueError(
                "loop: FusedLoop needs a 2LP network (exactly TwoLayerBlock and "
                "TwoLayerParams, or WeightedUnits of them); use ScanLoop or AutoLoop"
            )
        return parts

    def forward(self, block, params, alpha, h0, *, return_all=False) -> Array:
        parts = self._parts(block, params)
        cfg = self._config(parts, alpha, h0.shape[0])
        if return_all:
            return kernels.fused_forward_states(h0, parts.u, parts.kernel_v(), cfg)
        return kernels.fused_hidden(h0, parts.u, parts.kernel_v(), cfg)

    def adjoint(self, block, params, alpha, h0, final) -> Adjoint:
        parts = self._parts(block, params)
        cfg = self._config(parts, alpha, h0.shape[0])
        w = lambda hL: final_cotangent(final, hL)  # one error for a bad `final`, as the scan's
        st = kernels.fused_states(h0, parts.u, parts.kernel_v(), w, cfg)
        return Adjoint(h=st.h, b=st.b, grads=parts.grads(st.u, st.v))
