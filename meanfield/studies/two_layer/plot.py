"""The two-layer study's figures, drawn from its results.json: the limits (the network
against its fixed-D and D → ∞ limits), the seed's criteria against D, and the critical
output scale.
"""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import loglog_series, save_figure, size_ticks
from ...stats.fits import interval_text


def limits_figure(out, cfg, points, by_fit, k):
    import matplotlib.pyplot as plt

    K = cfg["steps"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(cfg["D"])))
    for ax, q, title in (
        (axes[0, 0], "output_error", "output error max_i RMS_out(f̂ − f)"),
        (axes[0, 1], "hidden_error", "hidden error max_i ‖ĥ − h‖_D"),
    ):
        for D, color in zip(cfg["D"], colors, strict=True):
            rows, stats = series(points, "width", "M", {"D": D}, "M", q, k)
            fit = by_fit.get((q, "M", tuple(sorted({"D": D, "steps": k}.items()))))
            loglog_series(
                ax, [r["M"] for r in rows], [s["mean"] for s in stats], [s["std"] for s in stats],
                fit=fit, theory=-0.5, label=f"D={D}", color=color,
            )  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel="width M", ylabel=f"{title} after k={k} steps")
        ax.set_title(f"part (a), {q.replace('_', ' ')}: finite vs fixed-D limit", fontsize=10)
        size_ticks(ax, cfg["M"])
        ax.legend(fontsize=7)
    ax = axes[1, 0]
    for D, color in zip(cfg["D"], colors, strict=True):
        for q in ("hidden_error", "output_error"):
            rows, stats = series(points, "width", "M", {"D": D}, "M", q, k)
            x = [D / r["M"] for r in rows] if q == "hidden_error" else [1 / r["M"] for r in rows]
            ax.plot(
                x, _means(stats), marker="o" if q == "hidden_error" else "s", color=color,
                linestyle="-" if q == "hidden_error" else ":",
                label=f"D={D}: hidden vs D/M" if q == "hidden_error" else f"D={D}: output vs 1/M",
            )  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="D/M (hidden, solid) and 1/M (output, dotted)",
           ylabel=f"error after k={k} steps")  # fmt: skip
    ax.set_title("part (a), collapse: hidden error on D/M, output error on 1/M", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1, 1]
    for q, color in (("output_error", "C0"), ("hidden_error", "C3")):
        rows, stats = series(points, "dimension", "D", {}, "D", q, k)
        fit = by_fit.get((q, "D", (("steps", k),)))
        loglog_series(
            ax, [r["D"] for r in rows], [s["mean"] for s in stats], [s["std"] for s in stats],
            fit=fit, theory=-0.5 if k else None, label=q.replace("_", " "), color=color,
        )  # fmt: skip
        ref = [r["reference_error"] for r in rows]
        ax.plot([r["D"] for r in rows], ref, color="gray", linestyle="--", linewidth=0.8)
    ax.plot([], [], color="gray", linestyle="--", label="quadrature error of the limits")
    ax.set(xscale="log", yscale="log", xlabel="embedding dimension D",
           ylabel=f"fixed-D limit − D→∞ limit, k={k}")  # fmt: skip
    ax.set_title("part (b): fixed-D limit vs D → ∞ limit (skeleton maps)", fontsize=10)
    if k == 0:  # f_0 = 0 in both limits, and the same initial particles
        ax.plot([], [], " ", label="k = 0: the two limits agree up to round-off")
    size_ticks(ax, cfg["D_limit"])
    ax.legend(fontsize=7)
    fig.suptitle(
        f"two-layer perceptron after k={k} of {K} steps, ρ={cfg['activation']}, "
        f"s_u={cfg['s_u']}, s_v={cfg['s_v']}, η=({cfg['lr_u']}, {cfg['lr_v']}); mean over "
        f"{cfg['seeds']} draws, bars ×/÷ their geometric spread",
        fontsize=10,
    )
    stem = "two_layer_limits" if k == K else f"two_layer_limits_step{k}"
    save_figure(fig, Path(out) / f"{stem}.png", dpi=120)


