# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Training regimes of deep ResNets, and learning-rate transfer across depth
#
# How a deep ResNet trains depends on how its residual scale α and its learning rate η
# grow with depth L. Chizat's lecture notes on ResNets (§3) compare how fast the predictor,
# the weights and the features move; Chaintron's "ResNets of all shapes and sizes" states
# the criteria (non-explosion, loss decay, feature learning) and cites CompleteP (Dey et
# al. 2025), whose practical point is that the right scaling makes the best learning rate
# independent of depth.
#
# `meanfield.diagnostics.regimes` measures, after k GD steps, the predictor movement, the forward
# deviation at initialisation, and every unit's feature change split exactly into a
# **local** part (its own weight moved, its input frozen) and a **global** part (its input
# moved). With `α = L^-γ / M` and `η ∝ L^λ`, a first-order analysis predicts exponents in
# L for each (derivation in `meanfield.diagnostics.regimes`): predictor `λ + 1 − 2γ`, local update
# `λ − γ`, global change equal to the predictor's. So the learning line `λ = 2γ − 1`
# separates explosion from no learning; on it, the local update vanishes like `L^{γ−1}`
# (lazy ODE) except at γ = 1 (local feature learning, the mean-ODE / CompleteP scaling).
#
# Change `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"` for longer depth lines.

# %%
import math
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np
import optax

import meanfield as mf
from meanfield.diagnostics import regimes as R
from meanfield.io.plotting import show
from meanfield.studies.regimes.study import task

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(Ls=[8, 16, 32], seeds=2),
    "cpu": dict(Ls=[8, 16, 32, 64, 128], seeds=4),
    "gpu": dict(Ls=[8, 16, 32, 64, 128, 256, 512, 1024], seeds=8),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]
d, M = 8, 16
xs, ys = task(jr.key(0), d, 32)
law = mf.TwoLayerGaussianLaw(d, sigma_u=d**-0.5)


def diagnostics(gamma, lam, L, seed):
    net = mf.ResNet.sample(mf.TwoLayerBlock("relu"), law, L=L, M=M, scaling=1.0, key=jr.key(seed))
    net = mf.ResNet(R.ScaledBlock(net.block, jnp.asarray(L**-gamma / M)), net.params, 1.0)
    run = eqx.filter_jit(
        lambda n: R.regime_diagnostics(n, xs, ys, optimizer=optax.sgd(0.03 * M * L**lam), steps=3)
    )
    return run(net)


# %% [markdown]
# ## Three cells on and off the learning line
#
# `(γ, λ) = (1, 1)`: the mean-ODE scaling; `(0.5, 0)`: the 1/sqrt(L) branch scale of
# depth-μP with a depth-independent learning rate; `(1, 0.5)`: the mean-ODE scale with too
# small a learning rate.

# %%
cells = {"(1, 1) local feature learning": (1.0, 1.0), "(0.5, 0) lazy ODE": (0.5, 0.0),
         "(1, 0.5) no learning": (1.0, 0.5)}  # fmt: skip
fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
for ax, (name, (g, lam)) in zip(axes, cells.items(), strict=True):
    rows = [[diagnostics(g, lam, L, s) for s in range(S["seeds"])] for L in S["Ls"]]
    for field, label in (("predictor_movement", "predictor"), ("local_change", "local update"),
                         ("global_change", "global change")):  # fmt: skip
        m = [np.mean([float(getattr(dg, field)) for dg in row]) for row in rows]
        slope = np.polyfit(np.log(S["Ls"]), np.log(m), 1)[0]
        ax.plot(S["Ls"], m, "o-", label=f"{label}: slope {slope:+.2f}")
    e = R.predicted_exponents(g, lam)
    ax.set(xscale="log", yscale="log", xlabel="depth L",
           title=f"{name}\npredicted slopes: predictor {e['predictor']:+g}, "
                 f"local {e['local']:+g}")  # fmt: skip
    ax.legend(fontsize=8)
axes[0].set_ylabel("movement after 3 GD steps (relative)")
fig.tight_layout()
show("movement")

# %% [markdown]
# ## The whole diagram and the transfer experiment
#
# `meanfield study regimes` sweeps (γ, λ), classifies each cell from its fitted exponents
# (with intervals; ambiguous cells say so), draws the predicted boundaries, and trains
# networks of growing depth over a grid of learning rates under the mean-ODE, depth-μP
# and unscaled parametrizations: the optimal learning rate stays put under the first,
# drifts like a negative power of L without depth scaling, and the study reports what it
# does under depth-μP. Its figures: `phase_diagram.png` and `transfer.png`.

# %%
print("e.g.: meanfield study regimes --out results/regimes")
print("predicted regimes:",
      {f"({g:g}, {lam:g})": R.predicted_regime(g, lam)[0]
       for g, lam in [(0.25, 0.0), (0.5, 0.0), (0.75, 0.5), (1.0, 1.0), (1.0, 0.0),
                      (0.75, 1.0)]})  # fmt: skip
print("lr rule of depth-muP (SGD): eta ∝ M, independent of L; kernel ∝ M L alpha^2 =",
      f"{M * 64 * (1 / (math.sqrt(64) * M)) ** 2:.4f} at L = 64 (= 1/M)")  # fmt: skip
