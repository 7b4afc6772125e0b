"""Depth laws (SPEC §4): exact fBm samplers, Brownian, smooth GP, i.i.d., and the coupling."""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy import stats

from meanfield.laws.depth import (
    BrownianLaw,
    FractionalBrownianLaw,
    IIDGaussianLaw,
    SmoothGPLaw,
    davies_harte_fgn,
    fbm_cholesky,
    fbm_davies_harte,
)
from meanfield.laws.depth.fbm import circulant_sqrt_eigenvalues, fgn_autocovariance

HURSTS = (0.05, 0.3, 0.5, 0.7, 0.95, 0.99)


def fbm_cov(times, H):
    """The closed form ½(s^{2H} + t^{2H} − |t − s|^{2H}), written out here."""
    s, t = np.meshgrid(times, times, indexing="ij")
    return 0.5 * (s ** (2 * H) + t ** (2 * H) - np.abs(t - s) ** (2 * H))


@pytest.mark.parametrize("H", HURSTS)
def test_davies_harte_map_is_exactly_fgn(H):
    """The sampler is linear in its normals: its covariance J Jᵀ is computable exactly and
    must equal the Toeplitz fGn covariance for every H, including H near 1 (where the
    embedding with 0 in the middle of the first row is not non-negative definite)."""
    n = 32
    f = lambda z: davies_harte_fgn(z, H).reshape(-1)  # (2n,): real and imaginary series
    J = jax.jacfwd(f)(jnp.zeros((2, 2 * n))).reshape(2 * n, 4 * n)
    cov = np.asarray(J @ J.T)
    k = np.arange(n)
    gamma = lambda k: (
        0.5 * (np.abs(k + 1) ** (2 * H) - 2 * np.abs(k) ** (2 * H) + np.abs(k - 1) ** (2 * H))
    )
    toeplitz = gamma(k[:, None] - k[None, :])
    np.testing.assert_allclose(cov[:n, :n], toeplitz, atol=1e-12)  # real part: fGn
    np.testing.assert_allclose(cov[n:, n:], toeplitz, atol=1e-12)  # imaginary part: fGn
    np.testing.assert_allclose(cov[:n, n:], 0.0, atol=1e-12)  # and independent


@pytest.mark.parametrize("H", (0.01, 0.3, 0.75, 0.999))
def test_fgn_autocovariance_is_accurate_far_out(H):
    """γ(k) against exact rational arithmetic (H and k rational: (k ± 1)^{2H} through
    60-digit decimals), out to k = 2^20, where the second difference written out in
    float64 loses about eps·k² relative; and the circulant embedding at H = 0.999 with
    n = 2^18 steps, which that rounding used to make look indefinite, is accepted."""
    from decimal import Decimal, localcontext

    k = np.array([0, 1, 2, 3, 10, 1000, 10**5, 2**18, 2**20])
    with localcontext() as ctx:
        ctx.prec = 60
        h2 = 2 * Decimal(repr(H))
        power = lambda x: Decimal(int(x)) ** h2 if x else Decimal(0)
        exact = np.array([float((power(j + 1) - 2 * power(j) + power(abs(j - 1))) / 2) for j in k])
    got = fgn_autocovariance(k, H)
    np.testing.assert_allclose(got, exact, rtol=1e-8, atol=0)
    if H == 0.999:
        lam = circulant_sqrt_eigenvalues(2**18, H)
        assert lam.shape == (2**19,) and np.all(np.isfinite(lam))


@pytest.mark.parametrize("H", HURSTS)
def test_fbm_sample_covariance_matches_closed_form(H):
    """Sample covariance of B^H on a grid vs ½(s^{2H} + t^{2H} − |t−s|^{2H}), entry by entry
    in units of its Monte-Carlo standard error sqrt((C_ss C_tt + C_st²)/N)."""
    n, N = 8, 20000
    paths = np.asarray(fbm_davies_harte(jr.key(11), H, n, (N,)))  # (N, n+1)
    assert np.all(paths[:, 0] == 0)
    X = paths[:, 1:]
    times = np.arange(1, n + 1) / n
    C = fbm_cov(times, H)
    emp = X.T @ X / N  # the mean is known to be 0
    se = np.sqrt((np.outer(np.diag(C), np.diag(C)) + C**2) / N)
    z = (emp - C) / se
    assert np.max(np.abs(z)) < 4.5, np.max(np.abs(z))


