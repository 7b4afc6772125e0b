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

Why this file is long: it is one study, the library's headline; its run (`_MeanODERun`,
one method per stage) walks the steps a convergence study reports (docs: Mathematics §7)
in one place (reference with its own error, programs compiled ahead, grid, Euler part,
self-check, fits, verdicts). Its parts that stand alone live beside it: the
reference (`reference.py`), the automatic design (`design.py`) and the figure
(`plot.py`); a user's block and law are `studies.shared.own_block`'s.
"""

import math
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...coupling.convergence import (
    QUANTITIES,
    convergence_fits,
    delta_quantiles,
    law_fits,
    law_slopes,
    summarize_steps,
)
from ...coupling.design import first_pass_mean, merged_boxes, pad_grid, seed_program
from ...coupling.mean_ode import LimitOnGrid, draw_units, euler_errors
from ...coupling.reference import (
    limit_grids,
    reference_errors,
    refine_reference,
    replica_batch,
    subset_grids,
)
from ...engine import AbstractDepthLoop, AutoLoop, FusedLoop, ScanLoop
from ...harness.args import (
    Cost,
    Limit,
    check_activation,
    check_elements,
    check_memory,
    for_backend,
    preset_config,
)
from ...harness.cache import cache_folder
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...laws.unit import AbstractGaussianLaw
from ...limits.mean_ode import MeanODE, solve_mean_ode
from ...limits.particles import Particles
from ...runtime.errors import StudyInputError
from ...runtime.sharding import gather_processes
from ...stats.fits import excluded_warning
from ...stats.joint_law import compile_fits
from ..shared.own_block import (
    BUILT_IN_BLOCK,
    BUILT_IN_LAW,
    describe_user_object,
    known_by_content,
    make_data,
    quadrature_applies,
    record_user_code,
    study_block_law,
)
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .design import AUTO, auto_design, not_judged
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    DEPTH_LOOPS as DEPTH_LOOPS,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .reference import (
    MONTE_CARLO_RTOL,
    REPLICAS,
    monte_carlo,
    particle_sets,
    quadrature_order,
    reference_cost,
    reference_info,
    reference_on_grids,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

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
    "rtol": 1e-10,  # a quadrature reference's; a Monte-Carlo one's: MONTE_CARLO_RTOL
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
# what one more compiled program costs, in padded units (seeds × extra L·M): grid points
# share a program while their padding together costs less (`merged_boxes`). On a 2-core
# CPU (float64) a finite program compiles in ~3 CPU-seconds, the work of ~2^22 units (the
# quick preset's (1024, 64) program: 0.45 CPU-s for 10 × 2^16 units); on an accelerator
# far more (a guess, not yet measured: the paper preset in 32 programs, where pricing
# each point's padding alone against 2^26 units, `program_boxes`, gave 30)
PAD_UNITS = {"cpu": 2**22, "default": 2**28}
# ... and inside a deeper point's program too, on a CPU only: there a padded layer costs
# what its units cost, while on an accelerator each layer is a sequence of kernel launches
PAD_DEPTH = {"cpu": True, "default": False}
# the Euler part runs the limit's particles at every layer: at most this many units
# (particles × depth) at once; a larger reference gives it a subset of its own
EULER_UNITS = 2**22


def configure(args) -> dict:
    """Preset, then command-line overrides; every value checked (StudyInputError),
    the user's block and law (`--block`, `--law`) loaded and tried on the data first;
    the options of how it runs (`--pad-units`) too."""
    block_arg, law_arg = getattr(args, "block", None), getattr(args, "law", None)
    _check_user_options(args, block_arg, law_arg)
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
    _name_user_objects(args, cfg, block_arg, law_arg)
    _check_training(args, cfg, block_arg, law_arg)
    _check_data(cfg)
    block, law = study_block_law(args, cfg)  # loaded and tried: before the folder is made
    _check_reference(args, cfg, law)
    _pad_units(args)
    # the user's code by its content: a resume or the artifact cache after an edit of
    # its file is another configuration (None: not known, the reference is not shared)
    record_user_code(cfg, block, law, block_arg, law_arg)
    return cfg


def _check_user_options(args, block_arg, law_arg) -> None:
    """A user's block needs its law; the built-in 2LP's options are refused with either."""
    if block_arg is not None and law_arg is None:
        raise StudyInputError("--law: give the law of your block's parameters (with --block)")
    for given, options, what in (
        (block_arg, BUILT_IN_BLOCK, "--block"),
        (law_arg, BUILT_IN_LAW, "--law"),
    ):
        for name, flag in options.items():
            if given is not None and getattr(args, name, None) is not None:
                raise StudyInputError(f"{flag}: sets the built-in 2LP, not used with {what}")


def _name_user_objects(args, cfg, block_arg, law_arg) -> None:
    """The user's block and law named in `cfg` in place of the built-in options; the
    design and the reference they default to."""
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


def _check_training(args, cfg, block_arg, law_arg) -> None:
    """The built-in activation and law's options, the steps, seeds and learning rate, and
    the grid's two depths and widths at least."""
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


