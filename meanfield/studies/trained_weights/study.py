"""`meanfield study trained-weights`: the weights along depth after training, and test accuracy
over (β, H) on a real data set (Marion, Fermanian, Biau and Vert, "Scaling ResNets in the
large-depth regime", the part "beyond initialisation").

Res-1 networks `h_k = h_{k-1} + L^{-β} V_k σ(h_{k-1})` with an embedding and a readout
(`meanfield.models.res1`), every part trained by minibatch Adam (or SGD) on the data set
(`--data PATH`: MNIST or CIFAR-10 files, see `meanfield.io.datasets.load_images`; default
scikit-learn's bundled handwritten digits, offline), from three initialisations of the
residual weights V_1..V_L (`meanfield.laws.depth`): i.i.d. Gaussian, smooth (a Gaussian process
in k/L) and the increments of a fractional Brownian motion of Hurst index H. Each
(initialisation, H, β) cell trains `--seeds` networks (vmapped, one compiled program for all
the cells of an initialisation) and records

* the test and training accuracy (`test_accuracy`, `train_accuracy`: mean, spread, values
  over the draws that did not explode; `exploded`: how many did);
* the regularity of the weights along depth, before and after training: the Hurst/Hölder
  index of `k/L -> V_k` from the variogram of its increments over lags
  (`meanfield.diagnostics.regularity.estimate_hurst`, every entry of V of every draw a path, pooled,
  with a bootstrap interval over the paths): `regularity_before`, `regularity_after` (the
  path V_k itself: i.i.d. and fBm weights, being increments, read ≈ 0, smooth ones ≈ 1),
  `regularity_cumulative_before`, `..._after` (the partial sums Σ_{j≤k} V_j: they read the
  index of the path whose increments the weights are: 1/2 for i.i.d., H for fBm, 1 for
  smooth), and `regularity_update` (the change V_after − V_before that training made);
* one entry of V_k against k/L before and after training (`example_path`), for the figure
  of the source.

`regularity_statement` summarises, from these numbers, how the initialisation and β set
the regularity of the trained weights. Figures: `weights_along_depth.png` (one entry of V_k
against k/L before and after, per initialisation), `accuracy_heatmap.png` (test accuracy
over (β, H), the i.i.d. and smooth rows beside, explosions marked), `regularity.png` (the
regularity of the partial sums and of V_k itself after against before, and of the update
against β).
"""

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ..._eager import traced_op_by_op
from ...diagnostics.regularity import estimate_hurst
from ...harness.args import check_activation, override
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...laws.depth import FractionalBrownianLaw, IIDGaussianLaw, SmoothGPLaw
from ...models import res1
from ...runtime.errors import StudyInputError
from ...runtime.sharding import disable_jit_active
from ...stats.fits import line_fit, summarize
from ...training import res1 as res1_training
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    INITS as INITS,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .plot import draw_figures, format_cell
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

SELF_CHECK_STEPS = 2  # the self-check's training (module docstring of runner.run_points)
LENGTH_SCALE = 0.2  # the smooth law's (SmoothGPLaw's default)


