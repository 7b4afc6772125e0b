"""Where a figure's legends and notes go (`plotting.layout`'s house rules): a legend
never covers data nor stands beside its panel (`clear_legends`), a note beside a data
point covers none of its panel's points or lines (`clear_notes`), and the tests' figure
check asks the same (`legend_covers`, `note_covers`)."""

import math

import numpy as np

# where a note beside a data point may go (offset in points, horizontal alignment), in order
_NOTE_PLACES = ((6, -10, "left"), (6, 5, "left"), (-6, 5, "right"), (-6, -10, "right"),
                (0, 8, "center"), (0, -15, "center"))  # fmt: skip


def note_covers(note, points: np.ndarray, renderer=None) -> bool:
    """Whether the text `note` covers one of `points` (display coordinates, as
    `_marked_points` gives them)."""
    box = note.get_window_extent(renderer)
    return bool(((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                 & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)).any())  # fmt: skip


def _line_samples(ax, step: float = 2.0) -> np.ndarray:
    """Points every `step` display units along each visible line drawn on `ax` (a fitted
    law, a series' segments), for a note to keep off them."""
    out = [np.empty((0, 2))]
    for line in ax.get_lines():
        if not line.get_visible() or line.get_linestyle() in ("None", "", " "):
            continue
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        keep = np.isfinite(x) & np.isfinite(y)
        if ax.get_xscale() == "log":
            keep &= x > 0
        if ax.get_yscale() == "log":
            keep &= y > 0
        if keep.sum() < 2:
            continue
        xy = ax.transData.transform(np.c_[x[keep], y[keep]])
        for a, b in zip(xy[:-1], xy[1:], strict=True):
            n = max(2, int(np.hypot(*(b - a)) / step) + 1)
            out.append(a + np.linspace(0, 1, n)[:, None] * (b - a))
    return np.concatenate(out)


def clear_notes(fig) -> bool:
    """House rule: a note beside a data point ("1/10 exploded", `mark_exploded`) covers
    none of its panel's data points and crosses none of its lines: where it does, it
    goes to the first place around its point (`_NOTE_PLACES`) where it covers none and
    stays inside the panel; where there is none, the panel's vertical range grows
    upwards (by a tenth, up to three times, `_headroom`) and the places are tried again;
    else it stays where it was put. **Returns:** whether a panel grew (the layout then
    measures it again)."""
    renderer = fig.canvas.get_renderer()
    grew = False
    for ax in fig.axes:
        notes = [t for t in ax.texts if getattr(t, "meanfield_beside", False) and t.get_visible()]
        for note in notes:
            placed = _place_note(ax, note, renderer)
            for _ in range(3):  # at most a third more room above
                if placed or not _headroom(ax, 0.1):
                    break
                grew, placed = True, _place_note(ax, note, renderer)
            if not placed:
                note.xyann, ha = note.meanfield_first
                note.set_horizontalalignment(ha)
    return grew


def _place_note(ax, note, renderer) -> bool:
    """Put `note` at the first place inside `ax` covering none of its marked points and
    lines: where it was put, else one of `_NOTE_PLACES`. **Returns:** whether there was
    one."""
    if not hasattr(note, "meanfield_first"):  # where it was put, kept for the next pass
        note.meanfield_first = (tuple(note.xyann), note.get_horizontalalignment())
    points = np.concatenate([_marked_points(ax), _line_samples(ax)])
    panel = ax.get_window_extent(renderer)
    for (dx, dy), ha in [note.meanfield_first, *(((x, y), h) for x, y, h in _NOTE_PLACES)]:
        note.xyann = (dx, dy)
        note.set_horizontalalignment(ha)
        box = note.get_window_extent(renderer)
        inside = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0
        if inside and box.y1 <= panel.y1 and not note_covers(note, points, renderer):
            return True
    return False


# where a legend inside its panel may go, in order, before it leaves the panel
_LEGEND_PLACES = ("upper right", "upper left", "lower left", "lower right", "center right",
                  "center left", "upper center", "lower center")  # fmt: skip


def _marked_points(ax) -> np.ndarray:
    """The display coordinates of every data point `ax` marks (line markers, scatter
    offsets) that lies inside the panel."""
    pts = []
    for line in ax.get_lines():
        if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
            continue
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        if x.size == y.size and x.size:
            pts.append(np.c_[x, y])
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets(), dtype=float)
        if c.get_visible() and offsets.ndim == 2 and offsets.shape[0] and offsets.shape[1] == 2:
            if c.get_offset_transform() == ax.transData:
                pts.append(offsets)
    if not pts:
        return np.empty((0, 2))
    xy = np.concatenate(pts)
    xy = xy[np.isfinite(xy).all(axis=1)]
    for i, scale in enumerate((ax.get_xscale(), ax.get_yscale())):
        if scale == "log":
            xy = xy[xy[:, i] > 0]
    if not xy.size:
        return np.empty((0, 2))
    shown = ax.transData.transform(xy)
    box = ax.get_window_extent()
    inside = ((shown[:, 0] >= box.x0) & (shown[:, 0] <= box.x1)
              & (shown[:, 1] >= box.y0) & (shown[:, 1] <= box.y1))  # fmt: skip
    return shown[inside]


