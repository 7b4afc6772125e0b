"""The figures of the approximation study: `constructions.png` (the exact ReLU
constructions, measured), `trained.png` (trained networks' error against their parameter
count, one line per depth and architecture), `exercise.png` (the 784 → ? → 10 exercise on
the digits) and, where the pop quiz's reading ran, `pop_quiz.png` (its arms' networks)."""

import math

import numpy as np

from ...io.plotting import save_figure, size_ticks, use_agg

TITLES = {
    "square": "x² on [0, 1]",
    "sawtooth": "sawtooth: tent map composed {k}×",
    "sin50": "sin(50x) on [0, 1]",
    "parity": "parity of {n} bits (all inputs)",
    "spirals": "two spirals ({turns} turns), labels 0/1",
    "smooth1": "exp(−2|x − c|²) on [0, 1]",
    "smooth2": "exp(−2|x − c|²) on [0, 1]²",
    "smooth4": "exp(−2|x − c|²) on [0, 1]⁴",
}


def figures(out, results) -> list:
    use_agg()
    done = [_constructions(out, results), _trained(out, results)]
    if results.get("exercise"):  # results from before the exercise existed have none
        done.append(_exercise(out, results))
    if results.get("quiz"):
        done.append(_quiz(out, results))
    return done


QUIZ_ROWS = 4  # the pop quiz's figure: the first few (target, budget) points


