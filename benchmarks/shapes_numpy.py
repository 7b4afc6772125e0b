"""Benchmark: the deep ResNet on an embedding (seed 002, SPEC §6) trained over a grid of
shapes (L, M, D), the NumPy way of public research code beside `meanfield.models.deep_embedded`.

    PYTHONPATH=. python3 benchmarks/shapes_numpy.py --out DIR [--preset quick|default]

The network (`h^0 = W_in x`, `h^l = h^{l-1} + (1/(LM)) Σ_j v^{j,l} ρ(⟨u^{j,l}, h^{l-1}⟩_D)`,
`f = W_outᵀ h^L / D`; loss `(1/n) Σ ½‖f − y‖²`; GD `u ← u − η_u·LMD·∇_u`,
`v ← v − η_v·LMD·∇_v`, W_in and W_out frozen) in the authors' linear setting: ρ the
identity, `s_u = s_v = σ_in = σ_out = 1`, `η_u = η_v = 0.1`, one input x ∈ R^3,
d_out = 3, K GD steps (default 5); `--activations identity,tanh` adds tanh. Per grid
point, `--seeds` networks, and the outputs after k = 0..K updates:

* `numpy`: the research-code way, written here independently of meanfield: a Python
  loop over grid points, seeds, GD steps and layers, each step a forward recursion
  storing the hidden states and an explicit hand-written backward recursion (the
  adjoint `g^{l-1} = g^l + (ρ'(P) ⊙ g^l v^ᵀ/(LM)) u / D`, the gradients of u and v read
  off layer by layer), in float64 NumPy;
* `ours`: `meanfield.training.deep_embedded.train` (`jax.grad` through a `lax.scan` over layers,
  the K steps in a `lax.scan`), jitted and vmapped over the seeds of a grid point: one
  compiled program per shape (L, M, D), compiled ahead and timed apart, with the
  library's default `unroll` (layers per loop step: 1 on a CPU, 8 on a GPU);
  `--unroll 1,16` also times ours at those values, in the same rounds (`variants`).

Both get the same networks: the parameters are drawn once per grid point in JAX
(`DeepEmbeddedResNet.sample` from `fold_in` keys) and converted to NumPy for `numpy`;
the outputs after every step (`max_diff`) and the hidden states `h^l` of every step
and layer (`max_diff_hidden`) are compared, and the run fails if either exceeds
`--tolerance` (default 1e-8; float64 throughout). Each point is timed in interleaved
rounds (`benchmarks/timing.py`): the ratio `numpy / ours` per point is paired by round.
The totals over the grid: `numpy` (sum of its medians), ours run only (sum of medians),
ours compile (sum of compile times) and ours cold (compile + first call); the grid's
ratios are numpy / ours run (`ratio_run`) and numpy / ours cold (`ratio_cold`, ours
charged its compilation).

`--batched` also runs the whole grid (per activation) as **one** program, the way `study
shapes` batches small shapes: every point's networks padded into the grid's largest
shape (zero units, zero embedding rows; `train` with `size`, traced), vmapped over the
points and their seeds, compiled once. Its outputs and hidden states are checked against
NumPy's at every point like the per-point program's, and it is timed in rounds against
the per-point programs run one after the other (`batched` in the JSON: numpy / batched,
and per-point / batched; on a GPU the small shapes are latency-bound, which this
removes).

Results: `DIR/shapes_numpy.json` and `DIR/shapes_numpy.txt`.
"""

import argparse
import faulthandler
import functools
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import timing  # noqa: E402
from meanfield.engine.scan import default_unroll  # noqa: E402
from meanfield.harness.args import int_list, positive_int  # noqa: E402

NAME = "shapes_numpy"
ACTIVATIONS = ("identity", "tanh")  # the NumPy peer's; the draws' keys use the index
PRESETS = {
    "quick": {"L": [10, 20], "M": [10, 20], "D": [10, 20], "seeds": 4},
    "default": {"L": [10, 20, 40], "M": [10, 20, 40], "D": [10, 20, 40], "seeds": 8},
}
# the authors' linear setting (SPEC §6)
SETTING = {
    "s_u": 1.0,
    "s_v": 1.0,
    "sigma_in": 1.0,
    "sigma_out": 1.0,
    "eta_u": 0.1,
    "eta_v": 0.1,
    "x": [[0.3, -0.8, 1.2]],
    "y": [[-1.0, 0.2, 0.5]],
}


