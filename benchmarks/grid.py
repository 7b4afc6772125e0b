"""Benchmark: the standard mean-ODE convergence grid, end to end, beside the natural way.

    PYTHONPATH=. python3 benchmarks/grid.py --out DIR [--preset quick|paper] [--natural-seeds 2]
        [--natural-configs N] [--natural-budget S] [--warm-cache] [--warm-runs N]
        [--study-args "..."]

1. Runs `meanfield study mean-ode --preset P` (float64, fresh output folder, an empty
   persistent compilation cache, so compile times are cold) and splits its wall time
   into compile, reference (the limit solves), finite networks, fitting and plotting,
   from the study's own `results.json` timing, with the number of compiled programs
   (grid points share programs by padding, `--pad-units`). With `--warm-cache` it runs
   the study a second time in the same process on the now-filled cache: what a second
   invocation costs (tracing and lowering still run; loading programs replaces compiling).
   `--warm-runs N` repeats that run N times and reports each part's median and spread
   (min, quartiles, max) over the N runs; the cold run is one timing by nature.
2. The natural implementation of the finite-network part, as public research code
   writes it: for every (L, M) of the grid, one jitted function per configuration
   called from a Python loop over seeds (the same per-seed computation as the study:
   sample the network, k GD steps, the coupled errors; the networks run the plain scan
   over layers, `ScanLoop()`). To keep the run short it is
   timed on `--natural-seeds` seeds per configuration (after its compile) and scaled to
   the preset's seed count: `natural = compile + seeds × per-seed time`, per
   configuration, summed. The scaling is stated in the JSON (`natural.extrapolated`).
   `--natural-configs N` times only N configurations spread over the grid (ordered by
   L·M, the smallest and the largest always in) and gives every other one the times of
   the nearest timed configuration in (log2 L, log2 M); each row says whose times it
   has (`timed`, `times_of`). The paper grid's 75 (L, M) configurations (225 points
   with k = 0, 1, 2, which one run gives) each compile for seconds on a GPU, more than
   one device call allows. They are timed in an order that
   spreads over the range first (`spread_order`: the smallest and the largest L·M, then
   the midpoints of ever finer halvings), and `--natural-budget S` starts none after S
   seconds (beyond those two): the JSON counts the ones left untimed.

`DIR/grid.json` and `DIR/grid.txt` are rewritten after each part (the study, its
warm-cache run, the natural part), so that a run cut short keeps the parts it finished.

The ratios reported are `natural finite-network time / ours` for the same grid, same
process, same device, with our compile counted two ways (`ratios`). Results:
`DIR/grid.json` and `DIR/grid.txt`.
"""

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
import jax.random as jr

from benchmarks import timing


def run_study(preset: str, out: Path, cache: Path, extra: list[str]) -> dict:
    from meanfield.cli import main

    code = main(
        [
            "--compile-cache",
            str(cache),
            "study",
            "mean-ode",
            "--preset",
            preset,
            "--out",
            str(out),
            "--overwrite",
            "--no-progress",
            *extra,
        ]
    )
    if code != 0:
        raise SystemExit(f"the study failed with exit code {code}")
    return json.loads((out / "results.json").read_text())


def _split(results: dict, wall: float) -> dict:
    t = results["timing"]
    return {
        "wall_s": wall,
        "study_total_s": t["total_seconds"],
        "compile_s": t.get("compile_seconds"),  # summed over programs (threads overlap)
        "programs": t.get("programs"),
        "compile_workers": t.get("compile_workers"),
        "pad_units": t.get("pad_units"),
        "units_per_batch": t.get("units_per_batch"),
        "unroll": t.get("unroll"),
        "depth_loop": t.get("depth_loop"),
        "depth_loop_by_program": t.get("depth_loop_by_program"),
        # the part of compile_s the study's main thread waited for (not in any part below)
        "compile_wait_s": t.get("compile_wait_seconds"),
        "reference_s": t.get("reference_seconds"),
        "finite_s": t.get("finite_seconds"),
        "euler_s": t.get("euler_seconds"),  # the decomposition's Euler part
        # its programs' compile, summed (in the same threads, ahead; not in compile_s)
        "euler_compile_s": t.get("euler_compile_seconds"),
        "euler_programs": t.get("euler_programs"),
        "fit_s": t.get("fit_seconds"),
        "plot_s": t.get("plot_seconds"),
        # wall time in none of the parts (start-up, tracing, writing points, the reports)
        "other_s": wall
        - sum(
            t.get(k) or 0.0
            for k in (
                "compile_wait_seconds",
                "reference_seconds",
                "finite_seconds",
                "euler_seconds",
                "fit_seconds",
                "plot_seconds",
            )
        ),
        "slowest_points_s": dict(
            sorted((t.get("finite_seconds_by_point") or {}).items(), key=lambda kv: -kv[1])[:10]
        ),
        "slowest_programs_compile_s": dict(
            sorted((t.get("compile_seconds_by_program") or {}).items(), key=lambda kv: -kv[1])[:10]
        ),
    }


