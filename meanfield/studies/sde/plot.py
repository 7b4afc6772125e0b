"""The figure of the sde study: strong error against depth, with fitted and theory slopes."""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import loglog_series, reference_floor, save_figure, size_ticks, use_agg
from ...stats.fits import THEORY_TOLERANCE, exponent_verdict, interval_text, verdict_text

LABELS = {"error_final": r"$E\|H_1 - h_L\|$", "error_sup": r"$E\max_k\|H_{k/L} - h_k\|$"}
TITLES = {
    "brownian": "Brownian weights, β = 1/2 (Itô SDE)",
    "fbm": "fBm weights, H = {hurst}, β = H (Young equation)",
    "smooth": "smooth GP weights (ℓ = {length_scale}), β = 1 (ODE)",
}


def local_slopes(rows, quantity) -> list[tuple[int, int, float]]:
    """`(L, L', slope)` of the mean error between consecutive depths (positive finite means)."""
    import math

    pts = [(p["L"], (p.get(quantity) or {}).get("mean")) for p in rows]
    pts = [(L, m) for L, m in pts if m is not None and math.isfinite(m) and m > 0]
    return [
        (a, b, math.log(mb / ma) / math.log(b / a))
        for (a, ma), (b, mb) in zip(pts, pts[1:], strict=False)
    ]


def fbm_note(rows, quantity, theory) -> str:
    """Why an fBm fit misses the asymptotic slope −(2H − 1), from the local slopes measured:
    they flatten towards the theory from the shallowest pair of depths to the deepest, or
    they do not (and the note says so)."""
    local = local_slopes(rows, quantity)
    if len(local) < 2:
        return (
            "the theory slope −(2H − 1) is asymptotic (fewer than three depths: no change\n"
            "of the local slope to show)"
        )
    (a0, b0, s0), (a1, b1, s1) = local[0], local[-1]
    towards = abs(s1 - theory) < abs(s0 - theory)
    return (
        f"the theory slope −(2H − 1) is asymptotic: local slope {s0:.2f} at L {a0}–{b0},\n"
        f"{s1:.2f} at L {a1}–{b1}"
        + (" (flattening towards the theory)" if towards else " (not nearer the theory)")
    )


def _law_label(law) -> str:
    ci = law.get("p_ci95") or [math.nan, math.nan]
    theory = law["theory"]["p"]
    verdict = exponent_verdict(theory, ci)
    return (
        f"its law a L^-p (1 + c' L^-p): p = {interval_text(law['p'], ci)} "
        f"(theory {theory['value']:.2f}: {verdict_text(verdict)})"
    )


def plot_strong_error(out, cfg, points, fits, reference, rates=()) -> Path:
    """Write `out/strong_error.png`: both errors (mean over seeds; bars ×/÷ their geometric
    spread) against L, the depth law fitted to them (`rates`, solid, with its exponent p),
    the one-term slopes (dashed, secondary), the theory slope (dotted) and the reference's
    own error."""
    use_agg()
    import matplotlib.pyplot as plt

    from ...stats.depth_law import law_mean

    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    rows = sorted(points, key=lambda p: p["L"])
    Ls = [p["L"] for p in rows]
    grid = np.geomspace(min(Ls), max(Ls), 60)
    for i, (q, marker) in enumerate((("error_final", "o"), ("error_sup", "s"))):
        fit = next((f for f in fits if f["quantity"] == q), None)
        law = next((r for r in rates if r.get("quantity") == q and r.get("p") is not None), None)
        color = f"C{i}"
        loglog_series(
            ax,
            Ls,
            [p[q]["mean"] for p in rows],
            [p[q]["std"] for p in rows],
            fit=fit,
            theory=fit["theory"] if fit else None,
            label=LABELS[q] + ", one-term",
            marker=marker,
            color=color,
            # points alone: the dashed fit (and the law's solid curve) are the lines
            linestyle="none",
        )
        if law is not None:
            ax.plot(grid, law_mean(law, grid), "-", color=color, lw=2.2, alpha=0.45,
                    label=_law_label(law))  # fmt: skip
    means = [p[q]["mean"] for q in LABELS for p in rows if p.get(q)]
    reference_floor(ax, reference.get("error_estimate"), means)
    # the law's exponent away from the theory's, or a one-term slope that misses where the
    # law holds: say which on the figure
    law = next((r for r in rates if r.get("p") is not None), None)
    fit = next((f for f in fits if f.get("slope") is not None), None)
    ci = fit.get("ci95") if fit else None
    if law is not None and law["theory"]["p"].get("verdict") == "outside":
        ax.text(0.02, 0.02, f"the law's p {law['p']:.2f} misses the theory "
                f"{law['theory']['p']['value']:.2f}: see results.json",
                transform=ax.transAxes, fontsize=6.5, va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
    elif law is not None and fit and ci and not ci[0] <= fit["theory"] <= ci[1]:
        ax.text(0.02, 0.02, f"one-term slope {fit['slope']:.2f} vs theory {fit['theory']:.2f}: "
                "bent by the next order,\nwhich the law fits (its p "
                + ("holds the theory)" if law["theory"]["p"].get("verdict") == "inside"
                   else f"within ±{THEORY_TOLERANCE:g} of the theory)"),
                transform=ax.transAxes, fontsize=6.5, va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
    elif fit and fit.get("theory") is not None and ci and not ci[0] <= fit["theory"] <= ci[1]:
        why = {
            "fbm": fbm_note(rows, fit["quantity"], fit["theory"]),
            "brownian": "the slope's interval misses −1/2: see the warnings in results.json",
            "smooth": "the slope's interval misses −1: see the warnings in results.json",
        }[cfg["weights"]]
        ax.text(0.02, 0.02, f"fitted {fit['slope']:.2f} vs theory {fit['theory']:.2f}:\n{why}",
                transform=ax.transAxes, fontsize=6.5, va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
    size_ticks(ax, Ls)
    ax.set_xlabel("depth L")
    ax.set_ylabel("strong error (mean over seeds)")
    ax.set_title(TITLES[cfg["weights"]].format(**cfg), fontsize=10)
    ax.legend(fontsize=7)
    drawn = ["bars: ×/÷ the seeds' geometric spread"]
    if any(f.get("slope") is not None for f in fits):
        drawn.append("dashed: one-term slope")
    if any(r.get("p") is not None for r in rates):
        drawn.append("solid: the law")
    fig.suptitle(
        f"ResNet vs its depth limit on the same path: d={cfg['d']}, σ={cfg['activation']}, "
        f"{cfg['seeds']} seeds; dotted: theory slope {fits[0]['theory']:.2f}\n" + "; ".join(drawn),
        fontsize=8,
    )
    path = Path(out) / "strong_error.png"
    save_figure(fig, path, dpi=120)
    return path
