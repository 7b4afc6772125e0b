"""Benchmark: our batched depth loop beside the natural ways of writing the same thing.

    PYTHONPATH=. python3 benchmarks/peers.py --out DIR [--preset quick|full] [--suites finite]

Suite `finite` (the finite 2LP ResNet, forward and forward+backward, for several seeds
of each configuration; all implementations get the same weights and inputs and their
outputs are checked against ours):

* `ours`: a `meanfield.ResNet` with its default depth loop (`AutoLoop`: the fused
  kernels on a GPU where they apply, the scan on a CPU), all inputs through the loop
  at once (`AbstractDepthLoop.forward`), every seed and input of a configuration in
  one program (`meanfield.shard_seeds`: seeds over all devices, vmapped within a
  device);
* `jax-scan-loop`: the foundation's `jax.vmap(net)` with `ScanLoop()` (a `lax.scan`
  over layers), jitted once and called per seed from a Python loop;
* `diffrax-euler`: the recursion as an ODE with a piecewise-constant vector field,
  `diffrax.diffeqsolve(ODETerm, Euler(), t0=0, t1=L, dt0=1)`, one jitted solve per
  configuration vmapped over seeds and inputs (gradients through diffrax's default
  `RecursiveCheckpointAdjoint`);
* `torch-eager`: a PyTorch loop over seeds and layers as in public research code
  (`h = h + alpha * act(h @ U[l].T) @ V[l]`, autograd for the backward), on CUDA when
  available; skipped where torch is not installed.

Every implementation is warmed up (and compiled) first; then they are timed in
interleaved rounds, and the ratio `peer / ours` is taken within each round and
reported as median, quartiles, min and max over rounds. More suites (the SDE solves)
register in `SUITES`.

Results: `DIR/peers.json` and `DIR/peers.txt`.
"""

import argparse
import faulthandler
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# PyTorch shares the GPU with JAX here: JAX must not take most of its memory up front
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks import timing  # noqa: E402
from meanfield.harness.args import int_list  # noqa: E402

PRESETS = {
    "quick": {
        "d": 8,
        "M": [16],
        "L": [64, 256],
        "seeds": 8,
        "inputs": 64,
        "sde_steps": [256, 1024],
    },
    "full": {
        "d": 8,
        "M": [16, 256],
        "L": [256, 1024, 4096],
        "seeds": 16,
        "inputs": 256,
        "sde_steps": [1024, 4096],
    },
}
PASSES = ("forward", "forward+backward")


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


# -- the finite network, written four ways --------------------------------------------


def _loss(out, ys):
    return 0.5 * jnp.mean(jnp.sum((out - ys) ** 2, axis=-1))


def _method_name(loop) -> str:
    """`pallas`, `scan` or `unroll`: the depth loop `AutoLoop` runs (`ours_method`)."""
    import meanfield as mf

    if isinstance(loop, mf.FusedLoop):
        return "pallas"
    return "scan" if loop.unroll == 1 else "unroll"


def ours(block, alpha, which):
    import meanfield as mf

    def out(params, xs):
        net = mf.ResNet(block, params, alpha)  # no embedding: h^0 = x
        return net.loop.forward(net.block, net.params, net.alpha, xs)

    def one(params, xs, ys):
        if which == "forward":
            return out(params, xs)
        return jax.value_and_grad(lambda p: _loss(out(p, xs), ys))(params)

    return mf.shard_seeds(one, (0, None, None))


def jax_scan_loop(block, alpha, which):
    import meanfield as mf

    def net(params):
        return mf.ResNet(block, params, alpha, loop=mf.ScanLoop())

    def one(params, xs, ys):
        if which == "forward":
            return jax.vmap(net(params))(xs)
        return jax.value_and_grad(lambda p: _loss(jax.vmap(net(p))(xs), ys))(params)

    step = jax.jit(one)
    return step, lambda per_seed, xs, ys: [step(p, xs, ys) for p in per_seed]


