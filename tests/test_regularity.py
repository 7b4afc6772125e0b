"""The variogram Hurst estimator (meanfield.diagnostics.regularity) on paths of known index.

Every path set is one draw of a library depth law on the grid j/1024 (1025 points) with
d = 8, so 64 independent paths pooled. Tolerances come from the estimator's measured
spread over 100 such draws (keys 0..99, default lags 1..128, order 1):

| paths            | mean of `hurst` | std    | tolerance here              |
|------------------|-----------------|--------|-----------------------------|
| Brownian (1/2)   | 0.4993          | 0.0050 | ±0.025 (5 std)              |
| fBm H = 0.3      | 0.3000          | 0.0044 | ±0.025 (5.7 std)            |
| fBm H = 0.8      | 0.7944          | 0.0081 | ±0.04 (bias −0.006 + 4 std) |
| smooth GP ℓ=0.2  | 0.9912          | 0.0015 | in [0.9, 1.02]              |
| i.i.d. noise     | 0.0000          | 0.0005 | ±0.01                       |

(order 2: Brownian 0.5001 ± 0.0049, fBm 0.8 0.7999 ± 0.0059; the 95% bootstrap
interval covered the true index in 92–94 of 100 draws, 77 for fBm 0.8 at order 1.)
"""

import jax.numpy as jnp
import numpy as np
import pytest

from meanfield.diagnostics.regularity import estimate_hurst, variogram
from meanfield.laws.depth import BrownianLaw, FractionalBrownianLaw, SmoothGPLaw

N = 1024  # grid steps: 1025 points along depth
D = 8  # 64 paths


def brownian(key) -> np.ndarray:
    return np.asarray(BrownianLaw(d=D, n_fine=N).path(key))


def fbm(key, hurst: float) -> np.ndarray:
    return np.asarray(FractionalBrownianLaw(d=D, hurst=hurst, n_fine=N).path(key))


def smooth(key) -> np.ndarray:
    path = SmoothGPLaw(d=D, length_scale=0.2).path(key)
    return np.asarray(path.on_grid(jnp.arange(N + 1, dtype=path.omega.dtype) / N))


def test_brownian_half(key):
    r = estimate_hurst(brownian(key))
    assert abs(r.hurst - 0.5) < 0.025, r.hurst
    assert r.lags == (1, 2, 4, 8, 16, 32, 64, 128)
    assert r.n_points == N + 1 and r.n_paths == D * D and r.per_entry.shape == (D, D)
    # every single path is near 1/2 too (per-path std measured 0.04)
    assert abs(float(r.per_entry.mean()) - 0.5) < 0.03
    assert np.all(np.abs(r.per_entry - 0.5) < 0.25)
    # the bootstrap interval holds the estimate and has the width of its spread
    # (2 × 1.96 × 0.005 ≈ 0.02; measured mean width 0.019)
    assert r.interval_method == "bootstrap"
    lo, hi = r.interval
    assert lo < r.hurst < hi and 0.008 < hi - lo < 0.05, r.interval
    assert r.variogram[0] == 1.0


@pytest.mark.parametrize("hurst, tol", [(0.3, 0.025), (0.8, 0.04)])
def test_fbm(key, hurst, tol):
    paths = fbm(key, hurst)
    r = estimate_hurst(paths)
    assert abs(r.hurst - hurst) < tol, r.hurst
    # second differences measure the same index
    assert abs(estimate_hurst(paths, order=2).hurst - hurst) < tol
    # the depth axis may sit anywhere
    moved = estimate_hurst(np.moveaxis(paths, 0, -1), axis=-1)
    assert moved.hurst == pytest.approx(r.hurst, rel=1e-12)
    np.testing.assert_allclose(moved.per_entry, r.per_entry, rtol=1e-12)


def test_smooth_saturates_at_one(key):
    r = estimate_hurst(smooth(key))
    assert 0.9 <= r.hurst <= 1.02, r.hurst
    assert np.all(r.per_entry >= 0.9)
    # second differences of a C² path scale like m⁴: order 2 saturates at 2
    assert 1.9 <= estimate_hurst(smooth(key), order=2).hurst <= 2.02


def test_linear_trend(key):
    """A trend 20·t dominates Brownian fluctuations at the larger lags: first differences
    are pulled towards 1, second differences do not see it."""
    t = np.arange(N + 1) / N
    paths = brownian(key) + 20.0 * t[:, None, None]
    assert estimate_hurst(paths).hurst > 0.75
    assert abs(estimate_hurst(paths, order=2).hurst - 0.5) < 0.025


