"""Figures of the response study (Fischer, Dahmen & Helias, Figures 2, 4 and 5)."""

from pathlib import Path

import numpy as np

from ...io.plotting import save_figure, use_agg
from ...io.style import COLORS, CYCLE
from ...stats.fits import interval_text
from ...theory.response import FIG2, FIG5_SIGMA_B2, FIG5_SIGMA_W2


def _arr(x):
    return np.asarray(x, dtype=float)


def make_figures(out, cfg, theory, stars, points, by_part):
    """Figures 2, 4 and 5 of the paper, and the simulation against the theory layer by layer
    (where there are simulated points)."""
    use_agg()
    out = Path(out)
    _figure2(out, cfg, theory, by_part)
    _figure4(out, cfg, theory, stars, by_part)
    _figure5(out, cfg, theory)
    # simulation against theory, layer by layer: C̄, χ and their z-scores (top), K, η and
    # the outputs χ^out, K^out against α (bottom)
    if points:
        _simulation_vs_theory(out, cfg, theory, points)


def _figure2(out: Path, cfg, theory, by_part) -> None:
    """Figure 2: residual kernels and response increments, ResNet vs FFNet."""
    import matplotlib.pyplot as plt

    L_max = max(cfg["depths"])
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    layers = np.arange(L_max + 1)
    for name, color in (("resnet", COLORS["blue"]), ("ffnet", COLORS["green"])):
        ax[0].plot(layers, theory[f"fig2_{name}_C"], color=color, label=f"{name} theory")
        ax[1].semilogy(layers, theory[f"fig2_{name}_eta"], color=color, label=f"{name} theory")
    for spec_res, name in zip(by_part.get("fig2", []), ("resnet", "ffnet"), strict=False):
        color = COLORS["blue"] if name == "resnet" else COLORS["green"]
        C = spec_res["C"]
        ax[0].errorbar(  # from the input's kernel C̄⁰ = K⁰ on
            layers,
            _arr(C["sim_mean"]),
            _arr(C["sim_se"]),
            fmt="o",
            ms=3,
            color=color,
            label=f"{name} simulation (N={cfg['width']})",
        )
        eta = _arr(spec_res["eta"]["sim_mean"])
        se = _arr(spec_res["eta"].get("sim_se", np.zeros_like(eta)))
        # a simulated η^l within 2 SE of zero is noise, not a measurement: drawn open, above
        # the floor 2 SE; a mean <= 0 has no place on the log axis (counted in the legend)
        resolved = eta > 2 * se
        noise = ~resolved & (eta > 0)
        ax[1].errorbar(layers[resolved], eta[resolved], se[resolved], fmt="o", ms=3,
                       color=color, label=f"{name} simulation (N={cfg['width']})")  # fmt: skip
        if not resolved.all():
            ax[1].plot(layers[noise], eta[noise], "o", ms=3, mfc="none", color=color)
            ax[1].semilogy(layers, 2 * se, ":", color=color, lw=1,
                           label=f"{name}: 2 SE, the simulation's floor (open: "
                           f"{int(noise.sum())} layers within it"
                           + (f"; {int((eta <= 0).sum())} ≤ 0 not drawn)" if (eta <= 0).any()
                              else ")"))  # fmt: skip
    ax[0].set(
        xlabel="layer l",
        ylabel=r"residual kernel $\bar C^l$",
        title=f"(a) σ_w²={FIG2['sigma_w2']}, σ_b²={FIG2['sigma_b2']}, α={FIG2['alpha']}, "
        f"K⁰={FIG2['K0']}",
    )
    ax[1].set(xlabel="layer l", ylabel=r"response $\eta^l$", title="(b) response increments")
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=6)
    save_figure(fig, out / "figure2_resnet_vs_ffnet.png", dpi=120)