def criteria_figure(out, cfg, points, by_fit):
    """`two_layer_criteria.png`, parts (c) and (d): the loss decay, the feature movement
    and the kernel change against s_v (top), the training loss per rule and the feature
    diversity against D (bottom)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(20, 9))
    styles = list(zip(cfg["sweep_M"], ("-", "--", "-.", ":"), "osD^", strict=False))
    _criteria_curves(axes, points, by_fit, styles)
    _label_criteria(axes, points, cfg["steps"])
    _loss_panels(axes, cfg, points, styles)
    _diversity_panel(axes[1, 2], points, by_fit)
    axes[1, 3].set_axis_off()
    fig.suptitle(
        f"mean over {cfg['seeds']} draws, bars ×/÷ their geometric spread, D={cfg['sweep_D']} "
        "(feature diversity: 256 units, up to 8 draws per D; dotted: theory slopes)",
        fontsize=9,
    )
    save_figure(fig, Path(out) / "two_layer_criteria.png", dpi=110)


def _criteria_curves(axes, points, by_fit, styles) -> None:
    """The top row's curves against s_v, per width (line style) and rule (colour)."""
    rules = (("balanced", "C2"), ("unscaled", "C1"))
    for M, ls, mk in styles:
        for rule, color in rules:
            rows = _criteria_rows(points, M, rule)
            s = [r["s_v"] for r in rows]
            ratio = [
                math.nan if None in (r["loss"][0]["mean"], r["loss"][1]["mean"])
                else r["loss"][1]["mean"] / r["loss"][0]["mean"]
                for r in rows
            ]  # fmt: skip
            axes[0, 0].plot(s, ratio, color=color, linestyle=ls, marker=mk, label=f"{rule}, M={M}")
            axes[0, 1].plot(
                s, _means([r["first_step_decrease"] for r in rows]), color=color, linestyle=ls,
                marker=mk, label=f"{rule}, M={M}",
            )  # fmt: skip
        for ax, (q, theory) in zip(axes[0, 2:], CRITERIA_THEORY.items(), strict=True):
            rows = _criteria_rows(points, M, "balanced")
            s = [r["s_v"] for r in rows]
            fit = by_fit.get((q, "s_v", tuple(sorted({"M": M, "rule": "balanced"}.items()))))
            label = f"balanced, M={M}"
            if fit and fit.get("slope") is not None:
                label += f": slope {interval_text(fit['slope'], fit['ci95'])}"
            loglog_series(
                ax, s, [r[q]["mean"] for r in rows], [r[q]["std"] for r in rows],
                label=label, linestyle=ls, color="C2", marker=mk,
            )  # fmt: skip
            if fit and fit.get("slope") is not None:
                _fit_lines(ax, fit, theory, "C2")
            rows = _criteria_rows(points, M, "unscaled")
            loglog_series(
                ax, [r["s_v"] for r in rows], [r[q]["mean"] for r in rows],
                [r[q]["std"] for r in rows], label=f"η_u = lr, M={M}", linestyle=ls,
                color="C1", marker=mk,
            )  # fmt: skip


def _label_criteria(axes, points, K) -> None:
    """The top row's exploded points, theory entries, axes, titles and legends."""
    _say_exploded(axes[0, 0], points, "loss", upto=1)
    for ax, q in zip(axes[0, 1:], ("first_step_decrease", *CRITERIA_THEORY), strict=True):
        _say_exploded(ax, points, q)
    axes[0, 2].plot([], [], ":", color="gray", label="theory: slope −1 (s_v ≥ 2)")
    axes[0, 3].plot([], [], ":", color="gray", label="theory (M → ∞): slope −2 (s_v ≥ 2)")
    axes[0, 0].set(xscale="log", yscale="log", xlabel="s_v (v ~ N(0, s_v² D))",
                   ylabel="mean loss after one step / mean initial loss")  # fmt: skip
    axes[0, 0].axhline(1, color="gray", linewidth=0.6)
    axes[0, 0].set_title(
        "part (c), balanced loss decay: η_u = lr·min(1, 1/s_v²) vs η_u = lr", fontsize=9
    )
    axes[0, 0].legend(fontsize=7, handlelength=3.5)
    axes[0, 1].set_xscale("log")
    axes[0, 1].set_yscale("symlog", linthresh=0.1)
    axes[0, 1].axhline(0, color="gray", linewidth=0.6)
    axes[0, 1].set(xlabel="s_v", ylabel="mean over draws of (loss_0 − loss_1) / loss_0")
    axes[0, 1].set_title("part (c), first-step relative loss decrease (per draw)", fontsize=9)
    axes[0, 1].legend(fontsize=7, handlelength=3.5)
    axes[0, 2].set(xscale="log", yscale="log", xlabel="s_v",
                   ylabel=f"RMS |P_K − P_0| over units, inputs (K={K})")  # fmt: skip
    axes[0, 2].set_title("part (c), feature learning: balanced rate (fit) and η_u = lr", fontsize=9)
    axes[0, 2].legend(fontsize=6)
    axes[0, 3].set(xscale="log", yscale="log", xlabel="s_v",
                   ylabel=f"‖K_K − K_0‖_F / ‖K_0‖_F (K={K})")  # fmt: skip
    axes[0, 3].set_title(
        "part (d), lazy regime: kernel change, balanced (fit) and η_u = lr", fontsize=9
    )
    axes[0, 3].legend(fontsize=6)


