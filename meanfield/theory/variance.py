"""The variance of the first forward pass (Mathematics §5.1, Chizat's Proposition 2.1).

If `E[φ(h, Z_0) | h] = 0` and `E[‖φ(h, Z_0)‖² | h] = c ‖h‖²`, then `E[h^l] = x` and

    Δ_l² = E‖h^l − x‖² = ((1 + c α² M)^l − 1) ‖x‖².

For the ReLU 2LP unit with `u ~ N(0, σ_u² I_d)`, `v ~ N(0, σ_v² I_d)`: `c = (d/2) σ_u² σ_v²`.
With `α = L^{-γ}/sqrt(M)` the multiplier `(1 + c L^{-2γ})^L − 1` explodes for γ < 1/2,
tends to `e^c − 1` at γ = 1/2, and vanishes like `c L^{1−2γ}` for γ > 1/2.
"""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .._mapping import map_batched
from .._validation import as_number
from ..blocks.base import AbstractUnitBlock
from ..laws.unit import AbstractLaw
from ..models.resnet import ResNet


def estimate_c(
    block: AbstractUnitBlock,
    law: AbstractLaw,
    d: int,
    *,
    key,
    samples: int = 200_000,
    directions: int = 8,
    norm: float = 1.0,
):
    """Monte-Carlo estimate of `c = E‖φ(h, Z_0)‖² / ‖h‖²` at states h of norm `norm`
    in `directions` random directions (uniform on the sphere).

    For a positively homogeneous unit (ReLU or identity 2LP) c does not depend on
    `norm`. For other activations (tanh, gelu, ...) it does, so the proposition's
    assumption holds only approximately: pass the norm of the input x, so that
    `E‖h^1 − x‖² = α² M c ‖x‖²` holds exactly at the first layer.

    **Returns:** `(c, standard_error, per_direction)`; `per_direction` shows whether the
    ratio is really independent of the direction of h.
    """
    for name, value, least in (("d", d, 1), ("samples", samples, 2), ("directions", directions, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    norm = as_number(norm)  # numpy and JAX scalars too (`jnp.linalg.norm(x)`)
    if isinstance(norm, bool) or not isinstance(norm, int | float) or not 0 < norm < math.inf:
        raise ValueError(f"norm must be a finite number > 0, got {norm!r}")
    try:
        out = jax.eval_shape(block, jnp.zeros(d), law.sample(jr.key(0)))
    except (TypeError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"d = {d} does not fit the block and law: {reason}") from None
    if out.shape != (d,):
        raise ValueError(f"d = {d}: the block maps a state of shape ({d},) to {out.shape}")
    kh, kz = jr.split(key)
    hs = jr.normal(kh, (directions, d))
    hs = norm * hs / jnp.linalg.norm(hs, axis=1, keepdims=True)
    zs = jax.vmap(law.sample)(jr.split(kz, samples))

    def ratios(h):
        out = jax.vmap(lambda z: block(h, z))(zs)
        return jnp.sum(out**2, axis=-1) / (h @ h)

    r = jax.vmap(ratios)(hs)  # (directions, samples): every direction sees the same draws
    c = jnp.mean(r)
    # the draws are shared across directions, so the directions x samples values are not
    # independent. Two-way crossed random effects, r_ij = c + a_j (draw) + b_i (direction)
    # + e_ij: Var(ĉ) = σ_a²/S + σ_b²/D + σ_e²/(DS). The per-draw means' variance / S
    # estimates σ_a²/S + σ_e²/(DS), the per-direction means' / D estimates σ_b²/D +
    # σ_e²/(DS), and the residual mean square σ_e², whose double count is taken off
    # (floored at the first part: the variance cannot be below it)
    per_draw, per_direction = jnp.mean(r, axis=0), jnp.mean(r, axis=1)
    var = jnp.var(per_draw, ddof=1) / samples
    if directions > 1:
        resid = r - per_draw[None, :] - per_direction[:, None] + c
        s2e = jnp.sum(resid**2) / ((directions - 1) * (samples - 1))
        both = var + jnp.var(per_direction, ddof=1) / directions - s2e / (directions * samples)
        var = jnp.maximum(var, both)
    return c, jnp.sqrt(var), per_direction


def variance_law(c, alpha, M, l, x_norm2):
    """`((1 + c α² M)^l − 1) ‖x‖²`, as `expm1(l · log1p(c α² M)) ‖x‖²` (accurate where
    c α² M is small; `inf` where it exceeds the largest float, as in the explosion regime
    at large depth, never an OverflowError)."""
    with np.errstate(over="ignore"):
        growth = np.expm1(np.multiply(l, np.log1p(c * np.square(alpha) * M)))
    return float(growth * x_norm2) if np.ndim(growth) == 0 else growth * x_norm2


def sampled_deviation(
    block, law, *, L: int, M: int, alpha: float, x, key, nets: int, final_state: bool = False
):
    """`‖h^l − x‖²` for l = 0..L over `nets` independent networks: `(nets, L + 1)`; with
    `final_state`, also `h^L − x` of every network, `(nets, d)` (for Prop. 2.1's
    `E[h^L] = x`), as a pair."""
    if isinstance(nets, bool) or not isinstance(nets, int) or nets < 1:
        raise ValueError(f"nets must be an integer >= 1, got {nets!r}")

    def one(k):
        net = ResNet.sample(block, law, L=L, M=M, scaling=alpha, key=k)
        hs = net.states(x[None])[0]
        dev = jnp.sum((hs - x[None]) ** 2, axis=1)
        return (dev, hs[-1] - x) if final_state else dev

    return map_batched(one, jr.split(key, nets), 256)


def sampled_backward_deviation(block, law, *, L: int, M: int, alpha: float, x, direction, key,
                               nets: int):  # fmt: skip
    """`‖b^l − b^L‖² / ‖b^L‖²` for l = 0..L over `nets` independent networks, `(nets, L + 1)`:
    the backward pass (the adjoint recursion (B), `ResNet.adjoint`) started from
    `b^L = direction` at input x. Seed 000 §3.1: it has the form of the forward pass, with
    `D_1φ(x, z)ᵀ b` in place of φ, so when `M L α² → 0` it is close to the identity."""
    if isinstance(nets, bool) or not isinstance(nets, int) or nets < 1:
        raise ValueError(f"nets must be an integer >= 1, got {nets!r}")

    def one(k):
        net = ResNet.sample(block, law, L=L, M=M, scaling=alpha, key=k)
        b = net.adjoint(x[None], direction[None]).b[0]  # (L + 1, d)
        return jnp.sum((b - b[-1][None]) ** 2, axis=1) / jnp.sum(b[-1] ** 2)

    return map_batched(one, jr.split(key, nets), 256)
