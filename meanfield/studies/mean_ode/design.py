"""The mean-ODE study's automatic design (`--design auto`): pilot networks measure the
error's terms, a fit of the pilot predicts each grid line's error, and the depths, widths
and particles are chosen so that the reference's own error lies 10× below the errors it
judges within the preset's budget (`AUTO`); where no design can, the study says so
(`not_judged`) and does not fit those points.
"""

import math

import jax
import jax.random as jr
import numpy as np

from ...coupling.design import (
    compile_pilot,
    design_lines,
    euler_coefficient,
    fit_pilot,
    pilot_errors,
)
from ...coupling.reference import (
    particles_for,
    reference_errors,
    reference_target,
    replica_batch,
    subset_grids,
)
from .reference import REPLICAS, monte_carlo, particle_sets, reference_on_grids

# the automatic design of a grid for a user's block (`--design auto`): the pilot grid and
# seeds, and the budgets of the grid (largest depth and width, seeds × L·M units of the
# largest point) and of the reference (Monte-Carlo particles: the reference's own error
# falls as their square root)
PILOT_POINTS = [(L, M) for L in (4, 16, 64) for M in (1, 16, 256)]
# the depths of the Euler part's coefficient (the pilot reference solves at these too)
EULER_DEPTHS = [16, 32, 64]


AUTO = {
    "quick": {
        "max_depth": 256,
        "max_width": 2**16,
        "units": 2**24,
        "pilot_seeds": 4,
        "pilot_particles": 2**16,
        "particles_max": 2**20,
    },
    "paper": {
        "max_depth": 4096,
        "max_width": 2**20,
        "units": 2**28,
        "pilot_seeds": 8,
        "pilot_particles": 2**18,
        "particles_max": 2**24,
    },
}


def auto_design(
    runner,
    cfg,
    block,
    law,
    xs,
    ys,
    probes,
    loop,
    units_per_batch,
    first_pass,
    pool=None,
    pad_depth=False,
):
    """`--design auto`: the pilot reference, the pilot grid, its fit of a/L + b/sqrt(LM),
    the lines of the grid (`meanfield.coupling.convergence.design_lines`) and the particles of the
    final reference (Monte Carlo: as many as the lines' smallest predicted error needs,
    within the preset's budget). Each step is an artifact of the study folder (a resume
    recomputes nothing). With `pool` (threads), the pilot networks' programs compile
    there while the pilot reference is solved (where it is solved, not read); with
    `pad_depth` (a CPU's), the pilot's points run in one program (`pilot_errors`).

    **Returns:** `(record, grid, main, reuse)`: the design for the JSON, the grid's
    configuration (`L`, `M`, `L_for_M`, `fit_M_max`), the final reference's particles, and
    the pilot's reference arrays where the final reference is that same limit (else None).
    """
    budget = AUTO[cfg["preset"]]
    master = jr.key(cfg["seed"])
    lr, steps = cfg["lr"], cfg["steps"]
    quadrature = cfg["reference"] == "quadrature"
    ahead: dict = {}  # the pilot networks' programs, compiled while the pilot reference is solved

    def compile_ahead() -> None:
        if pool is not None:
            ahead.update(compile_pilot(pool, block, law, xs, ys, learning_rate=lr, steps=steps,
                                       points=PILOT_POINTS, seeds=budget["pilot_seeds"],
                                       units_per_batch=units_per_batch, loop=loop,
                                       pad_depth=pad_depth))  # fmt: skip

    main0, pilot_ref = _pilot_reference(
        runner, cfg, block, law, xs, ys, probes, budget, compile_ahead
    )
    floor0 = reference_errors(pilot_ref)["delta_h"]
    coefficient = _pilot_euler(runner, cfg, block, law, xs, ys, master, main0, pilot_ref)
    centred_now = first_pass is not None and first_pass["centred"] and steps == 0
    a_euler = 0.0 if centred_now else float(coefficient["a"][-1])
    pilot = runner.artifact(
        "pilot",
        lambda: pilot_errors(
            block,
            law,
            xs,
            ys,
            pilot_ref,
            learning_rate=lr,
            points=PILOT_POINTS,
            seeds=budget["pilot_seeds"],
            key=jr.fold_in(master, 7),
            units_per_batch=units_per_batch,
            loop=loop,
            compiled=ahead or None,
            pad_depth=pad_depth,
        ),
        describe=f"design: the pilot networks ({len(PILOT_POINTS)} points)",
    )
    fit = fit_pilot(pilot, floor0, a=a_euler, seed=cfg["seed"])
    record = _pilot_record(pilot, pilot_ref, coefficient, fit, floor0, budget, steps)
    if fit["a"] is None or fit["b"] is None or not fit["b"] > 0:
        runner.warn(
            f"design: the pilot fit of a/L + b/sqrt(LM) failed ({fit.get('reason')}); the "
            "preset's grid is used"
        )
        record["why"] = "pilot fit failed: the preset's grid"
        main = main0 if quadrature else monte_carlo(cfg, law, cfg["particles"])
        return record, {}, main, None
    return _design_grid(runner, cfg, law, record, main0, pilot_ref, floor0, centred_now)


