"""Kernel and response recursions at infinite width (Mathematics §5.2; Fischer, Dahmen, Helias).

ResNet `h^l = h^{l-1} + α (W^l φ(h^{l-1}) + b^l)`, `W^l_ij ~ N(0, σ_w²/N)`,
`b^l_i ~ N(0, σ_b²)`, read-out `y = W_out φ(h^L) + b_out`:

    C^l = α² σ_w² ⟨φ(h)²⟩_{K^{l-1}} + α² σ_b²,   K^l = K^{l-1} + C^l       (C^0 = K^0)
    η^0 = 1,   η^l = α² σ_w² G(K^{l-1}) Σ_{k<l} η^k,   χ^l = Σ_{k<=l} η^k = ∂K^l/∂K^0
    K^out = σ_{w,out}² ⟨φ²⟩_{K^L} + σ_{b,out}²,   χ^out = σ_{w,out}² G(K^L) χ^L

Feed-forward comparison (no skip): `K^l = σ_w² ⟨φ²⟩_{K^{l-1}} + σ_b²`; the "residual
kernel" of a layer is then the layer's kernel, `C^l = K^l`, and its response
`η^l = ∂C^l/∂K^0 = χ^l = σ_w² G(K^{l-1}) χ^{l-1}`.

One `lax.scan` over layers; every argument but the depth and the activation is a
traced number, so `jax.vmap` over α (or σ_w², σ_b², K^0) gives a whole curve in one call.
"""

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._validation import check_finite, check_positive_int
from .gaussian import DEFAULT_ORDER, gain, second_moment

# a value per layer l = 0..L
PerLayer = Float[Array, " L+1"]


class ResponseCurves(eqx.Module):
    """Per layer l = 0..L: kernels `K`, residual kernels `C` (C^0 = K^0), response
    increments `eta` and responses `chi`; and the output kernel and response."""

    K: PerLayer
    C: PerLayer
    eta: PerLayer
    chi: PerLayer
    K_out: Float[Array, ""]
    chi_out: Float[Array, ""]


# the settings of Fischer, Dahmen and Helias' figures: Figure 2 (ResNet against
# feed-forward network; its caption's read-in σ_{w,in}² = 1.2, σ_{b,in}² = 0.2 give the input
# kernel K^0 = σ_{w,in}² ‖x‖²/d_in + σ_{b,in}² = 1.4 for standardised inputs) and the σ_w²,
# σ_b² sweeps of Figure 5
FIG2 = {"sigma_w2": 1.2, "sigma_b2": 0.2, "alpha": 1.0, "K0": 1.4}
FIG5_SIGMA_W2 = [1.0, 1.25, 1.5, 1.75, 2.0]
FIG5_SIGMA_B2 = [0.05, 0.06, 0.07, 0.08, 0.09, 0.1]


def variances(K0, sigma_w2, sigma_b2, sigma_w2_out=None, sigma_b2_out=None) -> tuple:
    """`(K0, σ_w², σ_b², σ_w,out², σ_b,out²)` as float arrays; the read-out variances default
    to the hidden ones. Concrete values must be finite and >= 0 (a one-line error)."""
    for name, value in (
        ("K0", K0),
        ("sigma_w2", sigma_w2),
        ("sigma_b2", sigma_b2),
        ("sigma_w2_out", sigma_w2_out),
        ("sigma_b2_out", sigma_b2_out),
    ):
        if value is not None:
            check_finite(value, name, least=0.0)
    f = lambda v: jnp.asarray(v, dtype=float)
    return (
        f(K0),
        f(sigma_w2),
        f(sigma_b2),
        f(sigma_w2 if sigma_w2_out is None else sigma_w2_out),
        f(sigma_b2 if sigma_b2_out is None else sigma_b2_out),
    )


