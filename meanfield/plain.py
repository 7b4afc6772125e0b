"""Plain and residual networks ("why residual connections make depth trainable", after the
lecture "Universal approximation & going deep"):
gradients through depth at initialisation, their infinite-width predictions, and training.

**Architectures** (width N, depth L, weights `W_l` N×N, biases `b_l`, zero at initialisation):

* `plain`:           `h^l = σ(W_l h^{l-1} + b_l)`;
* `post-activation`: `h^l = σ(h^{l-1} + α (W_l h^{l-1} + b_l))` (the original ResNet block);
* `pre-activation`:  `h^l = h^{l-1} + α (W_l σ(h^{l-1}) + b_l)` (the library's
  `ResNet(DenseBlock(σ), ...)`, tested equal).

**Initialisations**: entries of `W_l` i.i.d. `N(0, σ_w²/N)` with

* `normal`: N(0, 1), σ_w² = N (the lecture's worked example of explosion);
* `xavier`: variance 2/(fan_in + fan_out) = 1/N, σ_w² = 1;
* `he`: variance 2/fan_in = 2/N, σ_w² = 2.

**Gradients at initialisation.** With the loss `𝓛 = ⟨B, h^L⟩` (B a fixed unit vector, so
`p_L = ∂𝓛/∂h^L = B`), `p_{l-1} = J_lᵀ p_l`. As N → ∞, with the weights of the backward pass
treated as independent of the forward pass (exact in that limit for Gaussian weights),
`E‖p_{l-1}‖² = χ_l E‖p_l‖²` with

* plain: `χ_l = σ_w² E[σ'(z)²]`, `z ~ N(0, q_l)`, `q_l = σ_w² m_{l-1}`, `m_l = E[σ(z_l)²]`,
  `m_0 = ‖x‖²/N`;
* pre-activation: `χ_l = 1 + α² σ_w² E[σ'(h)²]`, `h ~ N(0, q_{l-1})`, `q_l = q_{l-1} +
  α² σ_w² E[σ(h)²]`, `q_0 = ‖x‖²/N` (the input's coordinates Gaussian, so that every
  state's are: each layer adds an independent Gaussian increment);
* post-activation: `z_l = h + α g` with `h = σ(z_{l-1})` (`h = x` at l = 1) and
  `g ~ N(0, σ_w² E[h²])` independent of h, and per coordinate `p_{l-1} = σ'(z_l) p_l + α ξ`
  with ξ a fresh Gaussian of variance `σ_w² E[σ'(z_l)² p_l²]`: the skip carries each
  coordinate's σ'(z) and p along depth together, so `E[σ'(z_l)² p_l²] ≠ E[σ'²] E[p²]`
  (the "naive" `χ_l = (1 + α²σ_w²) E[σ'(z_l)²]` misses this; for tanh with Xavier at
  α = 1/8, L = 64 it predicts −7.0 where N = 256 networks measure −2.7), and the law of
  (z, p) is carried as a population of coordinate paths (`population`),
  `χ_l = E[p_{l-1}²]/E[p_l²]`.

So `log ‖p_0‖² − log ‖p_L‖² → Σ_{l ≤ L} log χ_l` (`predicted_log_ratio`). ReLU, plain:
`χ = σ_w²/2`, so Xavier halves the squared norm per layer, He keeps it and N(0, 1)
multiplies it by N/2; sigmoid: `σ' ≤ 1/4`, so `χ ≤ σ_w²/16`; pre-activation with
`α = 1/sqrt(L)`: `Σ log χ_l = O(1)`, the gradient stays bounded in depth. At finite N
the mean of the logarithm sits below the logarithm of the mean by O(L/N) (each layer's
factor fluctuates by O(1/sqrt(N))).
"""

import functools
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
from jaxtyping import Array, Float

from ._validation import check_finite_array, check_positive_int
from .activations import resolve_activation
from .training import gd_loop

ARCHITECTURES = ("plain", "post-activation", "pre-activation")
INITS = ("normal", "xavier", "he")


def _check_choice(value, choices, name):
    if value not in choices:
        raise ValueError(f"{name}={value!r}: use one of {', '.join(choices)}")


def _check_finite(**arrays) -> None:
    """`name must be finite: ...` for the first concrete argument holding NaN or inf
    (traced ones, under `jit`, `vmap`, `grad`, pass: no host round trip there)."""
    for name, value in arrays.items():
        check_finite_array(value, name)