# -- (a) the research-code way: NumPy, loops over layers, explicit backward -------------


def _rho(activation):
    """ρ and ρ' in NumPy (the two activations of the authors' code)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: the NumPy peer has {ACTIVATIONS}, got {activation!r}")
    if activation == "identity":
        return (lambda p: p), (lambda p: np.ones_like(p))
    return np.tanh, (lambda p: 1.0 - np.tanh(p) ** 2)


def numpy_forward(u, v, w_in, x, rho):
    """The forward recursion, layer by layer: the hidden states h^0..h^L (n, D) and the
    pre-activations P^1..P^L (n, M)."""
    L, M, D = u.shape
    h = x @ w_in.T
    hs, ps = [h], []
    for layer in range(L):
        p = h @ u[layer].T / D  # P^{j,l} = <u^{j,l}, h^{l-1}>_D
        h = h + rho(p) @ v[layer] / (L * M)
        hs.append(h)
        ps.append(p)
    return hs, ps


def numpy_layer_backward(g, h_prev, p, u_l, v_l, rho, drho, L, M, D):
    """One layer of the backward recursion: from `g = ∂𝓛/∂h^l` (n, D), the gradients of
    the layer's u and v (M, D each) and `∂𝓛/∂h^{l-1}`."""
    a = rho(p)  # (n, M)
    grad_v = a.T @ g / (L * M)
    gp = drho(p) * (g @ v_l.T) / (L * M)  # ∂𝓛/∂P, (n, M)
    grad_u = gp.T @ h_prev / D
    g_prev = g + gp @ u_l / D
    return grad_u, grad_v, g_prev


def numpy_train(u, v, w_in, w_out, x, y, *, activation, eta_u, eta_v, steps):
    """`steps` GD steps, the outputs (K+1, n, d_out) and hidden states (K+1, n, L+1, D)
    after k = 0..K updates (the parameters are copied, not changed)."""
    rho, drho = _rho(activation)
    u, v = u.copy(), v.copy()
    L, M, D = u.shape
    n = x.shape[0]
    outputs, hidden = [], []
    for k in range(steps + 1):
        hs, ps = numpy_forward(u, v, w_in, x, rho)
        f = hs[-1] @ w_out / D
        outputs.append(f)
        hidden.append(np.stack(hs, axis=1))
        if k == steps:
            break
        g = (f - y) @ w_out.T / (n * D)  # ∂𝓛/∂h^L for 𝓛 = (1/n) Σ ½‖f − y‖²
        grads_u, grads_v = np.empty_like(u), np.empty_like(v)
        for layer in reversed(range(L)):
            grads_u[layer], grads_v[layer], g = numpy_layer_backward(
                g, hs[layer], ps[layer], u[layer], v[layer], rho, drho, L, M, D
            )
        u -= eta_u * L * M * D * grads_u
        v -= eta_v * L * M * D * grads_v
    return np.stack(outputs), np.stack(hidden)


def numpy_point(params, x, y, *, activation, steps):
    """Every seed of a grid point, one after the other (a Python loop, as research code)."""
    kw = {"activation": activation, "eta_u": SETTING["eta_u"], "eta_v": SETTING["eta_v"]}
    return [numpy_train(*p, x, y, steps=steps, **kw) for p in params]


# -- (b) ours: meanfield.deep_embedded, jitted and vmapped over seeds -------------------


def sample_point(key, L, M, D, seeds, activation):
    """The grid point's networks, drawn once in JAX: a batch of `DeepEmbeddedResNet`
    (leading axis the seeds), from `split(key, seeds)`."""
    from meanfield.models.deep_embedded import DeepEmbeddedResNet

    x = jnp.asarray(SETTING["x"])
    y = jnp.asarray(SETTING["y"])
    kw = {k: SETTING[k] for k in ("s_u", "s_v", "sigma_in", "sigma_out")}

    @jax.jit
    @jax.vmap
    def draw(k):
        return DeepEmbeddedResNet.sample(
            k, L=L, M=M, D=D, d_in=x.shape[1], d_out=y.shape[1], activation=activation, **kw
        )

    return draw(jax.random.split(key, seeds))


