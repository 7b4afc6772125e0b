"""The shapes study's figures, drawn from its results.json: the errors against L, M and D
with the fitted rate law, and the optimal shapes it predicts.
"""

from pathlib import Path

import numpy as np

from ...io.plotting import (
    loglog_series,
    mark_exploded,
    save_figure,
    size_ticks,
    typeset,
    use_agg,
)


def draw_figures(out, cfg, points, fits, laws, shapes):
    use_agg()
    import matplotlib.pyplot as plt

    K = cfg["steps"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for row, q in enumerate(QUANTITIES):
        for col, against in enumerate("LMD"):
            ax = axes[row, col]
            name = q + "_fixed_D" if against != "D" else q.replace("_error", "_D_gap")
            chosen = [f for f in fits if f["quantity"] == name and f["against"] == against]
            # the fixed-size lines whose term dominates most, at most three
            chosen = sorted(chosen, key=lambda f: -f["term_share"])[:3]
            if not chosen:  # said on the panel, not left blank
                others = ", ".join(k for k in "LMD" if k != against)
                ax.text(0.5, 0.5, f"no line against {against} on this grid:\na line needs "
                        f"three values of {against} at fixed {others}\n(with D ≤ {REGIME:g} L M)",
                        transform=ax.transAxes, ha="center", va="center", fontsize=9,
                        color="0.3")  # fmt: skip
            for f, color in zip(chosen, ("C0", "C1", "C2"), strict=False):
                fixed = {k: v for k, v in f["fixed"].items() if k != "steps"}
                rows, _ = error_rows(points, f["quantity"], K, **fixed)
                rows = sorted(rows, key=lambda p: p[against])
                label = ", ".join(f"{k}={v}" for k, v in fixed.items())
                if not f["dominant"]:
                    label += " (term not dominant)"
                if f.get("theory") is not None:  # the dotted line's slope (a line of its
                    label += f"\ndotted {f['theory']:g}"  # own: the panel's width)
                loglog_series(
                    ax, [r[against] for r in rows], [r[f["quantity"]]["mean"] for r in rows],
                    [r[f["quantity"]]["std"] for r in rows], fit=f, theory=f["theory"],
                    label=label, color=color,
                )  # fmt: skip
            what = "vs fixed-D limit" if against != "D" else "fixed-D vs joint limit"
            # two lines: one would run into the panel on its left
            ax.set(xscale="log", yscale="log", xlabel=against,
                   ylabel=f"{q.replace('_', ' ')}, RMS over inputs\n({what}), k={K}")  # fmt: skip
            b, c = THEORY[(q, against + ("_fixed_D" if against != "D" else "_D_gap"))]
            ax.set_title(
                f"{q.split('_')[0]} vs {against}; the {against} term alone: bound {b:g}, "
                f"conjecture {c:g}",
                fontsize=9,
            )
            size_ticks(ax, cfg[against])
            if chosen:
                ax.legend(fontsize=6)
    fig.suptitle(
        f"joint L, M, D limit, ρ={cfg['activation']}: mean over {cfg['seeds']} draws, "
        "bars ×/÷ their geometric spread\n"
        "(dotted: the bound's slope of the term that dominates each line, in its legend; "
        "dashed: fit)",
        fontsize=10,
    )
    save_figure(fig, Path(out) / "shapes_rates.png", dpi=110)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    L = max(cfg["L"])
    for ax, q in zip(axes[:2], QUANTITIES, strict=True):
        grid = np.full((len(cfg["D"]), len(cfg["M"])), np.nan)
        for p in points:
            if p["L"] == L and p["steps"] == K and p[q]["mean"] is not None:
                grid[cfg["D"].index(p["D"]), cfg["M"].index(p["M"])] = p[q]["mean"]
        im = ax.imshow(np.log10(grid), origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(cfg["M"])), [str(m) for m in cfg["M"]])
        ax.set_yticks(range(len(cfg["D"])), [str(d) for d in cfg["D"]])
        ax.set(xlabel="M", ylabel="D", title=f"log10 {q} vs joint limit, L={L}, k={K}")
        fig.colorbar(im, ax=ax)
    ax = axes[2]
    names = ["bound", "conjecture"] + [q for q in QUANTITIES if "L" in shapes.get(q, {})]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        s = shapes[name]
        label = name if name in ("bound", "conjecture") else f"fitted law of {name}"
        ax.bar(np.arange(3) + i * width, [s["L"], s["M"], s["D"]], width, label=label)
    ax.set_xticks(
        np.arange(3) + 0.4 - width / 2, [typeset(t) for t in ("L ~ P^λ", "M ~ P^μ", "D ~ P^δ")]
    )
    ax.set(ylabel="exponent of the budget P", title="optimal shape at a fixed budget P ≈ 2LMD")
    ax.legend(fontsize=7)
    save_figure(fig, Path(out) / "shapes_grid.png", dpi=110)


