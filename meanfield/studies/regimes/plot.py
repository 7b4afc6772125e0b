"""The regimes study's figures, drawn from its results.json: the diagram of regimes against
the predicted one, learning-rate transfer per parametrisation, and the per-layer
diagnostics.
"""

import math
import textwrap
from pathlib import Path

import numpy as np

from ...diagnostics import regimes as regimes_diagnostics
from ...io.plotting import save_figure, use_agg
from ...io.style import COLORS as HOUSE


def draw_figures(out: Path, cfg, diagram, transfer, transfer_points):
    """The diagram of regimes against the predicted one and, when measured, the
    learning-rate transfer."""
    use_agg()
    _phase_diagram_figure(out, cfg, diagram)
    if not transfer:
        return
    _transfer_figure(out, cfg, transfer)


def _phase_diagram_figure(out: Path, cfg, diagram):
    """phase_diagram.png: the measured regime of every (γ, λ) against the predicted
    boundaries."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6))
    g_all, l_all = cfg["gammas"], cfg["lambdas"]
    gx = np.linspace(min(g_all) - 0.1, max(g_all) + 0.1, 200)
    lo, hi = min(l_all) - 0.25, max(l_all) + 0.25
    ax.axvspan(gx[0], 0.5, color=HOUSE["red"], alpha=0.07)
    ax.axvline(0.5, color="k", lw=1)
    right = gx[gx >= 0.5]
    ax.plot(right, 2 * right - 1, "k-", lw=1.2, label="λ = 2γ − 1 (predictor Θ(1))")
    far = gx[gx >= 1]
    ax.plot(far, far, "k--", lw=1.2, label="λ = γ (local update Θ(1))")
    ax.plot([1], [1], "*", ms=16, mfc="none", mec="k", label="mean-ODE / CompleteP (1, 1)")
    agreement = classified_agreement(diagram)
    for c in diagram:
        marker = "o" if not c["ambiguous"] else "s"
        near = c["distance_to_boundary"] < agreement["resolution"] and not _on_line(c)
        ax.scatter(c["gamma"], c["lambda"], s=160, color=COLORS.get(c["regime"], "k"),
                   marker=marker, edgecolors="k" if c["regime"] != c["predicted_regime"]
                   else "none", linewidths=1.5, zorder=3, alpha=0.35 if near else 1.0)  # fmt: skip
    for name, col in COLORS.items():
        if name is not None and any(c["regime"] == name for c in diagram):
            ax.scatter([], [], s=80, color=col, label=f"measured: {name}")
    ax.scatter([], [], s=80, color="w", edgecolors="k", label="ring: differs from prediction")
    ax.scatter([], [], s=80, marker="s", color="0.8", label="square: ambiguous at these L")
    ax.scatter([], [], s=80, color="0.6", alpha=0.35,
               label="faded: within the classifier's\nresolution of a boundary")  # fmt: skip
    ax.text(gx[0] + 0.02, lo + 0.05, "explosion\n(forward pass)", fontsize=8, color=HOUSE["red"])
    ax.text(0.52, hi - 0.05, "explosion (training)", fontsize=8, va="top", color=HOUSE["red"])
    # below both boundaries (λ < γ ≤ 2γ − 1 for γ ≥ 1), clear of the dashed line
    ax.text(gx[-1] - 0.02, gx[-1] - 0.57, "no learning", fontsize=8,
            ha="right", va="center", color="0.4")  # fmt: skip
    ax.set(xlim=(gx[0], gx[-1]), ylim=(lo, hi), xlabel="γ (residual scale α = L^-γ / M)",
           ylabel="λ (learning rate η = lr0 · M · L^λ)")  # fmt: skip
    ax.set_title(f"Training regimes from exponents in L = {cfg['L'][0]}..{cfg['L'][-1]} "
                 f"({cfg['seeds']} draws, {cfg['steps']} GD steps); lines: predicted boundaries\n"
                 f"as predicted: {agreement['agree']} of {agreement['judged']} judged cells off "
                 f"the lines, {agreement['on_learning_line_agree_judged']} of "
                 f"{agreement['on_learning_line_judged']} on the learning lines\nnot judged: "
                 f"{agreement['near_boundary']} faded (near a boundary), "
                 f"{agreement['ambiguous']} ambiguous elsewhere; squares: all "
                 f"{agreement['ambiguous_drawn']} ambiguous cells", fontsize=9)  # fmt: skip
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(fig, out / "phase_diagram.png", dpi=110)


def _transfer_figure(out: Path, cfg, transfer):
    """transfer.png: a panel per parametrization, and lr* against L for all of them (the
    drift's line)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(transfer) + 1, figsize=(5 * len(transfer) + 4.6, 4.2),
                             squeeze=False)  # fmt: skip
    lrs = np.asarray(cfg["transfer_lrs"])
    cmap = plt.get_cmap("viridis")
    for ax, rec in zip(axes[0][:-1], transfer, strict=True):
        for i, (L, curve) in enumerate(zip(rec["L"], rec["loss_curves"], strict=True)):
            col = cmap(i / max(1, len(rec["L"]) - 1))
            ax.plot(lrs, np.exp(curve), "o-", ms=3, color=col, label=f"L = {L}")
            if rec["optimal_lr"][i] is not None:
                ax.axvline(rec["optimal_lr"][i], color=col, lw=0.8, ls=":")
        ax.set(xscale="log", yscale="log", xlabel="learning-rate prefactor lr0 (η = lr0 · M · L^λ)",
               ylabel=f"training loss after {cfg['transfer_steps']} GD steps")  # fmt: skip
        head = f"{rec['parametrization']} (γ = {rec['gamma']:g}, λ = {rec['lambda']:g})"
        # the drift's text names the depths it left out: wrapped to the panel's width
        body = textwrap.fill(f"drift of lr* {drift_text(rec)}", 62)
        ax.set_title(f"{head}:\n{body}", fontsize=8)
        ax.legend(fontsize=7)
    ax = axes[0][-1]
    for rec, marker in zip(transfer, "osD^v", strict=False):
        found = [(L, v) for L, v in zip(rec["L"], rec["optimal_lr"], strict=True) if v is not None]
        if found:
            ax.plot(*zip(*found, strict=True), marker=marker, ms=4, label=rec["parametrization"])
    if not ax.lines:
        ax.text(0.5, 0.5, "lr* at a grid edge at every depth:\nunresolved", ha="center",
                va="center", transform=ax.transAxes, fontsize=8)  # fmt: skip
    else:
        from matplotlib.ticker import NullLocator

        ax.set(xscale="log", yscale="log")
        depths = sorted({L for rec in transfer for L in rec["L"]})
        ax.set_xticks(depths, [str(L) for L in depths])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.legend(fontsize=7)
    ax.set(xlabel="depth L", ylabel="lr* (parabola's vertex)")
    ax.set_title("lr* against depth L (its slope: the drift exponent;\nunresolved depths, at a "
                 "grid edge, left out)", fontsize=8)  # fmt: skip
    fig.suptitle("Learning-rate transfer across depth (dotted: lr* from a parabola in log-log)",
                 fontsize=10)  # fmt: skip
    save_figure(fig, out / "transfer.png", dpi=110)


