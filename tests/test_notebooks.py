"""Every notebook in notebooks/ runs top to bottom at its smallest size."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    names = {p.stem for p in NOTEBOOKS}
    assert {
        "mean_ode_convergence",
        "custom_block",
        "neural_sde_limits",
        "optimal_residual_scaling",
    } <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    env = {**os.environ, "MEANFIELD_NOTEBOOK_SIZE": "test", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
