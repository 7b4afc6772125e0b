"""One writer per study folder: an OS-level lock held for the whole run, a second run
refused at once naming the holder's pid, and no stale lock after a kill -9."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from meanfield.cli import main
from meanfield.studies.runner import LOCK_NAME, StudyInputError, StudyRunner

# a run that opens the folder (its lock), writes one point, says so and then waits
HOLDER = textwrap.dedent(
    """
    import sys, time
    from meanfield.studies.runner import StudyRunner
    runner = StudyRunner("variance", sys.argv[1], {"a": 1}, resume=True, progress=False)
    runner.run_points([{"L": 4}], lambda spec: {"value": 1.0})
    print("holding", flush=True)
    time.sleep(600)
    """
)


def _holder(out):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the lock is held and a point written
    assert line.strip() == "holding", line
    return proc


def test_a_second_run_is_refused_at_once_naming_the_pid(tmp_path):
    out = tmp_path / "study"
    proc = _holder(out)
    try:
        before = sorted(p.name for p in out.rglob("*"))
        for kw in ({"resume": True}, {"overwrite": True}, {}):
            with pytest.raises(StudyInputError, match=rf"in use by .*pid {proc.pid}\)"):
                StudyRunner("variance", out, {"a": 1}, progress=False, **kw).open()
        assert sorted(p.name for p in out.rglob("*")) == before  # nothing written
        (out / "points" / "L4.json").stat()  # the holder's point is untouched
    finally:
        proc.kill()
        proc.wait()


def test_the_command_line_refuses_a_held_folder_in_one_line(tmp_path, capsys):
    out = tmp_path / "study"
    proc = _holder(out)
    try:
        code = main(["study", "variance", "--out", str(out), "--resume", "--no-progress"])
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and str(out) in err[0] and f"pid {proc.pid}" in err[0], err


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    out = tmp_path / "study"
    proc = _holder(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (out / LOCK_NAME).exists()  # the file stays, its lock went with the process
    runner = StudyRunner("variance", out, {"a": 1}, resume=True, progress=False)
    assert runner.run_points([{"L": 4}], lambda spec: {"value": 2.0}) == [{"L": 4, "value": 1.0}]
    assert runner.loaded == ["L4"]
    runner.finish({"points": []})


def test_the_lock_is_held_until_finish_and_records_the_pid(tmp_path):
    out = tmp_path / "study"
    first = StudyRunner("toy", out, {"a": 1}, progress=False).open()
    assert (out / LOCK_NAME).read_text().split() == [str(os.getpid())]
    with pytest.raises(StudyInputError, match="in use"):
        StudyRunner("toy", out, {"a": 1}, resume=True, progress=False).open()
    first.finish({"points": []})
    StudyRunner("toy", out, {"a": 1}, resume=True, progress=False).open().close()


def test_the_lock_comes_before_anything_is_written(tmp_path):
    """A refused run finds the folder as the holder left it, and a fresh folder it made
    for nothing is not left behind either."""
    out = tmp_path / "study"
    first = StudyRunner("toy", out, {"a": 1}, progress=False).open()
    listing = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(StudyInputError):
        StudyRunner("toy", out, {"b": 2}, overwrite=True, progress=False).open()
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == listing
    first.close()
