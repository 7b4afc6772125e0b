"""`meanfield study coord-check`: the coordinate check of a Transformer, or of a ResNet
of the user's own unit block, under each parametrisation, across width and across depth
(Mathematics §11; issue 49).

**A user's own block** (`--block FILE.py:NAME --law FILE.py:NAME`, or `--model resnet`
for the built-in 2LP unit): ResNets of those units under the tables of
`meanfield.parametrisation.RESNET_PARAMETRISATIONS`, trained by gradient descent; see
`meanfield.studies.coord_check.resnet`. The fits, verdicts, headline and figures below
are the same for both models, over each model's quantities.

**A Transformer.** For every parametrisation table (`--parametrisations`: `standard`,
`mup`, `depth-mup`, `completep`, their SGD versions `standard-sgd`, `mup-sgd`,
`depth-mup-sgd`, `completep-sgd`, or a user's `Parametrisation` as `MODULE:NAME` /
`FILE.py:NAME`), pre-LN Transformers (`meanfield.models.transformer`) are trained
`--steps` steps of the table's optimiser, Adam or SGD (the table's per-group learning
rate, ε and weight decay; `--lr` is the base learning rate)
on character-level text, at every width of `--widths` (depth `--depth`) and every depth
of `--depths` (width `--width`), `--seeds` independent draws each (a network and its
batches). At every step the coordinates of `meanfield.diagnostics.coord_check` are
measured on a held-out batch of the validation text: the residual stream's size, its
change since initialisation, and every matrix's update applied to its input, per layer.

**Fits.** For each table and each line (width, depth), every quantity's size after the
last step (mean over layers) is fitted in log–log against the size over the draws
(`fit_loglog`: a studentized bootstrap over draws). Beside each slope: the slope the
table predicts (`predicted_slopes`) and two verdicts from the interval (`band_verdict`,
tolerance ±0.1): `flat` (the interval inside ±0.1: "inside"; outside it: "outside";
else "undecided") and `as_predicted` (the same about the prediction). A table
**claims** a line when it predicts every activation and change flat there (μP and the
depth tables claim width, depth-μP and CompleteP claim depth); its headline says how
many of its activation and change quantities are flat, and how many lie 0.4 or more
from flat.

**The base model.** At the base size (`--base-width`, `--base-depth`) every table's
factors are 1, so μP, depth-μP and CompleteP (and their SGD versions) give the same
network; SP differs from them in the attention scale only, `d_head^{-1/2}` against
`d_head^{-1}` (Mathematics §11.4). The base standard deviation of the drawn matrices is 0.02
(`--init-std`), that of GPT-2 and of the tables' reference implementation: the branches
at initialisation are then small against the embedding. With a larger one (the
1/fan-in `--init-std` `base_width^{-1/2}`, say) the branches dominate the stream at
initialisation, and under α = 1 their zero-mean sum averages out as `L^{-1/2}`: the
stream then shrinks towards its embedding as the network deepens, flat only once the
embedding dominates (measured at the quick preset with `--init-std 0.177`: slopes −0.2
to −0.4 over L = 2 … 32).

**Precision.** float32 by default (`--x64` for float64): the quantities measured are
sizes of order 1e-3 or more, compared across sizes to a few percent; float32's
round-off (1e-7 relative per operation, 1e-5 after a training of this length) is far
below.
"""

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ...diagnostics import coord_check as coord_check_diagnostics
from ...diagnostics import unit_coord_check
from ...harness.runner import start_study
from ...io.text import batches
from ...parametrisation import Parametrisation, from_table, resnet_from_table
from ...runtime.errors import StudyInputError
from ...training.transformer import optimizer, train
from ..shared.transformer_options import (
    MODEL_OPTIONS,
    DrawnAndTrained,
    check_model_options,
    corpus,
    data_record,
    draws_program,
    model,
    run_sized_points,
    study_text,
    table_names,
    tables,
    training_cost,
)
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from . import resnet as coord_check_resnet
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    MODELS as MODELS,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

SELF_CHECK_STEPS = 2  # the self-check trains its point this many steps (compiled and op by op)
EVAL_BATCH = 8  # sequences of the held-out batch the coordinates are measured on
OFF = 0.4  # a quantity this far or more from flat is reported as off
SHARED = ("widths", "depth", "depths", "width", "steps", "seeds", "lr")
TRANSFORMER_ONLY = {**{o: "--" + o.replace("_", "-") for o in MODEL_OPTIONS},
                    "init_std": "--init-std", "data": "--data", "eps": "--eps",
                    "weight_decay": "--weight-decay"}  # fmt: skip
