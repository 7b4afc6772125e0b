"""What a saved figure must show (issue 47): no panel empty without a sentence saying why,
and every data point (a marker) inside its panel's limits; and the house rules (issue 77,
`style_problems`): no text under 6 pt, no interval printed as [v, v], no tick labels
running into each other, at least two labels on a labelled log axis (where its points
take two places or more), no legend over a
data point, no titles, axis labels or legends overlapping one another. `conftest.py` runs
it on every figure the package saves during the tests, at
each test's own grid."""

import re

import numpy as np
from matplotlib.text import Text


def _has_data(ax) -> bool:
    for line in ax.get_lines():
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        if x.size and np.isfinite(x).any() and np.isfinite(y).any():
            return True
    if ax.images or ax.patches and any(p.get_visible() for p in ax.patches):
        return True
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets())
        if offsets.size or (hasattr(c, "get_paths") and c.get_paths()):
            return True
    return False


def _says_why(ax) -> bool:
    return any(t.get_text().strip() for t in ax.texts)


def problems(fig) -> list[str]:
    """What is wrong with `fig`, one line each (empty when nothing is)."""
    out = []
    for i, ax in enumerate(fig.axes):
        if ax.get_label() == "<colorbar>" or not ax.get_visible() or not ax.axison:
            continue
        name = f"panel {i} ({ax.get_title()[:50]!r})"
        if not _has_data(ax):
            if not _says_why(ax):
                out.append(f"{name}: empty, with no sentence saying why")
            continue
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        for line in ax.get_lines():
            if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
                continue
            x, y = (np.asarray(v, dtype=float) for v in line.get_data())
            ok = np.isfinite(x) & np.isfinite(y)
            if ax.get_xscale() == "log":
                ok &= x > 0
            if ax.get_yscale() == "log":
                ok &= y > 0
            x, y = x[ok], y[ok]
            tol_x, tol_y = 1e-9 * max(abs(x0), abs(x1), 1), 1e-9 * max(abs(y0), abs(y1), 1)
            outside = (x < x0 - tol_x) | (x > x1 + tol_x) | (y < y0 - tol_y) | (y > y1 + tol_y)
            if outside.any():
                j = int(np.argmax(outside))
                out.append(
                    f"{name}: the point ({x[j]:g}, {y[j]:g}) of {line.get_label()!r} lies "
                    f"outside the panel's limits x {x0:g}..{x1:g}, y {y0:g}..{y1:g}"
                )
    return out


# ---------------------------------------------------------------------------------------
# every finished point drawn (issue 47): what a figure holds, against what results.json says


def _inside(ax, x, y) -> bool:
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    tx, ty = 1e-9 * max(abs(x0), abs(x1), 1), 1e-9 * max(abs(y0), abs(y1), 1)
    return x0 - tx <= x <= x1 + tx and y0 - ty <= y <= y1 + ty


def drawn(ax) -> list[tuple[float, float]]:
    """The data points `ax` shows, in data coordinates and inside its limits: the vertices of
    lines drawn with markers, scatter offsets, bar centres and tops, and (x = NaN) the
    values of images (heat maps)."""
    pts = []
    for line in ax.get_lines():
        if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
            continue
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        pts += [(a, b) for a, b in zip(x, y, strict=True) if _inside(ax, a, b)]
    for c in ax.collections:
        if not c.get_visible() or type(c).__name__ != "PathCollection":
            continue
        if c.get_transform() != ax.transData and c.get_offset_transform() != ax.transData:
            continue
        pts += [(a, b) for a, b in np.asarray(c.get_offsets(), dtype=float) if _inside(ax, a, b)]
    for p in ax.patches:
        if type(p).__name__ == "Rectangle" and p.get_visible() and p.get_height():
            x, w, y, h = p.get_x(), p.get_width(), p.get_y(), p.get_height()
            if _inside(ax, x + w / 2, y + h):
                pts.append((x + w / 2, y + h))
                pts.append((y + h, x + w / 2))  # horizontal bars: (value, position)
            if _inside(ax, x + w, y + h / 2):
                pts.append((x + w, y + h / 2))
    for im in ax.images:
        values = np.ma.masked_invalid(np.ma.asarray(im.get_array(), dtype=float))
        pts += [(np.nan, v) for v in values.compressed()]
    return pts


def _match(pts, x, y, rtol) -> bool:
    """Whether a point of `pts` (an (n, 2) array) lies within `rtol` of (x, y); x None: any
    abscissa, NaN: a heat map's value."""
    if not len(pts):
        return False
    ok = np.isclose(pts[:, 1], y, rtol=rtol, atol=1e-300)
    if x is not None:
        xs = pts[:, 0]
        ok &= np.isnan(xs) if np.isnan(x) else np.isclose(xs, x, rtol=rtol, atol=0)
    return bool(ok.any())


