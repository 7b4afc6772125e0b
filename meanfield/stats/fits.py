"""Error summaries and rate fits (errors → fit).

* `summarize`: mean, standard deviation and count over seeds, with exploded
  draws (non-finite or above a threshold, or flagged by `exploded_draws` because the
  same network exploded in another quantity) counted and excluded, never averaged;
  `fit_values` gives its draws back as the fits take them.
* `fit_loglog`: the log-log slope of error against a size, with a 95% bootstrap
  interval over seeds and a regression (t) interval for misfit.
* `fit_rate_sum`: a joint least-squares fit of `a/L + b/sqrt(LM)`.

Fits never return a NaN: too few usable points give `slope = None` and a reason.
"""

import math
import numbers
from collections.abc import Sequence

import numpy as np

EXPLOSION_THRESHOLD = 1e6

THEORY_TOLERANCE = 0.05
"""How far a fitted exponent or slope may lie from its theory and still be said to agree
with it: a fit *excludes its theory* only where its whole 95% interval lies more than this
from the theory. Over the one to three decades of size the studies fit, 0.05 in an
exponent moves the error by at most 10^0.15 ≈ 1.4×, about the spread of a pre-asymptotic
correction; the rates the theory separates (1/L against 1/sqrt(L), 1/sqrt(M) against 1/M,
a flat coordinate against a growing one) differ by 0.25 and more. Within it the interval
may still miss the theory (a resolved but small departure: `"near"`), and the fit says so
in those words, never as an exclusion."""

# two-sided 95% Student-t quantiles for 1..30 degrees of freedom
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def t975(dof: int) -> float:
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def exploded_mask(v: np.ndarray, threshold: float) -> np.ndarray:
    """Per value of the flat float array `v`: not finite, or above the threshold."""
    return ~np.isfinite(v) | (np.abs(v) > threshold)


def split_exploded(values, threshold: float = EXPLOSION_THRESHOLD) -> tuple[np.ndarray, int]:
    """The usable values (finite, |v| <= threshold) and the number of exploded ones."""
    if not (isinstance(threshold, numbers.Real) and threshold > 0):  # NaN too; inf: none
        raise ValueError(f"threshold: a number > 0 (inf: no threshold), got {threshold!r}")
    v = np.asarray(values, dtype=float).ravel()
    bad = exploded_mask(v, threshold)
    return v[~bad], int(bad.sum())


def exploded_draws(*values, threshold: float = EXPLOSION_THRESHOLD) -> np.ndarray:
    """Per draw, whether it exploded in any of `values` (arrays over the same draws, one
    per quantity measured on the same networks): a network whose loss blew up has
    exploded, even in an error that is still below the threshold."""
    if not values:
        raise ValueError("values: give at least one array of draws")
    flat = [np.asarray(v, dtype=float).ravel() for v in values]
    if len({v.size for v in flat}) != 1:
        raise ValueError(f"values: the arrays differ in length ({[v.size for v in flat]})")
    return np.logical_or.reduce([exploded_mask(v, threshold) for v in flat])


def summarize(
    values,
    *,
    threshold: float = EXPLOSION_THRESHOLD,
    keep_values: bool = True,
    exploded=None,
) -> dict:
    """Mean, std (ddof=1; None for fewer than two usable values, where it is undefined),
    count of usable values, and count of exploded ones.

    `exploded`: a mask over the draws to count as exploded whatever their value here
    (`exploded_draws` over every quantity of the same networks). With `keep_values`,
    `values` holds every draw (None where not finite) and `exploded_draws` the indices of
    those counted as exploded; `fit_values` turns them back into fit input."""
    if not (isinstance(threshold, numbers.Real) and threshold > 0):  # NaN too; inf: none
        raise ValueError(f"threshold: a number > 0 (inf: no threshold), got {threshold!r}")
    v = np.asarray(values, dtype=float).ravel()
    bad = exploded_mask(v, threshold)
    if exploded is not None:
        mask = np.asarray(exploded, dtype=bool).ravel()
        if mask.shape != v.shape:
            raise ValueError(f"exploded: {mask.size} flags for {v.size} draws")
        bad |= mask
    good = v[~bad]
    out = {
        "mean": float(good.mean()) if good.size else None,
        "std": float(good.std(ddof=1)) if good.size > 1 else None,
        "count": int(good.size),
        "exploded": int(bad.sum()),
    }
    if keep_values:
        out["values"] = [float(x) if math.isfinite(x) else None for x in v]
        out["exploded_draws"] = [int(i) for i in np.flatnonzero(bad)]
    return out


