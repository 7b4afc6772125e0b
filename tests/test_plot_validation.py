"""`meanfield plot DIR` checks results.json against what the study's figures read
(`meanfield.studies.schema`) and refuses in one line what it cannot draw: the JSON path and
the problem, never a traceback, never a figure drawn from a value of the wrong kind; a
folder it cannot write into, a figure that is a folder or a symbolic link (issue 46, item 5).

Each edit starts from the results.json of a tiny study run here, so a change of what a
study writes that its schema does not follow fails `test_real_results_pass_and_redraw`."""

import json
import math
import os
import shutil
import sys

import pytest

from meanfield.cli import main
from meanfield.studies import StudyInputError
from meanfield.studies.schema import SCHEMAS, validate

# the tiny runs (a few seconds of work each; the points are what the figures read)
TINY = {
    "tangent-kernel": ["--L", "2,4", "--gammas", "0.5,1", "--M", "2", "--nets", "2", "--d", "2"],
    "variance": ["--L", "2,4", "--nets", "8", "--c-samples", "2000", "--gammas", "0.5,1"],
    "mean-ode": ["--L", "4,8", "--M", "1,4", "--L-for-M", "16", "--fit-M-max", "4",
                 "--seeds", "3", "--order", "12", "--steps", "1", "--compile-workers", "1"],
}  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The folder of each tiny study, finished (results.json and its figures)."""
    root = tmp_path_factory.mktemp("plot_validation")
    folders = {}
    for name, options in TINY.items():
        folder = root / name
        assert main(["study", name, *options, "--out", str(folder), "--no-progress"]) == 0
        folders[name] = folder
    return folders


@pytest.fixture
def edited(finished, tmp_path):
    """`edited(study, edit)`: a new folder holding the study's results.json after
    `edit(body)` (written with NaN where the edit put one, as a hand edit might)."""

    made = []

    def make(name, edit):
        made.append(name)
        folder = tmp_path / f"{name}-{len(made)}"
        folder.mkdir()
        body = json.loads((finished[name] / "results.json").read_text())
        edit(body)
        (folder / "results.json").write_text(json.dumps(body))
        return folder

    return make


def plot_refused(folder, capsys) -> str:
    """Run `meanfield plot FOLDER`: refused (exit 2) in one line on stderr, nothing drawn."""
    assert main(["plot", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("meanfield plot: error: DIR: "), err
    assert "Traceback" not in err
    assert not list(folder.glob("*.png"))
    return err.strip()


def test_real_results_pass_and_redraw(finished, tmp_path, capsys):
    """Each study's own results.json fits its schema and redraws every figure (checked as
    it is saved: every point drawn, tests/conftest.py)."""
    for name, folder in finished.items():
        validate(json.loads((folder / "results.json").read_text()))
        copy = tmp_path / name
        copy.mkdir()
        shutil.copy(folder / "results.json", copy / "results.json")
        assert main(["plot", str(copy)]) == 0, capsys.readouterr().err
        drawn = sorted(p.name for p in copy.glob("*.png"))
        assert drawn == sorted(p.name for p in folder.glob("*.png")) and drawn
        assert f"redrew {len(drawn)} figure(s)" in capsys.readouterr().out


def test_every_study_has_a_schema():
    from meanfield.studies import STUDIES

    assert set(SCHEMAS) == set(STUDIES)


def _set(path, value):
    """An edit: the value at `path` (keys and indices) replaced by `value`."""

    def edit(body):
        *head, last = path
        for step in head:
            body = body[step]
        body[last] = value

    return edit


def _drop(path):
    def edit(body):
        *head, last = path
        for step in head:
            body = body[step]
        del body[last]

    return edit


# (study, what is edited, the edit, the line's JSON path and problem)
REFUSED = [
    ("tangent-kernel", "study a list", _set(["study"], ["shapes"]),
     "study: expected a string naming a study, got a list of 1 entry"),
    ("tangent-kernel", "L a word", _set(["points", 3, "L"], "four"),
     'points[3].L: expected a positive integer, got "four"'),
    ("tangent-kernel", "L a boolean", _set(["points", 0, "L"], True),
     "points[0].L: expected a positive integer, got true"),
    ("tangent-kernel", "x64 a word", _set(["config", "x64"], "no"),
     'config.x64: expected true or false, got "no"'),
    ("tangent-kernel", "a point's key gone", _drop(["points", 1, "MLalpha2"]),
     "points[1].MLalpha2: missing (expected a positive finite number)"),
    ("tangent-kernel", "gamma a string", _set(["points", 0, "gamma"], "0.5"),
     'points[0].gamma: expected a finite number, got "0.5"'),
    ("tangent-kernel", "a point a string", _set(["points", 2], "L=4"),
     'points[2]: expected an object, got "L=4"'),
    ("tangent-kernel", "a NaN mean", _set(["points", 0, "relative_difference", "mean"], math.nan),
     "points[0].relative_difference.mean: expected a finite number or null, got NaN"),
    ("tangent-kernel", "points not a list", _set(["points"], {"L": 2}),
     "points: expected a list, got an object"),
    ("tangent-kernel", "config gammas gone", _drop(["config", "gammas"]),
     "config.gammas: missing (expected a list)"),
    ("tangent-kernel", "fixed null", _set(["fits", 0, "fixed"], None),
     "fits[0].fixed: expected an object, got null"),
    ("tangent-kernel", "interval of 3", _set(["fits", 0, "ci95"], [0.1, 0.2, 0.3]),
     "fits[0].ci95: expected a list of 2 entries or null, got a list of 3 entries"),
    ("variance", "no point", _set(["points"], []),
     "points: expected a non-empty list, got an empty list"),
    ("variance", "c a word", _set(["reference", "c"], "e"),
     'reference.c: expected a finite number or null, got "e"'),
    ("variance", "M zero", _set(["config", "M"], 0),
     "config.M: expected a positive integer, got 0"),
    ("variance", "backward gone", _drop(["points", 0, "backward", "sup"]),
     "points[0].backward.sup: missing (expected an object)"),
    ("variance", "Infinity", _set(["points", 1, "MLalpha2"], math.inf),
     "points[1].MLalpha2: expected a positive finite number, got Infinity"),
    ("mean-ode", "steps a float", _set(["points", 0, "steps"], 0.0),
     "points[0].steps: expected a non-negative integer, got 0.0"),
    ("mean-ode", "config M empty", _set(["config", "M"], []),
     "config.M: expected a non-empty list, got an empty list"),
    ("mean-ode", "a width gone", _drop(["points", 2, "M"]),
     "points[2].M: missing (expected a positive integer)"),
    ("mean-ode", "decomposition a word", _set(["decomposition", 0, "delta_h_euler"], "small"),
     'decomposition[0].delta_h_euler: expected a finite number or null, got "small"'),
    ("mean-ode", "floors a word", _set(["figure_floors"], "none"),
     'figure_floors: expected an object or null, got "none"'),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [pytest.param(n, e, m, id=f"{n}: {what}") for n, what, e, m in REFUSED],
)
def test_edited_results_are_refused_in_one_line(edited, capsys, name, edit, message):
    folder = edited(name, edit)
    line = plot_refused(folder, capsys)
    assert line.startswith("meanfield plot: error: DIR: results.json: "), line
    assert line.endswith(message), line
    with pytest.raises(StudyInputError, match="^DIR: results.json: "):
        validate(json.loads((folder / "results.json").read_text()))


def test_the_path_names_the_point(edited, capsys):
    """The index in the message is the point's own (the same edit at another point names
    that one)."""
    for i in (0, 3):
        line = plot_refused(edited("tangent-kernel", _set(["points", i, "L"], "four")), capsys)
        assert f": points[{i}].L: " in line


# a two-layer study takes minutes even at a tiny size: its results.json in miniature (one
# point of each part, as the study writes them) for the schema's records chosen by "part"
# and values looked up in the config
_STAT = {"mean": 0.5, "std": 0.1, "count": 2, "exploded": 0, "values": [0.4, 0.6]}
TWO_LAYER = {
    "study": "two-layer",
    "config": {"activation": "tanh", "s_u": 1.0, "s_v": 1.0, "lr_u": 0.5, "lr_v": 0.5,
               "steps": 1, "M": [8], "D": [2], "D_limit": [4], "s_v_sweep": [0.5, 2.0],
               "sweep_M": [8], "sweep_D": 4, "seeds": 2, "seed": 0, "x64": True},
    "points": [
        {"part": "width", "D": 2, "M": 8, "output_error": [_STAT, _STAT],
         "hidden_error": [_STAT, _STAT], "reference_error": 1e-9},
        {"part": "dimension", "D": 4, "output_error": [_STAT, _STAT],
         "hidden_error": [_STAT, _STAT], "reference_error": 1e-9},
        {"part": "criteria", "M": 8, "s_v": 2.0, "rule": "balanced", "lr_u": 0.125,
         "loss": [_STAT, _STAT], "first_step_decrease": _STAT, "feature_movement": _STAT,
         "kernel_change": _STAT},
        {"part": "diversity", "D": 4, "scaled": _STAT, "unscaled": _STAT},
    ],
    "fits": [{"quantity": "feature_movement", "against": "s_v", "fixed": {"M": 8,
              "rule": "balanced"}, "theory": -1.0, "slope": -0.9, "intercept": 0.1,
              "ci95": [-1.1, -0.7], "sizes": [0.5, 2.0]}],
    "critical_scale": {"rows": [{"M": 8, "d_out": 1, "sigma_v_star": 1.0, "min_sqrt": 1.0,
                                 "heuristic": 0.7}]},
}  # fmt: skip

TWO_LAYER_REFUSED = [
    (_set(["points", 0, "part"], "widths"),
     'points[0].part: expected one of "width", "dimension", "criteria", "diversity", "inputs", '
     'got "widths"'),
    (_drop(["points", 1, "part"]), "points[1].part: missing (expected one of "),
    (_set(["points", 2, "s_v"], 99.0), "points[2].s_v: 99.0 is not one of config.s_v_sweep"),
    (_set(["points", 2, "rule"], "lazy"), 'points[2].rule: expected one of "balanced", '),
    (_set(["points", 0, "output_error"], [_STAT]),
     "points[0].output_error: expected at least 2 entries (config.steps + 1), got 1 entry"),
    (_set(["critical_scale", "rows"], []), "critical_scale.rows: expected a non-empty list"),
    (_set(["fits", 0, "fixed"], {"M": [8]}), "fits[0].fixed.M: expected a number, a string, "),
    (_drop(["fits", 0, "sizes"]), "fits[0].sizes: missing"),
    (_drop(["fits", 0, "intercept"]),
     "fits[0].intercept: missing (expected a finite number: the fit has a slope)"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "message"), TWO_LAYER_REFUSED)
def test_records_chosen_by_part_and_values_in_the_config(edit, message):
    validate(json.loads(json.dumps(TWO_LAYER)))  # the miniature itself fits
    body = json.loads(json.dumps(TWO_LAYER))
    edit(body)
    with pytest.raises(StudyInputError) as err:
        validate(body)
    assert str(err.value).startswith("DIR: results.json: " + message), str(err.value)
    assert "\n" not in str(err.value)


def test_a_plot_that_still_fails_says_so_in_one_line(finished, tmp_path, capsys, monkeypatch):
    """The safety net: what a plot raises on a results.json that passed its schema is one
    line naming the exception, not a traceback."""
    import meanfield.studies.tangent_kernel.study as tk

    def broken(out, results):
        return results["no such key"]

    monkeypatch.setattr(tk, "plot", broken)
    folder = tmp_path / "tk"
    shutil.copytree(finished["tangent-kernel"], folder)
    assert main(["plot", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "meanfield plot: error: DIR: results.json cannot be drawn: KeyError: 'no such key'\n"
    )


def _copy(finished, tmp_path, name="tangent-kernel"):
    folder = tmp_path / "copy"
    shutil.copytree(finished[name], folder)
    return folder


def test_a_figure_that_is_a_folder_is_refused(finished, tmp_path, capsys):
    folder = _copy(finished, tmp_path)
    (folder / "tangent_kernel.png").unlink()
    (folder / "tangent_kernel.png").mkdir()
    assert main(["plot", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"DIR: cannot write the figures into {folder}: Is a directory" in err


def test_a_folder_that_cannot_be_written_is_refused(finished, tmp_path, capsys, monkeypatch):
    folder = _copy(finished, tmp_path)
    figure = folder / "tangent_kernel.png"
    before = figure.stat().st_mtime_ns
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(folder) else real(p, mode)
    )
    assert main(["plot", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"meanfield plot: error: DIR: cannot write the figures into {folder}: Permission denied\n"
    )
    assert figure.stat().st_mtime_ns == before  # refused before drawing


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root writes into a read-only folder"
)
def test_a_read_only_folder_is_refused(finished, tmp_path, capsys):
    folder = _copy(finished, tmp_path)
    folder.chmod(0o500)
    try:
        assert main(["plot", str(folder)]) == 2
    finally:
        folder.chmod(0o700)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write the figures into {folder}" in err


def test_a_figure_that_is_a_link_is_not_written_through(finished, tmp_path, capsys):
    folder = _copy(finished, tmp_path)
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(b"not a figure of this study")
    (folder / "tangent_kernel.png").unlink()
    (folder / "tangent_kernel.png").symlink_to(outside)
    assert main(["plot", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"DIR: {folder / 'tangent_kernel.png'} is a symbolic link" in err
    assert outside.read_bytes() == b"not a figure of this study"


def test_a_results_file_that_is_a_fifo_or_nested_too_deeply_is_refused(tmp_path, capsys):
    """Issue 75: `meanfield plot DIR` hung on a results.json that is a FIFO (reading it
    blocks) and raised RecursionError on one nested 100,000 deep; both are one line."""
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "results.json")
    assert main(["plot", str(fifo)]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "results.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["plot", str(deep)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nested too deeply" in err


# the Transformer studies, tiny (about 20 s and 60 s here; no self-check: the figures are
# what is tested)
TRANSFORMER_TINY = {
    "coord-check": ["--widths", "8,16,32", "--depth", "1", "--depths", "1,2,4", "--width", "8",
                    "--steps", "1", "--seeds", "2", "--batch", "2", "--context", "4",
                    "--heads", "1", "--base-width", "8", "--base-depth", "1",
                    "--parametrisations", "mup"],
    "transfer": ["--depths", "1,2,4", "--width", "8", "--widths", "8,16,32", "--depth", "1",
                 "--steps", "2", "--seeds", "2", "--lrs", "0.001,0.01,0.1", "--batch", "2",
                 "--context", "4", "--heads", "1", "--base-width", "8", "--base-depth", "1",
                 "--parametrisations", "mup", "--width-parametrisations", "mup"],
}  # fmt: skip


@pytest.fixture(scope="module")
def transformer_results(tmp_path_factory):
    """The results.json of a tiny coord-check and transfer (their figures drawn)."""
    root = tmp_path_factory.mktemp("transformer_plots")
    bodies = {}
    for name, options in TRANSFORMER_TINY.items():
        folder = root / name
        argv = ["study", name, *options, "--out", str(folder), "--no-progress", "--no-self-check"]
        assert main(argv) == 0
        bodies[name] = json.loads((folder / "results.json").read_text())
    return bodies


def _coord_widths(body):
    """Every point and line of the width line at widths 8, 16, 64: consistent with each
    other, not with the config's widths 8, 16, 32."""
    for p in body["points"]:
        if p["depth"] == 1 and p["width"] == 32:
            p["width"] = 64
    for line in body["lines"]:
        if line["against"] == "width":
            line["sizes"] = [8, 16, 64]