def weight_gain(init: str, N: int) -> float:
    """σ_w² of an initialisation for N×N weights (entries of variance σ_w²/N)."""
    _check_choice(init, INITS, "init")
    check_positive_int(N, "N")
    return {"normal": float(N), "xavier": 2.0 * N / (N + N), "he": 2.0}[init]


def _layer(architecture: str, sigma: Callable, h, W, b, alpha, scale: "float | Array" = 1.0):
    """One layer: `(h^l, a)` with `a` the argument of σ in the layer (its pre-activation)."""
    if architecture == "plain":
        a = scale * (W @ h) + b
        return sigma(a), a
    if architecture == "post-activation":
        a = h + alpha * (scale * (W @ h) + b)
        return sigma(a), a
    return h + alpha * (scale * (W @ sigma(h)) + b), h


class LayeredNet(eqx.Module):
    """A plain or residual network of `L` square layers (module docstring).

    `W` (L, N, N), `b` (L, N); `alpha` the residual scale (unused by `plain`); the
    layers use `scale · W` (default 1: one standard-normal draw of W then serves every
    initialisation without a scaled copy of the weights). Concrete `W`, `b`, `alpha`,
    `scale` and inputs must be finite: a one-line error naming the first NaN or inf
    (traced ones, under `jit` or `vmap`, are not checked).
    """

    W: Float[Array, "L N N"]
    b: Float[Array, "L N"]
    alpha: float | Array
    architecture: str = eqx.field(static=True)
    activation: str | Callable = eqx.field(static=True)
    scale: float | Array = 1.0

    def __check_init__(self):
        _check_choice(self.architecture, ARCHITECTURES, "architecture")
        resolve_activation(self.activation)
        _check_finite(W=self.W, b=self.b, alpha=self.alpha, scale=self.scale)

    @classmethod
    def sample(
        cls,
        key,
        *,
        L: int,
        N: int,
        architecture: str = "plain",
        activation: str | Callable = "relu",
        init: str = "he",
        alpha: float = 1.0,
    ) -> "LayeredNet":
        """Weights drawn i.i.d. N(0, σ_w²/N) (`weight_gain`), biases zero."""
        check_positive_int(L, "L")
        gain = weight_gain(init, N)
        W = jr.normal(key, (L, N, N)) * math.sqrt(gain / N)
        return cls(W, jnp.zeros((L, N), W.dtype), alpha, architecture, activation)

    def layers(self, x: Float[Array, " N"]) -> tuple[Array, Array]:
        """`(hs, pre)`: the states h^0..h^L (L+1, N) and each layer's argument of σ (L, N)."""
        _check_finite(x=x)
        sigma = resolve_activation(self.activation)

        def step(h, wb):
            h, a = _layer(self.architecture, sigma, h, wb[0], wb[1], self.alpha, self.scale)
            return h, (h, a)

        _, (hs, pre) = lax.scan(step, x, (self.W, self.b))
        return jnp.concatenate([x[None], hs]), pre

    def __call__(self, x: Float[Array, " N"]) -> Float[Array, " N"]:
        return self.layers(x)[0][-1]

    def gradient_log_norms(self, x: Float[Array, " N"], readout: Float[Array, " N"]) -> Array:
        """`log ‖∂𝓛/∂h^l‖`, l = 0..L, for `𝓛 = ⟨readout, h^L⟩`, by the backward recursion
        `p_{l-1} = J_lᵀ p_l` (vector-Jacobian products of each layer) renormalised at every
        layer, so that neither a vanishing nor an exploding gradient under- or overflows."""
        _check_finite(readout=readout)
        hs, _ = self.layers(x)
        sigma = resolve_activation(self.activation)

        def step(carry, inputs):
            p, log_norm = carry
            h, W, b = inputs
            _, vjp = jax.vjp(
                lambda h_: _layer(self.architecture, sigma, h_, W, b, self.alpha, self.scale)[0], h
            )
            (g,) = vjp(p)
            n = jnp.linalg.norm(g)
            log_norm = log_norm + jnp.log(n)
            return (g / n, log_norm), log_norm

        n0 = jnp.linalg.norm(readout)
        _, logs = lax.scan(
            step, (readout / n0, jnp.log(n0)), (hs[:-1], self.W, self.b), reverse=True
        )
        return jnp.concatenate([logs, jnp.log(n0)[None]])


# ------------------------------------------------------------ infinite-width predictions

GRID = 20001  # points of the quadrature grid of `gaussian_moments`
GRID_HALF_WIDTH = 12.0  # the grid spans ±12 standard deviations