def _quiz(out, results):
    """Per (target, budget) point of the pop quiz: each network's test RMS per arm, with
    the mean and its 95% interval, against the best constant's; the median network's fit
    of each arm; each arm's mean training loss along the steps."""
    import matplotlib.pyplot as plt

    cfg = results["config"]
    quiz = results["quiz"][:QUIZ_ROWS]
    fig, axes = plt.subplots(len(quiz), 3, figsize=(17, 4.8 * len(quiz)), squeeze=False)
    for row, q in zip(axes, quiz, strict=True):
        point = next(p for p in results["points"]
                     if (p["target"], p["budget"]) == (q["target"], q["budget"]))  # fmt: skip
        ax = row[0]
        labels = []
        for i, (arm, r) in enumerate(zip(point["arms"], q["arms"], strict=True)):
            values = np.array([v for v in arm["rms"] if v is not None], float)
            jitter = np.linspace(-0.15, 0.15, values.size) if values.size > 1 else np.zeros(1)
            ax.plot(i + jitter[: values.size], values, "o", color=f"C{i}", alpha=0.6, ms=5,
                    label="one network (test RMS)" if i == 0 else None)  # fmt: skip
            if r["ci95"] is not None:
                lo, hi = r["mean_rms"] - r["ci95"][0], r["ci95"][1] - r["mean_rms"]
                ax.errorbar(i + 0.32, r["mean_rms"], yerr=[[lo], [hi]], fmt="D", color="k",
                            capsize=4, label="mean, 95% interval" if i == 0 else None)  # fmt: skip
            labels.append(f"{r['name']}\n{r['parameters']:,} parameters\nAdam lr {arm['lr']:g}"
                          f"\n{r['state']}")  # fmt: skip
        ax.axhline(q["constant_rms"], color="0.4", ls=":", lw=1.2,
                   label=f"the best constant (mean of f): {q['constant_rms']:.4g}")  # fmt: skip
        ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_xlim(-0.5, len(labels) - 0.4)
        ax.set_yscale("log")
        shown = [v for a in point["arms"] for v in a["rms"] if v is not None and v > 0]
        # room above the constant's line and below the lowest network for the legend
        ax.set_ylim(min(shown + [q["constant_rms"]]) / 3, max(shown + [q["constant_rms"]]) * 1.6)
        _plain_log_ticks(ax)
        ax.set(ylabel="test RMS error (4096 points)",
               title=f"{TITLES[q['target']]}, {q['budget']:,} parameters: each network's "
               f"test RMS\n{q['answer']}")  # fmt: skip
        ax.legend(fontsize=8)
        ax = row[1]
        n = cfg.get("test_points", 4096)
        x = ((np.arange(n) + 0.5) / n)[:: _every(point, n)]
        for i, arm in enumerate(point["arms"]):
            if arm.get("example_fit"):
                ax.plot(x[: len(arm["example_fit"])], arm["example_fit"], color=f"C{i}", lw=1.2,
                        label=q["arms"][i]["name"])  # fmt: skip
        if q["target"] == "sin50":
            ax.plot(x, np.sin(50 * x), color="k", lw=0.8, ls="--", label="sin(50x)")
        if not ax.get_lines():
            ax.text(0.5, 0.5, "no fit recorded (a target of several inputs)", ha="center",
                    transform=ax.transAxes)  # fmt: skip
        ax.set_ylim(-2.2, 1.6)  # room below sin(50x) for the legend
        ax.set(xlabel="x", ylabel="network output",
               title="each arm's network of median test RMS (the lower middle one)")  # fmt: skip
        ax.legend(fontsize=8, loc="lower center", ncol=2)
        ax = row[2]
        for i, arm in enumerate(point["arms"]):
            curve = np.asarray(arm["loss_curve"], float)
            if curve.size:
                stride = max(1, cfg["steps"] // 100)
                ax.plot(np.arange(curve.size) * stride, curve, color=f"C{i}",
                        label=q["arms"][i]["name"])  # fmt: skip
        ax.axhline(q["constant_rms"] ** 2, color="0.4", ls=":", lw=1.2,
                   label="the best constant's mean squared error (test points)")  # fmt: skip
        ax.set_yscale("log")
        low = min([c for a in point["arms"] for c in a["loss_curve"] if c > 0] or [1.0])
        ax.set_ylim(bottom=low / 8)  # room below the curves for the legend
        ax.set(xlabel="Adam step", ylabel="training MSE (mean over the networks)",
               title="training loss at each arm's chosen learning rate")  # fmt: skip
        ax.legend(fontsize=8, loc="lower left")
    title = (f"The lecture's pop quiz: {cfg['seeds']} networks per arm, {cfg['steps']} "
             f"full-batch Adam steps, best of learning rates {cfg['lrs']}")  # fmt: skip
    return save_figure(fig, out / "pop_quiz.png", dpi=100, title=title)


def _every(point, n) -> int:
    """The stride of the test points an arm's recorded fit keeps."""
    fits = [len(a["example_fit"]) for a in point["arms"] if a.get("example_fit")]
    return max(1, n // fits[0]) if fits else 1


def _exercise(out, results):
    """Each network's test error on the digits, per architecture, with the mean and its
    95% Student interval; the parameter counts at 784 and 64 inputs in the labels."""
    import matplotlib.pyplot as plt
    from scipy.stats import t as student

    ex = results["exercise"]
    c = ex["comparison"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    labels = []
    for i, arm in enumerate(ex["arms"]):
        errors = np.array([v for v in arm["test_error"] if v is not None], float)
        jitter = np.linspace(-0.12, 0.12, errors.size) if errors.size > 1 else np.zeros(1)
        ax.plot(i + jitter[: errors.size], errors, "o", color=f"C{i}", alpha=0.6, ms=5,
                label=f"one network ({arm['name']})")  # fmt: skip
        if errors.size > 1:
            half = student.ppf(0.975, errors.size - 1) * errors.std(ddof=1) / math.sqrt(errors.size)
            ax.errorbar(i + 0.3, errors.mean(), yerr=half, fmt="D", color="k", capsize=4,
                        label="mean, 95% interval" if i == 0 else None)  # fmt: skip
        width, depth = arm["width"], arm["depth"]
        shape = f"{width}" if depth == 1 else f"{width}×{depth}"
        labels.append(f"{arm['name']}: → {shape} → 10\n{arm['parameters_784']:,} parameters "
                      f"at 784 inputs\n{arm['parameters']:,} at the digits' 64 "
                      f"(Adam lr {arm['lr']:g})")  # fmt: skip
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylabel("test error on the digits (fraction misclassified)")
    ci = c["ci95"]
    measured = "no interval" if ci is None else (
        f"{c['difference']:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"
    )  # fmt: skip
    ax.set_title(f"784 → ? → 10, on the digits: deep − shallow {measured}; lower: {c['lower']}",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8)
    title = (f"The lecture's parameter-budget exercise: {c['ratio_784']:.2f}× more parameters\n"
             f"for the wide one at 784 inputs; {ex['steps']} full-batch Adam steps")  # fmt: skip
    return save_figure(fig, out / "exercise.png", dpi=110, title=title)


def _constructions(out, results):
    import matplotlib.pyplot as plt

    c = results["constructions"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0, 0]
    p = np.array([r["relus"] for r in c["square"]], float)
    ax.loglog(p, [r["max_error"] for r in c["square"]], "o", label="measured (grid of 2^14 + 1)")
    ax.loglog(p, 1 / (4 * p**2), "k--", lw=1, label="1/(4p²)")
    ax.set(xlabel="ReLUs p (knots k/p)", ylabel="max |x² − net(x)| on [0, 1]",
           title="x² from p ReLUs (the lecture's p = 4: 1/64)")  # fmt: skip
    ax.legend(fontsize=8)
    ax = axes[0, 1]
    k = np.array([r["k"] for r in c["sawtooth"]])
    ax.semilogy(k, [r["deep_units"] for r in c["sawtooth"]], "o-", label="in depth: 2k units")
    ax.semilogy(k, [r["shallow_units"] for r in c["sawtooth"]], "s-",
                label="one hidden layer: pieces − 1 units (at least)")  # fmt: skip
    counted = sum(r["pieces"] == r["predicted_pieces"] for r in c["sawtooth"])
    ax.set(xlabel="tent maps composed k", ylabel="ReLU units",
           title=f"sawtooth: 2^k pieces counted at {counted} of {len(k)} k")  # fmt: skip
    ax.legend(fontsize=8)
    ax = axes[1, 0]
    n = np.array([r["n"] for r in c["parity"]])
    ax.semilogy(n, [r["shallow_units"] for r in c["parity"]], "o-",
                label="depth 2 on Σx: n units")  # fmt: skip
    ax.semilogy(n, [r["deep_units"] for r in c["parity"]], "s-",
                label="XOR tree: 2(n − 1) units, depth ⌈log₂ n⌉")  # fmt: skip
    ax.semilogy(n, [r["lookup_units"] for r in c["parity"]], "^-",
                label="enumerating network: 2^(n − 1) units")  # fmt: skip
    wrong = sum(r["shallow_wrong"] + r["deep_wrong"] for r in c["parity"])
    ax.set(xlabel="bits n", ylabel="ReLU units",
           title=f"parity: both ReLU nets wrong on {wrong} of all 2^n inputs")  # fmt: skip
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    for row in c["curse"]:
        pieces = [r["pieces"] for r in row["rows"]]
        (line,) = ax.loglog(pieces, [r["rms"] for r in row["rows"]], "o",
                            label=f"d = {row['d']}: rate {row['slope']:+.2f} "
                            f"(−2/d = {row['predicted_slope']:+.2f})")  # fmt: skip
        x = np.array([min(pieces), max(pieces)], float)
        y0 = row["rows"][0]["rms"] * (x / pieces[0]) ** row["predicted_slope"]
        ax.loglog(x, y0, "--", color=line.get_color(), lw=1)
    lowest = min(r["rms"] for row in c["curse"] for r in row["rows"])
    ax.set_ylim(bottom=lowest / 100)  # room below the points for the legend
    ax.set(xlabel="linear pieces (simplices)", ylabel="RMS error",
           title="curse of dimensionality: piecewise-linear fit of a smooth f")  # fmt: skip
    ax.legend(
        fontsize=8,
        title="dashed: P^(−2/d) from the first point",
        title_fontsize=8,
        loc="lower right",
    )
    cfg = results["config"]
    return save_figure(fig, out / "constructions.png", dpi=110,
                       title=f"Exact ReLU constructions (float64; seed {cfg['seed']})")  # fmt: skip


def _interval(values):
    """Mean of log10 and its 95% t half-width over the finite positive values."""
    from scipy.stats import t as student

    logs = np.log10([v for v in values if v is not None and v > 0])
    if logs.size == 0:
        return math.nan, math.nan
    if logs.size == 1:
        return float(logs[0]), math.nan
    half = student.ppf(0.975, logs.size - 1) * logs.std(ddof=1) / math.sqrt(logs.size)
    return float(logs.mean()), float(half)


def _plain_log_ticks(ax) -> None:
    """A log y axis spanning less than two decades: a few ticks labelled as plain numbers
    (0.29, not 2.9×10^-1), no minor labels (`size_ticks` at three rounded values)."""
    lo, hi = ax.get_ylim()
    if not (0 < lo < hi) or hi / lo >= 100:
        return
    size_ticks(ax, [float(f"{t:.3g}") for t in np.geomspace(lo, hi, 5)[1:-1]], axis="y")


def _kind(arm) -> tuple:
    """An arm's `(depth, architecture)` (results from before architectures: plain)."""
    return arm["depth"], arm.get("architecture", "plain")


def _trained(out, results):
    import matplotlib.pyplot as plt

    cfg = results["config"]
    targets = [t for t in cfg["targets"] if any(p["target"] == t for p in results["points"])]
    cols = min(2, len(targets)) or 1
    rows = math.ceil(len(targets) / cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 4.2 * rows), squeeze=False)
    verdicts = {(c["target"], c["budget"]): c for c in results["comparisons"]}
    for ax, target in zip(axes.ravel(), targets, strict=False):
        pts = sorted((p for p in results["points"] if p["target"] == target),
                     key=lambda p: p["budget"])  # fmt: skip
        kinds = dict.fromkeys(_kind(a) for p in pts for a in p["arms"])
        for depth, architecture in kinds:
            arms = [a for p in pts for a in p["arms"] if _kind(a) == (depth, architecture)]
            stats = [_interval(a["rms"]) for a in arms]
            params = [a["parameters"] for a in arms]
            means = np.array([10**m for m, _ in stats])
            lo = np.array([10**m - 10 ** (m - h) if h == h else 0.0 for m, h in stats])
            hi = np.array([10 ** (m + h) - 10**m if h == h else 0.0 for m, h in stats])
            exploded = sum(a["exploded"] for a in arms)
            label = "one hidden layer" if depth == 1 else f"{depth} hidden layers"
            label += "" if architecture == "plain" else f", {architecture}"
            if exploded:
                label += f" ({exploded} exploded, left out)"
            ax.errorbar(params, means, [lo, hi], fmt="o-", capsize=3, label=label)
        ax.axhline(pts[0]["constant_rms"], color="0.5", ls=":", lw=1,
                   label="the best constant (the mean of f)")  # fmt: skip
        if target == "square":
            P = np.array([min(a["parameters"] for p in pts for a in p["arms"]),
                          max(a["parameters"] for p in pts for a in p["arms"])], float)  # fmt: skip
            units = np.maximum((P - 1) / 3, 1)
            ax.plot(P, 1 / (math.sqrt(30) * units**2), "k--", lw=1,
                    label="interpolant at even knots:\n1/(√30 p²), P = 3p + 1")  # fmt: skip
        rates = [r for r in results.get("trained_rates", []) if r["target"] == target]
        if rates and pts:  # the construction's rate −2/d through the shallow arm's first point
            first = next(a for a in pts[0]["arms"] if a["depth"] == 1)
            P = np.array([first["parameters"], max(a["parameters"] for a in pts[-1]["arms"])])
            start = 10 ** _interval(first["rms"])[0]
            rate = rates[0]["predicted"]
            ax.plot(P, start * (P / P[0]) ** rate, "k--", lw=1,
                    label=f"slope −2/d = {rate:.2f} (the construction)")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        budgets = sorted({p["budget"] for p in pts})
        # one budget: its arms' own parameter counts, so the axis has more than one label
        size_ticks(ax, budgets if len(budgets) > 1 else
                   sorted({a["parameters"] for p in pts for a in p["arms"]}))  # fmt: skip
        _plain_log_ticks(ax)
        largest = pts[-1]["budget"] if pts else None
        verdict = verdicts.get((target, largest), {}).get("lower", "no interval")
        title = TITLES[target].format(
            k=cfg["sawtooth_k"], n=cfg["parity_n"], turns=cfg["spiral_turns"]
        )
        if rates:  # the fitted slopes, depth by depth
            fitted = ", ".join(
                f"depth {r['depth']} {r['slope']:+.2f}" for r in rates if r["slope"] is not None
            )
            title += f"\nslopes {fitted}"
        ax.set(
            xlabel="parameters (ticks: the budgets; points: each depth's own count)",
            ylabel="test RMS error (geometric mean, 95% interval)",
            title=f"{title}\nlower at {largest} parameters: {verdict}",
        )
        ax.legend(fontsize=8)
    for ax in axes.ravel()[len(targets) :]:
        ax.axis("off")
    title = (f"Trained ReLU networks: best of learning rates {cfg['lrs']}, {cfg['steps']} Adam "
             f"steps, {cfg['seeds']} initialisations per point")  # fmt: skip
    return save_figure(fig, out / "trained.png", dpi=110, title=title)