def _figure4(out: Path, cfg, theory, stars, by_part) -> None:
    """Figure 4: χ^out against α, α* against L, α* against K^0."""
    import matplotlib.pyplot as plt

    depths, L_max = cfg["depths"], max(cfg["depths"])
    grid = theory["alpha_grid"]
    blues = plt.cm.Blues(np.linspace(0.35, 1.0, len(depths)))
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    sim_alphas = [a for r in by_part.get("alpha_star", []) for a in r["alphas"]]
    alpha_lim = (min([0.02, *(a / 1.2 for a in sim_alphas)]),
                 max([3.0, *(a * 1.2 for a in sim_alphas)]))  # fmt: skip
    for L, color in zip(depths, blues, strict=True):
        ax[0].plot(grid, theory[f"chi_out_L{L}"], color=color, label=f"L={L}")
    for s in stars:
        sim = s.get("simulated")
        if sim is not None:
            res = next(r for r in by_part["alpha_star"] if r["L"] == s["L"])
            ax[0].errorbar(
                _arr(res["alphas"]),
                _arr(res["chi_out_mean"]),
                _arr(res["chi_out_se"]),
                fmt=".",
                color="k",
                ms=3,
            )
    ax[0].set(
        xscale="log",
        xlabel="α",
        ylabel=r"$\chi^{out}$",
        xlim=alpha_lim,
        title=f"(a) K⁰={cfg['K0']}, σ_w²={cfg['sigma_w2']}, σ_b²={cfg['sigma_b2']}",
    )
    ax[0].legend(fontsize=7)
    Ls = [s["L"] for s in stars]
    for x, y, fmt, color, label in (
        (
            theory["formula_L"],
            theory["formula_curve"],
            "-",
            COLORS["orange"],
            "saturation formula (8)",
        ),
        (Ls, [s["asymptotic"] for s in stars], "--", COLORS["gray"], "large-L form (9)"),
        (Ls, [s["numeric"] for s in stars], "o", COLORS["blue"], "argmax of theory χ^out"),
    ):
        ax[1].plot(x, y, fmt, color=color, label=label)
    sims = [s for s in stars if s.get("simulated")]
    if sims:
        v = np.array([s["simulated"]["value"] for s in sims])
        lo = v - np.array([s["simulated"]["ci95"][0] for s in sims])
        hi = np.array([s["simulated"]["ci95"][1] for s in sims]) - v
        ax[1].errorbar(
            [s["L"] + 0.4 for s in sims],
            v,
            [np.maximum(lo, 0), np.maximum(hi, 0)],
            fmt="s",
            color="k",
            ms=4,
            label="simulation (95% CI)",
        )
    ax[1].axhspan(0.1, 0.3, color="0.92", zorder=0,
                  label="α ∈ [0.1, 0.3]: found empirically (Szegedy et al.)")  # fmt: skip
    # up to 1.2 (the paper's), or above the largest α* and interval drawn
    shown = [s["numeric"] for s in stars] + [s["simulated"]["ci95"][1] for s in sims]
    top = max([1.2, *(1.05 * v for v in shown if v is not None and np.isfinite(v))])
    ax[1].set(xlabel="depth L", ylabel="α*", title="(b) optimal scaling", ylim=(0, top))
    ax[1].legend(fontsize=7)
    ax[2].plot(theory["K0_grid"], theory["alpha_star_K0"], "o", label="argmax of theory χ^out")
    ax[2].plot(theory["K0_grid"], theory["formula_K0"], "-", label="saturation formula")
    ax[2].set(xscale="log", xlabel="K⁰", ylabel="α*", title=f"(c) L={L_max}")
    ax[2].legend(fontsize=7)
    save_figure(fig, out / "figure4_optimal_scaling.png", dpi=120)


def _figure5(out: Path, cfg, theory) -> None:
    """Figure 5: universality across σ_w² (collapse in α σ_w) and σ_b²."""
    import matplotlib.pyplot as plt

    grid = theory["alpha_grid"]
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.8))
    shades = plt.cm.viridis(np.linspace(0, 0.85, len(FIG5_SIGMA_W2)))
    for s, c in zip(FIG5_SIGMA_W2, shades, strict=True):
        chi = theory[f"fig5_w{s}"]
        ax[0].plot(grid, chi, color=c, label=f"σ_w²={s}")
        ax[2].plot(grid * np.sqrt(s), chi / s, color=c, label=f"σ_w²={s}")
    shades = plt.cm.plasma(np.linspace(0, 0.85, len(FIG5_SIGMA_B2)))
    ref = float(theory[f"fig5_b{FIG5_SIGMA_B2[0]}_star"])
    for s, c in zip(FIG5_SIGMA_B2, shades, strict=True):
        chi = theory[f"fig5_b{s}"]
        ax[1].plot(grid, chi, color=c, label=f"σ_b²={s}")
        ax[3].plot(grid * ref / float(theory[f"fig5_b{s}_star"]), chi, color=c)
    ax[0].set(title=f"(a) σ_b²={cfg['sigma_b2']}", xlabel="α", ylabel=r"$\chi^{out}$")
    ax[1].set(title="(b) σ_w²=1.75", xlabel="α")
    ax[2].set(
        title=r"(c) collapse: $\hat\alpha=\alpha\sigma_w$, $\chi^{out}/\sigma_{w,out}^2$",
        xlabel=r"$\alpha\sigma_w$",
    )
    ax[3].set(title=r"(d) $\alpha\,\alpha^*(\sigma_{b,ref})/\alpha^*(\sigma_b)$", xlabel="α")
    for a in ax:
        a.set(xscale="log", xlim=(0.02, 3))
    ax[0].legend(fontsize=7)
    ax[1].legend(fontsize=7)
    save_figure(fig, out / "figure5_universality.png", dpi=120)


