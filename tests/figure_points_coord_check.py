"""What the coordinate check's figures must show (tests/figure_points.py), read from its
results.json independently of the plotting code: every quantity's mean over the finite
draws after the last step, at every size of every line, in its table's panel of its kind;
and along training the stream's size at the steps shown."""

import numpy as np

KINDS = {"activation": "activations", "change": "changes", "update": "updates"}


def _mean(rows, t=-1):
    v = np.array([np.nan if r[t] is None else r[t] for r in rows], float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def _at(results, name):
    return {(p["width"], p["depth"]): p for p in results["points"] if p["parametrisation"] == name}


def coord_check(stem, results):
    out = []
    if stem in ("coord_check_width", "coord_check_depth"):
        against = stem.removeprefix("coord_check_")
        for line in results["lines"]:
            if line["against"] != against:
                continue
            name, at = line["parametrisation"], _at(results, line["parametrisation"])
            for n in line["sizes"]:
                key = (
                    (n, line["fixed"]["depth"])
                    if against == "width"
                    else (line["fixed"]["width"], n)
                )
                for q, rows in at[key]["sizes"].items():
                    value = _mean(rows)
                    if value is not None and value > 0:  # a zero has no logarithm
                        panel = f"[{name}] {KINDS[q.split('/')[0]]}"
                        out.append((f"{name} {q} at {against} {n}", panel, n, value))
        return out
    if stem == "coord_check_steps":
        steps = results["config"]["steps"]
        resnet = results["config"].get("model") == "resnet"
        shown = sorted({0, 1, max(1, steps // 2), steps} - ({0} if resnet else set()))
        for line in results["lines"]:
            if line["against"] != "width":
                continue
            name, at = line["parametrisation"], _at(results, line["parametrisation"])
            for n in line["sizes"]:
                stream = "change/state" if resnet else "activation/mlp"
                rows = at[(n, line["fixed"]["depth"])]["sizes"][stream]
                for t in shown:
                    value = _mean(rows, t)
                    if value is not None and value > 0:
                        out.append((f"{name} stream at N={n}, t={t}", f"[{name}]", n, value))
        return out
    return None


SPECS = {"coord-check": coord_check}
