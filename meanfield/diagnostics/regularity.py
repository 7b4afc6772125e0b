"""Regularity of a path along depth: a variogram estimator of the Hölder/Hurst exponent.

For a path `k/n -> V_k` sampled at n uniformly spaced points (the weights of a
network against depth, k/L), the variogram of its increments over a lag of m steps,

    v(m) = mean_k |V_{k+m} − V_k|²,

scales like `c (m/n)^{2H}` for a path of Hurst (Hölder) index H: exactly in
expectation for fractional Brownian motion of index H (H = 1/2 for Brownian
motion), at small lags for a path that is locally H-Hölder. `estimate_hurst` fits
`log v(m)` against `log(m/n)` by least squares over the dyadic lags
`m = min_lag, 2 min_lag, 4 min_lag, ... <= max_lag` (default `1, 2, 4, ..., <= n/8`:
every lag keeps at least 7/8 of the path's increments) and returns half the slope.

**Smooth paths saturate at 1.** A differentiable path has increments
`V_{k+m} − V_k ≈ (m/n) V'`, so `v(m) ∝ m²` and the estimate is 1 for every path
that is at least C¹, however smooth: H ≈ 1 reads "Lipschitz or smoother", not
"exactly Hölder-1". (At lags comparable to the path's own length scale the
variogram bends below m², so a smooth Gaussian process with length scale ℓ gives
slightly less than 1 when `max_lag/n` is not small against ℓ.)

**Linear trends.** A trend `a·t` adds `a² (m/n)²` to the first-order variogram
(`order=1`, the default), which pulls the estimate towards 1 at the lags where the
trend dominates the fluctuations. `order=2` uses second differences
`V_{k+2m} − 2 V_{k+m} + V_k` instead: blind to any linear trend (their second
difference is 0), with the same `(m/n)^{2H}` scaling for H < 1 (fBm:
`(4 − 2^{2H}) (m/n)^{2H}`), but a C² path then gives `v(m) ∝ m⁴`, an estimate of
2: order 2 saturates at 2, not 1.

**White noise gives ≈ 0.** Stationary noise (i.i.d. weights along depth, or the
increments of a path, e.g. fractional Gaussian noise) has a variogram that does not
grow with the lag, so the estimate is near 0 (negative for anti-correlated noise).
The estimate is not clipped to [0, 1]. To measure the index of the *path* whose
increments the weights are (`V_k ∝ B^H_{k/L} − B^H_{(k−1)/L}`), pass
`cumulative=True`: the partial sums `Σ_{j<=k} V_j` are then estimated.

**Several paths.** The depth axis is `axis` (default 0, the leading axis); every
other entry of the array is a separate path (e.g. the d×d entries of `V_k`). Each
entry gets its own estimate (`per_entry`), and the pooled estimate `hurst` fits the
entries' variograms averaged after dividing each by its own value at the smallest
lag (so entries of different scales weigh equally, and the average is taken before
the logarithm, which keeps the log's small-sample bias at large lags down).

**Intervals.** The interval resamples independent units: every path by default, or
with `unit_axis` the units along that axis (the networks of `(L, networks, d, d)`
weights, whose d² entries are correlated after training), all of a unit's paths
together. With eight or more units, `interval` is a percentile bootstrap over them
(the pooled fit redone; `n_boot` draws from an explicit `seed`). With two to seven it
is the Student-t interval `hurst ± t_{G−1} s/√G`, s the standard deviation of the G
units' own estimates (a bootstrap over so few only spans their range). With one path
it is the regression t-interval of the log-log slope (halved), which sees only the
misfit of the power law across lags, not the sampling error of the path (the lags'
variograms are correlated): take it as a lower bound on the uncertainty.
`interval_method` says which was used; `interval_fit` (the regression t-interval of the
pooled fit) is always given.
"""

import dataclasses
import math
from typing import Any

import numpy as np

from ..stats.fits import t975

__all__ = ["HurstEstimate", "estimate_hurst", "variogram"]

# the fewest paths for the bootstrap interval (fewer: a t-interval over the paths' estimates)
MIN_BOOTSTRAP_PATHS = 8