RESNET_ONLY = {"block": "--block", "law": "--law", "d": "--d", "inputs": "--inputs"}


def _model(args) -> str:
    """The network checked: `--model`, else a ResNet when `--block`/`--law` is given."""
    user = [f for n, f in (("block", "--block"), ("law", "--law")) if getattr(args, n, None)]
    kind = getattr(args, "model", None) or ("resnet" if user else "transformer")
    given = TRANSFORMER_ONLY if kind == "resnet" else RESNET_ONLY
    wrong = [flag for name, flag in given.items() if getattr(args, name, None) is not None]
    if wrong:
        other = "a Transformer's" if kind == "resnet" else "a ResNet of unit blocks'"
        raise StudyInputError(
            f"{'/'.join(wrong)}: {other} option; this check runs a {kind} "
            + ("(--block/--law run a ResNet of your units: drop --model transformer)"
               if kind == "transformer" and user else "(set --model)")
        )  # fmt: skip
    return kind


def configure(args) -> dict:
    """The configuration from the options: the model's preset and options, every value
    checked (one line naming the option), the tables recorded, and the text read (a
    Transformer) or the block and law tried (a ResNet)."""
    from ...harness.args import override

    kind = _model(args)
    presets = coord_check_resnet.PRESETS if kind == "resnet" else PRESETS
    options = (*SHARED, *(coord_check_resnet.OPTIONS if kind == "resnet" else MODEL_OPTIONS))
    cfg = override(dict(presets[args.preset]), args, options)
    if args.parametrisations is not None:
        cfg["parametrisations"] = table_names(args.parametrisations, "--parametrisations")
    for flag, key in (("--widths", "widths"), ("--depths", "depths")):
        if len(cfg[key]) < 3:
            raise StudyInputError(f"{flag}: a slope needs at least three sizes, got {cfg[key]}")
    if cfg["seeds"] < 2:
        raise StudyInputError("--seeds: an interval needs at least 2 draws")
    if cfg["lr"] > 10:
        raise StudyInputError(f"--lr: at most 10, got {cfg['lr']}")
    if cfg["steps"] > 10**5:
        raise StudyInputError(f"--steps: at most 100000, got {cfg['steps']}")
    cfg.update(model=kind, seed=args.seed, x64=args.x64, preset=args.preset)
    if kind == "resnet":
        coord_check_resnet.resnet_options(cfg, args)
        return cfg
    named = tables(cfg["parametrisations"])
    check_model_options(
        cfg, args, [*cfg["widths"], cfg["width"]],
        [("--widths", max(cfg["widths"])), ("--depths", max(cfg["depths"])),
         ("--width", cfg["width"]), ("--depth", cfg["depth"])],
    )  # fmt: skip
    cfg["tables"] = [t.table() for t in named]
    corpus(cfg)  # read and checked here; `run` takes it again (`study_text`)
    return cfg


def _sizes(cfg) -> list[tuple[int, int]]:
    """The (width, depth) of every network: the width line and the depth line, once
    each where they meet."""
    sizes = [(n, cfg["depth"]) for n in cfg["widths"]] + [(cfg["width"], d) for d in cfg["depths"]]
    return sorted(set(sizes), key=sizes.index)


def cost_parts(args, cfg) -> list:
    """The estimated memory, work and largest array of the study (`args.Cost`), checked
    by the launcher before `run`: a ResNet's trainings (`resnet.resnet_cost_parts`), or a
    Transformer's: a point trains its seeds at once; Adam keeps four copies of the
    parameters, the coordinate measurements the per-layer states of the held-out batch."""
    if cfg["model"] == "resnet":
        return coord_check_resnet.resnet_cost_parts(cfg)
    B, S = cfg["batch"], cfg["seeds"]
    return training_cost(
        cfg, _sizes(cfg), nets=S, runs=len(cfg["parametrisations"]), passes=cfg["steps"] + 1,
        rows=B + EVAL_BATCH, state_rows=B + 2 * EVAL_BATCH, score_tokens=cfg["context"],
        measured=EVAL_BATCH,
        flags="--widths/--depths/--width/--depth/--seeds/--batch/--context/--steps",
        memory_flags="--widths/--depths/--width/--depth/--seeds/--batch/--context",
        array="the per-layer states of a point's held-out batch, (seeds, batch, L, T, 4N)",
    )  # fmt: skip


