"""Closed-form ReLU constructions of universal approximation and depth separation
(lecture "Universal approximation & going deep", Batra), in numpy float64.

* One hidden layer interpolates. `interpolant(f, knots)` is the piecewise-linear
  interpolant of f at knots t_0 < ... < t_n as `f(t_0) + Σ_{i<n} c_i relu(x - t_i)`: n
  units, one per piece (c_0 the first slope, c_i the change of slope at t_i). Exact at the
  knots; constant f(t_0) left of t_0, linear (last slope) right of t_n.
* x² on [0, 1] (`square_staircase`): the interpolant at `pieces` equal cells errs by at
  most h²/4 on a cell of width h (at its midpoint), so by exactly `1/(4 pieces²)`; four
  ReLUs (knots 0, 1/4, 1/2, 3/4) give 1/64.
* Depth separation (Telgarsky): the tent map `2 relu(x) - 4 relu(x - 1/2)` composed k
  times is the sawtooth with `2**k` linear pieces on [0, 1], from k layers of 2 units
  (2k units). A one-hidden-layer net of one input with w units is linear between its w
  kinks, so has at most w + 1 pieces: the same function needs at least `2**k - 1` units
  shallow (`sawtooth_shallow` uses `2**k`, one per piece).
* Parity of n bits. The lecture's "shallow needs O(2^n) units" holds for networks that
  enumerate the odd input patterns (`parity_lookup_units = 2**(n-1)`), not for ReLU nets
  in general: the hidden units see the affine s = Σ x_i, and the triangle wave
  `relu(s) - 2 relu(s-1) + 2 relu(s-2) - ...` (n units) equals s mod 2 at s = 0..n, so a
  depth-2 ReLU net computes parity exactly with n units. A balanced tree of
  XOR(a, b) = relu(a - b) + relu(b - a) uses 2(n - 1) units in ceil(log2 n) layers: for
  parity, depth buys nothing in unit count; the sawtooth is the real separation.
* Curse of dimensionality: the continuous piecewise-linear interpolant on the Kuhn
  (Freudenthal) triangulation of the grid of [0, 1]^d with `cells` cells per axis has
  `cells**d * d!` simplices (linear pieces), is exact for affine functions and errs by
  O(h²) (h = 1/cells) for smooth f: an error ε costs ~ε^(-d/2) pieces. It is a continuous
  piecewise-linear function, so a ReLU network represents it.
"""

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

_CHUNK = 1 << 20  # entries of the (points, units) hidden layer evaluated at once


