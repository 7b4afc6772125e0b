"""The law of an attention head's parameters (`AttentionGaussianLaw`), for
`meanfield.blocks.attention.AttentionHead`."""

import math

import equinox as eqx
import jax.numpy as jnp

from .._validation import as_number, check_positive_int
from ..blocks.attention import AttentionParams
from .unit import AbstractGaussianLaw


class AttentionGaussianLaw(AbstractGaussianLaw):
    """i.i.d. Gaussian heads: `q, k, v` with N(0, 1/d) entries (scores and values of order
    one), `o` with N(0, σ_o²/d_h) entries, centred (so `E[φ] = 0`).

    **Arguments:** `dim`: the token dimension d (default 2); `head_dim`: d_h (default 2);
    `sigma_o`: σ_o (default 1).
    """

    dim: int = eqx.field(static=True, converter=as_number, default=2)
    head_dim: int = eqx.field(static=True, converter=as_number, default=2)
    sigma_o: float = eqx.field(static=True, converter=as_number, default=1.0)

    def __check_init__(self):
        check_positive_int(self.dim, "dim")
        check_positive_int(self.head_dim, "head_dim")
        if not (math.isfinite(self.sigma_o) and self.sigma_o > 0):
            raise ValueError(f"sigma_o must be finite and > 0, got {self.sigma_o!r}")

    @property
    def gaussian_dim(self):
        return 4 * self.dim * self.head_dim

    def transform(self, g):
        d, dh = self.dim, self.head_dim
        q, k, v, o = jnp.split(g, 4)
        return AttentionParams(
            q=q.reshape(d, dh) / math.sqrt(d),
            k=k.reshape(d, dh) / math.sqrt(d),
            v=v.reshape(d, dh) / math.sqrt(d),
            o=self.sigma_o * o.reshape(dh, d) / math.sqrt(dh),
        )