def _simulation_vs_theory(out: Path, cfg, theory, points) -> None:
    """`simulation_vs_theory.png`: the simulated points against the theory, layer by layer."""
    import matplotlib.pyplot as plt

    L_max = max(cfg["depths"])
    grid = theory["alpha_grid"]
    layers = np.arange(L_max + 1)
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.6))
    ax = axes.ravel()
    nonpositive = 0  # simulated η means <= 0: no place on the log axis
    colors = [CYCLE[i % len(CYCLE)] for i in range(len(points))]
    for p, c in zip(points, colors, strict=True):
        for i, q in ((0, "C"), (1, "chi"), (3, "K"), (4, "eta")):
            mean, se = _arr(p[q]["sim_mean"]), _arr(p[q]["sim_se"])
            ax[i].plot(layers, _arr(p[q]["theory"]), color=c, label=f"α={p['alpha']:.3g}")
            keep = mean > 0 if q == "eta" else np.ones(mean.shape, bool)
            nonpositive += int((~keep).sum())
            ax[i].errorbar(layers[keep], mean[keep], se[keep], fmt="o", ms=2, color=c)
        ax[2].plot(layers, _arr(p["C"]["z"]), ".-", color=c)
        ax[2].plot(layers, _arr(p["chi"]["z"]), "x--", color=c)
        for q, marker in (("chi_out", "o"), ("K_out", "s")):
            ax[5].errorbar(p["alpha"], p[q]["sim_mean"], p[q]["sim_se"], fmt=marker, ms=4,
                           color=c)  # fmt: skip
            ax[5].plot(p["alpha"], p[q]["theory"], marker, ms=7, mfc="none", color=c)
    for a in (ax[0], ax[1], ax[3], ax[4]):  # what the marks are
        a.plot([], [], "-", color="0.3", label="theory (line)")
        a.errorbar([], [], [], fmt="o", ms=2, color="0.3", label="simulation (mean ± SE)")
    ax[0].set(xlabel="layer l", ylabel=r"$\bar C^l$", yscale="log",
              title="residual kernel C̄^l")  # fmt: skip
    ax[1].set(xlabel="layer l", ylabel=r"$\chi^l$", title="response χ^l")
    ax[2].axhspan(-3, 3, color="0.92", zorder=0, label="|z| ≤ 3")
    ax[2].set(
        xlabel="layer l",
        ylabel="(simulation − theory) / SE",
        title="z-scores (C: dots, χ: crosses)\n" + z_offsets(points, layers),
    )
    ax[2].title.set_fontsize(8)
    ax[2].legend(fontsize=7, loc="lower left")
    ax[3].set(xlabel="layer l", ylabel="$K^l$", yscale="log", title="kernel K^l")
    ax[4].set(xlabel="layer l", ylabel=r"$\eta^l$", yscale="log",
              title="response increments η^l" + (f" ({nonpositive} simulated means ≤ 0 "
              "not drawn: no log)" if nonpositive else ""))  # fmt: skip
    grid_out = theory.get(f"chi_out_L{L_max}")
    if grid_out is not None:
        ax[5].plot(grid, grid_out, "-", color="0.5", lw=0.8, label=f"χ^out theory, L = {L_max}")
    ax[5].plot([], [], "o", color="0.3", label="χ^out simulated (open: theory)")
    ax[5].plot([], [], "s", color="0.3", label="K^out simulated (open: theory)")
    ax[5].set(xscale="log", yscale="log", xlabel="α", ylabel="output value",
              title=f"outputs at l = L = {L_max}: χ^out and K^out against α")  # fmt: skip
    for a in (ax[0], ax[1], *ax[3:]):
        a.title.set_fontsize(9)
    ax[1].legend(fontsize=7)  # one legend for both panels (the kernel's curves fill its own)
    ax[4].legend(fontsize=7)
    ax[5].legend(fontsize=7)
    save_figure(fig, out / "simulation_vs_theory.png", dpi=120)


