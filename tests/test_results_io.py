"""What a finished study leaves for its user: `results.json` with the versions it ran with,
its figures redrawn from `results.json` alone (`meanfield plot DIR`), the typed
`meanfield.load_results`, one default folder per depth law, and a printed summary."""

import argparse
import json

import pytest

import meanfield as mf
from meanfield.cli import main
from meanfield.studies import StudyInputError, replot, resolve_out

SMALL_SDE = ["--L", "4,8,16", "--seeds", "3", "--d", "3"]


@pytest.fixture(scope="module")
def sde_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("sde")
    assert main(["study", "sde", "--weights", "smooth", "--out", str(out), "--overwrite",
                 *SMALL_SDE]) == 0  # fmt: skip
    return out


def test_versions_recorded(sde_folder):
    r = json.loads((sde_folder / "results.json").read_text())
    for key in ("meanfield", "jax", "jaxlib", "diffrax", "equinox", "optax", "numpy", "device",
                "float"):  # fmt: skip
        assert r["versions"][key], key
    assert r["versions"]["float"] == "float64"


def test_plot_redraws_the_figures_from_results_alone(sde_folder, capsys):
    figure = sde_folder / "strong_error.png"
    before = figure.read_bytes()
    figure.unlink()
    assert main(["plot", str(sde_folder)]) == 0
    assert "strong_error.png" in capsys.readouterr().out
    assert figure.read_bytes() == before  # the same figure, drawn from the same numbers


def test_plot_refuses_what_is_not_a_study(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().err
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(StudyInputError, match="unreadable"):
        replot(tmp_path)


def test_load_results_is_typed(sde_folder, tmp_path):
    r = mf.load_results(sde_folder)
    assert r.study == "sde" and r.config["weights"] == "smooth"
    fit = r.fit("error_final", "L")
    assert fit is not None and fit["slope"] < 0
    assert r["critical_beta"] == 1.0 and r.figures()
    with pytest.raises(ValueError, match="^path: no results.json"):
        mf.load_results(tmp_path)


def test_default_folders_per_depth_law():
    for weights in ("brownian", "fbm", "smooth"):
        args = argparse.Namespace(study="sde", out=None, weights=weights)
        resolve_out(args)
        assert args.out == f"results/sde-{weights}"
    args = argparse.Namespace(study="variance", out=None)
    resolve_out(args)
    assert args.out == "results/variance"


def test_summary_printed_on_success(tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["study", "sde", "--weights", "smooth", "--out", str(out), *SMALL_SDE]) == 0
    text = capsys.readouterr().out
    assert text.startswith("sde: results") and "error_final vs L" in text
    assert text.rstrip().splitlines()[-1] == (
        f"  wrote {out / 'results.json'} and 1 figure(s): strong_error.png"
    )


def test_the_headline_is_what_the_command_line_printed(tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["study", "sde", "--weights", "smooth", "--out", str(out), *SMALL_SDE]) == 0
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    assert mf.load_results(out).headline() == printed[:-1]  # all but where it wrote
    assert printed[-1].startswith("  wrote ")


def _results(tmp_path, fits, rates=None):
    body = {"study": "mean-ode", "config": {}, "fits": fits}
    if rates is not None:
        body["rates"] = rates
    (tmp_path / "results.json").write_text(json.dumps(body))
    return mf.load_results(tmp_path)


def test_a_fit_is_read_at_the_headlines_step_unless_asked(tmp_path):
    """Fits at steps 0 and 1 (the step-0 one first, as results.json lists them): `fit`
    returns the step-1 one (the headline's) with its step on top; `step=0` the other;
    a study without steps: the first, step None; `steps=` as a fixed size still works."""
    at = lambda k, slope: {"quantity": "delta_h", "against": "M", "slope": slope,  # noqa: E731
                           "fixed": {"L": 8, "steps": k}}  # fmt: skip
    r = _results(tmp_path, [at(0, -0.515), at(1, -0.498)],
                 rates=[{"quantity": "delta_h", "q": 0.4, "fixed": {"steps": 0}},
                        {"quantity": "delta_h", "q": 0.5, "fixed": {"steps": 1}}])  # fmt: skip
    assert r.step == 1
    assert (r.fit("delta_h", "M")["slope"], r.fit("delta_h", "M")["step"]) == (-0.498, 1)
    assert r.fit("delta_h", "M", step=0)["slope"] == -0.515
    assert r.fit("delta_h", "M", steps=0)["slope"] == -0.515
    assert r.fit("delta_h", "M", step=None)["slope"] == -0.515  # any step: the first
    assert r.fit("delta_h", "L") is None and r.fit("delta_h", "M", step=2) is None
    assert r.rate("delta_h")["q"] == 0.5 and r.rate("delta_h", step=0)["q"] == 0.4
    plain = _results(tmp_path, [{"quantity": "e", "against": "L", "slope": -1.0}])
    assert plain.step is None and plain.fit("e", "L")["step"] is None
    with pytest.raises(ValueError, match="^headline: .* before the printed summary"):
        plain.headline()


def test_the_tables_hold_every_fit_and_point(tmp_path):
    r = _results(
        tmp_path,
        [{"quantity": "delta_h", "against": "M", "slope": -0.5, "ci95": [-0.6, -0.4],
          "theory": -0.5, "theory_inside": True, "fixed": {"L": 8, "steps": 1}}],
        rates=[{"quantity": "delta_h", "p": 1.0, "q": 0.5, "fixed": {"steps": 1}}],
    )  # fmt: skip
    table = r.fits_table()
    assert [row["table"] for row in table.rows] == ["fits", "rates"]
    text = table.to_csv(tmp_path / "fits.csv")
    assert (tmp_path / "fits.csv").read_text() == text
    lines = text.splitlines()
    assert lines[0].startswith("table,quantity,against,step,slope,theory,theory_inside,p,q,")
    assert lines[1].startswith("fits,delta_h,M,1,-0.5,-0.5,True,,,-0.6,-0.4,")
    assert lines[2].startswith("rates,delta_h,,1,,,,1.0,0.5,")
    body = json.loads((tmp_path / "results.json").read_text())
    body["points"] = [{"L": 8, "M": 4, "delta_h": {"mean": 0.1, "draws": [1, 2, 3]}}]
    (tmp_path / "results.json").write_text(json.dumps(body))
    points = mf.load_results(tmp_path).points_table()
    assert points.columns == ["L", "M", "delta_h.mean"] and points.rows[0]["delta_h.mean"] == 0.1
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="^to_pandas: pandas is not installed"):
            points.to_pandas()
    else:
        assert list(points.to_pandas().columns) == points.columns


