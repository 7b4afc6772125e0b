"""`meanfield study sde`: strong error of finite ResNets against their depth limit
(docs: Mathematics §4).

For one law of the layer weights along depth, at the critical scaling:

* `--weights brownian`, β = 1/2: the network is Euler–Maruyama for the Itô SDE
  `dH = d^{-1/2} dB σ(H)`; theory: strong error `C/sqrt(L)` (slope −1/2, and not
  better: the matrix noise does not commute);
* `--weights fbm --hurst H` (H > 1/2), β = H: Euler for the Young equation
  `dH = d^{-1/2} dB^H σ(H)`; expected slope −(2H − 1) (measured, not a theorem here),
  reached only at large L: at H = 0.75 (d 4, tanh, 200 paths, Heun on 2^14 steps as
  the limit) the local slope of `E‖H_1 − h_L‖` per factor 4 in L is −0.81, −0.66,
  −0.57, −0.52 from L = 16 to 4096, so a fit over small L comes out steeper than
  −1/2, while the norm of the mean signed error (the O(L^{1−2H}) drift) falls at −0.51
  throughout;
* `--weights smooth`, β = 1: `V_k = 𝒱(k/L)`, Euler for `dH = 𝒱(t) σ(H) dt`; slope −1.

Every seed draws one path on the fine grid (or one smooth function); every depth L
reads its weights off that path, and the limit is solved with Diffrax on the same
path, so `E‖H_1 − h_L‖` and `E max_k ‖H_{k/L} − h_k‖` are strong (pathwise) errors.
Slopes against L come with a 95% bootstrap interval over seeds.

The reference's own error is measured, not assumed: for Brownian and fBm paths,
the reference on the fine grid (n steps) against the same solver on half that
grid (n/2 steps); for smooth weights, Dopri8 at the study tolerance against a
tolerance 100 times smaller. Points whose mean error is not 10 times above the
reference's error are left out of the fits (with a warning).
"""

import math
import time
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ..._eager import traced_op_by_op
from ...coupling.neural_sde import strong_errors
from ...harness.args import (
    PYTHON_STEP,
    Cost,
    check_activation,
    preset_config,
)
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...laws.depth import BrownianLaw, FractionalBrownianLaw, SmoothGPLaw
from ...runtime.errors import StudyInputError
from ...runtime.sharding import disable_jit_active, shard_seeds
from ...stats.depth_law import fit_paired_depth_law
from ...stats.fits import excluded_warning, exploded_draws, fit_points, summarize
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
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

DEFAULTS = {
    "d": 4,
    "activation": "tanh",
    "hurst": None,
    "length_scale": 0.2,
    "rtol": 1e-10,
    "young_solver": "heun",
    "batch": 16,
}
QUANTITIES = ("error_final", "error_sup")
# how far above the reference's own error a point must lie to enter a fit
REFERENCE_MARGIN = 10.0


def configure(args) -> dict:
    """Preset, then command-line overrides; every value checked (StudyInputError)."""
    cfg = preset_config(
        args,
        DEFAULTS,
        PRESETS,
        (
            "hurst",
            "L",
            "seeds",
            "d",
            "n_fine",
            "activation",
            "length_scale",
            "rtol",
            "young_solver",
            "batch",
        ),
        weights=args.weights,
    )
    w = cfg["weights"]
    if w == "fbm":
        if cfg["hurst"] is None:
            cfg["hurst"] = 0.75
        h = cfg["hurst"]
        if not (math.isfinite(h) and 0.5 < h < 1.0):
            raise StudyInputError(
                f"--hurst: the Young limit needs 1/2 < H < 1, got {h} (H = 1/2 is "
                "--weights brownian; for H < 1/2 the Euler scheme has no pathwise limit)"
            )
    elif args.hurst is not None:
        raise StudyInputError(f"--hurst: only used with --weights fbm, not --weights {w}")
    for flag, name, used_with in (
        ("--length-scale", "length_scale", ("smooth",)),
        ("--rtol", "rtol", ("smooth",)),
        ("--young-solver", "young_solver", ("fbm",)),
        ("--n-fine", "n_fine", ("brownian", "fbm")),
    ):
        if getattr(args, name) is not None and w not in used_with:
            raise StudyInputError(
                f"{flag}: only used with --weights {' or '.join(used_with)}, not --weights {w}"
            )
    check_activation(cfg["activation"])
    if len(cfg["L"]) < 2:
        raise StudyInputError(f"--L: need at least two depths for a slope, got {cfg['L']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 seeds for spreads, got {cfg['seeds']}")
    top = max(cfg["L"])
    misfit = [L for L in cfg["L"] if top % L]
    if misfit:  # the limit is saved on the grid j/top; depth L reads every (top/L)-th row
        raise StudyInputError(
            f"--L: every depth must divide the largest ({top}), so that its layers land on "
            f"the limit's save grid; {misfit} do not"
        )
    if w != "smooth":
        n = cfg["n_fine"]
        bad = [L for L in cfg["L"] if n % (2 * L)]
        if bad:
            raise StudyInputError(
                f"--L/--n-fine: every depth must divide half the fine grid (the reference is "
                f"checked on n/2 steps); {n}/2 is not a multiple of {bad}"
            )
    if not cfg["rtol"] < 1e-3:
        raise StudyInputError(f"--rtol: must be below 1e-3 for a reference, got {cfg['rtol']}")
    if w == "smooth":
        try:  # the law is built before the output folder is made
            SmoothGPLaw(cfg["d"], cfg["length_scale"])
        except ValueError as err:
            raise StudyInputError(f"--length-scale: {str(err).splitlines()[0]}") from None
    return cfg


