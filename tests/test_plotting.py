"""Bars on log axes: the draws' geometric spread, never a std reaching below zero."""

import numpy as np
import pytest

from meanfield.io.plotting import log_spread, loglog_series


def test_log_spread_is_symmetric_on_a_log_axis_and_never_reaches_zero():
    mean, std = np.array([1.0, 1e-3, 5.0]), np.array([3.0, 1e-4, 0.0])  # std 3x the mean
    lower, upper = log_spread(mean, std)
    assert np.all(mean - lower > 0)  # mean − std = −2 would have reached the axis' floor
    np.testing.assert_allclose((mean - lower) * (mean + upper), mean**2)  # ×/÷ one factor
    assert lower[2] == upper[2] == 0.0
    assert np.isnan(log_spread([0.0], [1.0])).all()


def test_log_spread_matches_log_normal_draws():
    """For log-normal draws the factor is their geometric std (σ of the logs), within the
    Monte-Carlo error of 20000 draws."""
    rng = np.random.default_rng(0)
    for sigma in (0.2, 1.0):
        v = rng.lognormal(0.0, sigma, 20000)
        lower, upper = log_spread([v.mean()], [v.std()])
        factor = (v.mean() + upper[0]) / v.mean()
        assert abs(np.log(factor) - sigma) < 0.05 * sigma + 0.01, (sigma, np.log(factor))


def test_loglog_series_draws_bars_inside_the_positive_axis():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    loglog_series(ax, [1, 2, 4], [1.0, 0.5, 0.25], [2.0, 1.0, 0.5], label="x")
    ax.figure.canvas.draw()
    assert ax.get_ylim()[0] > 0.01  # a std twice the mean drew bars down to 1e-4 and below
    plt.close(fig)


def test_not_drawn_finds_a_missing_point_a_point_outside_and_a_missing_cell():
    """The figure check of issue 47 (tests/figure_check.py) on figures with known faults."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from figure_check import not_drawn

    fig, (a, b) = plt.subplots(1, 2)
    a.loglog([1, 2, 4], [1.0, 0.5, 0.25], "o-")
    a.set_title("error against L")
    b.imshow([[0.1, 0.2], [0.3, np.nan]])
    b.set_title("heat map")
    fig.canvas.draw()
    good = [("L=2", "against L", 2, 0.5), ("cell", "heat map", np.nan, 0.3)]
    assert not_drawn(fig, good) == []
    missing = not_drawn(fig, [("L=8", "against L", 8, 0.125), ("cell", "heat", np.nan, 0.4)])
    assert len(missing) == 2 and "L=8" in missing[0] and "cell" in missing[1]
    a.set_xlim(1.5, 5)  # the point at L=1 is now outside the panel's limits
    assert len(not_drawn(fig, [("L=1", "against L", 1, 1.0)])) == 1
    assert "no panel" in not_drawn(fig, [("x", "against M", 1, 1.0)])[0]
    plt.close(fig)


def test_layout_draws_a_log_axis_with_nothing_positive_and_says_so():
    """Issue 46: a criteria panel whose every value was 0 (inputs ×10^4: no feature
    moved) made matplotlib raise "Data cannot be log-scaled" and lost the figure."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import layout

    fig, (empty, zeros, fine) = plt.subplots(1, 3)
    empty.plot([], [], ":", label="theory")
    empty.set(xscale="log", yscale="log")
    zeros.plot([1.0, 2.0], [0.0, 0.0])
    zeros.set(xscale="log", yscale="log")
    fine.plot([1.0, 2.0], [0.0, 3.0])
    fine.set(xscale="log", yscale="log")
    with pytest.raises(ValueError, match="log-scaled"):
        fig.tight_layout()  # what it replaces fails on these axes
    layout(fig)
    fig.canvas.draw()
    assert (empty.get_xscale(), empty.get_yscale()) == ("linear", "linear")
    assert (zeros.get_xscale(), zeros.get_yscale()) == ("log", "linear")
    assert (fine.get_xscale(), fine.get_yscale()) == ("log", "log")
    said = lambda ax: [t.get_text() for t in ax.texts if "nothing positive" in t.get_text()]
    assert said(empty) and said(zeros) and not said(fine)
    plt.close(fig)


