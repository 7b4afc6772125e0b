"""Plot helpers: log-log convergence plots with fitted and theoretical slopes (fit →
plot), ticks at a grid's sizes, and cell edges for heat maps; every study's figure is
written by `save_figure`, whose formats and resolution `figure_export` sets
(`meanfield plot DIR --format pdf,svg --dpi 300`)."""

import contextlib
import math
import os
import sys
from pathlib import Path

import numpy as np

from .placement import (  # noqa: F401  (the house rules of placement, where they were)
    clear_legends,
    clear_notes,
    legend_covers,
    note_covers,
)
from .style import (  # noqa: F401  (the house rules, where they were)
    COLORS,
    DPI,
    WIDTH_IN,
    fit_width,
    house_style,
    thin_tick_labels,
    typeset,
    typeset_math,
    wrap_titles,
)

# backends that draw to files only: a script run without a display
FILE_BACKENDS = {"agg", "cairo", "pdf", "pgf", "ps", "svg", "template"}


def use_agg() -> None:
    """Select matplotlib's file backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)


def show(name: str, fig=None, *, folder: str | os.PathLike | None = None) -> Path | None:
    """Show a notebook's figure, or keep it where a script cannot show it.

    In Jupyter or with a display, `plt.show()`. Run as a script with a file backend (no
    display: `python notebooks/NAME.py`), the figure (default: the current one) is saved
    as `FOLDER/NAME.png` and the path printed; `FOLDER` is `folder`, else the environment
    variable `MEANFIELD_FIGURES`, else `figures/<script name>` under the current directory.
    Returns the path written, or None when shown.
    """
    import matplotlib
    import matplotlib.pyplot as plt

    if not name or any(c in name for c in "/\\"):
        raise ValueError(f"name: a file name without folders, not {name!r}")
    figure = fig if fig is not None else plt.gcf()
    try:  # the house rules (`layout`: ticks, typeset labels, wraps, legends), shown or saved
        layout(figure)
    except AttributeError:  # a canvas that measures no text: its ticks at least
        for ax in figure.axes:
            for axis in ("x", "y"):
                plain_log_ticks(ax, axis)
    if matplotlib.get_backend().lower() not in FILE_BACKENDS:
        plt.show()
        return None
    where = "folder"
    if folder is None:
        script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else "notebook"
        where = "MEANFIELD_FIGURES" if os.environ.get("MEANFIELD_FIGURES") else "folder"
        folder = os.environ.get("MEANFIELD_FIGURES") or Path("figures") / script
    path = Path(folder) / f"{name}.png"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a file where the folder (or one above it) should be
        reason = err.strerror or type(err).__name__
        raise ValueError(
            f"{where}: cannot make the figures folder {str(folder)!r}: {reason}"
        ) from None
    figure.savefig(path, dpi=110, bbox_inches="tight")
    print(f"figure saved: {path}")
    return path


def cell_edges(v):
    """Cell edges around the values `v` (increasing), for `pcolormesh` over unevenly
    spaced values: the midpoints between neighbours, and half a step beyond each end
    (±0.05 for a single value)."""
    v = np.asarray(v, dtype=float)
    if v.size == 1:
        return np.array([v[0] - 0.05, v[0] + 0.05])
    mid = (v[1:] + v[:-1]) / 2
    return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])


def series_by(points, key: str, first=()) -> list[tuple]:
    """A figure's series: the points grouped by their value of `key`, every value with a
    point (those of `first` first, in their order, then the others as they come), as
    `(value, color, rows)`: the house palette's colour each (`style.CYCLE`, cycled) and
    the value's points sorted by depth `L`."""
    from .style import CYCLE

    values = list(dict.fromkeys([*first, *(p[key] for p in points)]))
    values = [v for v in values if any(p[key] == v for p in points)]
    colors = [CYCLE[i % len(CYCLE)] for i in range(len(values))]
    return [
        (v, color, sorted((p for p in points if p[key] == v), key=lambda p: p["L"]))
        for v, color in zip(values, colors, strict=True)
    ]


