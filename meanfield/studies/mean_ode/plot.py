"""The figure of the mean-ODE study: error against L and against M, with slopes."""

import math
import textwrap
from pathlib import Path

import numpy as np

from ...io.plotting import (
    loglog_series,
    mark_exploded,
    reference_floor,
    save_figure,
    size_ticks,
    use_agg,
)
from ...stats.fits import interval_text
from ...stats.joint_law import law_value

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


def _secondary(fit):
    """A one-term fit as the figure labels it: its slope and interval, not a verdict
    against the theory (the law in the bottom row is the verdict)."""
    if fit is None:
        return None
    return {
        k: v for k, v in fit.items() if k not in ("theory_inside", "theory_verdict", "theory_note")
    }


def _law_title(q, law):
    if law is None or law.get("q") is None:  # why, whole words on at most two more lines
        reason = textwrap.shorten(str(law.get("reason") or ""), 90, placeholder=" …") if law else ""
        lines = textwrap.wrap(f"({reason})", 56) if reason else []
        return "\n".join([f"{LABELS[q]}: no law fit", *lines])

    def one(k):
        ci = law.get(f"{k}_ci95")
        return f"{k} = " + (interval_text(law[k], ci) if ci else f"{law[k]:.2f}")

    names = [k for k in ("p", "q") if law.get(k) is not None]
    return f"{LABELS[q]} law: " + ", ".join(one(k) for k in names)


