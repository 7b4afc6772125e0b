"""`meanfield study regimes`: the measured phase diagram of training regimes over the depth
exponents of the residual scale and of the learning rate, and learning-rate transfer across
depth (Chizat's lecture notes on ResNets, §3, Chaintron's criteria, CompleteP; Mathematics §8).

**The diagram.** ResNets of 2LP units `φ(h, (u, v)) = v ρ(uᵀh)` (state dimension d, M units
per layer, both fixed) with residual scale `α = L^{-γ}/M` and plain GD at learning rate
`η = lr0 · M · L^{λ}`, on a teacher regression task, for every (γ, λ) of a grid and every
depth L of a line: after `--steps` GD steps, the diagnostics of `meanfield.diagnostics.regimes`
(predictor movement, forward deviation at initialisation, local and global feature
changes), each a mean over draws; their log-log slopes against L with bootstrap
intervals; a regime per cell (`regimes.classify`: `local-feature-learning`, `lazy-ode`,
`kernel`, `no-learning`, `explosion`, under the key `regime`, `ambiguous` where an
interval straddles a threshold); beside it the regime the first-order analysis predicts
(`regimes.predicted_regime`; the derivation is in the docstring of `meanfield.diagnostics.regimes`).
Agreement is counted over the cells the classifier can judge: not ambiguous, and whose
deciding predicted exponent lies at least twice the classifier's tolerance from 0 (the
area regimes, away from the boundaries at the classifier's resolution); the cells left
out are counted and listed (`agreement.not_judged`), and the cells on the learning line
(the line regimes) are reported apart.

**Depth transfer.** The same networks trained for `--transfer-steps` GD steps under three
parametrizations, over a log grid of learning rates and a line of depths:

* `mean-ode`: α = 1/(LM), η = lr · L · M (γ = λ = 1: the mean-ODE / CompleteP scaling);
* `depth-mup`: α = 1/(sqrt(L) M), η = lr · M (γ = 1/2, λ = 0). The rule: the tangent kernel
  of a depth-L network of branch scale α is that of M·L units of scale α, ∝ M L α² = 1/M,
  so a learning rate ∝ M (independent of L) keeps the first-order predictor step fixed —
  the SGD rule of depth-μP (Bordelon et al. 2023; Yang et al. 2023, "Tensor Programs VI");
* `standard`: α = 1/M, η = lr · M (γ = λ = 0: no depth scaling).

Per parametrization and depth, the final training loss against log lr (mean over draws of
its logarithm; a diverged run counts as its initial loss); the optimal lr from a parabola
through the grid's minimum and its two neighbours in (log lr, log loss) — not the argmin
alone; its drift exponent (slope of log lr* against log L) with a bootstrap interval over
draws. Results `transfer`: `[{parametrization, drift_exponent, drift_ci95, optimal_lr, ...}]`.
"""

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from ...blocks.two_layer import TwoLayerBlock, TwoLayerParams
from ...diagnostics import regimes as regimes_diagnostics
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...models.resnet import ResNet
from ...runtime.errors import StudyInputError
from ...stats.fits import fit_loglog
from ...stats.transfer import drift
from ...training.resnet import train
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .plot import classified_agreement, diagnostics_figure, draw_figures, drift_text
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

# the self-check trains a transfer point for this many steps, compiled and op by op: along
# the study's 50 steps at its largest learning rates round-off grows chaotically (two
# compiler releases part by 1e-5 there without any miscompile)
SELF_CHECK_STEPS = 3
PARAMETRIZATIONS = {  # name: (γ, λ) with α = L^-γ / M, η = lr · M · L^λ
    "mean-ode": (1.0, 1.0),
    "depth-mup": (0.5, 0.0),
    "standard": (0.0, 0.0),
}
QUANTITIES = {  # diagnostic -> exponent name used by regimes.classify
    "forward_deviation": "forward",
    "predictor_movement": "predictor",
    "local_change": "local",
    "global_change": "global",
}


