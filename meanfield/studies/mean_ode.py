"""`meanfield study mean-ode`: finite ResNets against the neural mean-ODE limit.

The headline study (SPEC §3, §7). A grid over depth L and width M; at every point,
many seeds of a finite 2LP ResNet with α = 1/(LM), trained for k GD steps in the
mean-ODE convention, each coupled unit by unit to its limit copy. Reported per
point and per step: Δ^h, Δ^b, Δ^Z and the loss (mean, std, count, exploded; a network
that exploded in any of them is left out of all of them there). Fitted: the log-log
slope against L at the largest M (theory −1, or −1/2 when the limit is trivial), against
M at a fixed L (theory −1/2), and the joint `a/L + b/sqrt(LM)`, each with a 95%
bootstrap interval over seeds. Decomposition: the same recursion run with the limit's
own particles at every layer isolates the Euler (1/L) part of the error.

The reference limit is a Gauss–Hermite (or Monte-Carlo) particle ODE solved with
Diffrax (Dopri8, dense output) in float64; its own error is measured (order q against
q/2, tolerance halved) and every fitted point must lie 10× above it.
"""

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import jax.random as jr

from ..activations import ACTIVATIONS
from ..convergence import (
    QUANTITIES,
    circle_data,
    convergence_fits,
    pad_grid,
    program_boxes,
    reference_error,
    reference_particles,
    seed_program,
    solve_reference,
    summarize_steps,
)
from ..coupling import LimitOnGrid, draw_units, euler_errors
from ..engine import AbstractDepthLoop, AutoLoop, FusedLoop, ScanLoop
from ..laws import TwoLayerGaussianLaw, TwoLayerNonCentredLaw
from ..particles import MAX_HERMITE_ORDER, MAX_QUADRATURE_NODES
from ..sharding import gather_processes
from ..two_layer import TwoLayerBlock
from .args import check_activation, int_list, override, positive_float, positive_int
from .runner import StudyInputError, start_study

HELP = "finite ResNets vs the neural mean-ODE limit: the 1/L + 1/sqrt(LM) study (SPEC §3)"
DEFAULT_X64 = True

PRESETS = {
    "quick": {
        "L": [8, 16, 32, 64, 128],
        "M": [1, 4, 16, 64, 16384],
        "L_for_M": 1024,
        "fit_M_max": 64,
        "seeds": 10,
        "steps": 1,
    },
    "paper": {
        "L": [8, 16, 32, 64, 128, 256, 512],
        "M": [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144],
        "L_for_M": 16384,
        "fit_M_max": 256,
        "seeds": 64,
        "steps": 2,
    },
}
DEFAULTS = {
    "d": 2,
    "inputs": 3,
    "activation": "gelu",
    "init": "non-centred",
    "sigma_u": 1.25,
    "sigma_v": 1.0,
    "sigma_xi": 0.0,
    "lr": 0.25,
    "reference": "quadrature",
    "order": None,  # Gauss-Hermite order per coordinate; None: QUADRATURE_NODES in all
    "particles": 2**16,
    "rtol": 1e-10,
    "probes": 1024,
}
# seeds of one grid point run together on a device (vmapped; the seeds are split over
# every device first, `shard_seeds`) as long as L·M·seeds stays below this;
# on a CPU a larger batch gains nothing, while on an accelerator one seed of a small
# network leaves it idle. Memory: the compiled paper-preset program (float64, d = 2,
# n = 3, k = 2) needs ~430 bytes of temporaries per unit (XLA's memory analysis on CPU;
# 550 before `train` ran its last evaluation inside its loop), so 2^24 units ≈ 7 GB on
# a GPU (the speed gain there is not yet measured; `--seed-batch-units` overrides)
UNITS_PER_BATCH = {"cpu": 2**20, "default": 2**24}
# a grid point runs padded inside a wider point's program when the padding adds at most
# this many units (seeds × extra L·M): on a 2-core CPU (float64) about one second,
# less than a compile; on an accelerator (a guess, not yet measured) far less
PAD_UNITS = {"cpu": 2**20, "default": 2**26}
# ... and inside a deeper point's program too, on a CPU only: there a padded layer costs
# what its units cost, while on an accelerator each layer is a sequence of kernel launches
PAD_DEPTH = {"cpu": True, "default": False}
# how the finite networks run their depth loops (`--depth-loop`, `depth_loop_method`)
DEPTH_LOOPS = ("auto", "scan", "pallas")
# default quadrature budget: order 256 for 2 Gaussian coordinates, 16 for 4
QUADRATURE_NODES = 2**16


