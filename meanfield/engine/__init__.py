"""The engine: one depth loop under every network, limit and study.

`AbstractDepthLoop.forward` runs the residual recursion (R) over depth for a batch of
inputs, `AbstractDepthLoop.adjoint` (R) and then the adjoint recursion (B) with the
parameter gradients. How the loop runs is one small class each:

* `ScanLoop`: a `lax.scan` over layers (the reference semantics; any block);
* `FusedLoop`: one fused Pallas kernel for all layers (2LP blocks; `kernels`);
* `AutoLoop`: the fused kernels on an accelerator where they apply, else the scan
  (the default of every `ResNet`).
"""

from . import kernels as kernels
from .auto import AutoLoop as AutoLoop
from .base import AbstractDepthLoop as AbstractDepthLoop
from .base import Adjoint as Adjoint
from .base import depth_of as depth_of
from .fused import FusedLoop as FusedLoop
from .fused import two_layer_parts as two_layer_parts
from .scan import ScanLoop as ScanLoop