def not_drawn(fig, expected, *, rtol: float = 1e-6) -> list[str]:
    """The expected points `fig` does not show, one line each. `expected`: `(what, panel, x,
    y)` — `panel` a substring of the panel's title (None: any panel), `x` None for any
    abscissa, NaN for a heat map's value; a point counts when a marker, bar or heat-map
    cell within `rtol` of it lies inside the panel's limits."""
    axes = [a for a in fig.axes if a.get_label() != "<colorbar>" and a.axison]
    # titles compared with their line breaks as spaces (`layout` wraps a long title) and
    # their sub- and superscripts as typed (`layout` typesets them)
    shown = [(as_typed(" ".join(ax.get_title().split())),
              np.asarray(drawn(ax), dtype=float).reshape(-1, 2)) for ax in axes]  # fmt: skip
    out = []
    for what, panel, x, y in expected:
        if y is None or not np.isfinite(y):
            continue  # an exploded or missing value: the figure says so in words
        words = None if panel is None else " ".join(panel.split())
        where = [p for t, p in shown if words is None or words in t]
        if not where:
            out.append(f"{what}: no panel titled {panel!r} (titles: {[t for t, _ in shown]})")
        elif not any(_match(p, x, y, rtol) for p in where):
            out.append(f"{what}: ({x}, {y:.6g}) not drawn in panel {panel!r}")
    return out


def points_missing(fig, fname) -> list[str]:
    """`not_drawn` for a figure a study saves next to its `results.json`, with the points
    `figure_points.SPECS` reads from those results; a study's figure without a spec is
    reported too. Nothing for a figure saved elsewhere (a notebook's)."""
    import json
    from pathlib import Path

    from figure_points import SPECS

    path = Path(fname)
    results = path.parent / "results.json"
    if not results.is_file():
        return []
    body = json.loads(results.read_text())
    study = body.get("study")
    if study not in SPECS:
        return [f"study {study!r} has no spec in tests/figure_points.py"]
    expected = SPECS[study](path.stem, body)
    if expected is None:
        return [f"figure {path.stem!r} of study {study!r} has no spec in tests/figure_points.py"]
    return not_drawn(fig, expected)


# ---------------------------------------------------------------------------------------
# the house rules (issue 77, item 1), checked on the figure as it was just saved: no text
# below MIN_POINTS at the saved size, no collapsed interval, no colliding tick labels, a
# labelled log axis with at least two labels (where its points take two places), no
# legend covering a data point, no titles, axis labels or legends overlapping

MIN_POINTS = 6.0
_COLLAPSED = re.compile(r"\[\s*([−+-]?\d+(?:\.\d+)?)\s*,\s*\1\s*\]")


# a superscript or subscript written as in LaTeX outside mathtext: h^l, V_j, f_5^(D), 2^k
_RAW_MATH = re.compile(
    r"[\w)\]}|‖]\^[\w({\-]|(?<![\w.])[A-Za-zα-ωΑ-Ω]_(?:\w|\{[^}]*\}|\([^)]*\))(?![^\W¹²³⁴⁵⁶⁷⁸⁹⁰])"
)


def as_typed(text: str) -> str:
    """`text` with the sub- and superscripts `layout` typeset (`h$^{\\mathregular{l}}$`)
    as they were typed (`h^l`)."""
    return re.sub(r"\$([\^_])\{\\mathregular\{(.*?)\}\}\$", r"\1\2", text)


def raw_math(text: str) -> str:
    """The first superscript or subscript `text` prints raw (`h^l`, `V_j`), outside
    mathtext's `$...$`; '' where none."""
    outside = "".join(part for i, part in enumerate(text.split("$")) if i % 2 == 0)
    found = _RAW_MATH.search(outside)
    return found.group(0) if found else ""


def is_panel_crop(fname) -> bool:
    """A panel written alone (`meanfield plot --panel`: `FIGURE_panelK.png`), a crop of a
    figure checked as it was saved."""
    return str(fname).rsplit(".", 1)[0].split("_")[-1].startswith("panel")


def _texts(fig):
    for t in fig.findobj(lambda a: isinstance(a, Text)):
        if t.get_visible() and t.get_text().strip():
            yield t


def _shown_tick_labels(ax, which):
    axis = getattr(ax, f"{which}axis")
    lo, hi = sorted(getattr(ax, f"get_{which}lim")())
    pad = 1e-9 * max(abs(lo), abs(hi), 1e-300)
    return [
        label for label, loc in zip(axis.get_ticklabels(), axis.get_majorticklocs(), strict=False)
        if label.get_visible() and label.get_text().strip() and lo - pad <= loc <= hi + pad
    ]  # fmt: skip


