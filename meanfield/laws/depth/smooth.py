"""Smooth weights: a Gaussian process in depth, `V_k = 𝒱(k/L)` (Mathematics §4, the ODE row).

Every entry of 𝒱 is an independent centred Gaussian process on [0, 1] with the
squared-exponential kernel `std² exp(−(s − s')²/(2ℓ²))`.

**Why a spectral (Fourier) representation.** The weights of *every* depth L must
be values of *one* function, `V_k = 𝒱(k/L)`, and the ODE limit needs 𝒱(t) at the
solver's own times; so the sample must be a function that can be evaluated
anywhere. Sampling on a grid and interpolating by the GP conditional mean would
need the Cholesky factor of the squared-exponential Gram matrix, which is
numerically singular (condition number beyond 1e16 for any useful grid) and so is
not exact. Random Fourier features (ω drawn at random) give the right covariance
only on average over ω and a non-Gaussian process. Instead we use *deterministic*
frequencies: the trapezoid rule on the kernel's spectral density,

    𝒱(s) = std Σ_j sqrt(w_j) (a_j cos(ω_j s) + b_j sin(ω_j s)),   a_j, b_j ~ N(0, 1),

with `ω_j = 2πj/T`, `w_j = (2 − δ_{j0}) (2π/T) p(ω_j)`, p the N(0, 1/ℓ²) density.
This is *exactly* Gaussian, smooth (a trigonometric polynomial, so Lipschitz and
bounded as the theory requires), cheap to evaluate at any s, and its covariance
`std² Σ_j w_j cos(ω_j τ)` equals the periodisation `Σ_m k(τ + mT)` of the kernel up
to the truncation of the frequencies. With the period
`T = 1 + ℓ sqrt(2 log(2/tol))` and frequencies up to `ℓ ω_max = sqrt(2 log(1/tol)) + 1`
its distance to the squared-exponential kernel on |τ| ≤ 1 is below `tol` (1e-12
by default); `kernel_error()` evaluates it, and the tests check it against the
closed form.
"""

import functools
import math

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ..._validation import as_number, check_number, check_positive_int
from .base import AbstractPathLaw, check_depth


def se_kernel(tau, length_scale: float):
    """`exp(−τ²/(2ℓ²))`, the squared-exponential kernel (numpy, float64)."""
    tau = np.asarray(tau, dtype=np.float64)
    return np.exp(-(tau**2) / (2.0 * length_scale**2))


# the most Fourier features `spectral_features` builds (a smaller ℓ is refused)
MAX_FEATURES = 10**7


def spectral_feature_count(length_scale: float, tol: float = 1e-12) -> int:
    """How many features `spectral_features(length_scale, tol)` has, computed without
    building them."""
    check_number(length_scale, "length_scale", positive=True)
    check_number(tol, "tol", positive=True)
    period = 1.0 + length_scale * math.sqrt(2.0 * math.log(2.0 / tol))
    omega_max = (math.sqrt(2.0 * math.log(1.0 / tol)) + 1.0) / length_scale
    step = 2.0 * math.pi / period
    return int(min(math.ceil(omega_max / step), 2**62)) + 1