def test_layout_leaves_a_panel_that_already_says_why_it_is_empty():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import layout

    fig, ax = plt.subplots()
    ax.plot([1.0], [np.nan])
    ax.set_yscale("log")
    ax.text(0.5, 0.5, "every draw exploded", transform=ax.transAxes)
    layout(fig)
    assert ax.get_yscale() == "linear"
    assert [t.get_text() for t in ax.texts] == ["every draw exploded"]
    plt.close(fig)


def test_layout_at_the_saved_dpi_places_the_panels_as_at_the_default():
    """`layout(fig, dpi=...)` measures at the resolution the figure is saved at (a speed-up:
    saving reuses the measured text); the panels land where the default layout puts them,
    to within a pixel of the saved image."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import layout

    def panels(dpi):
        fig, axes = plt.subplots(2, 3, figsize=(9, 5))
        for i, ax in enumerate(axes.flat):
            ax.loglog([1, 10, 100], [1e-3 * (i + 1), 1e-2, 1e-1], "o-", label=f"line {i}")
            ax.set(xlabel="depth L", ylabel="error", title=f"panel {i}: $\\Delta^h$ against L")
            ax.legend(fontsize=7)
        fig.suptitle("a title\nof two lines")
        layout(fig, dpi=dpi)
        boxes = np.array([ax.get_position().bounds for ax in axes.flat])
        plt.close(fig)
        return boxes

    at_default, at_saved = panels(None), panels(120)
    # figure fractions; a pixel of the saved 9 x 5 inch image at 120 dpi is 1/1080 x 1/600
    np.testing.assert_allclose(at_saved, at_default, atol=1 / 600)


def _saved_tick_labels(tmp_path, xlim, *, size_ticks_at=None):
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import save_figure, size_ticks

    fig, ax = plt.subplots()
    ax.loglog([xlim[0], xlim[1]], [1.0, 2.0], "o")
    ax.set_xlim(*xlim)
    if size_ticks_at:
        size_ticks(ax, size_ticks_at)
    save_figure(fig, tmp_path / "f.png", dpi=60)
    major = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    lo, hi = ax.get_xlim()
    shown = [t.get_text() for t in ax.get_xticklabels()
             if t.get_text() and lo <= t.get_position()[0] <= hi]  # fmt: skip
    minor = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
    return major, shown, minor


def test_a_short_log_axis_is_labelled_in_plain_numbers_at_three_ticks_or_more(tmp_path):
    """Over less than two decades matplotlib's default labels collide ("3×10¹4×10¹"):
    the saved figure shows plain numbers, at least three inside the axis, no minor
    labels; a longer axis and an axis a figure ticked itself keep their labels."""
    for xlim in [(3.5, 18.0), (8.0, 64.0), (30.0, 45.0), (0.02, 0.9)]:
        major, shown, minor = _saved_tick_labels(tmp_path, xlim)
        assert len(shown) >= 3 and not minor, (xlim, major, minor)
        assert all("10^" not in t and "times" not in t for t in major), (xlim, major)
        assert all(xlim[0] <= float(t) <= xlim[1] for t in shown)  # plain numbers
    major, _, _ = _saved_tick_labels(tmp_path, (1.0, 1e4))
    assert any("10^" in t for t in major), major  # matplotlib's own, four decades
    major, _, _ = _saved_tick_labels(tmp_path, (4.0, 16.0), size_ticks_at=[4, 8, 16])
    assert major == ["4", "8", "16"]


def test_an_interval_is_never_printed_collapsed():
    """`interval_text`: two decimals where they tell the numbers apart; more (up to six)
    where they would print a tight interval's ends, or its value and an end, alike."""
    from meanfield.stats.fits import interval_text

    assert interval_text(-0.95, [-1.05, -0.84]) == "-0.95 [-1.05, -0.84]"
    assert interval_text(-1.0, [-1.003, -0.998]) == "-1.000 [-1.003, -0.998]"
    assert interval_text(-0.9981, [-0.9984, -0.9979]) == "-0.9981 [-0.9984, -0.9979]"
    assert interval_text(None, [0.5012, 0.5041]) == "[0.501, 0.504]"
    # an interval of no width (one draw, or identical draws) is said so, never [v, v]
    assert interval_text(0.5, [0.5, 0.5]) == "0.50 (no spread over the draws)"
    assert interval_text(-0.8083901, [-0.80839012, -0.80839009]) == (
        "-0.81 (no spread over the draws)"
    )
    assert interval_text(None, [2.0, 2.0]) == "2.00 (no spread over the draws)"
    assert interval_text(1.0, [float("nan"), float("nan")]) == "1.00 [nan, nan]"
    assert interval_text(1.0, [1.0 - 1e-5, 1.0 + 1e-5]) == "1.00000 [0.99999, 1.00001]"


