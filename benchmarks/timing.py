"""Shared timing for the benchmarks.

* compile apart: a JAX function is lowered and compiled ahead (`jit(...).lower().compile()`),
  and that time is reported on its own;
* warm-up apart: the first call after compiling is timed and reported, never used;
* every timed call ends in `jax.block_until_ready` (or the caller's own sync, for torch);
* several repetitions (at least `min_reps`, more while the total stays under
  `target_seconds`), reported as median, quartiles, min and max;
* implementations compared in one run are timed in interleaved rounds, so ratios are
  taken within a round (the machine's drift cancels) and reported with their spread.

Results go to `OUT/NAME.json` (everything) and `OUT/NAME.txt` (a table), and the table
is printed.
"""

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jax
import numpy as np


@dataclass
class Timing:
    """Seconds of one implementation: compile, warm-up and the timed repetitions."""

    compile_s: float | None
    warmup_s: float
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def summary(self) -> dict:
        t = np.asarray(self.times)
        q25, q75 = (float(x) for x in np.quantile(t, [0.25, 0.75]))
        return {
            "compile_s": self.compile_s,
            "warmup_s": self.warmup_s,
            "median_s": self.median,
            "q25_s": q25,
            "q75_s": q75,
            "min_s": float(t.min()),
            "max_s": float(t.max()),
            "rel_iqr": (q75 - q25) / self.median if self.median > 0 else None,
            "reps": len(self.times),
            "times_s": [float(x) for x in t],
        }


def compile_jax(fn: Callable, *args, **kwargs):
    """Compile `fn` (a function, or a `jax.jit`-wrapped one) for `args`; (compiled, seconds)."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    return compiled, time.perf_counter() - t0


def _timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def repetitions(first: float, *, min_reps: int, max_reps: int, target_seconds: float) -> int:
    """How many repetitions fit in `target_seconds` given one call took `first` seconds."""
    fit = int(target_seconds / max(first, 1e-9))
    return max(min_reps, min(max_reps, fit))


def time_jax(
    fn: Callable,
    *args,
    min_reps: int = 5,
    max_reps: int = 50,
    target_seconds: float = 2.0,
) -> Timing:
    """Compile `fn(*args)` ahead, warm it up once, then time repetitions to completion."""
    compiled, compile_s = compile_jax(fn, *args)
    call = lambda: jax.block_until_ready(compiled(*args))
    return time_call(
        call,
        compile_s=compile_s,
        min_reps=min_reps,
        max_reps=max_reps,
        target_seconds=target_seconds,
    )


def time_call(
    call: Callable[[], object],
    *,
    compile_s: float | None = None,
    min_reps: int = 5,
    max_reps: int = 50,
    target_seconds: float = 2.0,
) -> Timing:
    """Time a call that returns only when its work is done (sync inside `call`)."""
    warm = _timed(call)
    reps = repetitions(warm, min_reps=min_reps, max_reps=max_reps, target_seconds=target_seconds)
    return Timing(compile_s=compile_s, warmup_s=warm, times=[_timed(call) for _ in range(reps)])


def interleaved(
    calls: dict[str, Callable[[], object]],
    *,
    compile_s: dict[str, float | None] | None = None,
    min_rounds: int = 5,
    max_rounds: int = 30,
    target_seconds: float = 5.0,
) -> dict[str, Timing]:
    """Time several implementations in rounds (each once per round, same order).

    Every call is warmed up once first. Returns one `Timing` per name, whose
    `times[r]` belong to round r (so ratios can be paired by round).
    """
    compile_s = compile_s or {}
    warm = {name: _timed(call) for name, call in calls.items()}
    rounds = repetitions(
        sum(warm.values()), min_reps=min_rounds, max_reps=max_rounds, target_seconds=target_seconds
    )
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(_timed(call))
    return {
        name: Timing(compile_s=compile_s.get(name), warmup_s=warm[name], times=times[name])
        for name in calls
    }


def ratio_summary(numerator: Sequence[float], denominator: Sequence[float]) -> dict:
    """Ratio numerator/denominator per round: median, quartiles, min and max over rounds."""
    r = np.asarray(numerator) / np.asarray(denominator)
    q25, q50, q75 = (float(x) for x in np.quantile(r, [0.25, 0.5, 0.75]))
    return {"median": q50, "q25": q25, "q75": q75, "min": float(r.min()), "max": float(r.max())}


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict:
    """Where and with what the benchmark ran."""
    dev = jax.devices()[0]
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "backend": jax.default_backend(),
        "device_kind": dev.device_kind,
        "device_count": jax.device_count(),
        "process_count": jax.process_count(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "x64": bool(jax.config.jax_enable_x64),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "git_commit": _git_commit(),
        "argv": sys.argv,
    }


def format_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_rate(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def table(rows: Sequence[dict], columns: Sequence[tuple[str, str, Callable]]) -> str:
    """A plain-text table: `columns` are (key, header, formatter)."""
    cells = [[header for _, header, _ in columns]]
    for row in rows:
        cells.append([fmt(row.get(key)) if key in row else "-" for key, _, fmt in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _plain(obj):
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, Timing):
        return obj.summary()
    if hasattr(obj, "__dataclass_fields__"):
        return _plain(asdict(obj))
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_report(
    out: str | os.PathLike, name: str, payload: dict, text: str, *, quiet: bool = False
) -> Path:
    """Write `OUT/NAME.json` and `OUT/NAME.txt`, print the text unless `quiet` (the
    scripts rewrite both after every finished measurement, so that a run cut short keeps
    them, each file whole: written aside, then renamed); return the JSON path."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    for target, body in (
        (path, json.dumps(_plain(payload), indent=1)),
        (folder / f"{name}.txt", text),
    ):
        aside = target.with_name(f".{target.name}.partial")
        aside.write_text(body + "\n")
        os.replace(aside, target)
    if not quiet:
        print(text)
        print(f"\nwrote {path} and {folder / (name + '.txt')}")
    return path


def add_common_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """`--out`, `--x64`, repetitions and time budget, shared by every benchmark."""
    parser.add_argument(
        "--out", default=f"results/bench/{name}", help="output folder (default: %(default)s)"
    )
    parser.add_argument(
        "--x64",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="float64 instead of float32 (default: float32)",
    )
    parser.add_argument("--min-reps", type=int, default=5, help="repetitions at least (5)")
    parser.add_argument("--max-reps", type=int, default=50, help="repetitions at most (50)")
    parser.add_argument(
        "--target-seconds",
        type=float,
        default=1.0,
        help="timed seconds per measurement beyond the minimum repetitions (1.0)",
    )
    parser.add_argument(
        "--compile-cache",
        default="off",
        help="persistent compilation cache folder, or 'off' (default: off, so compile "
        "times are cold)",
    )


def setup(args) -> None:
    """Apply the common options (precision, compile cache) before any computation."""
    jax.config.update("jax_enable_x64", bool(args.x64))
    from meanfield.runtime.compilation import enable_compilation_cache

    enable_compilation_cache(args.compile_cache)