def test_noise_and_cumulative(key):
    """i.i.d. weights along depth (Brownian increments) are noise, H ≈ 0; their partial
    sums are a Brownian path, H ≈ 1/2. The fBm law's weights sum to an fBm path."""
    weights = np.asarray(BrownianLaw(d=D, n_fine=N).weights(key, N))
    assert abs(estimate_hurst(weights).hurst) < 0.01
    assert abs(estimate_hurst(weights, cumulative=True).hurst - 0.5) < 0.025
    fw = np.asarray(FractionalBrownianLaw(d=D, hurst=0.8, n_fine=N).weights(key, N))
    assert abs(estimate_hurst(fw, cumulative=True).hurst - 0.8) < 0.04


def test_one_path_and_few_paths(key):
    path = brownian(key)[:, 0, 0]
    r = estimate_hurst(path)
    assert r.interval_method == "regression-t" and r.n_paths == 1
    assert r.per_entry.shape == () and float(r.per_entry) == pytest.approx(r.hurst)
    assert abs(r.hurst - 0.5) < 0.2  # one path: spread 0.04
    assert r.interval[0] < r.hurst < r.interval[1]
    few = estimate_hurst(brownian(key)[:, 0, :4])
    assert few.interval_method == "paths-t" and few.interval[0] < few.hurst < few.interval[1]
    # a lower level gives a narrower interval
    narrow = estimate_hurst(path, level=0.5)
    assert narrow.interval[1] - narrow.interval[0] < r.interval[1] - r.interval[0]
    d = r.to_dict()
    assert d["hurst"] == r.hurst and d["lags"] == list(r.lags)


def test_variogram_exact_power():
    """`variogram` of a path with known increments: V_k = k² gives Δ_m = 2km + m²."""
    k = np.arange(64.0)
    v = variogram(k**2, [1, 2])
    expect = [np.mean((2 * k[:-m] * m + m * m) ** 2) for m in (1, 2)]
    np.testing.assert_allclose(v, expect)
    # second differences of k² are 2m² everywhere
    np.testing.assert_allclose(variogram(k**2, [1, 3], order=2), [4.0, 4.0 * 81])
    assert variogram(np.zeros((40, 2, 3)) + k[:40, None, None], [1, 2, 4]).shape == (3, 2, 3)


def test_bootstrap_is_reproducible(key):
    paths = brownian(key)
    a, b = estimate_hurst(paths, seed=3), estimate_hurst(paths, seed=3)
    assert a.interval == b.interval
    assert estimate_hurst(paths, seed=4).interval != a.interval


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"paths": np.arange(16.0)}, r"^paths: 16 points"),
        ({"paths": np.array([0.0, np.nan] * 40)}, r"^paths must be finite"),
        ({"paths": np.full(80, np.inf)}, r"^paths must be finite"),
        ({"paths": np.ones(80)}, r"^paths: 1 of 1 paths have a zero variogram"),
        ({"paths": np.array(["a"] * 80)}, r"^paths must be a real numeric array"),
        ({"paths": np.ones(80) * 1j}, r"^paths must be real"),
        ({"paths": np.zeros((0, 3))}, r"^paths must not be empty"),
        ({"paths": 3.0}, r"^paths must have a depth axis"),
        ({"paths": np.arange(80.0), "axis": 1}, r"^axis=1 is out of range"),
        ({"paths": np.arange(80.0), "max_lag": 41}, r"^max_lag=41 is too large"),
        ({"paths": np.arange(80.0), "order": 3}, r"^order must be 1 or 2"),
        ({"paths": np.arange(80.0), "min_lag": 0}, r"^min_lag must be an integer >= 1"),
        ({"paths": np.arange(80.0), "level": 1.0}, r"^level must be a number in \(0, 1\)"),
        ({"paths": np.arange(80.0), "seed": -1}, r"^seed must be an integer >= 0"),
        ({"paths": np.arange(80.0), "cumulative": 1}, r"^cumulative must be True or False"),
    ],
)
def test_refusals(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        estimate_hurst(**kwargs)
    assert "\n" not in str(info.value)


def test_variogram_refusals():
    with pytest.raises(ValueError, match=r"^lags: lag 40 needs more than 40 points"):
        variogram(np.arange(40.0), [40])
    with pytest.raises(ValueError, match=r"^order must be 1 or 2"):
        variogram(np.arange(40.0), [1], order=0)
