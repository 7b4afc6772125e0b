"""The command line every study shares: its common options (`--out`, `--seed`,
`--preset`, `--x64`, `--resume`, the several-process options), their checks, the study's
default folder, and the same options given from Python, checked by the same parser."""

import argparse
import os
import re

from ..runtime.errors import StudyInputError
from .args import nonnegative_int, positive_float, positive_int, seed_int


def add_common_arguments(parser: argparse.ArgumentParser, study, name: str) -> None:
    """The options every study shares, on the parser of `study` (a module that follows
    `harness.protocol.Study`), run as `meanfield study NAME`."""
    module = study
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


def resolve_out(args, study) -> None:
    """`--out` left out: the study's own default folder (`results/NAME`, or the study's
    `default_out(args)`, e.g. one folder per depth law); an empty `--out` is refused (it
    would be the current folder)."""
    if getattr(args, "out", None) is None:
        own = getattr(study, "default_out", None)
        args.out = own(args) if own else f"results/{args.study}"
    elif not str(args.out).strip():
        raise StudyInputError(
            f"--out: {args.out!r} names no folder; give one (e.g. results/{args.study})"
        )


def one_line_usage_error(message: str) -> str:
    """argparse's "argument --L: values must ..." as the studies say it: "--L: ..."."""
    return re.sub(r"^argument ([^:]+): ", r"\1: ", message)


class RaisingParser(argparse.ArgumentParser):
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


def parse_options(study, name: str, out, options: dict) -> argparse.Namespace:
    """The namespace `meanfield study NAME --out OUT ...` would give for `options` (the
    study `study`, a module that follows `harness.protocol.Study`), every value checked
    by the command line's own types and choices (one line, `StudyInputError`), before
    anything is made."""
    parser = RaisingParser(prog=f"meanfield study {name}", allow_abbrev=False)
    add_common_arguments(parser, study, name)
    study.add_arguments(parser)
    argv, objects = _as_argv(parser, options, name)
    args = parser.parse_args([f"--out={out}", *argv])
    for key, value in objects.items():
        setattr(args, key, value)
    args.study = name
    resolve_out(args, study)
    return args
