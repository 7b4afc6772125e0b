"""The embedding of Chaintron's "ResNets of all shapes and sizes" (docs: Mathematics §6):
inputs embedded in R^D, normalised products, readout.

    h^0 = W_in x,        W_in ∈ R^{D×d_in},  entries N(0, σ_in²)
    ⟨a, b⟩_D = (1/D) Σ_d a_d b_d,    ‖a‖_D = sqrt(⟨a, a⟩_D)
    f = W_outᵀ h / D,    W_out ∈ R^{D×d_out}, entries N(0, σ_out²)

Shared by the two-layer perceptron (`meanfield.models.perceptron`) and the deep networks of
the joint L, M, D limit. `W_in` and `W_out` are frozen (not trained) unless a model says otherwise.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr


def check_positive_int(name: str, value) -> None:
    """A one-line `ValueError` naming `name` unless `value` is a positive integer."""
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")


def inner_d(a, b):
    """`⟨a, b⟩_D = (1/D) Σ_d a_d b_d` over the last axis (broadcasting the others), as a
    contraction (`einsum`, a dot product), never a broadcast product then a mean: the
    gradient of that form is miscompiled by jaxlib 0.10.2 on CPU (`meanfield.canary`).
    For the products of many vectors with many, use a matrix product (`a @ b.T / D`)."""
    a, b = jnp.broadcast_arrays(a, b)
    return jnp.einsum("...d,...d->...", a, b) / a.shape[-1]


def norm_d(a, D=None):
    """`‖a‖_D = sqrt(⟨a, a⟩_D)`: the RMS of the coordinates, over the last axis. `D`
    (default: the last axis's length): the dimension of vectors padded with zeros beyond
    it, whose norm is then their own."""
    if D is None:
        return jnp.sqrt(inner_d(a, a))
    return jnp.sqrt(jnp.einsum("...d,...d->...", a, a) / D)


class Embedding(eqx.Module):
    """The frozen embedding `W_in` (D×d_in) and readout `W_out` (D×d_out)."""

    w_in: jax.Array
    w_out: jax.Array

    @classmethod
    def sample(
        cls, key, D: int, d_in: int, d_out: int, sigma_in: float = 1.0, sigma_out: float = 1.0
    ) -> "Embedding":
        """Draw `W_in`, `W_out` with i.i.d. N(0, σ_in²), N(0, σ_out²) entries."""
        for name, value in (("D", D), ("d_in", d_in), ("d_out", d_out)):
            check_positive_int(name, value)
        for name, value in (("sigma_in", sigma_in), ("sigma_out", sigma_out)):
            if not value > 0:
                raise ValueError(f"{name}: must be > 0, got {value!r}")
        k_in, k_out = jr.split(key)
        dtype = jnp.result_type(float)
        return cls(
            sigma_in * jr.normal(k_in, (D, d_in), dtype),
            sigma_out * jr.normal(k_out, (D, d_out), dtype),
        )

    @property
    def D(self) -> int:
        return self.w_in.shape[0]

    def embed(self, x):
        """`h^0 = W_in x` for inputs `x` of shape (..., d_in): shape (..., D)."""
        return x @ self.w_in.T

    def readout(self, h, D=None):
        """`f = W_outᵀ h / D` for states `h` of shape (..., D): shape (..., d_out). `D`
        (default: the rows of `W_out`): the network's own dimension where the embedding is
        padded with zero rows beyond it (`DeepEmbeddedResNet.hidden` with `size`)."""
        return h @ self.w_out / (self.D if D is None else D)

    def grams(self, xs):
        """The two Gram matrices the shallow dynamics see of the draw: `⟨h^0_i, h^0_m⟩_D`
        (n×n, for inputs `xs` of shape (n, d_in)) and `W_outᵀ W_out / D` (d_out×d_out).
        As D → ∞ they tend to `σ_in² X Xᵀ` and `σ_out² I`."""
        h0 = self.embed(xs)
        return h0 @ h0.T / self.D, self.w_out.T @ self.w_out / self.D


def sample_units(
    key,
    counts: dict[str, int],
    *,
    D: int,
    d_in: int,
    d_out: int,
    s_u: float = 1.0,
    s_v: float = 1.0,
    sigma_in: float = 1.0,
    sigma_out: float = 1.0,
) -> tuple[Embedding, jax.Array, jax.Array]:
    """The draw shared by Chaintron's models: an embedding, and units `u`, `v` of shape
    `(*counts.values(), D)` with entries N(0, s_u² D), N(0, s_v² D). `counts` names the
    unit axes (`{"M": M}`, `{"L": L, "M": M}`) for the one-line errors. The models'
    `sample` pass their keyword arguments `D`, `d_in`, `d_out`, `s_u`, `s_v`, `sigma_in`,
    `sigma_out` on to it (these defaults are theirs)."""
    for name, value in counts.items():
        check_positive_int(name, value)
    for name, value in (("s_u", s_u), ("s_v", s_v)):
        if not value > 0:
            raise ValueError(f"{name}: must be > 0, got {value!r}")
    k_e, k_u, k_v = jr.split(key, 3)
    emb = Embedding.sample(k_e, D, d_in, d_out, sigma_in, sigma_out)
    shape, dtype, scale = (*counts.values(), D), emb.w_in.dtype, D**0.5
    return (
        emb,
        s_u * scale * jr.normal(k_u, shape, dtype),
        s_v * scale * jr.normal(k_v, shape, dtype),
    )
