"""Benchmark: the depth loop of the finite 2LP ResNet, forward and forward+backward.

    PYTHONPATH=. python3 benchmarks/depth_loop.py --out DIR [--shapes quick|headline|full]

For every shape (d, M, L, batch) and every method, a depth loop of `meanfield.ResNet`
(`scan`: `ScanLoop()`, one layer per loop step; `unroll`: `ScanLoop(unroll)`; `pallas`:
the fused kernels, `FusedLoop(...)` with the tiling options below), it times the
forward pass of the whole batch through the loop (`AbstractDepthLoop.forward`) and
forward+backward (`jax.value_and_grad` of the mean squared loss in the weights:
autodiff through the scan, the kernels' custom VJP), and reports achieved FLOP/s and
bytes/s and the three limits of `benchmarks/hardware.py` (compute roofline, memory
roofline, dependency chain), the largest of which is the applicable one:
`fraction = limit / time` (1 = at the limit).

Counts (s = bytes per number; n inputs; per layer and input):

* forward FLOPs `n L (4dM + M + 2d)`: `u_j·h` (2dM), ρ (M), `Σ_j v_j a_j` (2dM),
  `h + α·inc` (2d);
* backward FLOPs `n L (8dM + 2M + 2d)`: `v_j·b` (2dM), ρ' and `ρ'·g` (2M),
  `Σ_j u_j q_j` and the update (2dM + 2d), `∇v` and `∇u` accumulated over inputs
  (2dM each);
* forward bytes `s (2LMd + 2nd)`: the weights read once, inputs read, outputs written;
* forward+backward bytes `s (4LMd + 2nd)`: weights read, gradients written, x and y
  read. These are compulsory traffic; what an implementation stores on the way
  (the scan's residuals) is its own cost, not counted.

Results: `DIR/depth_loop.json` (rewritten after every shape, so a run cut short keeps
what it measured) and `DIR/depth_loop.txt`.
"""

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp

from benchmarks import hardware, timing
from meanfield.engine import FusedLoop, ScanLoop
from meanfield.engine.kernels import WEIGHT_LOADS
from meanfield.harness.args import int_list

FULL = {
    "d": [4, 8, 64],
    "M": [1, 16, 256, 1024],
    "L": [64, 1024, 4096],
    "batch": [64, 256, 4096],
}
QUICK = {"d": [8], "M": [1, 16, 256], "L": [64, 1024], "batch": [64, 256]}
HEADLINE = (8, 16, 4096, 256)  # the shape: d, M, L, batch
METHODS = ("scan", "unroll", "pallas")
PASSES = ("forward", "forward+backward")


def shapes(which: str, filters: dict) -> list[tuple[int, int, int, int]]:
    if which == "headline":
        out = [HEADLINE]
    else:
        grid = FULL if which == "full" else QUICK
        out = list(itertools.product(grid["d"], grid["M"], grid["L"], grid["batch"]))
        if which == "quick":
            out.append(HEADLINE)
    for i, key in enumerate(("d", "M", "L", "batch")):
        if filters.get(key):
            out = [s for s in out if s[i] in filters[key]]
    return sorted(set(out), key=lambda s: (s[2] * s[1] * s[0] * s[3], s))


def flop_count(d, M, L, n, which: str) -> float:
    fwd = n * L * (4 * d * M + M + 2 * d)
    bwd = n * L * (8 * d * M + 2 * M + 2 * d)
    return fwd if which == "forward" else fwd + bwd


def byte_count(d, M, L, n, which: str, itemsize: int) -> float:
    if which == "forward":
        return itemsize * (2 * L * M * d + 2 * n * d)
    return itemsize * (4 * L * M * d + 2 * n * d)


def scan_residual_bytes(d, M, L, n, itemsize) -> float:
    """What reverse-mode through a scan keeps: per layer and input, h and the M
    pre-activations and activations (an estimate, to skip shapes that cannot fit)."""
    return itemsize * n * L * (2 * M + 2 * d)


def _memory_limit_bytes(cli_gb: float | None) -> float:
    if cli_gb is not None:
        return cli_gb * 2**30
    stats = getattr(jax.devices()[0], "memory_stats", lambda: None)()
    if stats and stats.get("bytes_limit"):
        return 0.6 * stats["bytes_limit"]
    return 4 * 2**30


def build(d, M, L, n, activation, dtype, key):
    import meanfield as mf

    block = mf.TwoLayerBlock(activation)
    law = mf.TwoLayerGaussianLaw(d)
    net = mf.ResNet.sample(block, law, L=L, M=M, scaling=mf.MeanODEScaling(), key=key)
    params = jax.tree.map(lambda a: a.astype(dtype), net.params)
    xs = jax.random.normal(jax.random.fold_in(key, 1), (n, d), dtype)
    ys = jnp.roll(xs, 1, axis=1)
    return block, net.alpha, params, xs, ys


def depth_loop(method: str, unroll: int, fused: FusedLoop):
    """The `ResNet` depth loop of a method name (`--methods`)."""
    if method == "pallas":
        return fused
    return ScanLoop(unroll if method == "unroll" else 1)


