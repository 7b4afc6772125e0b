"""Every study follows one protocol (issue 76): each registered study is a package
`meanfield/studies/NAME/` whose `study.py` has what `harness.protocol.Study` asks, and a
study written outside the package (the toy study of docs/adding-a-study.md) runs through
the same launcher from Python and from the command line, resumes, self-checks and
redraws its figures. The protocol check is shown to fail on modules that break it."""

import importlib
import json
import re
import types
from pathlib import Path

import pytest
import toy_study

from meanfield.cli import main
from meanfield.harness.protocol import Study, problems
from meanfield.studies import MODULES, STUDIES, StudyInputError, run_study

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", list(MODULES))
def test_every_registered_study_is_a_package_that_follows_the_protocol(name):
    module = importlib.import_module(MODULES[name])
    assert problems(module) == []
    assert isinstance(module, Study)
    package = ROOT / Path(*MODULES[name].split(".")).parent
    assert module.__file__ == str(package / "study.py")
    assert (package / "__init__.py").is_file() and (package / "schema.py").is_file()


def test_the_protocol_check_can_fail():
    def run(args, cfg):
        pass

    good = types.SimpleNamespace(HELP="a study", PRESETS={"quick": {}}, DEFAULT_X64=True,
                                 SCHEMA=toy_study.SCHEMA, add_arguments=lambda parser: None,
                                 configure=lambda args: {}, cost_parts=lambda args, cfg: [],
                                 run=run, plot=None)  # fmt: skip
    assert problems(good) == []
    bad = types.SimpleNamespace(HELP="two\nlines", PRESETS={"paper": {}}, DEFAULT_X64=1,
                                SCHEMA={}, add_arguments=lambda: None,
                                cost_parts=lambda cfg: [], run=lambda args: None,
                                plot=lambda out: None)  # fmt: skip
    found = problems(bad)
    assert [line.split(":")[0] for line in found] == [
        "HELP", "PRESETS", "DEFAULT_X64", "SCHEMA", "add_arguments", "configure",
        "cost_parts", "run", "plot",
    ]  # fmt: skip
    assert "the default (first) preset is 'quick'" in found[1]
    assert not isinstance(types.SimpleNamespace(HELP="x"), Study)


@pytest.fixture
def toy(monkeypatch):
    """The toy study registered as `toy` for one test."""
    monkeypatch.setitem(STUDIES, "toy", toy_study)
    return toy_study


def _numbers(results: dict) -> dict:
    return {k: results[k] for k in ("config", "points", "fits")}


def test_a_study_of_ones_own_runs_through_the_launcher(toy, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MEANFIELD_NO_SELF_CHECK", raising=False)
    results = run_study("toy", out=str(tmp_path / "py"), n=[4, 16, 64, 256], draws=200)
    # the self-check ran (one point recomputed op by op), and the rate is the theory's
    assert results["self_check"] and "self_check_skipped" not in results
    fit = results["fits"][0]
    assert fit["ci95"][0] <= -0.5 <= fit["ci95"][1]
    assert (tmp_path / "py" / "toy.png").stat().st_size > 1000

    # the command line: the same numbers from the same seed; resumed; refused in one line
    argv = ["study", "toy", "--out", str(tmp_path / "cli"), "--n", "4,16,64,256",
            "--draws", "200", "--no-progress", "--no-self-check"]  # fmt: skip
    assert main(argv) == 0
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert _numbers(cli) == _numbers(results)
    assert main([*argv, "--resume"]) == 0
    assert _numbers(json.loads((tmp_path / "cli" / "results.json").read_text())) == _numbers(cli)
    capsys.readouterr()
    assert main(["study", "toy", "--out", str(tmp_path / "one"), "--n", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == "meanfield study toy: error: --n: need two sample sizes or more for a slope, got [4]"
    )
    assert not (tmp_path / "one").exists()
    with pytest.raises(StudyInputError, match="^--draws: "):
        run_study("toy", out=str(tmp_path / "neg"), draws=-1)

    # its figures redrawn from results.json alone, checked against its schema first
    (tmp_path / "cli" / "toy.png").unlink()
    assert main(["plot", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "toy.png").is_file()
    cli["points"][0]["n"] = 5  # not a size of the configuration
    (tmp_path / "cli" / "results.json").write_text(json.dumps(cli))
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "cli")]) == 2
    assert "points[0].n" in capsys.readouterr().err


# the harness's check of a study's costs: only the launcher calls it
# (`harness.launcher.configured`); a study's `configure` may still bound a size before it
# builds something from it (a data set, a law), with `check_size` or `check_elements`
_COST_CHECKS = re.compile(r"\b(check_costs?|check_work)\(")


def test_costs_are_checked_by_the_launcher_alone():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "meanfield" / "studies").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _COST_CHECKS.search(line) and not line.lstrip().startswith(("def ", "#"))
    ]
    assert offenders == []
    assert _COST_CHECKS.search("    check_costs(cost_parts(cfg))")  # the scan can fail


def test_the_launcher_refuses_a_costly_run_before_it_runs(toy, tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(toy, "run", lambda args, cfg: ran.append(cfg))
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e6")
    with pytest.raises(StudyInputError, match=r"^--n/--draws: a point's draws needs about"):
        run_study("toy", out=str(tmp_path / "big"), n=[4, 10**6], draws=1000)
    assert ran == [] and not (tmp_path / "big").exists()
    assert main(["study", "toy", "--out", str(tmp_path / "small"), "--n", "4,16"]) == 0
    assert len(ran) == 1 and ran[0]["n"] == [4, 16]


def test_a_limit_of_the_studys_own_refuses_as_its_check_does(monkeypatch):
    from meanfield.harness.args import Cost, Limit, check_costs, check_size, check_work

    monkeypatch.delenv("MEANFIELD_WORK_LIMIT", raising=False)
    within = [Cost("--a", "a part", memory=1.0, work=1.0)]
    at_limits = [Limit("--b", "the b's", 10, 10), Limit("--c", "c work", 5, 9, operations=True)]
    check_costs([*within, *at_limits])
    for limit, direct in (
        (Limit("--b", "the b's", 11, 10), lambda: check_size("--b", 11, 10, "the b's")),
        (Limit("--c", "c work", 1e12, 1e9, operations=True, why="a reason"),
         lambda: check_work("--c", 1e12, "c work", limit=1e9, why="a reason")),
    ):  # fmt: skip
        with pytest.raises(StudyInputError) as expected:
            direct()
        with pytest.raises(StudyInputError) as got:
            check_costs(iter([*within, limit]))  # a generator of parts is read once
        assert str(got.value) == str(expected.value)
    # the machine's limits first: a part beyond memory is named before the study's own
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e6")
    with pytest.raises(StudyInputError, match="^--a: a part needs about"):
        check_costs([Limit("--b", "the b's", 11, 10), Cost("--a", "a part", memory=1e9)])
