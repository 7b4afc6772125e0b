"""The limits of the two-layer perceptron on an embedding (`meanfield.models.perceptron`):
the particle dynamics of fixed D (`particle_dynamics`) and the Gaussian limit of D → ∞
(`gaussian_limit`), with their quadrature and Monte-Carlo nodes."""

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._validation import check_finite_arguments
from ..blocks.activations import resolve_activation

MAX_NODES = 2**20  # a quadrature rule larger than this is refused (use Monte Carlo)


class ParticleLimit(eqx.Module):
    """The outcome of `particle_dynamics`: `outputs` (K+1, n, d_out) after k updates,
    `hidden_coef` (K+1, n, d_out): the hidden field is `h_k(x_m) = W_out @ hidden_coef[k, m]`
    (for a weighted particle set standing for the Gaussian law), `preactivations`
    (K+1, N, n): every particle's `p_k`."""

    outputs: jax.Array
    hidden_coef: jax.Array
    preactivations: jax.Array


def particle_dynamics(
    p0, a0, weights, g_in, g_out, ys, activation, *, lr_u, lr_v, steps: int
) -> ParticleLimit:
    """The reduced GD recursion (module docstring) for particles `p0` (N, n), `a0`
    (N, d_out) with `weights` (N,) summing to one: the finite network with weights 1/M, a
    limit with quadrature or Monte-Carlo weights. Compiled once per shape, activation and
    number of steps (the learning rates are traced); concrete arrays and rates must be
    finite (checked before the compiled call)."""
    check_finite_arguments(
        colon=True,
        p0=p0,
        a0=a0,
        weights=weights,
        g_in=g_in,
        g_out=g_out,
        ys=ys,
        lr_u=lr_u,
        lr_v=lr_v,
    )
    return _particle_dynamics(
        p0, a0, weights, g_in, g_out, ys, activation, lr_u=lr_u, lr_v=lr_v, steps=steps
    )


@functools.partial(jax.jit, static_argnames=("activation", "steps"))
def _particle_dynamics(
    p0, a0, weights, g_in, g_out, ys, activation, *, lr_u, lr_v, steps: int
) -> ParticleLimit:
    """`particle_dynamics`, compiled."""
    rho = resolve_activation(activation)
    drho = jax.vmap(jax.vmap(jax.grad(rho)))
    n = ys.shape[0]
    g_out_inv = jnp.linalg.inv(g_out)

    def step(carry, _):
        p, a, c = carry
        act = rho(p)  # (N, n)
        f = jnp.einsum("j,jm,jo->mo", weights, act, a)
        coef = jnp.einsum("j,jm,jo->mo", weights, act, a0 @ g_out_inv + c)
        g = f - ys  # (n, d_out)
        dc = -lr_v / n * act @ g  # (N, d_out): v += W_out dc
        dp = -lr_u / n * (drho(p) * (a @ g.T)) @ g_in  # (N, n)
        return (p + dp, a + dc @ g_out, c + dc), (f, coef, p)

    c0 = jnp.zeros_like(a0)
    _, (f, coef, ps) = jax.lax.scan(step, (p0, a0, c0), None, length=steps + 1)
    return ParticleLimit(f, coef, ps)


def gram_root(cov, tol: float = 1e-12):
    """A square root `R` (dim × rank) of a PSD `cov` with `R Rᵀ = cov`, dropping
    directions whose eigenvalue is below `tol` times the largest."""
    w, q = np.linalg.eigh(np.asarray(cov, dtype=float))
    keep = w > tol * max(w.max(), 0.0)
    return q[:, keep] * np.sqrt(w[keep])


def gaussian_nodes(g_in, g_out, *, s_u: float, s_v: float, order: int):
    """Tensor Gauss–Hermite nodes and weights for `(p_0, a_0) ~ N(0, s_u² G_in) ⊗
    N(0, s_v² G_out)`: arrays (N, n), (N, d_out), (N,). Directions where `G_in` is
    singular (inputs spanning fewer than n dimensions) are not integrated over."""
    check_finite_arguments(colon=True, g_in=g_in, g_out=g_out, s_u=s_u, s_v=s_v)
    r_in, r_out = s_u * gram_root(g_in), s_v * gram_root(g_out)
    dims = r_in.shape[1] + r_out.shape[1]
    if order**dims > MAX_NODES:
        raise ValueError(
            f"order: {order}^{dims} quadrature nodes exceed {MAX_NODES}; use Monte Carlo"
        )
    x, w = np.polynomial.hermite_e.hermegauss(order)
    grids = np.meshgrid(*([x] * dims), indexing="ij")
    z = np.stack([g.ravel() for g in grids], axis=-1)
    weights = np.prod(np.meshgrid(*([w] * dims), indexing="ij"), axis=0).ravel()
    weights = weights / weights.sum()
    k = r_in.shape[1]
    return (
        jnp.asarray(z[:, :k] @ r_in.T),
        jnp.asarray(z[:, k:] @ r_out.T),
        jnp.asarray(weights),
    )


