"""The figure specs of `study shapes`, `two-layer` and `plain-vs-residual`
(tests/figure_points_shapes.py) can fail: a point a figure leaves out is reported."""

import json


def _results():
    """A tiny `study shapes` results.json, made up (no network is run): L = 4, 8, M = 4, 16,
    D = 8, k = 0, 1; the D gap of the hidden states 0 at k = 0 (left out on a log axis)."""
    cfg = {"activation": "identity", "seeds": 3, "steps": 1, "L": [4, 8], "M": [4, 16], "D": [8]}
    names = ("output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
             "output_D_gap", "hidden_D_gap")  # fmt: skip
    points = []
    for L in cfg["L"]:
        for M in cfg["M"]:
            for k in (0, 1):
                p = {"L": L, "M": M, "D": 8, "steps": k}
                for i, name in enumerate(names):
                    value = 0.0 if (name, k) == ("hidden_D_gap", 0) else (1 + i + k) / (L * M)
                    p[name] = {"mean": value, "std": 0.3 * value, "n": 3}
                points.append(p)
    shape = {"L": 0.2, "M": 0.4, "D": 0.4}
    return {
        "study": "shapes", "config": cfg, "points": points, "fits": [], "rate_law": {},
        "optimal_shape": {"bound": shape, "conjecture": shape, "output_error": {"reason": "-"},
                          "hidden_error": {"reason": "-"}},
    }  # fmt: skip


def test_a_point_the_figure_leaves_out_is_reported(tmp_path, figure_problems):
    from meanfield.studies.shapes import study as shapes

    results = _results()
    (tmp_path / "results.json").write_text(json.dumps(results))
    shapes.plot(tmp_path, results)  # every point drawn: nothing to report
    assert {p.name for p in tmp_path.glob("*.png")} == {
        "shapes_rates.png", "shapes_grid.png", "shapes_errors.png", "shapes_errors_step0.png"
    }  # fmt: skip
    assert figure_problems == []
    # a plot that drops one point (L=8, M=16 after the last step) of the results on disk
    dropped = [p for p in results["points"] if (p["L"], p["M"], p["steps"]) != (8, 16, 1)]
    shapes.plot(tmp_path, {**results, "points": dropped})
    missing = [m for m in figure_problems if "shapes_errors.png" in m]
    assert len(missing) == 6  # its six errors, each reported
    assert all("L=8, M=16, D=8, k=1" in m and "not drawn" in m for m in missing)
    assert any("shapes_grid.png" in m and "L=8, M=16, D=8, k=1" in m for m in figure_problems)
    assert not [m for m in figure_problems if "step0" in m]  # the other step's figure is whole
