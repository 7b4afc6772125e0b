"""Fractional Brownian motion: an exact Davies–Harte sampler and the fBm depth law.

fBm B^H with Hurst index H ∈ (0, 1): Gaussian, `B_0 = 0`, mean 0,
`E[B_s B_t] = ½(s^{2H} + t^{2H} − |t − s|^{2H})`. On the grid `j/n` its increments
are fractional Gaussian noise (fGn), stationary with autocovariance
`n^{-2H} γ(k)`, `γ(k) = ½(|k+1|^{2H} − 2|k|^{2H} + |k−1|^{2H})`.

**Davies–Harte (circulant embedding).** The n×n Toeplitz covariance of fGn is
embedded in the 2n×2n circulant matrix whose first row is

    c = (γ(0), γ(1), ..., γ(n−1), γ(n), γ(n−1), ..., γ(1)),

with the lag-n autocovariance γ(n) in the middle. Its eigenvalues λ = FFT(c) are
non-negative for every H ∈ (0, 1) (fGn's minimal embedding is non-negative
definite), so with `Z = Z_1 + i Z_2` standard complex Gaussian,
`Y = FFT(sqrt(λ / 2n) Z)` has real and imaginary parts that are two *independent*
exact draws of the embedded process; their first n entries are exact fGn. (Putting
0 in the middle instead, as a common public implementation does, gives an
embedding that is *not* non-negative definite for H near 1: the negative
eigenvalues are then clipped and the law is wrong.) Cost O(n log n) per path,
vectorised over any number of paths.

**Cholesky** of the n×n covariance of `(B_{1/n}, ..., B_1)`: exact, O(n³), kept
as the test oracle (`fbm_cholesky`).
"""

import functools
import math

import equinox as eqx
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ..._validation import as_number, check_positive_int
from .base import AbstractIncrementLaw


def check_hurst(hurst, name: str = "hurst") -> float:
    """`hurst` must be a number in the open interval (0, 1) (numpy scalars too)."""
    hurst = as_number(hurst)
    ok = isinstance(hurst, int | float) and not isinstance(hurst, bool)
    if not (ok and math.isfinite(hurst) and 0.0 < hurst < 1.0):
        raise ValueError(f"{name} must be a number in the open interval (0, 1), got {hurst!r}")
    return float(hurst)


def fgn_autocovariance(k: np.ndarray, hurst: float) -> np.ndarray:
    """γ(k) = ½(|k+1|^{2H} − 2|k|^{2H} + |k−1|^{2H}), fGn with unit steps (float64).

    For |k| > 1 as `½ k^{2H} (expm1(2H log1p(1/k)) + expm1(2H log1p(−1/k)))`: the
    second difference written out loses about `eps · k²` relative (k^{2H} terms that
    cancel to H(2H−1)k^{2H−2}), enough at k ~ 2^18 and H near 1 to make the circulant
    embedding look indefinite; this form loses about `eps · k`.
    """
    k = np.abs(np.asarray(k, dtype=np.float64))
    h2 = 2.0 * hurst
    near = 0.5 * (np.abs(k + 1) ** h2 - 2.0 * k**h2 + np.abs(k - 1) ** h2)
    far = np.maximum(k, 2.0)  # the far branch is used only where k > 1
    x = 1.0 / far
    tail = 0.5 * far**h2 * (np.expm1(h2 * np.log1p(x)) + np.expm1(h2 * np.log1p(-x)))
    return np.where(k > 1, tail, near)


@functools.lru_cache(maxsize=64)
def circulant_sqrt_eigenvalues(n: int, hurst: float) -> np.ndarray:
    """`sqrt(λ / 2n)` for the circulant embedding of n steps of fGn (float64, shape (2n,)).

    Raises `ValueError` if the embedding is not non-negative definite (it always is
    with the correct first row; rounding below 1e-12·max λ is set to 0).
    """
    check_positive_int(n, "n")
    check_hurst(hurst)
    gamma = fgn_autocovariance(np.arange(n + 1), hurst)
    row = np.concatenate([gamma, gamma[n - 1 : 0 : -1]])
    lam = np.fft.fft(row).real
    if lam.min() < -1e-12 * lam.max():
        raise ValueError(
            f"the circulant embedding for n={n}, hurst={hurst} has a negative eigenvalue "
            f"{lam.min():.3e}; the sampler would not be exact"
        )
    return np.sqrt(np.clip(lam, 0.0, None) / (2 * n))


def davies_harte_fgn(
    normals: Float[Array, "*batch 2 two_n"], hurst: float
) -> Float[Array, "*batch 2 n"]:
    """Two independent fGn series (unit steps) per pair of standard normal vectors.

    A linear map of `normals` (exposed so that tests can check its covariance exactly).

    **Arguments:**

    - `normals`: standard normals of shape `(..., 2, 2n)` (real and imaginary parts).
    - `hurst`: H ∈ (0, 1).

    **Returns:** `(..., 2, n)`: the real and imaginary parts, each an exact fGn of n
    unit steps, independent of each other.
    """
    two_n = normals.shape[-1]
    if normals.ndim < 2 or normals.shape[-2] != 2 or two_n % 2:
        raise ValueError(f"normals must have shape (..., 2, 2n), got {normals.shape}")
    n = two_n // 2
    scale = jnp.asarray(circulant_sqrt_eigenvalues(n, check_hurst(hurst)), normals.dtype)
    scale = scale.reshape((1,) * (normals.ndim - 2) + scale.shape)  # explicit broadcast
    y = jnp.fft.fft(scale * (normals[..., 0, :] + 1j * normals[..., 1, :]), axis=-1)[..., :n]
    return jnp.stack([y.real, y.imag], axis=-2)