@dataclasses.dataclass(frozen=True)
class HurstEstimate:
    """The result of `estimate_hurst` (every field a plain Python value or numpy array).

    - `hurst`: the pooled estimate (one number).
    - `interval`: `(low, high)`, a `level` interval for `hurst` (see `interval_method`).
    - `interval_method`: `"bootstrap"` (>= 8 paths), `"paths-t"` (2 to 7 paths),
      `"unit-bootstrap"` (>= 8 units of `unit_axis`), `"units-t"` (2 to 7) or
      `"regression-t"` (one path or unit).
    - `interval_fit`: the regression t-interval of the pooled log-log fit.
    - `per_entry`: the estimate of every path, shaped as the array without its depth axis
      (a 0-d array for a single path).
    - `lags`: the lags m (in grid steps) used in the fit.
    - `variogram`: the pooled variogram at those lags, relative to its value at the
      smallest lag (so its first entry is 1).
    - `n_points`: the path length (points along depth); `n_paths`: how many paths;
      `order`: 1 (first differences) or 2 (second differences); `cumulative`: whether the
      partial sums were estimated; `level`: the interval's coverage.
    """

    hurst: float
    interval: tuple[float, float]
    interval_method: str
    interval_fit: tuple[float, float]
    per_entry: np.ndarray
    lags: tuple[int, ...]
    variogram: tuple[float, ...]
    n_points: int
    n_paths: int
    order: int
    cumulative: bool
    level: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (per-entry estimates summarised by mean, std, min, max)."""
        per = self.per_entry.ravel()
        return {
            "hurst": self.hurst,
            "interval": list(self.interval),
            "interval_method": self.interval_method,
            "interval_fit": list(self.interval_fit),
            "per_entry_mean": float(per.mean()),
            "per_entry_std": float(per.std(ddof=1)) if per.size > 1 else 0.0,
            "per_entry_min": float(per.min()),
            "per_entry_max": float(per.max()),
            "lags": list(self.lags),
            "variogram": list(self.variogram),
            "n_points": self.n_points,
            "n_paths": self.n_paths,
            "order": self.order,
            "cumulative": self.cumulative,
            "level": self.level,
        }


def _check_int(value, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def _as_paths(paths, axis: int, cumulative: bool) -> tuple[np.ndarray, tuple[int, ...]]:
    """`paths` as a float64 array `(n, P)` (depth first, one column per path), and the
    shape of `paths` without its depth axis."""
    try:
        arr = np.asarray(paths)
    except Exception as err:  # e.g. a ragged list
        raise ValueError(f"paths must be a numeric array, got {type(paths).__name__}") from err
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"paths must be a real numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"paths must be real, got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise ValueError("paths must have a depth axis, got a scalar")
    if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
        raise ValueError(f"axis must be an integer, got {axis!r}")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis={axis} is out of range for paths of shape {arr.shape}")
    arr = np.moveaxis(arr.astype(np.float64), int(axis), 0)
    if arr.size == 0:
        raise ValueError(f"paths must not be empty, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"paths must be finite, got {bad} NaN or infinite values")
    flat = arr.reshape(arr.shape[0], -1)
    return (np.cumsum(flat, axis=0) if cumulative else flat), arr.shape[1:]


def _unit_ids(ndim: int, axis: int, unit_axis: int | None, rest: tuple[int, ...]) -> np.ndarray:
    """The unit of every path (flattened as `_as_paths` orders them): its index along
    `unit_axis`, or its own index when every path is a unit."""
    size = int(np.prod(rest)) if rest else 1
    if unit_axis is None:
        return np.arange(size)
    if isinstance(unit_axis, bool) or not isinstance(unit_axis, int | np.integer):
        raise ValueError(f"unit_axis must be an integer or None, got {unit_axis!r}")
    if not -ndim <= unit_axis < ndim:
        raise ValueError(f"unit_axis={unit_axis} is out of range for {ndim}-d paths")
    depth, unit = int(axis) % ndim, int(unit_axis) % ndim
    if unit == depth:
        raise ValueError(f"unit_axis={unit_axis} is the depth axis")
    position = unit - (unit > depth)  # its place among the axes left after depth
    grid = np.indices(rest)[position]
    return grid.ravel()


def _differences(x: np.ndarray, m: int, order: int) -> np.ndarray:
    if order == 1:
        return x[m:] - x[:-m]
    return x[2 * m :] - 2.0 * x[m:-m] + x[: -2 * m]


def variogram(paths, lags, *, order: int = 1, axis: int = 0) -> np.ndarray:
    """`mean_k |Δ_m V_k|²` for every lag m of `lags` and every path (float64).

    `Δ_m V_k = V_{k+m} − V_k` (`order=1`) or `V_{k+2m} − 2 V_{k+m} + V_k` (`order=2`),
    averaged over every k where it is defined.

    **Arguments:**

    - `paths`: an array whose axis `axis` is depth (length n); every other entry is a path.
    - `lags`: positive integers with `order · m < n`.
    - `order`, `axis`: as in `estimate_hurst`.

    **Returns:** an array of shape `(len(lags), *rest)`, `rest` the shape of `paths`
    without its depth axis.
    """
    if order not in (1, 2) or isinstance(order, bool):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    flat, rest = _as_paths(paths, axis, False)
    n = flat.shape[0]
    out = []
    for m in lags:
        m = _check_int(m, "lags", 1)
        if order * m >= n:
            raise ValueError(f"lags: lag {m} needs more than {order * m} points, paths have {n}")
        out.append(np.mean(_differences(flat, m, order) ** 2, axis=0))
    return np.stack(out).reshape((len(out),) + rest)


def _slopes(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slopes of the columns of `y` (lags first) against `x`."""
    xc = x - x.mean()
    return (xc @ (y - y.mean(axis=0))) / (xc @ xc)


