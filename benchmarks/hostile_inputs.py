"""The hostile-input corpus (issues 34 and 46), run as a user would.

Every input must end within 60 s either refused cleanly (one line on stderr naming the
problem, exit code 2, nothing left behind: no new folder, an existing one unchanged),
or run to the end (exit 0) where the row says it may, reporting its explosions where
there are any; never a traceback, a hang, a write outside the study's own folder. The
rows are in `benchmarks/hostile_corpus.py` (every option of every study, `--data`
files, `--block/--law` files, folders and links, `meanfield plot` on edited results,
the Python API).

    python benchmarks/hostile_inputs.py [--only SUBSTRING] [--group G] [--jobs 2]
                                        [--timeout 60] [--every K]

Prints one line per row as it ends, then the table of the rows that failed, the counts
by outcome and by group, and exits 1 if any row is not clean. `--every K` runs every
K-th row (a representative subset).

A full disk is simulated with a 256 kB tmpfs where this process may mount one (root);
otherwise that row is skipped and said so.
"""

import argparse
import collections
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_corpus import TINY, Row, make_templates, rows  # noqa: E402

RUN_TIMEOUT = 300.0  # seconds for a row allowed to run its tiny configuration

OUTCOMES = (
    "refused",  # one line, exit 2, nothing left behind
    "ran",  # exit 0
    "explosion",  # exit 0, explosions reported
    "refused, folder left",
    "refused for another reason",  # one line, exit 2, not naming the row's option
    "untidy refusal",  # exit 2 but several lines
    "crash",  # a traceback, an abort, another exit code
    "stopped",  # sent SIGINT (a row that loops): one line, exit 130, no false claim
    "hang",  # past the timeout
    "wrote outside",  # a file outside the study's folder created, changed or removed
    "setup failed",  # the corpus's own preparation of the row failed (a fault of the corpus)
)


def _argv(row: Row, case: Path) -> tuple[list[str], Path]:
    """The command and the folder the row's study writes (or plot reads)."""
    if isinstance(row.argv, str) and row.argv.startswith("python:"):
        code = row.argv[len("python:") :].replace("{case}", str(case))
        return [sys.executable, "-c", code], case / "out"
    args = row.argv if isinstance(row.argv, list) else row.argv.split()
    args = [a.replace("{case}", str(case)) for a in args]
    if args[0] == "plot":
        return [sys.executable, "-m", "meanfield", *args], Path(args[1])
    if "study" not in args:  # canary, info: no folder of a study
        return [sys.executable, "-m", "meanfield", *args], case / "out"
    given = [a.split("=", 1)[1] for a in args if a.startswith("--out=")]
    if given:  # a generated row's `--out=VALUE`
        out = Path(given[-1])
    else:
        if "--out" not in args:
            args = [*args, "--out", str(case / "out")]
        out = Path(args[args.index("--out") + 1])
    return [sys.executable, "-m", "meanfield", *args, "--no-progress"], out


