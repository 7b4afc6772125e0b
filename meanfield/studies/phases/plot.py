"""Figures of the phases study: ratios against depth per β, the slope against β with the
critical β, the Hurst × β heatmap (fBm) and the β = 1/2 distributions (i.i.d.)."""

import math
from pathlib import Path

import numpy as np

from ...diagnostics.phases import SLOPE_TOL
from ...io.plotting import cell_edges, save_figure, size_ticks, use_agg
from ...io.style import COLORS
from ...stats.fits import THEORY_TOLERANCE, theory_verdict

# the ratios of each (β, L) point, with the titles of their panels in `phases.png`
RATIO_PANELS = {
    "forward": "forward ratio",
    "gradient": "gradient ratio",
    "forward_max": "largest ratio along depth (max over k)",
}
RATIO_LABELS = {
    "forward": r"$\|h_L - h_0\| / \|h_0\|$",
    "gradient": r"$\|p_0 - p_L\| / \|p_L\|$",
    "forward_max": r"$\max_k \|h_k - h_0\| / \|h_0\|$",
}
PHASE_COLOURS = {
    "identity": COLORS["blue"],
    "stability": COLORS["green"],
    "explosion": COLORS["red"],
}
TITLES = {
    "iid": "i.i.d. weights",
    "rademacher": "i.i.d. Rademacher weights",
    "smooth": "smooth GP weights (ℓ = {length_scale})",
    "fbm": "fBm weights (H = {hurst})",
}


def theory_note(cfg, betas, critical) -> str | None:
    """The note of `critical_beta.png` where the theory's β_c lies outside the measured
    95% interval (None where inside, or nothing to compare): what was measured, not why —
    one run at one range of depths cannot tell a slow approach from a wrong theory."""
    ci, theory = critical.get("ci95"), critical.get("theory")
    if not ci or theory is None or ci[0] <= theory <= ci[1]:
        return None
    depths = [int(v) for v in cfg.get("L", [])]
    why = "the theory is the L → ∞ crossing" + (
        f", measured here at L = {min(depths)}..{max(depths)}" if depths else ""
    )
    at_theory = _slope_at(betas, _estimate(critical, "forward"), theory)
    if at_theory is not None:
        why += f";\nat β = {theory:g} the forward slope is {at_theory:+.3f} (0 in that limit)"
    return f"the theory lies outside the 95% interval:\n{why}"


def _slope_at(betas, est, beta):
    """The measured slope at the grid's `beta` (None where the grid has no such β or the
    slope there is not finite)."""
    if not est or not est.get("slopes"):
        return None
    for b, slope in zip(betas, est["slopes"], strict=False):
        if abs(float(b) - float(beta)) < 1e-9 and slope is not None and math.isfinite(slope):
            return float(slope)
    return None


def _finite_median(v):
    med = float(np.median(v))
    return med if math.isfinite(med) else np.nan


ESTIMATES = {"forward": None, "gradient": "from_gradient", "forward_max": "from_max_over_depth"}


def _estimate(critical, quantity: str):
    """The critical-β estimate of `quantity`'s ratio (None where results.json has none)."""
    key = ESTIMATES[quantity]
    return critical if key is None else critical.get(key)


def missing_medians(betas, Ls, samples) -> list[str]:
    """For each β whose line in `phases.png` has gaps, "β=B: none at L = ...": the depths
    where the median of the draws `samples[i, j]` (β index i, depth index j) is not finite
    (more than half the draws overflowed)."""
    out = []
    for i, b in enumerate(betas):
        missing = [L for j, L in enumerate(Ls) if not math.isfinite(_finite_median(samples[i, j]))]
        if missing:
            out.append(f"β={b:g}: none at L = {', '.join(map(str, missing))}")
    return out


def phase_labels(betas, critical, quantity: str) -> list[str]:
    """The legend of the `quantity` panel ("forward", "gradient" or "forward_max") of
    `phases.png`: each β with the phase of that ratio (the ratios' phases may differ)."""
    est = _estimate(critical, quantity)
    if not est or not est.get("phases"):
        return [f"β={b:g}" for b in betas]
    return [f"β={b:g} ({p})" for b, p in zip(betas, est["phases"], strict=True)]