def diffrax_euler(block, alpha, which):
    import diffrax  # the natural peer; the package itself keeps diffrax in solvers/

    def solve(params, x):
        L = jax.tree.leaves(params)[0].shape[0]

        def field(t, h, params):
            layer = jnp.clip(jnp.floor(t).astype(jnp.int32), 0, L - 1)
            theta = jax.tree.map(lambda p: p[layer], params)
            return alpha * block.layer(h, theta)

        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Euler(),
            t0=0.0,
            t1=float(L),
            dt0=1.0,
            y0=x,
            args=params,
            saveat=diffrax.SaveAt(t1=True),
            max_steps=L,
        )
        return sol.ys[-1]

    def one(params, xs, ys):
        run = lambda p: jax.vmap(lambda x: solve(p, x))(xs)
        if which == "forward":
            return run(params)
        return jax.value_and_grad(lambda p: _loss(run(p), ys))(params)

    return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def torch_activations(torch) -> dict:
    """meanfield's activations written in torch (gelu: the exact, erf-based one)."""
    return {
        "tanh": torch.tanh,
        "relu": torch.relu,
        "erf": torch.special.erf,
        "gelu": torch.nn.functional.gelu,
        "sigmoid": torch.sigmoid,
        "softplus": torch.nn.functional.softplus,
        "identity": lambda x: x,
    }


def torch_eager(torch, activation, alpha, which, device, dtype):
    act = torch_activations(torch)[activation]

    def forward(U, V, X):
        h = X
        for layer in range(U.shape[0]):
            h = h + alpha * act(h @ U[layer].T) @ V[layer]
        return h

    def run(weights, X, Y):
        outs = []
        for U, V in weights:
            if which == "forward":
                with torch.no_grad():
                    outs.append(forward(U, V, X))
            else:
                U.grad = V.grad = None
                loss = 0.5 * ((forward(U, V, X) - Y) ** 2).sum(dim=-1).mean()
                loss.backward()
                outs.append((loss.detach(), U.grad, V.grad))
        if device.type == "cuda":
            torch.cuda.synchronize()
        return outs

    return run


# -- suite ------------------------------------------------------------------------------


def _max_diff(a, b) -> float:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    return max(
        float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
        for x, y in zip(leaves_a, leaves_b, strict=True)
    )


def finite_suite(cfg, args, dtype, report) -> None:
    import meanfield as mf

    torch = _torch()
    d, S, n = cfg["d"], cfg["seeds"], cfg["inputs"]
    block = mf.TwoLayerBlock(args.activation)
    law = mf.TwoLayerGaussianLaw(d)
    for M in cfg["M"]:
        for L in cfg["L"]:
            base = {"suite": "finite", "d": d, "M": M, "L": L, "seeds": S, "inputs": n}
            if report.out_of_time(base, args.passes):
                continue
            key = jax.random.fold_in(jax.random.key(args.seed), L * 100_003 + M)
            alpha = mf.MeanODEScaling()(L, M)
            params = jax.vmap(
                lambda k, L=L, M=M, alpha=alpha: (
                    mf.ResNet.sample(block, law, L=L, M=M, scaling=alpha, key=k).params
                )
            )(jax.random.split(key, S))
            params = jax.tree.map(lambda a: a.astype(dtype), params)
            xs = jax.random.normal(jax.random.fold_in(key, 1), (n, d), dtype)
            ys = jnp.roll(xs, 1, axis=1)
            per_seed = [jax.tree.map(lambda a, s=s: a[s], params) for s in range(S)]
            auto = _method_name(mf.AutoLoop().resolve(block, per_seed[0], n))
            for which in args.passes:
                if report.out_of_time(base, [which]):
                    continue
                report.add(
                    _compare(
                        which,
                        block,
                        alpha,
                        params,
                        per_seed,
                        xs,
                        ys,
                        args,
                        torch,
                        dtype,
                        {**base, "ours_method": auto},
                    )
                )


