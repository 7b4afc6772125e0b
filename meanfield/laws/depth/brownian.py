"""Brownian depth law: V_k = sqrt(L/d) (B_{k/L} − B_{(k−1)/L}) (Mathematics §4, the SDE row)."""

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ..._validation import as_number, check_positive_int
from .base import AbstractIncrementLaw


class BrownianLaw(AbstractIncrementLaw):
    """A d×d matrix of independent standard Brownian motions on [0, 1].

    Sampled exactly on the fine grid `j/n_fine` (independent `N(0, 1/n_fine)`
    increments, cumulated). A depth-L network, L dividing `n_fine`, uses
    `V_k = sqrt(L/d) (B_{k/L} − B_{(k−1)/L})`: i.i.d. `N(0, 1/d)` entries, and with
    `α = L^{-1/2}` exactly the Euler–Maruyama scheme of `dH = d^{-1/2} dB σ(H)`.

    **Arguments:**

    - `d`: the state dimension (the weights are d×d).
    - `n_fine`: the number of steps of the fine grid (default 4096); every depth used
      with one key must divide it.
    """

    d: int = eqx.field(static=True, converter=as_number)
    n_fine: int = eqx.field(static=True, converter=as_number, default=4096)

    # 1/2: Brownian motion is fBm with H = 1/2 (any other value is refused)
    hurst: float = eqx.field(static=True, converter=as_number, default=0.5)

    def __check_init__(self):
        check_positive_int(self.d, "d")
        check_positive_int(self.n_fine, "n_fine")
        if self.hurst != 0.5:
            raise ValueError(
                f"hurst: Brownian motion has H = 1/2, got {self.hurst!r} "
                "(use FractionalBrownianLaw)"
            )

    def path(self, key: PRNGKeyArray) -> Float[Array, "n_fine+1 d d"]:
        """`B(j/n_fine)`, `j = 0..n_fine`, shape `(n_fine + 1, d, d)`, with `B(0) = 0`."""
        n = self.n_fine
        steps = jr.normal(key, (n, self.d, self.d)) / jnp.sqrt(n)
        zero = jnp.zeros((1, self.d, self.d), steps.dtype)
        return jnp.concatenate([zero, jnp.cumsum(steps, axis=0)], axis=0)
