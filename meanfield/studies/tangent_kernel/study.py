"""`meanfield study tangent-kernel`: the tangent kernel at initialisation (docs: Mathematics §5.1).

The empirical tangent kernel of finite ResNets against the shallow kernel
`α² Σ_{j,l} D_2φ(x, z^{j,l}) D_2φ(x', z^{j,l})ᵀ` of M·L units, for α = L^{-γ}/sqrt(M):
their relative difference shrinks as `M L α² = L^{1−2γ} → 0` (γ > 1/2), and not at γ = 1/2.
"""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...blocks.two_layer import TwoLayerBlock
from ...harness.args import UNIT_OPTIONS, check_unit_arguments
from ...harness.runner import start_study
from ...io.plotting import loglog_series, save_figure, series_by, use_agg
from ...laws.unit import TwoLayerGaussianLaw
from ...models.resnet import ResNet
from ...runtime.errors import StudyInputError
from ...stats.fits import fit_points, fit_verdict, interval_text, summarize
from ...theory.tangent import relative_difference
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


def configure(args) -> dict:
    """The configuration from the options: the unit options (`UNIT_OPTIONS`) and the
    networks per point, refused in one line before anything is written."""
    check_unit_arguments(args)
    if args.nets is not None and args.nets < 2:
        raise StudyInputError(f"--nets: need at least 2 networks for a spread, got {args.nets}")
    return {
        **{name: getattr(args, name) for name in UNIT_OPTIONS},
        "nets": args.nets or PRESETS[args.preset]["nets"],
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`; the launcher checks it before `run`) of the
    points: every network of a point at once (vmapped), with the Jacobians of h^L at both
    inputs in every parameter of its L·M units, for the kernel and for its shallow
    approximation (4 × d × L·M·2d numbers)."""
    from ...harness.args import PYTHON_STEP, Cost

    d, M, nets, width = cfg["d"], cfg["M"], cfg["nets"], 8 if cfg["x64"] else 4
    L = max(cfg["L"])
    params = 2 * d  # u and v of a 2LP unit
    per_net = L * M * (4 * d * params + 3 * params) + 4 * (L + 1) * d * d
    # the adjoint pass per output direction (2 inputs, d directions, twice) and the Grams
    per_unit = 4 * d * 12 * params + 2 * 2 * d * d * params
    return [
        Cost(
            "--L/--M/--d/--nets/--gammas",
            "the networks of the deepest point",
            memory=width * nets * per_net,
            work=len(cfg["gammas"])
            * math.fsum(nets * Lk * M * per_unit + PYTHON_STEP for Lk in cfg["L"]),
            elements=nets * d * L * M * params,
            array="the Jacobians of a point's networks, (nets, d, L, M, 2d)",
            memory_flags="--L/--M/--d/--nets",
        )
    ]


def run(args, cfg):
    runner = start_study(args, cfg)
    d = cfg["d"]
    block = TwoLayerBlock(cfg["activation"])
    law = TwoLayerGaussianLaw(d, sigma_u=1 / math.sqrt(d), sigma_v=1.0)
    # two unit inputs at 45°: orthogonal inputs would make both kernels ~0 for odd ρ
    x = jnp.zeros(d).at[0].set(1.0)
    x2 = jnp.zeros(d).at[0].set(1.0).at[1].set(1.0) / math.sqrt(2.0)
    master = jr.key(cfg["seed"])

    def point(spec):
        L, g, M = spec["L"], spec["gamma"], cfg["M"]
        alpha = L ** (-g) / math.sqrt(M)

        def one(k):
            net = ResNet.sample(block, law, L=L, M=M, scaling=alpha, key=k)
            return relative_difference(net, x, x2)

        # γ on a 1e-6 grid (int(1000γ) put 1 and 1.001 on the same networks)
        keys = jr.split(jr.fold_in(jr.fold_in(master, L), round(1e6 * g)), cfg["nets"])
        rel = np.asarray(jax.jit(jax.vmap(one))(keys))
        return {"alpha": alpha, "MLalpha2": M * L * alpha**2, "relative_difference": summarize(rel)}

    specs = [{"L": L, "gamma": g} for g in cfg["gammas"] for L in cfg["L"]]
    points = runner.run_points(specs, point, describe=lambda s: f"L={s['L']} γ={s['gamma']}")
    fits = []
    for g in cfg["gammas"]:
        rows = sorted((p for p in points if p["gamma"] == g), key=lambda p: p["L"])
        # γ > 1/2: against M L α², slope 1/2; else against L, slope 0 (exploded draws: counted)
        against, theory = ("MLalpha2", 0.5) if g > 0.5 else ("L", 0.0)
        fixed = {"gamma": g}
        fits.append(
            fit_points(
                rows, "relative_difference", against, fixed=fixed, theory=theory, seed=cfg["seed"]
            )
        )
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "reference": {
                "kernel": "empirical tangent kernel from the explicit backward pass "
                "(tested against jax.jacrev)",
                "error_estimate": 0.0,
                "theory_note": "first order: the forward and backward passes deviate "
                "from the identity by O(sqrt(M L alpha^2)), hence slope 1/2",
            },
        },
        plot=plot,
    )


def plot(out, results) -> None:
    """The figure from `results.json` alone (`meanfield plot DIR`)."""
    _figure(out, results["config"], results["points"], results.get("fits") or [])


def _figure(out, cfg, points, fits=()):
    """One series per γ against M L α², with its fitted slope (dashed, interval in the
    legend) and the theory slope 1/2 (dotted) where M L α² varies; γ = 1/2 sits at
    M L α² = 1 for every L (its fit is against L, theory 0: no growth with depth), so a
    second panel draws every point against L."""
    from ...io.plotting import size_ticks

    use_agg()
    import matplotlib.pyplot as plt

    fig, (ax, ax_L) = plt.subplots(1, 2, figsize=(11, 4.3))
    # every γ with a finished point (the configured ones first, in their order)
    for g, color, rows in series_by(points, "gamma", cfg["gammas"]):
        # on the log axis a bar that would go below zero (std > mean) ends at mean / 1000
        fit = next((f for f in fits if f.get("fixed", {}).get("gamma") == g), None)
        label = f"γ={g}"
        fit_L = None
        if fit is not None and fit.get("against") == "L" and fit.get("slope") is not None:
            ci = fit.get("ci95") or [float("nan")] * 2
            slope = f"slope vs L {interval_text(fit['slope'], ci)}"
            verdict = "≠ theory" if fit_verdict(fit) == "outside" else "theory"
            label += f" (M L α² = 1: {slope}, {verdict} {fit.get('theory', 0):g})"
            fit, fit_L = None, fit
        means = [p["relative_difference"]["mean"] for p in rows]
        stds = [p["relative_difference"]["std"] for p in rows]
        loglog_series(
            ax,
            [p["MLalpha2"] for p in rows],
            means,
            stds,
            color=color,
            label=label,
            fit=fit,
            theory=fit.get("theory") if fit else None,
        )
        loglog_series(ax_L, [p["L"] for p in rows], means, stds, color=color, label=f"γ={g}",
                      fit=fit_L)  # fmt: skip
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="M L α²",
        ylabel="‖K − K_shallow‖ / ‖K‖ (mean over networks)",
    )
    ax.set_title(
        "tangent kernel vs the shallow M·L-unit kernel, against M L α²\n(dashed: fitted "
        "slope; dotted: theory 1/2; bars: ×/÷ the networks' geometric spread)",
        fontsize=9,
    )
    ax.legend(fontsize=7)
    ax_L.set(xscale="log", yscale="log", xlabel="depth L", ylabel=ax.get_ylabel())
    size_ticks(ax_L, [p["L"] for p in points])
    ax_L.set_title("the same points against depth\n(dashed: the slope fitted against L)",
                   fontsize=9)  # fmt: skip
    ax_L.legend(fontsize=7)
    save_figure(fig, Path(out) / "tangent_kernel.png", dpi=120)