def _t_interval(x: np.ndarray, y: np.ndarray, level: float) -> tuple[float, float]:
    """The regression t-interval of the slope of `y` against `x`, halved (an H interval)."""
    dof = x.size - 2
    xc = x - x.mean()
    slope = float(xc @ (y - y.mean()) / (xc @ xc))
    resid = y - y.mean() - slope * xc
    se = math.sqrt(float(resid @ resid) / dof / float(xc @ xc))
    q = t975(dof) if level == 0.95 else _t_quantile(0.5 + level / 2, dof)
    return (0.5 * (slope - q * se), 0.5 * (slope + q * se))


def _t_quantile(p: float, dof: int) -> float:
    """Student-t quantile by bisection on the regularised incomplete beta (no scipy)."""
    from jax.scipy.special import betainc  # only for a level other than 0.95

    def cdf(t: float) -> float:
        x = dof / (dof + t * t)
        tail = 0.5 * float(betainc(dof / 2.0, 0.5, x))
        return 1.0 - tail if t > 0 else tail

    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return 0.5 * (lo + hi)


def _checked_options(order, cumulative, level, n_boot, seed, min_lag) -> tuple[int, int, int, int]:
    """`estimate_hurst`'s integer options `(order, n_boot, seed, min_lag)`, checked with
    `cumulative` and `level` (ValueError naming the first invalid one)."""
    order = _check_int(order, "order", 1)
    if order > 2:
        raise ValueError(f"order must be 1 or 2, got {order}")
    if not isinstance(cumulative, bool):
        raise ValueError(f"cumulative must be True or False, got {cumulative!r}")
    ok = isinstance(level, int | float) and not isinstance(level, bool)
    if not (ok and 0.0 < level < 1.0):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    n_boot = _check_int(n_boot, "n_boot", 10)
    seed = _check_int(seed, "seed", 0)
    min_lag = _check_int(min_lag, "min_lag", 1)
    return order, n_boot, seed, min_lag


def _dyadic_lags(n: int, order: int, min_lag: int, max_lag: int | None) -> list[int]:
    """The lags `min_lag · 2^j <= max_lag` (default `n // 8`) of `estimate_hurst`'s fit,
    for paths of `n` points; refuses a `max_lag` beyond `n // (2 · order)` or fewer than
    three lags."""
    limit = n // (2 * order)
    if max_lag is None:
        top = n // 8
    else:
        top = _check_int(max_lag, "max_lag", 1)
        if top > limit:
            raise ValueError(
                f"max_lag={max_lag} is too large for paths of {n} points (at most "
                f"n // {2 * order} = {limit} with order={order})"
            )
    lags = []
    m = min_lag
    while m <= top:
        lags.append(m)
        m *= 2
    if len(lags) < 3:
        raise ValueError(
            f"paths: {n} points along depth give lags {lags} in [{min_lag}, {top}]; "
            f"three dyadic lags are needed (n >= {8 * 4 * min_lag} points with the default "
            "max_lag = n // 8)"
        )
    return lags


def _path_variograms(flat: np.ndarray, lags: list[int], order: int) -> np.ndarray:
    """The variogram `(lags, paths)` of every column of `flat`; refuses a path whose
    variogram is 0 at some lag (its regularity is undefined)."""
    v = np.stack([np.mean(_differences(flat, m, order) ** 2, axis=0) for m in lags])
    constant = v.min(axis=0) <= 0.0
    if np.any(constant):
        raise ValueError(
            f"paths: {int(constant.sum())} of {flat.shape[1]} paths have a zero variogram "
            f"(constant{' second differences' if order == 2 else ''}): their regularity "
            "is undefined"
        )
    return v