def _data_places(ax, which: str) -> int:
    """How many distinct positive values the panel's marked points take along `which`
    (a grid of one size has one place to label)."""
    k = 0 if which == "x" else 1
    values = set()
    for line in ax.get_lines():
        if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
            continue
        data = np.asarray(line.get_data()[k], dtype=float)
        values.update(np.round(data[np.isfinite(data) & (data > 0)], 12).tolist())
    return len(values) if values else 2


def style_problems(fig) -> list[str]:
    """The house rules `fig` breaks, one line each; call it after the figure was drawn
    (saved): tick labels and text extents are those of the last draw."""
    from meanfield.io.placement import _line_samples, _marked_points, legend_covers, note_covers

    out = []
    renderer = fig.canvas.get_renderer()
    for t in _texts(fig):
        text = t.get_text().strip().replace("\n", " ")[:50]
        if t.get_fontsize() < MIN_POINTS - 1e-9:
            out.append(f"the text {text!r} is {t.get_fontsize():g} pt, under {MIN_POINTS:g}")
        if _COLLAPSED.search(t.get_text()):
            out.append(f"the text {text!r} prints an interval of no width as [v, v]")
        if raw_math(t.get_text()):
            out.append(f"the text {text!r} prints mathematics raw ({raw_math(t.get_text())!r})")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison or ax.get_label() == "<colorbar>":
            continue
        name = f"panel {i} ({ax.get_title()[:50]!r})"
        for which in ("x", "y"):
            shown = _shown_tick_labels(ax, which)
            boxes = sorted((lab.get_window_extent(renderer) for lab in shown),
                           key=lambda b: b.x0 if which == "x" else b.y0)  # fmt: skip
            if any(a.overlaps(b) for a, b in zip(boxes, boxes[1:], strict=False)):
                out.append(f"{name}: its {which} tick labels run into each other")
            ticks_on = getattr(ax, f"{which}axis")._major_tick_kw
            labelled = ticks_on.get("label1On", True) or ticks_on.get("label2On", False)
            places = _data_places(ax, which)
            if (getattr(ax, f"get_{which}scale")() == "log" and labelled
                    and len(shown) < min(2, places)):  # fmt: skip
                out.append(f"{name}: its log {which} axis has {len(shown)} labelled tick(s)")
        if legend_covers(ax, renderer):
            out.append(f"{name}: its legend covers a data point")
        box = ax.get_window_extent(renderer)
        for note in ax.texts:  # a note in the panel's coordinates stays within its sides
            if (
                note.get_visible()
                and note.get_text().strip()
                and note.get_transform() == ax.transAxes
            ):
                b = note.get_window_extent(renderer)
                if b.x0 < box.x0 - 3 or b.x1 > box.x1 + 3:
                    out.append(f"{name}: its note {note.get_text()[:30]!r} runs out of the panel")
        for note in ax.texts:  # a note beside a point ("1/10 exploded") covers no data
            if getattr(note, "meanfield_beside", False) and note.get_visible():
                drawn = np.concatenate([_marked_points(ax), _line_samples(ax)])
                if note_covers(note, drawn, renderer):
                    out.append(f"{name}: its note {note.get_text()[:30]!r} covers its data")
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            box = leg.get_window_extent(renderer)
            for j, other in enumerate(fig.axes):
                labels = [*_shown_tick_labels(other, "x"), *_shown_tick_labels(other, "y")]
                if other.get_visible() and any(
                    box.overlaps(t.get_window_extent(renderer)) for t in labels
                ):
                    out.append(f"{name}: its legend covers panel {j}'s tick labels")
    out += _overlapping_blocks(fig, renderer)
    return out


def _overlapping_blocks(fig, renderer) -> list[str]:
    """The figure's blocks of text — its title, each panel's title, axis labels and
    legend — that overlap one another (a title over another panel's, a legend under its
    panel running into the next one's)."""
    blocks = []
    if fig._suptitle is not None and fig._suptitle.get_text().strip():
        blocks.append(("the figure's title", fig._suptitle))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for what, artist in (("title", ax.title), ("x label", ax.xaxis.label),
                             ("y label", ax.yaxis.label), ("legend", ax.get_legend())):  # fmt: skip
            if artist is None or not artist.get_visible():
                continue
            if hasattr(artist, "get_text") and not artist.get_text().strip():
                continue
            blocks.append((f"panel {i}'s {what}", artist))
    boxes = [(name, artist.get_window_extent(renderer)) for name, artist in blocks]
    out = []
    for k, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[k + 1 :]:
            if box_a.overlaps(box_b) and box_a.width > 0 and box_b.width > 0:
                out.append(f"{a} and {b} overlap")
    return out
