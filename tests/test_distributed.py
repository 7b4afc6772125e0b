"""A study's grid points over several devices and processes (`meanfield.runtime.distribution`,
`StudyRunner.run_points`): whole points on a process's devices, a share of them per process
through JAX's multi-process runtime, the same `results.json` numbers as one device; a killed
process stops the other in one line and `--resume` finishes.

Several devices and processes on a CPU need fresh processes
(`XLA_FLAGS=--xla_force_host_platform_device_count=N` before jax is imported): those checks
run the command line in subprocesses, beside an in-process run of the same study."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import pytest

from meanfield.cli import main
from meanfield.runtime import distribution
from meanfield.studies import StudyInputError, distributed_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from conftest import HANG_GUARD_S  # noqa: E402
from devices_and_processes import largest_difference, launch  # noqa: E402

# six points (three depths, two gammas): a share of three per process, two devices each
VARIANCE = "study variance --L 2,4,8 --gammas 0.5,1 --nets 8 --c-samples 2000".split()
# two chunks of draws, the seeds of each over the process's devices (`spread="seeds"`)
PHASES = "study phases --L 4,8 --beta 0.25,1 --seeds 8 --batch 4 --d 4 --bootstrap 20".split()


def _env(devices: int, **extra) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT), **extra)
    # added to the suite's compile flags (conftest.py), not in their place
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env["XLA_FLAGS"] = flags.strip()
    return env


def _launch(argv, out, processes, devices=2, extra=(), **env):
    """The processes, and a function giving process i's (stdout, stderr) once it ended."""
    command = [sys.executable, "-m", "meanfield", *argv, "--out", str(out), "--no-progress",
               *extra]  # fmt: skip
    logs = out.with_name(out.name + "-logs")
    procs = launch(command, processes, _env(devices, **env), logs)
    return procs, lambda i: ((logs / f"{i}.out").read_text(), (logs / f"{i}.err").read_text())


def _numbers_equal(a: Path, b: Path) -> dict:
    ra, rb = (json.loads((p / "results.json").read_text()) for p in (a, b))
    difference, where, count = largest_difference(ra, rb)
    assert count > 50
    assert difference == 0.0, (difference, where)
    return rb


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """The two studies in this process, on its one device (the reference)."""
    assert jax.device_count() == 1
    folder = tmp_path_factory.mktemp("one")
    for name, argv in (("variance", VARIANCE), ("phases", PHASES)):
        assert main([*argv, "--out", str(folder / name), "--no-progress"]) == 0
    return folder


@pytest.mark.parametrize(("name", "argv"), [("variance", VARIANCE), ("phases", PHASES)])
def test_two_processes_of_two_devices_equal_one_device(one_device, tmp_path, name, argv):
    """2 processes x 2 devices: every number of results.json equal to one device's; each
    point's process and devices recorded; only process 0 writes; each says who it is."""
    procs, output = _launch(argv, tmp_path / "s", 2, extra=["--no-self-check"])
    for p in procs:
        p.wait(timeout=HANG_GUARD_S)
    outs = [output(i) for i in range(2)]
    assert [p.returncode for p in procs] == [0, 0], outs
    res = _numbers_equal(one_device / name, tmp_path / "s")
    placement = res["timing"]["placement"]
    assert placement["processes"] == 2 and placement["devices_per_process"] == 2
    points = placement["points"]
    assert {p["process"] for p in points.values()} == {0, 1}
    spread_seeds = name == "phases"
    assert {p["mesh"] for p in points.values()} == ({2} if spread_seeds else {1})
    for i, (stdout, _) in enumerate(outs):
        assert f"process {i} of 2, 2 device(s) here" in stdout
    assert "process 0 writes" in outs[1][0] and "wrote" not in outs[1][0]
    # an artifact (variance's constant c) computed by process 0 alone, sent to process 1
    assert ("point(s) here; c from process 0;" in outs[1][0]) == (name == "variance")
    assert "c" in res["timing"]["computed"] if name == "variance" else True
    assert "wrote" in outs[0][0]