def plot_phases(out, cfg, points, critical, heat, stability, samples) -> list[Path]:
    """Write `phases.png`, `critical_beta.png` and, when present, `heatmap.png` and
    `stability.png` into `out`."""
    use_agg()

    out = Path(out)
    written = []
    title = TITLES[cfg["weights"]].format(**cfg)
    written.append(_ratios_figure(out, cfg, critical, samples, title))
    written.append(_critical_figure(out, cfg, critical, title))
    if heat is not None:
        written.append(_heatmap_figure(out, cfg["beta"], heat))
    if stability is not None:
        written.append(_stability(out, cfg, stability, samples, title))
    written.append(_histograms(out, cfg, critical, samples, title))
    written.append(_weight_paths(out, cfg))
    return written


def _ratios_figure(out, cfg, critical, samples, title) -> Path:
    """`phases.png`: each ratio's median and quartiles against depth, a line per β."""
    import matplotlib.pyplot as plt

    betas, Ls = cfg["beta"], cfg["L"]
    fig, axes = plt.subplots(1, 3, figsize=(15.5, 4.5))
    for ax, q, label in zip(axes, RATIO_PANELS, RATIO_LABELS.values(), strict=True):
        ax.set_title(RATIO_PANELS[q] + " against depth", fontsize=9)
        if not np.isfinite(samples[q]).any():  # every draw exploded, or not recorded
            ax.text(0.5, 0.5, "no finite draw of this ratio", transform=ax.transAxes,
                    ha="center")  # fmt: skip
            continue
        cmap = plt.get_cmap("viridis")
        labels = phase_labels(betas, critical, q)
        cut = missing_medians(betas, Ls, samples[q])
        for i in range(len(betas)):
            med = [_finite_median(samples[q][i, j]) for j in range(len(Ls))]
            with np.errstate(invalid="ignore"):  # quartiles between overflowed (inf)
                # draws are NaN: no band there, the median and the warning say why
                lo = [np.percentile(samples[q][i, j], 25) for j in range(len(Ls))]
                hi = [np.percentile(samples[q][i, j], 75) for j in range(len(Ls))]
            colour = cmap(i / max(len(betas) - 1, 1))
            ax.plot(Ls, med, "o-", color=colour, ms=3, label=labels[i])
            ax.fill_between(Ls, lo, hi, color=colour, alpha=0.12, lw=0)
        if cut:  # say in the panel why a line stops short (in its title: no data covered)
            ax.set_title(
                f"{RATIO_PANELS[q]} against depth\nno median where over half the draws "
                f"overflowed: {'; '.join(cut)}",
                fontsize=8,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        size_ticks(ax, Ls)
        ax.set_xlabel("depth L")
        ax.set_ylabel(label + " (median, quartiles)")
        ax.legend(fontsize=6, ncol=2)
    tol = cfg.get("slope_tol") or SLOPE_TOL
    fig.suptitle(
        f"{title}: h_k = h_(k-1) + L^-β V_k ReLU(W_k h_(k-1)), d={cfg['d']}, {cfg['seeds']} draws"
        f"\neach ratio's own phase of β, from its slope s against log L: explosion s > {tol:g} "
        f"(or most draws exploded), stability |s| ≤ {tol:g}, identity s < −{tol:g}",
        fontsize=9,
    )
    path = out / "phases.png"
    save_figure(fig, path, dpi=120)
    return path


def _critical_figure(out, cfg, critical, title) -> Path:
    """`critical_beta.png`: each ratio's slope against β, its zero crossing β_c with the
    95% interval, and the theory."""
    import matplotlib.pyplot as plt

    betas = cfg["beta"]
    fig, ax = plt.subplots(figsize=(5.8, 4.4))
    for q, marker, ls in (("forward", "o", "-"), ("gradient", "s", "-"), ("forward_max", "^", ":")):
        est = _estimate(critical, q)
        if not est or not est.get("slopes"):
            continue
        ys = [s if s is not None and math.isfinite(s) else np.nan for s in est["slopes"]]
        (line,) = ax.plot(betas, ys, marker=marker, ls=ls, ms=4, label=RATIO_PANELS[q])
        if est.get("estimate") is not None:
            # β_c: where the slope crosses zero (a marker there, its 95% interval as a bar)
            e, ci = est["estimate"], est.get("ci95")
            text = f"β_c ≈ {e:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
            bar = [[max(e - ci[0], 0.0)], [max(ci[1] - e, 0.0)]] if ci else None
            ax.errorbar([e], [0.0], xerr=bar, fmt=marker, ms=8, mfc="none", capsize=3,
                        color=line.get_color(), zorder=3,
                        label=text if q == "forward_max" else None)  # fmt: skip
            if q != "forward_max":  # the max-over-depth crossing: its marker only
                ax.axvline(e, ls="--", lw=1, color=line.get_color(), label=text)
    if critical.get("ci95"):
        ax.axvspan(*critical["ci95"], color=COLORS["blue"], alpha=0.12)
    ax.axhline(0.0, color="0.4", lw=0.8)
    if critical.get("theory") is not None:
        ax.axvline(
            critical["theory"], color="k", ls=":", lw=1.2, label=f"theory {critical['theory']:g}"
        )
    note = theory_note(cfg, betas, critical)
    if note is not None:
        ax.text(0.3, 0.5, note,
                transform=ax.transAxes, fontsize=6.5, va="bottom",
                bbox=dict(facecolor="white", alpha=0.9, edgecolor="0.7"))  # fmt: skip
    ax.set_xlabel("β")
    ax.set_ylabel("slope of log median ratio vs log L")
    ax.set_title(f"critical β, {title}", fontsize=9)
    ax.legend(fontsize=6.5)
    path = out / "critical_beta.png"
    save_figure(fig, path, dpi=120)
    return path


def _heatmap_figure(out, betas, heat) -> Path:
    """`heatmap.png` (fBm): the forward slope over Hurst × β, with the estimated β_c of
    both ratios and the theory max(H, 1/2) over it."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    z = np.array([[np.nan if v is None else v for v in row] for row in heat["slope_forward"]])
    z = np.clip(np.nan_to_num(z, nan=1.0), -1.0, 1.0)
    hs = np.asarray(heat["hurst"])
    # one cell around each grid value (the grids need not be evenly spaced)
    im = ax.pcolormesh(
        cell_edges(hs), cell_edges(np.asarray(betas)), z.T, cmap="RdBu_r", vmin=-1, vmax=1
    )
    fig.colorbar(im, ax=ax, label="slope of log median forward ratio vs log L (clipped)")
    # β_c of the gradient ratio: open squares (its slopes are not in the cells)
    grad = heat.get("critical_beta_gradient") or []
    g_ok = [(h, c) for h, c in zip(hs, grad, strict=False) if c.get("estimate") is not None]
    if g_ok:
        err = np.array([[c["estimate"] - c["ci95"][0], c["ci95"][1] - c["estimate"]]
                        if c.get("ci95") else [0, 0] for _, c in g_ok]).T.clip(0)  # fmt: skip
        ax.errorbar([h for h, _ in g_ok], [c["estimate"] for _, c in g_ok], yerr=err,
                    fmt="s", color="0.35", mfc="none", ms=5, capsize=2,
                    label="estimated β_c, gradient ratio")  # fmt: skip
    est = [c["estimate"] for c in heat["critical_beta"]]
    ci = [c["ci95"] for c in heat["critical_beta"]]
    ok = [e is not None for e in est]
    if any(ok):
        h_ok = hs[ok]
        e_ok = np.array([e for e in est if e is not None])
        pairs = [(e, c) for e, c in zip(est, ci, strict=True) if e is not None]
        err = np.array([[e - c[0], c[1] - e] if c else [0, 0] for e, c in pairs]).T
        ax.errorbar(h_ok, e_ok, yerr=err, fmt="ko", ms=4, capsize=3,
                    label="estimated β_c, forward ratio")  # fmt: skip
        # flagged on the figure: an interval that excludes the theory max(H, 1/2)
        off = [(h, e) for h, (e, c) in zip(h_ok, pairs, strict=True)
               if c and theory_verdict(c, max(h, 0.5)) == "outside"]  # fmt: skip
        if off:
            ax.scatter([h for h, _ in off], [e for _, e in off], s=120, facecolors="none",
                       edgecolors=COLORS["orange"], linewidths=1.8, zorder=4,
                       label="interval excludes max(H, 1/2)\n"
                       f"(beyond ±{THEORY_TOLERANCE:g})")  # fmt: skip
    grid = np.linspace(hs.min(), hs.max(), 100)
    ax.plot(grid, np.maximum(grid, 0.5), "k:", lw=1.5, label="max(H, 1/2)")
    ax.set_xlabel("Hurst index H")
    ax.set_ylabel("β")
    ax.set_title("fBm weights: identity (blue) / explosion (red)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    path = out / "heatmap.png"
    save_figure(fig, path, dpi=120)
    return path


def _median_marker(ax, values, colour: str | tuple = "k", label=None) -> None:
    """The median over every draw (an exploded one counted as +inf) as a triangle on the
    x axis of a histogram of those draws (none where the median is not finite)."""
    med = _finite_median(values)
    if math.isfinite(med) and med > 0:
        ax.plot([med], [0.0], "^", color=colour, ms=7, clip_on=False, zorder=4, label=label)


def _log_bins(v):
    """The finite positive values of `v` and log-spaced bins over them (40 bins where
    they span no range)."""
    v = v[np.isfinite(v) & (v > 0)]
    return v, np.geomspace(v.min(), v.max(), 41) if v.size > 1 and v.max() > v.min() else 40


def _stability(out, cfg, stability, samples, title) -> Path:
    """`stability.png`: at β = 1/2, the squared ratios' distributions at the largest depth
    with the bounds of spec §4, and at every depth the fraction of draws inside the forward
    bounds (per δ) and the squared gradient ratio's mean against the bounds on it."""
    import matplotlib.pyplot as plt

    betas, Ls = cfg["beta"], cfg["L"]
    i = betas.index(0.5)
    L = Ls[-1]
    row = stability["per_L"][-1]
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 7.4))
    r2 = samples["forward"][i, -1] ** 2
    g2 = samples["gradient"][i, -1] ** 2
    _forward_histogram(axes[0, 0], row, r2, L)
    _gradient_histogram(axes[0, 1], row, stability["gradient_bounds"], g2, L)
    # every depth: the forward bounds' coverage per δ, and the gradient's mean
    rows = stability["per_L"]
    _coverage_panel(axes[1, 0], rows)
    _gradient_mean_panel(axes[1, 1], rows, stability["gradient_bounds"])
    conv = {
        "squared": "loss ½‖h_L − y‖² (p_L = h_L − y)",
        "readout": "readout loss ⟨B, h_L⟩ (p_L = B)",
    }[cfg.get("loss", "squared")]
    title = f"{title}, β = 1/2, d = {cfg['d']}: stability; gradients for {conv}"
    return save_figure(fig, out / "stability.png", dpi=120, title=title, fontsize=9)