def errors_figure(out, cfg, points, k):
    """Every point's six errors after k steps (mean over draws, bars ×/÷ their geometric
    spread): one row per error, one panel per D, against L, one line per M."""
    use_agg()
    import matplotlib.pyplot as plt

    Ds = sorted({p["D"] for p in points})
    Ms = sorted({p["M"] for p in points})
    fig, axes = plt.subplots(
        len(ERRORS), len(Ds), figsize=(4.2 * len(Ds), 2.9 * len(ERRORS)), squeeze=False
    )
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(Ms)))
    for row, name in enumerate(ERRORS):
        for col, D in enumerate(Ds):
            ax = axes[row, col]
            shown = False
            for M, color in zip(Ms, colors, strict=True):
                rows = sorted(
                    (p for p in points if p["steps"] == k and p["D"] == D and p["M"] == M),
                    key=lambda p: p["L"],
                )
                means = [r[name]["mean"] for r in rows]
                shown |= any(m is not None and m > 0 for m in means)
                loglog_series(
                    ax, [r["L"] for r in rows], means, [r[name]["std"] for r in rows],
                    label=f"M={M}", color=color,
                )  # fmt: skip
                mark_exploded(ax, rows, name, lambda p: p["L"])
            ax.set_title(f"{name}, D={D}, k={k}", fontsize=9)
            ax.set(xscale="log", yscale="log", xlabel="L")
            size_ticks(ax, sorted({p["L"] for p in points}))
            if col == 0:
                ax.set_ylabel(ERROR_LABELS[name], fontsize=8)
            values = [p[name]["mean"] for p in points if p["steps"] == k and p["D"] == D]
            if shown and len(values) > 1 and len(set(values)) == 1:  # lines on each other: said
                ax.text(0.03, 0.04, "the same at every L and M", transform=ax.transAxes,
                        fontsize=7, color="0.3")  # fmt: skip
            if shown:
                ax.legend(fontsize=6)
            else:  # said on the panel, not left blank
                ax.text(0.5, 0.5, "every mean is 0 or missing here\n(none on a log axis)",
                        transform=ax.transAxes, ha="center", va="center", fontsize=8,
                        color="0.3")  # fmt: skip
    fig.suptitle(
        f"joint L, M, D limit, ρ={cfg['activation']}: every point's errors after k={k} of "
        f"{cfg['steps']} steps (RMS over inputs), mean over {cfg['seeds']} draws, bars ×/÷ "
        "their geometric spread",
        fontsize=10,
    )
    stem = "shapes_errors" if k == cfg["steps"] else f"shapes_errors_step{k}"
    save_figure(fig, Path(out) / f"{stem}.png", dpi=90, rect=(0, 0, 1, 0.98))


# the rate laws are asymptotic: they are fitted on points with D <= REGIME * L M (where the
# random part of the residual map, of size sqrt(D/(LM)), is small; at D > LM it is not and
# a network may blow up, as (L, M, D) = (4, 4, 128) does)
REGIME = 0.25


QUANTITIES = ("output_error", "hidden_error")


ERRORS = (
    "output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
    "output_D_gap", "hidden_D_gap",
)  # fmt: skip


def error_rows(points, quantity, k, **fixed):
    rows = [p for p in points if p["steps"] == k and all(p[a] == b for a, b in fixed.items())]
    return rows, [r[quantity] for r in rows]


THEORY = {  # slope against each size where its term dominates: (proven bound, conjecture)
    ("output_error", "L"): (-1.0, -1.0),
    ("output_error", "M"): (-0.5, -1.0),
    ("output_error", "D"): (-0.5, -0.5),
    ("hidden_error", "L"): (-1.0, -1.0),
    ("hidden_error", "M"): (-0.5, -0.5),
    ("hidden_error", "D"): (-0.5, -0.5),
}
THEORY[("output_error", "D_fixed_D")] = (0.5, 1.0)  # sqrt(D)/sqrt(LM) vs D/(LM)
THEORY[("hidden_error", "D_fixed_D")] = (0.5, 0.5)