def monte_carlo_nodes(key, g_in, g_out, *, s_u: float, s_v: float, particles: int):
    """`particles` i.i.d. draws of `(p_0, a_0)` with equal weights (as `gaussian_nodes`)."""
    check_finite_arguments(colon=True, g_in=g_in, g_out=g_out, s_u=s_u, s_v=s_v)
    r_in, r_out = s_u * gram_root(g_in), s_v * gram_root(g_out)
    k1, k2 = jr.split(key)
    z_in = jr.normal(k1, (particles, r_in.shape[1]))
    z_out = jr.normal(k2, (particles, r_out.shape[1]))
    return (
        z_in @ jnp.asarray(r_in.T),
        z_out @ jnp.asarray(r_out.T),
        jnp.full(particles, 1 / particles),
    )


class Limit(eqx.Module):
    """A limit's outputs (K+1, n, d_out), hidden-field coefficients (K+1, n, d_out)
    (`h_k(x_m) = W_out @ hidden_coef[k, m]`), and the estimate of its own error in each
    (the largest difference with a second, finer rule)."""

    outputs: jax.Array
    hidden_coef: jax.Array
    error_outputs: float
    error_hidden: float
    method: str = eqx.field(static=True)


def gaussian_limit(
    g_in,
    g_out,
    ys,
    *,
    activation: str | Callable = "tanh",
    s_u: float = 1.0,
    s_v: float = 1.0,
    lr_u: float,
    lr_v: float,
    steps: int,
    order: int | None = None,
) -> Limit:
    """The mean-field limit of the reduced particles for the Grams `g_in`, `g_out`: the
    fixed-D limit at a draw's Grams (`Embedding.grams`), the D → ∞ limit at theirs
    (`infinite_d_grams`). Quadrature of `order` nodes per dimension (default: 64 for up to
    three dimensions, 20 for four), its error estimated against
    `order + order // 2` nodes; beyond 4 dimensions refused (use `monte_carlo_nodes` with
    `particle_dynamics` and the spread over draws)."""
    check_finite_arguments(
        colon=True, g_in=g_in, g_out=g_out, ys=ys, s_u=s_u, s_v=s_v, lr_u=lr_u, lr_v=lr_v
    )
    g_in, g_out = np.asarray(g_in), np.asarray(g_out)
    dims = gram_root(g_in).shape[1] + gram_root(g_out).shape[1]
    if dims > 4:
        raise ValueError(
            f"g_in, g_out: {dims} Gaussian dimensions (> 4) for tensor quadrature; "
            "use monte_carlo_nodes with particle_dynamics"
        )
    if order is None:
        order = {1: 64, 2: 64, 3: 64, 4: 20}[dims]
    ys = jnp.asarray(ys)

    def solve(q):
        p0, a0, w = gaussian_nodes(g_in, g_out, s_u=s_u, s_v=s_v, order=q)
        return _particle_dynamics(  # its arrays checked above
            p0, a0, w, jnp.asarray(g_in), jnp.asarray(g_out), ys, activation,
            lr_u=lr_u, lr_v=lr_v, steps=steps,
        )  # fmt: skip

    coarse, fine = solve(order), solve(order + order // 2)
    return Limit(
        fine.outputs,
        fine.hidden_coef,
        float(jnp.max(jnp.abs(fine.outputs - coarse.outputs))),
        float(jnp.max(jnp.abs(fine.hidden_coef - coarse.hidden_coef))),
        f"Gauss-Hermite {order + order // 2}^{dims} (error vs {order}^{dims})",
    )


def infinite_d_grams(xs, d_out: int, sigma_in: float = 1.0, sigma_out: float = 1.0):
    """The Grams' D → ∞ limits `σ_in² X Xᵀ` and `σ_out² I`."""
    check_finite_arguments(colon=True, xs=xs, sigma_in=sigma_in, sigma_out=sigma_out)
    xs = jnp.asarray(xs)
    return sigma_in**2 * xs @ xs.T, sigma_out**2 * jnp.eye(d_out, dtype=xs.dtype)
