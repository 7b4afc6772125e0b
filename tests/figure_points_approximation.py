"""What the approximation study's figures must show (tests/figure_points.py), read from
its results.json independently of the plotting code."""

import math

import numpy as np


def approximation(stem, results):
    c = results.get("constructions")
    out = []
    if stem == "constructions":
        for r in c["square"]:
            out.append((f"x² error with {r['relus']} ReLUs", "x² from p ReLUs", r["relus"],
                        r["max_error"]))  # fmt: skip
        for r in c["sawtooth"]:
            out.append((f"sawtooth depth units at k={r['k']}", "sawtooth", r["k"], r["deep_units"]))
            out.append((f"sawtooth shallow units at k={r['k']}", "sawtooth", r["k"],
                        r["shallow_units"]))  # fmt: skip
        for r in c["parity"]:
            for key in ("shallow_units", "deep_units", "lookup_units"):
                out.append((f"parity {key} at n={r['n']}", "parity", r["n"], r[key]))
        for row in c["curse"]:
            for r in row["rows"]:
                out.append((f"curse d={row['d']} at {r['pieces']} pieces", "curse",
                            r["pieces"], r["rms"]))  # fmt: skip
        return out
    if stem == "trained":
        titles = {
            "square": "x²",
            "sawtooth": "sawtooth",
            "sin50": "sin(50x)",
            "parity": "parity",
            "spirals": "two spirals",
            "smooth1": "on [0, 1]\n",
            "smooth2": "on [0, 1]²",
            "smooth4": "on [0, 1]⁴",
        }
        for p in results["points"]:
            for arm in p["arms"]:
                good = [v for v in arm["rms"] if v is not None and v > 0]
                value = 10 ** float(np.mean(np.log10(good))) if good else None
                kind = arm.get("architecture", "plain")
                what = f"{p['target']} depth {arm['depth']} {kind} at budget {p['budget']}"
                if value is not None and math.isfinite(value):
                    out.append((what, titles[p["target"]], arm["parameters"], value))
        return out
    if stem == "pop_quiz":
        # each network's test RMS and each arm's mean, in the panel of its point (the
        # first four points)
        for q in results["quiz"][:4]:
            panel = f"{q['budget']:,} parameters: each network's test RMS"
            point = next(p for p in results["points"]
                         if (p["target"], p["budget"]) == (q["target"], q["budget"]))  # fmt: skip
            for arm, r in zip(point["arms"], q["arms"], strict=True):
                for j, v in enumerate(arm["rms"]):
                    if v is not None:
                        out.append((f"{r['name']} network {j}", panel, None, v))
                if r["mean_rms"] is not None:
                    out.append((f"{r['name']} mean", panel, None, r["mean_rms"]))
        return out
    if stem == "exercise":
        # each network's test error, in the panel of the exercise
        for arm in results["exercise"]["arms"]:
            for j, v in enumerate(arm["test_error"]):
                if v is not None:
                    out.append((f"{arm['name']} network {j}", "784 → ? → 10", None, v))
        return out
    return None


SPECS = {"approximation": approximation}