def diagnostics_figure(out: Path, cfg, points):
    """`diagnostics.png`: every diagnostic of every (L, γ, λ), the mean over its draws (the
    exploded ones left out) against L, a row per diagnostic and a column per γ, a line per
    λ: the slopes the diagram's exponents are fitted to."""
    if not points:
        return
    use_agg()
    import matplotlib.pyplot as plt

    points = sorted(points, key=lambda p: p["L"])
    gammas, lambdas = cfg["gammas"], cfg["lambdas"]
    cmap = plt.get_cmap("viridis")
    rows, cols = len(DIAGNOSTIC_LABELS), len(gammas)
    fig, axes = plt.subplots(rows, cols, figsize=(2.9 * cols + 1.6, 2.3 * rows + 0.6),
                             squeeze=False, sharey="row")  # fmt: skip
    for r, (name, label) in enumerate(DIAGNOSTIC_LABELS.items()):
        for j, g in enumerate(gammas):
            ax = axes[r][j]
            exploded = nonpositive = dropped = 0
            for k, lam in enumerate(lambdas):
                xs, ys = [], []
                for p in points:
                    cell = next((c for c in p["cells"] if c["gamma"] == g and c["lambda"] == lam),
                                None)  # fmt: skip
                    if cell is None:
                        continue
                    kept = [v for v in cell[name] if v is not None and math.isfinite(v)]
                    dropped += len(cell[name]) - len(kept)
                    if not kept:
                        exploded += 1
                    elif np.mean(kept) <= 0:
                        nonpositive += 1
                    else:
                        xs.append(p["L"])
                        ys.append(float(np.mean(kept)))
                col = cmap(k / max(1, len(lambdas) - 1))
                ax.plot(xs, ys, "o-", ms=3, lw=1, color=col, label=f"λ = {lam:g}")
            notes = []
            if exploded:
                notes.append(f"{exploded} (L, λ) not drawn: every draw exploded")
            if nonpositive:
                notes.append(f"{nonpositive} (L, λ) not drawn: mean ≤ 0 (no log)")
            if dropped:
                notes.append(f"{dropped} exploded draw(s) left out of the means")
            if notes:
                ax.text(0.02, 0.02, "\n".join(notes), transform=ax.transAxes, fontsize=6,
                        va="bottom")  # fmt: skip
            ax.set_xscale("log", base=2)
            if any(len(line.get_xdata()) for line in ax.lines):
                ax.set_yscale("log")
            ax.set_title(f"{label} (γ = {g:g})", fontsize=8)
            ax.tick_params(labelsize=7)
            if r == rows - 1:
                ax.set_xlabel("depth L", fontsize=8)
            if j == 0:
                ax.set_ylabel("mean over draws", fontsize=8)
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"The diagnostics against depth, per cell (γ, λ) ({cfg['seeds']} draws, "
                 f"{cfg['steps']} GD steps): the phase diagram's exponents are their slopes\n"
                 "(the forward deviation is measured at initialisation: one line for every λ)",
                 fontsize=10)  # fmt: skip
    save_figure(fig, out / "diagnostics.png", dpi=90, rect=(0, 0, 1, 0.98))


