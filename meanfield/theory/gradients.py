"""Gradients through depth at initialisation, at infinite width and at finite width N, for
the plain and residual networks of `meanfield.models.plain` (the mathematics is in that
module's docstring): `predicted_log_ratio`, `finite_width_log_ratios`, `gaussian_moments`,
`population`."""

import functools
import math
from collections.abc import Callable

import jax
import jax.lax as lax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array

from .._validation import check_choice, check_finite_arguments, check_positive_int
from ..blocks.activations import resolve_activation
from ..models.plain import ARCHITECTURES, weight_gain

GRID = 20001  # points of the quadrature grid of `gaussian_moments`


GRID_HALF_WIDTH = 12.0  # the grid spans ±12 standard deviations


def gaussian_moments(activation: str | Callable, q) -> tuple[Array, Array]:
    """`(E[σ(z)²], E[σ'(z)²])` for `z ~ N(0, q)`: closed forms for relu and leaky_relu,
    otherwise the trapezoid rule on a uniform grid of ±12 standard deviations (20001
    points: resolves σ'² even where q is 10⁴ times its width, as under `normal` init)."""
    check_finite_arguments(q=q)
    from ..blocks.activations import LEAKY_SLOPE

    if activation in ("relu", "leaky_relu"):
        slope = 0.0 if activation == "relu" else LEAKY_SLOPE
        c = (1 + slope**2) / 2
        return c * q, c * jnp.ones_like(q)
    sigma = resolve_activation(activation)
    t = jnp.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, GRID)
    w = jnp.exp(-0.5 * t**2)
    w = w.at[jnp.array([0, -1])].multiply(0.5)
    w = w / jnp.sum(w)
    z = jnp.sqrt(q) * t
    d = jax.vmap(jax.grad(sigma))(z)
    return jnp.sum(w * sigma(z) ** 2), jnp.sum(w * d**2)


def _log_chis_gaussian(architecture, activation, gain, alpha, L, q0):
    """log χ_l, l = 1..L, of `plain` and `pre-activation` (Gaussian states)."""

    def step(m, _):
        if architecture == "plain":  # m = E[h²] of the previous state
            e_s2, e_d2 = gaussian_moments(activation, gain * m)
            return e_s2, jnp.log(gain * e_d2)
        e_s2, e_d2 = gaussian_moments(activation, m)  # m = q, the state's variance
        return m + alpha**2 * gain * e_s2, jnp.log1p(alpha**2 * gain * e_d2)

    _, logs = lax.scan(step, jnp.asarray(q0, float), None, length=L)
    return logs


# the Laplace variable t = e^u of `_expected_log` on a uniform grid in u
LAPLACE_U = (-25.0, 12.0, 160)  # from, to (beyond log N), points


def _expected_log(log_laplace, N):
    """`E[log f]` of a positive random variable from `log E[e^{-t f}]` (a function of t, on
    arrays): `log f = ∫_0^∞ (e^{-t} − e^{-tf}) dt / t` (Frullani), here in u = log t by the
    trapezoid rule from e^-25 to e^12·N (the integrand decays like t·E[f] below and like
    e^{-t·f_min} above)."""
    u = jnp.linspace(LAPLACE_U[0], LAPLACE_U[1] + math.log(N), LAPLACE_U[2])
    t = jnp.exp(u)
    integrand = jnp.exp(-t) - jnp.exp(log_laplace(t))
    return jnp.sum((integrand[1:] + integrand[:-1]) / 2 * jnp.diff(u))


STATE_GRID = 2001  # points of each of the two grids of `_state_grid`


STATE_ABS = 30.0  # the second grid spans |z| <= 30 (where a saturating σ' is non-zero)


def _state_grid(q):
    """Nodes and weights for z ~ N(0, q) (traced q): the union of 2001 points over ±12
    standard deviations and 2001 points over |z| ≤ 30 (clipped to the first range), sorted,
    with trapezoid weights for the non-uniform spacing, normalised. The second grid keeps
    σ'(z), which a saturating σ confines to |z| ≲ 20, resolved when sqrt(q) is 10⁴ times
    its width (tanh under N(0, 1) weights), at a fifth of `gaussian_moments`' points."""
    sd = jnp.sqrt(q)
    wide = GRID_HALF_WIDTH * sd
    z = jnp.sort(
        jnp.concatenate([
            jnp.linspace(-wide, wide, STATE_GRID),
            jnp.clip(jnp.linspace(-STATE_ABS, STATE_ABS, STATE_GRID), -wide, wide),
        ])
    )  # fmt: skip
    widths = jnp.concatenate([z[1:2] - z[:1], z[2:] - z[:-2], z[-1:] - z[-2:-1]]) / 2
    w = widths * jnp.exp(-0.5 * (z / sd) ** 2)
    return z, w / jnp.sum(w)