def legend_covers(ax, renderer=None) -> bool:
    """Whether `ax`'s legend, inside its panel, covers one of the panel's data points."""
    leg = ax.get_legend()
    if leg is None or not leg.get_visible():
        return False
    box = leg.get_window_extent(renderer)
    if not box.overlaps(ax.get_window_extent()):
        return False
    pts = _marked_points(ax)
    return bool(((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1)
                 & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)).any())  # fmt: skip


def clear_legends(fig) -> bool:
    """House rule: a legend never covers data, nor stands beside its panel (where the
    next panel is). A legend inside its panel that covers a data point, or one beside
    its panel, moves to the first corner or side of the panel where it covers none; else
    the panel's vertical range grows upwards until the data leave the legend's height free
    at the top, and the legend goes there; a legend taller than 60% of its panel goes
    under the panel, and the figure grows by its height (the tallest of each row's).
    **Returns:** whether any legend left its panel or came back into it (the layout then
    gives the room again)."""
    renderer = fig.canvas.get_renderer()
    moved_out, grow = False, {}
    for ax in fig.axes:
        if _sticks_out(ax, renderer):  # beside its panel, over the next one: back inside
            ax.get_legend().set_bbox_to_anchor(None)
            moved_out = True  # (the panel may now take the room it left)
        elif not (legend_covers(ax, renderer) or _wider_than_panel(ax, renderer)):
            continue
        leg = ax.get_legend()
        if not _inside(ax, leg, renderer):
            continue
        if not _wider_than_panel(ax, renderer):
            for place in _LEGEND_PLACES:
                leg.set_loc(place)
                if not legend_covers(ax, renderer):
                    break
            if not legend_covers(ax, renderer):
                continue
            share = leg.get_window_extent(renderer).height / ax.get_window_extent().height
            if share < 0.6 and _headroom(ax, share + 0.04):
                leg.set_loc("upper right")
                if not legend_covers(ax, renderer):
                    continue
                leg.set_loc("upper left")
                if not legend_covers(ax, renderer):
                    continue
        # under the panel, below its tick labels and axis label
        from matplotlib import transforms

        under = transforms.offset_copy(ax.transAxes, fig=fig, y=-36, units="points")
        leg.set_bbox_to_anchor((0.5, 0.0), transform=under)
        leg.set_loc("upper center")
        leg.meanfield_under = True
        moved_out = True
        spec = ax.get_subplotspec()
        row = spec.get_topmost_subplotspec().rowspan.start if spec else id(ax)
        grow[row] = max(grow.get(row, 0.0), leg.get_window_extent(renderer).height)
    if grow:  # the figure grows by what the legends now under their panels take
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + sum(grow.values()) / fig.dpi)
    return moved_out


def _placed_legend(ax):
    """`ax`'s legend where it is shown and the house rule has not yet put it under the
    panel; else None."""
    leg = ax.get_legend()
    if leg is None or not leg.get_visible() or getattr(leg, "meanfield_under", False):
        return None
    return leg


def _inside(ax, leg, renderer) -> bool:
    """Whether the legend `leg` lies (mostly) over its panel `ax`."""
    box, panel = leg.get_window_extent(renderer), ax.get_window_extent()
    return box.overlaps(panel) and box.y1 > panel.y0 + 0.5 * box.height


def _wider_than_panel(ax, renderer) -> bool:
    """Whether `ax`'s legend, over its panel, is wider than the panel (it runs over the
    tick labels and into the next panel)."""
    leg = _placed_legend(ax)
    if leg is None:
        return False
    box, panel = leg.get_window_extent(renderer), ax.get_window_extent()
    return _inside(ax, leg, renderer) and box.width > panel.width + 2 * ax.figure.dpi / 72


def _sticks_out(ax, renderer) -> bool:
    """Whether `ax`'s legend stands beside its panel (left or right of it, where the next
    panel is), unless the house rule put it there."""
    leg = _placed_legend(ax)
    if leg is None:
        return False
    box, panel = leg.get_window_extent(renderer), ax.get_window_extent()
    pad = 3 * ax.figure.dpi / 72
    return box.x0 > panel.x1 - pad or box.x1 < panel.x0 + pad


def _headroom(ax, share: float) -> bool:
    """Grow `ax`'s vertical range upwards so that its data fill the lower `1 - share` of
    the panel (on a log axis, in decades). **Returns:** False where it cannot (an
    inverted or degenerate range)."""
    lo, hi = ax.get_ylim()
    if not hi > lo:
        return False
    if ax.get_yscale() == "log":
        if lo <= 0:
            return False
        top = math.log10(lo) + (math.log10(hi) - math.log10(lo)) / (1 - share)
        ax.set_ylim(lo, 10.0**top)
    elif ax.get_yscale() == "linear":
        ax.set_ylim(lo, lo + (hi - lo) / (1 - share))
    else:
        return False
    return True