def size_ticks(ax, values, *, axis: str = "x", most: int = 8) -> None:
    """Ticks at a grid's own sizes (depths, widths) on a log axis, labelled as plain
    numbers (every other one, or sparser, past `most`), and no minor-tick labels: over one
    to two decades matplotlib labels its minor ticks too (2×10^1, 3×10^1, ...), and they
    run into each other."""
    from matplotlib.ticker import NullFormatter

    if axis not in ("x", "y"):
        raise ValueError(f"axis: 'x' or 'y', not {axis!r}")
    vals = sorted({float(v) for v in values})
    vals = vals[:: math.ceil(len(vals) / most)] if vals else vals
    # 16384, not 1.6e+04; 0.0156, not 0.015625
    labels = [str(int(v)) if v.is_integer() else f"{v:.3g}" for v in vals]
    getattr(ax, f"set_{axis}ticks")(vals, labels)
    getattr(ax, f"{axis}axis").set_minor_formatter(NullFormatter())


def log_spread(mean, std):
    """The lower and upper bar lengths of `mean ×/÷ exp(σ)`, `σ² = log(1 + std²/mean²)` (the
    spread of the log-normal law with this mean and std): on a log axis a bar of the same
    length either side, never reaching zero as `mean − std` does (a std larger than the
    mean drew bars down to the axis' floor). Bars of NaN where the mean is not positive."""
    mean = np.array([np.nan if m is None else m for m in mean], dtype=float)
    std = np.array([0.0 if v is None else v for v in std], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(np.log1p((std / mean) ** 2))
        factor = np.where(mean > 0, np.exp(sigma), np.nan)
    return np.array([mean - mean / factor, mean * factor - mean])


def loglog_series(
    ax, x, mean, std=None, *, fit=None, theory=None, label="", color=None, marker="o", linestyle="-"
):
    """Plot the mean against x on log-log axes, bars of the draws' geometric spread
    (`log_spread`: mean ×/÷ exp(σ), not mean ± std, which reaches below zero), with the
    fitted slope (dashed) and a theory slope (dotted, through the geometric centre of the
    data)."""
    x = np.asarray(x, dtype=float)
    mean = np.array([np.nan if m is None else m for m in mean], dtype=float)
    ok = np.isfinite(mean) & (mean > 0)
    if not ok.any():
        return
    text = label
    if fit is not None and fit.get("slope") is not None:
        from ..stats.fits import THEORY_TOLERANCE, fit_verdict, interval_text

        text = f"{label}: slope " + (
            interval_text(fit["slope"], fit["ci95"]) if fit.get("ci95") else f"{fit['slope']:.2f}"
        )
        verdict = fit_verdict(fit) if "theory_inside" in fit or "theory_verdict" in fit else None
        if verdict == "outside":  # a departure beyond the tolerance, flagged
            text += f"\n  ≠ theory {fit['theory']:g}"
        elif verdict == "near":  # missed, but within the tolerance: said as such
            tol = fit.get("theory_tolerance") or THEORY_TOLERANCE
            text += f"\n  theory {fit['theory']:g} within ±{tol:g}"
        if verdict in ("outside", "near") and str(fit.get("theory_note", "")).startswith(
            "pre-asymptotic"
        ):
            text += " (pre-asymptotic)"
    if std is not None:
        bars = log_spread(mean, std)[:, ok]
        x, mean = x[ok], mean[ok]
        line = ax.errorbar(
            x,
            mean,
            yerr=bars,
            marker=marker,
            linestyle=linestyle,
            color=color,
            label=text,
            capsize=2,
            markersize=4,
        )
        color = line[0].get_color()
    else:
        x, mean = x[ok], mean[ok]
        (line,) = ax.plot(
            x, mean, marker=marker, linestyle=linestyle, color=color, label=text, markersize=4
        )
        color = line.get_color()
    if fit is not None and fit.get("slope") is not None:
        xs = np.geomspace(x.min(), x.max(), 20)
        ax.plot(xs, np.exp(fit["intercept"]) * xs ** fit["slope"], "--", color=color, lw=1)
    if theory is not None:
        xs = np.geomspace(x.min(), x.max(), 20)
        xc, yc = math.exp(np.log(x).mean()), math.exp(np.log(mean).mean())
        ax.plot(xs, yc * (xs / xc) ** theory, ":", color="gray", lw=1.5)
    ax.set_xscale("log")
    ax.set_yscale("log")


def reference_floor(ax, value, means) -> None:
    """The reference's error `value` on `ax`: a red line, and below 10x it a shaded band
    (points there are not fitted), when 10x it lies within two decades of the smallest
    plotted mean; otherwise only named in the legend (drawing it would squash the data)."""
    if value is None or not np.isfinite(value) or value <= 0:
        return
    shown = [m for m in means if m is not None and m > 0]
    if shown and 10 * value >= min(shown) / 100:
        ax.axhspan(value, 10 * value, color=COLORS["red"], alpha=0.07, zorder=0)
        ax.axhline(
            value,
            color=COLORS["red"],
            linestyle="--",
            linewidth=0.8,
            label=f"reference error {value:.1e}\n(shaded: under 10x it, not fitted)",
        )
    else:
        ax.plot([], [], " ", label=f"reference error {value:.1e}\n(below the axis)")


def _positive_data(ax, axis: str) -> bool:
    """Whether anything drawn on `ax` (lines, markers, error bars, filled areas) has a
    finite positive coordinate along `axis` ("x" or "y")."""
    i = 0 if axis == "x" else 1
    for line in ax.lines:
        v = np.asarray(line.get_xdata() if i == 0 else line.get_ydata(), dtype=float)
        if (np.isfinite(v) & (v > 0)).any():
            return True
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), dtype=float).reshape(-1, 2)
        for v in [offsets, *(p.vertices for p in coll.get_paths())]:
            v = np.asarray(v, dtype=float).reshape(-1, 2)[:, i]
            if (np.isfinite(v) & (v > 0)).any():
                return True
    return False


