"""Gradient descent on the deep ResNet on an embedding (`meanfield.models.deep_embedded`),
recording the outputs and hidden states per step."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float

from .._validation import check_finite_arguments
from ..engine.scan import default_unroll
from ..models.deep_embedded import DeepEmbeddedResNet

# ---------------------------------------------------------------- the finite network


def train(
    net: DeepEmbeddedResNet,
    xs,
    ys,
    *,
    eta_u: float,
    eta_v: float,
    steps: int,
    unroll: int | None = None,
) -> tuple[Float[Array, "K+1 n d_out"], Float[Array, "K+1 n L+1 D"]]:
    """`steps` GD steps in the joint-limit convention (`η · LMD · ∇`, `jax.grad` of
    `𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` on `u`, `v`; `W_in`, `W_out` frozen), in a `lax.scan`
    (`unroll`: layers per loop step of the depth scans, as in `DeepEmbeddedResNet.hidden`).

    **Returns:** `(outputs, hidden)` after k = 0..steps updates: outputs (steps + 1, n,
    d_out) and hidden states (steps + 1, n, L + 1, D). Jittable and vmappable over `net`.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {steps!r}")
    check_finite_arguments(colon=True, xs=xs, ys=ys, eta_u=eta_u, eta_v=eta_v)
    unroll = default_unroll(unroll)
    L, M, D = net.u.shape
    scale = L * M * D

    def forward(uv):
        hs = eqx.tree_at(lambda m: (m.u, m.v), net, uv).hidden(xs, unroll=unroll)
        return net.embedding.readout(hs[:, -1]), hs

    def loss(uv):
        f, hs = forward(uv)
        return 0.5 * jnp.mean(jnp.sum((f - ys) ** 2, axis=-1)), (f, hs)

    def step(uv, _):
        (gu, gv), aux = jax.grad(loss, has_aux=True)(uv)
        return (uv[0] - eta_u * scale * gu, uv[1] - eta_v * scale * gv), aux

    # K gradient steps, then the outputs after the K-th update from a forward pass alone
    uv, (outputs, hidden) = lax.scan(step, (net.u, net.v), None, length=steps)
    f, hs = forward(uv)
    return jnp.concatenate([outputs, f[None]]), jnp.concatenate([hidden, hs[None]])