def _finite_width_log_chis(architecture, activation, gain, alphas, L, q0, N):
    """`E[log χ_l]`, l = 1..L, at width N (`predicted_log_ratio(..., finite_width=True)`),
    for each residual scale in `alphas` (shape (A,) -> (A, L)).

    The same independence model as the infinite-width recursion (the weights of the
    backward pass independent of the forward pass, states i.i.d. N(0, q) per coordinate),
    without the law of large numbers inside a layer. The layer's factor
    `f = ‖p_{l-1}‖²/‖p_l‖²` is

    * plain: `p_{l-1} = W_lᵀ(σ'(z) ⊙ p_l)` with `p_l` itself such an image, so its
      direction is uniform: `p̂ = g/‖g‖`, g ~ N(0, I), and `f = (σ_w²/N) χ²_N
      Σ_i σ'(z_i)² g_i² / ‖g‖²`; the χ²_N and ‖g‖² cancel in the mean of the logarithm:
      `E log f = log(σ_w²/N) + E log T`, `E[e^{-tT}] = E_z[(1 + 2tσ'(z)²)^{-1/2}]^N`;
    * pre-activation: `f = Σ_i (p̂_i + a_i w_i)²`, `a_i² = α²σ_w² σ'(h_i)²/N`, w_i ~ N(0, 1),
      p̂ delocalised (p̂_i² = 1/N: it enters only through the small cross term):
      `E[e^{-tf}] = E_h[(1 + 2ta²)^{-1/2} exp(−t/(N(1 + 2ta²)))]^N` (the Laplace transform
      of a non-central χ², coordinate by coordinate),

    and `E log f` follows by `_expected_log`. Where few coordinates carry the gradient
    (tanh under N(0, 1) weights: σ'(h) ≠ 0 on about sqrt(N/l) of them), `E log f` sits
    well below `log E f = log χ_l`, by about Var f/(2χ²) = O(sqrt(l/N)); with O(N)
    coordinates the gap is O(1/N)."""
    sigma = resolve_activation(activation)
    from ..blocks.activations import LEAKY_SLOPE

    dsigma = jax.vmap(jax.grad(sigma))

    def layer(q, alpha):
        if activation in ("relu", "leaky_relu"):  # σ'² is 1 or slope², each with prob. 1/2
            e_s2, _ = gaussian_moments(activation, q)
            slope = 0.0 if activation == "relu" else LEAKY_SLOPE
            d2, w = jnp.array([slope**2, 1.0]), jnp.array([0.5, 0.5])
        else:
            z, w = _state_grid(q)
            d2 = dsigma(z) ** 2
            e_s2 = jnp.sum(w * sigma(z) ** 2)
        if architecture == "plain":

            def log_laplace(t):
                r = 1 + 2 * t[:, None] * d2[None]
                return N * jnp.log(jnp.sum(w[None] / jnp.sqrt(r), axis=1))

            return e_s2, jnp.log(gain / N) + _expected_log(log_laplace, N)

        a2 = alpha**2 * gain * d2 / N

        def log_laplace(t):
            r = 1 + 2 * t[:, None] * a2[None]
            terms = w[None] * jnp.exp(-t[:, None] / (N * r)) / jnp.sqrt(r)
            return N * jnp.log(jnp.sum(terms, axis=1))

        return q + alpha**2 * gain * e_s2, _expected_log(log_laplace, N)

    def one(alpha):
        def step(m, _):
            q = gain * m if architecture == "plain" else m
            m_next, elog = layer(q, alpha)
            return m_next, elog

        _, logs = lax.scan(step, jnp.asarray(q0, float), None, length=L)
        return logs

    return lax.map(one, jnp.asarray(alphas, float))


@functools.partial(jax.jit, static_argnames=("architecture", "activation", "L", "N"))
def _finite_width_logs(gain, alphas, q0, *, architecture, activation, L, N):
    return _finite_width_log_chis(architecture, activation, gain, alphas, L, q0, N)


def finite_width_log_ratios(
    architecture: str,
    activation: str,
    init: str,
    *,
    N: int,
    Ls: "list[int]",
    alphas: "list[float]",
    q0: float = 1.0,
) -> list[float]:
    """The prediction of `E[log ‖p_0‖² − log ‖p_L‖²]` at width N (`_finite_width_log_chis`)
    for each depth `Ls[i]` at residual scale `alphas[i]`: Σ_{l ≤ L_i} E[log χ_l]. One
    program per (architecture, activation, max depth, N); for `plain` and
    `pre-activation` only (their states are Gaussian)."""
    check_choice(architecture, ("plain", "pre-activation"), "architecture")
    if len(Ls) != len(alphas) or not Ls:
        raise ValueError(f"Ls, alphas: need equal non-empty lengths, got {len(Ls)}, {len(alphas)}")
    check_finite_arguments(alphas=list(alphas), q0=q0)
    for L in Ls:
        check_positive_int(L, "L")
    gain = weight_gain(init, N)
    unique = sorted(set(float(a) for a in alphas))
    logs = _finite_width_logs(
        gain, jnp.asarray(unique), q0, architecture=architecture, activation=activation,
        L=max(Ls), N=N,
    )  # fmt: skip
    sums = np.cumsum(np.asarray(logs), axis=1)  # (A, L_max)
    return [float(sums[unique.index(float(a)), L - 1]) for L, a in zip(Ls, alphas, strict=True)]


