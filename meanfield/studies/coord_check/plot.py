"""The coordinate check's figures, drawn from its results.json: per line (width, depth)
one figure, a row per parametrisation and a column per kind of quantity (activations,
their changes, the matrices' updates), each quantity's size after the last step against
the size, in the style of the μP package's coordinate check; and the sizes along
training at the largest and smallest size."""

import math
from pathlib import Path

import numpy as np
from matplotlib import transforms

from ...diagnostics import coord_check as coord_check_diagnostics
from ...diagnostics import unit_coord_check
from ...io.plotting import save_figure, use_agg
from ...stats import interval_text

# one colour per site of the stream in every panel (activations and their changes)
SITE_COLORS = {"embedding": "C0", "attention": "C1", "mlp": "C2", "logits": "C3",
               "state": "C0", "unit": "C1", "output": "C3", "layer": "C2"}  # fmt: skip
KINDS = (
    ("activations (RMS of the stream)", coord_check_diagnostics.ACTIVATIONS),
    ("changes since initialisation", coord_check_diagnostics.CHANGES),
    ("updates ΔW·input", coord_check_diagnostics.UPDATES),
)
RESNET_KINDS = (
    ("activations (RMS of the states hˡ and of the units φ)", unit_coord_check.ACTIVATIONS),
    ("changes since initialisation", unit_coord_check.CHANGES),
    ("updates φ(h, z_t) − φ(h, z_0), per unit and per layer", unit_coord_check.UPDATES),
)


def _resnet(cfg) -> bool:
    return cfg.get("model") == "resnet"


def optimisers(cfg) -> str:
    """What trained the networks: gradient descent (a ResNet), or each table's optimiser."""
    if _resnet(cfg):
        return "gradient-descent"
    names = sorted({t.get("optimizer", "adam") for t in cfg.get("tables", [])} or {"adam"})
    return "/".join({"adam": "Adam", "sgd": "SGD"}[n] for n in names)


def _last(rows) -> np.ndarray:
    return np.array([np.nan if r[-1] is None else r[-1] for r in rows], float)


def _mean_and_half(values: np.ndarray) -> tuple[float, float]:
    """The mean of the draws and the half-width of its 95% t-interval."""
    from scipy import stats

    v = values[np.isfinite(values)]
    if v.size == 0:
        return math.nan, math.nan
    if v.size == 1:
        return float(v[0]), 0.0
    return float(v.mean()), float(
        stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    )


def _slope_text(fit, same_prediction: bool = False) -> str:
    """`0.02 [-0.01, 0.05]`, and the predicted slope ` (0.5)` unless every curve of the
    panel has the same prediction (its title says it)."""
    if fit.get("slope") is None:
        return "no slope"
    ci = fit.get("ci95")
    text = interval_text(fit["slope"], ci) if ci else f"{fit['slope']:.2f}"
    pred = fit.get("predicted")
    pred_text = f" ({pred:g})" if pred is not None and not same_prediction else ""
    return f"{text}{pred_text}"


def _at_least_a_factor_4(ax, drawn) -> None:
    """A log axis spanning at least a factor 4 around the values drawn, so that a flat
    curve looks flat (matplotlib would zoom onto a few percent); `drawn` holds the
    points and their error bars' ends."""
    if drawn and max(drawn) < 4 * min(drawn):
        centre = math.sqrt(max(drawn) * min(drawn))
        ax.set_ylim(centre / 2, centre * 2)