def fit_values(summary: dict) -> list[float]:
    """The draws of a `summarize` result as the fits take them: those counted as exploded
    (by their own value or by another quantity of the same network) as inf, which the fits
    count as exploded and leave out."""
    if "values" not in summary:
        raise ValueError("summary: made with keep_values=False, it has no draws to fit")
    out = [math.inf if x is None else x for x in summary["values"]]
    for i in summary.get("exploded_draws", ()):
        out[i] = math.inf
    return out


def line_fit(x, y) -> tuple[float, float]:
    """`(slope, intercept)` of the least-squares line of `y` against `x` (no logarithms
    taken: `fit_loglog` passes logs)."""
    x = np.asarray(x, float)
    A = np.stack([x, np.ones_like(x)], axis=1)
    coef, *_ = np.linalg.lstsq(A, np.asarray(y, float), rcond=None)
    return float(coef[0]), float(coef[1])


def _bootstrap_means(goods: list[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """`(n_boot, P)`: the mean of each point's values resampled with replacement, the
    points resampled independently (draw k of every point forms bootstrap draw k)."""
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, len(goods)))
    for i, g in enumerate(goods):
        idx = rng.integers(0, g.size, size=(n_boot, g.size))
        boots[:, i] = g[idx].mean(axis=1)
    return boots


def check_fit_args(n_boot, **sizes) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}")
    for name, values in sizes.items():
        v = np.asarray(values, dtype=float)
        if v.ndim != 1 or not np.all(np.isfinite(v) & (v > 0)):
            raise ValueError(f"{name} must be a 1-D sequence of finite sizes > 0, got {values!r}")


def studentized_slope(goods, w, *, paired, n_boot, seed):
    """`(slope, se, t_draws, dropped)` of `slope = w · log(mean_i)`: its standard error by
    the delta method and the bootstrap distribution of `(slope* − slope) / se*`.

    `goods`: per point, the usable values; with `paired`, arrays of one length n with NaN
    where a draw is not usable, draw k of every point being one independent unit (one
    network, or draws sharing an embedding): the draws are resampled jointly and the
    standard error is that of the influence values `u_k` (a cluster-robust sandwich);
    otherwise each point's draws are resampled on their own (independent points)."""
    rng = np.random.default_rng(seed)
    if paired:
        E = np.stack(goods, axis=1)  # (n, P), NaN where unusable

        def stats(E):  # E (..., n, P)
            ok = np.isfinite(E)
            cnt = ok.sum(axis=-2)
            m = np.where(ok, E, 0.0).sum(axis=-2) / np.maximum(cnt, 1)
            n = E.shape[-2]
            rel = (
                np.where(ok, E / m[..., None, :] - 1.0, 0.0)
                * (n / np.maximum(cnt, 1))[..., None, :]
            )
            u = rel @ w  # (..., n)
            se = np.sqrt(np.sum((u - u.mean(axis=-1, keepdims=True)) ** 2, axis=-1) / (n * (n - 1)))
            good = np.all(m > 0, axis=-1) & np.all(cnt > 0, axis=-1)
            slope = np.log(np.where(m > 0, m, 1.0)) @ w
            return slope, se, good

        slope, se, _ = stats(E)
        idx = rng.integers(0, E.shape[0], size=(n_boot, E.shape[0]))
        bslope, bse, good = stats(E[idx])
        # one draw repeated: no spread (exactly 0, not the variance's rounding)
        rows = E[idx]
        same = np.all((rows == rows[:, :1]) | (np.isnan(rows) & np.isnan(rows[:, :1])), axis=(1, 2))
        bse = np.where(same, 0.0, bse)
    else:
        m = np.array([g.mean() for g in goods])
        v = np.array([g.var(ddof=1) if g.size > 1 else 0.0 for g in goods])
        n = np.array([g.size for g in goods])
        slope = float(np.log(m) @ w)
        se = float(np.sqrt(np.sum(w**2 * v / (n * m**2))))
        bm = np.empty((n_boot, len(goods)))
        bv = np.empty((n_boot, len(goods)))
        for i, g in enumerate(goods):
            r = g[rng.integers(0, g.size, size=(n_boot, g.size))]
            bm[:, i] = r.mean(axis=1)
            # a resample of one repeated value has no spread: exactly 0, where the
            # variance's rounding (its mean need not equal the value) would leave ~1e-33
            # and a studentized draw of ~1e16 that rounding decides to keep or not
            spread = np.ptp(r, axis=1) > 0
            bv[:, i] = np.where(spread, r.var(axis=1, ddof=1), 0.0) if g.size > 1 else 0.0
        good = np.all(bm > 0, axis=1)
        bslope = np.log(np.where(bm > 0, bm, 1.0)) @ w
        bse = np.sqrt(np.sum(w**2 * bv / (n * np.where(bm > 0, bm, 1.0) ** 2), axis=1))
    good = good & (bse > 0)
    t = (bslope[good] - slope) / bse[good]
    return float(slope), float(se), t, int(n_boot - good.sum())


