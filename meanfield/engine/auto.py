"""The default depth loop: the fused kernels where they apply on an accelerator, else the scan."""

import functools
import warnings

import equinox as eqx
import jax
from jaxtyping import Array, PyTree

from .._validation import check_positive_int
from ..blocks.base import AbstractBlock
from .base import AbstractDepthLoop, Adjoint
from .fused import FusedLoop, two_layer_parts
from .scan import ScanLoop, default_unroll


@functools.lru_cache(maxsize=64)
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=4)


class AutoLoop(AbstractDepthLoop):
    """`FusedLoop` for a 2LP stack on a GPU/TPU when its kernels apply and compile there
    (`FusedLoop.supports`, checked once per configuration), else `ScanLoop`. The
    default loop of every `ResNet`; on a CPU it is always the scan.

    **Arguments:**

    - `unroll`: layers per loop step of the scan where it runs (`ScanLoop.unroll`).
      Default: 1 on a CPU, 8 on an accelerator (where a loop step costs kernel launches).
    - `fused`: the `FusedLoop` (tiling) used where the kernels apply.
    - `cpu`: also use the fused kernels on a CPU (Pallas interpret mode: for tests,
      slow). Default False.
    """

    unroll: int | None = eqx.field(static=True, default=None)
    fused: FusedLoop = FusedLoop()
    cpu: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.unroll is not None:
            check_positive_int(self.unroll, "unroll")
        if not isinstance(self.fused, FusedLoop):
            raise ValueError(f"fused must be a FusedLoop, got {type(self.fused).__name__}")

    def resolve(self, block: AbstractBlock, params: PyTree, n: int) -> AbstractDepthLoop:
        on_cpu = jax.default_backend() == "cpu"
        unroll = default_unroll(self.unroll)
        if on_cpu and not self.cpu:
            return ScanLoop(unroll)
        ok, reason = self.fused.supports(block, params, n)
        if ok:
            return self.fused
        if two_layer_parts(block, params) is not None:
            _warn_once(f"fused Pallas depth loop not used ({reason}); using the scan")
        return ScanLoop(unroll)

    def forward(self, block, params, alpha, h0, *, return_all=False) -> Array:
        loop = self.resolve(block, params, h0.shape[0])
        return loop.forward(block, params, alpha, h0, return_all=return_all)

    def adjoint(self, block, params, alpha, h0, final) -> Adjoint:
        loop = self.resolve(block, params, h0.shape[0])
        return loop.adjoint(block, params, alpha, h0, final)
