"""`meanfield study phases`: identity / stability / explosion at initialisation
(docs: Mathematics §4).

The network `h_k = h_{k−1} + L^{-β} V_k ReLU(W_k h_{k−1})`, `h_0 = x ~ N(0, I_d)`, with
V and W drawn independently from one depth law (`--weights`): i.i.d. Gaussian,
smooth Gaussian process in depth, or fractional-Brownian increments with Hurst
index H. For every depth L and every β of the grid, and many draws, the study
records the forward ratio `‖h_L − h_0‖/‖h_0‖` and the gradient ratio
`‖p_0 − p_L‖/‖p_L‖` (`p_k = ∂𝓛/∂h_k`, from the explicit backward recursion) for the
loss `--loss squared` (default): `𝓛 = ½‖h_L − y‖²`, `y ~ N(0, I_d)`, whose `p_L = h_L − y`
depends on the residual weights; or `--loss readout`: `𝓛 = ⟨B, h_L⟩` with a fixed random
readout `B ~ N(0, I_d)`, `p_L = B` — the convention in which the theorem's β = 1/2 bounds
on `E‖p_0 − p_L‖²/‖p_L‖²` are stated.

Outputs (`DIR/results.json` and figures):

* per (β, L): both ratios summarised over draws;
* per β: the log-log slope of the median ratio against L with a 95% bootstrap
  interval and the phase (identity / stability / explosion);
* `critical_beta`: the zero crossing of that slope in β (the estimator is
  described in `meanfield.diagnostics.phases`), with a bootstrap 95% interval and the theory
  (1/2 i.i.d., 1 smooth, max(H, 1/2) for fBm: see below);
* for fBm, a Hurst × β heatmap of the slope with β_c(H) over it (`heatmap.png`);
* for i.i.d. weights at β = 1/2: the fraction of draws inside the Mathematics §4 bounds
  on `‖h_L − h_0‖²/‖h_0‖²` for several δ (against the guarantee 1 − δ), and the
  mean squared gradient ratio against `[e^{1/2} − 1, e^4 − 1]`.

fBm theory: the first-order term of `h_L − h_0` is `L^{H−β}` times a sum of
increments that telescopes, and the second-order term of `‖h_L‖²` is a sum of
`L` squared increments of size `L^{-2β}`, i.e. `L^{1−2β}`; so β_c = H for H ≥ 1/2
(the documentation's first guess "H") but β_c = 1/2 for H < 1/2. `theory = max(H, 1/2)`.

All β share one compiled program per law (α = L^{-β} enters as data, see
`meanfield.diagnostics.phases.perceptron_resnet`); the draws of one law share their weights
across β, and (for the path laws) across depths.

Why this file is long: it is one study (options, configuration, cost, run, the two
checks of its verdicts); its figures are `phases_plot`.
"""

