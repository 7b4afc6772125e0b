"""ReLU approximation constructions (meanfield.theory.approximation), each against an
independent computation: np.interp, closed forms of the sawtooth and of parity, affine
functions, and the second-order error rate of linear interpolation."""

import itertools
import math

import numpy as np
import pytest

from meanfield.theory.approximation import (
    ShallowReLU,
    count_pieces,
    interpolant,
    interpolation_error,
    parity_deep,
    parity_deep_depth,
    parity_deep_units,
    parity_lookup_units,
    parity_shallow,
    parity_shallow_units,
    relu,
    sawtooth,
    sawtooth_deep_units,
    sawtooth_pieces,
    sawtooth_shallow,
    shallow_units_needed,
    simplex_interpolate,
    simplex_pieces,
    square_staircase,
    square_staircase_error,
    tent,
    triangle_bump,
)


def midpoint_grid(pieces: int) -> np.ndarray:
    """A grid of [0, 1] holding every knot j/pieces and every cell midpoint."""
    return np.linspace(0.0, 1.0, 2 * pieces * 25 + 1)


def test_relu_and_shallow_network_basics():
    x = np.array([[-2.0, -0.0], [0.5, 3.0]])
    np.testing.assert_array_equal(relu(x), [[0.0, 0.0], [0.5, 3.0]])
    assert relu(x).dtype == np.float64
    g = ShallowReLU(w=[1.0, -2.0], b=[0.5, 1.0], a=[3.0, 0.25], c0=-1.0)
    assert g.units == 2 and g.parameters == 7
    z = np.random.default_rng(0).normal(size=(3, 4, 5))
    expected = -1.0 + 3.0 * np.maximum(z + 0.5, 0) + 0.25 * np.maximum(-2.0 * z + 1.0, 0)
    out = g(z)
    assert out.shape == z.shape and out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-15)
    assert float(g(0.25)) == pytest.approx(-1.0 + 3.0 * 0.75 + 0.25 * 0.5, abs=1e-15)
    with pytest.raises(ValueError, match="equal lengths"):
        ShallowReLU(w=[1.0], b=[0.0, 1.0], a=[1.0])


def test_square_staircase_of_four_relus():
    g = square_staircase(4)
    assert g.units == 4 and g.parameters == 13
    np.testing.assert_allclose(-g.b / g.w, [0.0, 0.25, 0.5, 0.75], rtol=0, atol=1e-15)
    x = midpoint_grid(4)
    assert np.any(np.isclose(x, 0.125, rtol=0, atol=0))
    assert abs(np.max(np.abs(x**2 - g(x))) - 1 / 64) <= 1e-15
    knots = np.linspace(0.0, 1.0, 5)
    np.testing.assert_allclose(g(knots), knots**2, rtol=0, atol=1e-15)


@pytest.mark.parametrize("pieces", [1, 2, 3, 8, 100])
def test_square_staircase_error_is_exact(pieces):
    g = square_staircase(pieces)
    assert g.units == pieces
    x = midpoint_grid(pieces)
    measured = np.max(np.abs(x**2 - g(x)))
    exact = 1.0 / (4.0 * pieces**2)  # h²/4 at h = 1/pieces
    assert square_staircase_error(pieces) == pytest.approx(exact, rel=1e-15)
    # 1e-13 relative; at pieces = 100 float64 resolves x² - g(x) (values ~1, error 2.5e-5)
    # only to ~1e-16 absolute, i.e. ~1e-11 relative, hence the absolute floor
    assert abs(measured - exact) <= max(1e-13 * exact, 1e-15), (measured, exact)
    knots = np.linspace(0.0, 1.0, pieces + 1)
    np.testing.assert_allclose(g(knots), knots**2, rtol=0, atol=1e-15)
    # the error is largest at the midpoints, (x - t)(t + h - x) between them
    assert np.all(x**2 <= g(x) + 1e-15)


