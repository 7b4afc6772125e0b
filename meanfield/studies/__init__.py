"""Studies: grids of finite networks compared with their limits.

Each study is a module with `HELP`, `add_arguments(parser)` and `run(args)`,
registered in `STUDIES` under its command-line name (`meanfield study NAME`).
Every study uses `StudyRunner` (atomic per-point files, resume, progress) and
writes `DIR/results.json` with the top-level keys `study`, `config`, `points`,
`fits`, `reference`, `timing` (and `warnings`).
"""

import argparse
import importlib
import os
import re

from ..runtime.errors import StudyInputError as StudyInputError
from .args import nonnegative_int, positive_float, positive_int, seed_int
from .runner import SelfCheckError as SelfCheckError
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
    "two-layer-phases": "meanfield.studies.two_layer_phases",
    "resnet-phases": "meanfield.studies.resnet_phases",
    "stochastic-approximation": "meanfield.studies.stochastic_approximation",
    "shapes": "meanfield.studies.shapes",
    "plain-vs-residual": "meanfield.studies.plain_vs_residual",
    "trained-weights": "meanfield.studies.trained_weights",
    "regimes": "meanfield.studies.regimes",
    "approximation": "meanfield.studies.approximation",
    "coord-check": "meanfield.studies.coord_check",
    "transfer": "meanfield.studies.transfer",
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
    group = parser.add_argument_group(
        "several processes (JAX's multi-process runtime, jax.distributed)"
    )
    group.add_argument(
        "--distributed",
        action="store_true",
        help="run as one of several processes: each computes its share of the grid points, "
        "process 0 writes --out; the settings come from the cluster's environment (SLURM, "
        "Open MPI, ...) unless given by the three options below, which imply it",
    )
    group.add_argument(
        "--coordinator", metavar="HOST:PORT", default=None,
        help="process 0's address, the same for every process",
    )  # fmt: skip
    group.add_argument(
        "--num-processes", type=positive_int, default=None, help="how many processes run"
    )
    group.add_argument(
        "--process-id", type=nonnegative_int, default=None,
        help="this process's index, 0 to --num-processes - 1",
    )  # fmt: skip
    group.add_argument(
        "--join-timeout", metavar="SECONDS", type=positive_float, default=None,
        help="how long a process waits for the others to join before it stops with one "
        "line, exit status 2 (default: $MEANFIELD_JOIN_TIMEOUT, else 60)",
    )  # fmt: skip
    add_release_override(parser)


def distributed_settings(args) -> dict | None:
    """The `jax.distributed` settings the options ask for (`None`: one process), with the
    time to join (`join_timeout`: `--join-timeout`, else `MEANFIELD_JOIN_TIMEOUT`, else
    60 s) and the command's name (`where`); a bad combination, a bad time, or a coordinator
    whose host does not resolve (given, or read from SLURM's or Open MPI's variables) is
    a `StudyInputError` naming the option or the variable."""
    given = {
        "coordinator": getattr(args, "coordinator", None),
        "num_processes": getattr(args, "num_processes", None),
        "process_id": getattr(args, "process_id", None),
    }
    if not getattr(args, "distributed", False) and all(v is None for v in given.values()):
        if getattr(args, "join_timeout", None) is not None:  # refused, used or not
            from ..runtime.distribution import join_seconds

            try:
                join_seconds(args.join_timeout)
            except ValueError as err:
                raise StudyInputError(str(err)) from None
        return None
    n, i, address = given["num_processes"], given["process_id"], given["coordinator"]
    if (n is None) != (i is None):
        raise StudyInputError("--num-processes, --process-id: give both or neither")
    if n is not None and i >= n:
        raise StudyInputError(f"--process-id: {i} is not below --num-processes {n}")
    if address is not None:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StudyInputError(f"--coordinator: expected HOST:PORT, got {address!r}")
    if n is not None and n > 1 and address is None:
        from ..runtime.distribution import cluster_detected

        if cluster_detected() is None and "JAX_COORDINATOR_ADDRESS" not in os.environ:
            raise StudyInputError("--coordinator: needed with --num-processes outside a cluster")
    from ..runtime.distribution import check_host, cluster_settings, join_seconds, stale_seconds

    try:  # read once here, so that a bad value is refused before any process starts
        stale_seconds()
        seconds = join_seconds(getattr(args, "join_timeout", None))
    except ValueError as err:
        raise StudyInputError(str(err)) from None
    option = "--coordinator"
    if address is None and os.environ.get("JAX_COORDINATOR_ADDRESS"):
        option, address = "JAX_COORDINATOR_ADDRESS", os.environ["JAX_COORDINATOR_ADDRESS"]
    elif address is None and (cluster := cluster_settings()) is not None:
        option = f"--distributed ({cluster['cluster']}'s coordinator)"
        address = cluster["coordinator"]
    if address is not None:
        try:
            check_host(address, min(seconds, 10.0))
        except ValueError as err:
            raise StudyInputError(f"{option} {address}: {err}") from None
    study = getattr(args, "study", None)
    return {**given, "join_timeout": seconds, "where": f"meanfield study {study}"}