def warm_summary(runs: list[dict]) -> tuple[dict, dict]:
    """Repeated runs of the study (each a `_split`) as one row and its spread: the row is
    the first run's with every time (a number under a key ending in `_s`) replaced by its
    median over the runs (so the parts' medians need not add up to the median wall
    time); the spread gives each time's min, quartiles and max, and the number of runs."""
    if not runs:
        raise ValueError("runs: need at least one run")
    row, spread = dict(runs[0]), {"runs": len(runs)}
    times = {k for r in runs for k, v in r.items() if k.endswith("_s") and type(v) in (int, float)}
    for key in sorted(times):
        values = [r[key] for r in runs if r.get(key) is not None]
        if not values:
            continue
        t = timing.Timing(compile_s=None, warmup_s=0.0, times=values).summary()
        row[key] = t["median_s"]
        spread[key] = {"min": t["min_s"], "q25": t["q25_s"], "q75": t["q75_s"], "max": t["max_s"]}
    return row, spread


def sample_configs(configs: list[tuple[int, int]], count: int | None) -> list[tuple[int, int]]:
    """`count` configurations spread evenly over `configs` ordered by L·M (the first
    and the last always in), or all of them when `count` is None or large enough."""
    ordered = sorted(set(configs), key=lambda c: (c[0] * c[1], c))
    if count is None or count >= len(ordered):
        return ordered
    if count < 2:
        raise ValueError(f"count: need at least 2 configurations, got {count}")
    picks = {round(i * (len(ordered) - 1) / (count - 1)) for i in range(count)}
    return [ordered[i] for i in sorted(picks)]


def spread_order(items: list) -> list:
    """`items` reordered so that every prefix spreads over the whole list: the first,
    the last, then the midpoints of ever finer halvings (a van der Corput sequence of
    positions), so that timing cut short by a budget still covers the range."""
    n = len(items)
    if n <= 2:
        return list(items)
    order, seen, i = [0, n - 1], {0, n - 1}, 1
    while len(order) < n:
        frac, denom, j = 0.0, 1.0, i
        while j:  # the base-2 radical inverse of i
            denom *= 2
            frac += (j % 2) / denom
            j //= 2
        index = round(frac * (n - 1))
        if index not in seen:
            seen.add(index)
            order.append(index)
        i += 1
    return [items[k] for k in order]


def _nearest(config, timed: dict) -> tuple[int, int]:
    """The timed configuration nearest to `config` in (log2 L, log2 M)."""
    L, M = config
    dist = lambda c: (math.log2(c[0] / L)) ** 2 + (math.log2(c[1] / M)) ** 2
    return min(timed, key=lambda c: (dist(c), c))