def _loglog_points(
    x: Sequence[float], samples: Sequence[Sequence[float]], result: dict, *, threshold, paired
) -> tuple[list[float], list[np.ndarray]]:
    """`fit_loglog`'s usable points: their abscissae and draws (with `paired`, every draw,
    NaN where exploded); the exploded draws and the points left out recorded in `result`
    (`excluded`, `excluded_at`, `dropped`)."""
    xs, goods = [], []
    lengths = set()
    for xi, s in zip(x, samples, strict=True):
        v = np.asarray(s, dtype=float).ravel()
        lengths.add(v.size)
        bad = exploded_mask(v, threshold)
        result["excluded"] += int(bad.sum())
        if bad.any():
            result["excluded_at"].append({"x": float(xi), "draws": int(bad.sum())})
        good = v[~bad]
        if good.size and good.mean() > 0:  # a zero mean has no logarithm
            xs.append(float(xi))
            goods.append(np.where(bad, np.nan, v) if paired else good)
        else:
            why = "every draw exploded" if not good.size else "mean error <= 0 (no logarithm)"
            result["dropped"].append({"x": float(xi), "reason": why})
    if paired and len(lengths) > 1:
        raise ValueError(f"samples: paired draws need one count per point, got {sorted(lengths)}")
    return xs, goods