def configure(args) -> dict:
    """The configuration from the options and the data set (`--data`, read here: its
    description and its files' sha256 kept in the configuration), every value refused
    in one line naming its option."""
    preset = PRESETS[args.preset]
    cfg = override(
        dict(preset),
        args,
        ("L", "d", "betas", "hursts", "steps", "batch_size", "lr", "seeds"),
    )
    if args.inits is not None:
        inits = [s.strip() for s in args.inits.split(",")]
        if not inits or any(i not in INITS for i in inits) or len(set(inits)) != len(inits):
            raise StudyInputError(
                f"--inits: need distinct names among {', '.join(INITS)}, got {args.inits!r}"
            )
        cfg["inits"] = inits
    if args.hursts is not None and "fbm" not in cfg["inits"]:  # said, not ignored
        raise StudyInputError(f"--hursts: set the fBm init, which --inits {args.inits} leaves out")
    check_activation(args.activation)
    if any(b < 0 or b > 4 for b in cfg["betas"]):
        raise StudyInputError(f"--betas: need values in [0, 4], got {cfg['betas']}")
    if any(not 0 < h < 1 for h in cfg["hursts"]):
        raise StudyInputError(f"--hursts: need values in (0, 1), got {cfg['hursts']}")
    if cfg["L"] < 32:
        raise StudyInputError(
            f"--L: the regularity needs at least 32 layers (three dyadic lags), got {cfg['L']}"
        )
    if "fbm" in cfg["inits"] and 4096 % cfg["L"]:
        raise StudyInputError(
            f"--L: the fBm weights are read off a grid of 4096 steps; L must divide it, "
            f"got {cfg['L']}"
        )
    if cfg["lr"] > 1:
        raise StudyInputError(f"--lr: at most 1, got {cfg['lr']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 networks per cell, got {cfg['seeds']}")
    cfg.update(
        optimizer=args.optimizer,
        activation=args.activation,
        data=args.data,
        seed=args.seed,
        x64=args.x64,
        preset=args.preset,
    )
    ds = _data(cfg)
    cfg["data_description"] = str(ds)
    if ds.sha256 is not None:  # the files' bytes: a --resume on other data is refused
        cfg["data_sha256"] = ds.sha256
    if cfg["batch_size"] > len(ds.y_train):
        raise StudyInputError(
            f"--batch-size: {cfg['batch_size']} exceeds the {len(ds.y_train)} training images"
        )
    return cfg


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`; the launcher checks it before `run`) of the rows,
    at the data set's own sizes: the `len(betas) × seeds` networks of a row train
    together (vmapped): per network its weights, Adam's moments, gradients and the best
    and previous weights (6 copies), the activations of a minibatch, its own permuted
    copy of the training set, the test pass and the loss of every step; the work of
    every step's minibatch forward and backward pass and permutation of the training
    set."""
    import math

    from ...harness.args import PYTHON_STEP, Cost

    data = _data(cfg)  # read again (tens of ms for the digits): the sizes
    L, d, T, B = cfg["L"], cfg["d"], cfg["steps"], cfg["batch_size"]
    n, n_test = len(data.y_train), len(data.y_test)
    d_in, classes = data.n_features, data.n_classes
    width = 8 if cfg["x64"] else 4
    cells = len(cfg["betas"]) * cfg["seeds"]
    rows = len(_rows(cfg))
    weights = L * d * d + d * (d_in + classes)
    per_net = width * (6 * weights + 3 * B * L * d + n * (d_in + 1) + 2 * n_test * d + T)
    per_step = 6 * B * weights + 5 * n * max(1.0, math.log2(n))
    per_net_work = T * per_step + 2 * n_test * weights + 20 * L * d * d * max(1.0, math.log2(L))
    return [
        Cost(
            "--L/--d/--seeds/--betas/--batch-size/--steps/--inits/--hursts",
            "the networks of one row",
            memory=cells * per_net + 4 * width * cells * L * d * d,
            work=rows * (cells * per_net_work + PYTHON_STEP),
            elements=cells * max(L * d * d, n * d_in, T, B * L * d),
            array="a row's weights, data copies or losses, (betas × seeds, L, d, d), "
            "(betas × seeds, n, features) or (betas × seeds, steps)",
            memory_flags="--L/--d/--seeds/--betas/--batch-size/--steps",
        )
    ]


def _data(cfg):
    from ...io.datasets import load_digits, load_images

    key = jr.fold_in(jr.key(cfg["seed"]), 7)
    try:
        return load_digits(key) if cfg["data"] is None else load_images(cfg["data"], key=key)
    except (ValueError, OSError) as err:
        raise StudyInputError(f"--data: {err}") from None


def _rows(cfg) -> list[dict]:
    """One point per initialisation row: iid, smooth, and fBm at each H."""
    rows = []
    for init in cfg["inits"]:
        if init == "fbm":
            rows += [{"init": "fbm", "hurst": h} for h in cfg["hursts"]]
        else:
            rows.append({"init": init, "hurst": None})
    return rows


def _law(init, hurst, d):
    if init == "iid":
        return IIDGaussianLaw(d)
    if init == "smooth":
        return SmoothGPLaw(d, length_scale=LENGTH_SCALE)
    return FractionalBrownianLaw(d, hurst, 4096)


def run(args, cfg):
    ds = _data(cfg)  # the data set `configure` read, read again (the same split: its seed)
    if ds.sha256 != cfg.get("data_sha256"):
        raise StudyInputError("--data: the files changed since the study was configured")
    runner = start_study(args, cfg)
    data = tuple(jnp.asarray(a) for a in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
    master = jr.key(cfg["seed"])
    specs = _rows(cfg)
    short = {**cfg, "steps": SELF_CHECK_STEPS}
    checked: dict = {}  # the self-check's row: its networks, drawn once for both routes

    def variant(spec):
        key = (spec["init"], spec["hurst"])
        if key not in checked:  # drawn at the first call (the compiled one), for both
            checked.clear()
            checked[key] = _drawn(cfg, spec, ds.n_features, ds.n_classes, master)
        return _without_accuracies(
            _row(short, spec, data, ds.n_features, ds.n_classes, master, checked[key])
        )

    points = runner.run_points(
        specs,
        lambda spec: _row(cfg, spec, data, ds.n_features, ds.n_classes, master),
        describe=lambda s: s["init"] + ("" if s["hurst"] is None else f" H={s['hurst']}"),
        # round-off grows chaotically along hundreds of Adam steps: the check trains the
        # row for a few steps, compiled and op by op, from the same initial networks
        # (drawn once, as the study draws them: eagerly, outside the compiled program).
        # Drawn again op by op, the float32 draws part from XLA's by up to 4e-6 (NumPy's
        # erf_inv is SciPy's, XLA's a polynomial of its own: up to 63 ulps), which 64
        # layers and two Adam steps grow to 1.7e-3 of the weights' update; from the same
        # draws the routes agree to 5e-6 or better (issue 78): the check is of the training
        variant=variant,
        route=f"its row's networks trained {SELF_CHECK_STEPS} steps, compiled and op by op "
        "(the training program's equations by NumPy, its matrix products by XLA one by "
        "one), from the same draws, without its accuracies",
    )
    cells_out = [c for p in points for c in p["cells"]]
    warning = exploded_warning(cells_out)
    if warning:
        runner.warn(warning)
    statement = _statement(cfg, cells_out)
    best = max((c for c in cells_out if c["test_accuracy"]["mean"] is not None),
               key=lambda c: c["test_accuracy"]["mean"], default=None)  # fmt: skip
    runner.finish(
        {
            "points": points,
            "cells": cells_out,
            "best_test_accuracy": None if best is None else {
                "value": best["test_accuracy"]["mean"],
                **{k: best[k] for k in ("init", "hurst", "beta")},
            },
            "regularity_statement": statement,
            "data": cfg["data_description"],
            "fits": [],
            "reference": {"method": "none: measured quantities (accuracies, regularity)"},
            "headline": [
                "best test accuracy: "
                + ("none" if best is None else f"{best['test_accuracy']['mean']:.3f} "
                   f"({best['init']}, H={best['hurst']}, beta={best['beta']:g})"),
                statement["conclusion"],
            ],
        },
        plot=plot,
    )  # fmt: skip


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    draw_figures(Path(out), results["config"], results["cells"])


_PROGRAMS: dict = {}


def _program(cfg, d_in, classes):
    """One compiled program: train a batch of networks (vmapped over models and keys)."""
    key = (cfg["L"], cfg["d"], d_in, classes, cfg["steps"], cfg["batch_size"],
           cfg["optimizer"], cfg["lr"], cfg["activation"])  # fmt: skip
    if key not in _PROGRAMS:

        def train(model, k, data):
            out = res1_training.train_res1(
                model, data, key=k, steps=cfg["steps"], batch_size=cfg["batch_size"],
                optimizer=cfg["optimizer"], lr=cfg["lr"],
            )  # fmt: skip
            return out.model.V, out.test_accuracy, out.train_accuracy, out.exploded, out.losses

        _PROGRAMS[key] = jax.jit(jax.vmap(train, in_axes=(0, 0, None)))
    return _PROGRAMS[key]


def _trained(program, models, keys, data):
    """`program(models, keys, data)`; in the self-check's op-by-op route, its traced
    program evaluated equation by equation (`_eager.traced_op_by_op`: NumPy's kernels,
    not the Python of equinox's modules and optax again), its matrix products compiled
    one by one by XLA: in float32, NumPy's BLAS sums them in another order, and where the
    weights are rough (fBm, H = 0.1) two Adam steps grow that to 7.4e-3 of the update
    (the bound 1e-2), against 2.2e-7 with XLA's products (issue 78)."""
    if disable_jit_active():
        return traced_op_by_op(program, models, keys, data, compiled=("dot_general",))
    return program(models, keys, data)


def _without_accuracies(point: dict) -> dict:
    """The self-check's point without its accuracies: counts of argmaxes, which round-off
    flips at an input on a decision boundary (one training image of 1,438 flipped between
    XLA's fused and one-by-one operations after two steps: 5.5e-3 of the accuracy)."""
    for cell in point["cells"]:
        cell.pop("test_accuracy")
        cell.pop("train_accuracy")
    return point


def _drawn(cfg, spec, d_in, classes, master) -> list:
    """The `seeds` networks of one initialisation row: the same initial weights for every β
    of the row (seed s), drawn once (each draw an fBm path of L·d² coordinates), the scale
    L^-β set per β (`_row`)."""
    law = _law(spec["init"], spec["hurst"], cfg["d"])
    row_key = _row_key(spec, master)
    return [
        res1.Res1Classifier.sample(
            jr.fold_in(row_key, s), law, L=cfg["L"], d_in=d_in, classes=classes,
            beta=cfg["betas"][0], activation=cfg["activation"],
        )
        for s in range(cfg["seeds"])
    ]  # fmt: skip


def _row_key(spec, master):
    return jr.fold_in(master, INITS.index(spec["init"]) * 1000 + round(1000 * (spec["hurst"] or 0)))


def _row(cfg, spec, data, d_in, classes, master, drawn=None):
    """Every β of one initialisation row, `seeds` networks each, trained together: from
    `drawn` (`_drawn`'s networks) where given, else drawn here."""
    init, hurst = spec["init"], spec["hurst"]
    row_key = _row_key(spec, master)
    models, keys, labels = [], [], []
    # the minibatch order and validation split differ between cells (the key folds in
    # β's index)
    if drawn is None:
        drawn = _drawn(cfg, spec, d_in, classes, master)
    for i, beta in enumerate(cfg["betas"]):
        for s in range(cfg["seeds"]):
            scale = jnp.asarray(float(cfg["L"]) ** -beta, drawn[s].V.dtype)
            models.append(eqx.tree_at(lambda m: m.scale, drawn[s], scale))
            keys.append(jr.fold_in(jr.fold_in(row_key, 10**6 + s), i))
            labels.append((beta, s))
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *models)
    trained = _trained(_program(cfg, d_in, classes), stacked, jnp.stack(keys), data)
    V_after, test_acc, train_acc, exploded, losses = (np.asarray(a) for a in trained)
    V_before = np.asarray(stacked.V)
    cells = []
    for beta in cfg["betas"]:
        idx = [j for j, (b, _) in enumerate(labels) if b == beta]
        ok = [j for j in idx if not exploded[j]]
        cell = {
            "init": init,
            "hurst": hurst,
            "beta": beta,
            "draws": len(idx),
            "exploded": int(sum(bool(exploded[j]) for j in idx)),
            "test_accuracy": summarize([float(test_acc[j]) for j in ok]),
            "train_accuracy": summarize([float(train_acc[j]) for j in ok]),
            "final_loss": summarize([float(losses[j][-1]) for j in ok]),
        }
        before = V_before[idx]  # (seeds, L, d, d)
        cell["regularity_before"] = _hurst(before, cfg)
        cell["regularity_cumulative_before"] = _hurst(before, cfg, cumulative=True)
        if ok:
            after = V_after[ok]
            cell["regularity_after"] = _hurst(after, cfg)
            cell["regularity_cumulative_after"] = _hurst(after, cfg, cumulative=True)
            cell["regularity_update"] = _hurst(after - V_before[ok], cfg)
            update = after - V_before[ok]
            cell["update_size"] = float(np.sqrt(np.mean(update**2)))
            cell["init_size"] = float(np.sqrt(np.mean(V_before[ok] ** 2)))
            # a difference of weights (`self_check.of_terms`): of the initial weights' size
            cell["update_size"] = of_terms(cell["update_size"], cell["init_size"])
            j = ok[0]
            cell["example_path"] = {
                "entry": [0, 0],
                "before": V_before[j, :, 0, 0].tolist(),
                "after": V_after[j, :, 0, 0].tolist(),
            }
        # the regularities are slopes H in [0, 1] of a log-log fit (the variogram's), as
        # small as 1e-3 for i.i.d. weights: their round-off is relative to 1, not to H
        # (`self_check.of_terms`)
        for name in [k for k in cell if k.startswith("regularity_")]:
            cell[name] = of_terms(cell[name], 1.0)
        cells.append(cell)
    return {"cells": cells}


def exploded_warning(cells) -> str | None:
    """The warning naming every cell (init, H, β) where trained networks exploded: they
    are left out of its accuracies, losses and trained regularity."""
    hit = [c for c in cells if c.get("exploded")]
    if not hit:
        return None
    where = "; ".join(
        f"{c['init']}"
        + ("" if c["hurst"] is None else f" H={c['hurst']}")
        + f" beta={c['beta']:g}: {c['exploded']} of {c['draws']}"
        for c in hit
    )
    return (f"networks exploded in training in {len(hit)} cell(s), left out of their "
            f"accuracies, losses and trained regularity: {where}")  # fmt: skip


def _hurst(V, cfg, cumulative=False) -> dict | None:
    """The pooled regularity of every entry of every draw as a path along depth."""
    paths = np.moveaxis(np.asarray(V, float), 1, 0)  # (L, seeds, d, d)
    if not np.all(np.isfinite(paths)):
        return None
    try:
        # the networks are the independent units: a network's d² entries move together in
        # training, so the interval resamples networks (Student-t over their estimates)
        est = estimate_hurst(paths, axis=0, cumulative=cumulative, seed=cfg["seed"], unit_axis=1)
    except ValueError as err:  # a constant path (no update), ...
        return {"hurst": None, "reason": str(err)}
    out = est.to_dict()
    out = {k: out[k] for k in ("hurst", "interval", "interval_method", "per_entry_mean",
                               "per_entry_std", "lags", "n_paths", "cumulative")}  # fmt: skip
    out["networks"] = int(paths.shape[1])
    # each network's own pooled estimate: the spread between the independent units
    out["per_network"] = [
        estimate_hurst(paths[:, i], axis=0, cumulative=cumulative, seed=cfg["seed"]).hurst
        for i in range(paths.shape[1])
    ]
    return out


def _value(cell, name):
    r = cell.get(name)
    return None if not r or r.get("hurst") is None else r["hurst"]


def _statement(cfg, cells) -> dict:
    """How the initialisation and β set the trained weights' regularity, from the numbers:
    per initialisation, the regularity of V_k (and of its partial sums) before and after
    training at each β, and the regularity of the update against β (its slope)."""
    lines = []
    by_init: dict = {}
    for c in cells:
        name = c["init"] + ("" if c["hurst"] is None else f"(H={c['hurst']:g})")
        by_init.setdefault(name, []).append(c)
    summary = {}
    for name, cs in by_init.items():
        cs = sorted(cs, key=lambda c: c["beta"])
        entry = {
            "beta": [c["beta"] for c in cs],
            "before": [_value(c, "regularity_before") for c in cs],
            "after": [_value(c, "regularity_after") for c in cs],
            "cumulative_before": [_value(c, "regularity_cumulative_before") for c in cs],
            "cumulative_after": [_value(c, "regularity_cumulative_after") for c in cs],
            "update": [_value(c, "regularity_update") for c in cs],
            "update_to_init_size": [
                None if "update_size" not in c else c["update_size"] / c["init_size"] for c in cs
            ],
        }
        summary[name] = entry
        parts = [
            f"β={c['beta']:g}: V {format_cell(c.get('regularity_before'))} -> "
            f"{format_cell(c.get('regularity_after'))}, partial sums "
            f"{format_cell(c.get('regularity_cumulative_before'))} -> "
            f"{format_cell(c.get('regularity_cumulative_after'))}, update "
            f"{format_cell(c.get('regularity_update'))}"
            for c in cs
        ]
        lines.append(f"{name}: " + "; ".join(parts))
        upd = [(b, u) for b, u in zip(entry["beta"], entry["update"], strict=True) if u is not None]
        if len(upd) >= 2:
            entry["update_slope_in_beta"] = line_fit([b for b, _ in upd], [u for _, u in upd])[0]
            entry["update_rises_with_beta"] = all(
                b2[1] > b1[1] for b1, b2 in zip(upd, upd[1:], strict=False)
            )
            entry["update_falls_with_beta"] = all(
                b2[1] < b1[1] for b1, b2 in zip(upd, upd[1:], strict=False)
            )
    conclusion, findings = regularity_conclusion(summary, cfg["betas"])
    return {"per_init": summary, "lines": lines, "conclusion": conclusion, "findings": findings}


def regularity_conclusion(summary: dict, betas) -> tuple[str, dict]:
    """The study's conclusion, every clause computed from the numbers (and each able to
    say the opposite): how the update's Hurst index moves with β over the initialisations
    (rises for all, falls for all, or neither, by the sign of each one's steps), whether
    the starting regularity of the weights' path differs between initialisations, and
    whether training moves it further at the largest β than at the smallest.

    **Returns:** `(text, findings)`, `findings` the decisions themselves."""
    with_trend = {n: e for n, e in summary.items() if "update_slope_in_beta" in e}

    def shift(e, i):  # the change of the partial sums' index at the i-th β
        b, a = e["cumulative_before"][i], e["cumulative_after"][i]
        return None if b is None or a is None else a - b

    lo = [x for e in summary.values() if (x := shift(e, 0)) is not None]
    hi = [x for e in summary.values() if (x := shift(e, -1)) is not None]
    starts = [e["cumulative_before"][0] for e in summary.values()]
    starts = [x for x in starts if x is not None]
    if not with_trend or not lo or not hi:
        return "no update regularity measured", {}
    n, total = len(with_trend), len(summary)
    rises = [k for k, e in with_trend.items() if e["update_rises_with_beta"]]
    falls = [k for k, e in with_trend.items() if e["update_falls_with_beta"]]
    slopes = [e["update_slope_in_beta"] for e in with_trend.values()]
    span = f"(slope in β {min(slopes):.2f} to {max(slopes):.2f})"
    if len(rises) == n:
        trend = "rises"
        first = (
            f"The change training makes to V along depth is smoother the larger β: its Hurst "
            f"index rises with β for all {n} initialisations {span}."
        )
    elif len(falls) == n:
        trend = "falls"
        first = (
            f"The change training makes to V along depth is rougher the larger β: its Hurst "
            f"index falls with β for all {n} initialisations {span}."
        )
    else:
        trend = "mixed"
        first = (
            f"The regularity of the change training makes to V shows no common trend in β: "
            f"its Hurst index rises with β for {len(rises)}, falls for {len(falls)} of {n} "
            f"initialisations {span}."
        )
    if n < total:
        first += f" ({total - n} initialisation(s) without an update index at two β.)"
    # the starting regularity differs between initialisations when its range across them
    # exceeds the largest shift training makes at the smallest β
    start_range = max(starts) - min(starts) if len(starts) >= 2 else 0.0
    starts_differ = len(starts) >= 2 and start_range > max(abs(x) for x in lo)
    moves_more = float(np.median(np.abs(hi))) > float(np.median(np.abs(lo)))
    second = (
        f"The index of the weights' path (partial sums) moves by {min(lo):+.2f} to "
        f"{max(lo):+.2f} at β = {betas[0]:g} and by {min(hi):+.2f} to {max(hi):+.2f} at "
        f"β = {betas[-1]:g} over the initialisations"
    )
    if starts_differ and moves_more:
        second += (
            f": the initialisation sets the starting regularity (its index spans "
            f"{start_range:.2f} across them), β how far training moves it."
        )
    elif starts_differ:
        second += (
            f": the initialisation sets the starting regularity (its index spans "
            f"{start_range:.2f} across them); training does not move it further at the "
            "largest β."
        )
    elif moves_more:
        second += ": training moves it further at the largest β, from a starting regularity "
        second += "the initialisations share."
    else:
        second += ": neither the initialisation nor β sets it apart."
    findings = {
        "update_trend_in_beta": trend,
        "rises": len(rises),
        "falls": len(falls),
        "judged": n,
        "starting_regularity_differs": bool(starts_differ),
        "moves_more_at_largest_beta": bool(moves_more),
    }
    return f"{first} {second}", findings
