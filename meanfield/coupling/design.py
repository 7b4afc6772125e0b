"""The design of a convergence study (docs: Mathematics §7): pilot networks measure each
error term (`pilot_errors`, `fit_pilot`, `euler_coefficient`), a first pass estimates the
errors' means (`first_pass_mean`), and the grid lines are chosen so that every judged
point lies 10× above the reference's own error within a budget (`design_lines`); the
grid's programs are boxed by shape and padded to share compilations (`program_boxes`,
`merged_boxes`, `seed_program`, `pad_grid`).
"""

import itertools
import math
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from ..blocks.base import AbstractUnitBlock
from ..engine import AbstractDepthLoop
from ..laws.unit import AbstractLaw
from ..limits.particles import Particles
from ..models.resnet import ResNet
from ..runtime.sharding import SeedProgram, shard_seeds
from ..stats.rate_law import fit_rate_sum
from .mean_ode import LimitOnGrid, coupled_errors, draw_units, euler_errors
from .reference import limit_grids, solve_limit

# one draw's largest share of the sum of squared deviations of φ beyond which a law is
# treated as heavy-tailed (no N^{-1/2} Monte-Carlo rate): see `first_pass_mean`
HEAVY_TAIL_SHARE = 0.05


def first_pass_mean(
    block: AbstractUnitBlock,
    law: AbstractLaw,
    xs: Float[Array, "n d"],
    *,
    key: PRNGKeyArray,
    draws: int = 2**14,
) -> dict:
    """Whether the first forward pass of the limit is trivial: `E φ(x_i, Z_0) = 0` for
    every input, within 4 Monte-Carlo standard errors of `draws` draws (a centred law,
    as the 2LP with mean-zero v). Then `h_0(s) ≡ x`, and at step 0 only the
    1/sqrt(LM) term of the error exists (docs: Mathematics §3).

    It also flags heavy tails, where no Monte-Carlo reference converges at the rate
    N^{-1/2} (φ without a finite variance, as under a Cauchy law): `max_share`, the
    largest share of one draw in the sum of squared deviations of φ (at any input and
    coordinate), is about 2 log(draws)/draws for a Gaussian φ (0.001 here) and O(1) for an
    infinite variance; `heavy_tailed` is `max_share > HEAVY_TAIL_SHARE` (0.05).

    **Returns:** `{"centred": bool, "max_abs_mean", "max_standard_error", "max_share",
    "heavy_tailed": bool, "draws"}`.
    """
    mean, se, share, finite = _first_pass_moments(block, law, xs, key, draws)
    centred = bool(jnp.all(jnp.abs(mean) <= 4 * se + 1e-12))
    share, finite = float(share), bool(finite)
    return {
        "centred": centred and finite,
        "max_abs_mean": float(jnp.max(jnp.abs(mean))),
        "max_standard_error": float(jnp.max(se)),
        "max_share": share,
        "heavy_tailed": share > HEAVY_TAIL_SHARE or not finite,
        "draws": draws,
    }


@eqx.filter_jit
def _first_pass_moments(block, law, xs, key, draws: int):
    """`first_pass_mean`'s moments of φ(x_i, Z) over `draws` draws, in one program (op by
    op, the user's sampler and block dispatched each operation alone: 2 s on a CPU)."""
    z = jax.vmap(law.sample)(jr.split(key, draws))
    values = jax.vmap(lambda x: jax.vmap(lambda zz: block(x, zz))(z))(xs)  # (n, draws, d)
    mean = jnp.mean(values, axis=1)
    se = jnp.std(values, axis=1, ddof=1) / np.sqrt(draws)
    dev2 = (values - mean[:, None]) ** 2
    share = jnp.max(jnp.max(dev2, axis=1) / jnp.maximum(jnp.sum(dev2, axis=1), 1e-300))
    return mean, se, share, jnp.all(jnp.isfinite(values))


def _pow2_floor(x: float) -> int:
    return 1 << max(0, int(np.floor(np.log2(max(x, 1.0)))))


