"""Plain and residual networks ("why residual connections make depth trainable", after the
lecture "Universal approximation & going deep"):
gradients through depth at initialisation, their infinite-width predictions, and training.

**Architectures** (width N, depth L, weights `W_l` N×N, biases `b_l`, zero at initialisation):

* `plain`:           `h^l = σ(W_l h^{l-1} + b_l)`;
* `post-activation`: `h^l = σ(h^{l-1} + α (W_l h^{l-1} + b_l))` (the original ResNet block);
* `pre-activation`:  `h^l = h^{l-1} + α (W_l σ(h^{l-1}) + b_l)` (the library's
  `ResNet(DenseBlock(σ), ...)`, tested equal).

**Batch normalisation** (`norm="batch"`, the lecture's `Linear → BatchNorm → ReLU`): every
`W_l u` above becomes `γ_l ⊙ BN(W_l u)`, where BN centres and scales each unit by its
mean and (biased) variance over a batch of inputs (ε = 1e-5, PyTorch's default), `γ_l`
(ones at initialisation) is trained, and `b_l` plays BN's shift. Such a network maps a
batch, not one input (`LayeredNet.batch_layers`); a classifier evaluates test inputs with
the statistics of a reference batch (its training set: the values that BN's running
averages estimate, taken exactly at the final weights).

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

import math
from collections.abc import Callable
from typing import Protocol

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import jax.random as jr
import optax
from jaxtyping import Array, Float

from .._validation import check_choice, check_finite_arguments, check_positive_int
from ..blocks.activations import resolve_activation

ARCHITECTURES = ("plain", "post-activation", "pre-activation")
NORMS = ("batch",)
# BN's ε, added to each unit's variance (PyTorch's `BatchNorm1d` default)
BATCH_NORM_EPS = 1e-5


INITS = ("normal", "xavier", "he")


def weight_gain(init: str, N: int) -> float:
    """σ_w² of an initialisation for N×N weights (entries of variance σ_w²/N)."""
    check_choice(init, INITS, "init")
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


def batch_norm(u: Float[Array, "n N"], count: int) -> Float[Array, "n N"]:
    """Each column of `u` centred and scaled by the mean and (biased) variance of its first
    `count` rows (the reference batch), `BATCH_NORM_EPS` added to the variance."""
    ref = u[:count]
    mean, var = ref.mean(0, keepdims=True), ref.var(0, keepdims=True)
    return (u - mean) * lax.rsqrt(var + BATCH_NORM_EPS)


def _batch_layer(architecture, sigma, H, W, b, gamma, alpha, scale, count):
    """`_layer` for a batch `H` (n, N); with `gamma` (batch normalisation) each `W u` is
    `γ ⊙ BN(W u)` over the first `count` rows."""

    def branch(u):
        v = scale * (u @ W.T)
        return (v if gamma is None else gamma[None] * batch_norm(v, count)) + b[None]

    if architecture == "plain":
        a = branch(H)
        return sigma(a), a
    if architecture == "post-activation":
        a = H + alpha * branch(H)
        return sigma(a), a
    return H + alpha * branch(sigma(H)), H


class LayeredNet(eqx.Module):
    """A plain or residual network of `L` square layers (module docstring).

    `W` (L, N, N), `b` (L, N); `alpha` the residual scale (unused by `plain`); the
    layers use `scale · W` (default 1: one standard-normal draw of W then serves every
    initialisation without a scaled copy of the weights); `norm="batch"` with `gamma`
    (L, N): batch normalisation of every `W u` (module docstring), and only a batch is
    mapped (`batch_layers`). Concrete `W`, `b`, `alpha`, `scale`, `gamma` and inputs must
    be finite: a one-line error naming the first NaN or inf (traced ones, under `jit` or
    `vmap`, are not checked).
    """

    W: Float[Array, "L N N"]
    b: Float[Array, "L N"]
    alpha: float | Array
    architecture: str = eqx.field(static=True)
    activation: str | Callable = eqx.field(static=True)
    scale: float | Array = 1.0
    gamma: Float[Array, "L N"] | None = None
    norm: str | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        check_choice(self.architecture, ARCHITECTURES, "architecture")
        resolve_activation(self.activation)
        check_finite_arguments(W=self.W, b=self.b, alpha=self.alpha, scale=self.scale)
        if self.norm is not None:
            check_choice(self.norm, NORMS, "norm")
        if (self.norm is None) != (self.gamma is None):
            raise ValueError(
                f"gamma: given with norm={self.norm!r}; batch normalisation (norm='batch') "
                "takes gamma (L, N), no normalisation none"
            )
        if self.gamma is not None:
            check_finite_arguments(gamma=self.gamma)
            if jnp.shape(self.gamma) != jnp.shape(self.b):
                raise ValueError(
                    f"gamma: shape {jnp.shape(self.gamma)}, need the biases' {jnp.shape(self.b)}"
                )

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
        norm: str | None = None,
    ) -> "LayeredNet":
        """Weights drawn i.i.d. N(0, σ_w²/N) (`weight_gain`), biases zero; with
        `norm="batch"`, γ = 1."""
        check_positive_int(L, "L")
        gain = weight_gain(init, N)
        W = jr.normal(key, (L, N, N)) * math.sqrt(gain / N)
        b = jnp.zeros((L, N), W.dtype)
        gamma = None if norm is None else jnp.ones((L, N), W.dtype)
        return cls(W, b, alpha, architecture, activation, gamma=gamma, norm=norm)

    def batch_layers(
        self, xs: Float[Array, "n N"], count: int | None = None
    ) -> tuple[Array, Array]:
        """`(hs, pre)` for a batch: the states h^0..h^L (L+1, n, N) and each layer's
        argument of σ (L, n, N). With batch normalisation, its statistics are those of the
        first `count` rows (default: all), a reference batch that the other rows are
        mapped with; without, each row is mapped alone (`layers`)."""
        check_finite_arguments(xs=xs)
        n = xs.shape[0]
        count = n if count is None else count
        if not 0 < count <= n:
            raise ValueError(f"count={count}: need 1 <= count <= the batch's {n} rows")
        sigma = resolve_activation(self.activation)
        gammas = self.b if self.gamma is None else self.gamma  # scanned, unused without BN

        def step(H, wbg):
            W, b, g = wbg
            g = None if self.gamma is None else g
            H, a = _batch_layer(self.architecture, sigma, H, W, b, g, self.alpha, self.scale, count)
            return H, (H, a)

        _, (hs, pre) = lax.scan(step, xs, (self.W, self.b, gammas))
        return jnp.concatenate([xs[None], hs]), pre

    def _single(self) -> None:
        if self.norm is not None:
            raise ValueError(
                "norm='batch' normalises over a batch: map one with `batch_layers(xs)`"
            )

    def layers(self, x: Float[Array, " N"]) -> tuple[Array, Array]:
        """`(hs, pre)`: the states h^0..h^L (L+1, N) and each layer's argument of σ (L, N)."""
        self._single()
        check_finite_arguments(x=x)
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
        check_finite_arguments(readout=readout)
        hs, _ = self.layers(x)  # refuses a batch-normalised network
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


