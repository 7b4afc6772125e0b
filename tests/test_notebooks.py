"""Every notebook in notebooks/ runs top to bottom at its smallest size."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
# the package from this checkout even when it is not installed
PYTHONPATH = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


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
    env = {
        **os.environ,
        "MEANFIELD_NOTEBOOK_SIZE": "test",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": PYTHONPATH,
    }
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_readme_custom_block_snippet_runs(tmp_path):
    """The ten-line custom block of the README runs as written."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    start = text.index("```python\n") + len("```python\n")
    code = text[start : text.index("```", start)]
    script = tmp_path / "snippet.py"
    script.write_text("import jax\njax.config.update('jax_enable_x64', True)\n" + code)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[" in proc.stdout