def response(
    alpha,
    *,
    L: int,
    K0,
    sigma_w2,
    sigma_b2,
    sigma_w2_out=None,
    sigma_b2_out=None,
    activation: str | Callable = "erf",
    residual: bool = True,
    order: int = DEFAULT_ORDER,
) -> ResponseCurves:
    """The infinite-width kernels and responses of a depth-`L` network.

    **Arguments:**

    - `alpha`: residual scaling (ignored when `residual=False`).
    - `L`: depth (a Python int >= 1).
    - `K0`: input kernel `σ_{w,in}² xᵀx/d_in + σ_{b,in}²`.
    - `sigma_w2`, `sigma_b2`: hidden weight and bias variances.
    - `sigma_w2_out`, `sigma_b2_out`: read-out variances (default: the hidden ones).
    - `activation`: φ (default erf); `order`: Gauss–Hermite order.
    - `residual`: ResNet (True) or feed-forward network (False).
    """
    given = (K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    return _evaluate(
        _response, "alpha", alpha, L, given, activation=activation, residual=residual, order=order
    )


def _evaluate(fn, name: str, values, L: int, settings: tuple, **static):
    """`fn` (`_response`, `_curve`) at `values` (the α: finite, as floats) and at the
    `variances` of `settings` (K0, σ_w², σ_b², σ_w,out², σ_b,out²), after the checks of `L`
    and `values` (`name` in the one-line error); `static`: its other keyword arguments."""
    check_positive_int(L, "L")
    check_finite(values, name)
    return fn(jnp.asarray(values, dtype=float), *variances(*settings), L=L, **static)


def chi_out_at(alpha, K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, **static) -> Array:
    """`response(alpha, ...).chi_out` with the variances given in `variances`' order, as a
    compiled sweep over α (`output_response_curve`, `optimal_scaling`) evaluates it;
    `static`: `L`, `activation`, `order` (and `residual`)."""
    return response(
        alpha,
        K0=K0,
        sigma_w2=sigma_w2,
        sigma_b2=sigma_b2,
        sigma_w2_out=sigma_w2_out,
        sigma_b2_out=sigma_b2_out,
        **static,
    ).chi_out


@functools.partial(jax.jit, static_argnames=("L", "activation", "residual", "order"))
def _response(
    alpha, K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, *, L, activation, residual, order
):
    a2 = alpha**2 if residual else 1.0

    def step(carry, _):
        K, chi = carry
        m, g = second_moment(activation, K, order=order), gain(activation, K, order=order)
        C = a2 * (sigma_w2 * m + sigma_b2)
        if residual:
            K_new, chi_new = K + C, chi + a2 * sigma_w2 * g * chi
        else:
            K_new, chi_new = C, sigma_w2 * g * chi
        return (K_new, chi_new), (K_new, C, chi_new)

    (KL, chiL), (Ks, Cs, chis) = lax.scan(step, (K0, jnp.ones_like(K0)), None, length=L)
    K = jnp.concatenate([K0[None], Ks])
    C = jnp.concatenate([K0[None], Cs])
    chi = jnp.concatenate([jnp.ones_like(K0)[None], chis])
    # η^l = ∂C^l/∂K^0: the increments of χ for a ResNet; for a feed-forward net C^l = K^l
    eta = jnp.concatenate([chi[:1], jnp.diff(chi)]) if residual else chi
    K_out = sigma_w2_out * second_moment(activation, KL, order=order) + sigma_b2_out
    chi_out = sigma_w2_out * gain(activation, KL, order=order) * chiL
    return ResponseCurves(K=K, C=C, eta=eta, chi=chi, K_out=K_out, chi_out=chi_out)


@functools.partial(jax.jit, static_argnames=("L", "activation", "residual", "order"))
def _curve(
    alphas, K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out, *, L, activation, residual, order
):
    settings = (K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    static = dict(L=L, activation=activation, residual=residual, order=order)
    return jax.vmap(lambda a: chi_out_at(a, *settings, **static))(alphas)


def output_response_curve(
    alphas,
    *,
    L: int,
    K0,
    sigma_w2,
    sigma_b2,
    sigma_w2_out=None,
    sigma_b2_out=None,
    activation="erf",
    residual: bool = True,
    order: int = DEFAULT_ORDER,
) -> Array:
    """`χ^out` for every α in `alphas`: one compiled, vmapped call (one program per depth;
    the variances are traced, so sweeping them does not recompile)."""
    given = (K0, sigma_w2, sigma_b2, sigma_w2_out, sigma_b2_out)
    return _evaluate(
        _curve, "alphas", alphas, L, given, activation=activation, residual=residual, order=order
    )
