"""The two residual branches of a pre-LN Transformer, as layer blocks (Mathematics §11).

The state is T tokens of width N flattened, `h ∈ R^{T·N}` (row-major: token t is
`h[t·N:(t+1)·N]`), as for `meanfield.blocks.attention.AttentionHead`. A layer's
parameters `theta` are a dict `{"weights": {...}, "biases": {...}, "norm": {"gain",
"shift"}}` (biases and norm optional), so that a parametrisation's groups
(`meanfield.parametrisation`) can be read from the keys:

- `CausalAttention`: `U = LN(H)`, `q, k, v = U W_q + b_q, ...` split into `heads`
  heads of width `d_h = N / heads`, `A = softmax(q kᵀ · d_h^{-p})` with the causal mask,
  `F(h, θ) = (A v) W_o + b_o`;
- `MLPBranch`: `F(h, θ) = gelu(LN(H) W_in + b_in) W_out + b_out`.

Either runs on the library's engine as a layer block (`ResNet` with α = L^{-α}); the
Transformer (`meanfield.models.transformer`) alternates them. Without the norm and the
biases, one head, they are the attention and two-layer-perceptron blocks of Chizat's
Transformer remark.

`branch(h, theta)` also returns the input of every matrix (`inputs[name] @ W[name]` is
that matrix's product), which the coordinate check uses to measure `ΔW · input`.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._validation import as_number, check_number, check_positive_int
from .base import AbstractLayerBlock

NORM_EPS = 1e-5  # LayerNorm's ε, as PyTorch's


def layer_norm(x: Array, gain: Array | None = None, shift: Array | None = None) -> Array:
    """LayerNorm over the last axis: `(x − mean) / sqrt(var + 1e-5) · gain + shift`."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    out = (x - mean) / jnp.sqrt(var + NORM_EPS)
    if gain is not None:
        out = out * _rows(gain, x)
    if shift is not None:
        out = out + _rows(shift, x)
    return out


def _rows(v: Array, like: Array) -> Array:
    """A vector over the last axis, shaped to broadcast against `like`."""
    return v.reshape((1,) * (like.ndim - 1) + v.shape)


def _normed(H: Array, theta: PyTree) -> Array:
    norm = theta.get("norm")
    if norm is None:
        return H
    return layer_norm(H, norm.get("gain"), norm.get("shift"))


def _linear(x: Array, theta: PyTree, name: str) -> Array:
    out = x @ theta["weights"][name]
    biases = theta.get("biases")
    if biases is not None and name in biases:
        out = out + _rows(biases[name], out)
    return out


class _TokenBlock(AbstractLayerBlock):
    tokens: int = eqx.field(static=True, converter=as_number)

    def __check_init__(self):
        check_positive_int(self.tokens, "tokens")

    def _tokens(self, h: Array) -> Array:
        if h.ndim != 1 or h.shape[0] % self.tokens:
            raise ValueError(
                f"h: a flat state of length a multiple of tokens = {self.tokens}, "
                f"got shape {h.shape}"
            )
        return h.reshape(self.tokens, -1)

    @abc.abstractmethod
    def branch(self, h, theta) -> tuple[Array, dict]:
        """The branch's output `F(h, θ)` and the input of each of its matrices."""

    def __call__(self, h: Float[Array, " TN"], theta: PyTree) -> Float[Array, " TN"]:
        return self.branch(h, theta)[0]


class CausalAttention(_TokenBlock):
    """Multi-head causal self-attention after a LayerNorm (module docstring).

    **Arguments:** `tokens` T; `heads` (dividing the width); `scale_power` p of the
    attention scale `d_h^{-p}` (½ standard, 1 under μP); `scale`: None, or the scale
    itself in place of `d_h^{-p}` (a number that may be traced: the Transformer passes its
    table's numbers as data this way).
    """

    heads: int = eqx.field(static=True, converter=as_number, default=1)
    scale_power: float = eqx.field(static=True, converter=as_number, default=0.5)
    scale: float | Array | None = None

    def __check_init__(self):
        check_positive_int(self.heads, "heads")
        check_number(self.scale_power, "scale_power")

    def branch(self, h, theta):
        H = self._tokens(h)
        T, N = H.shape
        if N % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide the width {N}")
        dh = N // self.heads
        U = _normed(H, theta)
        q, k, v = (_linear(U, theta, n).reshape(T, self.heads, dh) for n in ("q", "k", "v"))
        scale = float(dh) ** (-self.scale_power) if self.scale is None else self.scale
        scores = jnp.einsum("thd,shd->hts", q, k) * scale
        causal = jnp.tril(jnp.ones((T, T), dtype=bool))
        scores = jnp.where(causal[None], scores, -jnp.inf)
        y = jnp.einsum("hts,shd->thd", jax.nn.softmax(scores, axis=-1), v).reshape(T, N)
        out = _linear(y, theta, "o")
        return out.reshape(-1), {"q": U, "k": U, "v": U, "o": y}


class MLPBranch(_TokenBlock):
    """`gelu(LN(H) W_in + b_in) W_out + b_out`, token by token (module docstring)."""

    def branch(self, h, theta):
        H = self._tokens(h)
        U = _normed(H, theta)
        a = jax.nn.gelu(_linear(U, theta, "in"), approximate=False)
        out = _linear(a, theta, "out")
        return out.reshape(-1), {"in": U, "out": a}
