"""`meanfield study transfer`: learning-rate transfer of a Transformer across depth and
width under each parametrisation (Mathematics §11; issue 49).

For every table of `--parametrisations` (the depth line, at width `--width`) and of
`--width-parametrisations` (the width line, at depth `--depth`), pre-LN Transformers
(`meanfield.models.transformer`) are trained `--steps` steps of the table's optimiser
(Adam, or SGD for the `-sgd` tables) at every base learning rate of `--lrs` (a log
grid), `--seeds` networks each (a network and its batches drawn
from one key; the learning rates share the networks), on character-level text (`--text
stdlib`, a sample of the standard library's source, `--text docs`, Python's help topics,
or `--data FILE`). Each run's loss is measured after
training on held-out text (`EVAL_BATCHES` batches of the validation part); a run whose
loss is not finite, or beyond `EXPLODED_FACTOR` times its initial loss, counts as its
initial loss (the curve's minimum is then elsewhere) and is reported.

**lr\\*.** Per size, the vertex of the parabola through the grid's minimum of the mean log
loss and its two neighbours (`meanfield.stats.transfer.optimal_lr`); unresolved at a
grid edge. **The drift** of log lr\\* against log size, with its 95% interval from a
bootstrap over each size's networks (`meanfield.stats.transfer.drift`; its coverage at
this study's own layouts: `benchmarks/coverage.py`, kind `transfer-drift`). **Verdict**
per table and line (`meanfield.stats.transfer.verdict`), in this order: `transfers` when
the interval lies within ±`TRANSFER_BAND` (0.15; a drift smaller than that, resolved or
not); `drifts` when it excludes 0; otherwise `undecided`, with the networks per size
that would decide it at the same drift. An interval that holds 0 but is wider than the
band shows nothing: it is undecided, not "consistent with transfer". **The loss at
lr\\*** against the size (does depth help at fixed width?): the mean log loss at the
grid point nearest lr\\*.

**Lazy or not, per layer** (depth line): at every size, for the networks trained at the
grid's learning rate nearest the table's lr\\* at the smallest depth where it is resolved
(the base depth unless its lr\\* sits at a grid edge; `laziness.lr_from_L` says which),
every branch's nonlinear fraction (`meanfield.diagnostics.laziness`), its mean over layers, and its
slope against depth with an interval over the networks: CompleteP's claim is that only
α = 1 keeps it flat (every layer learning non-linearly), α = ½ making the layers lazy
as `L^{-1/2}`.

**Precision.** float32 by default (`--x64` for float64): losses are compared across
learning rates a factor 2^{1/2} apart, whose differences near the optimum are ~1e-2 of the
loss; float32's round-off over a training of this length is ~1e-5 of it.
"""

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from ...diagnostics.laziness import nonlinear_fractions
from ...harness.runner import start_study
from ...io.text import batches
from ...parametrisation import Parametrisation, from_table
from ...runtime.errors import StudyInputError
from ...stats.fits import fit_loglog
from ...stats.transfer import TRANSFER_BAND, drift, verdict
from ...training.transformer import optimizer, train
from ..shared.transformer_options import (
    MODEL_OPTIONS,
    DrawnAndTrained,
    check_model_options,
    corpus,
    data_record,
    draws_program,
    listed,
    model,
    run_sized_points,
    study_text,
    table_names,
    tables,
    training_cost,
)
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
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

# held-out batches (of `batch` sequences) each final loss is measured on: 32 × 8 × 16 =
# 4096 bytes at the quick preset, a standard error of about 0.02 nats (512 bytes gave
# 0.1, the size of the differences between neighbouring learning rates near lr*)
EVAL_BATCHES = 32
EXPLODED_FACTOR = 2.0  # a final loss beyond this times the initial one counts as exploded
SELF_CHECK_STEPS = 3