def population(activation, gain, alpha, L, q0, *, key, size: int = 2**16):
    """log χ_l, l = 1..L, of `post-activation`, from a population of `size` coordinates,
    each carried through the layers with its own noise (the skip keeps a coordinate's
    forward and backward values together, so the moments do not factorise as they do
    for the other architectures): forward `z_l = h + α sqrt(σ_w² E[h²]) g_l`,
    `h ← σ(z_l)` from `h = x ~ N(0, q0)`; backward from `p_L ~ N(0, 1)`,
    `p_{l-1} = σ'(z_l) p_l + α sqrt(σ_w² E[σ'(z_l)² p_l²]) ξ_l` (the coordinate of
    `W_lᵀ (σ'(z_l) ⊙ p_l)`, a fresh Gaussian); `χ_l = E[p_{l-1}²] / E[p_l²]`."""
    sigma = resolve_activation(activation)
    dsigma = jax.vmap(jax.grad(sigma))
    k0, kf, kb, kp = jr.split(key, 4)
    h0 = jnp.sqrt(q0) * jr.normal(k0, (size,))

    homogeneous = activation in ("relu", "leaky_relu", "identity")

    def forward(h, k):
        z = h + alpha * jnp.sqrt(gain * jnp.mean(h**2)) * jr.normal(k, h.shape)
        if homogeneous:  # σ(cz) = cσ(z), σ'(cz) = σ'(z): rescaled so that it cannot overflow
            z = z / jnp.sqrt(jnp.mean(z**2))
        return sigma(z), dsigma(z)

    _, slopes = lax.scan(forward, h0, jr.split(kf, L))  # σ'(z_l), (L, size)

    def backward(p, inputs):
        d, k = inputs
        g = d * p
        p_prev = g + alpha * jnp.sqrt(gain * jnp.mean(g**2)) * jr.normal(k, p.shape)
        m2 = jnp.mean(p_prev**2)  # p is kept at E[p²] = 1 (the recursion is linear in p)
        return p_prev / jnp.sqrt(m2), jnp.log(m2)

    p0 = jr.normal(kp, (size,))
    p0 = p0 / jnp.sqrt(jnp.mean(p0**2))
    _, logs = lax.scan(backward, p0, (slopes, jr.split(kb, L)), reverse=True)
    return logs


POPULATIONS = 8  # independent populations of `predicted_log_ratio` (error estimate)


def predicted_log_ratio(
    architecture: str,
    activation: str,
    init: str,
    *,
    N: int,
    L: int,
    alpha: float = 1.0,
    q0: float = 1.0,
    key=None,
    size: int = 2**16,
) -> tuple[float, float]:
    """The infinite-width prediction of `log ‖p_0‖² − log ‖p_L‖²` (module docstring):
    `(value, error)`. `error` is 0 for the Gaussian architectures (quadrature, error
    below 1e-8) and the standard error over `POPULATIONS` independent populations of
    `size` samples for `post-activation` (whose value is their mean). `q0 = ‖x‖²/N`."""
    check_choice(architecture, ARCHITECTURES, "architecture")
    check_positive_int(L, "L")
    check_finite_arguments(alpha=alpha, q0=q0)
    gain = weight_gain(init, N)
    if architecture != "post-activation":
        total = _gaussian_sum(
            gain, alpha, q0, architecture=architecture, activation=activation, L=L
        )
        return float(total), 0.0
    keys = jr.split(jr.key(0) if key is None else key, POPULATIONS)
    sums = _population_sums(keys, gain, alpha, q0, activation=activation, L=L, size=size)
    return float(jnp.mean(sums)), float(jnp.std(sums, ddof=1) / math.sqrt(POPULATIONS))


# one compilation per (architecture, activation, L): the scales enter as data
@functools.partial(jax.jit, static_argnames=("architecture", "activation", "L"))
def _gaussian_sum(gain, alpha, q0, *, architecture, activation, L):
    return jnp.sum(_log_chis_gaussian(architecture, activation, gain, alpha, L, q0))


@functools.partial(jax.jit, static_argnames=("activation", "L", "size"))
def _population_sums(keys, gain, alpha, q0, *, activation, L, size):
    def one(k):
        return jnp.sum(population(activation, gain, alpha, L, q0, key=k, size=size))

    return lax.map(one, keys)