def _pilot_reference(runner, cfg, block, law, xs, ys, probes, budget, before):
    """The pilot's particles (the final ones for quadrature) and its reference limit at
    every depth the design may choose (powers of two) and the pilot's; `before()` is
    called first where it is solved (not read)."""
    depths = sorted(
        {2**i for i in range(1, int(math.log2(budget["max_depth"])) + 1)}
        | {L for L, _ in PILOT_POINTS}
        | set(EULER_DEPTHS)
    )
    if cfg["reference"] == "quadrature":
        main0, check0, _ = particle_sets(cfg, law)
    else:
        main0, check0 = monte_carlo(cfg, law, budget["pilot_particles"]), None

    def solve() -> dict:
        before()
        return reference_on_grids(runner, "design: the pilot's reference", cfg, block, main0,
                                  check0, xs, ys, probes, depths)  # fmt: skip

    pilot_ref = runner.artifact(
        "pilot_reference",
        solve,
        describe=f"design: the pilot's reference limit ({main0.count} particles)",
    )
    return main0, pilot_ref


def _pilot_euler(runner, cfg, block, law, xs, ys, master, main0, pilot_ref) -> dict:
    """The 1/L coefficient without Monte-Carlo noise: the Euler part of draws of the law
    against their own limit (none at a step where the limit is the identity): a Monte-Carlo
    pilot reference's batch 0, whose limit it solved (`solve_reference_replicas`), else
    2^10 draws and their limit."""
    euler_probes = jax.vmap(law.sample)(jr.split(jr.fold_in(master, 8), 64))
    grids = subset_grids(pilot_ref, "batch0", EULER_DEPTHS)
    if grids is not None:
        particles = replica_batch(main0, 0, REPLICAS)
    else:
        particles = monte_carlo(cfg, law, 2**10)
    depths = ", ".join(map(str, EULER_DEPTHS))

    def coefficient() -> dict:
        out = euler_coefficient(block, particles, xs, ys, learning_rate=cfg["lr"],
                                steps=cfg["steps"], depths=EULER_DEPTHS, probes=euler_probes,
                                rtol=cfg["rtol"], grids=grids)  # fmt: skip
        return {**out, "particles": np.array(particles.count)}

    return runner.artifact(
        "pilot_euler",
        coefficient,
        describe=f"design: the Euler part's coefficient ({particles.count} particles, "
        f"depths {depths})",
    )


