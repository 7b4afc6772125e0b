"""What the figures of `study shapes`, `study two-layer` and `study plain-vs-residual` must
show (issue 47; tests/figure_points.py): every finished point of `results.json`, read here
from the results, not from the plotting code. Values that a log axis cannot show (a mean
of 0) are left out where they occur, each with its reason."""

import math

import numpy as np
from figure_points import mean

# ----------------------------------------------------------------------------- shapes

SHAPES_ERRORS = (
    "output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
    "output_D_gap", "hidden_D_gap",
)  # fmt: skip


def _positive(value) -> bool:
    # a log axis has no 0 (a gap of exactly 0 between two limits at k = 0, say): such a
    # mean is not drawn there; None (every draw exploded or unsolved) is said in words
    return value is not None and value > 0


def shapes(stem, results):
    cfg = results["config"]
    K = cfg["steps"]
    points = results["points"]
    if stem == "shapes_errors":
        return _shapes_errors(points, K)
    if stem == "shapes_trajectories":
        traj, out = results["trajectory"], []
        s = [l / traj["L"] for l in range(traj["L"] + 1)]
        for name, panel in (("h", "coordinates of h^l"), ("b", "coordinates of b^l")):
            for i, row in enumerate(traj[name]):
                out += [(f"{name} coordinate {i} at s={x:.3f}", panel, x, v)
                        for x, v in zip(s, row, strict=True)]  # fmt: skip
        for p in points:
            if p["steps"] == K and p["hidden_error"]["mean"] is not None:
                P = 2 * p["L"] * p["M"] * p["D"]
                out.append((f"hidden error at L={p['L']} M={p['M']} D={p['D']}",
                            "against the budget P", P, p["hidden_error"]["mean"]))  # fmt: skip
        return out
    if stem.startswith("shapes_errors_step"):
        return _shapes_errors(points, int(stem.removeprefix("shapes_errors_step")))
    out = []
    if stem == "shapes_rates":
        # per panel (error, size): the three lines of the fits whose term dominates most
        # (their legend), every point of each line after K steps
        for q in ("output_error", "hidden_error"):
            for against in "LMD":
                name = q + "_fixed_D" if against != "D" else q.replace("_error", "_D_gap")
                lines = [
                    f for f in results["fits"] if f["quantity"] == name and f["against"] == against
                ]
                for f in sorted(lines, key=lambda f: -f["term_share"])[:3]:
                    fixed = {k: v for k, v in f["fixed"].items() if k != "steps"}
                    for p in points:
                        if p["steps"] != K or any(p[a] != b for a, b in fixed.items()):
                            continue
                        value = mean(p[name])
                        if _positive(value):
                            what = f"{name} at L={p['L']}, M={p['M']}, D={p['D']}, k={K}"
                            out.append(
                                (what, f"{q.split('_')[0]} vs {against};", p[against], value)
                            )
        return out
    if stem == "shapes_grid":
        L = max(cfg["L"])
        for q in ("output_error", "hidden_error"):
            for p in points:
                value = mean(p[q])
                if p["L"] == L and p["steps"] == K and _positive(value):  # log10 of the mean
                    what = f"{q} at L={L}, M={p['M']}, D={p['D']}, k={K}"
                    out.append((what, f"log10 {q} vs joint limit", math.nan, math.log10(value)))
        shapes_ = results["optimal_shape"]
        for name in ("bound", "conjecture", "output_error", "hidden_error"):
            shape = shapes_.get(name) or {}
            if "L" not in shape:
                continue  # a law not fitted: no shape, said in optimal_shape[name]["reason"]
            for size in "LMD":
                # an exponent of exactly 0 is a bar of no height: nothing to see
                if shape[size] != 0:
                    what = f"optimal shape of {name}: exponent of {size}"
                    out.append((what, "optimal shape", None, shape[size]))
        return out
    return None


def _shapes_errors(points, k):
    out = []
    for p in points:
        if p["steps"] != k:
            continue
        for name in SHAPES_ERRORS:
            value = mean(p[name])
            if _positive(value):
                what = f"{name} at L={p['L']}, M={p['M']}, D={p['D']}, k={k}"
                out.append((what, f"{name}, D={p['D']}, k={k}", p["L"], value))
    return out


# -------------------------------------------------------------------------- two-layer