def _check_data(cfg) -> None:
    """The data set's size, bounded before it is made, and no input at 0."""
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


def _check_reference(args, cfg, law) -> None:
    """The reference (`auto`: quadrature where the law allows it, else Monte Carlo) and
    its options: only those of the method used, each valid for it."""
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
        return
    if cfg["particles"] % REPLICAS:
        raise StudyInputError(
            f"--particles: must be a multiple of {REPLICAS} (the batches that estimate the "
            f"reference's error), got {cfg['particles']}"
        )
    cfg["rtol"] = max(cfg["rtol"], MONTE_CARLO_RTOL)


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


def cost_parts(args, cfg) -> list:
    """What a grid design costs (the launcher checks it before `run`): the reference limit
    (`reference_cost`), the largest grid point (its memory, one seed at a time at least,
    and its batch's units), one point's seeds' errors, and the grid's work, at most
    `MAX_UNIT_STEPS` unit-steps. No parts with `--design auto`: the design keeps within
    the preset's own budgets."""
    if cfg["design"] == "auto":
        return []
    specs = grid_specs(cfg)
    scale = BYTES_PER_UNIT * max(1.0, cfg["d"] * cfg["inputs"] / 6)
    largest = max(s["L"] * s["M"] for s in specs)
    batch_units = max(largest, min(_units_per_batch(args), largest * cfg["seeds"]))
    # every seed's key and its errors at every step (Δ^h, Δ^b, Δ^Z, the loss), kept for
    # the point's summaries (about three copies while they are summarized)
    per_seed = 8 + 3 * 4 * 8 * (cfg["steps"] + 1)
    work = sum(s["L"] * s["M"] for s in specs) * cfg["seeds"] * (cfg["steps"] + 1)
    return [
        reference_cost(cfg),  # the one part whose work counts against the work limit
        Cost(
            "--L/--M/--L-for-M/--seeds",
            "the largest grid point",
            memory=batch_units * scale,
            elements=batch_units * 3 * cfg["d"],
            array=(
                "the units of the largest grid point's batch of seeds, (seeds, L, M, parameters)"
            ),
        ),
        Cost(
            "--seeds/--steps",
            "one grid point's seeds",
            memory=cfg["seeds"] * per_seed,
            elements=cfg["seeds"] * (cfg["steps"] + 1),
            array="one error over seeds and steps",
        ),
        # the grid's work has a limit of its own, in unit-steps
        Limit("--L/--M/--seeds/--steps", "the work in unit-steps", work, MAX_UNIT_STEPS),
    ]


def _units_per_batch(args) -> int:
    """At most this many units (seeds × L·M) computed at once on a device:
    `--seed-batch-units`, else the default for JAX's backend (`UNITS_PER_BATCH`)."""
    return args.seed_batch_units or for_backend(UNITS_PER_BATCH)


def _pad_units(args) -> int:
    """`--pad-units`, else the default for JAX's backend (`PAD_UNITS`); refused below 0."""
    pad = args.pad_units
    if pad is None:
        pad = for_backend(PAD_UNITS)
    if pad < 0:
        raise StudyInputError(f"--pad-units: must be >= 0, got {pad}")
    return pad


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


class _Stopwatch:
    """The run's one clock: the seconds of its stages, of each program compiled and each
    point run (by name), and of the main thread's waits for programs still compiling."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}
        self.parts: dict[str, dict[str, float]] = {"compile": {}, "euler_compile": {}, "finite": {}}
        self.waits: dict[str, list[float]] = {"compile": [], "euler": [], "fits": []}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage `name` (not recorded where it raises)."""
        t0 = time.perf_counter()
        yield
        self.stages[name] = time.perf_counter() - t0

    @staticmethod
    def timed(fn: Callable, *args) -> tuple[Any, float]:
        """`fn(*args)` and its seconds (a compile thread's, kept when the main thread takes it)."""
        t0 = time.perf_counter()
        result = fn(*args)
        return result, time.perf_counter() - t0

    def wait(self, name: str, future: Future) -> Any:
        """`future`'s result; how long the main thread waited for it is kept under `name`."""
        t_wait = time.perf_counter()
        result = future.result()
        self.waits[name].append(time.perf_counter() - t_wait)
        return result

    def total(self, part: str) -> float:
        """The seconds of every record of `part` (`parts`) together."""
        return sum(self.parts[part].values())


