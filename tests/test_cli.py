"""The command line: help, info, one-line errors with exit code 2, python -m."""

import subprocess
import sys

import pytest
from conftest import HANG_GUARD_S

from meanfield.cli import main


def test_info_prints_versions_and_devices(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for word in ("jax", "diffrax", "equinox", "optax", "lineax", "device"):
        assert word in out


def test_info_says_the_precision_the_studies_use(monkeypatch):
    """Not JAX's switch alone (off in a fresh process while the studies run in float64):
    each study's default, read from the studies, and the API's."""
    from meanfield import cli
    from meanfield.studies import STUDIES

    text = "\n".join(cli.precision_lines(False))
    assert "float64, except trained-weights, coord-check, transfer (float32)" in text
    assert "Python API here: float32" in text
    for name in ("trained-weights", "coord-check", "transfer"):
        monkeypatch.setattr(STUDIES[name], "DEFAULT_X64", True)
    assert "float64 (every study)" in "\n".join(cli.precision_lines(True))


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "info" in out and "study" in out


def test_unknown_command_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["frobnicate"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "frobnicate" in err and "info" in err


def test_python_dash_m_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", "info"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0, proc.stderr
    assert "meanfield" in proc.stdout


def test_a_list_starting_with_a_negative_number_is_a_value(capsys):
    """`--beta -1,0.5` is read as the list (argparse alone says 'expected one argument'):
    a decreasing one reaches the list's own check, in one line naming the argument."""
    from meanfield.cli import join_negative_lists

    assert join_negative_lists(["study", "phases", "--beta", "-1,0.5", "--L", "4,8"]) == [
        "study",
        "phases",
        "--beta=-1,0.5",
        "--L",
        "4,8",
    ]
    # a single negative number argparse reads already; a flag's value is left alone
    assert join_negative_lists(["--lr", "-0.5", "--beta=-1,1"]) == ["--lr", "-0.5", "--beta=-1,1"]
    with pytest.raises(SystemExit) as err:
        main(["study", "phases", "--beta", "-0.5,-1"])
    assert err.value.code == 2
    msg = capsys.readouterr().err
    assert "--beta" in msg and "increasing" in msg and len(msg.strip().splitlines()) == 1