def _fgn_to_path(fgn: Array, hurst: float) -> Array:
    n = fgn.shape[-1]
    path = jnp.cumsum(fgn, axis=-1) * (float(n) ** (-hurst))
    return jnp.concatenate([jnp.zeros(path.shape[:-1] + (1,), path.dtype), path], axis=-1)


def fbm_davies_harte(
    key: PRNGKeyArray, hurst: float, n: int, shape: tuple[int, ...] = ()
) -> Float[Array, "*shape n+1"]:
    """Independent fBm paths on the grid `j/n`, `j = 0..n`, by circulant embedding.

    **Arguments:**

    - `key`: a `jax.random` key.
    - `hurst`: H ∈ (0, 1).
    - `n`: number of grid steps on [0, 1].
    - `shape`: how many independent paths (e.g. `(d, d)` for a matrix of fBms).

    **Returns:** `B^H(j/n)` of shape `(*shape, n + 1)`, starting at 0.
    """
    hurst, n = check_hurst(hurst), as_number(n)
    check_positive_int(n, "n")
    count = math.prod(shape)
    pairs = (count + 1) // 2
    fgn = davies_harte_fgn(jr.normal(key, (pairs, 2, 2 * n)), hurst)
    fgn = fgn.reshape(2 * pairs, n)[:count].reshape(tuple(shape) + (n,))
    return _fgn_to_path(fgn, hurst)


def fbm_covariance(times: np.ndarray, hurst: float) -> np.ndarray:
    """`½(s^{2H} + t^{2H} − |t − s|^{2H})` for every pair of `times` (float64)."""
    t = np.asarray(times, dtype=np.float64)
    h2 = 2.0 * hurst
    return 0.5 * (t[:, None] ** h2 + t[None, :] ** h2 - np.abs(t[:, None] - t[None, :]) ** h2)


def fbm_cholesky(
    key: PRNGKeyArray, hurst: float, n: int, shape: tuple[int, ...] = ()
) -> Float[Array, "*shape n+1"]:
    """Independent fBm paths on `j/n` from the Cholesky factor of their covariance.

    Exact and O(n³): the oracle for `fbm_davies_harte` in the tests. For H near 1 the
    covariance is nearly singular; a jitter of 1e-12 times its trace is added (far below
    any Monte-Carlo error it is compared with).
    """
    hurst, n = check_hurst(hurst), as_number(n)
    check_positive_int(n, "n")
    cov = fbm_covariance(np.arange(1, n + 1) / n, hurst)
    factor = np.linalg.cholesky(cov + 1e-12 * np.trace(cov) * np.eye(n))
    z = jr.normal(key, tuple(shape) + (n,))
    path = z @ jnp.asarray(factor.T, z.dtype)
    return jnp.concatenate([jnp.zeros(tuple(shape) + (1,), path.dtype), path], axis=-1)


class FractionalBrownianLaw(AbstractIncrementLaw):
    """A d×d matrix of independent fBms with Hurst index H (Mathematics §4, the fBm row).

    Sampled exactly on the fine grid by Davies–Harte. A depth-L network, L dividing
    `n_fine`, uses `V_k = L^H (B^H_{k/L} − B^H_{(k−1)/L}) / sqrt(d)`: entries of variance
    `1/d`, correlated along depth (positively for H > 1/2, negatively for H < 1/2). H =
    1/2 is the Brownian law; for H > 1/2 and `α = L^{-H}` the network is the Euler scheme
    of the Young equation `dH = d^{-1/2} dB^H σ(H)`.

    **Arguments:**

    - `d`: the state dimension.
    - `hurst`: H ∈ (0, 1).
    - `n_fine`: the number of steps of the fine grid (default 4096).
    """

    d: int = eqx.field(static=True, converter=as_number)
    hurst: float = eqx.field(static=True, converter=as_number)
    n_fine: int = eqx.field(static=True, converter=as_number, default=4096)

    def __check_init__(self):
        check_positive_int(self.d, "d")
        check_hurst(self.hurst)
        check_positive_int(self.n_fine, "n_fine")

    def path(self, key: PRNGKeyArray) -> Float[Array, "n_fine+1 d d"]:
        """`B^H(j/n_fine)`, `j = 0..n_fine`, shape `(n_fine + 1, d, d)`, with `B^H(0) = 0`."""
        paths = fbm_davies_harte(key, self.hurst, self.n_fine, (self.d, self.d))
        return jnp.moveaxis(paths, -1, 0)
