"""What the figures of the studies `phases`, `sde`, `variance` and `tangent-kernel` must
show (issue 47; tests/figure_points.py): every finished point of results.json, read here
from the results as a reader would, independently of the plotting code."""

import math

import numpy as np

# values above this are not drawn (variance.py DRAW_MAX: a log axis up to 1e308 overflows
# its ticks); the figure's legend says so in words
DRAW_MAX = 1e150


def _mean(stat):
    """A recorded statistic's mean (None when its draws exploded or it is missing)."""
    if isinstance(stat, dict):
        return stat.get("mean")
    return stat


def _median(stat):
    """The median over a point's stored draws, an exploded one (null) counted as +inf;
    None where it is not finite (more than half the draws exploded: the figure says so
    in its legend) or the draws are missing."""
    if not isinstance(stat, dict) or not stat.get("values"):
        return None
    med = float(np.median([math.inf if v is None else float(v) for v in stat["values"]]))
    return med if math.isfinite(med) else None


def _positive(value):
    """`value` where a log axis can draw it: None for a missing one and for a value ≤ 0
    (a ratio or error of exactly zero has no logarithm; not_drawn skips None)."""
    return value if value is not None and value > 0 else None


# ---------------------------------------------------------------------------------------
# phases: per (β, L) the median over the draws of three ratios (the figures draw medians:
# the draws are heavy-tailed and the critical β is the median's slope crossing zero)

RATIOS = {
    "forward": "forward ratio",
    "gradient": "gradient ratio",
    "forward_max": "largest ratio along depth",
}
ESTIMATES = {"forward": None, "gradient": "from_gradient", "forward_max": "from_max_over_depth"}


def _picks(results):
    """The three β of `ratio_histograms.png`: the smallest, the one nearest the critical β
    (the estimate, else the theory, else the middle of the grid), the largest."""
    betas, critical = results["config"]["beta"], results["critical_beta"]
    target = critical.get("estimate") or critical.get("theory") or betas[len(betas) // 2]
    return sorted({0, int(np.argmin([abs(b - target) for b in betas])), len(betas) - 1})


def phases(stem, results):
    cfg, points, critical = results["config"], results["points"], results["critical_beta"]
    out = []
    if stem == "phases":  # every point's three medians against L, one panel per ratio
        for p in points:
            for q, panel in RATIOS.items():
                what = f"median {q} ratio at β={p['beta']}, L={p['L']}"
                out.append((what, panel, p["L"], _positive(_median(p.get(q)))))
    elif stem == "critical_beta":  # every β's slope per ratio, and each β_c at slope zero
        for q, key in ESTIMATES.items():
            est = critical if key is None else critical.get(key)
            if not est:
                continue
            for b, s in zip(cfg["beta"], est.get("slopes") or [], strict=False):
                out.append((f"{q} slope at β={b}", "critical β", b, s))
            if est.get("estimate") is not None:
                out.append((f"{q} critical β", "critical β", est["estimate"], 0.0))
    elif stem == "heatmap":
        # the cells (slope of the forward ratio per H and β) are a pcolormesh, which
        # figure_check.drawn does not read, and clipped to [-1, 1]: only the critical β
        # per H (both ratios) is checked here
        heat = results["heatmap"]
        for key in ("critical_beta", "critical_beta_gradient"):
            for c in heat.get(key) or []:
                out.append((f"{key} at H={c['hurst']}", "fBm weights", c["hurst"], c["estimate"]))
    elif stem == "stability":
        bounds = results["stability_bounds"]
        rows = bounds["per_L"]
        for r in rows:
            out.append((f"mean squared gradient ratio at L={r['L']}", "mean squared gradient",
                        r["L"], _positive(r.get("gradient_sq_mean"))))  # fmt: skip
            for b in r["forward_sq"]:
                out.append((f"fraction inside the forward bounds at L={r['L']}, δ={b['delta']}",
                            "inside the forward bounds", r["L"], b["fraction_inside"]))  # fmt: skip
        # the histograms at β = 1/2 and the largest L draw raw draws: their median
        # (a marker on the x axis, y = 0) stands for them
        p = next(p for p in points if p["beta"] == bounds["beta"] and p["L"] == rows[-1]["L"])
        for q, panel in (("forward", "squared forward ratio"), ("gradient", "squared gradient")):
            sq = {"values": [None if v is None else v * v for v in p[q]["values"]]}
            med = _positive(_median(sq))
            what = f"median squared {q} ratio at L={p['L']}"
            out.append((what, panel, med, 0.0 if med else None))
    elif stem == "ratio_histograms":
        # histograms of the raw draws, at three β only (every β's median is checked in
        # phases.png): the median of each depth, marked on the x axis (y = 0), stands for
        # its histogram
        for i in _picks(results):
            b = cfg["beta"][i]
            for p in (p for p in points if p["beta"] == b):
                for q in ("forward", "gradient"):
                    med = _positive(_median(p.get(q)))
                    what = f"median {q} ratio at β={b}, L={p['L']}"
                    out.append((what, f"β = {b:g}: {q} ratio", med, 0.0 if med else None))
    elif stem == "weight_paths":
        return []  # fresh illustrative draws of each depth law: no value of results.json
    else:
        return None
    return out


# ---------------------------------------------------------------------------------------
# sde: per depth the mean over seeds of the final and the sup strong error

SDE_PANELS = {"brownian": "Brownian weights", "fbm": "fBm weights", "smooth": "smooth GP weights"}


def sde(stem, results):
    if stem != "strong_error":
        return None
    panel = SDE_PANELS[results["config"]["weights"]]
    out = []
    for p in results["points"]:
        for q in ("error_final", "error_sup"):
            out.append((f"{q} at L={p['L']}", panel, p["L"], _positive(_mean(p.get(q)))))
    return out


# ---------------------------------------------------------------------------------------
# variance: per (L, γ) the forward deviation's mean against L and the first backward
# pass's deviation (its sup over l and its end l = 0) against M L α²


def _drawable(value):
    """A positive value up to DRAW_MAX (beyond it the figure says in its legend that it is
    not drawn)."""
    value = _positive(value)
    return value if value is not None and value <= DRAW_MAX else None


def variance(stem, results):
    if stem == "embedding_law":  # Chaintron's scaling (--sigma-vs): against σ_v²/(LM)
        return [
            (f"mean deviation at L={p['L']}, σ_v={p['sigma_v']}", "first forward pass",
             p["sigma_v"] ** 2 / (p["L"] * results["config"]["M"]), _drawable(p["mean"]))
            for p in results["points"]
        ]  # fmt: skip
    if stem != "variance_law":
        return None
    out = []
    for p in results["points"]:
        at = f"L={p['L']}, γ={p['gamma']}"
        out.append((f"mean deviation at {at}", "forward pass", p["L"], _drawable(p["mean"])))
        for q in ("sup", "end"):
            value = _drawable(_mean((p.get("backward") or {}).get(q)))
            out.append((f"backward {q} at {at}", "first backward pass", p["MLalpha2"], value))
    return out


# ---------------------------------------------------------------------------------------
# tangent-kernel: per (L, γ) the mean relative kernel difference, against M L α² and L


def tangent_kernel(stem, results):
    if stem != "tangent_kernel":
        return None
    out = []
    for p in results["points"]:
        value = _positive(_mean(p["relative_difference"]))
        what = f"relative difference at L={p['L']}, γ={p['gamma']}"
        out.append((what, "against M L α²", p["MLalpha2"], value))
        out.append((what, "against depth", p["L"], value))
    return out


SPECS = {"phases": phases, "sde": sde, "variance": variance, "tangent-kernel": tangent_kernel}
