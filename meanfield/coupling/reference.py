"""The reference limit a convergence study judges its networks against (docs: Mathematics
§7): the mean ODE solved on a particle set (Gauss-Hermite nodes or Monte Carlo), with its
own error estimated — by a second solve on independent check particles at a tighter
tolerance, or by batch means over independent replicas — so that the study can require it
to lie 10× below the errors it judges, and refine it (more particles) where it does not.
"""

import math
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from ..blocks.base import AbstractUnitBlock
from ..laws.unit import AbstractGaussianLaw, AbstractLaw
from ..limits.mean_ode import MeanODE, MeanODESolution, solve_mean_ode
from ..limits.particles import Particles, gauss_hermite_particles, monte_carlo_particles

# the reference's error is measured on this grid of depths (and on every study grid)
CHECK_GRID = 1024
# the tolerance part of a reference's error: its solve against one at half its tolerance,
# or at this one where that is tighter. Dopri8 takes its fewest steps (3 per solve) at
# every tolerance from 1e-4 to 5e-7 on a smooth limit, so there half the tolerance gives
# the same solve and would measure 0 (its error against a 1e-12 solve: 5.4e-7)
TOLERANCE_CHECK = 1e-9


def check_tolerance(rtol: float) -> float:
    """The tolerance of the solve that measures a reference's tolerance part."""
    return min(rtol / 2, TOLERANCE_CHECK)


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


def solve_limit(
    block: AbstractUnitBlock,
    particles: Particles,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    *,
    learning_rate: float,
    steps: int,
    tol: float,
) -> MeanODESolution:
    """The mean ODE of `block` on `particles`, `steps` GD steps on `(xs, ys)`, solved at
    `rtol = atol = tol`: the one solve behind every reference and `euler_coefficient`."""
    model = MeanODE(block, particles, xs, ys, learning_rate)
    return solve_mean_ode(model, steps, rtol=tol, atol=tol)


def reference_solves(check: Particles | None, replicas: int) -> int:
    """How many limits a reference solves: `main`, `check` and `main` at half the
    tolerance (`solve_reference`), or `replicas` batches and one at half the tolerance
    (`solve_reference_replicas`, `check` None)."""
    return 3 if check is not None else replicas + 1


def _solved(sol: MeanODESolution, progress: Callable[[], None] | None) -> MeanODESolution:
    """`sol`, with `progress()` called once it is computed (where there is a progress)."""
    if progress is not None:
        sol.ok  # noqa: B018 - reads the solves' flags: waits for them (JAX runs them async)
        progress()
    return sol


def _fields_on(sol, grids: Sequence[np.ndarray]) -> tuple[list[Array], list[Array]]:
    """`(hs, bs)`: every step's mean fields at each of `grids` (arrays of depths s), in one
    compiled call on the grids joined."""
    cuts = np.cumsum([len(g) for g in grids])[:-1]
    h, b = sol.fields(jnp.asarray(np.concatenate(grids)))
    return jnp.split(h, cuts, axis=1), jnp.split(b, cuts, axis=1)


def _largest_distances(pairs) -> list[float]:
    """The largest distance `‖x − y‖` (last axis) of each pair of field arrays `(x, y)`."""
    return [float(jnp.max(jnp.linalg.norm(x - y, axis=-1))) for x, y in pairs]


