"""The optimal residual scaling α* = argmax_α χ^out (SPEC §5.2).

* `optimal_scaling`: a log-spaced grid of 256 values of α in [1e-3, 3], then a
  golden-section search on the two grid cells around the grid maximum, 80 iterations
  (the bracket shrinks by 0.618^80 ≈ 2e-17 of its width: resolution at round-off).
  Everything is traced, so it vmaps over depths' settings (K^0, σ_w², σ_b²).
* `saturation_formula`: `α* ≈ (1/σ_w) sqrt(((σ_w²(𝒱/2)² + σ_b²)/(σ_w² K^0 + σ_b²))^{1/L} − 1)`.
* `saturation_asymptotic`: its large-L form `sqrt(1/L) sqrt(log(ratio)/σ_w²)`.
"""

import functools

import jax
import jax.lax as lax
import jax.numpy as jnp

from .gaussian import DEFAULT_ORDER
from .response import response, variances

GOLDEN = (5**0.5 - 1) / 2


@functools.partial(jax.jit, static_argnames=("L", "alpha_range", "grid", "activation", "order"))
def _optimal(
    K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, *, L, alpha_range, grid, activation, order
):
    def f(a):
        return response(
            a,
            L=L,
            K0=K0,
            sigma_w2=sigma_w2,
            sigma_b2=sigma_b2,
            sigma_w2_out=sigma_w2_out,
            sigma_b2_out=sigma_b2_out,
            activation=activation,
            order=order,
        ).chi_out

    lo, hi = alpha_range
    alphas = jnp.geomspace(lo, hi, grid)
    values = jax.vmap(f)(alphas)
    i = jnp.argmax(values)
    a, b = alphas[jnp.maximum(i - 1, 0)], alphas[jnp.minimum(i + 1, grid - 1)]

    def body(_, ab):
        a, b = ab
        c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
        left = f(c) >= f(d)
        return jnp.where(left, a, c), jnp.where(left, d, b)

    a, b = lax.fori_loop(0, 80, body, (a, b))
    best = (a + b) / 2
    return best, f(best)


def optimal_scaling(
    *,
    L: int,
    K0,
    sigma_w2,
    sigma_b2,
    sigma_w2_out=None,
    sigma_b2_out=None,
    activation="erf",
    order: int = DEFAULT_ORDER,
    alpha_range=(1e-3, 3.0),
    grid: int = 256,
):
    """`(α*, χ^out(α*))` for a depth-`L` ResNet (arguments as in `response`).

    One compiled program per depth; the variances and K^0 are traced (vmap over them).
    """
    return _optimal(
        *variances(K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out),
        L=L,
        alpha_range=tuple(alpha_range),
        grid=grid,
        activation=activation,
        order=order,
    )


def _ratio(K0, sigma_w2, sigma_b2, dynamic_range):
    return (sigma_w2 * (dynamic_range / 2) ** 2 + sigma_b2) / (sigma_w2 * K0 + sigma_b2)


def saturation_formula(L, *, K0, sigma_w2, sigma_b2, dynamic_range=1.0):
    """Fischer et al.'s eq. (8): the α that puts sqrt(K^L) at the edge 𝒱/2 of the
    dynamic range of a linearised network."""
    r = _ratio(K0, sigma_w2, sigma_b2, dynamic_range)
    return jnp.sqrt(jnp.maximum(r ** (1.0 / L) - 1.0, 0.0) / sigma_w2)


def saturation_asymptotic(L, *, K0, sigma_w2, sigma_b2, dynamic_range=1.0):
    """The large-L form (9): `sqrt(1/L) sqrt(log(ratio)/σ_w²)`."""
    r = _ratio(K0, sigma_w2, sigma_b2, dynamic_range)
    return jnp.sqrt(jnp.maximum(jnp.log(r), 0.0) / (sigma_w2 * L))
