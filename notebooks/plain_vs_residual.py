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
# # Why residual connections make depth trainable (Batra's lecture on going deep)
#
# The lecture's claims, each measured here against its infinite-width prediction
# (`meanfield.models.plain`, `meanfield.theory.gradients`):
#
# 1. In a plain network `h^l = σ(W_l h^{l-1})` the backpropagated gradient is a product of
#    per-layer factors, `E‖p_{l-1}‖² = χ_l E‖p_l‖²` with `χ = σ_w² E[σ'(z)²]`: it vanishes
#    or explodes exponentially in depth. ReLU: `χ = σ_w²/2`, so Xavier (σ_w² = 1) halves
#    the squared norm per layer, He (σ_w² = 2) keeps it, N(0, 1) weights (σ_w² = N)
#    multiply it by N/2. Sigmoid: `σ' ≤ 1/4`, so `χ ≤ σ_w²/16`.
# 2. A residual connection gives the gradient a direct path: pre-activation
#    `h^l = h^{l-1} + α W_l σ(h^{l-1})` has `χ = 1 + α² σ_w² E[σ'²] ≥ 1`, and with
#    `α = 1/sqrt(L)` the product over L layers stays bounded as L grows.
# 3. Deeper plain networks train *worse* with the same budget (degradation); residual
#    ones do not.
#
# `meanfield study plain-vs-residual` runs all of it for four activations, three
# initialisations and three architectures, with fitted rates and intervals.
#
# Change `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"` for wider networks and more draws.

# %%
import math
import os

import jax
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

from meanfield.io.plotting import show
from meanfield.models import plain as P
from meanfield.theory import gradients as P_theory
from meanfield.training import plain as P_training

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": {"N": 64, "L": 8, "draws": 4, "train_L": [2, 8], "steps": 20},
    "cpu": {"N": 512, "L": 64, "draws": 16, "train_L": [2, 8, 32], "steps": 400},
    "gpu": {"N": 2048, "L": 256, "draws": 64, "train_L": [2, 8, 32, 128], "steps": 2000},
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]


def log_gradients(architecture, activation, init, alpha, key):
    """log ‖∂𝓛/∂h^l‖², l = 0..L, for 𝓛 = ⟨B, h^L⟩, over S["draws"] networks."""

    def one(k):
        k1, k2, k3 = jr.split(k, 3)
        net = P.LayeredNet.sample(k1, L=S["L"], N=S["N"], architecture=architecture,
                                  activation=activation, init=init, alpha=alpha)  # fmt: skip
        return 2 * net.gradient_log_norms(jr.normal(k2, (S["N"],)), jr.normal(k3, (S["N"],)))

    return np.asarray(jax.lax.map(jax.jit(one), jr.split(key, S["draws"])))


def predicted_curve(architecture, activation, init, alpha):
    """The prediction of log ‖p_l‖² − log ‖p_L‖² at every l (the last L − l layers)."""
    return np.array(
        [P_theory.predicted_log_ratio(architecture, activation, init, N=S["N"], L=S["L"] - l,
                               alpha=alpha)[0] if l < S["L"] else 0.0
         for l in range(S["L"] + 1)]
    )  # fmt: skip


# %% [markdown]
# ## 1. Plain ReLU networks: the initialisation sets the per-layer factor
#
# Each line is the mean over draws of `log10 ‖∂𝓛/∂h^l‖²` (normalised to 0 at l = L);
# the dotted line is the infinite-width prediction (for ReLU the recursion of the
# forward variances does not even enter: `χ = σ_w²/2` at every layer). The N(0, 1)
# curve leaves the plot: its factor is N/2 per layer.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
colors = {"normal": "tab:red", "xavier": "tab:blue", "he": "tab:green"}
for ax, act in zip(axes, ("relu", "sigmoid"), strict=True):
    kept = [1.0]  # the y-range: the Xavier and He curves whole, N(0, 1)'s may leave it
    for init, color in colors.items():
        g = log_gradients("plain", act, init, 1.0, jr.key(0))
        g = g - g[:, -1:]
        measured = g.mean(0) / math.log(10)
        predicted = predicted_curve("plain", act, init, 1.0) / math.log(10)
        ax.plot(measured, color=color, label=f"{init} (measured)")
        ax.plot(predicted, ":", color=color, label=f"{init} (infinite width)")
        if init != "normal":
            kept += [float(np.max(np.abs(measured))), float(np.max(np.abs(predicted)))]
    ax.set_xlabel("layer l")
    ax.set_ylabel("log10 ‖∂L/∂h^l‖² − log10 ‖∂L/∂h^L‖²")
    ax.set_title(f"plain {act} network, N = {S['N']}, L = {S['L']}")
    ax.set_ylim(-1.3 * max(kept), 1.3 * max(kept))
    ax.legend(fontsize=7)
fig.tight_layout()
show("plain_gradients")