def _forward_histogram(ax, row, r2, L) -> None:
    """The squared forward ratio's draws at depth `L` with the δ = 0.1 bounds."""
    ax.hist(*_log_bins(r2), color=COLORS["green"], alpha=0.7)
    for b in row["forward_sq"]:
        if b["delta"] == 0.1:
            if b["lower"] > 0:
                ax.axvline(b["lower"], color="k", ls="--")
            ax.axvline(
                b["upper"],
                color="k",
                ls="--",
                label=f"bounds, δ=0.1: {b['fraction_inside']:.0%} inside (≥ 90% promised)",
            )
    _median_marker(ax, r2, label="median")
    ax.set_title(f"squared forward ratio over the draws, L = {L}", fontsize=9)
    ax.set_xlabel(r"$\|h_L - h_0\|^2 / \|h_0\|^2$ (log scale)")
    ax.set_xscale("log")
    ax.set_ylabel(f"draws (of {r2.size})")
    ax.legend(fontsize=7)


def _gradient_histogram(ax, row, bounds, g2, L) -> None:
    """The squared gradient ratio's draws at depth `L`, their mean and the bounds on it."""
    ax.hist(*_log_bins(g2), color=COLORS["purple"], alpha=0.7)
    for j, b in enumerate(bounds):
        tag = r"bounds on the mean: $e^{1/2} - 1$, $e^4 - 1$" if j == 0 else None
        ax.axvline(b, color="k", ls="--", label=tag)
    if row["gradient_sq_mean"] is not None:
        ax.axvline(
            row["gradient_sq_mean"],
            color=COLORS["red"],
            label=f"mean {row['gradient_sq_mean']:.2f}",
        )
    _median_marker(ax, g2, label="median")
    ax.set_title(f"squared gradient ratio over the draws, L = {L}", fontsize=9)
    ax.set_xlabel(r"$\|p_0 - p_L\|^2 / \|p_L\|^2$ (log scale)")
    ax.set_ylabel(f"draws (of {g2.size})")
    ax.set_xscale("log")
    ax.legend(fontsize=7)


