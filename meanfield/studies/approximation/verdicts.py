"""The verdicts of `meanfield study approximation` read from its trained networks:
deep against shallow at each (target, budget) point (`compare_depths`, `verdict_counts`),
the trained error's rate against the parameter count (`trained_rates`), and the lecture's
pop quiz (`quiz_reading`, `quiz_lines`): each arm — a (depth, architecture) — against the
best constant and against the others, every sentence read from the numbers."""

import math

import numpy as np

from ...stats.compare import difference_interval, lower_arm, mean_interval, slope_interval
from ...stats.fits import line_fit

# an arm whose geometric-mean error is above this fraction of the best constant's learned
# (next to) nothing: two such arms are not ranked
LEARNED_NOTHING = 0.9


def compare_depths(point) -> dict:
    """The deepest plain arm of a point against its one-hidden-layer arm: the difference of
    their mean log₁₀ RMS errors (deep − shallow) with Welch's interval over the networks,
    and which is lower; "neither learned" where both arms' geometric-mean errors are
    above `LEARNED_NOTHING` times the best constant's (`constant_rms`), whatever the
    interval says."""
    by = {a["depth"]: a for a in point["arms"] if a.get("architecture", "plain") == "plain"}
    shallow, deep = by[1], by[max(by)]

    def logs(arm):
        return [math.log10(v) for v in arm["rms"] if v is not None and v > 0]

    out = difference_interval(logs(shallow), logs(deep))
    out["deep_depth"] = deep["depth"]
    out["lower"] = lower_arm(out, ("one hidden layer", f"depth {deep['depth']}"))
    floor = math.log10(LEARNED_NOTHING * point["constant_rms"])
    if all(logs(a) and float(np.mean(logs(a))) > floor for a in (shallow, deep)):
        out["lower"] = "neither learned"
    return out


def verdict_counts(comparisons) -> dict:
    """How many (target, budget) points each verdict of `compare_depths` got: the one
    hidden layer lower, the deeper networks lower, not resolved, neither learned."""
    counts = {"one hidden layer": 0, "deeper": 0, "not resolved": 0, "neither learned": 0,
              "no interval": 0}  # fmt: skip
    for c in comparisons:
        counts["deeper" if c["lower"].startswith("depth ") else c["lower"]] += 1
    return counts


def trained_rates(points) -> list[dict]:
    """Per smooth d-dimensional target and depth: the least-squares slope of the mean log₁₀
    test RMS against log₁₀ parameters over the budgets, with its 95% interval over each
    budget's networks (`slope_interval`), against the piecewise-linear construction's
    −2/d, whether the interval holds it (None below two budgets with two networks each),
    and the exploded networks and budgets it left out (`left_out`)."""
    out = []
    for target in dict.fromkeys(p["target"] for p in points):
        if not target.startswith("smooth"):
            continue
        d = int(target.removeprefix("smooth"))
        mine = sorted((p for p in points if p["target"] == target), key=lambda p: p["budget"])
        for depth in sorted({a["depth"] for p in mine for a in p["arms"]}):
            xs, samples, left_out = [], [], []
            for p in mine:
                arm = next(a for a in p["arms"] if a["depth"] == depth)
                logs = np.log10([v for v in arm["rms"] if v is not None and v > 0])
                gone = len(arm["rms"]) - logs.size  # exploded (None) networks, named
                if logs.size >= 2:
                    xs.append(math.log10(arm["parameters"]))
                    samples.append(logs)
                if gone or logs.size < 2:
                    why = "exploded" + ("" if logs.size >= 2 else "; budget left out")
                    left_out.append({"budget": p["budget"], "networks": gone, "why": why})
            rec = {"target": target, "d": d, "depth": depth, "predicted": -2.0 / d,
                   "budgets": len(xs), "slope": None, "ci95": None,
                   "holds_predicted": None, "left_out": left_out}  # fmt: skip
            if len(xs) >= 2 and len(set(xs)) == len(xs):
                ci = slope_interval(xs, samples)
                rec.update(slope=line_fit(xs, [a.mean() for a in samples])[0], ci95=ci,
                           holds_predicted=bool(ci[0] <= -2.0 / d <= ci[1]))  # fmt: skip
            out.append(rec)
    return out


def rates_headline(rates) -> str:
    """The headline line of `trained_rates` (called where there is a smooth target)."""
    parts = []
    for r in rates:
        ci = r["ci95"] or [math.nan, math.nan]
        measured = "—" if r["slope"] is None else f"{r['slope']:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"
        gone = sum(x["networks"] for x in r.get("left_out", []))
        parts.append(f"{r['target']} depth {r['depth']} {measured} (−2/d = {r['predicted']:+.2f})"
                     + (f", {gone} exploded network(s) left out" if gone else ""))  # fmt: skip
    return "trained, test RMS against parameters in d dimensions: " + "; ".join(parts)


# ------------------------------------------------------------------ the pop quiz

# an arm whose mean RMS lies within this fraction of the best constant's stays at the
# constant: its networks learned (next to) nothing (the depth verdict's threshold)
AT_CONSTANT = 1.0 - LEARNED_NOTHING
# an initial output whose spread over the test points is below this fraction of the
# constant's RMS is flat: the signal did not reach the output
FLAT_AT_INIT = 1e-3


def arm_name(arm) -> str:
    """`1 × 3444` (one hidden layer), `50 × 14 plain`, `50 × 14 residual`."""
    if arm["depth"] == 1:
        return f"1 × {arm['width']}"
    return f"{arm['depth']} × {arm['width']} {arm.get('architecture', 'plain')}"