def z_offsets(points, layers) -> str:
    """The mean z-score of C and χ over the deeper half of the layers, per α: a systematic
    offset (a finite-width bias, or a theory off) shows as a mean far from 0, where single
    layers' z-scores stay inside ±3. The layers share their networks, so the mean is not a
    test: it is said, not judged."""
    deep = np.asarray(layers) >= max(layers) / 2
    parts = []
    for p in points:
        z = np.concatenate([_arr(p[q]["z"])[deep] for q in ("C", "chi")])
        z = z[np.isfinite(z)]
        if z.size:
            parts.append(f"α={p['alpha']:.3g}: {round(float(z.mean()), 1) + 0.0:+.1f}")
    return f"mean z, layers ≥ {max(layers) / 2:g} (correlated): " + ", ".join(parts)


def _finish(ax, legend: int, **settings) -> None:
    """`ax.set(**settings)`, then a title of font size 8 and a legend of font size `legend`."""
    ax.set(**settings)
    ax.title.set_fontsize(8)
    ax.legend(fontsize=legend)


def paper_figures(out, cfg, theory, paper):
    """`response_figures_1b_3_4c_6.png` (Figures 1(b), 3, 4(c) with simulated α*, 6) and
    `response_correlations.png` (cross-input correlations, the maximum-entropy condition,
    the linearised response)."""
    use_agg()
    import matplotlib.pyplot as plt

    out = Path(out)
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    shades = plt.cm.Blues(np.linspace(1.0, 0.45, 3))
    f3 = paper.get("fig3")
    if f3:
        _figure3(axes, cfg, f3, shades)
    f6 = paper.get("fig6")
    if f6:
        _figure6(axes[0, 2], cfg, f6)
    sig = paper.get("signal")
    if sig:
        _signal_panel(axes[1, 0], sig, shades)
    _figure4c(fig, axes[1, 1], cfg, theory, paper)
    lin = paper.get("linearised_response")
    if lin:
        _linearised_panel(axes[1, 2], cfg, theory, lin)
    save_figure(fig, out / "response_figures_1b_3_4c_6.png", dpi=100)
    _correlations_figure(out, cfg, paper)


def _figure3(axes, cfg, f3, shades) -> None:
    """Fig. 3 on `axes[0, 0]` and `axes[0, 1]`: K^l and χ^l, theory and simulation."""
    for row, color in zip(f3["per_alpha"], shades, strict=True):
        layers = np.arange(len(row["K"]["theory"]))
        for ax, q in ((axes[0, 0], "K"), (axes[0, 1], "chi")):
            ax.plot(layers, row[q]["theory"], color=color, label=f"α = {row['alpha']:g} theory")
            ax.errorbar(layers, row[q]["sim_mean"], row[q]["sim_se"], fmt="o", ms=2.5,
                        color=color)  # fmt: skip
    for ax, q in ((axes[0, 0], "K^l"), (axes[0, 1], "χ^l")):
        _finish(ax, 7, xlabel="layer l", ylabel=q, yscale="log",
                title=f"Fig. 3: {q} (σ_w² = {f3['sigma_w2']}, σ_b² = {f3['sigma_b2']}, "
                f"K⁰ = {f3['K0']}); dots: N = {cfg['width']}")  # fmt: skip


