"""The plain-vs-residual study's figures, drawn from its results.json: gradients through
depth against their prediction, per layer, and the training curves of the degradation
experiment.
"""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import log_spread, save_figure, size_ticks, use_agg
from ...io.style import COLORS
from ...models import plain
from .degradation import cells_of, train_architectures


def draw_figures(out: Path, cfg, configs, points, rates, degradation):
    """Every figure of the study: gradients through depth, the log-ratios and per-layer
    diagnostics, the measured rates against their prediction, and the training part."""
    use_agg()
    colors = {"normal": COLORS["red"], "xavier": COLORS["blue"], "he": COLORS["green"]}
    styles = {"1": "-", "1/sqrt(L)": "--"}
    deepest = max(points, key=lambda p: p["L"])
    _gradient_norms_figure(out, cfg, configs, deepest, colors, styles)
    _log_ratio_figure(out, cfg, configs, points, rates, colors, styles)
    for name, (text, scale) in LAYER_DIAGNOSTICS.items():
        _layer_figure(out, cfg, configs, deepest, name, text, scale, colors, styles)
    _rates_figure(out, cfg, rates, colors)
    _degradation_figure(out, cfg, degradation)
    _training_curves(out, cfg, degradation)
    _init_scale(out, cfg, degradation)


def _gradient_norms_figure(out: Path, cfg, configs, deepest, colors, styles):
    """gradient_norms.png: per architecture and activation, the gradient norm through the
    layers of the deepest network, relative to the last layer's."""
    import matplotlib.pyplot as plt

    acts = cfg["activations"]
    fig, axes = plt.subplots(3, len(acts), figsize=(3.6 * len(acts), 9), sharex=True, squeeze=False)
    for row, arch in enumerate(plain.ARCHITECTURES):
        for col, act in enumerate(acts):
            ax = axes[row, col]
            for c, cell in zip(configs, deepest["cells"], strict=True):
                if c["architecture"] != arch or c["activation"] != act or "log_grad" not in cell:
                    continue
                m = np.array(cell["log_grad"]["mean"], dtype=float)
                m = m - m[-1]  # relative to ‖∂L/∂h^L‖ = ‖B‖
                ax.plot(np.arange(m.size), m, styles[c["alpha"]], color=colors[c["init"]],
                        marker=".", markersize=2, label=f"{c['init']}, α={c['alpha']}")  # fmt: skip
            ax.set_title(f"{arch}, {act}", fontsize=9)
            _say_if_empty(ax, "every draw exploded at this depth")
            if col == 0:
                ax.set_ylabel("log10 ‖∂L/∂h^l‖ − log10 ‖∂L/∂h^L‖")
            if row == 2:
                ax.set_xlabel(f"layer l (L = {deepest['L']})")
            ax.legend(fontsize=6)
    fig.suptitle(
        f"Backpropagated gradient norm through depth at initialisation (N = {cfg['N']}, "
        f"mean over {cfg['seeds']} draws)"
    )
    save_figure(fig, out / "gradient_norms.png", dpi=110)


