"""meanfield.special: erf, erfc and gelu from exp and arithmetic, against Python's libm
(`math.erf`, `math.erfc`, evaluated point by point in double precision)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from meanfield import special

EPS64 = float(np.finfo(np.float64).eps)
EPS32 = float(np.finfo(np.float32).eps)
# both sides of each piece's boundaries (|x| = 1, 5, 27), zero, tiny, and a dense grid
XS = np.concatenate(
    [
        np.linspace(-28.0, 28.0, 56_001),
        [0.0, 1e-300, -1e-12, 1.0, -1.0, np.nextafter(1.0, 2.0), 5.0, np.nextafter(5.0, 6.0)],
    ]
)
ERF = np.array([math.erf(x) for x in XS])
ERFC = np.array([math.erfc(x) for x in XS])


def test_erf_and_erfc_in_float64():
    erf = np.asarray(special.erf(jnp.asarray(XS)))
    erfc = np.asarray(special.erfc(jnp.asarray(XS)))
    assert np.max(np.abs(erf - ERF)) <= 2 * EPS64
    inner = np.abs(XS) <= 1
    assert np.max(np.abs(erf - ERF)[inner] / np.maximum(np.abs(ERF[inner]), 1e-300)) <= 4 * EPS64
    # erfc in relative terms wherever it is a normal number; exp(−x²) carries the
    # rounding of x² (relative condition 2x²), as in every exp-based erfc (XLA's too)
    normal = ERFC > np.finfo(np.float64).tiny
    rel = np.abs(erfc - ERFC)[normal] / ERFC[normal]
    assert np.all(rel <= (16 + 2 * XS[normal] ** 2) * EPS64)
    assert np.max(rel[np.abs(XS[normal]) <= 5]) <= 16 * EPS64
    assert np.all(erfc[XS > 27.5] == 0.0)


def test_float32():
    x = jnp.asarray(XS, jnp.float32)
    exact_erf = np.array([math.erf(float(v)) for v in np.asarray(x)])
    exact_erfc = np.array([math.erfc(float(v)) for v in np.asarray(x)])
    erf, erfc = special.erf(x), special.erfc(x)
    assert erf.dtype == jnp.float32 and erfc.dtype == jnp.float32
    assert np.max(np.abs(np.asarray(erf, float) - exact_erf)) <= 4 * EPS32
    ok = (exact_erfc > 1e-30) & (np.abs(XS) <= 5)
    rel = np.abs(np.asarray(erfc, float) - exact_erfc)[ok] / exact_erfc[ok]
    assert np.max(rel) <= 16 * EPS32


def test_gelu_matches_jax_and_the_closed_form():
    x = jnp.asarray(XS[np.abs(XS) <= 12])
    got = special.gelu(x)
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in np.asarray(x)])
    scale = np.maximum(np.abs(exact), 1e-300)
    # relative condition of the tail: exp(−x²/2) with x²/2 up to 72
    assert np.max(np.abs(np.asarray(got) - exact) / scale) <= 300 * EPS64
    np.testing.assert_allclose(got, jax.nn.gelu(x, approximate=False), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("name", ["erf", "erfc", "gelu"])
def test_derivatives_are_the_closed_forms(name):
    x = jnp.linspace(-7.0, 7.0, 2_001)
    got = jax.vmap(jax.grad(getattr(special, name)))(x)
    bump = 2.0 / math.sqrt(math.pi) * jnp.exp(-x * x)
    expected = {
        "erf": bump,
        "erfc": -bump,
        # d/dx x Φ(x) = Φ(x) + x φ(x)
        "gelu": 0.5 * jax.scipy.special.erfc(-x / math.sqrt(2.0))
        + x * jnp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi),
    }[name]
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-300)


def test_special_values():
    x = jnp.array([jnp.nan, jnp.inf, -jnp.inf, 0.0, -0.0])
    np.testing.assert_array_equal(special.erf(x), [np.nan, 1.0, -1.0, 0.0, -0.0])
    np.testing.assert_array_equal(special.erfc(x), [np.nan, 0.0, 2.0, 1.0, 1.0])
    assert special.erf(1).dtype == jnp.result_type(float)  # integers are promoted
