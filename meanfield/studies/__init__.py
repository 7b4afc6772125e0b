"""The studies: grids of finite networks compared with their limits, one package per
study (`meanfield/studies/NAME/`), registered here under its command-line name.

Each study's `study.py` follows `meanfield.harness.protocol.Study` (`HELP`, `PRESETS`,
`DEFAULT_X64`, `SCHEMA`, `add_arguments(parser)`, `configure(args)`,
`cost_parts(args, cfg)`, `run(args, cfg)`, `plot(out, results)` or None); the
machinery they share (the folder, the grid runner, the self-check, the launcher) is
`meanfield.harness`. Every study writes `DIR/results.json` with the top-level keys
`study`, `config`, `points`, `fits`, `reference`, `timing` (and `warnings`). How to add
a study: docs/adding-a-study.md.
"""

import importlib

from ..harness.options import distributed_settings as distributed_settings
from ..harness.self_check import SelfCheckError as SelfCheckError
from ..runtime.errors import StudyInputError as StudyInputError

# command-line name -> module (imported lazily: `meanfield --help`, `meanfield study
# --help` and a refusal of the command line read each study's package front and its
# `options.py` alone, without JAX)
MODULES: dict[str, str] = {
    "mean-ode": "meanfield.studies.mean_ode.study",
    "sde": "meanfield.studies.sde.study",
    "phases": "meanfield.studies.phases.study",
    "response": "meanfield.studies.response.study",
    "variance": "meanfield.studies.variance.study",
    "tangent-kernel": "meanfield.studies.tangent_kernel.study",
    "two-layer": "meanfield.studies.two_layer.study",
    "two-layer-phases": "meanfield.studies.two_layer_phases.study",
    "resnet-phases": "meanfield.studies.resnet_phases.study",
    "stochastic-approximation": "meanfield.studies.stochastic_approximation.study",
    "shapes": "meanfield.studies.shapes.study",
    "plain-vs-residual": "meanfield.studies.plain_vs_residual.study",
    "trained-weights": "meanfield.studies.trained_weights.study",
    "regimes": "meanfield.studies.regimes.study",
    "approximation": "meanfield.studies.approximation.study",
    "coord-check": "meanfield.studies.coord_check.study",
    "transfer": "meanfield.studies.transfer.study",
}


class _Lazy:
    def __init__(self, module: str):
        self._name = module
        self._module = None

    def __getattr__(self, attr):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


STUDIES = {name: _Lazy(mod) for name, mod in MODULES.items()}


def help_line(name: str) -> str:
    """The study's one line (its `HELP`), read from its package's front without importing
    the study itself (a study registered otherwise: its module's)."""
    if name in MODULES:
        front = importlib.import_module(MODULES[name].rsplit(".", 1)[0])
        if hasattr(front, "HELP"):
            return front.HELP
    return STUDIES[name].HELP


def study_options(name: str):
    """The study's command-line options (`add_arguments`, `PRESETS`, `DEFAULT_X64`, and
    `default_out` where it has one): its package's `options.py`, read without JAX, which
    the study's module re-exports; for a study without one, its module."""
    if name in MODULES:
        options = MODULES[name].rsplit(".", 1)[0] + ".options"
        try:
            return importlib.import_module(options)
        except ModuleNotFoundError as err:
            if err.name != options:
                raise
    return STUDIES[name]


def __getattr__(name: str):
    """`StudyRunner`, imported at its first use (the runner needs JAX)."""
    if name == "StudyRunner":
        from ..harness.runner import StudyRunner

        return StudyRunner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run_study(name: str, *, out: str, **options) -> dict:
    """Run the study `meanfield study NAME` from Python and return its `results.json`.

    `options` are the command line's, by their Python names (`L=[4, 8, 16]`,
    `seeds=10`, `preset="quick"`, `resume=True`, ...) with values of their parsed types;
    an option the study does not have is refused with a one-line `ValueError` naming
    it, and every value goes through the command line's own checks: what the command
    line refuses, this refuses with the same one-line message (`StudyInputError`),
    before any folder is made.
    """
    if name not in STUDIES:
        raise ValueError(f"name: unknown study {name!r}; one of {', '.join(STUDIES)}")
    from ..harness.launcher import run_from_python

    return run_from_python(STUDIES[name], name, out, options)


def resolve_out(args) -> None:
    """`args.out` for the study `args.study` (`harness.options.resolve_out`): its own
    default folder where left out; an empty one refused."""
    from ..harness.options import resolve_out as resolve

    resolve(args, STUDIES[args.study])


def replot(out, export: dict | None = None, seen: list | None = None) -> list:
    """Redraw every figure of the study folder `out` from its `results.json` alone (no
    network is run): the study's own `plot(out, results)`. **Returns:** the figures'
    paths. A one-line `StudyInputError` for a folder without a readable results.json or
    of a study without figures; for a results.json that does not hold what the study's
    figures read (`schema.validate`: the JSON path and the problem), or that its plot
    still cannot draw; for a folder the figures cannot be written into, or a figure that
    is a symbolic link (never written through); refused while a run holds the folder.
    `export`: `io.plotting.figure_export`'s arguments (`formats`, `dpi`, `panel`);
    `seen`, where given, receives the titles of the panels drawn (with `panel`)."""
    from pathlib import Path

    from ..harness.plot import redraw
    from ..io.results import read_results_json
    from .schema import validate

    folder = Path(out)
    path, results = read_results_json(folder / "results.json", name="DIR", error=StudyInputError)
    name = results["study"]
    if not isinstance(name, str):
        validate(results)  # refused in one line: `study` names no study
    if name not in STUDIES:
        raise StudyInputError(f"DIR: {path} is not a meanfield study's results ({name!r})")
    plot = getattr(STUDIES[name], "plot", None)
    if plot is None:
        raise StudyInputError(f"DIR: the study {name!r} draws no figures")
    validate(results)
    return redraw(folder, plot, results, export, seen)


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
