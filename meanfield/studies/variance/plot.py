"""The figures of the variance study: `variance_law.png` (α = L^-γ/√M) and
`embedding_law.png` (Chaintron's scaling α = 1/(LM), swept in σ_v)."""

import math
from pathlib import Path

import numpy as np

from ...io.plotting import save_figure, series_by, size_ticks, use_agg
from ...theory.variance import variance_law

DRAW_MAX = 1e150  # larger values are not drawn (a log axis to 1e308 overflows its ticks)


def _num(value, default=math.nan) -> float:
    """A stored number for a figure (null, an overflow, or above `DRAW_MAX` as `default`:
    NaN is not drawn)."""
    return default if value is None or not abs(float(value)) <= DRAW_MAX else float(value)


def _beyond(rows, known: bool = True) -> bool:
    """Whether a row's mean or its law lies beyond what the figure draws (a law stored as
    null overflowed, unless c itself is unknown: `known` False)."""
    return any(
        v is not None and not abs(v) <= DRAW_MAX for p in rows for v in (p["mean"], p["theory"])
    ) or (known and any(p["theory"] is None for p in rows))


def _no_finite(rows) -> str:
    """The legend's note of the points with no finite network (not drawn)."""
    gone = [p["L"] for p in rows if p["mean"] is None]
    return f", no finite network at L = {', '.join(map(str, gone))} (not drawn)" if gone else ""


def _means(ax, xs, rows, label, color, c) -> None:
    """One series of mean deviations at `xs` (bars: 2 standard errors), its legend saying
    what is left out: exploded networks, points with no finite network, values above
    `DRAW_MAX`."""
    exploded = sum(p.get("exploded", 0) for p in rows)
    beyond = _beyond(rows, math.isfinite(c))
    ax.errorbar(
        xs,
        [_num(p["mean"]) for p in rows],
        [2 * _num(p["se"], 0.0) for p in rows],
        fmt="o",
        color=color,
        label=label
        + (f", {exploded} exploded network(s) left out" if exploded else "")
        + _no_finite(rows)
        + (f", values above {DRAW_MAX:.0e} not drawn" if beyond else ""),
    )


def variance_figure(out, cfg, points, c):
    use_agg()
    import matplotlib.pyplot as plt

    fig, (ax, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    # every γ with a finished point (the configured ones first, in their order)
    for g, color, rows in series_by(points, "gamma", cfg["gammas"]):
        Ls = np.array([p["L"] for p in rows])
        _means(ax, Ls, rows, f"γ={g} ({rows[0]['regime']})", color, c)
        fine = np.geomspace(Ls.min(), Ls.max(), 50)
        a = fine ** (-g) / math.sqrt(cfg["M"])
        law = variance_law(c, a, cfg["M"], fine, 1.0)
        ax.plot(fine, np.where(law <= DRAW_MAX, law, np.nan), "-", color=color, lw=1)
        ax_b.errorbar(
            [p["MLalpha2"] for p in rows],
            [_num(p["backward"]["sup"]["mean"]) for p in rows],
            [2 * _num(p["backward"]["sup"]["se"], 0.0) for p in rows],
            fmt="o-",
            color=color,
            label=f"γ={g}: L = {Ls.min()}..{Ls.max()}",
        )
        ax_b.plot(
            [p["MLalpha2"] for p in rows],
            [_num(p["backward"]["end"]["mean"]) for p in rows],
            "o:",
            color=color,
            mfc="none",
            ms=6,
            lw=0.8,
        )
    ax_b.plot([], [], "o:", color="0.4", mfc="none", label="open: at l = 0 (end), not the sup")
    if math.isfinite(c):
        ax.axhline(math.exp(c) - 1, color="gray", ls=":", label="e^c − 1")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="depth L",
        ylabel="E‖h^L − x‖² / ‖x‖²",
        title="forward pass against the variance law (lines)\n"
        + f"α = L^-γ/√M, M={cfg['M']}, "
        + (f"{cfg['activation']} 2LP" if cfg["block"] is None else _short(cfg["block"]))
        + (f", c={c:.3f}" if math.isfinite(c) else ", c unknown (φ not finite): no law"),
    )
    ax.title.set_fontsize(9)
    size_ticks(ax, cfg["L"])
    ax.legend(fontsize=7)
    ax_b.set(
        xscale="log",
        yscale="log",
        xlabel="M L α²",
        ylabel="E $\\sup_l$ ‖b^l − b^L‖² / ‖b^L‖²",
        title="first backward pass: the identity as M L α² → 0 (Chizat's notes, §3.1)",
    )
    ax_b.title.set_fontsize(9)
    ax_b.legend(fontsize=7)
    from pathlib import Path

    save_figure(fig, Path(out) / "variance_law.png", dpi=120)


def lm_figure(out, cfg, points, c):
    """`embedding_law.png`: Chaintron's scaling α = 1/(LM), swept in σ_v. The deviation
    against σ_v²/(LM) for each depth (mean over networks, bars 2 standard errors), the
    exact law `(1 + c x / L)^L − 1` of each depth at `x = σ_v²/(LM)` (lines), its leading
    term `c x` (dashed: the Θ(σ_v²/(LM)) law) and `x = 1` (σ_v = √(LM), dotted), beyond
    which the deviation explodes."""
    use_agg()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    xs = [p["sigma_v2_over_LM"] for p in points]
    lo, hi = min(xs), max(xs)
    fine = np.geomspace(lo / 1.5, hi * 1.5, 200)
    for L, color, rows in series_by(points, "L", cfg["L"]):
        _means(ax, [p["sigma_v2_over_LM"] for p in rows], rows, f"L={L}", color, c)
        if math.isfinite(c):
            law = variance_law(c * fine * L * cfg["M"], 1.0 / (L * cfg["M"]), cfg["M"], L, 1.0)
            ax.plot(fine, np.where(law <= DRAW_MAX, law, np.nan), "-", color=color, lw=1)
    if math.isfinite(c):
        ax.plot(fine, c * fine, "--", color="0.3", lw=1, label=f"c σ_v²/(LM), c = {c:.3f}")
    ax.axvline(1.0, color="0.5", ls=":", lw=1, label="σ_v = √(LM)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="σ_v² / (LM)",
        ylabel="E‖h^L − x‖² / ‖x‖²",
        title="first forward pass, α = 1/(LM): Θ(σ_v²/(LM)) while σ_v = O(√(LM))\n"
        f"(Chaintron's slides), M={cfg['M']}, d={cfg['d']}, {cfg['activation']} 2LP; lines: "
        + (
            "the exact law of each L"
            if cfg["activation"] in ("relu", "identity")
            else "each L's law,\nc taken at ‖h‖ = 1 (exact for ReLU only)"
        ),
    )
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    from pathlib import Path

    save_figure(fig, Path(out) / "embedding_law.png", dpi=120)


def _short(spec) -> str:
    """A user's block as a title shows it: `FILE.py:NAME` by the file's name alone (a
    path has no place to wrap), `MODULE:NAME` as given."""
    where, _, name = str(spec).rpartition(":")
    return f"{Path(where).name}:{name}" if where.endswith(".py") else str(spec)