def _coverage_panel(ax, rows) -> None:
    """Per δ, the fraction of draws inside the forward bounds against depth, with 1 − δ."""
    deltas = sorted({b["delta"] for r in rows for b in r["forward_sq"]})
    for k, delta in enumerate(deltas):
        pts = [(r["L"], b) for r in rows for b in r["forward_sq"] if b["delta"] == delta]
        colour = f"C{k}"
        fractions = [
            np.nan if b["fraction_inside"] is None else b["fraction_inside"] for _, b in pts
        ]
        ax.plot([x for x, _ in pts], fractions, "o-", ms=4, color=colour, label=f"δ = {delta:g}")
        ax.axhline(1 - delta, color=colour, ls=":", lw=1)
    ax.set_xscale("log")
    size_ticks(ax, [r["L"] for r in rows])
    ax.set_xlabel("depth L")
    ax.set_ylabel("fraction of draws inside")
    ax.set_title("draws inside the forward bounds (dotted: the 1 − δ promised)", fontsize=9)
    ax.legend(fontsize=7)


def _gradient_mean_panel(ax, rows, bounds) -> None:
    """The squared gradient ratio's mean (± 2 SE) against depth, with the bounds on it."""
    pts = [r for r in rows if r.get("gradient_sq_mean") is not None]
    if pts:
        ax.errorbar([r["L"] for r in pts], [r["gradient_sq_mean"] for r in pts],
                    yerr=[2 * (r.get("gradient_sq_se") or 0.0) for r in pts], fmt="o-",
                    ms=4, capsize=3, color=COLORS["red"], label="mean ± 2 SE")  # fmt: skip
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no finite mean: every draw exploded", transform=ax.transAxes,
                ha="center")  # fmt: skip
    for j, b in enumerate(bounds):
        ax.axhline(b, color="k", ls="--", label="bounds on the mean" if j == 0 else None)
    ax.set_xscale("log")
    size_ticks(ax, [r["L"] for r in rows])
    ax.set_xlabel("depth L")
    ax.set_ylabel(r"mean of $\|p_0 - p_L\|^2 / \|p_L\|^2$")
    ax.set_title("mean squared gradient ratio against depth", fontsize=9)
    ax.legend(fontsize=7)


