"""`meanfield study plain-vs-residual`: why residual connections make depth trainable
(after the lecture "Universal approximation & going deep"), measured.

Two parts (the networks: `meanfield.models.plain`; the predictions:
`meanfield.theory.gradients`):

* **Gradients at initialisation.** For every activation (sigmoid, tanh, relu, leaky_relu),
  initialisation (N(0, 1), Xavier, He) and architecture (plain; post- and pre-activation
  residual with α = 1 and α = 1/sqrt(L)), at each depth L: `log ‖∂𝓛/∂h^0‖² −
  log ‖∂𝓛/∂h^L‖²` (𝓛 = ⟨B, h^L⟩, B random) over independent draws, and per layer the
  diagnostics a practitioner checks (activation mean and standard deviation, fraction of
  units with a positive pre-activation, gradient norm). The per-layer rate is the slope of
  that log-ratio against L (least squares over the depths L ≤ N/16, where the
  infinite-width prediction applies; interval by a bootstrap over draws), set against the
  same slope of the prediction at the networks' width N (`plain.finite_width_log_ratios`:
  the independence model of the infinite-width recursion, `plain.predicted_log_ratio`,
  with the mean of the logarithm taken at width N, as it is measured; both are recorded);
  a configuration agrees when the two differ by at most 10% of the prediction or 0.02,
  whichever is larger. All configurations at one depth
  and draw share the same standard-normal weights (scaled per initialisation).
* **Degradation.** Plain and residual ReLU networks (He initialisation, residual α =
  1/sqrt(L)) of growing depth trained on one teacher classification task with the same
  optimiser budget (full-batch Adam, same steps and learning rate): final training loss
  and test accuracy against depth, and each network's scale at initialisation (the mean
  square of h^l over the training inputs and units, over `INIT_DRAWS` draws) beside its
  exact expectation where there is one. `--batch-norm` adds Marion et al.'s "batch
  normalization or scaling": the pre-activation network at α = 1 (neither: its mean
  square doubles per layer), and the three architectures at α = 1 with batch
  normalisation (`meanfield.models.plain`; pre-activation + BN adds exactly 1 per layer
  in expectation); `--projection` the lecture's shortcuts when shapes change (networks
  that widen halfway, with zero-padding or projection shortcuts, compared depth by
  depth). The networks, their training and verdicts:
`meanfield.studies.plain_vs_residual.degradation`.
"""

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...harness.runner import start_study
from ...models import plain
from ...runtime.errors import StudyInputError
from ...stats.compare import slope_interval
from ...stats.fits import line_fit
from ...theory import gradients as gradients_theory
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .degradation import (
    INIT_DRAWS,
    TASK,
    alpha_value,
    degradation_verdict,
    init_checks,
    init_headline,
    shortcut_comparison,
    shortcut_headline,
    train_architectures,
    train_point,
)
from .grid import configurations
from .options import (  # the command line's (read without JAX: options.py)
    ACTIVATIONS as ACTIVATIONS,
)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (
    add_arguments as add_arguments,
)
from .plot import RELATIVE_TOLERANCE, draw_figures
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

# the self-check trains its point for this many steps, compiled and op by op (round-off
# grows chaotically along a long training: the full run's compiled and op-by-op losses
# part by more than round-off without any miscompile)
SELF_CHECK_STEPS = 2
# the rates are fitted on depths L <= N/16: the prediction is the N → ∞ limit at fixed L,
# and the finite-width correction grows with L/N — for kinked σ (relu) after a skip like
# L/sqrt(N) (post-activation ReLU, He, α = 1, L = 32: log-ratio 24.32, 23.59, 23.33,
# 23.18 at N = 128..1024 against 22.57); deeper points are measured and shown, not fitted
FIT_DEPTH_RATIO = 1 / 16


