"""A toy study, the example of docs/adding-a-study.md: the error of the mean of n standard
Gaussian draws shrinks as n^(-1/2). It follows `meanfield.harness.protocol.Study` and runs
through the same launcher, folder, grid runner and self-check as the library's studies
(tests/test_study_protocol.py registers it for the length of a test)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from meanfield.harness.args import Cost, int_list, positive_int
from meanfield.harness.runner import start_study
from meanfield.harness.schema_language import (
    NUM,
    POS,
    STAT,
    List,
    Member,
    Record,
    fit_record,
    study,
)
from meanfield.io.plotting import loglog_series, save_figure, use_agg
from meanfield.runtime.errors import StudyInputError
from meanfield.stats.fits import fit_points, summarize

HELP = "the error of a mean of n Gaussian draws against n (a toy study)"
DEFAULT_X64 = True
PRESETS = {"quick": {"draws": 64}, "paper": {"draws": 4096}}

# what `plot` reads from results.json, checked before `meanfield plot DIR` draws it
SCHEMA = study(
    {"n": List(POS, min_len=2)},
    {
        "points": List(Record({"n": Member(POS, "config.n"), "error": STAT}), min_len=1),
        "fits": List(fit_record(theory=NUM), min_len=1),
    },
)


def add_arguments(parser):
    parser.add_argument("--n", type=int_list, default=[4, 16, 64, 256], help="sample sizes")
    parser.add_argument("--draws", type=positive_int, help="repetitions per sample size")


def configure(args) -> dict:
    """The configuration from the options, refused in one line before anything is made."""
    if len(args.n) < 2:
        raise StudyInputError(f"--n: need two sample sizes or more for a slope, got {args.n}")
    return {
        "n": sorted(args.n),
        "draws": args.draws or PRESETS[args.preset]["draws"],
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }


def cost_parts(args, cfg) -> list:
    """What a point costs (the launcher checks it before `run`): its draws' memory and work."""
    return [Cost("--n/--draws", "a point's draws", memory=8 * cfg["draws"] * max(cfg["n"]),
                 work=cfg["draws"] * sum(cfg["n"]))]  # fmt: skip


def run(args, cfg):
    runner = start_study(args, cfg)
    master = jr.key(cfg["seed"])

    def point(spec):
        n = spec["n"]
        keys = jr.split(jr.fold_in(master, n), cfg["draws"])
        means = jax.jit(jax.vmap(lambda k: jnp.mean(jr.normal(k, (n,)))))(keys)
        return {"error": summarize(np.abs(np.asarray(means)))}

    points = runner.run_points(
        [{"n": n} for n in cfg["n"]], point, describe=lambda s: f"n={s['n']}"
    )
    fits = [fit_points(points, "error", "n", theory=-0.5, seed=cfg["seed"])]
    runner.finish({"points": points, "fits": fits, "reference": {"error_estimate": 0.0}},
                  plot=plot)  # fmt: skip


def plot(out, results) -> None:
    """The error against n on log axes, with its fitted slope and the theory's -1/2."""
    use_agg()
    import matplotlib.pyplot as plt

    points, fit = results["points"], results["fits"][0]
    fig, ax = plt.subplots(figsize=(5, 4))
    loglog_series(ax, [p["n"] for p in points], [p["error"]["mean"] for p in points],
                  [p["error"]["std"] for p in points], color="C0", label="|mean of n draws|",
                  fit=fit, theory=-0.5)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="n", ylabel="error (mean over repetitions)")
    ax.set_title("the error of a mean of n draws\n(dashed: fitted slope; dotted: theory -1/2)",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8)
    save_figure(fig, Path(out) / "toy.png", dpi=100)
