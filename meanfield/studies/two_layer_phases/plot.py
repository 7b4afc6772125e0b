"""The figure of `meanfield study two-layer-phases`, from `results.json` alone."""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import save_figure, use_agg
from ...stats.fits import fit_verdict, interval_text
from .cells import PAST_BOUNDARY, fit_cells, large_cells

COLORS = {"hidden": "C3", "decay": "C2", "local_update": "C0"}
LABELS = {
    "hidden": "‖h‖_D at t = 0\n(crit. 1; predicted 1/2)",
    "decay": "loss decay at t, balanced η_u\n(crit. 3; predicted 0)",
    "local_update": "local update |Ṗ| at t, balanced η_u\n(crit. 5; predicted 0)",
}


def _mean(p, q):
    m = p[q]["mean"]
    return math.nan if m is None else m


def _fit_text(fits, q, D):
    fit = next(
        (
            f
            for f in fits
            if f["quantity"] == q
            and f["against"] == "s_v"
            and (f.get("fixed") or {}).get("D") == D
            and f.get("slope") is not None
        ),
        None,
    )
    if fit is None:
        return ""
    ci = fit.get("ci95") or [math.nan, math.nan]
    return f": slope {interval_text(fit['slope'], ci)}"


def phase_figure(out, cfg, points, fits, mlu) -> None:
    """`two_layer_phases.png`: (a) the (D, σ_v) plane, each measured point coloured by its
    local update relative to the largest at its D, crossed where ‖h‖_D ≥ 1, with the
    predicted boundaries σ_v = sqrt(D) and sqrt(M) and the measured MLU points; (b) the
    slopes against D at each s_v with their intervals and predictions; (c) the local update
    and (d) the loss decay against s_v = σ_v / sqrt(D), one line per D, with their fitted
    slopes past the MLU point. With `L` in `cfg` (the deep ResNet, `resnet_phases.png`)
    criterion 1 measures ‖h^L − h^0‖_D and its boundary is σ_v = sqrt(LM)."""
    use_agg()
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 10.5))
    (ax, ax_e), (ax_s, ax_d) = axes
    Ds = sorted({p["D"] for p in points})
    L = cfg.get("L")  # L: the deep ResNet (`resnet_phases`)
    hidden = "‖h‖_D" if L is None else "‖h^L − h^0‖_D"
    # the deep ResNet's boundary of criterion 1: the residual no longer small beside h^0
    limit = 1.0 if L is None else PAST_BOUNDARY
    large = large_cells(points, limit)
    sc, ys = _plane_points(ax, points, Ds, large, f"measured {hidden} ≥ {limit:g}")
    _plane_lines(ax, cfg, Ds, mlu, hidden)
    _plane_axes(fig, ax, sc, cfg, Ds, ys)
    _slopes_panel(ax_e, points, fits, Ds, large, L, hidden, limit)
    _scale_curves(ax_s, ax_d, points, fits, Ds)
    _label_scale_panels(ax_s, ax_d, points, L)
    fig.tight_layout()
    stem = "two_layer_phases" if L is None else "resnet_phases"
    save_figure(fig, Path(out) / f"{stem}.png", dpi=100)


def _plane_points(ax, points, Ds, large, blown_label):
    """Panel (a)'s measured points, coloured by their local update relative to the largest
    at their D, crossed past criterion 1's boundary (`large`): the scatter and the σ_v's."""
    rel, xs, ys, blown = [], [], [], []
    for D in Ds:
        rows = [p for p in points if p["D"] == D]
        top = max((_mean(p, "local_update") for p in rows), default=math.nan)
        for p in rows:
            xs.append(D)
            ys.append(p["sigma_v"])
            rel.append(_mean(p, "local_update") / top if top > 0 else math.nan)
            blown.append((p["D"], p["s_v"]) in large)  # past criterion 1's boundary
    rel_arr = np.log10(np.clip(np.array(rel, dtype=float), 1e-6, None))
    sc = ax.scatter(
        xs,
        ys,
        c=rel_arr,
        cmap="viridis",
        s=110,
        vmin=min(-1.5, np.nanmin(rel_arr)),
        vmax=0.0,
        edgecolors="k",
        linewidths=0.4,
        zorder=3,
    )
    bx = [x for x, b in zip(xs, blown, strict=True) if b]
    by = [y for y, b in zip(ys, blown, strict=True) if b]
    if bx:
        ax.scatter(bx, by, marker="x", color="C3", s=60, zorder=4, label=blown_label)
    return sc, ys