@functools.cache
def _program(skeleton, steps: int, batch: int, context: int, eps: float, weight_decay: float):
    """One program per shape and optimiser, whatever the table (its numbers are an
    argument: `Transformer.skeleton_and_numbers`): a point's seeds trained at once
    (vmapped), the coordinates measured at every step inside the loop. The networks'
    draws (initial parameters, batches) are a program of their own (`draws_program`)."""

    def draw(numbers, key, train_ids, eval_ids):
        net = skeleton.with_numbers(numbers)
        k_init, k_data, k_eval = jax.random.split(key, 3)
        data_keys = jax.random.split(k_data, steps)
        xs, ys = jax.vmap(lambda k: batches(k, train_ids, batch=batch, context=context))(data_keys)
        held_out, _ = batches(k_eval, eval_ids, batch=EVAL_BATCH, context=context)
        return net.init(k_init), xs, ys, held_out

    def one(numbers, lr, p0, xs, ys, held_out):
        net = skeleton.with_numbers(numbers)
        # the table's optimiser at a (traced) base learning rate
        opt = functools.partial(optimizer, net, eps=eps, weight_decay=weight_decay)
        reference = coord_check_diagnostics.reference_states(net, p0, held_out)

        def measure(theta, k, loss):
            coords = coord_check_diagnostics.coordinates(
                net, p0, theta, held_out, reference=reference
            )
            return loss, coords

        # steps + 1 passes, without the history of the parameters: pass k measures θ_k,
        # k = 0..steps (the last pass's update is dropped)
        _, (losses, coords) = train(net, p0, xs, ys, opt(lr=lr), measure=measure, last=True)
        return losses, coords

    drawn = draws_program(jax.vmap(draw, in_axes=(None, 0, None, None)))
    trained = jax.jit(jax.vmap(one, in_axes=(None, None, 0, 0, 0, 0)))

    return DrawnAndTrained(drawn, trained)


def _point(cfg, table: Parametrisation, N: int, L: int, master, text, steps=None) -> dict:
    steps = cfg["steps"] if steps is None else steps
    skeleton, numbers = model(cfg, table, N, L).skeleton_and_numbers()
    keys = jnp.stack([jax.random.fold_in(master, s) for s in range(cfg["seeds"])])
    program = _program(
        skeleton, steps, cfg["batch"], cfg["context"], cfg["eps"], cfg["weight_decay"]
    )
    train, held = jnp.asarray(text.train), jnp.asarray(text.validation)
    losses, coords = program(numbers, keys, cfg["lr"], train, held)
    # (seeds, steps + 1): the loss at θ_k (the last's batch repeats)
    losses = np.asarray(losses, float)
    exploded = ~np.all(np.isfinite(losses), axis=1)
    return coord_check_resnet.summarise(
        losses, coords, coord_check_diagnostics.QUANTITIES, exploded, steps
    )


def run(args, cfg):
    resnet = cfg["model"] == "resnet"
    text = None if resnet else study_text(cfg)  # the text `configure` read
    runner = start_study(args, cfg)
    # the tables as the configuration holds them (a user's file is not imported again)
    rebuild = resnet_from_table if resnet else from_table
    named = {t["name"]: rebuild(t) for t in cfg["tables"]}
    master = jax.random.key(cfg["seed"])
    specs = [
        {"parametrisation": name, "width": N, "depth": L} for name in named for N, L in _sizes(cfg)
    ]
    program, xy = (
        (coord_check_resnet.programs(cfg), coord_check_resnet.data(cfg, master))
        if resnet
        else (None, None)
    )

    def point(spec, steps=None):
        key = jax.random.fold_in(jax.random.fold_in(master, spec["width"]), spec["depth"])
        table = named[spec["parametrisation"]]
        N, L = spec["width"], spec["depth"]
        if isinstance(table, Parametrisation):
            return _point(cfg, table, N, L, key, text, steps)
        return coord_check_resnet.point(cfg, program, table, N, L, key, xy, steps)

    points = run_sized_points(runner, specs, point, SELF_CHECK_STEPS,
                              width_symbol="M" if resnet else "N")  # fmt: skip
    for p in points:
        if p["exploded"]:
            runner.warn(
                f"{p['parametrisation']} {'M' if resnet else 'N'}={p['width']} L={p['depth']}: "
                f"{p['exploded']} of {cfg['seeds']} draws exploded (left out of the fits)"
            )
    diag = unit_coord_check if resnet else coord_check_diagnostics
    lines = _lines(cfg, named, points, diag)
    method = (
        "slopes predicted at first order for gradient descent from each table's exponents "
        "(meanfield.diagnostics.unit_coord_check.predicted_slopes; the state's for a "
        "centred block)"
        if resnet
        else "slopes predicted from each table's exponents for its optimiser's first steps "
        "(meanfield.diagnostics.coord_check.predicted_slopes)"
    )
    runner.finish(
        {
            "points": points,
            "lines": lines,
            "fits": [f for line in lines for f in line["fits"].values()],
            "reference": {"method": method},
            **({} if resnet else {"data": data_record(cfg, text)}),
            "headline": ([coord_check_resnet.block_line(cfg)] if resnet else [])
            + _headline(lines, diag),
        },
        plot=plot,
    )