def _negative_draw(body):
    """One draw's last size negative: its mean stays positive and would be drawn."""
    rows = body["points"][0]["sizes"]["activation/mlp"]
    rows[0][-1] = -0.1 * abs(rows[1][-1])


# (study, what is edited, the edit, the line's JSON path and problem)
TRANSFORMER_REFUSED = [
    ("coord-check", "no base depth", _drop(["config", "base_depth"]),
     "config.base_depth: missing (expected a positive integer)"),
    ("coord-check", "sizes not the config's", _coord_widths,
     "points[2]: width 64, depth 1 is not a size of the config (widths [8, 16, 32] at depth 1"),
    ("coord-check", "a line's sizes not the config's", _set(["lines", 0, "sizes"], [8, 16]),
     "lines[0].sizes: [8, 16] is not config.widths [8, 16, 32]"),
    ("coord-check", "a negative size", _negative_draw,
     'points[0].sizes["activation/mlp"][0][1]: expected a finite number ≥ 0 or null'),
    ("coord-check", "a row short of a step", _set(["points", 0, "sizes", "change/mlp", 0], [0.1]),
     'points[0].sizes["change/mlp"][0]: expected a list of 2 entries (config.steps + 1)'),
    ("coord-check", "an unknown optimiser", _set(["config", "tables", 0, "optimizer"], "lion"),
     'config.tables[0].optimizer: expected one of "adam", "sgd", got "lion"'),
    ("transfer", "a negative lr*", _set(["lines", 0, "optimal_lr"], [-0.01, None, None]),
     "lines[0].optimal_lr[0]: expected a positive finite number or null, got -0.01"),
    ("transfer", "a curve short of a rate", _set(["lines", 0, "loss_curves", 0], [1.0, 1.0]),
     "lines[0].loss_curves[0]: expected a list of 3 entries (as many as config.lrs)"),
    ("transfer", "a negative fraction", _set(["points", 0, "nonlinear_mlp", 0, 0], -0.5),
     "points[0].nonlinear_mlp[0][0]: expected a finite number ≥ 0 or null, got -0.5"),
    ("transfer", "depths not the config's", _set(["config", "depths"], [1, 2, 8]),
     "points[2]: width 8, depth 4 is not a size of the config's depth line"),
    ("transfer", "a band below 0", _set(["lines", 0, "band"], -1),
     "lines[0].band: expected a positive finite number, got -1"),
]  # fmt: skip


@pytest.mark.parametrize(
    "name, what, edit, problem", TRANSFORMER_REFUSED, ids=[r[1] for r in TRANSFORMER_REFUSED]
)
def test_a_transformer_study_is_checked_against_its_config_before_drawing(
    transformer_results, name, what, edit, problem, tmp_path, capsys
):
    """Issue 75: a coord-check without `config.base_depth` was refused after two of its
    three figures were redrawn; one whose points' sizes disagree with its config, or
    with a negative size on a log axis, was drawn. Now refused before any figure."""
    body = json.loads(json.dumps(transformer_results[name]))
    edit(body)
    folder = tmp_path / "edited"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(body))
    err = plot_refused(folder, capsys)
    assert err == f"meanfield plot: error: DIR: results.json: {problem}" or (
        problem in err and err.startswith("meanfield plot: error: DIR: results.json: ")
    ), err


def test_the_transformer_studies_own_results_redraw(transformer_results, tmp_path, capsys):
    for name, body in transformer_results.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(body))
        assert main(["plot", str(folder)]) == 0, capsys.readouterr().err
        assert len(list(folder.glob("*.png"))) >= 3
