"""`meanfield study response`: response function and optimal residual scaling
(docs: Mathematics §5.2).

Reproduces Fischer, Dahmen & Helias: the infinite-width kernels and responses of ResNets
and feed-forward nets (their Figure 2), the output response χ^out against α for several
depths, the optimal scaling α* = argmax χ^out against the saturation formula and its
large-L form (Figure 4), and the collapse of χ^out in the rescaled α σ_w (Figure 5). A
finite-width Monte Carlo (N = 500, many initialisations) is compared with the theory
layer by layer, in standard errors, and gives a simulated α* with a bootstrap interval.

Why this file is long: it is one study (options, configuration, cost, the theory part,
the simulated part, run); the paper's settings are in `paper.py`, its figures in
`plot.py`.
"""

import math
import time
from typing import Any

import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...diagnostics.signal_propagation import simulate_response
from ...harness.args import (
    check_activation,
    check_scale,
    check_size,
)
from ...harness.runner import start_study
from ...runtime.errors import StudyInputError
from ...stats.fits import (
    fit_loglog,
    judge_theory,
    parabola_argmax,
    parabola_argmax_interval,
    theory_inside,
)
from ...theory.alpha_star import optimal_scaling, saturation_asymptotic, saturation_formula
from ...theory.gaussian import DEFAULT_ORDER, K_ACCURATE
from ...theory.response import FIG2, FIG5_SIGMA_B2, FIG5_SIGMA_W2, output_response_curve, response
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from . import paper as response_paper
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

ALPHA_GRID = np.geomspace(0.01, 1.5, 400)
# the deepest network taken: the theory's curves run every depth up to 2·L_max, at
# about THEORY_SECONDS_PER_DEPTH each on a 2-core CPU (L_max = 480: 44 s), so 1000
# takes minutes (the paper's figures stop at 30)
MAX_DEPTH = 1000
MAX_ALPHA = 10.0  # the residual scale α: the sources' α* lie below 1
# the largest variance (σ_w², σ_b², K^0) taken
MAX_VARIANCE = 1e6
THEORY_SECONDS_PER_DEPTH = 0.05
FIG4C_K0 = (0.02, 0.05, 0.1, 0.2)  # input kernels of the simulated α* of Figure 4(c)


# options of the simulation only (refused with --no-simulate) and their defaults
SIMULATION_OPTIONS = {
    "width": ("--width", 500),
    "d_out": ("--d-out", 100),
    "inits": ("--inits", None),
    "alpha_star_inits": ("--alpha-star-inits", None),
    "alphas": ("--alphas", None),
    "method": ("--method", "gaussian-identity"),
}


