"""The figure check of issue 47 on the phases study (tests/figure_points_signal.py): a point
the figure leaves out is reported."""

import json

import matplotlib.figure
import matplotlib.pyplot as plt
from figure_check import points_missing

from meanfield.cli import main
from meanfield.studies.phases import study as phases


def test_a_point_left_out_of_phases_png_is_reported(tmp_path, monkeypatch):
    run = tmp_path / "run"
    argv = ["study", "phases", "--L", "4,8", "--beta", "0.25,1", "--seeds", "4", "--d", "4",
            "--bootstrap", "20", "--out", str(run), "--no-progress"]  # fmt: skip
    assert main(argv) == 0  # its figures, from every point, are checked by conftest.py
    body = json.loads((run / "results.json").read_text())
    *kept, gone = body["points"]
    saved, close = {}, plt.close
    save = matplotlib.figure.Figure.savefig

    def keep(fig, fname, *args, **kwargs):
        saved[str(fname).rsplit("/", 1)[-1]] = fig
        return save(fig, fname, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)  # keep the figures to check
    bare = tmp_path / "bare"  # no results.json here: conftest.py checks nothing
    bare.mkdir()
    try:
        phases.plot(bare, {**body, "points": kept})  # every point but the last drawn
        missing = points_missing(saved["phases.png"], run / "phases.png")
    finally:
        for fig in saved.values():
            close(fig)
    where = f"at β={gone['beta']}, L={gone['L']}"
    assert len(missing) == 3 and all(where in m and "not drawn" in m for m in missing), missing
