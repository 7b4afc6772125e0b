"""The high-dimensional two-layer perceptron of Chaintron's "ResNets of all shapes and sizes"
and its two limits (docs: Mathematics §6).

The network (M units, embedding dimension D, frozen `W_in`, `W_out`):

    h^0(x) = W_in x,   P^j(x) = ⟨u^j, h^0(x)⟩_D,   h(x) = (1/M) Σ_j ρ(P^j(x)) v^j ∈ R^D,
    f(x) = W_outᵀ h(x) / D,     u^j, v^j ∈ R^D with entries N(0, s_u² D), N(0, s_v² D),

trained by GD on `𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` in the seed's convention
`u ← u − η_u·D·M·∇_u 𝓛`, `v ← v − η_v·D·M·∇_v 𝓛`.

**The reduction.** With `a^j = W_outᵀ v^j / D ∈ R^{d_out}` and `p^j = (P^j(x_i))_i ∈ R^n`,

    f(x_m) = (1/M) Σ_j ρ(p^j_m) a^j,      g_i = f(x_i) − y_i,
    Δa^j   = −η_v (1/n) Σ_i ρ(p^j_i) G_out g_i,
    Δp^j_m = −η_u (1/n) Σ_i ρ'(p^j_i) (a^j · g_i) G_in[i, m],

with `G_in = (⟨h^0(x_i), h^0(x_m)⟩_D)` and `G_out = W_outᵀ W_out / D`: the network *is* a
system of M particles `(p^j, a^j)` in `R^{n + d_out}`, drawn from
`N(0, s_u² G_in) ⊗ N(0, s_v² G_out)`, and the draw of `(W_in, W_out)` enters only through
the two Gram matrices (tested against the network in R^D, to rounding). Hence

* the **fixed-D mean-field limit** (M → ∞ at the same `W_in`, `W_out`, the seed's
  "neural-mean equation") is the same recursion with the mean over units replaced by the
  expectation over that Gaussian law: an `(n + d_out)`-dimensional Gaussian integral,
  computed here by tensor Gauss–Hermite quadrature (Monte Carlo beyond 4 dimensions), its
  error estimated by a second rule. Its hidden field is
  `h_k(x) = W_out (G_out⁻¹ E[ρ(p_k) a_0] + E[ρ(p_k) c_k])` where `v_k = v_0 + W_out c_k`
  (the part of `v_0` outside the span of `W_out` averages out: `E[v_0 | a_0] =
  W_out G_out⁻¹ a_0`, Stein's lemma / Gaussian conditioning);
* the **D → ∞ limit** (the seed's skeleton maps and cavity method) is the same recursion
  at the Grams' limits `G_in → σ_in² X Xᵀ`, `G_out → σ_out² I`: the coefficients
  `(F_k, G_k)` of the updates `ΔU_k = F_k · h^0`, `ΔV_k = G_k · W_out ∇𝓛` are the skeleton
  maps, `(p_0, a_0)` the Gaussian cavity fields `(Z^h, Z^b)`, and coordinate d of the
  hidden field tends to `H_k^d = W_out^d · c^∞_k`. The fixed-D limit differs from it
  through the Grams' fluctuations, O(D^{-1/2}).

The output error of a finite network against its fixed-D limit is therefore a
Monte-Carlo error over M particles in a D-independent dimension (~ 1/sqrt(M), the seed's
bound sqrt(D/M) is not attained by the outputs), while its hidden field carries the part
of each `v^j` outside the span of `W_out`, of RMS `s_v sqrt(D)`, whence
`‖ĥ − h‖_D ~ sqrt(D/M)`; `meanfield study two-layer` measures both.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from .._validation import check_finite_arguments
from ..blocks.activations import resolve_activation
from .embedding import Embedding, sample_units


def check_data(xs, ys) -> tuple[jax.Array, jax.Array]:
    """Inputs `xs` (n, d_in) and targets `ys` (n, d_out), finite; one-line errors otherwise."""
    xs, ys = jnp.asarray(xs), jnp.asarray(ys)
    if xs.ndim != 2:
        raise ValueError(f"xs: must have shape (n, d_in), got {xs.shape}")
    if ys.ndim != 2 or ys.shape[0] != xs.shape[0]:
        raise ValueError(f"ys: must have shape (n, d_out) with n = {xs.shape[0]}, got {ys.shape}")
    check_finite_arguments(colon=True, xs=xs, ys=ys)
    return xs, ys


class Perceptron(eqx.Module):
    """The two-layer perceptron of Chaintron's "ResNets of all shapes and sizes" on a frozen
    embedding (module docstring).

    `u`, `v`: arrays (M, D) (`u[j]` is unit j's input weights, `v[j]` its output ones).
    Concrete arrays (the embedding's too, and the inputs `xs` of every method) must be
    finite: a one-line error naming the first NaN or inf.
    """

    embedding: Embedding
    u: jax.Array
    v: jax.Array
    activation: Callable = eqx.field(static=True)

    def __check_init__(self):
        check_finite_arguments(colon=True, embedding=self.embedding, u=self.u, v=self.v)

    @classmethod
    def sample(cls, key, *, M: int, activation: str | Callable = "tanh", **kwargs) -> "Perceptron":
        """Draw the embedding and M units (entries N(0, s_u² D), N(0, s_v² D)).

        `**kwargs`: the keyword arguments `D`, `d_in`, `d_out` (required) and `s_u`, `s_v`,
        `sigma_in`, `sigma_out` (default 1.0 each) of `sample_units`."""
        emb, u, v = sample_units(key, {"M": M}, **kwargs)
        return cls(emb, u, v, resolve_activation(activation))

    @property
    def M(self) -> int:
        return self.u.shape[0]

    def preactivations(self, xs):
        """`P^j(x_i) = ⟨u^j, h^0(x_i)⟩_D`, shape (n, M): a matrix product."""
        check_finite_arguments(colon=True, xs=xs)
        return self.embedding.embed(xs) @ self.u.T / self.embedding.D

    def hidden(self, xs, width=None):
        """`h(x_i) = (1/M) Σ_j ρ(P^j(x_i)) v^j`, shape (n, D).

        `width` (a Python or traced integer): the arrays hold a network of that many units
        in their first rows, zero beyond (padded, so that one compiled program serves every
        smaller width); its scale is its own `1/width`, and the padded units are masked:
        they add nothing and receive no gradient, whatever ρ(0)."""
        a = self.activation(self.preactivations(xs))
        if width is None:
            return a @ self.v / self.M
        a = jnp.where(jnp.arange(self.M) < width, a, 0)
        return a @ self.v / width

    def __call__(self, xs, width=None):
        """`f(x_i)`, shape (n, d_out) (`width`: as in `hidden`)."""
        return self.embedding.readout(self.hidden(xs, width))


def loss(net: Perceptron, xs, ys, width=None):
    """`𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` (`width`: as in `Perceptron.hidden`)."""
    return 0.5 * jnp.mean(jnp.sum((net(xs, width) - ys) ** 2, axis=-1))


def reduce(net: Perceptron, xs):
    """The particles `(p^j, a^j)` of a network at inputs `xs`: arrays (M, n), (M, d_out)."""
    return net.preactivations(xs).T, net.embedding.readout(net.v)