def run_row(row: Row, root: Path, index: int, timeout: float) -> dict:
    case = root / f"case{index:04d}"
    case.mkdir()
    (case / "afile").write_text("x")
    cmd, out = _argv(row, case)
    if row.setup is not None:
        row.setup(case)
    before = _listing(case)
    env = {**os.environ, "MEANFIELD_NO_SELF_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    # a row that may run gets the time a tiny run takes; a refusal must come within `timeout`
    limit = timeout if row.expect == {"refused"} else max(timeout, RUN_TIMEOUT)
    if row.interrupt is not None:
        code, err = _interrupted(cmd, case, env, row.interrupt)
    else:
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=limit, cwd=case, env=env
            )
            code, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code = "timeout"
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    seconds = time.perf_counter() - t0
    after = _listing(case)
    out_rel = _rel(out, case)
    inside = lambda p: out_rel is not None and (p == out_rel or p.startswith(out_rel + "/"))
    outside_changed = {k: v for k, v in before.items() if not inside(k)} != {
        k: v for k, v in after.items() if not inside(k)
    }
    left = {k: v for k, v in before.items() if inside(k)} != {
        k: v for k, v in after.items() if inside(k)
    }
    # XLA's "Loading XLA:CPU AOT result" lines (openxla/xla#44565: one per program read
    # from the compilation cache on this CPU, issue 78) are not meanfield's output
    lines = [ln for ln in err.splitlines() if ln.strip() and "cpu_aot_loader" not in ln]
    errors = [ln for ln in lines if not ln.startswith("warning:") and "Warning" not in ln]
    if outside_changed:
        outcome = "wrote outside"
    elif code == "timeout":
        outcome = "hang"
    elif row.interrupt is not None and code == 130 and "Traceback" not in err:
        outcome = "stopped" if _stopped_cleanly(errors, row) else "untidy refusal"
    elif "Traceback" in err or code not in (0, 2):
        outcome = "crash"
    elif code == 2:
        if len(errors) != 1:
            outcome = "untidy refusal"
        elif row.names is not None and not _names(errors[0], row.names):
            outcome = "refused for another reason"
        else:
            outcome = "refused, folder left" if left else "refused"
    else:
        warned = [ln for ln in lines if ln.startswith("warning:") and "explod" in ln.lower()]
        outcome = "explosion" if warned else "ran"
    ok = outcome in row.expect and (seconds < timeout or outcome in ("ran", "explosion"))
    first = (errors or lines or [""])[0]
    if outcome == "crash":
        first = (lines or [""])[-1]
    return {
        "input": row.label,
        "group": row.group,
        "exit": code,
        "seconds": seconds,
        "stderr": first,
        "outcome": outcome,
        "ok": ok,
    }


STOP_SECONDS = 10.0  # a row sent SIGINT must end within this


def _interrupted(cmd, case: Path, env: dict, after: float) -> tuple:
    """Run `cmd`, send it SIGINT `after` seconds in, and wait `STOP_SECONDS` for it to
    end: (exit code or "timeout", stderr)."""
    import signal

    proc = subprocess.Popen(
        cmd, cwd=case, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        proc.wait(timeout=after)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=STOP_SECONDS)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return "timeout", err


def _stopped_cleanly(errors: list[str], row: Row) -> bool:
    """A stop's lines: the last says it stopped; a claim of kept points names a folder
    that holds them; the row's `names` (the user's file) is named on some line."""
    if not errors or "stopped by" not in errors[-1]:
        return False
    kept = re.search(r"(\d+) finished point\(s\) kept in (\S+);", errors[-1])
    if kept and int(kept.group(1)) == 0:
        return False  # "0 finished points kept" in a folder: say nothing was written
    return row.names is None or any(row.names in line for line in errors)


def _names(line: str, flag: str) -> bool:
    """Whether the error `line` names the option `flag` (alone or in a list such as
    "--L/--M/--seeds"; "--L" is not named by "--L-for-M")."""
    return re.search(re.escape(flag) + r"(?![\w-])", line) is not None


def _rel(path: Path, case: Path) -> str | None:
    try:
        return Path(os.path.abspath(path)).relative_to(case).as_posix()
    except ValueError:
        return None


def _listing(top: Path) -> dict:
    """Every entry under `top` (links not followed): relative path -> (kind, mtime, size);
    the lock file's content (the last holder's pid) may change, that it exists may not."""
    found = {}
    for root, dirs, names in os.walk(top):
        for name in [*dirs, *names]:
            path = Path(root) / name
            rel = path.relative_to(top).as_posix()
            if "__pycache__" in rel:
                continue
            st = path.lstat()
            if path.is_symlink():
                found[rel] = ("link", os.readlink(path))
            elif name == ".meanfield-lock":
                found[rel] = ("lock",)
            elif path.is_dir():
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", st.st_mtime_ns, st.st_size)
    return found