def configure(args) -> dict:
    """The configuration from the options: the preset with the options given, every value
    checked (one line naming the option)."""
    from ...harness.args import check_activation, override

    cfg = override(
        dict(PRESETS[args.preset]), args,
        ("L", "gammas", "lambdas", "seeds", "steps", "lr0", "d", "M", "transfer_L",
         "transfer_steps", "transfer_seeds"),
    )  # fmt: skip
    check_activation(args.activation)
    if len(cfg["L"]) < 3:
        raise StudyInputError(f"--L: an exponent needs at least three depths, got {cfg['L']}")
    if any(g < 0 or g > 3 for g in cfg["gammas"]):
        raise StudyInputError(f"--gammas: need values in [0, 3], got {cfg['gammas']}")
    if any(abs(v) > 3 for v in cfg["lambdas"]):
        raise StudyInputError(f"--lambdas: need values in [-3, 3], got {cfg['lambdas']}")
    if max(cfg["L"]) > 4096 or max(cfg["transfer_L"]) > 4096:
        raise StudyInputError("--L, --transfer-L: at most 4096 layers")
    if cfg["seeds"] < 2 or cfg["transfer_seeds"] < 2:
        raise StudyInputError("--seeds, --transfer-seeds: need at least 2 draws")
    if cfg["lr0"] > 10:
        raise StudyInputError(f"--lr0: at most 10, got {cfg['lr0']}")
    if args.no_transfer:  # options of a part that will not run: said, not ignored
        given = [f"--{n.replace('_', '-')}" for n in ("transfer_L", "transfer_steps",
                 "transfer_seeds") if getattr(args, n, None) is not None]  # fmt: skip
        if given:
            raise StudyInputError(
                f"{'/'.join(given)}: set the transfer part, which --no-transfer skips"
            )
    if not args.no_transfer and len(cfg["transfer_L"]) < 3:
        raise StudyInputError(
            f"--transfer-L: a drift exponent needs at least three depths, got {cfg['transfer_L']}"
        )
    cfg.update(activation=args.activation, transfer=not args.no_transfer, seed=args.seed,
               x64=args.x64, preset=args.preset)  # fmt: skip
    return cfg


# temporaries per network of a compiled point (bytes per unit coordinate, L·M·d, in
# float64; XLA's memory analysis on a CPU, within 5% over L 64..512, M 8..64, d 8..32):
# the transfer program 17 n + 32 (its trajectory is dropped), the diagram program
# 16 (steps + 1) + 18 n + 105 (it keeps the trajectory of u and v); halved in float32
TRANSFER_BYTES = (17, 32)
DIAGRAM_BYTES = (16, 18, 105)
# the networks of a point run in batches (vmapped within one, `lax.map` across) of at
# most this many bytes of temporaries: a fixed budget, not the machine's memory, so that
# the same configuration compiles the same program (and gives the same numbers) anywhere
BATCH_BYTES = 4e9


def diagram_net_bytes(cfg, L: int) -> float:
    """Temporaries of one network of the diagram at depth `L` (`DIAGRAM_BYTES`)."""
    a, b, c = DIAGRAM_BYTES
    half = 1.0 if cfg["x64"] else 0.5
    return half * L * cfg["M"] * cfg["d"] * (a * (cfg["steps"] + 1) + b * cfg["n"] + c)


def transfer_net_bytes(cfg, L: int) -> float:
    """Temporaries of one network of the transfer part at depth `L` (`TRANSFER_BYTES`)."""
    a, b = TRANSFER_BYTES
    half = 1.0 if cfg["x64"] else 0.5
    return half * L * cfg["M"] * cfg["d"] * (a * cfg["n"] + b) + 8 * (cfg["transfer_steps"] + 1)


