"""Issue 46, item 6: `study variance` with a block (or law) that gives NaN for some draws
counts them (`exploded`) per point and in the estimate of c, averages over the finite
ones, says so in a warning line, and draws what is finite (a point with no finite network
left out and named in the legend; no law where c is unknown)."""

import json

from meanfield.cli import main

BLOCKS = '''
import jax.numpy as jnp

import meanfield as mf


def law():
    return mf.TwoLayerGaussianLaw(4, sigma_u=0.5, sigma_v=1.0)


class SometimesNaN(mf.AbstractUnitBlock):
    """A ReLU 2LP unit, NaN for about 2% of the draws (u[0] > 1, two standard deviations)
    and at every state whose norm is not 1 (every layer after the first)."""

    def __call__(self, h, z):
        out = z.v * jnp.maximum(z.u @ h, 0.0)
        bad = (z.u[0] > 1.0) | (jnp.abs(jnp.sqrt(h @ h) - 1.0) > 1e-6)
        return jnp.where(bad, jnp.nan, out)


class NaNOffTheInput(mf.AbstractUnitBlock):
    """A ReLU 2LP unit, NaN at every state but the study's input x = (1, ..., 1)/sqrt(d):
    every draw of c (random directions) and every layer after the first."""

    def __call__(self, h, z):
        out = z.v * jnp.maximum(z.u @ h, 0.0)
        far = jnp.max(jnp.abs(h - 0.5)) > 1e-9
        return jnp.where(far, jnp.nan, out)
'''

TINY = ["--L", "1,4", "--M", "4", "--d", "4", "--nets", "40", "--c-samples", "500",
        "--gammas", "0.75", "--no-progress"]  # fmt: skip


def _run(tmp_path, capsys, block):
    (tmp_path / "nanblocks.py").write_text(BLOCKS)
    out = tmp_path / "out"
    where = tmp_path / "nanblocks.py"
    argv = ["study", "variance", "--block", f"{where}:{block}", "--law", f"{where}:law",
            *TINY, "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    return out, results, captured.out + captured.err


def test_non_finite_draws_are_counted_averaged_over_and_said(tmp_path, capsys):
    out, r, said = _run(tmp_path, capsys, "SometimesNaN")
    ref = r["reference"]
    assert 0 < ref["c_exploded"] < 100, ref  # about 2% of the 500 draws
    assert ref["c"] is not None and 0 < ref["c"] < 1, ref  # the mean over the others
    shallow, deep = sorted(r["points"], key=lambda p: p["L"])
    assert shallow["draws"] == deep["draws"] == 40
    # depth 1: the networks with a unit of u[0] > 1 exploded, the mean is over the rest
    assert 0 < shallow["exploded"] < 40 and shallow["mean"] is not None, shallow
    assert shallow["mean"] > 0 and shallow["theory"] is not None
    # depth 4: every network leaves the unit sphere after its first layer
    assert deep["exploded"] == 40 and deep["mean"] is None, deep
    warnings = r["warnings"]
    c_line = [w for w in warnings if w.startswith("c: ")]
    assert len(c_line) == 1 and f"{ref['c_exploded']} of the 500 draws" in c_line[0]
    (line,) = [w for w in warnings if "network(s) exploded" in w]
    total = shallow["exploded"] + deep["exploded"]
    assert line.startswith(f"{total} network(s) exploded") and "no finite network at L=4" in line
    assert "network(s) exploded" in said  # printed, not only stored
    assert (out / "variance_law.png").exists()
    assert main(["plot", str(out)]) == 0  # redrawn from results.json alone


def test_an_unknown_c_leaves_the_law_out_of_the_figure(tmp_path, capsys):
    """Every draw of c non-finite: c is unknown (null), said, and the figure draws the
    finite points without a law (it raised TypeError)."""
    out, r, said = _run(tmp_path, capsys, "NaNOffTheInput")
    assert r["reference"]["c"] is None and r["reference"]["c_exploded"] == 500
    assert any("c is unknown" in w for w in r["warnings"]), r["warnings"]
    shallow, deep = sorted(r["points"], key=lambda p: p["L"])
    assert shallow["exploded"] == 0 and shallow["mean"] is not None
    assert shallow["theory"] is None and shallow["z"] is None
    assert all(row["holds"] is None for row in shallow["maximal_bound"])
    assert deep["exploded"] == 40 and deep["mean"] is None
    assert (out / "variance_law.png").exists()
    # the figure from the stored results alone (c null there)
    from meanfield.studies.variance.study import plot

    again = tmp_path / "again"
    again.mkdir()
    plot(again, r)
    assert (again / "variance_law.png").exists()


def test_the_legend_names_points_with_no_finite_network():
    from meanfield.studies.variance.plot import _no_finite
    from meanfield.studies.variance.study import _exploded_warning

    rows = [{"L": 4, "gamma": 0.5, "mean": 1.0, "exploded": 3},
            {"L": 16, "gamma": 0.5, "mean": None, "exploded": 10}]  # fmt: skip
    assert _no_finite(rows) == ", no finite network at L = 16 (not drawn)"
    assert _no_finite(rows[:1]) == ""
    line = _exploded_warning(rows, 10)
    assert line.startswith("13 network(s) exploded") and "L=16 γ=0.5 (10)" in line
    assert _exploded_warning([{**rows[0], "exploded": 0}], 10) is None
