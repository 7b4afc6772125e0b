"""The trained-weights study's figures, drawn from its results.json: the regularity of the
trained weights across depth (Hurst exponents with their intervals) and the accuracy.
"""

from pathlib import Path

import numpy as np

from ...io.plotting import save_figure, use_agg
from ...stats.fits import interval_text


def draw_figures(out: Path, cfg, cells):
    """The study's three figures: weights along depth, accuracy over (β, H), regularity."""
    use_agg()
    _weights_along_depth(out, cfg, cells)
    _accuracy_heatmap(out, cfg, cells)
    _regularity_figure(out, cfg, cells)


def _weights_along_depth(out: Path, cfg, cells):
    """weights_along_depth.png: one entry of V_k against k/L before and after training
    (the source's figure), for the example cells and the roughest and smoothest fBm."""
    import matplotlib.pyplot as plt

    chosen = []
    for init, beta in EXAMPLE_CELLS:
        chosen += [c for c in cells if c["init"] == init and c["beta"] == beta]
    # per Hurst index, the cell at the grid's β nearest to max(H, 1/2) (the critical scale)
    fbm = []
    for h in sorted({c["hurst"] for c in cells if c["init"] == "fbm"}):
        row = [c for c in cells if c["init"] == "fbm" and c["hurst"] == h]
        fbm.append(min(row, key=lambda c, h=h: abs(c["beta"] - max(h, 0.5))))
    if fbm:  # the roughest and the smoothest fBm initialisation
        fbm = sorted(fbm, key=lambda c: c["hurst"])
        chosen += [fbm[0]] + ([fbm[-1]] if len(fbm) > 1 else [])
    chosen = [c for c in chosen if "example_path" in c]
    if chosen:
        fig, axes = plt.subplots(1, len(chosen), figsize=(3.4 * len(chosen), 3.2), squeeze=False)
        s = (np.arange(cfg["L"]) + 1) / cfg["L"]
        for ax, c in zip(axes[0], chosen, strict=True):
            ax.plot(s, c["example_path"]["before"], color="0.6", lw=0.8, label="before")
            ax.plot(s, c["example_path"]["after"], color="C3", lw=0.9, label="after")
            title = c["init"] + ("" if c["hurst"] is None else f", H = {c['hurst']:g}")
            ax.set_title(f"{title}, β = {c['beta']:g}", fontsize=9)
            ax.set_xlabel("k / L")
            ax.text(0.02, 0.02, f"H_V: {format_cell(c.get('regularity_before'))} → "
                    f"{format_cell(c.get('regularity_after'))}", transform=ax.transAxes,
                    fontsize=6)  # fmt: skip
        axes[0, 0].set_ylabel("entry (1, 1) of V_k")
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(f"Residual weights along depth before and after training (L = {cfg['L']}, "
                     f"d = {cfg['d']}, {cfg['data_description'].split(':')[0]})",
                     fontsize=10)  # fmt: skip
        save_figure(fig, out / "weights_along_depth.png", dpi=110)


def _accuracy_heatmap(out: Path, cfg, cells):
    """accuracy_heatmap.png: test accuracy over (β, H), the iid and smooth rows beside."""
    import matplotlib.pyplot as plt

    rows = [("iid", None)] if "iid" in cfg["inits"] else []
    rows += [("fbm", h) for h in cfg["hursts"]] if "fbm" in cfg["inits"] else []
    rows += [("smooth", None)] if "smooth" in cfg["inits"] else []
    grid = np.full((len(rows), len(cfg["betas"])), np.nan)
    boom = np.zeros_like(grid, dtype=bool)
    for c in cells:
        i = rows.index((c["init"], c["hurst"]))
        j = cfg["betas"].index(c["beta"])
        if c["test_accuracy"]["mean"] is not None:
            grid[i, j] = c["test_accuracy"]["mean"]
        boom[i, j] = c["exploded"] > 0
    fig, ax = plt.subplots(figsize=(1.1 * len(cfg["betas"]) + 2.5, 0.5 * len(rows) + 2))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=1)
    for i in range(len(rows)):
        for j in range(len(cfg["betas"])):
            text = "×" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2f}"
            if boom[i, j] and not np.isnan(grid[i, j]):
                text += "*"
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="w" if np.isnan(grid[i, j]) or grid[i, j] < 0.6 else "k")  # fmt: skip
    labels = ["i.i.d." if r[0] == "iid" else "smooth" if r[0] == "smooth" else f"fBm H={r[1]:g}"
              for r in rows]  # fmt: skip
    ax.set_yticks(range(len(rows)), labels)
    ax.set_xticks(range(len(cfg["betas"])), [f"{b:g}" for b in cfg["betas"]])
    ax.set_xlabel("β (residual scale L^-β)")
    ax.set_title(f"Test accuracy after {cfg['steps']} {cfg['optimizer']} steps, L = {cfg['L']}\n"
                 f"(mean over {cfg['seeds']} networks; ×: every draw exploded, *: some did)",
                 fontsize=9)  # fmt: skip
    fig.colorbar(im, ax=ax, label="test accuracy")
    save_figure(fig, out / "accuracy_heatmap.png", dpi=110)


