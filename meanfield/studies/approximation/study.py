"""`meanfield study approximation`: why depth, measured (the first half of the lecture
"Universal approximation & going deep"; docs: Mathematics §10).

Two parts:

* **The exact constructions** (`meanfield.theory.approximation`, float64, no training;
  measured in `meanfield.studies.approximation.constructions`): x² on [0, 1] from p
  ReLUs (the lecture's 4, at knots 0, 1/4, 1/2, 3/4) with its maximal error measured
  against `1/(4p²)`; the sawtooth, the k-fold tent map, whose linear pieces
  are counted (2^k) against the units it takes in depth (2k) and in one hidden layer
  (at least 2^k − 1); parity of n bits, checked on all 2^n inputs, through a depth-2 ReLU
  network of n units (on Σ x_i) and a tree of XOR gates (2(n − 1) units at depth
  ⌈log₂ n⌉), against the 2^(n − 1) units of the enumerating network the lecture counts;
  the curse of dimensionality: the continuous piecewise-linear interpolant of a smooth
  function on [0, 1]^d (the Kuhn triangulation of a grid, which a ReLU network
  represents), its RMS error against its number of pieces fitted for d = 1..4 against
  the rate P^(−2/d), i.e. P ≈ ε^(−d/2) pieces for an error ε.
* **Trained networks** (`meanfield.training.approximation`): fully connected ReLU networks
  (`eqx.nn.MLP`, one output) of each depth in `--depths` (1: one hidden layer), at each
  parameter budget, their width the largest the budget holds, trained by full-batch Adam
  on the mean squared error for `--steps` steps at each learning rate of `--lrs`, on x²,
  the sawtooth of `--sawtooth-k` teeth, sin(50x) (1-D: trained on a grid of
  `--train-points` points of [0, 1], the error the RMS on 4096 cell midpoints between
  them), parity of `--parity-n` bits (trained and measured on all 2^n inputs) and the
  two-spirals task (labels 0/1 on two interleaved spirals of 1.5 turns: trained on
  `--train-points` points, measured on 4096 between them along the spirals; also the
  fraction misclassified, as for parity), and — on request, `--targets smooth1,smooth2,
  smooth4` — the curse of dimensionality's smooth function `exp(−2 |x − c|²)` on [0, 1]^d
  (trained on `--train-points` uniform random points, measured on 4096 others), whose
  trained error against the parameter count is fitted per depth (`trained_rates`: the
  slope of the mean log₁₀ RMS against log₁₀ parameters with a Welch–Satterthwaite
  interval over the independent networks) against the construction's −2/d.
  Per depth and budget the learning rate with the lowest mean final training loss is
  kept; the error of each of the `--seeds` networks (independent initialisations) at
  it is recorded. Deepest against shallowest at each budget: the difference of the
  mean log₁₀ RMS errors with Welch's 95% interval over the networks
  (`meanfield.stats.compare`), and which is lower where the interval excludes 0.
  `--architectures plain,residual` adds deep residual networks of the same width and
  parameter count (`ResidualMLP`: pre-activation blocks, each branch scaled by
  1/sqrt(depth − 1)). The preset `pop-quiz` is the lecture's pop quiz: sin(50x) at 10 333
  parameters, 1 × 3444 against 50 × 14 plain and residual, each arm read against the best
  constant and the others (`approximation_verdicts.quiz_reading`; no exercise).
* **The parameter-budget exercise** ("on a 784 → ? → 10 classifier": one hidden layer of
  2048 units against eight of 128): both networks' parameter counts at 784 inputs, exact,
  against the lecture's "~1.63 M" and "~0.22 M" (7× more for the wide one), and the
  lecture's "deep-narrow typically wins on natural data" measured on natural data that
  installs offline, scikit-learn's handwritten digits (64 inputs, 10 classes, 1438
  training and 359 test images): `--exercise-seeds` networks of each (`eqx.nn.MLP`, 10
  outputs) trained by full-batch Adam on the cross-entropy for `--exercise-steps` steps
  at each learning rate of `EXERCISE_LRS` (the one with the lowest mean final training
  loss kept), their test errors compared by Welch's interval (deep − shallow).

Everything runs in float64 (`--no-x64`: float32, about half the time): trained networks
fit parity to RMS errors near 2e-8, below float32's round-off.
"""

