"""The house style (issue 77, item 1): a shipped style sheet, figures no wider than a
page with their panels re-flowed and their text kept at its size, tick labels thinned
where they collide, the figure's title clear of the panels, `meanfield plot --width-in`.
Each rule is shown breaking the figure check (`figure_check.style_problems`) without it."""

import gzip
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
from figure_check import style_problems  # noqa: E402

from meanfield.io import style  # noqa: E402
from meanfield.io.plotting import figure_export, save_figure  # noqa: E402


def _rows_and_columns(axes):
    """The distinct rows and columns the panels sit in, read off their positions."""
    boxes = [ax.get_position() for ax in axes]
    rows = sorted({round(b.y0, 3) for b in boxes})
    cols = sorted({round(b.x0, 3) for b in boxes})
    return rows, cols


def test_the_style_sheet_loads_by_name_and_within_figure_export():
    """`plt.style.use("meanfield.io.house")` finds the sheet in the installed package;
    within `figure_export` figures take its sizes and Okabe & Ito's colours, restored
    after."""
    assert style.STYLE.is_file()
    with plt.style.context("meanfield.io.house"):
        assert plt.rcParams["font.size"] == 8
        first = plt.rcParams["axes.prop_cycle"].by_key()["color"][0]
        assert first.lower().lstrip("#") == style.COLORS["blue"].lower().lstrip("#")
    before = plt.rcParams["font.size"]
    with figure_export():
        assert plt.rcParams["font.size"] == 8 and plt.rcParams["pdf.fonttype"] == 42
    assert plt.rcParams["font.size"] == before
    sizes = [plt.rcParams[k] for k in ("xtick.labelsize", "ytick.labelsize", "legend.fontsize")]
    with plt.style.context(style.STYLE):
        sizes = [plt.rcParams[k] for k in ("xtick.labelsize", "ytick.labelsize",
                                            "legend.fontsize", "axes.titlesize")]  # fmt: skip
    assert min(sizes) >= 6  # the sheet itself keeps the rule


def _text_sizes(fig):
    """Each title's, axis label's and legend text's (words, size), and the tick labels'
    sizes."""
    out = set()
    for ax in fig.axes:
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.get_legend().get_texts()]
        out |= {(t.get_text(), t.get_fontsize()) for t in texts}
        out |= {("tick", t.get_fontsize()) for t in ax.get_xticklabels() + ax.get_yticklabels()}
    return out


def _row_of_panels(n, width, *, legend="", sharey=False):
    fig, axes = plt.subplots(1, n, figsize=(width, 3.2), squeeze=False, sharey=sharey)
    for i, ax in enumerate(axes.flat):
        ax.plot([1, 2, 3], [3, 1 + i, 2], "o-", label=legend or f"series {i}")
        ax.set(title=f"panel {i}", xlabel="depth L", ylabel="error")
        ax.legend(fontsize=6.5, loc="upper center")
    return fig, list(axes.flat)


def test_a_wide_row_of_panels_is_reflowed_to_a_page_with_its_text_kept(tmp_path, figure_problems):
    """Five panels in a 16 in row (text 6.5 pt: 2.8 pt once printed 7 in wide) become
    rows of three and two at 7 in, every text at its size; shared y tick labels shown
    again on the panel that now starts a row. A figure no wider is left alone."""
    fig, axes = _row_of_panels(5, 16, sharey=True)
    sizes = _text_sizes(fig)
    save_figure(fig, tmp_path / "five.png", dpi=80)
    assert tuple(fig.get_size_inches().round(3))[0] == style.WIDTH_IN
    rows, cols = _rows_and_columns(axes)
    assert (len(rows), len(cols)) == (2, 3)
    assert _text_sizes(fig) == sizes
    assert axes[3].yaxis.get_tick_params()["labelleft"]  # starts the second row
    assert figure_problems == []  # (checked as saved: tests/conftest.py)
    fig, axes = _row_of_panels(2, 6)
    save_figure(fig, tmp_path / "two.png", dpi=80)
    assert tuple(fig.get_size_inches()) == (6, 3.2)
    width, dpi = 3.4, 100
    with figure_export(width_in=width, dpi=dpi):  # a column's width: one panel a row
        fig, axes = _row_of_panels(4, 12)
        save_figure(fig, tmp_path / "column.png", dpi=80)
    image = plt.imread(tmp_path / "column.png")
    assert image.shape[1] <= width * dpi + 1
    assert len(_rows_and_columns(axes)[1]) == 1


def test_a_panel_is_never_made_narrower_than_its_legend(tmp_path, figure_problems):
    """Three panels whose legends are 3 in wide: two a row at 7 in (three would put each
    legend over its neighbour's panel); the check finds the overlap when they are forced
    three a row."""
    legend = "a legend entry of a great many words, some 3 inches"
    fig, axes = _row_of_panels(3, 15, legend=legend)
    save_figure(fig, tmp_path / "wide.png", dpi=80)
    assert len(_rows_and_columns(axes)[1]) == 2
    assert figure_problems == []
    before = style.PANEL_MIN_IN, style.LABELS_IN
    try:  # the rule switched off: legends no longer count
        style.LABELS_IN = -10.0
        fig, axes = _row_of_panels(3, 15, legend=legend)
        save_figure(fig, tmp_path / "forced.png", dpi=80)
        assert len(_rows_and_columns(axes)[1]) == 3
        assert any("overlap" in p for p in figure_problems)
    finally:
        style.PANEL_MIN_IN, style.LABELS_IN = before