def configure(args) -> dict:
    """The options, every value checked (StudyInputError), and α* found at every depth (the
    study is built around it), before anything is written."""
    if args.no_simulate:
        for name, (flag, _) in SIMULATION_OPTIONS.items():
            if getattr(args, name, None) is not None:
                raise StudyInputError(f"{flag}: sets the simulation, not used with --no-simulate")
    given = {
        name: default if getattr(args, name, None) is None else getattr(args, name)
        for name, (_, default) in SIMULATION_OPTIONS.items()
    }
    cfg = {
        "sigma_w2": args.sigma_w2,
        "sigma_b2": args.sigma_b2,
        "K0": args.K0,
        "depths": args.depths,
        "width": given["width"],
        "d_out": given["d_out"],
        "inits": args.inits or PRESETS[args.preset]["inits"],
        "alpha_star_inits": args.alpha_star_inits or PRESETS[args.preset]["alpha_star_inits"],
        "alphas": args.alphas,
        "activation": args.activation,
        "method": given["method"],
        "simulate": not args.no_simulate,
        "preset": args.preset,
        "seed": args.seed,
        "x64": args.x64,
        "quadrature_order": DEFAULT_ORDER,
    }
    check_activation(cfg["activation"])
    for name, flag in (("sigma_w2", "--sigma-w2"), ("sigma_b2", "--sigma-b2"), ("K0", "--K0")):
        if abs(cfg[name]) > MAX_VARIANCE:
            raise StudyInputError(
                f"{flag}: at most {MAX_VARIANCE:g} (the kernel recursion overflows beyond), "
                f"got {cfg[name]:g}"
            )
    if not (math.isfinite(cfg["sigma_b2"]) and cfg["sigma_b2"] >= 0):
        raise StudyInputError(f"--sigma-b2: must be a finite number >= 0, got {cfg['sigma_b2']}")
    if cfg["alphas"] is not None and any(a <= 0 for a in cfg["alphas"]):
        raise StudyInputError(f"--alphas: values must be > 0, got {cfg['alphas']}")
    if cfg["alphas"] is not None:
        check_scale(
            "--alphas", max(cfg["alphas"]), MAX_ALPHA,
            "the critical α* lies below 1: far beyond it the kernels overflow",
        )  # fmt: skip
    if cfg["inits"] < 2 or cfg["alpha_star_inits"] < 2:
        raise StudyInputError("--inits/--alpha-star-inits: need at least 2 initialisations")
    # a guard, not the cost check (the launcher's): the depths bounded before the α* loop
    # below runs the theory at each of them
    check_size(
        "--depths",
        max(cfg["depths"]),
        MAX_DEPTH,
        f"the largest depth (the theory runs every depth up to twice it, about "
        f"{THEORY_SECONDS_PER_DEPTH * 2 * max(cfg['depths']):.3g} s on a CPU)",
    )
    # the study is built around α* (its default α values, the α* figures and fits): refuse
    # settings without one before the folder is made (at the process's precision; the
    # study then runs at --x64's)
    for L in cfg["depths"]:
        if not math.isfinite(float(optimal_scaling(L=L, **_theory_kwargs(cfg))[0])):
            raise StudyInputError(
                f"--activation/--depths/--K0/--sigma-w2/--sigma-b2: with activation "
                f"{cfg['activation']}, χ^out of depth {L} has no maximum for α in [1e-3, 3] "
                "(α* is outside it, or there is none, as for relu); the study needs α* "
                "(the paper's setting: erf)"
            )
    return cfg