# what a point (a chunk of seeds) costs besides its arithmetic: its record written to the
# folder, its results kept as Python numbers (bytes per number)
POINT_OPS = 20 * PYTHON_STEP
BYTES_PER_STORED_NUMBER = 48
# the smooth weights' ODE: at most this many steps of Dopri8 (13 stages) per solve
SMOOTH_ODE_STEPS, ODE_STAGES = 1024, 13


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`, checked by the launcher before `run`) of the
    chunks (`batch` paths at once, vmapped: a path of d×d weights on the fine grid, the
    reference on it and on half of it, every depth's network; smooth weights: the ODE at
    two tolerances on the GP's features) and of their results (a record of every seed's
    errors at every depth)."""
    from math import log2

    d, seeds, width = cfg["d"], cfg["seeds"], 8 if cfg["x64"] else 4
    batch = min(cfg["batch"], seeds)
    chunks = -(-seeds // cfg["batch"])
    top, depths = max(cfg["L"]), sum(cfg["L"])
    if cfg["weights"] == "smooth":
        features = SmoothGPLaw(d, cfg["length_scale"]).n_features
        fine = top
        per_seed = d * d * features * (2 * SMOOTH_ODE_STEPS * ODE_STAGES * 4 + 2 * depths)
    else:
        fine = cfg["n_fine"]
        path = 10 * log2(fine) if cfg["weights"] == "fbm" else 2
        solver = 2 if cfg["weights"] == "fbm" and cfg["young_solver"] != "euler" else 1
        per_seed = d * d * (fine * (path + 12 * solver * 1.5 + 4) + 8 * depths)
    n_L = len(cfg["L"])
    return [
        Cost(
            "--n-fine/--L/--d/--batch/--seeds",
            "a batch of weight paths",
            memory=width * 4 * batch * max(fine, top) * d * d,
            work=seeds * per_seed,
            elements=batch * max(fine, top) * d * d,
            array="a batch of weight paths, (batch, n-fine, d, d)",
            memory_flags="--n-fine/--L/--d/--batch",
        ),
        Cost(
            "--seeds/--batch/--L",
            "the record of every seed's errors",
            memory=BYTES_PER_STORED_NUMBER * seeds * (2 * n_L + 4),
            work=chunks * POINT_OPS,
            elements=seeds * n_L,
            memory_flags="--seeds/--L",
        ),
    ]


SELF_CHECK_FINE = 32  # the self-check's fine grid, at least (`self_check_config`)
SELF_CHECK_RTOL = 1e-6  # and its ODE tolerance (smooth weights)


def self_check_config(cfg: dict) -> dict:
    """The self-check's small version of a configuration: the smallest depth, a fine grid
    of at least SELF_CHECK_FINE steps whose half it divides, an ODE tolerance of at least
    SELF_CHECK_RTOL (op by op, every step of a solve costs Python's time for hundreds of
    operations: the study's own grid and depths would take minutes)."""
    low = min(cfg["L"])
    n_fine = 2 * low * max(1, -(-SELF_CHECK_FINE // (2 * low)))
    return {**cfg, "L": [low], "n_fine": n_fine, "rtol": max(cfg["rtol"], SELF_CHECK_RTOL)}


def make_law(cfg):
    if cfg["weights"] == "brownian":
        return BrownianLaw(cfg["d"], cfg["n_fine"])
    if cfg["weights"] == "fbm":
        return FractionalBrownianLaw(cfg["d"], cfg["hurst"], cfg["n_fine"])
    return SmoothGPLaw(cfg["d"], cfg["length_scale"])


def critical_beta(cfg) -> float:
    return {"brownian": 0.5, "fbm": cfg["hurst"], "smooth": 1.0}[cfg["weights"]]


def theory_slope(cfg) -> float:
    """−1/2 (Euler–Maruyama, non-commuting noise), −(2H − 1) (Euler on Young), −1 (ODE)."""
    if cfg["weights"] == "fbm":
        return -(2.0 * cfg["hurst"] - 1.0)
    return {"brownian": -0.5, "smooth": -1.0}[cfg["weights"]]


def make_input(d: int):
    """A fixed, seed-independent input `h_0 = x`: `x_j = 1/2 + (2j/(d−1) − 1)`, j = 0..d−1."""
    return 0.5 + jnp.linspace(-1.0, 1.0, d) if d > 1 else jnp.full((1,), 0.5)


def seed_keys(cfg, start: int, stop: int):
    """The keys of seeds `start..stop−1`: `fold_in(key(seed), i)`, independent of how many
    seeds the study has and of how they are chunked."""
    master = jr.fold_in(jr.key(cfg["seed"]), 1)
    return jax.vmap(lambda i: jr.fold_in(master, i))(jnp.arange(start, stop))


def chunk_program(cfg, law, x, devices=None):
    """One compiled program for a chunk of seeds, split over `devices` (default: all;
    `shard_seeds`): `meanfield.coupling.neural_sde.strong_errors` of every seed's path.

    **Returns:** a function `keys -> dict` of per-seed arrays: `final`, `sup` of shape
    `(seeds, n_L)`, `check_final`, `check_sup`, `ok`, `solver_steps`.
    """

    return shard_seeds(_one_path(cfg, law, x), devices=devices)


def _one_path(cfg, law, x):
    """`strong_errors` of one seed's path (`key -> dict`)."""

    def one(key):
        return strong_errors(
            law,
            x,
            cfg["L"],
            key=key,
            activation=cfg["activation"],
            young_solver=cfg["young_solver"],
            rtol=cfg["rtol"],
        )

    return one


# a chunk's distances between states (`strong_errors`)
DISTANCES = ("final", "sup", "check_final", "check_sup")


def _distances_of_states(out: dict, x) -> dict:
    """A chunk's record, its distances between states (errors against the reference, the
    reference's against its check: down to 1e-7 of the states with smooth weights) marked
    with the size of the states, the scale of their round-off (`self_check.of_terms`):
    that of the input `h_0 = x` (the states' largest norm is within 1.6 times it in the
    study's draws; kept out of the compiled program, whose numbers it would move)."""
    size = float(np.linalg.norm(np.asarray(x)))
    return {k: of_terms(v, size) if k in DISTANCES else v for k, v in out.items()}


def reference_description(cfg, law) -> dict:
    if cfg["weights"] == "smooth":
        return {
            "method": "diffrax Dopri8, PID controller, dense output",
            "rtol": cfg["rtol"],
            "atol": cfg["rtol"],
            "check": "the same solve at rtol/100, atol/100",
            "features": law.n_features,
            "kernel_error": law.kernel_error(),
        }
    solver = "Euler-Maruyama (Ito)" if cfg["weights"] == "brownian" else cfg["young_solver"]
    return {
        "method": f"diffrax {solver} with fixed steps on the fine grid of the path",
        "n_fine": cfg["n_fine"],
        "check": "the same solver on n_fine/2 steps of the same path",
    }


def run(args, cfg):
    runner = start_study(args, cfg)
    law = make_law(cfg)
    x = make_input(cfg["d"])
    seeds = _run_chunks(runner, cfg, law, x)
    ok = seeds["ok"].astype(bool)
    if not ok.all():
        runner.warn(
            f"the reference solve failed for {int((~ok).sum())} seed(s); counted as exploded"
        )
    est_final = float(np.mean(seeds["check_final"][ok])) if ok.any() else math.inf
    est_sup = float(np.mean(seeds["check_sup"][ok])) if ok.any() else math.inf
    points = _depth_points(cfg, seeds, ok)

    t_fit = time.perf_counter()
    estimates = {"error_final": est_final, "error_sup": est_sup}
    fits, excluded = make_fits(cfg, points, estimates)
    rates = depth_laws(cfg, points, estimates)
    for f in fits:
        if f.get("excluded"):
            runner.warn(excluded_warning(f))
    if excluded:
        runner.warn(
            f"{excluded} point(s) lie less than {REFERENCE_MARGIN:g}x above the reference's "
            f"error (final {est_final:.2e}, sup {est_sup:.2e}) and were left out of the fits; "
            "raise --n-fine (or lower --rtol)"
        )
    reference = _reference_record(cfg, law, seeds, ok, points, estimates)
    fit_seconds = time.perf_counter() - t_fit
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "rates": rates,
            "reference": reference,
            "critical_beta": critical_beta(cfg),
            "theory": {
                "slope": theory_slope(cfg),
                "statement": {
                    "brownian": "E|H_{k/L} - h_k| <= C/sqrt(L) (Euler-Maruyama, non-commuting "
                    "noise: the rate is exactly 1/2)",
                    "fbm": "Euler on a Young equation: expected error ~ L^{-(2H-1)} (measured; "
                    "asymptotic, steeper at small L)",
                    "smooth": "|H_{k/L} - h_k| <= c/L",
                }[cfg["weights"]],
            },
        },
        timing={"fit_seconds": fit_seconds},
        plot=plot,
    )


def _run_chunks(runner, cfg, law, x) -> dict:
    """Every chunk of seeds through `runner.run_points` (with its self-check variant), the
    chunks' per-seed records joined into one array per key."""
    program = chunk_program(cfg, law, x)
    chunk = min(cfg["batch"], cfg["seeds"])  # a batch beyond the seeds computes no more
    n_chunks = -(-cfg["seeds"] // chunk)

    def compute(spec):
        start = spec["chunk"] * chunk
        out = jax.block_until_ready(program(seed_keys(cfg, start, start + chunk)))
        stop = min(chunk, cfg["seeds"] - start)  # the last chunk is padded, then cut
        return _distances_of_states({k: np.asarray(v)[:stop] for k, v in out.items()}, x)

    # the self-check: op by op, a fine grid of 2^15 steps takes hours; it compares the
    # chunk's program at a coarse grid, the smallest depth and one path, compiled
    # and op by op (the study's states are d-dimensional, far below any tiling threshold:
    # the canary checks the same code paths at large widths)
    small = self_check_config(cfg)
    # one path, not mapped over seeds (op by op, a map adds its own work to every
    # operation: 3 to 10 times the operation's); compiled by jax.jit (in a thread of its
    # own while the chunks run: its compilation is most of the check's time), op by op
    # without it
    path = jax.jit(_one_path(small, make_law(small), x))
    key_type = seed_keys(cfg, 0, 1)[0]
    checks = runner.self_check and runner.writer  # (one process checks, `run_points`)
    ahead = ThreadPoolExecutor(1, thread_name_prefix="self-check") if checks else None
    compiled = ahead.submit(lambda: path.lower(key_type).compile()) if ahead else None
    grid = "" if cfg["weights"] == "smooth" else f" on a grid of {small['n_fine']} steps"

    def variant(spec):
        start = spec["chunk"] * chunk
        key = seed_keys(cfg, start, start + 1)[0]
        if disable_jit_active():
            # op by op: the compiled program's own operations (its jaxpr), one by one;
            # not diffrax's Python again, whose work per operation is 10 to 50 times it
            out = traced_op_by_op(path, key)
        else:
            out = compiled.result()(key) if compiled else path(key)
        return _distances_of_states({k: np.asarray(v)[None] for k, v in out.items()}, x)

    try:
        raw = runner.run_points(
            [{"chunk": i} for i in range(n_chunks)],
            compute,
            variant=variant,
            spread="seeds",
            unit="chunk",
            route=f"one path of the chunk{grid} at depth {small['L'][0]}, compiled and op by "
            "op (its traced program, equation by equation)",
            describe=lambda s: (
                f"seeds {s['chunk'] * chunk}..{min((s['chunk'] + 1) * chunk, cfg['seeds']) - 1}"
            ),
            # the smooth weights' reference is an adaptive ODE solve at rtol = atol: a step
            # accepted compiled and rejected op by op (round-off can flip it) moves the states
            # by about that tolerance, and the check compares the variant's solves (`small`,
            # 1e-6 by default), not the study's (1e-10): the allowance follows the check's
            # tolerance, 100 times it (`run_points`). The distances' mark (the states' size,
            # `_distances_of_states`) makes the bound 1e-6 of the states, no wider than such a
            # move: it does not replace the allowance
            atol=100 * small["rtol"] if cfg["weights"] == "smooth" else 0.0,
        )
    finally:  # a compile still running is not waited for
        if ahead is not None:
            ahead.shutdown(wait=False, cancel_futures=True)
    return {
        k: np.concatenate([np.asarray(r[k], dtype=float) for r in raw])
        for k in raw[0]
        if k != "chunk"
    }


def _depth_points(cfg, seeds: dict, ok) -> list[dict]:
    """Per depth, the summaries of the final and sup errors over seeds (a seed whose
    reference failed counts as exploded)."""
    points = []
    for i, L in enumerate(cfg["L"]):
        final, sup = seeds["final"][:, i].copy(), seeds["sup"][:, i].copy()
        final[~ok], sup[~ok] = np.inf, np.inf
        exploded = exploded_draws(final, sup)  # a path that blew up midway, say
        points.append(
            {
                "L": L,
                "error_final": summarize(final, exploded=exploded),
                "error_sup": summarize(sup, exploded=exploded),
            }
        )
    return points


def _reference_record(cfg, law, seeds: dict, ok, points, estimates: dict) -> dict:
    """The reference's description with its measured error, against the smallest errors."""
    est_final, est_sup = estimates["error_final"], estimates["error_sup"]
    smallest = min(
        (p[q]["mean"] for p in points for q in QUANTITIES if p[q]["mean"] is not None),
        default=None,
    )
    smallest_final = min(
        (p["error_final"]["mean"] for p in points if p["error_final"]["mean"] is not None),
        default=None,
    )
    return {
        **reference_description(cfg, law),
        "error_estimate": est_final,
        "error_estimate_sup": est_sup,
        "error_estimate_max_over_seeds": float(np.max(seeds["check_sup"])),
        "smallest_finite_error": smallest_final,
        "smallest_finite_error_any": smallest,
        "ratio_smallest_to_reference": (
            smallest_final / est_final if smallest_final and est_final > 0 else None
        ),
        "margin_required": REFERENCE_MARGIN,
        "ok": bool(ok.all()),
        "solver_steps_mean": float(np.mean(seeds["solver_steps"])),
        "float64": bool(cfg["x64"]),
    }


def plot(out, results) -> None:
    """The figure from `results.json` alone (`meanfield plot DIR`)."""
    from .plot import plot_strong_error

    plot_strong_error(
        out,
        results["config"],
        results["points"],
        results["fits"],
        results["reference"],
        results.get("rates") or [],
    )


def _usable(points, q, estimates) -> list[dict]:
    """The points of quantity `q` that lie `REFERENCE_MARGIN` above the reference's error,
    by depth."""
    rows = sorted(points, key=lambda p: p["L"])
    return [
        p
        for p in rows
        if p[q]["mean"] is not None and p[q]["mean"] >= REFERENCE_MARGIN * estimates[q]
    ]


def depth_laws(cfg, points, estimates) -> list[dict]:
    """The headline: per quantity, the exponent p of `a L^-p + c L^-2p` (Euler's error
    with its next order; `meanfield.stats.depth_law`) over the depths whose mean error lies
    `REFERENCE_MARGIN` above the reference's, from every seed's path read at each of them
    (paired; a seed exploded at a depth is left out of all), against p = −`theory_slope`."""
    out = []
    for q in QUANTITIES:
        rows = _usable(points, q, estimates)
        seeds = max((len(p[q]["values"]) for p in points), default=0)
        draws = np.full((seeds, len(rows)), np.nan)
        for j, p in enumerate(rows):
            draws[:, j] = [np.nan if v is None else v for v in p[q]["values"]]
            draws[p[q]["exploded_draws"], j] = np.nan
        law = fit_paired_depth_law(
            [p["L"] for p in rows], draws, quantity=q, theory=-theory_slope(cfg), seed=cfg["seed"]
        )
        law.update(
            part="depth",
            fixed={"weights": cfg["weights"], "beta": critical_beta(cfg)},
            below_reference=[p["L"] for p in points if all(p is not r for r in rows)],
        )
        out.append(law)
    return out


def make_fits(cfg, points, estimates):
    """Log-log slope against L of the mean final and sup errors, with the theory slope:
    secondary (the next order of Euler's error bends it; the headline is `depth_laws`)."""
    fits, excluded = [], 0
    for q in QUANTITIES:
        usable = _usable(points, q, estimates)
        excluded += len(points) - len(usable)
        fixed = {"weights": cfg["weights"], "beta": critical_beta(cfg)}
        fits.append(
            fit_points(
                usable, q, "L", fixed=fixed, theory=theory_slope(cfg), seed=cfg["seed"],
                paired=True,  # every seed is one path, read at every depth
            )
        )  # fmt: skip
        fits[-1]["secondary"] = True
    return fits, excluded