def ours_fn(steps, unroll=None):
    """`train` vmapped over a batch of networks, jitted (compiled once per shape);
    `unroll` None: the library's default."""
    from meanfield.training.deep_embedded import train

    def one(net, x, y):
        eta = {"eta_u": SETTING["eta_u"], "eta_v": SETTING["eta_v"]}
        return train(net, x, y, steps=steps, unroll=unroll, **eta)

    return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def to_numpy(nets):
    """Per seed, `(u, v, W_in, W_out)` as float64 NumPy arrays."""
    arrays = [np.asarray(a, np.float64) for a in (nets.u, nets.v)]
    arrays += [np.asarray(a, np.float64) for a in (nets.embedding.w_in, nets.embedding.w_out)]
    return [tuple(a[s] for a in arrays) for s in range(arrays[0].shape[0])]


def compare_point(key, L, M, D, seeds, activation, steps):
    """Both implementations once on the same networks: `(max_diff, max_diff_hidden)` over
    the outputs and the hidden states of every step (no timing)."""
    nets = sample_point(key, L, M, D, seeds, activation)
    x, y = jnp.asarray(SETTING["x"]), jnp.asarray(SETTING["y"])
    f, h = ours_fn(steps)(nets, x, y)
    res = numpy_point(
        to_numpy(nets), np.asarray(x), np.asarray(y), activation=activation, steps=steps
    )
    return _diffs(res, f, h)


def _diffs(res, f, h):
    f_np = np.stack([r[0] for r in res])
    h_np = np.stack([r[1] for r in res])
    return (
        float(np.max(np.abs(f_np - np.asarray(f)))),
        float(np.max(np.abs(h_np - np.asarray(h)))),
    )


# -- the run ------------------------------------------------------------------------------


def run_point(key, L, M, D, seeds, activation, steps, args):
    """The point's row, and what `--batched` reuses of it: `(row, (nets, numpy's
    results, our compiled program))`."""
    nets = sample_point(key, L, M, D, seeds, activation)
    x, y = jnp.asarray(SETTING["x"]), jnp.asarray(SETTING["y"])
    params = to_numpy(nets)
    x_np, y_np = np.asarray(x), np.asarray(y)

    compiled, compile_s = timing.compile_jax(ours_fn(steps), nets, x, y)
    t0 = time.perf_counter()
    f, h = jax.block_until_ready(compiled(nets, x, y))
    first_s = time.perf_counter() - t0  # ours' first call after compiling
    res = numpy_point(params, x_np, y_np, activation=activation, steps=steps)
    max_diff, max_diff_hidden = _diffs(res, f, h)

    calls = {
        "numpy": lambda: numpy_point(params, x_np, y_np, activation=activation, steps=steps),
        "ours": lambda: jax.block_until_ready(compiled(nets, x, y)),
    }
    compiles = {"numpy": None, "ours": compile_s}
    for unroll in args.unroll or []:  # the variants, each checked against numpy too
        label = f"unroll {unroll}"
        program, compiles[label] = timing.compile_jax(ours_fn(steps, unroll), nets, x, y)
        diff_f, diff_h = _diffs(res, *jax.block_until_ready(program(nets, x, y)))
        max_diff, max_diff_hidden = max(max_diff, diff_f), max(max_diff_hidden, diff_h)
        calls[label] = functools.partial(_call, program, nets, x, y)
    t = timing.interleaved(
        calls,
        compile_s=compiles,
        min_rounds=args.min_reps,
        max_rounds=args.max_reps,
        target_seconds=args.target_seconds,
    )
    variants = {
        label: {
            "ours_s": t[label].median,
            "ours_compile_s": compiles[label],
            "ratio": timing.ratio_summary(t["numpy"].times, t[label].times),
        }
        for label in calls
        if label.startswith("unroll ")
    }
    return {
        "activation": activation,
        "L": L,
        "M": M,
        "D": D,
        "seeds": seeds,
        "steps": steps,
        "numpy_s": t["numpy"].median,
        "ours_s": t["ours"].median,
        "ours_compile_s": compile_s,
        "ours_first_call_s": first_s,
        "ratio": timing.ratio_summary(t["numpy"].times, t["ours"].times),
        "max_diff": max_diff,
        "max_diff_hidden": max_diff_hidden,
        "numpy": t["numpy"].summary(),
        "ours": t["ours"].summary(),
        "variants": variants,
    }, (nets, res, compiled)


