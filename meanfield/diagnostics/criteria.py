"""Chaintron's scaling criteria for the high-dimensional two-layer perceptron, measured
on a network (`meanfield.models.perceptron`; "ResNets of all shapes and sizes", the
phase diagram with respect to the dimension D).

Under the seed's gradient flow `u̇ = −η_u·D·M·∇_u 𝓛`, `v̇ = −η_v·D·M·∇_v 𝓛` the loss
decays at the rate

    −𝓛̇ = η_u·D·M·‖∇_u 𝓛‖² + η_v·D·M·‖∇_v 𝓛‖²  =:  decay_u + decay_v,

the seed's two sums (`(η_u/M) Σ_j ρ'(P^j)² ‖h^0‖_D² ⟨v^j, W_out g⟩_D²` and
`(η_v/M) Σ_j ρ(P^j)² ‖W_out g‖_D²` at one input), and each pre-activation
`P^j(x) = ⟨u^j, h^0(x)⟩_D` moves at the rate `Ṗ^j(x) = ⟨u̇^j, h^0(x)⟩_D` — all of it a
*local* update, since `h^0 = W_in x` is frozen. `criteria_rates` returns these rates at a
network's current weights, with the size of its hidden field. The seed's predictions
with `σ_v` the output scale (entries of `v^j` of variance σ_v², here `σ_v = s_v sqrt(D)`),
at a time t = Θ(1):

* criterion 1, non-explosion: `‖h‖_D ~ σ_v / sqrt(M)`;
* criterion 3, balanced loss decay: `decay_u ~ η_u (σ_v²/D + t² η_v²)`, `decay_v ~ η_v`,
  so η_v ~ 1 and `η_u ~ min(1, D/σ_v²)`;
* criterion 5, maximal local update (MLU): under criterion 3,
  `|Ṗ| ~ η_u (σ_v²/D + t² η_v²)^{1/2}`: Θ(1) if σ_v ≤ sqrt(D), `sqrt(D)/σ_v` beyond.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ..models.perceptron import Perceptron, loss


class CriteriaRates(NamedTuple):
    """The rates of `criteria_rates` (scalars; RMS over inputs and units where stated)."""

    loss: jax.Array  # 𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²
    decay_u: jax.Array  # η_u·D·M·‖∇_u 𝓛‖²: the inner weights' share of −𝓛̇
    decay_v: jax.Array  # η_v·D·M·‖∇_v 𝓛‖²: the outer weights' share
    local_update: jax.Array  # RMS over units and inputs of Ṗ^j(x_i) = ⟨u̇^j, h^0(x_i)⟩_D
    hidden: jax.Array  # RMS over inputs of ‖h(x_i)‖_D
    output: jax.Array  # RMS over inputs and outputs of f(x_i)


def criteria_rates(net: Perceptron, xs, ys, *, lr_u, lr_v) -> CriteriaRates:
    """The loss, its two decay rates, the local update's rate and the sizes of the hidden
    field and the outputs of `net` at inputs `xs` (n, d_in), targets `ys` (n, d_out), under
    the gradient flow at rates `lr_u`, `lr_v` (module docstring). Traceable (vmap, jit)."""
    D, M = net.embedding.D, net.M

    def of_units(u, v):
        return loss(eqx.tree_at(lambda n: (n.u, n.v), net, (u, v)), xs, ys)

    value, (grad_u, grad_v) = jax.value_and_grad(of_units, argnums=(0, 1))(net.u, net.v)
    u_dot = -lr_u * D * M * grad_u
    p_dot = net.embedding.embed(xs) @ u_dot.T / D  # (n, M), a matrix product
    hidden = net.hidden(xs)
    return CriteriaRates(
        loss=value,
        decay_u=lr_u * D * M * jnp.sum(grad_u**2),
        decay_v=lr_v * D * M * jnp.sum(grad_v**2),
        local_update=jnp.sqrt(jnp.mean(p_dot**2)),
        hidden=jnp.sqrt(jnp.mean(hidden**2)),
        output=jnp.sqrt(jnp.mean(net.embedding.readout(hidden) ** 2)),
    )
