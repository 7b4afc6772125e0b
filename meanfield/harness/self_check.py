"""The self-check's comparison: a grid point computed twice (compiled, and op by op or by an
independent formulation) agrees when every number differs by round-off only.

**Round-off is relative to what a number is computed from.** A number computed by
multiplications and sums of positive terms carries a relative round-off of a few ulps of
itself; but an error estimate (the difference of two solves), an error against a limit
(`|h − h_ref|`), the standard deviation of draws that are nearly equal, a sum of terms
that cancel, carry the round-off of their *terms*: ulps of the terms, which may be 10⁸
times the number itself. A bound relative to such a number raises false alarms on any
CPU whose vector width or summation order differs (a relative difference of 2.8e-5 in an
error estimate of 2e-9 between two ODE solves of size 1: 6e-14 in absolute terms).

So every number is compared relative to the larger of its own size and the **scale of
its terms**:

- a study marks a number computed from larger terms with `of_terms(value, scale)`
  (`scale`: the largest magnitude among the terms, e.g. the states an error is measured
  between); the mark applies to every number inside `value`, and the runner strips it
  before the point is stored (`split_terms`);
- a summary of draws (`meanfield.stats.fits.summarize`: a dict with `values`) gets the
  scale of its draws for every statistic in it: a mean, a standard deviation or a
  standard error is computed from the draws, and its round-off is that of the draws.

The bound itself, `SELF_CHECK_RTOL` times that scale, is 10¹⁰ ulps in float64: far above
any round-off, far below what a miscompile does (jaxlib 0.10.2's was ~100%).
"""

import contextlib
import dataclasses
import math
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import cache
from .folder import to_json


class SelfCheckError(RuntimeError):
    """A study's grid point recomputed op by op differs from its compiled result beyond
    round-off: the compiler computed it wrong. Reported as one line naming the point,
    exit code 3; no results.json is written."""


# the largest difference between a point computed compiled and op by op that is round-off,
# relative to the scale of each number (its own, or its terms': module docstring)
SELF_CHECK_RTOL = {"float64": 1e-6, "float32": 1e-2}

SELF_CHECK_ROUTE = "op by op (jax.disable_jit)"


def primitive_routes(calls: Mapping) -> dict:
    """How an op-by-op recomputation ran its operations (`meanfield._eager.op_by_op`'s
    counts): `{"numpy": calls evaluated by NumPy, "jax": {primitive: calls}}` — the
    latter run by JAX itself, each compiled on its own (or, on PRNG keys, no program)."""
    jax_calls = {name: n for (route, name), n in sorted(calls.items()) if route == "jax"}
    return {"numpy": sum(n for (route, _), n in calls.items() if route == "numpy"),
            "jax": jax_calls}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class OfTerms:
    """A point's value computed from terms of magnitude up to `scale` (`of_terms`)."""

    value: Any
    scale: float


def of_terms(value: Any, scale) -> OfTerms:
    """Mark `value` (a number, array or nested dict/list of them) as computed from terms of
    magnitude up to `scale`: an error estimate, a difference, a sum of cancelling terms. The
    self-check then bounds its round-off relative to `scale` (module docstring); the stored
    point holds `value` alone.

    `scale` may be an array (its largest finite magnitude is taken); a scale that is not
    finite or not positive marks nothing."""
    a = np.abs(np.asarray(scale, dtype=float)).ravel()
    a = a[np.isfinite(a)]
    return OfTerms(value, float(a.max()) if a.size else 0.0)


def split_terms(obj: Any, where: str = "") -> tuple[Any, dict[str, float]]:
    """`(obj without its of_terms marks, {path: scale})`, the paths named as
    `compare_points` names them (`"a.b[2]"`)."""
    if isinstance(obj, OfTerms):
        inner, scales = split_terms(obj.value, where)
        if obj.scale > 0 and math.isfinite(obj.scale):
            scales[where] = max(scales.get(where, 0.0), obj.scale)
        return inner, scales
    if isinstance(obj, Mapping):
        out, scales = {}, {}
        for k, v in obj.items():
            out[k], found = split_terms(v, f"{where}.{k}" if where else str(k))
            scales.update(found)
        return out, scales
    if isinstance(obj, list | tuple):
        out, scales = [], {}
        for i, v in enumerate(obj):
            item, found = split_terms(v, f"{where}[{i}]")
            out.append(item)
            scales.update(found)
        return (type(obj)(out) if isinstance(obj, tuple) else out), scales
    return obj, {}