def add_arguments(parser):
    parser.add_argument("--L", type=int_list, help="depths, increasing (e.g. 4,8,16)")
    parser.add_argument("--M", type=int_list, help="widths, increasing (e.g. 1,16,256)")
    parser.add_argument("--seeds", type=positive_int, help="finite networks per grid point")
    parser.add_argument("--steps", type=int, help="GD steps k (>= 0)")
    parser.add_argument("--activation", help=f"one of {', '.join(ACTIVATIONS)}")
    parser.add_argument("--init", choices=["centred", "non-centred"], help="initial law μ_0")
    parser.add_argument("--d", type=positive_int, help="state dimension (default 2)")
    parser.add_argument("--inputs", type=positive_int, help="training inputs n (default 3)")
    parser.add_argument("--sigma-u", type=positive_float, help="std of u (default 1.25)")
    parser.add_argument("--sigma-v", type=positive_float, help="std of v, centred init (default 1)")
    parser.add_argument("--sigma-xi", type=float, help="std of ξ in v = u + ξ (default 0)")
    parser.add_argument("--lr", type=float, help="learning rate η, mean-ODE convention")
    parser.add_argument(
        "--reference",
        choices=["quadrature", "monte-carlo"],
        help="how the limit's expectation is computed (default quadrature)",
    )
    parser.add_argument(
        "--order",
        type=positive_int,
        help="Gauss-Hermite order per coordinate, >= 3 (default: the largest with at most "
        "2^16 nodes in all and 4096 per coordinate)",
    )
    parser.add_argument("--particles", type=positive_int, help="Monte-Carlo reference particles")
    parser.add_argument(
        "--L-for-M",
        type=positive_int,
        help="the depth of the line of widths used for the fit against M",
    )
    parser.add_argument(
        "--fit-M-max",
        type=positive_int,
        help="largest M in the fit against M (the Monte-Carlo-dominated range)",
    )
    parser.add_argument(
        "--compile-workers",
        type=positive_int,
        help="programs compiled ahead in parallel threads (default: min(8, CPU cores))",
    )
    parser.add_argument(
        "--unroll",
        type=positive_int,
        default=1,
        help="layers per step of the finite networks' loops over layers (default 1; the "
        "values do not change, the speed and compile time do: see `ResNet`)",
    )
    parser.add_argument(
        "--depth-loop",
        choices=DEPTH_LOOPS,
        default="auto",
        help="how the finite networks run their loops over layers: 'scan' (a lax.scan step "
        "per layer), 'pallas' (the fused kernels of meanfield.engine.FusedLoop in every "
        "program whose layer fits a kernel tile, the scan elsewhere; Pallas interpret mode "
        "on a CPU: slow, for tests) or 'auto' (default: 'pallas' on a GPU/TPU where the "
        "kernels apply and compile, else 'scan'); the values agree up to rounding",
    )
    parser.add_argument(
        "--seed-batch-units",
        type=positive_int,
        help="at most this many units (seeds x L*M) computed at once on a device, and at "
        "least one seed (default 2^20 on CPU, 2^24 on GPU/TPU)",
    )
    parser.add_argument(
        "--pad-units",
        type=int,
        help="run a grid point inside a larger point's compiled program (wider, or on a CPU "
        "also deeper) when the padding adds at most this many units, seeds x (extra L*M) "
        "(default 2^20 on CPU, 2^26 on GPU/TPU; 0: one program per (L, M))",
    )