def test_a_killed_process_stops_the_other_in_one_line_and_resume_finishes(one_device, tmp_path):
    """SIGKILL to process 1 once points are written: process 0 stops (its heartbeat watch,
    2 s here) with one
    line naming it and --resume; a --resume run (one process) finishes with the numbers of
    an uninterrupted run."""
    out = tmp_path / "s"
    (p0, p1), output = _launch(VARIANCE, out, 2, MEANFIELD_PROCESS_TIMEOUT="2")
    deadline = time.time() + 300
    while time.time() < deadline and len(list((out / "points").glob("L*.json"))) < 2:
        time.sleep(0.1)
    p1.send_signal(signal.SIGKILL)
    assert p0.wait(timeout=120) == 1  # a guard against a hang; the time is in RESULTS.md
    err = output(0)[1]
    line = [x for x in err.splitlines() if "cpu_aot" not in x and x.strip()][-1]
    assert "process 0 of 2 stops: process 1 of 2 stopped answering" in line
    assert "--resume" in line
    p1.wait()
    kept = {p.name for p in (out / "points").glob("L*.json")}
    assert 2 <= len(kept) < 6
    assert main([*VARIANCE, "--out", str(out), "--resume", "--no-progress"]) == 0
    res = _numbers_equal(one_device / "variance", out)
    assert {f"{n}.json" for n in res["timing"]["loaded"] if n.startswith("L")} == kept


def test_settings_refused_in_one_line(capsys):
    class Args:
        distributed, coordinator, num_processes, process_id = False, None, None, None
        study, join_timeout = "variance", None

    a = Args()
    assert distributed_settings(a) is None
    a.num_processes = 2
    with pytest.raises(StudyInputError, match="^--num-processes, --process-id: give both"):
        distributed_settings(a)
    a.process_id = 2
    with pytest.raises(StudyInputError, match="^--process-id: 2 is not below"):
        distributed_settings(a)
    a.process_id = 1
    for bad in ("localhost", "host:0", ":80", "host:port"):
        a.coordinator = bad
        with pytest.raises(StudyInputError, match="^--coordinator: expected HOST:PORT"):
            distributed_settings(a)
    a.coordinator = "10.0.0.1:1234"
    assert distributed_settings(a) == {
        "coordinator": "10.0.0.1:1234", "num_processes": 2, "process_id": 1,
        "join_timeout": 60.0, "where": "meanfield study variance",
    }  # fmt: skip
    assert main([*VARIANCE, "--process-id", "3", "--num-processes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "meanfield study variance: error: --process-id: 3 is not below --num-processes 2"


def test_map_on_devices_yields_every_item_once_on_its_device():
    """Threads over devices (here one device named twice: two at once): every item once,
    its `point_devices()` the one device it ran on; the first error raised, once the
    points running end."""
    d = jax.local_devices()[0]
    seen = []

    def fn(x):
        seen.append((x, distribution.point_devices(), threading.current_thread().name))
        time.sleep(0.01)
        return x * x

    got = sorted((i, out, mesh) for i, out, _, mesh in distribution.map_on_devices(
        fn, list(range(7)), [d, d]))  # fmt: skip
    assert got == [(i, i * i, 1) for i in range(7)]
    assert all(devs == [d] and name.startswith("meanfield-device") for _, devs, name in seen)
    assert distribution.point_devices() is None
    # one device: in order, in this thread
    seen.clear()
    assert [out for _, out, _, _ in distribution.map_on_devices(fn, [3, 1], [d])] == [9, 1]
    assert all(name == threading.current_thread().name for _, _, name in seen)

    def bad(x):
        if x == 2:
            raise ValueError("point 2")
        return x

    with pytest.raises(ValueError, match="point 2"):
        list(distribution.map_on_devices(bad, list(range(5)), [d, d]))
    with pytest.raises(ValueError, match="at least one device"):
        with distribution.on_devices([]):
            pass


def test_distributed_with_no_coordinator_is_one_line():
    """`--distributed` outside a cluster, no coordinator: one line, exit status 2 (in a
    process of its own: joining the runtime is once per process)."""
    env = _env(1)
    for name in [k for k in env if k.startswith(("SLURM_", "OMPI_", "JAX_COORDINATOR"))]:
        env.pop(name)
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", *VARIANCE, "--distributed", "--no-progress"],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT,
    )  # fmt: skip
    lines = [x for x in proc.stderr.splitlines() if "cpu_aot" not in x and x.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith(
        "meanfield study variance: error: --distributed: cannot join the processes: "
    ), lines
