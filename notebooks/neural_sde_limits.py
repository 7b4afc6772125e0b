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
# # Neural SDE, Young and ODE limits; phases at initialisation
#
# Marion, Fermanian, Biau & Vert (docs: Mathematics §4).
#
# `h_k = h_{k−1} + L^{-β} V_k σ(h_{k−1})` with the layer weights read off one random
# path along depth. Brownian weights (β = 1/2) give an Itô SDE, fractional-Brownian
# weights with H > 1/2 (β = H) a Young equation, smooth weights (β = 1) an ODE. Every
# depth reads the *same* path, and the limit is solved with Diffrax on that path, so
# the errors are strong (pathwise). Then the three phases (identity, stability,
# explosion) and the critical β, and the Hurst × β heatmap.
#
# Change `SIZE` (or the environment variable `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"`
# for paper-size runs; the command-line studies `meanfield study sde` and
# `meanfield study phases` do the same with resumable output.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.io.plotting import cell_edges, show

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(
        L=[4, 8, 16], seeds=16, n_fine=256, phase_L=[8, 16, 32], draws=16, d=8, hursts=[0.3, 0.9]
    ),
    "cpu": dict(
        L=[8, 16, 32, 64, 128],
        seeds=128,
        n_fine=2**13,
        phase_L=[16, 32, 64, 128, 256],
        draws=64,
        d=32,
        hursts=[0.3, 0.5, 0.7, 0.9],
    ),
    "gpu": dict(
        L=[8, 16, 32, 64, 128, 256, 512],
        seeds=1024,
        n_fine=2**16,
        phase_L=[16, 32, 64, 128, 256, 512, 1024],
        draws=512,
        d=64,
        hursts=[0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95],
    ),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]
d = 4
x = 0.5 + jnp.linspace(-1.0, 1.0, d)

# %% [markdown]
# ## Strong error on shared paths
#
# For one law, per seed: one path on the fine grid, the limit solved on it (Euler–
# Maruyama on the fine grid for the Itô SDE, Heun for the Young equation, Dopri8 for
# the ODE), and the finite networks of every depth reading their weights off it.


# %%
def strong_errors(law, beta, limit):
    def one(key):
        path = law.path(key)
        ref = limit(path)
        return jnp.stack(
            [
                jnp.linalg.norm(mf.matrix_resnet(law.weights_from_path(path, L), beta)(x) - ref)
                for L in S["L"]
            ]
        )

    keys = jr.split(jr.key(0), S["seeds"])
    return np.asarray(jax.jit(jax.vmap(one))(keys))


sde, ode = mf.NeuralSDE("tanh"), mf.NeuralODE("tanh")
cases = {
    "Brownian (β = 1/2)": (
        mf.BrownianLaw(d, S["n_fine"]),
        0.5,
        lambda p: sde.solve(p, x, save=1).ys[-1],
        -0.5,
    ),
    "fBm H = 0.75 (β = H)": (
        mf.FractionalBrownianLaw(d, 0.75, S["n_fine"]),
        0.75,
        lambda p: sde.solve(p, x, save=1, solver="heun").ys[-1],
        -0.5,
    ),
    "smooth (β = 1)": (mf.SmoothGPLaw(d, 0.2), 1.0, lambda p: ode.solve(p, x, save=1)[0][-1], -1.0),
}
fig, ax = plt.subplots(figsize=(5, 4))
for name, (law, beta, limit, theory) in cases.items():
    err = strong_errors(law, beta, limit)
    fit = mf.fit_loglog(S["L"], err.T, quantity="error", against="L", theory=theory)
    ax.loglog(
        S["L"], err.mean(0), "o-", label=f"{name}: slope {fit['slope']:.2f} (theory {theory})"
    )
    print(name, "slope", round(fit["slope"], 3), "ci95", np.round(fit["ci95"], 3))
