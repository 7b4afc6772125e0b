"""The figure of the mean-ODE study: error against L and against M, with slopes."""

import math
from pathlib import Path

from ..io.plotting import loglog_series, reference_floor, save_figure, size_ticks, use_agg

LABELS = {"delta_h": r"$\Delta^h$", "delta_b": r"$\Delta^b$", "delta_z": r"$\Delta^Z$"}


def _find(fits, quantity, against, steps):
    for f in fits:
        if f.get("quantity") == quantity and f.get("against") == against:
            if f.get("fixed", {}).get("steps") == steps:
                return f
    return None


def _summary_series(ax, points, quantity, against, **kwargs):
    """`loglog_series` of the mean of every point's `quantity` (bars: its `std`) against
    the point's `against` value; `kwargs`: its other keyword arguments."""
    loglog_series(
        ax,
        [p[against] for p in points],
        [p[quantity]["mean"] for p in points],
        [p[quantity]["std"] for p in points],
        **kwargs,
    )


def _merge_labels(ends, *, decades=0.08):
    """The grey lines' end labels, those closer than `decades` (in log10 of the value)
    merged into one ("M=16,64") so that they do not overprint."""
    groups = []
    for y, M, L in sorted(ends):
        if groups and abs(math.log10(y) - math.log10(groups[-1][0])) < decades:
            groups[-1][1].append(M)
        else:
            groups.append((y, [M], L))
    return [(y, sorted(Ms), L) for y, Ms, L in groups]


def plot_convergence(out, cfg, points, decomposition, fits, *, steps=None, floor=None):
    """Write `out/convergence.png`: one column per error (at step `steps`, default the
    last; another step's figure is `convergence_step{k}.png`), top row against L (finite
    networks at the fit's fixed M, and the Euler part),
    bottom row against M at the largest L; dashed: fitted slope, dotted: theory; the
    reference's own error (`floor`: a dict of each quantity's estimate) as a red line."""
    use_agg()
    import matplotlib.pyplot as plt

    k = cfg["steps"] if steps is None else steps
    quantities = ["delta_h", "delta_b"] + (["delta_z"] if k > 0 else [])
    fig, axes = plt.subplots(2, len(quantities), figsize=(4.2 * len(quantities), 7), squeeze=False)
    L_M = cfg["L_for_M"]
    for col, q in enumerate(quantities):
        ax = axes[0, col]
        fit = _find(fits, q, "L", k)
        M_line = fit["fixed"]["M"] if fit else max(cfg["M"])
        row = sorted(
            (p for p in points if p["steps"] == k and p["M"] == M_line and p["L"] in cfg["L"]),
            key=lambda p: p["L"],
        )
        ends = []  # (y, M) at each grey line's right end, for its label
        for M in sorted(set(cfg["M"]) - {M_line}):
            faint = sorted(
                (p for p in points if p["steps"] == k and p["M"] == M and p["L"] in cfg["L"]),
                key=lambda p: p["L"],
            )
            loglog_series(
                ax,
                [p["L"] for p in faint],
                [p[q]["mean"] for p in faint],
                color="0.75",
                marker=".",
                label="",
            )
            last = next((p for p in reversed(faint) if (p[q]["mean"] or 0) > 0), None)
            if last is not None:
                ends.append((last[q]["mean"], M, last["L"]))
        for y, Ms, L_end in _merge_labels(ends):  # which width each grey line is
            ax.annotate("M=" + ",".join(map(str, Ms)), (L_end, y), xytext=(3, 0),
                        textcoords="offset points", fontsize=6, color="0.45",
                        va="center")  # fmt: skip
        theory = fit["theory"] if fit else None
        _summary_series(ax, row, q, "L", fit=fit, theory=theory, label=f"M={M_line}")
        eq = q + "_euler"
        rows = sorted(
            (r for r in decomposition if r["steps"] == k and r["L"] in cfg["L"]),
            key=lambda r: r["L"],
        )
        if rows:
            loglog_series(
                ax,
                [r["L"] for r in rows],
                [r[eq] for r in rows],
                fit=_find(fits, eq, "L", k),
                label="Euler part",
                marker="s",
                linestyle="-",
            )
        if floor is not None:
            reference_floor(ax, floor.get(q), [p[q]["mean"] for p in points if p["steps"] == k])
        size_ticks(ax, cfg["L"])
        if len(set(cfg["M"])) > 1:  # room for the grey lines' labels
            lo, hi = ax.get_xlim()
            ax.set_xlim(lo, hi * 1.25)
        ax.set_xlabel("depth L")
        ax.set_title(f"{LABELS[q]} against L after k={k} GD step(s)")
        ax.legend(fontsize=7, loc="best")
        ax = axes[1, col]
        fit = _find(fits, q, "M", k)
        colm = sorted(
            (p for p in points if p["steps"] == k and p["L"] == L_M), key=lambda p: p["M"]
        )
        _summary_series(ax, colm, q, "M", fit=fit, theory=-0.5, label=f"L={L_M}")
        if colm and max(p["M"] for p in colm) > cfg["fit_M_max"]:
            ax.axvspan(cfg["fit_M_max"] * 1.4, max(cfg["M"]) * 1.5, color="0.93", zorder=0)
        if floor is not None:
            reference_floor(ax, floor.get(q), [p[q]["mean"] for p in colm])
        if colm:
            size_ticks(ax, [p["M"] for p in colm])
        ax.set_xlabel("units per layer M")
        ax.set_title(f"{LABELS[q]} against M at L={L_M}, k={k}")
        ax.legend(fontsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("error (mean over seeds)")
    if "block" in cfg or "law" in cfg:

        def short(spec):
            return str(spec).split("/")[-1][:60]

        what = f"block {short(cfg.get('block', cfg.get('activation')))}, law " + short(
            cfg.get("law", "2LP")
        )
    else:
        what = f"{cfg['activation']} 2LP, {cfg['init']} init"
    fig.suptitle(
        f"finite ResNet vs mean-ODE limit: {what}, d={cfg['d']}, n={cfg['inputs']}, "
        f"{cfg['seeds']} seeds\nbars: ×/÷ the draws' geometric spread; dashed: fitted slope; "
        "dotted: theory slope; grey: the other widths M",
        fontsize=10,
    )
    path = Path(out) / ("convergence.png" if steps is None else f"convergence_step{k}.png")
    save_figure(fig, path, dpi=120)
    return path