def _compare(which, block, alpha, params, per_seed, xs, ys, args, torch, dtype, base):
    calls, compile_s, results, notes = {}, {}, {}, {}

    f = ours(block, alpha, which)
    compiled, compile_s["ours"] = timing.compile_jax(f.jitted, params, xs, ys)
    calls["ours"] = lambda: jax.block_until_ready(compiled(params, xs, ys))

    step, loop = jax_scan_loop(block, alpha, which)
    _, compile_s["jax-scan-loop"] = timing.compile_jax(step, per_seed[0], xs, ys)
    calls["jax-scan-loop"] = lambda: jax.block_until_ready(loop(per_seed, xs, ys))

    g = diffrax_euler(block, alpha, which)
    try:  # vmapped over all seeds at once, its saved states may not fit the device
        compiled_dx, compile_s["diffrax-euler"] = timing.compile_jax(g, params, xs, ys)
        calls["diffrax-euler"] = lambda: jax.block_until_ready(compiled_dx(params, xs, ys))
    except Exception as err:  # a peer that cannot run is a result, not the end of the run
        notes["diffrax-euler"] = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:100]}"

    if torch is None:
        notes["torch-eager"] = "skipped: torch not installed"
    elif args.activation not in torch_activations(torch):
        notes["torch-eager"] = f"skipped: no torch form of activation {args.activation!r}"
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        tdtype = torch.float64 if dtype == jnp.float64 else torch.float32
        weights = [
            (
                torch.tensor(np.asarray(p.u), dtype=tdtype, device=device).requires_grad_(),
                torch.tensor(np.asarray(p.v), dtype=tdtype, device=device).requires_grad_(),
            )
            for p in per_seed
        ]
        X = torch.tensor(np.asarray(xs), dtype=tdtype, device=device)
        Y = torch.tensor(np.asarray(ys), dtype=tdtype, device=device)
        run = torch_eager(torch, args.activation, alpha, which, device, dtype)
        calls["torch-eager"] = lambda: run(weights, X, Y)
        compile_s["torch-eager"] = None
        notes["torch-eager"] = f"torch {torch.__version__} on {device.type}"

    # outputs of every implementation, to check they compute the same network
    results["ours"] = calls["ours"]()
    reference = _per_seed_values(results["ours"], which, len(per_seed))
    diffs = {"ours": 0.0}
    for name in calls:
        if name == "ours":
            continue
        values = _per_seed_values(
            calls[name](), which, len(per_seed), torch_out=name == "torch-eager"
        )
        diffs[name] = _max_diff(values, reference)

    timings = timing.interleaved(
        calls,
        compile_s=compile_s,
        min_rounds=args.min_reps,
        max_rounds=args.max_reps,
        target_seconds=args.target_seconds,
    )
    rows = []
    for name, t in timings.items():
        row = {**base, "pass": which, "impl": name, **t.summary(), "max_diff": diffs[name]}
        if name != "ours":
            row["ratio"] = timing.ratio_summary(t.times, timings["ours"].times)
        row["note"] = notes.get(name, "")
        rows.append(row)
    for name, note in notes.items():
        if name not in timings:
            rows.append({**base, "pass": which, "impl": name, "note": note})
    _progress(rows)
    return rows


def _progress(rows):
    """One line per finished row on stderr, so that a run cut short still shows them."""
    for r in rows:
        ratio = r.get("ratio") or {}
        print(
            f"peers: {r.get('suite')} M {r.get('M', '-')} L {r.get('L')} {r.get('pass')} "
            f"{r.get('impl')}: median {r.get('median_s')}, peer/ours {ratio.get('median')} "
            f"[{ratio.get('q25')}, {ratio.get('q75')}] {r.get('note', '')}",
            file=sys.stderr,
            flush=True,
        )


def _per_seed_values(out, which, seeds, torch_out=False):
    """Forward: (S, n, d) outputs; forward+backward: losses and gradients per seed."""
    if torch_out:
        if which == "forward":
            return np.stack([o.detach().cpu().numpy() for o in out])
        return [
            (float(loss), g_u.detach().cpu().numpy(), g_v.detach().cpu().numpy())
            for loss, g_u, g_v in out
        ]
    if isinstance(out, list):  # the Python loop over seeds
        out = jax.tree.map(lambda *xs: jnp.stack(xs), *out)
    if which == "forward":
        return np.asarray(out)
    loss, grads = out
    return [(float(loss[s]), np.asarray(grads.u[s]), np.asarray(grads.v[s])) for s in range(seeds)]