def _probe_distance(z: PyTree, other: PyTree) -> float:
    """The largest distance over the probes of two sets of their units `Z_k(s)` (leaves
    with a leading probe axis)."""
    diff = jax.tree.map(lambda x, y: jnp.sum((x - y).reshape(x.shape[0], -1) ** 2, 1), z, other)
    return float(jnp.sqrt(jnp.max(sum(jax.tree.leaves(diff)))))


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
    progress: Callable[[], None] | None = None,
) -> dict[str, np.ndarray]:
    """Solve the limit with `main`; return its mean fields on the grids s = l/L of every
    depth in `depths` and its error estimate. `progress()` is called as each of its
    `reference_solves(check)` solves finishes (a progress bar's step).

    The error is measured against two other solves: with the coarser `check`
    particles (padded to the size of `main`, `Particles.padded`, so that the three
    solves share one compiled program per GD step) and at half the tolerance (at most
    `TOLERANCE_CHECK`: `check_tolerance`); each is
    the largest distance of h and b on a fine grid of `CHECK_GRID + 1` depths, and for
    the units the largest distance of `Z_k(s)` of the `probes` draws at s = 0, 1/2, 1.

    **Returns:** numpy arrays: `h_L{L}`, `b_L{L}` (`(steps + 1, L + 1, n, d)` each),
    `err_quadrature`, `err_tolerance` (`[h, b]` each), `err_z`, `ok`, `num_steps`,
    `losses` (the limit's loss per step), `particles`, `seconds`; and the `check`
    particles' own limit on every grid, `check_h_L{L}`, `check_b_L{L}` (`subset_grids`).
    """
    t0 = time.perf_counter()
    check = check.padded(main.count)

    def solve(particles, tol, progress):
        return _solved(
            solve_limit(block, particles, xs, ys, learning_rate=learning_rate, steps=steps,
                        tol=tol),
            progress,
        )  # fmt: skip

    sol, sol_q, sol_t = (solve(main, rtol, progress), solve(check, rtol, progress),
                         solve(main, check_tolerance(rtol), progress))  # fmt: skip
    out = {}
    # every solution at the fine check grid and at every study depth, in one call each
    depths = sorted(set(depths))
    grids = [np.arange(CHECK_GRID + 1) / CHECK_GRID] + [np.arange(L + 1) / L for L in depths]
    hs, bs = _fields_on(sol, grids)
    errs, on_depths = {}, {}
    for name, other in (("quadrature", sol_q), ("tolerance", sol_t)):
        hs_o, bs_o = _fields_on(other, grids)
        errs[name] = _largest_distances(((hs[0], hs_o[0]), (bs[0], bs_o[0])))
        on_depths[name] = (hs_o[1:], bs_o[1:])
    for i, L in enumerate(depths):
        out[f"h_L{L}"], out[f"b_L{L}"] = np.asarray(hs[1 + i]), np.asarray(bs[1 + i])
        # the check set's own limit (its nodes' weights; the padding's are 0)
        h_q, b_q = on_depths["quadrature"]
        out[f"check_h_L{L}"], out[f"check_b_L{L}"] = np.asarray(h_q[i]), np.asarray(b_q[i])
    # the limit copies' error: Z_k(s) of probe draws under both references
    dz = 0.0
    for k in range(1, steps + 1):
        for s in (0.0, 0.5, 1.0):
            z = sol.params(probes, k, s)
            for other in (sol_q, sol_t):
                dz = max(dz, _probe_distance(z, other.params(probes, k, s)))
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


def reference_errors(reference: dict) -> dict[str, float]:
    """The reference's error estimate per quantity: in the norm of Δ^h (its h part), of
    Δ^b (its b part) and of Δ^Z, each the particle part plus the tolerance part."""
    particles = reference["err_quadrature" if "err_quadrature" in reference else "err_particles"]
    tol = reference["err_tolerance"]
    return {
        "delta_h": float(particles[0] + tol[0]),
        "delta_b": float(particles[1] + tol[1]),
        "delta_z": float(reference["err_z"]),
    }


def reference_error(reference: dict) -> tuple[float, float]:
    """The reference's error estimate in the norm of Δ^h and Δ^b (the larger of its
    particle and tolerance parts, summed) and in that of Δ^Z."""
    particles = reference["err_quadrature" if "err_quadrature" in reference else "err_particles"]
    h_b = float(np.max(particles) + np.max(reference["err_tolerance"]))
    return h_b, float(reference["err_z"])


def _fine(sol) -> tuple[Array, Array]:
    """`(h, b)` of every step on the fine check grid, `CHECK_GRID + 1` depths."""
    return sol.fields(jnp.arange(CHECK_GRID + 1) / CHECK_GRID)


def limit_grids(sol, depths: Sequence[int]) -> dict[int, tuple[Array, Array]]:
    """`{L: (h_L, b_L)}` of a `MeanODESolution`: every step's mean fields at s = l/L of
    every depth, each `(steps + 1, L + 1, n, d)`, in one compiled call."""
    hs, bs = _fields_on(sol, [np.arange(L + 1) / L for L in depths])
    return {L: (hs[i], bs[i]) for i, L in enumerate(depths)}


def _batch_means(fine: Sequence[tuple[Array, Array]]) -> tuple[list[float], list[float]]:
    """The batch-means error estimate of h and of b and its spread, from each batch's
    fields on the fine grid (`solve_reference_replicas`)."""
    replicas = len(fine)
    h_r = np.stack([np.asarray(f[0]) for f in fine])  # (R, k+1, S, n, d)
    b_r = np.stack([np.asarray(f[1]) for f in fine])
    est, spread = [], []
    for x in (h_r, b_r):
        e = np.linalg.norm(x - x.mean(0), axis=-1).reshape(replicas, -1).max(1)
        est.append(float(e.mean() / np.sqrt(replicas - 1)))
        spread.append(float(e.std(ddof=1) / np.sqrt(replicas - 1)))
    return est, spread


