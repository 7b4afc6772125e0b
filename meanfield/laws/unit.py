"""Initial laws μ_0: how one unit's (or one layer's) parameters are drawn.

A law is a module with one method, `sample(key) -> z`. `ResNet.sample` stacks
independent draws with `jax.vmap` over split keys.
"""

import abc
import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._validation import as_number, check_callable, check_fields
from ..blocks.layers import DenseParams, PerceptronParams
from ..blocks.two_layer import TwoLayerParams


class AbstractLaw(eqx.Module):
    """A law μ_0 on the parameters of one unit (or one layer).

    Where the library takes a law (`ResNet.sample`, `monte_carlo_particles`,
    `gauss_hermite_particles`, `mean_ode_study`, `--law`) it also takes a function of no
    arguments returning one (`as_law`).
    """

    @abc.abstractmethod
    def sample(self, key: PRNGKeyArray) -> PyTree:
        """One draw z ~ μ_0."""


def as_law(law, name: str = "law") -> AbstractLaw:
    """`law` as an `AbstractLaw`: itself, or what a function of no arguments returns (a
    law's factory, as the command line's `--law` takes); a one-line `ValueError` naming
    `name` otherwise."""
    if isinstance(law, AbstractLaw):
        return law
    if callable(law):  # (a law's class with defaults for every field too)
        try:
            made = law()
        except TypeError as err:
            raise ValueError(
                f"{name}: an AbstractLaw or a function of no arguments returning one; "
                f"calling {getattr(law, '__name__', 'it')}() failed ({err})"
            ) from None
        if isinstance(made, AbstractLaw):
            return made
        raise ValueError(
            f"{name}: {getattr(law, '__name__', 'the function')}() gives a "
            f"{type(made).__name__}, not an AbstractLaw"
        )
    raise ValueError(
        f"{name}: an AbstractLaw or a function of no arguments returning one, got "
        f"{type(law).__name__}"
    )


class AbstractGaussianLaw(AbstractLaw):
    """A law that is the image of a standard Gaussian: `z = transform(g)`, `g ~ N(0, I_p)`.

    Such a law allows Gauss–Hermite quadrature of expectations
    (`meanfield.gauss_hermite_particles`), not only Monte Carlo. Subclasses implement
    `gaussian_dim` (p) and `transform`; `sample` follows.
    """

    @property
    @abc.abstractmethod
    def gaussian_dim(self) -> int:
        """p, the number of independent standard normal coordinates."""

    @abc.abstractmethod
    def transform(self, g: Float[Array, " p"]) -> PyTree:
        """The parameters z for standard normal coordinates `g`."""

    def sample(self, key: PRNGKeyArray) -> PyTree:
        return self.transform(jr.normal(key, (self.gaussian_dim,)))


class TwoLayerGaussianLaw(AbstractGaussianLaw):
    """Centred 2LP law: `u ~ N(0, σ_u² I_d)`, `v ~ N(0, σ_v² I_d)` independent.

    With it E[φ(h, Z_0)] = 0, so the k = 0 mean-ODE limit is the identity.
    """

    d: int = eqx.field(static=True, converter=as_number)
    sigma_u: float = eqx.field(static=True, converter=as_number, default=1.0)
    sigma_v: float = eqx.field(static=True, converter=as_number, default=1.0)

    def __check_init__(self):
        check_fields(self, ints=("d",), positive=("sigma_u", "sigma_v"))

    @property
    def gaussian_dim(self):
        return 2 * self.d

    def transform(self, g):
        return TwoLayerParams(u=self.sigma_u * g[: self.d], v=self.sigma_v * g[self.d :])


