"""How long the command line takes to answer where it runs nothing: `--help`, a study's
`--help`, and refusals (issue 77, item 4). Each command is run `--repeats` times as a
fresh process (`python -m meanfield ...`, with `PYTHONPATH` the checkout given, default
this one); the median and the runs are printed and written to `--out`/cli_start.json.

    python benchmarks/cli_start.py [--root CHECKOUT] [--repeats 5] [--out DIR]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = [
    ["--help"],
    ["study", "--help"],
    ["study", "mean-ode", "--help"],
    ["study", "mean-ode", "--L", "3,x"],
    ["plot", "/nonexistent"],
    ["study", "transfer", "--widths", "0"],
]


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(here), help="the checkout to time")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="results/bench/cli_start")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": args.root}
    rows = []
    for argv in COMMANDS:
        runs = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "meanfield", *argv], env=env, cwd="/",
                           capture_output=True)  # fmt: skip
            runs.append(time.perf_counter() - t0)
        rows.append({"command": " ".join(argv), "median_s": statistics.median(runs),
                     "runs_s": runs})  # fmt: skip
        print(f"meanfield {rows[-1]['command']}: {rows[-1]['median_s']:.2f} s (median of "
              f"{', '.join(f'{r:.2f}' for r in runs)})", flush=True)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cli_start.json").write_text(json.dumps({"root": args.root, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