def _figure6(ax, cfg, f6) -> None:
    """Fig. 6: η^l on log-log axes, with the power law fitted to its tail."""
    eta = f6["eta"]
    layers = np.arange(len(eta["theory"]))
    ax.plot(layers[1:], _arr(eta["theory"])[1:], "k-", label="theory")
    ax.errorbar(layers[1:], _arr(eta["sim_mean"])[1:], _arr(eta["sim_se"])[1:], fmt="o", ms=3,
                color=COLORS["blue"], label=f"simulation (N = {cfg['width']})")  # fmt: skip
    fitp = f6["simulation_fit"]
    tail = np.asarray(fitp["layers"])
    ci = fitp["power_exponent_ci95"]
    if fitp["power_exponent"] is not None:
        ref = _arr(eta["sim_mean"])[int(tail[0])]
        ax.plot(tail, ref * (tail / tail[0]) ** -fitp["power_exponent"], "r--",
                label=f"power law l^-{fitp['power_exponent']:.2f} "
                + (interval_text(None, ci) if ci else "")
                + (f"; theory's {f6['theory_power_exponent_same_estimator']:.2f}"
                   if f6.get("theory_power_exponent_same_estimator") is not None
                   else ""))  # fmt: skip
    _finish(ax, 7, xscale="log", yscale="log", xlabel="layer l", ylabel="η^l",
            title=f"Fig. 6 (log-log), L = {f6['L']}: tail from l = {f6['tail_from']} fits "
            f"a {fitp['better_fit']}")  # fmt: skip


def _signal_panel(ax, sig, shades) -> None:
    """Fig. 1(b): the signal h^L against the dynamic range of erf."""
    from scipy import special

    lo, hi, nb = sig["bins"]
    centres = np.linspace(lo, hi, nb + 1)
    centres = (centres[1:] + centres[:-1]) / 2
    hgrid = np.linspace(lo, hi, 400)
    ax.axvspan(-1, 1, color=COLORS["orange"], alpha=0.12, label="dynamic range of erf")
    ax.plot(hgrid, special.erf(hgrid) * 0.5, "k--", lw=0.8, label="erf(h)/2")
    for row, color in zip(sig["per_alpha"], shades[::-1], strict=True):
        dens = np.exp(-(hgrid**2) / (2 * row["K_L"])) / np.sqrt(2 * np.pi * row["K_L"])
        ax.plot(hgrid, dens, color=color,
                label=f"α = {row['factor']:.2g} α*: K^L = {row['K_L']:.2f}, "
                f"{100 * row['fraction_outside_dynamic_range']:.0f}% outside")  # fmt: skip
        # the simulated histogram: steps, a dot on each bin's value
        ax.step(centres, row["histogram"], where="mid", color=color, lw=0.6, marker=".",
                ms=2)  # fmt: skip
    _finish(ax, 6, xlabel="h^L", ylabel="density",
            title=f"Fig. 1(b): the signal h^L (L = {sig['L']}) against erf's range; "
            "steps and dots: simulation")  # fmt: skip


def _figure4c(fig, ax, cfg, theory, paper) -> None:
    """Fig. 4(c): χ^out over (K⁰, α) at the largest depth, α*(K⁰) theory and simulation."""
    L = max(cfg["depths"])
    K0s = np.asarray(theory["K0_grid"])
    grid, surface = np.asarray(theory["fig4c_alpha"]), np.asarray(theory["fig4c_surface"])
    im = ax.pcolormesh(grid, K0s, surface, shading="auto", cmap="viridis")
    fig.colorbar(im, ax=ax, label="χ^out")
    ax.plot(theory["alpha_star_K0"], K0s, "w-", label="α* theory (argmax)")
    ax.plot(theory["formula_K0"], K0s, "w:", label="α* saturation formula (8)")
    for row in paper.get("alpha_star_over_K0", []):
        ci = row["ci95"]
        ax.errorbar(row["value"], row["K0"], xerr=[[row["value"] - ci[0]], [ci[1] - row["value"]]],
                    fmt="o", color=COLORS["red"], ms=4, capsize=2)  # fmt: skip
    ax.plot([], [], "o", color=COLORS["red"], label="α* simulated (95% CI)")
    ax.set(xscale="log", yscale="log", xlabel="α", ylabel="K⁰",
           title=f"Fig. 4(c): χ^out over (K⁰, α), L = {L}")  # fmt: skip
    ax.title.set_fontsize(8)
    ax.legend(fontsize=6, loc="lower left")