def resolve_config(args) -> dict:
    """Preset, then command-line overrides; every value checked (StudyInputError)."""
    cfg = {
        **DEFAULTS,
        **PRESETS[args.preset],
        "preset": args.preset,
        "seed": args.seed,
        "x64": args.x64,
    }
    override(
        cfg,
        args,
        (
            "L",
            "M",
            "seeds",
            "steps",
            "activation",
            "init",
            "d",
            "inputs",
            "sigma_u",
            "sigma_v",
            "sigma_xi",
            "lr",
            "reference",
            "order",
            "particles",
            "fit_M_max",
            "L_for_M",
        ),
    )
    check_activation(cfg["activation"])
    if cfg["steps"] < 0:
        raise StudyInputError(f"--steps: must be >= 0, got {cfg['steps']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 seeds for spreads, got {cfg['seeds']}")
    if not (math.isfinite(cfg["lr"]) and cfg["lr"] >= 0):
        raise StudyInputError(f"--lr: must be a finite number >= 0, got {cfg['lr']}")
    if not (math.isfinite(cfg["sigma_xi"]) and cfg["sigma_xi"] >= 0):
        raise StudyInputError(f"--sigma-xi: must be a finite number >= 0, got {cfg['sigma_xi']}")
    if len(cfg["L"]) < 2 or len(cfg["M"]) < 2:
        raise StudyInputError("--L/--M: need at least two depths and two widths for slopes")
    if cfg["reference"] == "quadrature":  # before the study's folder is made
        _quadrature_order(make_law(cfg), cfg["order"])
    if float(jnp.min(jnp.linalg.norm(make_data(cfg)[0], axis=1))) < 1e-6:  # float32 too
        raise StudyInputError(
            f"--d/--inputs: d = {cfg['d']} with {cfg['inputs']} inputs puts an input at 0 "
            "(for d = 1 the inputs are cos(π(i + 1/2)/n)): use an even number of inputs"
        )
    return cfg


def grid_specs(cfg) -> list[dict]:
    """The rectangular grid L × M, plus the line of widths M <= fit_M_max at depth
    L_for_M where the Monte-Carlo term dominates (the fit against M)."""
    specs = [{"L": L, "M": M} for L in cfg["L"] for M in cfg["M"]]
    if cfg["L_for_M"] not in cfg["L"]:
        specs += [{"L": cfg["L_for_M"], "M": M} for M in cfg["M"] if M <= cfg["fit_M_max"]]
    return specs


def all_depths(cfg) -> list[int]:
    return sorted(set(cfg["L"]) | {cfg["L_for_M"]})


def make_law(cfg):
    if cfg["init"] == "centred":
        return TwoLayerGaussianLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_v=cfg["sigma_v"])
    return TwoLayerNonCentredLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_xi=cfg["sigma_xi"])


def trivial_limit(cfg, step: int) -> bool:
    """With a centred law the k = 0 limit is the identity: only the 1/sqrt(LM) term exists."""
    return cfg["init"] == "centred" and step == 0


def make_data(cfg):
    """The study's data set, `meanfield.convergence.circle_data`."""
    return circle_data(cfg["inputs"], cfg["d"])


def _quadrature_order(law, order):
    """The requested order, or the largest order within the default node budget."""
    p = law.gaussian_dim
    if order is None:
        order = min(MAX_HERMITE_ORDER, int(math.floor(QUADRATURE_NODES ** (1.0 / p) + 1e-9)))
        if order < 3:
            raise StudyInputError(
                f"--d: the law has {p} Gaussian coordinates, so the default budget of "
                f"{QUADRATURE_NODES} quadrature nodes gives {order} per coordinate, too few "
                "for a reference with an error check: use --reference monte-carlo"
            )
        return order
    cap = min(MAX_HERMITE_ORDER, int(math.floor(MAX_QUADRATURE_NODES ** (1.0 / p) + 1e-9)))
    if order < 3:  # the check set (order max(q // 2, 2)) must be a coarser rule
        raise StudyInputError(
            f"--order: at least 3 nodes per coordinate, so that the error check uses a "
            f"coarser rule (order max(q // 2, 2)), got {order}"
        )
    if order > cap:
        advice = f"use at most {cap}" if cap >= 3 else "use --reference monte-carlo"
        raise StudyInputError(
            f"--order: {order} nodes in each of {p} Gaussian coordinates is more than "
            f"{MAX_QUADRATURE_NODES} in all or {MAX_HERMITE_ORDER} per coordinate; {advice}"
        )
    return order


