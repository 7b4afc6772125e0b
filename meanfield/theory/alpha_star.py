"""The optimal residual scaling α* = argmax_α χ^out (docs: Mathematics §5.2).

* `optimal_scaling`: a log-spaced grid of 256 values of α in [1e-3, 3], then a
  golden-section search on the two grid cells around the grid maximum, 80 iterations
  (the bracket shrinks by 0.618^80 ≈ 2e-17 of its width, but comparing χ^out near its
  flat top resolves α* to about sqrt(eps): 1e-8 relative, measured against the root of
  dχ^out/dα). Where the grid maximum is an end of the range there is no maximum inside
  it, and α* is NaN. Everything is traced, so it vmaps over depths' settings
  (K^0, σ_w², σ_b²).
* `saturation_formula`: `α* ≈ (1/σ_w) sqrt(((σ_w²(𝒱/2)² + σ_b²)/(σ_w² K^0 + σ_b²))^{1/L} − 1)`.
* `saturation_asymptotic`: its large-L form `sqrt(1/L) sqrt(log(ratio)/σ_w²)`.
"""

import functools
import math

import jax
import jax.lax as lax
import jax.numpy as jnp

from .._validation import check_finite, check_positive_int
from .gaussian import DEFAULT_ORDER
from .response import chi_out_at, variances

GOLDEN = (5**0.5 - 1) / 2


@functools.partial(jax.jit, static_argnames=("L", "alpha_range", "grid", "activation", "order"))
def _optimal(
    K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, *, L, alpha_range, grid, activation, order
):
    settings = (K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)

    def f(a):
        return chi_out_at(a, *settings, L=L, activation=activation, order=order)

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
    # the largest value at an end of the grid: the maximum (if any) is outside the range
    best = jnp.where((i == 0) | (i == grid - 1), jnp.nan, best)
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

    `α*` is searched in `alpha_range` (`0 < lo < hi`, on a log grid of `grid` points);
    both are NaN where χ^out is largest at an end of the range (no maximum inside it:
    widen `alpha_range`, or there is none, as for a deep enough σ_w² too small to
    saturate). One compiled program per depth; the variances and K^0 are traced (vmap
    over them).
    """
    check_positive_int(L, "L")
    try:
        lo, hi = (float(a) for a in alpha_range)
    except (TypeError, ValueError):
        raise ValueError(f"alpha_range must be two numbers (lo, hi), got {alpha_range!r}") from None
    if not 0 < lo < hi < math.inf:
        raise ValueError(f"alpha_range must satisfy 0 < lo < hi < inf, got {alpha_range!r}")
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 3:
        raise ValueError(f"grid must be an integer >= 3, got {grid!r}")
    check_positive_int(grid, "grid")  # and at most 2^31 - 1
    return _optimal(
        *variances(K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out),
        L=L,
        alpha_range=tuple(alpha_range),
        grid=grid,
        activation=activation,
        order=order,
    )


def _ratio(L, K0, sigma_w2, sigma_b2, dynamic_range):
    check_positive_int(L, "L")
    check_finite(K0, "K0", least=0.0)
    check_finite(sigma_b2, "sigma_b2", least=0.0)
    check_finite(sigma_w2, "sigma_w2", positive=True)
    check_finite(dynamic_range, "dynamic_range", least=0.0)
    return (sigma_w2 * (dynamic_range / 2) ** 2 + sigma_b2) / (sigma_w2 * K0 + sigma_b2)


def saturation_formula(L, *, K0, sigma_w2, sigma_b2, dynamic_range=1.0):
    """Fischer et al.'s eq. (8): the α that puts sqrt(K^L) at the edge 𝒱/2 of the
    dynamic range of a linearised network. NaN where the input already lies beyond that
    edge (`σ_w² K^0 + σ_b² > σ_w² (𝒱/2)² + σ_b²`): no α does it; 0 where it lies on it."""
    r = _ratio(L, K0, sigma_w2, sigma_b2, dynamic_range)
    return jnp.sqrt(jnp.where(r >= 1, r ** (1.0 / L) - 1.0, jnp.nan) / sigma_w2)


def saturation_asymptotic(L, *, K0, sigma_w2, sigma_b2, dynamic_range=1.0):
    """The large-L form (9): `sqrt(1/L) sqrt(log(ratio)/σ_w²)` (NaN as in
    `saturation_formula`)."""
    r = _ratio(L, K0, sigma_w2, sigma_b2, dynamic_range)
    return jnp.sqrt(jnp.where(r >= 1, jnp.log(r), jnp.nan) / (sigma_w2 * L))