def two_layer(stem, results):
    cfg = results["config"]
    K = cfg["steps"]
    points = results["points"]
    if stem == "two_layer_limits":
        return _two_layer_limits(points, K)
    if stem.startswith("two_layer_limits_step"):
        return _two_layer_limits(points, int(stem.removeprefix("two_layer_limits_step")))
    out = []
    if stem == "two_layer_inputs":
        for r in (results.get("input_factor") or {}).get("rows") or []:
            if r.get("ratio") is None:
                continue
            at = f"{r['family']} n={r['n']} δ={r['delta']}"
            out.append((f"quantile at {at}", "log(n/δ) factor", r["n"], r["quantile_sqrt_M"]))
            out.append((f"ratio at {at}", "union bound", None, r["ratio"]))
        return out
    if stem == "two_layer_criteria":
        for p in points:
            if p["part"] == "criteria":
                at = f"M={p['M']}, s_v={p['s_v']}, {p['rule']}"
                first, initial = mean(p["loss"][1]), mean(p["loss"][0])
                if first is not None and initial is not None and first / initial > 0:
                    ratio = first / initial  # of the means, as criteria_table
                    out.append((f"loss ratio at {at}", "balanced loss decay", p["s_v"], ratio))
                # None where every draw exploded: not_drawn passes it over, the panel's
                # legend names it (as in the other panels)
                out.append(
                    (f"first-step decrease at {at}", "first-step relative loss decrease",
                     p["s_v"], mean(p["first_step_decrease"]))
                )  # fmt: skip
                for q, panel in (
                    ("feature_movement", "feature learning"),
                    ("kernel_change", "lazy regime: kernel change"),
                ):
                    if _positive(mean(p[q])):
                        out.append((f"{q} at {at}", panel, p["s_v"], mean(p[q])))
                panel = (
                    "training loss, balanced"
                    if p["rule"] == "balanced"
                    else "training loss, η_u = lr"
                )
                for k, stat in enumerate(p["loss"]):
                    if _positive(mean(stat)):
                        out.append((f"loss after k={k} at {at}", panel, k, mean(stat)))
            elif p["part"] == "diversity":
                for name in ("scaled", "unscaled"):
                    if _positive(mean(p[name])):
                        what = f"pre-activation RMS ({name}) at D={p['D']}"
                        out.append((what, "feature diversity", p["D"], mean(p[name])))
        return out
    if stem == "two_layer_critical_scale":
        for r in results["critical_scale"]["rows"]:
            at = f"M={r['M']}, d_out={r['d_out']}"
            panel = "critical output scale"
            out.append((f"measured sigma_v* at {at}", panel, r["min_sqrt"], r["sigma_v_star"]))
            out.append((f"heuristic at {at}", panel, r["min_sqrt"], r["heuristic"]))
        return out
    return None


def _two_layer_limits(points, k):
    out = []
    for p in points:
        for q in ("output_error", "hidden_error"):
            value = mean(p[q][k]) if p["part"] in ("width", "dimension") else None
            if not _positive(value):
                continue
            if p["part"] == "width":
                what = f"{q} at D={p['D']}, M={p['M']}, k={k}"
                out.append((what, f"part (a), {q.replace('_', ' ')}", p["M"], value))
                x = p["D"] / p["M"] if q == "hidden_error" else 1 / p["M"]
                out.append((what, "part (a), collapse", x, value))
            else:
                what = f"{q} of the fixed-D limit at D={p['D']}, k={k}"
                out.append((what, "part (b)", p["D"], value))
    return out


# ------------------------------------------------------------------ plain-vs-residual