def layout(fig, *, dpi: float | None = None, **kwargs) -> None:
    """`fig.tight_layout(**kwargs)`, after making every axes drawable: a log axis with
    nothing positive to show (every value 0, negative or exploded) cannot be ticked, and
    matplotlib raises; such an axis turns linear and says, in the panel, that it has
    nothing to draw on a log scale (unless the panel already holds a text saying why).

    `dpi`: the resolution the figure will be saved at. The layout is then measured at
    it, so that saving reuses the text measured here (matplotlib caches text extents by
    resolution) instead of measuring every label again: 13% of a mean-ODE study's
    drawing time."""
    if dpi is not None:
        fig.set_dpi(dpi)
    for ax in fig.axes:
        empty = [a for a in ("x", "y") if getattr(ax, f"get_{a}scale")() in ("log",)]
        empty = [a for a in empty if not _positive_data(ax, a)]
        if not empty:
            continue
        for a in empty:
            getattr(ax, f"set_{a}scale")("linear")
        if ax.texts:  # the panel already says why it is empty
            continue
        ax.text(
            0.5, 0.5, "nothing positive to draw on a log scale\n(every value 0, negative, "
            "missing or exploded)", transform=ax.transAxes, ha="center", va="center",
            fontsize=8, color="0.35",
        )  # fmt: skip
    for ax in fig.axes:
        for a in ("x", "y"):
            plain_log_ticks(ax, a)
    typeset_math(fig)
    wrap_titles(fig)
    title = getattr(fig, "_suptitle", None)
    if title is not None and title.get_visible() and title.get_text().strip():
        # tight_layout leaves the figure's title its height, however many lines it
        # wrapped to, when given no `rect` (with one it counts no title) and the title
        # hangs from the figure's top edge (matplotlib puts it 2% of the height down:
        # 0.35 in on a tall figure, over the first panels)
        title.set_y(1 - 0.04 / fig.get_size_inches()[1])
        title.set_verticalalignment("top")
        x0, y0, x1, _ = kwargs.get("rect") or (0, 0, 1, 1)
        kwargs["rect"] = (x0, y0, x1, 1)
    fig.tight_layout(**kwargs)
    if wrap_titles(fig):  # the panels as laid out are narrower than at first
        fig.tight_layout(**kwargs)
    for _ in range(3):  # a legend moved out of its panel: the layout makes room, and the
        if not clear_legends(fig):  # panels it reshaped are looked at again
            break
        fig.tight_layout(**kwargs)
    if thin_tick_labels(fig):  # fewer labels: the room they took is given back
        fig.tight_layout(**kwargs)
    if clear_notes(fig):  # a panel grew to make room for a note: measured again
        fig.tight_layout(**kwargs)
        clear_notes(fig)


