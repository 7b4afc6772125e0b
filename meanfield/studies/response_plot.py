"""Figures of the response study (Fischer, Dahmen & Helias, Figures 2, 4 and 5)."""

from pathlib import Path

import numpy as np

from ..plotting import use_agg
from ..theory.response import FIG2, FIG5_SIGMA_B2, FIG5_SIGMA_W2


def _arr(x):
    return np.asarray(x, dtype=float)


def make_figures(out, cfg, theory, stars, points, by_part):
    use_agg()
    import matplotlib.pyplot as plt

    out = Path(out)
    depths, L_max = cfg["depths"], max(cfg["depths"])
    grid = theory["alpha_grid"]
    blues = plt.cm.Blues(np.linspace(0.35, 1.0, len(depths)))

    # Figure 2: residual kernels and response increments, ResNet vs FFNet
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    layers = np.arange(L_max + 1)
    for name, color in (("resnet", "tab:blue"), ("ffnet", "tab:green")):
        ax[0].plot(layers[1:], theory[f"fig2_{name}_C"][1:], color=color, label=f"{name} theory")
        ax[1].semilogy(layers, theory[f"fig2_{name}_eta"], color=color, label=f"{name} theory")
    for spec_res, name in zip(by_part.get("fig2", []), ("resnet", "ffnet"), strict=False):
        color = "tab:blue" if name == "resnet" else "tab:green"
        C = spec_res["C"]
        ax[0].errorbar(
            layers[1:],
            _arr(C["sim_mean"])[1:],
            _arr(C["sim_se"])[1:],
            fmt="o",
            ms=3,
            color=color,
            label=f"{name} simulation (N={cfg['width']})",
        )
        eta = _arr(spec_res["eta"]["sim_mean"])
        ax[1].semilogy(layers[eta > 0], eta[eta > 0], "o", ms=3, color=color)
    ax[0].set(
        xlabel="layer l",
        ylabel=r"residual kernel $\bar C^l$",
        title=f"(a) σ_w²={FIG2['sigma_w2']}, σ_b²={FIG2['sigma_b2']}, α={FIG2['alpha']}",
    )
    ax[1].set(xlabel="layer l", ylabel=r"response $\eta^l$", title="(b) response increments")
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "figure2_resnet_vs_ffnet.png", dpi=120)
    plt.close(fig)

    # Figure 4: χ^out against α, α* against L, α* against K^0
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
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
        xlim=(0.02, 3),
        title=f"(a) K⁰={cfg['K0']}, σ_w²={cfg['sigma_w2']}, σ_b²={cfg['sigma_b2']}",
    )
    ax[0].legend(fontsize=7)
    ax[1].plot(
        theory["formula_L"],
        theory["formula_curve"],
        "-",
        color="tab:orange",
        label="saturation formula (8)",
    )
    ax[1].plot(
        [s["L"] for s in stars],
        [s["asymptotic"] for s in stars],
        "--",
        color="tab:gray",
        label="large-L form (9)",
    )
    ax[1].plot(
        [s["L"] for s in stars],
        [s["numeric"] for s in stars],
        "o",
        color="tab:blue",
        label="argmax of theory χ^out",
    )
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
    ax[1].axhspan(0.1, 0.3, color="0.92", zorder=0)
    ax[1].set(xlabel="depth L", ylabel="α*", title="(b) optimal scaling", ylim=(0, 1.2))
    ax[1].legend(fontsize=7)
    ax[2].plot(theory["K0_grid"], theory["alpha_star_K0"], "o", label="argmax of theory χ^out")
    ax[2].plot(theory["K0_grid"], theory["formula_K0"], "-", label="saturation formula")
    ax[2].set(xscale="log", xlabel="K⁰", ylabel="α*", title=f"(c) L={L_max}")
    ax[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "figure4_optimal_scaling.png", dpi=120)
    plt.close(fig)

    # Figure 5: universality across σ_w² (collapse in α σ_w) and σ_b²
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
    fig.tight_layout()
    fig.savefig(out / "figure5_universality.png", dpi=120)
    plt.close(fig)

    # simulation against theory, layer by layer
    if points:
        fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
        for p, c in zip(points, plt.cm.tab10(np.arange(len(points))), strict=False):
            for i, q in enumerate(("C", "chi")):
                ax[i].plot(layers, _arr(p[q]["theory"]), color=c, label=f"α={p['alpha']:.3g}")
                ax[i].errorbar(
                    layers, _arr(p[q]["sim_mean"]), _arr(p[q]["sim_se"]), fmt="o", ms=2, color=c
                )
            ax[2].plot(layers, _arr(p["C"]["z"]), ".-", color=c)
            ax[2].plot(layers, _arr(p["chi"]["z"]), "x--", color=c)
        ax[0].set(xlabel="layer l", ylabel=r"$\bar C^l$", yscale="log", title="residual kernel")
        ax[1].set(xlabel="layer l", ylabel=r"$\chi^l$", title="response")
        ax[2].axhspan(-3, 3, color="0.92", zorder=0)
        ax[2].set(
            xlabel="layer l",
            ylabel="(simulation − theory) / SE",
            title="z-scores (C: dots, χ: crosses)",
        )
        ax[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "simulation_vs_theory.png", dpi=120)
        plt.close(fig)
