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
# # Chaintron's two-layer perceptron: the baseline of the joint L, M, D limit
#
# `f(x) = (1/D) W_outᵀ (1/M) Σ_j v^j ρ(⟨u^j, W_in x⟩_D)`, trained by GD with the seed's
# `η · D · M · ∇` on u and v (W_in, W_out frozen). Seed 002 proves that it converges to
# its fixed-D mean-field limit at rate `sqrt(D/M)` and, as D → ∞, to a second limit
# (skeleton maps, cavity method) at rate `1/sqrt(D)`; "converges iff D/M → 0, which does
# not hold for deep ResNets".
#
# What this notebook shows, with exact references (`meanfield.models.perceptron`,
# `meanfield.limits.perceptron`):
#
# 1. The network is a system of M particles `(p^j, a^j) = (⟨u^j, h^0(x_i)⟩_D,
#    W_outᵀ v^j / D)` in `R^{n + d_out}`, whose law depends on the embedding only through
#    two Gram matrices. Both limits are therefore low-dimensional Gaussian integrals,
#    solved by quadrature with a stated error.
# 2. The **outputs** converge at `1/sqrt(M)` *whatever D*; the **hidden field** in R^D at
#    `sqrt(D/M)`: the seed's bound is attained by h, not by f.
# 3. The fixed-D limit reaches the D → ∞ limit at `1/sqrt(D)`.
#
# The deep case (`meanfield study shapes`, the joint L, M, D limit) has no such reduction:
# there the hidden states themselves are D-dimensional and the D/(LM) term is the open
# question. `meanfield study two-layer` runs the full study (scaling criteria and lazy
# regime too) and writes its figures with results.json.
#
# Change `SIZE` (or `MEANFIELD_NOTEBOOK_SIZE`) to `"gpu"` for more draws and widths.

# %%
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

from meanfield.coupling import perceptron as shallow_coupling
from meanfield.io.plotting import loglog_series, show, size_ticks
from meanfield.limits import perceptron as shallow_limits
from meanfield.models import perceptron as shallow
from meanfield.models.embedding import Embedding, norm_d
from meanfield.stats import fit_loglog
from meanfield.training import perceptron as shallow_training

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    # order: the limits' Gauss-Hermite nodes per dimension (`gaussian_limit`'s default, 64,
    # solves 64^3 and 96^3 particles per limit, most of this size's time); at 24 a limit's own
    # error (printed below, ~1e-4) stays far below every error it is compared with
    "test": dict(draws=3, widths=[64, 256], dims=[4, 16], big_dims=[16, 256], order=24),
    "cpu": dict(draws=12, widths=[128, 512, 2048], dims=[8, 32, 128], big_dims=[16, 256, 4096]),
    "gpu": dict(
        draws=32,
        widths=[128, 512, 2048, 8192],
        dims=[8, 32, 128, 512],
        big_dims=[16, 256, 4096, 65536],
    ),  # fmt: skip
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
S = SIZES[SIZE]
X = jnp.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])  # two inputs in R^3
Y = jnp.array([[1.0], [-0.5]])
GD = dict(lr_u=0.5, lr_v=0.5, steps=5)
ORDER = S.get("order")  # None: `gaussian_limit`'s default

# %% [markdown]
# ## The reduction: a network in R^D is M particles in R^3
#
# Train one perceptron (M = 64, D = 32) with `jax.grad`, then run the reduced recursion on
# its particles: the outputs agree to rounding.

# %%
net = shallow.Perceptron.sample(jr.key(0), M=64, D=32, d_in=3, d_out=1)
_, f_net, _ = shallow_training.train(net, X, Y, **GD)
p0, a0 = shallow.reduce(net, X)
g_in, g_out = net.embedding.grams(X)
red = shallow_limits.particle_dynamics(p0, a0, jnp.full(64, 1 / 64), g_in, g_out, Y, "tanh", **GD)
print("max |network − reduced particles| over steps:", float(jnp.max(jnp.abs(red.outputs - f_net))))