def test_plot_exports_formats_at_a_resolution_and_refuses_others(sde_folder, capsys):
    import matplotlib.image as mpimg

    assert main(["plot", str(sde_folder), "--format", "pdf,svg", "--dpi", "150"]) == 0
    said = capsys.readouterr().out
    assert "strong_error.pdf" in said and "strong_error.svg" in said
    assert (sde_folder / "strong_error.pdf").read_bytes().startswith(b"%PDF")
    assert b"<svg" in (sde_folder / "strong_error.svg").read_bytes()[:1000]
    height, width = mpimg.imread(sde_folder / "strong_error.png").shape[:2]
    assert width % 150 == 0 or abs(width / 150 - round(width / 150, 1)) < 0.01  # inches × dpi
    assert main(["plot", str(sde_folder)]) == 0  # back at its own resolution
    for argv, line in (
        (["--format", "jpg"], "--format: one or more of png, pdf, svg, eps, got 'jpg'"),
        (["--dpi", "10"], "--dpi: a number in [50, 1200], got '10'"),
    ):
        with pytest.raises(SystemExit):
            main(["plot", str(sde_folder), *argv])
        assert capsys.readouterr().err.strip().endswith(line)


def test_plot_writes_one_panel_alone_by_title_or_number(tmp_path, capsys):
    """`meanfield plot DIR --panel TEXT`: every panel whose title holds TEXT (or panel
    number TEXT) written alone beside its figure, smaller than the figure, in each
    `--format` too; a TEXT no panel holds is refused in one line listing the panels."""
    import gzip
    from pathlib import Path

    import matplotlib.image as mpimg

    runs = Path(__file__).with_name("data") / "tiny_results"
    (tmp_path / "results.json").write_bytes(
        gzip.decompress((runs / "mean-ode.json.gz").read_bytes())
    )
    assert main(["plot", str(tmp_path), "--panel", "against L", "--format", "pdf"]) == 0
    said = capsys.readouterr().out
    alone = sorted(tmp_path.glob("convergence_panel*.png"))
    assert alone and all(p.name in said for p in alone)
    assert all(p.with_suffix(".pdf").read_bytes().startswith(b"%PDF") for p in alone)
    whole = mpimg.imread(tmp_path / "convergence.png").shape
    for p in alone:
        h, w = mpimg.imread(p).shape[:2]
        assert w < whole[1] / 2 and h < whole[0] / 2
    assert main(["plot", str(tmp_path), "--panel", "2"]) == 0
    assert (tmp_path / "convergence_panel2.png").exists()
    assert main(["plot", str(tmp_path), "--panel", "no such panel"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meanfield plot: error: --panel: no panel's title holds 'no such panel'")
    assert "convergence.png 1: " in err
    assert main(["plot", str(tmp_path), "--panel", " "]) == 2
