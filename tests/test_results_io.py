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