def figures(out: Path, results: dict) -> None:
    use_agg()
    import matplotlib.pyplot as plt

    cfg = results["config"]
    kinds = RESNET_KINDS if _resnet(cfg) else KINDS
    width = "M" if _resnet(cfg) else "N"
    for against in ("width", "depth"):
        lines = [line for line in results["lines"] if line["against"] == against]
        if not lines:
            continue
        rows = len(lines)
        # three panels a row (at a page's width, 7 in), each legend under its panel: never
        # over the curves
        fig, axes = plt.subplots(rows, 3, figsize=(7, 4.4 * rows), squeeze=False)
        for r, line in enumerate(lines):
            name = line["parametrisation"]
            at = {
                (p["width"], p["depth"]): p
                for p in results["points"]
                if p["parametrisation"] == name
            }
            sizes = line["sizes"]
            fixed = line["fixed"]
            keys = [
                (n, fixed["depth"]) if against == "width" else (fixed["width"], n) for n in sizes
            ]
            for c, (title, quantities) in enumerate(kinds):
                ax = axes[r, c]
                drawn = []
                same = "slopes" not in _panel_claim(line, quantities)
                for q in quantities:
                    stats_ = [_mean_and_half(_last(at[k]["sizes"][q])) for k in keys]
                    mean = np.array([m for m, _ in stats_])
                    half = np.array([h for _, h in stats_])
                    good = np.isfinite(mean) & (mean > 0)
                    if not good.any():
                        continue
                    fit = line["fits"][q]
                    site = q.split("/")[1]
                    update = q.startswith("update/") and not _resnet(cfg)
                    color = None if update else SITE_COLORS.get(site)
                    lo, hi = (mean - half)[good], (mean + half)[good]
                    drawn += [*mean[good], *hi[np.isfinite(hi)], *lo[np.isfinite(lo) & (lo > 0)]]
                    ax.errorbar(np.array(sizes)[good], mean[good], yerr=half[good], marker="o",
                                ms=3, capsize=2, lw=1.2, color=color,
                                label=f"{site} {_slope_text(fit, same)}")  # fmt: skip
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                _at_least_a_factor_4(ax, drawn)
                ax.set_xticks(sizes)
                ax.set_xticklabels([str(s) for s in sizes])
                ax.set_xlabel(f"{against} ({width if against == 'width' else 'L'})")
                ax.set_ylabel("size after the last step")
                # (wrapped at the panel's width by `layout`, as every title)
                ax.set_title(f"[{name}] {title} ({_panel_claim(line, quantities)})", fontsize=9)
                # under the panel, below its tick labels and axis label (36 pt down)
                under = transforms.offset_copy(ax.transAxes, fig=fig, y=-36, units="points")
                legend_title = "slope [95% interval]" + ("" if same else "\n(predicted)")
                ax.legend(fontsize=6.5, title=legend_title, title_fontsize=6.5,
                          loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=under,
                          frameon=False)  # fmt: skip
        fixed = ", ".join(f"{k} {v}" for k, v in lines[0]["fixed"].items())
        save_figure(
            fig,
            out / f"coord_check_{against}.png",
            dpi=90,
            title=(
                f"Coordinate check against {against} ({fixed}): sizes after {cfg['steps']} "
                f"{optimisers(cfg)} steps at base lr {cfg['lr']:g}, mean of {cfg['seeds']} "
                "draws with 95% intervals;\na correct parametrisation keeps every curve "
                "flat in the dimension it scales (each panel's title: what its table "
                "predicts for it)"
            ),
            fontsize=10,
            rect=(0, 0, 1, 1 - 0.55 / fig.get_size_inches()[1]),  # room for the title
        )
    _along_training(out, results)


def _panel_claim(line: dict, quantities) -> str:
    """What the table predicts for the quantities one panel plots, in the panel's words:
    "predicted flat" where it predicts slope 0 for every one, else the predicted slopes
    ("predicted slope -1"; "predicted slopes -1, 0")."""
    preds = sorted({round(float(line["fits"][q]["predicted"]), 3) for q in quantities
                    if line["fits"].get(q, {}).get("predicted") is not None})  # fmt: skip
    if not preds:
        return "no prediction"
    if preds == [0.0]:
        return "predicted flat"
    return f"predicted slope{'s' if len(preds) > 1 else ''} " + ", ".join(
        f"{p + 0.0:g}" for p in preds
    )


def _along_training(out: Path, results: dict) -> None:
    """The activations of the stream along training, per parametrisation, at every
    width of the width line (the μP package's plot: one curve per step); for a ResNet
    of units, whose state moves by a few percent, the state's change (from t = 1). The
    vertical axis spans at least a factor 4, so that a flat curve looks flat."""
    import matplotlib.pyplot as plt

    cfg = results["config"]
    lines = [line for line in results["lines"] if line["against"] == "width"]
    if not lines:
        return
    fig, axes = plt.subplots(1, len(lines), figsize=(4.2 * len(lines), 3.6), squeeze=False)
    steps = cfg["steps"]
    resnet = _resnet(cfg)
    shown = sorted({0, 1, max(1, steps // 2), steps} - ({0} if resnet else set()))
    cmap = plt.get_cmap("viridis")
    stream = "change/state" if resnet else "activation/mlp"
    for ax, line in zip(axes[0], lines, strict=True):
        name = line["parametrisation"]
        at = {
            (p["width"], p["depth"]): p for p in results["points"] if p["parametrisation"] == name
        }
        sizes = line["sizes"]
        drawn = []
        for i, t in enumerate(shown):
            means = []
            for n in sizes:
                rows = at[(n, line["fixed"]["depth"])]["sizes"][stream]
                v = np.array([np.nan if r[t] is None else r[t] for r in rows], float)
                means.append(np.nanmean(v) if np.isfinite(v).any() else np.nan)
            drawn += [m for m in means if np.isfinite(m) and m > 0]
            ax.plot(
                sizes, means, "o-", ms=3, color=cmap(i / max(1, len(shown) - 1)), label=f"t = {t}"
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _at_least_a_factor_4(ax, drawn)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("width M (units per layer)" if resnet else "width N")
        ax.set_ylabel(
            "change of the state hˡ since\ninitialisation (RMS, mean over layers)"
            if resnet
            else "stream after the MLP branch (RMS,\nmean over layers)"
        )
        ax.set_title(f"[{name}]", fontsize=9)
        ax.legend(fontsize=7, title="after t steps", title_fontsize=7, loc="best")
    depth = lines[0]["fixed"]["depth"]
    save_figure(
        fig,
        out / "coord_check_steps.png",
        dpi=90,
        title=f"The {'state’s change' if resnet else 'residual stream'} along training against "
        "width "
        f"(depth {depth}, mean of "
        f"{cfg['seeds']} draws)"
        + (
            " — at the base depth the depth rules are off: tables differing only in them coincide"
            if not resnet and depth == cfg["base_depth"]
            else ""
        ),
        fontsize=10,
    )