def method_name(loop) -> str:
    """The method name of a depth loop (what `AutoLoop` resolves to)."""
    if isinstance(loop, FusedLoop):
        return "pallas"
    return "scan" if loop.unroll == 1 else "unroll"


def programs(block, alpha, method: str, unroll: int, fused: FusedLoop):
    """The forward and forward+backward functions of one method (arrays as arguments)."""
    import meanfield as mf

    loop = depth_loop(method, unroll, fused)

    def out(params, xs):
        net = mf.ResNet(block, params, alpha, loop=loop)  # no embedding: h^0 = x
        return net.loop.forward(net.block, net.params, net.alpha, xs)

    def loss(params, xs, ys):
        return 0.5 * jnp.mean(jnp.sum((out(params, xs) - ys) ** 2, axis=-1))

    return {
        "forward": jax.jit(out),
        "forward+backward": jax.jit(jax.value_and_grad(loss)),
    }


COLUMNS = [
    ("d", "d", str),
    ("M", "M", str),
    ("L", "L", str),
    ("batch", "n", str),
    ("pass", "pass", str),
    ("method", "method", str),
    ("compile_s", "compile", timing.format_seconds),
    ("median_s", "median", timing.format_seconds),
    ("rel_iqr", "IQR/med", lambda x: "-" if x is None else f"{x:.0%}"),
    ("speedup", "vs scan", lambda x: "-" if x is None else f"{x:.3g}x"),
    ("flops_per_s", "FLOP/s", lambda x: timing.format_rate(x, "F/s")),
    ("bytes_per_s", "bytes/s", lambda x: timing.format_rate(x, "B/s")),
    ("bound", "limit", str),
    ("bound_s", "limit time", timing.format_seconds),
    ("fraction", "of limit", lambda x: "-" if x is None else f"{x:.2g}"),
    ("note", "note", str),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    timing.add_common_arguments(parser, "depth_loop")
    parser.add_argument(
        "--shapes",
        choices=["quick", "headline", "full"],
        help="shape table (default: full on GPU/TPU, quick on CPU)",
    )
    for key in ("d", "M", "L", "batch"):
        parser.add_argument(f"--{key}", type=int_list)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated")
    parser.add_argument("--passes", default=",".join(PASSES), help="comma-separated")
    parser.add_argument("--activation", default="tanh", help="ρ of the 2LP block (tanh)")
    parser.add_argument("--unroll", type=int, default=8, help="layers per step of 'unroll'")
    parser.add_argument("--block-batch", type=int, help="pallas: inputs per program")
    parser.add_argument("--layers-per-step", type=int, default=8, help="pallas: layers per step")
    parser.add_argument("--num-warps", type=int, help="pallas (Triton): warps per program")
    parser.add_argument("--num-stages", type=int, help="pallas (Triton): pipeline stages")
    parser.add_argument(
        "--weight-loads",
        default=FusedLoop().weight_loads,
        choices=WEIGHT_LOADS,
        help="pallas: when each layer's weights are loaded (default: %(default)s)",
    )
    parser.add_argument(
        "--pallas-interpret",
        action="store_true",
        help="on CPU, time the kernels in interpret mode (correctness only, slow)",
    )
    parser.add_argument("--peak-tflops", type=float, help="override the compute peak")
    parser.add_argument("--peak-gbps", type=float, help="override the memory peak (GB/s)")
    parser.add_argument("--clock-ghz", type=float, help="override the clock of the chain bound")
    parser.add_argument("--fma-cycles", type=float, help="override the FMA latency (cycles)")
    parser.add_argument("--max-memory-gb", type=float, help="skip shapes needing more")
    parser.add_argument(
        "--time-budget", type=float, default=None, help="stop starting shapes after this many s"
    )
    args = parser.parse_args(argv)
    timing.setup(args)
    import meanfield as mf

    on_cpu = jax.default_backend() == "cpu"
    which = args.shapes or ("quick" if on_cpu else "full")
    filters = {k: getattr(args, k) for k in ("d", "M", "L", "batch")}
    table_shapes = shapes(which, filters)
    methods = [m for m in args.methods.split(",") if m]
    passes = [p for p in args.passes.split(",") if p]
    bad = [m for m in methods if m not in METHODS] + [p for p in passes if p not in PASSES]
    if bad:
        parser.error(f"unknown methods/passes {bad}; use {METHODS} and {PASSES}")
    dtype = jnp.float64 if args.x64 else jnp.float32
    itemsize = jnp.dtype(dtype).itemsize
    figures = hardware.peaks(
        dtype,
        flops=args.peak_tflops and args.peak_tflops * 1e12,
        bandwidth=args.peak_gbps and args.peak_gbps * 1e9,
        clock_hz=args.clock_ghz and args.clock_ghz * 1e9,
        fma_cycles=args.fma_cycles,
    )
    fused = mf.FusedLoop(
        block_batch=args.block_batch,
        layers_per_step=args.layers_per_step,
        num_warps=args.num_warps,
        num_stages=args.num_stages,
        weight_loads=args.weight_loads,
    )
    memory_limit = _memory_limit_bytes(args.max_memory_gb)
    rows = []
    payload = {
        "benchmark": "depth_loop",
        "environment": timing.environment(),
        "settings": {**vars(args), "shapes": which, "dtype": jnp.dtype(dtype).name},
        "peaks": figures,
        "formulas": {
            "forward_flops": "n L (4dM + M + 2d)",
            "backward_flops": "n L (8dM + 2M + 2d)",
            "forward_bytes": "s (2LMd + 2nd)",
            "forward_backward_bytes": "s (4LMd + 2nd)",
            "chain_forward_ops": "(1 + ceil(log2 d)) + act + (1 + ceil(log2 M)) + 1",
            "chain_backward_ops": "(1 + ceil(log2 d)) + 1 + (1 + ceil(log2 M)) + 1",
            "chain_seconds": "L * ops * fma_cycles / clock_hz",
        },
        "rows": rows,
    }
    t_start = time.perf_counter()
    skipped_budget = []
    for d, M, L, n in table_shapes:
        if args.time_budget and time.perf_counter() - t_start > args.time_budget:
            skipped_budget.append([d, M, L, n])
            continue
        key = jax.random.fold_in(jax.random.key(0), d * 1_000_003 + M * 10_007 + L * 101 + n)
        block, alpha, params, xs, ys = build(d, M, L, n, args.activation, dtype, key)
        net = mf.ResNet(block, params, alpha)
        auto = method_name(mf.AutoLoop(fused=fused).resolve(net.block, net.params, n))
        baseline = {}
        for method, which_pass in itertools.product(methods, passes):
            row = {"d": d, "M": M, "L": L, "batch": n, "pass": which_pass, "method": method}
            row["auto_choice"] = auto
            note = _skip_reason(method, net, n, fused, args, on_cpu)
            need = scan_residual_bytes(d, M, L, n, itemsize) if which_pass != "forward" else 0
            if note is None and need > memory_limit:
                note = f"needs ~{need / 2**30:.1f} GiB for residuals"
            if note is not None:
                rows.append({**row, "note": note})
                continue
            fns = programs(block, alpha, method, args.unroll, fused)
            fn_args = (params, xs) if which_pass == "forward" else (params, xs, ys)
            t = timing.time_jax(
                fns[which_pass],
                *fn_args,
                min_reps=args.min_reps,
                max_reps=args.max_reps,
                target_seconds=args.target_seconds,
            )
            s = t.summary()
            flops = flop_count(d, M, L, n, which_pass)
            nbytes = byte_count(d, M, L, n, which_pass, itemsize)
            ops = hardware.chain_ops_forward(d, M, args.activation)
            if which_pass != "forward":
                ops += hardware.chain_ops_backward(d, M)
            lim = hardware.limits(flops, nbytes, ops, L, figures)
            row.update(s)
            row.update(
                flops=flops,
                bytes=nbytes,
                flops_per_s=flops / s["median_s"],
                bytes_per_s=nbytes / s["median_s"],
                chain_ops_per_layer=ops,
                limits=lim,
                bound=lim.get("bound"),
                bound_s=lim.get("bound_s"),
                fraction=lim["bound_s"] / s["median_s"] if lim.get("bound_s") else None,
                note="auto" if method == auto else "",
            )
            if method == "scan":
                baseline[which_pass] = s["median_s"]
            if which_pass in baseline:
                row["speedup"] = baseline[which_pass] / s["median_s"]
            rows.append(row)
        payload["skipped_time_budget"] = skipped_budget
        payload["seconds"] = time.perf_counter() - t_start
        _write(args.out, payload, rows, quiet=True)
    _write(args.out, payload, rows, quiet=False)
    return payload


def _skip_reason(method, net, n, fused: FusedLoop, args, on_cpu):
    if method != "pallas":
        return None
    if on_cpu and not args.pallas_interpret:
        return "pallas: CPU runs it interpreted only (--pallas-interpret)"
    ok, reason = fused.supports(net.block, net.params, n)
    return None if ok else f"pallas: {reason}"


def _write(out, payload, rows, *, quiet):
    figures = payload["peaks"]
    head = [
        f"depth_loop on {payload['environment']['device_kind']} "
        f"({payload['environment']['backend']}, {figures['dtype']}), "
        f"activation {payload['settings']['activation']}",
        f"compute peak {timing.format_rate(figures['flops'], 'FLOP/s')} "
        f"({figures['flops_source']}), memory peak "
        f"{timing.format_rate(figures['bandwidth'], 'B/s')} ({figures['bandwidth_source']}), "
        f"chain: FMA {figures['fma_cycles']} cycles at "
        f"{(figures['clock_hz'] or math.nan) / 1e9:.3g} GHz ({figures['clock_source']})",
        "",
    ]
    text = "\n".join(head) + timing.table(rows, COLUMNS)
    timing.write_report(out, "depth_loop", payload, text, quiet=quiet)


if __name__ == "__main__":
    main()
