"""Every notebook in notebooks/ runs top to bottom at its smallest size."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

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
        "two_layer",
        "shapes",
        "plain_vs_residual",
        "beyond_initialisation",
        "training_regimes",
    } <= names


def _run_here(path, cwd, monkeypatch, capsys) -> str:
    """Run the notebook `path` as `python path` would, in this process, and return what it
    printed: `__main__`, `sys.argv`, its folder first on `sys.path`, the working folder
    `cwd`, JAX's float and rank-promotion settings at their defaults (the suite's are set
    back after), matplotlib's settings restored. In this process it reuses the programs
    the suite has already compiled and does not import the package again (about 1.5 s per
    notebook on 2 cores; the ten notebooks 84 s → 68 s one after the other)."""
    import runpy

    import jax
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", [str(path)])
    monkeypatch.syspath_prepend(str(path.parent))
    monkeypatch.setenv("MEANFIELD_NOTEBOOK_SIZE", "test")
    monkeypatch.delenv("MEANFIELD_FIGURES", raising=False)
    settings = {k: getattr(jax.config, k) for k in ("jax_enable_x64", "jax_numpy_rank_promotion")}
    jax.config.update("jax_enable_x64", False)
    jax.config.update("jax_numpy_rank_promotion", "allow")
    capsys.readouterr()
    try:
        with matplotlib.rc_context():
            runpy.run_path(str(path), run_name="__main__")
    finally:
        for k, v in settings.items():
            jax.config.update(k, v)
        plt.close("all")
    return capsys.readouterr().out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path, monkeypatch, capsys):
    out = _run_here(path, tmp_path, monkeypatch, capsys)
    # run as a script (no display), a notebook keeps every figure it draws and says where
    shown = len(re.findall(r"^\s*show\(", path.read_text(), flags=re.M))
    saved = sorted((tmp_path / "figures" / path.stem).glob("*.png"))
    if shown:
        assert saved, out[-2000:]
        for png in saved:
            assert f"figure saved: {Path('figures') / path.stem / png.name}" in out
            assert png.stat().st_size > 10_000, png  # an image, not an empty canvas
    else:
        assert not saved


def test_a_notebook_runs_as_a_script_too(tmp_path):
    """A notebook in a process of its own, as `python notebooks/NAME.py`, with the package
    found from the checkout (the others run in the test's process, above): the smallest."""
    env = {
        **os.environ,
        "MEANFIELD_NOTEBOOK_SIZE": "test",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": PYTHONPATH,
    }
    path = ROOT / "notebooks" / "user_blocks.py"
    proc = subprocess.run(
        [sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]


# the budget of the README test's automatic design: that of `test_custom_block.SMALL`, but a
# final Monte-Carlo reference of at most 2^15 particles (not 2^17: 4 s less). The design is
# the same in kind: no line against L (the reference's error allows depths up to 2), a line
# against M (widths 1..8 at L = 8), and points below 10x the reference's error left out
README_BUDGET = {
    "max_depth": 32, "max_width": 2**12, "units": 2**16, "pilot_seeds": 2,
    "pilot_particles": 2**12, "particles_max": 2**15,
}  # fmt: skip


def _python_blocks(text):
    """The ```python blocks of a markdown text, in order."""
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_custom_block_snippet_runs(tmp_path, monkeypatch, capsys):
    """The README's "Your own block" runs as written: its `myblocks.py` saved beside the
    second snippet, which runs the whole automatic study (pilot, design, refined
    Monte-Carlo reference, grid, fits) and prints its fits. Only the preset's budget is
    made small, so that it runs in seconds; every point a fit uses lies 10x above the
    reference's own error."""
    import jax

    from meanfield.studies.mean_ode import design as mean_ode_design

    blocks = _python_blocks((ROOT / "README.md").read_text())
    first = next(i for i, b in enumerate(blocks) if b.startswith("# myblocks.py"))
    (tmp_path / "myblocks.py").write_text(blocks[first])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(mean_ode_design.AUTO, "quick", README_BUDGET)
    monkeypatch.setattr(mean_ode_design, "PILOT_POINTS", [(2, 1), (2, 16), (8, 1), (8, 16)])
    namespace: dict = {}
    with jax.enable_x64(True):
        exec(compile(blocks[first + 1], "README.md", "exec"), namespace)
    results = namespace["results"]
    out = capsys.readouterr().out
    assert (tmp_path / "results" / "sine-py" / "results.json").exists()
    floor = results["reference"]["error_estimate"]
    fitted = [
        f for f in results["fits"] if f["quantity"] == "delta_h" and f.get("against") in ("L", "M")
    ]
    assert fitted and all(f"{f['against']} " in out for f in fitted), out
    assert any(len(f["sizes"]) >= 3 and f["slope"] is not None for f in fitted), fitted
    by = {(p["L"], p["M"], p["steps"]): p for p in results["points"]}
    for f in fitted:
        for size in f["sizes"]:
            L, M = (size, f["fixed"]["M"]) if f["against"] == "L" else (f["fixed"]["L"], size)
            assert by[(int(L), int(M), f["fixed"]["steps"])]["delta_h"]["mean"] >= 10 * floor
    # the sine unit's Monte-Carlo term is 6x its Euler term: the small budget cannot place
    # a line against L, and the study says so instead of fitting what it cannot judge
    assert not results["design"]["lines"]["ok_L"]
    assert any("fewer than three depths" in w for w in results["warnings"])


def test_readme_pieces_from_python_print_what_the_readme_says(tmp_path):
    """The README's "The pieces, from Python" runs as written, in a fresh process, and
    prints exactly the line its prose says it prints (the fitted rate against L, its
    interval holding the theorem's -1)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The pieces, from Python\n", 1)[1].split("\n## ", 1)[0]
    (said,) = re.findall(r"This prints `(.*?)`", section.replace("\n", " "))
    (code,) = _python_blocks(section)
    assert len(code.strip().splitlines()) <= 26
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
        timeout=HANG_GUARD_S, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == said
    slope, lo, hi = map(float, re.findall(r"-?\d+\.\d+", said))
    assert lo <= -1.0 <= hi and lo <= slope <= hi


def test_show_saves_where_a_script_cannot_show(tmp_path, monkeypatch, capsys):
    """`plotting.show` with a file backend: the figure goes to MEANFIELD_FIGURES (else
    `figures/<script>`), the path is printed; a name with a folder in it is refused."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import show

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["notebooks/demo.py"])
    monkeypatch.delenv("MEANFIELD_FIGURES", raising=False)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    assert show("line", fig) == Path("figures/demo/line.png")
    assert (tmp_path / "figures" / "demo" / "line.png").stat().st_size > 1000
    assert "figure saved: figures/demo/line.png" in capsys.readouterr().out
    monkeypatch.setenv("MEANFIELD_FIGURES", str(tmp_path / "elsewhere"))
    assert show("line") == tmp_path / "elsewhere" / "line.png"
    with pytest.raises(ValueError, match="name"):
        show("../line")
    (tmp_path / "afile").write_text("not a folder")
    for below in ("afile", "afile/below"):
        monkeypatch.setenv("MEANFIELD_FIGURES", str(tmp_path / below))
        with pytest.raises(ValueError, match="^MEANFIELD_FIGURES: cannot make") as err:
            show("line")
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="^folder: cannot make"):
        show("line", folder=tmp_path / "afile")
    plt.close("all")
