"""`meanfield study resnet-phases`: the phase diagram of Chaintron's deep ResNet on an
embedding over the output scale σ_v and the embedding dimension D, with the maximal local
update (MLU) point ("ResNets of all shapes and sizes", the slides "Deep ResNets", "Scaling
criteria" and "Phase diagram"; `meanfield.diagnostics.criteria.deep_criteria_rates`).

The same measurement as `meanfield study two-layer-phases` (its docstring), on the L-layer
ResNet `h^l = h^{l-1} + (1/(LM)) Σ_j v^{j,l} ρ(⟨u^{j,l}, h^{l-1}⟩_D)` on a frozen embedding
(`meanfield.models.deep_embedded`) trained by the flow `u̇ = −η_u·LMD·∇_u 𝓛`,
`v̇ = −η_v·LMD·∇_v 𝓛` up to t = `--time` at the slide's balanced rates `η_v = lr_v`,
`η_u = lr_u min(1, D/σ_v²)`. The slide's predictions are the two-layer perceptron's:

* criterion 1 (non-explosion): `‖h^L − h^0‖_D = Θ(σ_v / sqrt(LM))` while σ_v = O(sqrt(LM)),
  explosion beyond (the signal-propagation slide); slope 1/2 in D at a fixed s_v, and the
  boundary is the horizontal line σ_v ≈ sqrt(LM) of the diagram;
* criterion 3 (balanced loss decay): `decay_u ~ η_u (σ_v²/D + t² η_v²)`, `decay_v ~ η_v`;
* criterion 5 (MLU): the local update `~ η_u (σ_v²/D + t² η_v²)^{1/2}`: Θ(1) for
  σ_v ≤ sqrt(D), `sqrt(D)/σ_v` beyond; the MLU point σ_v = sqrt(D).

Unlike the perceptron's, these rates are not functions of s_v = σ_v/sqrt(D) alone at a
finite size: the random part of the residual map moves h by O(sqrt(D/(LM))) (Mathematics
§6), so the slopes in D at a fixed s_v are measurements of the slide's claim, which holds
where σ_v stays below sqrt(LM) and is expected to fail above it (the study prints where).
"""

import functools

import equinox as eqx
import jax

from ...diagnostics.criteria import deep_criteria_rates
from ...harness.runner import start_study
from ...models.deep_embedded import DeepEmbeddedResNet
from ...training.deep_embedded import train_with_final
from ..shared.two_layer_inputs import batch_size
from ..two_layer_phases import study as two_layer_phases
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

DEFAULTS = two_layer_phases.DEFAULTS
OPTIONS = ("D", "s_v_sweep", "L", "M", "seeds", *DEFAULTS)


def configure(args) -> dict:
    """The configuration at this study's presets and options (`--L` among them), checked
    and with its data as `study two-layer-phases` builds it (`two_layer_phases.configure`)."""
    return two_layer_phases.configure(args, PRESETS, OPTIONS)


# the perceptron's cost model, whose units count the deep ResNet's L·M (its `L` in `cfg`)
cost_parts = two_layer_phases.cost_parts


def run(args, cfg):
    two_layer_phases.run_diagram(args, cfg, _draws, start_study)


plot = two_layer_phases.plot


@functools.partial(
    jax.jit,
    static_argnames=("L", "M", "D", "activation", "s_u", "sigma_in", "sigma_out", "time", "dt"),
)
def _draws(
    keys,
    x,
    y,
    s_v,
    lr_u,
    lr_u_unscaled,
    lr_v,
    *,
    L,
    M,
    D,
    activation,
    s_u,
    sigma_in,
    sigma_out,
    time,
    dt,
):
    """Per draw: the rates at t = 0 (balanced and unscaled η_u) and at `time` (balanced),
    the flow by `round(time / dt)` GD steps at rates `η·dt`."""

    def one(key):
        net = DeepEmbeddedResNet.sample(
            key,
            L=L,
            M=M,
            activation=activation,
            D=D,
            d_in=x.shape[1],
            d_out=y.shape[1],
            s_u=s_u,
            sigma_in=sigma_in,
            sigma_out=sigma_out,
        )
        net = eqx.tree_at(lambda n: n.v, net, s_v * net.v)
        start = deep_criteria_rates(net, x, y, lr_u=lr_u, lr_v=lr_v)
        # the inner weights' share is linear in η_u: the unscaled rate's without a second pass
        unscaled = start._replace(decay_u=start.decay_u * (lr_u_unscaled / lr_u))
        *_, later = train_with_final(
            net, x, y, eta_u=lr_u * dt, eta_v=lr_v * dt, steps=round(time / dt)
        )
        return start, unscaled, deep_criteria_rates(later, x, y, lr_u=lr_u, lr_v=lr_v)

    return jax.lax.map(one, keys, batch_size=batch_size(keys.shape[0], L * M, D))
