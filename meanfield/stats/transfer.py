"""Learning-rate transfer: the optimal learning rate of a loss curve over a log grid, its
drift against a size (depth or width) with an interval over the independent networks, and
the verdict the interval supports.

A size's **curve** is the log final loss over a grid of learning rates `lrs`, one column
per network, `(len(lrs), networks)`. `optimal_lr` reads lr* from the mean curve: the
vertex of the parabola through the grid's minimum and its two neighbours in (log lr, log
loss), not the argmin alone; None at an edge of the grid (unresolved). `drift` fits log
lr* against log size (the drift exponent) and forms its interval by resampling what is
independent, the networks of each size (`drift_interval`: a bootstrap over each size's
networks gives each size's variance of log lr*; the slope's standard error combines them,
with a Student-t quantile at the Welch–Satterthwaite degrees of freedom).

**Coverage** (`benchmarks/coverage.py`, kind `transfer-drift`): simulated at the transfer
study's own layouts (its quick and paper presets' rates, sizes and networks), with lr*
placed at a random phase between grid points and loss curves asymmetric about it, the
interval covers the true drift 93–96% of the time; the jackknife interval it replaces
covered 88–93% (87.7% at the quick preset's three widths), and a percentile bootstrap over
4 networks 80%.

**Verdict** (`verdict`) at a tolerance `band` on the drift (±0.15 by default: lr* moving
by less than a factor `16^0.15 = 1.5` over a 16-fold range of sizes, about one step of the
studies' grids of rates a factor √2 apart), decided in this order:

1. `transfers`: the interval lies within ±band (a drift smaller than the tolerance, which
   may still exclude 0: then it is resolved and reported, but within the tolerance);
2. `drifts`: the interval excludes 0 (and is not within the band);
3. `undecided`: the interval holds 0 but is wider than the band; `networks_to_decide`
   estimates how many networks per size would decide it at the same drift (the interval's
   half-width falls as 1/sqrt(networks)).
"""

import math

import numpy as np

from .fits import line_fit

INTERVAL = (
    "a bootstrap over each size's networks (resampled with replacement, lr* recomputed): "
    "each size's variance of log lr* (times S/(S-1)), combined into the slope's standard "
    "error; Student-t quantile at the Welch-Satterthwaite degrees of freedom"
)
REPLICATES = 2000
TRANSFER_BAND = 0.15  # a drift interval within ±this shows transfer
# the largest share of bootstrap replicates whose lr* falls on a grid edge at some size
# for which an interval is still given (the rest of the replicates)
UNRESOLVED_SHARE = 0.1
# networks_to_decide is not estimated beyond this many times the networks run
DECIDE_CAP = 100


def optimal_lr(lrs, log_loss) -> float | None:
    """lr* from the parabola through the grid minimum of log loss against log lr and its two
    neighbours; None at an edge of the grid (unresolved)."""
    value = optimal_lrs(lrs, np.asarray(log_loss, dtype=float)[None])[0]
    return None if math.isnan(value) else float(value)


def optimal_lrs(lrs, log_losses) -> np.ndarray:
    """`optimal_lr` of every row of `log_losses` (curves, len(lrs)) at once: NaN where the
    minimum is at an edge of the grid."""
    y = np.asarray(log_losses, dtype=float)
    x = np.log(np.asarray(lrs, dtype=float))
    n = x.size
    j = np.argmin(y, axis=1)
    inside = (j > 0) & (j < n - 1)
    jc = np.clip(j, 1, n - 2)
    rows = np.arange(y.shape[0])
    x0, x1, x2 = x[jc - 1], x[jc], x[jc + 1]
    y0, y1, y2 = y[rows, jc - 1], y[rows, jc], y[rows, jc + 1]
    # the parabola through the three points: y = a x^2 + b x + c
    d0, d2 = (y0 - y1) / (x0 - x1), (y2 - y1) / (x2 - x1)
    a = (d2 - d0) / (x2 - x0)
    b = d0 - a * (x0 + x1)
    with np.errstate(divide="ignore", invalid="ignore"):
        vertex = np.where(a > 0, -b / (2 * a), x1)
    vertex = np.clip(vertex, x0, x2)
    return np.where(inside, np.exp(vertex), np.nan)


def _slopes(log_optima: np.ndarray, log_sizes: np.ndarray) -> np.ndarray:
    """Least-squares slopes of log lr* against log size, per row of (rows, sizes)."""
    c = log_sizes - log_sizes.mean()
    return (log_optima - log_optima.mean(axis=-1, keepdims=True)) @ c / (c @ c)