def gaussian_moments(activation: str | Callable, q) -> tuple[Array, Array]:
    """`(E[σ(z)²], E[σ'(z)²])` for `z ~ N(0, q)`: closed forms for relu and leaky_relu,
    otherwise the trapezoid rule on a uniform grid of ±12 standard deviations (20001
    points: resolves σ'² even where q is 10⁴ times its width, as under `normal` init)."""
    _check_finite(q=q)
    from .activations import LEAKY_SLOPE

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
    from .activations import LEAKY_SLOPE

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
    _check_choice(architecture, ("plain", "pre-activation"), "architecture")
    if len(Ls) != len(alphas) or not Ls:
        raise ValueError(f"Ls, alphas: need equal non-empty lengths, got {len(Ls)}, {len(alphas)}")
    _check_finite(alphas=list(alphas), q0=q0)
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
    _check_choice(architecture, ARCHITECTURES, "architecture")
    check_positive_int(L, "L")
    _check_finite(alpha=alpha, q0=q0)
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


# --------------------------------------------------------------------------- training


class Classifier(eqx.Module):
    """`logits = C h^L(A x)`: an embedding A (N×d_in), a `LayeredNet`, a readout C
    (classes×N); every part trained."""

    A: Array
    net: LayeredNet
    C: Array

    def __check_init__(self):
        _check_finite(A=self.A, C=self.C)  # the net checks its own

    @classmethod
    def sample(cls, key, *, d_in: int, classes: int, **net_kwargs) -> "Classifier":
        ka, kn, kc = jr.split(key, 3)
        net = LayeredNet.sample(kn, **net_kwargs)
        N = net.W.shape[-1]
        A = jr.normal(ka, (N, d_in)) / math.sqrt(d_in)
        C = jr.normal(kc, (classes, N)) / math.sqrt(N)
        return cls(A, net, C)

    def __call__(self, xs: Float[Array, "n d_in"]) -> Float[Array, "n classes"]:
        _check_finite(xs=xs)
        return jax.vmap(lambda x: self.C @ self.net(self.A @ x))(xs)


def cross_entropy(model: Classifier, xs, labels) -> Array:
    logits = model(xs)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def accuracy(model: Classifier, xs, labels) -> Array:
    return jnp.mean(jnp.argmax(model(xs), axis=-1) == labels)


def train_classifier(model: Classifier, data, *, steps: int, lr: float):
    """`steps` full-batch Adam steps (learning rate `lr`) on the cross-entropy of
    `data = (x_train, y_train, x_test, y_test)` (labels integers), through `meanfield.gd_loop`;
    the weights A, W, b, C are trained, the residual scale α is not.

    **Returns:** `(model, losses, test_accuracy)`: the trained model, the training loss
    before each step (steps,), and the final test accuracy. Jittable and vmappable."""
    x, y, x_test, y_test = data
    _check_finite(x_train=x, y_train=y, x_test=x_test, y_test=y_test, lr=lr)
    # the weights A, W, b, C are trained; the residual scale α and the weights' scale are
    # not, whether Python floats or (under jit, vmap) arrays: partitioning by "is an
    # inexact array" trained α in a compiled call and not in an eager one
    spec = jax.tree.map(lambda _: False, model)
    spec = eqx.tree_at(lambda m: (m.A, m.net.W, m.net.b, m.C), spec, replace=(True,) * 4)
    params, static = eqx.partition(model, spec)

    def grad_fn(p, _):
        loss, g = jax.value_and_grad(lambda p_: cross_entropy(eqx.combine(p_, static), x, y))(p)
        return g, loss

    final, losses = gd_loop(grad_fn, params, optax.adam(lr), steps, history=False)
    model = eqx.combine(final, static)
    return model, losses, accuracy(model, x_test, y_test)


def teacher_task(
    key,
    *,
    d_in: int = 16,
    classes: int = 4,
    n_train: int = 512,
    n_test: int = 2048,
    width: int = 64,
):
    """A classification task: Gaussian inputs in R^d_in labelled by the argmax of a random
    two-layer tanh teacher (width `width`, `classes` outputs). Returns `(x, y, x_test, y_test)`."""
    k1, k2, kx, kt = jr.split(key, 4)
    U = jr.normal(k1, (width, d_in)) / math.sqrt(d_in)
    V = jr.normal(k2, (classes, width))
    xs = jr.normal(kx, (n_train + n_test, d_in))
    ys = jnp.argmax(jnp.tanh(2 * xs @ U.T) @ V.T, axis=-1)
    return xs[:n_train], ys[:n_train], xs[n_train:], ys[n_train:]