def test_the_house_rules_catch_each_defect(tmp_path):
    """`figure_check.style_problems` on figures spoiled on purpose, one defect each (saved
    with matplotlib directly, so the suite's own check does not see them): text under 6
    pt, an interval printed as [v, v], tick labels running into each other, a log axis
    with one label, a legend over a point; a clean figure passes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from figure_check import style_problems

    def saved(draw):
        fig, ax = plt.subplots(figsize=(4, 3))
        draw(ax)
        fig.savefig(tmp_path / "f.png", dpi=80)
        found = style_problems(fig)
        plt.close(fig)
        return found

    def clean(ax):
        ax.plot([1, 2, 3], [1, 4, 9], "o", label="data")
        ax.legend(loc="upper left")

    assert saved(clean) == []
    tiny = saved(lambda ax: (clean(ax), ax.set_title("small", fontsize=5)))
    assert any("'small' is 5 pt" in p for p in tiny)
    collapsed = saved(lambda ax: (clean(ax), ax.set_title("slope 0.50 [0.50, 0.50]")))
    assert any("interval of no width" in p for p in collapsed)

    def crowded(ax):
        clean(ax)
        ax.set_xticks([1.0, 1.01, 1.02])
        ax.set_xticklabels(["one long label", "another long label", "a third"])

    assert any("x tick labels run into each other" in p for p in saved(crowded))

    def one_label(ax):
        ax.plot([2, 3, 4], [2.0, 2.5, 3.0], "o")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator([2.5]))

    assert any("log y axis has 1 labelled tick" in p for p in saved(one_label))

    def covered(ax):
        ax.plot([1, 2, 3], [9, 4, 1], "o", label="a long legend entry here")
        ax.legend(loc="upper left")

    assert any("legend covers a data point" in p for p in saved(covered))


def test_save_figure_moves_a_legend_off_the_data(tmp_path):
    """House rule in `layout` (every study's `save_figure`): a legend placed over a data
    point moves to a corner where it covers none; where every place inside covers one, the
    range grows upwards and the legend sits above the data; a legend too tall for that
    goes under the panel. Without the rule every legend here would cover points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import layout, legend_covers, save_figure

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([1, 2, 3], [9, 4, 1], "o", label="a long legend entry here")
    ax.legend(loc="upper left")
    fig.canvas.draw()
    assert legend_covers(ax)
    layout(fig, dpi=80)
    assert not legend_covers(ax) and ax.get_legend()._loc != 2  # no longer upper left
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    grid = np.linspace(0, 1, 25)
    xx, yy = np.meshgrid(grid, grid)
    ax.plot(xx.ravel(), yy.ravel(), ".", label="points everywhere, a long label")
    ax.legend(loc="center")
    layout(fig, dpi=80)
    # no clear corner: the range grows upwards and the legend sits above the data
    assert ax.get_ylim()[1] > 1.1 and not legend_covers(ax)
    box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert box.y0 > ax.transData.transform((0, 1.0))[1]
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    for k in range(14):  # a legend taller than the panel's 60%: under the panel
        ax.plot(xx.ravel(), yy.ravel() + k * 1e-3, ".", label=f"series {k}")
    ax.legend(loc="center")
    layout(fig, dpi=80)
    box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert box.y1 <= ax.get_window_extent().y0 and not legend_covers(ax)
    save_figure(fig, tmp_path / "b.png", dpi=80)


def test_a_note_beside_an_exploded_point_keeps_off_the_data(tmp_path, monkeypatch):
    """House rule in `layout`: "1/10 exploded" beside the highest, leftmost point of a
    crowded panel (the main job's law panels) covered the next point and crossed its
    fitted line; it moves to a free place around its point, the range growing upwards
    where there is none. The figure check finds the note over the data without the
    rule and nothing with it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from figure_check import style_problems

    import meanfield.io.plotting as plotting

    def draw(path):
        fig, ax = plt.subplots(figsize=(3.2, 2.6))
        L = np.array([8, 16, 32, 64, 128, 1024])
        for a in (5.0, 2.0, 1.0, 0.5):  # four lines of points, each fitted
            ax.plot(L, a * (8 / L) ** 0.5, "o")
            ax.plot(L, a * (8 / L) ** 0.5, "-", color="0.5")
        rows = [{"L": 8, "e": {"mean": 5.0, "exploded": 1, "count": 9}}]
        plotting.mark_exploded(ax, rows, "e", lambda r: r["L"])
        ax.set_xscale("log")
        ax.set_yscale("log")
        plotting.layout(fig, dpi=120)  # as `save_figure`, which then closes the figure
        fig.savefig(path, dpi=120)
        return fig

    def notes(fig):
        return [p for p in style_problems(fig) if "note" in p]

    with monkeypatch.context() as m:
        m.setattr(plotting, "clear_notes", lambda fig: False)
        assert notes(draw(tmp_path / "without.png"))
    fig = draw(tmp_path / "with.png")
    assert not notes(fig), notes(fig)
    ax = fig.axes[0]
    note = next(t for t in ax.texts if getattr(t, "meanfield_beside", False))
    panel = ax.get_window_extent(fig.canvas.get_renderer())
    box = note.get_window_extent(fig.canvas.get_renderer())
    assert panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0 <= box.y1 <= panel.y1


def test_layout_wraps_a_title_wider_than_its_panel(tmp_path):
    """House rule: two panels side by side with titles far wider than a panel ran into
    each other; `layout` wraps each onto lines no wider than its panel (the words kept),
    never inside mathtext."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from figure_check import style_problems

    from meanfield.io.plotting import layout

    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    long = "a title that says a great deal about what this panel shows, at some length"
    for ax in axes:
        ax.plot([1, 2], [1, 2], "o")
        ax.set_title(long, fontsize=9)
    axes[1].set_title(r"$\Delta^h$ " + long, fontsize=9)
    layout(fig, dpi=80)
    renderer = fig.canvas.get_renderer()
    first = axes[0].title
    assert "\n" in first.get_text() and " ".join(first.get_text().split()) == long
    assert first.get_window_extent(renderer).width <= 1.05 * axes[0].get_window_extent().width
    # mathtext never broken: wrapped only at spaces outside $...$, each line balanced
    lines = axes[1].title.get_text().split("\n")
    assert len(lines) > 1 and lines[0].startswith(r"$\Delta^h$")
    assert all(line.count("$") % 2 == 0 for line in lines)
    plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    for ax in axes:
        ax.plot([1, 2], [1, 2], "o")
        ax.set_title(long, fontsize=9)
    layout(fig, dpi=80)
    fig.savefig(tmp_path / "t.png", dpi=80)
    assert not [p for p in style_problems(fig) if "overlap" in p]
    plt.close(fig)