def natural(
    results: dict,
    natural_seeds: int,
    natural_configs: int | None = None,
    budget: float | None = None,
) -> dict:
    """Per configuration: jit once, then a Python loop over seeds (see the module doc).
    With `natural_configs`, only that many configurations are timed and every other
    one takes the times of the nearest timed one in (log2 L, log2 M). They are timed in
    `spread_order`; with `budget` (seconds), none is started after it is spent, beyond
    the first two (the smallest and the largest L·M), and the rest count as untimed."""
    from meanfield.blocks.two_layer import TwoLayerBlock
    from meanfield.coupling.mean_ode import LimitOnGrid, coupled_errors
    from meanfield.engine import ScanLoop
    from meanfield.models.resnet import ResNet
    from meanfield.scaling import MeanODEScaling
    from meanfield.studies.mean_ode import study
    from meanfield.studies.shared import own_block

    cfg = results["config"]
    block = TwoLayerBlock(cfg["activation"])
    law = own_block.make_law(cfg)
    xs, ys = own_block.make_data(cfg)
    configs = [(spec["L"], spec["M"]) for spec in study.grid_specs(cfg)]
    timed, skipped = {}, 0
    t_start = time.perf_counter()
    for L, M in spread_order(sample_configs(configs, natural_configs)):
        if budget is not None and len(timed) >= 2 and time.perf_counter() - t_start > budget:
            skipped += 1
            continue
        # a stand-in for the limit on the grid (the timing does not depend on its values)
        h = jnp.zeros((cfg["steps"] + 1, L + 1, xs.shape[0], xs.shape[1]))
        grid = LimitOnGrid(h=h, b=h)

        @jax.jit
        def one(key, grid=grid, L=L, M=M):
            net = ResNet.sample(
                block, law, L=L, M=M, scaling=MeanODEScaling(), key=key, loop=ScanLoop()
            )
            return coupled_errors(net, xs, ys, grid, learning_rate=cfg["lr"])

        keys = jr.split(jr.key(cfg["seed"]), natural_seeds + 1)
        t0 = time.perf_counter()
        compiled = one.lower(keys[0]).compile()  # compile only: no run is charged twice
        compile_s = time.perf_counter() - t0
        jax.block_until_ready(compiled(keys[0]))  # warm-up, not timed
        t0 = time.perf_counter()
        for k in keys[1:]:
            jax.block_until_ready(compiled(k))
        per_seed = (time.perf_counter() - t0) / natural_seeds
        print(
            f"natural: L {L} M {M} compile {compile_s:.3g} s, {per_seed:.3g} s per seed",
            file=sys.stderr,
            flush=True,
        )
        timed[(L, M)] = (compile_s, per_seed)
    rows = []
    for L, M in configs:
        source = (L, M) if (L, M) in timed else _nearest((L, M), timed)
        compile_s, per_seed = timed[source]
        rows.append(
            {
                "L": L,
                "M": M,
                "timed": source == (L, M),
                "times_of": list(source),
                "compile_s": compile_s,
                "per_seed_s": per_seed,
                "total_s": compile_s + cfg["seeds"] * per_seed,
            }
        )
    how = (
        f"timed on {natural_seeds} seed(s) per configuration, scaled to {cfg['seeds']} "
        "seeds: compile + seeds x per-seed time"
    )
    distinct = len(set(configs))
    if len(timed) < distinct:
        how += (
            f"; {len(timed)} of {distinct} configurations timed, each other one "
            "given the times of the nearest timed configuration in (log2 L, log2 M)"
        )
    if skipped:
        how += f" ({skipped} sampled configuration(s) not started within the time budget)"
    return {
        "rows": rows,
        "configs_timed": len(timed),
        "configs_skipped_budget": skipped,
        "total_s": sum(r["total_s"] for r in rows),
        "extrapolated": how,
    }