def self_check_index(seed, study: str, call: int, costs: "int | Sequence[float]") -> int:
    """The grid point that the `call`-th self-check of a study recomputes: uniform among
    the points whose cost is at most the median cost (`costs`, one per point; an integer
    `n`: n points of equal cost), drawn from the study's seed and name (the same point
    for the same seed).

    The cost is what running a point op by op grows with: its depth (a layer costs about
    10⁴ times more op by op than compiled), while a compiler's tiling depends on the
    widths, dimensions and input counts, not on a loop's trip count; the cheaper half of
    a grid holds every width of it in the studies' grids."""
    costs = [1.0] * costs if isinstance(costs, int) else [float(c) for c in costs]
    median = float(np.median(costs))
    eligible = [i for i, c in enumerate(costs) if c <= median]
    seed = seed if isinstance(seed, int) and seed >= 0 else 0
    draw = np.random.default_rng([seed, zlib.crc32(study.encode()), call])
    return eligible[int(draw.integers(len(eligible)))]


def depth_cost(spec: dict) -> float:
    """The default self-check cost of a grid point: its depth `L` (1 without one)."""
    value = spec.get("L", 1)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1.0


def _numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if value is None or isinstance(value, int | float):
        return True
    return isinstance(value, list) and all(_numeric(v) for v in value)


def _flat(value) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def _largest(value) -> float:
    """The largest finite magnitude among the numbers of a JSON value (0 if none)."""
    if not _numeric(value):
        return 0.0
    found = [abs(float(x)) for x in _flat(value) if x is not None and math.isfinite(float(x))]
    return max(found, default=0.0)


def compare_points(
    stored: Any,
    fresh: Any,
    where: str = "",
    *,
    atol: float = 0.0,
    scales: Mapping[str, float] | None = None,
    floor: float = 0.0,
) -> tuple[float, str]:
    """The largest relative difference between two JSON values of a point, and where.

    Numbers (and nested lists of numbers and None) compare as arrays: the largest absolute
    difference, less `atol` (an allowance for adaptive solves inside the point, whose step
    choices round-off can flip), over the larger of the array's largest entry and the
    scale of the terms it is computed from (module docstring: `scales`, `{path: scale}`
    from `split_terms`, applying to everything under the path; the draws of a summary);
    absolute where both are 0. A None (a non-finite value) on one side only, a shape, key,
    string or flag that differs, is an infinite difference. **Returns:**
    `(difference, path)`, e.g. `(3e-16, "delta_h[2]")`."""
    label = where or "the point"
    scales = scales or {}
    floor = max(floor, scales.get(where, 0.0)) if where else floor
    if _numeric(stored) and _numeric(fresh):
        a, b = _flat(stored), _flat(fresh)
        if (isinstance(stored, list), len(a)) != (isinstance(fresh, list), len(b)):
            return math.inf, label
        if any((x is None) != (y is None) for x, y in zip(a, b, strict=True)):
            return math.inf, label
        pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True) if x is not None]
        if not pairs:
            return 0.0, label
        integers = all(isinstance(x, int) for x in a + b if x is not None)  # counts, indices
        scale = max(max(abs(y) for _, y in pairs), 0.0 if integers else floor)
        diff = max(0.0, max(abs(x - y) for x, y in pairs) - atol)
        return (diff / scale if scale > 0 else diff), label
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if set(stored) != set(fresh):
            return math.inf, f"{label} (keys {sorted(set(stored) ^ set(fresh))})"
        if "values" in fresh:  # a summary of draws: its statistics carry the draws' round-off
            floor = max(floor, _largest(fresh["values"]), _largest(stored["values"]))
        worst = (0.0, label)
        for key in stored:
            found = compare_points(
                stored[key], fresh[key], f"{where}.{key}" if where else key, atol=atol,
                scales=scales, floor=floor,
            )  # fmt: skip
            worst = max(worst, found, key=lambda t: t[0])
        return worst
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return math.inf, label
        worst = (0.0, label)
        for k, (x, y) in enumerate(zip(stored, fresh, strict=True)):
            found = compare_points(x, y, f"{where}[{k}]", atol=atol, scales=scales, floor=floor)
            worst = max(worst, found, key=lambda t: t[0])
        return worst
    return (0.0, label) if stored == fresh else (math.inf, label)


