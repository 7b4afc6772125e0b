"""The study runner: atomic points, resume after SIGKILL, reproducibility, refusals."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

from meanfield.harness.folder import point_name
from meanfield.harness.runner import StudyRunner
from meanfield.studies import StudyInputError

TINY = [
    "study",
    "mean-ode",
    "--L",
    "4,8",
    "--M",
    "1,4",
    "--L-for-M",
    "16",
    "--fit-M-max",
    "4",
    "--seeds",
    "3",
    "--order",
    "12",
    "--steps",
    "0",
    "--no-progress",
    "--compile-workers",
    "1",
]


def _cli(out, *extra):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return [sys.executable, "-m", "meanfield", *TINY, "--out", str(out), *extra], env


def _resume_here(out):
    """`--resume` of the study in `out`, as `meanfield.cli.main` in this process (a process
    other than the one that wrote the points and than the uninterrupted run's)."""
    from meanfield.cli import main

    assert main([*TINY, "--out", str(out), "--resume"]) == 0


def _without_timing(path: Path) -> dict:
    body = json.loads(path.read_text())
    body.pop("timing")
    return body


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("runner") / "whole"
    cmd, env = _cli(out)
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=HANG_GUARD_S)
    return out


def test_sigkill_then_resume_loses_and_recomputes_nothing(uninterrupted, tmp_path):
    """Kill a run after two grid points, resume it: the finished points are kept as they
    are, and the results equal those of the uninterrupted run (another process with the
    same seed: this is also the reproducibility check)."""
    out = tmp_path / "killed"
    _stop_after_two_points(out, signal.SIGKILL)
    points = out / "points"
    assert not (out / "results.json").exists()
    finished = {p.name: p.stat().st_mtime_ns for p in points.glob("*.json")}
    # grid points; the reference's checksum file (reference.npz.json) is not a point
    finished_names = {p[: -len(".json")] for p in finished if not p.endswith(".npz.json")}
    assert len(finished) >= 2

    _resume_here(out)
    for name, mtime in finished.items():
        assert (points / name).stat().st_mtime_ns == mtime, f"{name} was rewritten"
    result = json.loads((out / "results.json").read_text())
    assert finished_names <= set(result["timing"]["loaded"])
    assert not finished_names & set(result["timing"]["computed"])
    assert _without_timing(out / "results.json") == _without_timing(uninterrupted / "results.json")


def _stop_after_two_points(out, signum):
    """Run the tiny study into `out`, send `signum` once two points are written; its exit
    status and stderr."""
    cmd, env = _cli(out)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    points = out / "points"
    deadline = time.time() + 600
    try:
        while time.time() < deadline:
            done = list(points.glob("L*_M*.json")) if points.exists() else []
            if len(done) >= 2:
                break
            if proc.poll() is not None:
                pytest.fail("the study finished before it could be stopped")
            time.sleep(0.2)
        else:
            pytest.fail("no grid point was written in time")
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_sigint_or_sigterm_stops_in_one_line_and_resume_finishes(uninterrupted, tmp_path, signum):
    """Ctrl-C or a scheduler's SIGTERM mid-run: one line naming the signal and the kept
    points, exit status 130 or 143, no traceback; `--resume` then gives the uninterrupted
    run's results."""
    out = tmp_path / "stopped"
    rc, err = _stop_after_two_points(out, signum)
    name = signal.Signals(signum).name
    assert rc == 128 + signum, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(f"meanfield study mean-ode: stopped by {name}; "), err
    assert "finished point(s) kept in" in lines[-1] and "--resume" in lines[-1]
    assert "Traceback" not in err and not (out / "results.json").exists()
    if signum == signal.SIGINT:  # one resume suffices to show the kept points are whole
        _resume_here(out)
        assert _without_timing(out / "results.json") == _without_timing(
            uninterrupted / "results.json"
        )