def drift_text(t) -> str:
    """A drift exponent with its interval and the depths its line goes through (and those
    left out: lr* at a grid edge)."""
    if t["drift_exponent"] is None:
        return "unresolved" + (f" ({t['reason']})" if t.get("reason") else "")
    ci = t.get("drift_ci95")
    text = f"{t['drift_exponent']:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")
    used = [L for L, v in zip(t["L"], t["optimal_lr"], strict=True) if v is not None]
    text += f", a line through L = {', '.join(map(str, used))}"
    if t.get("unresolved_L"):
        text += f" (lr* at a grid edge, left out: L = {', '.join(map(str, t['unresolved_L']))})"
    return text


def classified_agreement(diagram) -> dict:
    """How many cells the measurement classifies as predicted, among those it can judge:
    not ambiguous (no deciding exponent's interval straddles a threshold), classified,
    and predicted farther than the classifier's resolution from its threshold. The
    classifier reads an exponent within EXPONENT_TOL of 0 as Θ(1), so a cell whose
    deciding predicted exponent lies within 2·EXPONENT_TOL of 0 (its threshold plus that
    same tolerance) can be read either way by deviations the classifier tolerates
    elsewhere: it is counted apart, as are the ambiguous cells."""
    resolution = 2 * regimes_diagnostics.EXPONENT_TOL
    on_line = [c for c in diagram if _on_line(c)]
    near = [c for c in diagram if c["distance_to_boundary"] < resolution and not _on_line(c)]
    unclear = [c for c in diagram if c not in near and (c["ambiguous"] or c["regime"] is None)]
    judged = [c for c in diagram if c not in near and c not in unclear and not _on_line(c)]
    agree = [c for c in judged if c["regime"] == c["predicted_regime"]]
    line_judged = [c for c in on_line if c not in unclear]
    keys = ("gamma", "lambda", "regime", "predicted_regime", "ambiguous")
    return {
        "judged": len(judged),
        "agree": len(agree),
        # the learning lines' cells (lazy ODE on λ = 2γ − 1, local feature learning on
        # λ = γ): regimes that are lines, judged against their line's prediction
        "on_learning_line_judged": len(line_judged),
        "on_learning_line_agree_judged": sum(
            c["regime"] == c["predicted_regime"] for c in line_judged
        ),
        "near_boundary": len(near),
        "ambiguous": len(unclear),
        # every cell drawn as a square (ambiguous at these L), wherever it lies
        "ambiguous_drawn": sum(bool(c["ambiguous"]) for c in diagram),
        "resolution": resolution,
        "rule": "judged: not ambiguous, and the deciding predicted exponent at least "
        f"{resolution:g} (twice the classifier's tolerance "
        f"{regimes_diagnostics.EXPONENT_TOL:g}) from 0",
        "disagree": [{k: c[k] for k in keys} for c in judged if c not in agree],
        "not_judged": [
            {**{k: c[k] for k in keys}, "why": "near a boundary" if c in near else "ambiguous"}
            for c in near + unclear
        ],
        "on_learning_line": [
            {k: c[k] for k in ("gamma", "lambda", "regime", "predicted_regime", "ambiguous")}
            for c in on_line
        ],
        "on_learning_line_agree": sum(c["regime"] == c["predicted_regime"] for c in on_line),
    }  # fmt: skip


def _on_line(cell) -> bool:
    """A cell predicted on a learning line (the lazy ODE or local feature learning)."""
    return cell["predicted_regime"] in ("lazy-ode", "local-feature-learning")


COLORS = {  # each regime's colour (the house palette's)
    "local-feature-learning": HOUSE["green"],
    "lazy-ode": HOUSE["blue"],
    "kernel": HOUSE["purple"],
    "no-learning": "0.6",
    "explosion": HOUSE["red"],
    None: "k",
}


DIAGNOSTIC_LABELS = {  # the diagnostics recorded per cell and depth, as the figure names them
    "forward_deviation": "forward deviation",
    "predictor_movement": "predictor movement",
    "local_change": "local feature change",
    "global_change": "global feature change",
    "parameter_movement": "parameter movement",
    "loss_ratio": "loss ratio",
}