# operations per initialisation and layer of the simulations at width N: the
# "gaussian-identity" sampler about 60 N, "full" (every weight drawn) 2 N² more
IDENTITY_OPS_PER_WIDTH = 60
SIMULATION_BATCH = 64  # initialisations computed at once (`simulate_response`)
ALPHA_STAR_ALPHAS = 15  # the α values of a simulated α*


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`, checked by the launcher before `run`) of the
    theory (every depth up to twice the largest, `THEORY_SECONDS_PER_DEPTH` each) and of
    the simulations (`inits` width-N networks of the largest depth at each α of the
    layer-by-layer part, of Figures 2, 3, 6; the `alpha_star_inits` at 15 α per depth and
    per K⁰ of Figure 4(c); the every-weight networks of the correlations and the signal,
    N × N matrices per layer), float32."""
    from ...harness.args import WORK_RATE, Cost

    L = max(cfg["depths"])
    parts = [
        Cost(
            "--depths",
            "the theory",
            work=THEORY_SECONDS_PER_DEPTH * 2 * L * WORK_RATE,
            memory=8.0 * 2 * L * len(ALPHA_GRID) * 8,
            elements=2 * L * len(ALPHA_GRID),
        )
    ]
    if not cfg["simulate"]:
        return parts
    N, d_out, inits, star = cfg["width"], cfg["d_out"], cfg["inits"], cfg["alpha_star_inits"]
    alphas = len(cfg["alphas"]) if cfg["alphas"] else 3
    identity = IDENTITY_OPS_PER_WIDTH * N
    full = 2.0 * N * N + identity
    layer = full if cfg["method"] == "full" else identity
    few = max(2, min(inits, 200))  # the correlations' initialisations
    work_inits = (
        (alphas + 2) * inits * L * layer  # the layers, Figure 2
        + (len(response_paper.FIG3_ALPHAS) * L + response_paper.FIG6_DEPTH)
        * inits
        * identity  # Figures 3, 6
        + (alphas + 4) * inits * d_out * N * 2  # the readouts
    )
    work_star = ALPHA_STAR_ALPHAS * star * identity * (sum(cfg["depths"]) + len(FIG4C_K0) * L)
    work_full = (2 * few * 2 + 3 * 20) * L * 2.0 * N * N  # the correlations, the signal
    per_init = 4 * (L + 1) * 4  # K, C, χ, η per layer, float32
    runs = max(alphas, len(response_paper.FIG3_ALPHAS)) * inits
    batch = SIMULATION_BATCH * max(alphas, ALPHA_STAR_ALPHAS) * N * 4 * 8
    weights = 4.0 * 3 * N * max(N, d_out)  # a layer's matrices (and the readout)
    if cfg["method"] == "full":
        weights = max(weights, 4.0 * 3 * L * N * N)
    parts += [
        Cost(
            "--inits/--alpha-star-inits/--width/--depths",
            "the simulation part",
            memory=max(runs, ALPHA_STAR_ALPHAS * star) * per_init + batch,
            work=work_inits + work_star + work_full,
            elements=max(runs, ALPHA_STAR_ALPHAS * star) * (L + 1),
            array="the kernels of every simulated network, (alphas × inits, L + 1)",
            memory_flags="--inits/--alpha-star-inits/--depths/--width",
        ),
        Cost(
            "--width/--d-out" + ("/--depths/--method" if cfg["method"] == "full" else ""),
            "a simulated network's weight matrices",
            memory=weights,
            elements=weights / 12,
            array="a simulated network's weight matrices, (width, width) or (width, d-out)",
        ),
    ]
    return parts


def _theory_kwargs(cfg, **over):
    kw = dict(
        K0=cfg["K0"],
        sigma_w2=cfg["sigma_w2"],
        sigma_b2=cfg["sigma_b2"],
        activation=cfg["activation"],
    )
    kw.update(over)
    return kw


# Figure 2's kernel and variances (`FIG2` without its α)
FIG2_SETTINGS = {name: FIG2[name] for name in ("K0", "sigma_w2", "sigma_b2")}


def _simulate(cfg, alpha, *, L, key, **over):
    """`simulate_response` at the study's settings (`_theory_kwargs`, `--width`, `--d-out`,
    `--inits`, `--method`); `over` replaces any of them."""
    kw = dict(width=cfg["width"], d_out=cfg["d_out"], inits=cfg["inits"], method=cfg["method"])
    return simulate_response(alpha, L=L, key=key, **_theory_kwargs(cfg, **{**kw, **over}))


def _summary(values, theory):
    """Mean and standard error over initialisations, the theory, z-scores, and how many
    layers lie beyond 3 standard errors against how many noise alone would put there."""
    v = np.asarray(values, dtype=float)
    mean, se = v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(v.shape[0])
    z = (mean - np.asarray(theory)) / np.where(se > 0, se, np.inf)
    z_flat = np.atleast_1d(z)
    return {
        "sim_mean": mean,
        "sim_se": se,
        "theory": np.asarray(theory),
        "z": z,
        "beyond_3se": int(np.sum(np.abs(z_flat) > 3)),
        "expected_beyond_3se": float(0.0027 * z_flat.size),
        "chi2_over_layers": float(np.sum(z_flat**2)),
        "layers": int(z_flat.size),
    }


def theory_part(cfg):
    """Every theory curve of the figures, in one go (fast)."""
    depths = cfg["depths"]
    L_max = max(depths)
    out: dict[str, Any] = {"alpha_grid": ALPHA_GRID}
    for L in depths:
        out[f"chi_out_L{L}"] = output_response_curve(ALPHA_GRID, L=L, **_theory_kwargs(cfg))
    stars = [_theory_star(cfg, L) for L in depths]
    _alpha_star_curves(cfg, out, L_max)
    _figure5_curves(cfg, out, L_max)
    # Figure 2: ResNet against feed-forward, the paper's setting
    for name, residual in (("resnet", True), ("ffnet", False)):
        r = response(
            FIG2["alpha"], L=L_max, residual=residual, **_theory_kwargs(cfg, **FIG2_SETTINGS)
        )
        out[f"fig2_{name}_C"], out[f"fig2_{name}_eta"] = r.C, r.eta
    out["quadrature_error"] = _quadrature_error(cfg, out)
    # the largest kernel met at α <= α*(L) · 2 (the part of the curves that matters)
    K_max = max(
        float(response(2 * s["numeric"], L=s["L"], **_theory_kwargs(cfg)).K[-1]) for s in stars
    )
    out["K_max"] = K_max
    return {k: np.asarray(v) for k, v in out.items()}, stars


def _theory_star(cfg, L) -> dict:
    """α* of depth L: the argmax of χ^out, the saturation formula and its large-L form."""
    a, chi = optimal_scaling(L=L, **_theory_kwargs(cfg))
    return {
        "L": L,
        "numeric": float(a),
        "chi_out_max": float(chi),
        "formula": float(
            saturation_formula(L, K0=cfg["K0"], sigma_w2=cfg["sigma_w2"], sigma_b2=cfg["sigma_b2"])
        ),
        "asymptotic": float(
            saturation_asymptotic(
                L, K0=cfg["K0"], sigma_w2=cfg["sigma_w2"], sigma_b2=cfg["sigma_b2"]
            )
        ),
    }


def _alpha_star_curves(cfg, out: dict, L_max: int) -> None:
    """Into `out`: α* against L on a fine range (the formula curve of Fig. 4b), against
    K^0, and χ^out over (K^0, α) at L_max (Fig. 4c)."""
    Ls = np.arange(2, 2 * L_max + 1)
    out["formula_L"] = Ls
    out["formula_curve"] = np.array(
        [
            float(
                saturation_formula(
                    int(L), K0=cfg["K0"], sigma_w2=cfg["sigma_w2"], sigma_b2=cfg["sigma_b2"]
                )
            )
            for L in Ls
        ]
    )
    K0s = np.geomspace(0.01, 0.2, 16)
    out["K0_grid"] = K0s
    out["alpha_star_K0"] = np.array(
        [float(optimal_scaling(L=L_max, **_theory_kwargs(cfg, K0=float(k)))[0]) for k in K0s]
    )
    out["formula_K0"] = np.array(
        [
            float(
                saturation_formula(
                    L_max, K0=float(k), sigma_w2=cfg["sigma_w2"], sigma_b2=cfg["sigma_b2"]
                )
            )
            for k in K0s
        ]
    )
    # Figure 4(c): χ^out over (K^0, α) at L_max
    out["fig4c_alpha"] = np.geomspace(0.02, 1.0, 120)
    out["fig4c_surface"] = np.array(
        [
            np.asarray(
                output_response_curve(
                    out["fig4c_alpha"], L=L_max, **_theory_kwargs(cfg, K0=float(k))
                )
            )
            for k in K0s
        ]
    )


def _figure5_curves(cfg, out: dict, L_max: int) -> None:
    """Into `out`: Figure 5's σ_w² and σ_b² sweeps at L_max (σ_{w,out}² = σ_w²)."""
    for s in FIG5_SIGMA_W2:
        out[f"fig5_w{s}"] = output_response_curve(
            ALPHA_GRID, L=L_max, **_theory_kwargs(cfg, sigma_w2=s)
        )
        out[f"fig5_w{s}_star"] = float(
            optimal_scaling(L=L_max, **_theory_kwargs(cfg, sigma_w2=s))[0]
        )
    for s in FIG5_SIGMA_B2:
        out[f"fig5_b{s}"] = output_response_curve(
            ALPHA_GRID, L=L_max, **_theory_kwargs(cfg, sigma_w2=1.75, sigma_b2=s)
        )
        out[f"fig5_b{s}_star"] = float(
            optimal_scaling(L=L_max, **_theory_kwargs(cfg, sigma_w2=1.75, sigma_b2=s))[0]
        )


def _quadrature_error(cfg, out: dict) -> float:
    """The quadrature's own error: order 2048 against 1024 on every depth's curve, relative
    to the curve's peak (the tail α -> 1.5 has huge kernels but a vanishing response)."""
    err = 0.0
    for L in cfg["depths"]:
        fine = out[f"chi_out_L{L}"]
        coarse = output_response_curve(
            ALPHA_GRID, L=L, order=DEFAULT_ORDER // 2, **_theory_kwargs(cfg)
        )
        err = max(err, float(jnp.max(jnp.abs(fine - coarse)) / jnp.max(jnp.abs(fine))))
    return err


def simulated_alpha_star(cfg, L, alpha_theory, key):
    """α* of the simulated χ̂^out on 15 log-spaced values of α within a factor e^±0.3
    (−26%, +35%) of the theory's α*, all with the same initialisations: the vertex of a
    parabola in log α through the 5 points around the largest mean, with a bootstrap over
    initialisations for its interval. The same estimator on the theory curve is reported
    beside it. It always uses the `"gaussian-identity"` sampler (`--method` sets the
    layer-by-layer simulations)."""
    alphas = alpha_theory * np.exp(np.linspace(-0.3, 0.3, 15))
    sim = _simulate(
        cfg, alphas, L=L, key=key, inits=cfg["alpha_star_inits"], method="gaussian-identity"
    )
    chis = np.asarray(sim.chi_out, dtype=float).T  # (inits, alphas)
    x = np.log(alphas)
    value = float(np.exp(parabola_argmax(x, chis.mean(axis=0))))
    theory_curve = np.asarray(output_response_curve(alphas, L=L, **_theory_kwargs(cfg)))
    # the interval in log α, then exponentiated (the same order statistics as before)
    interval = parabola_argmax_interval(x, chis, n_boot=400, seed=cfg["seed"] + L)
    lo, hi = interval["ci95"]
    return {
        "L": L,
        "value": value,
        "ci95": [float(np.exp(lo)), float(np.exp(hi))],
        "se": float(value * interval["se"]),
        "inits": cfg["alpha_star_inits"],
        "theory_same_estimator": float(np.exp(parabola_argmax(x, theory_curve))),
        "alphas": alphas,
        "chi_out_mean": chis.mean(axis=0),
        "chi_out_se": chis.std(axis=0, ddof=1) / np.sqrt(len(chis)),
        "chi_out_theory": theory_curve,
    }


def simulation_agreement(points) -> dict:
    """The simulations' z-scores against the theory, layer by layer (C and χ at each α):
    how many lie beyond 3 SE against the ~0.27% that noise alone puts there; `flagged`
    when noise cannot explain them (three or more beyond 3 SE, or one beyond 4.2)."""
    z = np.concatenate(
        [np.atleast_1d(np.asarray(p[q]["z"], float)) for p in points for q in ("C", "chi")]
    )
    z = z[np.isfinite(z)]
    out = {
        "quantities": ["C", "chi"],
        "alphas": [p["alpha"] for p in points],
        "comparisons": int(z.size),
        "max_abs_z": float(np.max(np.abs(z))) if z.size else None,
        "beyond_3se": int(np.sum(np.abs(z) > 3)),
        "expected_beyond_3se_by_noise": float(0.0027 * z.size),
    }
    out["flagged"] = bool(z.size) and (out["beyond_3se"] >= 3 or out["max_abs_z"] > 4.2)
    return out


def theory_inside_same_estimator(row) -> bool:
    """Whether α*(K⁰)'s simulated interval holds the theory judged through the simulation's
    own estimator (the parabola over the same α grid: `theory_same_estimator`), else the
    theory's exact argmax."""
    return bool(theory_inside(row.get("ci95"), row.get("theory_same_estimator", row.get("theory"))))


def run(args, cfg):
    runner = start_study(args, cfg)
    master = jr.key(cfg["seed"])
    t0 = time.perf_counter()
    theory, stars = theory_part(cfg)
    theory_seconds = time.perf_counter() - t0
    L_max = max(cfg["depths"])
    star_by_L = {s["L"]: s for s in stars}
    alphas = cfg["alphas"] or sorted({0.1, round(star_by_L[L_max]["numeric"], 4), 0.5})
    specs = _simulation_specs(cfg, alphas)
    sims = runner.run_points(
        specs,
        lambda spec: _simulate_point(cfg, master, theory, stars, spec),
        describe=lambda s: str(s),
        precision="float32",
    )  # the simulations run in float32 (signal_propagation)
    by_part = {}
    for spec, res in zip(specs, sims, strict=True):
        by_part.setdefault(spec["part"], []).append(res)
    _attach_simulated_stars(stars, by_part)
    points = by_part.get("layers", [])
    agreement = simulation_agreement(points) if points else None
    if agreement and agreement["flagged"]:
        runner.warn(_agreement_warning(agreement))
    fits = _alpha_star_fits(cfg, stars)
    for s in stars:
        s["formula_rel_error"] = s["formula"] / s["numeric"] - 1
    paper = _paper_results(cfg, theory, stars, by_part)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "alpha_star": stars,
            "simulation_agreement": agreement,
            "paper_figures": paper,
            "theory_curves": theory,
            "alpha_star_simulations": by_part.get("alpha_star", []),
            "figure2_simulation": {
                spec["net"]: res
                for spec, res in zip(
                    [s for s in specs if s["part"] == "fig2"], by_part.get("fig2", []), strict=True
                )
            },
            "reference": _reference(cfg, theory),
        },
        timing={"theory_seconds": theory_seconds},
        plot=plot,
    )


def _simulation_specs(cfg, alphas) -> list[dict]:
    """The simulated points, in order: the layers at each α, Figure 2's two networks, α* at
    each depth, Figures 3, 6, the correlations and the signal, α* at each K⁰ of Fig. 4(c)."""
    specs = []
    if cfg["simulate"]:
        specs += [{"part": "layers", "alpha": float(a)} for a in alphas]
        specs += [{"part": "fig2", "net": n} for n in ("resnet", "ffnet")]
        specs += [{"part": "alpha_star", "L": L} for L in cfg["depths"]]
        specs += [{"part": p} for p in ("fig3", "fig6", "correlations", "signal")]
        specs += [{"part": "alpha_star_K0", "K0": k} for k in FIG4C_K0]
    return specs


def _point_key(master, spec):
    """A point's key: its part's tag, then its α, K⁰ and network folded in."""
    kind = spec["part"]
    tag = {"layers": 1, "fig2": 2, "alpha_star": 3, "fig3": 4, "fig6": 5, "correlations": 6,
           "signal": 7, "alpha_star_K0": 8}[kind]  # fmt: skip
    # α on a 1e-6 grid (int(1e4 α) put α within 1e-4 of each other on one draw)
    key = jr.fold_in(jr.fold_in(master, tag), round(1e6 * spec.get("alpha", 0)))
    if "K0" in spec:  # Figure 4(c)'s input kernels
        key = jr.fold_in(key, round(1e6 * spec["K0"]))
    if kind == "fig2":
        key = jr.fold_in(key, spec["net"] == "resnet")
    return key


def _simulate_point(cfg, master, theory, stars, spec):
    """One simulated point of `_simulation_specs`, by its part."""
    kind = spec["part"]
    key = _point_key(master, spec)
    L_max = max(cfg["depths"])
    if kind == "layers":
        return _layers_point(cfg, spec["alpha"], L_max, key)
    if kind == "fig2":
        residual = spec["net"] == "resnet"
        sim = _simulate(cfg, FIG2["alpha"], L=L_max, key=key, residual=residual, **FIG2_SETTINGS)
        return {
            "C": _summary(sim.C, theory[f"fig2_{spec['net']}_C"]),
            "eta": _summary(sim.eta, theory[f"fig2_{spec['net']}_eta"]),
        }
    if kind == "fig3":
        return response_paper.figure3(cfg, key)
    if kind == "fig6":
        return response_paper.figure6(cfg, key)
    if kind == "correlations":
        return response_paper.correlations(cfg, key)
    if kind == "signal":
        return response_paper.signal_distribution(cfg, stars, key)
    if kind == "alpha_star_K0":
        at = {**cfg, "K0": spec["K0"]}
        theory_star = float(optimal_scaling(L=L_max, **_theory_kwargs(at))[0])
        res = simulated_alpha_star(at, L_max, theory_star, jr.fold_in(key, L_max))
        kept = ("value", "ci95", "se", "theory_same_estimator")
        return {"K0": spec["K0"], "theory": theory_star, **{k: res[k] for k in kept}}
    L = spec["L"]
    star_by_L = {s["L"]: s for s in stars}
    return simulated_alpha_star(cfg, L, star_by_L[L]["numeric"], jr.fold_in(key, L))


def _layers_point(cfg, a, L_max, key) -> dict:
    """The simulation against the theory layer by layer at α = `a` (K, C, χ, η, then the
    outputs), with each quantity's largest |z|."""
    th = response(a, L=L_max, **_theory_kwargs(cfg))
    sim = _simulate(cfg, a, L=L_max, key=key)
    out = {q: _summary(getattr(sim, q), getattr(th, q)) for q in ("K", "C", "chi", "eta")}
    for q in ("K_out", "chi_out"):
        out[q] = _summary(getattr(sim, q), getattr(th, q))
    out["max_abs_z"] = {q: float(np.max(np.abs(out[q]["z"]))) for q in out}
    return {"L": L_max, **out}


def _attach_simulated_stars(stars, by_part) -> None:
    """Each depth's simulated α* (`simulated`) beside its theory's."""
    for s in stars:
        for res in by_part.get("alpha_star", []):
            if res["L"] == s["L"]:
                s["simulated"] = {
                    k: res[k] for k in ("value", "ci95", "se", "inits", "theory_same_estimator")
                }


def _agreement_warning(agreement) -> str:
    """The warning line of a flagged `simulation_agreement`."""
    return (
        f"simulation vs theory: {agreement['beyond_3se']} of {agreement['comparisons']} "
        f"layer comparisons beyond 3 SE (noise alone: "
        f"{agreement['expected_beyond_3se_by_noise']:.1f}), max |z| "
        f"{agreement['max_abs_z']:.1f}"
    )


def _alpha_star_fits(cfg, stars) -> list[dict]:
    """The log-log fit of the theory's α* against L over the depths from 10 on (slope −1/2)."""
    deep = [s for s in stars if s["L"] >= 10]
    fits = [
        fit_loglog(
            [s["L"] for s in deep],
            [[s["numeric"]] for s in deep],
            quantity="alpha_star",
            against="L",
            theory=-0.5,
            seed=cfg["seed"],
        )
    ]
    fits[0]["ci95"] = None  # deterministic values: the regression interval is in ci95_fit
    judge_theory(fits[0])
    return fits


def _paper_results(cfg, theory, stars, by_part) -> dict:
    """The paper's further figures: Figures 3, 6, the correlations, the signal, α*(K⁰),
    the linearised response and the maximum-entropy condition."""
    paper = {name: by_part[name][0] for name in ("fig3", "fig6", "correlations", "signal")
             if by_part.get(name)}  # fmt: skip
    paper["alpha_star_over_K0"] = by_part.get("alpha_star_K0", [])
    for row in paper["alpha_star_over_K0"]:
        row["theory_inside_ci95"] = theory_inside_same_estimator(row)
    paper["linearised_response"] = response_paper.linearised(cfg, theory)
    paper["max_entropy"] = response_paper.max_entropy(cfg, stars)
    return paper


def _reference(cfg, theory) -> dict:
    """How the theory is computed and how accurate it is, and the simulations' settings."""
    return {
        "method": "infinite-width recursion with Gauss-Hermite quadrature",
        "quadrature_order": DEFAULT_ORDER,
        "error_estimate": float(theory["quadrature_error"]),
        "error_meaning": "max change of chi_out(alpha), every depth, order 2048 vs "
        "1024, relative to the peak of the curve",
        "K_max_meaning": "largest K^L for alpha <= 2 alpha*(L)",
        "K_max": float(theory["K_max"]),
        "K_accurate": K_ACCURATE,
        "K_accurate_meaning": "K up to which the default rule is accurate to 1e-10 "
        "for erf (tanh: about 20; meanfield.theory.gaussian)",
        "argmax": "log grid of 256 alphas in [1e-3, 3] + 80 golden-section steps",
        "simulation": {
            "method": cfg["method"],
            "dtype": "float32",
            "width": cfg["width"],
            "inits": cfg["inits"],
        },
    }


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`): the theory curves and
    the simulations as stored."""
    from .plot import make_figures, paper_figures

    theory = {k: np.asarray(v, dtype=float) for k, v in results["theory_curves"].items()}
    by_part = {
        "fig2": [results["figure2_simulation"][n] for n in ("resnet", "ffnet")
                 if n in results["figure2_simulation"]],
        "alpha_star": results.get("alpha_star_simulations", []),
    }  # fmt: skip
    make_figures(out, results["config"], theory, results["alpha_star"], results["points"], by_part)
    paper_figures(out, results["config"], theory, results["paper_figures"])