def _particle_sets(cfg, law):
    """The reference particles and the coarser check set (order q/2, or N/4 draws)."""
    if cfg["reference"] == "quadrature":
        return reference_particles(law, order=_quadrature_order(law, cfg["order"]))
    key = jr.fold_in(jr.key(cfg["seed"]), 4)
    return reference_particles(law, count=cfg["particles"], key=key)


def depth_loop(requested: str, unroll: int = 1) -> AbstractDepthLoop:
    """The finite networks' depth loop for `--depth-loop` (one of `DEPTH_LOOPS`):
    `"scan"` a `ScanLoop`, `"auto"` an `AutoLoop` (the fused kernels on a GPU/TPU where
    they apply), `"pallas"` the fused kernels wherever they apply, a CPU included."""
    if requested not in DEPTH_LOOPS:
        raise ValueError(f"depth loop must be one of {', '.join(DEPTH_LOOPS)}, got {requested!r}")
    if requested == "scan":
        return ScanLoop(unroll)
    return AutoLoop(unroll=unroll, cpu=requested == "pallas")


def loop_name(loop: AbstractDepthLoop, block, law, L: int, M: int, n: int) -> str:
    """`"pallas"` or `"scan"`: what `loop` runs for the program of box `(L, M)`."""
    params = jax.eval_shape(lambda: draw_units(law, jr.key(0), L, M))
    return "pallas" if isinstance(loop.resolve(block, params, n), FusedLoop) else "scan"


def _for_backend(table: dict):
    """The entry of `table` for the default backend, else its `"default"`."""
    return table.get(jax.default_backend(), table["default"])


