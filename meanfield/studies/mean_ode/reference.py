"""The mean-ODE study's reference limit: its particles (Gauss-Hermite nodes where the law
allows, Monte Carlo otherwise), the solve of the main and the check set, and the estimate
of the reference's own error from independent replicas (`REPLICAS` disjoint batches of
the particles), recorded in results.json beside the errors it judges.
"""

import math

import jax.random as jr

from ...coupling.reference import (
    reference_particles,
    reference_solves,
    solve_reference,
    solve_reference_replicas,
)
from ...harness.args import Cost
from ...limits.particles import (
    MAX_HERMITE_ORDER,
    MAX_QUADRATURE_NODES,
    Particles,
    monte_carlo_particles,
)
from ...runtime.errors import StudyInputError
from ..shared.own_block import QUADRATURE_NODES

# Monte-Carlo references: batches of the particles that estimate its error (batch means)
REPLICAS = 8
# ... solved at this tolerance (a quadrature reference at the study's 1e-10): their
# particle part, at least ~1e-4 within the particle budgets (2^20 draws at most), lies
# two orders above Dopri8's error here (5.4e-7 against a 1e-12 solve, 3 steps per solve;
# 1e-10 takes 5-6), and the tolerance part is measured (`check_tolerance`) and added
MONTE_CARLO_RTOL = 1e-6


# the reference limit (`convergence.solve_reference`: three solves, with the check
# particles and at half the tolerance; `solve_reference_replicas` likewise): per
# particle and GD step about this many bytes per parameter number (its trajectory along
# depth at the solver's steps) and per input coordinate, and this many ODE steps of
# Dopri8 (13 stages) per forward or backward solve (a typical count: the budget is 16384)
REFERENCE_BYTES = (128, 64)
REFERENCE_ODE_STEPS, ODE_STAGES = 256, 13


def reference_cost(cfg) -> Cost:
    """The estimated cost (`args.Cost`) of the reference limit of a grid design: its
    particles (`--particles` Monte-Carlo draws, or the quadrature's nodes: the default
    budget `QUADRATURE_NODES`, at most `MAX_QUADRATURE_NODES` with `--order`) of about 3d
    numbers each (the built-in 2LP laws: 2d), through `steps` GD steps."""
    if cfg["reference"] == "monte-carlo":
        particles, flags = float(cfg["particles"]), "--particles/--steps/--d"
    else:
        particles = float(QUADRATURE_NODES if cfg.get("order") is None else MAX_QUADRATURE_NODES)
        flags = "--steps/--d" if cfg.get("order") is None else "--order/--steps/--d"
    d, n, K = cfg["d"], cfg["inputs"], cfg["steps"]
    size = 3 * d  # numbers per particle
    per_particle = REFERENCE_BYTES[0] * size * (K + 1) + REFERENCE_BYTES[1] * n * d
    solves = 3 * (K + 1) * 2  # three solves, a forward and a backward pass per step
    return Cost(
        flags,
        "the reference limit",
        memory=particles * per_particle,
        work=solves * REFERENCE_ODE_STEPS * ODE_STAGES * particles * n * d * 20,
        elements=particles * size * (K + 1),
        array="the reference's particles along training, (particles, steps + 1, parameters)",
    )


def quadrature_order(law, order):
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


def particle_sets(cfg, law):
    """The reference particles and the set that checks them: the Gauss-Hermite rule of
    order q and that of order q/2; or `--particles` Monte-Carlo draws, checked by batch
    means (no second set: None)."""
    if cfg["reference"] == "quadrature":
        return reference_particles(law, order=quadrature_order(law, cfg["order"]))
    main = monte_carlo_particles(law, cfg["particles"], key=jr.fold_in(jr.key(cfg["seed"]), 4))
    return main, None, reference_info(cfg, main)


def reference_info(cfg, main) -> dict:
    """How the reference's particles were made, for the JSON (Monte Carlo)."""
    if cfg["reference"] == "quadrature":
        return reference_particles_info(cfg)
    return {
        "method": "monte-carlo",
        "particles": main.count,
        "error_method": f"batch means over {REPLICAS} disjoint batches of the particles",
    }


def reference_particles_info(cfg) -> dict:
    return {"method": "gauss-hermite", "order": cfg.get("order")}


def reference_on_grids(runner, label, cfg, block, main, check, xs, ys, probes, depths):
    """The reference limit on every grid of `depths`, with its error estimate: a coarser
    quadrature rule (`check`), or batch means of Monte-Carlo particles (`check` None);
    its solves counted on a progress bar (`label`, the runner's `stage_progress`)."""
    solves = reference_solves(check, REPLICAS)
    with runner.stage_progress(f"{label} ({main.count} particles)", solves, "solve") as step:
        return _reference_on_grids(cfg, block, main, check, xs, ys, probes, depths, step)


def _reference_on_grids(cfg, block, main, check, xs, ys, probes, depths, progress):
    kwargs = dict(
        learning_rate=cfg["lr"], steps=cfg["steps"], rtol=cfg["rtol"], depths=depths,
        probes=probes, progress=progress,
    )  # fmt: skip
    if check is None:
        return solve_reference_replicas(block, main, xs, ys, replicas=REPLICAS, **kwargs)
    return solve_reference(block, main, check, xs, ys, **kwargs)


def monte_carlo(cfg, law, count: int) -> Particles:
    """`count` Monte-Carlo particles of the reference (the key depends on the seed only)."""
    return monte_carlo_particles(law, count, key=jr.fold_in(jr.key(cfg["seed"]), 4))
