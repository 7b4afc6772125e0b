"""The mean-ODE convergence study as library calls (SPEC §3, §7).

A grid over depth L and width M; at every point many seeds of a finite ResNet with
α = 1/(LM), trained for k GD steps in the mean-ODE convention and coupled unit by unit
to its limit copy (`meanfield.coupling.coupled_errors`), against one reference limit
whose own error is measured. The pieces, each callable on its own:

* `circle_data`: the fixed, seed-independent data set;
* `reference_particles`, `solve_reference`: the limit (Gauss–Hermite or Monte-Carlo
  particles, Diffrax Dopri8 in float64), on every grid of the study, with its error
  estimate (a coarser particle set, half the tolerance);
* `program_boxes`, `seed_program`, `pad_grid`: few compiled programs for the whole grid
  (a cheap point runs padded inside a larger point's program, which changes no value);
* `summarize_steps`, `convergence_fits`: per-point summaries over seeds (exploded
  networks counted and left out) and the log-log fits against L and M and the joint
  `a/L + b/sqrt(LM)` fit, each with a 95% bootstrap interval.

`meanfield study mean-ode` is these calls, its configuration, its runner and its figure.
"""

import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .blocks import AbstractUnitBlock
from .coupling import LimitOnGrid, coupled_errors, draw_units
from .engine import AbstractDepthLoop
from .fits import exploded_draws, fit_loglog, fit_rate_sum, fit_values, summarize
from .laws import AbstractGaussianLaw, AbstractLaw
from .meanode import MeanODE, solve_mean_ode
from .particles import Particles, gauss_hermite_particles, monte_carlo_particles
from .resnet import ResNet
from .sharding import SeedProgram, shard_seeds

QUANTITIES = ("delta_h", "delta_b", "delta_z")
EULER_QUANTITIES = ("delta_h_euler", "delta_b_euler", "delta_z_euler")
# the reference's error is measured on this grid of depths (and on every study grid)
CHECK_GRID = 1024


def circle_data(n: int, d: int) -> tuple[Float[Array, "n d"], Float[Array, "n d"]]:
    """A fixed, seed-independent data set of n unit-norm inputs and unit-norm targets.

    `x_{i,j} = sqrt(2/d) cos(θ_i − jπ/d)` with `θ_i = π(i + ½)/n` (points on a great
    half-circle; for d = 2 the unit circle), and `y_i` the inputs with their coordinates
    shifted by one, `y_{i,j} = x_{i,(j+1) mod d}`. Keeping data fixed and of unit scale
    keeps the limit (and the meaning of the errors) the same for every seed. For d = 1
    the inputs are `cos θ_i` (not of unit norm: for odd n the middle one is 0) and the
    targets equal the inputs.
    """
    theta = jnp.pi * (jnp.arange(n) + 0.5) / n
    xs = jnp.sqrt(2.0 / d) * jnp.cos(theta[:, None] - jnp.pi * jnp.arange(d)[None, :] / d)
    if d == 1:
        xs = jnp.ones((n, 1)) * jnp.cos(theta)[:, None]
    return xs, jnp.roll(xs, -1, axis=1)


