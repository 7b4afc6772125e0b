"""erf, erfc and the exact GELU from exp, arithmetic and comparisons alone.

Pallas' Triton backend has no `erf`/`erfc` (jax 0.10 and 0.11: "Unimplemented primitive
in Pallas Triton lowering"), so a fused kernel with ρ = erf or gelu would not compile on
a GPU. These versions use only what every kernel compiler has, at the accuracy of
XLA's own `erf`/`erfc`:

* |x| ≤ 1: erf(x) = x · P(x²), P(t) = erf(√t)/√t;
* 1 < |x| ≤ 5: erfc(|x|) = exp(−x²) · R(|x|), R = erfcx, the scaled complementary
  error function;
* |x| > 5: erfc(|x|) = exp(−x²) · S(1/|x|) / |x|, S(t) = erfcx(1/t)/t (→ 1/√π);

P, R and S are smooth on their intervals. Each is replaced by its Chebyshev
interpolant, fitted on first use (about 0.3 s) from values computed in 60-digit
decimal arithmetic (erf by its Taylor series; erfcx by Laplace's continued fraction for
|x| > 5), and evaluated by Clenshaw's recurrence; terms below the working precision
are dropped for float32. Derivatives are the closed forms (`jax.custom_jvp`), not
derivatives of the interpolants. Tested against Python's `math.erf`/`math.erfc` and
`jax.nn.gelu` in float64 and float32.
"""

import functools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import jax
import jax.numpy as jnp

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_MID, _FAR = 5.0, 27.0  # R on [1, 5], S on 1/x ∈ [1/27, 1/5] (erfc(27) < 1e-318)
_DIGITS = 60  # working precision of the fitted values (decimal digits)


def _pi() -> Decimal:
    """π to the working precision (Machin: π = 16 atan(1/5) − 4 atan(1/239))."""

    def atan_inv(n: int) -> Decimal:
        x, total, k, power = Decimal(1) / n, Decimal(0), 0, Decimal(1) / n
        while power > Decimal(10) ** -(_DIGITS + 5):
            total += (-1) ** k * power / (2 * k + 1)
            k, power = k + 1, power * x * x
        return total

    return 16 * atan_inv(5) - 4 * atan_inv(239)


with localcontext() as _ctx:
    _ctx.prec = _DIGITS
    _SQRT_PI = _pi().sqrt()


def _erf_series(x: Decimal) -> Decimal:
    """(√π/2) erf(x) = Σ (−1)^n x^(2n+1) / (n! (2n+1)), to the working precision."""
    total, n, term = Decimal(0), 0, x
    while abs(term) > Decimal(10) ** -(_DIGITS + 20):
        total += term / (2 * n + 1)
        n += 1
        term = -term * x * x / n
    return total


def _P(t: Decimal) -> Decimal:
    """erf(√t)/√t."""
    s = t.sqrt()
    return 2 * _erf_series(s) / (s * _SQRT_PI)


def _R(x: Decimal) -> Decimal:
    """erfcx(x) = exp(x²) erfc(x) = exp(x²) (1 − erf(x))."""
    return (x * x).exp() * (1 - 2 * _erf_series(x) / _SQRT_PI)


def _S(t: Decimal) -> Decimal:
    """erfcx(1/t)/t, by Laplace's continued fraction
    erfcx(x) = 1 / (√π (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))))."""
    x = 1 / t
    f = x
    for k in range(2000, 0, -1):
        f = x + Decimal(k) / 2 / f
    return x / (_SQRT_PI * f)


def _cos(x: Decimal) -> Decimal:
    """cos(x) by its Taylor series (0 ≤ x < 2π here), to the working precision."""
    total, n, term = Decimal(0), 0, Decimal(1)
    while abs(term) > Decimal(10) ** -(_DIGITS + 5):
        total += term
        term = -term * x * x / ((2 * n + 1) * (2 * n + 2))
        n += 1
    return total


