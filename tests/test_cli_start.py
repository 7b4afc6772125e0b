"""The command line answers at once where it runs nothing (issue 77, item 4): `--help`,
`meanfield study NAME --help` and a refusal of a study's option read the studies'
package fronts and `options.py` alone, without importing JAX; `import meanfield` imports
its names at their first use. Each check below fails where an import pulls JAX in (the
way they were before: every study module, with JAX, to build the parser)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[1]

# one refusal of each study's own options (argparse's, before any study code runs)
REFUSALS = {
    "mean-ode": ["--L", "3,x"],
    "sde": ["--weights", "pink"],
    "phases": ["--seeds", "0"],
    "response": ["--inits", "-1"],
    "variance": ["--nets", "x"],
    "tangent-kernel": ["--nets", "0"],
    "two-layer": ["--steps", "0"],
    "two-layer-phases": ["--seeds", "0"],
    "resnet-phases": ["--L", "0"],
    "stochastic-approximation": ["--seeds", "0"],
    "shapes": ["--L", "0"],
    "plain-vs-residual": ["--seeds", "0"],
    "trained-weights": ["--optimizer", "lbfgs"],
    "regimes": ["--L", "2,x"],
    "approximation": ["--budgets", "0"],
    "coord-check": ["--widths", "0"],
    "transfer": ["--widths", "0"],
}


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
        text=True, timeout=HANG_GUARD_S, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_every_refusal_and_help_runs_without_jax():
    from meanfield.studies import MODULES

    assert set(REFUSALS) == set(MODULES)
    commands = [["--help"], ["study", "--help"], ["plot", "/nonexistent-folder"]]
    commands += [["study", name, "--help"] for name in MODULES]
    commands += [["study", name, *bad] for name, bad in REFUSALS.items()]
    proc = _run(f"""
        import sys
        from meanfield.cli import main
        codes = []
        for argv in {commands!r}:
            try:
                codes.append(main(argv))
            except SystemExit as stop:
                codes.append(stop.code)
        print("CODES", codes)
        print("JAX", "jax" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines()
                 if line.startswith(("CODES", "JAX")))  # fmt: skip
    codes = eval(lines["CODES"])  # noqa: S307 - our own printed list
    helps = 3 + len(MODULES)  # every --help exits 0; the plot refusal 2
    assert codes[:helps] == [0, 0, 2] + [0] * len(MODULES)
    assert codes[helps:] == [2] * len(REFUSALS), proc.stderr
    # each refusal is one line naming its option
    refusals = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(refusals) == 1 + len(REFUSALS)
    for line, (name, bad) in zip(refusals[1:], REFUSALS.items(), strict=True):
        assert line.startswith(f"meanfield study {name}: error: {bad[0]}"), line
    assert lines["JAX"] == "False"


def test_import_meanfield_defers_its_names():
    proc = _run("""
        import sys
        import meanfield
        print("BEFORE", "jax" in sys.modules)
        meanfield.ResNet, meanfield.solve_mean_ode, meanfield.blocks.DenseBlock
        print("AFTER", "jax" in sys.modules, "ResNet" in dir(meanfield))
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "BEFORE False" in proc.stdout and "AFTER True True" in proc.stdout


def test_an_unknown_name_is_an_attribute_error():
    import meanfield

    with pytest.raises(AttributeError):
        meanfield.NoSuchName  # noqa: B018


def test_the_choices_written_out_are_the_registries():
    """The command line's choices, written without JAX (`studies/shared/choices.py`),
    are each registry's names in its order."""
    from meanfield.blocks.activations import ACTIVATIONS
    from meanfield.diagnostics.phases import LOSSES
    from meanfield.diagnostics.signal_propagation import METHODS
    from meanfield.io.text import TEXTS
    from meanfield.studies.shared import choices
    from meanfield.training.approximation import ARCHITECTURES
    from meanfield.training.res1 import OPTIMIZERS

    assert choices.ACTIVATIONS == tuple(ACTIVATIONS)
    assert choices.TEXTS == tuple(TEXTS)
    assert choices.RESPONSE_METHODS == tuple(METHODS)
    assert choices.RES1_OPTIMIZERS == tuple(OPTIMIZERS)
    assert choices.ARCHITECTURES == tuple(ARCHITECTURES)
    assert choices.PHASE_LOSSES == tuple(LOSSES)


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_study_module_carries_its_options(name):
    """The study's module re-exports what its `options.py` defines (the protocol reads
    the module; the command line reads `options.py`): the same objects."""
    from meanfield.studies import STUDIES, help_line, study_options

    options = study_options(name)
    for attr in ("PRESETS", "DEFAULT_X64", "add_arguments", "default_out"):
        if hasattr(options, attr) or hasattr(STUDIES[name], attr):
            assert getattr(STUDIES[name], attr) is getattr(options, attr), attr
    assert STUDIES[name].HELP == help_line(name)