def test_interpolant_matches_numpy_interp():
    rng = np.random.default_rng(0)
    knots = np.sort(rng.uniform(-3.0, 3.0, size=40))
    g = interpolant(np.sin, knots)
    assert g.units == 39
    x = rng.uniform(knots[0], knots[-1], size=5000)
    np.testing.assert_allclose(g(x), np.interp(x, knots, np.sin(knots)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(g(knots), np.sin(knots), rtol=0, atol=1e-12)
    # outside: constant on the left, the last piece continued on the right
    left = knots[0] - rng.uniform(0.1, 5.0, size=20)
    np.testing.assert_allclose(g(left), np.sin(knots[0]), rtol=0, atol=1e-12)
    slope = (np.sin(knots[-1]) - np.sin(knots[-2])) / (knots[-1] - knots[-2])
    right = knots[-1] + rng.uniform(0.1, 5.0, size=20)
    expected = np.sin(knots[-1]) + slope * (right - knots[-1])
    np.testing.assert_allclose(g(right), expected, rtol=0, atol=1e-10)


def test_triangle_bump():
    lo, mid, hi, height = -1.0, 0.5, 2.0, 3.0
    g = triangle_bump(lo, mid, hi, height)
    assert g.units == 3
    np.testing.assert_allclose(g(np.array([lo, mid, hi])), [0.0, height, 0.0], atol=1e-14)
    outside = np.array([-50.0, -1.5, lo - 1e-9, hi + 1e-9, 2.5, 50.0])
    np.testing.assert_allclose(g(outside), 0.0, rtol=0, atol=1e-12)
    x = np.random.default_rng(0).uniform(-3.0, 4.0, size=2000)
    expected = np.interp(x, [lo, mid, hi], [0.0, height, 0.0])  # 0 outside
    np.testing.assert_allclose(g(x), expected, rtol=0, atol=1e-13)
    assert float(triangle_bump(0.0, 0.25, 1.0)(0.25)) == pytest.approx(1.0, abs=1e-15)


def sawtooth_closed_form(x: np.ndarray, k: int) -> np.ndarray:
    """The triangle wave of 2**k pieces, exactly on a dyadic grid: y = 2**k x mod 2,
    then 1 - |y - 1| (y = 0 at the even dyadics, including x = 1)."""
    y = np.mod(x * 2.0**k, 2.0)
    return 1.0 - np.abs(y - 1.0)


def test_tent_map():
    x = np.linspace(0.0, 1.0, 1025)
    np.testing.assert_allclose(tent(x), np.minimum(2 * x, 2 - 2 * x), rtol=0, atol=1e-15)


@pytest.mark.parametrize("k", range(1, 13))
def test_sawtooth_depth_separation(k):
    points = 2 ** (k + 3) + 1
    x = np.linspace(0.0, 1.0, points)
    deep = sawtooth(x, k)
    np.testing.assert_allclose(deep, sawtooth_closed_form(x, k), rtol=0, atol=1e-12)
    assert count_pieces(lambda t: sawtooth(t, k), 0.0, 1.0, points) == 2**k
    assert sawtooth_pieces(k) == 2**k
    assert sawtooth_deep_units(k) == 2 * k
    shallow = sawtooth_shallow(k)
    assert shallow.units == 2**k
    np.testing.assert_allclose(shallow(x), deep, rtol=0, atol=1e-12)
    assert shallow_units_needed(2**k) == 2**k - 1
    assert shallow_units_needed(sawtooth_pieces(k)) > sawtooth_deep_units(k) or k <= 3


def test_sawtooth_of_zero_layers_is_the_identity():
    x = np.linspace(0.0, 1.0, 9)
    np.testing.assert_array_equal(sawtooth(x, 0), x)
    assert sawtooth_shallow(0).units == 1 and sawtooth_pieces(0) == 1


def test_count_pieces_can_fail():
    three = lambda x: np.where(x < 0.25, -x, np.where(x < 0.5, 2 * x - 0.75, 0.25))
    assert count_pieces(three, 0.0, 1.0, 101) == 3
    assert count_pieces(lambda x: 3.0 * x - 2.0, -1.0, 5.0, 57) == 1
    assert count_pieces(lambda x: np.zeros_like(x), 0.0, 1.0, 11) == 1
    assert count_pieces(np.square, 0.0, 1.0, 101) == 100
    # |x| with its kink at 0 on the grid: 2 pieces
    assert count_pieces(np.abs, -1.0, 1.0, 201) == 2


def all_bits(n: int) -> np.ndarray:
    return np.array(list(itertools.product([0.0, 1.0], repeat=n)))


@pytest.mark.parametrize("n", range(1, 13))
def test_parity_on_every_input(n):
    bits = all_bits(n)
    assert bits.shape == (2**n, n)
    truth = (np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1).sum(axis=1) % 2
    np.testing.assert_array_equal(bits.sum(axis=1) % 2, truth)
    np.testing.assert_array_equal(parity_shallow(n)(bits), truth)
    np.testing.assert_array_equal(parity_deep(n)(bits), truth)
    # leading batch axes are kept
    assert parity_deep(n)(bits.reshape(2, -1, n)).shape == (2, 2 ** (n - 1))
    assert parity_shallow(n)(bits.reshape(2, -1, n)).shape == (2, 2 ** (n - 1))


def test_parity_unit_counts():
    assert parity_shallow_units(20) == 20
    assert parity_deep_units(20) == 38 and parity_deep_depth(20) == 5
    assert parity_lookup_units(20) == 2**19
    table = {1: (0, 0, 1), 2: (2, 1, 2), 3: (4, 2, 4), 8: (14, 3, 128), 9: (16, 4, 256)}
    for n, (units, depth, lookup) in table.items():
        assert parity_deep_units(n) == units
        assert parity_deep_depth(n) == depth == math.ceil(math.log2(n))
        assert parity_lookup_units(n) == lookup
        assert parity_shallow_units(n) == n


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_simplex_interpolation_is_exact_for_affine(d):
    rng = np.random.default_rng(0)
    slope, offset = rng.normal(size=d), rng.normal()
    cells = 5
    axis = np.linspace(0.0, 1.0, cells + 1)
    grid = np.stack(np.meshgrid(*[axis] * d, indexing="ij"), axis=-1)
    values = grid @ slope + offset
    assert values.shape == (cells + 1,) * d
    x = rng.uniform(size=(3000, d))
    x[:5] = 1.0  # the far corner and faces
    x[5:10] = 0.0
    np.testing.assert_allclose(simplex_interpolate(values, x), x @ slope + offset, atol=1e-12)
    # at the grid nodes the interpolant is the value itself
    nodes = grid.reshape(-1, d)
    np.testing.assert_allclose(simplex_interpolate(values, nodes), values.reshape(-1), atol=1e-12)


def test_simplex_interpolation_in_one_dimension_is_numpy_interp():
    rng = np.random.default_rng(0)
    values = rng.normal(size=13)
    x = rng.uniform(size=(4000, 1))
    expected = np.interp(x[:, 0], np.linspace(0.0, 1.0, 13), values)
    np.testing.assert_allclose(simplex_interpolate(values, x), expected, rtol=0, atol=1e-12)


def test_simplex_interpolation_is_continuous():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5, 5, 5))
    eps = 1e-12
    # across an internal face r_0 = r_1 of the cell [0.25, 0.5]^3, and across a cell face
    a = np.array([[0.25 + 0.1, 0.25 + 0.1 - eps, 0.3], [0.5 - eps, 0.4, 0.3]])
    b = np.array([[0.25 + 0.1 - eps, 0.25 + 0.1, 0.3], [0.5 + eps, 0.4, 0.3]])
    np.testing.assert_allclose(
        simplex_interpolate(values, a), simplex_interpolate(values, b), rtol=0, atol=1e-9
    )
    # and at random points on random faces r_i = r_j
    x = rng.uniform(size=(500, 3))
    x[:, 1] = np.floor(x[:, 1] * 4) / 4 + (x[:, 0] - np.floor(x[:, 0] * 4) / 4)
    x = np.clip(x, 0.0, 1.0)
    up, down = x.copy(), x.copy()
    up[:, 1] += eps
    down[:, 1] -= eps
    up, down = np.clip(up, 0, 1), np.clip(down, 0, 1)
    np.testing.assert_allclose(
        simplex_interpolate(values, up), simplex_interpolate(values, down), rtol=0, atol=1e-9
    )


