"""The errors `(E_f, E_h)` of a deep ResNet on an embedding against its joint limit solved on
its grid (Mathematics §6)."""

import jax.numpy as jnp
from jaxtyping import Array, Float

from ..limits.deep_embedded import LinearLimit
from ..models.embedding import Embedding, norm_d

# ---------------------------------------------------------------- the finite network


def errors(
    outputs: Float[Array, "K+1 n d_out"],
    hidden: Float[Array, "K+1 n L+1 D"],
    limit: LinearLimit,
    embedding: Embedding,
    dim=None,
) -> tuple[Float[Array, " K+1"], Float[Array, " K+1"]]:
    """`(E_f, E_h)` per step (Mathematics §6) of a finite network's `train` output against a limit
    solved on its grid (`ts = arange(L + 1) / L`) at the same embedding draw: `E_f` the RMS
    over output coordinates and inputs of `f̂_k − f_k`, `E_h = max_l` of the RMS over inputs
    of `‖ĥ_k^l − H_k(l/L)‖_D`. `dim`: the network's own D where `hidden` and `embedding` are
    padded with zero coordinates beyond it (a padded network, `DeepEmbeddedResNet.hidden`
    with `size`; its limit's grid padded too, by repeating the row at s = 1)."""
    if hidden.shape[-2] != limit.ts.shape[0]:
        raise ValueError(
            f"limit: solved on {limit.ts.shape[0]} depths, the network has {hidden.shape[-2]}"
        )
    if (
        hidden.shape[-3:] != limit.hidden_coef.shape[-3:-1] + (embedding.D,)
        or outputs.shape != limit.outputs.shape
    ):
        raise ValueError(
            f"outputs, hidden: shapes {outputs.shape}, {hidden.shape} do not match the limit's"
        )
    e_f = jnp.sqrt(jnp.mean((outputs - limit.outputs) ** 2, axis=(-2, -1)))
    e_h = jnp.sqrt(jnp.mean(norm_d(hidden - limit.hidden(embedding), dim) ** 2, axis=1))
    return e_f, jnp.max(e_h, axis=-1)