def plain_log_ticks(ax, axis: str) -> None:
    """A log axis spanning less than two decades with matplotlib's default labels (whose
    minor labels run into each other: "3×10¹4×10¹") gets plain numbers at 1, 2 and 5
    times the powers of ten, or finer steps where those give fewer than three labels
    (5, 7, 10, 15 over 3.5..18), evenly spaced numbers over a span too narrow for two of
    those (0.97, 0.98, 0.99, 1 over 0.965..1.005), and no minor labels; an axis whose
    ticks a figure set itself (`size_ticks`) is left alone."""
    from matplotlib import ticker

    axes = getattr(ax, f"{axis}axis")
    if getattr(ax, f"get_{axis}scale")() != "log":
        return
    if type(axes.get_major_formatter()) is not ticker.LogFormatterSciNotation:
        return
    lo, hi = sorted(getattr(ax, f"get_{axis}lim")())
    if not (lo > 0 and math.isfinite(hi)) or hi / lo >= 100:
        return
    powers = 10.0 ** np.arange(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for subs in ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)):
        count = sum(lo <= p * m <= hi for p in powers for m in subs)
        if count >= 3:
            break
    if count >= 2:
        axes.set_major_locator(ticker.LogLocator(base=10, subs=subs))
    else:  # a narrow span (0.97..1.0, say): evenly spaced plain numbers
        axes.set_major_locator(ticker.MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    axes.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axes.set_minor_formatter(ticker.NullFormatter())


# `figure_export`'s settings: more formats beside the PNG, a resolution, panels alone
# (and, for the caller, the titles of the panels seen)
_EXPORT: dict = {"formats": (), "dpi": None, "panel": None, "seen": [], "width_in": None}
EXPORT_FORMATS = ("png", "pdf", "svg", "eps")


@contextlib.contextmanager
def figure_export(
    formats=(), dpi: int | None = None, panel: str | None = None,
    width_in: float | None = None,
):  # fmt: skip
    """Within: figures are drawn in the house style (`style.house_style`), and every
    figure `save_figure` writes is also written in each of `formats` (of
    `EXPORT_FORMATS`; the PNG always), at `dpi` dots per inch (default: the figure's
    own, at least `style.DPI`), at most `width_in` inches wide (default
    `style.WIDTH_IN`, a page's text width: wider figures re-flow their panels,
    `style.fit_width`). PDF and EPS keep their text as text (TrueType fonts embedded).
    `panel`: each panel whose title holds this text (any case), or the panel of that
    number (1 the first), is also written alone, with its axes, labels and legend, as
    `FIGURE_panelK.png` (and in `formats`); the titles of the panels seen are in
    `exported_panels()`."""
    bad = [f for f in formats if f not in EXPORT_FORMATS]
    if bad:
        raise ValueError(f"formats: one of {', '.join(EXPORT_FORMATS)}, got {bad[0]!r}")
    if panel is not None and not str(panel).strip():
        raise ValueError("panel: a panel's title (or part of it), or its number; got ''")
    if width_in is not None and not (isinstance(width_in, int | float) and width_in >= 2):
        raise ValueError(f"width_in: a width in inches of at least 2, got {width_in!r}")
    previous = dict(_EXPORT)
    _EXPORT.update(formats=tuple(f for f in formats if f != "png"), dpi=dpi, panel=panel,
                   seen=[], width_in=width_in)  # fmt: skip
    try:
        with house_style():
            yield
    finally:
        _EXPORT.update(previous)


def save_figure(
    fig, path, *, dpi: int, title: str | None = None, fontsize: float = 10, **layout_kwargs
):
    """Finish a figure: its `title` (a suptitle of font size `fontsize`), no wider than
    a page (`style.fit_width`, or the width `figure_export` sets), `layout` at `dpi`
    (with `layout_kwargs`, e.g. `rect`), then written to `path` at `dpi` (at least
    `style.DPI`, or the resolution `figure_export` sets; and in the formats it sets)
    and closed. **Returns:** `path`."""
    import matplotlib.pyplot as plt

    if title is not None:
        fig.suptitle(title, fontsize=fontsize)
    dpi = _EXPORT["dpi"] or max(dpi, DPI)
    fit_width(fig, _EXPORT["width_in"] or WIDTH_IN)
    layout(fig, dpi=dpi, **layout_kwargs)
    fig.savefig(path, dpi=dpi)
    for fmt in _EXPORT["formats"]:
        fig.savefig(Path(path).with_suffix(f".{fmt}"), dpi=dpi)
    if _EXPORT["panel"] is not None:
        _save_panels(fig, Path(path), dpi)
    plt.close(fig)
    return path


def exported_panels() -> list:
    """Within `figure_export(panel=...)`: the titles of every panel seen, "FIGURE K:
    TITLE" (to tell a user what there is to choose from; the panels written are files)."""
    return list(_EXPORT["seen"])


def _save_panels(fig, path: Path, dpi: int) -> None:
    """The panels of `fig` that `figure_export`'s `panel` names, each written alone: the
    figure cropped to the panel with its labels, title and legend."""
    want = str(_EXPORT["panel"]).strip()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.axison and ax.get_label() != "<colorbar>"]
    for k, ax in enumerate(panels, start=1):
        title = " ".join(ax.get_title().split())
        _EXPORT["seen"].append(f"{path.name} {k}: {title or '(no title)'}")
        if not (want == str(k) or (not want.isdigit() and want.lower() in title.lower())):
            continue
        box = ax.get_tightbbox(renderer).padded(4).transformed(fig.dpi_scale_trans.inverted())
        for fmt in ("png", *_EXPORT["formats"]):
            alone = path.with_name(f"{path.stem}_panel{k}.{fmt}")
            fig.savefig(alone, dpi=dpi, bbox_inches=box)