@pytest.mark.parametrize("d", [2, 3, 4])
def test_simplex_interpolation_is_a_convex_combination_of_its_cell(d):
    """Affine exactness holds for any walk order; only the decreasing one (the Kuhn
    simplex holding x) gives non-negative weights, so values within the cell's corners."""
    rng = np.random.default_rng(0)
    cells = 3
    values = rng.normal(size=(cells + 1,) * d)
    x = rng.uniform(size=(2000, d))
    out = simplex_interpolate(values, x)
    base = np.minimum(np.floor(x * cells).astype(int), cells - 1)
    corners = np.array(list(itertools.product([0, 1], repeat=d)))
    cell_values = np.stack([values[tuple((base + c).T)] for c in corners], axis=1)
    assert np.all(out >= cell_values.min(axis=1) - 1e-12)
    assert np.all(out <= cell_values.max(axis=1) + 1e-12)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_simplex_interpolation_is_second_order(d):
    f = lambda x: np.exp(-np.sum(x**2, axis=1)) * np.prod(np.cos(2.0 * x), axis=1)
    points = np.random.default_rng(0).uniform(size=(4000, d))
    errors = [interpolation_error(f, d, cells, points) for cells in (4, 8, 16)]
    for coarse, fine in itertools.pairwise(errors):
        assert 3.4 <= coarse / fine <= 4.6, errors