def _replica_z_errors(parts: list, sol_t, probes: PyTree, steps: int) -> tuple[np.ndarray, float]:
    """The limit copies' errors: per batch, the largest distance of the probes' `Z_k(s)`
    to the batches' mean, and batch 0's largest distance to its solve at half the
    tolerance (`sol_t`), over the steps and s = 0, 1/2, 1."""
    replicas = len(parts)
    dz_r = np.zeros(replicas)
    dz_t = 0.0
    for k in range(1, steps + 1):
        for s in (0.0, 0.5, 1.0):
            zs = [p.params(probes, k, s) for p in parts]
            leaves = [
                np.stack([np.asarray(lf) for lf in group])
                for group in zip(*[jax.tree.leaves(z) for z in zs], strict=True)
            ]  # each (R, P, ...)
            sq = np.sum(  # (R, P): squared distance of each probe to the batches' mean
                [
                    np.sum((x - x.mean(0)).reshape(replicas, x.shape[1], -1) ** 2, axis=-1)
                    for x in leaves
                ],
                axis=0,
            )
            dz_r = np.maximum(dz_r, np.sqrt(sq.max(axis=1)))
            zt = sol_t.params(probes, k, s)
            dz_t = max(dz_t, _probe_distance(zs[0], zt))
    return dz_r, dz_t


def replica_batch(particles: Particles, r: int, replicas: int) -> Particles:
    """Batch `r` of `replicas` disjoint batches of i.i.d. particles: its slice of
    `particles.count // replicas`, its weights renormalised to sum to 1."""
    size = particles.count // replicas
    z = jax.tree.map(lambda a: a[r * size : (r + 1) * size], particles.z)
    w = particles.weights[r * size : (r + 1) * size]
    return Particles(z=z, weights=w / jnp.sum(w))


def subset_grids(reference: dict, subset: str, depths: Sequence[int]) -> dict[int, tuple] | None:
    """The own limit of a subset of a reference's particles on the grids of `depths`
    (`{L: (h_L, b_L)}`): `subset` "batch0" (batch 0 of a Monte-Carlo reference's
    particles, `solve_reference_replicas`) or "check" (a quadrature reference's coarser
    rule, `solve_reference`); None where the reference holds it not at every depth
    (the other kind of reference, or one read from an older folder)."""
    keys = [f"{subset}_{x}_L{L}" for L in depths for x in "hb"]
    if not all(k in reference for k in keys):
        return None
    return {L: (reference[f"{subset}_h_L{L}"], reference[f"{subset}_b_L{L}"]) for L in depths}