def run(args):
    cfg = resolve_config(args)
    workers = args.compile_workers or max(1, min(8, os.cpu_count() or 1))
    pad_units = args.pad_units
    if pad_units is None:
        pad_units = _for_backend(PAD_UNITS)
    if pad_units < 0:
        raise StudyInputError(f"--pad-units: must be >= 0, got {pad_units}")
    units_per_batch = args.seed_batch_units or _for_backend(UNITS_PER_BATCH)
    unroll = args.unroll
    loop = depth_loop(args.depth_loop, unroll)
    runner = start_study(args, cfg)
    block = TwoLayerBlock(cfg["activation"])
    law = make_law(cfg)
    xs, ys = make_data(cfg)
    lr, steps = cfg["lr"], cfg["steps"]

    main, check, ref_info = _particle_sets(cfg, law)
    compile_seconds = {}
    finite_seconds = {}
    master = jr.key(cfg["seed"])
    specs = grid_specs(cfg)
    boxes = program_boxes(
        [(s["L"], s["M"]) for s in specs],
        cfg["seeds"],
        pad_units,
        pad_depth=_for_backend(PAD_DEPTH),
    )
    ref = None

    def point_inputs(spec):
        """The program's arguments for `spec`; before the reference is solved, the
        limit's grids as shapes only (what compiling needs)."""
        L, M = spec["L"], spec["M"]
        keys = jr.split(jr.fold_in(jr.fold_in(jr.fold_in(master, 2), L), M), cfg["seeds"])
        Lb = boxes[(L, M)][0]
        if ref is None:
            shape = (steps + 1, Lb + 1, cfg["inputs"], cfg["d"])
            h = b = jax.ShapeDtypeStruct(shape, jnp.result_type(float))
        else:
            h, b = pad_grid(ref[f"h_L{L}"], Lb), pad_grid(ref[f"b_L{L}"], Lb)
        return keys, h, b, jnp.int32(L), jnp.int32(M)

    methods = {}

    def compile_box(box, spec):
        t0 = time.perf_counter()
        Lb, Mb = box
        methods[f"L{Lb}_M{Mb}"] = loop_name(loop, block, law, Lb, Mb, cfg["inputs"])
        program = seed_program(
            block, law, xs, ys, lr, Lb, Mb, cfg["seeds"], units_per_batch, loop=loop
        )
        compiled = program.jitted.lower(*point_inputs(spec)).compile()
        return compiled, time.perf_counter() - t0

    # the decomposition's Euler part: one program per depth, the same probe units at
    # every depth
    euler_specs = [{"L": L, "units": "limit-particles"} for L in cfg["L"]]
    probes = jax.vmap(law.sample)(jr.split(jr.fold_in(master, 5), cfg["probes"]))

    def compile_euler(L):
        t0 = time.perf_counter()
        zeros = jnp.zeros((steps + 1, L + 1, cfg["inputs"], cfg["d"]))  # the limit's shape
        grid = LimitOnGrid(h=zeros, b=zeros)
        # `eqx.filter_jit` gives the function a `lower` (which pyright does not see)
        compiled = euler_errors.lower(  # pyright: ignore[reportFunctionMemberAccess]
            block, main, xs, ys, grid, learning_rate=lr, probes=probes
        ).compile()
        return compiled, time.perf_counter() - t0

    # compile ahead in threads (XLA compiles release the GIL), one program per box, while
    # this thread solves the reference: the programs need only its shapes
    pool = ThreadPoolExecutor(max_workers=workers)
    ahead = {}
    for spec in runner.pending(specs):
        box = boxes[(spec["L"], spec["M"])]
        if box not in ahead:
            ahead[box] = pool.submit(compile_box, box, spec)
    try:
        t_ref = time.perf_counter()
        # the limit copies' error is measured on probe draws of their own
        ref_probes = jax.vmap(law.sample)(jr.split(jr.fold_in(master, 3), cfg["probes"]))
        ref = runner.artifact(
            "reference",
            lambda: solve_reference(
                block,
                main,
                check,
                xs,
                ys,
                learning_rate=lr,
                steps=steps,
                rtol=cfg["rtol"],
                depths=all_depths(cfg),
                probes=ref_probes,
            ),
        )
        ref_seconds = time.perf_counter() - t_ref
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    # then one per Euler depth, while this thread runs the finite networks (where an
    # accelerator leaves the CPU cores idle). Submitted now, not with the others: on a
    # 2-core CPU they then slowed the reference down more than they saved (quick preset:
    # wall 120 s; submitted here 109 s and 115 s, against 113 s and 119 s compiled by
    # this thread when needed: the same within the spread of runs)
    euler_ahead = {s["L"]: pool.submit(compile_euler, s["L"]) for s in runner.pending(euler_specs)}
    error_estimate, error_estimate_z = reference_error(ref)
    if not bool(ref["ok"]):
        runner.warn("the reference ODE solve did not succeed (max_steps reached?)")

    compile_wait = []  # this thread's waits for a program still compiling

    def finite_point(spec):
        box = boxes[(spec["L"], spec["M"])]
        t_wait = time.perf_counter()
        compiled, seconds = ahead[box].result()
        compile_wait.append(time.perf_counter() - t_wait)
        t1 = time.perf_counter()
        out = jax.block_until_ready(gather_processes(compiled(*point_inputs(spec))))
        compile_seconds[f"L{box[0]}_M{box[1]}"] = seconds
        finite_seconds[f"L{spec['L']}_M{spec['M']}"] = time.perf_counter() - t1
        values = {
            "delta_h": out.delta_h,
            "delta_b": out.delta_b,
            "delta_z": out.delta_z,
            "loss": out.loss,
        }
        return {"steps": summarize_steps(values, steps)}

    euler_compile_seconds = {}
    euler_wait = []  # as compile_wait, for the Euler part's programs

    def euler_point(spec):
        L = spec["L"]
        t_wait = time.perf_counter()
        compiled, euler_compile_seconds[f"L{L}"] = euler_ahead[L].result()
        euler_wait.append(time.perf_counter() - t_wait)
        grid = LimitOnGrid(h=jnp.asarray(ref[f"h_L{L}"]), b=jnp.asarray(ref[f"b_L{L}"]))
        e = compiled(block, main, xs, ys, grid, learning_rate=lr, probes=probes)
        return {
            "steps": [
                {
                    "delta_h_euler": float(e.delta_h[k]),
                    "delta_b_euler": float(e.delta_b[k]),
                    "delta_z_euler": float(e.delta_z[k]),
                }
                for k in range(steps + 1)
            ]
        }

    try:
        raw = runner.run_points(specs, finite_point, describe=lambda s: f"L={s['L']} M={s['M']}")
        t_euler = time.perf_counter()
        euler_raw = runner.run_points(
            euler_specs, euler_point, describe=lambda s: f"Euler part, L={s['L']}"
        )
        # the Euler part's own time, without its waits for programs still compiling
        euler_seconds = time.perf_counter() - t_euler - sum(euler_wait)
    finally:
        pool.shutdown(cancel_futures=True)

    t_fit = time.perf_counter()
    points = [
        {"L": p["L"], "M": p["M"], "steps": k, **p["steps"][k]}
        for p in raw
        for k in range(steps + 1)
    ]
    decomposition = [
        {"L": p["L"], "steps": k, **p["steps"][k]} for p in euler_raw for k in range(steps + 1)
    ]
    fits, excluded = convergence_fits(
        points,
        decomposition,
        steps=steps,
        depths=cfg["L"],
        widths=cfg["M"],
        L_for_M=cfg["L_for_M"],
        fit_M_max=cfg["fit_M_max"],
        error_estimate=error_estimate,
        error_estimate_z=error_estimate_z,
        trivial=lambda k: trivial_limit(cfg, k),
        seed=cfg["seed"],
    )
    smallest = min(
        (
            pt[q]["mean"]
            for pt in points
            for q in QUANTITIES
            if pt[q]["mean"] is not None
            and pt[q]["mean"] > 0
            and not (q == "delta_z" and pt["steps"] == 0)
        ),
        default=None,
    )
    if excluded:
        runner.warn(
            f"{excluded} grid point(s) lie less than 10x above the reference's error estimate "
            f"({error_estimate:.2e}; Z: {error_estimate_z:.2e}) and were left out of the fits; "
            "raise --order/--particles or use larger errors"
        )
    for f in fits:
        if f.get("excluded"):
            runner.warn(f"{f['excluded']} exploded draw(s) of {f['quantity']} excluded from a fit")
    fit_seconds = time.perf_counter() - t_fit
    reference_entry = {
        **ref_info,
        "particles": int(ref["particles"]),
        "solver": "diffrax Dopri8, PID controller, dense output",
        "rtol": cfg["rtol"],
        "atol": cfg["rtol"],
        "error_estimate": error_estimate,
        "error_estimate_z": error_estimate_z,
        "error_parts": {
            "quadrature_h_b": ref["err_quadrature"].tolist(),
            "tolerance_h_b": ref["err_tolerance"].tolist(),
        },
        "smallest_finite_error": smallest,
        "ratio_smallest_to_reference": (
            smallest / error_estimate if smallest and error_estimate > 0 else None
        ),
        "solver_steps": ref["num_steps"].tolist(),
        "ok": bool(ref["ok"]),
        "limit_loss": ref["losses"].tolist(),
        "depth_point": "s_l = l/L for h^l, b^l and the units of layer l",
        "float64": bool(cfg["x64"]),
    }
    t_plot = time.perf_counter()
    from .mean_ode_plot import plot_convergence

    plot_convergence(args.out, cfg, points, decomposition, fits)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "reference": reference_entry,
            "decomposition": decomposition,
        },
        timing={
            "reference_seconds": ref_seconds,
            "compile_seconds": sum(compile_seconds.values()),
            # the Euler part's programs (one per depth), compiled ahead in the same threads
            "euler_compile_seconds": sum(euler_compile_seconds.values()),
            "euler_programs": len(euler_compile_seconds),
            # how long the main thread waited for programs (finite and Euler) still
            # compiling; the rest of the compile time overlapped other work
            "compile_wait_seconds": sum(compile_wait) + sum(euler_wait),
            "programs": len(compile_seconds),
            "program_boxes": sorted({f"L{b[0]}_M{b[1]}" for b in boxes.values()}),
            "pad_units": pad_units,
            "units_per_batch": units_per_batch,
            "unroll": unroll,
            "depth_loop": args.depth_loop,
            "depth_loop_by_program": dict(sorted(methods.items())),
            "compile_workers": workers,
            "finite_seconds": sum(finite_seconds.values()),
            "finite_seconds_by_point": finite_seconds,
            "compile_seconds_by_program": compile_seconds,
            "euler_seconds": euler_seconds,
            "fit_seconds": fit_seconds,
            "plot_seconds": time.perf_counter() - t_plot,
        },
    )
