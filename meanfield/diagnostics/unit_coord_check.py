"""The coordinate check of a ResNet of unit blocks (Mathematics §10, for any block): a
user's φ and law, `h^l = h^{l-1} + α Σ_{j≤M} φ(h^{l-1}, z^{j,l})`, scaled by a
`meanfield.parametrisation.ResNetParametrisation` and trained by gradient descent.

At every step t, on the training inputs, as RMS over the inputs, units and coordinates
(`coordinates`), per layer l:

- **activations**: the state h^l (`state`) and the units' features φ(h^{l-1}, z^{j,l})
  (`unit`);
- **changes**: h^l minus its value at initialisation (`state`), and the output's
  change (`output`, the last state h^L);
- **updates**: every unit's update applied to its own current input,
  `φ(h_t^{l-1}, z_t) − φ(h_t^{l-1}, z_0)` (`unit`: does the unit itself learn?), and
  its sum over the layer as the stream sees it, `α Σ_j [...]` (`layer`).

**Predicted slopes** (`predicted_slopes`; first-order GD, the derivation of
`meanfield.diagnostics.regimes` with the width M kept: α = L^{-γ} M^{-μ}, learning rate
`∝ L^{λ} M^{ν}`). A unit's gradient is `α D_zφᵀ b` with b = Θ(1), so one step moves it
by `η α`: `update/unit ∝ L^{λ−γ} M^{ν−μ}`; a layer adds M of them at scale α:
`update/layer ∝ L^{λ−2γ} M^{1+ν−2μ}`; the state's change sums the L layers below it
coherently: `change ∝ L^{1+λ−2γ} M^{1+ν−2μ}` (the predictor's exponent). At
initialisation a unit is Θ(1) (`activation/unit` flat) and, for a block centred in
its parameters (`E_z φ(h, z) = 0`, as the built-in 2LP's law), the state's deviation
from its input sums L·M independent terms of size α: the state is flat where
`L^{1−2γ} M^{1−2μ}` does not grow, else grows as `L^{½−γ}` (in M, `M^{½−μ}`). A
non-centred block adds its mean coherently, `L^{1−γ} M^{1−μ}`: the state grows as
`L^{1−γ}` (`M^{1−μ}`) where that grows (`is_centred` tells the two apart by Monte
Carlo). The slopes are asymptotic: at small sizes a growing state grows more slowly
(its input does not grow).
"""

import jax
import jax.numpy as jnp

from ..blocks.base import AbstractUnitBlock
from ..models.resnet import ResNet
from ..parametrisation import ResNetParametrisation
from .regimes import ScaledBlock

ACTIVATIONS = ("activation/state", "activation/unit")
CHANGES = ("change/state", "change/output")
UPDATES = ("update/unit", "update/layer")
QUANTITIES = ACTIVATIONS + CHANGES + UPDATES


def network(block: AbstractUnitBlock, params, scale) -> ResNet:
    """The ResNet of `block` at residual scale `scale` (a number or a traced scalar:
    networks of different scales vmap together)."""
    return ResNet(ScaledBlock(block, jnp.asarray(scale)), params, 1.0)


def _features(block: AbstractUnitBlock, h, params):
    """φ(h^{l-1}, z^{j,l}) for every input, layer and unit: `h` (n, L+1, d), leaves of
    `params` (L, M, ...) → (n, L, M, d)."""
    per_layer = jax.vmap(block, in_axes=(None, 0))  # over units
    per_input = jax.vmap(per_layer, in_axes=(0, 0))  # over layers
    return jax.vmap(per_input, in_axes=(0, None))(h[:, :-1], params)


def _rms(a, axis=None):
    return jnp.sqrt(jnp.mean(a**2, axis=axis))


def coordinates(block: AbstractUnitBlock, scale, params0, params, h0, h) -> dict:
    """The coordinates (module docstring) of the network `params` whose states on the
    inputs are `h` (n, L+1, d), trained from `params0` (states `h0`): per-layer arrays
    (L,) and the scalar `change/output`."""
    phi_t = _features(block, h, params)
    phi_0 = _features(block, h, params0)  # the initial units at the current inputs
    update = phi_t - phi_0  # (n, L, M, d)
    return {
        "activation/state": _rms(h[:, 1:], (0, 2)),
        "activation/unit": _rms(phi_t, (0, 2, 3)),
        "change/state": _rms(h[:, 1:] - h0[:, 1:], (0, 2)),
        "change/output": _rms(h[:, -1] - h0[:, -1]),
        "update/unit": _rms(update, (0, 2, 3)),
        "update/layer": _rms(scale * jnp.sum(update, axis=2), (0, 2)),
    }


def is_centred(block: AbstractUnitBlock, law, xs, *, draws: int = 4096, key=None) -> bool:
    """Whether the block is centred in its parameters at the inputs `xs`: the RMS over
    inputs and coordinates of the Monte-Carlo mean of φ(x, z) over `draws` draws of the
    law lies within 5 standard errors of 0, `5 · RMS(φ) / sqrt(draws)`."""
    key = jax.random.key(0) if key is None else key
    zs = jax.vmap(law.sample)(jax.random.split(key, draws))
    phi = jax.vmap(lambda z: jax.vmap(lambda x: block(x, z))(xs))(zs)  # (draws, n, d)
    mean = jnp.mean(phi, axis=0)
    return bool(_rms(mean) <= 5 * _rms(phi) / draws**0.5)


def predicted_slopes(
    table: ResNetParametrisation, against: str, *, centred: bool = True
) -> dict[str, float]:
    """Every quantity's slope against `width` (M) or `depth` (L) at first order (module
    docstring; the state's for a block `centred` in its parameters or not)."""
    if against not in ("width", "depth"):
        raise ValueError(f"against must be 'width' or 'depth', got {against!r}")
    own, lr = (table.depth, table.lr_depth) if against == "depth" else (table.width, table.lr_width)
    # a unit moves by η α; a layer adds M units at scale α (M's "1 +" in width); the
    # state's change adds its layers (L's "1 +" in depth)
    change = 1 + lr - 2 * own
    layer = change if against == "width" else lr - 2 * own
    return {
        "activation/state": max(0.0, (0.5 if centred else 1.0) - own),
        "activation/unit": 0.0,
        "change/state": float(change),
        "change/output": float(change),
        "update/unit": float(lr - own),
        "update/layer": float(layer),
    }