def add_release_override(parser: argparse.ArgumentParser) -> None:
    """`--allow-known-bad-jax` (`meanfield.runtime.releases`)."""
    parser.add_argument(
        "--allow-known-bad-jax",
        action="store_true",
        help="run even on a JAX release known to compute wrong results (recorded in "
        "results.json; also MEANFIELD_ALLOW_KNOWN_BAD_JAX=1)",
    )


def resolve_out(args) -> None:
    """`--out` left out: the study's own default folder (`results/NAME`, or the study's
    `default_out(args)`, e.g. one folder per depth law); an empty `--out` is refused (it
    would be the current folder)."""
    if getattr(args, "out", None) is None:
        module = STUDIES[args.study]
        own = getattr(module, "default_out", None)
        args.out = own(args) if own else f"results/{args.study}"
    elif not str(args.out).strip():
        raise StudyInputError(
            f"--out: {args.out!r} names no folder; give one (e.g. results/{args.study})"
        )


def replot(out) -> list:
    """Redraw every figure of the study folder `out` from its `results.json` alone (no
    network is run): the study's own `plot(out, results)`. **Returns:** the figures'
    paths. A one-line `StudyInputError` for a folder without a readable results.json or
    of a study without figures; for a results.json that does not hold what the study's
    figures read (`schema.validate`: the JSON path and the problem), or that its plot
    still cannot draw; for a folder the figures cannot be written into, or a figure that
    is a symbolic link (never written through); refused while a run holds the folder."""
    import errno
    import os
    from pathlib import Path

    from ..io.results import read_results_json
    from .folder import probe_lock
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
    probe_lock(folder)
    # the figures are written in place: never through a link, never half into a folder
    # that cannot take them
    for figure in sorted(folder.glob("*.png")):
        if figure.is_symlink():
            raise StudyInputError(
                f"DIR: {figure} is a symbolic link; meanfield plot never writes a figure "
                "through a link: remove it"
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StudyInputError(
            f"DIR: cannot write the figures into {folder}: {os.strerror(errno.EACCES)}"
        )
    from ..io.plotting import use_agg

    use_agg()
    import matplotlib.pyplot as plt

    from .runner import study_precision

    before = {p: p.stat().st_mtime_ns for p in folder.glob("*.png")}
    open_before = set(plt.get_fignums())
    drawn = False
    try:
        # the figures' few computations at the study's precision
        with study_precision(bool(results["config"].get("x64", False))):
            plot(folder, results)
        drawn = True
    except StudyInputError:
        raise
    except OSError as err:  # a figure's file: a folder by that name, a full disk, ...
        what = err.strerror or (str(err).splitlines() or [type(err).__name__])[0]
        where = f" ({Path(err.filename).name})" if err.filename else ""
        raise StudyInputError(
            f"DIR: cannot write the figures into {folder}: {what}{where}"
        ) from None
    except _UNDRAWABLE as err:  # the schema's safety net: one line, not a traceback
        first = (str(err).splitlines() or [""])[0]
        raise StudyInputError(
            f"DIR: results.json cannot be drawn: {type(err).__name__}: {first}"
        ) from None
    finally:
        if not drawn:  # the figures a failure left open
            for num in set(plt.get_fignums()) - open_before:
                plt.close(num)
    return sorted(p for p in folder.glob("*.png") if before.get(p) != p.stat().st_mtime_ns)


# what a plot raises on values of the right kinds it still cannot draw (caught by `replot`)
_UNDRAWABLE = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    ZeroDivisionError,
    OverflowError,
    StopIteration,
)