def test_a_panel_and_its_colourbar_move_together(tmp_path, figure_problems):
    """A heat map's colourbar shares its panel's cell: re-flowed, it stays beside its
    own panel (same row, to its right)."""
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.5))
    for ax in axes:
        image = ax.imshow(np.arange(12.0).reshape(3, 4))
        fig.colorbar(image, ax=ax)
    save_figure(fig, tmp_path / "maps.png", dpi=80)
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 4 and fig.get_size_inches()[0] == pytest.approx(style.WIDTH_IN)
    for ax, bar in zip(axes, bars, strict=True):
        a, b = ax.get_position(), bar.get_position()
        assert b.x0 >= a.x1 - 1e-6 and abs((b.y0 + b.y1) - (a.y0 + a.y1)) < 0.1
    assert len(_rows_and_columns(list(axes))[0]) == 2
    assert figure_problems == []


def test_colliding_tick_labels_are_thinned_never_dropped_as_ticks(tmp_path, figure_problems):
    """Twelve labelled ticks on a 2 in axis ran into each other (the check says so);
    `layout` keeps every tick and labels every k-th, the first kept."""

    def panel():
        fig, ax = plt.subplots(figsize=(2.2, 2.2))
        sizes = [2**k for k in range(1, 13)]
        ax.plot(sizes, np.ones(12), "o")
        ax.set_xscale("log")
        ax.set_xticks(sizes, [str(s) for s in sizes])
        return fig, ax, sizes

    fig, ax, sizes = panel()
    fig.tight_layout()
    fig.savefig(tmp_path / "crowded.png", dpi=80)
    assert any("run into each other" in p for p in style_problems(fig))
    fig, ax, sizes = panel()
    save_figure(fig, tmp_path / "thinned.png", dpi=80)
    assert list(ax.get_xticks()) == sizes
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "2" and 1 < sum(bool(t) for t in labels) < len(sizes)
    assert figure_problems == []


def test_the_figure_title_of_any_length_clears_the_panels(tmp_path, figure_problems):
    """A figure's title of 200 characters is wider than a 7 in figure (its ends cut off):
    `layout` wraps it at the figure's width, hangs it from the top edge and starts the
    panels below it, whatever `rect` the study guessed for it."""
    words = "the figure's title says what every panel shows and how it was measured " * 3

    def tall():
        fig, axes = plt.subplots(4, 2, figsize=(7, 12))
        for ax in axes.flat:
            ax.plot([1, 2], [1, 2], "o")
            ax.set_title("a panel's title")
        fig.suptitle(words.strip(), fontsize=10)
        return fig

    fig = tall()
    fig.canvas.draw()
    assert fig._suptitle.get_window_extent().width > fig.bbox.width  # cut off as it was
    fig = tall()
    save_figure(fig, tmp_path / "house.png", dpi=60, rect=(0, 0, 1, 0.99))
    text = fig._suptitle.get_text()
    assert "\n" in text and " ".join(text.split()) == words.strip()
    assert figure_problems == []


def test_meanfield_plot_width_in(tmp_path, capsys):
    """`meanfield plot DIR --width-in W`: every figure at most W inches wide (its PNG's
    pixels over its dpi); by default at most a page's width; a width under 2 in refused
    in one line."""
    from meanfield.cli import main

    runs = Path(__file__).with_name("data") / "tiny_results"
    (tmp_path / "results.json").write_bytes(
        gzip.decompress((runs / "mean-ode.json.gz").read_bytes())
    )
    assert main(["plot", str(tmp_path), "--dpi", "100"]) == 0
    widths = [plt.imread(p).shape[1] for p in tmp_path.glob("*.png")]
    assert widths and max(widths) <= style.WIDTH_IN * 100 + 1
    assert main(["plot", str(tmp_path), "--dpi", "100", "--width-in", "3.5"]) == 0
    widths = [plt.imread(p).shape[1] for p in tmp_path.glob("*.png")]
    assert max(widths) <= 351
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["plot", str(tmp_path), "--width-in", "1"])
    assert capsys.readouterr().err.strip().endswith("--width-in: a number in [2.0, 40.0], got '1'")


def test_a_legend_wider_than_its_panel_goes_under_it(tmp_path, figure_problems):
    """A legend wider than its (narrow) panel ran over the panel's tick labels, which the
    check reports; `layout` puts it under the panel and the figure grows by its height."""

    def narrow():
        fig, ax = plt.subplots(figsize=(2.4, 2.4))
        ax.plot([1, 2, 3], [1, 2, 3], "o-", label="a legend entry far wider than the panel")
        ax.set_ylim(0, 8)
        ax.legend(loc="upper right", fontsize=7)
        return fig, ax

    fig, ax = narrow()
    fig.tight_layout()
    fig.savefig(tmp_path / "over.png", dpi=80)
    assert any("covers panel 0's tick labels" in p for p in style_problems(fig))
    fig, ax = narrow()
    save_figure(fig, tmp_path / "under.png", dpi=80)
    assert fig.get_size_inches()[1] > 2.4
    assert ax.get_legend().get_window_extent().y1 < ax.get_window_extent().y0
    assert figure_problems == []


def test_every_explicit_colour_is_the_house_palettes():
    """The studies name their colours from `style.COLORS` (Okabe & Ito's), never from
    matplotlib's default tableau (`"tab:red"`, which a reader with a red-green deficiency
    cannot tell from `"tab:green"`)."""
    root = Path(style.__file__).resolve().parents[1]
    found = [f"{p.relative_to(root.parent)}:{i}" for p in sorted(root.rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if '"tab:' in line or "'tab:" in line or "cm.tab" in line]  # fmt: skip
    assert found == []
    # a figure's series in the house palette's order
    from meanfield.io.plotting import series_by

    points = [{"g": g, "L": 1} for g in range(10)]
    assert [c for _, c, _ in series_by(points, "g")] == [*style.CYCLE, *style.CYCLE[:2]]