def _rates_figure(out: Path, cfg, rates, colors):
    """gradient_rates.png: every measured per-layer rate (95% interval) against its
    prediction at width N, with the infinite-width value where it lies apart."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    markers = {"plain": "o", "post-activation": "s", "pre-activation": "^"}
    for r in rates:
        if r["rate"] is None:
            continue
        lo, hi = r["rate_ci"]
        ax.errorbar(r["predicted_width_N"], r["rate"], yerr=[[r["rate"] - lo], [hi - r["rate"]]],
                    fmt=markers[r["architecture"]], color=colors[r["init"]], ms=5,
                    mfc="none" if r["alpha"] == "1/sqrt(L)" else None)  # fmt: skip
        # the N -> ∞ prediction where it lies apart from the width-N one (beyond 10% of it)
        gap = abs(r["predicted_width_N"] - r["predicted"])
        if gap > RELATIVE_TOLERANCE * abs(r["predicted"]):
            ax.plot(r["predicted"], r["rate"], "x", color="0.4", ms=7)
            ax.annotate("", (r["predicted_width_N"], r["rate"]), (r["predicted"], r["rate"]),
                        arrowprops={"arrowstyle": "->", "color": "0.4", "lw": 0.8})  # fmt: skip
    measured = [r["predicted_width_N"] for r in rates if r["rate"] is not None]
    if not measured:  # every configuration exploded at its fitted depths: said, not a crash
        ax.text(0.5, 0.5, "no rate measured: every configuration exploded at the fitted\n"
                "depths (see gradient_norms.png)", transform=ax.transAxes, ha="center",
                va="center", fontsize=9)  # fmt: skip
    lim = [min(measured, default=-1.0) - 0.3, max(measured, default=1.0) + 0.3]
    t = np.linspace(lim[0], lim[1], 200)
    ax.plot(t, t, "k-", lw=0.8, label="measured = predicted")
    ax.fill_between(t, t - RELATIVE_TOLERANCE * abs(t), t + RELATIVE_TOLERANCE * abs(t),
                    color="0.85", label=f"±{RELATIVE_TOLERANCE:.0%} (or the rate's 95% interval "
                    "holds the prediction)")  # fmt: skip
    for arch, mk in markers.items():
        ax.plot([], [], mk, color="0.3", label=arch)
    for init, col in colors.items():
        ax.plot([], [], "o", color=col, label=f"init {init}")
    ax.plot([], [], "o", mfc="none", color="0.3", label="α = 1/sqrt(L) (open)")
    ax.plot([], [], "x", color="0.4", label="infinite-width value, where apart (→ width N)")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_xlabel(f"predicted per-layer rate at width N = {cfg['N']} (independence model)")
    ax.set_ylabel("measured slope of log‖∂L/∂h^0‖² − log‖∂L/∂h^L‖² vs L (L ≤ N/16)")
    ax.set_title(f"Per-layer gradient growth rate: measured (N = {cfg['N']}, 95% CI) vs theory",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=7, loc="upper left")
    save_figure(fig, out / "gradient_rates.png", dpi=110)


def _degradation_figure(out: Path, cfg, degradation):
    """degradation.png: final training loss and test accuracy of every trained network
    against depth."""
    import matplotlib.pyplot as plt

    nets = train_architectures(cfg)
    rows = -(-len(nets) // 3)  # of the legend below the panels, three networks a row
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2 + 0.25 * rows))
    for net in train_architectures(cfg):
        mine = sorted(cells_of(degradation, net), key=lambda c: c["L"])
        mine = [c for c in mine if c["train_loss"] is not None]
        Ls = [c["L"] for c in mine]
        for ax, key in zip(axes, ("train_loss", "test_accuracy"), strict=True):
            means, stds = [c[key] for c in mine], [c[key + "_std"] or 0 for c in mine]
            bars = log_spread(means, stds) if key == "train_loss" else stds  # log axis: ×/÷
            ax.errorbar(Ls, means, yerr=bars, marker="o", capsize=3,
                        ls=_style(net), label=net.label)  # fmt: skip
    for ax, key in zip(axes, ("final training loss (cross-entropy)", "test accuracy"), strict=True):
        ax.set_xscale("log", base=2)
        size_ticks(ax, [c["L"] for c in degradation])
        ax.set_xlabel("depth L")
        ax.set_ylabel(key)
        ax.set_title(f"{key} against depth", fontsize=10)
        _say_if_empty(ax, "every draw exploded at every depth")
    axes[0].set_yscale("log")
    bottom = _legend_below(fig, axes[0], rows)
    fig.suptitle(
        f"Degradation: same budget ({cfg['train_steps']} full-batch Adam steps, lr {cfg['lr']}), "
        f"width {cfg['train_N']}, ReLU, teacher task; mean over {cfg['train_seeds']} draws, "
        "bars: loss ×/÷ its geometric spread, accuracy ± std",
        fontsize=9,
    )
    save_figure(fig, out / "degradation.png", dpi=110, rect=(0, bottom, 1, 1))


# the zoomed panel of init_scale.png shows ratios up to this (an exploding network leaves it)
ZOOM_TOP = 1e3


def _init_scale(out, cfg, degradation):
    """The mean square of the hidden state at initialisation, relative to the input
    layer's: per layer at the deepest trained depth (all, and zoomed to ratios below
    `ZOOM_TOP`), and at the last layer against depth; dotted, the exact expectation where
    the study judges one (pre-activation + BN at α = 1: + 1 per layer)."""
    import matplotlib.pyplot as plt

    cells = [c for c in degradation if c.get("init_mean_square")]
    if not cells:  # results from before the initial scale was recorded: no figure
        return
    rows = -(-(len(train_architectures(cfg)) + 1) // 3)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8 + 0.25 * rows))
    deep = max(c["L"] for c in cells)
    lowest, highest = np.inf, 0.0
    for i, net in enumerate(train_architectures(cfg)):
        mine = sorted(cells_of(cells, net), key=lambda c: c["L"])
        style = {"color": f"C{i % 10}", "ls": _style(net)}
        for c in mine:
            ms = np.array([np.nan if v is None else v for v in c["init_mean_square"]["mean"]])
            if c["L"] != deep:
                continue
            layers, ratio = np.arange(ms.size), ms / ms[0]
            lowest, highest = min(lowest, np.nanmin(ratio)), max(highest, np.nanmax(ratio))
            for ax in axes[:2]:
                ax.plot(layers, ratio, marker=".", markersize=3, label=net.label, **style)
            check = c.get("init_check")
            if check is not None:  # E ms(h^l) = E ms(h^0) + (increment / L) l
                line = 1 + check["predicted_increment"] / c["L"] * layers / ms[0]
                for ax in axes[:2]:
                    ax.plot(layers, line, "k:", lw=1.5, zorder=5)
        pts = [(c["L"], c["init_mean_square"]["mean"]) for c in mine]
        pts = [(L, m[-1] / m[0]) for L, m in pts if m[-1] is not None and m[0] is not None]
        if pts:
            axes[2].plot(*zip(*pts, strict=True), marker="o", label=net.label, **style)
        checks = [c for c in mine if c.get("init_check")]
        if checks:
            ratio = [1 + c["init_check"]["predicted_increment"] /
                     c["init_mean_square"]["mean"][0] for c in checks]  # fmt: skip
            axes[2].plot([c["L"] for c in checks], ratio, "k:", lw=1.5, zorder=5)
    for ax in axes[:2]:
        ax.set_xlabel(f"layer l (L = {deep})")
        ax.set_ylabel("mean of ms(h^l) / mean of ms(h^0)")
    axes[0].set_title(f"per layer, at the deepest trained depth L = {deep}", fontsize=10)
    zoomed = highest > ZOOM_TOP
    note = f"ratios up to {ZOOM_TOP:g} (zoomed)" if zoomed else "every ratio below 1000: not zoomed"
    axes[1].set_title(f"per layer, L = {deep}, {note}", fontsize=10)
    axes[2].set_xscale("log", base=2)
    size_ticks(axes[2], [c["L"] for c in cells])
    axes[2].set_xlabel("depth L")
    axes[2].set_ylabel("mean of ms(h^L) / mean of ms(h^0)")
    axes[2].set_title("at the last layer, against depth", fontsize=10)
    if any(c.get("init_check") for c in cells):
        label = "exact expectation (pre-activation + BN: + 1 per layer)"
        axes[2].plot([], [], "k:", lw=1.5, label=label)
    for ax in axes:
        ax.set_yscale("log")
    if zoomed:
        axes[1].set_ylim(0.7 * lowest if np.isfinite(lowest) else None, ZOOM_TOP)
    bottom = _legend_below(fig, axes[2], rows)
    fig.suptitle(
        "Scale of the hidden state at initialisation (ms: mean square over the "
        f"{cfg['task']['n_train']} training inputs and the {cfg['train_N']} units; mean over "
        f"{cfg.get('init_draws')} draws)",
        fontsize=10,
    )
    save_figure(fig, out / "init_scale.png", dpi=110, rect=(0, bottom, 1, 1))


def _legend_below(fig, ax, rows: int) -> float:
    """The legend of `ax`'s lines, below the panels in rows of three; **returns** the
    fraction of the figure's height it takes (the layout's bottom)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    return (0.012 + 0.045 * rows) * 4.6 / fig.get_figheight()