import math
import time

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ..._eager import traced_op_by_op
from ...diagnostics.phases import (
    GRADIENT_BOUNDS,
    SLOPE_TOL,
    critical_beta,
    exponential_growth,
    forward_bounds,
    gradient_flow_identity,
    perceptron_resnet,
    ratio_draw,
)
from ...harness.args import (
    PYTHON_STEP,
    Cost,
    preset_config,
)
from ...harness.runner import start_study
from ...laws.depth import FractionalBrownianLaw, IIDGaussianLaw, IIDRademacherLaw, SmoothGPLaw
from ...runtime.errors import StudyInputError
from ...runtime.sharding import disable_jit_active, shard_seeds
from ...stats.fits import judge_theory, summarize
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    BETAS as BETAS,
)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (
    WEIGHTS as WEIGHTS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .options import (
    default_out as default_out,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

IID = ("iid", "rademacher")  # uncoupled laws: β_c = 1/2 and the β = 1/2 bounds
RATIOS = ("forward", "gradient", "forward_max")
MAX_BETA = 8.0  # 2^-8 at L = 2 already: far in the stable phase of every law here
MAX_SLOPE_TOL = 1.0

DEFAULTS = {
    "hurst": None,
    "length_scale": 0.2,
    "activation": "relu",
    "slope_tol": SLOPE_TOL,
    "batch": 16,
    "bootstrap": 500,
    "deltas": [0.05, 0.1, 0.25, 0.5],
}


def _check_hurst(value, flag):
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise StudyInputError(f"{flag}: Hurst indices must lie in (0, 1), got {value}")


def configure(args) -> dict:
    """Preset, then command-line overrides; every value checked (StudyInputError)."""
    cfg = preset_config(
        args,
        DEFAULTS,
        PRESETS,
        (
            "hurst",
            "beta",
            "L",
            "seeds",
            "d",
            "length_scale",
            "heatmap_hurst",
            "slope_tol",
            "batch",
            "bootstrap",
        ),
        weights=args.weights,
        loss=args.loss,
    )
    _check_law_options(args, cfg)
    _check_grid(cfg)
    return cfg


def _check_law_options(args, cfg) -> None:
    """The options of one depth law only (Hurst indices for fBm, the length scale for
    smooth weights), checked; fills the fBm defaults and empties the heatmap elsewhere."""
    w = cfg["weights"]
    if args.no_heatmap and (w != "fbm" or args.heatmap_hurst is not None):
        raise StudyInputError(
            "--no-heatmap: only used with --weights fbm, without --heatmap-hurst"
            if w == "fbm"
            else f"--no-heatmap: only used with --weights fbm, not --weights {w}"
        )
    if w == "fbm":
        if cfg["hurst"] is None:
            cfg["hurst"] = 0.75
        _check_hurst(cfg["hurst"], "--hurst")
        if args.no_heatmap:
            cfg["heatmap_hurst"] = []
        for h in cfg["heatmap_hurst"]:
            _check_hurst(h, "--heatmap-hurst")
    else:
        if args.hurst is not None or args.heatmap_hurst is not None:
            flag = "--hurst" if args.hurst is not None else "--heatmap-hurst"
            raise StudyInputError(f"{flag}: only used with --weights fbm, not --weights {w}")
        cfg["heatmap_hurst"] = []
    if w == "smooth":
        try:  # the law is built before the output folder is made
            SmoothGPLaw(cfg["d"], cfg["length_scale"])
        except ValueError as err:
            raise StudyInputError(f"--length-scale: {str(err).splitlines()[0]}") from None
    elif args.length_scale is not None:
        raise StudyInputError(f"--length-scale: only used with --weights smooth, not --weights {w}")


def _check_grid(cfg) -> None:
    """The depths, βs, tolerance, draws and replicates, checked against what a slope, a
    median and a 95% interval need."""
    if len(cfg["L"]) < 2:
        raise StudyInputError(f"--L: need at least two depths for a slope, got {cfg['L']}")
    if len(cfg["beta"]) < 2:
        raise StudyInputError(f"--beta: need at least two values to locate β_c, got {cfg['beta']}")
    if any(not (b >= 0) for b in cfg["beta"]):
        raise StudyInputError(f"--beta: values must be >= 0, got {cfg['beta']}")
    if max(cfg["beta"]) > MAX_BETA:
        raise StudyInputError(
            f"--beta: at most {MAX_BETA:g} (the transition lies at β_c <= 1; far beyond it "
            f"L^-β underflows and every ratio is 1), got {max(cfg['beta']):g}"
        )
    if cfg["slope_tol"] > MAX_SLOPE_TOL:
        raise StudyInputError(
            f"--slope-tol: at most {MAX_SLOPE_TOL:g} (the slopes of log ratio against log L "
            f"are of order 1: a larger tolerance classes every β as stability), "
            f"got {cfg['slope_tol']:g}"
        )
    if cfg["seeds"] < 4:
        raise StudyInputError(f"--seeds: need at least 4 draws for medians, got {cfg['seeds']}")
    if cfg["bootstrap"] < 20:
        raise StudyInputError(
            f"--bootstrap: need at least 20 replicates for a 95% interval, got {cfg['bootstrap']}"
        )
    if cfg["weights"] == "fbm":
        top = max(cfg["L"])
        bad = [L for L in cfg["L"] if top % L]
        if bad:
            raise StudyInputError(
                f"--L: with --weights fbm every depth must divide the largest ({top}), "
                f"since all are read off one path on its grid; {bad} do not"
            )


# what a point (a chunk of draws) costs besides its arithmetic, and its ratios kept as
# Python numbers (bytes per number)
POINT_OPS = 20 * PYTHON_STEP
BYTES_PER_STORED_NUMBER = 48
# one bootstrap replicate of one β: a median over the draws at every depth and a slope
# (numpy calls from Python: about 30 µs, plus the medians' work)
REPLICATE_OPS = 3e4


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`, checked by the launcher before `run`) of the
    chunks (`batch` draws at once, vmapped: V and W, d×d at every layer, and the forward
    and backward pass of every depth at every β), of their records (three ratios per
    draw, depth and β, per Hurst index of the heatmap) and of the bootstrap of β_c (a
    Python loop of `bootstrap` replicates per Hurst index and ratio, each a median slope
    per β)."""
    from math import log2

    d, seeds, width = cfg["d"], cfg["seeds"], 8 if cfg["x64"] else 4
    batch = min(cfg["batch"], seeds)
    chunks = -(-seeds // cfg["batch"])
    top, depths = max(cfg["L"]), sum(cfg["L"])
    n_L, n_b, boot = len(cfg["L"]), len(cfg["beta"]), cfg["bootstrap"]
    hursts = 1 + len([h for h in cfg["heatmap_hurst"] if h != cfg["hurst"]])
    if cfg["weights"] == "smooth":
        weights = 2 * SmoothGPLaw(d, cfg["length_scale"]).n_features * depths * d * d * 2
    elif cfg["weights"] == "fbm":
        weights = 2 * top * d * d * 10 * log2(2 * top)
    else:
        weights = 2 * depths * d * d * 2
    per_draw = weights + 12 * n_b * depths * d * d
    stored = hursts * seeds * n_L * n_b * len(RATIOS)
    return [
        Cost(
            "--L/--d/--batch/--seeds/--beta/--heatmap-hurst",
            "a batch of draws of the deepest network",
            memory=width * 4 * batch * top * d * d,
            work=hursts * seeds * per_draw,
            elements=batch * top * d * d,
            array="a batch of weights, (batch, L, d, d)",
            memory_flags="--L/--d/--batch",
        ),
        Cost(
            "--bootstrap/--seeds/--L/--beta/--heatmap-hurst",
            "the bootstrap of β_c, with every draw's ratios",
            memory=BYTES_PER_STORED_NUMBER * stored + 8 * 2 * boot * n_b,
            work=hursts
            * (
                len(RATIOS) * boot * n_b * (REPLICATE_OPS + 20 * n_L * seeds) + chunks * POINT_OPS
            ),  # fmt: skip
            elements=max(boot * n_b, seeds * n_L * n_b),
            array="the bootstrap's slopes, (bootstrap, betas), or the ratios, (seeds, L, betas)",
        ),
    ]


def theory_beta(weights: str, hurst: float | None) -> float:
    """1/2 (i.i.d.), 1 (smooth), max(H, 1/2) (fBm; see the module docstring)."""
    if weights in IID:
        return 0.5
    if weights == "smooth":
        return 1.0
    if hurst is None:
        raise ValueError("hurst: fBm weights need a Hurst index")
    return max(hurst, 0.5)


def make_law(cfg, hurst=None):
    d = cfg["d"]
    if cfg["weights"] == "iid":
        return IIDGaussianLaw(d)
    if cfg["weights"] == "rademacher":
        return IIDRademacherLaw(d)
    if cfg["weights"] == "smooth":
        return SmoothGPLaw(d, cfg["length_scale"])
    return FractionalBrownianLaw(d, hurst, max(cfg["L"]))


def seed_keys(cfg, hurst, start, stop):
    """Keys of draws `start..stop−1`, independent of chunking and of the number of draws."""
    master = jr.fold_in(jr.key(cfg["seed"]), 7)
    if hurst is not None:
        master = jr.fold_in(master, int(round(hurst * 1e6)))
    return jax.vmap(lambda i: jr.fold_in(master, i))(jnp.arange(start, stop))


def chunk_program(cfg, law, devices=None):
    """Per draw, `meanfield.diagnostics.phases.ratio_draw`: both ratios for every (L, β). The draws
    of a chunk are split over `devices` (default: all; `shard_seeds`).

    **Returns:** `keys -> (forward, gradient, forward_max)`, each `(draws, n_L, n_β)`.
    """
    betas = jnp.asarray(cfg["beta"])

    def one(key):
        return ratio_draw(law, cfg["L"], betas, key=key, loss=cfg.get("loss", "squared"))

    return shard_seeds(one, devices=devices)


def _samples(raw_by_chunk, name, seeds):
    """`(n_β, n_L, draws)` from the chunks' `(draws, n_L, n_β)` lists; a non-finite value
    (stored as None) is an overflow, i.e. an explosion: +inf."""
    arr = np.concatenate([np.array(r[name], dtype=object) for r in raw_by_chunk])[:seeds]
    arr = np.vectorize(lambda v: math.inf if v is None else float(v), otypes=[float])(arr)
    return np.transpose(arr, (2, 1, 0))


def run(args, cfg):
    """The stages (after `configure` and the launcher's cost check): compute every chunk
    of draws, then summarise the points, fit the slopes and β_c, and add the checks (β = 0
    growth, heatmap, β = 1/2 bounds, the gradient-flow identity)."""
    runner = start_study(args, cfg)
    hursts = _hursts(cfg)
    raw = _run_chunks(runner, cfg, hursts)

    t_fit = time.perf_counter()
    per_hurst = _per_hurst(raw, hursts, cfg["seeds"])
    main = per_hurst[hursts[0]]
    theory = theory_beta(cfg["weights"], cfg["hurst"])
    points = _points(cfg, main)
    estimates = _estimates(cfg, hursts, per_hurst)
    main_est = {q: estimates[(hursts[0], q)] for q in RATIOS}
    fits = _fits(cfg, main_est["forward"], main_est["gradient"], theory)
    _warn_overflows(runner, main)
    critical = _critical(cfg, main_est)
    results = {"points": points, "fits": fits, "critical_beta": critical}
    if 0.0 in cfg["beta"]:  # no scaling: growth exponential in L, not a power (issue 74)
        _add_beta0_growth(cfg, main, results)
    heat = _heatmap(cfg, estimates)
    if heat is not None:
        results["heatmap"] = _finite(heat)
    if cfg["weights"] in IID and 0.5 in cfg["beta"]:
        results["stability_bounds"] = stability_check(cfg, main, cfg["beta"].index(0.5))
    results["gradient_flow_identity"] = flow_identity_check(cfg, make_law(cfg, cfg["hurst"]))
    results["reference"] = {
        "kind": "theory",
        "critical_beta_theory": theory,
        "note": "no numerical limit is solved in this study; the reference is the theory",
    }
    fit_seconds = time.perf_counter() - t_fit
    runner.finish(_finite(results), timing={"fit_seconds": fit_seconds}, plot=plot)


def _hursts(cfg) -> list:
    """The Hurst indices to run: the study's first, then the heatmap's others (fBm); else
    `[None]`."""
    hursts = [None]
    if cfg["weights"] == "fbm":
        hursts = [cfg["hurst"]] + [h for h in cfg["heatmap_hurst"] if h != cfg["hurst"]]
    return hursts


def _chunk_runner(cfg, grid_cfg, chunk: int):
    """`spec -> ratios` of the chunk's draws on `grid_cfg`'s depths, one program per
    Hurst index (the draws' keys from `cfg`)."""
    programs = {}

    def run_chunk(spec):
        h = spec.get("hurst")
        if h not in programs:
            programs[h] = chunk_program(grid_cfg, make_law(grid_cfg, h))
        start = spec["chunk"] * chunk
        keys = seed_keys(cfg, h, start, start + chunk)
        if disable_jit_active():  # op by op: the compiled program's own operations, not the
            # Python of its map over draws again (whose work per operation is several times it)
            fwd, grad, fmax = traced_op_by_op(programs[h].jitted, keys)
        else:
            fwd, grad, fmax = jax.block_until_ready(programs[h](keys))
        return {"forward": np.asarray(fwd), "gradient": np.asarray(grad),
                "forward_max": np.asarray(fmax)}  # fmt: skip

    return run_chunk


def _run_chunks(runner, cfg, hursts) -> list:
    """Every chunk of draws of every Hurst index through the runner, with the self-check's
    variant: the chunks' ratios."""
    chunk = min(cfg["batch"], cfg["seeds"])  # a batch beyond the seeds computes no more
    n_chunks = -(-cfg["seeds"] // chunk)
    specs = []
    for h in hursts:
        specs += [({"hurst": h} if h is not None else {}) | {"chunk": i} for i in range(n_chunks)]

    compute = _chunk_runner(cfg, cfg, chunk)
    # the self-check: op by op, a chunk's every depth (up to thousands of layers, each a
    # dispatch) took twice the study's points; it compares the chunk at its smallest depths,
    # all its draws (the batch is a tile dimension; a loop's trip count is not), compiled
    # and op by op
    small = {**cfg, "L": cfg["L"][: 2 if len(cfg["L"]) > 2 else 1]}
    variant = _chunk_runner(cfg, small, chunk)

    return runner.run_points(
        specs, compute, describe=lambda s: ", ".join(f"{k}={v}" for k, v in s.items()),
        variant=variant, spread="seeds",
        route=f"the chunk's draws at depths {', '.join(map(str, small['L']))}, compiled "
        "and op by op (its traced program, equation by equation)",
    )  # fmt: skip


def _per_hurst(raw, hursts, seeds) -> dict:
    """Per Hurst index, each ratio's draws as `(n_β, n_L, draws)` (`_samples`)."""
    per_hurst = {}
    for h in hursts:
        chunks = [r for r in raw if r.get("hurst") == h]
        per_hurst[h] = {q: _samples(chunks, q, seeds) for q in RATIOS}
    return per_hurst


def _points(cfg, main) -> list:
    """One point per (β, L): each ratio summarised over the draws."""
    points = []
    for i, beta in enumerate(cfg["beta"]):
        for j, L in enumerate(cfg["L"]):
            pt = {"L": L, "beta": beta}
            if cfg["weights"] == "fbm":
                pt["hurst"] = cfg["hurst"]
            for q in RATIOS:
                pt[q] = summarize(main[q][i, j])
            points.append(pt)
    return points


def _estimates(cfg, hursts, per_hurst) -> dict:
    """`(hurst, ratio) -> critical_beta(...)`: the slopes, phases and β_c of each."""
    estimates = {}
    for h in hursts:
        for q in RATIOS:
            estimates[(h, q)] = critical_beta(
                cfg["beta"],
                cfg["L"],
                per_hurst[h][q],
                theory=theory_beta(cfg["weights"], h),
                n_boot=cfg["bootstrap"],
                seed=cfg["seed"],
                tol=cfg["slope_tol"],
            )
    return estimates


def _fits(cfg, main_fwd, main_grad, theory) -> list:
    """Per ratio and β, the judged log-log slope against L (with why where infinite)."""
    fits = []
    for q, est in (("forward_ratio", main_fwd), ("gradient_ratio", main_grad)):
        for i, beta in enumerate(cfg["beta"]):
            fixed = {"beta": beta, "weights": cfg["weights"]}
            if cfg["weights"] == "fbm":
                fixed["hurst"] = cfg["hurst"]
            ci = est["slopes_ci95"][i]
            fits.append(
                judge_theory(
                    {
                        "quantity": q,
                        "against": "L",
                        "fixed": fixed,
                        "statistic": "median over draws",
                        "slope": est["slopes"][i] if math.isfinite(est["slopes"][i]) else None,
                        "ci95": ci if ci is not None and all(map(math.isfinite, ci)) else None,
                        "theory": theory - beta if beta > theory else None,
                        "phase": est["phases"][i],
                    }
                )
            )
            if est["slopes"][i] == math.inf:
                fits[-1]["reason"] = "more than half the draws exploded at some depth"
            elif est["slopes"][i] == -math.inf:
                fits[-1]["reason"] = (
                    "more than half the draws left h_L = h_0 exactly (floating point) at "
                    "some depth: identity"
                )
    return fits


def _warn_overflows(runner, main) -> None:
    """A warning per ratio with overflowed draws (counted as +inf in the medians)."""
    for q in RATIOS:
        n_bad = int(np.sum(~np.isfinite(main[q])))
        if n_bad:
            runner.warn(
                f"{n_bad} {q} ratio(s) overflowed (explosion); counted as +inf in the medians"
            )


THEORY_NOTES = {
    "iid": "Marion et al.: beta_c = 1/2 for i.i.d. weights",
    "rademacher": "Marion et al.: beta_c = 1/2 for i.i.d. symmetric sub-Gaussian "
    "weights (here Rademacher)",
    "smooth": "Marion et al.: beta_c = 1 for smooth (Lipschitz) weights",
    "fbm": "beta_c = max(H, 1/2): H from the telescoping first-order term, "
    "1/2 from the L^(1-2beta) second-order term of |h|^2 (the first guess 'H')",
}


def _critical(cfg, main_est) -> dict:
    """`critical_beta` of results.json: β_c from the forward ratio, with the gradient's and
    the max-over-depth's beside it."""
    main_fwd, main_grad = main_est["forward"], main_est["gradient"]
    critical = {
        **_brief(main_fwd),
        "quantity": "forward ratio |h_L - h_0|/|h_0|",
        "hurst": cfg["hurst"],
        "from_gradient": {
            **_brief(main_grad),
            "quantity": "gradient ratio |p_0 - p_L|/|p_L|",
            "slopes": main_grad["slopes"],
            "slopes_ci95": main_grad["slopes_ci95"],
            "phases": main_grad["phases"],
        },
        "from_max_over_depth": {
            **_brief(main_est["forward_max"]),
            "quantity": "max_k |h_k - h_0|/|h_0| (the smooth-weights theorem's form)",
            "slopes": main_est["forward_max"]["slopes"],
            "phases": main_est["forward_max"]["phases"],
        },
        "slopes": main_fwd["slopes"],
        "slopes_ci95": main_fwd["slopes_ci95"],
        "betas": cfg["beta"],
        "phases": main_fwd["phases"],
        "grid_spacing": main_fwd["grid_spacing"],
        "bootstrap_failures": main_fwd["bootstrap_failures"],
        "method": main_fwd["method"],
        "theory_note": THEORY_NOTES[cfg["weights"]],
    }
    if "reason" in main_fwd:
        critical["reason"] = main_fwd["reason"]
    return critical


def _add_beta0_growth(cfg, main, results) -> None:
    """At β = 0 (no scaling) the growth rate per layer of each ratio, its headline lines,
    and no power-law slope in the β = 0 fits (the wrong law there)."""
    Ls, betas, fits = cfg["L"], cfg["beta"], results["fits"]
    i0 = betas.index(0.0)
    growth = {
        q: exponential_growth(Ls, main[q][i0], n_boot=cfg["bootstrap"], seed=cfg["seed"])
        for q in ("forward", "gradient")
    }
    results["beta0_growth"] = growth
    results["verdict_lines"] = [_growth_line(q, g) for q, g in growth.items()]
    for f in fits:  # a power of L is the wrong law there: no slope, the rate instead
        if f["fixed"]["beta"] == 0.0 and f["quantity"].removesuffix("_ratio") in growth:
            f.update(loglog_slope=f["slope"], slope=None, ci95=None,
                     reason="β = 0 grows exponentially in L, not as a power: its rate "
                     "per layer is in beta0_growth")  # fmt: skip


def _heatmap(cfg, estimates) -> dict | None:
    """The Hurst × β heatmap of the slopes and β_c (fBm, two Hurst indices or more), its
    infinities kept; else None."""
    if not (cfg["weights"] == "fbm" and len(cfg["heatmap_hurst"]) >= 2):
        return None
    betas = cfg["beta"]
    hs = sorted(cfg["heatmap_hurst"])
    heat = {
        "hurst": hs,
        "beta": betas,
        "slope_forward": [estimates[(h, "forward")]["slopes"] for h in hs],
        "slope_gradient": [estimates[(h, "gradient")]["slopes"] for h in hs],
        "critical_beta": [{"hurst": h, **_brief(estimates[(h, "forward")])} for h in hs],
        "critical_beta_gradient": [{"hurst": h, **_brief(estimates[(h, "gradient")])} for h in hs],
    }
    heat["rising_with_hurst"] = rising_with_hurst(
        [c["estimate"] for c in heat["critical_beta"]], betas
    )
    return heat


def _growth_line(q: str, g: dict) -> str:
    """The headline's line for β = 0: the rate per layer, or why there is none."""
    if g.get("rate") is None:
        return f"β = 0, {q} ratio: no growth rate ({g.get('reason')})"
    ci = g.get("ci95") or [math.nan, math.nan]
    law = "exponential" if g["exponential"] else "closer to a power of L"
    return (f"β = 0 (no scaling), {q} ratio: log median ≈ c + r L with r = {g['rate']:.3f} "
            f"[{ci[0]:.3f}, {ci[1]:.3f}] per layer ({law}: residual {g['residual_rms']:.3f} "
            f"against the log-log line's {g['loglog_residual_rms']:.3f})")  # fmt: skip


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`): the per-draw ratios
    are the points' stored values (a non-finite one, an overflow, as +inf)."""
    from .plot import plot_phases

    cfg = results["config"]
    betas, Ls = cfg["beta"], cfg["L"]
    samples = {}
    for q in RATIOS:
        arr = np.full((len(betas), len(Ls), cfg["seeds"]), math.inf)
        for p in results["points"]:
            if q not in p:
                continue
            vals = [math.inf if v is None else float(v) for v in p[q]["values"]]
            arr[betas.index(p["beta"]), Ls.index(p["L"]), : len(vals)] = vals
        samples[q] = arr
    critical = results["critical_beta"]
    plot_phases(out, cfg, results["points"], critical, results.get("heatmap"),
                results.get("stability_bounds"), samples)  # fmt: skip


IDENTITY_DRAWS = 8  # networks of the identity check (β on the grid, the largest L)
IDENTITY_Z = 512  # perturbations z per network


def identity_verdict(pairs) -> dict:
    """The identity at one β from `[backward, flow mean, flow standard error]` per network:
    `holds` when every finite network's z = (flow − backward)/SE lies within 4 (a false
    alarm of about 6e-5 per network); networks with a non-finite value left out."""
    kept = [
        [b, m, se] for b, m, se in pairs if math.isfinite(b) and math.isfinite(m) and se > 0
    ]  # fmt: skip
    zs = [(m - b) / se for b, m, se in kept]
    return {
        "backward_flow_mean_se": kept,
        "max_abs_z": max((abs(z) for z in zs), default=None),
        "holds": bool(zs) and max(abs(z) for z in zs) < 4.0,
    }


def identity_summary(rows) -> bool | None:
    """The identity over every β: None when no row was judged (no finite network with a
    spread: nothing is claimed), else whether every judged row holds."""
    judged = [r for r in rows if r["max_abs_z"] is not None]
    return all(r["holds"] for r in judged) if judged else None


def rising_with_hurst(estimates, betas) -> bool:
    """Whether the critical β rises with H: every estimate known, never falling by more
    than one β-grid step from one H to the next, and higher at the largest H than at the
    smallest."""
    if len(estimates) < 2 or any(e is None for e in estimates):
        return False
    step = min(b - a for a, b in zip(betas, betas[1:], strict=False))
    return all(b >= a - step for a, b in zip(estimates, estimates[1:], strict=False)) and (
        estimates[-1] > estimates[0]
    )


def flow_identity_check(cfg, law) -> dict:
    """`‖p_0‖²/‖p_L‖² = E_z[((p_L/‖p_L‖)ᵀ q_L(z))²]` (`phases.gradient_flow_identity`) on
    `IDENTITY_DRAWS` networks at the largest depth for every β: the backward ratio against
    the Monte-Carlo forward-flow mean, as z-scores in its standard error."""
    L, d, loss = max(cfg["L"]), cfg["d"], cfg.get("loss", "squared")

    @jax.jit  # one program for every β and draw (α traced); eagerly, each call compiled anew
    def identity(V, W, x, y, kz, alpha):
        net = perceptron_resnet(V, W, alpha)
        r = gradient_flow_identity(net, x, y, key=kz, draws=IDENTITY_Z, loss=loss)
        return r.backward, r.flow_mean, r.flow_se

    rows = []
    for beta in cfg["beta"]:
        pairs = []
        for i in range(IDENTITY_DRAWS):
            key = jr.fold_in(jr.fold_in(jr.key(cfg["seed"]), 99), i)
            kv, kw, kx, ky, kz = jr.split(key, 5)
            V, W = law.weights(kv, L), law.weights(kw, L)
            x, y = jr.normal(kx, (d,)), jr.normal(ky, (d,))
            r = identity(V, W, x, y, kz, jnp.asarray(float(L) ** -beta, V.dtype))
            pairs.append([float(v) for v in r])
        rows.append({"beta": beta, "L": L, **identity_verdict(pairs)})
    return {
        "identity": "|p_0|^2/|p_L|^2 = E_z[((p_L/|p_L|)^T q_L(z))^2], q_L(z) = (dh_L/dh_0) z",
        "draws": IDENTITY_DRAWS,
        "z_per_draw": IDENTITY_Z,
        "per_beta": rows,
        "holds": identity_summary(rows),
    }


def _brief(est: dict) -> dict:
    out = {k: est[k] for k in ("estimate", "ci95", "theory")}
    if "reason" in est:
        out["reason"] = est["reason"]
    return out


def _finite(obj):
    """Replace ±inf slopes by None (JSON has no infinity) recursively."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def stability_check(cfg, samples, i_half) -> dict:
    """At β = 1/2 (i.i.d.): fractions of draws inside the forward bounds, per L and δ, and
    the mean squared gradient ratio (with its standard error) against its bounds."""
    d = cfg["d"]
    rows = []
    for j, L in enumerate(cfg["L"]):
        r2 = samples["forward"][i_half, j] ** 2
        g2 = samples["gradient"][i_half, j] ** 2
        forward = []
        for delta in cfg["deltas"]:
            lo, hi = forward_bounds(d, delta)
            inside = float(np.mean((r2 > lo) & (r2 < hi)))
            forward.append(
                {
                    "delta": delta,
                    "lower": lo,
                    "upper": hi,
                    "lower_vacuous": lo <= 0,
                    "fraction_inside": inside,
                    "guarantee": 1.0 - delta,
                    "holds": inside >= 1.0 - delta,
                }
            )
        finite = g2[np.isfinite(g2)]
        mean = float(finite.mean()) if finite.size else None
        se = float(finite.std(ddof=1) / math.sqrt(finite.size)) if finite.size > 1 else None
        rows.append(
            {
                "L": L,
                "forward_sq": forward,
                "gradient_sq_mean": mean,
                "gradient_sq_se": se,
                "gradient_inside_bounds": (
                    mean is not None and GRADIENT_BOUNDS[0] <= mean <= GRADIENT_BOUNDS[1]
                ),
                # the bounds are on the expectation: within two standard errors of the mean
                "gradient_consistent_with_bounds": (
                    mean is not None
                    and se is not None
                    and mean + 2 * se >= GRADIENT_BOUNDS[0]
                    and mean - 2 * se <= GRADIENT_BOUNDS[1]
                ),
            }
        )
    return {
        "beta": 0.5,
        "d": d,
        "forward_bounds": "exp(3/8 - sqrt(22/(d delta))) - 1 < |h_L-h_0|^2/|h_0|^2 < "
        "exp(1 + sqrt(10/(d delta))) + 1 with probability >= 1 - delta",
        "gradient_bounds": list(GRADIENT_BOUNDS),
        "per_L": rows,
    }