def one_line_usage_error(message: str) -> str:
    """argparse's "argument --L: values must ..." as the studies say it: "--L: ..."."""
    return re.sub(r"^argument ([^:]+): ", r"\1: ", message)


class _RaisingParser(argparse.ArgumentParser):
    """The command line's parser for `run_study`: its errors raise `StudyInputError`."""

    def error(self, message):
        raise StudyInputError(one_line_usage_error(message))


def _as_text(value) -> str:
    if isinstance(value, bool):
        return str(value)  # refused by every numeric type, as the command line would
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_as_text(v) for v in value)
    return str(value)


def _as_argv(parser: argparse.ArgumentParser, options: dict, name: str) -> tuple[list, dict]:
    """The command-line tokens of `options` (Python names, parsed values) so that the
    parser checks them as it checks the command line; objects it cannot read as text (a
    block or law given as a Python object) come back apart, to be set after parsing."""
    by_dest = {a.dest: a for a in parser._actions if a.option_strings}
    argv, objects = [], {}
    for key, value in options.items():
        action = by_dest.get(key)
        if action is None:
            raise ValueError(f"{key}: not an option of the study {name!r}")
        if value is None:
            continue  # the option left out
        flag = action.option_strings[0]
        if isinstance(action, argparse.BooleanOptionalAction):
            if not isinstance(value, bool):
                raise StudyInputError(f"{flag}: expected True or False, got {value!r}")
            argv.append(flag if value else f"--no-{flag[2:]}")
        elif action.nargs == 0:  # store_true
            if not isinstance(value, bool):
                raise StudyInputError(f"{flag}: expected True or False, got {value!r}")
            if value != action.default:
                argv.append(flag)
        elif action.type is not None or action.choices is not None:
            argv.append(f"{flag}={_as_text(value)}")
        elif isinstance(value, str):
            argv.append(f"{flag}={value}")
        else:
            objects[key] = value
    return argv, objects


def parse_study_options(name: str, out, options: dict) -> argparse.Namespace:
    """The namespace `meanfield study NAME --out OUT ...` would give for `options`,
    every value checked by the command line's own types and choices (one line,
    `StudyInputError`), before anything is made."""
    if name not in STUDIES:
        raise ValueError(f"name: unknown study {name!r}; one of {', '.join(STUDIES)}")
    module = STUDIES[name]
    parser = _RaisingParser(prog=f"meanfield study {name}", allow_abbrev=False)
    add_common_arguments(parser, name)
    module.add_arguments(parser)
    argv, objects = _as_argv(parser, options, name)
    args = parser.parse_args([f"--out={out}", *argv])
    for key, value in objects.items():
        setattr(args, key, value)
    args.study = name
    resolve_out(args)
    return args


def run_study(name: str, *, out: str, **options) -> dict:
    """Run the study `meanfield study NAME` from Python and return its `results.json`.

    `options` are the command line's, by their Python names (`L=[4, 8, 16]`,
    `seeds=10`, `preset="quick"`, `resume=True`, ...) with values of their parsed types;
    an option the study does not have is refused with a one-line `ValueError` naming
    it, and every value goes through the command line's own checks: what the command
    line refuses, this refuses with the same one-line message (`StudyInputError`),
    before any folder is made.
    """
    import json
    from pathlib import Path

    args = parse_study_options(name, out, options)
    module = STUDIES[name]
    import jax

    from ..runtime.releases import KnownBadReleaseError, check_release
    from .folder import probe_lock, release_all

    try:
        check_release(allow=bool(args.allow_known_bad_jax))
    except KnownBadReleaseError as err:
        raise KnownBadReleaseError(f"allow_known_bad_jax: {err}") from None
    probe_lock(args.out)

    x64 = jax.config.read("jax_enable_x64")
    try:
        module.run(args)
    finally:
        release_all()  # the output folder's lock
        jax.config.update("jax_enable_x64", x64)  # the study set its own precision
    with open(Path(args.out) / "results.json") as f:
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
