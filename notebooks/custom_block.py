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
# # Your own residual unit, its mean-ODE limit and its convergence — no derivative written
#
# The extension point of meanfield is the unit block `φ(h, z)`. Here a *sine unit with
# a phase*, `φ(h, z) = a · sin(wᵀh + c)`, not a two-layer perceptron. We write its
# forward map and its initial law, and get the finite ResNet, its backward pass, the
# mean-ODE limit with its adjoint, GD in both, and the coupled convergence plot.
# Change `SIZE` to `"gpu"` for a larger study.

# %%
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import matplotlib.pyplot as plt
import numpy as np

import meanfield as mf
from meanfield.io import plotting as mf_plot
from meanfield.io.plotting import show

jax.config.update("jax_enable_x64", True)
SIZE = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "cpu")
SIZES = {
    "test": dict(L=[4, 8, 16], M=[1, 8, 64], big_M=1024, seeds=4, order=16),
    "cpu": dict(L=[8, 16, 32, 64], M=[1, 4, 16, 64], big_M=16384, seeds=8, order=40),
    "gpu": dict(
        L=[8, 16, 32, 64, 128, 256], M=[1, 4, 16, 64, 256], big_M=262144, seeds=32, order=40
    ),
}
if SIZE not in SIZES:
    raise SystemExit(f"MEANFIELD_NOTEBOOK_SIZE must be one of {', '.join(SIZES)}, got {SIZE!r}")
cfg = SIZES[SIZE]

# %% [markdown]
# ## 1. The block and its law (the only code a user writes)
# The law is the image of a standard Gaussian: `w ~ N(0, σ² I)`, `a = w`, `c ~ N(0, τ²)`.
# Declaring it as an `AbstractGaussianLaw` (a `transform` of standard normal
# coordinates) lets the limit use Gauss–Hermite quadrature; any `key -> z` sampler
# (`mf.SamplerLaw`) works too, with Monte-Carlo particles.

# %%


class SineUnit(mf.AbstractUnitBlock):
    def __call__(self, h, z):
        return z["a"] * jnp.sin(z["w"] @ h + z["c"])


class SineLaw(mf.AbstractGaussianLaw):
    d: int = eqx.field(static=True)
    sigma: float = eqx.field(static=True, default=1.0)
    tau: float = eqx.field(static=True, default=0.5)

    @property
    def gaussian_dim(self):
        return self.d + 1

    def transform(self, g):
        w = self.sigma * g[: self.d]
        return {"w": w, "a": w, "c": self.tau * g[self.d]}


d = 2
block, law = SineUnit(), SineLaw(d)

# %% [markdown]
# ## 2. A finite network, its backward pass, and a check against `jax.grad`

# %%
key = jr.key(0)
net = mf.ResNet.sample(block, law, L=16, M=32, scaling=mf.MeanODEScaling(), key=key)
x, w = jnp.array([1.0, 0.0]), jnp.array([0.3, -1.0])
adjoint = net.adjoint(x[None], w[None])  # the explicit recursion (B), for a batch of one
b0 = jax.grad(lambda x_: w @ net(x_))(x)
gap = float(jnp.max(jnp.abs(adjoint.b[0, 0] - b0)))
print("h^L =", net(x), "| b^0 recursion - jax.grad:", gap)

# %% [markdown]
# ## 3. The mean-ODE limit, its adjoint and one GD step in L²

# %%
theta = jnp.pi * (jnp.arange(3) + 0.5) / 3
xs = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
ys = 0.5 * xs[:, ::-1]
lr, steps = 0.5, 1
particles = mf.gauss_hermite_particles(law, cfg["order"])
limit = mf.solve_mean_ode(mf.MeanODE(block, particles, xs, ys, lr), steps)
print("limit loss before and after one GD step:", float(limit.loss(0)), float(limit.loss(1)))
s = jnp.linspace(0, 1, 101)
fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
for i in range(3):  # one colour per input; solid before the GD step, dashed after
    (line,) = ax[0].plot(*np.asarray(limit.h(0, s)[:, i]).T, label=f"x_{i}, k=0")
    ax[0].plot(*np.asarray(limit.h(1, s)[:, i]).T, "--", color=line.get_color(),
               label=f"x_{i}, k=1")  # fmt: skip
    ax[1].plot(s, np.linalg.norm(np.asarray(limit.b(0, s)[:, i]), axis=-1),
               color=line.get_color(), label=f"x_{i}")  # fmt: skip
ax[0].set(title="limit trajectories h(s) in the plane", xlabel="h₁(s)", ylabel="h₂(s)")
ax[1].set(title="‖b(s)‖: the adjoint, solved backward (k=0)", xlabel="depth s",
          ylabel="‖b(s)‖")  # fmt: skip
ax[0].legend(fontsize=6)
ax[1].legend(fontsize=6)
fig.tight_layout()
show("trajectories")

# %% [markdown]
# ## 4. Convergence of the coupled finite networks

# %%


def coupled(L, M, k):
    grid = mf.limit_on_grid(limit, L)

    @jax.jit
    def run(keys):
        def one(kk):
            n = mf.ResNet.sample(block, law, L=L, M=M, scaling=mf.MeanODEScaling(), key=kk)
            return mf.coupled_errors(n, xs, ys, grid, learning_rate=lr).delta_h[steps]

        return jax.vmap(one)(keys)

    return np.asarray(run(jr.split(k, cfg["seeds"])))


vs_L = [coupled(L, cfg["big_M"], jr.fold_in(key, L)) for L in cfg["L"]]
vs_M = [coupled(max(cfg["L"]), M, jr.fold_in(key, 10_000 + M)) for M in cfg["M"]]
fit_L = mf.fit_loglog(cfg["L"], vs_L, quantity="delta_h", against="L", theory=-1.0)
fit_M = mf.fit_loglog(cfg["M"], vs_M, quantity="delta_h", against="M", theory=-0.5)
# mean and std over the seeds that did not explode
sum_L, sum_M = [mf.summarize(v) for v in vs_L], [mf.summarize(v) for v in vs_M]
fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
panels = (
    (cfg["L"], sum_L, fit_L, "L", f"M={cfg['big_M']}"),
    (cfg["M"], sum_M, fit_M, "M", f"L={max(cfg['L'])}"),
)
for a, (sizes, summ, fit, name, fixed) in zip(ax, panels, strict=True):
    # the mean over seeds; on a log axis the bars are the seeds' geometric spread
    mf_plot.loglog_series(a, sizes, [s["mean"] for s in summ], [s["std"] for s in summ],
                          fit=fit, theory=fit["theory"], label=fixed)  # fmt: skip
    lo, hi = fit["ci95"] or (float("nan"), float("nan"))
    title = (f"$\\Delta^h$, {fixed}: slope {fit['slope']:.2f} [{lo:.2f}, {hi:.2f}], "
             f"theory {fit['theory']:g}")  # fmt: skip
    if not lo <= fit["theory"] <= hi:  # a small run: say so on the figure
        title += f"\n(too few seeds and sizes at SIZE={SIZE!r} to resolve it)"
    a.set(xlabel=name, title=title)
    a.title.set_fontsize(8)
    a.legend(fontsize=6)
ax[0].set_ylabel(f"$\\Delta^h$ after {steps} GD step (mean over seeds)")
fig.suptitle("bars: ×/÷ the seeds' geometric spread; dashed: fit; dotted: theory", fontsize=8)
fig.tight_layout()
show("convergence")