def _pow2_ceil(x: float) -> int:
    return 1 << max(0, int(np.ceil(np.log2(max(x, 1.0)) - 1e-9)))


def _width_line(
    a: float,
    b: float,
    E_min: float,
    dom: float,
    max_depth: int,
    max_width: int,
    units: int,
    seeds: int,
    reasons: list[str],
) -> tuple[int, list[int], bool]:
    """`design_lines`' line against M for a Monte-Carlo term `b > 0`: `(L_M, widths, ok)`,
    a reason appended to `reasons` where it has fewer than three widths."""
    a_eff = max(a, 1e-12)

    def widest(L):
        return min(
            L * (b / (dom * a_eff)) ** 2, (b / E_min) ** 2 / L, max_width, units / (seeds * L)
        )

    best = dom * a_eff / E_min  # where the first two bounds meet
    candidates = {int(np.clip(f(best), 8, max_depth)) for f in (_pow2_floor, _pow2_ceil)}
    L_M = max(sorted(candidates), key=widest)
    M_hi = widest(L_M)
    # powers of 4 where they give three widths or more, else of 2 (a span of 8 at least)
    M_line = [4**i for i in range(12) if 4**i <= M_hi]
    if len(M_line) < 3:
        M_line = [2**i for i in range(24) if 2**i <= M_hi]
    ok_M = len(M_line) >= 3 and M_line[-1] >= 8
    if not ok_M:
        reasons.append(
            f"widths up to {M_hi:.3g} only at L = {L_M}: fewer than three for the fit "
            "against M (the reference is too coarse or the Euler term too large)"
        )
    return L_M, M_line, ok_M


