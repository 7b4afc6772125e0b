"""The mean-ODE convergence study as library calls (docs: Mathematics §3, §7).

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
* `summarize_steps`: per-point summaries over seeds (exploded networks counted and left
  out);
* `law_fits`: the headline, the exponents p and q of the whole law
  `a L^-p (1 + c L^-p) ⊕ b (LM)^-q` jointly over the grid for every error and step, and
  of the Euler part's `a L^-p + c L^-2p` (`meanfield.stats.joint_law`);
* `convergence_fits`: the secondary one-term log-log slopes against L and M (bent by the
  other term where it is not negligible; `law_slopes` says by how much) and the
  `a/L + b/sqrt(LM)` fit with the theory's exponents, each with a 95% bootstrap interval.

`meanfield study mean-ode` is these calls, its configuration, its runner and its figure.
"""

import functools
import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ..stats.fits import (
    exploded_draws,
    fit_loglog,
    fit_points,
    fit_values,
    judge_theory,
    line_fit,
    summarize,
)
from ..stats.joint_law import fit_depth_law, fit_depth_width_law, law_value
from ..stats.rate_law import fit_rate_sum

QUANTITIES = ("delta_h", "delta_b", "delta_z")
EULER_QUANTITIES = ("delta_h_euler", "delta_b_euler", "delta_z_euler")


def circle_data(n: int, d: int) -> tuple[Float[Array, "n d"], Float[Array, "n d"]]:
    """A fixed, seed-independent data set of n unit-norm inputs and unit-norm targets.

    `x_{i,j} = sqrt(2/d) cos(θ_i − jπ/d)` with `θ_i = π(i + ½)/n` (points on a great
    half-circle; for d = 2 the unit circle), and `y_i` the inputs with their coordinates
    shifted by one, `y_{i,j} = x_{i,(j+1) mod d}`. Keeping data fixed and of unit scale
    keeps the limit (and the meaning of the errors) the same for every seed. For d = 1
    the inputs are `cos θ_i` (not of unit norm: for odd n the middle one is 0) and the
    targets equal the inputs.

    Made once per `(n, d)` and precision in a process (a study asks for it at each of its
    stages; its ten or so operations, each compiled on its first call, took 0.2 s).
    """
    return _circle_data(int(n), int(d), bool(jax.config.read("jax_enable_x64")))


@functools.cache
def _circle_data(n: int, d: int, x64: bool):
    """`circle_data` (`x64`: the precision it is made in, part of the cache's key)."""
    theta = jnp.pi * (jnp.arange(n) + 0.5) / n
    xs = jnp.sqrt(2.0 / d) * jnp.cos(theta[:, None] - jnp.pi * jnp.arange(d)[None, :] / d)
    if d == 1:
        xs = jnp.ones((n, 1)) * jnp.cos(theta)[:, None]
    return xs, jnp.roll(xs, -1, axis=1)


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
    floors: dict[str, float] | None = None,
) -> tuple[list[dict], int]:
    """Slopes against L and M and the joint fit, for every error and step.

    `points`: one record per (L, M, step) with the `summarize`d `delta_h`, `delta_b`,
    `delta_z`; `decomposition`: one per (L, step) with the Euler part's values. A point
    is fitted only where its mean lies at least 10× above the reference's error
    (`error_estimate`, `error_estimate_z` for Δ^Z; `floors`, a quantity's own estimate
    where given: `reference_errors`). Against L: the line of `depths` at
    the largest width (the smallest where the limit is `trivial` at that step: only the
    1/sqrt(LM) term exists there, theory −1/2); against M: the widths up to
    `fit_M_max` at depth `L_for_M` (theory −1/2).

    **Returns:** `(fits, excluded)`: the fit records and the number of points left out
    for lying too close to the reference's error.
    """
    fits = []
    excluded_points = 0
    limits = (error_estimate, error_estimate_z, floors)
    grid = (depths, min(widths), max(widths), L_for_M, fit_M_max)
    for k in range(steps + 1):
        at_k = [p for p in points if p["steps"] == k]
        for q in QUANTITIES:
            if q == "delta_z" and k == 0:
                continue  # Z_0 equals its limit copy by construction
            bad = [
                p
                for p in at_k
                if p[q]["mean"] is not None and not _usable(p[q]["mean"], q, *limits)
            ]
            excluded_points += len(bad)
            good = [p for p in at_k if _usable(p[q]["mean"], q, *limits)]
            fits += _quantity_fits(good, q, k, grid, trivial(k), seed)
        for q in EULER_QUANTITIES:
            if (q == "delta_z_euler" and k == 0) or trivial(k):
                continue  # no Euler term: the limit is the identity (or Z_0 is exact)
            fits.append(_euler_fit(_euler_rows(decomposition, k, q, limits), q, k, seed))
    for f in fits:  # the one-term slopes: a secondary table, never the verdict (law_fits)
        if f.get("against") is not None:
            f["secondary"] = True
    return fits, excluded_points