def _fit(f, a: float, b: float, degree: int) -> tuple[float, float, tuple[float, ...]]:
    """The Chebyshev interpolant of degree `degree` of `f` on [a, b] (first-kind
    points), computed in decimal arithmetic, its coefficients rounded to float64."""
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        n = degree + 1
        pi = _pi()

        def cos_pi(q: Fraction) -> Decimal:  # cos(π q), the argument reduced first
            q = q % 2
            return _cos(pi * Decimal(q.numerator) / Decimal(q.denominator))

        half, mid = (Decimal(b) - Decimal(a)) / 2, (Decimal(a) + Decimal(b)) / 2
        values = [f(half * cos_pi(Fraction(2 * j + 1, 2 * n)) + mid) for j in range(n)]
        coef = [
            (1 if k == 0 else 2)
            * sum(v * cos_pi(Fraction(k * (2 * j + 1), 2 * n)) for j, v in enumerate(values))
            / n
            for k in range(n)
        ]
    return a, b, tuple(float(c) for c in coef)


@functools.cache
def _table() -> tuple:
    """The three pieces (fitted on first use); degrees: where the coefficients fall
    below about 1e-17 of the largest."""
    return (
        _fit(_P, 0.0, 1.0, 12),
        _fit(_R, 1.0, _MID, 28),
        _fit(_S, 1.0 / _FAR, 1.0 / _MID, 16),
    )


def _clenshaw(piece, x):
    """The Chebyshev series of `piece` at x (inside its interval), in x's dtype."""
    a, b, coef = piece
    eps = float(jnp.finfo(x.dtype).eps)
    scale = max(abs(c) for c in coef)
    kept = len(coef)
    while kept > 1 and abs(coef[kept - 1]) < 0.1 * eps * scale:
        kept -= 1
    t = (2.0 * x - (a + b)) / (b - a)
    b1 = b2 = jnp.zeros_like(x)
    for c in coef[kept - 1 : 0 : -1]:
        b1, b2 = 2.0 * t * b1 - b2 + c, b1
    return t * b1 - b2 + coef[0]


def _pieces(x):
    """(|x| ≤ 1, erf on it, erfc(|x|) for |x| > 1) with every argument kept in range."""
    piece_p, piece_r, piece_s = _table()
    ax = jnp.abs(x)
    inner = ax <= 1.0
    small = x * _clenshaw(piece_p, jnp.minimum(x * x, 1.0))
    e = jnp.exp(-x * x)
    mid = e * _clenshaw(piece_r, jnp.clip(ax, 1.0, _MID))
    # beyond _FAR, exp(−x²) underflows (float64) and S is held at its last value
    far = e * _clenshaw(piece_s, 1.0 / jnp.clip(ax, _MID, _FAR)) / jnp.maximum(ax, _MID)
    return inner, small, jnp.where(ax <= _MID, mid, far)


def _as_float(x):
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(float)


@jax.custom_jvp
def erf(x):
    """erf(x), elementwise (see the module docstring)."""
    x = _as_float(x)
    inner, small, tail = _pieces(x)
    return jnp.where(inner, small, jnp.sign(x) * (1.0 - tail))


@jax.custom_jvp
def erfc(x):
    """erfc(x) = 1 − erf(x), accurate in relative terms for large x."""
    x = _as_float(x)
    inner, small, tail = _pieces(x)
    return jnp.where(inner, 1.0 - small, jnp.where(x > 0, tail, 2.0 - tail))


@erf.defjvp
def _erf_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return erf(x), _TWO_OVER_SQRT_PI * jnp.exp(-x * x) * dx


@erfc.defjvp
def _erfc_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return erfc(x), -_TWO_OVER_SQRT_PI * jnp.exp(-x * x) * dx


def gelu(x):
    """The exact GELU x · Φ(x) = x · erfc(−x/√2) / 2 (as `jax.nn.gelu(x, approximate=False)`)."""
    x = _as_float(x)
    return 0.5 * x * erfc(-x * (1.0 / math.sqrt(2.0)))