import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...harness.args import override
from ...harness.runner import start_study
from ...runtime.errors import StudyInputError
from ...theory import approximation as approximation_theory
from ...training.approximation import ARCHITECTURES, fit_mlp, network_shape, predict, sample_network
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .constructions import SAWTOOTH_K as SAWTOOTH_K  # also read as `study.SAWTOOTH_K`
from .constructions import construction_checks, constructions, smooth_function
from .exercise import (
    EXERCISE_LRS,
    exercise_comparison,
    exercise_cost,
    exercise_headline,
    exercise_point,
    lecture_square_text,
)
from .options import (
    DEFAULT_PARITY_N as DEFAULT_PARITY_N,
)
from .options import (
    DEFAULT_SAWTOOTH_K as DEFAULT_SAWTOOTH_K,
)
from .options import (
    DEFAULT_TARGETS as DEFAULT_TARGETS,
)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESET_OPTIONS as PRESET_OPTIONS,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (
    TARGETS as TARGETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)
from .verdicts import (
    compare_depths,
    quiz_lines,
    quiz_reading,
    rates_headline,
    trained_rates,
    verdict_counts,
)

# the two-spirals task: labels 0 and 1 on two interleaved spirals of this many turns
SPIRAL_TURNS = 1.5
TEST_POINTS = 4096
EXAMPLE_EVERY = 8  # the pop quiz's drawn fit: every 8th test point (512 of a 1-D target)
SELF_CHECK_STEPS = 2
MAX_LR = 10.0