# %% [markdown]
# ## Width: finite networks against their fixed-D limit (same embedding draw)

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for D in S["dims"]:
    out_err, hid_err = [], []  # per width, the errors of every draw
    for M in S["widths"]:
        o, h = [], []
        for i in range(S["draws"]):
            key = jr.fold_in(jr.key(1), 1000 * D + i)
            emb = Embedding.sample(key, D, 3, 1)
            lim = shallow_limits.gaussian_limit(*emb.grams(X), Y, order=ORDER, **GD)
            net = shallow.Perceptron.sample(jr.fold_in(key, M), M=M, D=D, d_in=3, d_out=1)
            net = eqx.tree_at(lambda n: n.embedding, net, emb)
            _, f, hid = shallow_training.train(net, X, Y, **GD)
            o.append(float(shallow_coupling.output_error(f[-1], lim.outputs[-1])))
            h.append(float(jnp.max(norm_d(hid[-1] - lim.hidden_coef[-1] @ emb.w_out.T))))
        out_err.append(o)
        hid_err.append(h)
    # mean over draws with bars ×/÷ their geometric spread, the fitted slope (dashed, its
    # 95% interval over the draws) and the theory's (dotted)
    for ax, x, errors, theory, against in (
        (axes[0], S["widths"], out_err, -0.5, "M"),
        (axes[1], [D / M for M in S["widths"]], hid_err, 0.5, "D/M"),
    ):
        fit = fit_loglog(x, errors, quantity="error", against=against, theory=theory)
        loglog_series(ax, x, [np.mean(e) for e in errors], [np.std(e) for e in errors],
                      fit=fit, theory=theory, label=f"D={D}")  # fmt: skip
axes[0].set(xlabel="width M", ylabel=r"$\max_i |\hat f_5 - f_5|$ (mean over draws)",
            title="outputs (dotted: theory ~ 1/sqrt(M), the same for every D)")  # fmt: skip
axes[1].set(xlabel="D/M", ylabel=r"$\max_i \|\hat h_5 - h_5\|_D$ (mean over draws)",
            title="hidden field (dotted: theory ~ sqrt(D/M), the curves collapse)")  # fmt: skip
size_ticks(axes[0], S["widths"])
size_ticks(axes[1], [D / M for D in S["dims"] for M in S["widths"]])
axes[0].legend(fontsize=7)
axes[1].legend(fontsize=7, loc="lower right")
fig.tight_layout()
show("rates")

# %% [markdown]
# ## Dimension: the fixed-D limit against the D → ∞ limit (skeleton maps / cavity)

# %%
inf = shallow_limits.gaussian_limit(*shallow_limits.infinite_d_grams(X, 1), Y, order=ORDER, **GD)
print(f"D → ∞ limit: {inf.method}, own error {inf.error_outputs:.1e}")
errs = []  # per D, the errors of every draw
for D in S["big_dims"]:
    e = []
    for i in range(S["draws"]):
        emb = Embedding.sample(jr.fold_in(jr.key(2), 1000 * D + i), D, 3, 1)
        lim = shallow_limits.gaussian_limit(*emb.grams(X), Y, order=ORDER, **GD)
        e.append(float(shallow_coupling.output_error(lim.outputs[-1], inf.outputs[-1])))
    errs.append(e)
fit = fit_loglog(S["big_dims"], errs, quantity="error", against="D", theory=-0.5)
print(f"slope of the output error against D: {fit['slope']:.2f} (theory −1/2)")
fig, ax = plt.subplots(figsize=(5, 3.5))
loglog_series(ax, S["big_dims"], [np.mean(x) for x in errs], [np.std(x) for x in errs],
              fit=fit, theory=-0.5, label="fixed-D − D→∞ limit")  # fmt: skip
ax.axhline(inf.error_outputs, color="gray", linestyle="--", label="limit's own error")
ax.set(xlabel="D", ylabel=r"$\max_i |f_5^{(D)} - f_5^{(\infty)}|$ (mean over draws)",
       title="dashed: fitted slope; dotted: theory −1/2")  # fmt: skip
size_ticks(ax, S["big_dims"])
ax.legend(fontsize=7)
show("embedding_limit")