def sde_suite(cfg, args, dtype, report) -> None:
    """The Itô SDE `dH = d^{-1/2} dB σ(H)` on [0, 1], Euler–Maruyama with n steps, for
    several seeds: ours (one path per seed pre-sampled on the grid, `solvers.GridPath`,
    the matrix product without a d×d×d tensor, all seeds in one vmapped program) beside
    the natural Diffrax code (`VirtualBrownianTree` with a d×d control, a `ControlTerm`
    whose diffusion is materialised as a (d, d, d) array, jitted once and called per seed
    from a Python loop). The Brownian paths differ (VBT draws its own), so the outputs
    are compared in distribution only (mean of |H_1|), not value by value."""
    import diffrax

    from meanfield.blocks.activations import resolve_activation
    from meanfield.laws.depth import BrownianLaw
    from meanfield.limits.neural_sde import NeuralSDE

    d, S = cfg["d"], cfg["seeds"]
    act = resolve_activation(args.activation)  # both sides solve the requested σ
    x = jnp.linspace(-1.0, 1.0, d, dtype=dtype) + 0.5
    for n in cfg["sde_steps"]:
        base = {"suite": "sde", "d": d, "L": n, "M": "-", "seeds": S, "inputs": 1}
        if report.out_of_time(base, ["forward"]):
            continue
        law = BrownianLaw(d, n)
        model = NeuralSDE(args.activation)
        keys = jax.random.split(jax.random.key(args.seed), S)

        @jax.jit
        def ours_fn(keys, n=n, law=law, model=model):
            def one(k):
                path = law.path(k).astype(dtype)
                return model.solve(path, x, steps=n, save=1).ys[-1]

            return jax.vmap(one)(keys)

        eye = jnp.eye(d, dtype=dtype)

        @jax.jit
        def natural_fn(key, n=n, eye=eye):
            bm = diffrax.VirtualBrownianTree(0.0, 1.0, tol=0.5 / n, shape=(d, d), key=key)
            diffusion = lambda t, y, a: jnp.einsum("ik,j->ijk", eye, act(y) / d**0.5)
            sol = diffrax.diffeqsolve(
                diffrax.ControlTerm(diffusion, bm),
                diffrax.Euler(),
                0.0,
                1.0,
                1.0 / n,
                x,
                max_steps=n + 1,
            )
            return sol.ys[-1]

        _, c_ours = timing.compile_jax(ours_fn, keys)
        _, c_nat = timing.compile_jax(natural_fn, keys[0])
        calls = {
            "ours": lambda f=ours_fn, keys=keys: jax.block_until_ready(f(keys)),
            "diffrax-vbt-loop": lambda f=natural_fn, keys=keys: [
                jax.block_until_ready(f(k)) for k in keys
            ],
        }
        a = np.asarray(calls["ours"]())
        b = np.stack([np.asarray(v) for v in calls["diffrax-vbt-loop"]()])
        timings = timing.interleaved(
            calls,
            compile_s={"ours": c_ours, "diffrax-vbt-loop": c_nat},
            min_rounds=args.min_reps,
            max_rounds=args.max_reps,
            target_seconds=args.target_seconds,
        )
        rows = []
        for name, t in timings.items():
            row = {
                **base,
                "pass": "forward",
                "impl": name,
                **t.summary(),
                "max_diff": None,
                "note": f"mean |H_1| {np.mean(np.abs(a if name == 'ours' else b)):.3f}",
            }
            if name != "ours":
                row["ratio"] = timing.ratio_summary(t.times, timings["ours"].times)
            rows.append(row)
        _progress(rows)
        report.add(rows)


SUITES = {"finite": finite_suite, "sde": sde_suite}


def _ratio_text(r):
    if not r:
        return "-"
    return f"{r['median']:.3g}x [{r['q25']:.3g}-{r['q75']:.3g}]"