def plain_vs_residual(stem, results):
    cfg = results["config"]
    grads = sorted((p for p in results["points"] if p["part"] == "gradients"), key=lambda p: p["L"])
    deepest = grads[-1]
    out = []

    def name(cell):
        return f"{cell['architecture']}, {cell['activation']}, {cell['init']}, α={cell['alpha']}"

    if stem == "gradient_log_ratios":
        # every gradient point: per configuration, the mean log-ratio of the draws that did
        # not explode (a point where every draw exploded has none: its count is recorded)
        for p in grads:
            for cell in p["cells"]:
                good = [v for v in cell["log_ratio"] if v is not None]
                if good:
                    panel = f"{cell['architecture']}, {cell['activation']}"
                    what = f"log-ratio of {name(cell)} at L={p['L']}"
                    out.append((what, panel, p["L"], float(np.mean(good))))
        return out
    if stem == "gradient_norms" or stem.startswith("layer_"):
        # the deepest point's per-layer records (only it records them); the gradient norms
        # relative to the last layer's, as the axis says
        key = "log_grad" if stem == "gradient_norms" else stem.removeprefix("layer_")
        for cell in deepest["cells"]:
            if key not in cell:
                continue  # no draw without explosion, or no kink (the active fraction)
            values = cell[key]["mean"]
            last = values[-1]
            for layer, v in enumerate(values):
                if key == "log_grad":
                    # a norm that overflowed (None) has no logarithm, nor one relative to it
                    v = None if v is None or last is None else v - last
                if v is None or (key == "act_std" and v <= 0):
                    continue  # overflow (None), or a spread of 0, which a log axis lacks
                panel = f"{cell['architecture']}, {cell['activation']}"
                out.append((f"{key} of {name(cell)} at layer {layer}", panel, layer, v))
        return out
    if stem == "gradient_rates":
        for r in results["gradient_rates"]:
            if r["rate"] is None:
                continue  # too few depths for a rate: `reason` says so
            panel = "Per-layer gradient growth rate"
            out.append((f"rate of {name(r)}", panel, r["predicted_width_N"], r["rate"]))
            # the infinite-width prediction too, where it lies apart (beyond 10%) from the
            # width-N one: the figure's legend says it is drawn only there
            if abs(r["predicted_width_N"] - r["predicted"]) > 0.1 * abs(r["predicted"]):
                what = f"rate of {name(r)} at its infinite-width prediction"
                out.append((what, panel, r["predicted"], r["rate"]))
        return out
    if stem == "degradation":
        for c in results["degradation"]:
            what = f"{c.get('name', c['architecture'])} at L={c['L']}"
            if _positive(c["train_loss"]):  # a cross-entropy, on a log axis
                out.append(
                    (f"training loss of {what}", "final training loss", c["L"], c["train_loss"])
                )
            out.append((f"test accuracy of {what}", "test accuracy", c["L"], c["test_accuracy"]))
        return out
    if stem == "training_curves":
        stride = max(1, cfg["train_steps"] // 100)  # the steps loss_curve records
        for c in results["degradation"]:
            if c["train_loss"] is None:
                continue  # every draw exploded: no curve (its count is recorded)
            # the panel's title: the architecture, " + BN", the initialisation and α, the
            # shortcut of a network that widens
            arch, bn = c["architecture"], " + BN" if c.get("norm") else ""
            tail = "(He)" if arch == "plain" else f"(He, α = {c['alpha']})"
            shortcut = c.get("shortcut")
            if shortcut is not None:
                tail += ", widening" if shortcut == "none" else f", {shortcut} shortcut"
            panel = f"{arch}{bn} {tail}"
            # the loss before each recorded step, then after the last (train_loss)
            curve = [(j * stride, v) for j, v in enumerate(c["loss_curve"])]
            for step, v in [*curve, (cfg["train_steps"], c["train_loss"])]:
                # a cross-entropy, on a log axis; non-finite where every draw's loss was
                if v is not None and math.isfinite(v) and v > 0:
                    what = f"training loss of {c.get('name')} at L={c['L']}, step {step}"
                    out.append((what, panel, step, v))
        return out
    if stem == "init_scale":
        # the mean square of h^l at initialisation relative to h^0's (means over draws):
        # every layer at the deepest depth, the last layer at every depth
        cells = [c for c in results["degradation"] if c.get("init_mean_square")]
        deep = max(c["L"] for c in cells)
        for c in cells:
            ms = c["init_mean_square"]["mean"]
            if ms[0] is None:
                continue
            name = c["name"]
            if c["L"] == deep:
                for layer, v in enumerate(ms):
                    if v is not None:
                        what = f"ms ratio of {name} at layer {layer}"
                        out.append((what, "per layer", layer, v / ms[0]))
            if ms[-1] is not None:
                what = f"ms ratio of {name} at L={c['L']}"
                out.append((what, "against depth", c["L"], ms[-1] / ms[0]))
        return out
    return None


def two_layer_phases(stem, results):  # resnet-phases draws the same figure
    if stem not in ("two_layer_phases", "resnet_phases"):
        return None
    out = []
    for p in results["points"]:
        at = f"D={p['D']}, s_v={p['s_v']}"
        out.append((f"cell at {at}", "phase diagram", p["D"], p["sigma_v"]))
        if _positive(mean(p["local_update"])):
            out.append((f"local update at {at}", "criterion 5", p["s_v"], mean(p["local_update"])))
        for q in ("decay", "decay_u_unscaled"):
            if _positive(mean(p[q])):
                out.append((f"{q} at {at}", "criterion 3", p["s_v"], mean(p[q])))
    for f in results.get("fits") or []:
        if f["against"] == "D" and f.get("slope") is not None:
            out.append((f"{f['quantity']} slope at s_v={f['fixed']['s_v']}", "slopes in D",
                        None, f["slope"]))  # fmt: skip
    return out


def stochastic_approximation(stem, results):
    if stem != "stochastic_approximation":
        return None
    cfg, out = results["config"], []
    for against, other in (("L", "M"), ("M", "L")):
        panel = "against depth L" if against == "L" else "samples per layer M"
        for p in results["points"]:
            if p[other] != max(cfg[other]):
                continue
            for kind in ("initial", "function", "samples"):
                for e in cfg["sizes"]:
                    q = f"{kind}_{e:g}"
                    out.append((f"{q} at L={p['L']}, M={p['M']}", panel, p[against], mean(p[q])))
            out.append((f"base error at {p['L']}, {p['M']}", panel, p[against],
                        mean(p["base_error"])))  # fmt: skip
    return out


SPECS = {"shapes": shapes, "two-layer": two_layer, "plain-vs-residual": plain_vs_residual,
         "two-layer-phases": two_layer_phases, "resnet-phases": two_layer_phases,
         "stochastic-approximation": stochastic_approximation}  # fmt: skip
