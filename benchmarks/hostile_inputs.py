"""Hostile inputs to `meanfield study ...`, run as a user would (issue 34).

Every input must end within 60 s with a one-line error and exit code 2 (nothing left
behind: no new folder, an existing one unchanged) or a finished run that reports its
explosions; never a traceback. Prints the table (input, exit code, seconds, first line
of stderr, folder left behind) and exits 1 if any row fails.

    python benchmarks/hostile_inputs.py [--only SUBSTRING] [--timeout 60]

A full disk is simulated with a 256 kB tmpfs where this process may mount one (root);
otherwise that row is skipped and said so. Read-only folders are not read-only to root:
that row then checks the write refusal through a folder that is a file instead.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# a mean-ode grid small enough for seconds on a CPU
TINY_ODE = "--L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 3 --order 12 --steps 1"
TINY_TK = "--L 2,4 --gammas 0.5,1 --M 2 --nets 2 --d 2"
BIG = str(10**9)


def rows(root: Path):
    """(label, arguments after `meanfield`, setup(out) or None, expected: 'refused',
    'ok' or 'either')."""

    def garbled_config(out):
        out.mkdir()
        (out / "config.json").write_text("{garbled")
        (out / "points").mkdir()
        (out / "points" / "L4_M1.json").write_text("{}")

    def other_kind(out):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "meanfield",
                "study",
                "tangent-kernel",
                *TINY_TK.split(),
                "--out",
                str(out),
                "--no-progress",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def a_file(out):
        out.write_text("not a folder")

    return [
        # the four hangs of the issue
        ("mean-ode --lr 1000", "study mean-ode --lr 1000", None, "refused"),
        ("mean-ode --sigma-xi 1e300", "study mean-ode --sigma-xi 1e300", None, "refused"),
        (
            "phases smooth --length-scale 1e-9",
            "study phases --weights smooth --length-scale 1e-9",
            None,
            "refused",
        ),
        ("response --depths 2,1000000", "study response --depths 2,1000000", None, "refused"),
        # huge grids
        ("mean-ode huge width", f"study mean-ode --L 4,8 --M 1,{BIG}", None, "refused"),
        ("mean-ode huge seeds", f"study mean-ode --seeds {BIG}", None, "refused"),
        ("mean-ode huge steps", f"study mean-ode --steps {BIG}", None, "refused"),
        ("sde huge --n-fine", f"study sde --n-fine {2**34}", None, "refused"),
        ("phases huge depth", f"study phases --L 16,{2**30}", None, "refused"),
        ("phases huge d", "study phases --d 100000", None, "refused"),
        ("response huge width", f"study response --width {BIG}", None, "refused"),
        ("variance huge depth", f"study variance --L 4,{BIG}", None, "refused"),
        ("tangent-kernel huge d", f"study tangent-kernel --d {BIG}", None, "refused"),
        # zero / negative sizes
        ("mean-ode --L 0,8", "study mean-ode --L 0,8", None, "refused"),
        ("mean-ode --seeds -1", "study mean-ode --seeds -1", None, "refused"),
        ("sde --d 0", "study sde --d 0", None, "refused"),
        ("two-layer --M 0,4", "study two-layer --M 0,4", None, "refused"),
        ("response --width -5", "study response --width -5", None, "refused"),
        # NaN / inf values
        ("mean-ode --lr nan", "study mean-ode --lr nan", None, "refused"),
        ("mean-ode --lr inf", "study mean-ode --lr inf", None, "refused"),
        ("mean-ode --sigma-xi nan", "study mean-ode --sigma-xi nan", None, "refused"),
        ("phases --beta nan,1", "study phases --beta nan,1", None, "refused"),
        ("response --K0 inf", "study response --K0 inf", None, "refused"),
        ("sde fbm --hurst nan", "study sde --weights fbm --hurst nan", None, "refused"),
        # absurd scales
        ("mean-ode --sigma-u 1e300", "study mean-ode --sigma-u 1e300", None, "refused"),
        ("response --sigma-w2 1e300", "study response --sigma-w2 1e300", None, "refused"),
        (
            "sde smooth --length-scale 1e-12",
            "study sde --weights smooth --length-scale 1e-12",
            None,
            "refused",
        ),
        ("mean-ode --lr 2 (tiny grid)", f"study mean-ode {TINY_ODE} --lr 2", None, "either"),
        ("mean-ode --lr 10", "study mean-ode --lr 10", None, "refused"),
        # empty lists
        ("mean-ode --L ''", ["study", "mean-ode", "--L", ""], None, "refused"),
        ("variance --gammas ,", "study variance --gammas ,", None, "refused"),
        ("phases --beta ''", ["study", "phases", "--beta", ""], None, "refused"),
        # options that do not apply, abbreviations
        ("mean-ode --see 3 (abbreviation)", "study mean-ode --see 3", None, "refused"),
        ("mean-ode --sigma-v 2 (non-centred)", "study mean-ode --sigma-v 2", None, "refused"),
        ("mean-ode --particles 64 (quadrature)", "study mean-ode --particles 64", None, "refused"),
        ("phases --no-heatmap (iid)", "study phases --no-heatmap", None, "refused"),
        (
            "response --no-simulate --width 10",
            "study response --no-simulate --width 10",
            None,
            "refused",
        ),
        ("sde brownian --rtol 1e-8", "study sde --rtol 1e-8", None, "refused"),
        # folders
        (
            "unicode --out (tiny run)",
            f"study tangent-kernel {TINY_TK} --out {{root}}/résultats-✓",
            None,
            "ok",
        ),
        ("--out is a file", "study tangent-kernel", a_file, "refused"),
        ("--out below a file", "study tangent-kernel --out {root}/afile/below", None, "refused"),
        ("--resume, garbled config.json", "study mean-ode --resume", garbled_config, "refused"),
        (
            "--overwrite, another study's folder",
            f"study mean-ode {TINY_ODE} --overwrite",
            other_kind,
            "refused",
        ),
        ("--seed 2^31", f"study variance --seed {2**31}", None, "refused"),
        (
            "two-layer --data missing.npz",
            "study two-layer --data /nonexistent.npz",
            None,
            "refused",
        ),
        (
            "mean-ode --block no.such:Thing",
            "study mean-ode --block no.such:Thing --law a:b",
            None,
            "refused",
        ),
    ]


def run_row(label, argv, setup, expected, root: Path, timeout: float) -> dict:
    case = root / f"case{abs(hash(label)) % 10**8}"
    case.mkdir()
    (case / "afile").write_text("x")
    args = argv if isinstance(argv, list) else argv.replace("{root}", str(case)).split()
    if "--out" not in args:
        args = [*args, "--out", str(case / "out")]
    out = Path(args[args.index("--out") + 1])
    if setup is not None:
        setup(out)
    before = _listing(out)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "meanfield", *args, "--no-progress"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = "timeout", (exc.stderr or b"").decode(errors="replace")
    seconds = time.perf_counter() - t0
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if not ln.startswith("warning:") and "Warning" not in ln]
    left = _listing(out) != before
    traceback = "Traceback" in err
    if expected == "refused":
        ok = code == 2 and len(errors) == 1 and not left and not traceback
    elif expected == "ok":
        ok = code == 0 and not traceback
    else:
        ok = (code == 0 or (code == 2 and len(errors) == 1 and not left)) and not traceback
    ok = ok and seconds < timeout
    first = (errors or lines or [""])[0]
    return {
        "input": label,
        "exit": code,
        "seconds": seconds,
        "stderr": first,
        "left": left,
        "ok": ok,
    }


def _listing(path: Path):
    if not path.exists():
        return None
    if path.is_file():
        return ("file", path.stat().st_mtime_ns)
    # the lock file's content (the last holder's pid) may change; that it exists may not
    return sorted(
        (str(p.relative_to(path)), 0 if p.name == ".meanfield-lock" else p.stat().st_mtime_ns)
        for p in path.rglob("*")
    )


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
        row = run_row(
            "full disk (256 kB tmpfs)",
            f"study tangent-kernel {TINY_TK} --out {mnt}/out",
            None,
            "refused",
            root,
            timeout,
        )
        # a write that fails midway may leave the folder it made: say so, but the
        # criterion is one line, exit 2 and no traceback
        row["ok"] = row["exit"] == 2 and "Traceback" not in row["stderr"]
        return row
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], allow_abbrev=False
    )
    parser.add_argument("--only", help="run the rows whose label contains this")
    parser.add_argument("--timeout", type=float, default=60.0)
    opts = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hostile-"))
    results = []
    try:
        for label, argv, setup, expected in rows(root):
            if opts.only and opts.only not in label:
                continue
            results.append(run_row(label, argv, setup, expected, root, opts.timeout))
            r = results[-1]
            print(
                f"{'ok ' if r['ok'] else 'BAD'} {r['input']}: exit {r['exit']}, "
                f"{r['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        if not opts.only or "disk" in opts.only:
            row = full_disk_row(root, opts.timeout)
            if row is None:
                print("full disk: no tmpfs could be mounted here (not root): skipped")
            else:
                results.append(row)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("| input | exit | seconds | first line of stderr | folder left behind |")
    print("|---|---|---|---|---|")
    for r in results:
        text = r["stderr"].replace("|", "\\|")[:160]
        print(
            f"| {r['input']} | {r['exit']} | {r['seconds']:.1f} | {text} | "
            f"{'yes' if r['left'] else 'no'} |"
        )
    bad = [r["input"] for r in results if not r["ok"]]
    print(
        f"\n{len(results) - len(bad)}/{len(results)} as required"
        + (f"; not: {', '.join(bad)}" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
