"""Studies: grids of finite networks compared with their limits.

Each study is a module with `HELP`, `add_arguments(parser)` and `run(args)`,
registered in `STUDIES` under its command-line name (`meanfield study NAME`).
Every study uses `StudyRunner` (atomic per-point files, resume, progress) and
writes `DIR/results.json` with the top-level keys `study`, `config`, `points`,
`fits`, `reference`, `timing` (and `warnings`).
"""

import argparse
import importlib

from .args import seed_int
from .runner import SelfCheckError as SelfCheckError
from .runner import StudyInputError as StudyInputError
from .runner import StudyRunner as StudyRunner

# command-line name -> module (imported lazily so `meanfield info` stays fast)
_MODULES: dict[str, str] = {
    "mean-ode": "meanfield.studies.mean_ode",
    "sde": "meanfield.studies.sde",
    "phases": "meanfield.studies.phases",
    "response": "meanfield.studies.response",
    "variance": "meanfield.studies.variance",
    "tangent-kernel": "meanfield.studies.tangent_kernel",
    "two-layer": "meanfield.studies.two_layer",
    "shapes": "meanfield.studies.shapes",
    "plain-vs-residual": "meanfield.studies.plain_vs_residual",
    "trained-weights": "meanfield.studies.trained_weights",
    "regimes": "meanfield.studies.regimes",
}


class _Lazy:
    def __init__(self, module: str):
        self._name = module
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


STUDIES = {name: _Lazy(mod) for name, mod in _MODULES.items()}


def add_common_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """Options shared by every study."""
    module = STUDIES[name]
    presets = getattr(module, "PRESETS", None)
    if presets:
        parser.add_argument(
            "--preset",
            choices=list(presets),
            default=next(iter(presets)),
            help="problem size (default: %(default)s)",
        )
    own = getattr(module, "default_out", None)
    parser.add_argument(
        "--out",
        default=None,
        help=f"output folder (default: results/{name}"
        + ("-WEIGHTS, one per depth law)" if own else ")"),
    )
    parser.add_argument(
        "--seed", type=seed_int, default=0, help="master random seed in [0, 2^31) (default: 0)"
    )
    parser.add_argument(
        "--x64",
        action=argparse.BooleanOptionalAction,
        default=getattr(module, "DEFAULT_X64", False),
        help="compute in float64 (default: %(default)s for this study)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--resume", action="store_true", help="continue a study in --out, skipping finished points"
    )
    group.add_argument(
        "--overwrite", action="store_true", help="discard a study already in --out and start again"
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="do not show progress (the result's summary is still printed)",
    )
    parser.add_argument(
        "--no-self-check",
        action="store_true",
        help="skip the self-check (one grid point recomputed op by op against its compiled "
        "result; also MEANFIELD_NO_SELF_CHECK=1); results.json and the summary then say it "
        "was skipped",
    )
    add_release_override(parser)


def add_release_override(parser: argparse.ArgumentParser) -> None:
    """`--allow-known-bad-jax` (`meanfield.releases`)."""
    parser.add_argument(
        "--allow-known-bad-jax",
        action="store_true",
        help="run even on a JAX release known to compute wrong results (recorded in "
        "results.json; also MEANFIELD_ALLOW_KNOWN_BAD_JAX=1)",
    )


def resolve_out(args) -> None:
    """`--out` left out: the study's own default folder (`results/NAME`, or the study's
    `default_out(args)`, e.g. one folder per depth law)."""
    if getattr(args, "out", None) is None:
        module = STUDIES[args.study]
        own = getattr(module, "default_out", None)
        args.out = own(args) if own else f"results/{args.study}"


def replot(out) -> list:
    """Redraw every figure of the study folder `out` from its `results.json` alone (no
    network is run): the study's own `plot(out, results)`. **Returns:** the figures'
    paths. A one-line `StudyInputError` for a folder without a readable results.json or
    of a study without figures; refused while a run holds the folder."""
    from pathlib import Path

    from ..results import read_results_json
    from .runner import probe_lock

    folder = Path(out)
    path, results = read_results_json(folder / "results.json", name="DIR", error=StudyInputError)
    name = results["study"]
    if name not in STUDIES:
        raise StudyInputError(f"DIR: {path} is not a meanfield study's results ({name!r})")
    plot = getattr(STUDIES[name], "plot", None)
    if plot is None:
        raise StudyInputError(f"DIR: the study {name!r} draws no figures")
    probe_lock(folder)
    from ..plotting import use_agg

    use_agg()
    import jax

    # the figures' few computations at the study's precision
    x64 = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", bool(results.get("config", {}).get("x64", False)))
    before = {p: p.stat().st_mtime_ns for p in folder.glob("*.png")}
    try:
        plot(folder, results)
    finally:
        jax.config.update("jax_enable_x64", x64)
    return sorted(p for p in folder.glob("*.png") if before.get(p) != p.stat().st_mtime_ns)


def run_study(name: str, *, out: str, **options) -> dict:
    """Run the study `meanfield study NAME` from Python and return its `results.json`.

    `options` are the command line's, by their Python names (`L=[4, 8, 16]`,
    `seeds=10`, `preset="quick"`, `resume=True`, ...) with values of their parsed types;
    an option the study does not have is refused with a one-line `ValueError` naming
    it, and so is every value the command line refuses (`StudyInputError`).
    """
    import json
    from pathlib import Path

    if name not in STUDIES:
        raise ValueError(f"name: unknown study {name!r}; one of {', '.join(STUDIES)}")
    module = STUDIES[name]
    parser = argparse.ArgumentParser(prog=f"meanfield study {name}", allow_abbrev=False)
    add_common_arguments(parser, name)
    module.add_arguments(parser)
    args = parser.parse_args(["--out", str(out)])
    for key, value in options.items():
        if not hasattr(args, key):
            raise ValueError(f"{key}: not an option of the study {name!r}")
        setattr(args, key, value)
    args.study = name
    import jax

    from ..releases import KnownBadReleaseError, check_release
    from .runner import release_all

    try:
        check_release(allow=bool(args.allow_known_bad_jax))
    except KnownBadReleaseError as err:
        raise KnownBadReleaseError(f"allow_known_bad_jax: {err}") from None

    x64 = jax.config.read("jax_enable_x64")
    try:
        module.run(args)
    finally:
        release_all()  # the output folder's lock
        jax.config.update("jax_enable_x64", x64)  # the study set its own precision
    with open(Path(out) / "results.json") as f:
        return json.load(f)


def mean_ode_study(block, law, *, out: str, **options) -> dict:
    """`meanfield study mean-ode --block ... --law ...` from Python: the convergence study
    of your own block `block` (an `AbstractUnitBlock` or `AbstractLayerBlock`, instance
    or class) with its parameters' law `law` (an `AbstractLaw`, or a function of no
    arguments returning one), written to `out` and returned as the `results.json` dict
    (`points`, `fits`, `reference`, `design`, ...).

    `options`: as `run_study` (`preset="paper"`, `steps=2`, `d=3`, `seed=1`, ...); by
    default the grid is designed from a pilot (`design="auto"`) and the reference is
    refined until its own error lies 10x below the errors it judges, within the preset's
    budget.

    ```python
    results = meanfield.mean_ode_study(SineUnit(), law, out="results/sine")
    print([(f["against"], f["slope"]) for f in results["fits"] if f["quantity"] == "delta_h"])
    ```
    """
    return run_study("mean-ode", out=out, block=block, law=law, **options)
