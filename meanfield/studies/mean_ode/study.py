"""`meanfield study mean-ode`: finite ResNets against the neural mean-ODE limit.

The headline study (docs: Mathematics §3, §7). A grid over depth L and width M; at every point,
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

Why this file is long: it is one study, the library's headline; its `run` walks the steps
a convergence study reports (docs: Mathematics §7) in one place (reference with its own
error, grid, self-check, fits, verdicts). Its parts that stand alone live beside it: the
reference (`mean_ode_reference`), the automatic design (`mean_ode_design`), a user's block
and law (`own_block`) and the figure (`mean_ode_plot`).
"""

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...blocks.activations import ACTIVATIONS
from ...coupling.convergence import (
    QUANTITIES,
    convergence_fits,
    delta_quantiles,
    law_fits,
    law_slopes,
    summarize_steps,
)
from ...coupling.design import first_pass_mean, pad_grid, program_boxes, seed_program
from ...coupling.mean_ode import LimitOnGrid, draw_units, euler_errors
from ...coupling.reference import limit_grids, reference_errors, refine_reference
from ...engine import AbstractDepthLoop, AutoLoop, FusedLoop, ScanLoop
from ...harness.args import (
    check_activation,
    check_costs,
    check_elements,
    check_memory,
    check_size,
    for_backend,
    int_list,
    nonnegative_int,
    positive_float,
    positive_int,
    preset_config,
)
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...laws.unit import AbstractGaussianLaw
from ...limits.mean_ode import MeanODE, solve_mean_ode
from ...limits.particles import Particles
from ...runtime.errors import StudyInputError
from ...runtime.sharding import gather_processes
from ...stats.fits import excluded_warning
from ..shared.own_block import (
    BUILT_IN_BLOCK,
    BUILT_IN_LAW,
    describe_user_object,
    make_data,
    quadrature_applies,
    study_block_law,
)
from .design import AUTO, auto_design, not_judged
from .reference import (
    REPLICAS,
    monte_carlo,
    particle_sets,
    quadrature_order,
    reference_cost,
    reference_info,
    reference_on_grids,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

HELP = "finite ResNets vs the neural mean-ODE limit: the 1/L + 1/sqrt(LM) study"
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
# the Euler part runs the limit's particles at every layer: at most this many units
# (particles × depth) at once; a larger reference gives it a subset of its own
EULER_UNITS = 2**22


def add_arguments(parser):
    parser.add_argument("--L", type=int_list, help="depths, increasing (e.g. 4,8,16)")
    parser.add_argument("--M", type=int_list, help="widths, increasing (e.g. 1,16,256)")
    parser.add_argument("--seeds", type=positive_int, help="finite networks per grid point")
    parser.add_argument("--steps", type=nonnegative_int, help="GD steps k (>= 0)")
    parser.add_argument("--activation", help=f"one of {', '.join(ACTIVATIONS)}")
    parser.add_argument("--init", choices=["centred", "non-centred"], help="initial law μ_0")
    parser.add_argument("--d", type=positive_int, help="state dimension (default 2)")
    parser.add_argument("--inputs", type=positive_int, help="training inputs n (default 3)")
    parser.add_argument("--sigma-u", type=positive_float, help="std of u (default 1.25)")
    parser.add_argument("--sigma-v", type=positive_float, help="std of v, centred init (default 1)")
    parser.add_argument("--sigma-xi", type=float, help="std of ξ in v = u + ξ (default 0)")
    parser.add_argument("--lr", type=float, help="learning rate η, mean-ODE convention")
    parser.add_argument(
        "--block",
        help="your residual block: MODULE:NAME (importable, e.g. from PYTHONPATH) or "
        "PATH.py:NAME, an AbstractUnitBlock or AbstractLayerBlock (class or instance); "
        "with it --activation is refused",
    )
    parser.add_argument(
        "--law",
        help="the law of its parameters: MODULE:NAME or PATH.py:NAME, an AbstractLaw or a "
        "function of no arguments returning one; with it --init and --sigma-* are refused",
    )
    parser.add_argument(
        "--design",
        choices=["auto", "grid"],
        help="'auto' (default with --block, unless --L or --M is given): a pilot fit of "
        "a/L + b/sqrt(LM) places the line of depths where 1/L dominates and the line of "
        "widths where 1/sqrt(LM) does, within the reference's accuracy; 'grid': --L x --M "
        "and the preset's lines",
    )
    parser.add_argument(
        "--reference",
        choices=["auto", "quadrature", "monte-carlo"],
        help="how the limit's expectation is computed: Gauss-Hermite quadrature (Gaussian "
        "laws) or Monte-Carlo particles with a batch-means error (default: quadrature for "
        "the built-in block; 'auto' with --block: quadrature where the law is Gaussian and "
        "has few enough coordinates, else Monte Carlo)",
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
        type=nonnegative_int,
        help="run a grid point inside a larger point's compiled program (wider, or on a CPU "
        "also deeper) when the padding adds at most this many units, seeds x (extra L*M) "
        "(default 2^20 on CPU, 2^26 on GPU/TPU; 0: one program per (L, M))",
    )


def configure(args) -> dict:
    """Preset, then command-line overrides; every value checked (StudyInputError),
    the user's block and law (`--block`, `--law`) loaded and tried on the data first."""
    block_arg, law_arg = getattr(args, "block", None), getattr(args, "law", None)
    if block_arg is not None and law_arg is None:
        raise StudyInputError("--law: give the law of your block's parameters (with --block)")
    for given, options, what in (
        (block_arg, BUILT_IN_BLOCK, "--block"),
        (law_arg, BUILT_IN_LAW, "--law"),
    ):
        for name, flag in options.items():
            if given is not None and getattr(args, name, None) is not None:
                raise StudyInputError(f"{flag}: sets the built-in 2LP, not used with {what}")
    cfg = preset_config(
        args,
        DEFAULTS,
        PRESETS,
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
    custom = block_arg is not None or law_arg is not None
    if block_arg is not None:
        cfg.pop("activation")
        cfg["block"] = describe_user_object(block_arg)
    if law_arg is not None:
        for name in BUILT_IN_LAW:
            cfg.pop(name)
        cfg["law"] = describe_user_object(law_arg)
    grid_given = getattr(args, "L", None) is not None or getattr(args, "M", None) is not None
    design = getattr(args, "design", None)
    cfg["design"] = design or ("auto" if block_arg is not None and not grid_given else "grid")
    if getattr(args, "reference", None) is None and custom:
        cfg["reference"] = "auto"
    if block_arg is None:
        check_activation(cfg["activation"])
    if law_arg is None:  # options of the other initial law are refused, not ignored
        unused = {"centred": ("sigma_xi", "--sigma-xi"), "non-centred": ("sigma_v", "--sigma-v")}
        name, flag = unused[cfg["init"]]
        if getattr(args, name, None) is not None:
            raise StudyInputError(f"{flag}: not used with --init {cfg['init']}")
    if cfg["steps"] < 0:
        raise StudyInputError(f"--steps: must be >= 0, got {cfg['steps']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 seeds for spreads, got {cfg['seeds']}")
    if not (math.isfinite(cfg["lr"]) and cfg["lr"] >= 0):
        raise StudyInputError(f"--lr: must be a finite number >= 0, got {cfg['lr']}")
    if cfg["lr"] > MAX_LR:
        raise StudyInputError(
            f"--lr: at most {MAX_LR:g} (beyond it a GD step of the limit makes its ODE so stiff "
            f"that the reference solver stalls for minutes on its step budget), got {cfg['lr']:g}"
        )
    if law_arg is None:
        for name, flag in BUILT_IN_LAW.items():
            value = cfg.get(name)
            if isinstance(value, float) and value > MAX_SCALE:
                raise StudyInputError(
                    f"{flag}: at most {MAX_SCALE:g} (the built-in law's scales beyond it overflow "
                    f"or stall the reference solver), got {value:g}"
                )
    if law_arg is None and not (math.isfinite(cfg["sigma_xi"]) and cfg["sigma_xi"] >= 0):
        raise StudyInputError(f"--sigma-xi: must be a finite number >= 0, got {cfg['sigma_xi']}")
    if len(cfg["L"]) < 2 or len(cfg["M"]) < 2:
        raise StudyInputError("--L/--M: need at least two depths and two widths for slopes")
    if cfg["inputs"] > MAX_INPUTS:  # before the data set is made
        raise StudyInputError(
            f"--inputs: at most {MAX_INPUTS} (every network carries each input through every "
            f"layer, seed and GD step), got {cfg['inputs']}"
        )
    # the data set (inputs, d) and the limit's grid along depth, (inputs, d) per layer,
    # are made before the cost model runs: bound them first
    check_elements("--d/--inputs", cfg["inputs"] * cfg["d"], "the data set, (inputs, d)")
    check_memory("--d/--inputs", 8.0 * cfg["inputs"] * cfg["d"], "the data set, (inputs, d)")
    if float(jnp.min(jnp.linalg.norm(make_data(cfg)[0], axis=1))) < 1e-6:  # float32 too
        raise StudyInputError(
            f"--d/--inputs: d = {cfg['d']} with {cfg['inputs']} inputs puts an input at 0 "
            "(for d = 1 the inputs are cos(π(i + 1/2)/n)): use an even number of inputs"
        )
    block, law = study_block_law(args, cfg)  # loaded and tried: before the folder is made
    if cfg["reference"] == "auto":
        cfg["reference"] = "quadrature" if quadrature_applies(law) else "monte-carlo"
    for name, flag, used_with in (
        ("order", "--order", "quadrature"),
        ("particles", "--particles", "monte-carlo"),
    ):
        if getattr(args, name, None) is not None and cfg["reference"] != used_with:
            raise StudyInputError(
                f"{flag}: only used with --reference {used_with}, not {cfg['reference']}"
            )
    if cfg["reference"] == "quadrature":
        if not isinstance(law, AbstractGaussianLaw):
            raise StudyInputError(
                "--reference: quadrature needs a Gaussian law (an AbstractGaussianLaw); "
                "use --reference monte-carlo"
            )
        quadrature_order(law, cfg["order"])
    elif cfg["particles"] % REPLICAS:
        raise StudyInputError(
            f"--particles: must be a multiple of {REPLICAS} (the batches that estimate the "
            f"reference's error), got {cfg['particles']}"
        )
    return cfg


def grid_specs(cfg) -> list[dict]:
    """The rectangular grid L × M, plus the line of widths M <= fit_M_max at depth
    L_for_M where the Monte-Carlo term dominates (the fit against M)."""
    specs = [{"L": L, "M": M} for L in cfg["L"] for M in cfg["M"]]
    if cfg["L_for_M"] not in cfg["L"]:
        specs += [{"L": cfg["L_for_M"], "M": M} for M in cfg["M"] if M <= cfg["fit_M_max"]]
    return specs


# the largest learning rate (mean-ODE convention) and scale of the built-in law taken: at
# lr = 1000, and at lr = 10, the reference solve ran to its step budget (16384 steps per
# solve; over 400 s with the quick preset's 2^16 nodes, 40 s with 144); lr = 2 finished
# within it (a 144-node reference, k = 1, on a 2-core CPU)
MAX_LR = 2.0
MAX_SCALE = 100.0
# temporaries per unit of a finite network (bytes; d = 2, n = 3, float64: the compiled
# paper-preset program, XLA's memory analysis), scaled by d·n/6 for other sizes
BYTES_PER_UNIT = 430
# the most unit-steps (seeds × L·M × (k + 1), summed over the grid) a study may ask for:
# the paper preset asks for about 2^36 (hours on a GPU); 2^42 would take weeks
MAX_UNIT_STEPS = 2**42


MAX_INPUTS = 4096  # data points of the built-in data set


def check_cost(cfg, units_per_batch: int) -> None:
    """Refuse, before anything is allocated, a grid whose largest point does not fit in
    this machine's memory (one seed at a time, at least), holds an array beyond the
    2^31 - 1 elements XLA takes, or whose total work is beyond `MAX_UNIT_STEPS`, and a
    reference limit beyond the memory or the work limit (`reference_cost`): one line
    giving the estimate."""
    if cfg["design"] == "auto":  # the design keeps within the preset's own budgets
        return
    check_costs([reference_cost(cfg)])
    specs = grid_specs(cfg)
    scale = BYTES_PER_UNIT * max(1.0, cfg["d"] * cfg["inputs"] / 6)
    largest = max(s["L"] * s["M"] for s in specs)
    batch_units = max(largest, min(units_per_batch, largest * cfg["seeds"]))
    check_memory("--L/--M/--L-for-M/--seeds", batch_units * scale, "the largest grid point")
    # every seed's key and its errors at every step (Δ^h, Δ^b, Δ^Z, the loss), kept for
    # the point's summaries (about three copies while they are summarized)
    per_seed = 8 + 3 * 4 * 8 * (cfg["steps"] + 1)
    check_memory("--seeds/--steps", cfg["seeds"] * per_seed, "one grid point's seeds")
    check_elements(
        "--seeds/--steps", cfg["seeds"] * (cfg["steps"] + 1), "one error over seeds and steps"
    )
    check_elements(
        "--L/--M/--L-for-M/--seeds",
        batch_units * 3 * cfg["d"],
        "the units of the largest grid point's batch of seeds, (seeds, L, M, parameters)",
    )
    work = sum(s["L"] * s["M"] for s in specs) * cfg["seeds"] * (cfg["steps"] + 1)
    check_size("--L/--M/--seeds/--steps", work, MAX_UNIT_STEPS, "the work in unit-steps")


def all_depths(cfg) -> list[int]:
    return sorted(set(cfg["L"]) | {cfg["L_for_M"]})


def trivial_limit(cfg, step: int) -> bool:
    """With a centred law the k = 0 limit is the identity: only the 1/sqrt(LM) term exists."""
    return cfg["init"] == "centred" and step == 0


def _pow2(x: float) -> int:
    """The largest power of two at most x (at least 1)."""
    return 1 << max(0, int(math.floor(math.log2(max(x, 1)))))


SELF_CHECK_PARTICLES = 4096  # the Euler part's self-check runs at most this many particles


def _difference_scales(h, b, units) -> dict[str, float]:
    """The sizes Δ^h, Δ^b and Δ^Z are differences of (`self_check.of_terms`): the largest
    norm of the limit's states `h` and backward states `b` on a grid (`(steps + 1, L + 1,
    n, d)`) and of a unit (`units`: draws of the law, leaves with a leading axis)."""
    sq = sum(np.sum(np.reshape(a, (a.shape[0], -1)) ** 2, axis=1) for a in jax.tree.leaves(units))
    return {
        "delta_h": float(np.max(np.linalg.norm(np.asarray(h), axis=-1))),
        "delta_b": float(np.max(np.linalg.norm(np.asarray(b), axis=-1))),
        "delta_z": float(np.sqrt(np.max(sq))),
    }


def _subset(particles: Particles, count: int) -> Particles:
    """The first `count` of i.i.d. particles, with equal weights."""
    z = jax.tree.map(lambda a: a[:count], particles.z)
    return Particles(z=z, weights=jnp.full((count,), 1.0 / count))


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


def run(args):
    cfg = configure(args)
    workers = args.compile_workers or max(1, min(8, os.cpu_count() or 1))
    pad_units = args.pad_units
    if pad_units is None:
        pad_units = for_backend(PAD_UNITS)
    if pad_units < 0:
        raise StudyInputError(f"--pad-units: must be >= 0, got {pad_units}")
    units_per_batch = args.seed_batch_units or for_backend(UNITS_PER_BATCH)
    check_cost(cfg, units_per_batch)
    unroll = args.unroll
    loop = depth_loop(args.depth_loop, unroll)
    runner = start_study(args, cfg)
    block, law = study_block_law(args, cfg)
    xs, ys = make_data(cfg)
    lr, steps = cfg["lr"], cfg["steps"]
    master = jr.key(cfg["seed"])
    # the limit copies' error is measured on probe draws of their own
    ref_probes = jax.vmap(law.sample)(jr.split(jr.fold_in(master, 3), cfg["probes"]))
    first_pass = None
    if "block" in cfg or "law" in cfg:
        first_pass = first_pass_mean(block, law, xs, key=jr.fold_in(master, 6))
        if first_pass["heavy_tailed"]:
            return not_judged(args, runner, cfg, first_pass)
        if first_pass["centred"] and steps == 0:
            runner.warn(
                "the law is centred (E φ(x, Z_0) = 0 within its Monte-Carlo error), so the "
                "first forward pass of the limit is the identity and at k = 0 only the "
                "1/sqrt(LM) term exists; use --steps >= 1 to see the 1/L term"
            )

    def trivial(k: int) -> bool:
        """The limit is the identity at step k: only the 1/sqrt(LM) term exists there."""
        if first_pass is not None:
            return k == 0 and first_pass["centred"]
        return trivial_limit(cfg, k)

    design = None
    reuse = None  # the pilot's reference, where the final one is the same limit
    if cfg["design"] == "auto":
        design, grid, main, reuse = auto_design(
            runner, cfg, block, law, xs, ys, ref_probes, loop, units_per_batch, first_pass
        )
        cfg = {**cfg, **grid}  # the designed lines (results.json keeps the given config)
        check = None if cfg["reference"] == "monte-carlo" else particle_sets(cfg, law)[1]
        ref_info = reference_info(cfg, main)
    else:
        main, check, ref_info = particle_sets(cfg, law)
    compile_seconds = {}
    finite_seconds = {}
    specs = grid_specs(cfg)
    boxes = program_boxes(
        [(s["L"], s["M"]) for s in specs],
        cfg["seeds"],
        pad_units,
        pad_depth=for_backend(PAD_DEPTH),
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
    # a Monte-Carlo reference too large to run at every layer: the Euler part runs a
    # subset of its particles against the limit of that subset (its own solve)
    euler_set, euler_own = main, False
    if check is None and main.count * max(cfg["L"]) > EULER_UNITS:
        euler_set, euler_own = _subset(main, max(256, _pow2(EULER_UNITS // max(cfg["L"])))), True

    def compile_euler(L):
        t0 = time.perf_counter()
        zeros = jnp.zeros((steps + 1, L + 1, cfg["inputs"], cfg["d"]))  # the limit's shape
        grid = LimitOnGrid(h=zeros, b=zeros)
        # `eqx.filter_jit` gives the function a `lower` (which pyright does not see)
        compiled = euler_errors.lower(  # pyright: ignore[reportFunctionMemberAccess]
            block, euler_set, xs, ys, grid, learning_rate=lr, probes=probes
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

        def reference():
            if design is not None and check is None and "reference_target" in design:
                # Monte Carlo, designed: refined until its error meets the design's target
                def solve(N):
                    runner.say(f"reference: the limit with {N} particles ...")
                    return reference_on_grids(
                        cfg, block, monte_carlo(cfg, law, N), None, xs, ys, ref_probes,
                        all_depths(cfg),
                    )  # fmt: skip

                out, history = refine_reference(
                    solve,
                    main.count,
                    design["reference_target"],
                    AUTO[cfg["preset"]]["particles_max"],
                    first=reuse,
                )
                out = dict(out)
                out["refine_particles"] = np.array([r["particles"] for r in history])
                out["refine_errors"] = np.array([r["error"] for r in history])
            elif reuse is not None:
                out = dict(reuse)
            else:
                out = reference_on_grids(
                    cfg, block, main, check, xs, ys, ref_probes, all_depths(cfg)
                )
            if euler_own:  # the Euler part's own limit, with its subset of the particles
                model = MeanODE(block, euler_set, xs, ys, lr)
                sol = solve_mean_ode(model, steps, rtol=cfg["rtol"], atol=cfg["rtol"])
                for L, (h, b) in limit_grids(sol, cfg["L"]).items():
                    out[f"euler_h_L{L}"], out[f"euler_b_L{L}"] = np.asarray(h), np.asarray(b)
            return out

        ref = runner.artifact("reference", reference, describe="the reference limit")
        ref_seconds = time.perf_counter() - t_ref
    except BaseException:  # an error or a stop: a compile running is not waited for
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    # then one per Euler depth, while this thread runs the finite networks (where an
    # accelerator leaves the CPU cores idle). Submitted now, not with the others: on a
    # 2-core CPU they then slow the reference down more than they save
    euler_ahead = {s["L"]: pool.submit(compile_euler, s["L"]) for s in runner.pending(euler_specs)}
    # the reference's own error in the norm of each quantity: Δ^h's is `error_estimate`
    floors = reference_errors(ref)
    error_estimate, error_estimate_z = floors["delta_h"], floors["delta_z"]
    # the Euler part is judged against its own limit: that of the reference, or of the
    # subset it runs (exact up to the solver's tolerance)
    tol_floor = float(np.max(ref["err_tolerance"]))
    euler_floors = {f"{q}_euler": (tol_floor if euler_own else floors[q]) for q in QUANTITIES}
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
        return finite_summary(out, spec["L"])

    def finite_summary(out, L):
        values = {
            "delta_h": out.delta_h,
            "delta_b": out.delta_b,
            "delta_z": out.delta_z,
            "loss": out.loss,
        }
        per_step = summarize_steps(values, steps)
        # Δ's are differences against the limit (Δ^Z exactly 0 at step 0): their round-off
        # is that of the states and units (`self_check.of_terms`, `_difference_scales`)
        scales = _difference_scales(ref[f"h_L{L}"], ref[f"b_L{L}"], probes)
        for at_k in per_step:
            for q, scale in scales.items():
                at_k[q] = of_terms(at_k[q], scale)
        return {"steps": per_step}

    def finite_point_uncompiled(spec):
        """`finite_point` by the program of the point's own (L, M), not of its padded box
        (the padding's layers are identities: the same values to round-off), not compiled
        ahead: the self-check runs it op by op (at the box's depth, 1024 layers for
        L = 8, that took 200 s)."""
        L, M = spec["L"], spec["M"]
        program = seed_program(block, law, xs, ys, lr, L, M, cfg["seeds"], units_per_batch,
                               loop=loop)  # fmt: skip
        keys, _, _, depth, width = point_inputs(spec)
        h, b = pad_grid(ref[f"h_L{L}"], L), pad_grid(ref[f"b_L{L}"], L)
        return finite_summary(program(keys, h, b, depth, width), L)

    euler_compile_seconds = {}
    euler_wait = []  # as compile_wait, for the Euler part's programs

    def euler_point(spec):
        L = spec["L"]
        t_wait = time.perf_counter()
        compiled, euler_compile_seconds[f"L{L}"] = euler_ahead[L].result()
        euler_wait.append(time.perf_counter() - t_wait)
        return euler_summary(L, compiled)

    def euler_point_uncompiled(spec):
        """`euler_point` by `euler_errors` itself (the self-check runs it op by op)."""
        return euler_summary(spec["L"], euler_errors)

    def euler_summary(L, errors, particles=None):
        tag = "euler_" if euler_own else ""
        grid = LimitOnGrid(h=jnp.asarray(ref[f"{tag}h_L{L}"]), b=jnp.asarray(ref[f"{tag}b_L{L}"]))
        particles = euler_set if particles is None else particles
        e = errors(block, particles, xs, ys, grid, learning_rate=lr, probes=probes)
        # differences against the limit, as the finite part's (`finite_summary`)
        scales = _difference_scales(grid.h, grid.b, probes)
        return {
            "steps": [
                {
                    "delta_h_euler": of_terms(float(e.delta_h[k]), scales["delta_h"]),
                    "delta_b_euler": of_terms(float(e.delta_b[k]), scales["delta_b"]),
                    "delta_z_euler": of_terms(float(e.delta_z[k]), scales["delta_z"]),
                }
                for k in range(steps + 1)
            ]
        }

    try:
        raw = runner.run_points(
            specs, finite_point, describe=lambda s: f"L={s['L']} M={s['M']}",
            check=finite_point_uncompiled, spread="seeds",
        )  # fmt: skip
        t_euler = time.perf_counter()
        # the self-check: op by op, tens of thousands of particles at every layer and GD
        # step take minutes; above SELF_CHECK_PARTICLES it runs the point with that many of
        # them, compiled and op by op (the same function both ways, not the study's number)
        few = None
        if euler_set.count > SELF_CHECK_PARTICLES:
            few = _subset(euler_set, SELF_CHECK_PARTICLES)
        euler_raw = runner.run_points(
            euler_specs, euler_point, describe=lambda s: f"Euler part, L={s['L']}",
            check=euler_point_uncompiled, spread="seeds",
            variant=None if few is None else lambda s: euler_summary(s["L"], euler_errors, few),
            route=None if few is None else f"the Euler part with {SELF_CHECK_PARTICLES} of its "
            f"{euler_set.count} particles, compiled and op by op",
        )  # fmt: skip
        # the Euler part's own time, without its waits for programs still compiling
        euler_seconds = time.perf_counter() - t_euler - sum(euler_wait)
    except BaseException:  # as above: Ctrl-C during a compile ends the run at once
        pool.shutdown(wait=False, cancel_futures=True)
        raise
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
        trivial=trivial,
        seed=cfg["seed"],
        floors={**floors, **euler_floors},
    )
    rates = law_fits(
        points,
        decomposition,
        steps=steps,
        error_estimate=error_estimate,
        error_estimate_z=error_estimate_z,
        trivial=trivial,
        seed=cfg["seed"],
        floors={**floors, **euler_floors},
    )
    law_slopes(fits, rates)
    smallest_by = {
        q: min(
            (
                pt[q]["mean"]
                for pt in points
                if pt[q]["mean"] is not None
                and pt[q]["mean"] > 0
                and not (q == "delta_z" and pt["steps"] == 0)
            ),
            default=None,
        )
        for q in QUANTITIES
    }
    smallest = smallest_by["delta_h"]
    if excluded:
        runner.warn(
            f"{excluded} grid point(s) lie less than 10x above the reference's error estimate "
            f"({error_estimate:.2e}; Z: {error_estimate_z:.2e}) and were left out of the fits; "
            "raise --order/--particles or use larger errors"
        )
    for q, value in smallest_by.items():
        if value is not None and floors[q] * 10 > value:
            runner.warn(
                f"{q}: the reference's error estimate ({floors[q]:.2e}) is not 10x below the "
                f"smallest finite error ({value:.2e}): the points it cannot judge are left out"
            )
    for f in fits:  # the one-term fits' (the law's own below; a/L + b/sqrt(LM) says the same)
        if f.get("excluded") and f.get("against") is not None:
            runner.warn(excluded_warning(f))
    for rate in rates:  # (not `law`: the study's law, which the points' closures use)
        if rate.get("excluded"):
            runner.warn(f"{rate['excluded']} exploded draw(s) of {rate['quantity']} left out of "
                        f"its law {rate['model']} (steps={rate['fixed']['steps']})")  # fmt: skip
        if rate.get("reason"):
            runner.warn(f"{rate['quantity']} (steps={rate['fixed']['steps']}): no law fit: "
                        f"{rate['reason']}")  # fmt: skip
    fit_seconds = time.perf_counter() - t_fit
    reference_entry = {
        **ref_info,
        "particles": int(ref["particles"]),
        "solver": "diffrax Dopri8, PID controller, dense output",
        "rtol": cfg["rtol"],
        "atol": cfg["rtol"],
        # in the norm of Δ^h (the sup over depths and inputs of ‖h − ĥ‖), of Δ^b and of Δ^Z
        "error_estimate": error_estimate,
        "error_estimate_b": floors["delta_b"],
        "error_estimate_z": error_estimate_z,
        "error_parts": (
            {
                "quadrature_h_b": ref["err_quadrature"].tolist(),
                "tolerance_h_b": ref["err_tolerance"].tolist(),
            }
            if "err_quadrature" in ref
            else {
                "monte_carlo_h_b": ref["err_particles"].tolist(),
                "monte_carlo_spread_h_b": ref["err_particles_spread"].tolist(),
                "tolerance_h_b": ref["err_tolerance"].tolist(),
            }
        ),
        "smallest_finite_error": smallest,
        "smallest_finite_error_by_quantity": smallest_by,
        "ratio_smallest_to_reference": (
            smallest / error_estimate if smallest and error_estimate > 0 else None
        ),
        "solver_steps": ref["num_steps"].tolist(),
        "refinement": (
            [
                {"particles": int(n), "error_estimate": float(e)}
                for n, e in zip(ref["refine_particles"], ref["refine_errors"], strict=True)
            ]
            if "refine_particles" in ref
            else None
        ),
        "ok": bool(ref["ok"]),
        "limit_loss": ref["losses"].tolist(),
        "depth_point": "s_l = l/L for h^l, b^l and the units of layer l",
        "float64": bool(cfg["x64"]),
    }
    extra = {}
    if first_pass is not None:
        extra["first_pass"] = first_pass
    if design is not None:
        extra["design"] = design
    if euler_own:
        extra["decomposition_particles"] = euler_set.count
    runner.finish(
        {
            "points": points,
            # the headline: the exponents of the whole law, jointly over the grid
            "rates": rates,
            # secondary: one-term slopes along lines of the grid, and a/L + b/sqrt(LM)
            "fits": fits,
            "reference": reference_entry,
            "decomposition": decomposition,
            "delta_quantiles": delta_quantiles(points, steps, dimension=cfg["d"], seed=cfg["seed"]),
            # the grid that ran (the automatic design's lines; `config` keeps what was given)
            "grid": {k: cfg[k] for k in GRID_KEYS},
            "figure_floors": floors,
            **extra,
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
        },
        plot=plot,
    )


GRID_KEYS = ("L", "M", "L_for_M", "fit_M_max")


def plot(out, results) -> None:
    """The figure from `results.json` alone (`meanfield plot DIR`), on the grid that ran
    (`grid`: the automatic design's lines, not the preset's); a study that judged nothing
    (a heavy-tailed law) has none."""
    if not results["points"]:
        return
    from .plot import plot_convergence

    cfg = {**results["config"], **(results.get("grid") or {})}
    rates = results.get("rates")
    plot_convergence(out, cfg, results["points"], results["decomposition"],
                     results["fits"], floor=results.get("figure_floors"), rates=rates)  # fmt: skip
    for k in sorted({p["steps"] for p in results["points"]} - {cfg["steps"]}):
        plot_convergence(out, cfg, results["points"], results["decomposition"],
                         results["fits"], steps=k, rates=rates)  # fmt: skip