def test_simplex_pieces():
    assert simplex_pieces(2, 3) == 48
    assert simplex_pieces(1, 1) == 1 and simplex_pieces(4, 2) == 32


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: square_staircase(0), "pieces"),
        (lambda: square_staircase(1.5), "pieces"),
        (lambda: square_staircase(True), "pieces"),
        (lambda: square_staircase_error(0), "pieces"),
        (lambda: shallow_units_needed(0), "pieces"),
        (lambda: interpolant(np.sin, [0.0, 1.0, 1.0]), "knots"),
        (lambda: interpolant(np.sin, [0.0, 2.0, 1.0]), "knots"),
        (lambda: interpolant(np.sin, [0.0]), "knots"),
        (lambda: interpolant(np.sin, [0.0, np.inf]), "knots"),
        (lambda: triangle_bump(0.0, 2.0, 1.0), "mid"),
        (lambda: triangle_bump(0.0, 0.5, 1.0, height=np.nan), "height"),
        (lambda: sawtooth(np.zeros(3), -1), "k"),
        (lambda: sawtooth_shallow(-1), "k"),
        (lambda: sawtooth_pieces(-1), "k"),
        (lambda: sawtooth_deep_units(-1), "k"),
        (lambda: count_pieces(np.abs, 0.0, 1.0, 1), "points"),
        (lambda: count_pieces(np.abs, 1.0, 0.0, 11), "lo"),
        (lambda: parity_shallow(0), "n"),
        (lambda: parity_deep(0), "n"),
        (lambda: parity_deep_units(0), "n"),
        (lambda: parity_deep_depth(0), "n"),
        (lambda: parity_lookup_units(0), "n"),
        (lambda: parity_shallow_units(0), "n"),
        (lambda: parity_deep(3)(np.zeros((2, 4))), "bits"),
        (lambda: parity_shallow(3)(np.zeros((2, 4))), "bits"),
        (lambda: simplex_interpolate(np.zeros((3, 3)), np.zeros((4, 3))), "values"),
        (lambda: simplex_interpolate(np.zeros((3, 4)), np.zeros((4, 2))), "values"),
        (lambda: simplex_interpolate(np.zeros((3, 3)), np.full((1, 2), 1.5)), "x"),
        (lambda: simplex_pieces(0, 2), "cells"),
        (lambda: simplex_pieces(2, 0), "d"),
        (lambda: interpolation_error(np.sum, 2, 4, np.zeros((3, 3))), "points"),
    ],
)
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b") as caught:
        call()
    assert "\n" not in str(caught.value)