def pad_nets(nets, box):
    """A batch of networks (leading axis the seeds) padded into `box = (L_b, M_b, D_b)`:
    zero units beyond their own (L, M, D), zero embedding rows beyond D."""
    import equinox as eqx

    Lb, Mb, Db = box
    L, M, D = nets.u.shape[1:]
    units = ((0, 0), (0, Lb - L), (0, Mb - M), (0, Db - D))
    rows = ((0, 0), (0, Db - D), (0, 0))
    return eqx.tree_at(
        lambda n: (n.u, n.v, n.embedding.w_in, n.embedding.w_out),
        nets,
        (jnp.pad(nets.u, units), jnp.pad(nets.v, units), jnp.pad(nets.embedding.w_in, rows),
         jnp.pad(nets.embedding.w_out, rows)),
    )  # fmt: skip


def batched_fn(steps):
    """`train` with `size` (traced), vmapped over the seeds and then over the points: one
    program for every shape the box holds."""
    from meanfield.training.deep_embedded import train

    def one(net, x, y, size):
        eta = {"eta_u": SETTING["eta_u"], "eta_v": SETTING["eta_v"]}
        return train(net, x, y, steps=steps, size=(size[0], size[1], size[2]), **eta)

    per_point = jax.vmap(one, in_axes=(0, None, None, None))
    return jax.jit(jax.vmap(per_point, in_axes=(0, None, None, 0)))


def run_batched(points, activation, steps, args):
    """The grid as one program (`--batched`): `points` are `run_point`'s second results
    (each point's networks, NumPy's results and our per-point program), padded into the
    grid's largest shape, compiled once, checked against NumPy's results, and timed in
    rounds against the per-point programs called one after the other."""
    nets = [n for n, _, _ in points]
    shapes = [tuple(n.u.shape[1:]) for n in nets]
    box = tuple(max(s[i] for s in shapes) for i in range(3))
    x, y = jnp.asarray(SETTING["x"]), jnp.asarray(SETTING["y"])
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *[pad_nets(n, box) for n in nets])
    sizes = jnp.asarray(shapes)
    compiled, compile_s = timing.compile_jax(batched_fn(steps), stacked, x, y, sizes)
    f, h = jax.block_until_ready(compiled(stacked, x, y, sizes))
    max_diff = max_diff_hidden = 0.0
    for i, (L, _, D) in enumerate(shapes):
        d_f, d_h = _diffs(points[i][1], f[i], h[i, :, :, :, : L + 1, :D])
        max_diff, max_diff_hidden = max(max_diff, d_f), max(max_diff_hidden, d_h)

    def per_point():
        for n, _, program in points:
            jax.block_until_ready(program(n, x, y))

    t = timing.interleaved(
        {"batched": functools.partial(_call, compiled, stacked, x, y, sizes),
         "per_point": per_point},
        compile_s={"batched": compile_s},
        min_rounds=args.min_reps,
        max_rounds=args.max_reps,
        target_seconds=args.target_seconds,
    )  # fmt: skip
    return {
        "activation": activation,
        "box": list(box),
        "points": len(points),
        "batched_s": t["batched"].median,
        "batched_compile_s": compile_s,
        "per_point_s": t["per_point"].median,
        "per_point_over_batched": timing.ratio_summary(t["per_point"].times, t["batched"].times),
        "max_diff": max_diff,
        "max_diff_hidden": max_diff_hidden,
    }


def _say(text: str) -> None:
    print(f"{NAME}: {text}", file=sys.stderr, flush=True)


def _call(program, *args):
    return jax.block_until_ready(program(*args))


def totals(rows):
    """The grid's totals (per activation and over all rows) and their ratios."""
    out = {}
    for act in sorted({r["activation"] for r in rows}) + ["all"]:
        sel = [r for r in rows if act in ("all", r["activation"])]
        numpy_s = sum(r["numpy_s"] for r in sel)
        run_s = sum(r["ours_s"] for r in sel)
        compile_s = sum(r["ours_compile_s"] for r in sel)
        cold_s = compile_s + sum(r["ours_first_call_s"] for r in sel)
        out[act] = {
            "points": len(sel),
            "numpy_s": numpy_s,
            "ours_run_s": run_s,
            "ours_compile_s": compile_s,
            "ours_cold_s": cold_s,
            "ratio_run": numpy_s / run_s if run_s > 0 else None,
            "ratio_cold": numpy_s / cold_s if cold_s > 0 else None,
            "max_diff": max(r["max_diff"] for r in sel) if sel else None,
            "max_diff_hidden": max(r["max_diff_hidden"] for r in sel) if sel else None,
        }
        variant_s = {
            label: sum(r["variants"][label]["ours_s"] for r in sel)
            for label in (sel[0]["variants"] if sel else {})
        }
        out[act]["variants"] = {
            label: {"ours_run_s": t, "ratio_run": numpy_s / t} for label, t in variant_s.items()
        }
    return out


