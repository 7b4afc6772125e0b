"""The transfer study's figures, drawn from its results.json: per line (depth, width) the
held-out loss against the base learning rate, one curve per size and a panel per
parametrisation (the style of CompleteP's transfer figure), with lr* and its drift; and
the nonlinear fraction of the layers against depth."""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import save_figure, use_agg
from ..coord_check.plot import optimisers


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
        # the tables' loss curves two to a row, lr* against the size in a row of its own
        # beneath them (at a page's width, 7 in, not a strip of five panels)
        cols = 2 if len(lines) > 1 else 1
        rows = -(-len(lines) // cols)
        fig = plt.figure(figsize=(3.5 * cols, 3.0 * (rows + 1)))
        grid = fig.add_gridspec(rows + 1, cols)
        panels = [fig.add_subplot(grid[i // cols, i % cols]) for i in range(len(lines))]
        cmap = plt.get_cmap("viridis")
        for ax, ln in zip(panels, lines, strict=True):
            sizes = ln["sizes"]
            for i, (size, curve) in enumerate(zip(sizes, ln["loss_curves"], strict=True)):
                # viridis short of its pale yellow end, which vanishes on white
                color = cmap(0.85 * i / max(1, len(sizes) - 1))
                ax.plot(lrs, np.exp(curve), "o-", ms=3, color=color, label=f"{symbol} = {size}")
                band = _network_band(ln, i)
                if band is not None:  # ± one standard error of the mean over networks
                    ax.fill_between(lrs, *band, color=color, alpha=0.18, lw=0)
                star = ln["optimal_lr"][i]
                if star is not None:
                    ax.axvline(star, color=color, lw=1.0, ls=":")
            ax.set_xscale("log")
            ax.set_xlabel("base learning rate")
            ax.set_ylabel("held-out loss")
            ax.set_title(f"[{ln['parametrisation']}] {_drift_text(ln)}", fontsize=8)
            ax.legend(fontsize=6.5)
        _optimum_panel(fig.add_subplot(grid[rows, :]), lines, which, symbol)
        fixed = f"width {cfg['width']}" if which == "depth" else f"depth {cfg['depth']}"
        title = (
            f"Learning-rate transfer against {which} ({fixed}; {cfg['steps']} "
            f"{optimisers(cfg)} steps, "
            f"{cfg['seeds']} networks per size, held-out text); a table transfers when lr* "
            "stays put. Loss: the geometric mean over the networks, band ±1 s.e.; dotted: "
            "lr* at each size"
        )
        # (wrapped to the figure's width by `layout`)
        save_figure(fig, out / f"transfer_{which}.png", dpi=90, title=title, fontsize=9)
    _laziness(out, results)
    _budgets(out, results)


def _budgets(out: Path, results: dict) -> None:
    """The drift exponent with its interval after each budget of steps (`--budgets`), per
    line and table, with the tolerance band and 0: does training longer change it?"""
    import matplotlib.pyplot as plt

    lines = [ln for ln in results["lines"] if ln.get("budgets")]
    if not lines:
        return
    which = [w for w in ("depth", "width") if any(ln["line"] == w for ln in lines)]
    fig, axes = plt.subplots(1, len(which), figsize=(5.2 * len(which), 4.2), squeeze=False)
    for ax, w in zip(axes[0], which, strict=True):
        mine = [ln for ln in lines if ln["line"] == w]
        band = next((ln.get("band") for ln in mine if ln.get("band")), 0.15)
        ax.axhspan(-band, band, color="0.88", lw=0, label=f"within ±{band:g}: transfers")
        ax.axhline(0.0, color="0.3", lw=1.0, ls="--")
        for k, ln in enumerate(mine):
            pts = [(b["steps"], b["drift_exponent"], b["drift_ci95"])
                   for b in ln["budgets"] if b["drift_exponent"] is not None]  # fmt: skip
            if not pts:
                continue
            xs = [x for x, _, _ in pts]
            ys = np.array([y for _, y, _ in pts])
            lo = np.array([y - ci[0] if ci else 0.0 for _, y, ci in pts])
            hi = np.array([ci[1] - y if ci else 0.0 for _, y, ci in pts])
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="os^Dv"[k % 5] + "-", ms=5, capsize=3,
                        alpha=0.85, label=ln["parametrisation"])  # fmt: skip
        ax.set_xscale("log", base=2)
        steps = sorted({b["steps"] for ln in mine for b in ln["budgets"]})
        ax.set_xticks(steps, [str(x) for x in steps])
        ax.minorticks_off()
        ax.set_xlabel("training steps (budget)")
        ax.set_ylabel(f"drift of lr* against {w} (95% interval)")
        ax.set_title(f"[{w}] lr* drift against {w} after each budget", fontsize=9)
        ax.legend(fontsize=7)
    save_figure(
        fig, out / "transfer_budgets.png", dpi=90, fontsize=10,
        title="Does training longer change the drift? lr*'s drift exponent after each "
        "budget of steps, measured on the way through the same trainings\n(a point "
        "without bars has no interval: lr* on a grid edge in over 10% of the resamples)",
    )  # fmt: skip


def _network_band(ln, i: int):
    """The geometric mean loss ± one standard error over the networks at every rate."""
    se = (ln.get("loss_se_curves") or [None] * len(ln["sizes"]))[i]
    if se is None or any(v is None for v in se):
        return None
    mean, se = np.asarray(ln["loss_curves"][i]), np.asarray(se)
    return np.exp(mean - se), np.exp(mean + se)


def _optimum_panel(ax, lines, which: str, symbol: str) -> None:
    """lr* of every table relative to its own lr* at the line's first size, with each
    size's bootstrap interval, the flat reference (transfer) and the tolerance's wedge
    (a drift within ±band)."""
    drawn = False
    band = next((ln.get("band") for ln in lines if ln.get("band")), 0.15)
    sizes = sorted({s for ln in lines for s in ln["sizes"]})
    if sizes:
        grid = np.geomspace(sizes[0], sizes[-1], 50)
        ratio = grid / sizes[0]
        ax.fill_between(grid, ratio ** (-band), ratio**band, color="0.85", lw=0,
                        label=f"drift within ±{band:g} (transfer)")  # fmt: skip
        ax.axhline(1.0, color="0.3", lw=1.0, ls="--", label="flat: lr* does not move")
    for ln in lines:
        found = [(s, v, ci) for s, v, ci in zip(ln["sizes"], ln["optimal_lr"],
                 ln.get("optimal_lr_ci95") or [None] * len(ln["sizes"]), strict=True)
                 if v is not None]  # fmt: skip
        if not found:
            continue
        base = found[0][1]
        xs = [s for s, _, _ in found]
        ys = np.array([v / base for _, v, _ in found])
        lo = np.array([v / base - (ci[0] / base if ci else v / base) for _, v, ci in found])
        hi = np.array([(ci[1] / base if ci else v / base) - v / base for _, v, ci in found])
        ax.errorbar(xs, ys, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="o-", ms=4,
                    capsize=3, label=f"{ln['parametrisation']}: {_drift_text(ln)}")  # fmt: skip
        drawn = True
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(sizes, [str(x) for x in sizes])
    low, high = ax.get_ylim()
    low, high = min(low, 0.5), max(high, 2.0)  # at least a factor 4: flat looks flat
    ax.set_ylim(low, high)
    ticks = [2.0**k for k in range(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1)]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(f"{which} ({symbol})")
    ax.set_ylabel(f"lr* / lr* at the first {symbol}")
    ax.set_title(f"[lr*] against {which} (95% bootstrap intervals)", fontsize=9)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if not drawn:
        ax.text(0.5, 0.5, "lr* at a grid edge everywhere", ha="center", transform=ax.transAxes)


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
