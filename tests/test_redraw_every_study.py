"""Every study's figures redrawn from a finished tiny run's `results.json` alone, in this
process (`meanfield.studies.replot`): the fast tier's test of every figure module, each
figure checked as it is saved (tests/figure_check.py: every point of the results drawn,
no empty panel without its sentence). The runs are stored in tests/data/tiny_results
(`python benchmarks/fast_tier.py --fixtures DIR` writes them from the tiny runs in DIR:
`benchmarks/hostile_generated.make_plot_templates`); a change to what a study writes
means writing them again."""

import gzip
from pathlib import Path

import pytest

from meanfield import studies

RUNS = Path(__file__).with_name("data") / "tiny_results"


def _drawn_studies() -> list[str]:
    return [name for name in studies.MODULES if studies.STUDIES[name].plot is not None]


def test_every_study_with_figures_has_a_stored_tiny_run():
    stored = {p.name.removesuffix(".json.gz") for p in RUNS.glob("*.json.gz")}
    assert set(_drawn_studies()) <= stored, set(_drawn_studies()) - stored


@pytest.mark.parametrize(
    "name", sorted(p.name.removesuffix(".json.gz") for p in RUNS.glob("*.json.gz"))
)
def test_a_tiny_runs_figures_redraw_from_its_results_alone(name, tmp_path):
    out = tmp_path / name
    out.mkdir()
    (out / "results.json").write_bytes(gzip.decompress((RUNS / f"{name}.json.gz").read_bytes()))
    paths = studies.replot(out)
    assert paths, f"{name}: no figure drawn"
    for path in paths:
        assert Path(path).stat().st_size > 10_000, path
