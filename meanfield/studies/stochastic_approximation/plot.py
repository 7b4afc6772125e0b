"""The figure of `meanfield study stochastic-approximation`, from `results.json` alone."""

from pathlib import Path

from ...io.plotting import save_figure, size_ticks, use_agg

KINDS = ("initial", "function", "samples")
MARKERS = {"initial": "o", "function": "s", "samples": "^"}


def figure(out, cfg, points, fits, limits) -> None:
    """`stochastic_approximation.png`: the response per unit size of each ε term against L
    (at the largest M) and against M (at the largest L), one line per kind and size, with
    the mean-ODE limit of the response (dotted) where it is one; the unperturbed error
    beside them (grey)."""
    use_agg()
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.8))
    sizes = cfg["sizes"]
    for ax, against, other in ((axes[0], "L", "M"), (axes[1], "M", "L")):
        fixed = max(cfg[other])
        rows = sorted((p for p in points if p[other] == fixed), key=lambda p: p[against])
        xs = [p[against] for p in rows]
        for i, kind in enumerate(KINDS):
            for j, e in enumerate(sizes):
                q = f"{kind}_{e:g}"
                fit = next((f for f in fits if f["quantity"] == q and f["against"] == against
                            and f.get("slope") is not None), None)  # fmt: skip
                slope = "" if fit is None else (
                    f": slope {fit['slope']:.3f} [{fit['ci95'][0]:.3f}, {fit['ci95'][1]:.3f}]"
                    if fit.get("ci95") else f": slope {fit['slope']:.3f}")  # fmt: skip
                ax.plot(xs, [p[q]["mean"] for p in rows], marker=MARKERS[kind],
                        color=f"C{i}", alpha=1.0 - 0.35 * j, fillstyle="full" if j else "none",
                        label=f"{kind}, e = {e:g}{slope}")  # fmt: skip
            for lim in (limits.get(kind) or {}).values():
                ax.axhline(lim, color=f"C{i}", ls=":", lw=1.0)
        ax.plot(xs, [p["base_error"]["mean"] for p in rows], "x-", color="0.5",
                label="unperturbed error sup_ℓ ‖â^ℓ − a(s_ℓ)‖ (Euler + Monte Carlo)")  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel=f"{against} (at {other} = {fixed})",
               ylabel="response ‖â_e^L − â^L‖ / e (grey: the error itself)")  # fmt: skip
        size_ticks(ax, xs)
        ax.legend(fontsize=6)
    axes[0].set_title(
        "ε terms of the stochastic-approximation proposition against depth L\n(means over "
        f"{cfg['seeds']} draws; dotted: the perturbed mean ODE's response)",
        fontsize=9,
    )
    axes[1].set_title(
        "the same against the samples per layer M\n(flat: the terms do not accumulate over "
        "the LM samples)",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, Path(out) / "stochastic_approximation.png", dpi=110)