@contextmanager
def _cancelled_on_error(pool: ThreadPoolExecutor) -> Iterator[None]:
    """An error or a stop (Ctrl-C) ends the run at once: a compile running is not waited
    for and those not begun are cancelled."""
    try:
        yield
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise


def run(args, cfg):
    """The study (docs: Mathematics §7), by the stages of `_MeanODERun` in order."""
    study = _MeanODERun(args, cfg)
    if study.first_pass is not None and study.first_pass["heavy_tailed"]:
        return not_judged(args, study.runner, study.cfg, study.first_pass)
    with _cancelled_on_error(study.pool):
        study.plan()
    study.compile_ahead()
    with _cancelled_on_error(study.pool):
        study.reference()
    study.compile_euler_ahead()
    study.reference_floors()
    with _cancelled_on_error(study.pool):
        raw = study.finite_points()
        euler_raw = study.euler_part()
    study.pool.shutdown(cancel_futures=True)
    study.finish(*study.fits(raw, euler_raw))


class _MeanODERun:
    """One run of the study, by its named stages (`run` calls them in order): the set-up
    (the folder, the block, law and data, a user's law's first pass), `plan` (the
    grid and the reference's particles), `compile_ahead` (the grid's programs, in threads),
    `reference` (the limit, while they compile), `compile_euler_ahead`, `reference_floors`,
    `finite_points`, `euler_part` (the decomposition), `fits` and `finish`; one stopwatch,
    `clock`, times them."""

    def __init__(self, args, cfg: dict) -> None:
        """The set-up of the configuration `cfg` (`configure`; its costs checked by the
        launcher): the folder, the block, law and data, rebuilt from it."""
        self.args = args
        self.workers = args.compile_workers or max(1, min(8, os.cpu_count() or 1))
        self.pool = ThreadPoolExecutor(max_workers=self.workers)  # compiles ahead (threads)
        self.pad_units = _pad_units(args)
        self.units_per_batch = _units_per_batch(args)
        self.loop = depth_loop(args.depth_loop, args.unroll)
        cache_folder()  # an unusable MEANFIELD_ARTIFACT_CACHE refused before the folder is made
        self.runner = start_study(args, cfg)
        # the reference and the design's pilots kept in the artifact cache, where the
        # configuration names all they depend on: the user's code known by its content
        self.runner.share_artifacts = known_by_content(cfg)
        self.block, self.law = study_block_law(args, cfg)
        self.xs, self.ys = make_data(cfg)
        self.lr, self.steps = cfg["lr"], cfg["steps"]
        self.master = jr.key(cfg["seed"])
        self.cfg = cfg
        # the limit copies' error is measured on probe draws of their own
        self.ref_probes = jax.vmap(self.law.sample)(
            jr.split(jr.fold_in(self.master, 3), cfg["probes"])
        )
        self.clock = _Stopwatch()
        self.methods: dict[str, str] = {}  # the depth loop of each program compiled
        self.ref: dict | None = None  # the reference's arrays, once solved
        self.first_pass = self._first_pass()

    def _first_pass(self) -> dict | None:
        """A user's block or law: the limit's first pass (`first_pass_mean`), whether its
        law is heavy-tailed (then nothing is judged) or centred (said where k = 0)."""
        if "block" not in self.cfg and "law" not in self.cfg:
            return None
        first_pass = first_pass_mean(self.block, self.law, self.xs, key=jr.fold_in(self.master, 6))
        if not first_pass["heavy_tailed"] and first_pass["centred"] and self.steps == 0:
            self.runner.warn(
                "the law is centred (E φ(x, Z_0) = 0 within its Monte-Carlo error), so the "
                "first forward pass of the limit is the identity and at k = 0 only the "
                "1/sqrt(LM) term exists; use --steps >= 1 to see the 1/L term"
            )
        return first_pass

    def trivial(self, k: int) -> bool:
        """The limit is the identity at step k: only the 1/sqrt(LM) term exists there."""
        if self.first_pass is not None:
            return k == 0 and self.first_pass["centred"]
        return trivial_limit(self.cfg, k)

    def plan(self) -> None:
        """The grid (`--design auto`: designed from a pilot, `auto_design`) and the
        reference's particles; the programs' boxes; the Euler part's depths, probe units
        (the same at every depth) and particles."""
        cfg, law = self.cfg, self.law
        self.design: dict | None = None
        self.reuse: dict | None = None  # the pilot's reference, where the final one is the same
        if cfg["design"] == "auto":
            self.design, grid, self.main, self.reuse = auto_design(
                self.runner, cfg, self.block, law, self.xs, self.ys, self.ref_probes, self.loop,
                self.units_per_batch, self.first_pass, self.pool, for_backend(PAD_DEPTH),
            )  # fmt: skip
            cfg = self.cfg = {**cfg, **grid}  # the designed lines (results.json keeps the given)
            self.check = None if cfg["reference"] == "monte-carlo" else particle_sets(cfg, law)[1]
            self.ref_info = reference_info(cfg, self.main)
        else:
            self.main, self.check, self.ref_info = particle_sets(cfg, law)
        self.specs = grid_specs(cfg)
        self.boxes = merged_boxes(
            [(s["L"], s["M"]) for s in self.specs],
            cfg["seeds"],
            self.pad_units,
            pad_depth=for_backend(PAD_DEPTH),
        )
        # the decomposition's Euler part: one program per depth, or on a CPU per box of
        # depths (padded, as the grid's), `merged_boxes` pricing a layer by its particles
        self.euler_specs = [{"L": L, "units": "limit-particles"} for L in cfg["L"]]
        self.probes = jax.vmap(law.sample)(jr.split(jr.fold_in(self.master, 5), cfg["probes"]))
        # the Euler part runs a subset of the reference's particles against the limit of
        # that subset: a quadrature reference's coarser rule (its limit solved with the
        # reference, as its error check; a quarter of the work of the finer rule, whose
        # Euler part it equals to the quadrature's error); a Monte-Carlo reference too
        # large to run at every layer, batch 0 of it where that many fit (its limit solved
        # there too), else a subset of its own (its own solve)
        self.euler_set, self.euler_own, self.euler_subset = self.main, False, None
        if self.check is not None:
            self.euler_set, self.euler_own, self.euler_subset = self.check, True, "check"
        elif self.main.count * max(cfg["L"]) > EULER_UNITS:
            count = max(256, _pow2(EULER_UNITS // max(cfg["L"])))
            self.euler_own = True
            if count >= self.main.count // REPLICAS:
                self.euler_set = replica_batch(self.main, 0, REPLICAS)
                self.euler_subset = "batch0"
            else:
                self.euler_set = _subset(self.main, count)
        boxes = merged_boxes([(L,) for L in cfg["L"]], self.euler_set.count + cfg["probes"],
                             self.pad_units, pad_depth=for_backend(PAD_DEPTH))  # fmt: skip
        self.euler_boxes = {p[0]: box[0] for p, box in boxes.items()}
        # (a box of one depth runs unpadded, as before boxes)
        self.euler_padded = {Lb for L, Lb in self.euler_boxes.items() if Lb != L}

    def _point_inputs(self, spec):
        """The program's arguments for `spec`; before the reference is solved, the
        limit's grids as shapes only (what compiling needs)."""
        cfg = self.cfg
        L, M = spec["L"], spec["M"]
        keys = jr.split(jr.fold_in(jr.fold_in(jr.fold_in(self.master, 2), L), M), cfg["seeds"])
        Lb = self.boxes[(L, M)][0]
        if self.ref is None:
            shape = (self.steps + 1, Lb + 1, cfg["inputs"], cfg["d"])
            h = b = jax.ShapeDtypeStruct(shape, jnp.result_type(float))
        else:
            h, b = pad_grid(self.ref[f"h_L{L}"], Lb), pad_grid(self.ref[f"b_L{L}"], Lb)
        return keys, h, b, jnp.int32(L), jnp.int32(M)

    def _compile_box(self, box, spec):
        """The compiled program of `box` (in a pool thread), run for `spec`'s shapes."""
        cfg, (Lb, Mb) = self.cfg, box
        self.methods[f"L{Lb}_M{Mb}"] = loop_name(self.loop, self.block, self.law, Lb, Mb,
                                                 cfg["inputs"])  # fmt: skip
        program = seed_program(self.block, self.law, self.xs, self.ys, self.lr, Lb, Mb,
                               cfg["seeds"], self.units_per_batch, loop=self.loop)  # fmt: skip
        return program.jitted.lower(*self._point_inputs(spec)).compile()

    def _compile_euler(self, Lb: int):
        """The compiled Euler part of the box of depth `Lb` (in a pool thread)."""
        cfg = self.cfg
        zeros = jnp.zeros((self.steps + 1, Lb + 1, cfg["inputs"], cfg["d"]))  # the limit's shape
        grid = LimitOnGrid(h=zeros, b=zeros)
        depth = jnp.int32(Lb) if Lb in self.euler_padded else None  # traced: any depth <= Lb
        # `eqx.filter_jit` gives the function a `lower` (which pyright does not see)
        return euler_errors.lower(  # pyright: ignore[reportFunctionMemberAccess]
            self.block, self.euler_set, self.xs, self.ys, grid, learning_rate=self.lr,
            probes=self.probes, depth=depth,
        ).compile()  # fmt: skip

    def compile_ahead(self) -> None:
        """Compile ahead in threads (XLA compiles release the GIL), one program per box,
        while this thread solves the reference: the programs need only its shapes."""
        self.ahead: dict[tuple[int, ...], Future] = {}
        for spec in self.runner.pending(self.specs):
            box = self.boxes[(spec["L"], spec["M"])]
            if box not in self.ahead:
                self.ahead[box] = self.pool.submit(self.clock.timed, self._compile_box, box, spec)

    def reference(self) -> None:
        """The reference limit (an artifact of the folder: a resume reads it; and of the
        artifact cache, `share_artifacts`), timed."""
        with self.clock.stage("reference"):
            self.ref = self.runner.artifact(
                "reference", self._reference_arrays, describe="the reference limit"
            )

    def _reference_arrays(self) -> dict:
        """The reference's arrays: designed Monte Carlo refined to the design's target, the
        pilot's where it is the same limit, else solved; the Euler part's own limit too."""
        cfg, design = self.cfg, self.design
        if design is not None and self.check is None and "reference_target" in design:
            # Monte Carlo, designed: refined until its error meets the design's target
            out, history = refine_reference(
                self._monte_carlo_reference,
                self.main.count,
                design["reference_target"],
                AUTO[cfg["preset"]]["particles_max"],
                first=self.reuse,
            )
            out = dict(out)
            out["refine_particles"] = np.array([r["particles"] for r in history])
            out["refine_errors"] = np.array([r["error"] for r in history])
        elif self.reuse is not None:
            out = dict(self.reuse)
        else:
            out = reference_on_grids(self.runner, "the reference limit", cfg, self.block,
                                     self.main, self.check, self.xs, self.ys, self.ref_probes,
                                     all_depths(cfg))  # fmt: skip
        if self.euler_own:  # the Euler part's own limit, with its subset of the particles
            self._euler_limit(out)
        return out

    def _euler_limit(self, out: dict) -> None:
        """The Euler part's own limit on its depths, into `out`: that of the subset of the
        reference's particles it runs, where the reference solved it (a quadrature's check
        set, `solve_reference`; batch 0 of Monte-Carlo particles, `solve_reference_replicas`),
        else solved here."""
        cfg = self.cfg
        subset = self.euler_subset
        grids = None if subset is None else subset_grids(out, subset, cfg["L"])
        same = int(out["particles"]) == self.main.count  # (refined: other particles)
        if grids is None or not same:
            model = MeanODE(self.block, self.euler_set, self.xs, self.ys, self.lr)
            sol = solve_mean_ode(model, self.steps, rtol=cfg["rtol"], atol=cfg["rtol"])
            grids = limit_grids(sol, cfg["L"])
        for L, (h, b) in grids.items():
            out[f"euler_h_L{L}"], out[f"euler_b_L{L}"] = np.asarray(h), np.asarray(b)

    def _monte_carlo_reference(self, N: int) -> dict:
        """The reference with `N` Monte-Carlo particles (one try of `refine_reference`)."""
        return reference_on_grids(
            self.runner, "reference: the limit", self.cfg, self.block,
            monte_carlo(self.cfg, self.law, N), None, self.xs, self.ys, self.ref_probes,
            all_depths(self.cfg),
        )  # fmt: skip

    @property
    def solved(self) -> dict:
        """The reference's arrays (after `reference`)."""
        assert self.ref is not None, "the reference is solved first"
        return self.ref

    def compile_euler_ahead(self) -> None:
        """Then one program per Euler depth, while this thread runs the finite networks
        (where an accelerator leaves the CPU cores idle). Submitted now, not with the
        others: on a 2-core CPU they then slow the reference down more than they save."""
        self.euler_ahead = {
            Lb: self.pool.submit(self.clock.timed, self._compile_euler, Lb)
            for Lb in dict.fromkeys(
                self.euler_boxes[s["L"]] for s in self.runner.pending(self.euler_specs)
            )
        }
        # and the fits' programs, at the grid's sizes (`compile_fits`)
        depth_terms = [not self.trivial(k) for k in range(self.steps + 1)]
        self.fits_ahead = self.pool.submit(
            self.clock.timed, compile_fits, len(self.specs), len(self.euler_specs), depth_terms
        )

    def reference_floors(self) -> None:
        """The reference's own error in the norm of each quantity (Δ^h's is
        `error_estimate`); the Euler part is judged against its own limit: that of the
        reference, or of the subset it runs (exact up to the solver's tolerance)."""
        ref = self.solved
        self.floors = reference_errors(ref)
        self.error_estimate = self.floors["delta_h"]
        self.error_estimate_z = self.floors["delta_z"]
        tol_floor = float(np.max(ref["err_tolerance"]))
        self.euler_floors = {
            f"{q}_euler": (tol_floor if self.euler_own else self.floors[q]) for q in QUANTITIES
        }
        if not bool(ref["ok"]):
            self.runner.warn("the reference ODE solve did not succeed (max_steps reached?)")

    def finite_points(self) -> list[dict]:
        """Every grid point's seeds, by its box's program compiled ahead; the self-check
        runs the point's own program op by op."""
        return self.runner.run_points(
            self.specs, self._finite_point, describe=lambda s: f"L={s['L']} M={s['M']}",
            check=self._finite_point_uncompiled, spread="seeds",
        )  # fmt: skip

    def _finite_point(self, spec):
        """One grid point by its box's compiled program (waited for), timed."""
        box = self.boxes[(spec["L"], spec["M"])]
        compiled, seconds = self.clock.wait("compile", self.ahead[box])
        out, run_seconds = self.clock.timed(
            lambda: jax.block_until_ready(gather_processes(compiled(*self._point_inputs(spec))))
        )
        self.clock.parts["compile"][f"L{box[0]}_M{box[1]}"] = seconds
        self.clock.parts["finite"][f"L{spec['L']}_M{spec['M']}"] = run_seconds
        return self._finite_summary(out, spec["L"])

    def _finite_summary(self, out, L):
        """A point's errors summarized per step, each with its round-off's scale."""
        ref = self.solved
        values = {
            "delta_h": out.delta_h,
            "delta_b": out.delta_b,
            "delta_z": out.delta_z,
            "loss": out.loss,
        }
        per_step = summarize_steps(values, self.steps)
        # Δ's are differences against the limit (Δ^Z exactly 0 at step 0): their round-off
        # is that of the states and units (`self_check.of_terms`, `_difference_scales`)
        scales = _difference_scales(ref[f"h_L{L}"], ref[f"b_L{L}"], self.probes)
        for at_k in per_step:
            for q, scale in scales.items():
                at_k[q] = of_terms(at_k[q], scale)
        return {"steps": per_step}

    def _finite_point_uncompiled(self, spec):
        """`_finite_point` by the program of the point's own (L, M), not of its padded box
        (the padding's layers are identities: the same values to round-off), not compiled
        ahead: the self-check runs it op by op (at the box's depth, 1024 layers for
        L = 8, that took 200 s)."""
        ref, L, M = self.solved, spec["L"], spec["M"]
        program = seed_program(self.block, self.law, self.xs, self.ys, self.lr, L, M,
                               self.cfg["seeds"], self.units_per_batch, loop=self.loop)  # fmt: skip
        keys, _, _, depth, width = self._point_inputs(spec)
        h, b = pad_grid(ref[f"h_L{L}"], L), pad_grid(ref[f"b_L{L}"], L)
        return self._finite_summary(program(keys, h, b, depth, width), L)

    def euler_part(self) -> list[dict]:
        """The decomposition's Euler part at every depth, timed. Its self-check: op by op,
        tens of thousands of particles at every layer and GD step take minutes; above
        SELF_CHECK_PARTICLES it runs the point with that many of them, compiled and op by
        op (the same function both ways, not the study's number)."""
        with self.clock.stage("euler"):
            few = route = None
            if self.euler_set.count > SELF_CHECK_PARTICLES:
                few = _subset(self.euler_set, SELF_CHECK_PARTICLES)
                route = (
                    f"the Euler part with {SELF_CHECK_PARTICLES} of its {self.euler_set.count} "
                    "particles, compiled and op by op"
                )
            variant = (
                None if few is None else (lambda s: self._euler_summary(s["L"], euler_errors, few))
            )
            return self.runner.run_points(
                self.euler_specs, self._euler_point, describe=lambda s: f"Euler part, L={s['L']}",
                check=self._euler_point_uncompiled, spread="seeds", variant=variant, route=route,
            )  # fmt: skip

    def _euler_point(self, spec):
        """The Euler part at one depth, by its program compiled ahead (waited for)."""
        L, Lb = spec["L"], self.euler_boxes[spec["L"]]
        compiled, self.clock.parts["euler_compile"][f"L{Lb}"] = self.clock.wait(
            "euler", self.euler_ahead[Lb]
        )
        return self._euler_summary(L, compiled, pad=Lb if Lb in self.euler_padded else None)

    def _euler_point_uncompiled(self, spec):
        """`_euler_point` by `euler_errors` itself (the self-check runs it op by op)."""
        return self._euler_summary(spec["L"], euler_errors)

    def _euler_summary(self, L, errors, particles=None, pad=None):
        """The Euler part's errors at depth `L` per step, each with its round-off's scale
        (`pad`: run in a program of that depth)."""
        ref, tag = self.solved, "euler_" if self.euler_own else ""
        grid = LimitOnGrid(h=jnp.asarray(ref[f"{tag}h_L{L}"]), b=jnp.asarray(ref[f"{tag}b_L{L}"]))
        particles = self.euler_set if particles is None else particles
        run, depth = grid, None
        if pad is not None:
            run = LimitOnGrid(h=pad_grid(grid.h, pad), b=pad_grid(grid.b, pad))
            depth = jnp.int32(L)
        e = errors(self.block, particles, self.xs, self.ys, run, learning_rate=self.lr,
                   probes=self.probes, depth=depth)  # fmt: skip
        # differences against the limit, as the finite part's (`_finite_summary`)
        scales = _difference_scales(grid.h, grid.b, self.probes)
        return {
            "steps": [
                {
                    "delta_h_euler": of_terms(float(e.delta_h[k]), scales["delta_h"]),
                    "delta_b_euler": of_terms(float(e.delta_b[k]), scales["delta_b"]),
                    "delta_z_euler": of_terms(float(e.delta_z[k]), scales["delta_z"]),
                }
                for k in range(self.steps + 1)
            ]
        }

    def fits(self, raw, euler_raw) -> tuple[list, list, list, list]:
        """The points and the decomposition per step, the one-term fits and the law's
        (`convergence_fits`, `law_fits`), with their warnings; timed.

        **Returns:** `(points, decomposition, fits, rates)`."""
        steps, cfg = self.steps, self.cfg
        with self.clock.stage("fits"):
            try:  # compiled ahead (or failing: then the fit itself says why)
                _, self.fits_compile_seconds = self.clock.wait("fits", self.fits_ahead)
            except Exception:  # noqa: BLE001
                self.fits_compile_seconds = None
            points = [
                {"L": p["L"], "M": p["M"], "steps": k, **p["steps"][k]}
                for p in raw
                for k in range(steps + 1)
            ]
            decomposition = [
                {"L": p["L"], "steps": k, **p["steps"][k]}
                for p in euler_raw
                for k in range(steps + 1)
            ]
            judged = {
                "error_estimate": self.error_estimate,
                "error_estimate_z": self.error_estimate_z,
                "trivial": self.trivial,
                "seed": cfg["seed"],
                "floors": {**self.floors, **self.euler_floors},
            }
            fits, excluded = convergence_fits(
                points, decomposition, steps=steps, depths=cfg["L"], widths=cfg["M"],
                L_for_M=cfg["L_for_M"], fit_M_max=cfg["fit_M_max"], **judged,
            )  # fmt: skip
            rates = law_fits(points, decomposition, steps=steps, **judged)
            law_slopes(fits, rates)
            self._warn_fits(points, fits, rates, excluded)
        return points, decomposition, fits, rates

    def _warn_fits(self, points, fits, rates, excluded) -> None:
        """The points the reference cannot judge, and what the fits left out, said."""
        self.smallest_by = {
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
        runner, floors = self.runner, self.floors
        if excluded:
            runner.warn(
                f"{excluded} grid point(s) lie less than 10x above the reference's error "
                f"estimate ({self.error_estimate:.2e}; Z: {self.error_estimate_z:.2e}) and were "
                "left out of the fits; raise --order/--particles or use larger errors"
            )
        for q, value in self.smallest_by.items():
            if value is not None and floors[q] * 10 > value:
                runner.warn(
                    f"{q}: the reference's error estimate ({floors[q]:.2e}) is not 10x below the "
                    f"smallest finite error ({value:.2e}): the points it cannot judge are left out"
                )
        for f in fits:  # the one-term fits' (the law's own below; a/L + b/sqrt(LM) the same)
            if f.get("excluded") and f.get("against") is not None:
                runner.warn(excluded_warning(f))
        for rate in rates:
            if rate.get("excluded"):
                runner.warn(
                    f"{rate['excluded']} exploded draw(s) of {rate['quantity']} left out of its "
                    f"law {rate['model']} (steps={rate['fixed']['steps']})"
                )
            if rate.get("reason"):
                runner.warn(
                    f"{rate['quantity']} (steps={rate['fixed']['steps']}): no law fit: "
                    f"{rate['reason']}"
                )

    def _reference_entry(self) -> dict:
        """`results.json`'s `reference`: how it was solved, its own error and its parts,
        against the smallest finite errors."""
        ref, cfg, error_estimate = self.solved, self.cfg, self.error_estimate
        smallest = self.smallest_by["delta_h"]
        return {
            **self.ref_info,
            "particles": int(ref["particles"]),
            "solver": "diffrax Dopri8, PID controller, dense output",
            "rtol": cfg["rtol"],
            "atol": cfg["rtol"],
            # in the norm of Δ^h (the sup over depths and inputs of ‖h − ĥ‖), of Δ^b and of Δ^Z
            "error_estimate": error_estimate,
            "error_estimate_b": self.floors["delta_b"],
            "error_estimate_z": self.error_estimate_z,
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
            "smallest_finite_error_by_quantity": self.smallest_by,
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

    def _timing(self) -> dict:
        """`results.json`'s `timing` entries of this study, from the stopwatch."""
        clock, args = self.clock, self.args
        return {
            "reference_seconds": clock.stages["reference"],
            "compile_seconds": clock.total("compile"),
            # the Euler part's programs (one per depth), compiled ahead in the same threads
            "euler_compile_seconds": clock.total("euler_compile"),
            "euler_programs": len(clock.parts["euler_compile"]),
            # how long the main thread waited for programs (finite and Euler) still
            # compiling; the rest of the compile time overlapped other work
            "compile_wait_seconds": sum(clock.waits["compile"]) + sum(clock.waits["euler"]),
            "programs": len(clock.parts["compile"]),
            "program_boxes": sorted({f"L{b[0]}_M{b[1]}" for b in self.boxes.values()}),
            "pad_units": self.pad_units,
            "units_per_batch": self.units_per_batch,
            "unroll": args.unroll,
            "depth_loop": args.depth_loop,
            "depth_loop_by_program": dict(sorted(self.methods.items())),
            "compile_workers": self.workers,
            "finite_seconds": clock.total("finite"),
            "finite_seconds_by_point": clock.parts["finite"],
            "compile_seconds_by_program": clock.parts["compile"],
            # the Euler part's own time, without its waits for programs still compiling
            "euler_seconds": clock.stages["euler"] - sum(clock.waits["euler"]),
            "fit_seconds": clock.stages["fits"],
            # the fits' programs, compiled ahead while the networks ran (`compile_fits`),
            # and how long the fits waited for them
            "fit_compile_seconds": self.fits_compile_seconds,
            "fit_compile_wait_seconds": sum(clock.waits["fits"]),
        }

    def finish(self, points, decomposition, fits, rates) -> None:
        """`results.json` (`runner.finish`) and the figures."""
        cfg, steps = self.cfg, self.steps
        extra = {}
        if self.first_pass is not None:
            extra["first_pass"] = self.first_pass
        if self.design is not None:
            extra["design"] = self.design
        if self.euler_own:
            extra["decomposition_particles"] = self.euler_set.count
        self.runner.finish(
            {
                "points": points,
                # the headline: the exponents of the whole law, jointly over the grid
                "rates": rates,
                # secondary: one-term slopes along lines of the grid, and a/L + b/sqrt(LM)
                "fits": fits,
                "reference": self._reference_entry(),
                "decomposition": decomposition,
                "delta_quantiles": delta_quantiles(
                    points, steps, dimension=cfg["d"], seed=cfg["seed"]
                ),
                # the grid that ran (the automatic design's lines; `config` keeps what was given)
                "grid": {k: cfg[k] for k in GRID_KEYS},
                "figure_floors": self.floors,
                **extra,
            },
            timing=self._timing(),
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