def reference_particles(
    law: AbstractLaw,
    *,
    order: int | None = None,
    count: int | None = None,
    key: PRNGKeyArray | None = None,
) -> tuple[Particles, Particles, dict]:
    """The reference's particles and the coarser set that checks them.

    With `order`: the Gauss–Hermite rule of that order per coordinate (the law must be
    an `AbstractGaussianLaw`) and the rule of order `max(order // 2, 2)`. With `count`
    (and `key`): `count` Monte-Carlo draws and `count // 4` independent others.
    **Returns:** `(main, check, description)`.
    """
    if (order is None) == (count is None):
        raise ValueError("give exactly one of order (quadrature) and count (Monte Carlo)")
    if order is not None:
        if not isinstance(law, AbstractGaussianLaw):
            raise ValueError(f"order: quadrature needs a Gaussian law, got {type(law).__name__}")
        q_check = max(order // 2, 2)
        return (
            gauss_hermite_particles(law, order),
            gauss_hermite_particles(law, q_check),
            {"method": "gauss-hermite", "order": order, "check_order": q_check},
        )
    if key is None:
        raise ValueError("key: Monte-Carlo particles need a jax.random key")
    assert count is not None
    check = max(count // 4, 1)
    return (
        monte_carlo_particles(law, count, key=key),
        monte_carlo_particles(law, check, key=jr.fold_in(key, 1)),
        {"method": "monte-carlo", "particles": count, "check_particles": check},
    )


def solve_reference(
    block: AbstractUnitBlock,
    main: Particles,
    check: Particles,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    *,
    learning_rate: float,
    steps: int,
    rtol: float,
    depths: Sequence[int],
    probes: PyTree,
) -> dict[str, np.ndarray]:
    """Solve the limit with `main`; return its mean fields on the grids s = l/L of every
    depth in `depths` and its error estimate.

    The error is measured against two other solves: with the coarser `check`
    particles (padded to the size of `main`, `Particles.padded`, so that the three
    solves share one compiled program per GD step) and at half the tolerance; each is
    the largest distance of h and b on a fine grid of `CHECK_GRID + 1` depths, and for
    the units the largest distance of `Z_k(s)` of the `probes` draws at s = 0, 1/2, 1.

    **Returns:** numpy arrays: `h_L{L}`, `b_L{L}` (`(steps + 1, L + 1, n, d)` each),
    `err_quadrature`, `err_tolerance` (`[h, b]` each), `err_z`, `ok`, `num_steps`,
    `losses` (the limit's loss per step), `particles`, `seconds`.
    """
    t0 = time.perf_counter()
    check = check.padded(main.count)

    def solve(particles, tol):
        model = MeanODE(block, particles, xs, ys, learning_rate)
        return solve_mean_ode(model, steps, rtol=tol, atol=tol)

    sol, sol_q, sol_t = (solve(main, rtol), solve(check, rtol), solve(main, rtol / 2))
    out = {}
    # every solution at the fine check grid and at every study depth, in one call each
    depths = sorted(set(depths))
    grids = [np.arange(CHECK_GRID + 1) / CHECK_GRID] + [np.arange(L + 1) / L for L in depths]
    cuts = np.cumsum([len(g) for g in grids])[:-1]
    s_all = jnp.asarray(np.concatenate(grids))
    h, b = sol.fields(s_all)
    errs = {}
    fine = slice(0, len(grids[0]))
    for name, other in (("quadrature", sol_q), ("tolerance", sol_t)):
        h_o, b_o = other.fields(s_all)
        errs[name] = [
            float(jnp.max(jnp.linalg.norm(x[:, fine] - y[:, fine], axis=-1)))
            for x, y in ((h, h_o), (b, b_o))
        ]
    h_grids, b_grids = jnp.split(h, cuts, axis=1)[1:], jnp.split(b, cuts, axis=1)[1:]
    for L, h_L, b_L in zip(depths, h_grids, b_grids, strict=True):
        out[f"h_L{L}"], out[f"b_L{L}"] = np.asarray(h_L), np.asarray(b_L)
    # the limit copies' error: Z_k(s) of probe draws under both references
    dz = 0.0
    for k in range(1, steps + 1):
        for s in (0.0, 0.5, 1.0):
            z = sol.params(probes, k, s)
            for other in (sol_q, sol_t):
                diff = jax.tree.map(
                    lambda x, y: jnp.sum((x - y).reshape(x.shape[0], -1) ** 2, 1),
                    z,
                    other.params(probes, k, s),
                )
                dz = max(dz, float(jnp.sqrt(jnp.max(sum(jax.tree.leaves(diff))))))
    out.update(
        err_quadrature=np.array(errs["quadrature"]),
        err_tolerance=np.array(errs["tolerance"]),
        err_z=np.array(dz),
        ok=np.array(sol.ok and sol_q.ok and sol_t.ok),
        num_steps=np.array(sol.num_steps),
        losses=np.array([float(sol.loss(k)) for k in range(steps + 1)]),
        particles=np.array(main.count),
        seconds=np.array(time.perf_counter() - t0),
    )
    return out


def reference_error(reference: dict) -> tuple[float, float]:
    """The reference's error estimate in the norm of Δ^h and Δ^b (the larger of its
    particle and tolerance parts, summed) and in that of Δ^Z."""
    h_b = float(np.max(reference["err_quadrature"]) + np.max(reference["err_tolerance"]))
    return h_b, float(reference["err_z"])


def program_boxes(
    points: Sequence[tuple[int, int]], seeds: int, pad_units: int, pad_depth: bool = False
) -> dict[tuple[int, int], tuple[int, int]]:
    """The compiled program (box `(L_b, M_b)`) of every grid point `(L, M)`.

    Points are taken from the largest `L·M` down; each runs in the existing box that
    holds it with the least padding, `seeds · (L_b·M_b − L·M)` units, if that is at most
    `pad_units`, else it opens its own box. A box has its points' own depth unless
    `pad_depth` (the study's default on a CPU, where a padded layer costs what its units
    cost; not on an accelerator, where each layer is a sequence of kernel launches
    whatever its width). Padding changes no value: see `coupled_errors` (the padded
    units are inert, the padded layers the identity, and the draws of the real units do
    not depend on the box, `draw_units`).
    """
    boxes: list[tuple[int, int]] = []
    out = {}
    for L, M in sorted(set(points), key=lambda p: (-p[0] * p[1], -p[0])):
        cost = lambda box, L=L, M=M: seeds * (box[0] * box[1] - L * M)
        fits = [
            box
            for box in boxes
            if box[1] >= M
            and (box[0] >= L if pad_depth else box[0] == L)
            and cost(box) <= pad_units
        ]
        if fits:
            out[(L, M)] = min(fits, key=lambda box: (cost(box), box))
        else:
            boxes.append((L, M))
            out[(L, M)] = (L, M)
    return out


def seed_program(
    block: AbstractUnitBlock,
    law: AbstractGaussianLaw,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    learning_rate: float,
    L: int,
    M: int,
    seeds: int,
    units_per_batch: int,
    *,
    devices=None,
    loop: AbstractDepthLoop | None = None,
) -> SeedProgram:
    """One program for every point of depth at most L and width at most M, its seeds
    split over `devices` (default: all; `shard_seeds`), at most `units_per_batch` units
    (seeds × L·M) at once: `run(keys, h, b, depth, width)` → `CoupledErrors` with a
    leading seed axis (`h`, `b`: the limit on the point's grid, padded to L + 1 rows,
    `pad_grid`), with `run.jitted` to compile ahead. `loop`: the networks' depth loop."""
    batch = max(1, min(seeds, units_per_batch // (L * M)))

    def one(key, h, b, depth, width):
        net = ResNet(block, draw_units(law, key, L, M), 1.0 / (L * M), loop=loop)
        grid = LimitOnGrid(h=h, b=b)
        return coupled_errors(
            net, xs, ys, grid, learning_rate=learning_rate, depth=depth, width=width
        )

    return shard_seeds(one, (0, None, None, None, None), batch_size=batch, devices=devices)


def pad_grid(values, L: int) -> Array:
    """Limit values on a grid of `depth + 1` rows (axis 1), padded to `L + 1` rows by
    repeating the last (the limit at s = 1), as a depth-padded program needs."""
    values = jnp.asarray(values)
    extra = L + 1 - values.shape[1]
    return jnp.pad(values, [(0, 0), (0, extra)] + [(0, 0)] * (values.ndim - 2), mode="edge")


def summarize_steps(values_by_name: dict, steps: int) -> list[dict]:
    """Per step, summaries over seeds (`meanfield.summarize`) of each quantity, given as
    `(seeds, steps + 1)` arrays. A network that exploded at a step in any of its
    quantities (its loss, say) is counted as exploded in all of them there: an error
    still below the threshold is not averaged in."""
    per_step = []
    for k in range(steps + 1):
        at_k = {name: np.asarray(v)[:, k] for name, v in values_by_name.items()}
        exploded = exploded_draws(*at_k.values())
        per_step.append({name: summarize(v, exploded=exploded) for name, v in at_k.items()})
    return per_step


def convergence_fits(
    points: list[dict],
    decomposition: list[dict],
    *,
    steps: int,
    depths: Sequence[int],
    widths: Sequence[int],
    L_for_M: int,
    fit_M_max: int,
    error_estimate: float,
    error_estimate_z: float,
    trivial: Callable[[int], bool] = lambda k: False,
    seed: int = 0,
) -> tuple[list[dict], int]:
    """Slopes against L and M and the joint fit, for every error and step.

    `points`: one record per (L, M, step) with the `summarize`d `delta_h`, `delta_b`,
    `delta_z`; `decomposition`: one per (L, step) with the Euler part's values. A point
    is fitted only where its mean lies at least 10× above the reference's error
    (`error_estimate`, `error_estimate_z` for Δ^Z). Against L: the line of `depths` at
    the largest width (the smallest where the limit is `trivial` at that step: only the
    1/sqrt(LM) term exists there, theory −1/2); against M: the widths up to
    `fit_M_max` at depth `L_for_M` (theory −1/2).

    **Returns:** `(fits, excluded)`: the fit records and the number of points left out
    for lying too close to the reference's error.
    """
    fits = []
    excluded_points = 0
    M_min, M_max = min(widths), max(widths)

    def usable(pt, q):
        limit = error_estimate_z if q == "delta_z" else error_estimate
        mean = pt[q]["mean"]
        return mean is not None and mean >= 10 * limit

    for k in range(steps + 1):
        at_k = [p for p in points if p["steps"] == k]
        for q in QUANTITIES:
            if q == "delta_z" and k == 0:
                continue  # Z_0 equals its limit copy by construction
            bad = [p for p in at_k if p[q]["mean"] is not None and not usable(p, q)]
            excluded_points += len(bad)
            good = [p for p in at_k if usable(p, q)]
            M_line = M_min if trivial(k) else M_max
            line = sorted(
                (p for p in good if p["M"] == M_line and p["L"] in depths), key=lambda p: p["L"]
            )
            fits.append(
                fit_loglog(
                    [p["L"] for p in line],
                    [fit_values(p[q]) for p in line],
                    quantity=q,
                    against="L",
                    fixed={"M": M_line, "steps": k},
                    theory=-0.5 if trivial(k) else -1.0,
                    seed=seed,
                )
            )
            col = sorted(
                (p for p in good if p["L"] == L_for_M and p["M"] <= fit_M_max),
                key=lambda p: p["M"],
            )
            fits.append(
                fit_loglog(
                    [p["M"] for p in col],
                    [fit_values(p[q]) for p in col],
                    quantity=q,
                    against="M",
                    fixed={"L": L_for_M, "steps": k},
                    theory=-0.5,
                    seed=seed,
                )
            )
            joint = fit_rate_sum(
                [p["L"] for p in good],
                [p["M"] for p in good],
                [fit_values(p[q]) for p in good],
                quantity=q,
                seed=seed,
            )
            joint["fixed"] = {"steps": k}
            fits.append(joint)
        for q in EULER_QUANTITIES:
            if (q == "delta_z_euler" and k == 0) or trivial(k):
                continue  # no Euler term: the limit is the identity (or Z_0 is exact)
            rows = sorted((r for r in decomposition if r["steps"] == k), key=lambda r: r["L"])
            limit = error_estimate_z if q == "delta_z_euler" else error_estimate
            rows = [r for r in rows if r[q] is not None and r[q] >= 10 * limit]
            fit = fit_loglog(
                [r["L"] for r in rows],
                [[r[q]] for r in rows],
                quantity=q,
                against="L",
                fixed={"units": "limit-particles", "steps": k},
                theory=-1.0,
                seed=seed,
            )
            fit["ci95"] = None  # one deterministic value per depth: no seeds to resample
            fits.append(fit)
    return fits, excluded_points
