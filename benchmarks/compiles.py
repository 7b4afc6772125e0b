"""A `meanfield` command run in this process, with its wall time and the XLA compilations
it caused (`meanfield.CompileCounter`), printed as one JSON line.

    MEANFIELD_COMPILE_CACHE=off python benchmarks/compiles.py study shapes --preset quick \
        --out DIR --no-progress

The before/after rows of issue 51's small-shapes batching in `benchmarks/RESULTS.md` were
measured with this wrapper (the "before" at a worktree of the earlier commit, with
`PYTHONPATH` set to it). A study's own `results.json` records the same count from its
start to its finish (`timing.compiles`); this one also counts the imports and the
command's start.
"""

import json
import sys
import time


def main(argv=None) -> int:
    t0 = time.perf_counter()
    from meanfield.cli import main as cli
    from meanfield.runtime.compilation import CompileCounter

    code = 0
    with CompileCounter() as counter:
        try:
            code = cli(sys.argv[1:] if argv is None else argv) or 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    print(
        json.dumps(
            {
                "wall": round(time.perf_counter() - t0, 1),
                "compiles": counter.compiles,
                "compile_seconds": round(counter.compile_seconds, 1),
                "exit": code,
            }
        )
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