def fit_loglog(
    x: Sequence[float],
    samples: Sequence[Sequence[float]],
    *,
    quantity: str,
    against: str,
    fixed: dict | None = None,
    theory: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    threshold: float = EXPLOSION_THRESHOLD,
    paired: bool = False,
    tolerance: float = THEORY_TOLERANCE,
) -> dict:
    """Fit `log(mean error) = slope · log(x) + c` over grid points.

    **Arguments:**

    - `x`: the abscissa of each point (L or M), positive.
    - `samples`: per point, the error of every seed (exploded ones are excluded
      and counted in `excluded`).
    - `quantity`, `against`, `fixed`, `theory`: labels stored in the result.
    - `n_boot`, `seed`: the bootstrap.
    - `paired`: draw k of every point is the same independent unit (points sharing a
      draw's embedding, say): the draws are resampled jointly, not point by point
      (every point then needs the same number of draws).
    - `tolerance`: how far from `theory` the interval may lie and the fit still agree
      with it (`judge_theory`).

    **The interval** (`ci95`) is a studentized bootstrap over the independent draws: the
    slope's standard error by the delta method (cluster-robust with `paired`), and the
    2.5% and 97.5% points of the bootstrap distribution of `(slope* − slope)/se*`. A
    percentile bootstrap covers a known exponent 90–92% of the time at 10 draws per
    point; this one 93–96% (`tests/test_coverage.py`, `benchmarks/RESULTS.md`).

    **Returns:** a dict with `quantity, against, fixed, slope, intercept, ci95`,
    `ci95_fit` (regression t-interval, which also sees misfit), `theory`,
    `theory_inside` (whether `ci95` holds the theory; None without either),
    `theory_verdict` (inside, near — within `THEORY_TOLERANCE` — or outside: see
    `judge_theory`), `theory_tolerance`, `interval`
    (how `ci95` was formed), `n_points`, `excluded` (exploded draws left out; where:
    `excluded_at`, each `{"x", "draws"}`), `bootstrap_dropped` (bootstrap
    draws left out because a point resampled to a zero mean or no spread: seeds whose
    error is exactly 0 count in the means), `dropped` (the points left out of the fit,
    each `{"x", "reason"}`: every draw exploded, or a mean error <= 0, which has no
    logarithm), and `reason` when no slope is fitted.
    """
    result = {
        "quantity": quantity,
        "against": against,
        "fixed": dict(fixed or {}),
        "theory": theory,
        "slope": None,
        "intercept": None,
        "ci95": None,
        "ci95_fit": None,
        "theory_inside": None,
        "theory_verdict": None,
        "theory_tolerance": tolerance,
        "interval": None,
        "n_points": 0,
        "excluded": 0,
        "excluded_at": [],
        "bootstrap_dropped": 0,
        "dropped": [],
    }
    check_fit_args(n_boot, x=x)
    xs, goods = _loglog_points(x, samples, result, threshold=threshold, paired=paired)
    result["n_points"] = len(xs)
    result["sizes"] = xs  # the sizes the fit used
    if len(xs) < 2 or len(set(xs)) < 2:
        result["reason"] = f"only {len(xs)} usable point(s); a slope needs two distinct sizes"
        return result
    logx = np.log(np.asarray(xs))
    logy = np.log(np.array([np.nanmean(g) for g in goods]))
    slope, intercept = line_fit(logx, logy)
    result["slope"], result["intercept"] = slope, intercept
    xc = logx - logx.mean()
    _, se, t, dropped = studentized_slope(
        goods, xc / (xc @ xc), paired=paired, n_boot=n_boot, seed=seed
    )
    # one draw at some point: no bootstrap over draws was possible, none was discarded
    single = min(np.isfinite(g).sum() for g in goods) < 2
    result["bootstrap_dropped"] = 0 if single else dropped
    unit = "the draws, jointly across points" if paired else "each point's draws"
    result["interval"] = f"studentized bootstrap over {unit} ({n_boot} replicates)"
    if t.size and se > 0:
        lo, hi = np.percentile(t, [2.5, 97.5])
        result["ci95"] = [float(slope - hi * se), float(slope - lo * se)]
    elif se == 0 and not single:
        result["ci95"] = [slope, slope]  # no spread over the draws at any point
    elif single:
        result["reason"] = "one draw per point: no spread to form an interval from"
    dof = len(xs) - 2
    if dof >= 1:
        resid = logy - (slope * logx + intercept)
        se = math.sqrt(float(resid @ resid) / dof / float(xc @ xc))
        result["ci95_fit"] = [slope - t975(dof) * se, slope + t975(dof) * se]
    return judge_theory(result)


def fit_points(points: Sequence[dict], quantity: str, against: str, **kwargs) -> dict:
    """`fit_loglog` over grid points (dicts): the abscissa `p[against]` of every point, its
    draws `fit_values(p[quantity])` (a `summarize` result); `kwargs`: the other keyword
    arguments of `fit_loglog` (`fixed`, `theory`, `seed`, ...)."""
    return fit_loglog(
        [p[against] for p in points],
        [fit_values(p[quantity]) for p in points],
        quantity=quantity,
        against=against,
        **kwargs,
    )