def ratios(natural_s: float, ours: dict) -> dict:
    """`natural_s` (the natural finite-network time, compiles included) over ours, two
    ways. `ratio_finite`, the headline: over our compile time summed over programs (the
    compiling threads overlap each other and the reference solves, so this charges us
    more than the wall clock) plus the finite networks. `ratio_finite_wall`: over the
    part of the compile the study's main thread waited for plus the finite networks,
    the wall time the finite networks add to the study."""
    finite = ours["finite_s"]
    return {
        "ratio_finite": natural_s / (ours["compile_s"] + finite),
        "ratio_finite_wall": natural_s / ((ours["compile_wait_s"] or 0.0) + finite),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench/grid", help="output folder")
    parser.add_argument(
        "--preset", choices=["quick", "paper"], help="default: paper on GPU/TPU, quick on CPU"
    )
    parser.add_argument(
        "--natural-seeds",
        type=int,
        default=2,
        help="seeds timed per configuration for the natural implementation",
    )
    parser.add_argument(
        "--natural-configs",
        type=int,
        help="time the natural implementation on this many (L, M) configurations spread "
        "over the grid, the others taking the nearest timed one's times (default: all)",
    )
    parser.add_argument(
        "--natural-budget",
        type=float,
        help="seconds: time no more natural configurations after this (the smallest and "
        "the largest always; default: no limit)",
    )
    parser.add_argument("--skip-natural", action="store_true")
    parser.add_argument(
        "--warm-cache", action="store_true", help="run the study again on the filled cache"
    )
    parser.add_argument(
        "--warm-runs",
        type=int,
        help="runs on the filled cache (implies --warm-cache; default 1): each part's "
        "median and spread over them",
    )
    parser.add_argument("--pad-units", type=int, help="passed to the study (default: its own)")
    parser.add_argument(
        "--study-args",
        default="",
        help="more options of `meanfield study mean-ode`, space-separated (a smaller grid: "
        "'--L 4,8 --M 1,4 --seeds 2'; execution settings: '--unroll 8 --seed-batch-units "
        "67108864', '--depth-loop scan')",
    )
    args = parser.parse_args(argv)
    if args.natural_seeds < 1:
        parser.error(f"--natural-seeds: must be >= 1, got {args.natural_seeds}")
    if args.natural_configs is not None and args.natural_configs < 2:
        parser.error(f"--natural-configs: must be >= 2, got {args.natural_configs}")
    if args.warm_runs is not None and args.warm_runs < 1:
        parser.error(f"--warm-runs: must be >= 1, got {args.warm_runs}")
    warm_runs = args.warm_runs or (1 if args.warm_cache else 0)
    preset = args.preset or ("quick" if jax.default_backend() == "cpu" else "paper")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    extra = [] if args.pad_units is None else ["--pad-units", str(args.pad_units)]
    extra += args.study_args.split()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        results = run_study(preset, Path(tmp) / "study", Path(tmp) / "cache", extra)
        cfg = results["config"]
        payload = {
            "benchmark": "grid",
            "environment": timing.environment(),
            "preset": preset,
            "grid": {
                "L": cfg["L"],
                "M": cfg["M"],
                "seeds": cfg["seeds"],
                "steps": cfg["steps"],
                "points": len(results["points"]),
            },
            "ours": _split(results, time.perf_counter() - t0),
            "ours_warm_cache": None,
            "ours_warm_cache_spread": None,
            "ours_warm_cache_runs": [],
        }
        lines = _lines(payload, results)
        _write(out, payload, lines)  # each part survives a run cut short after it
        for _ in range(warm_runs):
            t0 = time.perf_counter()
            again = run_study(preset, Path(tmp) / "study2", Path(tmp) / "cache", extra)
            payload["ours_warm_cache_runs"].append(_split(again, time.perf_counter() - t0))
            row, spread = warm_summary(payload["ours_warm_cache_runs"])
            payload["ours_warm_cache"], payload["ours_warm_cache_spread"] = row, spread
            lines = _lines(payload, results)
            _write(out, payload, lines)  # after each run: a run cut short keeps the others
    from meanfield.runtime.compilation import disable_compilation_cache

    disable_compilation_cache()  # the folder is gone; the natural runs compile cold
    if not args.skip_natural:
        nat = natural(results, args.natural_seeds, args.natural_configs, args.natural_budget)
        ours = payload["ours"]
        payload["natural"] = nat
        payload.update(ratios(nat["total_s"], ours))
        lines.append(
            f"natural (jit per configuration, Python loop over seeds): "
            f"{timing.format_seconds(nat['total_s'])} ({nat['extrapolated']})"
        )
        lines.append(
            f"ratio natural / ours (finite networks incl. compile): {payload['ratio_finite']:.1f}x "
            f"with our compiles summed over threads, {payload['ratio_finite_wall']:.1f}x "
            "with only the compile our main thread waited for"
        )
        _write(out, payload, lines)
    print("\n".join(lines))


def _lines(payload: dict, results: dict) -> list[str]:
    """The table's lines for the study runs in `payload`."""
    ours, warm, spread = (
        payload["ours"],
        payload["ours_warm_cache"],
        payload["ours_warm_cache_spread"],
    )
    keys = (
        "wall_s",
        "compile_s",
        "compile_wait_s",
        "reference_s",
        "finite_s",
        "euler_s",
        "fit_s",
        "plot_s",
        "other_s",
    )
    line = (
        "{}: wall {}  compile {} ({} programs, {} threads; waited for {})  reference {}  "
        "finite {}  Euler part {} (its {} programs compiled ahead: {})  fit {}  plot {}  other {}"
    )
    lines = [
        f"grid benchmark, preset {payload['preset']}: {payload['grid']['points']} (L, M, k) "
        f"points, {payload['grid']['seeds']} seeds, device {results['timing'].get('device')}",
    ]
    warm_name = "ours, warm cache"
    if spread and spread["runs"] > 1:
        warm_name += f" (medians of {spread['runs']} runs)"
    for name, row in (("ours, cold cache", ours), (warm_name, warm)):
        if row is not None:
            v = [timing.format_seconds(row[k] or 0.0) for k in keys]
            euler_compile = timing.format_seconds(row.get("euler_compile_s") or 0.0)
            lines.append(
                line.format(
                    name,
                    *v[:2],
                    row["programs"],
                    row["compile_workers"],
                    *v[2:6],
                    row.get("euler_programs"),
                    euler_compile,
                    *v[6:],
                )
            )
    if spread and spread["runs"] > 1:
        lines.append(
            "  spread over the warm runs (min-max): "
            + ", ".join(
                f"{k[:-2]} {timing.format_seconds(spread[k]['min'])}-"
                f"{timing.format_seconds(spread[k]['max'])}"
                for k in ("wall_s", "compile_s", "reference_s", "finite_s", "euler_s", "fit_s")
                if k in spread
            )
        )
    loops = list((ours.get("depth_loop_by_program") or {}).values())
    lines.append(
        f"depth loops (--depth-loop {ours.get('depth_loop')}): "
        + ", ".join(f"{m} {loops.count(m)} programs" for m in sorted(set(loops)))
    )
    return lines


def _write(out: Path, payload: dict, lines: list[str]) -> None:
    timing.write_report(out, "grid", payload, "\n".join(lines), quiet=True)


if __name__ == "__main__":
    main()
