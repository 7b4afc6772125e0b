"""A representative subset of the hostile-input corpus (benchmarks/hostile_corpus.py; the
whole corpus is `python benchmarks/hostile_inputs.py`): each row refused in one line,
exit 2, nothing left behind, nothing written outside; and the corpus covers what the
issue asks (at least 300 inputs across every study, plot, --data, --block/--law, the
folders and the API)."""

import collections
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import hostile_corpus  # noqa: E402
import hostile_generated  # noqa: E402
import hostile_inputs  # noqa: E402
import hostile_issue75  # noqa: E402

from meanfield.studies import STUDIES  # noqa: E402


def _all_rows():
    return hostile_corpus.rows(Path("/nonexistent-templates"))


def test_the_corpus_covers_every_study_and_every_kind_of_input():
    rows = _all_rows()
    groups = collections.Counter(r.group for r in rows)
    assert len(rows) >= 300
    for name in [*STUDIES, "plot", "--data", "--block/--law", "folder", "api"]:
        assert groups[name] >= 10, (name, groups[name])
    assert len({r.label for r in rows}) == len(rows)  # every label names one input


# one row of each kind, none needing a finished study to start from (seconds each)
SUBSET = [
    "study two-layer --steps '1000000000'",
    "study shapes --seeds '1000000000'",
    "study plain-vs-residual --train-N '1000000000'",
    "study regimes --M '1000000000'",
    "study variance --c-samples '1000000000'",
    "study phases --bootstrap '9223372036854775808'",
    "study two-layer --sigma-in '1e300'",
    "trained-weights --data: 300-byte CIFAR pickle of (10^6, 3072)",
    "two-layer --data: complex x",
    "mean-ode: a block file calling sys.exit(0)",
    "mean-ode: a block returning int32",
    "variance: a float16 law",
    "a link points in --out (fresh folder)",
    "--out ''",
    "api: run_study L=[8, 4]",
    "api: ResNet.sample, a NaN embedding",
]


@pytest.mark.parametrize("label", SUBSET)
def test_a_hostile_input_is_refused_cleanly(label, tmp_path):
    (row,) = [r for r in _all_rows() if r.label == label]
    result = hostile_inputs.run_row(row, tmp_path, 0, timeout=60.0)
    assert result["outcome"] in row.expect, result
    assert result["ok"], result


def test_the_classification_can_fail(tmp_path):
    """A row whose command crashes, one that writes outside its folder and one that runs
    where a refusal was expected are each reported as such."""
    crash = hostile_corpus.Row("crash", "api", "python:raise RuntimeError('boom')")
    assert hostile_inputs.run_row(crash, tmp_path, 1, 60.0)["outcome"] == "crash"
    outside = hostile_corpus.Row(
        "outside", "api", "python:open('{case}/elsewhere.txt', 'w').write('x')"
    )
    r = hostile_inputs.run_row(outside, tmp_path, 2, 60.0)
    assert r["outcome"] == "wrote outside" and not r["ok"]
    ran = hostile_corpus.Row("ran", "api", "python:print('fine')")
    r = hostile_inputs.run_row(ran, tmp_path, 3, 60.0)
    assert r["outcome"] == "ran" and not r["ok"]
    two = hostile_corpus.Row(
        "two lines", "api", "python:import sys;print('a\\nb', file=sys.stderr);sys.exit(2)"
    )
    assert hostile_inputs.run_row(two, tmp_path, 4, 60.0)["outcome"] == "untidy refusal"


class _Reached(Exception):
    pass


@pytest.mark.parametrize("study", sorted(hostile_corpus.TINY))
def test_every_base_configuration_reaches_its_study(study, tmp_path, monkeypatch):
    """A generated row is its study's tiny configuration with one option made absurd: the
    configuration itself must pass every check (its `start_study` is reached), or every
    row of that study would be refused for the base's fault, not the option's."""
    import importlib

    from meanfield.cli import main
    from meanfield.studies import MODULES

    def reached(*args, **kwargs):
        raise _Reached()

    monkeypatch.setattr(importlib.import_module(MODULES[study]), "start_study", reached)
    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "24e9")
    argv = ["study", study, *hostile_corpus.TINY[study].split()]
    with pytest.raises(_Reached):
        main([*argv, "--out", str(tmp_path / "o"), "--no-progress"])


def test_a_refusal_naming_another_option_is_not_clean(tmp_path):
    """A generated row must be refused for its own option: the same input under a base
    the study refuses (trained-weights at 8 layers, below the 32 its regularity needs) is
    classified "refused for another reason" (here the option is even a valid value)."""
    base = "study trained-weights --L 8 --d 4 --betas 0.5,1 --steps 10 --seeds 2"
    row = hostile_corpus.Row("x", "trained-weights", [*base.split(), "--seeds=2"], names="--seeds")
    result = hostile_inputs.run_row(row, tmp_path, 0, timeout=60.0)
    assert result["outcome"] == "refused for another reason", result
    assert not result["ok"]
    assert hostile_inputs._names("--L/--M/--seeds: needs about 3 GB", "--M")
    assert not hostile_inputs._names("--L-for-M: at most 4", "--L")


def test_every_case_the_issue_quotes_is_a_row():
    """Issue 46's acceptance: every case it quotes is in the corpus (`QUOTED`, labels of
    rows), so the corpus's verdict covers them."""
    labels = {r.label for r in _all_rows()}
    assert len(hostile_corpus.QUOTED) >= 60
    assert [q for q in hostile_corpus.QUOTED if q not in labels] == []


def test_every_option_variable_entry_point_figure_and_constructor_has_rows():
    """Issue 75: the corpus follows from what the package declares (the parser's options
    of every command, the user-file options, the `MEANFIELD_*` variables in its source,
    every study's figures, the API's constructors): nothing declared lacks a row."""
    rows = _all_rows()
    assert hostile_generated.coverage_gaps(rows) == []
    declared = hostile_generated.declared()
    assert sum(d.startswith("option study ") for d in declared) >= 400
    assert {f"variable {v}" for v in hostile_generated.VARIABLES} <= declared | {
        "variable MEANFIELD_JOIN_TIMEOUT"
    }
    assert len({r.label for r in rows}) == len(rows)


def test_the_completeness_check_can_fail(monkeypatch):
    """A new option, variable or public name with no rows is reported: the rows of one
    option dropped, and a variable the source reads that has no kind."""
    rows = [r for r in _all_rows() if "option study sde --n-fine" not in r.covers]
    assert hostile_generated.coverage_gaps(rows) == ["option study sde --n-fine"]
    read = hostile_generated.variables_read()
    monkeypatch.setattr(hostile_generated, "variables_read", lambda: read | {"MEANFIELD_NEW"})
    assert hostile_generated.coverage_gaps(_all_rows()) == ["variable MEANFIELD_NEW"]


def test_every_case_issue_75_quotes_is_a_row():
    labels = {r.label for r in _all_rows()}
    assert len(hostile_generated.EXAMPLES) >= 25
    assert [q for q in hostile_issue75.QUOTED_75 if q not in labels] == []