@pytest.mark.parametrize("H", (0.3, 0.7, 0.95))
def test_davies_harte_and_cholesky_agree_in_distribution(H):
    """Two-sample KS tests on B(1), on B(1/2) and on the last increment, DH vs the
    O(n³) Cholesky oracle (independent keys)."""
    n, N = 16, 4000
    dh = np.asarray(fbm_davies_harte(jr.key(1), H, n, (N,)))
    ch = np.asarray(fbm_cholesky(jr.key(2), H, n, (N,)))
    for a, b in (
        (dh[:, -1], ch[:, -1]),
        (dh[:, n // 2], ch[:, n // 2]),
        (dh[:, -1] - dh[:, -2], ch[:, -1] - ch[:, -2]),
    ):
        assert stats.ks_2samp(a, b).pvalue > 1e-3
    # the oracle itself has the right covariance
    times = np.arange(1, n + 1) / n
    emp = ch[:, 1:].T @ ch[:, 1:] / N
    C = fbm_cov(times, H)
    se = np.sqrt((np.outer(np.diag(C), np.diag(C)) + C**2) / N)
    assert np.max(np.abs(emp - C) / se) < 4.5


def test_brownian_law_increments_and_coupling():
    law = BrownianLaw(d=3, n_fine=64)
    key = jr.key(5)
    path = law.path(key)
    assert path.shape == (65, 3, 3)
    assert np.all(np.asarray(path[0]) == 0)
    fine = law.weights_from_path(path, 64)
    for L in (1, 4, 8, 32):
        coarse = law.weights(key, L)
        assert coarse.shape == (L, 3, 3)
        # a coarse weight is exactly the sum of the fine increments it covers, rescaled
        agg = fine.reshape(L, 64 // L, 3, 3).sum(axis=1) * math.sqrt(L / 64)
        np.testing.assert_allclose(np.asarray(coarse), np.asarray(agg), rtol=1e-12, atol=1e-14)
    # entries N(0, 1/d) at every depth
    many = jax.vmap(lambda k: law.weights(k, 8))(jr.split(jr.key(6), 2000))
    var = float(jnp.var(many))
    assert abs(var - 1 / 3) < 5 * (1 / 3) * math.sqrt(2 / many.size)
    with pytest.raises(ValueError, match="L=5 must divide"):
        law.weights(key, 5)


@pytest.mark.parametrize("H", (0.3, 0.75))
def test_fbm_law_coupling_and_scale(H):
    law = FractionalBrownianLaw(d=2, hurst=H, n_fine=64)
    key = jr.key(8)
    fine = law.weights(key, 64)
    for L in (2, 16):
        coarse = law.weights(key, L)
        agg = fine.reshape(L, 64 // L, 2, 2).sum(axis=1) * (L / 64) ** H
        np.testing.assert_allclose(np.asarray(coarse), np.asarray(agg), rtol=1e-12, atol=1e-14)
    many = jax.vmap(lambda k: law.weights(k, 16))(jr.split(jr.key(9), 1000))
    assert abs(float(jnp.var(many)) - 0.5) < 0.05  # entries of variance 1/d


def test_smooth_law_kernel_covariance_and_coupling():
    law = SmoothGPLaw(d=2, length_scale=0.2)
    assert law.kernel_error() < 1e-10
    key = jr.key(3)
    path = law.path(key)
    # every depth reads the same function: V_k = 𝒱(k/L)
    w4, w8 = law.weights(key, 4), law.weights(key, 8)
    np.testing.assert_allclose(np.asarray(w8[1::2]), np.asarray(w4), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(w4[2]), np.asarray(path(0.75)), rtol=1e-12, atol=1e-14)
    # covariance over draws vs std² exp(−(s − s')²/(2ℓ²)), std² = 1/d
    s = jnp.array([0.0, 0.1, 0.3, 0.9])
    draws = jax.vmap(lambda k: law.path(k).on_grid(s)[:, 0, 1])(jr.split(jr.key(4), 20000))
    emp = np.asarray(draws.T @ draws / draws.shape[0])
    C = 0.5 * np.exp(-((np.asarray(s)[:, None] - np.asarray(s)[None, :]) ** 2) / (2 * 0.04))
    se = np.sqrt((np.outer(np.diag(C), np.diag(C)) + C**2) / draws.shape[0])
    assert np.max(np.abs(emp - C) / se) < 4.5
    # smooth: the derivative in s exists and is finite (a trigonometric polynomial)
    assert np.all(np.isfinite(np.asarray(jax.jacfwd(path)(0.5))))
    # many depths go through on_grid; an array of them (here of length Q) is refused
    with pytest.raises(ValueError, match="^s must be a scalar depth"):
        path(jnp.zeros(path.omega.shape[0]))


def test_iid_law_independent_across_depths():
    law = IIDGaussianLaw(d=4)
    w = law.weights(jr.key(0), 8)
    assert w.shape == (8, 4, 4)
    many = jax.vmap(lambda k: law.weights(k, 8))(jr.split(jr.key(1), 500))
    assert abs(float(jnp.var(many)) - 0.25) < 0.02
    a, b = law.weights(jr.key(0), 4), law.weights(jr.key(0), 8)[:4]
    assert not np.allclose(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: FractionalBrownianLaw(d=2, hurst=1.0), "hurst"),
        (lambda: FractionalBrownianLaw(d=2, hurst=0.0), "hurst"),
        (lambda: FractionalBrownianLaw(d=2, hurst=float("nan")), "hurst"),
        (lambda: SmoothGPLaw(d=2, length_scale=0.0), "length_scale"),
        (lambda: SmoothGPLaw(d=2, length_scale=-1.0), "length_scale"),
        (lambda: BrownianLaw(d=0), "d"),
        (lambda: BrownianLaw(d=2, n_fine=0), "n_fine"),
        (lambda: FractionalBrownianLaw(d=2, hurst=0.7, n_fine=64).weights(jr.key(0), 3), "L=3"),
        (lambda: fbm_davies_harte(jr.key(0), 1.5, 8), "hurst"),
        (lambda: IIDGaussianLaw(d=2).weights(jr.key(0), 0), "L"),
    ],
)
def test_bad_input_names_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_fbm_samplers_take_numpy_scalars():
    """hurst and n as numpy scalars give the paths of the Python numbers (np.float32(0.75)
    is exactly 0.75)."""
    key = jr.key(2)
    for sampler in (fbm_davies_harte, fbm_cholesky):
        a = sampler(key, np.float32(0.75), np.int64(8))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(sampler(key, 0.75, 8)))
    with pytest.raises(ValueError, match="^hurst must be"):
        fbm_davies_harte(key, np.float64(1.5), 8)