def judge_theory(fit: dict, tolerance: float | None = None) -> dict:
    """Record in `fit` what its interval says of its theory: `theory_inside` (whether it
    holds it; None without a theory or an interval), `theory_verdict` (`theory_verdict`:
    inside, near or outside, the last alone an exclusion), `theory_tolerance` (the
    tolerance judged with: `tolerance`, else the fit's own, else `THEORY_TOLERANCE`) and
    `theory_inside_interval`, the interval judged by: `ci95` (over the draws), else
    `ci95_fit` (the regression's, where the points are deterministic). Call it again after
    changing either interval."""
    tol = tolerance if tolerance is not None else fit.get("theory_tolerance") or THEORY_TOLERANCE
    fit["theory_tolerance"] = tol
    for name in ("ci95", "ci95_fit"):
        if fit.get(name) is not None:
            fit["theory_inside"] = theory_inside(fit[name], fit.get("theory"))
            fit["theory_verdict"] = theory_verdict(fit[name], fit.get("theory"), tol)
            fit["theory_inside_interval"] = name if fit.get("theory") is not None else None
            return fit
    fit["theory_inside"], fit["theory_inside_interval"] = None, None
    fit["theory_verdict"] = None
    return fit


def theory_inside(ci, theory) -> bool | None:
    """Whether the interval `ci` holds `theory` (None without either)."""
    if ci is None or theory is None:
        return None
    return bool(ci[0] <= theory <= ci[1])


def theory_verdict(ci, theory, tolerance: float = THEORY_TOLERANCE) -> str | None:
    """What the interval `ci` says of `theory`: `"inside"` (it holds the theory), `"near"`
    (it misses the theory but reaches within `tolerance` of it: a departure smaller than
    the tolerance), `"outside"` (all of it further than `tolerance` from the theory: the fit
    excludes its theory); None without either."""
    if ci is None or theory is None:
        return None
    lo, hi = ci
    if lo <= theory <= hi:
        return "inside"
    return "near" if lo - tolerance <= theory <= hi + tolerance else "outside"


def verdict_text(verdict: str | None, tolerance: float = THEORY_TOLERANCE) -> str:
    """A verdict in the words every headline and legend uses: "inside", "within ±0.05,
    just outside the interval", "OUTSIDE, beyond ±0.05", "not judged"."""
    return {
        "inside": "inside",
        "near": f"within ±{tolerance:g}, just outside the interval",
        "outside": f"OUTSIDE, beyond ±{tolerance:g}",
    }.get(verdict or "", "not judged")


def fit_verdict(fit: dict) -> str | None:
    """`fit`'s `theory_verdict`, or, for a fit stored before verdicts were (it has
    `theory_inside` only), the verdict of the interval it was judged by."""
    if "theory_verdict" in fit:
        return fit["theory_verdict"]
    ci = fit.get(fit.get("theory_inside_interval") or "ci95") or fit.get("ci95_fit")
    if ci is None:  # no interval kept: what `theory_inside` said, with no tolerance
        inside = fit.get("theory_inside")
        return None if inside is None else ("inside" if inside else "outside")
    return theory_verdict(ci, fit.get("theory"), fit.get("theory_tolerance") or THEORY_TOLERANCE)


def exponent_verdict(theory: dict, ci=None) -> str | None:
    """A law exponent's verdict against one theory (an `exponent_theory` dict): its
    `verdict`; for a law stored before verdicts were, that of the interval `ci` where
    given, else what its `inside_ci95` said (no tolerance)."""
    if "verdict" in theory:
        return theory["verdict"]
    if ci is not None:
        return theory_verdict(ci, theory.get("value"), theory.get("tolerance") or THEORY_TOLERANCE)
    inside = theory.get("inside_ci95")
    return None if inside is None else ("inside" if inside else "outside")


def exponent_theory(value: float, ci, tolerance: float = THEORY_TOLERANCE) -> dict:
    """A law's exponent against its theory `value`: `{"value", "inside_ci95", "verdict",
    "tolerance"}` (`theory_inside` and `theory_verdict` of its interval `ci`)."""
    return {
        "value": value,
        "inside_ci95": theory_inside(ci, value),
        "verdict": theory_verdict(ci, value, tolerance),
        "tolerance": tolerance,
    }


