"""Benchmark: formulations and tilings of the fused 2LP forward kernel, on one shape.

    PYTHONPATH=. python3 benchmarks/kernel_variants.py --out DIR [--shape d,M,L,batch]

The fused depth loop (`meanfield.engine.kernels`, run by `meanfield.FusedLoop`) is a
Pallas kernel whose speed on a GPU depends on how Triton lays the per-layer tile out
over threads, which the kernel does not choose directly. This script times, on one
shape (default the headline d 8, M 16, L 4096, batch 256), the forward pass of:

* `rows`: the library's kernel (`fused_hidden`): h as (inputs, d), products
  (inputs, M, d), reductions over d then M — swept over `block_batch`, `num_warps`,
  `layers_per_step` and `weight_loads` (what `meanfield.FusedLoop` exposes);
* `lanes`: h transposed to (d, inputs), products (M, d, inputs): the inputs on the
  fast axis, so that a thread can own an input and reduce over M and d in registers;
* `lanes_exp`: `lanes` with tanh written as 1 - 2 / (exp(2x) + 1) (one exp, one
  division) instead of libdevice's tanh;
* `dot`: both products as `dot` in IEEE float32 (`Precision.HIGHEST`: no TF32), with d
  and M padded to 16 (Triton's smallest dot);

every formulation (`--blocks`, `--warps`: the tilings to try instead of each one's
defaults) with each placement of the weight loads (`--weight-loads`: at each
layer, hoisted to the start of a loop step, or prefetched one step ahead; see
`meanfield.engine.kernels.layer_loop`), each beside the plain `lax.scan` in the same
run (`vs scan`), with the largest
difference from the scan (float32: differences of order 1e-6 are rounding). `lanes`
and `dot` are experiments written here, not library code: the fastest formulation on
a device is the one to move into `meanfield.engine.kernels`. On a CPU every kernel
runs in Pallas interpret mode (a correctness check of this script only; the timings
mean nothing there). Results: `DIR/kernel_variants.json` and `.txt`.
"""

import argparse
import itertools
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.lax as lax
import jax.numpy as jnp

from benchmarks import timing
from meanfield.engine import kernels as fused
from meanfield.harness.args import int_list


def _call(kernel, out_shape, grid, in_specs, out_specs, num_warps, interpret):
    from jax.experimental import pallas as pl

    kwargs = {}
    if not interpret:
        from jax.experimental.pallas import triton as pltriton

        params = getattr(pltriton, "CompilerParams", None) or pltriton.TritonCompilerParams
        kwargs["compiler_params"] = params(num_warps=num_warps)
    return pl.pallas_call(
        kernel,
        out_shape=out_shape,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=interpret,
        **kwargs,
    )


def _weights(u_ref, v_ref, K):
    return lambda i, k: (u_ref[i * K + k], v_ref[i * K + k])


def _tanh_exp(x):
    """tanh as 1 - 2 / (exp(2x) + 1): one exp and one division (vs libdevice's tanh)."""
    return 1.0 - 2.0 / (jnp.exp(2.0 * x) + 1.0)