def solve_reference_replicas(
    block: AbstractUnitBlock,
    particles: Particles,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    *,
    learning_rate: float,
    steps: int,
    rtol: float,
    depths: Sequence[int],
    probes: PyTree,
    replicas: int = 8,
    progress: Callable[[], None] | None = None,
) -> dict[str, np.ndarray]:
    """`solve_reference` for i.i.d. (Monte-Carlo) particles, whose error is a random
    O(N^{-1/2}) bias: estimated by batch means, not by a coarser set.

    The limit is solved with each of `replicas` disjoint batches of N/R of the
    particles (equal weights within each), and the reference is the mean of the R
    limits (its mean fields h̄, b̄: an N-particle estimate at the cost of one N-particle
    solve; the batches' own O(R/N) nonlinearity bias is far below their O(N^{-1/2})
    fluctuation for the sizes used). For each batch r the largest distance
    `e_r = sup ‖h_r − h̄‖` over steps, inputs and the fine grid is a draw of the error of
    an N/R-particle limit (times sqrt((R−1)/R)), so the reference's error in the norm of
    Δ^h is estimated as `mean_r e_r / sqrt(R − 1)`, and the estimate's spread as
    `std_r e_r / sqrt(R − 1)` (`err_particles_spread`); the same for b and, on the
    `probes`' limit copies, for Z. The tolerance part is batch 0 solved at `rtol` against
    `check_tolerance(rtol)`. Tested against the exact error of a limit in closed form.

    **Returns:** as `solve_reference`, with `err_particles` (`[h, b]`) in place of
    `err_quadrature`, `err_particles_spread` and `replicas`; and batch 0's own limit
    (`replica_batch(particles, 0, replicas)`) on every grid, `batch0_h_L{L}`,
    `batch0_b_L{L}` (`subset_grids`). `progress()`: as in
    `solve_reference`, after each of the `replicas + 1` solves.
    """
    t0 = time.perf_counter()
    N = particles.count
    if replicas < 2 or N % replicas:
        raise ValueError(f"replicas must be >= 2 and divide the {N} particles, got {replicas}")

    def solve(p, tol):
        sol = solve_limit(block, p, xs, ys, learning_rate=learning_rate, steps=steps, tol=tol)
        return _solved(sol, progress)

    batches = [replica_batch(particles, r, replicas) for r in range(replicas)]
    parts = [solve(p, rtol) for p in batches]
    sol_t = solve(batches[0], check_tolerance(rtol))
    depths = sorted(set(depths))
    on_depths = [limit_grids(p, depths) for p in parts]
    grids = {
        L: tuple(np.mean([np.asarray(g[L][i]) for g in on_depths], axis=0) for i in (0, 1))
        for L in depths
    }
    fine = [_fine(p) for p in parts]
    est, spread = _batch_means(fine)
    t_h, t_b = _fine(sol_t)
    tol_err = _largest_distances(((fine[0][0], t_h), (fine[0][1], t_b)))
    dz_r, dz_t = _replica_z_errors(parts, sol_t, probes, steps)
    out: dict[str, np.ndarray] = {}
    for L, (h_L, b_L) in grids.items():
        out[f"h_L{L}"], out[f"b_L{L}"] = np.asarray(h_L), np.asarray(b_L)
        out[f"batch0_h_L{L}"], out[f"batch0_b_L{L}"] = (np.asarray(a) for a in on_depths[0][L])
    ok = sol_t.ok and all(p.ok for p in parts)
    # the reference's loss: that of the batches' mean state at s = 1, per step
    h1 = np.mean([np.asarray(p.fields(jnp.ones(1))[0][:, 0]) for p in parts], axis=0)
    model = parts[0].model
    out.update(
        err_particles=np.array(est),
        err_particles_spread=np.array(spread),
        err_tolerance=np.array(tol_err),
        err_z=np.array(float(dz_r.mean() / np.sqrt(replicas - 1)) + dz_t),
        ok=np.array(ok),
        num_steps=np.array(parts[0].num_steps),
        losses=np.array([float(model.loss_value(jnp.asarray(h1[k]))) for k in range(steps + 1)]),
        particles=np.array(N),
        replicas=np.array(replicas),
        seconds=np.array(time.perf_counter() - t0),
    )
    return out


def reference_target(
    a: float,
    b: float,
    design: dict,
    *,
    margin: float = 10.0,
    safety: float = 1.2,
) -> float:
    """The reference error the designed lines need: the smallest error the pilot fit
    predicts on them (`a/L + b/sqrt(LM)` at the deepest point of the L line and the
    widest of the M line), divided by `margin × safety`."""
    L_hi, M_L = max(design["L"] or [2]), design["M_for_L"]
    L_M, M_hi = design["L_for_M"], max(design["M"] or [1])
    smallest = min(
        a / L_hi + b / np.sqrt(L_hi * M_L),
        a / L_M + b / np.sqrt(L_M * M_hi),
    )
    return float(smallest / (margin * safety))


def particles_for(
    error: float, count: int, target: float, most: int, *, margin: float = 2.0
) -> int:
    """The Monte-Carlo particle count, a power of two in `[count, most]`, whose error,
    extrapolated from `error` at `count` particles as N^{-1/2}, is `target / margin`
    (the margin covers the spread of a batch-means estimate: ±30% for 8 batches)."""
    need = count * (margin * error / max(target, 1e-300)) ** 2
    return int(np.clip(2 ** math.ceil(math.log2(max(need, 1.0))), count, most))


def refine_reference(
    solve: Callable[[int], dict],
    count: int,
    target: float,
    most: int,
    *,
    quantity: str = "delta_h",
    first: dict | None = None,
) -> tuple[dict, list[dict]]:
    """A Monte-Carlo reference refined until its own error (`reference_errors`, in the
    norm of `quantity`) is at most `target`, within a budget of `most` particles.

    `solve(N)` returns the reference arrays with N particles (`solve_reference_replicas`);
    `first`, if given, is the solve with `count` particles already made. Each further
    solve takes `particles_for` its last error (at least 4x more particles). Stops at the
    first reference within the target or at the budget, whichever comes first.

    **Returns:** the last reference and the history `[{"particles", "error"}, ...]`.
    """
    ref = first if first is not None else solve(count)
    history = [{"particles": count, "error": reference_errors(ref)[quantity]}]
    while history[-1]["error"] > target and count < most:
        count = max(4 * count, particles_for(history[-1]["error"], count, target, most))
        count = min(count, most)
        ref = solve(count)
        history.append({"particles": count, "error": reference_errors(ref)[quantity]})
    return ref, history
