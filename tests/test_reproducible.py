"""The same command twice gives the same `results.json`, timing aside (issue 74: the
numbers a study prints reproduce to the digit from the command a reader would type)."""

import json

import meanfield as mf


def _differences(a, b, path=""):
    """Every path where two results differ, the `timing` record left out."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in one" for k in set(a) ^ set(b)]
        for k in set(a) & set(b):
            if k != "timing":
                out += _differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} against {len(b)} entries"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _differences(x, y, f"{path}[{i}]")]  # fmt: skip
    return [] if a == b else [f"{path}: {a!r} against {b!r}"]


def _twice(tmp_path, study, **options):
    runs = []
    for i in (1, 2):
        mf.run_study(study, out=str(tmp_path / f"run{i}"), no_progress=True, **options)
        runs.append(json.loads((tmp_path / f"run{i}" / "results.json").read_text()))
    return runs


def test_the_main_job_twice_is_the_same_to_the_last_digit(tmp_path):
    """Its points, the law's exponents and their bootstrap intervals, the one-term slopes."""
    a, b = _twice(tmp_path, "mean-ode", L=[4, 8], M=[1, 4], L_for_M=16, fit_M_max=4, seeds=3,
                  order=12)  # fmt: skip
    assert a["rates"] and a["points"]
    assert _differences(a, b) == []


def test_the_stochastic_approximation_study_twice_is_the_same(tmp_path):
    a, b = _twice(tmp_path, "stochastic-approximation", L=[4, 16], M=[4, 16], sizes=[0.05],
                  seeds=8, d=3)  # fmt: skip
    assert a["flat_lines"]
    assert _differences(a, b) == []


def test_the_comparison_sees_a_difference():
    """The check can fail: a changed digit, a missing key, a shorter list."""
    a = {"rates": [{"p": 0.98}], "timing": {"total_seconds": 1.0}}
    assert _differences(a, {"rates": [{"p": 0.98}], "timing": {"total_seconds": 2.0}}) == []
    assert _differences(a, {"rates": [{"p": 0.9800001}], "timing": {}}) == [
        "/rates[0]/p: 0.98 against 0.9800001"
    ]
    assert _differences(a, {"rates": [], "timing": {}}) == ["/rates: 1 against 0 entries"]
    assert _differences(a, {"timing": {}}) == ["/rates: only in one"]


def test_a_targets_numbers_do_not_depend_on_the_other_targets_of_the_run(tmp_path):
    """`approximation`: sin(50x)'s networks (their keys fold in the target's name, its
    programs are compiled per shape) give the same errors to the last digit whether it
    runs alone or after two other targets of the same data shape."""
    common = dict(budgets=[64], depths=[1, 3], seeds=2, steps=200, lrs=[0.003, 0.01],
                  exercise_seeds=2, exercise_steps=2, no_progress=True)  # fmt: skip
    runs = {}
    for name, targets in (("alone", "sin50"), ("shared", "square,sawtooth,sin50")):
        mf.run_study("approximation", out=str(tmp_path / name), targets=targets, **common)
        r = json.loads((tmp_path / name / "results.json").read_text())
        runs[name] = next(p for p in r["points"] if p["target"] == "sin50")
    assert runs["alone"]["arms"] and _differences(runs["alone"], runs["shared"]) == []