class TwoLayerNonCentredLaw(AbstractGaussianLaw):
    """Non-centred 2LP law: `u ~ N(0, σ_u² I_d)`, `v = u + ξ`, `ξ ~ N(0, σ_ξ² I_d)`.

    Then E[v ρ(uᵀh)] = E[u ρ(uᵀh)] = σ_u² E[ρ'(uᵀh)] h (Stein's lemma), which is
    non-zero for relu, tanh, gelu, ..., so the mean-ODE limit moves already at
    initialisation. `sigma_xi = 0` (v = u) is allowed.
    """

    d: int = eqx.field(static=True, converter=as_number)
    sigma_u: float = eqx.field(static=True, converter=as_number, default=1.0)
    sigma_xi: float = eqx.field(static=True, converter=as_number, default=1.0)

    def __check_init__(self):
        check_fields(self, ints=("d",), positive=("sigma_u",), non_negative=("sigma_xi",))

    @property
    def gaussian_dim(self):
        # with σ_ξ = 0 the law lives on d coordinates (v = u), which keeps quadrature cheap
        return 2 * self.d if self.sigma_xi > 0 else self.d

    def transform(self, g):
        u = self.sigma_u * g[: self.d]
        v = u + self.sigma_xi * g[self.d :] if self.sigma_xi > 0 else u
        return TwoLayerParams(u=u, v=v)


class SamplerLaw(AbstractLaw):
    """Any user sampler `fn(key) -> z` (z any pytree of arrays)."""

    fn: Callable = eqx.field(static=True)

    def __check_init__(self):
        check_callable(self.fn, "fn", "(key -> z)")

    def sample(self, key):
        return self.fn(key)


class MatrixGaussianLaw(AbstractLaw):
    """A d×d matrix with i.i.d. `N(0, std²)` entries (default std = 1/sqrt(d))."""

    d: int = eqx.field(static=True, converter=as_number)
    std: float | None = eqx.field(static=True, converter=as_number, default=None)

    def __check_init__(self):
        check_fields(self, ints=("d",), positive=("std",), optional=("std",))

    def sample(self, key):
        std = 1.0 / math.sqrt(self.d) if self.std is None else self.std
        return std * jr.normal(key, (self.d, self.d))


class PerceptronGaussianLaw(AbstractLaw):
    """`(V, W)` with i.i.d. Gaussian entries, V of shape (d, m), W of shape (m, d).

    Defaults: m = d, entries of variance 1/d (Mathematics §4 phases).
    """

    d: int = eqx.field(static=True, converter=as_number)
    m: int | None = eqx.field(static=True, converter=as_number, default=None)
    std_v: float | None = eqx.field(static=True, converter=as_number, default=None)
    std_w: float | None = eqx.field(static=True, converter=as_number, default=None)

    def __check_init__(self):
        optional = ("m", "std_v", "std_w")
        check_fields(self, ints=("d", "m"), positive=("std_v", "std_w"), optional=optional)

    def sample(self, key):
        m = self.d if self.m is None else self.m
        default = 1.0 / math.sqrt(self.d)
        std_v = default if self.std_v is None else self.std_v
        std_w = default if self.std_w is None else self.std_w
        kv, kw = jr.split(key)
        return PerceptronParams(
            V=std_v * jr.normal(kv, (self.d, m)), W=std_w * jr.normal(kw, (m, self.d))
        )


class DenseGaussianLaw(AbstractLaw):
    """`(W, b)` with `W_ij ~ N(0, σ_w²/N)`, `b_i ~ N(0, σ_b²)` (docs: Mathematics §5.2)."""

    N: int = eqx.field(static=True, converter=as_number)
    sigma_w2: float = eqx.field(static=True, converter=as_number, default=1.0)
    sigma_b2: float = eqx.field(static=True, converter=as_number, default=0.0)

    def __check_init__(self):
        check_fields(self, ints=("N",), non_negative=("sigma_w2", "sigma_b2"))

    def sample(self, key):
        kw, kb = jr.split(key)
        return DenseParams(
            W=jnp.sqrt(self.sigma_w2 / self.N) * jr.normal(kw, (self.N, self.N)),
            b=jnp.sqrt(self.sigma_b2) * jr.normal(kb, (self.N,)),
        )
