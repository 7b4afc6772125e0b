"""Every study on one device, on four devices of one process, and on two processes of two
devices each (JAX's multi-process runtime): the same `results.json` numbers.

    python benchmarks/devices_and_processes.py [--studies NAME,...] [--json F] [--sizes quick]

Each study runs its tiny grid (`benchmarks/hostile_corpus.TINY`), or its quick preset with
`--sizes quick`, three ways on this machine's CPU, one after the other:

- `1x1`: one process, one device;
- `1x4`: one process, four devices (`XLA_FLAGS=--xla_force_host_platform_device_count=4`);
- `2x2`: two processes of two devices each, joined by `--coordinator 127.0.0.1:PORT
  --num-processes 2 --process-id I`; process 0 writes the folder.

Every number of the three `results.json` is compared (the records of where and how long
it ran, the versions and the self-check left out: `timing` (with `placement`),
`versions`, `self_check`), and the largest relative difference printed per study, with the wall
times.
"""

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from hostile_corpus import TINY  # noqa: E402

LEFT_OUT = ("timing", "versions", "self_check", "self_check_skipped")


def numbers(obj, path="") -> dict:
    """Every number of a JSON value by its path (booleans and strings left out)."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            if path == "" and k in LEFT_OUT:
                continue
            out.update(numbers(v, f"{path}/{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.update(numbers(v, f"{path}/{i}"))
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        out[path] = float(obj)
    return out


def largest_difference(a: dict, b: dict) -> tuple[float, str, int]:
    """(largest relative difference, where, how many numbers) of two results; infinite
    where the two hold different numbers (one has a path the other lacks, or a NaN on one
    side only)."""
    na, nb = numbers(a), numbers(b)
    if set(na) != set(nb):
        return math.inf, str(sorted(set(na) ^ set(nb))[:3]), len(na)
    worst, where = 0.0, ""
    for k, x in na.items():
        y = nb[k]
        if math.isnan(x) or math.isnan(y):
            d = 0.0 if math.isnan(x) and math.isnan(y) else math.inf
        elif x == y:
            d = 0.0
        else:
            d = abs(x - y) / max(abs(x), abs(y))
        if d > worst:
            worst, where = d, k
    return worst, where, len(na)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(devices: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", MEANFIELD_COMPILE_CACHE="off")
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def study_argv(name: str, out: Path, sizes: str) -> list[str]:
    grid = TINY[name].split() if sizes == "tiny" else ["--preset", "quick"]
    return [sys.executable, "-m", "meanfield", "study", name, *grid, "--out", str(out),
            "--no-progress"]  # fmt: skip


def launch(argv, processes: int, env: dict, logs: Path) -> list:
    """Start `argv` (a `meanfield study` command) as `processes` processes joined through a
    coordinator on a free port of this machine (one process: as it is); process i's
    output goes to `logs/i.out` and `logs/i.err` (files, not pipes: a full pipe would stop
    a process that the others wait for)."""
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for i in range(processes):
        join = ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(processes),
                "--process-id", str(i)] if processes > 1 else []  # fmt: skip
        with open(logs / f"{i}.out", "w") as out, open(logs / f"{i}.err", "w") as err:
            procs.append(subprocess.Popen([*argv, *join], env=env, stdout=out, stderr=err,
                                          text=True, cwd=ROOT))  # fmt: skip
    return procs


def run_one(name, out, devices, sizes, processes=1, extra=()) -> tuple[float, list]:
    """Run study `name` into `out` as `processes` processes of `devices` devices; the wall
    time and the processes' (returncode, output)."""
    argv = study_argv(name, out, sizes) + list(extra)
    logs = out.with_name(out.name + "-logs")
    t0 = time.perf_counter()
    procs = launch(argv, processes, environment(devices), logs)
    codes = [p.wait() for p in procs]
    seconds = time.perf_counter() - t0
    texts = [(logs / f"{i}.out").read_text() + (logs / f"{i}.err").read_text()
             for i in range(processes)]  # fmt: skip
    return seconds, list(zip(codes, texts, strict=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", default=",".join(TINY))
    parser.add_argument("--sizes", choices=("tiny", "quick"), default="tiny")
    parser.add_argument("--ways", default="1x1,1x4,2x2")
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", default=None, help="write the study folders here")
    args = parser.parse_args(argv)
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        for name in args.studies.split(","):
            row = {"study": name, "sizes": args.sizes}
            results = {}
            for way in args.ways.split(","):
                processes, devices = map(int, way.split("x"))
                out = Path(tmp) / f"{name}-{way}"
                seconds, outputs = run_one(name, out, devices, args.sizes, processes)
                row[f"{way}_seconds"] = round(seconds, 1)
                if any(rc != 0 for rc, _ in outputs):
                    row[f"{way}_failed"] = [o[-2000:] for rc, o in outputs if rc != 0]
                    ok = False
                    continue
                results[way] = json.loads((out / "results.json").read_text())
                placement = results[way]["timing"]["placement"]
                row[f"{way}_placement"] = [
                    placement["processes"],
                    placement["devices_per_process"],
                    sorted({p["mesh"] for p in placement["points"].values()}),
                ]
            base = results.get("1x1")
            for way, res in results.items():
                if way == "1x1" or base is None:
                    continue
                d, where, n = largest_difference(base, res)
                row[f"{way}_difference"] = d
                row[f"{way}_where"] = where
                row["numbers"] = n
                ok &= d <= 1e-9
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
