"""Training regimes of deep ResNets: how fast each object moves in training (Chizat's
lecture notes on ResNets, §3,
Chaintron's criteria; Mathematics §8).

**Diagnostics** (`regime_diagnostics`, any unit or layer block): after k optimiser steps
from a network `net` (parameters z_0 → z_k, hidden states h_0 → h_k),

* `predictor_movement`: ‖f_k(x) − f_0(x)‖, RMS over the inputs;
* `parameter_movement`: RMS over units of ‖z_k − z_0‖ over the RMS of ‖z_0‖ (and its max
  over units, each unit relative to itself);
* the change of every unit's feature `φ(h^{l-1}, z^{j,l})`, split exactly into a **local**
  part, due to its own weight with its input frozen, and a **global** part, due to its
  input:

      Δφ = φ(h_k^{l-1}, z_k) − φ(h_0^{l-1}, z_0)
         = [φ(h_0^{l-1}, z_k) − φ(h_0^{l-1}, z_0)]  +  [φ(h_k^{l-1}, z_k) − φ(h_0^{l-1}, z_k)]
         =            local                         +              global,

  each reported as its RMS over inputs, layers and units, relative to the RMS of
  φ(h_0^{l-1}, z_0) (for a layer block, F(h^{l-1}, θ_l) per layer);
* `losses` at every step, `forward_deviation` ‖h_0^L − h_0^0‖/‖h_0^0‖ at initialisation,
  and `exploded` (anything non-finite, or a loss above 1e6 times its start).

**Predicted exponents** (`predicted_exponents`; derivation). Take a unit block with units of
size Θ(1), a fixed number M of units per layer and a fixed state dimension d, a total
residual scale `α = c L^{-γ}` and plain GD with learning rate `η = η_0 L^{λ}`. At
initialisation the forward deviation obeys Proposition 2.1 of Chizat's lecture notes on ResNets,
`E‖h^L − h^0‖² = ((1 + c'Mα²)^L − 1)‖h^0‖²`, which diverges iff `MLα² → ∞` iff γ < 1/2:
explosion at initialisation. For γ ≥ 1/2 the first-order analysis (Chizat's lecture notes
on ResNets, §3) holds:
the gradient of a unit's weight is `α D_zφᵀ b` with b = Θ(1), so one step moves each
weight by `η α ∝ L^{λ−γ}` — the **local** update, exponent `e_loc = λ − γ`; the tangent
kernel is that of a shallow network of M·L units of scale α, `K ∝ M L α² ∝ L^{1−2γ}`, so
the predictor moves by `η K ∝ L^{λ+1−2γ}` per step: `e_P = λ + 1 − 2γ`; and a hidden
state moves by the sum over the layers below it of α M times the local update,
`∝ L · L^{-γ} · L^{λ−γ}`: `e_glob = e_P` (features move through their inputs exactly as
fast as the predictor). Hence, in the (γ, λ) plane:

* γ < 1/2: **explosion** at initialisation;
* above the line `λ = 2γ − 1` (e_P > 0) or above `λ = γ` (e_loc > 0: weights move by
  ≫ 1 and the first-order picture fails): **explosion** in training;
* below both lines: **no-learning** (the predictor moves by o(1) in k steps);
* on the line `λ = 2γ − 1`, 1/2 ≤ γ < 1: the predictor and every feature move by Θ(1)
  while each weight's own contribution vanishes like L^{γ−1}: **lazy-ode** (features
  learn only through their inputs; the limit is the mean ODE linearised in the weights);
* where the two lines cross, γ = λ = 1 (α ∝ 1/L, η ∝ L: the mean-ODE / CompleteP scaling):
  **local-feature-learning**.

**kernel** (the predictor moves while neither the weights nor the features do) needs the
features frozen, which e_glob = e_P excludes at a fixed state dimension d: it is not
predicted anywhere in this plane (it is the regime of d → ∞, the width of the residual
stream), and a cell classified so by its measured exponents says so.

`classify` reads a regime off measured exponents (with intervals: a decision whose
interval straddles a threshold is flagged ambiguous).
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

from ..blocks.base import AbstractBlock, AbstractUnitBlock
from ..models.resnet import ResNet
from ..training.loop import squared_loss
from ..training.resnet import train

REGIMES = ("local-feature-learning", "lazy-ode", "kernel", "no-learning", "explosion")
EXPONENT_TOL = 0.2  # |exponent| below this is "Θ(1)"
EXPLOSION_FACTOR = 1e6  # a loss above this many times its start counts as an explosion


class ScaledBlock(AbstractUnitBlock):
    """`scale · φ(h, z)`: a unit block whose residual scale is data (an array leaf), so that
    networks of different scales vmap together (build them with α = 1).

    **Arguments:** `block` (the unit block φ), `scale` (a scalar array).
    """

    block: AbstractUnitBlock
    scale: Float[Array, ""]

    def __call__(self, h, z):
        return self.scale * self.block(h, z)


# one number (a leading axis where networks are vmapped)
Scalar = Float[Array, ""]


class RegimeDiagnostics(eqx.Module):
    """What `regime_diagnostics` measures (module docstring); every field an array."""

    losses: Float[Array, " steps+1"]
    predictor_movement: Scalar
    parameter_movement: Scalar
    parameter_movement_max: Scalar
    local_change: Scalar
    global_change: Scalar
    total_change: Scalar
    forward_deviation: Scalar
    exploded: Array


def feature_changes(
    block: AbstractBlock, params0, params1, h0: Array, h1: Array
) -> tuple[Array, Array, Array, Array]:
    """The exact local/global split of every feature's change (module docstring).

    `h0`, `h1`: the states before and after, `(n, L + 1, d)`; `params0`, `params1`: the
    network's parameters (leaves `(L, M, ...)` for a unit block, `(L, ...)` for a layer
    block). **Returns:** `(local, global, total, base)`, arrays of shape `(n, L, M, d)` (unit
    block) or `(n, L, d)` (layer block): `φ(h0, z1) − φ(h0, z0)`, `φ(h1, z1) − φ(h0, z1)`,
    `φ(h1, z1) − φ(h0, z0)` and `φ(h0, z0)`.
    """
    if isinstance(block, AbstractUnitBlock):
        per_layer = jax.vmap(block, in_axes=(None, 0))  # over units
    else:
        per_layer = block.layer
    per_input = jax.vmap(per_layer, in_axes=(0, 0))  # over layers

    def phi(h, params):  # h: (n, L+1, d) -> features of every input, layer (and unit)
        return jax.vmap(per_input, in_axes=(0, None))(h[:, :-1], params)

    base = phi(h0, params0)
    moved_weights = phi(h0, params1)
    after = phi(h1, params1)
    return moved_weights - base, after - moved_weights, after - base, base


def _rms(a):
    return jnp.sqrt(jnp.mean(a**2))


def regime_diagnostics(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    *,
    optimizer: optax.GradientTransformation,
    steps: int,
    loss: Callable = squared_loss,
) -> RegimeDiagnostics:
    """Train `net` for `steps` full-batch steps (`meanfield.train`) and measure how much
    each object moved (module docstring). Jittable (wrap in `eqx.filter_jit`) and
    vmappable over networks of equal shapes (give their scales as data: `ScaledBlock`)."""
    result = train(net, xs, ys, optimizer=optimizer, steps=steps, loss=loss)
    trained = result.net
    h0, h1 = net.states(xs), trained.states(xs)
    f0 = jax.vmap(net.output)(h0[:, -1])
    f1 = jax.vmap(trained.output)(h1[:, -1])
    local, glob, total, base = feature_changes(net.block, net.params, trained.params, h0, h1)
    scale = _rms(base)

    def unit_norms(params):  # ‖z‖ of every unit (every layer for a layer block)
        lead = 2 if isinstance(net.block, AbstractUnitBlock) else 1
        sq = [jnp.sum(p.reshape(p.shape[:lead] + (-1,)) ** 2, -1) for p in jax.tree.leaves(params)]
        return jnp.sqrt(sum(sq))

    moved = unit_norms(jax.tree.map(jnp.subtract, trained.params, net.params))
    start = unit_norms(net.params)
    dev = jnp.linalg.norm(h0[:, -1] - h0[:, 0], axis=-1) / jnp.linalg.norm(h0[:, 0], axis=-1)
    losses = result.losses
    values = [losses, f1, h1, moved]
    finite = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(v)) for v in values]))
    exploded = ~finite | (jnp.max(losses) > EXPLOSION_FACTOR * losses[0])
    return RegimeDiagnostics(
        losses=losses,
        predictor_movement=jnp.sqrt(jnp.mean(jnp.sum((f1 - f0) ** 2, axis=-1))),
        parameter_movement=_rms(moved) / _rms(start),
        parameter_movement_max=jnp.max(moved / start),
        local_change=_rms(local) / scale,
        global_change=_rms(glob) / scale,
        total_change=_rms(total) / scale,
        forward_deviation=jnp.sqrt(jnp.mean(dev**2)),
        exploded=exploded,
    )


# ------------------------------------------------------------------ the predicted diagram


def predicted_exponents(gamma: float, lam: float) -> dict:
    """The exponents in L of the first-order analysis (module docstring) for a residual
    scale ∝ L^-γ and a GD learning rate ∝ L^λ: predictor `e_P = λ + 1 − 2γ`, local
    update `e_loc = λ − γ`, global feature change `e_glob = e_P`, and whether the forward
    pass explodes at initialisation (γ < 1/2)."""
    return {
        "predictor": lam + 1 - 2 * gamma,
        "local": lam - gamma,
        "global": lam + 1 - 2 * gamma,
        "forward_explodes": gamma < 0.5,
    }


def predicted_regime(gamma: float, lam: float, *, margin: float = 0.0) -> tuple[str, float]:
    """The regime the first-order analysis predicts at (γ, λ), and the cell's distance to
    the nearest predicted boundary in exponent units (0 on a boundary line: the line
    regimes lazy-ode and local-feature-learning live on `λ = 2γ − 1`)."""
    e = predicted_exponents(gamma, lam)
    tol = 1e-9 + margin
    if gamma < 0.5:
        return "explosion", 0.5 - gamma
    dist = min(abs(e["predictor"]), abs(e["local"]) if gamma >= 1 else math.inf, gamma - 0.5)
    if e["predictor"] > tol or e["local"] > tol:
        return "explosion", dist
    if e["predictor"] < -tol:
        return "no-learning", dist
    if e["local"] >= -tol:
        return "local-feature-learning", 0.0
    return "lazy-ode", 0.0


def classify(exponents: dict, *, exploded: bool, tol: float = EXPONENT_TOL) -> dict:
    """A regime from measured exponents in L, each `{"value", "ci"}` under the keys
    `forward`, `predictor`, `local`, `global` (module docstring): explosion (any draw
    exploded at the largest depth, or the forward deviation, the predictor movement or
    the local update growing, exponent > tol), no-learning (predictor exponent < −tol),
    otherwise
    local-feature-learning (local exponent ≥ −tol), lazy-ode (global ≥ −tol) or kernel.
    `ambiguous` lists the decisions whose 95% interval straddles a threshold."""
    ambiguous = []

    def side(name, threshold):
        ex = exponents.get(name) or {}
        v, ci = ex.get("value"), ex.get("ci")
        if v is None:
            return None
        if ci is not None and ci[0] < threshold < ci[1]:
            ambiguous.append(f"{name} exponent {v:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] vs {threshold:g}")
        return v > threshold

    if exploded:
        return {"regime": "explosion", "ambiguous": False, "reason": "a draw exploded"}
    grows_f = side("forward", tol)
    grows_p = side("predictor", tol)
    grows_loc = side("local", tol)
    if grows_f or grows_p or grows_loc:
        regime = "explosion"
    elif grows_p is None:
        return {"regime": None, "ambiguous": True, "reason": "no predictor exponent"}
    elif not side("predictor", -tol):
        regime = "no-learning"
    elif side("local", -tol):
        regime = "local-feature-learning"
    elif side("global", -tol):
        regime = "lazy-ode"
    else:
        regime = "kernel"
    return {"regime": regime, "ambiguous": bool(ambiguous), "ambiguous_decisions": ambiguous}


def nan_to_none(values) -> list:
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, float).ravel()]