def _style(net) -> str:
    """Solid for the default networks, dashed with batch normalisation, dotted-dashed for
    those that widen."""
    return "--" if net.norm else ("-." if net.shortcut else "-")


def _log_ratio_figure(out, cfg, configs, points, rates, colors, styles):
    """Every gradient point: the mean log-ratio over the draws that did not explode, per
    configuration against L, beside the infinite-width prediction (dotted)."""
    import matplotlib.pyplot as plt

    acts = cfg["activations"]
    points = sorted(points, key=lambda p: p["L"])
    fig, axes = plt.subplots(3, len(acts), figsize=(3.6 * len(acts), 9), sharex=True, squeeze=False)
    for row, arch in enumerate(plain.ARCHITECTURES):
        for col, act in enumerate(acts):
            ax = axes[row, col]
            for i, (c, rate) in enumerate(zip(configs, rates, strict=True)):
                if c["architecture"] != arch or c["activation"] != act:
                    continue
                Ls, means = [], []
                for p in points:
                    good = [v for v in p["cells"][i]["log_ratio"] if v is not None]
                    if good:
                        Ls.append(p["L"])
                        means.append(float(np.mean(good)))
                ax.plot(Ls, means, styles[c["alpha"]], color=colors[c["init"]], marker="o",
                        markersize=3, label=f"{c['init']}, α={c['alpha']}")  # fmt: skip
                ax.plot(rate["depths"], rate["predicted_log_ratio"], ":", color=colors[c["init"]],
                        lw=1)  # fmt: skip
            ax.set_xscale("log", base=2)
            size_ticks(ax, cfg["L"])
            ax.set_title(f"{arch}, {act}", fontsize=9)
            if col == 0:
                ax.set_ylabel("log ‖∂L/∂h^0‖² − log ‖∂L/∂h^L‖²")
            if row == 2:
                ax.set_xlabel("depth L")
            if not _say_if_empty(ax, "every draw exploded at every depth"):
                ax.legend(fontsize=6)
    title = (
        f"Gradient log-ratio against depth at initialisation (N = {cfg['N']}, mean over the "
        f"draws of {cfg['seeds']} that did not explode; dotted: infinite-width prediction)"
    )
    save_figure(fig, out / "gradient_log_ratios.png", dpi=110, title=title)


