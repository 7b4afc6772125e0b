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
# # Beyond initialisation: the weights along depth after training
#
# Marion, Fermanian, Biau and Vert ("Scaling ResNets in the large-depth regime") end with
# trained networks: res-1 ResNets `h_k = h_{k-1} + L^{-β} V_k σ(h_k)` with an embedding A
# and a readout B, the residual weights V_1..V_L initialised i.i.d., smooth in k/L, or as
# the increments of a fractional Brownian motion of Hurst index H, trained on real images.
# Their claims: after training the weights still have a structure along depth, set by the
# initialisation and by β; and the test accuracy depends on (β, H).
#
# This notebook trains such networks on scikit-learn's bundled handwritten digits
# (offline; `meanfield.io.datasets.load_images` reads MNIST or CIFAR-10 files you have) and
# measures the regularity of `k/L -> V_k` with a variogram estimator
# (`meanfield.diagnostics.regularity.estimate_hurst`):
#
# * of the weights V_k themselves (i.i.d. and fBm weights are increments: ≈ 0; smooth ≈ 1),
# * of their partial sums Σ_{j≤k} V_j (the path whose increments they are: 1/2, H, 1),
# * of the change training made, V_after − V_before.
#
# `meanfield study trained-weights` runs the whole grid (every β, H and initialisation,
# several networks per cell) and draws the accuracy heatmap.
#
# Change `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"` for deeper networks and longer training.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

from meanfield.diagnostics.regularity import estimate_hurst
from meanfield.io.datasets import load_digits
from meanfield.io.plotting import show
from meanfield.laws.depth import FractionalBrownianLaw, IIDGaussianLaw, SmoothGPLaw
from meanfield.models import res1
from meanfield.training import res1 as res1_training

SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(L=32, d=8, steps=60, betas=[0.5, 1.0]),
    "cpu": dict(L=64, d=32, steps=400, betas=[0.25, 0.5, 0.75, 1.0]),
    "gpu": dict(L=256, d=64, steps=3000, betas=[0.0, 0.25, 0.5, 0.75, 1.0]),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]
ds = load_digits(jr.key(0))
data = tuple(jnp.asarray(a) for a in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
print(ds)

# %% [markdown]
# ## 1. Train one network per (initialisation, β)
#
# Every part (A, V, B) is trained by minibatch Adam on the cross-entropy; the networks of
# one initialisation share their initial weights, so the rows differ by β only.

# %%
LAWS = {
    "i.i.d.": IIDGaussianLaw(S["d"]),
    "smooth": SmoothGPLaw(S["d"]),
    "fBm H=0.3": FractionalBrownianLaw(S["d"], 0.3),
    "fBm H=0.8": FractionalBrownianLaw(S["d"], 0.8),
}
train = jax.jit(
    jax.vmap(lambda m, k: res1_training.train_res1(m, data, key=k, steps=S["steps"], lr=3e-3))
)
runs = {}
for name, law in LAWS.items():
    models = [
        res1.Res1Classifier.sample(jr.key(1), law, L=S["L"], d_in=64, classes=10, beta=b)
        for b in S["betas"]
    ]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *models)
    out = train(stacked, jr.split(jr.key(2), len(S["betas"])))
    runs[name] = (np.asarray(stacked.V), np.asarray(out.model.V), np.asarray(out.test_accuracy))
    accs = ", ".join(f"β={b:g}: {a:.3f}" for b, a in zip(S["betas"], runs[name][2], strict=True))
    print(f"{name:10s} test accuracy {accs}")

# %% [markdown]
# ## 2. One entry of V_k against k/L, before and after (the source's figure)

# %%
s = np.arange(1, S["L"] + 1) / S["L"]
fig, axes = plt.subplots(1, len(LAWS), figsize=(3.4 * len(LAWS), 3.2))
last = len(S["betas"]) - 1
for ax, (name, (before, after, _)) in zip(axes, runs.items(), strict=True):
    ax.plot(s, before[last, :, 0, 0], color="0.6", lw=0.8, label="before")
    ax.plot(s, after[last, :, 0, 0], color="C3", lw=0.9, label="after")
    ax.set_title(f"{name}, β = {S['betas'][last]:g}", fontsize=9)
    ax.set_xlabel("k / L")
axes[0].set_ylabel("entry (1, 1) of V_k")
axes[0].legend(fontsize=7)
fig.tight_layout()
show("weights_along_depth")

# %% [markdown]
# ## 3. The regularity before and after training
#
# The estimate pools the d² entries of V as paths along depth; its interval is a
# bootstrap over those paths (independent at initialisation, not after training: the
# spread over the networks of `meanfield study trained-weights` is the honest one).

# %%
print(f"{'':10s} {'β':>5s}  {'partial sums before → after':>28s}  {'update':>6s}")
for name, (before, after, _) in runs.items():
    for i, b in enumerate(S["betas"]):
        h0 = estimate_hurst(before[i], cumulative=True).hurst
        h1 = estimate_hurst(after[i], cumulative=True).hurst
        hu = estimate_hurst(after[i] - before[i]).hurst
        print(f"{name:10s} {b:5.2f}  {h0:13.2f} → {h1:5.2f}          {hu:6.2f}")

# %% [markdown]
# What to read: training adds to V a change that is smoother along depth (a higher
# index) the larger β is, so the trained weights' regularity moves from the
# initialisation's towards that of the change by an amount set by β; a smooth
# initialisation stays smooth. The study measures this over several networks per cell,
# with every H, and the test accuracy over (β, H).