def _integer(value: Any, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def _real(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return number


def _vector(value: Any, name: str) -> np.ndarray:
    array = np.array(value, dtype=np.float64)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be a 1-D array of finite numbers, got shape {array.shape}")
    array.setflags(write=False)
    return array


def relu(x) -> np.ndarray:
    """`max(x, 0)` elementwise, as a float64 array."""
    return np.maximum(np.asarray(x, dtype=np.float64), 0.0)


@dataclasses.dataclass(frozen=True, eq=False)
class ShallowReLU:
    """A one-hidden-layer ReLU network of one real input,
    `g(x) = c0 + Σ_i a_i relu(w_i x + b_i)` (fields: 1-D float64 arrays of equal length,
    stored read-only; equality is identity, as for arrays)."""

    w: np.ndarray
    b: np.ndarray
    a: np.ndarray
    c0: float = 0.0

    def __post_init__(self):
        for name in ("w", "b", "a"):
            object.__setattr__(self, name, _vector(getattr(self, name), name))
        if not len(self.w) == len(self.b) == len(self.a):
            raise ValueError(
                f"w, b, a must have equal lengths, got {len(self.w)}, {len(self.b)}, {len(self.a)}"
            )
        object.__setattr__(self, "c0", _real(self.c0, "c0"))

    def __call__(self, x) -> np.ndarray:
        """g at every entry of x (any shape): a float64 array of x's shape."""
        x = np.asarray(x, dtype=np.float64)
        flat = x.reshape(-1)
        out = np.empty_like(flat)
        step = max(1, _CHUNK // max(self.units, 1))
        for start in range(0, flat.size, step):
            part = flat[start : start + step]
            out[start : start + step] = relu(np.multiply.outer(part, self.w) + self.b) @ self.a
        return (out + self.c0).reshape(x.shape)

    @property
    def units(self) -> int:
        """The number of hidden units."""
        return len(self.w)

    @property
    def parameters(self) -> int:
        """The number of parameters, `3 units + 1` (w, b, a and c0)."""
        return 3 * self.units + 1


def interpolant(f: Callable[[np.ndarray], Any], knots) -> ShallowReLU:
    """The piecewise-linear interpolant of f at the strictly increasing `knots` (at least
    2), `f(t_0) + Σ_{i<n} c_i relu(x - t_i)` with one unit per piece (c_0 the first slope,
    c_i the change of slope at t_i). Exact at the knots and linear between them; left of
    t_0 it is constant f(t_0), right of t_n it continues the last piece linearly. f is
    called once, on the 1-D array of knots (a scalar result is broadcast)."""
    t = _vector(knots, "knots")
    if len(t) < 2 or not np.all(np.diff(t) > 0):
        raise ValueError(f"knots must be at least 2 strictly increasing numbers, got {t!r}")
    if not callable(f):
        raise ValueError(f"f must be callable, got {f!r}")
    y = np.broadcast_to(np.asarray(f(t), dtype=np.float64), t.shape)
    if not np.all(np.isfinite(y)):
        raise ValueError("f must be finite at every knot")
    slopes = np.diff(y) / np.diff(t)
    a = np.concatenate([slopes[:1], np.diff(slopes)])
    return ShallowReLU(w=np.ones(len(t) - 1), b=-t[:-1], a=a, c0=float(y[0]))


def square_staircase(pieces: int) -> ShallowReLU:
    """x² on [0, 1] by its interpolant at `linspace(0, 1, pieces + 1)`: `pieces` units,
    knots j / pieces (pieces = 4: the lecture's ReLUs at 0, 1/4, 1/2, 3/4)."""
    pieces = _integer(pieces, "pieces", 1)
    return interpolant(np.square, np.linspace(0.0, 1.0, pieces + 1))


def square_staircase_error(pieces: int) -> float:
    """The exact max error of `square_staircase(pieces)` on [0, 1], `1/(4 pieces²)`:
    on a cell of width h the chord of x² lies above it by `(x - t)(t + h - x) <= h²/4`."""
    pieces = _integer(pieces, "pieces", 1)
    return 1.0 / (4.0 * pieces**2)


# the lecture's worked example (x² from 4 ReLUs, slide "numbers"): units relu(x − b_i) at
# b = 0, 1/4, 1/2, 3/4 with output weights α = 0.25, 0.5, 0.75, 1.0 as printed
LECTURE_SQUARE_KNOTS = (0.0, 0.25, 0.5, 0.75)
LECTURE_SQUARE_ALPHAS = (0.25, 0.5, 0.75, 1.0)


def lecture_square_table() -> dict:
    """The lecture's x²-from-4-ReLUs table, measured: its printed weights give f(1) = 1.25
    (x² is 1 there) and a max error of 0.25 on [0, 1], a slip; the interpolant with the
    same units has weights (0.25, 0.5, 0.5, 0.5) (the chords' slopes 1/4, 3/4, 5/4, 7/4
    and their changes) and max error 1/64 (`square_staircase(4)`)."""
    grid = np.linspace(0.0, 1.0, 2**12 + 1)
    knots = np.asarray(LECTURE_SQUARE_KNOTS)
    printed = ShallowReLU(w=np.ones(4), b=-knots, a=np.asarray(LECTURE_SQUARE_ALPHAS))
    right = square_staircase(4)
    return {
        "knots": list(LECTURE_SQUARE_KNOTS),
        "printed_weights": list(LECTURE_SQUARE_ALPHAS),
        "printed_f_at_1": float(printed(np.array([1.0]))[0]),
        "printed_max_error": float(np.max(np.abs(printed(grid) - grid**2))),
        "corrected_weights": [float(v) for v in right.a],
        "corrected_max_error": float(np.max(np.abs(right(grid) - grid**2))),
    }


def triangle_bump(lo: float, mid: float, hi: float, height: float = 1.0) -> ShallowReLU:
    """The hat 0 outside [lo, hi], `height` at mid and linear between, from 3 ReLUs
    (kinks at lo, mid, hi; right of hi the slopes cancel up to rounding)."""
    lo, mid, hi = _real(lo, "lo"), _real(mid, "mid"), _real(hi, "hi")
    height = _real(height, "height")
    if not lo < mid < hi:
        raise ValueError(f"lo, mid, hi must satisfy lo < mid < hi, got {lo}, {mid}, {hi}")
    up, down = height / (mid - lo), height / (hi - mid)
    return ShallowReLU(
        w=np.ones(3), b=np.array([-lo, -mid, -hi]), a=np.array([up, -(up + down), down])
    )


def tent(x) -> np.ndarray:
    """The tent map of [0, 1] (2x, then 2 - 2x) as a 2-unit ReLU layer,
    `2 relu(x) - 4 relu(x - 1/2)`."""
    return 2.0 * relu(x) - 4.0 * relu(np.asarray(x, dtype=np.float64) - 0.5)


def sawtooth(x, k: int) -> np.ndarray:
    """The k-fold composition of `tent` (k = 0: x itself), a deep ReLU network of k layers
    of 2 units; on [0, 1] a triangle wave with 2**k linear pieces."""
    k = _integer(k, "k", 0)
    y = np.asarray(x, dtype=np.float64)
    for _ in range(k):
        y = tent(y)
    return y


def sawtooth_deep_units(k: int) -> int:
    """The hidden units of `sawtooth(., k)`: 2 per layer, 2k."""
    return 2 * _integer(k, "k", 0)


def sawtooth_pieces(k: int) -> int:
    """The number of linear pieces of `sawtooth(., k)` on [0, 1], 2**k."""
    return 2 ** _integer(k, "k", 0)


def sawtooth_shallow(k: int) -> ShallowReLU:
    """`sawtooth(., k)` on [0, 1] as one hidden layer: its interpolant at the knots
    j / 2**k, j = 0..2**k (2**k units, one per piece)."""
    k = _integer(k, "k", 0)
    return interpolant(lambda t: sawtooth(t, k), np.arange(2**k + 1) / 2**k)


def shallow_units_needed(pieces: int) -> int:
    """The fewest units of a one-hidden-layer ReLU net of one input with `pieces` linear
    pieces, `pieces - 1` (w units give at most w + 1 pieces; Telgarsky's separation)."""
    return _integer(pieces, "pieces", 1) - 1


def count_pieces(f: Callable[[np.ndarray], Any], lo: float, hi: float, points: int) -> int:
    """The number of maximal linear pieces of the piecewise-linear f on [lo, hi], from
    its values on `linspace(lo, hi, points)`: 1 + the number of grid points where the
    slope changes by more than 1e-9 times the largest slope magnitude. The grid must
    contain every breakpoint (a dyadic grid for the sawtooth): a breakpoint strictly
    between grid points changes the slope twice and may be counted twice."""
    lo, hi = _real(lo, "lo"), _real(hi, "hi")
    if not lo < hi:
        raise ValueError(f"lo must be < hi, got {lo}, {hi}")
    points = _integer(points, "points", 2)
    x = np.linspace(lo, hi, points)
    y = np.asarray(f(x), dtype=np.float64)
    if y.shape != x.shape or not np.all(np.isfinite(y)):
        raise ValueError(f"f must return {points} finite values on the grid, got shape {y.shape}")
    slopes = np.diff(y) / np.diff(x)
    scale = float(np.max(np.abs(slopes)))
    return 1 + int(np.count_nonzero(np.abs(np.diff(slopes)) > 1e-9 * scale))


def _bits(x, n: int) -> np.ndarray:
    bits = np.asarray(x, dtype=np.float64)
    if bits.ndim < 1 or bits.shape[-1] != n:
        raise ValueError(f"bits must have a last axis of length n = {n}, got shape {bits.shape}")
    return bits


def parity_shallow(n: int) -> Callable[[Any], np.ndarray]:
    """Parity of n bits (arrays `(..., n)` of 0/1) by ONE hidden layer of n ReLU units on
    s = Σ x_i: the triangle wave `relu(s) - 2 relu(s-1) + 2 relu(s-2) - ...` (units
    j = 0..n-1), equal to s mod 2 at s = 0..n."""
    n = _integer(n, "n", 1)
    signs = np.where(np.arange(n) % 2 == 0, 2.0, -2.0)
    signs[0] = 1.0
    wave = ShallowReLU(w=np.ones(n), b=-np.arange(n, dtype=np.float64), a=signs)

    def parity(bits) -> np.ndarray:
        return wave(_bits(bits, n).sum(axis=-1))

    return parity


def parity_shallow_units(n: int) -> int:
    """The units of `parity_shallow(n)`, n."""
    return _integer(n, "n", 1)


def parity_deep(n: int) -> Callable[[Any], np.ndarray]:
    """Parity of n bits (arrays `(..., n)` of 0/1) by a balanced tree of XOR gates,
    `XOR(a, b) = relu(a - b) + relu(b - a)` (exact on {0, 1}): 2 units per gate, n - 1
    gates in ceil(log2 n) layers; an unpaired value skips a layer (identity, uncounted)."""
    n = _integer(n, "n", 1)

    def parity(bits) -> np.ndarray:
        layer = list(np.moveaxis(_bits(bits, n), -1, 0))
        while len(layer) > 1:
            half = len(layer) // 2
            pairs = [
                relu(layer[2 * i] - layer[2 * i + 1]) + relu(layer[2 * i + 1] - layer[2 * i])
                for i in range(half)
            ]
            layer = pairs + layer[2 * half :]
        return layer[0]

    return parity


def parity_deep_units(n: int) -> int:
    """The units of `parity_deep(n)`, 2 (n - 1)."""
    return 2 * (_integer(n, "n", 1) - 1)


def parity_deep_depth(n: int) -> int:
    """The XOR layers of `parity_deep(n)`, ceil(log2 n)."""
    return (_integer(n, "n", 1) - 1).bit_length()


def parity_lookup_units(n: int) -> int:
    """The units of a shallow net that enumerates the odd inputs, one per pattern:
    2**(n-1) (the lecture's O(2^n); a ReLU net needs only n, `parity_shallow`)."""
    return 2 ** (_integer(n, "n", 1) - 1)


def simplex_interpolate(values, x) -> np.ndarray:
    """The continuous piecewise-linear interpolant, on the Kuhn (Freudenthal)
    triangulation of the uniform grid of [0, 1]^d, of the grid values `values` (shape
    `(cells + 1,) * d`, cells >= 1), at the points x (shape `(m, d)`, in [0, 1]^d):
    shape (m,). In the cell of base vertex v with fractional parts r sorted decreasing,
    r_(1) >= ... >= r_(d), the vertices are v, v + e_(1), v + e_(1) + e_(2), ... with
    weights 1 - r_(1), r_(1) - r_(2), ..., r_(d). Exact for affine functions."""
    grid = np.asarray(values, dtype=np.float64)
    cells = grid.shape[0] - 1 if grid.ndim else 0
    if grid.ndim < 1 or cells < 1 or any(size != cells + 1 for size in grid.shape):
        raise ValueError(f"values must have shape (cells + 1,) * d, cells >= 1; got {grid.shape}")
    d = grid.ndim
    points = np.asarray(x, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != d:
        raise ValueError(f"x must have shape (m, {d}) for values of {d} axes, got {points.shape}")
    if not np.all((points >= 0.0) & (points <= 1.0)):
        raise ValueError("x must lie in [0, 1]^d")
    scaled = points * cells
    base = np.clip(np.floor(scaled), 0, cells - 1).astype(np.intp)
    r = scaled - base
    order = np.argsort(-r, axis=1, kind="stable")
    ranked = np.take_along_axis(r, order, axis=1)
    upper = np.concatenate([np.ones((len(r), 1)), ranked], axis=1)
    lower = np.concatenate([ranked, np.zeros((len(r), 1))], axis=1)
    weights = upper - lower  # (m, d + 1): 1 - r_(1), r_(1) - r_(2), ..., r_(d)
    vertex = base.copy()
    rows = np.arange(len(r))
    out = weights[:, 0] * grid[tuple(vertex.T)]
    for j in range(d):
        vertex[rows, order[:, j]] += 1
        out += weights[:, j + 1] * grid[tuple(vertex.T)]
    return out


def simplex_pieces(cells: int, d: int) -> int:
    """The simplices (linear pieces) of the Kuhn triangulation, `cells**d * d!`."""
    cells, d = _integer(cells, "cells", 1), _integer(d, "d", 1)
    return cells**d * math.factorial(d)


def interpolation_error(f: Callable[[np.ndarray], Any], d: int, cells: int, points) -> float:
    """The RMS error of `simplex_interpolate` of f (called on `(m, d)` arrays, returning
    (m,)) from its values on the grid of `cells` cells per axis, against f at `points`
    (shape `(m, d)`, in [0, 1]^d)."""
    d, cells = _integer(d, "d", 1), _integer(cells, "cells", 1)
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != d or len(points) < 1:
        raise ValueError(f"points must have shape (m, {d}) with m >= 1, got {points.shape}")
    axis = np.linspace(0.0, 1.0, cells + 1)
    nodes = np.stack(np.meshgrid(*[axis] * d, indexing="ij"), axis=-1).reshape(-1, d)
    values = np.asarray(f(nodes), dtype=np.float64)
    if values.shape != (len(nodes),):
        raise ValueError(f"f must return shape ({len(nodes)},) on the grid, got {values.shape}")
    values = values.reshape((cells + 1,) * d)
    error = simplex_interpolate(values, points) - np.asarray(f(points), dtype=np.float64)
    return float(np.sqrt(np.mean(error**2)))