def configure(args) -> dict:
    """The configuration from the options: the preset with the options given, every value
    checked (one line naming the option), the tables recorded and the text read."""
    from ...harness.args import override

    cfg = override(
        dict(PRESETS[args.preset]), args,
        ("depths", "width", "widths", "depth", "lrs", "steps", "budgets", "seeds",
         *MODEL_OPTIONS),
    )  # fmt: skip
    found = {}  # each table as named -> its table
    for flag, key in (
        ("--parametrisations", "parametrisations"),
        ("--width-parametrisations", "width_parametrisations"),
    ):
        value = getattr(args, key)
        if value is not None:
            cfg[key] = table_names(value, flag)
        found.update(zip(cfg[key], tables(cfg[key], flag), strict=True))  # refused here
    for flag, key in (("--depths", "depths"), ("--widths", "widths")):
        if len(cfg[key]) < 3:
            raise StudyInputError(f"{flag}: a drift needs at least three sizes, got {cfg[key]}")
    if len(cfg["lrs"]) < 3:
        raise StudyInputError(f"--lrs: an optimum needs at least three rates, got {cfg['lrs']}")
    if max(cfg["lrs"]) > 10:
        raise StudyInputError(f"--lrs: at most 10, got {max(cfg['lrs'])}")
    check_model_options(
        cfg, args, [*cfg["widths"], cfg["width"]],
        [("--depths", max(cfg["depths"])), ("--widths", max(cfg["widths"])),
         ("--width", cfg["width"]), ("--depth", cfg["depth"])],
    )  # fmt: skip
    if cfg["seeds"] < 2:
        raise StudyInputError("--seeds: an interval needs at least 2 networks")
    if cfg["steps"] > 10**6:
        raise StudyInputError(f"--steps: at most 1000000, got {cfg['steps']}")
    if cfg.get("budgets") is None:  # a quarter and a half of the training
        cfg["budgets"] = sorted({k for k in (cfg["steps"] // 4, cfg["steps"] // 2) if k > 0})
    budgets = cfg["budgets"]
    if any(not 0 < b < cfg["steps"] for b in budgets) or len(set(budgets)) != len(budgets):
        raise StudyInputError(
            f"--budgets: distinct step counts between 0 and --steps ({cfg['steps']}), got {budgets}"
        )
    cfg["budgets"] = sorted(budgets)
    cfg.update(tables=[found[n].table() for n in sorted(found)], seed=args.seed, x64=args.x64,
               preset=args.preset)  # fmt: skip
    corpus(cfg)  # read and checked here; `run` takes it again (`study_text`)
    return cfg


def found_names(cfg) -> set[str]:
    """Every table named on either line, as named."""
    return {*cfg["parametrisations"], *cfg["width_parametrisations"]}


def _specs(cfg) -> list[dict]:
    specs = [
        {"line": "depth", "parametrisation": n, "width": cfg["width"], "depth": L}
        for n in cfg["parametrisations"]
        for L in cfg["depths"]
    ]
    specs += [
        {"line": "width", "parametrisation": n, "width": N, "depth": cfg["depth"]}
        for n in cfg["width_parametrisations"]
        for N in cfg["widths"]
    ]
    return specs


def cost_parts(args, cfg) -> list:
    """The estimated memory, work and largest array (`args.Cost`), checked by the
    launcher before `run`: a point trains its learning rates × seeds networks at once."""
    B, T = cfg["batch"], cfg["context"]
    return training_cost(
        cfg, [(s["width"], s["depth"]) for s in _specs(cfg)],
        nets=len(cfg["lrs"]) * cfg["seeds"], runs=1, passes=cfg["steps"] + EVAL_BATCHES,
        rows=B, state_rows=B, score_tokens=2 * T, measured=B,
        flags="--depths/--widths/--width/--depth/--lrs/--seeds/--batch/--context/--steps",
        memory_flags="--depths/--widths/--width/--depth/--lrs/--seeds/--batch/--context",
        array="a point's networks, (learning rates × seeds, parameters)",
    )  # fmt: skip


@functools.cache
def _program(
    skeleton, steps: int, batch: int, context: int, eps: float, weight_decay: float,
    budgets: tuple[int, ...] = (),
):  # fmt: skip
    """One program per shape and optimiser, whatever the table (its numbers are an
    argument: `Transformer.skeleton_and_numbers`): every (network, learning rate) pair of
    a point trained at once, as one vmapped axis. **Returns** `program(numbers, keys,
    lrs, train_ids, eval_ids)`: the initial and final held-out losses, each (networks,
    rates), the nonlinear fractions, each (networks, rates, L), and the held-out loss
    after each of `budgets` steps (each below `steps`), (networks, rates, budgets).
    The budgets' losses are measured inside the one training loop (a `lax.cond` on the
    step, the same for every pair, so vmap keeps it a branch): no training is repeated.

    Two compiled programs: the networks' draws (`draws_program`: initial parameters,
    training and held-out batches, one per network key) and their training at every rate.
    The training program's arrays stay at rank 5 or less (pairs, sequences, heads,
    tokens, tokens): nested vmaps (networks, then rates, then the held-out batches) made
    rank-7 attention products, which XLA's CPU backend hands to YNNPACK, whose packed
    operands carry two dimensions more and stop at rank 8 (`INTERNAL: YNNPACK operation
    failed`, "rank 9 ... exceeds YNN_MAX_TENSOR_RANK 8", AVX2 CPUs, jaxlib 0.10.1;
    issue 73)."""

    def draw(numbers, key, train_ids, eval_ids):
        net = skeleton.with_numbers(numbers)
        k_init, k_data, k_eval = jax.random.split(key, 3)
        keys = jax.random.split(k_data, steps)
        xs, ys = jax.vmap(lambda k: batches(k, train_ids, batch=batch, context=context))(keys)
        ex, ey = jax.vmap(lambda k: batches(k, eval_ids, batch=batch, context=context))(
            jax.random.split(k_eval, EVAL_BATCHES)
        )
        return net.init(k_init), xs, ys, ex, ey

    def loss_on(numbers, p, ex, ey):  # held out: the mean over EVAL_BATCHES equal batches,
        net = skeleton.with_numbers(numbers)  # one batch of them all
        return net.loss(p, ex.reshape(-1, context), ey.reshape(-1, context))

    def one(numbers, lr, p0, xs, ys, ex, ey):
        net = skeleton.with_numbers(numbers)
        # the table's optimiser at a (traced) base learning rate
        opt = functools.partial(optimizer, net, eps=eps, weight_decay=weight_decay)
        held_out = functools.partial(loss_on, numbers, ex=ex, ey=ey)

        checkpoints = jnp.asarray(budgets, dtype=int)

        def measure(theta, k, loss):  # theta: the parameters after k steps
            at_budget = jnp.any(checkpoints == k) if budgets else jnp.asarray(False)
            return jax.lax.cond(at_budget, held_out, lambda p: jnp.zeros(()), theta)

        final, after = train(net, p0, xs, ys, opt(lr=lr), measure=measure)
        fractions = nonlinear_fractions(net, p0, final, ex[0])
        return held_out(final), fractions, after[checkpoints]

    drawn = draws_program(jax.vmap(draw, in_axes=(None, 0, None, None)))
    pairs = jax.vmap(one, in_axes=(None, 0, 0, 0, 0, 0, 0))

    @jax.jit
    def pairs_trained(numbers, lrs, *networks):
        # networks outer, learning rates inner: a network's draw is shared by its rates,
        # and so is its initial loss (computed once per network, not once per rate)
        S, R = jax.tree.leaves(networks)[0].shape[0], lrs.shape[0]
        p0, _, _, ex, ey = networks
        before = jax.vmap(loss_on, in_axes=(None, 0, 0, 0))(numbers, p0, ex, ey)
        each = jax.tree.map(lambda a: jnp.repeat(a, R, axis=0), networks)
        out = pairs(numbers, jnp.tile(lrs, S), *each)
        out = jax.tree.map(lambda a: a.reshape(S, R, *a.shape[1:]), out)
        return (jnp.broadcast_to(before[:, None], (S, R)), *out)

    return DrawnAndTrained(drawn, pairs_trained)


def _point(cfg, table: Parametrisation, N: int, L: int, master, text, steps=None) -> dict:
    steps = cfg["steps"] if steps is None else steps
    skeleton, numbers = model(cfg, table, N, L).skeleton_and_numbers()
    keys = jnp.stack([jax.random.fold_in(master, s) for s in range(cfg["seeds"])])
    budgets = tuple(b for b in cfg.get("budgets") or () if b < steps)
    program = _program(
        skeleton, steps, cfg["batch"], cfg["context"], cfg["eps"], cfg["weight_decay"],
        budgets,
    )  # fmt: skip
    train, held = jnp.asarray(text.train), jnp.asarray(text.validation)
    initial, final, fractions, after = program(numbers, keys, jnp.asarray(cfg["lrs"]), train, held)
    initial, final = np.asarray(initial, float), np.asarray(final, float)  # (seeds, lrs)
    exploded = ~np.isfinite(final) | (final > EXPLODED_FACTOR * initial)
    out = {
        "initial_loss": listed(initial.T),  # (lrs, seeds)
        "final_loss": listed(final.T),
        "exploded": listed(exploded.T.astype(float)),
    }
    if budgets:  # (budgets, lrs, seeds): the held-out loss after each budget's steps
        after = np.asarray(after, float)
        out["budget_loss"] = [listed(after[:, :, b].T) for b in range(len(budgets))]
    for branch, v in fractions.items():  # (seeds, lrs, L)
        v = np.asarray(v, float)
        out[f"nonlinear_{branch}"] = listed(v.mean(axis=2).T)  # (lrs, seeds): mean over layers
    return out


def run(args, cfg):
    text = study_text(cfg)  # the text `configure` read
    runner = start_study(args, cfg)
    # as named -> its table, from the configuration (a user's file is not imported again)
    by_name = dict(zip(sorted(found_names(cfg)), map(from_table, cfg["tables"]), strict=True))
    master = jax.random.key(cfg["seed"])

    def point(spec, steps=None):
        key = jax.random.fold_in(jax.random.fold_in(master, spec["width"]), spec["depth"])
        return _point(cfg, by_name[spec["parametrisation"]], spec["width"], spec["depth"],
                      key, text, steps)  # fmt: skip

    specs = _specs(cfg)
    points = run_sized_points(runner, specs, point, SELF_CHECK_STEPS)
    for p in points:
        count = int(np.nansum(np.array(p["exploded"], dtype=float)))
        if count:
            runner.warn(
                f"{p['parametrisation']} N={p['width']} L={p['depth']}: {count} of "
                f"{len(cfg['lrs']) * cfg['seeds']} runs exploded (counted at their initial loss)"
            )
    lines = _lines(cfg, points)
    runner.finish(
        {
            "points": points,
            "lines": lines,
            "fits": [ln["laziness"][b] for ln in lines if ln.get("laziness")
                     for b in ("attention", "mlp")],
            "reference": {"method": "no reference limit: lr* and its drift are measured"},
            "data": data_record(cfg, text),
            "headline": _headline(lines),
        },
        plot=plot,
    )  # fmt: skip


def log_losses(point, key: str = "final_loss", index: int | None = None) -> np.ndarray:
    """(lrs, seeds) log final loss (or `point[key][index]`, a budget's); an exploded run
    counts as its initial loss."""
    rows = point[key] if index is None else point[key][index]
    final = np.array([[np.nan if v is None else v for v in r] for r in rows])
    initial = np.array([[np.nan if v is None else v for v in r] for r in point["initial_loss"]])
    bad = ~np.isfinite(final) | (final > EXPLODED_FACTOR * initial)
    return np.log(np.where(bad, initial, final))


def _lines(cfg, points) -> list[dict]:
    out = []
    lrs = cfg["lrs"]
    for line, names, sizes, key in (
        ("depth", cfg["parametrisations"], cfg["depths"], "depth"),
        ("width", cfg["width_parametrisations"], cfg["widths"], "width"),
    ):
        for name in names:
            pts = [next(p for p in points if p["line"] == line and p["parametrisation"] == name
                        and p[key] == s) for s in sizes]  # fmt: skip
            curves = [log_losses(p) for p in pts]
            found = drift(lrs, sizes, curves, seed=cfg["seed"])
            best = [
                None if v is None else float(curves[i].mean(axis=1)[_nearest(lrs, v)])
                for i, v in enumerate(found["optimal_lr"])
            ]
            rec = {
                "line": line,
                "parametrisation": name,
                "sizes": list(sizes),
                "loss_curves": [c.mean(axis=1).tolist() for c in curves],
                # the standard error of the mean log loss over the networks, per rate
                "loss_se_curves": [_standard_error(c) for c in curves],
                **found,
                **verdict(
                    found["drift_exponent"], found["drift_ci95"], min(c.shape[1] for c in curves)
                ),  # fmt: skip
                "log_loss_at_optimum": best,
            }
            if line == "depth":
                rec["laziness"] = _laziness(cfg, pts, sizes, found, name)
            if cfg.get("budgets"):
                rec["budgets"] = _budget_drifts(cfg, pts, sizes) + [
                    {"steps": cfg["steps"], "optimal_lr": found["optimal_lr"],
                     "drift_exponent": found["drift_exponent"],
                     "drift_ci95": found["drift_ci95"], "verdict": rec["verdict"]}
                ]  # fmt: skip
            out.append(rec)
    return out


def _standard_error(curve) -> list[float | None]:
    """Per rate, the standard error over the networks of a (lrs, networks) curve."""
    n = np.sum(np.isfinite(curve), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.nanstd(curve, axis=1, ddof=1) / np.sqrt(n)
    return [float(v) if n_ > 1 and np.isfinite(v) else None for v, n_ in zip(se, n, strict=True)]


def _budget_drifts(cfg, pts, sizes) -> list[dict]:
    """lr* and its drift after each shorter budget of steps (`--budgets`): the held-out
    losses measured on the way through the same trainings."""
    out = []
    for b, steps in enumerate(cfg["budgets"]):
        curves = [log_losses(p, key="budget_loss", index=b) for p in pts]
        found = drift(cfg["lrs"], sizes, curves, seed=cfg["seed"])
        decided = verdict(found["drift_exponent"], found["drift_ci95"],
                          min(c.shape[1] for c in curves))  # fmt: skip
        out.append({"steps": steps, "optimal_lr": found["optimal_lr"],
                    "drift_exponent": found["drift_exponent"],
                    "drift_ci95": found["drift_ci95"], "verdict": decided["verdict"]})  # fmt: skip
    return out


def _nearest(lrs, lr) -> int:
    return int(np.argmin(np.abs(np.log(lrs) - math.log(lr))))


def _laziness(cfg, pts, sizes, found, name) -> dict:
    """Per branch, the mean nonlinear fraction against depth at the learning rate nearest
    lr* at the smallest resolved depth (one rate for the whole line), its slope over the
    networks."""
    resolved = [(L, v) for L, v in zip(sizes, found["optimal_lr"], strict=True) if v is not None]
    lr = resolved[0][1] if resolved else cfg["lrs"][len(cfg["lrs"]) // 2]
    j = _nearest(cfg["lrs"], lr)
    # the depth whose lr* chose the rate (None: no depth resolved it, the grid's middle)
    out = {"lr": cfg["lrs"][j], "lr_from_L": resolved[0][0] if resolved else None}
    for branch in ("attention", "mlp"):
        raw = [p[f"nonlinear_{branch}"][j] for p in pts]
        samples = [[v for v in r if v is not None and v > 0] for r in raw]
        out[branch] = fit_loglog(sizes, samples, quantity=f"nonlinear fraction, {branch}",
                                 against="L", fixed={"parametrisation": name, "lr": out["lr"]},
                                 seed=cfg["seed"])  # fmt: skip
        # networks without a positive fraction (None: not finite; 0: no change) are left
        # out of the log-log fit: named, per depth
        out[branch]["left_out"] = [
            {"L": L, "networks": len(r) - len(kept), "why": "fraction missing or <= 0"}
            for L, r, kept in zip(sizes, raw, samples, strict=True)
            if len(r) > len(kept)
        ]
    return out


def _verdict_text(ln) -> str:
    """The verdict with what it rests on: the tolerance, and for `undecided` the networks
    per size that would decide."""
    band = ln.get("band", TRANSFER_BAND)
    if ln["verdict"] == "transfers":
        resolved = "; a drift resolved from 0, but within it" if ln.get("excludes_zero") else ""
        return f"transfers: within ±{band:g}{resolved}"
    if ln["verdict"] == "drifts":
        return f"drifts: the interval excludes 0 and leaves ±{band:g}"
    if ln.get("drift_ci95") is None:
        return f"undecided: no interval, {ln.get('reason', 'lr* unresolved')}"
    need = ln.get("networks_to_decide")
    more = f"; about {need} networks per size would decide" if need else ""
    return f"undecided: holds 0, wider than ±{band:g}{more}"


def _headline(lines) -> list[str]:
    out = []
    for ln in lines:
        ci = ln["drift_ci95"]
        d = ln["drift_exponent"]
        text = (
            "unresolved"
            if d is None
            else f"{d:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")
        )
        line = (
            f"lr* drift against {ln['line']}, {ln['parametrisation']}: {text} ({_verdict_text(ln)})"
        )
        if ln["unresolved"]:
            line += f"; lr* at a grid edge at {ln['line']} {', '.join(map(str, ln['unresolved']))}"
        lazy = ln.get("laziness")
        if lazy:
            parts = []
            for b in ("attention", "mlp"):
                f = lazy[b]
                if f.get("slope") is not None and f.get("ci95"):
                    parts.append(
                        f"{b} {f['slope']:+.2f} [{f['ci95'][0]:+.2f}, {f['ci95'][1]:+.2f}]"
                    )
            if parts:
                line += "; nonlinear fraction against depth: " + ", ".join(parts)
        out.append(line)
        if ln.get("budgets"):
            out.append(f"  the same drift after {_budget_text(ln['budgets'])}")
    return out


def _budget_text(budgets) -> str:
    """`25 steps +0.05 [-0.10, +0.20] (undecided), 50 steps ...`."""
    parts = []
    for b in budgets:
        d, ci = b["drift_exponent"], b["drift_ci95"]
        value = "unresolved" if d is None else f"{d:+.2f}"
        if ci:
            value += f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"
        parts.append(f"{b['steps']} steps {value} ({b['verdict']})")
    return ", ".join(parts)


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    from .plot import figures

    figures(Path(out), results)
