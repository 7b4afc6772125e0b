"""Attention heads as the units of a residual layer: the Transformer remark of Chizat's
lecture notes on ResNets (two-layer-perceptron blocks alternating with attention blocks fit
the same framework), as a worked example of a unit block.

The state is T tokens of dimension d flattened, `h ∈ R^{T·d}` (row-major: token t is
`h[t·d:(t+1)·d]`). One unit is one head with parameters `z = (q, k, v, o)`,
`q, k ∈ R^{d×d_h}`, `v ∈ R^{d×d_h}`, `o ∈ R^{d_h×d}`:

    H = h.reshape(T, d),   A = softmax(H q (H k)ᵀ / sqrt(d_h))  (row-wise),
    φ(h, z) = (A H v o).reshape(T·d),

and a layer sums its M heads, `h^l = h^{l-1} + α Σ_j φ(h^{l-1}, z^{j,l})` — multi-head
attention with a residual connection. With `o` centred (the law below), `E[φ(h, Z)] = 0`,
so the first forward pass of the mean-ODE limit is the identity, as for the centred 2LP;
softmax is not homogeneous, so `E‖φ(h, Z)‖² = c‖h‖²` (Chizat's Proposition 2.1) holds with
a c that depends on ‖h‖ — exactly at the first layer only.

Run it through the studies (`--d` must be T·d):

    meanfield study variance --block meanfield.blocks.attention:AttentionHead \\
        --law meanfield.laws.attention:AttentionGaussianLaw --d 4
    meanfield study mean-ode --block meanfield.blocks.attention:AttentionHead \\
        --law meanfield.laws.attention:AttentionGaussianLaw --d 4
"""

import math

import equinox as eqx
import jax
from jaxtyping import Array, Float

from .._validation import as_number, check_positive_int
from .base import AbstractUnitBlock


class AttentionParams(eqx.Module):
    """One head: queries `q`, keys `k`, values `v` (d×d_h) and output `o` (d_h×d)."""

    q: Float[Array, "... d dh"]
    k: Float[Array, "... d dh"]
    v: Float[Array, "... d dh"]
    o: Float[Array, "... dh d"]


class AttentionHead(AbstractUnitBlock):
    """One attention head on T tokens flattened into the state (module docstring).

    **Arguments:** `tokens`: T (default 2); the token dimension is the state's length
    divided by T.
    """

    tokens: int = eqx.field(static=True, converter=as_number, default=2)

    def __check_init__(self):
        check_positive_int(self.tokens, "tokens")

    def __call__(self, h: Float[Array, " Td"], z: AttentionParams) -> Float[Array, " Td"]:
        if h.shape[0] % self.tokens:
            raise ValueError(f"h: length {h.shape[0]} is not a multiple of tokens = {self.tokens}")
        H = h.reshape(self.tokens, -1)
        scores = (H @ z.q) @ (H @ z.k).T / math.sqrt(z.q.shape[-1])
        return (jax.nn.softmax(scores, axis=-1) @ H @ z.v @ z.o).reshape(-1)