def _linearised_panel(ax, cfg, theory, lin) -> None:
    """The linearised response (7) against the exact χ^out, at each depth."""
    import matplotlib.pyplot as plt

    alphas = np.asarray(theory["alpha_grid"])
    for L_, color in zip(cfg["depths"], plt.cm.Blues(np.linspace(0.35, 1, len(cfg["depths"]))),
                         strict=True):  # fmt: skip
        exact = np.asarray(theory[f"chi_out_L{L_}"])
        ax.plot(alphas, exact / (cfg["sigma_w2"] * (1 + alphas**2 * cfg["sigma_w2"]) ** L_),
                color=color, label=f"L = {L_}")  # fmt: skip
    ax.axhline(lin["gain_at_K0"], color="k", ls=":", lw=0.8,
               label=f"G(K⁰) = {lin['gain_at_K0']:.3f} (the small-α limit)")  # fmt: skip
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set(xscale="log", xlabel="α", ylabel="χ^out / σ_w,out²(1 + α²σ_w²)^L",
           title=f"the linearised response (7) against the exact χ^out, "
           f"K⁰ = {cfg['K0']}")  # fmt: skip
    ax.title.set_fontsize(8)
    ax.legend(fontsize=6)


def _correlations_figure(out: Path, cfg, paper) -> None:
    """`response_correlations.png`: cross-input correlations, the maximum-entropy condition."""
    import matplotlib.pyplot as plt

    corr, ent = paper.get("correlations"), paper.get("max_entropy")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    if corr:
        for name, color in (("resnet", COLORS["blue"]), ("ffnet", COLORS["green"])):
            rec = corr[name]
            layers = np.arange(len(rec["theory"]))
            axes[0].plot(layers, rec["theory"], color=color, label=f"{name} recursion")
            axes[0].errorbar(layers, rec["sim_mean"], rec["sim_se"], fmt="o", ms=3, color=color,
                             label=f"{name} N = {cfg['width']}")  # fmt: skip
            fitd = rec["tail_fit"]
            if fitd["better_fit"] == "power law":
                text = f"{name}: tail fits a power l^-{fitd['power_exponent']:.2f}"
                if "predicted_power_exponent" in rec:
                    p, q = rec["predicted_power_exponent"], fitd["power_exponent"]
                    a, b = rec.get("tail_layers", [None, None])
                    # flagged: the recursion is deterministic, a gap is no sampling noise
                    text += (f" (predicted {p:.2f})" if abs(q - p) <= 0.05 else
                             f"\n  ≠ predicted {p:.2f} (fitted over l = {a}..{b})")  # fmt: skip
            else:
                text = f"{name}: tail fits exp(-l/{fitd['exponential_length']:.1f})"
            axes[1].plot(rec["long_theory_layers"], rec["long_theory_distance"], "-", color=color,
                         label=text)  # fmt: skip
            axes[1].errorbar(layers[1:], np.abs(_arr(rec["sim_mean"])[1:] - rec["limit"]),
                             _arr(rec["sim_se"])[1:], fmt="o", ms=3, color=color)  # fmt: skip
        axes[0].set(xlabel="layer l", ylabel="correlation c^l of two inputs",
                    title=f"cross-input correlation, c⁰ = {corr['c0']}, α = 1 "
                    f"(σ_w² = {corr['sigma_w2']}, σ_b² = {corr['sigma_b2']}, "
                    f"K⁰ = {corr['K0']})")  # fmt: skip
        axes[1].set(xscale="log", yscale="log", xlabel="layer l",
                    ylabel="|c^l − c^∞| (c^∞: the limit of the recursion)",
                    title="distance to the limit: power law against exponential")  # fmt: skip
        for ax in axes[:2]:
            ax.title.set_fontsize(8)
            ax.legend(fontsize=6)
    if ent:
        ax = axes[2]
        ax.plot(ent["sigma2"], ent["kl"], "k-", label="D_KL(uniform | erf(h)), h ~ N(0, σ²)")
        ax.axvline(ent["argmin_sigma2"], color=COLORS["red"],
                   label=f"minimum at σ² = {ent['argmin_sigma2']:.3f}")  # fmt: skip
        ax.axvline(
            ent["paper_condition"], color=COLORS["blue"], ls="--", label="the paper's σ² = 1/4"
        )
        for row in ent["K_L_at_alpha_star"]:
            ax.plot(row["K_L"], np.interp(row["K_L"], ent["sigma2"], ent["kl"]), "o", ms=4,
                    color=COLORS["green"])  # fmt: skip
        ax.plot([], [], "o", color=COLORS["green"], label="K^L at the numerical α* (each L)")
        ax.set(xscale="log", xlabel="σ² (variance of the signal before the readout)",
               ylabel="KL divergence",
               title="maximum-entropy condition (Supplementary B)")  # fmt: skip
        ax.title.set_fontsize(8)
        ax.legend(fontsize=6)
    save_figure(fig, out / "response_correlations.png", dpi=100)