COLUMNS = [
    ("suite", "suite", str),
    ("M", "M", str),
    ("L", "L", str),
    ("seeds", "seeds", str),
    ("inputs", "n", str),
    ("pass", "pass", str),
    ("impl", "implementation", str),
    ("compile_s", "compile", timing.format_seconds),
    ("median_s", "median", timing.format_seconds),
    ("rel_iqr", "IQR/med", lambda x: "-" if x is None else f"{x:.0%}"),
    ("ratio", "peer/ours (IQR)", _ratio_text),
    ("max_diff", "max diff", lambda x: "-" if x is None else f"{x:.1e}"),
    ("note", "note", str),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    timing.add_common_arguments(parser, "peers")
    parser.add_argument(
        "--preset", choices=list(PRESETS), help="default: full on GPU, quick on CPU"
    )
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated")
    parser.add_argument("--passes", default=",".join(PASSES), help="comma-separated")
    parser.add_argument("--activation", default="tanh")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--L", type=int_list, help="depths")
    parser.add_argument("--M", type=int_list, help="widths")
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--inputs", type=int)
    parser.add_argument("--sde-steps", type=int_list, help="SDE solver steps")
    parser.add_argument(
        "--time-budget",
        type=float,
        help="start no configuration after this many seconds (default: no limit)",
    )
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash inside a framework still leaves a traceback
    args.passes = [p for p in args.passes.split(",") if p]
    suites = [s for s in args.suites.split(",") if s]
    bad = [p for p in args.passes if p not in PASSES] + [s for s in suites if s not in SUITES]
    if bad:
        parser.error(f"unknown passes/suites {bad}; use {PASSES} and {list(SUITES)}")
    timing.setup(args)
    preset = args.preset or ("quick" if jax.default_backend() == "cpu" else "full")
    cfg = dict(PRESETS[preset])
    for k in ("L", "M", "seeds", "inputs", "sde_steps"):
        if getattr(args, k) is not None:
            cfg[k] = getattr(args, k)
    dtype = jnp.float64 if args.x64 else jnp.float32
    torch = _torch()
    report = Report(
        args.out,
        {
            "benchmark": "peers",
            "environment": {**timing.environment(), "torch": torch.__version__ if torch else None},
            "settings": {
                **vars(args),
                "preset": preset,
                "config": cfg,
                "dtype": jnp.dtype(dtype).name,
            },
            "rows": [],
            "skipped_time_budget": [],
            "complete": False,
        },
        args.time_budget,
    )
    for name in suites:
        SUITES[name](cfg, args, dtype, report)
    report.payload["complete"] = True
    report.write(quiet=False)
    return report.payload


class Report:
    """The run's JSON and table, rewritten after every finished configuration (a run cut
    short keeps what it measured; `complete` says whether it got to the end), and the
    time budget: a configuration not started within `budget` seconds is listed in
    `skipped_time_budget` instead of run."""

    def __init__(self, out, payload: dict, budget: float | None):
        self.out, self.payload, self.budget = out, payload, budget
        self.t0 = time.perf_counter()

    def add(self, rows: list[dict]) -> None:
        self.payload["rows"] += rows
        self.write(quiet=True)

    def out_of_time(self, base: dict, passes) -> bool:
        if self.budget is None or time.perf_counter() - self.t0 <= self.budget:
            return False
        self.payload["skipped_time_budget"] += [{**base, "pass": p} for p in passes]
        self.write(quiet=True)
        return True

    def write(self, *, quiet: bool) -> None:
        payload = self.payload
        payload["seconds"] = time.perf_counter() - self.t0
        env, settings = payload["environment"], payload["settings"]
        head = (
            f"peers on {env['device_kind']} ({env['backend']}, {settings['dtype']}), "
            f"activation {settings['activation']}; ratio = peer time / our time, paired by "
            "round\n\n"
        )
        skipped = payload["skipped_time_budget"]
        tail = ""
        if skipped:
            tail = f"\n\nnot started within the time budget: {len(skipped)} configuration pass(es)"
        if not payload["complete"]:
            tail += "\n\n(partial: the run has not finished)"
        text = head + timing.table(payload["rows"], COLUMNS) + tail
        timing.write_report(self.out, "peers", payload, text, quiet=quiet)


if __name__ == "__main__":
    main()