ax.set_xlabel("L")
ax.set_ylabel("E‖H_1 − h_L‖")
ax.legend(fontsize=7)
show("strong_error")

# %% [markdown]
# (For fBm the slope beside it is `2H − 1`, the expected rate of Euler on a Young
# equation; the measured slope is reported, not forced.)
#
# ## Phases at initialisation and the critical β
#
# `h_k = h_{k−1} + L^{-β} V_k ReLU(W_k h_{k−1})`: the ratio `‖h_L − h_0‖/‖h_0‖` goes to
# 0 for β above β_c, explodes below, and stays of order one at β_c. The estimate is the
# zero crossing of the log-log slope of the median ratio against L.

# %%
betas = [0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25]
D = S["d"]


def ratios(law, key):
    """(n_β, n_L, draws) forward ratios; V and W from `law`, x ~ N(0, I)."""

    def one(k):
        kv, kw, kx, ky = jr.split(k, 4)
        xx, yy = jr.normal(kx, (D,)), jr.normal(ky, (D,))
        out = []
        for L in S["phase_L"]:
            V, W = law.weights(kv, L), law.weights(kw, L)
            r = jax.vmap(
                lambda b, V=V, W=W, L=L: (
                    mf.depth_ratios(mf.perceptron_resnet(V, W, float(L) ** -b), xx, yy).forward
                )
            )(jnp.asarray(betas))
            out.append(r)
        return jnp.stack(out)

    r = jax.jit(jax.vmap(one))(jr.split(key, S["draws"]))  # (draws, n_L, n_β)
    return np.transpose(np.asarray(r), (2, 1, 0))


top = max(S["phase_L"])
laws = {"iid": (mf.IIDGaussianLaw(D), 0.5), "smooth": (mf.SmoothGPLaw(D, 0.2), 1.0)}
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
for ax, (name, (law, theory)) in zip(axes, laws.items(), strict=True):
    r = ratios(law, jr.key(1))
    est = mf.critical_beta(betas, S["phase_L"], r, theory=theory, n_boot=200)
    for i, b in enumerate(betas):
        ax.loglog(S["phase_L"], np.median(r[i], axis=-1), "o-", label=f"β={b}")
    ax.set_title(f"{name}: β_c ≈ {est['estimate']:.2f} (theory {theory})")
    ax.set_xlabel("L")
    print(name, "critical beta", est["estimate"], "ci95", est["ci95"], est["phases"])
axes[0].set_ylabel("median ‖h_L − h_0‖/‖h_0‖")
axes[0].legend(fontsize=6)
show("critical_beta")

# %% [markdown]
# ## Hurst × β heatmap: β_c rises from 1/2 towards 1 with H

# %%
slopes, crit = [], []
for H in S["hursts"]:
    r = ratios(mf.FractionalBrownianLaw(D, H, top), jr.key(2))
    est = mf.critical_beta(betas, S["phase_L"], r, theory=max(H, 0.5), n_boot=100)
    slopes.append(np.clip(est["slopes"], -2, 2))
    crit.append(est["estimate"])
    print(f"H={H}: beta_c {est['estimate']} (theory max(H, 1/2) = {max(H, 0.5)})")
fig, ax = plt.subplots(figsize=(5, 3.5))
# one cell around each β value (not evenly spaced), meeting halfway; one row per H
im = ax.pcolormesh(
    cell_edges(betas),
    np.arange(len(S["hursts"]) + 1),
    np.array(slopes),
    cmap="coolwarm",
    vmin=-1,
    vmax=1,
)
ax.plot(
    [c if c is not None else np.nan for c in crit], np.arange(len(crit)) + 0.5, "k.-", label="β_c"
)
ax.set_yticks(np.arange(len(crit)) + 0.5, [str(h) for h in S["hursts"]])
ax.set_xlabel("β")
ax.set_ylabel("Hurst index H")
fig.colorbar(im, label="slope of log median ratio vs log L")
ax.legend()
show("phase_diagram")
