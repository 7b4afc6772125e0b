"""One writer per study folder: an OS-level lock held for the whole run, a second run
refused at once naming the holder's pid, and no stale lock after a kill -9."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from meanfield.cli import main
from meanfield.harness.folder import LOCK_NAME
from meanfield.harness.runner import StudyRunner
from meanfield.studies import StudyInputError

# a run that opens the folder (its lock), writes one point, says so and then waits
HOLDER = textwrap.dedent(
    """
    import sys, time
    from meanfield.harness.runner import StudyRunner
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
    # loaded, not recomputed (a compute that would give another value: no self-check)
    loaded = runner.run_points([{"L": 4}], lambda spec: {"value": 2.0}, check=False)
    assert loaded == [{"L": 4, "value": 1.0}]
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


def test_a_finished_folder_holds_no_lock_file_and_a_waiting_run_locks_a_new_one(tmp_path):
    """`finish` removes the lock file; a run that opened the old file before it went takes
    the lock on a file no longer at the path, sees so, and locks a new one."""
    out = tmp_path / "study"
    first = StudyRunner("toy", out, {"a": 1}, progress=False).open()
    stale = os.open(out / LOCK_NAME, os.O_RDWR)  # a second run's open, before the unlink
    first.finish({"points": []})
    assert not (out / LOCK_NAME).exists()
    assert sorted(p.name for p in out.iterdir()) == [
        ".meanfield-manifest.jsonl",
        "config.json",
        "points",
        "results.json",
    ]
    fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old file's lock: free
    second = StudyRunner("toy", out, {"a": 1}, resume=True, progress=False).open()
    assert (out / LOCK_NAME).read_text().split() == [str(os.getpid())]
    assert os.stat(out / LOCK_NAME).st_ino != os.fstat(stale).st_ino
    with pytest.raises(StudyInputError, match="in use"):  # the new file's lock is held
        StudyRunner("toy", out, {"a": 1}, resume=True, progress=False).open()
    os.close(stale)
    second.close()
    assert not (out / LOCK_NAME).exists()


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


def test_two_runs_started_at_once_on_a_fresh_folder_leave_the_winner_alone(tmp_path):
    """Both see the folder missing; the one refused must not remove the folder (nor the
    winner's lock file) that it also tried to make: the winner finishes its study."""
    import threading

    out = tmp_path / "fresh" / "study"
    b_waiting, a_locked, b_refused = threading.Event(), threading.Event(), threading.Event()
    refusal = []

    class Late(StudyRunner):  # B: sees the folder missing, then reaches the lock second
        def _lock(self):
            b_waiting.set()
            assert a_locked.wait(30)
            super()._lock()

    class Slow(StudyRunner):  # A: holds the lock, then waits for B's refusal
        def _open_locked(self):
            a_locked.set()
            assert b_refused.wait(30)
            super()._open_locked()

    def second():
        try:
            Late("variance", out, {"a": 1}, progress=False).open()
        except StudyInputError as err:
            refusal.append(str(err))
        finally:
            b_refused.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert b_waiting.wait(30)
    winner = Slow("variance", out, {"a": 1}, progress=False).open()
    thread.join(30)
    assert refusal and "in use by another meanfield run" in refusal[0]
    winner.run_points([{"L": 4}], lambda spec: {"value": 1.0})
    winner.finish({"points": []})
    assert (out / "results.json").exists() and not (out / LOCK_NAME).exists()
    assert (out / "points" / "L4.json").exists()