# temporaries of the compiled programs (float64; XLA's memory analysis on a CPU): a draw
# of the gradient part about 24 bytes per weight (L·N², the draws one after another);
# a trained network about 72 n_train bytes per unit (L·N: the activations the gradient
# keeps, and the test pass) and 40 per weight (weights, gradients, Adam's moments), the
# draws of a depth together
GRADIENT_BYTES_PER_WEIGHT = 24
TRAIN_BYTES = (72, 40)
# the predictions of the post-activation architecture: populations of this many paths
POPULATION_PATHS = 8 * 2**16


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`), checked by the launcher before `run`, of the
    gradient part (per depth and draw, an L × N × N Gaussian weight tensor and every
    configuration's forward and backward pass through it; the predictions at width N)
    and of the degradation part (per depth and architecture, `train_seeds` classifiers
    trained together for `train_steps` full-batch Adam steps on `TASK`)."""
    from ...harness.args import PYTHON_STEP, Cost

    N, S = cfg["N"], cfg["seeds"]
    configs = len(configurations(cfg["activations"]))
    L = max(cfg["L"])
    grad_work = math.fsum(
        S * (configs * 4 * Lk * N * N + 20 * Lk * N * N + PYTHON_STEP / 10)
        + configs * (POPULATION_PATHS * Lk * 20 + PYTHON_STEP)
        for Lk in cfg["L"]
    )
    T, TN, TS = cfg["train_steps"], cfg["train_N"], cfg["train_seeds"]
    n = TASK["n_train"] + TASK["n_test"] // 4  # the training set each step, the test once
    tL = max(cfg["train_L"])
    per_net = TRAIN_BYTES[0] * TASK["n_train"] * tL * TN + TRAIN_BYTES[1] * tL * TN * TN
    archs = len(train_architectures(cfg))
    # the training, and the initial scale (INIT_DRAWS forward passes of the training set)
    train_work = math.fsum(
        archs * (TS * 6 * (T + 1) * n * Lk * TN * TN + PYTHON_STEP)
        + archs * INIT_DRAWS * 2 * TASK["n_train"] * Lk * TN * TN
        for Lk in cfg["train_L"]
    )
    return [
        Cost(
            "--L/--N/--seeds/--activations",
            "the gradient part",
            memory=GRADIENT_BYTES_PER_WEIGHT * L * N * N + 8 * S * L * configs * 8,
            work=grad_work,
            elements=max(L * N * N, S * configs * L),
            array="a draw's weights, (L, N, N)",
            memory_flags="--L/--N/--seeds",
            array_flags="--L/--N",
        ),
        Cost(
            "--train-L/--train-N/--train-seeds/--train-steps",
            "the degradation part",
            memory=TS * (per_net + 8 * T),
            work=train_work,
            elements=TS * max(tL * TN * TN, TASK["n_train"] * tL * TN, T),
            array="the weights or activations of a depth's networks, (train-seeds, "
            "train-L, train-N, train-N)",
        ),
    ]


def run(args, cfg):
    runner = start_study(args, cfg)
    configs = configurations(tuple(cfg["activations"]))
    points = _run_parts(runner, cfg, configs)
    grad_points = [p for p in points if p["part"] == "gradients"]
    rates = _rates(cfg, configs, grad_points)
    degradation = [c for p in points if p["part"] == "train" for c in p["cells"]]
    for what, cells in (("gradients", rates), ("training", degradation)):
        exploded = sum(c["exploded"] for c in cells)
        if exploded:
            runner.warn(f"{what}: {exploded} draw(s) exploded (non-finite), left out of every "
                        "mean and counted in the results' `exploded`")  # fmt: skip
    runner.finish(_results(points, rates, degradation), plot=plot)


def configure(args) -> dict:
    """The preset with the command line's overrides, checked (StudyInputError); its
    `activations` the names `--activations` gives (default: all)."""
    preset = PRESETS[args.preset]
    acts = ACTIVATIONS
    if args.activations is not None:
        acts = tuple(a.strip() for a in args.activations.split(","))
        bad = [a for a in acts if a not in ACTIVATIONS]
        if bad or not acts or len(set(acts)) != len(acts):
            raise StudyInputError(
                f"--activations: need distinct names among {', '.join(ACTIVATIONS)}, "
                f"got {args.activations!r}"
            )
    cfg = {
        "L": args.L or preset["L"],
        "N": args.N or preset["N"],
        "seeds": args.seeds or preset["seeds"],
        "activations": list(acts),
        "train_L": args.train_L or preset["train_L"],
        "train_steps": args.train_steps or preset["train_steps"],
        "train_seeds": args.train_seeds or preset["train_seeds"],
        "train_N": args.train_N or preset["train_N"],
        "lr": args.lr,
        "batch_norm": bool(args.batch_norm),
        "projection": bool(args.projection),
        "init_draws": INIT_DRAWS,
        "task": TASK,
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    if sum(L <= FIT_DEPTH_RATIO * cfg["N"] for L in cfg["L"]) < 2:
        raise StudyInputError(
            f"--L, --N: a rate needs at least two depths L <= N/{round(1 / FIT_DEPTH_RATIO)}, "
            f"got L = {cfg['L']} at N = {cfg['N']}"
        )
    if cfg["projection"] and cfg["train_N"] < 2:
        raise StudyInputError(
            f"--train-N, --projection: a network that widens from train-N // 2 needs "
            f"train-N >= 2, got {cfg['train_N']}"
        )
    if cfg["seeds"] < 2 or cfg["train_seeds"] < 2:
        raise StudyInputError("--seeds, --train-seeds: need at least 2 draws for a spread")
    return cfg


def _run_parts(runner, cfg, configs) -> list[dict]:
    """The gradient part's depths, then the training part's, through `runner.run_points`
    (the self-check shortens the training)."""
    specs = [{"part": "gradients", "L": L} for L in cfg["L"]]
    specs += [{"part": "train", "L": L} for L in cfg["train_L"]]
    master = jr.key(cfg["seed"])

    def point(spec):
        if spec["part"] == "gradients":
            return _gradient_point(cfg, configs, spec["L"], master, spec["L"] == max(cfg["L"]))
        return train_point(cfg, spec["L"], master)

    def short(spec):  # the self-check's training: 2 steps (round-off grows along 400)
        if spec["part"] == "gradients":
            return point(spec)
        # and 4 draws of the initial scale (64 op by op are minutes at large L)
        out = train_point(
            {**cfg, "train_steps": SELF_CHECK_STEPS, "init_draws": 4}, spec["L"], master
        )
        # compared without the test accuracies: a count of argmaxes, which round-off flips
        # at a test input on the decision boundary (the losses it compares are continuous)
        for cell in out["cells"]:
            cell.pop("test_accuracy")
            cell.pop("test_accuracy_std")
        return out

    return runner.run_points(
        specs, point, describe=lambda s: f"{s['part']} L={s['L']}", variant=short,
        route=f"op by op (jax.disable_jit), the training part with {SELF_CHECK_STEPS} "
        "steps and 4 draws of the initial scale compiled and op by op",
    )  # fmt: skip


def _results(points, rates, degradation) -> dict:
    """The study's results: the points, the rates against their prediction, the training
    part's cells with its verdicts, and the headline."""
    agree, judged, agree_inf = agreement_counts(rates)
    verdict = degradation_verdict(degradation)
    checks = init_checks(degradation)
    shortcuts = shortcut_comparison(degradation)
    return {
        "points": points,
        "gradient_rates": rates,
        "agreement": {
            "agree": agree,
            "judged": judged,
            "agree_infinite_width": agree_inf,
            "judge": "predicted_width_N: the independence model at the networks' width N "
            "(the mean of log, as measured; equal to the infinite-width prediction up "
            "to O(1/N) per layer where O(N) coordinates carry the gradient, and below "
            "it by O(sqrt(l/N)) per layer for tanh under N(0, 1) weights, where about "
            "sqrt(N/l) do); post-activation: the infinite-width population",
            "tolerance": "the prediction inside the rate's 95% interval (widened by "
            "twice the prediction's own error), or |rate - predicted| <= "
            f"{RELATIVE_TOLERANCE:g} |predicted|",
            "fitted_depths": f"L <= N/{round(1 / FIT_DEPTH_RATIO)} (the prediction is "
            "the N -> infinity limit at fixed L; deeper points are measured, not fitted)",
        },
        "bounded_ratios": _bounded(rates),
        "degradation": degradation,
        "degradation_verdict": verdict,
        "reference": {
            "method": "infinite-width recursion of meanfield.theory.gradients (quadrature "
            "for plain and pre-activation, a population of coordinate paths for "
            "post-activation)"
        },
        "init_checks": checks,
        "shortcut_comparison": shortcuts,
        "headline": [
            f"rates within tolerance of the width-N prediction: {agree} of {judged} "
            f"(of the infinite-width one: {agree_inf})",
            "degrades with depth: "
            + ", ".join(f"{k}: {v.get('degrades')}" for k, v in verdict.items()),
            init_headline(checks),
            *([shortcut_headline(shortcuts)] if shortcuts else []),
        ],
    }


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    cfg = results["config"]
    grad_points = [p for p in results["points"] if p["part"] == "gradients"]
    draw_figures(Path(out), cfg, configurations(cfg["activations"]), grad_points,
             results["gradient_rates"], results["degradation"])  # fmt: skip


# ------------------------------------------------------------------ the gradient part


@functools.partial(jax.jit, static_argnames=("pairs", "L", "N"))
def _draw(key, gains, alphas, *, pairs, L, N):
    """One draw at depth L: per (architecture, activation) pair, the configurations of
    `gains`/`alphas` (vmapped), all from the same standard-normal weights."""
    kg, kx, kb = jr.split(key, 3)
    G = jr.normal(kg, (L, N, N))
    x, B = jr.normal(kx, (N,)), jr.normal(kb, (N,))
    out = []
    for (arch, act), g, a in zip(pairs, gains, alphas, strict=True):

        def one(gain, alpha, arch=arch, act=act):
            net = plain.LayeredNet(G, jnp.zeros((L, N)), alpha, arch, act, jnp.sqrt(gain / N))
            hs, pre = net.layers(x)
            logs = net.gradient_log_norms(x, B)
            ok = jnp.all(jnp.isfinite(hs)) & jnp.all(jnp.isfinite(logs))
            return {
                "log_ratio": 2 * (logs[0] - logs[-1]),
                "ok": ok,
                "log_grad": logs / jnp.log(10.0),
                "act_mean": jnp.mean(hs, axis=1),
                "act_std": jnp.std(hs, axis=1),
                "active": jnp.mean(pre > 0, axis=1),
            }

        out.append(jax.vmap(one)(g, a))
    return out


def _gradient_point(cfg, configs, L, master, per_layer):
    N, seeds = cfg["N"], cfg["seeds"]
    pairs = tuple(dict.fromkeys((c["architecture"], c["activation"]) for c in configs))
    members = [[c for c in configs if (c["architecture"], c["activation"]) == p] for p in pairs]
    gains = [jnp.array([plain.weight_gain(c["init"], N) for c in m]) for m in members]
    alphas = [jnp.array([alpha_value(c["alpha"], L) for c in m]) for m in members]
    keys = jr.split(jr.fold_in(master, L), seeds)
    draws = jax.lax.map(
        lambda k: _draw(k, gains, alphas, pairs=pairs, L=L, N=N), keys
    )  # list over pairs of dicts of (seeds, configs, ...)
    cells = []
    for m, d in zip(members, draws, strict=True):
        d = {k: np.asarray(v) for k, v in d.items()}
        for j, c in enumerate(m):
            ok = d["ok"][:, j]
            cell = {
                **c,
                "log_ratio": [
                    float(v) if o else None for v, o in zip(d["log_ratio"][:, j], ok, strict=True)
                ],
                "exploded": int((~ok).sum()),
            }
            if per_layer and ok.any():
                for name in ("log_grad", "act_mean", "act_std", "active"):
                    v = d[name][ok, j]
                    # states of 1e150 and more (N(0,1) weights) overflow a spread: stored
                    # as null (JSON has no inf), never as a warning
                    with np.errstate(over="ignore", invalid="ignore"):
                        cell[name] = {"mean": v.mean(0).tolist(), "std": v.std(0).tolist()}
                if c["activation"] not in ("relu", "leaky_relu"):
                    cell.pop("active")
            cells.append(cell)
    return {"cells": cells}


def _rates(cfg, configs, points):
    """Per configuration: the fitted per-layer rate with its 95% interval
    (`slope_interval`), beside the same slope of the prediction."""
    out = []
    for i, c in enumerate(configs):
        Ls, samples = [], []
        exploded = 0
        for p in points:
            cell = p["cells"][i]
            exploded += cell["exploded"]
            good = np.array([v for v in cell["log_ratio"] if v is not None], float)
            if good.size >= 2:
                Ls.append(p["L"])
                samples.append(good)
        rec = {
            **c,
            "depths": Ls,
            "exploded": exploded,
            "rate": None,
            "rate_ci": None,
            "predicted": None,
            "predicted_error": None,
            "agrees": None,
        }
        # post-activation's prediction is a Monte-Carlo population whose cost grows as L:
        # at the depths only drawn (not fitted) a quarter of it (its error twice as large)
        predictions = [
            gradients_theory.predicted_log_ratio(
                c["architecture"], c["activation"], c["init"], N=cfg["N"], L=L,
                alpha=alpha_value(c["alpha"], L),
                size=2**16 if L <= FIT_DEPTH_RATIO * cfg["N"] else 2**14,
            )
            for L in Ls
        ]  # fmt: skip
        rec["log_ratio"] = [float(s.mean()) for s in samples]
        rec["log_ratio_se"] = [float(s.std(ddof=1) / math.sqrt(s.size)) for s in samples]
        rec["predicted_log_ratio"] = [v for v, _ in predictions]
        fit = [j for j, L in enumerate(Ls) if L <= FIT_DEPTH_RATIO * cfg["N"]]
        rec["fitted_depths"] = [Ls[j] for j in fit]
        # the same independence model at the networks' own width N (the mean of the
        # logarithm, as measured), at the fitted depths: `plain.finite_width_log_ratios`;
        # post-activation: none (its prediction is a population of coordinate paths)
        width_n = None
        if fit and c["architecture"] != "post-activation":
            width_n = gradients_theory.finite_width_log_ratios(
                c["architecture"], c["activation"], c["init"], N=cfg["N"],
                Ls=[Ls[j] for j in fit], alphas=[alpha_value(c["alpha"], Ls[j]) for j in fit],
            )  # fmt: skip
        rec["predicted_width_N_log_ratio"] = width_n
        if len(fit) < 2:
            rec["reason"] = (
                f"only {len(fit)} depth(s) L <= N/{round(1 / FIT_DEPTH_RATIO)} without explosion"
            )
            out.append(rec)
            continue
        Lf, sf, pf = [Ls[j] for j in fit], [samples[j] for j in fit], [predictions[j] for j in fit]
        rate = line_fit(Lf, [s.mean() for s in sf])[0]
        pred = line_fit(Lf, [v for v, _ in pf])[0]
        xc = np.asarray(Lf, float) - np.mean(Lf)
        errs = np.array([e for _, e in pf])
        pred_err = float(np.sqrt(np.sum(xc**2 * errs**2)) / (xc @ xc))  # independent solves
        pred_n = pred if width_n is None else line_fit(Lf, width_n)[0]
        rec.update(
            rate=rate,
            rate_ci=slope_interval(Lf, sf),
            predicted=pred,
            predicted_error=pred_err,
            predicted_width_N=pred_n,
        )
        ci = rec["rate_ci"]
        rec.update(
            agrees_infinite_width=agrees(rate, ci, pred, pred_err),
            agrees=agrees(rate, ci, pred_n, pred_err),
        )
        out.append(rec)
    return out


def agreement_counts(rates) -> tuple[int, int, int]:
    """`(agree, judged, agree_infinite_width)` over the measured rates: a rate with no
    verdict (`agrees` None: too few depths) is neither agreeing nor judged."""
    judged = [r for r in rates if r["agrees"] is not None]
    return (
        sum(bool(r["agrees"]) for r in judged),
        len(judged),
        sum(bool(r.get("agrees_infinite_width")) for r in rates),
    )


def agrees(rate, ci, predicted, predicted_error=0.0) -> bool:
    """Whether a measured rate (with its 95% interval `ci`) agrees with its prediction:
    the prediction inside the interval widened by twice its own error, or within
    `RELATIVE_TOLERANCE` of the rate."""
    lo, hi = ci
    inside = lo - 2 * predicted_error <= predicted <= hi + 2 * predicted_error
    return bool(inside or abs(rate - predicted) <= RELATIVE_TOLERANCE * abs(predicted))


def _bounded(rates):
    """`‖∂𝓛/∂h^0‖/‖∂𝓛/∂h^L‖` (geometric mean over draws) against L for the residual
    networks with α = 1/sqrt(L), beside the prediction."""
    out = []
    for r in rates:
        if r["alpha"] != "1/sqrt(L)":
            continue
        out.append(
            {
                "architecture": r["architecture"],
                "activation": r["activation"],
                "init": r["init"],
                "L": r["depths"],
                "ratio": [math.exp(v / 2) for v in r["log_ratio"]],
                "predicted": [math.exp(v / 2) for v in r["predicted_log_ratio"]],
            }
        )
    return out


# ------------------------------------------------------------------------ figures