class Classifier(eqx.Module):
    """`logits = C h^L(A x)`: an embedding A (N×d_in), a `LayeredNet`, a readout C
    (classes×N); every part trained. With batch normalisation (`norm="batch"` to
    `sample`), a batch of inputs is normalised by its own statistics, or by those of a
    `reference` batch (the training set, to evaluate test inputs)."""

    A: Array
    net: LayeredNet
    C: Array

    def __check_init__(self):
        check_finite_arguments(A=self.A, C=self.C)  # the net checks its own

    @classmethod
    def sample(cls, key, *, d_in: int, classes: int, **net_kwargs) -> "Classifier":
        ka, kn, kc = jr.split(key, 3)
        net = LayeredNet.sample(kn, **net_kwargs)
        N = net.W.shape[-1]
        A = jr.normal(ka, (N, d_in)) / math.sqrt(d_in)
        C = jr.normal(kc, (classes, N)) / math.sqrt(N)
        return cls(A, net, C)

    def __call__(
        self, xs: Float[Array, "n d_in"], reference: Float[Array, "m d_in"] | None = None
    ) -> Float[Array, "n classes"]:
        check_finite_arguments(xs=xs)
        if self.net.norm is None:  # each input alone; `reference` changes nothing
            return jax.vmap(lambda x: self.C @ self.net(self.A @ x))(xs)
        if reference is None:
            hs, _ = self.net.batch_layers(xs @ self.A.T)
            return hs[-1] @ self.C.T
        check_finite_arguments(reference=reference)
        both = jnp.concatenate([reference, xs])
        hs, _ = self.net.batch_layers(both @ self.A.T, count=reference.shape[0])
        return hs[-1][reference.shape[0] :] @ self.C.T

    def mean_squares(self, xs: Float[Array, "n d_in"]) -> Float[Array, " L+1"]:
        """The mean square of h^0..h^L over the inputs `xs` (normalised by their own
        statistics) and the units."""
        hs, _ = self.net.batch_layers(xs @ self.A.T)
        return jnp.mean(hs**2, axis=(1, 2))


class Classifies(Protocol):
    """A classifier of this module's kind (`Classifier`, `staged.StagedClassifier`): the
    logits of a batch, normalised by a `reference` batch where it normalises."""

    def __call__(self, xs: Array, reference: Array | None = None) -> Array: ...


def cross_entropy(model: Classifies, xs, labels) -> Array:
    """The mean cross-entropy over the batch `xs` (normalised by its own statistics)."""
    logits = model(xs)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def accuracy(model: Classifies, xs, labels, reference=None) -> Array:
    """The fraction of `xs` classified as `labels`; with batch normalisation, by the
    statistics of `reference` (default: of `xs` itself)."""
    return jnp.mean(jnp.argmax(model(xs, reference), axis=-1) == labels)


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
