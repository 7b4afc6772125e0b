"""Issue 34's acceptance on a real study folder (a tiny `meanfield study mean-ode` grid):

* concurrency: two runs on one folder, in every order of start (plain/plain,
  plain/--resume, --resume/plain, --resume/--resume, and both at once): exactly one
  runs, the other is refused (exit 2) in under 5 s, and the final results.json equals a
  clean run's; kill -9 of the holder mid-grid, then --resume: completes, identical;
* --overwrite keeps the user's own files; a point file truncated, copied from another
  seed or edited is recomputed on --resume, and the result equals a clean run's.

    python benchmarks/folder_safety.py

Prints one line per check and exits 1 if any fails.
"""

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TINY = (
    "study mean-ode --L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 3 --order 12 "
    "--steps 0 --no-progress --compile-workers 1"
).split()


def cmd(out, *extra):
    return [sys.executable, "-m", "meanfield", *TINY, "--out", str(out), *extra]


def body(out):
    data = json.loads((Path(out) / "results.json").read_text())
    data.pop("timing")
    return data


def pair(root, first, second, delay, clean):
    out = root / f"pair-{'-'.join(first + second) or 'plain'}-{delay}"
    procs, starts = [], []
    for extra, wait in ((first, 0.0), (second, delay)):
        time.sleep(wait)
        starts.append(time.perf_counter())
        procs.append(
            subprocess.Popen(
                cmd(out, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
        )
    ends = {}
    while len(ends) < 2:
        for i, p in enumerate(procs):
            if i not in ends and p.poll() is not None:
                ends[i] = time.perf_counter()
        time.sleep(0.05)
    codes = [p.returncode for p in procs]
    errs = [p.stderr.read() if p.stderr else "" for p in procs]
    refused = [i for i in (0, 1) if codes[i] == 2]
    ok = sorted(codes) == [0, 2] and len(refused) == 1
    secs = ends[refused[0]] - starts[refused[0]] if refused else float("nan")
    line = errs[refused[0]].strip().splitlines()[-1] if refused else ""
    # refused by the lock ("in use"), or, where the first run ended before the second
    # reached the folder, as a finished study ("already holds"): never both running
    ok = ok and secs < 5 and body(out) == clean and ("in use" in line or "already holds" in line)
    print(
        f"{'ok ' if ok else 'BAD'} concurrent {first or ['plain']} then {second or ['plain']} "
        f"{delay:.1f} s later: exits {codes}, refused after {secs:.1f} s "
        f"({line[:110]}); results equal a clean run's: {body(out) == clean}",
        flush=True,
    )
    return ok


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="folder-safety-"))
    oks = []
    try:
        subprocess.run(cmd(root / "clean"), check=True, capture_output=True)
        clean = body(root / "clean")
        subprocess.run(cmd(root / "seed1", "--seed", "1"), check=True, capture_output=True)
        for first, second, delay in (
            ([], [], 1.0),
            ([], ["--resume"], 1.0),
            (["--resume"], [], 1.0),
            (["--resume"], ["--resume"], 1.0),
            ([], [], 0.0),
            (["--resume"], [], 0.0),
        ):
            oks.append(pair(root, first, second, delay, clean))
        # kill -9 the holder after its first points, then --resume
        out = root / "killed"
        proc = subprocess.Popen(cmd(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not list((out / "points").glob("L*_M*.json")) if (out / "points").exists() else True:
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kept = len(list((out / "points").glob("L*_M*.json")))
        t0 = time.perf_counter()
        rc = subprocess.run(cmd(out, "--resume"), capture_output=True).returncode
        ok = rc == 0 and body(out) == clean
        print(
            f"{'ok ' if ok else 'BAD'} kill -9 after {kept} point(s), --resume: exit {rc} in "
            f"{time.perf_counter() - t0:.1f} s, results equal a clean run's: {ok}",
            flush=True,
        )
        oks.append(ok)
        # --overwrite keeps the user's files
        out = root / "clean-copy"
        shutil.copytree(root / "clean", out)
        mine = {"notes.json": b'{"mine": 1}', "figure.png": b"png", "data.npz": b"npz"}
        for name, data in mine.items():
            (out / name).write_bytes(data)
        rc = subprocess.run(cmd(out, "--overwrite"), capture_output=True).returncode
        kept = all((out / n).read_bytes() == d for n, d in mine.items())
        ok = rc == 0 and kept and body(out) == clean
        print(
            f"{'ok ' if ok else 'BAD'} --overwrite: exit {rc}, user's 3 files kept: {kept}, "
            f"results equal: {body(out) == clean}",
            flush=True,
        )
        oks.append(ok)
        # corrupted points, then --resume
        for how in ("truncated", "copied from --seed 1", "edited (a value x1000)"):
            out = root / f"corrupt-{how.split()[0]}"
            shutil.copytree(root / "clean", out)
            (out / "results.json").unlink()
            point = out / "points" / "L8_M4.json"
            if how == "truncated":
                point.write_bytes(point.read_bytes()[:100])
            elif how.startswith("copied"):
                shutil.copy(root / "seed1" / "points" / "L8_M4.json", point)
            else:
                rec = json.loads(point.read_text())
                rec["point"]["steps"][0]["delta_h"]["mean"] *= 1000
                point.write_text(json.dumps(rec))
            proc = subprocess.run(cmd(out, "--resume"), capture_output=True, text=True)
            said = [ln for ln in proc.stderr.splitlines() if "L8_M4.json" in ln]
            result = json.loads((out / "results.json").read_text())
            ok = (
                proc.returncode == 0
                and body(out) == clean
                and said
                and result["timing"]["recomputed"] == 1
            )
            print(
                f"{'ok ' if ok else 'BAD'} point {how}: exit {proc.returncode}, "
                f"recomputed {result['timing']['recomputed']} ({said[0] if said else 'not said'}),"
                f" results equal: {body(out) == clean}",
                flush=True,
            )
            oks.append(ok)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{sum(oks)}/{len(oks)} checks passed")
    return 0 if all(oks) else 1


if __name__ == "__main__":
    sys.exit(main())