def _regularity_figure(out: Path, cfg, cells):
    """regularity.png: partial sums before vs after (left), the update against β (middle),
    the path of V_k itself before vs after (right)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    colors = {"iid": "C0", "smooth": "C2", "fbm": "C1"}
    panels = (
        (axes[0], "regularity_cumulative", "index of the partial sums Σ V_j before training",
         "regularity of the weights' path (marker size: β)"),
        (axes[2], "regularity", "index of V_k along k/L before training",
         "regularity of V_k itself (marker size: β)"),
    )  # fmt: skip
    for ax, key, xlabel, title in panels:
        shown = [0.0, 1.1]  # the unit square, widened to every index drawn
        for c in cells:
            b, a = c.get(f"{key}_before"), c.get(f"{key}_after")
            if not b or not a or b.get("hurst") is None or a.get("hurst") is None:
                continue
            size = 3 + 5 * c["beta"] / (max(cfg["betas"]) or 1.0)  # a single β = 0: no division
            ax.errorbar(b["hurst"], a["hurst"],
                        yerr=[[a["hurst"] - a["interval"][0]], [a["interval"][1] - a["hurst"]]],
                        fmt="o", color=colors[c["init"]], ms=size,
                        alpha=0.8)  # fmt: skip
            shown += [b["hurst"], a["hurst"], *a["interval"]]
        lim = [min(shown) - 0.05 * (min(shown) < 0), max(shown) + 0.05 * (max(shown) > 1.1)]
        ax.plot(lim, lim, "k:", lw=0.8, label="after = before")
        for init, col in colors.items():
            if init in cfg["inits"]:
                ax.plot([], [], "o", color=col, label=init)
        ax.set(xlabel=xlabel, ylabel="... after training", xlim=lim, ylim=lim, title=title)
        ax.legend(fontsize=7)
    ax = axes[1]
    for name in sorted({(c["init"], c["hurst"]) for c in cells}, key=str):
        cs = sorted((c for c in cells if (c["init"], c["hurst"]) == name),
                    key=lambda c: c["beta"])  # fmt: skip
        pts = [
            (c["beta"], c["regularity_update"])
            for c in cs
            if c.get("regularity_update") and c["regularity_update"].get("hurst") is not None
        ]
        if not pts:
            continue
        label = name[0] if name[1] is None else f"fbm H={name[1]:g}"
        ax.errorbar([p[0] for p in pts], [p[1]["hurst"] for p in pts],
                    yerr=[[p[1]["hurst"] - p[1]["interval"][0] for p in pts],
                          [p[1]["interval"][1] - p[1]["hurst"] for p in pts]],
                    marker="o", ms=3, capsize=2, color=colors[name[0]], label=label,
                    alpha=0.5 if name[0] == "fbm" else 1.0)  # fmt: skip
    update = r"$V_\mathrm{after} - V_\mathrm{before}$"
    ax.set(xlabel="β", ylabel=f"Hurst index of the update {update} along k/L",
           title="what training adds: its regularity against β")  # fmt: skip
    ax.legend(fontsize=6, ncol=2)
    save_figure(fig, out / "regularity.png", dpi=110)


EXAMPLE_CELLS = (("iid", 0.5), ("iid", 1.0), ("smooth", 1.0))  # (init, β)


def format_cell(r):
    if not r or r.get("hurst") is None:
        return "n/a"
    lo, hi = r["interval"]
    return interval_text(r["hurst"], (lo, hi))