def _plane_lines(ax, cfg, Ds, mlu, hidden) -> None:
    """Panel (a)'s predicted boundaries σ_v = sqrt(D) and sqrt(M) (sqrt(LM)) and the
    measured MLU points."""
    M, L = cfg["M"], cfg.get("L")
    LM, lm = (M, "M") if L is None else (L * M, "(LM)")
    grid = np.geomspace(min(Ds) / 1.5, max(Ds) * 1.5, 50)
    ax.plot(
        grid,
        np.sqrt(grid),
        "k-",
        lw=1.5,
        label="σ_v = √D, the MLU boundary (predicted):\nbelow, η_u = η_v = 1 and the local "
        "update\nis Θ(1); above, η_u = D/σ_v² and it falls\nas √D/σ_v",
    )
    ax.axhline(
        math.sqrt(LM),
        color="C3",
        ls="--",
        lw=1.2,
        label=f"σ_v = √{lm} = {math.sqrt(LM):.3g}:\n{hidden} ~ σ_v/√{lm} is of order 1",
    )
    found = [m for m in mlu if m.get("s_v") is not None and m.get("sigma_v") is not None]
    if found:
        ax.plot(
            [m["D"] for m in found],
            [m["sigma_v"] for m in found],
            "*",
            color="w",
            mec="k",
            ms=16,
            zorder=5,
            label="measured MLU point\n(largest local update)",
        )


def _plane_axes(fig, ax, sc, cfg, Ds, ys) -> None:
    """Panel (a)'s axes, colour bar, title and legend."""
    from matplotlib.ticker import NullLocator

    M, L = cfg["M"], cfg.get("L")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="embedding dimension D",
        ylabel="output scale σ_v (entries of v ~ N(0, σ_v²))",
    )
    ax.set_xticks(Ds, [str(D) for D in Ds])
    ax.xaxis.set_minor_locator(NullLocator())
    lo_y, hi_y = min(ys) / 2, max(ys) * 16  # room for the legend above the points
    ax.set_ylim(lo_y, hi_y)
    fig.colorbar(sc, ax=ax, label="log10 (local update at t / largest at this D)")
    ax.set_title(
        f"(a) the (σ_v, D) phase diagram{'' if L is None else ' of the L-layer ResNet'} at "
        f"{'' if L is None else f'L = {L}, '}M = {M}, t = {cfg['time']:g}\n(points: "
        "measured, mean over draws; lines: Chaintron's criteria 1 and 5)",
        fontsize=9,
    )
    ax.legend(fontsize=6.5, loc="upper left")


def _slopes_panel(ax_e, points, fits, Ds, large, L, hidden, limit) -> None:
    """Panel (b): the slopes against D at each s_v with their intervals (hollow: fitted
    over a cell past criterion 1's boundary, `large`) and predictions."""
    from matplotlib.ticker import NullLocator

    s_grid = sorted({p["s_v"] for p in points})
    offsets = dict(zip(COLORS, (0.96, 1.0, 1.04), strict=True))
    boundary_note = False
    for q, color in COLORS.items():
        mine = [
            f
            for f in fits
            if f["quantity"] == q
            and f["against"] == "D"
            and f.get("slope") is not None
            and (f.get("fixed") or {}).get("s_v")
        ]
        if not mine:
            continue
        sv = np.array([f["fixed"]["s_v"] for f in mine]) * offsets[q]
        slope = np.array([f["slope"] for f in mine])
        ci = np.array([f["ci95"] or [sl, sl] for f, sl in zip(mine, slope, strict=True)])
        miss = sum(fit_verdict(f) == "outside" for f in mine)
        past = np.array([L is not None and bool(fit_cells(f) & large) for f in mine])
        for sel, fill, note in ((~past, None, ""), (past, "none", "")):
            if not sel.any():
                continue
            ax_e.errorbar(
                sv[sel],
                slope[sel],
                yerr=[(slope - ci[:, 0])[sel], (ci[:, 1] - slope)[sel]],
                fmt="o",
                color=color,
                mfc=fill,
                ms=4,
                capsize=2,
                label=None
                if fill
                else f"{LABELS[q] if q != 'hidden' else LABELS[q].replace('‖h‖_D', hidden)}: "
                f"\n{len(mine) - miss} of {len(mine)} intervals hold it{note}",
            )
        if past.any():
            boundary_note = True
        ax_e.axhline(mine[0]["theory"], color=color, ls=":", lw=1.3)
    if boundary_note:
        note = f"hollow: fitted over a cell with\n{hidden} ≥ {limit:g} (crossed in a)"
        ax_e.plot([], [], "o", color="0.4", mfc="none", ms=4, label=note)
    ax_e.axvline(1.0, color="0.6", lw=0.8)
    ax_e.set(
        xscale="log",
        xlabel="s_v = σ_v / √D (fixed along each fit)",
        ylabel="slope against D (over D = " + ", ".join(map(str, Ds)) + ")",
    )
    ax_e.set_xticks(s_grid, [f"{s:g}" for s in s_grid])
    ax_e.xaxis.set_minor_locator(NullLocator())
    ax_e.set_title(
        (
            "(b) the diagram depends on σ_v/√D alone: slopes in D at fixed s_v\n"
            if L is None
            else "(b) does the diagram depend on σ_v/√D alone? slopes in D at fixed s_v\n"
        )
        + "(95% intervals over draws; dotted: predicted)",
        fontsize=9,
    )
    ax_e.legend(fontsize=6.5, loc="best")