def configure(args) -> dict:
    """The configuration from the options (the preset's values, those given put in), each
    value refused in one line naming its option, every arm's network shape included."""
    preset = PRESETS[args.preset]
    targets = list(preset.get("targets", DEFAULT_TARGETS))
    if args.targets is not None:
        targets = [t.strip() for t in args.targets.split(",")]
        if (
            not targets
            or any(t not in TARGETS for t in targets)
            or len(set(targets)) < len(targets)
        ):
            raise StudyInputError(
                f"--targets: need distinct names among {', '.join(TARGETS)}, got {args.targets!r}"
            )
    names = [flag.removeprefix("--").replace("-", "_") for flag, _, _ in PRESET_OPTIONS]
    cfg = {
        **override({name: preset[name] for name in names}, args, names),
        "exercise_lrs": list(EXERCISE_LRS),
        "exercise": preset.get("exercise", True),
        "targets": targets,
        "sawtooth_k": DEFAULT_SAWTOOTH_K if args.sawtooth_k is None else args.sawtooth_k,
        "parity_n": DEFAULT_PARITY_N if args.parity_n is None else args.parity_n,
        "spiral_turns": SPIRAL_TURNS,
        "train_points": args.train_points,
        "test_points": TEST_POINTS,
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    if 1 not in cfg["depths"] or len(cfg["depths"]) < 2:
        raise StudyInputError(
            f"--depths: need 1 (one hidden layer) and at least one deeper, got {cfg['depths']}"
        )
    archs = cfg["architectures"]
    if "plain" not in archs or not set(archs) <= set(ARCHITECTURES) or len(set(archs)) < len(archs):
        raise StudyInputError(f"--architectures: need plain and distinct names among "
                              f"{', '.join(ARCHITECTURES)}, got {archs}")  # fmt: skip
    if not all(0 < lr <= MAX_LR for lr in cfg["lrs"]):
        raise StudyInputError(f"--lrs: Adam learning rates in (0, {MAX_LR:g}], got {cfg['lrs']}")
    if cfg["seeds"] < 2:
        raise StudyInputError("--seeds: need at least 2 networks for an interval")
    if cfg["exercise_seeds"] < 2:
        raise StudyInputError("--exercise-seeds: need at least 2 networks for an interval")
    for flag, name in (("--sawtooth-k", "sawtooth"), ("--parity-n", "parity")):  # not ignored
        if getattr(args, flag[2:].replace("-", "_")) is not None and name not in targets:
            raise StudyInputError(f"{flag}: sets the {name} target, not in --targets {targets}")
    if cfg["sawtooth_k"] > 16:
        raise StudyInputError(f"--sawtooth-k: at most 16 (2^16 teeth), got {cfg['sawtooth_k']}")
    if cfg["parity_n"] > 16:
        raise StudyInputError(f"--parity-n: at most 16 (2^16 inputs), got {cfg['parity_n']}")
    if cfg["train_points"] < 2:
        raise StudyInputError(f"--train-points: need at least 2, got {cfg['train_points']}")
    for budget in cfg["budgets"]:
        for depth, architecture in arms(cfg):
            for d in {_dimension(cfg, t) for t in targets}:
                try:
                    network_shape(budget, d, depth, architecture)
                except ValueError as err:
                    raise StudyInputError(f"--budgets/--depths: {err}") from None
    return cfg


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`; the launcher checks it before `run`): every
    network's forward and backward pass over its training set per step, and the
    exercise's networks when it runs (`exercise_cost`)."""
    from ...harness.args import PYTHON_STEP, Cost

    nets = cfg["seeds"] * len(cfg["lrs"])
    work, memory, elements = 0.0, 0.0, 0.0
    for target in cfg["targets"]:
        n = _train_size(cfg, target)
        for budget in cfg["budgets"]:
            for depth, architecture in arms(cfg):
                width, params = network_shape(budget, _dimension(cfg, target), depth, architecture)
                work += nets * (6.0 * cfg["steps"] * n * params + PYTHON_STEP)
                # the activations of every layer kept for the gradient (a residual block
                # keeps its sum too, and its norm's), Adam's state, and the training loss
                # of every step (the loss curve)
                kept = 2 if architecture == "plain" else 4
                memory = max(
                    memory, nets * 8.0 * (kept * n * width * depth + 4 * params + cfg["steps"])
                )
                elements = max(elements, nets * n * width)
    return ([Cost("--budgets/--depths/--seeds/--lrs/--steps/--parity-n/--train-points",
                  "the trained networks", memory=memory, work=work, elements=elements,
                  array="the hidden activations of a depth's networks")]
            + ([exercise_cost(cfg)] if cfg["exercise"] else []))  # fmt: skip


def arms(cfg) -> list[tuple[int, str]]:
    """The trained networks' arms, `(depth, architecture)`: every depth plain, and every
    depth above one in each other architecture of `cfg["architectures"]` (one hidden
    layer has no block to skip)."""
    return [(depth, architecture) for depth in cfg["depths"]
            for architecture in cfg.get("architectures", ["plain"])
            if architecture == "plain" or depth > 1]  # fmt: skip


def _dimension(cfg, target) -> int:
    if target.startswith("smooth"):
        return int(target.removeprefix("smooth"))
    return {"parity": cfg["parity_n"], "spirals": 2}.get(target, 1)


def _train_size(cfg, target) -> int:
    if target == "spirals":
        return 2 * (cfg["train_points"] // 2)
    return 2 ** cfg["parity_n"] if target == "parity" else cfg["train_points"]


def two_spirals(count: int, offset: float = 0.0):
    """`count` points on each of two interleaved spirals of `SPIRAL_TURNS` turns in the
    unit disc, at t = (j + offset)/count: radius 0.1 + 0.9 t, angle 2π turns t, the second
    spiral the first turned by π. **Returns:** `(x (2 count, 2), labels 0/1)`."""
    t = (np.arange(count) + offset) / count
    radius, angle = 0.1 + 0.9 * t, 2 * np.pi * SPIRAL_TURNS * t
    arm = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return np.concatenate([arm, -arm]), np.repeat([0.0, 1.0], count)


def target_data(cfg, target):
    """`(x_train, y_train, x_test, y_test)` of a target (float64 numpy)."""
    if target.startswith("smooth"):  # uniform points of [0, 1]^d, fixed by d and the seed
        d = _dimension(cfg, target)
        rng = np.random.default_rng([cfg["seed"], 12, d])
        x, x_test = rng.random((cfg["train_points"], d)), rng.random((cfg["test_points"], d))
        return x, smooth_function(x), x_test, smooth_function(x_test)
    if target == "parity":
        n = cfg["parity_n"]
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        x = bits.astype(float)
        y = (bits.sum(axis=1) % 2).astype(float)
        return x, y, x, y
    if target == "spirals":  # tested between the training points along each spiral
        x, y = two_spirals(cfg["train_points"] // 2)
        x_test, y_test = two_spirals(cfg["test_points"] // 2, offset=0.5)
        return x, y, x_test, y_test
    x = np.linspace(0.0, 1.0, cfg["train_points"])[:, None]
    x_test = ((np.arange(cfg["test_points"]) + 0.5) / cfg["test_points"])[:, None]
    f = {
        "square": lambda x: x**2,
        "sawtooth": lambda x: approximation_theory.sawtooth(x, cfg["sawtooth_k"]),
        "sin50": lambda x: np.sin(50.0 * x),
    }[target]
    return x, f(x[:, 0]), x_test, f(x_test[:, 0])


@eqx.filter_jit
def _train(keys, lrs, data, *, width, depth, steps, architecture="plain"):
    """Every (learning rate, initialisation) network trained: test RMS errors, final
    training losses, the fraction of test inputs misclassified (the prediction rounded:
    for the 0/1 targets), the loss curves, the spread (standard deviation) of the initial
    network's output over the test points and the trained one's test predictions, each
    `(lrs, seeds, ...)`."""
    x, y, x_test, y_test = data

    def one(key, lr):
        model = sample_network(key, d=x.shape[1], width=width, depth=depth,
                               architecture=architecture)  # fmt: skip
        spread = jnp.std(predict(model, x_test))
        model, losses = fit_mlp(model, x, y, steps=steps, lr=lr)
        pred = predict(model, x_test)
        rms = jnp.sqrt(jnp.mean((pred - y_test) ** 2))
        final = jnp.mean((predict(model, x) - y) ** 2)
        wrong = jnp.mean((jnp.abs(jnp.round(pred) - y_test) > 0.5).astype(pred.dtype))
        return rms, final, wrong, losses, spread, pred

    return jax.vmap(lambda lr: jax.vmap(lambda k: one(k, lr))(keys))(lrs)


def _point(cfg, spec, master, steps=None):
    target, budget = spec["target"], spec["budget"]
    dtype = jnp.result_type(float)
    data = tuple(jnp.asarray(a, dtype) for a in target_data(cfg, target))
    d = _dimension(cfg, target)
    lrs = jnp.asarray(cfg["lrs"], dtype)
    steps = cfg["steps"] if steps is None else steps
    out = []
    for depth, architecture in arms(cfg):
        width, params = network_shape(budget, d, depth, architecture)
        # the networks of a (target, budget, depth): keys folded in one after another,
        # distinct for any budget and depth; another architecture's folds its index in
        key = jr.fold_in(jr.fold_in(jr.fold_in(master, TARGETS.index(target)), budget), depth)
        if architecture != "plain":
            key = jr.fold_in(key, ARCHITECTURES.index(architecture))
        keys = jr.split(key, cfg["seeds"])
        shape = {"width": width, "depth": depth, "architecture": architecture}
        rms, final, wrong, losses, spread, pred = (
            np.asarray(a, dtype=float) for a in _train(keys, lrs, data, steps=steps, **shape)
        )
        ok = np.isfinite(rms) & np.isfinite(final)
        mean_final = [
            float(f[o].mean()) if o.any() else math.inf for f, o in zip(final, ok, strict=True)
        ]
        best = int(np.argmin(mean_final))
        arm = {
            "depth": depth,
            "architecture": architecture,
            "width": width,
            "parameters": params,
            "lr": cfg["lrs"][best],
            "rms": [float(v) if o else None for v, o in zip(rms[best], ok[best], strict=True)],
            "train_mse": [
                float(v) if o else None for v, o in zip(final[best], ok[best], strict=True)
            ],
            "exploded": int((~ok[best]).sum()),
            "median_rms_per_lr": [
                float(np.median(r[o])) if o.any() else None for r, o in zip(rms, ok, strict=True)
            ],
            "loss_curve": losses[best][ok[best]].mean(axis=0)[:: max(1, steps // 100)].tolist()
            if ok[best].any()
            else [],
        }
        arm["init_spread"] = spread[best].tolist()  # the initial networks: any lr's
        if target in ("parity", "spirals"):
            arm["wrong"] = [
                float(v) if o else None for v, o in zip(wrong[best], ok[best], strict=True)
            ]
        if _quiz(cfg) and d == 1 and ok[best].any():  # the median network's fit, drawn
            finite = np.flatnonzero(ok[best])
            median = finite[np.argsort(rms[best][finite])[(finite.size - 1) // 2]]
            arm["example_fit"] = pred[best][median][::EXAMPLE_EVERY].tolist()
        out.append(arm)
    # the error of the best constant (the mean of f): a network on it learned nothing
    constant = float(np.std(np.asarray(data[3], dtype=float)))
    return {"target": target, "budget": budget, "constant_rms": constant, "arms": out}


def _quiz(cfg) -> bool:
    """Whether the pop quiz's reading runs: the preset, or several architectures."""
    return cfg.get("preset") == "pop-quiz" or len(cfg.get("architectures", [])) > 1


# ------------------------------------------------------------------ the study


def run(args, cfg):
    runner = start_study(args, cfg)
    every = _run_points(runner, cfg)
    points = [p for p in every if "target" in p]
    exercise = next((p for p in every if "exercise" in p), None)
    if exercise is not None:
        exercise["comparison"] = exercise_comparison(exercise)
    comparisons = [{"target": p["target"], "budget": p["budget"], **compare_depths(p)}
                   for p in points]  # fmt: skip
    exploded = sum(a["exploded"] for p in every for a in p["arms"])
    if exploded:
        runner.warn(f"{exploded} trained network(s) exploded (non-finite), left out of every "
                    "mean and counted in the arms' `exploded`")  # fmt: skip
    built = constructions(cfg["seed"])
    checks = construction_checks(built)
    counts = verdict_counts(comparisons)
    headline = _headline(cfg, built, checks, comparisons, counts)
    if exercise is not None:
        headline.append(exercise_headline(exercise["comparison"]))
    quiz = [quiz_reading(p) for p in points] if _quiz(cfg) else []
    # the pop quiz first: the preset's question
    headline[:0] = [line for q in quiz for line in quiz_lines(q)]
    rates = trained_rates(points)
    if rates:
        headline.append(rates_headline(rates))
    runner.finish(
        {
            "points": points,
            "comparisons": comparisons,
            "verdict_counts": counts,
            **({"exercise": exercise} if exercise is not None else {}),
            **({"quiz": quiz} if quiz else {}),
            "trained_rates": rates,
            "constructions": built,
            "construction_checks": checks,
            "reference": {
                "method": "exact ReLU constructions in float64 (meanfield.theory."
                "approximation); trained networks judged against each other",
                "error": "RMS over the test points (1-D: 4096 cell midpoints of [0, 1]; "
                "parity: all 2^n inputs); the comparison on the mean of log10 RMS over "
                "networks, Welch's 95% interval",
            },
            "headline": headline,
        },
        plot=plot,
    )


def _run_points(runner, cfg) -> list[dict]:
    """Every (target, budget) point, and the digits exercise when asked, through
    `runner.run_points` (the self-check trains 2 steps)."""
    master = jr.key(cfg["seed"])
    specs = [{"target": t, "budget": b} for t in cfg["targets"] for b in cfg["budgets"]]
    if cfg["exercise"]:
        specs.append({"exercise": "digits"})

    def point(spec):
        if "exercise" in spec:
            return exercise_point(cfg, master)
        return _point(cfg, spec, master)

    def short(spec):  # the self-check: 2 steps (round-off grows along thousands)
        if "exercise" in spec:
            out = exercise_point(cfg, master, steps=SELF_CHECK_STEPS)
            for arm in out["arms"]:
                arm.pop("test_error")  # a count of argmaxes, which round-off can flip
            return out
        out = _point(cfg, spec, master, steps=SELF_CHECK_STEPS)
        for arm in out["arms"]:
            arm.pop("wrong", None)  # a count of rounded signs, which round-off can flip
            arm.pop("init_spread")  # a deep plain network's is round-off itself (1e-17)
        return out

    def cost(spec):  # the exercise's networks are the largest
        return float(spec.get("budget", 10**6))

    return runner.run_points(
        specs, point, variant=short,
        describe=lambda s: f"{s['target']} P={s['budget']}" if "target" in s else "784 → ? → 10",
        check_cost=cost,
        route=f"op by op (jax.disable_jit), with {SELF_CHECK_STEPS} training steps compiled "
        "and op by op",
    )  # fmt: skip


def _headline(cfg, built, checks, comparisons, counts) -> list[str]:
    """The headline's lines on the constructions and the trained comparisons."""
    largest = max(cfg["budgets"])
    at_largest = {c["target"]: c["lower"] for c in comparisons if c["budget"] == largest}
    return [
        f"x² from p ReLUs: max error 1/(4p²) to {checks['square_worst_relative_deviation']:.1e} "
        f"(relative); sawtooth pieces 2^k in {checks['sawtooth_pieces_as_predicted'][0]} of "
        f"{checks['sawtooth_pieces_as_predicted'][1]} k; parity nets wrong on "
        f"{checks['parity_wrong_inputs']} inputs; {lecture_square_text(built)}",
        "curse of dimensionality, fitted rate of the piecewise-linear error against pieces: "
        + ", ".join(
            f"d={r['d']} {r['slope']:+.2f} (−2/d = {r['predicted_slope']:+.2f})"
            for r in built["curse"]
        ),  # fmt: skip
        f"trained, lower mean log error at {largest} parameters: "
        + ", ".join(f"{t}: {v}" for t, v in at_largest.items()),
        f"over all {len(comparisons)} (target, budget) points: one hidden layer lower at "
        f"{counts['one hidden layer']}, deeper at {counts['deeper']}, not resolved at "
        f"{counts['not resolved']}, neither learned at {counts['neither learned']}",
    ]


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    from .plot import figures

    figures(Path(out), results)
