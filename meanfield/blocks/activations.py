"""Scalar activations ρ by name, or any callable."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp


def _identity(x):
    return x


def _gelu(x):
    return jax.nn.gelu(x, approximate=False)


LEAKY_SLOPE = 0.01  # the slope of leaky_relu below 0 (`jax.nn.leaky_relu`'s default)


def _leaky_relu(x):
    return jax.nn.leaky_relu(x, LEAKY_SLOPE)


ACTIVATIONS: dict[str, Callable] = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "erf": jsp.erf,
    "gelu": _gelu,
    "softplus": jax.nn.softplus,
    "sigmoid": jax.nn.sigmoid,
    "leaky_relu": _leaky_relu,
    "identity": _identity,
}


def resolve_activation(activation: str | Callable, argname: str = "activation") -> Callable:
    """Return the callable behind `activation` (a name from `ACTIVATIONS` or a callable).

    Raises a one-line `ValueError` naming `argname` and the accepted names otherwise.
    """
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    raise ValueError(
        f"{argname}={activation!r} is not a known activation; "
        f"use one of {', '.join(ACTIVATIONS)} or a callable"
    )
