"""The transfer study's figures, drawn from its results.json: per line (depth, width) the
held-out loss against the base learning rate, one curve per size and a panel per
parametrisation (the style of CompleteP's transfer figure), with lr* and its drift; and
the nonlinear fraction of the layers against depth."""

import math
import textwrap
from pathlib import Path

import numpy as np

from ..io.plotting import save_figure, use_agg
from .coord_check_plot import _optimisers


def _drift_text(line) -> str:
    d, ci = line["drift_exponent"], line["drift_ci95"]
    if d is None:
        return "lr* drift unresolved"
    text = f"lr* drift {d:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")
    return f"{text}: {line['verdict']}"


def figures(out: Path, results: dict) -> None:
    use_agg()
    import matplotlib.pyplot as plt

    cfg = results["config"]
    lrs = np.asarray(cfg["lrs"], float)
    for which, symbol in (("depth", "L"), ("width", "N")):
        lines = [ln for ln in results["lines"] if ln["line"] == which]
        if not lines:
            continue
        cols = len(lines) + 1
        fig, axes = plt.subplots(1, cols, figsize=(4.3 * cols, 4.0), squeeze=False)
        cmap = plt.get_cmap("viridis")
        for ax, ln in zip(axes[0], lines, strict=False):
            sizes = ln["sizes"]
            for i, (size, curve) in enumerate(zip(sizes, ln["loss_curves"], strict=True)):
                color = cmap(i / max(1, len(sizes) - 1))
                ax.plot(lrs, np.exp(curve), "o-", ms=3, color=color, label=f"{symbol} = {size}")
                star = ln["optimal_lr"][i]
                if star is not None:
                    ax.axvline(star, color=color, lw=0.8, ls=":")
            ax.set_xscale("log")
            ax.set_xlabel("base learning rate")
            ax.set_ylabel("held-out loss (geometric mean over networks)")
            ax.set_title(f"[{ln['parametrisation']}] {_drift_text(ln)}", fontsize=8)
            ax.legend(fontsize=7, title="dotted: lr*", title_fontsize=7)
        ax = axes[0][-1]
        for ln in lines:
            xs = [s for s, v in zip(ln["sizes"], ln["optimal_lr"], strict=True) if v is not None]
            ys = [v for v in ln["optimal_lr"] if v is not None]
            if ys:
                ax.plot(xs, ys, "o-", ms=4, label=f"{ln['parametrisation']}: {_drift_text(ln)}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"{which} ({symbol})")
        ax.set_ylabel("lr* (parabola vertex)")
        ax.set_title(f"[lr*] against {which}", fontsize=9)
        if ax.get_lines():
            ax.legend(fontsize=6)
        else:
            ax.text(0.5, 0.5, "lr* at a grid edge everywhere", ha="center", transform=ax.transAxes)
        fixed = f"width {cfg['width']}" if which == "depth" else f"depth {cfg['depth']}"
        title = (
            f"Learning-rate transfer against {which} ({fixed}; {cfg['steps']} "
            f"{_optimisers(cfg)} steps, "
            f"{cfg['seeds']} networks per size, held-out text); a table transfers when lr* "
            "stays put"
        )
        # wrapped to the figure's width (a line or two tables make a narrow figure)
        title = textwrap.fill(title, int(fig.get_size_inches()[0] * 13))
        save_figure(fig, out / f"transfer_{which}.png", dpi=90, title=title, fontsize=10)
    _laziness(out, results)


def _laziness(out: Path, results: dict) -> None:
    import matplotlib.pyplot as plt

    lines = [ln for ln in results["lines"] if ln.get("laziness")]
    if not lines:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0), squeeze=False)
    for ax, branch in zip(axes[0], ("attention", "mlp"), strict=True):
        for ln in lines:
            lz = ln["laziness"]
            j = int(np.argmin(np.abs(np.log(results["config"]["lrs"]) - math.log(lz["lr"]))))
            pts = {
                p["depth"]: p
                for p in results["points"]
                if p["line"] == "depth" and p["parametrisation"] == ln["parametrisation"]
            }
            means = []
            for L in ln["sizes"]:
                v = np.array([np.nan if x is None else x for x in pts[L][f"nonlinear_{branch}"][j]])
                v = v[np.isfinite(v) & (v > 0)]
                means.append(float(np.exp(np.mean(np.log(v)))) if v.size else np.nan)
            f = lz[branch]
            slope = (f"{f['slope']:+.2f} [{f['ci95'][0]:+.2f}, {f['ci95'][1]:+.2f}]"
                     if f.get("slope") is not None and f.get("ci95") else "no slope")  # fmt: skip
            label = f"{ln['parametrisation']} (lr {lz['lr']:.2g}): slope {slope}"
            ax.plot(ln["sizes"], means, "o-", ms=4, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("depth (L)")
        ax.set_ylabel("nonlinear fraction (mean over layers)")
        ax.set_title(f"[{branch}] lazy (→ 0) or learning non-linearly", fontsize=9)
        ax.legend(fontsize=6)
    save_figure(
        fig,
        out / "laziness.png",
        dpi=90,
        title="How far each layer's change is from its linearisation in its own weights, "
        "after training (geometric mean over networks)",
        fontsize=10,
    )