def _quantity_fits(good: list[dict], q: str, k: int, grid: tuple, trivial: bool, seed: int):
    """Step `k`'s fits of error `q` over its usable points `good`: against L (the line of
    depths at the largest width, the smallest where the limit is trivial), against M
    (widths up to `fit_M_max` at `L_for_M`), and the joint fit, in that order."""
    depths, M_min, M_max, L_for_M, fit_M_max = grid
    M_line = M_min if trivial else M_max
    line = sorted((p for p in good if p["M"] == M_line and p["L"] in depths), key=lambda p: p["L"])
    theory = -0.5 if trivial else -1.0
    against_L = fit_points(line, q, "L", fixed={"M": M_line, "steps": k}, theory=theory, seed=seed)
    col = sorted(
        (p for p in good if p["L"] == L_for_M and p["M"] <= fit_M_max),
        key=lambda p: p["M"],
    )
    against_M = fit_points(col, q, "M", fixed={"L": L_for_M, "steps": k}, theory=-0.5, seed=seed)
    joint = fit_rate_sum(
        [p["L"] for p in good],
        [p["M"] for p in good],
        [fit_values(p[q]) for p in good],
        quantity=q,
        seed=seed,
    )
    joint["fixed"] = {"steps": k}
    _other_term_notes(against_L, against_M, joint, line, col)
    return [against_L, against_M, joint]


def _euler_fit(rows: list[dict], q: str, k: int, seed: int) -> dict:
    """The Euler part `q` of step `k` against L (one deterministic value per depth: no
    seeds to resample, no interval), judged against its theory −1."""
    fit = fit_loglog(
        [r["L"] for r in rows],
        [[r[q]] for r in rows],
        quantity=q,
        against="L",
        fixed={"units": "limit-particles", "steps": k},
        theory=-1.0,
        seed=seed,
    )
    fit["ci95"] = None
    judge_theory(fit)
    return fit


def _usable(value, q, error_estimate, error_estimate_z, floors) -> bool:
    """Whether a mean error lies at least 10× above the reference's own error estimate
    (a quantity's own in `floors`, else Δ^Z's or the forward one's)."""
    limit = error_estimate_z if q.startswith("delta_z") else error_estimate
    if floors is not None and q in floors:
        limit = floors[q]
    return value is not None and value >= 10 * limit


def _euler_rows(decomposition: list[dict], k: int, q: str, limits: tuple) -> list[dict]:
    """The Euler part's records at step `k`, by depth, whose `q` is `_usable` against the
    reference's error (`limits`: `_usable`'s last three arguments)."""
    rows = sorted((r for r in decomposition if r["steps"] == k), key=lambda r: r["L"])
    return [r for r in rows if _usable(r[q], q, *limits)]


def law_fits(
    points: list[dict],
    decomposition: list[dict],
    *,
    steps: int,
    error_estimate: float,
    error_estimate_z: float,
    trivial: Callable[[int], bool] = lambda k: False,
    seed: int = 0,
    floors: dict[str, float] | None = None,
) -> list[dict]:
    """The headline rates: per step, for Δ^h, Δ^b and Δ^Z, the Euler part's law
    `a L^-p + c L^-2p` (`fit_depth_law`, record `part: "euler"`) and the finite networks'
    `a L^-p (1 + c L^-p) ⊕ b (LM)^-q` over every usable grid point (`fit_depth_width_law`,
    `part: "finite"`), the depth term's next order c taken from the Euler part's fit; where
    the limit is `trivial` at a step only `b (LM)^-q`. Points less than 10× above the
    reference's error are left out, as in `convergence_fits`, and named (`below_reference`).
    Each record's `fixed` holds its step."""
    laws = []
    limits = (error_estimate, error_estimate_z, floors)
    for k in range(steps + 1):
        for q in QUANTITIES:
            if q == "delta_z" and k == 0:
                continue  # Z_0 equals its limit copy by construction
            euler = None
            if not trivial(k):
                eq = q + "_euler"
                rows = _euler_rows(decomposition, k, eq, limits)
                euler = fit_depth_law([r["L"] for r in rows], [r[eq] for r in rows], quantity=eq)
                euler.update(part="euler", fixed={"steps": k})
                laws.append(euler)
            at_k = [p for p in points if p["steps"] == k and p[q]["mean"] is not None]
            good = [p for p in at_k if _usable(p[q]["mean"], q, *limits)]
            c_over_a = None if euler is None else euler.get("c_over_a")
            law = fit_depth_width_law(
                [p["L"] for p in good],
                [p["M"] for p in good],
                [fit_values(p[q]) for p in good],
                quantity=q,
                c_over_a=0.0 if c_over_a is None else c_over_a,
                depth_term=not trivial(k),
                seed=seed,
            )
            law.update(part="finite", fixed={"steps": k})
            law["below_reference"] = [{"L": p["L"], "M": p["M"]} for p in at_k if p not in good]
            if euler is not None and c_over_a is None:
                law["note"] = "the Euler part has no law fit; the depth term's next order is 0"
            laws.append(law)
    return laws