@contextlib.contextmanager
def operations_progress(point: str, enabled: bool, config_hash: str | None = None):
    """Within: a line "self-check: POINT" that counts the operations the self-check's
    op-by-op route has evaluated so far and the time spent (refreshed each second by a
    thread), unless not `enabled`. With `config_hash` (the configuration's,
    `StudyFolder.config_hash`), the operations the last self-check of this point of this
    configuration took (kept in the artifact cache, `harness.cache`) are the line's
    total, with the time left; the first run has none (a point's operations are known
    only once it is done)."""
    from .._numpy_ops import counts

    def evaluated() -> int:
        for _ in range(3):  # (the counter may grow a key while it is read)
            try:
                return sum(counts().values())
            except RuntimeError:
                continue
        return 0

    folder = cache.cache_folder() if config_hash else None
    name, label, total = f"self-check-operations-{point}", f"self-check: {point}", None
    if folder is not None and config_hash:
        found, _ = cache.load(folder, name, config_hash)
        total = int(found["operations"]) if found and found["operations"].size == 1 else None
    before, bar, stop, watcher = evaluated(), None, None, None
    if enabled:
        import threading

        from tqdm.auto import tqdm

        bar = tqdm(desc=label, total=total, unit=" op", unit_scale=True, miniters=0)
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(1.0):
                bar.n = evaluated() - before
                bar.refresh()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
    try:
        yield
    finally:
        if bar is not None and stop is not None and watcher is not None:
            stop.set()
            watcher.join()
            bar.n = evaluated() - before
            bar.close()
    done = evaluated() - before  # (a point that raised is not remembered)
    if folder is not None and config_hash and done > 0 and done != total:
        cache.store(folder, name, config_hash, {"operations": np.asarray(done)})


def recheck_point(
    runner, specs, names, results, recompute, route: str, *, eager: bool, atol: float, costs,
    variant=None, precision=None, numpy: bool = True,
) -> None:  # fmt: skip
    """The self-check of `StudyRunner.run_points`: one seeded-random point of `specs`
    recomputed by `recompute` (op by op where `eager`; or `variant`, compiled and op by
    op) and compared with `results`; its record appended to `runner.self_checks`;
    `SelfCheckError` beyond round-off."""
    import jax

    from .._eager import op_by_op

    i = self_check_index(runner.config.get("seed"), runner.study, len(runner.self_checks), costs)
    spec, name = specs[i], names[i]
    if precision is None:
        precision = "float64" if jax.config.read("jax_enable_x64") else "float32"
    rtol = SELF_CHECK_RTOL[precision]
    if runner.progress:
        print(f"self-check: recomputing grid point {name} {route}", flush=True)
    t0 = time.perf_counter()
    compiled_before = runner._compiles.compiles if runner._compiles else 0
    reference, scales = results[i], {}
    if variant is not None:  # the variant compiled, against the same op by op
        point, scales = split_terms(variant(spec))
        reference = to_json({**spec, **point})
        recompute = variant
    watching = operations_progress(name, runner.progress, runner.config_hash)
    with op_by_op(numpy=numpy) if eager else contextlib.nullcontext() as calls, watching:
        point, fresh_scales = split_terms(recompute(spec))
    fresh = to_json({**spec, **point})
    for path, scale in fresh_scales.items():  # the larger of the two routes' scales
        scales[path] = max(scales.get(path, 0.0), scale)
    difference, where = compare_points(reference, fresh, atol=atol, scales=scales)
    record = {
        "point": name,
        "index": i,
        "of": len(specs),
        "route": route,
        "difference": difference,
        "where": where,
        "tolerance": rtol,
        "atol": atol,
        # the numbers compared relative to the scale of their terms (self_check.of_terms)
        "scales": scales,
        "agrees": bool(difference <= rtol),
    }
    if calls is not None:  # op by op: how many operations NumPy evaluated, which not
        record["primitives"] = primitive_routes(calls)
    runner.self_checks.append(record)
    if runner._compiles:  # op by op, every operation is a program of its own
        runner._self_check_compiles += runner._compiles.compiles - compiled_before
    # its time goes with the timings (`timing.self_check_seconds`): the record itself is
    # the same on every run of the same points
    runner.self_check_seconds.append(time.perf_counter() - t0)
    if not record["agrees"]:
        from ..runtime.releases import installed

        v = installed()
        raise SelfCheckError(
            f"self-check: grid point {name} recomputed {route} differs from its compiled "
            f"result ({where}: difference {difference:.3g} > {rtol:g} of its scale): the "
            f"compiler (jax {v['jax']}, jaxlib {v['jaxlib']}) computed it wrong, so no "
            "results.json is written; try another jax release (`meanfield canary` names "
            "the paths it gets wrong)"
        )
