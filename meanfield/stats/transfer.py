"""Learning-rate transfer: the optimal learning rate of a loss curve over a log grid, and
its drift against a size (depth or width) with an interval over the independent networks.

A size's **curve** is the log final loss over a grid of learning rates `lrs`, one column
per network, `(len(lrs), networks)`. `optimal_lr` reads lr* from the mean curve: the
vertex of the parabola through the grid's minimum and its two neighbours in (log lr, log
loss), not the argmin alone; None at an edge of the grid (unresolved). `drift` fits log
lr* against log size (the drift exponent) and forms its interval from each size's
jackknife over its networks (`drift_interval`: a Student-t over the sizes' jackknife
standard errors at the Welch–Satterthwaite degrees of freedom; a percentile bootstrap
over 4 networks covered 80%, this interval 94–96%: `benchmarks/coverage.py`, kind
`lr-drift`).
"""

import math

import numpy as np

from .fits import line_fit

INTERVAL = (
    "Student-t over the sizes' jackknife standard errors of log lr* (the networks of a "
    "size left out one at a time), Welch-Satterthwaite degrees of freedom"
)


def optimal_lr(lrs, log_loss) -> float | None:
    """lr* from the parabola through the grid minimum of log loss against log lr and its two
    neighbours; None at an edge of the grid (unresolved)."""
    j = int(np.argmin(log_loss))
    if j == 0 or j == len(lrs) - 1:
        return None
    x = np.log(np.asarray(lrs[j - 1 : j + 2]))
    y = np.asarray(log_loss[j - 1 : j + 2])
    a, b, _ = np.polyfit(x, y, 2)
    if a <= 0:
        return float(lrs[j])
    return float(np.exp(np.clip(-b / (2 * a), x[0], x[2])))


def drift_interval(lrs, curves, log_sizes) -> tuple[list[float] | None, int]:
    """The 95% interval of the drift (the slope of log lr* against log size): the sizes'
    networks are independent, so the slope's variance is `Σ c² se²` with `se` the jackknife
    standard error of log lr* over a size's networks; a Student-t quantile at the
    Welch–Satterthwaite degrees of freedom. **Returns:** `(ci, unresolved)`, the
    leave-one-out lr* that fell on a grid edge (then the interval is None)."""
    from scipy import stats

    logL = np.asarray(log_sizes, float)
    c = (logL - logL.mean()) / ((logL - logL.mean()) @ (logL - logL.mean()))
    var, dof_terms, unresolved = [], [], 0
    for curve in curves:  # (lrs, S)
        S = curve.shape[1]
        loo = [optimal_lr(lrs, np.delete(curve, j, axis=1).mean(axis=1)) for j in range(S)]
        if any(v is None for v in loo) or S < 2:
            unresolved += sum(v is None for v in loo)
            continue
        y = np.log(np.asarray(loo, dtype=float))
        var.append((S - 1) / S * float(np.sum((y - y.mean()) ** 2)))
        dof_terms.append(S - 1)
    if unresolved or len(var) != len(curves):
        return None, unresolved
    terms = c**2 * np.asarray(var)
    se = math.sqrt(float(terms.sum()))
    optima = np.asarray([optimal_lr(lrs, cv.mean(axis=1)) for cv in curves], dtype=float)
    slope = float(c @ np.log(optima))
    if se == 0:
        return [slope, slope], 0
    dof = float(terms.sum() ** 2 / np.sum(terms**2 / np.asarray(dof_terms)))
    q = float(stats.t.ppf(0.975, dof))
    return [slope - q * se, slope + q * se], 0


def drift(lrs, sizes, curves) -> dict:
    """lr* at every size and its drift exponent against the sizes, with its interval.
    `curves[i]`: the (len(lrs), networks) log final losses at `sizes[i]`.

    **Returns:** `{"optimal_lr", "drift_exponent", "drift_ci95", "unresolved"}` (the
    sizes whose lr* fell on a grid edge, left out of the line), with `interval` and
    `jackknife_unresolved` when the drift is fitted, `reason` when it is not (fewer than
    three sizes resolved)."""
    optimal = [optimal_lr(lrs, np.asarray(c).mean(axis=1)) for c in curves]
    rec: dict = {"optimal_lr": optimal, "drift_exponent": None, "drift_ci95": None}
    use = [i for i, v in enumerate(optimal) if v is not None]
    if len(use) >= 3:
        logL = np.log([sizes[i] for i in use])
        found = [float(v) for v in optimal if v is not None]
        rec["drift_exponent"] = line_fit(logL, np.log(found))[0]
        ci, dropped = drift_interval(lrs, [np.asarray(curves[i]) for i in use], logL)
        rec["drift_ci95"] = ci
        rec["interval"] = INTERVAL
        rec["jackknife_unresolved"] = dropped
    else:
        rec["reason"] = f"lr* resolved at {len(use)} size(s) (an optimum at a grid edge)"
    rec["unresolved"] = [sizes[i] for i, v in enumerate(optimal) if v is None]
    return rec