def law_slopes(fits: list[dict], laws: list[dict]) -> None:
    """On every secondary one-term slope of the finite networks, `law_slope`: the slope
    that the fitted joint law itself has over the same points (a least-squares line
    through its values): how far the other term bends a one-term slope there."""
    for f in fits:
        if not f.get("secondary") or f.get("slope") is None or f.get("quantity") not in QUANTITIES:
            continue
        step = (f.get("fixed") or {}).get("steps")
        same = [g for g in laws if g.get("part") == "finite" and g["quantity"] == f["quantity"]]
        law = next((g for g in same if g["fixed"]["steps"] == step), None)
        xs = [x for x in f.get("sizes") or [] if x]
        if law is None or len(xs) < 2:
            continue
        fixed = f["fixed"]
        L = xs if f["against"] == "L" else [fixed["L"]] * len(xs)
        M = xs if f["against"] == "M" else [fixed["M"]] * len(xs)
        values = law_value(law, L, M)
        if values is not None:
            f["law_slope"] = line_fit(np.log(xs), np.log(values))[0]


def _other_term_notes(L_fit: dict, M_fit: dict, joint: dict, line, col) -> None:
    """The share of the term a line is not about, from the joint fit `a/L + b/sqrt(LM)`,
    at the line's end where it is largest (`other_term_share`); a fit whose interval
    excludes its theory while that share exceeds 5% is pre-asymptotic, and says so
    (`theory_note`)."""
    a, b = joint.get("a"), joint.get("b")
    if a is None or b is None:
        return
    for fit, rows, other, name in (
        (L_fit, line, lambda L, M: b / math.sqrt(L * M), "1/sqrt(LM)"),
        (M_fit, col, lambda L, M: a / L, "1/L"),
    ):
        if not rows or fit.get("slope") is None:
            continue
        shares = [other(p["L"], p["M"]) / (a / p["L"] + b / math.sqrt(p["L"] * p["M"]))
                  for p in rows if a / p["L"] + b / math.sqrt(p["L"] * p["M"]) > 0]  # fmt: skip
        if not shares:
            continue
        share = max(shares)
        fit["other_term_share"] = share
        if fit.get("theory_inside") is False and share > 0.05:
            fit["theory_note"] = (
                f"pre-asymptotic: the {name} term is {share:.0%} of the fitted error on this "
                "line (joint fit a/L + b/sqrt(LM)), which bends the slope"
            )


QUANTILE_DELTAS = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)