def nets_per_batch(net_bytes: float, nets: int) -> int:
    """How many of a point's `nets` networks run at once (`BATCH_BYTES`)."""
    return max(1, min(nets, int(BATCH_BYTES // max(net_bytes, 1.0))))


# operations per unit coordinate, input and GD step (forward, gradient, update); the
# diagram adds about three forward passes for its diagnostics
OPS_PER_UNIT_STEP = 12


def _work(cfg, nets: int, passes: int, depths) -> float:
    """The operations of `nets` networks at each depth of `depths`: `passes` times
    `OPS_PER_UNIT_STEP` per unit coordinate and input, and a twentieth of a Python-level
    step each."""
    from ...harness.args import PYTHON_STEP

    n, M, d = cfg["n"], cfg["M"], cfg["d"]
    return math.fsum(
        nets * (OPS_PER_UNIT_STEP * passes * n * Lk * M * d + PYTHON_STEP / 20) for Lk in depths
    )


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`) of the diagram and the transfer part, checked by
    the launcher before `run`: the networks of a point (cells × seeds, or
    parametrizations × rates × seeds) run in batches (`nets_per_batch`), so a point's
    memory is that of one batch."""
    from ...harness.args import Cost

    d, M, n, K = cfg["d"], cfg["M"], cfg["n"], cfg["steps"]
    cells = len(cfg["gammas"]) * len(cfg["lambdas"]) * cfg["seeds"]
    L = max(cfg["L"])
    one = diagram_net_bytes(cfg, L)
    parts = [
        Cost(
            "--L/--gammas/--lambdas/--seeds/--steps/--M/--d",
            "the diagram",
            memory=one * nets_per_batch(one, cells),
            work=_work(cfg, cells, K + 4, cfg["L"]),
            elements=nets_per_batch(one, cells) * max((K + 1) * L * M * d, n * (L + 1) * d),
            array="the trajectories of a batch of networks, (networks, steps + 1, L, M, d)",
        )
    ]
    if cfg["transfer"]:
        nets = len(PARAMETRIZATIONS) * len(cfg["transfer_lrs"]) * cfg["transfer_seeds"]
        T, Lt = cfg["transfer_steps"], max(cfg["transfer_L"])
        one = transfer_net_bytes(cfg, Lt)
        parts.append(
            Cost(
                "--transfer-L/--transfer-seeds/--transfer-steps/--M/--d",
                "the transfer part",
                memory=one * nets_per_batch(one, nets),
                work=_work(cfg, nets, T + 1, cfg["transfer_L"]),
                elements=max(nets_per_batch(one, nets) * Lt * M * d, nets * (T + 1)),
                array="a batch of networks, (networks, L, M, d)",
                memory_flags="--transfer-L/--transfer-seeds/--transfer-steps/--M/--d",
            )
        )
    return parts


def task(key, d: int, n: int):
    """The teacher regression: x ~ N(0, I_d), y = x + tanh(W x / sqrt(d)) / 2 (W Gaussian):
    a residual map a ResNet can learn, with an initial loss of order 1."""
    kx, kw = jr.split(key)
    xs = jr.normal(kx, (n, d))
    return xs, xs + 0.5 * jnp.tanh(xs @ jr.normal(kw, (d, d)) / math.sqrt(d))


def _network(key, L, cfg, scale):
    d, M = cfg["d"], cfg["M"]
    ku, kv = jr.split(key)
    params = TwoLayerParams(u=jr.normal(ku, (L, M, d)) / math.sqrt(d), v=jr.normal(kv, (L, M, d)))
    block = regimes_diagnostics.ScaledBlock(TwoLayerBlock(cfg["activation"]), jnp.asarray(scale))
    return ResNet(block, params, 1.0)


def _batched(one, batch: int, shared: int):
    """`one` mapped over its leading arguments' first axis, `batch` at a time (vmapped
    within a batch, `lax.map` across), its last `shared` arguments the same for all."""

    def run(*args):
        per, common = args[: len(args) - shared], args[len(args) - shared :]
        return jax.lax.map(lambda a: one(*a, *common), per, batch_size=batch)

    return jax.jit(run)


@functools.cache
def _diagram_program(L, d, M, activation, steps, batch):
    cfg = {"d": d, "M": M, "activation": activation}

    def one(key, gamma, lam, lr0, xs, ys):
        net = _network(key, L, cfg, L**-gamma / M)
        lr = lr0 * M * L**lam
        dg = regimes_diagnostics.regime_diagnostics(
            net, xs, ys, optimizer=optax.sgd(lr), steps=steps
        )
        return {
            "forward_deviation": dg.forward_deviation,
            "predictor_movement": dg.predictor_movement,
            "local_change": dg.local_change,
            "global_change": dg.global_change,
            "parameter_movement": dg.parameter_movement,
            "loss_ratio": dg.losses[-1] / dg.losses[0],
            "exploded": dg.exploded,
        }

    return _batched(one, batch, shared=3)


@functools.cache
def _transfer_program(L, d, M, activation, steps, batch):
    cfg = {"d": d, "M": M, "activation": activation}

    def one(key, gamma, lam, lr, xs, ys):
        net = _network(key, L, cfg, L**-gamma / M)
        res = train(net, xs, ys, optimizer=optax.sgd(lr * M * L**lam), steps=steps)
        first, last = res.losses[0], res.losses[-1]
        ok = jnp.all(jnp.isfinite(res.losses)) & (
            jnp.max(res.losses) < regimes_diagnostics.EXPLOSION_FACTOR * first
        )
        return {"final_loss": jnp.where(ok, last, jnp.nan), "initial_loss": first}

    return _batched(one, batch, shared=2)


def run(args, cfg):
    runner = start_study(args, cfg)
    master = jr.key(cfg["seed"])
    xs, ys = task(jr.fold_in(master, 1), cfg["d"], cfg["n"])
    cells = [(g, lam) for g in cfg["gammas"] for lam in cfg["lambdas"]]
    specs = [{"part": "diagram", "L": L} for L in cfg["L"]]
    if cfg["transfer"]:
        specs += [{"part": "transfer", "L": L} for L in cfg["transfer_L"]]

    def point(spec):
        if spec["part"] == "diagram":
            return _diagram_point(cfg, spec["L"], cells, xs, ys, master)
        return _transfer_point(cfg, spec["L"], xs, ys, master)

    def short(spec):  # the self-check's transfer training: a few steps (module docstring)
        if spec["part"] == "diagram":
            return point(spec)
        return _transfer_point({**cfg, "transfer_steps": SELF_CHECK_STEPS}, spec["L"], xs, ys,
                               master)  # fmt: skip

    points = runner.run_points(
        specs, point, describe=lambda s: f"{s['part']} L={s['L']}", variant=short,
        route=f"op by op (jax.disable_jit), the transfer part with {SELF_CHECK_STEPS} steps "
        "compiled and op by op",
    )  # fmt: skip
    diagram = _classify(cfg, cells, [p for p in points if p["part"] == "diagram"])
    transfer = _transfer(cfg, [p for p in points if p["part"] == "transfer"])
    agreement = classified_agreement(diagram)
    runner.finish(
        {
            "points": points,
            "cells": diagram,
            "agreement": agreement,
            "regimes_measured": sorted({c["regime"] for c in diagram if c["regime"]}),
            "transfer": transfer,
            "fits": [f for c in diagram for f in c["fits"].values()],
            "reference": {"method": "predicted exponents of the first-order analysis "
                          "(meanfield.diagnostics.regimes.predicted_exponents)"},
            "headline": _headline(agreement, transfer),
        },
        plot=plot,
    )  # fmt: skip


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    transfer_points = [p for p in results["points"] if p["part"] == "transfer"]
    draw_figures(
        Path(out), results["config"], results["cells"], results["transfer"], transfer_points
    )
    diagram_points = [p for p in results["points"] if p["part"] == "diagram"]
    diagnostics_figure(Path(out), results["config"], diagram_points)


def _headline(agreement, transfer) -> list[str]:
    lines = [
        f"cells classified as predicted: {agreement['agree']} of {agreement['judged']} judged "
        f"off the learning lines, {agreement['on_learning_line_agree_judged']} of "
        f"{agreement['on_learning_line_judged']} on them (the lazy ODE on λ = 2γ − 1, local "
        f"feature learning on λ = γ); not judged: {agreement['near_boundary']} within the "
        f"classifier's resolution of a boundary, {agreement['ambiguous']} ambiguous"
    ]
    for t in transfer:
        lines.append(f"lr* drift exponent, {t['parametrization']}: {drift_text(t)}")
    return lines


def _diagram_point(cfg, L, cells, xs, ys, master):
    S = cfg["seeds"]
    keys = jnp.stack([jr.fold_in(jr.fold_in(master, 2 + L), s) for _ in cells for s in range(S)])
    gammas = jnp.asarray([g for g, _ in cells for _ in range(S)])
    lams = jnp.asarray([lam for _, lam in cells for _ in range(S)])
    batch = nets_per_batch(diagram_net_bytes(cfg, L), len(keys))
    program = _diagram_program(L, cfg["d"], cfg["M"], cfg["activation"], cfg["steps"], batch)
    out = {k: np.asarray(v) for k, v in program(keys, gammas, lams, cfg["lr0"], xs, ys).items()}
    inputs = float(np.max(np.linalg.norm(np.asarray(xs), axis=-1)))
    recs = []
    for i, (g, lam) in enumerate(cells):
        sl = slice(i * S, (i + 1) * S)
        rec = {"gamma": g, "lambda": lam, "exploded": int(out["exploded"][sl].sum())}
        for name in (*QUANTITIES, "parameter_movement", "loss_ratio"):
            vals = np.where(out["exploded"][sl], np.nan, out[name][sl])
            rec[name] = regimes_diagnostics.nan_to_none(vals)
        # movements after a few steps are differences (`self_check.of_terms`): of the
        # predictors f = h^L, of size about ‖x‖(1 + the forward deviation); the others are
        # of terms normalised by the initial features, parameters or inputs (scale 1)
        predictor = inputs * (1 + out["forward_deviation"][sl])
        rec["predictor_movement"] = of_terms(rec["predictor_movement"], predictor)
        for name in ("local_change", "global_change", "parameter_movement", "forward_deviation"):
            rec[name] = of_terms(rec[name], 1.0)
        recs.append(rec)
    return {"cells": recs}


def _classify(cfg, cells, points):
    """Per (γ, λ): the exponents against L with intervals, the measured regime, the
    predicted one."""
    Ls = [p["L"] for p in points]
    largest = max(Ls)
    out = []
    for i, (g, lam) in enumerate(cells):
        rows = [p["cells"][i] for p in points]
        fits, exps = {}, {}
        for name, short in QUANTITIES.items():
            samples = [[v for v in r[name] if v is not None] for r in rows]
            fit = fit_loglog(
                Ls,
                samples,
                quantity=name,
                against="L",
                fixed={"gamma": g, "lambda": lam},
                seed=cfg["seed"],
                theory=regimes_diagnostics.predicted_exponents(g, lam).get(short),
            )
            fits[name] = fit
            exps[short] = {"value": fit["slope"], "ci": fit["ci95"]}
        exploded_top = sum(r["exploded"] for r, L in zip(rows, Ls, strict=True) if L == largest)
        measured = regimes_diagnostics.classify(exps, exploded=exploded_top > 0)
        # the prediction at the classifier's resolution: a local exponent within
        # EXPONENT_TOL of 0 (the learning line at 1 - tol < γ < 1) reads as local learning
        predicted, distance = regimes_diagnostics.predicted_regime(
            g, lam, margin=regimes_diagnostics.EXPONENT_TOL
        )
        out.append(
            {
                "gamma": g,
                "lambda": lam,
                "regime": measured["regime"],
                "ambiguous": measured["ambiguous"],
                "ambiguous_decisions": measured.get("ambiguous_decisions", []),
                "exploded": [r["exploded"] for r in rows],
                "exponents": {k: v["value"] for k, v in exps.items()},
                "exponents_ci95": {k: v["ci"] for k, v in exps.items()},
                "predicted_exponents": regimes_diagnostics.predicted_exponents(g, lam),
                "predicted_regime": predicted,
                "distance_to_boundary": distance,
                "fits": fits,
            }
        )
    return out


def _transfer_point(cfg, L, xs, ys, master):
    lrs, S = cfg["transfer_lrs"], cfg["transfer_seeds"]
    combos = [(name, lr, s) for name in PARAMETRIZATIONS for lr in lrs for s in range(S)]
    keys = jnp.stack([jr.fold_in(jr.fold_in(master, 10**6 + L), s) for _, _, s in combos])
    gammas = jnp.asarray([PARAMETRIZATIONS[n][0] for n, _, _ in combos])
    lams = jnp.asarray([PARAMETRIZATIONS[n][1] for n, _, _ in combos])
    rates = jnp.asarray([lr for _, lr, _ in combos])
    batch = nets_per_batch(transfer_net_bytes(cfg, L), len(keys))
    program = _transfer_program(
        L, cfg["d"], cfg["M"], cfg["activation"], cfg["transfer_steps"], batch
    )
    out = {k: np.asarray(v) for k, v in program(keys, gammas, lams, rates, xs, ys).items()}
    rec = {}
    for name in PARAMETRIZATIONS:
        idx = [i for i, c in enumerate(combos) if c[0] == name]
        final = out["final_loss"][idx].reshape(len(lrs), S)
        initial = out["initial_loss"][idx].reshape(len(lrs), S)
        rec[name] = {
            "final_loss": [regimes_diagnostics.nan_to_none(row) for row in final],
            "initial_loss": [regimes_diagnostics.nan_to_none(row) for row in initial],
        }
    return {"parametrizations": rec}


def _log_losses(entry) -> np.ndarray:
    """(lrs, seeds) log final loss; a diverged run counts as its initial loss."""
    final = np.array([[np.nan if v is None else v for v in row] for row in entry["final_loss"]])
    initial = np.array([[np.nan if v is None else v for v in row] for row in entry["initial_loss"]])
    final = np.where(np.isfinite(final), np.minimum(final, initial), initial)
    return np.log(final)


def _transfer(cfg, points):
    if not points:
        return []
    lrs = cfg["transfer_lrs"]
    Ls = [p["L"] for p in points]
    out = []
    for name, (g, lam) in PARAMETRIZATIONS.items():
        curves = [_log_losses(p["parametrizations"][name]) for p in points]  # (lrs, S) each
        found = drift(lrs, Ls, curves, seed=cfg["seed"])
        rec = {
            "parametrization": name,
            "gamma": g,
            "lambda": lam,
            "L": Ls,
            "optimal_lr": found["optimal_lr"],
            "loss_curves": [c.mean(axis=1).tolist() for c in curves],
            "drift_exponent": found["drift_exponent"],
            "drift_ci95": found["drift_ci95"],
        }
        for key in ("interval", "drift_se", "bootstrap_unresolved", "reason"):
            if key in found:
                rec[key] = found[key]
        rec["unresolved_L"] = found["unresolved"]
        out.append(rec)
    return out