def parabola_argmax(x, y) -> float:
    """The abscissa of the maximum of sampled y(x) (x increasing): the vertex of the
    least-squares parabola through the 5 points around the largest value, clipped to
    the range of x; the largest point itself where that parabola opens upwards. Used
    for α* of simulated response curves and, the same way, of their theory curves."""
    i = int(np.argmax(y))
    lo, hi = max(i - 2, 0), min(i + 3, len(x))
    c = np.polyfit(x[lo:hi], y[lo:hi], 2)
    if c[0] >= 0:
        return float(x[i])
    return float(np.clip(-c[1] / (2 * c[0]), x[0], x[-1]))


def parabola_argmax_interval(x, curves, *, n_boot: int = 400, seed: int = 0) -> dict:
    """The 95% percentile-bootstrap interval of `parabola_argmax(x, mean of curves)` over
    the curves' independent units (`curves` (units, len(x)): one initialisation's curve
    per row, all its points resampled together). **Returns:** `{"ci95", "se"}`. Its
    coverage: `benchmarks/coverage.py` (kind `alpha-star`)."""
    curves = np.asarray(curves, dtype=float)
    rng = np.random.default_rng(seed)
    n = curves.shape[0]
    draws = np.array(
        [parabola_argmax(x, curves[rng.integers(0, n, n)].mean(axis=0)) for _ in range(n_boot)]
    )
    return {
        "ci95": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
        "se": float(np.std(draws, ddof=1)),
    }


def interval_text(value, ci, digits: int = 2) -> str:
    """`value [low, high]` (`[low, high]` where `value` is None) with `digits` decimals,
    or more (up to 6) where `digits` would print two different numbers alike: a tight
    interval never reads `[-1.00, -1.00]`, nor its value as one of its ends. An interval
    of no width at 6 decimals (the draws did not spread: one draw, or identical ones) is
    said so: `-0.81 (no spread over the draws)`."""
    lo, hi = (float(c) for c in ci)
    if math.isfinite(lo) and f"{lo:.6f}" == f"{hi:.6f}":
        shown_value = value if value is not None else lo
        return f"{float(shown_value):.{digits}f} (no spread over the draws)"
    numbers = [lo, hi] + ([float(value)] if value is not None else [])
    shown = [f"{v:.{digits}f}" for v in numbers]
    for d in range(digits, 7):
        shown = [f"{v:.{d}f}" for v in numbers]
        alike = any(shown[i] == shown[j] and numbers[i] != numbers[j]
                    and math.isfinite(numbers[i]) and math.isfinite(numbers[j])
                    for i in range(len(numbers)) for j in range(i))  # fmt: skip
        if not alike:
            break
    head = f"{shown[2]} " if value is not None else ""
    return f"{head}[{shown[0]}, {shown[1]}]"


def fixed_text(fit: dict) -> str:
    """A fit's fixed sizes as printed: "M=64, steps=1"."""
    return ", ".join(f"{k}={v}" for k, v in (fit.get("fixed") or {}).items())


def excluded_warning(fit: dict) -> str:
    """The warning for a fit that left exploded draws out, naming where: "2 exploded
    draw(s) of delta_h left out of its fit against L (M=64, steps=1): 1 at L=32, 1 at L=64",
    or, for the joint fit, "... of its joint fit a/L + b/sqrt(LM) (steps=1)"."""
    fixed = fixed_text(fit)
    where = ", ".join(f"{e['draws']} at {fit.get('against')}={e['x']:g}"
                      for e in fit.get("excluded_at") or [])  # fmt: skip
    # a fit against one size names it; the joint fit (no `against`) names its model
    which = (
        f"fit against {fit['against']}" if fit.get("against") is not None
        else f"joint fit {fit.get('model', '')}".rstrip()
    )  # fmt: skip
    return (
        f"{fit['excluded']} exploded draw(s) of {fit['quantity']} left out of its {which}"
        + (f" ({fixed})" if fixed else "") + (f": {where}" if where else "")
    )  # fmt: skip