def _lines(cfg, tables, points, diag=coord_check_diagnostics) -> list[dict]:
    """Per table and line (width, depth): every quantity's slope after the last step.
    `diag`: the model's diagnostics module (`coord_check` for a Transformer,
    `unit_coord_check` for a ResNet of unit blocks): its quantities and predictions;
    a ResNet's state's prediction depends on whether its block is centred (`config`)."""
    predict = diag.predicted_slopes
    if diag is unit_coord_check:
        predict = functools.partial(predict, centred=cfg.get("centred", True))
    out = []
    for name, table in tables.items():
        for against, sizes, fixed in (
            ("width", cfg["widths"], {"depth": cfg["depth"]}),
            ("depth", cfg["depths"], {"width": cfg["width"]}),
        ):
            at = {(p["width"], p["depth"]): p for p in points if p["parametrisation"] == name}
            key = (
                (lambda n: (n, cfg["depth"]))
                if against == "width"
                else (lambda d: (cfg["width"], d))
            )
            draws = {
                q: [
                    np.array([np.nan if r[-1] is None else r[-1] for r in at[key(n)]["sizes"][q]])
                    for n in sizes
                ]
                for q in diag.QUANTITIES
            }
            predicted = predict(table, against)
            features = [*diag.ACTIVATIONS, *diag.CHANGES]
            claims = all(predicted[q] == 0.0 for q in features)
            # the predictions are the fits' theory only where the table claims the line
            # flat: elsewhere they are first-step asymptotics, not a claim to test
            fits = coord_check_diagnostics.slope_fits(
                sizes,
                draws,
                against=against,
                predicted=predicted,
                fixed=fixed,
                seed=cfg["seed"],
                as_theory=claims,
            )
            slopes = {q: fits[q].get("slope") for q in diag.QUANTITIES}
            out.append(
                {
                    "parametrisation": name,
                    "against": against,
                    "sizes": list(sizes),
                    "fixed": fixed,
                    "claims_flat": claims,
                    "fits": fits,
                    "flat": sorted(q for q in diag.QUANTITIES if fits[q]["flat"] == "inside"),
                    "off": sorted(q for q, v in slopes.items() if v is not None and abs(v) >= OFF),
                    "largest_activation_deviation": _largest(fits, diag.ACTIVATIONS, predicted),
                }
            )
    return out


def _largest(fits, quantities, predicted):
    values = [
        abs(fits[q]["slope"] - predicted[q]) for q in quantities if fits[q].get("slope") is not None
    ]
    return max(values) if values else None


def _headline(lines, diag=coord_check_diagnostics) -> list[str]:
    out = []
    for line in lines:
        fits = line["fits"]
        acts = ", ".join(
            f"{q.split('/')[1]} {fits[q]['slope']:+.2f}" if fits[q].get("slope") is not None
            else f"{q.split('/')[1]} —"
            for q in diag.ACTIVATIONS
        )  # fmt: skip
        features = [*diag.ACTIVATIONS, *diag.CHANGES]
        flat = sum(fits[q]["flat"] == "inside" for q in features)
        claim = "claims flat" if line["claims_flat"] else "does not claim flat"
        out.append(
            f"{line['parametrisation']} against {line['against']} ({claim}): activation slopes "
            f"{acts}; {flat} of {len(features)} activations and changes flat within ±0.1 "
            f"(intervals); {len(line['off'])} of {len(diag.QUANTITIES)} quantities {OFF} or more "
            "from flat" + (f" ({', '.join(line['off'])})" if line["off"] else "")
        )
    return out


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    from .plot import figures

    figures(Path(out), results)
