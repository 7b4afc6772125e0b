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
# # Finite ResNets and their neural mean-ODE limit: `1/L + 1/sqrt(LM)`
#
# A ResNet `h^l = h^{l-1} + (1/(LM)) Σ_j φ(h^{l-1}, z^{j,l})` with i.i.d. units
# `z^{j,l} ~ μ_0` converges, as depth L and width M grow, to the mean ODE
# `∂_s h = E[φ(h, Z(s))]` (docs: Mathematics §3). Gradient descent converges too, to GD in L².
# Chizat's coupling gives every finite unit a limit copy starting at the same draw; the
# errors Δ^h, Δ^b, Δ^Z after k GD steps are bounded by `c_k (1/L + sqrt(log(1/δ)/(LM)))`:
# an Euler term in depth and a Monte-Carlo term over the LM units.
#
# This notebook measures both terms, separates them, and fits the slopes.
# `SIZE` is the one variable to change: `"test"` (seconds), `"cpu"` (a few minutes on a
# laptop), `"gpu"` (paper size).

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.io.plotting import show

jax.config.update("jax_enable_x64", True)  # the reference limit is computed in float64
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(L=[4, 8, 16], M=[1, 16], L_for_M=16, seeds=4, order=24),
    "cpu": dict(L=[8, 16, 32, 64], M=[1, 4, 16, 64, 4096], L_for_M=512, seeds=8, order=256),
    "gpu": dict(
        L=[8, 16, 32, 64, 128, 256], M=[1, 4, 16, 64, 256, 65536], L_for_M=8192, seeds=64, order=256
    ),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
cfg = SIZES[SIZE]
print(SIZE, cfg)

# %% [markdown]
# ## The model: a 2LP unit with a non-centred law
# `φ(h, (u, v)) = v gelu(uᵀh)` with `u ~ N(0, σ_u² I)` and `v = u`: then
# `E[φ(h, Z)] = σ_u² E[gelu'(uᵀh)] h ≠ 0`, so the limit moves already at initialisation.
# The law has two Gaussian coordinates (d = 2), so its expectations can be computed by a
# tensor Gauss–Hermite rule: the reference is far more accurate than any finite network.

# %%
d, lr, steps = 2, 0.25, 1
block = mf.TwoLayerBlock("gelu")
law = mf.TwoLayerNonCentredLaw(d, sigma_u=1.25, sigma_xi=0.0)
theta = jnp.pi * (jnp.arange(3) + 0.5) / 3
xs = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)  # three unit inputs
ys = xs[:, ::-1]  # targets: coordinates swapped

particles = mf.gauss_hermite_particles(law, cfg["order"])
limit = mf.solve_mean_ode(mf.MeanODE(block, particles, xs, ys, lr), steps)
# the check rule (order q/2), padded with zero-weight particles to the size of the main
# rule: the same expectations, and the same array shapes, so the solve is not recompiled
check = mf.gauss_hermite_particles(law, cfg["order"] // 2).padded(particles.count)
coarse = mf.solve_mean_ode(mf.MeanODE(block, check, xs, ys, lr), steps)
s = jnp.linspace(0, 1, 257)
ref_error = max(float(jnp.max(jnp.abs(limit.h(k, s) - coarse.h(k, s)))) for k in range(steps + 1))
print("limit loss per GD step:", [round(float(limit.loss(k)), 4) for k in range(steps + 1)])
print(f"reference error (order q vs q/2): {ref_error:.1e}")

# %% [markdown]
# ## Finite networks, coupled unit by unit
# For each (L, M), all seeds run in one jitted, vmapped program: sample the network, train
# it for `steps` GD steps in the mean-ODE convention, and compare with the limit and with
# the limit copies of its own units.

# %%


def errors_at(L, M, key):
    grid = mf.limit_on_grid(limit, L)

    @jax.jit
    def run(keys):
        def one(k):
            net = mf.ResNet.sample(block, law, L=L, M=M, scaling=mf.MeanODEScaling(), key=k)
            return mf.coupled_errors(net, xs, ys, grid, learning_rate=lr)

        return jax.vmap(one)(keys)

    return run(jr.split(key, cfg["seeds"]))


key = jr.key(0)
grid_points = [(L, M) for L in cfg["L"] for M in cfg["M"]]
grid_points += [(cfg["L_for_M"], M) for M in cfg["M"] if M <= 64]
grid_points = list(dict.fromkeys(grid_points))  # L_for_M may also be one of the L
results = {(L, M): errors_at(L, M, jr.fold_in(key, 1000 * L + M)) for L, M in grid_points}
euler = {
    L: mf.euler_errors(
        block,
        particles,
        xs,
        ys,
        mf.limit_on_grid(limit, L),
        learning_rate=lr,
        probes=jax.vmap(law.sample)(jr.split(jr.fold_in(key, 7), 256)),
    )
    for L in cfg["L"]
}

# %% [markdown]
# ## Fits: slope −1 in L at large M, slope −1/2 in M at large L
# The Euler part (the finite recursion run with the limit's own particles at every layer)
# has slope −1 exactly; the Monte-Carlo part dominates at small M.

# %%
M_max, L_M = max(cfg["M"]), cfg["L_for_M"]
names = {"delta_h": "Δ^h", "delta_b": "Δ^b", "delta_z": "Δ^Z"}
fig, axes = plt.subplots(2, 3, figsize=(13, 7))
for col, q in enumerate(names):
    vals_L = [np.asarray(getattr(results[(L, M_max)], q))[:, steps] for L in cfg["L"]]
    fit_L = mf.fit_loglog(cfg["L"], vals_L, quantity=q, against="L", theory=-1.0)
    Ms = [M for M in cfg["M"] if M <= 64]
    vals_M = [np.asarray(getattr(results[(L_M, M)], q))[:, steps] for M in Ms]
    fit_M = mf.fit_loglog(Ms, vals_M, quantity=q, against="M", theory=-0.5)
    # mean and std over the seeds that did not explode
    sum_L, sum_M = [mf.summarize(v) for v in vals_L], [mf.summarize(v) for v in vals_M]
    e = [float(getattr(euler[L], q)[steps]) for L in cfg["L"]]
    print(
        f"{names[q]}: slope in L {fit_L['slope']:.2f} {np.round(fit_L['ci95'], 2)}, "
        f"in M {fit_M['slope']:.2f} {np.round(fit_M['ci95'], 2)}"
    )
    ax = axes[0, col]
    ax.errorbar(
        cfg["L"],
        [s["mean"] for s in sum_L],
        [s["std"] for s in sum_L],
        marker="o",
        label=f"M={M_max}: slope {fit_L['slope']:.2f}",
    )
    ax.plot(cfg["L"], e, "s-", label="Euler part")
    ax.set(xscale="log", yscale="log", xlabel="L", title=f"{names[q]} after {steps} step(s)")
    ax.legend()
    ax = axes[1, col]
    ax.errorbar(
        Ms,
        [s["mean"] for s in sum_M],
        [s["std"] for s in sum_M],
        marker="o",
        label=f"L={L_M}: slope {fit_M['slope']:.2f}",
    )
    ax.set(xscale="log", yscale="log", xlabel="M")
    ax.legend()
fig.tight_layout()
show("convergence")

# %% [markdown]
# The same study, with the reference's error checked against every fitted point, resumable
# and written to JSON, is one command: `meanfield study mean-ode` (see the README).
