"""The errors of a two-layer perceptron on an embedding against its limit, as the seed
measures them (`output_error`, `hidden_error`)."""

import jax.numpy as jnp

from ..models.embedding import norm_d


def output_error(f_hat, f):
    """The seed's `max_i |f̂(x_i) − f(x_i)|`, with the RMS over output coordinates for a
    vector output: arrays (..., n, d_out) -> (...)."""
    return jnp.max(jnp.sqrt(jnp.mean((f_hat - f) ** 2, axis=-1)), axis=-1)


def hidden_error(h_hat, h):
    """`max_i ‖ĥ(x_i) − h(x_i)‖_D`: arrays (..., n, D) -> (...)."""
    return jnp.max(norm_d(h_hat - h), axis=-1)
