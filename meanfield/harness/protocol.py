"""What a study provides, and the check that it does.

A study is a module (`meanfield/studies/NAME/study.py`) registered under its command-line
name in `meanfield.studies.MODULES`. The harness does the rest: the common options, the
folder (lock, manifest, resume), the grid of points with its self-check, the launcher,
`meanfield plot`. Its `HELP` may live in its package's `__init__.py` and its options
(`PRESETS`, `DEFAULT_X64`, `add_arguments`, `default_out`) in the package's `options.py`,
re-exported by `study.py`: the command line reads them there, without JAX
(`meanfield.studies.help_line`, `study_options`). How to add one:
docs/adding-a-study.md.
"""

import argparse
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from .schema_language import Spec


@runtime_checkable
class Study(Protocol):
    """The few things a study module defines.

    - `HELP`: one line for `meanfield study --help`;
    - `PRESETS`: problem sizes by name, the default first (`quick`), each a dict of the
      values its options take when left out;
    - `DEFAULT_X64`: whether it computes in float64 unless `--no-x64`;
    - `add_arguments(parser)`: its own options (the common ones are added by the harness,
      `harness.options.add_common_arguments`);
    - `configure(args)`: its configuration (a dict, written to `results.json`) from the
      parsed options, every value checked and refused in one line (`StudyInputError`)
      before anything is written; data it reads are read here;
    - `cost_parts(args, cfg)`: the estimated cost of its parts (`harness.args.Cost`:
      memory, work, largest array) and any limit of its own (`harness.args.Limit`), which
      the launcher checks, once, before `run` (`harness.launcher.configured`);
    - `run(args, cfg)`: `harness.runner.start_study(args, cfg)`, its points through
      `runner.run_points`, and `runner.finish(results, plot=plot)`;
    - `plot(out, results)`: its figures from `results.json` alone (`meanfield plot DIR`
      redraws them), or `plot = None` for a study without figures;
    - `SCHEMA`: what its figures read from `results.json`, in the schema language
      (`harness.schema_language.study(config, fields)`), checked before `meanfield plot`
      draws anything.

    Optional: `default_out(args)`, its default folder where `--out` is left out
    (otherwise `results/NAME`).
    """

    HELP: str
    PRESETS: Mapping[str, Mapping[str, object]]
    DEFAULT_X64: bool
    SCHEMA: Spec
    plot: Callable[[Path, dict], None] | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def configure(self, args: argparse.Namespace) -> dict: ...

    def cost_parts(self, args: argparse.Namespace, cfg: dict) -> list: ...

    def run(self, args: argparse.Namespace, cfg: dict) -> None: ...


# the positional parameters each function takes
_ARITY = {
    "add_arguments": 1,
    "configure": 1,
    "cost_parts": 2,
    "run": 2,
    "plot": 2,
    "default_out": 1,
}


def problems(study) -> list[str]:
    """What `study` (a module, or any object with its attributes) lacks or gets wrong
    against `Study`: one line each, empty when it follows the protocol."""
    found = []
    help_text = getattr(study, "HELP", None)
    if not isinstance(help_text, str) or not help_text.strip() or "\n" in help_text:
        found.append(f"HELP: one non-empty line, got {help_text!r}")
    presets = getattr(study, "PRESETS", None)
    if not isinstance(presets, Mapping) or not presets:
        found.append(f"PRESETS: a non-empty dict of problem sizes, got {presets!r}")
    elif not all(isinstance(k, str) and isinstance(v, Mapping) for k, v in presets.items()):
        found.append("PRESETS: each preset a name and a dict of option values")
    elif next(iter(presets)) != "quick":
        found.append(f"PRESETS: the default (first) preset is 'quick', got {next(iter(presets))!r}")
    if not isinstance(getattr(study, "DEFAULT_X64", None), bool):
        found.append("DEFAULT_X64: True or False")
    if not isinstance(getattr(study, "SCHEMA", None), Spec):
        found.append("SCHEMA: what its figures read, a schema_language spec (`study(...)`)")
    for name, arity in _ARITY.items():
        optional = name in ("plot", "default_out")
        if not hasattr(study, name):
            if not optional or name == "plot":
                found.append(
                    f"{name}: missing" + (" (plot = None for no figures)" if optional else "")
                )
            continue
        fn = getattr(study, name)
        if fn is None and optional:
            continue
        if not callable(fn):
            found.append(f"{name}: not a function")
            continue
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        if len(params) != arity:
            found.append(f"{name}: takes {arity} argument(s), not {len(params)}")
    return found