# %% [markdown]
# Sigmoid vanishes under every initialisation: even with He's σ_w² = 2 the factor is
# `2 E[σ'(z)²] ≤ 2/16`. ReLU with He initialisation is the one plain network whose
# gradient neither vanishes nor explodes at initialisation.
#
# ## 2. The residual path: α = 1 against α = 1/sqrt(L)

# %%
fig, ax = plt.subplots(figsize=(6, 4))
for alpha, style in ((1.0, "-"), (1 / math.sqrt(S["L"]), "--")):
    for arch in ("pre-activation", "post-activation"):
        g = log_gradients(arch, "relu", "he", alpha, jr.key(1))
        g = g - g[:, -1:]
        ax.plot(g.mean(0) / math.log(10), style, label=f"{arch}, α = {alpha:.3g}")
ax.set_xlabel("layer l")
ax.set_ylabel("log10 ‖∂L/∂h^l‖² − log10 ‖∂L/∂h^L‖²")
ax.set_title(f"ReLU residual networks, He init, N = {S['N']}, L = {S['L']}")
ax.legend(fontsize=8)
fig.tight_layout()
show("residual_gradients")

# %% [markdown]
# With α = 1 the identity path does not prevent growth: each layer adds α²σ_w²E[σ'²]
# to the factor, so the gradient explodes like `2^L` for He. With α = 1/sqrt(L) the
# product `Π (1 + σ_w² E[σ'²]/L)` tends to a constant: the ratio below stays bounded
# as the depth grows.

# %%
for L in (8, 32, 128):
    pred, _ = P_theory.predicted_log_ratio("pre-activation", "relu", "he", N=S["N"], L=L,
                                    alpha=1 / math.sqrt(L))  # fmt: skip
    print(f"L = {L:4d}: predicted ‖∂L/∂h^0‖/‖∂L/∂h^L‖ = {math.exp(pred / 2):.3f}")

# %% [markdown]
# ### Where the infinite-width formula is not enough
#
# With N(0, 1) weights (σ_w² = N) there is no infinite-width limit. Under tanh the states
# grow like sqrt(l N), and only about sqrt(N/l) coordinates of h^l sit where σ' ≠ 0: each
# layer's factor is a sum of few terms, and the mean of its logarithm (what a log-scale
# gradient plot measures) lies below the logarithm of its mean, `log χ_l`, by
# O(sqrt(l/N)). `P_theory.finite_width_log_ratios` evaluates the same independence model at the
# network's own width. Below, the first L' layers of the networks: `log ‖∂L/∂h^0‖² −
# log ‖∂L/∂h^{L'}‖²` is the sum of their factors.

# %%
g = log_gradients("pre-activation", "tanh", "normal", 1.0, jr.key(4))
depths = list(range(1, S["L"] + 1))
measured = (g[:, :1] - g[:, 1:]).mean(0)  # layers 1..L'
infinite = [P_theory.predicted_log_ratio("pre-activation", "tanh", "normal", N=S["N"], L=L)[0]
            for L in depths]  # fmt: skip
width_n = P_theory.finite_width_log_ratios("pre-activation", "tanh", "normal", N=S["N"], Ls=depths,
                                    alphas=[1.0] * S["L"])  # fmt: skip
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(depths, measured, "o", ms=3, label=f"measured (mean over {S['draws']} draws)")
ax.plot(depths, infinite, "k:", label="infinite-width formula Σ log χ_l")
ax.plot(depths, width_n, "C3--", label=f"same model at width N = {S['N']} (mean of log)")
ax.set_xlabel("layers from the input, L'")
ax.set_ylabel("log ‖∂L/∂h^0‖² − log ‖∂L/∂h^{L'}‖²")
ax.set_title(f"pre-activation tanh, N(0, 1) weights, N = {S['N']}", fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
show("tanh_gradients")

# %% [markdown]
# ## 3. Degradation: deeper plain networks train worse, residual ones do not
#
# The same teacher classification task, the same budget (full-batch Adam), ReLU and He
# initialisation; the residual network is pre-activation with α = 1/sqrt(L).

# %%
data = P.teacher_task(jr.key(2))
fig, ax = plt.subplots(figsize=(6, 4))
for arch, alpha_of in (("plain", lambda L: 1.0), ("pre-activation", lambda L: 1 / math.sqrt(L))):
    finals = []
    for L in S["train_L"]:
        model = P.Classifier.sample(jr.key(3), d_in=16, classes=4, L=L, N=48, architecture=arch,
                                    activation="relu", init="he", alpha=alpha_of(L))  # fmt: skip
        model, losses, acc = jax.jit(
            lambda m: P_training.train_classifier(m, data, steps=S["steps"], lr=1e-3)
        )(model)
        finals.append(float(P.cross_entropy(model, data[0], data[1])))
        print(
            f"{arch:15s} L = {L:3d}: training loss {finals[-1]:.4f}, test accuracy {float(acc):.3f}"
        )
    ax.plot(S["train_L"], finals, "o-", label=arch)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("depth L")
ax.set_ylabel(f"training loss after {S['steps']} Adam steps")
ax.legend()
fig.tight_layout()
show("degradation")
