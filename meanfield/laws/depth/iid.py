"""I.i.d. weights, uncoupled across depths (Mathematics §4, phases): Gaussian or Rademacher
entries."""

import math

import equinox as eqx
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray

from ..._validation import as_number, check_fields
from .base import AbstractDepthLaw, check_depth


class IIDGaussianLaw(AbstractDepthLaw):
    """`V_1..V_L` i.i.d. with i.i.d. `N(0, std²)` entries (default `std = 1/sqrt(d)`).

    Uncoupled: each depth draws fresh weights (the key is folded with L), so networks
    of different depths are independent. (The coupled version of this law is
    `BrownianLaw`, whose weights at any one depth have exactly this distribution.)

    **Arguments:**

    - `d`: the state dimension.
    - `std`: the standard deviation of every entry (default `1/sqrt(d)`).
    """

    d: int = eqx.field(static=True, converter=as_number)
    std: float | None = eqx.field(static=True, converter=as_number, default=None)

    def __check_init__(self):
        check_fields(self, ints=("d",), positive=("std",), optional=("std",))

    def weights(self, key: PRNGKeyArray, L: int) -> Float[Array, "L d d"]:
        check_depth(L)
        std = 1.0 / math.sqrt(self.d) if self.std is None else self.std
        return std * jr.normal(jr.fold_in(key, L), (L, self.d, self.d))


class IIDRademacherLaw(IIDGaussianLaw):
    """`V_1..V_L` i.i.d. with i.i.d. entries `±std` with probability 1/2 each (default
    `std = 1/sqrt(d)`): the same mean and variance as `IIDGaussianLaw`, a symmetric
    sub-Gaussian law that is not Gaussian (the phase theorems of Marion et al. hold for any
    such law). Uncoupled across depths, like `IIDGaussianLaw`.
    """

    def weights(self, key: PRNGKeyArray, L: int) -> Float[Array, "L d d"]:
        check_depth(L)
        std = 1.0 / math.sqrt(self.d) if self.std is None else self.std
        signs = jr.rademacher(jr.fold_in(key, L), (L, self.d, self.d))
        return std * signs.astype(jr.normal(key, ()).dtype)