def _interval(
    x: np.ndarray, rel: np.ndarray, units: np.ndarray, per_entry: np.ndarray, hurst: float,
    interval_fit: tuple[float, float], *, level: float, n_boot: int, seed: int, named: bool,
) -> tuple[tuple[float, float], str]:  # fmt: skip
    """`estimate_hurst`'s interval and its method (module docstring, "Intervals"): over the
    units of `units` (`named`: of `unit_axis`, else every path its own), from the paths'
    variograms relative to their smallest lag (`rel`, `(lags, paths)`) at log-lags `x`."""
    # every unit's paths pooled: (lags, G), each unit weighted by its number of paths
    groups = np.unique(units)
    counts = np.array([np.sum(units == g) for g in groups], dtype=np.float64)
    unit_rel = np.stack([rel[:, units == g].mean(axis=1) for g in groups], axis=1)
    G = groups.size
    if G >= MIN_BOOTSTRAP_PATHS:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, G, size=(n_boot, G))
        weights = counts[idx]  # (n_boot, G)
        boots = np.einsum("lbg,bg->lb", unit_rel[:, idx], weights) / weights.sum(axis=1)
        draws = 0.5 * _slopes(x, np.log(boots))
        tail = 50.0 * (1.0 - level)
        low, high = np.percentile(draws, [tail, 100.0 - tail])
        return (float(low), float(high)), "unit-bootstrap" if named else "bootstrap"
    if G >= 2:
        q = t975(G - 1) if level == 0.95 else _t_quantile(0.5 + level / 2, G - 1)
        per_unit = 0.5 * _slopes(x, np.log(unit_rel)) if named else per_entry
        half = q * float(np.std(per_unit, ddof=1)) / math.sqrt(G)
        return (hurst - half, hurst + half), "units-t" if named else "paths-t"
    return interval_fit, "regression-t"


def estimate_hurst(
    paths,
    *,
    axis: int = 0,
    min_lag: int = 1,
    max_lag: int | None = None,
    order: int = 1,
    cumulative: bool = False,
    level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    unit_axis: int | None = None,
) -> HurstEstimate:
    """The Hurst (Hölder) exponent of paths sampled on a uniform grid, from their variogram.

    See the module docstring for the estimator, how smooth paths (H = 1, the saturation
    value) and linear trends are handled, and which interval is returned.

    **Arguments:**

    - `paths`: a real array; axis `axis` is depth (n >= 32 points with the default
      lags), every other entry a separate path (a 1-D array is one path; `(L, d, d)`
      weights are d² paths).
    - `axis`: the depth axis (default 0).
    - `min_lag`, `max_lag`: the fit uses `m = min_lag · 2^j <= max_lag` (grid steps);
      `max_lag` defaults to `n // 8` and must be at most `n // (2 · order)`. At least
      three lags are needed.
    - `order`: 1 (first differences, saturates at 1) or 2 (second differences, blind to
      linear trends, saturates at 2).
    - `cumulative`: estimate the partial sums `Σ_{j<=k} V_j` instead (for weights that
      are increments of a path).
    - `level`: the interval's coverage, in (0, 1).
    - `n_boot`, `seed`: the bootstrap over paths (used when there are >= 8 paths); the
      seed makes it reproducible (a `numpy` generator, no global state).
    - `unit_axis`: an axis of `paths` (not the depth axis) along which the paths are
      independent units, the entries within one unit possibly correlated (axis 1 of
      `(L, networks, d, d)` weights: the d² entries of one trained network move together).
      The interval then resamples units, not paths: a bootstrap over units (>= 8), else
      the Student-t interval over the units' own pooled estimates (`units-t`). Default:
      every path is a unit.

    **Returns:** a `HurstEstimate`.

    **Raises:** `ValueError` (one line, naming the argument) for a non-numeric, complex,
    empty or non-finite `paths`, a path too short for three lags, a constant path (its
    variogram is 0), or an invalid option.
    """
    order, n_boot, seed, min_lag = _checked_options(order, cumulative, level, n_boot, seed, min_lag)
    flat, rest = _as_paths(paths, axis, cumulative)
    n, n_paths = flat.shape
    units = _unit_ids(np.ndim(paths), axis, unit_axis, rest)
    lags = _dyadic_lags(n, order, min_lag, max_lag)
    v = _path_variograms(flat, lags, order)
    x = np.log(np.asarray(lags, dtype=np.float64) / n)
    per_entry = 0.5 * _slopes(x, np.log(v))
    rel = v / v[:1]  # each path relative to its smallest-lag value
    pooled = rel.mean(axis=1)
    hurst = 0.5 * float(_slopes(x, np.log(pooled)[:, None])[0])
    interval_fit = _t_interval(x, np.log(pooled), level)
    interval, method = _interval(
        x, rel, units, per_entry, hurst, interval_fit, level=level, n_boot=n_boot, seed=seed,
        named=unit_axis is not None,
    )  # fmt: skip
    return HurstEstimate(
        hurst=hurst,
        interval=interval,
        interval_method=method,
        interval_fit=interval_fit,
        per_entry=per_entry.reshape(rest),
        lags=tuple(lags),
        variogram=tuple(float(p) for p in pooled),
        n_points=n,
        n_paths=n_paths,
        order=order,
        cumulative=cumulative,
        level=float(level),
    )