def _pilot_record(pilot, pilot_ref, coefficient, fit, floor0, budget, steps) -> dict:
    """The design's record for the JSON, as far as the pilot's fit."""
    return {
        "pilot_points": [
            {
                "L": int(pilot["L"][i]),
                "M": int(pilot["M"][i]),
                "delta_h_mean": float(np.mean(pilot["delta_h"][i, :, -1])),
            }
            for i in range(len(pilot["L"]))
        ],
        "pilot_seeds": budget["pilot_seeds"],
        "pilot_step": steps,
        "pilot_reference_error": floor0,
        "pilot_reference_particles": int(pilot_ref["particles"]),
        "pilot_fit": fit,
        "euler_coefficient": {
            "depths": coefficient["depths"].tolist(),
            "L_delta_h_euler": coefficient["L_delta_h"].tolist(),
            "particles": int(coefficient["particles"]),
        },
        "budget": budget,
    }


def _design_grid(runner, cfg, law, record, main0, pilot_ref, floor0, centred_now):
    """From the pilot's fit (in `record`): the grid's lines, the final reference's
    particles and target error (Monte Carlo: within the budget), `record` completed.

    **Returns:** `(record, grid, main, reuse)`, as `auto_design`."""
    budget, fit = AUTO[cfg["preset"]], record["pilot_fit"]
    quadrature = cfg["reference"] == "quadrature"
    a, b = fit["a"], fit["b"]
    # the reference error the budget reaches: Monte Carlo falls as N^{-1/2}
    N0 = main0.count
    floor = floor0 if quadrature else floor0 * math.sqrt(N0 / budget["particles_max"])
    lines = design_lines(
        a,
        b,
        floor,
        seeds=cfg["seeds"],
        units=budget["units"],
        max_depth=budget["max_depth"],
        max_width=budget["max_width"],
        trivial=centred_now,
    )
    target = reference_target(a, b, lines)
    for reason in lines["reasons"]:
        runner.warn(f"design: {reason}")
    if quadrature:
        main, reuse = main0, pilot_ref
    else:
        # half the target error by the pilot's estimate, within the budget (refined
        # further in the reference's own solve if its estimate says so)
        N = particles_for(floor0, N0, target, budget["particles_max"])
        main = main0 if N == N0 else monte_carlo(cfg, law, N)
        reuse = pilot_ref if N == N0 else None
    record.update(
        lines=lines,
        reference_error_budget=floor,
        reference_target=target,
        reference_particles=main.count,
        why=(
            "the line against L where a/L dominates b/sqrt(LM) (at the width M_for_L), the "
            "line against M at L_for_M where b/sqrt(LM) dominates, every fitted point "
            "predicted at least 15x above the reference's error"
        ),
    )
    if len(lines["L"]) < 2:  # nothing to fit against L: two small depths, reported as such
        runner.warn("design: no line against L within the budget; depths 2 and 4 are run")
    grid = {
        "L": lines["L"] if len(lines["L"]) >= 2 else [2, 4],
        "M": sorted(set(lines["M"] or [1]) | {lines["M_for_L"]}),
        "L_for_M": lines["L_for_M"],
        "fit_M_max": max(lines["M"] or [1]),
        "particles": main.count,
    }
    return record, grid, main, reuse


def not_judged(args, runner, cfg, first_pass):
    """Finish a study whose law no reference can judge (heavy tails): its results say so,
    with the diagnosis, and hold no points and no fits."""
    message = (
        f"the law is heavy-tailed: one of {first_pass['draws']} draws carries "
        f"{first_pass['max_share']:.0%} of the sum of squared deviations of φ (a finite "
        "variance gives about 0.1%), so no Monte-Carlo reference converges at the rate "
        "N^-1/2 and none can be made 10x more accurate than the finite networks within any "
        "budget: nothing is fitted"
    )
    runner.warn(message)
    runner.finish(
        {
            "points": [],
            "fits": [],
            "reference": {"method": None, "error_estimate": None, "why": message},
            "first_pass": first_pass,
            "verdict": "not judged: heavy-tailed law",
        }
    )
