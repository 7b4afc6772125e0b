"""The specs of tests/figure_points_training.py can fail: a figure drawn from honest results
shows every point they list, and the same figure checked against results that say more
(one value changed, as if the figure had dropped the point it holds) is reported."""

import json

import matplotlib.figure
from figure_check import points_missing


def _results():
    cfg = {"L": 8, "d": 2, "betas": [0.5, 1.0], "hursts": [], "inits": ["iid", "smooth"],
           "steps": 3, "optimizer": "adam", "seeds": 2, "lr": 1e-3,
           "data_description": "synthetic: none"}  # fmt: skip
    points = []
    for i, init in enumerate(cfg["inits"]):
        cells = []
        for j, beta in enumerate(cfg["betas"]):
            h = 0.1 + 0.2 * i + 0.05 * j

            def reg(v):
                return {"hurst": v, "interval": [v - 0.05, v + 0.05]}

            cells.append({
                "init": init, "hurst": None, "beta": beta, "draws": 2, "exploded": 0,
                "test_accuracy": {"mean": 0.6 + 0.1 * i + 0.05 * j},
                "regularity_before": reg(h - 0.2), "regularity_after": reg(h - 0.15),
                "regularity_cumulative_before": reg(h + 0.3),
                "regularity_cumulative_after": reg(h + 0.4), "regularity_update": reg(h),
                "example_path": {"entry": [0, 0], "before": [0.1 * k for k in range(8)],
                                 "after": [0.2 * k for k in range(8)]},
            })  # fmt: skip
        points.append({"init": init, "hurst": None, "cells": cells})
    cells = [c for p in points for c in p["cells"]]
    return {"study": "trained-weights", "config": cfg, "points": points, "cells": cells}


def test_a_point_the_figure_lacks_is_reported(tmp_path, monkeypatch):
    from meanfield.studies.trained_weights import study as trained_weights

    results = _results()
    (tmp_path / "results.json").write_text(json.dumps(results))
    saved = {}

    def keep(fig, fname, *args, **kwargs):  # the figure itself, not written
        saved[str(fname)] = fig

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    trained_weights.plot(tmp_path, results)
    names = sorted(str(tmp_path / f"{n}.png") for n in
                   ("accuracy_heatmap", "regularity", "weights_along_depth"))  # fmt: skip
    assert sorted(saved) == names
    for fname, fig in saved.items():
        assert points_missing(fig, fname) == [], fname

    # the results say one cell's accuracy and one cell's regularity differ from what the
    # figures hold: each is a point the figure does not draw
    cell = results["points"][1]["cells"][0]
    cell["test_accuracy"]["mean"] = 0.123
    cell["regularity_after"]["hurst"] = 0.777
    (tmp_path / "results.json").write_text(json.dumps(results))
    heat = points_missing(saved[str(tmp_path / "accuracy_heatmap.png")],
                          tmp_path / "accuracy_heatmap.png")  # fmt: skip
    assert heat == ["test accuracy, smooth, β=0.5: (nan, 0.123) not drawn in panel "
                    "'Test accuracy'"]  # fmt: skip
    reg = points_missing(saved[str(tmp_path / "regularity.png")], tmp_path / "regularity.png")
    assert len(reg) == 1 and "regularity_after against regularity_before, smooth, β=0.5" in reg[0]
    assert "'regularity of V_k'" in reg[0]