def _values(arm, key="rms") -> list[float]:
    return [v for v in arm.get(key, []) if v is not None]


def arm_reading(arm, constant: float) -> dict:
    """One arm against the best constant (RMS `constant`): its mean test RMS over the
    networks with Student's 95% interval, `state` "stays at the constant" (mean within
    `AT_CONSTANT` of it), "worse than the constant" (above it by more), "learned"
    (below it by more) or "exploded" (no finite network), and the sentence saying so with
    the numbers; an arm that did not learn also gives its initial output's spread over
    the test points, "flat" below `FLAT_AT_INIT` times the constant."""
    m = mean_interval(_values(arm))
    mean, name = m["mean"], arm_name(arm)
    out = {"name": name, "depth": arm["depth"], "architecture": arm.get("architecture", "plain"),
           "width": arm["width"], "parameters": arm["parameters"], "mean_rms": mean,
           "ci95": m["ci95"], "networks": m["draws"]}  # fmt: skip
    spread = _values(arm, "init_spread")
    out["init_spread"] = float(np.mean(spread)) if spread else None
    if mean is None:
        out["state"], out["text"] = "exploded", f"{name}: every network exploded"
        return out
    gap = mean - constant
    if abs(gap) <= AT_CONSTANT * constant:
        out["state"] = "stays at the constant"
        out["text"] = (f"{name} stays at the constant: mean RMS {mean:.4g} within "
                       f"{abs(gap):.2g} of the constant's {constant:.4g}")  # fmt: skip
    elif gap > 0:
        out["state"] = "worse than the constant"
        out["text"] = f"{name} does worse than the constant: {mean:.4g} > {constant:.4g}"
    else:
        out["state"] = "learned"
        out["text"] = (f"{name} learned: mean RMS {mean:.4g}, {mean / constant:.2g} of the "
                       f"constant's {constant:.4g}")  # fmt: skip
    if out["state"] != "learned" and out["init_spread"] is not None:
        flat = out["init_spread"] < FLAT_AT_INIT * constant
        out["text"] += (f" (its output at initialisation {'is flat: ' if flat else ''}"
                        f"spread {out['init_spread']:.2g} over the test points)")  # fmt: skip
    return out


def quiz_reading(point) -> dict:
    """The pop quiz read from one (target, budget) point: every arm against the best
    constant (`arm_reading`); Welch's 95% interval of the difference of mean RMS of every
    deep arm against the one hidden layer (deep − shallow) and of every residual arm
    against the plain one of its depth (residual − plain), with the lower arm; and the
    answer: the arm of lowest mean RMS, "not resolved" where an interval against it holds 0."""
    constant = point["constant_rms"]
    arms = point["arms"]
    readings = [arm_reading(a, constant) for a in arms]
    shallow = next(a for a in arms if a["depth"] == 1)
    pairs = [(shallow, a, "deep − shallow") for a in arms if a["depth"] > 1]
    pairs += [(p, a, "residual − plain") for a in arms if a.get("architecture", "plain") != "plain"
              for p in arms if p["depth"] == a["depth"]
              and p.get("architecture", "plain") == "plain"]  # fmt: skip
    differences = []
    for a, b, kind in pairs:
        d = difference_interval(_values(a), _values(b))
        d.update(kind=kind, of=arm_name(b), against=arm_name(a),
                 lower=lower_arm(d, (arm_name(a), arm_name(b))))  # fmt: skip
        differences.append(d)
    finite = [r for r in readings if r["mean_rms"] is not None]
    answer = "no arm has a finite network"
    if finite:
        best_i = min(range(len(arms)), key=lambda i: readings[i]["mean_rms"] or math.inf)
        best = arms[best_i]
        answer = f"lowest error: {arm_name(best)}"
        for other in arms:
            if other is best:
                continue
            lower = lower_arm(difference_interval(_values(other), _values(best)),
                              (arm_name(other), arm_name(best)))  # fmt: skip
            if lower != arm_name(best):
                answer += f", not resolved against {arm_name(other)}"
    return {"target": point["target"], "budget": point["budget"], "constant_rms": constant,
            "arms": readings, "differences": differences, "answer": answer}  # fmt: skip


def quiz_lines(q) -> list[str]:
    """The headline lines of a `quiz_reading`."""

    def ci(v, sign=""):
        return "no interval" if v is None else f"[{v[0]:{sign}.3g}, {v[1]:{sign}.3g}]"

    arms = "; ".join(f"{r['name']} ({r['parameters']:,} parameters) {r['mean_rms']:.4g} "
                     f"{ci(r['ci95'])}" if r["mean_rms"] is not None else f"{r['name']} —"
                     for r in q["arms"])  # fmt: skip
    lines = [f"pop quiz, {q['target']} at {q['budget']:,} parameters: mean test RMS over the "
             f"networks [95% interval]: {arms}; the best constant (the mean of f) "
             f"{q['constant_rms']:.4g}"]  # fmt: skip
    if q["differences"]:
        lines.append("differences of mean RMS, Welch 95%: " + "; ".join(
            f"{d['kind']} ({d['of']}) "
            + ("no interval" if d["difference"] is None else
               f"{d['difference']:+.3g} {ci(d['ci95'], '+')}")
            + f", lower: {d['lower']}" for d in q["differences"]))  # fmt: skip
    lines.append("; ".join(r["text"] for r in q["arms"]))
    lines.append(f"the quiz, measured: {q['answer']}")
    return lines