def _loss_panels(axes, cfg, points, styles) -> None:
    """The training loss after each step, per rule: colour s_v, line style M."""
    import matplotlib.pyplot as plt

    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(cfg["s_v_sweep"])))
    for ax, (rule, name) in zip(
        axes[1, :2], (("balanced", "balanced rate η_u = lr·min(1, 1/s_v²)"),
                      ("unscaled", "η_u = lr (unscaled)")), strict=True,
    ):  # fmt: skip
        for j, (M, ls, mk) in enumerate(styles):
            for r in _criteria_rows(points, M, rule):
                color = colors[cfg["s_v_sweep"].index(r["s_v"])]
                loss = _means(r["loss"])
                ax.plot(range(len(loss)), loss, color=color, linestyle=ls, marker=mk,
                        markersize=3, label=f"s_v={r['s_v']:g}" if j == 0 else None)  # fmt: skip
            ax.plot([], [], color="0.3", linestyle=ls, marker=mk, label=f"M={M}")
        ax.set(yscale="log", xlabel="GD step k", ylabel="mean training loss after k steps")
        ax.set_title(f"part (c), training loss, {name}", fontsize=9)
        _say_exploded(ax, [p for p in points if p.get("rule") == rule], "loss")
        ax.legend(fontsize=6, ncol=2)


def _diversity_panel(ax, points, by_fit) -> None:
    """The feature diversity: the initial pre-activations' RMS against D, both scalings."""
    rows = sorted((p for p in points if p["part"] == "diversity"), key=lambda p: p["D"])
    for name, theory, color, text in (
        ("scaled", 0.0, "C0", "σ_u = s_u sqrt(D)"), ("unscaled", -0.5, "C3", "σ_u = s_u"),
    ):  # fmt: skip
        fit = by_fit.get((f"preactivation_rms_{name}", "D", ()))
        loglog_series(
            ax, [r["D"] for r in rows], [r[name]["mean"] for r in rows],
            [r[name]["std"] for r in rows], fit=fit, theory=theory, label=text, color=color,
        )  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="embedding dimension D",
           ylabel="RMS of the initial pre-activations")  # fmt: skip
    ax.set_title("part (c), feature diversity: pre-activations at initialisation", fontsize=9)
    if rows:
        size_ticks(ax, [r["D"] for r in rows])
        ax.legend(fontsize=7)


def critical_figure(out, critical):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.3))
    rows = critical["rows"]
    dots = ax.scatter(
        [r["min_sqrt"] for r in rows],
        [r["sigma_v_star"] for r in rows],
        s=14,
        c=np.log2([r["d_out"] for r in rows]),
        label="measured σ_v* (colour: d_out)",
    )
    outs = sorted({r["d_out"] for r in rows})
    bar = fig.colorbar(dots, ax=ax, ticks=np.log2(outs))
    bar.ax.set_yticklabels([str(d) for d in outs])
    bar.set_label("output dimension d_out")
    xs = [r["min_sqrt"] for r in rows]
    grid = np.geomspace(min(xs) / 1.2, max(xs) * 1.2, 10)  # the diagonal over the data
    ax.plot(grid, grid, color="gray", linestyle=":", label="σ_v* = min(√M, √d_out)")
    ax.plot([r["min_sqrt"] for r in rows], [r["heuristic"] for r in rows], "x", color="C3",
            label="1/(1/√M + 1/√d_out)")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="min(√M, √d_out)",
           ylabel="σ_v with RMS→RMS gain 1 of V/M")  # fmt: skip
    ax.set_title("part (c): critical output scale (operator-norm heuristic)", fontsize=9)
    ax.legend(fontsize=7)
    save_figure(fig, Path(out) / "two_layer_critical_scale.png", dpi=120)


def series(points, part, key, fixed, against, quantity, k):
    rows = sorted(
        (p for p in points if p["part"] == part and all(p[a] == b for a, b in fixed.items())),
        key=lambda p: p[against],
    )
    return rows, [r[quantity][k] for r in rows]


# the slopes against s_v (s_v >= 2) of the lazy-regime criteria (module docstring, (d)):
# features move like 1/s_v, the tangent kernel like 1/s_v² (its first-order changes cancel)
CRITERIA_THEORY = {"feature_movement": -1.0, "kernel_change": -2.0}


def _fit_lines(ax, fit, theory, color):
    """The fitted line (dashed) and the theory's slope (dotted, through the fitted points'
    geometric centre), both over the fitted range only."""
    xs = np.geomspace(min(fit["sizes"]), max(fit["sizes"]), 10)
    ax.plot(xs, np.exp(fit["intercept"]) * xs ** fit["slope"], "--", color=color, lw=1)
    xc = math.exp(np.mean(np.log(fit["sizes"])))
    yc = math.exp(fit["intercept"]) * xc ** fit["slope"]
    ax.plot(xs, yc * (xs / xc) ** theory, ":", color="gray", lw=1.5)


