"""What the transfer study's figures must show (tests/figure_points.py), read from its
results.json independently of the plotting code: the geometric mean held-out loss of every
size at every learning rate, in its table's panel; lr* where resolved; the nonlinear
fraction at the line's learning rate."""

import math

import numpy as np


def _log_loss(point, exploded_factor=2.0):
    final = np.array([[np.nan if v is None else v for v in r] for r in point["final_loss"]])
    initial = np.array([[np.nan if v is None else v for v in r] for r in point["initial_loss"]])
    bad = ~np.isfinite(final) | (final > exploded_factor * initial)
    return np.log(np.where(bad, initial, final)).mean(axis=1)


def transfer(stem, results):
    cfg = results["config"]
    out = []
    if stem in ("transfer_depth", "transfer_width"):
        which = stem.removeprefix("transfer_")
        key = "depth" if which == "depth" else "width"
        for ln in results["lines"]:
            if ln["line"] != which:
                continue
            name = ln["parametrisation"]
            for i, size in enumerate(ln["sizes"]):
                p = next(
                    q
                    for q in results["points"]
                    if q["line"] == which and q["parametrisation"] == name and q[key] == size
                )
                for lr, v in zip(cfg["lrs"], _log_loss(p), strict=True):
                    out.append((f"{name} {key} {size} lr {lr:g}", f"[{name}]", lr, math.exp(v)))
                star = ln["optimal_lr"][i]
                first = next((v for v in ln["optimal_lr"] if v is not None), None)
                if star is not None:  # relative to the table's lr* at its first resolved size
                    out.append((f"lr* of {name} at {size}", "[lr*]", size, star / first))
        return out
    if stem == "transfer_budgets":
        for ln in results["lines"]:
            for b in ln.get("budgets") or []:
                if b["drift_exponent"] is not None:
                    what = f"drift of {ln['parametrisation']} after {b['steps']} steps"
                    out.append((what, f"[{ln['line']}]", b["steps"], b["drift_exponent"]))
        return out
    if stem == "laziness":
        for ln in results["lines"]:
            lz = ln.get("laziness")
            if not lz:
                continue
            j = int(np.argmin(np.abs(np.log(cfg["lrs"]) - math.log(lz["lr"]))))
            for branch in ("attention", "mlp"):
                for L in ln["sizes"]:
                    p = next(
                        q
                        for q in results["points"]
                        if q["line"] == "depth"
                        and q["parametrisation"] == ln["parametrisation"]
                        and q["depth"] == L
                    )
                    v = np.array([np.nan if x is None else x for x in p[f"nonlinear_{branch}"][j]])
                    v = v[np.isfinite(v) & (v > 0)]
                    if v.size:
                        what = f"{ln['parametrisation']} {branch} at L={L}"
                        out.append((what, f"[{branch}]", L, float(np.exp(np.mean(np.log(v))))))
        return out
    return None


SPECS = {"transfer": transfer}
