"""What the figures of the studies `response`, `trained-weights` and `regimes` must show
(issue 47): every finished point of `results.json`, read here from the results as a reader
would, independently of the plotting code (`tests/figure_points.py` gathers `SPECS`).

Each spec returns `(what, panel, x, y)` items (tests/figure_check.py `not_drawn`: `panel`
a substring of the panel's title, `x` None for any abscissa, NaN for a heat map's value),
or None for a figure the study does not declare. Values that are None or not finite are
left to `not_drawn`, which skips them (an exploded or missing value: the figure says so in
words); values <= 0 on a log axis are skipped here, each with its reason."""

import math

import numpy as np


def _finite(v) -> bool:
    return v is not None and math.isfinite(v)


def _positive(v) -> bool:
    """Drawable on a log axis (a value <= 0 has no place there)."""
    return _finite(v) and v > 0


def _mean(values):
    """The mean of a cell's draws, the exploded ones (None) left out (None when all are)."""
    kept = [v for v in values if _finite(v)]
    return float(np.mean(kept)) if kept else None


# ---------------------------------------------------------------------------------------
# response


def _layer_series(what, panel, values, *, first=0, log_y=False):
    """One item per layer l >= `first` of a per-layer series (x = l)."""
    out = []
    for layer, v in enumerate(values):
        if layer < first:
            continue
        if log_y and _finite(v) and v <= 0:
            continue  # a simulated mean <= 0 (noise around a small value) has no log
        out.append((f"{what}, layer {layer}", panel, float(layer), v))
    return out


def response(stem, results):
    cfg = results["config"]
    L_max = max(cfg["depths"])
    out = []
    if stem == "figure2_resnet_vs_ffnet":
        for net, sim in results.get("figure2_simulation", {}).items():
            out += _layer_series(f"Fig. 2 {net} C̄ simulated", "(a)", sim["C"]["sim_mean"])
            # η on a log axis: a simulated mean <= 0 (noise about a vanishing η) is skipped
            out += _layer_series(
                f"Fig. 2 {net} η simulated", "(b)", sim["eta"]["sim_mean"], log_y=True
            )
        return out
    if stem == "figure4_optimal_scaling":
        for s in results["alpha_star"]:
            # α*(L) of the theory (its argmax, a derived quantity drawn as a marker)
            out.append((f"α* theory at L={s['L']}", "(b) optimal scaling", s["L"], s["numeric"]))
            sim = s.get("simulated")
            if sim:  # drawn beside the theory's marker (offset in L): any abscissa
                out.append((f"α* simulated at L={s['L']}", "(b) optimal scaling", None,
                            sim["value"]))  # fmt: skip
        for res in results.get("alpha_star_simulations", []):
            for a, v in zip(res["alphas"], res["chi_out_mean"], strict=True):
                out.append((f"χ^out simulated at L={res['L']}, α={a:.4g}", "(a)", a, v))
        # (c): α*(K⁰) of the theory on its K⁰ grid (theory values, drawn as markers)
        curves = results["theory_curves"]
        for k, a in zip(curves["K0_grid"], curves["alpha_star_K0"], strict=True):
            out.append((f"α* theory at K⁰={k:.4g}", f"(c) L={L_max}", k, a))
        return out
    if stem == "figure5_universality":
        # theory curves only (χ^out over α for several σ_w², σ_b², lines): no simulated or
        # finished point; the α* of each curve are recorded without their χ^out value
        return []
    if stem == "simulation_vs_theory":
        for p in results["points"]:
            a = f"α={p['alpha']:g}"
            out += _layer_series(f"C̄ simulated, {a}", "residual kernel", p["C"]["sim_mean"],
                                 log_y=True)  # fmt: skip
            out += _layer_series(f"χ simulated, {a}", "response χ", p["chi"]["sim_mean"])
            out += _layer_series(f"K simulated, {a}", "kernel K^l", p["K"]["sim_mean"],
                                 log_y=True)  # fmt: skip
            out += _layer_series(f"η simulated, {a}", "response increments", p["eta"]["sim_mean"],
                                 log_y=True)  # fmt: skip
            # the z-scores (derived: (simulation − theory) / SE, per layer)
            out += _layer_series(f"z of C̄, {a}", "z-scores", p["C"]["z"])
            out += _layer_series(f"z of χ, {a}", "z-scores", p["chi"]["z"])
            for q in ("chi_out", "K_out"):  # the outputs (log axis: both are variances)
                v = p[q]["sim_mean"]
                if _positive(v) or not _finite(v):
                    out.append((f"{q} simulated, {a}", "outputs", p["alpha"], v))
        return out
    paper = results.get("paper_figures", {})
    if stem == "response_figures_1b_3_4c_6":
        f3 = paper.get("fig3")
        for row in (f3 or {}).get("per_alpha", []):
            for q, title in (("K", "Fig. 3: K^l"), ("chi", "Fig. 3: χ^l")):
                out += _layer_series(f"Fig. 3 {q} simulated, α={row['alpha']:g}", title,
                                     row[q]["sim_mean"], log_y=True)  # fmt: skip
        f6 = paper.get("fig6")
        if f6:  # log-log: layer 0 has no log (η^0 = 1, the input's), values <= 0 neither
            out += _layer_series("Fig. 6 η simulated", "Fig. 6", f6["eta"]["sim_mean"], first=1,
                                 log_y=True)  # fmt: skip
        sig = paper.get("signal")
        if sig:  # the simulated signal's histogram (a summary of raw samples), bin by bin
            lo, hi, nb = sig["bins"]
            edges = np.linspace(lo, hi, nb + 1)
            centres = (edges[1:] + edges[:-1]) / 2
            for row in sig["per_alpha"]:
                for c, v in zip(centres, row["histogram"], strict=True):
                    out.append((f"Fig. 1(b) density at h={c:.3g}, α={row['factor']:.2g} α*",
                                "Fig. 1(b)", c, v))  # fmt: skip
        # Fig. 4(c): the simulated α*(K⁰) (α on x, K⁰ on y); the χ^out surface beneath is a
        # theory heat map drawn with pcolormesh (not counted by figure_check.drawn)
        for row in paper.get("alpha_star_over_K0", []):
            out.append((f"α* simulated at K⁰={row['K0']:g}", "Fig. 4(c)", row["value"],
                        row["K0"]))  # fmt: skip
        # the linearised response's panel draws theory curves only (no finished point)
        return out
    if stem == "response_correlations":
        corr = paper.get("correlations")
        for net in ("resnet", "ffnet"):
            rec = (corr or {}).get(net)
            if not rec:
                continue
            out += _layer_series(f"c^l simulated, {net}", "cross-input correlation",
                                 rec["sim_mean"])  # fmt: skip
            # the distance to the limit (derived), log-log: layer 0 has no log, nor a zero
            dist = [abs(v - rec["limit"]) for v in rec["sim_mean"]]
            out += _layer_series(f"|c^l − c^∞| simulated, {net}", "distance to the limit",
                                 dist, first=1, log_y=True)  # fmt: skip
        ent = paper.get("max_entropy")
        if ent:  # K^L at α*(L) on the KL curve (the curve read at K^L, as a reader would)
            for row in ent["K_L_at_alpha_star"]:
                y = float(np.interp(row["K_L"], ent["sigma2"], ent["kl"]))
                out.append((f"K^L at α*(L={row['L']})", "maximum-entropy", row["K_L"], y))
        return out
    return None