def _criteria_rows(points, M, rule):
    return sorted(
        (p for p in points if p["part"] == "criteria" and p["M"] == M and p["rule"] == rule),
        key=lambda p: p["s_v"],
    )


def _means(stats):
    """The means of `stats` (NaN where every draw exploded)."""
    return [math.nan if s["mean"] is None else s["mean"] for s in stats]


def _say_exploded(ax, points, q, upto=None) -> None:
    """Name on `ax` the criteria points whose `q` (the loss: after steps 0..`upto`, every
    step when None) exploded in every draw: they have no mean to draw."""
    gone = []
    for p in points:
        if p["part"] != "criteria":
            continue
        stats = p[q][: None if upto is None else upto + 1] if q == "loss" else [p[q]]
        steps = [k for k, stat in enumerate(stats) if stat["mean"] is None]
        if steps:
            at = f" from k = {steps[0]}" if q == "loss" else ""
            gone.append(f"{p['rule']}, M={p['M']}, s_v={p['s_v']:g}{at}")
    if gone:  # an entry of the legend (drawn after)
        ax.plot([], [], " ", label="every draw exploded (not drawn):\n" + "\n".join(gone))


def inputs_figure(out, cfg, rows):
    """`two_layer_inputs.png`, part (e): (left) the `1 − δ` quantile of the max over n inputs
    of the output error at initialisation, times sqrt(M), against n, per δ (filled:
    orthogonal inputs, hollow: inputs on an arc), with the max of n independent Gaussians
    at each family's σ̂ (dotted, orthogonal); (right) the ratio of the two with its
    interval, 1 where the union bound's factor sqrt(log(n/δ)) is attained."""
    import matplotlib.pyplot as plt

    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(12, 4.8))
    deltas = sorted({r["delta"] for r in rows}, reverse=True)
    colors = dict(zip(deltas, plt.cm.plasma(np.linspace(0.05, 0.8, len(deltas))), strict=True))
    ns = sorted({r["n"] for r in rows})
    families = {"orthogonal": ("o", "full"), "arc": ("s", "none")}
    shift = {"orthogonal": 0.96, "arc": 1.04}
    for family, (marker, fill) in families.items():
        for delta in deltas:
            mine = sorted(
                (r for r in rows if r["family"] == family and r["delta"] == delta
                 and None not in (r.get("ratio"), r.get("ci95"), r.get("quantile_sqrt_M"),
                                  r.get("predicted_sqrt_M"))),
                key=lambda r: r["n"],
            )  # fmt: skip
            if not mine:
                continue
            color = colors[delta]
            n = np.array([r["n"] for r in mine], dtype=float)
            ax.plot(n, [r["quantile_sqrt_M"] for r in mine], marker=marker, fillstyle=fill,
                    color=color, ls="-" if family == "orthogonal" else "--",
                    label=f"{family}, δ = {delta:g}")  # fmt: skip
            if family == "orthogonal":
                ax.plot(n, [r["predicted_sqrt_M"] for r in mine], ":", color=color, lw=1.2)
            ratio = np.array([r["ratio"] for r in mine])
            ci = np.array([r["ci95"] for r in mine])
            ax_r.errorbar(n * shift[family] * (1 + 0.02 * deltas.index(delta)), ratio,
                          yerr=[ratio - ci[:, 0], ci[:, 1] - ratio], fmt=marker,
                          fillstyle=fill, color=color, ms=5, capsize=2,
                          label=f"{family}, δ = {delta:g}")  # fmt: skip
    ax.plot([], [], "k:", label="max of n independent Gaussians (predicted, orthogonal)")
    for a in (ax, ax_r):
        a.set_xscale("log")
        size_ticks(a, ns)
        a.set_xlabel("number of inputs n")
    ax.set(ylabel="(1 − δ) quantile of max_i |f̂_0(x_i) − f_0(x_i)|, times √M")
    ax.set_title(
        f"part (e): the log(n/δ) factor at initialisation (M = {cfg.get('input_M')}, "
        f"D = {cfg.get('input_D')},\n{cfg.get('input_draws')} draws; solid: orthogonal inputs, "
        "dashed: inputs on a quarter circle)",
        fontsize=9,
    )
    ax.legend(fontsize=6, ncol=2)
    ax_r.axhline(1.0, color="k", lw=0.8)
    ax_r.set(ylabel="measured quantile / independent-Gaussian quantile")
    ax_r.set_title(
        "1: the union bound's sqrt(log(n/δ)) is attained (independent errors);\n"
        "below 1: correlated errors, the max saturates (95% bootstrap intervals)",
        fontsize=9,
    )
    ax_r.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    save_figure(fig, Path(out) / "two_layer_inputs.png", dpi=110)