def delta_quantiles(
    points: list[dict],
    step: int,
    *,
    quantity: str = "delta_h",
    dimension: int | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """The δ-dependence of the mean-ODE bound (Chaintron: with probability 1 − δ,
    `Δ^h ≤ c (1/L + (sqrt(D) + log(1/δ))/sqrt(LM))`), measured at step `step`.

    Every grid point's draws (exploded ones left out) are divided by their median, so that
    the points pool: where the Monte-Carlo term dominates, the bound's 1 − δ quantile of
    the normalised error is `(sqrt(D) + log(1/δ))/(sqrt(D) + log 2)`, affine in log(1/δ)
    whatever (L, M). For each δ of `QUANTILE_DELTAS` with at least 5 pooled draws beyond
    the quantile, the pooled 1 − δ quantile; then least-squares lines of the quantile
    against `log(1/δ)` (the bound's form) and against `sqrt(log(1/δ))` (Gaussian
    concentration), each with its slope's 95% interval and residual RMS: the smaller
    residual says which form the data follow. With `dimension` (D), `bound_slope` is the
    bound's slope `1/(sqrt(D) + log 2)` of the normalised quantile against log(1/δ) where
    its Monte-Carlo term dominates.
    **The interval** (`interval` says it): the slope ± 1.96 standard deviations of its
    bootstrap. Pooling assumes every point's draws follow one law up to scale; the bootstrap
    takes that law as the pooled normalised draws, draws each point's sample (its own size)
    from them and divides it by its own median, as the estimate does, so that the median's
    noise (which stretches the pooled tail and biases the slope by up to 0.4 standard
    deviations) is in every replicate. Resampling each point's own ~10 draws instead
    over-states the spread by 10-45% (coverage 0.95-1.00); without the renormalisation it
    under-states it (0.86-0.89). This one covers 0.92-0.965 of the time (nominal 0.95) on
    half-normal, chi(3), log-normal and exponential draws, 17 points of 10 draws, 400
    replicates (benchmarks/coverage.py delta-quantile).
    Per point, `per_point` gives the raw 1 − δ quantiles for the δ its own draws resolve
    (n δ ≥ 1).
    """
    pooled, per_point = _normalised_draws(points, step, quantity)
    out: dict = {"quantity": quantity, "step": step, "per_point": per_point}
    if dimension is not None:
        out["bound_slope"] = 1.0 / (math.sqrt(dimension) + math.log(2.0))
    if not pooled:
        out["reason"] = "no point with two or more finite draws"
        return out
    allv = np.concatenate(pooled)
    deltas = [d for d in QUANTILE_DELTAS if allv.size * d >= 5]
    out["pooled_draws"] = int(allv.size)
    out["deltas"] = deltas
    out["quantiles"] = [float(np.quantile(allv, 1 - d)) for d in deltas]
    if len(deltas) < 3:
        out["reason"] = f"{allv.size} pooled draws resolve only {len(deltas)} values of δ"
        return out
    rng = np.random.default_rng(seed)
    sample = []  # each point drawn from the common (pooled) law, then normalised again
    for g in pooled:
        r = allv[rng.integers(0, allv.size, (n_boot, g.size))]
        sample.append(r / np.median(r, axis=1, keepdims=True))
    boots = np.quantile(np.concatenate(sample, axis=1), [1 - d for d in deltas], axis=1).T
    out["fits"] = _quantile_lines(deltas, out["quantiles"], boots)
    out["interval"] = (
        "slope ± 1.96 bootstrap standard deviations; each replicate draws every point's sample "
        "from the pooled normalised draws and divides it by its median again (coverage of the "
        "nominal 95%: 0.92-0.965 on simulated data, benchmarks/coverage.py delta-quantile)"
    )
    return out


def _normalised_draws(points: list[dict], step: int, quantity: str) -> tuple[list, list]:
    """Each point's finite, not exploded draws of `quantity` at `step` divided by their
    median (points with fewer than two, or a median of 0, left out), and each point's raw
    1 − δ quantiles for the δ its own draws resolve."""
    pooled, per_point = [], []
    for p in points:
        if p["steps"] != step:
            continue
        summary = p[quantity]
        bad = set(summary.get("exploded_draws", []))
        v = np.array(
            [x for i, x in enumerate(summary["values"]) if x is not None and i not in bad], float
        )
        if v.size < 2 or not np.median(v) > 0:
            continue
        pooled.append(v / np.median(v))
        per_point.append(
            {
                "L": p["L"],
                "M": p["M"],
                "draws": int(v.size),
                "quantiles": {
                    str(d): float(np.quantile(v, 1 - d)) for d in QUANTILE_DELTAS if v.size * d >= 1
                },
            }
        )
    return pooled, per_point


def _quantile_lines(deltas: list[float], quantiles: list[float], boots: np.ndarray) -> dict:
    """`delta_quantiles`' least-squares lines of the pooled quantiles against log(1/δ)
    (`log`) and sqrt(log(1/δ)) (`sqrt_log`), each slope's interval from the bootstrap's
    quantiles `boots` (replicates × δ)."""
    fits = {}
    for name, x in (
        ("log", np.log(1 / np.asarray(deltas))),
        ("sqrt_log", np.sqrt(np.log(1 / np.asarray(deltas)))),
    ):
        xc = x - x.mean()
        q = np.asarray(quantiles)
        slope, intercept = line_fit(x, q)
        resid = q - (intercept + slope * x)
        bslopes = (boots - boots.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)
        half = 1.959964 * float(np.std(bslopes, ddof=1))
        fits[name] = {
            "slope": slope,
            "intercept": intercept,
            "slope_ci95": [slope - half, slope + half],
            "residual_rms": float(np.sqrt(np.mean(resid**2))),
        }
    return fits
