"""Networks whose width changes along depth, and the shortcut a residual network then needs
(after the lecture "Universal approximation & going deep": "projection shortcuts when
shapes change"; He et al. 2015, options A and B).

A `StagedClassifier` of depth L and width N has two stages of `meanfield.models.plain`
layers: the embedding maps the input to width `N1 = N // 2`, layers 1 .. t−1 keep width
N1, layer `t = L // 2 + 1` widens to N, layers t+1 .. L keep width N. The widening layer,
with `W_t` (N × N1, entries N(0, 2/N1): He), `b_t` (zero at initialisation):

* `shortcut="none"` (plain only): `h^t = σ(W_t h + b_t)`;
* `shortcut="zero-pad"` (He et al.'s option A, no parameter): the skip pads h with N − N1
  zeros, `h^t = σ(pad(h) + α (W_t h + b_t))` (post-activation);
* `shortcut="projection"` (option B): the skip is a trained linear map S (N × N1, entries
  N(0, 1/N1) at initialisation: it keeps the mean square), `h^t = σ(S h + α (W_t h + b_t))`.

A pre-activation network widens as `h^t = skip(h) + α (W_t σ(h) + b_t)`, with the same
skips. The other layers are those of `plain.LayeredNet` with the same architecture.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float

from .._validation import check_choice, check_finite_arguments, check_positive_int
from ..blocks.activations import resolve_activation
from .plain import LayeredNet, weight_gain

SHORTCUTS = ("none", "zero-pad", "projection")


def stage_depths(L: int) -> tuple[int, int]:
    """`(t − 1, L − t)`: the layers before and after the widening layer t = L // 2 + 1."""
    check_positive_int(L, "L")
    t = L // 2 + 1
    return t - 1, L - t


class StagedClassifier(eqx.Module):
    """`logits = C h^L(A x)` through a network that widens from N1 = N // 2 to N at layer
    L // 2 + 1 (module docstring). `first` and `second` are the stages (`LayeredNet`s of
    widths N1 and N, either possibly of no layer), `W`, `b` the widening layer, `S` the
    projection shortcut (None otherwise); every part is trained."""

    A: Array
    first: LayeredNet
    W: Float[Array, "N N1"]
    b: Float[Array, " N"]
    S: Float[Array, "N N1"] | None
    second: LayeredNet
    C: Array
    shortcut: str = eqx.field(static=True)

    def __check_init__(self):
        check_choice(self.shortcut, SHORTCUTS, "shortcut")
        if self.shortcut == "none" and self.first.architecture != "plain":
            raise ValueError(
                f"shortcut='none': a {self.first.architecture} network needs a shortcut "
                "where it widens (zero-pad or projection)"
            )
        if self.shortcut != "none" and self.first.architecture == "plain":
            raise ValueError(f"shortcut={self.shortcut!r}: a plain network has no shortcut")
        if (self.shortcut == "projection") != (self.S is not None):
            raise ValueError(
                "S: the projection's weights, given exactly with shortcut='projection'"
            )
        check_finite_arguments(A=self.A, W=self.W, b=self.b, C=self.C)
        if self.S is not None:
            check_finite_arguments(S=self.S)

    @classmethod
    def sample(
        cls,
        key,
        *,
        d_in: int,
        classes: int,
        L: int,
        N: int,
        architecture: str = "post-activation",
        shortcut: str = "projection",
        activation: str = "relu",
        init: str = "he",
        alpha: float = 1.0,
    ) -> "StagedClassifier":
        """Weights as `plain.Classifier.sample` (the stages' N(0, σ_w²/width)), the widening
        layer's N(0, σ_w²/N1), the projection's N(0, 1/N1), biases zero."""
        check_positive_int(N, "N")
        if N < 2:
            raise ValueError(f"N={N}: a network that widens from N // 2 needs N >= 2")
        before, after = stage_depths(L)
        N1 = N // 2
        ka, k1, kw, ks, k2, kc = jr.split(key, 6)
        kwargs = {"architecture": architecture, "activation": activation, "init": init,
                  "alpha": alpha}  # fmt: skip
        first = _stage(k1, before, N1, **kwargs)
        second = _stage(k2, after, N, **kwargs)
        W = jr.normal(kw, (N, N1)) * math.sqrt(weight_gain(init, N1) / N1)
        S = jr.normal(ks, (N, N1)) / math.sqrt(N1) if shortcut == "projection" else None
        A = jr.normal(ka, (N1, d_in)) / math.sqrt(d_in)
        C = jr.normal(kc, (classes, N)) / math.sqrt(N)
        return cls(A, first, W, jnp.zeros(N, W.dtype), S, second, C, shortcut)

    def _widen(self, h: Float[Array, " N1"]) -> Float[Array, " N"]:
        sigma, alpha = resolve_activation(self.first.activation), self.first.alpha
        if self.shortcut == "none":
            return sigma(self.W @ h + self.b)
        if self.S is not None:  # the projection
            skip = self.S @ h
        else:  # zero-padding
            skip = jnp.concatenate([h, jnp.zeros(self.W.shape[0] - h.shape[0], h.dtype)])
        if self.first.architecture == "pre-activation":
            return skip + alpha * (self.W @ sigma(h) + self.b)
        return sigma(skip + alpha * (self.W @ h + self.b))

    def states(self, x: Float[Array, " d_in"]) -> list[Array]:
        """`[h^0..h^{t−1} (t, N1), h^t..h^L (L − t + 1, N)]`: the states of one input, by
        stage."""
        check_finite_arguments(x=x)
        hs1, _ = self.first.layers(self.A @ x)
        hs2, _ = self.second.layers(self._widen(hs1[-1]))
        return [hs1, hs2]

    def mean_squares(self, xs: Float[Array, "n d_in"]) -> Float[Array, " L+1"]:
        """The mean square of h^0..h^L over the inputs `xs` and each layer's units."""
        hs1, hs2 = jax.vmap(self.states)(xs)
        return jnp.concatenate([jnp.mean(hs1**2, axis=(0, 2)), jnp.mean(hs2**2, axis=(0, 2))])

    def __call__(self, xs: Float[Array, "n d_in"], reference=None) -> Float[Array, "n classes"]:
        """The logits of each input (mapped alone: `reference` changes nothing)."""
        check_finite_arguments(xs=xs)
        return jax.vmap(lambda x: self.C @ self.states(x)[1][-1])(xs)


def _stage(key, depth: int, width: int, **kwargs) -> LayeredNet:
    """A stage of `depth` square layers (possibly none) of `width` units."""
    gain = weight_gain(kwargs["init"], width)
    W = jr.normal(key, (depth, width, width)) * math.sqrt(gain / width)
    b = jnp.zeros((depth, width), W.dtype)
    return LayeredNet(W, b, kwargs["alpha"], kwargs["architecture"], kwargs["activation"])