def mark_exploded(ax, rows, name, x) -> None:
    """Ring in red every point of `rows` where networks exploded (left out of its mean)
    and write "k/n exploded" beside it; a point all of whose networks exploded has no mean
    and is written at the panel's foot. One legend entry per panel that has any."""
    hit = [r for r in rows if r[name].get("exploded")]
    for i, r in enumerate(hit):
        n, total = r[name]["exploded"], r[name]["exploded"] + r[name]["count"]
        text = f"{n}/{total} exploded"
        if r[name]["mean"] is None:
            ax.annotate(text, (x(r), 0), xycoords=("data", "axes fraction"), fontsize=6,
                        color=COLORS["red"], ha="center", va="bottom")  # fmt: skip
            continue
        ax.plot([x(r)], [r[name]["mean"]], "o", ms=9, mfc="none", mec=COLORS["red"], mew=1.2)
        note = ax.annotate(text, (x(r), r[name]["mean"]), xytext=(6, 5 if i % 2 else -10),
                           textcoords="offset points", fontsize=6, color=COLORS["red"])  # fmt: skip
        note.meanfield_beside = True  # `layout` moves it off the panel's other points
    label = "exploded"
    if hit and label not in [line.get_label() for line in ax.get_lines()]:
        ax.plot([], [], "o", ms=7, mfc="none", mec=COLORS["red"], label=label)