def full_disk_row(root: Path, timeout: float) -> dict | None:
    """A tiny study into a 256 kB tmpfs (needs root to mount): one line, exit 2."""
    mnt = root / "tmpfs"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        return None
    try:
        (mnt / "filler").write_bytes(b"\0" * (200 * 1024))
        argv = f"study tangent-kernel {TINY['tangent-kernel']} --out {mnt}/out"
        row = run_row(Row("full disk (256 kB tmpfs)", "folder", argv), root, 9999, timeout)
        # a write that fails midway may leave the folder it made: say so, but the
        # criterion is one line, exit 2 and no traceback
        row["ok"] = row["exit"] == 2 and row["outcome"] in ("refused", "refused, folder left")
        return row
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("--only", help="run the rows whose label contains this")
    parser.add_argument("--group", help="run the rows of this group (a study, plot, api, ...)")
    parser.add_argument("--every", type=int, default=1, help="run every K-th row")
    parser.add_argument("--jobs", type=int, default=2, help="rows run at once")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json", help="also write every row's outcome to this file")
    parser.add_argument(
        "--skip-log", metavar="FILE", help="skip the rows an earlier run's output (FILE) "
        "reported clean ('ok  [group] label: ...'), to finish a run that stopped",
    )  # fmt: skip
    parser.add_argument(
        "--templates", help="keep the finished tiny studies the rows start from in this "
        "folder, and reuse them from an earlier run (default: made afresh, removed)",
    )  # fmt: skip
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hostile-"))
    results = []
    try:
        templates = make_templates(Path(opts.templates) if opts.templates else root / "templates")
        done = _clean_in_log(Path(opts.skip_log)) if opts.skip_log else set()
        chosen = [
            r
            for r in rows(templates)
            if (not opts.only or opts.only in r.label)
            and (not opts.group or opts.group == r.group)
            and (r.group, r.label) not in done
        ][:: opts.every]
        print(f"{len(chosen)} rows, {opts.jobs} at a time", file=sys.stderr, flush=True)
        with concurrent.futures.ThreadPoolExecutor(opts.jobs) as pool:
            futures = {
                pool.submit(run_row, r, root, i, opts.timeout): r for i, r in enumerate(chosen)
            }
            for f in concurrent.futures.as_completed(futures):
                try:
                    r = f.result()
                except Exception as err:  # noqa: BLE001 - the row's own setup failed: said
                    row = futures[f]
                    r = {"group": row.group, "input": row.label, "ok": False, "exit": None,
                         "outcome": "setup failed", "seconds": 0.0,
                         "stderr": f"{type(err).__name__}: {err}"}  # fmt: skip
                results.append(r)
                print(
                    f"{'ok ' if r['ok'] else 'BAD'} [{r['group']}] {r['input']}: "
                    f"{r['outcome']}, exit {r['exit']}, {r['seconds']:.1f} s"
                    + ("" if r["ok"] else f": {r['stderr'][:200]}"),
                    file=sys.stderr,
                    flush=True,
                )
        if not opts.only and not opts.group and opts.every == 1:
            row = full_disk_row(root, opts.timeout)
            if row is None:
                print("full disk: no tmpfs could be mounted here (not root): skipped")
            else:
                results.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if opts.json:
        import json

        Path(opts.json).write_text(json.dumps(results, indent=1))
    bad = [r for r in results if not r["ok"]]
    if bad:
        print("| input | outcome | exit | seconds | stderr |")
        print("|---|---|---|---|---|")
        for r in bad:
            text = r["stderr"].replace("|", "\\|")[:160]
            print(f"| {r['input']} | {r['outcome']} | {r['exit']} | {r['seconds']:.1f} | {text} |")
    by_outcome = collections.Counter(r["outcome"] for r in results)
    print("\nby outcome: " + ", ".join(f"{k} {by_outcome[k]}" for k in OUTCOMES if by_outcome[k]))
    print("by group (clean/rows):")
    groups = collections.defaultdict(lambda: [0, 0])
    for r in results:
        groups[r["group"]][0] += r["ok"]
        groups[r["group"]][1] += 1
    for g, (ok, n) in sorted(groups.items()):
        print(f"  {g:<20} {ok}/{n}")
    slowest = max((r["seconds"] for r in results), default=0.0)
    print(
        f"\n{len(results) - len(bad)}/{len(results)} clean (slowest {slowest:.1f} s)"
        + (f"; not: {', '.join(r['input'] for r in bad)}" if bad else "")
    )
    return 1 if bad else 0


def _clean_in_log(path: Path) -> set[tuple[str, str]]:
    """(group, label) of every row an earlier run printed as clean."""
    done = set()
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("ok  [") and ", exit " in line:
            group, _, rest = line[5:].partition("] ")
            label = rest.rpartition(", exit ")[0].rpartition(": ")[0]
            done.add((group, label))
    return done


if __name__ == "__main__":
    sys.exit(main())