def lanes(h0, u, v, alpha, block, num_warps, K, loads, interpret, act=jnp.tanh):
    from jax.experimental import pallas as pl

    n, d = h0.shape
    L, M, _ = u.shape

    def kernel(h_ref, u_ref, v_ref, o_ref):
        def body(i, h, get):
            for k in range(K):
                uk, vk = get(k)  # (M, d, 1)
                a = act(jnp.sum(uk * h[None, :, :], axis=1))  # (M, inputs)
                h = h + alpha * jnp.sum(vk * a[:, None, :], axis=0)
            return h

        o_ref[...] = fused.layer_loop(L // K, K, h_ref[...], _weights(u_ref, v_ref, K), body, loads)

    w = pl.BlockSpec((L, M, d, 1), lambda i: (0, 0, 0, 0))
    tile = pl.BlockSpec((d, block), lambda i: (0, i))
    f = _call(
        kernel,
        jax.ShapeDtypeStruct((d, n), h0.dtype),
        (n // block,),
        [tile, w, w],
        tile,
        num_warps,
        interpret,
    )
    return f(h0.T, u[..., None], v[..., None]).T


def dot(h0, u, v, alpha, block, num_warps, K, loads, interpret):
    from jax.experimental import pallas as pl

    n, d = h0.shape
    L, M, _ = u.shape
    dp, Mp = max(16, d), max(16, M)
    hp = jnp.pad(h0, ((0, 0), (0, dp - d)))
    uT = jnp.pad(jnp.swapaxes(u, 1, 2), ((0, 0), (0, dp - d), (0, Mp - M)))
    vp = jnp.pad(v, ((0, 0), (0, Mp - M), (0, dp - d)))
    high = lax.Precision.HIGHEST

    def kernel(h_ref, u_ref, v_ref, o_ref):
        def body(i, h, get):
            for k in range(K):
                uk, vk = get(k)
                a = jnp.tanh(jnp.dot(h, uk, precision=high))
                h = h + alpha * jnp.dot(a, vk, precision=high)
            return h

        o_ref[...] = fused.layer_loop(L // K, K, h_ref[...], _weights(u_ref, v_ref, K), body, loads)

    tile = pl.BlockSpec((block, dp), lambda i: (i, 0))
    f = _call(
        kernel,
        jax.ShapeDtypeStruct((n, dp), h0.dtype),
        (n // block,),
        [
            tile,
            pl.BlockSpec((L, dp, Mp), lambda i: (0, 0, 0)),
            pl.BlockSpec((L, Mp, dp), lambda i: (0, 0, 0)),
        ],
        tile,
        num_warps,
        interpret,
    )
    return f(hp, uT, vp)[:, :d]


def rows(h0, u, v, alpha, block, num_warps, K, loads, interpret):
    cfg = fused.KernelConfig(
        alpha=alpha,
        activation="tanh",
        block_batch=block,
        layers_per_step=K,
        interpret=interpret,
        num_warps=num_warps,
        weight_loads=loads,
    )
    return fused.fused_hidden(h0, u, v, cfg)


def scan(h0, u, v, alpha):
    def step(h, w):
        uk, vk = w
        return h + alpha * jnp.tanh(h @ uk.T) @ vk, None

    return lax.scan(step, h0, (u, v))[0]


def lanes_exp(*args):
    return lanes(*args, act=_tanh_exp)


VARIANTS = {"lanes": lanes, "lanes_exp": lanes_exp, "rows": rows, "dot": dot}


BLOCKS = {
    "lanes": [32, 128, 256],
    "lanes_exp": [32, 128],
    "rows": [1, 4, 16, 32],
    "dot": [16, 64],
}


def configs(n, on_cpu, layers, loads, blocks=None, warps=None):
    """The sweep, most informative first: the load placements at each tiling.

    `blocks` / `warps` (lists) replace every formulation's default tilings."""
    for name, K in itertools.product(VARIANTS, layers):
        default_warps = [1, 2, 4] if name.startswith("lanes") else [1, 4]
        tried_blocks = blocks or BLOCKS[name]
        tried_warps = warps or default_warps
        if on_cpu:
            tried_blocks, tried_warps = tried_blocks[:1], [1]
        for (block, nw), where in itertools.product(
            itertools.product(tried_blocks, tried_warps), loads
        ):
            if block <= n:
                yield name, block, nw, K, where


COLUMNS = [
    ("variant", "variant", str),
    ("block", "block", str),
    ("num_warps", "warps", str),
    ("layers_per_step", "K", str),
    ("weight_loads", "loads", str),
    ("compile_s", "compile", timing.format_seconds),
    ("median_s", "median", timing.format_seconds),
    ("rel_iqr", "IQR/med", lambda x: "-" if x is None else f"{x:.0%}"),
    ("speedup", "vs scan", lambda x: "-" if x is None else f"{x:.3g}x"),
    ("max_diff", "max diff", lambda x: "-" if x is None else f"{x:.1e}"),
    ("note", "note", str),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    timing.add_common_arguments(parser, "kernel_variants")
    parser.add_argument("--shape", default="8,16,4096,256", help="d,M,L,batch (the headline)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--layers-per-step", default="8", help="comma-separated K values (8)")
    parser.add_argument(
        "--weight-loads",
        default=",".join(fused.WEIGHT_LOADS),
        help="comma-separated placements of the weight loads (all)",
    )
    parser.add_argument(
        "--blocks", type=int_list, help="comma-separated inputs per program (default per variant)"
    )
    parser.add_argument(
        "--warps", type=int_list, help="comma-separated warps per program (default per variant)"
    )
    parser.add_argument("--time-budget", type=float, default=360.0, help="seconds (360)")
    args = parser.parse_args(argv)
    timing.setup(args)
    d, M, L, n = (int(x) for x in args.shape.split(","))
    on_cpu = jax.default_backend() == "cpu"
    layers = [int(x) for x in args.layers_per_step.split(",")]
    if any(L % K for K in layers):
        parser.error(f"--layers-per-step: every K must divide L={L}")
    loads = args.weight_loads.split(",")
    if not loads or any(w not in fused.WEIGHT_LOADS for w in loads):
        parser.error(f"--weight-loads: each one of {', '.join(fused.WEIGHT_LOADS)}")
    dtype = jnp.float64 if args.x64 else jnp.float32
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    h0 = jax.random.normal(k1, (n, d), dtype)
    u = jax.random.normal(k2, (L, M, d), dtype)
    v = jax.random.normal(k3, (L, M, d), dtype)
    alpha = 1.0 / (L * M) ** 0.5
    reps = {
        "min_reps": args.min_reps,
        "max_reps": args.max_reps,
        "target_seconds": args.target_seconds,
    }
    base = timing.time_jax(jax.jit(lambda h, a, b: scan(h, a, b, alpha)), h0, u, v, **reps)
    with jax.default_matmul_precision("highest"):
        reference = jax.jit(lambda h, a, b: scan(h, a, b, alpha))(h0, u, v)
    rows_out = [{"variant": "scan", **base.summary(), "speedup": 1.0}]
    payload = {
        "benchmark": "kernel_variants",
        "environment": timing.environment(),
        "shape": {"d": d, "M": M, "L": L, "batch": n},
        "dtype": jnp.dtype(dtype).name,
        "rows": rows_out,
    }
    wanted = args.variants.split(",")
    t_start = time.perf_counter()
    sweep = configs(n, on_cpu, layers, loads, args.blocks, args.warps)
    for name, block, nw, K, where in sweep:
        if name not in wanted:
            continue
        row = {
            "variant": name,
            "block": block,
            "num_warps": nw,
            "layers_per_step": K,
            "weight_loads": where,
        }
        if time.perf_counter() - t_start > args.time_budget:
            rows_out.append({**row, "note": "skipped: time budget"})
            continue
        fn = jax.jit(
            lambda h, a, b, f=VARIANTS[name], blk=block, w=nw, k=K, ld=where: f(
                h, a, b, alpha, blk, w, k, ld, on_cpu
            )
        )
        try:
            t = timing.time_jax(
                fn, h0, u, v, **(reps if not on_cpu else {"min_reps": 1, "max_reps": 1})
            )
            diff = float(jnp.max(jnp.abs(fn(h0, u, v) - reference)))
            s = t.summary()
            row.update(s, speedup=base.median / s["median_s"], max_diff=diff, note="")
        except Exception as err:  # a formulation Triton cannot compile is a result too
            first = str(err).splitlines()[0] if str(err) else ""
            row["note"] = f"failed: {type(err).__name__}: {first[:120]}"
        rows_out.append(row)
    text = (
        f"kernel_variants on {payload['environment']['device_kind']}, "
        f"d {d} M {M} L {L} batch {n}, {payload['dtype']}, tanh"
        + (" (CPU: interpret mode, timings meaningless)" if on_cpu else "")
        + "\n\n"
        + timing.table(rows_out, COLUMNS)
    )
    timing.write_report(args.out, "kernel_variants", payload, text)
    return payload


if __name__ == "__main__":
    main()
