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
# # Optimal residual scaling α*: response functions at initialisation
#
# Fischer, Dahmen & Helias (docs: Mathematics §5).
#
# The infinite-width recursion for a ResNet `h^l = h^{l−1} + α (W^l φ(h^{l−1}) + b^l)`
# (erf, published setting `K^0 = 0.05, σ_w² = 1.25, σ_b² = 0.05`) gives the kernels
# `K^l`, the residual kernels `C^l`, the responses `χ^l = ∂K^l/∂K^0` and the output
# response `χ^out`. Its argmax over α is the optimal scaling α*, compared with the
# saturation formula and its large-L form, and a finite-width simulation is drawn over
# the theory. `meanfield study response` writes the same figures with results.json.
#
# Change `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"` for the paper's widths and
# number of initialisations.

# %%
import os

import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.io.plotting import show
from meanfield.theory.alpha_star import saturation_asymptotic, saturation_formula
from meanfield.theory.gaussian import DEFAULT_ORDER
from meanfield.theory.response import output_response_curve

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    # order: the Gauss-Hermite nodes of the theory's Gaussian expectations (default 2048,
    # half this size's time); at 512 what it prints is the same, its curves within 0.5%
    "test": dict(width=60, d_out=10, inits=40, depths=[2, 5, 10], order=512),
    "cpu": dict(width=500, d_out=100, inits=300, depths=[2, 5, 10, 20, 30]),
    "gpu": dict(width=500, d_out=100, inits=2000, depths=[2, 5, 10, 20, 30]),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]
ORDER = S.get("order", DEFAULT_ORDER)
P = dict(K0=0.05, sigma_w2=1.25, sigma_b2=0.05)

# %% [markdown]
# ## χ^out against α for several depths, and α* against L

# %%
alphas = jnp.linspace(0.01, 1.5, 300)
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
rows = []
for L in S["depths"]:
    a1.plot(alphas, output_response_curve(alphas, L=L, order=ORDER, **P), label=f"L={L}")
    star, _ = mf.optimal_scaling(L=L, order=ORDER, **P)
    formula = float(saturation_formula(L, **P))
    rows.append((L, float(star), formula, float(saturation_asymptotic(L, **P))))
    print(
        f"L={L:3d}  alpha* numeric {float(star):.4f}  formula {formula:.4f}  "
        f"rel. diff {formula / float(star) - 1:+.1%}"
    )
a1.set_xlabel("α")
a1.set_ylabel("χ^out")
a1.legend()
Ls = np.array([r[0] for r in rows])
a2.loglog(Ls, [r[1] for r in rows], "o", label="numeric argmax")
fine = np.arange(2, max(Ls) + 1)
a2.loglog(fine, [float(saturation_formula(int(L), **P)) for L in fine], "-", label="formula")
a2.loglog(
    fine, [float(saturation_asymptotic(int(L), **P)) for L in fine], "--", label="large-L form"
)
a2.set_xlabel("L")
a2.set_ylabel("α*")
a2.legend()
show("alpha_star")

# %% [markdown]
# ## Collapse after rescaling α σ_w (Fischer, Dahmen & Helias, Figure 5)

# %%
fig, ax = plt.subplots(figsize=(5, 3.5))
for sw2 in (0.5, 1.25, 2.5):
    chi = output_response_curve(alphas, L=10, K0=0.05, sigma_w2=sw2, sigma_b2=0.05, order=ORDER)
    ax.plot(alphas * np.sqrt(sw2), chi / chi.max(), label=f"σ_w² = {sw2}")
ax.set_xlabel("α σ_w")
ax.set_ylabel("χ^out / max")
ax.legend()
show("response_curves")

# %% [markdown]
# ## Finite width against the theory: residual kernels C^l and responses χ^l

# %%
L = max(S["depths"])
fig, (c_ax, x_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
for i, alpha in enumerate((0.1, rows[-1][1], 0.5)):  # independent initialisations per α
    th = mf.response(alpha, L=L, order=ORDER, **P)
    key = jr.fold_in(jr.key(0), i)
    sim = mf.simulate_response(
        alpha, L=L, **P, width=S["width"], d_out=S["d_out"], inits=S["inits"], key=key
    )
    layers = np.arange(L + 1)
    (line,) = c_ax.plot(layers, th.C, label=f"α={alpha:.3f}")
    c_ax.errorbar(
        layers,
        sim.C.mean(0),
        2 * sim.C.std(0) / np.sqrt(S["inits"]),
        fmt=".",
        color=line.get_color(),
    )
    x_ax.plot(layers, th.chi, color=line.get_color())
    x_ax.errorbar(
        layers,
        sim.chi.mean(0),
        2 * sim.chi.std(0) / np.sqrt(S["inits"]),
        fmt=".",
        color=line.get_color(),
    )
    z = (sim.chi.mean(0) - th.chi) / (sim.chi.std(0) / np.sqrt(S["inits"]) + 1e-30)
    print(f"alpha={alpha:.3f}: max |z| of chi^l over layers {float(jnp.max(jnp.abs(z[1:]))):.2f}")
c_ax.set_xlabel("layer l")
c_ax.set_ylabel("C^l")
c_ax.set_yscale("log")
c_ax.legend()
x_ax.set_xlabel("layer l")
x_ax.set_ylabel("χ^l")
show("signal_propagation")
