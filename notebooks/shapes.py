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
# # ResNets of all shapes and sizes: how must L, M and D grow together?
#
# Chaintron (docs: Mathematics §6).
#
# A ResNet on an embedding: `h^0 = W_in x`, `h^l = h^{l−1} + (1/(LM)) Σ_j v^{j,l}
# ρ(⟨u^{j,l}, h^{l−1}⟩_D)`, `f = W_outᵀ h^L / D`, trained by GD with `η · LMD · ∇`. The
# proven bound is `E_h ≲ 1/L + (sqrt(D) + log(1/δ))/sqrt(LM) + 1/sqrt(D)`, the conjecture
# `E_f = O(1/L + D/(ML) + 1/sqrt(D))`; at a parameter budget P ≈ 2LMD they ask for
# different shapes (bound: D ~ P^(1/3), ML ~ P^(2/3); conjecture: L ~ P^(1/5),
# D ~ P^(2/5), M ~ P^(2/5)).
#
# The published evidence fixes L and calls the largest network "the limit". Here every
# network is compared with two *solved* limits at its own embedding draw:
#
# * the **fixed-D limit** (L, M → ∞ at that W_in, W_out): the error against it is the
#   L, M error alone;
# * the **joint limit** (L, M, D → ∞): the gap between the two limits is the D error alone.
#
# Both are the same closed ODE system (`meanfield.limits.deep_embedded`): every field stays in the
# span of the columns of W_in, W_out, and the draw enters only through their Gram matrix.
#
# Set `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"cpu"` for the quick preset's grid, `"gpu"`
# for the paper preset.

# %%
import os
import tempfile

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.coupling import deep_embedded as de_coupling
from meanfield.io.plotting import show
from meanfield.limits import deep_embedded as de_limits
from meanfield.models import deep_embedded as de
from meanfield.training import deep_embedded as de_training

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(L=[4, 8, 16], M=[4, 16], D=[8, 32], seeds=3, steps=1),
    "cpu": dict(seeds=12, steps=3),  # the quick preset's grid
    "gpu": dict(preset="paper"),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")

# %% [markdown]
# ## The exact linear limit, checked by hand
#
# One GD step has a closed form: `f_1(x) = (η_u s_v² + η_v s_u²) σ_in² σ_out² (1/n)
# Σ_i ⟨x, x_i⟩ y_i`, and `f_0 = 0`.

# %%
x = jnp.array([[0.3, -0.8, 1.2]])
y = jnp.array([[-1.0, 0.2, 0.5]])
lim = de_limits.linear_limit(x, y, steps=5, eta_u=0.1, eta_v=0.1)
closed = 0.2 * (x @ x.T) @ y
print("f_1 − closed form:", float(jnp.max(jnp.abs(lim.outputs[1] - closed))))
print("the limit's own error (two tolerances):", float(lim.error_estimate))

# %% [markdown]
# ## A finite network against both limits, at its own embedding draw

# %%
L = M = D = 64
net = de.DeepEmbeddedResNet.sample(jr.key(0), L=L, M=M, D=D, d_in=3, d_out=3)
outputs, hidden = de_training.train(net, x, y, eta_u=0.1, eta_v=0.1, steps=5)
ts = jnp.arange(L + 1) / L
joint = de_limits.linear_limit(x, y, steps=5, ts=ts)
fixed = de_limits.linear_limit(x, y, steps=5, ts=ts, gram=de_limits.basis_gram(net.embedding))
e_joint, _ = de_coupling.errors(outputs, hidden, joint, net.embedding)
e_fixed, _ = de_coupling.errors(outputs, hidden, fixed, net.embedding)
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogy(e_joint, "o-", label="vs joint limit (L, M, D → ∞)")
ax.semilogy(e_fixed, "s-", label="vs fixed-D limit (same W_in, W_out)")
ax.set(xlabel="GD step k", ylabel="output error E_f (RMS)", title=f"L = M = D = {L}")
ax.legend(fontsize=8)
show("output_error")

# %% [markdown]
# ## The study: errors over a grid of (L, M, D), the rate law and the optimal shape
#
# `meanfield study shapes` runs the same thing over a grid and fits, term by term, the L, M
# part `a L^-p + b D^q (LM)^-r` (plus, where the data need it, `b0 (LM)^-r0`) on the
# errors against the fixed-D limit, and the D part `c D^-s` on the gap between the limits.

# %%
out = tempfile.mkdtemp(prefix="shapes-")
r = mf.run_study("shapes", out=out, no_progress=True, **SIZES[SIZE])
for q, law in r["rate_law"].items():
    exps = {k: law[k] for k in ("p", "q", "r", "r0", "s") if k in law}
    print(q, law.get("LM_part_chosen"), {k: round(v, 2) for k, v in exps.items()})
    shape = r["optimal_shape"][q]
    if "L" in shape:
        print("   optimal shape L, M, D ~ P^", round(shape["L"], 2), round(shape["M"], 2),
              round(shape["D"], 2), "supported:", shape["supported_by_measurements"])  # fmt: skip
for name in ("bound", "conjecture"):
    s = r["optimal_shape"][name]
    print(f"{name:10s} L, M, D ~ P^ {s['L']:.2f} {s['M']:.2f} {s['D']:.2f}")

# %%
for name in ("shapes_rates", "shapes_grid"):
    img = plt.imread(os.path.join(out, f"{name}.png"))
    fig, ax = plt.subplots(figsize=(12, 12 * img.shape[0] / img.shape[1]))
    ax.imshow(img)
    ax.axis("off")
    show(name)
print("hidden error against the fixed-D limit, divided by sqrt(D/(LM)):")
K = r["config"]["steps"]
ratios = [
    p["hidden_error_fixed_D"]["mean"] / np.sqrt(p["D"] / (p["L"] * p["M"]))
    for p in r["points"]
    if p["steps"] == K and p["D"] <= p["L"] * p["M"] / 4
]
print(f"  {min(ratios):.2f} .. {max(ratios):.2f} over the grid (D <= LM/4)")

# %% [markdown]
# ## The answer at the authors' sizes (paper presets, measured on a CPU)
#
# `meanfield study shapes --preset paper [--activation tanh]` (L ∈ 8..512, M ∈ 8..512,
# D ∈ 16..512, 16 draws; numbers and commands in `benchmarks/RESULTS.md`):
#
# * **Hidden states** follow the proven bound: `E_h ≈ b sqrt(D/(LM)) + c/sqrt(D)`, with
#   fitted exponents q = 0.499 [0.495, 0.506], r = 0.499 [0.496, 0.502] for tanh (0.53,
#   0.52 for the identity) in `D^q (LM)^-r`, and s ≈ 0.43–0.46 for the D term. The
#   conjecture's D/(LM) is outside every interval.
# * **Outputs** are smaller and do not follow the conjecture either: against the fixed-D
#   limit they fall like `(LM)^-1/2` with little D dependence (tanh: D^0.11 (LM)^-0.53;
#   identity: a D-independent `(LM)^-0.47` term plus one that matters only when
#   D² ≳ LM) — the bound's `log(1/δ)/sqrt(LM)` form rather than `D/(LM)`.
# * The 1/L term is below 1% of both laws at these sizes: depth is never the bottleneck
#   here, so the optimal shapes impute p = 1. For the hidden states the measured law gives
#   L, M, D ~ P^(0.15, 0.50, 0.35), the bound's (1/6, 1/2, 1/3).
#
# The authors' tanh setting (d_in = d_out = 5, n = 10, L = 50, K = 14 updates) with a
# solved reference in place of their largest network: `benchmarks/shapes_authors_tanh.py`.
