"""Weighted particles carrying the expectation over μ_0 in the limits.

`E_{Z_0~μ_0}[f(Z_0)] ≈ Σ_p w_p f(z_p)`, with the same particles at every depth s
(so the limit's vector field is smooth in s).

* `monte_carlo_particles`: N i.i.d. draws, weights 1/N (any law);
* `gauss_hermite_particles`: the tensor Gauss–Hermite rule of order q in each of
  the p Gaussian coordinates of an `AbstractGaussianLaw` (q^p nodes); spectrally
  accurate for smooth integrands (tanh, gelu, erf, ...), only algebraically for
  relu's kink.

`particle_step` is the one particle update of the library: the limit's GD step
(`meanfield.limits.mean_ode`), the limit copies of a finite network's units and the Euler part
of the error decomposition (`meanfield.coupling`) all move their units with it.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._validation import check_key, check_positive_int
from ..blocks.base import AbstractUnitBlock
from ..laws.unit import AbstractGaussianLaw, AbstractLaw, as_law

MAX_QUADRATURE_NODES = 2**22
# Golub–Welsch's weights here cost order² operations (4096: about a quarter of a second)
MAX_HERMITE_ORDER = 4096


class Particles(eqx.Module):
    """Particles `z` (leaves with a leading axis N) and weights `(N,)` summing to 1."""

    z: PyTree
    weights: Float[Array, " N"]

    @property
    def count(self) -> int:
        return int(self.weights.shape[0])

    def expect(self, fn, *args):
        """`Σ_p w_p fn(z_p, *args)` (fn maps one particle to an array or pytree)."""
        values = jax.vmap(lambda z: fn(z, *args))(self.z)
        return jax.tree.map(lambda v: jnp.tensordot(self.weights, v, axes=1), values)

    def padded(self, count: int) -> "Particles":
        """The same rule held in arrays of `count` particles: the extra particles repeat
        the first one with weight 0, so every expectation is unchanged (up to the order of
        summation). Solves with a coarse and a fine rule padded to one size share one
        compiled program (this is how `meanfield study mean-ode` checks its reference)."""
        check_positive_int(count, "count")
        extra = count - self.count
        if extra < 0:
            raise ValueError(f"count: must be >= the {self.count} particles held, got {count}")
        if extra == 0:
            return self
        repeat = lambda a: jnp.concatenate([a, jnp.repeat(a[:1], extra, axis=0)])
        zeros = jnp.zeros((extra,), self.weights.dtype)
        return Particles(
            z=jax.tree.map(repeat, self.z), weights=jnp.concatenate([self.weights, zeros])
        )


def monte_carlo_particles(law: AbstractLaw, count: int, *, key: PRNGKeyArray) -> Particles:
    """`count` i.i.d. draws from `law` (or a function of no arguments returning it),
    each of weight 1/count."""
    check_positive_int(count, "count")
    check_key(key)
    law = as_law(law)
    z = jax.vmap(law.sample)(jr.split(key, count))
    return Particles(z=z, weights=jnp.full((count,), 1.0 / count))


def hermite_rule(order: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the Gauss–Hermite rule for the standard normal law.

    Golub–Welsch: the nodes are the eigenvalues of the Jacobi matrix of the
    probabilists' Hermite polynomials (off-diagonal sqrt(k); LAPACK's tridiagonal
    eigensolver, 0.05 s at order 2048 where a dense one takes 0.45 s); the weights are the
    Christoffel numbers `1 / Σ_k p_k(x_i)²` of the orthonormal polynomials (equal to the
    squared first eigenvector components, without computing eigenvectors). Stable for
    any order (numpy's `hermegauss` overflows beyond a few hundred nodes); weights that
    underflow to 0 are dropped.
    """
    check_positive_int(order, "order")
    if order > MAX_HERMITE_ORDER:
        raise ValueError(f"order must be at most {MAX_HERMITE_ORDER} (Golub–Welsch), got {order}")
    import scipy.linalg  # here: 0.15 s of every import of meanfield otherwise

    off = np.sqrt(np.arange(1, order, dtype=np.float64))
    nodes = np.asarray(scipy.linalg.eigvalsh_tridiagonal(np.zeros(order), off), np.float64)
    total = np.zeros_like(nodes)
    p_prev, p = np.zeros_like(nodes), np.ones_like(nodes)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(order):
            total += p * p
            p_prev, p = p, (nodes * p - math.sqrt(k) * p_prev) / math.sqrt(k + 1)
        weights = 1.0 / total
    keep = np.isfinite(weights) & (weights > 0)
    return nodes[keep], weights[keep] / weights[keep].sum()


def gauss_hermite_particles(law: AbstractLaw, order: int) -> Particles:
    """The tensor Gauss–Hermite rule of `order` nodes per Gaussian coordinate of `law` (or
    of what a function of no arguments returns)."""
    law = as_law(law)  # (a law that is not Gaussian is refused next)
    if not isinstance(law, AbstractGaussianLaw):
        raise ValueError(
            f"law must be an AbstractGaussianLaw for Gauss-Hermite quadrature, "
            f"got {type(law).__name__}; use monte_carlo_particles"
        )
    check_positive_int(order, "order")
    p = law.gaussian_dim
    if order**p > MAX_QUADRATURE_NODES:
        raise ValueError(
            f"order={order} in {p} dimensions needs {order**p} nodes "
            f"(more than {MAX_QUADRATURE_NODES}); lower order or use Monte-Carlo particles"
        )
    x, w = hermite_rule(order)
    grids = np.meshgrid(*([x] * p), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    wgrids = np.meshgrid(*([w] * p), indexing="ij")
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    z = jax.vmap(law.transform)(jnp.asarray(nodes))
    return Particles(z=z, weights=jnp.asarray(weights / weights.sum()))


def particle_gradients(
    block: AbstractUnitBlock, z: PyTree, hs: Float[Array, "n d"], bs: Float[Array, "n d"]
) -> PyTree:
    """`(1/n) Σ_i D_2φ(h_i, z_p)ᵀ b_i` for every particle `z_p` (leaves of `z` with a
    leading particle axis): the mean-field gradient of a unit at one depth.

    With the limit's mean fields `h_k(s), b_k(s)` this is the limit's GD direction
    (docs: Mathematics §3); with a finite network's `ĥ^{l-1}, b̂^l` it is the gradient of one of
    its units in the mean-ODE convention (the raw gradient times L·M, at α = 1/(LM)).
    """

    def one(zp):
        def d2(h, b):
            _, vjp = jax.vjp(lambda zz: block(h, zz), zp)
            return vjp(b)[0]

        return jax.tree.map(lambda g: jnp.mean(g, axis=0), jax.vmap(d2)(hs, bs))

    return jax.vmap(one)(z)


def particle_step(
    block: AbstractUnitBlock,
    z: PyTree,
    hs: Float[Array, "n d"],
    bs: Float[Array, "n d"],
    learning_rate: float,
) -> PyTree:
    """One GD step of every particle: `z_p − η (1/n) Σ_i D_2φ(h_i, z_p)ᵀ b_i`."""
    grads = particle_gradients(block, z, hs, bs)
    return jax.tree.map(lambda zz, g: zz - learning_rate * g, z, grads)
