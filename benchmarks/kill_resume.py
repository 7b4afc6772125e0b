"""SIGKILL mid-run, then `--resume`, for each of the eleven studies (issue 46).

For every study, at a tiny configuration (`hostile_corpus.TINY`): one uninterrupted run;
another run into a fresh folder, killed with SIGKILL as soon as its first finished
point (or shared artifact) is on disk; then `--resume` of that folder. The resumed
`results.json` must equal the uninterrupted one (all but `timing`), and the points
finished before the kill must be loaded, not recomputed.

    python benchmarks/kill_resume.py [--only STUDY[,STUDY]]

Prints one line per study and exits 1 if any differs.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_corpus import TINY  # noqa: E402


def _cmd(study: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "meanfield", "study", study, *TINY[study].split(),
            "--out", str(out), "--no-progress", *extra]  # fmt: skip


def _body(out: Path) -> dict:
    body = json.loads((out / "results.json").read_text())
    body.pop("timing", None)
    return body


def _finished(points: Path) -> dict:
    if not points.is_dir():
        return {}
    return {
        p.name: p.stat().st_mtime_ns
        for p in points.iterdir()
        if p.is_file() and not p.name.startswith(".")
    }


def _differences(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in one")
            else:
                out += _differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path or "."]


def one(study: str, root: Path, env: dict) -> dict:
    whole, killed = root / f"{study}-whole", root / f"{study}-killed"
    t0 = time.perf_counter()
    subprocess.run(_cmd(study, whole), env=env, check=True, capture_output=True, timeout=1800)
    seconds = time.perf_counter() - t0
    proc = subprocess.Popen(_cmd(study, killed), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 1800
    while time.time() < deadline and proc.poll() is None and not _finished(killed / "points"):
        time.sleep(0.05)
    interrupted = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _finished(killed / "points")
    resume = subprocess.run(_cmd(study, killed, "--resume"), env=env, capture_output=True,
                            text=True, timeout=1800)  # fmt: skip
    if resume.returncode != 0:
        return {"study": study, "ok": False, "why": f"resume exit {resume.returncode}: "
                + (resume.stderr.strip().splitlines() or [""])[-1]}  # fmt: skip
    rewritten = [n for n, m in before.items() if (killed / "points" / n).stat().st_mtime_ns != m]
    diffs = _differences(_body(whole), _body(killed))
    ok = interrupted and not diffs and not rewritten and bool(before)
    why = (
        ("" if interrupted else "finished before the kill; ")
        + (f"differs at {', '.join(diffs[:5])}; " if diffs else "")
        + (f"rewrote {', '.join(rewritten)}; " if rewritten else "")
    )
    return {"study": study, "ok": ok, "kept": len(before), "seconds": seconds, "why": why}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", help="comma-separated studies (default: all eleven)")
    opts = parser.parse_args()
    studies = opts.only.split(",") if opts.only else list(TINY)
    root = Path(tempfile.mkdtemp(prefix="kill-resume-"))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bad = []
    try:
        for study in studies:
            r = one(study, root, env)
            print(
                f"{'ok ' if r['ok'] else 'BAD'} {study}: killed with {r.get('kept', 0)} "
                f"file(s) in points/ (whole run {r.get('seconds', 0):.0f} s); resumed "
                + ("== uninterrupted" if r["ok"] else f"NOT equal: {r['why']}"),
                flush=True,
            )
            if not r["ok"]:
                bad.append(study)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(studies) - len(bad)}/{len(studies)} studies resume to the uninterrupted result")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
