"""One sample's mean with Student's interval, the slope of independent samples' means
with a Welch–Satterthwaite interval, and two arms compared: the difference of their means
with Welch's interval over each arm's independent draws (networks), and the verdict read
from it."""

import math

import numpy as np


def difference_interval(a, b, *, level: float = 0.95) -> dict:
    """`mean(b) − mean(a)` over the finite entries of two independent samples (one draw
    each: a network), with Welch's t interval at `level` (each sample's own variance,
    Satterthwaite's degrees of freedom): exact coverage for Gaussian draws, which the
    studies' log-errors nearly are; a bootstrap would under-cover at the 6–16 draws per
    arm the studies run (tests/test_approximation.py checks the coverage on simulated
    draws).

    **Returns:** `{"difference", "ci95", "draws": [len a, len b]}`; `difference` and `ci95`
    None where either sample has fewer than two finite draws."""
    from scipy.stats import t as student

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    out: dict = {"difference": None, "ci95": None, "draws": [int(a.size), int(b.size)]}
    if a.size < 2 or b.size < 2:
        return out
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    difference = float(b.mean() - a.mean())
    se = math.sqrt(va + vb)
    out["difference"] = difference
    if se == 0:  # both samples constant: the difference is exact
        out["ci95"] = [difference, difference]
        return out
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(student.ppf(0.5 + level / 2, dof)) * se
    out["ci95"] = [difference - half, difference + half]
    return out


def mean_interval(x, *, level: float = 0.95) -> dict:
    """The mean of the finite entries of one sample of independent draws (a network
    each), with Student's t interval at `level` (tests/test_batch_norm.py checks its
    coverage on simulated draws).

    **Returns:** `{"mean", "ci95", "draws"}`; `ci95` None below two finite draws, `mean`
    None with none."""
    from scipy.stats import t as student

    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    x = np.asarray(x, dtype=float).ravel()
    x = x[np.isfinite(x)]
    out: dict = {"mean": float(x.mean()) if x.size else None, "ci95": None, "draws": int(x.size)}
    if x.size < 2:
        return out
    half = (
        float(student.ppf(0.5 + level / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    )
    out["ci95"] = [out["mean"] - half, out["mean"] + half]
    return out


def slope_interval(x, samples) -> list[float]:
    """The 95% interval of the least-squares slope of the means of independent samples
    (`samples[j]`, the draws at `x[j]`: a depth, a parameter count) against `x`: the
    slope is `Σ_j c_j mean_j`, the draws of different points independent, so its
    standard error is `sqrt(Σ_j c_j² s_j² / n_j)`, with a Student-t quantile at the
    Welch–Satterthwaite degrees of freedom (exact for Gaussian draws; a percentile
    bootstrap over 16 draws covers less than 95%)."""
    from scipy import stats

    x = np.asarray(x, float)
    c = (x - x.mean()) / ((x - x.mean()) @ (x - x.mean()))
    means = np.array([s.mean() for s in samples])
    terms = np.array([c_j**2 * s.var(ddof=1) / s.size for c_j, s in zip(c, samples, strict=True)])
    se = math.sqrt(terms.sum())
    slope = float(c @ means)
    if se == 0:
        return [slope, slope]
    dof = terms.sum() ** 2 / np.sum(terms**2 / np.array([s.size - 1 for s in samples]))
    q = float(stats.t.ppf(0.975, dof))
    return [slope - q * se, slope + q * se]


def lower_arm(interval: dict, names: tuple[str, str]) -> str:
    """Which arm's mean is lower, read from `difference_interval(a, b)`: `names[1]` where
    the whole interval of `mean(b) − mean(a)` lies below 0, `names[0]` where it lies
    above, "not resolved" where it holds 0, "no interval" without one."""
    ci = interval.get("ci95")
    if ci is None or not all(isinstance(c, float) and math.isfinite(c) for c in ci):
        return "no interval"
    if ci[1] < 0:
        return names[1]
    if ci[0] > 0:
        return names[0]
    return "not resolved"
