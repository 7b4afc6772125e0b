"""The house style of every study's figure: a style sheet shipped with the package
(`house.mplstyle`: sizes in points at the saved size, line widths, Okabe & Ito's
colour-blind-safe palette), the palette by name (`COLORS`), the width a figure may take
(`fit_width`: a figure wider than a page's text width gets its panels re-flowed into
more rows, never its text shrunk below what the style sheet says), and the rules
`io.plotting.layout` applies to every text: sub- and superscripts typed as in LaTeX
typeset (`typeset_math`), titles and labels wrapped at their panel (`wrap_titles`), tick
labels that would collide thinned (`thin_tick_labels`).

Use the style in a figure of your own with `plt.style.use("meanfield.io.house")`, or
within `with house_style():`."""

import contextlib
import math
import re
from pathlib import Path

STYLE = Path(__file__).with_name("house.mplstyle")

#: Okabe & Ito's palette (Color Universal Design, 2008) under the names the figures use;
#: "red" is their vermillion, "gray" a mid grey. `COLORS["blue"]` etc.
COLORS = {
    "blue": "#0072B2",
    "red": "#D55E00",
    "green": "#009E73",
    "orange": "#E69F00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
    "gray": "#767676",
}
#: the order a figure's series take them (the style sheet's `axes.prop_cycle`)
CYCLE = tuple(COLORS[n] for n in ("blue", "red", "green", "orange", "purple", "sky",
                                  "black", "yellow"))  # fmt: skip

#: the widest a study's figure is saved, in inches: a page's text width (A4 or letter
#: with 2.5 cm margins and a little less), so that a figure put in a paper at its width
#: shows its text at the sizes the style sheet gives
WIDTH_IN = 7.0
#: the least resolution of a figure's PNG, dots per inch: 1050 pixels across a page-wide
#: figure, its smallest text (6 pt) 12 pixels high on a screen
DPI = 150
#: the narrowest a panel is made when panels are re-flowed (three panels a row at 7 in)
PANEL_MIN_IN = 2.3
#: what a panel's tick labels and axis label take beside its axes, in inches
LABELS_IN = 0.55


@contextlib.contextmanager
def house_style():
    """Within: matplotlib's settings are the house style sheet's (`STYLE`) on top of the
    current ones; restored after."""
    import matplotlib.style

    with matplotlib.style.context(STYLE):
        yield


def _panel_cells(fig):
    """The figure's panels grouped by the cell of its one top-level grid each sits in (a
    colourbar made beside a panel shares its cell), in reading order, as
    `[(row, col, top_subplotspec, [axes...]), ...]` with the grid; None where the figure
    is not one grid of single cells (an axes placed by hand, a panel spanning cells,
    columns of unequal widths): such a figure is only made narrower."""
    cells, grid = {}, None
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None:
            return None
        top = spec.get_topmost_subplotspec()
        gs = top.get_gridspec()
        if grid is None:
            grid = gs
        if gs is not grid or len(top.rowspan) != 1 or len(top.colspan) != 1:
            return None
        cells.setdefault((top.rowspan.start, top.colspan.start), (top, []))[1].append(ax)
    if grid is None:
        return None
    ratios = [grid.get_width_ratios(), grid.get_height_ratios()]
    if any(r is not None and len(set(r)) > 1 for r in ratios):
        return None
    return grid, [(r, c, top, axes) for (r, c), (top, axes) in sorted(cells.items())]


def _is_empty(ax) -> bool:
    """A panel that shows nothing: hidden, or switched off with nothing in it."""
    if not ax.get_visible():
        return True
    holds = (ax.lines, ax.collections, ax.images, ax.patches, ax.texts, ax.tables)
    return not ax.axison and not any(holds) and ax.get_legend() is None


def _widest_legend_in(fig) -> float:
    """The width, in inches, of the widest legend drawn with a panel (a panel is made at
    least this wide: a legend wider than its panel runs into the next one)."""
    renderer = fig.canvas.get_renderer()
    widths = [ax.get_legend().get_window_extent(renderer).width for ax in fig.axes
              if ax.get_legend() is not None and ax.get_legend().get_visible()]  # fmt: skip
    return max(widths, default=0.0) / fig.dpi