def _scale_curves(ax_s, ax_d, points, fits, Ds) -> None:
    """Panels (c) and (d): the local update and the loss decay against s_v, one line per
    D with its fitted slope, and the predicted laws past s_v = 1."""
    s_grid = sorted({p["s_v"] for p in points})
    curves = (  # (panel, quantity, style, label before the fitted slope)
        (ax_s, "local_update", "o-", ""),
        (ax_d, "decay", "o-", ""),
        (ax_d, "decay_u_unscaled", "s--", ""),
    )
    for i, D in enumerate(Ds):
        rows = sorted((p for p in points if p["D"] == D), key=lambda p: p["s_v"])
        for panel, q, style, what in curves:
            panel.plot(
                [p["s_v"] for p in rows],
                [_mean(p, q) for p in rows],
                style,
                color=f"C{i}",
                ms=4,
                mfc="none" if style == "s--" else None,
                label=f"D = {D}{what}{_fit_text(fits, q, D)}",
            )
    s_arr = np.geomspace(min(s_grid), max(s_grid), 50)
    past = s_arr[s_arr >= 1]
    at_one = [_mean(p, "local_update") for p in points if p["s_v"] == 1.0]
    if at_one and past.size:
        ax_s.plot(
            past,
            np.nanmean(at_one) / past,
            "k:",
            lw=1.3,
            label="∝ 1/s_v = √D/σ_v\n(predicted past s_v = 1)",
        )
    unscaled_one = [_mean(p, "decay_u_unscaled") for p in points if p["s_v"] == 1.0]
    if unscaled_one and past.size:
        ax_d.plot(
            past,
            np.nanmean(unscaled_one) * past**2,
            "k:",
            lw=1.3,
            label="∝ s_v² = σ_v²/D\n(predicted, η_u unscaled)",
        )


def _label_scale_panels(ax_s, ax_d, points, L) -> None:
    """Panels (c) and (d)'s axes, titles and legends."""
    from matplotlib.ticker import NullLocator

    s_grid = sorted({p["s_v"] for p in points})
    for a in (ax_s, ax_d):
        a.axvline(1.0, color="0.6", lw=0.8)
        a.set(xscale="log", yscale="log", xlabel="s_v = σ_v / √D")
        a.set_xticks(s_grid, [f"{s:g}" for s in s_grid])
        a.xaxis.set_minor_locator(NullLocator())
    ax_s.legend(fontsize=6.5)
    ax_d.legend(fontsize=6.5, title="solid: balanced, at t; dashed: u's\nshare at t = 0, "
                "η_u = lr_u", title_fontsize=6.5)  # fmt: skip
    ax_s.set(
        ylabel="local update |Ṗ| at t (RMS over units"
        + (" and inputs)" if L is None else ", layers and inputs)")
    )
    ax_s.set_title(
        "(c) criterion 5: the local update against σ_v/√D, one curve per D\n"
        "(mean over draws; slopes fitted past s_v = 2)",
        fontsize=9,
    )
    ax_d.set(ylabel="loss decay rate −dL/dt (or its inner weights' share)")
    ax_d.set_title(
        "(d) criterion 3: balanced decay stays Θ(1); with η_u unscaled the inner\n"
        "weights' share grows as σ_v²/D (slopes fitted past s_v = 1)",
        fontsize=9,
    )