def _law_panel(ax, q, points, law, k):
    """Every grid point's mean error against L, one colour per width M, and the fitted
    law's curve at each width (solid, the colour of its points)."""
    import matplotlib as mpl

    at_k = [p for p in points if p["steps"] == k and (p[q]["mean"] or 0) > 0]
    widths = sorted({p["M"] for p in at_k})
    cmap = mpl.colormaps["viridis"]
    L_all = sorted({p["L"] for p in at_k})
    for i, M in enumerate(widths):
        color = cmap(0.9 * i / max(1, len(widths) - 1))
        row = sorted((p for p in at_k if p["M"] == M), key=lambda p: p["L"])
        ax.plot([p["L"] for p in row], [p[q]["mean"] for p in row], "o", ms=4, color=color,
                label=f"M={M}")  # fmt: skip
        mark_exploded(ax, row, q, lambda p: p["L"])
        if law is not None:  # over the depths this width ran at
            grid = np.geomspace(row[0]["L"], row[-1]["L"], 60)
            values = law_value(law, grid, np.full_like(grid, M))
            if values is not None:
                ax.plot(grid, values, "-", lw=1, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    size_ticks(ax, L_all)
    ax.set_xlabel("depth L")
    ax.set_title(_law_title(q, law), fontsize=9)
    _room_below(ax)
    ax.legend(fontsize=6, ncol=2, loc="lower left", title="lines: the fitted law",
              title_fontsize=6)  # fmt: skip


def _room_below(ax, factor: float = 4.0) -> None:
    """A band under the lowest data of a log panel, `factor` deep, for a legend in its
    lower left that covers no point or line (the upper part holds the data)."""
    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log" and lo > 0:
        ax.set_ylim(lo / factor, hi)


def plot_convergence(out, cfg, points, decomposition, fits, *, steps=None, floor=None,
                     rates=None):  # fmt: skip
    """Write `out/convergence.png`: one column per error (at step `steps`, default the
    last; another step's figure is `convergence_step{k}.png`), top row against L (finite
    networks at the fit's fixed M, and the Euler part),
    middle row against M at the largest L; dashed: fitted one-term slope, dotted: theory;
    the reference's own error (`floor`: a dict of each quantity's estimate) as a red line;
    with `rates` (the headline law fits) a bottom row: every grid point and the fitted
    law `a L^-p (1 + c L^-p) ⊕ b (LM)^-q` for each width."""
    use_agg()
    import matplotlib.pyplot as plt

    k = cfg["steps"] if steps is None else steps
    quantities = ["delta_h", "delta_b"] + (["delta_z"] if k > 0 else [])
    rows = 3 if rates else 2
    fig, axes = plt.subplots(
        rows, len(quantities), figsize=(4.2 * len(quantities), 3.5 * rows), squeeze=False
    )
    for col, q in enumerate(quantities):
        _depth_panel(axes[0, col], q, cfg, points, decomposition, fits, k, floor)
        _width_panel(axes[1, col], q, cfg, points, fits, k, floor)
        if rates:
            law = next((r for r in rates if r.get("part") == "finite" and r["quantity"] == q
                        and r["fixed"]["steps"] == k), None)  # fmt: skip
            _law_panel(axes[2, col], q, points, law, k)
    for ax in axes[:, 0]:
        ax.set_ylabel("error (mean over seeds)")
    fig.suptitle(_suptitle(cfg, rates), fontsize=10)
    path = Path(out) / ("convergence.png" if steps is None else f"convergence_step{k}.png")
    save_figure(fig, path, dpi=120)
    return path


def _depth_panel(ax, q, cfg, points, decomposition, fits, k, floor):
    """The top row's panel of `q`: against L at the fit's width (the other widths grey),
    and the Euler part."""
    fit = _find(fits, q, "L", k)
    M_line = fit["fixed"]["M"] if fit else max(cfg["M"])
    row = sorted(
        (p for p in points if p["steps"] == k and p["M"] == M_line and p["L"] in cfg["L"]),
        key=lambda p: p["L"],
    )
    _other_widths(ax, q, cfg, points, k, M_line)
    theory = fit["theory"] if fit else None
    _summary_series(ax, row, q, "L", fit=_secondary(fit), theory=theory, label=f"M={M_line}")
    mark_exploded(ax, row, q, lambda p: p["L"])
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
            fit=_secondary(_find(fits, eq, "L", k)),
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
    _room_below(ax)  # (the grey lines and their labels fill the panel's top)
    ax.legend(fontsize=6, loc="lower left")


def _other_widths(ax, q, cfg, points, k, M_line):
    """The widths other than the fit's against L, as grey lines labelled at their ends."""
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


def _width_panel(ax, q, cfg, points, fits, k, floor):
    """The middle row's panel of `q`: against M at the line's depth `L_for_M` (grey
    beyond the fit's range)."""
    L_M = cfg["L_for_M"]
    fit = _find(fits, q, "M", k)
    colm = sorted((p for p in points if p["steps"] == k and p["L"] == L_M), key=lambda p: p["M"])
    _summary_series(ax, colm, q, "M", fit=_secondary(fit), theory=-0.5, label=f"L={L_M}")
    mark_exploded(ax, colm, q, lambda p: p["M"])
    if colm and max(p["M"] for p in colm) > cfg["fit_M_max"]:
        ax.axvspan(cfg["fit_M_max"] * 1.4, max(cfg["M"]) * 1.5, color="0.93", zorder=0)
    if floor is not None:
        reference_floor(ax, floor.get(q), [p[q]["mean"] for p in colm])
    if colm:
        size_ticks(ax, [p["M"] for p in colm])
    ax.set_xlabel("units per layer M")
    ax.set_title(f"{LABELS[q]} against M at L={L_M}, k={k}")
    ax.legend(fontsize=6)


def _suptitle(cfg, rates) -> str:
    """The figure's title: the block and law (or the built-in 2LP), sizes, and the rows."""
    if "block" in cfg or "law" in cfg:

        def short(spec):
            return str(spec).split("/")[-1][:60]

        what = f"block {short(cfg.get('block', cfg.get('activation')))}, law " + short(
            cfg.get("law", "2LP")
        )
    else:
        what = f"{cfg['activation']} 2LP, {cfg['init']} init"
    return (
        f"finite ResNet vs mean-ODE limit: {what}, d={cfg['d']}, n={cfg['inputs']}, "
        f"{cfg['seeds']} seeds\nrows 1-2: one-term slopes along lines of the grid (bars: ×/÷ "
        "the draws' geometric spread; dashed: fitted slope; dotted: theory slope; grey: the "
        "other widths M)"
        + (
            "\nrow 3, the headline: every point and the law "
            "sqrt((a L^-p (1 + c L^-p))² + (b (LM)^-q)²) fitted jointly"
            if rates
            else ""
        )
    )