# the six errors of a point, as the rows of `shapes_errors*.png`: what each measures
ERROR_LABELS = {
    "output_error": "output error vs joint limit",
    "hidden_error": "hidden error vs joint limit",
    "output_error_fixed_D": "output error vs fixed-D limit",
    "hidden_error_fixed_D": "hidden error vs fixed-D limit",
    "output_D_gap": "output: fixed-D vs joint limit",
    "hidden_D_gap": "hidden: fixed-D vs joint limit",
}


def trajectory_figure(out, cfg, points, traj):
    """`shapes_trajectories.png`: one network (draw 0 of the deepest, widest point at the
    middle D) after the last step against its fixed-D limit — (a) coordinates of h^l(x_0)
    along l/L, (b) of the rescaled backward field b^l(x_0), (d) the histogram of the
    coordinates of h^L and (e) of b^0 over every input; (c) the hidden error after the last
    step of every point against the parameter budget P = 2LMD, one colour per D (the
    authors' errH_vs_P)."""
    use_agg()
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 3, figsize=(16, 9))
    axes = [grid[0, 0], grid[0, 1], grid[1, 0], grid[1, 1], grid[0, 2]]
    grid[1, 2].axis("off")
    L, M, D, K = traj["L"], traj["M"], traj["D"], traj["steps"]
    s = np.arange(L + 1) / L
    trained = "trainable embedding" if cfg.get("lr_in") or cfg.get("lr_out") else "frozen embedding"
    for ax, name, label in ((axes[0], "h", "h^l"), (axes[1], "b", "b^l = n D ∂L/∂h^l")):
        for i, (fin, lim) in enumerate(zip(traj[name], traj[name + "_limit"], strict=True)):
            ax.plot(s, fin, "o", color=f"C{i}", ms=2.5, label=f"coordinate {i}")
            ax.plot(s, lim, "-", color=f"C{i}", lw=1)
        ax.set(xlabel="depth s = l/L", ylabel=f"{label} (input 0)")
        ax.set_title(f"({'ab'[name == 'b']}) coordinates of {label} after {K} steps\n(L = {L}, "
                     f"M = {M}, D = {D}, {trained})", fontsize=9)  # fmt: skip
        ax.legend(fontsize=6, ncol=2, title="dots: the network; lines: its fixed-D limit",
                  title_fontsize=6)  # fmt: skip
    for ax, name, label, tag in ((axes[2], "h_last", "h^L", "d"), (axes[3], "b_first", "b^0", "e")):
        fin, lim = np.asarray(traj[name]), np.asarray(traj[name + "_limit"])
        bins = np.linspace(min(fin.min(), lim.min()), max(fin.max(), lim.max()), 30)
        ax.hist(fin, bins=bins, alpha=0.5, color="C0", label="network")
        ax.hist(lim, bins=bins, histtype="step", color="k", lw=1.2, label="fixed-D limit")
        ax.set(xlabel=f"coordinates of {label} (every input)", ylabel="count")
        ax.set_title(f"({tag}) histogram of the coordinates of {label}\nafter {K} steps",
                     fontsize=9)  # fmt: skip
        ax.legend(fontsize=7)
    ax = axes[4]
    last = [p for p in points if p["steps"] == K and p["hidden_error"]["mean"] is not None]
    for i, d in enumerate(sorted({p["D"] for p in last})):
        mine = sorted((p for p in last if p["D"] == d), key=lambda p: 2 * p["L"] * p["M"] * d)
        ax.plot([2 * p["L"] * p["M"] * d for p in mine], [p["hidden_error"]["mean"] for p in mine],
                "o", color=f"C{i}", ms=4, label=f"D = {d}")  # fmt: skip
    mark_exploded(ax, last, "hidden_error", lambda p: 2 * p["L"] * p["M"] * p["D"])
    ax.set(xscale="log", yscale="log", xlabel="parameters P = 2LMD",
           ylabel="hidden error vs the joint limit")  # fmt: skip
    ax.set_title(f"(c) hidden error after {K} steps against the budget P\n(every point; "
                 "mean over draws)", fontsize=9)  # fmt: skip
    ax.legend(fontsize=7)
    save_figure(fig, Path(out) / "shapes_trajectories.png", dpi=100)