@functools.lru_cache(maxsize=64)
def spectral_features(length_scale: float, tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """Frequencies ω_j >= 0 and weights w_j with `Σ_j w_j cos(ω_j τ) ≈ exp(−τ²/(2ℓ²))` on
    |τ| <= 1 to `tol` (trapezoid rule on the spectral density; see the module docstring).

    **Returns:** `(omega, weights)`, two float64 arrays of the same length.
    """
    count = spectral_feature_count(length_scale, tol)
    if count > MAX_FEATURES:  # before allocating them (ℓ = 1e-9 would ask for 1e9)
        raise ValueError(
            f"length_scale={length_scale!r} is too small: {count} Fourier features would be "
            f"needed, more than {MAX_FEATURES}"
        )
    period = 1.0 + length_scale * math.sqrt(2.0 * math.log(2.0 / tol))
    step = 2.0 * math.pi / period
    omega = step * np.arange(count)
    density = length_scale / math.sqrt(2.0 * math.pi) * np.exp(-0.5 * (omega * length_scale) ** 2)
    weights = step * density * np.where(omega == 0.0, 1.0, 2.0)
    return omega, weights


class SmoothPath(eqx.Module):
    """One draw 𝒱 of the smooth weight process: a d×d matrix function on [0, 1].

    `path(s)` is 𝒱(s) for a scalar s; `path.on_grid(ts)` stacks 𝒱 at many times.
    """

    omega: Float[Array, " Q"]
    amplitude: Float[Array, " Q"]
    cos_coef: Float[Array, "Q d d"]
    sin_coef: Float[Array, "Q d d"]

    def __call__(self, s) -> Float[Array, "d d"]:
        if jnp.ndim(s) != 0:  # an array of length Q would broadcast into nonsense
            raise ValueError(
                f"s must be a scalar depth, got shape {jnp.shape(s)}; use on_grid for many"
            )
        phase = self.omega * s
        c = self.amplitude * jnp.cos(phase)
        sn = self.amplitude * jnp.sin(phase)
        return jnp.tensordot(c, self.cos_coef, axes=1) + jnp.tensordot(sn, self.sin_coef, axes=1)

    def on_grid(self, ts: Float[Array, " n"]) -> Float[Array, "n d d"]:
        """𝒱 at every time of `ts`, shape `(n, d, d)`."""
        phase = ts[:, None] * self.omega[None, :]
        c = self.amplitude[None, :] * jnp.cos(phase)
        sn = self.amplitude[None, :] * jnp.sin(phase)
        return jnp.einsum("nq,qij->nij", c, self.cos_coef) + jnp.einsum(
            "nq,qij->nij", sn, self.sin_coef
        )


class SmoothGPLaw(AbstractPathLaw):
    """Gaussian-process weights along depth with kernel `std² exp(−(s − s')²/(2ℓ²))`.

    `path(key)` is one function 𝒱 (a `SmoothPath`, evaluable at any s); a depth-L
    network uses `V_k = 𝒱(k/L)` for *any* L, so every depth reads the same function,
    and `h_{k} = h_{k−1} + L^{-1} V_k σ(h_{k−1})` converges to `dH = 𝒱(t) σ(H) dt` at
    rate 1/L.

    **Arguments:**

    - `d`: the state dimension.
    - `length_scale`: ℓ > 0.
    - `std`: the standard deviation of every entry (default `1/sqrt(d)`, the scale of
      the i.i.d. law).
    - `tol`: the largest distance between the sampled and the squared-exponential
      covariance on [0, 1] (default 1e-12).
    """

    d: int = eqx.field(static=True, converter=as_number)
    length_scale: float = eqx.field(static=True, converter=as_number, default=0.2)
    std: float | None = eqx.field(static=True, converter=as_number, default=None)
    tol: float = eqx.field(static=True, converter=as_number, default=1e-12)

    def __check_init__(self):
        check_positive_int(self.d, "d")
        check_number(self.length_scale, "length_scale", positive=True)
        if self.std is not None:
            check_number(self.std, "std", positive=True)
        check_number(self.tol, "tol", positive=True)
        if self.tol >= 1:
            raise ValueError(f"tol must be in (0, 1), got {self.tol!r}")
        # fail at construction (not inside jit) if the feature count is unreasonable
        if spectral_feature_count(self.length_scale, self.tol) > 100_000:
            raise ValueError(
                f"length_scale={self.length_scale!r} is too small: more than 100000 Fourier "
                "features would be needed"
            )

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d) if self.std is None else self.std

    @property
    def n_features(self) -> int:
        return int(spectral_features(self.length_scale, self.tol)[0].size)

    def kernel_error(self) -> float:
        """`max_{|τ|<=1} |Σ_j w_j cos(ω_j τ) − exp(−τ²/(2ℓ²))|` (relative to std², float64)."""
        omega, weights = spectral_features(self.length_scale, self.tol)
        tau = np.linspace(0.0, 1.0, 4001)
        approx = np.cos(tau[:, None] * omega[None, :]) @ weights
        return float(np.max(np.abs(approx - se_kernel(tau, self.length_scale))))

    def path(self, key: PRNGKeyArray) -> SmoothPath:
        """One function 𝒱 on [0, 1] (evaluable anywhere)."""
        omega, weights = spectral_features(self.length_scale, self.tol)
        q = omega.size
        ka, kb = jr.split(key)
        a = jr.normal(ka, (q, self.d, self.d))
        b = jr.normal(kb, (q, self.d, self.d))
        return SmoothPath(
            omega=jnp.asarray(omega, a.dtype),
            amplitude=jnp.asarray(self.scale * np.sqrt(weights), a.dtype),
            cos_coef=a,
            sin_coef=b,
        )

    def weights_from_path(self, path: SmoothPath, L: int) -> Float[Array, "L d d"]:
        check_depth(L)
        return path.on_grid(jnp.arange(1, L + 1, dtype=path.omega.dtype) / L)