def _layer_figure(out, cfg, configs, deepest, name, text, scale, colors, styles):
    """One per-layer diagnostic of the deepest gradient point (mean over the draws that
    did not explode), per configuration against the layer; the fraction of active units
    only for the activations with a kink at 0 (relu, leaky_relu)."""
    import matplotlib.pyplot as plt

    acts = [a for a in cfg["activations"] if any(
        name in cell for c, cell in zip(configs, deepest["cells"], strict=True)
        if c["activation"] == a
    )]  # fmt: skip
    if not acts:
        return
    fig, axes = plt.subplots(
        3, len(acts), figsize=(max(3.6 * len(acts), 8), 9), sharex=True, squeeze=False
    )
    for row, arch in enumerate(plain.ARCHITECTURES):
        for col, act in enumerate(acts):
            ax = axes[row, col]
            for c, cell in zip(configs, deepest["cells"], strict=True):
                if c["architecture"] != arch or c["activation"] != act or name not in cell:
                    continue
                m = np.array([np.nan if v is None else v for v in cell[name]["mean"]], float)
                ax.plot(np.arange(m.size), m, styles[c["alpha"]], color=colors[c["init"]],
                        marker=".", markersize=2, label=f"{c['init']}, α={c['alpha']}")  # fmt: skip
            if scale == "symlog":  # past 1e3 the decades below 1 would crowd the ticks
                ys = np.array([v for line in ax.get_lines() for v in line.get_ydata()], float)
                ys = ys[np.isfinite(ys)]
                big = ys.size and np.abs(ys).max() > 1e3
                ax.set_yscale("symlog", linthresh=1.0 if big else 1e-2)
                if big:  # 0 and at most 3 decades a side, far enough apart to read
                    step = max(1, math.ceil(math.log10(np.abs(ys).max()) / 3))
                    ticks = [0.0]
                    for sign in (-1, 1):
                        top = max((sign * ys).max(), 1.0)
                        ticks += [
                            sign * 10.0**e for e in range(step, int(math.log10(top)) + 1, step)
                        ]
                    ax.set_yticks(sorted(ticks))
            else:
                ax.set_yscale(scale)
            ax.set_title(f"{arch}, {act}", fontsize=9)
            if col == 0:
                ax.set_ylabel(text, fontsize=8)
            if row == 2:
                ax.set_xlabel(f"layer l (L = {deepest['L']})")
            if not _say_if_empty(ax, "every draw exploded at this depth"):
                ax.legend(fontsize=6)
    title = (
        f"Per-layer diagnostic at initialisation: {text}\n(N = {cfg['N']}, mean over the "
        f"draws of {cfg['seeds']} that did not explode; gaps: overflow)"
    )
    save_figure(fig, out / f"layer_{name}.png", dpi=110, title=title)