def _ratio_text(r):
    return f"{r['median']:.3g}x [{r['q25']:.3g}-{r['q75']:.3g}]"


COLUMNS = [
    ("activation", "rho", str),
    ("L", "L", str),
    ("M", "M", str),
    ("D", "D", str),
    ("seeds", "seeds", str),
    ("numpy_s", "numpy", timing.format_seconds),
    ("ours_s", "ours", timing.format_seconds),
    ("ours_compile_s", "ours compile", timing.format_seconds),
    ("ratio", "numpy/ours (IQR)", _ratio_text),
    ("max_diff", "max diff f", lambda x: f"{x:.1e}"),
    ("max_diff_hidden", "max diff h", lambda x: f"{x:.1e}"),
]
TOTAL_COLUMNS = [
    ("activation", "rho", str),
    ("points", "points", str),
    ("numpy_s", "numpy", timing.format_seconds),
    ("ours_run_s", "ours run", timing.format_seconds),
    ("ours_compile_s", "ours compile", timing.format_seconds),
    ("ours_cold_s", "ours cold", timing.format_seconds),
    ("ratio_run", "numpy/run", lambda x: "-" if x is None else f"{x:.3g}x"),
    ("ratio_cold", "numpy/cold", lambda x: "-" if x is None else f"{x:.3g}x"),
    ("max_diff", "max diff f", lambda x: "-" if x is None else f"{x:.1e}"),
]