# ---------------------------------------------------------------------------------------
# trained-weights


def _hurst(cell, name):
    r = cell.get(name)
    return None if not r else r.get("hurst")


def trained_weights(stem, results):
    cells = [c for p in results["points"] for c in p["cells"]]
    out = []

    def name(c):
        h = "" if c["hurst"] is None else f", H={c['hurst']:g}"
        return f"{c['init']}{h}, β={c['beta']:g}"

    if stem == "weights_along_depth":
        # raw samples: one entry of one network's V_k along depth, for a few example cells
        # (lines); their numbers (the Hurst indices) are drawn in regularity.png
        return []
    if stem == "accuracy_heatmap":
        for c in cells:  # one heat-map cell each (None: every draw exploded, marked ×)
            out.append((f"test accuracy, {name(c)}", "Test accuracy", math.nan,
                        c["test_accuracy"]["mean"]))  # fmt: skip
        return out
    if stem == "regularity":
        for c in cells:
            pairs = (
                ("regularity_cumulative_before", "regularity_cumulative_after",
                 "regularity of the weights' path"),
                ("regularity_before", "regularity_after", "regularity of V_k"),
            )  # fmt: skip
            for before, after, panel in pairs:
                b, a = _hurst(c, before), _hurst(c, after)
                if _finite(b):  # without an index before, a pair has no place
                    out.append((f"{after} against {before}, {name(c)}", panel, b, a))
            out.append((f"regularity of the update, {name(c)}", "what training adds",
                        c["beta"], _hurst(c, "regularity_update")))  # fmt: skip
        return out
    return None


# ---------------------------------------------------------------------------------------
# regimes

DIAGNOSTICS = {  # recorded per cell and depth -> the diagnostics figure's panel label
    "forward_deviation": "forward deviation",
    "predictor_movement": "predictor movement",
    "local_change": "local feature change",
    "global_change": "global feature change",
    "parameter_movement": "parameter movement",
    "loss_ratio": "loss ratio",
}


def regimes(stem, results):
    out = []
    if stem == "phase_diagram":
        for c in results["cells"]:  # the measured regime at (γ, λ)
            out.append((f"regime at γ={c['gamma']:g}, λ={c['lambda']:g}", "Training regimes",
                        c["gamma"], c["lambda"]))  # fmt: skip
        return out
    if stem == "diagnostics":
        for p in results["points"]:
            if p["part"] != "diagram":
                continue
            for c in p["cells"]:
                for q, label in DIAGNOSTICS.items():
                    v = _mean(c[q])
                    if _finite(v) and v <= 0:
                        continue  # log axis: a zero diagnostic (nothing moved) has no log
                    out.append((f"{q} at L={p['L']}, γ={c['gamma']:g}, λ={c['lambda']:g}",
                                f"{label} (γ = {c['gamma']:g})", p["L"], v))  # fmt: skip
        return out
    if stem == "transfer":
        lrs = results["config"]["transfer_lrs"]
        by_name = {t["parametrization"]: t for t in results["transfer"]}
        for p in results["points"]:
            if p["part"] != "transfer":
                continue
            for name in p["parametrizations"]:
                t = by_name[name]
                i = t["L"].index(p["L"])
                # the recorded curve: mean over draws of log final loss, per learning rate
                for lr, v in zip(lrs, t["loss_curves"][i], strict=True):
                    out.append((f"{name} loss at L={p['L']}, lr={lr:.4g}", f"{name} (γ", lr,
                                math.exp(v) if _finite(v) else None))  # fmt: skip
        for t in results["transfer"]:
            for L, lr in zip(t["L"], t["optimal_lr"], strict=True):
                # lr* None: at a grid edge, unresolved (the panel titles name those depths)
                out.append((f"{t['parametrization']} lr* at L={L}", "lr* against depth", L, lr))
        return out
    return None


SPECS = {"response": response, "trained-weights": trained_weights, "regimes": regimes}