def drift_interval(lrs, curves, log_sizes, *, seed: int = 0, replicates: int = REPLICATES) -> dict:
    """The 95% interval of the drift (the slope of log lr* against log size) from a
    bootstrap over each size's networks (module docstring). `curves[i]`: the (len(lrs),
    networks) log losses at size i; sizes are independent, and so are the networks of
    one size.

    **Returns** `{"ci95", "se", "dof", "optimal_lr_ci95", "unresolved_share"}`: the
    interval (None where more than `UNRESOLVED_SHARE` of the replicates put lr* on a grid
    edge at some size, or a size has fewer than 2 networks), the slope's standard error
    (from each size's bootstrap variance of log lr*), the t quantile's
    Welch–Satterthwaite degrees of freedom, each size's percentile interval of lr*, and
    the share of replicates left out for an edge."""
    rng = np.random.default_rng([seed, 73])
    logL = np.asarray(log_sizes, dtype=float)
    optima = np.empty((replicates, len(curves)))
    size_ci = []
    for i, curve in enumerate(curves):
        curve = np.asarray(curve, dtype=float)
        S = curve.shape[1]
        picks = rng.integers(0, S, size=(replicates, S))
        means = curve.T[picks].mean(axis=1)  # (replicates, lrs)
        optima[:, i] = optimal_lrs(lrs, means)
        found = optima[:, i][np.isfinite(optima[:, i])]
        size_ci.append(
            [float(q) for q in np.percentile(found, [2.5, 97.5])] if found.size else None
        )
    usable = np.all(np.isfinite(optima), axis=1)
    share = 1.0 - float(usable.mean())
    smallest = min(np.asarray(c).shape[1] for c in curves)
    rec = {"ci95": None, "se": None, "dof": None, "optimal_lr_ci95": size_ci,
           "unresolved_share": share}  # fmt: skip
    if share > UNRESOLVED_SHARE or smallest < 2:
        return rec
    from scipy import stats

    # the sizes are independent: the slope's variance is Σ c_i² var_i, var_i each size's
    # bootstrap variance of log lr* times S/(S − 1) (a bootstrap's variance of a mean over
    # S networks is (S − 1)/S of the mean's), at Welch–Satterthwaite degrees of freedom
    c = (logL - logL.mean()) / ((logL - logL.mean()) @ (logL - logL.mean()))
    networks = np.asarray([np.asarray(cv).shape[1] for cv in curves], dtype=float)
    var = np.log(optima[usable]).var(axis=0, ddof=1) * networks / (networks - 1)
    terms = c**2 * var
    se = math.sqrt(float(terms.sum()))
    centre = [optimal_lr(lrs, np.asarray(cv, dtype=float).mean(axis=1)) for cv in curves]
    if any(v is None for v in centre):
        return rec
    slope = float(_slopes(np.log(np.asarray(centre, dtype=float))[None], logL)[0])
    weighted = terms[terms > 0]
    dof = (
        float(weighted.sum() ** 2 / np.sum(weighted**2 / (networks[terms > 0] - 1)))
        if weighted.size
        else float(smallest - 1)
    )
    q = float(stats.t.ppf(0.975, dof))
    rec.update(ci95=[slope - q * se, slope + q * se], se=se, dof=dof)
    return rec


def drift(lrs, sizes, curves, *, seed: int = 0) -> dict:
    """lr* at every size and its drift exponent against the sizes, with its interval.
    `curves[i]`: the (len(lrs), networks) log final losses at `sizes[i]`.

    **Returns:** `{"optimal_lr", "drift_exponent", "drift_ci95", "unresolved"}` (the
    sizes whose lr* fell on a grid edge, left out of the line), with `interval`,
    `drift_se`, `optimal_lr_ci95` (per size, None for a size left out) and
    `bootstrap_unresolved` when the drift is fitted, `reason` when it is not (fewer than
    three sizes resolved)."""
    optimal = [optimal_lr(lrs, np.asarray(c).mean(axis=1)) for c in curves]
    rec: dict = {"optimal_lr": optimal, "drift_exponent": None, "drift_ci95": None}
    use = [i for i, v in enumerate(optimal) if v is not None]
    if len(use) >= 3:
        logL = np.log([sizes[i] for i in use])
        found = [float(v) for v in optimal if v is not None]
        rec["drift_exponent"] = line_fit(logL, np.log(found))[0]
        got = drift_interval(lrs, [np.asarray(curves[i]) for i in use], logL, seed=seed)
        rec["drift_ci95"] = got["ci95"]
        rec["drift_se"] = got["se"]
        rec["interval"] = INTERVAL
        per_size = dict(zip(use, got["optimal_lr_ci95"], strict=True))
        rec["optimal_lr_ci95"] = [per_size.get(i) for i in range(len(curves))]
        rec["bootstrap_unresolved"] = got["unresolved_share"]
        if got["ci95"] is None:
            rec["reason"] = (
                f"lr* on a grid edge in {got['unresolved_share']:.0%} of the bootstrap "
                f"replicates, more than {UNRESOLVED_SHARE:.0%}: a wider grid of rates would "
                "resolve it"
            )
    else:
        rec["reason"] = f"lr* resolved at {len(use)} size(s) (an optimum at a grid edge)"
    rec["unresolved"] = [sizes[i] for i, v in enumerate(optimal) if v is None]
    return rec


def verdict(slope, ci, networks: int, band: float = TRANSFER_BAND) -> dict:
    """What a drift's interval supports at the tolerance `band` (module docstring), in
    order: `transfers` (within ±band), `drifts` (excludes 0), `undecided`. **Returns**
    `{"verdict", "band", "excludes_zero", "networks_to_decide"}`: for `undecided`, the
    networks per size at which the interval, shrinking as 1/sqrt(networks) around the same
    drift, would lie within the band (|drift| < band) or exclude 0 (|drift| ≥ band); None
    beyond `DECIDE_CAP` times `networks` or without an interval."""
    out = {"verdict": "undecided", "band": band, "excludes_zero": None,
           "networks_to_decide": None}  # fmt: skip
    if ci is None or slope is None:
        return out
    lo, hi = ci
    out["excludes_zero"] = bool(lo > 0 or hi < 0)
    if -band <= lo and hi <= band:
        out["verdict"] = "transfers"
    elif out["excludes_zero"]:
        out["verdict"] = "drifts"
    else:
        half = (hi - lo) / 2
        room = band - abs(slope) if abs(slope) < band else abs(slope)
        if room > 0:
            need = networks * (half / room) ** 2
            if need <= DECIDE_CAP * networks:
                out["networks_to_decide"] = max(networks + 1, math.ceil(need))
    return out