def write(payload, *, quiet):
    env, s = payload["environment"], payload["settings"]
    head = (
        f"shapes_numpy on {env['device_kind']} ({env['backend']}, {env['cpu']}, "
        f"{env['cpu_count']} cores), float64, K = {s['steps']} GD steps, {s['seeds']} seeds "
        f"per point; ours with the default unroll ({s['default_unroll']}); ratio = numpy "
        "time / our time (run only), paired by round\n\n"
    )
    text = head + timing.table(payload["rows"], COLUMNS)
    if payload["rows"]:
        total_rows = [{"activation": k, **v} for k, v in payload["totals"].items()]
        text += "\n\ngrid totals (cold = compile + first call)\n\n"
        text += timing.table(total_rows, TOTAL_COLUMNS)
        for act, tot in payload["totals"].items():
            for label, v in tot["variants"].items():
                text += (
                    f"\n{act}, ours with {label}: run {timing.format_seconds(v['ours_run_s'])}"
                    f", numpy/run {v['ratio_run']:.3g}x"
                )
    for b in payload.get("batched", []):
        text += (
            f"\n\n{b['activation']}, the grid's {b['points']} points as one program (box "
            f"{b['box']}): {timing.format_seconds(b['batched_s'])} (compile "
            f"{timing.format_seconds(b['batched_compile_s'])}), the per-point programs "
            f"{timing.format_seconds(b['per_point_s'])}, numpy "
            f"{timing.format_seconds(b['numpy_s'])}: numpy/batched "
            f"{b['numpy_over_batched']:.3g}x, per-point/batched "
            f"{b['per_point_over_batched']['median']:.3g}x; max diff {b['max_diff']:.1e} / "
            f"{b['max_diff_hidden']:.1e}"
        )
    if not payload["complete"]:
        text += "\n\n(partial: the run has not finished)"
    timing.write_report(s["out"], NAME, payload, text, quiet=quiet)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    timing.add_common_arguments(parser, NAME)
    parser.set_defaults(x64=True, min_reps=3, max_reps=10)
    parser.add_argument("--preset", choices=list(PRESETS), default="default")
    parser.add_argument("--quick", action="store_true", help="same as --preset quick")
    parser.add_argument("--L", type=int_list, help="depths (override the preset)")
    parser.add_argument("--M", type=int_list, help="widths (override the preset)")
    parser.add_argument("--D", type=int_list, help="embedding dimensions (override the preset)")
    parser.add_argument("--seeds", type=positive_int, help="networks per grid point")
    parser.add_argument("--steps", type=int, default=5, help="GD steps K (default 5)")
    parser.add_argument("--activations", default="identity", help="comma-separated: identity, tanh")
    parser.add_argument("--seed", type=int, default=0, help="master seed of the draws")
    parser.add_argument(
        "--unroll",
        type=int_list,
        help="also time ours at these unroll values (layers per loop step), e.g. 1,16",
    )
    parser.add_argument(
        "--batched",
        action="store_true",
        help="also run the whole grid as one padded program and time it (see above)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=1e-8,
        help="largest allowed |numpy - ours| on outputs and hidden states (1e-8)",
    )
    args = parser.parse_args(argv)
    faulthandler.enable()
    if not args.x64:
        parser.error("the agreement check to ~1e-8 needs float64: drop --no-x64")
    acts = [a for a in args.activations.split(",") if a]
    if not acts or any(a not in ACTIVATIONS for a in acts):
        parser.error(f"--activations: each one of {', '.join(ACTIVATIONS)}, got {acts}")
    timing.setup(args)
    preset = "quick" if args.quick else args.preset
    cfg = dict(PRESETS[preset])
    for k in ("L", "M", "D", "seeds"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)

    payload = {
        "benchmark": NAME,
        "environment": timing.environment(),
        "settings": {
            **vars(args),
            "preset": preset,
            "grid": {k: cfg[k] for k in ("L", "M", "D")},
            "seeds": cfg["seeds"],
            "activations": acts,
            "setting": SETTING,
            "dtype": "float64",
            "default_unroll": default_unroll(),
        },
        "rows": [],
        "totals": {},
        "complete": False,
    }
    t0 = time.perf_counter()
    master = jax.random.key(args.seed)
    failures = []
    for act in acts:
        grid = []
        for L in cfg["L"]:
            for M in cfg["M"]:
                for D in cfg["D"]:
                    key = master
                    for i in (ACTIVATIONS.index(act), L, M, D):
                        key = jax.random.fold_in(key, i)
                    row, checked = run_point(key, L, M, D, cfg["seeds"], act, args.steps, args)
                    if args.batched:
                        grid.append(checked)
                    payload["rows"].append(row)
                    payload["totals"] = totals(payload["rows"])
                    payload["seconds"] = time.perf_counter() - t0
                    write(payload, quiet=True)
                    _say(
                        f"{act} L {L} M {M} D {D}: numpy {row['numpy_s']:.4g} s, "
                        f"ours {row['ours_s']:.4g} s (compile {row['ours_compile_s']:.3g} s), "
                        f"ratio {row['ratio']['median']:.3g}, max diff {row['max_diff']:.1e} "
                        f"/ {row['max_diff_hidden']:.1e}"
                    )
                    if max(row["max_diff"], row["max_diff_hidden"]) > args.tolerance:
                        failures.append(row)
        if args.batched:
            b = run_batched(grid, act, args.steps, args)
            b["numpy_s"] = payload["totals"][act]["numpy_s"]
            b["numpy_over_batched"] = b["numpy_s"] / b["batched_s"]
            payload.setdefault("batched", []).append(b)
            write(payload, quiet=True)
            _say(
                f"{act}, the grid as one program (box {b['box']}): "
                f"{b['batched_s']:.4g} s (compile {b['batched_compile_s']:.3g} s), "
                f"per-point programs {b['per_point_s']:.4g} s, numpy {b['numpy_s']:.4g} s: "
                f"numpy / batched {b['numpy_over_batched']:.3g}, max diff "
                f"{b['max_diff']:.1e} / {b['max_diff_hidden']:.1e}"
            )
            if max(b["max_diff"], b["max_diff_hidden"]) > args.tolerance:
                failures.append({**b, "L": b["box"][0], "M": b["box"][1], "D": b["box"][2]})
    payload["complete"] = True
    payload["agree"] = not failures
    payload["seconds"] = time.perf_counter() - t0
    write(payload, quiet=False)
    if failures:
        bad = [(r["activation"], r["L"], r["M"], r["D"], r["max_diff"]) for r in failures]
        sys.exit(f"{NAME}: numpy and ours disagree beyond {args.tolerance:g} at {bad}")
    return payload


if __name__ == "__main__":
    main()