def design_lines(
    a: float,
    b: float,
    floor: float,
    *,
    seeds: int,
    units: int,
    max_depth: int,
    max_width: int,
    trivial: bool = False,
    margin: float = 10.0,
    safety: float = 1.5,
    dominance: float = 4.0,
    dominance_M: float = 3.0,
) -> dict:
    """The lines of a convergence grid, from a pilot fit `error ≈ a/L + b/sqrt(LM)` and
    the reference's error `floor`, so that every fitted point lies `margin × safety`
    above the floor and each line sees one term of the error.

    * Against L (theory −1): depths L_1 < ... < L_hi (powers of two, up to five, from
      L_hi/16) at one width M_L large enough that the Monte-Carlo term is at most
      1/`dominance` of the Euler term at the deepest (`M_L >= (dominance b/a)² L_hi`),
      with `a/L_hi >= margin × safety × floor` and `seeds L_hi M_L <= units`. Where the
      limit is `trivial` (a centred law at step 0: no Euler term), the line is taken at
      M = 1 instead, against the Monte-Carlo term (theory −1/2).
    * Against M (theory −1/2): widths 1, 4, 16, ... (1, 2, 4, 8, ... where that gives
      fewer than three) up to M_hi at the depth L_M where
      the Monte-Carlo term exceeds the Euler term `dominance_M` times at every width and
      lies above the floor's margin: `M_hi = b² / (dominance_M a E_min)` near
      `L_M = dominance_M a / E_min` (E_min = margin × safety × floor; of the two powers
      of two around it, the one with more widths), which maximises the span of widths.

    **Returns:** `{"L": [...], "M_for_L": M_L, "L_for_M": L_M, "M": [...], "ok_L",
    "ok_M", "reasons": [...]}` (`ok_*` False where a line has fewer than three points).
    """
    E_min = margin * safety * max(floor, 1e-300)
    reasons = []
    if trivial or a <= 0:
        # only the Monte-Carlo term: the line against L at M = 1, b/sqrt(L) >= E_min
        L_hi = min(max_depth, _pow2_floor((b / E_min) ** 2), _pow2_floor(units / seeds))
        M_L = 1
    else:
        ratio2 = (dominance * b / a) ** 2 if b > 0 else 1.0
        L_hi = min(
            max_depth,
            _pow2_floor(a / E_min),
            _pow2_floor(np.sqrt(units / (seeds * ratio2))),
        )
        M_L = min(max_width, _pow2_ceil(ratio2 * L_hi))
        if M_L < ratio2 * L_hi:
            reasons.append(
                f"the width of the L line ({M_L}) leaves the Monte-Carlo term above "
                f"1/{dominance:g} of the Euler term at L = {L_hi}"
            )
    L_line = [L for L in (L_hi // 16, L_hi // 8, L_hi // 4, L_hi // 2, L_hi) if L >= 2]
    ok_L = len(L_line) >= 3
    if not ok_L:
        reasons.append(
            f"the error above {margin * safety:g}x the reference's ({E_min:.2e}) allows depths "
            f"up to {L_hi} only: fewer than three depths for the fit against L"
        )
    if b <= 0:
        L_M, M_line, ok_M = max(L_line or [2]), [1], False
        reasons.append("no Monte-Carlo term in the pilot fit (b = 0): no line against M")
    else:
        L_M, M_line, ok_M = _width_line(
            a, b, E_min, dominance_M, max_depth, max_width, units, seeds, reasons
        )
    return {
        "L": L_line,
        "M_for_L": int(M_L),
        "L_for_M": int(L_M),
        "M": M_line,
        "ok_L": ok_L,
        "ok_M": ok_M,
        "E_min": E_min,
        "reasons": reasons,
    }


def program_boxes(
    points: Sequence[tuple[int, ...]], seeds: int, pad_units: int, pad_depth: bool = False
) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The compiled program (box `(L_b, M_b)`, or `(L_b, M_b, D_b)`: any number of axes,
    depth first) of every grid point `(L, M)` (or `(L, M, D)`).

    Points are taken from the largest `L·M` (`L·M·D`) down; each runs in the existing box
    that holds it with the least padding, `seeds · (L_b·M_b − L·M)` units (unit
    coordinates), if that is at most `pad_units`, else it opens its own box. A box has its
    points' own depth unless `pad_depth` (the study's default on a CPU, where a padded
    layer costs what its units cost; not on an accelerator, where each layer is a sequence
    of kernel launches whatever its width). Padding changes no value: see `coupled_errors`
    (the padded units are inert, the padded layers the identity, and the draws of the real
    units do not depend on the box, `draw_units`; for the deep network on an embedding,
    `DeepEmbeddedResNet.hidden` with `size` and `padded_units`).
    """
    boxes: list[tuple[int, ...]] = []
    out = {}
    for point in sorted(set(points), key=lambda p: (-math.prod(p), *(-x for x in p))):
        cost = lambda box, point=point: seeds * (math.prod(box) - math.prod(point))
        fits = [
            box
            for box in boxes
            if all(b >= x for b, x in zip(box[1:], point[1:], strict=True))
            and (box[0] >= point[0] if pad_depth else box[0] == point[0])
            and cost(box) <= pad_units
        ]
        if fits:
            out[point] = min(fits, key=lambda box: (cost(box), box))
        else:
            boxes.append(point)
            out[point] = point
    return out


def merged_boxes(
    points: Sequence[tuple[int, ...]], seeds: int, compile_units: int, pad_depth: bool = False
) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The compiled program (box) of every grid point, as `program_boxes`, chosen by the
    whole grid's cost: the padded units of every point (`seeds · (prod(box) − prod(point))`)
    plus `compile_units` for each program (a compile's cost in units of work).

    Every point starts in its own box; two boxes merge into their elementwise largest (of
    the same depth unless `pad_depth`) while that lowers the cost, the merge that lowers it
    most first. Where several small points share one box, `program_boxes` (which prices
    each point's padding against a compile alone) puts them all in the largest box that
    holds them; this gives them a smaller box of their own when their padding together
    costs more than its compile (the mean-ODE quick preset on a CPU: 20 points of
    L ≤ 128, M ≤ 64 in (128, 64), not (1024, 64)). `compile_units = 0`: every point its
    own program. The padding changes no value (`program_boxes`)."""
    if compile_units < 0:
        raise ValueError(f"compile_units: must be >= 0, got {compile_units}")
    held: dict[tuple[int, ...], list[tuple[int, ...]]] = {p: [p] for p in set(points)}

    def padding(box, inside) -> int:
        return seeds * sum(math.prod(box) - math.prod(p) for p in inside)

    while True:
        best = None  # (change of cost, box a, box b, their merged box)
        for a, b in itertools.combinations(sorted(held), 2):
            if not pad_depth and a[0] != b[0]:
                continue
            box = tuple(max(x, y) for x, y in zip(a, b, strict=True))
            if box in held and box not in (a, b):
                continue  # (its merge with that box is a merge of its own)
            change = (padding(box, held[a] + held[b]) - padding(a, held[a])
                      - padding(b, held[b]) - compile_units)  # fmt: skip
            if change < 0 and (best is None or change < best[0]):
                best = (change, a, b, box)
        if best is None:
            return {p: box for box, inside in held.items() for p in inside}
        _, a, b, box = best
        held[box] = held.pop(a) + held.pop(b)


def seed_program(
    block: AbstractUnitBlock,
    law: AbstractLaw,
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


def pilot_errors(
    block: AbstractUnitBlock,
    law: AbstractLaw,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    reference: dict,
    *,
    learning_rate: float,
    points: Sequence[tuple[int, int]],
    seeds: int,
    key: PRNGKeyArray,
    units_per_batch: int = 2**20,
    loop: AbstractDepthLoop | None = None,
    compiled: Mapping[tuple[int, ...], Future] | None = None,
    pad_depth: bool = False,
) -> dict[str, np.ndarray]:
    """Δ^h, Δ^b and Δ^Z of `seeds` networks at each `(L, M)` of `points` against
    `reference` (grids `h_L{L}`, `b_L{L}` for every depth), every GD step of the
    reference: the pilot of an automatic design. Each depth is one program, its widths
    padded into the widest (`program_boxes`; with `pad_depth`, one program for all, its
    depths padded too); `compiled`, if given, holds them compiled ahead (`compile_pilot`:
    futures by box).

    **Returns:** `L`, `M` `(P,)` and `delta_h`, `delta_b`, `delta_z` `(P, seeds, steps + 1)`.
    """
    boxes = _pilot_boxes(points, seeds, pad_depth)
    programs = {}
    out = {"delta_h": [], "delta_b": [], "delta_z": []}
    for i, (L, M) in enumerate(points):
        box = Lb, Mb = boxes[(L, M)]
        if box not in programs and compiled is not None:
            programs[box] = SeedProgram(compiled[box].result())
        elif box not in programs:
            programs[box] = seed_program(
                block, law, xs, ys, learning_rate, Lb, Mb, seeds, units_per_batch, loop=loop
            )
        keys = jr.split(jr.fold_in(key, i), seeds)
        h, b = pad_grid(reference[f"h_L{L}"], box[0]), pad_grid(reference[f"b_L{L}"], box[0])
        e = programs[box](keys, h, b, jnp.int32(L), jnp.int32(M))
        for q in out:
            out[q].append(np.asarray(getattr(e, q)))
    return {
        "L": np.array([p[0] for p in points]),
        "M": np.array([p[1] for p in points]),
        **{q: np.stack(v) for q, v in out.items()},
    }


def _pilot_boxes(points, seeds: int, pad_depth: bool) -> dict:
    """The pilot's programs: every width padded into the widest (and every depth, with
    `pad_depth`), whatever the padding costs (`program_boxes`)."""
    return program_boxes(points, seeds, pad_units=2**62, pad_depth=pad_depth)


def compile_pilot(
    pool: Executor,
    block: AbstractUnitBlock,
    law: AbstractLaw,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    *,
    learning_rate: float,
    steps: int,
    points: Sequence[tuple[int, int]],
    seeds: int,
    units_per_batch: int = 2**20,
    loop: AbstractDepthLoop | None = None,
    pad_depth: bool = False,
) -> dict[tuple[int, ...], Future]:
    """`pilot_errors`' programs compiled in `pool`'s threads (they need only the shapes of
    the reference's grids, `steps + 1` GD steps): futures by box, for its `compiled` (with
    the same `pad_depth`)."""
    boxes = sorted(set(_pilot_boxes(points, seeds, pad_depth).values()))
    keys = jr.split(jr.key(0), seeds)  # shapes only

    def compile_box(box):
        Lb, Mb = box
        program = seed_program(block, law, xs, ys, learning_rate, Lb, Mb, seeds, units_per_batch,
                               loop=loop)  # fmt: skip
        grid = jax.ShapeDtypeStruct((steps + 1, Lb + 1, *xs.shape), jnp.result_type(float))
        return program.jitted.lower(keys, grid, grid, jnp.int32(Lb), jnp.int32(Mb)).compile()

    return {box: pool.submit(compile_box, box) for box in boxes}


def fit_pilot(
    pilot: dict,
    floor: float,
    *,
    a: float | None = None,
    step: int = -1,
    seed: int = 0,
) -> dict:
    """The pilot's `a/L + b/sqrt(LM)` for Δ^h at `step`, over the points whose mean lies
    at least 3× above the reference's error `floor`.

    With `a` given (the Euler part's own coefficient, `euler_coefficient`: the 1/L term
    measured without Monte-Carlo noise), `b` is the median over the points where the
    Monte-Carlo term is at least half the error of `(Δ^h − a/L) sqrt(LM)`; otherwise both
    come from `fit_rate_sum` (free a, b ≥ 0), which is reported beside in either case.
    """
    values = np.asarray(pilot["delta_h"])[:, :, step]
    keep = [i for i in range(len(values)) if np.nanmean(values[i]) >= 3 * floor]
    fit = fit_rate_sum(
        [int(pilot["L"][i]) for i in keep],
        [int(pilot["M"][i]) for i in keep],
        [values[i] for i in keep],
        quantity="delta_h",
        seed=seed,
    )
    fit["points_used"] = len(keep)
    fit["a_from"] = "joint fit"
    if a is not None:
        bs = []
        for i in keep:
            L, M, mean = int(pilot["L"][i]), int(pilot["M"][i]), float(np.nanmean(values[i]))
            if mean - a / L >= 0.5 * mean:
                bs.append((mean - a / L) * np.sqrt(L * M))
        fit["joint_fit"] = {"a": fit["a"], "b": fit["b"]}
        fit["a"], fit["a_from"] = float(a), "Euler part"
        fit["b"] = float(np.median(bs)) if bs else fit["b"]
        fit["b_points"] = len(bs)
    return fit


def euler_coefficient(
    block: AbstractUnitBlock,
    particles: Particles,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    *,
    learning_rate: float,
    steps: int,
    depths: Sequence[int],
    probes: PyTree,
    rtol: float = 1e-10,
    grids: dict[int, tuple[Array, Array]] | None = None,
) -> dict[str, np.ndarray]:
    """The 1/L coefficient `a` of Δ^h without Monte-Carlo noise: `euler_errors` of a
    small particle set against its own limit at `depths` (`grids`, `limit_grids`' `{L:
    (h_L, b_L)}`, where it is solved already; else solved at `rtol`); `L Δ^h_euler` at
    every step and depth (`L_delta_h`, `(len(depths), steps + 1)`), and `a` per step from
    the deepest.
    """
    if grids is None:
        sol = solve_limit(
            block, particles, xs, ys, learning_rate=learning_rate, steps=steps, tol=rtol
        )
        grids = limit_grids(sol, depths)
    rows = []
    for L in depths:
        e = euler_errors(
            block,
            particles,
            xs,
            ys,
            LimitOnGrid(h=grids[L][0], b=grids[L][1]),
            learning_rate=learning_rate,
            probes=probes,
        )
        rows.append(L * np.asarray(e.delta_h))
    table = np.stack(rows)
    return {"depths": np.asarray(depths), "L_delta_h": table, "a": table[-1]}