def _training_curves(out, cfg, degradation):
    """The mean training loss (over the draws that did not explode) before each recorded
    Adam step and after the last, per architecture and depth."""
    import matplotlib.pyplot as plt

    stride = max(1, cfg["train_steps"] // 100)  # the recorded steps (_train_point)
    archs = train_architectures(cfg)
    cols = min(len(archs), 4)
    rows = -(-len(archs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(archs) :]:
        ax.set_visible(False)
    Ls = sorted({c["L"] for c in degradation})
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(Ls)))
    for ax, net in zip(axes.flat, archs, strict=False):
        for c in sorted(cells_of(degradation, net), key=lambda c: c["L"]):
            if c["train_loss"] is None:
                continue
            curve = [np.nan if v is None else v for v in c["loss_curve"]]
            steps = [j * stride for j in range(len(curve))] + [cfg["train_steps"]]
            ax.plot(steps, curve + [c["train_loss"]], color=colors[Ls.index(c["L"])], marker=".",
                    markersize=2, label=f"L = {c['L']}")  # fmt: skip
        ax.set_yscale("log")
        ax.set(xlabel="Adam step", ylabel="mean training loss (cross-entropy)")
        ax.set_title(net.label, fontsize=9)
        if not _say_if_empty(ax, "every draw exploded at every depth"):
            ax.legend(fontsize=7, ncol=2)
    title = (
        f"Degradation: the training loss curves ({cfg['train_steps']} full-batch Adam steps, "
        f"lr {cfg['lr']}, width {cfg['train_N']}); mean over {cfg['train_seeds']} draws"
    )
    top = 1 - 0.3 / fig.get_figheight()  # room for the title above the first row's
    save_figure(fig, out / "training_curves.png", dpi=110, title=title, rect=(0, 0, 1, top))


# a rate agrees with its prediction when the prediction lies inside the rate's 95% interval
# (widened by twice the prediction's own numerical error), or within this fraction of it
# (the finite-width allowance where the interval is narrower than the model's accuracy);
# no absolute floor, which made every rate predicted near 0 agree whatever was measured
RELATIVE_TOLERANCE = 0.10


# the per-layer diagnostics of the deepest gradient point, one figure each:
# (what the axis shows, its scale)
LAYER_DIAGNOSTICS = {
    "act_mean": ("mean of h^l over units", "symlog"),
    "act_std": ("standard deviation of h^l over units", "log"),
    "active": ("fraction of units with pre-activation > 0", "linear"),
}


def _say_if_empty(ax, why) -> bool:
    """Say `why` on a panel with no data (True), rather than leave it blank."""
    if any(len(line.get_xdata()) for line in ax.get_lines()):
        return False
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=8,
            color="0.3")  # fmt: skip
    return True
