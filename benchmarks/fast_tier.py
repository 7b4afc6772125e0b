"""The suite's fast tier (`pytest -m "not slow"`, tests/tiers.py): how long it takes, and
whether it still runs code of every module of the package.

    python benchmarks/fast_tier.py                  # time the fast tier (-n 2), then check it
    python benchmarks/fast_tier.py --update LOG     # the slow list from a --durations=0 run
    python benchmarks/fast_tier.py --fixtures DIR   # tests/data/tiny_results from DIR/NAME/

The check runs the fast tier a second time with a profile hook (tests/conftest.py,
MEANFIELD_TIER_MODULES), which notes every file of the package whose functions were
called (importing a file does not count): a file none of whose functions ran is listed.
Writes `--out DIR/fast_tier.json` (default results/bench/fast_tier)."""

import argparse
import ast
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from tiers import SLOW_ABOVE_S, SLOW_LIST, function_id  # noqa: E402

# "12.34s call     tests/test_x.py::test_f[a-b]" in pytest's --durations output
DURATION = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(tests/\S+::\S+)")


def slow_functions(log: str, above: float = SLOW_ABOVE_S) -> list[str]:
    """The test functions whose phases took more than `above` seconds in all, from a
    `--durations=0` output; a module's setup above it (a module-scoped fixture: a study
    run once for the file) makes every function of that file slow, as the fixture would
    otherwise run for the first fast test instead."""
    total: dict[str, float] = defaultdict(float)
    heavy_files = set()
    for line in log.splitlines():
        m = DURATION.match(line)
        if not m:
            continue
        seconds, phase, nodeid = float(m[1]), m[2], m[3]
        total[function_id(nodeid)] += seconds
        if phase == "setup" and seconds > above:
            heavy_files.add(nodeid.split("::", 1)[0])
    slow = {f for f, s in total.items() if s > above}
    for path in heavy_files:
        slow.update(f"{path}::{name}" for name in test_functions(ROOT / path))
    return sorted(slow)


def test_functions(path: Path) -> list[str]:
    """The names of a test file's test functions (top level and in `Test*` classes, as
    `Class::test`)."""
    tree = ast.parse(path.read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [
                f"{node.name}::{f.name}"
                for f in node.body
                if isinstance(f, ast.FunctionDef) and f.name.startswith("test")
            ]
    return names


def package_files() -> list[str]:
    """The package's files that define a function (the ones the fast tier must touch)."""
    out = []
    for path in sorted((ROOT / "meanfield").rglob("*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree)):
            out.append(str(path.relative_to(ROOT)))
    return out


def run_tier(workers: int, record: str | None) -> tuple[float, str, int]:
    env = dict(os.environ)
    if record:
        env["MEANFIELD_TIER_MODULES"] = record
    command = [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider"]
    command += ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    summary = [s for s in done.stdout.splitlines() if " passed" in s or " failed" in s]
    return wall, (summary[-1] if summary else done.stdout[-2000:]), done.returncode


def touched(record: str) -> set[str]:
    names = Path(record).read_text().splitlines() if Path(record).exists() else []
    return {"meanfield/" + n.rsplit("/meanfield/", 1)[1] for n in names if "/meanfield/" in n}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", metavar="LOG", help="write tests/slow_tests.txt from LOG")
    parser.add_argument(
        "--fixtures", metavar="DIR", help="store DIR/NAME/results.json as tiny runs (gzip)"
    )
    parser.add_argument("--above", type=float, default=SLOW_ABOVE_S, help="seconds (slow)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (2)")
    parser.add_argument("--no-check", action="store_true", help="time only")
    parser.add_argument("--out", default="results/bench/fast_tier")
    args = parser.parse_args(argv)
    if args.update:
        slow = slow_functions(Path(args.update).read_text(), args.above)
        header = (
            f"# tests slower than {args.above:g} s (their calls and parameters together, or a "
            f"file's module fixture),\n# from a whole run's --durations=0 "
            f"(benchmarks/fast_tier.py --update); tests/tiers.py\n"
        )
        SLOW_LIST.write_text(header + "".join(f"{s}\n" for s in slow))
        print(f"{len(slow)} slow test functions -> {SLOW_LIST.relative_to(ROOT)}")
        return 0
    if args.fixtures:
        runs = ROOT / "tests" / "data" / "tiny_results"
        runs.mkdir(parents=True, exist_ok=True)
        found = sorted(Path(args.fixtures).glob("*/results.json"))
        for path in found:
            data = gzip.compress(path.read_bytes(), compresslevel=9, mtime=0)
            (runs / f"{path.parent.name}.json.gz").write_bytes(data)
        print(f"{len(found)} tiny runs -> {runs.relative_to(ROOT)}")
        return 0
    wall, summary, rc = run_tier(args.workers, None)
    print(f"fast tier: {wall:.0f} s wall, -n {args.workers}: {summary} (rc {rc})", flush=True)
    result = {"wall_s": wall, "workers": args.workers, "summary": summary, "rc": rc}
    if not args.no_check:
        with tempfile.TemporaryDirectory() as tmp:
            record = str(Path(tmp) / "called.txt")
            _, check_summary, _ = run_tier(args.workers, record)
            missing = sorted(set(package_files()) - touched(record))
        result.update(check_summary=check_summary, untouched=missing)
        print(f"files of the package none of whose functions ran: {len(missing)}")
        for name in missing:
            print(f"  {name}")
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "fast_tier.json").write_text(json.dumps(result, indent=1))
    return 1 if rc or result.get("untouched") else 0


if __name__ == "__main__":
    sys.exit(main())
