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
import hostile_inputs  # noqa: E402

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
    "two-layer --steps '1000000000'",
    "shapes --seeds '1000000000'",
    "plain-vs-residual --train-N '1000000000'",
    "regimes --M '1000000000'",
    "variance --c-samples '1000000000'",
    "phases --bootstrap '9223372036854775808'",
    "two-layer --sigma-in '1e300'",
    "trained-weights --data: 300-byte CIFAR pickle of (10^6, 3072)",
    "two-layer --data: complex x",
    "mean-ode: a block file calling sys.exit(0)",
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