def fit_width(fig, width_in: float = WIDTH_IN) -> bool:
    """House rule: a figure no wider than `width_in` inches, its text kept at its size.
    A wider figure whose panels form one grid gets, in each of the grid's rows, as many
    panels a row as fit at `PANEL_MIN_IN` inches or more (and no narrower than its widest
    legend and `LABELS_IN` beside it), balanced (a row of four becomes two rows of two;
    of five, three and two), in reading order, and grows downwards; panels keep their
    aspect down to three quarters of their height; a panel that shows nothing is
    dropped. Tick labels a shared axis hid are shown again (a panel may now head a
    column). Any other figure is scaled down to the width, keeping its aspect.
    **Returns:** whether the figure changed."""
    import matplotlib.gridspec

    w0, h0 = fig.get_size_inches()
    if w0 <= width_in * 1.001:
        return False
    found = _panel_cells(fig)
    if found is None:
        fig.set_size_inches(width_in, h0 * width_in / w0)
        return True
    grid, cells = found
    for _r, _c, _top, axes in cells:
        for ax in axes:
            if _is_empty(ax):
                fig.delaxes(ax)
    cells = [(r, c, top, [a for a in axes if a in fig.axes]) for r, c, top, axes in cells]
    cells = [cell for cell in cells if cell[3]]
    if not cells:
        fig.set_size_inches(width_in, h0 * width_in / w0)
        return True
    rows, cols = grid.get_geometry()
    per_row = {}
    for r, *rest in cells:
        per_row.setdefault(r, []).append(rest)
    widest = max(len(v) for v in per_row.values())
    most = max(1, int(width_in // max(PANEL_MIN_IN, _widest_legend_in(fig) + LABELS_IN)))
    lines = math.ceil(widest / most)  # each old row becomes this many rows
    new_cols = math.ceil(widest / lines)
    panel_w0, panel_h0 = w0 / cols, h0 / rows
    panel_w = width_in / new_cols
    panel_h = panel_h0 * min(1.0, max(0.75, panel_w / panel_w0))
    new_rows = sum(math.ceil(len(v) / new_cols) for v in per_row.values())
    fig.set_size_inches(width_in, panel_h * new_rows)
    new = matplotlib.gridspec.GridSpec(new_rows, new_cols, figure=fig)
    row = 0
    for r in sorted(per_row):
        for k, (_c, top, axes) in enumerate(per_row[r]):
            place = new[row + k // new_cols, k % new_cols]
            for ax in axes:
                spec = ax.get_subplotspec()
                if spec is top:
                    ax.set_subplotspec(place)
                else:  # a panel and its colourbar: their shared cell moves (matplotlib
                    # has no public setter for a nested grid's parent cell)
                    spec.get_gridspec()._subplot_spec = place
                    ax.set_subplotspec(spec)
        row += math.ceil(len(per_row[r]) / new_cols)
    for ax in fig.axes:  # a panel that moved may now head a column or start a row
        if ax.get_shared_x_axes().get_siblings(ax)[1:]:
            ax.xaxis.set_tick_params(labelbottom=True)
        if ax.get_shared_y_axes().get_siblings(ax)[1:]:
            ax.yaxis.set_tick_params(labelleft=True)
    return True


# a sub- or superscript typed as in LaTeX outside mathtext: h^l, L^-p, 2^(k+1), V_j, f_5
# (a subscript's base is one letter, or a closing bracket or norm: `output_error_fixed_D`
# is a name, left alone)
_SCRIPT = re.compile(
    r"(?<=\S)\^(-?[\w.′*]+|\([^()$]*\)|\{[^{}$]*\})"
    r"|(?:(?<=(?<![\w.])[A-Za-zα-ωΑ-Ω])|(?<=[)\]}|‖]))"
    r"_(\w|\([^()$]*\)|\{[^{}$]*\})(?![^\W¹²³⁴⁵⁶⁷⁸⁹⁰])"
)


def typeset(text: str) -> str:
    """`text` with each sub- and superscript typed as in LaTeX outside mathtext (`h^l`,
    `L^-p`, `V_j`, `f_5^(D)`) set as one (`h$^{\\mathregular{l}}$`: raised or lowered, in
    the text's own upright font); mathtext already there, a name like `q_proj`, and a text
    with an unpaired `$` are left alone."""
    if "^" not in text and "_" not in text or text.count("$") % 2:
        return text

    def script(m):
        mark, arg = ("^", m.group(1)) if m.group(1) is not None else ("_", m.group(2))
        if arg[0] == "{":
            arg = arg[1:-1]
        return "$" + mark + "{\\mathregular{" + arg + "}}$"

    parts = text.split("$")
    return "$".join(p if i % 2 else _SCRIPT.sub(script, p) for i, p in enumerate(parts))


def typeset_math(fig) -> None:
    """House rule: no mathematics printed raw. Every title, axis label, legend entry and
    note of `fig` gets its LaTeX-typed sub- and superscripts set (`typeset`)."""
    texts = [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        texts += list(ax.texts)
        legend = ax.get_legend()
        if legend is not None:
            texts += [legend.get_title(), *legend.get_texts()]
    texts += list(fig.texts) + [t for leg in fig.legends for t in leg.get_texts()]
    for t in texts:
        text = t.get_text()
        if text:
            new = typeset(text)
            if new != text:
                t.set_text(new)


def wrap_titles(fig) -> bool:
    """House rule: a panel's title no wider than its panel (it ran into the next panel's):
    a wider one is wrapped onto more lines at the panel's width; its axis labels likewise
    (the y label at the panel's height), a note placed in the panel's coordinates at the
    room it has from where it starts, the figure's title at the figure's width.
    Mathtext (`$...$`) is never broken (a line break inside it would not render), nor
    `a = b`. **Returns:** whether any text was wrapped."""
    renderer = fig.canvas.get_renderer()
    titles = []
    for ax in fig.axes:
        box = ax.get_window_extent()
        titles += [(ax.title, box.width, "width"), (ax.xaxis.label, 0.9 * box.width, "width"),
                   (ax.yaxis.label, 0.9 * box.height, "height")]  # fmt: skip
        for note in ax.texts:  # a note placed in the panel's own coordinates: inside it
            if note.get_transform() == ax.transAxes and note.get_rotation() == 0:
                x = note.get_position()[0]
                share = {"left": 1 - x, "right": x}.get(note.get_horizontalalignment(), 1.0)
                titles.append((note, 0.96 * max(share, 0.3) * box.width, "width"))
    if getattr(fig, "_suptitle", None) is not None:  # the figure's title: at its width
        titles.append((fig._suptitle, 0.97 * fig.bbox.width, "width"))
    wrapped_any = False
    for title, room, along in titles:
        text = title.get_text()
        if not text.strip() or text.count("$") % 2 or not title.get_visible():
            continue
        width = getattr(title.get_window_extent(renderer), along)
        if width <= 1.02 * room or room <= 0:
            continue
        # wrapped again (the panel narrower once laid out): from the words as written
        text = getattr(title, "meanfield_unwrapped", text)
        title.meanfield_unwrapped = text
        title.set_text(text)
        width = getattr(title.get_window_extent(renderer), along)
        # mathtext ($...$) is never broken: its spaces are held while wrapping
        parts = text.split("$")
        held = "$".join(p.replace(" ", "\0") if i % 2 else p.replace(" = ", "\0=\0")
                        for i, p in enumerate(parts))  # fmt: skip
        longest = max(_shown_length(line) for line in held.split("\n"))
        chars = max(16, int(longest * room / width * 0.95))
        for _ in range(6):  # until the lines measure no wider than the room
            wrapped = "\n".join(_wrap(line, chars) for line in held.split("\n"))
            title.set_text(wrapped.replace("\0", " "))
            if chars <= 16 or getattr(title.get_window_extent(renderer), along) <= room:
                break
            chars = max(16, int(chars * 0.9))
        wrapped_any = True
    return wrapped_any


def _shown_length(text: str) -> int:
    """How many characters `text` shows: mathtext's markup (`$`, `^{\\mathregular{`,
    braces) counts for nothing."""
    return len(re.sub(r"\\mathregular|[${}^_\\]", "", text))


def _wrap(line: str, chars: int) -> str:
    """`line` broken at spaces into lines of at most `chars` shown characters (a longer
    word alone on its line)."""
    out, current = [], ""
    for word in line.split(" "):
        joined = f"{current} {word}" if current else word
        if current and _shown_length(joined) > chars:
            out.append(current)
            joined = word
        current = joined
    return "\n".join([*out, current])


def thin_tick_labels(fig) -> bool:
    """House rule: tick labels never run into each other. Where neighbouring labels of an
    axis overlap, only every k-th tick keeps its label (the smallest k that clears them,
    counted from the first); every tick stays, and the axis keeps these ticks from then
    on. **Returns:** whether any axis was thinned."""
    from matplotlib import ticker

    renderer = fig.canvas.get_renderer()
    thinned = False
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        ax.get_tightbbox(renderer)  # the ticks and their labels as the panel now is
        for name in ("x", "y"):
            axis = getattr(ax, f"{name}axis")
            lo, hi = sorted(axis.get_view_interval())
            pad = 1e-9 * max(abs(lo), abs(hi), 1e-300)
            shown = sorted(
                (float(loc), label)
                for loc, label in zip(axis.get_majorticklocs(), axis.get_ticklabels(),
                                      strict=False)
                if label.get_visible() and label.get_text().strip()
                and lo - pad <= loc <= hi + pad
            )  # fmt: skip
            boxes = [label.get_window_extent(renderer).padded(1) for _, label in shown]

            def clash(keep, boxes=boxes):
                pairs = zip(keep, keep[1:], strict=False)
                return any(boxes[a].overlaps(boxes[b]) for a, b in pairs)

            count = len(shown)
            if count < 2 or not clash(list(range(count))):
                continue
            step = next((k for k in range(2, count) if not clash(list(range(0, count, k)))),
                        count)  # fmt: skip
            kept = {loc: label.get_text() for loc, label in shown[::step]}

            def text(v, _pos, kept=kept):
                return next((t for x, t in kept.items() if math.isclose(v, x, rel_tol=1e-9)), "")

            axis.set_major_locator(ticker.FixedLocator([loc for loc, _ in shown]))
            axis.set_major_formatter(ticker.FuncFormatter(text))
            thinned = True
    return thinned