def test_runner_writes_atomically_and_resumes(tmp_path):
    calls = []

    def compute(spec):
        calls.append(spec["L"])
        return {"value": spec["L"] * 2.0}

    specs = [{"L": 4}, {"L": 8}]
    runner = StudyRunner("toy", tmp_path / "out", {"a": 1}, progress=False)
    assert not (tmp_path / "out").exists()  # nothing written before open()
    points = runner.run_points(specs, compute, check=False)  # calls counted: no self-check
    assert points == [{"L": 4, "value": 8.0}, {"L": 8, "value": 16.0}]
    assert sorted(p.name for p in (tmp_path / "out" / "points").iterdir()) == ["L4.json", "L8.json"]
    assert json.loads((tmp_path / "out" / "points" / "L4.json").read_text())["point"] == points[0]
    (tmp_path / "out" / "points" / "L8.json").unlink()
    runner.close()  # the folder's lock: one runner at a time
    again = StudyRunner("toy", tmp_path / "out", {"a": 1}, resume=True, progress=False)
    assert again.run_points(specs, compute, check=False) == points
    assert calls == [4, 8, 8]
    assert again.loaded == ["L4"] and again.computed == ["L8"]
    path = again.finish({"points": points, "fits": [], "reference": {}})
    body = json.loads(path.read_text())
    assert body["study"] == "toy" and body["config"] == {"a": 1} and "timing" in body
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_runner_counts_the_programs_it_compiles(tmp_path):
    """`timing.compiles`: every program XLA compiled between the runner's start and its
    finish, in the points' threads too, and none after (a plain count: each new shape of a
    fresh function is one program; the same shape again is none)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    f = jax.jit(lambda x: jnp.sin(x) * 1.75 - x)  # a function no other test compiles
    jax.jit(lambda x: x + 0.5)(np.ones(3))  # before the runner: not counted
    runner = StudyRunner("toy", tmp_path / "out", {"a": 1}, progress=False)

    def compute(spec):  # the shape n, then the shape 3 again (seen at the first point)
        values = np.asarray(f(np.ones(spec["n"]))), np.asarray(f(np.ones(3)))
        return {"value": float(values[0].sum() + values[1].sum())}  # NumPy: no program

    specs = [{"n": 3}, {"n": 4}, {"n": 5}, {"n": 6}]
    runner.run_points(specs, compute, check=False)
    body = json.loads(runner.finish({"points": [], "fits": [], "reference": {}}).read_text())
    compiles = body["timing"]["compiles"]
    assert compiles["programs"] + compiles["cache_hits"] == len(specs), compiles
    assert compiles["self_check_programs"] == 0 and compiles["seconds"] > 0
    assert runner._compiles is None  # after the finish the runner no longer counts


def test_runner_refusals(tmp_path):
    StudyRunner("toy", tmp_path / "out", {"a": 1}, progress=False).open()
    with pytest.raises(StudyInputError, match="--resume"):
        StudyRunner("toy", tmp_path / "out", {"a": 2}, resume=True, progress=False).open()
    with pytest.raises(StudyInputError, match="already holds"):
        StudyRunner("toy", tmp_path / "out", {"a": 1}, progress=False).open()
    StudyRunner("toy", tmp_path / "out", {"a": 2}, overwrite=True, progress=False).open()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StudyInputError, match="--out"):
        StudyRunner("toy", blocker, {}, progress=False)
    with pytest.raises(StudyInputError, match="--out"):
        StudyRunner("toy", blocker / "below", {}, progress=False)
    # a dangling link on the way (a results link to a disk not mounted): one line, no
    # traceback from mkdir
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    with pytest.raises(StudyInputError, match=r"^--out: cannot create .*dangling"):
        StudyRunner("toy", tmp_path / "dangling" / "v", {}, progress=False).open()
    if os.geteuid() != 0:  # root can write anywhere
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        with pytest.raises(StudyInputError, match="not writable"):
            StudyRunner("toy", locked / "x", {}, progress=False)


def test_point_names_keep_close_values_apart():
    """Values that `:g` would round to one name (6 significant digits) keep every digit;
    the usual ones keep their short names (the files of earlier studies)."""
    assert point_name({"L": 64, "gamma": 0.5}) == "L64_gamma0.5"
    a, b = point_name({"gamma": 0.5000001}), point_name({"gamma": 0.5000002})
    assert a != b and a == "gamma0.5000001"


def test_point_names_are_file_safe():
    assert point_name({"L": 64, "M": 16, "beta": 0.5, "w": "fbm/x"}) == "L64_M16_beta0.5_wfbm-x"


def test_every_studys_explosions_are_warned(tmp_path):
    """Issue 74: a study whose summaries left exploded draws out gets a warning naming the
    points and counts in results.json, unless it warned of them itself; none without."""
    from meanfield.harness.runner import exploded_warning
    from meanfield.stats.fits import summarize

    calm = [{"L": 4, "error": summarize([1.0, 2.0, 3.0])}]
    blown = [
        {"L": 4, "error": summarize([1.0, 2.0, 3.0])},
        {"L": 8, "cells": [{"error": summarize([1.0, float("nan"), 1e9])}]},
    ]
    assert exploded_warning(calm) is None
    line = exploded_warning(blown)
    assert line is not None and "at 1 point(s): point 1: 2 of 3 draws (cells[0].error)" in line
    runner = StudyRunner("toy", tmp_path / "a", {"a": 1}, progress=False)
    body = json.loads(runner.finish({"points": blown, "fits": [], "reference": {}}).read_text())
    assert body["warnings"] == [line]
    own = StudyRunner("toy", tmp_path / "b", {"a": 1}, progress=False)
    said = {"points": blown, "fits": [], "reference": {}, "warnings": ["3 draws exploded at L=8"]}
    assert json.loads(own.finish(said).read_text())["warnings"] == ["3 draws exploded at L=8"]
    quiet = StudyRunner("toy", tmp_path / "c", {"a": 1}, progress=False)
    assert (
        json.loads(quiet.finish({"points": calm, "fits": [], "reference": {}}).read_text())[
            "warnings"
        ]
        == []
    )