def _histograms(out, cfg, critical, samples, title) -> Path:
    """The distributions over draws of `‖h_L − h_0‖/‖h_0‖` and of `‖p_0 − p_L‖/‖p_L‖` (the
    source's histograms; from the stored draws) at three β (the smallest, the one nearest β_c, the
    largest) and every depth, each depth's median (the point `phases.png` draws) marked."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    betas, Ls = cfg["beta"], cfg["L"]
    target = critical.get("estimate") or critical.get("theory") or betas[len(betas) // 2]
    picks = sorted({0, int(np.argmin([abs(b - target) for b in betas])), len(betas) - 1})
    fig, axes = plt.subplots(2, len(picks), figsize=(4.2 * len(picks), 6.4), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for col, i in enumerate(picks):
        for row, q, label in (
            (0, "forward", r"$\|h_L - h_0\| / \|h_0\|$"),
            (1, "gradient", r"$\|p_0 - p_L\| / \|p_L\|$"),
        ):
            ax = axes[row, col]
            ax.set_title(f"β = {betas[i]:g}: {q} ratio", fontsize=9)
            values = [samples[q][i, j] for j in range(len(Ls))]
            finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values])
            if finite.size == 0:
                ax.text(0.5, 0.5, "every draw exploded", transform=ax.transAxes, ha="center")
                continue
            bins = np.geomspace(finite.min(), finite.max() * 1.0001, 40)
            for j, L in enumerate(Ls):
                v = values[j][np.isfinite(values[j]) & (values[j] > 0)]
                exploded = int(np.sum(~np.isfinite(values[j])))
                extra = f", {exploded} exploded" if exploded else ""
                colour = cmap(j / max(len(Ls) - 1, 1))
                ax.hist(v, bins=bins, histtype="step", color=colour, label=f"L = {L}{extra}")
                _median_marker(ax, values[j], colour)  # ▲ on the axis: each depth's median
            ax.set_xscale("log")
            x0, x1 = ax.get_xlim()
            if x1 > 10 * x0:  # a decade or more: its major ticks only (minor labels collide)
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(label + " (▲ medians)")
            if col == 0:
                ax.set_ylabel("draws")
            ax.legend(fontsize=6)
    title = f"{title}: distributions over {cfg['seeds']} draws (d = {cfg['d']})"
    return save_figure(fig, out / "ratio_histograms.png", dpi=110, title=title, fontsize=9)


def _weight_paths(out, cfg) -> Path:
    """One entry of the weights V_k against k/L under each depth law (i.i.d., smooth, fBm
    with H = 0.2, 0.5, 0.8: the increments of one path, and the path itself), at the
    study's largest depth: the regularity the critical β follows."""
    import jax.random as jr
    import matplotlib.pyplot as plt

    from ...laws.depth import FractionalBrownianLaw, IIDGaussianLaw, SmoothGPLaw

    L, d = max(cfg["L"]), 4
    s = np.arange(1, L + 1) / L
    key = jr.fold_in(jr.key(cfg["seed"]), 31)
    fig, axes = plt.subplots(2, 3, figsize=(13, 6))
    ell = cfg["length_scale"]
    laws = [
        ("i.i.d. (β_c = 1/2)", IIDGaussianLaw(d)),
        (f"smooth, ℓ = {ell:g} (β_c = 1)", SmoothGPLaw(d, ell)),
    ]
    for ax, (name, law) in zip(axes[0, :2], laws, strict=True):
        V = np.asarray(law.weights(key, L))
        ax.plot(s, V[:, 0, 0] * np.sqrt(d), lw=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("k / L")
    axes[0, 0].set_ylabel("entry of sqrt(d) V_k")
    ax_path, ax_inc = axes[0, 2], axes[1]
    for j, hurst in enumerate((0.2, 0.5, 0.8)):
        law = FractionalBrownianLaw(d, hurst, L * -(-1024 // L))  # a multiple of L, >= 1024
        path = np.asarray(law.path(key))[:, 0, 0]
        t = np.linspace(0, 1, path.size)
        ax_path.plot(t, path, lw=0.8, label=f"H = {hurst}")
        V = np.asarray(law.weights_from_path(law.path(key), L))
        ax_inc[j].plot(s, V[:, 0, 0] * np.sqrt(d), lw=0.8, color=f"C{j}")
        ax_inc[j].set_title(f"fBm increments, H = {hurst} (β_c = {max(hurst, 0.5):g})",
                            fontsize=9)  # fmt: skip
        ax_inc[j].set_xlabel("k / L")
    ax_path.set_title("fBm sample paths B^H (one entry)", fontsize=9)
    ax_path.set_xlabel("t")
    ax_path.legend(fontsize=7)
    axes[1, 0].set_ylabel("entry of sqrt(d) V_k")
    fig.suptitle(f"Scaling and weight regularity: one entry of the weights along depth (L = {L})",
                 fontsize=10)  # fmt: skip
    path_out = out / "weight_paths.png"
    save_figure(fig, path_out, dpi=110)
    return path_out
