"""`meanfield study shapes`: the joint limit in depth L, width M and embedding dimension D
(Chaintron, "ResNets of all shapes and sizes"; docs: Mathematics §6), against exact references.

Every finite network (`meanfield.models.deep_embedded.DeepEmbeddedResNet`, GD in the joint-limit
convention `η · LMD · ∇`) is compared, after k = 0..K updates and at its own embedding
draw, with two solved limits:

* the **joint limit** L, M, D → ∞ (`limit.kind`: "linear-exact" for ρ = identity, the
  closed ODE system solved with Diffrax; for other ρ the same reduced system with Gaussian
  expectations, see `deep_embedded.limit`), whose own error is estimated;
* the **fixed-D limit** (L, M → ∞ at the same `W_in`, `W_out`), the same system at the
  draw's Gram matrix.

Per point (L, M, D, k) it records `output_error` and `hidden_error` against the joint
limit (Mathematics §6: E_f the RMS over outputs and inputs, E_h = max_l ‖ĥ^l − H(l/L)‖_D), the same
against the fixed-D limit (`*_fixed_D`: the L, M error alone) and the gap between the two
limits (`*_D_gap`: the D error alone). `fits` give slopes against L, M and D on lines where
the term they measure dominates (read off the joint fit), `rate_law` the joint fit
`a L^-p + b D^q (LM)^-r + c D^-s` with free exponents compared term by term with the
proven bound and the conjecture, and `optimal_shape` the exponents of L, M, D against the
budget `P = D(d_in + d_out) + 2LMD` that minimise the fitted law, beside the bound's and
the conjecture's.

Why this file is long: it is one study (options, configuration, cost model, the points,
the joint rate-law fit and the verdicts computed from it); its figures are
`shapes_plot`, its shared options and `--data` file `embedded_options`.
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...blocks.activations import resolve_activation
from ...coupling import deep_embedded as deep_embedded_coupling
from ...coupling.design import program_boxes
from ...harness.args import (
    Limit,
    check_activation,
    pad_budget,
)
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...limits import deep_embedded as deep_embedded_limits
from ...models import deep_embedded
from ...models.embedding import Embedding
from ...runtime.errors import StudyInputError
from ...stats.fits import (
    THEORY_TOLERANCE,
    exponent_theory,
    exponent_verdict,
    fit_loglog,
    fit_values,
    interval_text,
    summarize,
    theory_verdict,
)
from ...stats.rate_law import RATE_THEORIES, fit_rate_law, optimal_shape
from ...training import deep_embedded as deep_embedded_training
from ..shared.embedded_options import config_data, load_data, model_config
from ..two_layer.study import MAX_RATE, check_scales
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .plot import (
    ERRORS,
    QUANTITIES,
    REGIME,
    THEORY,
    draw_figures,
    error_rows,
    errors_figure,
    trajectory_figure,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

# the built-in data set: two scalar inputs, one output (d_in = d_out = 1, so that the
# limit's Gaussian expectation for a nonlinear ρ is a 4-dimensional quadrature)
DATA_X = [[1.0], [-0.6]]
DATA_Y = [[1.0], [-0.3]]
JUDGE = 10.0  # a point enters fits only if its error is JUDGE x the reference's own error
MEMORY_BYTES = 4 * 2**30  # the draws of a point run in batches within this much memory
DOMINANT = 0.6  # a line is fitted against X where the term of X is this share of the law


# temporaries of a point's compiled program per draw (float64; XLA's memory analysis on
# a CPU, within 15% over L 16, M 4..64, D 32..128, K 3..20): 56 bytes per unit coordinate
# (L·M·D: u, v, their gradients and updates, the activations) and 32 per hidden state
# of the trajectory ((K+1)·n·(L+1)·D: the network's, both limits' at its embedding, gaps)
NETWORK_BYTES = (56, 32)
# the limits' ODE solves (Dopri8, 13 stages; `solvers.solve_dense` keeps its dense output
# for every one of its ODE_STEPS steps): a smooth field takes about SMOOTH_STEPS (a tanh
# limit at K = 3, 33 depths: 3 s on a 2-core CPU, which this count puts at 16 s); an
# activation whose derivative jumps (relu) takes few in the solves of GD steps 0 and 1
# and its whole budget from step 2 on (measured, 33 depths: K = 1 4 s, K = 2 230 s, K = 3
# 700 s per limit, which then failed: its solve ran out of steps)
ODE_STEPS, ODE_STAGES, SMOOTH_STEPS, KINKED_FIRST_STEPS = 1024, 13, 8, 32
KINKED = ("relu", "leaky_relu")
# the most work the limits' solves may take in all (~1.4 h at `args.WORK_RATE`): they are
# ODE steps one after another, which no accelerator shortens much; beyond it the quick
# preset with relu (37 solves of K = 3: hours) is refused, while tanh (2 min) is not
LIMITS_WORK = 5e12


def limit_cost(cfg, n: int, d_in: int, d_out: int, S: int) -> tuple[float, float, float]:
    """`(bytes, operations, elements)` of one `deep_embedded.limit` solve on `S` depths:
    K + 1 ODE solves (for solve k, k + 1 steps of the unit recursion per evaluation of
    the field) at two tolerances or rules; for ρ = identity on the p × 2p unit maps, else
    on every node of the quadrature (2p <= 4) or of the quasi-Monte-Carlo rule."""
    K, width = cfg["steps"], 8 if cfg["x64"] else 4
    p = d_in + d_out
    steps = K + 1
    state = 2 * steps * n * p + n * p * p
    dense = ODE_STEPS * ODE_STAGES * state  # the dense output, kept for every step
    saved = 3 * steps * n * S * p  # the fields on the depths, and the trajectory
    kinked = cfg["activation"] in KINKED
    if cfg["activation"] == "identity":
        nodes = 0.0
        field = 20.0 * (n * p * p + p**3)
    else:
        if 2 * p <= 4:
            nodes = 24.0**p * 8.0**p + 18.0**p * 6.0**p
        else:
            nodes = 2.0**14 + 2.0**11
        field = 40.0 * nodes * n * p
    # Σ_k (k + 1) × (the ODE steps of solve k): the unit steps of every evaluation
    pairs = steps * (steps + 1) / 2
    if kinked:
        early = min(pairs, 3.0)  # the solves of GD steps 0 and 1: 1 + 2 unit steps
        unit_steps = early * KINKED_FIRST_STEPS + (pairs - early) * ODE_STEPS
    else:
        unit_steps = pairs * SMOOTH_STEPS
    memory = width * (2 * dense + saved + steps * S * n * p + 12 * nodes * (n + p))
    work = 2 * ODE_STAGES * unit_steps * field + 2 * steps * S * n * p * 40
    return memory, work, max(dense, saved / 3, steps * S * n * p)


def _parts(cfg, n: int, d_in: int, d_out: int) -> list:
    """The estimated cost (`args.Cost`) of the joint limit, the fixed-D limits (every draw
    of a dimension D at once, vmapped) and the networks (a point's draws in batches of at
    most `MEMORY_BYTES` by the count of `_program`, vmapped), for `n` inputs of dimension
    `d_in` and `d_out` outputs."""
    from ...harness.args import PYTHON_STEP, Cost

    K, seeds, width = cfg["steps"], cfg["seeds"], 8 if cfg["x64"] else 4
    p = d_in + d_out
    S = sum(L + 1 for L in cfg["L"])  # the depths of every grid, at most
    if S <= 2**24:  # (a larger set is not built here: the sum bounds its size)
        S = len(np.unique(np.concatenate([np.arange(L + 1) / L for L in cfg["L"]])))
    lim_mem, lim_work, lim_elements = limit_cost(cfg, n, d_in, d_out, S)
    a, b = NETWORK_BYTES

    def draw(L, M, D):  # one network: bytes, operations
        memory = width / 8 * (a * L * M * D + b * (K + 1) * n * (L + 1) * D)
        work = (K + 1) * n * L * M * D * 12 + (K + 1) * n * (L + 1) * D * p * 8
        return memory, work

    L, M, D = max(cfg["L"]), max(cfg["M"]), max(cfg["D"])
    batch = min(seeds, max(1, MEMORY_BYTES // (4 * 2 * 8 * L * M * D)))
    nets = math.fsum(
        seeds * draw(Lk, Mk, Dk)[1] + PYTHON_STEP
        for Lk in cfg["L"] for Mk in cfg["M"] for Dk in cfg["D"]
    )  # fmt: skip
    return [
        Cost(
            "--L/--M/--D/--seeds/--steps",
            "one network of the largest grid point"
            if batch == 1
            else f"a batch of {batch} networks of the largest grid point",
            memory=batch * draw(L, M, D)[0],
            work=nets,
            elements=batch * max(L * M * D, (K + 1) * n * (L + 1) * D),
            array="a batch of networks' units or hidden states, (batch, L, M, D) or "
            "(batch, steps + 1, n, L + 1, D)",
            memory_flags="--L/--M/--D/--steps",
        ),
        Cost(
            "--D/--seeds/--steps/--L",
            "the fixed-D limit of every draw of a dimension",
            memory=seeds * (lim_mem + width * (D * p + 3 * (K + 1) * n * S * p)),
            work=len(cfg["D"]) * (seeds * lim_work + PYTHON_STEP),
            elements=seeds * max(lim_elements, D * p, (K + 1) * n * S * p),
            array="the draws' embeddings or limits, (seeds, D, d_in + d_out) or "
            "(seeds, steps + 1, n, depths, d_in + d_out)",
            memory_flags="--seeds/--D/--steps/--L",
        ),
        Cost(
            "--steps/--L/--activation",
            "the joint limit",
            memory=lim_mem,
            work=lim_work,
            elements=lim_elements,
            array="the joint limit's solution, (steps + 1, n, depths, d_in + d_out)",
        ),
    ]


def cost_parts(args, cfg) -> list:
    """The estimated cost of its parts at the data's sizes (`_parts`), and the limits' ODE
    solves against their own work limit (`LIMITS_WORK`): the launcher checks them before
    `run`, one line naming the options, with the estimate."""
    (n, d_in), (_, d_out) = np.shape(cfg["x"]), np.shape(cfg["y"])
    parts = _parts(cfg, n, d_in, d_out)
    return [
        *parts,
        Limit(
            "--activation/--steps/--seeds/--D",
            f"the work of the limits' ODE solves ({cfg['activation']}, {cfg['steps']} GD steps)",
            math.fsum(c.work for c in parts if "limit" in c.what),
            LIMITS_WORK,
            operations=True,
            why="ODE steps one after another; relu runs to the solver's step budget from GD "
            "step 2 on, and at 3 steps fails there: fewer --steps, --seeds or --D, or a smooth "
            "activation",
        ),
    ]


def configure(args) -> dict:
    """The configuration from the options and the data (`--data`, kept in it as lists),
    every value refused in one line naming its option, absurd scales included
    (`two_layer.check_scales`)."""
    check_activation(args.activation)
    preset = PRESETS[args.preset]
    x, y = load_data(args.data, default=(DATA_X, DATA_Y), study="shapes")
    cfg = {
        **model_config(args, x, y),
        "L": sorted(args.L or preset["L"]),
        "M": sorted(args.M or preset["M"]),
        "D": sorted(args.D or preset["D"]),
        "seeds": args.seeds or preset["seeds"],
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    if args.lr_in or args.lr_out:  # a trainable embedding (absent: frozen, as before)
        cfg.update(lr_in=args.lr_in or 0.0, lr_out=args.lr_out or 0.0)
        for name in ("lr_in", "lr_out"):
            if cfg[name] > MAX_RATE:
                flag = "--" + name.replace("_", "-")
                raise StudyInputError(f"{flag}: at most {MAX_RATE:g}, got {cfg[name]:g}")
    for name in ("L", "M", "D"):
        values = cfg[name]
        if any(v < 1 for v in values) or len(set(values)) != len(values):
            raise StudyInputError(f"--{name}: need distinct positive integers, got {values}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 draws for a spread, got {cfg['seeds']}")
    check_scales(cfg)
    return cfg


def run(args, cfg):
    x, y = config_data(cfg)  # the data `configure` read, from their lists
    pad = pad_budget(args)
    runner = start_study(args, cfg)
    specs = [{"L": L, "M": M, "D": D} for D in cfg["D"] for L in cfg["L"] for M in cfg["M"]]
    boxes = program_boxes(
        [(s["L"], s["M"], s["D"]) for s in specs], cfg["seeds"], pad, pad_depth=True
    )
    study = _Study(cfg, jnp.asarray(x), jnp.asarray(y), boxes)
    # the self-check recomputes its point op by op in the point's own shape, not its box:
    # it checks the padding as well as the compiler
    points = runner.run_points(
        specs, study.point, describe=lambda s: f"L={s['L']} M={s['M']} D={s['D']}",
        check=functools.partial(study.point, padded=False),
    )  # fmt: skip
    trajectory = study.trajectory()
    warnings: list[str] = [w for w in [_failed_solves(points)] if w]
    points = _per_step(points, cfg["steps"])
    warnings += [w for w in [_explosions(points)] if w]
    rate_laws = {q: _rate_law(cfg, points, q, warnings) for q in QUANTITIES}
    fits = _fits(cfg, points, rate_laws, study.joint_error, warnings)
    shapes = _optimal_shapes(rate_laws)
    for w in warnings:
        runner.warn(w)
    joint = study.joint
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "rate_law": rate_laws,
            "optimal_shape": shapes,
            "error_definitions": ERROR_DEFINITIONS,
            "trajectory": trajectory,
            "limit": {
                "kind": study.kind,
                "outputs": joint.outputs,
                "error_estimate": study.joint_error,
                "fixed_D": "the same system at each draw's Gram matrix; each point records "
                "the largest error estimate of its draws' fixed-D limits",
            },
            "reference": {"method": study.kind, "error_estimate": study.joint_error},
            "headline": _headline(rate_laws, shapes),
        },
        {
            # the grid's compiled programs: each point ran in the box (L, M, D) named here
            # (its own shape, or a larger point's, padded: the same values to round-off)
            "pad_coordinates": pad,
            "programs": len(set(boxes.values())),
            "boxes": {f"L={p[0]} M={p[1]} D={p[2]}": list(b) for p, b in boxes.items()},
        },
        plot=plot,
    )


def _headline(rate_laws, shapes) -> list[str]:
    """What a finished run prints: per error, the fitted exponents of `D^q (LM)^-r` and
    `D^-s` with their intervals, which theory they support, and the optimal shape."""
    lines = []
    for q, law in rate_laws.items():
        if not isinstance(law, dict) or law.get("q") is None:
            lines.append(f"{q}: rate law not fitted")
            continue
        cells = []
        for name in ("q", "r", "s"):
            ci = law.get(f"{name}_ci95") or [float("nan")] * 2
            cells.append(f"{name} = {interval_text(law[name], ci)}")
        lines.append(f"{q}: D^q (LM)^-r + D^-s with {', '.join(cells)}")
        shape = shapes.get(q) or {}
        if "L" in shape:
            support = "; ".join(shape.get("supported_by_measurements") or [])
            lines.append(
                f"  optimal shape L, M, D ~ P^({shape['L']:.2f}, {shape['M']:.2f}, "
                f"{shape['D']:.2f}); {support}"
            )
    return lines


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`): the rates and the grid
    after K steps, and every point's six errors after each step k (`shapes_errors.png` at
    k = K, `shapes_errors_step{k}.png` before)."""
    cfg, points = results["config"], results["points"]
    draw_figures(out, cfg, points, results["fits"], results["rate_law"],
             results["optimal_shape"])  # fmt: skip
    for k in sorted({p["steps"] for p in points}):
        errors_figure(out, cfg, points, k)
    if results.get("trajectory"):
        trajectory_figure(out, cfg, points, results["trajectory"])


class _Study:
    """Per-point computations. Draw i of dimension D has one embedding, shared by every
    (L, M) at that D (so that its fixed-D limit is solved once); the units are drawn per
    (L, M) (`padded_units`: the same units in any program's box)."""

    def __init__(self, cfg, x, y, boxes=None):
        self.cfg, self.x, self.y = cfg, x, y
        self.boxes = boxes or {}  # (L, M, D) -> the box of its program (`program_boxes`)
        self.master = jr.key(cfg["seed"])
        # every depth l/L of the grid, so that one solve serves every L
        self.ts = np.unique(np.concatenate([np.arange(L + 1) / L for L in cfg["L"]]))
        self.joint = self._limit(None)
        self.kind = _kind(self.joint, cfg["activation"])
        self.joint_error = float(self.joint.error_estimate)
        if not bool(self.joint.ok):
            raise StudyInputError("the joint limit's solve failed; try smaller --lr-u, --lr-v")
        self._fixed: dict = {}

    def _limit(self, gram):
        """The joint limit (`gram` None) or the fixed-D limits at a batch of Grams: the
        exact linear system for ρ = identity, else its Gaussian expectation by quadrature
        (`deep_embedded.limit`)."""
        c = self.cfg
        solve = functools.partial(
            deep_embedded_limits.limit, self.x, self.y,
            activation=c["activation"], steps=c["steps"],
            eta_u=c["lr_u"], eta_v=c["lr_v"], s_u=c["s_u"], s_v=c["s_v"],
            sigma_in=c["sigma_in"], sigma_out=c["sigma_out"], ts=jnp.asarray(self.ts),
            eta_in=c.get("lr_in", 0.0), eta_out=c.get("lr_out", 0.0),
        )  # fmt: skip
        if gram is None:
            return solve()
        return jax.vmap(lambda g: solve(gram=g))(gram)

    def embeddings(self, D):
        c = self.cfg
        keys = jr.split(jr.fold_in(self.master, D), c["seeds"])
        d_in, d_out = self.x.shape[1], self.y.shape[1]
        return jax.vmap(
            lambda k: Embedding.sample(k, D, d_in, d_out, c["sigma_in"], c["sigma_out"])
        )(keys)

    def fixed_d(self, D):
        if D not in self._fixed:
            embs = self.embeddings(D)
            self._fixed[D] = (embs, self._limit(jax.vmap(deep_embedded_limits.basis_gram)(embs)))
        return self._fixed[D]

    def _draw_keys(self, L, M, D):
        return jr.split(jr.fold_in(jr.fold_in(jr.fold_in(self.master, D), L), M), self.cfg["seeds"])

    def trajectory(self, coordinates: int = 4) -> dict | None:
        """Draw 0 of the deepest, widest point at the middle D, trained again with its
        last network kept: the first `coordinates` coordinates of `h^l(x_0)` and of the
        rescaled backward field `b^l(x_0) = n D ∂𝓛/∂h^l` along l/L after the last step,
        against its fixed-D limit's `H_K(s)`, `b_K(s)`; and every coordinate of `h^L` and
        `b^0` (all inputs) for their histograms (Chaintron's authors' trajectory and
        histogram figures)."""
        c = self.cfg
        L, M, D, K = max(c["L"]), max(c["M"]), c["D"][len(c["D"]) // 2], c["steps"]
        embs, fixed = self.fixed_d(D)
        if not bool(np.asarray(fixed.ok).reshape(-1)[0]):
            return None  # draw 0's fixed-D limit did not solve: nothing to draw it against
        emb = jax.tree.map(lambda a: a[0], embs)
        lim = _on_grid(jax.tree.map(lambda a: a[0], fixed), np.searchsorted(
            self.ts, np.arange(L + 1) / L))  # fmt: skip
        u, v = deep_embedded.padded_units(
            self._draw_keys(L, M, D)[0], L=L, M=M, D=D, box=(L, M, D), s_u=c["s_u"],
            s_v=c["s_v"], dtype=self.x.dtype,
        )  # fmt: skip
        net = deep_embedded.DeepEmbeddedResNet(emb, u, v, resolve_activation(c["activation"]))
        _, hidden, last = deep_embedded_training.train_with_final(
            net, self.x, self.y, eta_u=c["lr_u"], eta_v=c["lr_v"], steps=K,
            eta_in=c.get("lr_in", 0.0), eta_out=c.get("lr_out", 0.0),
        )  # fmt: skip
        h, b = (
            np.asarray(hidden[K]),
            np.asarray(deep_embedded_training.backward_fields(last, self.x, self.y)),
        )
        h_lim, b_lim = np.asarray(lim.hidden(emb)[K]), np.asarray(lim.backward(emb)[K])
        d = min(coordinates, D)
        return {
            "L": L, "M": M, "D": D, "steps": K,
            "h": h[0, :, :d].T.tolist(), "h_limit": h_lim[0, :, :d].T.tolist(),
            "b": b[0, :, :d].T.tolist(), "b_limit": b_lim[0, :, :d].T.tolist(),
            "h_last": h[:, -1].ravel().tolist(), "h_last_limit": h_lim[:, -1].ravel().tolist(),
            "b_first": b[:, 0].ravel().tolist(), "b_first_limit": b_lim[:, 0].ravel().tolist(),
        }  # fmt: skip

    def point(self, spec, padded: bool = True):
        """The six errors of every draw of grid point `spec` after each step, run in the
        box of its program (`boxes`; `padded=False`: in its own shape)."""
        c = self.cfg
        L, M, D = spec["L"], spec["M"], spec["D"]
        box = self.boxes.get((L, M, D), (L, M, D)) if padded else (L, M, D)
        embs, fixed = self.fixed_d(D)
        grams = np.asarray(jax.vmap(deep_embedded_limits.basis_gram)(embs))  # for the errors' scale
        rows = ((0, 0), (0, box[2] - D), (0, 0))  # the embedding's zero rows beyond D
        embs = jax.tree.map(lambda a: jnp.pad(a, rows), embs)
        idx = np.searchsorted(self.ts, np.arange(L + 1) / L)
        idx = np.concatenate([idx, np.full(box[0] - L, idx[-1])])  # rows beyond L: s = 1
        run = _program(box, self.x.shape[1], self.y.shape[1], c["activation"], c["steps"],
                       (c.get("lr_in", 0.0), c.get("lr_out", 0.0)))  # fmt: skip
        out = run(
            self._draw_keys(L, M, D), embs, self.x, self.y, self.joint, fixed,
            jnp.asarray([c["s_u"], c["s_v"], c["lr_u"], c["lr_v"]]), jnp.asarray(idx),
            jnp.asarray([L, M, D]),
        )  # fmt: skip
        out = {k: np.asarray(v) for k, v in out.items()}  # each (seeds, K+1)
        # a draw whose fixed-D limit did not solve has no reference for its errors against
        # it, nor a D gap: counted as excluded there (never averaged), and said (run)
        failed = ~np.asarray(fixed.ok, dtype=bool).reshape(-1)
        ok = np.asarray(fixed.ok, dtype=bool).reshape(-1)
        # every error is a difference of outputs or hidden states against a limit's (a D
        # gap: of two limits'; exactly 0 at k = 0 for ρ = identity): its round-off is that
        # of the limits' fields (`self_check.of_terms`), as the fixed-D error estimate's
        # (a difference of two solves) is that of their outputs and coefficients
        outputs = np.max(np.abs(np.asarray(fixed.outputs)[ok]), initial=0.0)
        outputs = max(outputs, np.max(np.abs(np.asarray(self.joint.outputs))))
        hidden = max(_hidden_size(self.joint, grams[ok]), _hidden_size(fixed, grams[ok], ok))
        record = {}
        for name, values in out.items():
            mask = failed if name in FIXED_D_ERRORS else None
            per_step = [summarize(values[:, k], exploded=mask) for k in range(values.shape[1])]
            record[name] = of_terms(per_step, outputs if name.startswith("output") else hidden)
        solved = np.asarray(fixed.error_estimate).reshape(-1)[ok]
        coefficients = np.max(np.abs(np.asarray(fixed.hidden_coef)[ok]), initial=0.0)
        record["reference_error_fixed_D"] = of_terms(
            float(np.max(solved)) if solved.size else None, max(outputs, coefficients)
        )
        record["fixed_D_solves_ok"] = bool(ok.all())
        record["fixed_D_solves_failed"] = int(failed.sum())
        return record


def _hidden_size(limit, grams, draws=None) -> float:
    """The largest `‖H_k(s; x_i)‖_D = sqrt(ηᵀ G η)` of a limit's hidden fields at the draws'
    Gram matrices `grams` (`basis_gram`, `(draws, p, p)`): its coefficients η `(K+1, n, S,
    p)` the same at every draw (the joint limit), or one per draw, those kept by `draws`."""
    if not len(grams):
        return 0.0
    eta = np.asarray(limit.hidden_coef)
    eta = eta[draws] if draws is not None else np.broadcast_to(eta, (len(grams), *eta.shape))
    return float(np.sqrt(np.max(np.einsum("r...p,rpq,r...q->r...", eta, grams, eta))))


def _failed_solves(points) -> str | None:
    """The warning naming the points where some draws' fixed-D limit did not solve."""
    failed = [p for p in points if p.get("fixed_D_solves_failed")]
    if not failed:
        return None
    where = ", ".join(
        f"L={p['L']} M={p['M']} D={p['D']} ({p['fixed_D_solves_failed']} draw(s))" for p in failed
    )
    return (
        f"the fixed-D limit did not solve for some draws at {where}: their errors against "
        "it and their D gaps are left out of the means and fits (try smaller --lr-u, --lr-v)"
    )


def _explosions(points) -> str | None:
    """The warning naming every point whose networks exploded at some step (an error
    against the joint limit not finite or beyond the explosion threshold): their draws
    are left out of every mean and fit there, and the figures mark those points."""
    worst: dict = {}
    for p in points:
        n = max(p[q]["exploded"] for q in ("output_error", "hidden_error"))
        total = p["hidden_error"]["count"] + p["hidden_error"]["exploded"]
        key = (p["L"], p["M"], p["D"])
        if n and n > worst.get(key, (0, 0, 0))[0]:
            worst[key] = (n, total, p["steps"])
    if not worst:
        return None
    where = "; ".join(
        f"(L, M, D) = {key}: {n} of {total} after {k} step(s)"
        for key, (n, total, k) in sorted(worst.items())
    )
    return (
        f"networks exploded at {len(worst)} point(s), left out of their means and fits and "
        f"marked in the figures: {where} (try smaller learning rates)"
    )


def _kind(limit, activation):
    return getattr(limit, "kind", "linear-exact" if activation == "identity" else "limit")


def _on_grid(limit, idx):
    """The limit's fields at the network's depths (indices into the common grid)."""
    return eqx.tree_at(
        lambda m: (m.hidden_coef, m.backward_coef, m.ts),
        limit,
        (limit.hidden_coef[..., idx, :], limit.backward_coef[..., idx, :], limit.ts[..., idx]),
    )


_PROGRAMS: dict = {}


def _program(box, d_in, d_out, activation, steps, embedding_rates=(0.0, 0.0)):
    """One compiled program per box `(L_b, M_b, D_b)`: every draw of a point, vmapped, for
    every point whose (L, M, D) the box holds (`size`, traced; the units drawn in the box
    by `padded_units`, the embedding padded with zero rows, the limits read on the point's
    depths `idx`, padded to L_b + 1 rows by repeating s = 1). A padded point's errors are
    the same numbers as in its own box, to round-off (`DeepEmbeddedResNet.hidden`).
    `embedding_rates` (η_in, η_out), Python numbers: (0, 0) keeps the embedding frozen
    (the program of a frozen embedding, which computes no gradient for it)."""
    key = (tuple(box), d_in, d_out, activation, steps, tuple(embedding_rates))
    lr_in, lr_out = embedding_rates
    if key not in _PROGRAMS:
        rho = resolve_activation(activation)

        def one(k, emb, x, y, joint, fixed, scalars, idx, size):
            s_u, s_v, lr_u, lr_v = scalars
            L, M, D = size[0], size[1], size[2]
            u, v = deep_embedded.padded_units(
                k, L=L, M=M, D=D, box=box, s_u=s_u, s_v=s_v, dtype=x.dtype
            )
            net = deep_embedded.DeepEmbeddedResNet(emb, u, v, rho)
            outputs, hidden = deep_embedded_training.train(
                net, x, y, eta_u=lr_u, eta_v=lr_v, steps=steps, eta_in=lr_in, eta_out=lr_out,
                size=(L, M, D),
            )  # fmt: skip
            joint, fixed = _on_grid(joint, idx), _on_grid(fixed, idx)
            e_f, e_h = deep_embedded_coupling.errors(outputs, hidden, joint, emb, D)
            f_f, f_h = deep_embedded_coupling.errors(outputs, hidden, fixed, emb, D)
            gap_f = jnp.sqrt(jnp.mean((fixed.outputs - joint.outputs) ** 2, axis=(-2, -1)))
            gap = fixed.hidden(emb) - joint.hidden(emb)  # (K+1, n, L+1, D), zero beyond D
            gap_h = jnp.max(jnp.sqrt(jnp.mean(jnp.sum(gap**2, axis=-1) / D, axis=1)), axis=-1)
            return {
                "output_error": e_f,
                "hidden_error": e_h,
                "output_error_fixed_D": f_f,
                "hidden_error_fixed_D": f_h,
                "output_D_gap": gap_f,
                "hidden_D_gap": gap_h,
            }

        # draws run vmapped in batches that keep a batch's weights, gradients and updates
        # (about 4 copies of u and v, float64) within MEMORY_BYTES: the paper preset's
        # 512^3 networks take 2 GB each
        per_draw = 4 * 2 * 8 * math.prod(box)
        batch = max(1, MEMORY_BYTES // per_draw)

        def program(keys, embs, x, y, joint, fixed, scalars, idx, size):
            return jax.lax.map(
                lambda a: one(a[0], a[1], x, y, joint, a[2], scalars, idx, size),
                (keys, embs, fixed),
                batch_size=int(min(batch, keys.shape[0])),
            )

        _PROGRAMS[key] = jax.jit(program)
    return _PROGRAMS[key]


# how the errors are measured (Mathematics §6; `study two-layer` takes the max over inputs,
# as its seed's theorem): in results.json and the figures' labels
ERROR_DEFINITIONS = {
    "output_error": "RMS over the inputs and output coordinates of f̂_k − f_k",
    "hidden_error": "max over depths l of the RMS over the inputs of ‖ĥ_k^l − H_k(l/L)‖_D",
}
# the errors measured against a draw's fixed-D limit (void where its solve failed)
FIXED_D_ERRORS = ("output_error_fixed_D", "hidden_error_fixed_D", "output_D_gap", "hidden_D_gap")


def _per_step(points, K):
    """One record per (L, M, D, k) (`steps` = k, after k updates), each error
    `{mean, std, n, ...}` over the draws."""
    out = []
    for p in points:
        for k in range(K + 1):
            rec = {key: p[key] for key in ("L", "M", "D")}
            rec["steps"] = k
            for name in ERRORS:
                rec[name] = dict(p[name][k], n=p[name][k]["count"])
            rec["reference_error_fixed_D"] = p["reference_error_fixed_D"]
            rec["fixed_D_solves_ok"] = p["fixed_D_solves_ok"]
            rec["fixed_D_solves_failed"] = p["fixed_D_solves_failed"]
            out.append(rec)
    return out


def _fixed_floor(point) -> float:
    """A point's fixed-D reference error (infinite where no draw's solve succeeded)."""
    value = point["reference_error_fixed_D"]
    return math.inf if value is None else float(value)


def _rate_law(cfg, points, quantity, warnings):
    """The rate law of `quantity` after K steps, measured term by term against the exact
    references: the L, M part `a L^-p + b D^q (LM)^-r` fitted on the errors against the
    fixed-D limit (which have no D term), the D part `c D^-s` on the gap between the
    fixed-D and the joint limit; their sum compared with the proven bound and the
    conjecture. The free 7-parameter fit of the total error against the joint limit is
    given beside (`joint_free_fit`), with its residual."""
    K = cfg["steps"]
    fixed_name = quantity + "_fixed_D"
    gap_name = quantity.replace("_error", "_D_gap")
    every, rows, judged = _rate_law_rows(cfg, points, quantity, warnings)
    lm_fits, chosen = _lm_part(cfg, judged, fixed_name)
    lm = lm_fits[chosen]
    top = {"L": max(cfg["L"]), "M": max(cfg["M"])}
    line = sorted(error_rows(points, gap_name, K, **top)[0], key=lambda p: p["D"])
    d_part = fit_loglog(
        [p["D"] for p in line], [_usable_values(p, gap_name) for p in line], quantity=gap_name,
        against="D", theory=-0.5, seed=cfg["seed"],
    )  # fmt: skip
    joint = fit_rate_law(
        [p["L"] for p in rows], [p["M"] for p in rows], [p["D"] for p in rows],
        [_paired_draws(p, quantity) for p in rows], quantity=quantity, seed=cfg["seed"],
        paired=True,
    )  # fmt: skip
    law = {"steps": K, "model": lm["model"] + " + c D^-s", "LM_part": lm,
           "LM_part_chosen": chosen, "LM_part_other": lm_fits["LM3" if chosen == "LM" else "LM"],
           "D_part": d_part, "joint_free_fit": joint,
           "regime": f"points with D <= {REGIME:g} L M ({len(rows)} of {len(every)})"}  # fmt: skip
    if lm.get("p") is None or d_part.get("slope") is None:
        law["reason"] = lm.get("reason") or d_part.get("reason") or "no fit"
        return law
    _add_exponents(law, lm, d_part, judged)
    return law


def _rate_law_rows(cfg, points, quantity, warnings):
    """The points after K steps with a fixed-D error (`every`), those in the regime
    `D <= REGIME L M` (`rows`), and those whose error lies `JUDGE` times above their
    reference's own (`judged`, the ones the L, M part is fitted on; the others warned of)."""
    K = cfg["steps"]
    fixed_name = quantity + "_fixed_D"
    every = [p for p in points if p["steps"] == K and p[fixed_name]["mean"] is not None]
    rows = [p for p in every if p["D"] <= REGIME * p["L"] * p["M"]]
    judged = [
        p for p in rows
        if p[fixed_name]["mean"] is not None
        and p[fixed_name]["mean"] >= JUDGE * _fixed_floor(p)
    ]  # fmt: skip
    if len(judged) < len(rows):
        warnings.append(
            f"rate law of {quantity}: {len(rows) - len(judged)} point(s) within {JUDGE:g}x of "
            "their reference's own error, not fitted"
        )
    return every, rows, judged


def _usable_values(p, name):
    """A point's draws of `name`, the unusable (None) left out."""
    return [v for v in p[name]["values"] if v is not None]


def _paired_draws(p, name):
    """Draw i of a point, NaN where unusable: resampled jointly across points."""
    return [math.nan if v is None else v for v in p[name]["values"]]


def _lm_part(cfg, judged, fixed_name):
    """The L, M part fitted both ways (`LM`, and `LM3` with a second M term b0 (LM)^-r0)
    on the errors against the fixed-D limit, and the one with the lower AIC."""
    lm_fits = {
        name: fit_rate_law(
            [p["L"] for p in judged],
            [p["M"] for p in judged],
            [p["D"] for p in judged],
            [_paired_draws(p, fixed_name) for p in judged],
            quantity=fixed_name,
            seed=cfg["seed"],
            law=name,
            paired=True,  # the points share each draw's embedding (at one D) and limit
        )  # fmt: skip
        for name in ("LM", "LM3")
    }
    # the law with the lower AIC on the same points (LM3 has a second M term b0 (LM)^-r0)
    aics = {k: v.get("aic", math.inf) for k, v in lm_fits.items()}
    chosen = min(aics, key=aics.__getitem__)
    return lm_fits, chosen


def _add_exponents(law, lm, d_part, judged) -> None:
    """Into `law`: the fitted exponents and prefactors with their intervals, what they say
    of each theory's exponents (`exponent_theory`: inside, near — within the tolerance —
    or outside), and the L term's largest share over the judged points."""
    exps = {k: lm[k] for k in ("p", "q", "r", "r0") if k in lm}
    exps["s"] = -d_part["slope"]
    cis = {k: lm.get(f"{k}_ci95") for k in exps if k != "s"}
    cis["s"] = [-d_part["ci95"][1], -d_part["ci95"][0]] if d_part.get("ci95") else None
    law.update(
        {
            **exps,
            **{k: lm[k] for k in ("log_a", "log_b", "log_b0") if k in lm},
            "log_c": d_part["intercept"],
            **{f"{k}_ci95": v for k, v in cis.items()},
        }
    )

    law["theories"] = {
        name: {k: exponent_theory(v, cis.get(k)) for k, v in th.items()}
        for name, th in RATE_THEORIES.items()
    }
    # is the L term seen at all? its largest share of the fitted law over the grid
    law["L_term_max_share"] = max(
        _share(law, 0, p["L"], p["M"], p["D"], without_d=True) for p in judged
    )


def _terms(law, L, M, D):
    """The three terms of a fitted law at (L, M, D): (L-term, M-term, D-term)."""
    if law.get("p") is None:
        return None
    m_term = math.exp(law["log_b"]) * D ** law["q"] * (L * M) ** -law["r"]
    if "log_b0" in law:
        m_term += math.exp(law["log_b0"]) * (L * M) ** -law["r0"]
    return (
        math.exp(law["log_a"]) * L ** -law["p"],
        m_term,
        math.exp(law.get("log_c", -math.inf)) * D ** -law.get("s", 0.0),
    )


def _share(law, term, L, M, D, without_d=False):
    """The share of term (0: L, 1: M, 2: D) in the fitted law at (L, M, D)."""
    t = _terms(law, L, M, D)
    if t is None:
        return 0.0
    t = t[:2] if without_d else t
    return t[term] / sum(t) if term < len(t) else 0.0


for _q in ("output_error", "hidden_error"):
    THEORY[(_q, "L_fixed_D")] = THEORY[(_q, "L")]
    THEORY[(_q, "M_fixed_D")] = THEORY[(_q, "M")]
    THEORY[(_q, "D_D_gap")] = (-0.5, -0.5)


def _fits(cfg, points, laws, reference_error, warnings):
    """Slopes against L, M, D on the lines of the grid where that size's term is at least
    DOMINANT of the fitted law at every point (`dominant` records it; other lines are
    fitted too, flagged). The `_fixed_D` errors (no D term) against L and M, the `_D_gap`
    (the D term alone) against D."""
    K = cfg["steps"]
    fits = []
    axes = {"L": 0, "M": 1, "D": 2}
    for q in QUANTITIES:
        law = laws[q]
        for variant, against_all in (("", "LMD"), ("_fixed_D", "LMD"), ("_D_gap", "D")):
            name = q.replace("_error", "_D_gap") if variant == "_D_gap" else q + variant
            for against in against_all:
                others = [a for a in "LMD" if a != against]
                combos = {(p[others[0]], p[others[1]]) for p in points if p["steps"] == K}
                if variant == "_D_gap":  # the gap depends on the draws only: one line
                    combos = {(max(cfg[others[0]]), max(cfg[others[1]]))}
                # against D at a fixed L, M the fixed-D error varies through its D^q (LM)^-r
                term = 1 if (variant, against) == ("_fixed_D", "D") else axes[against]
                for combo in sorted(combos):
                    fixed = dict(zip(others, combo, strict=True))
                    rows, _ = error_rows(points, name, K, **fixed)
                    rows = sorted(
                        (p for p in rows if p["D"] <= REGIME * p["L"] * p["M"]),
                        key=lambda p: p[against],
                    )
                    stats = [r[name] for r in rows]
                    if len(rows) < 3:
                        continue
                    share = min(
                        _share(law, term, r["L"], r["M"], r["D"], variant == "_fixed_D")
                        for r in rows
                    )
                    floor = max(_fixed_floor(r) for r in rows) + reference_error
                    keep = [
                        (r, s) for r, s in zip(rows, stats, strict=True)
                        if s["mean"] is not None and s["mean"] >= JUDGE * floor
                    ]  # fmt: skip
                    bound, conj = THEORY[(q, against + variant)]
                    if against == "L" and share < 0.5:
                        # the M term dominates this line: it decays in L as (LM)^-r does
                        bound, conj = THEORY[(q, "M" + variant)]
                    # along L or M at a fixed D the points share each draw's embedding
                    # (draw i of every point): resampled jointly; along D they do not
                    fit = fit_loglog(
                        [r[against] for r, _ in keep],
                        [fit_values(s) for _, s in keep],
                        quantity=name, against=against, fixed={**fixed, "steps": K},
                        theory=bound, seed=cfg["seed"], paired=against != "D",
                    )  # fmt: skip
                    fit["theory_conjecture"] = conj
                    fit["sizes"] = [r[against] for r, _ in keep]
                    fit["dominant"] = variant == "_D_gap" or share >= DOMINANT
                    fit["term_share"] = 1.0 if variant == "_D_gap" else share
                    fits.append(fit)
    return fits


def _verdict(law):
    """Which theory the measured M terms support: the exponents (q, r) of `D^q (LM)^-r`
    not excluded by their intervals (inside, or within `THEORY_TOLERANCE`:
    `exponent_theory`); where the data need a second M term `b0 (LM)^-r0` (the LM3
    law chosen by AIC), only the bound has one (its log(1/δ)/sqrt(LM), r0 = 1/2)."""
    out = []
    r0 = law.get("r0_ci95")
    # an interval wider than the theories' gap on q or r cannot tell them apart
    gap = {k: abs(RATE_THEORIES["bound"][k] - RATE_THEORIES["conjecture"][k]) for k in "qr"}
    wide = [
        f"{k} in {interval_text(None, law[f'{k}_ci95'])}"
        for k in "qr"
        if law.get(f"{k}_ci95") and law[f"{k}_ci95"][1] - law[f"{k}_ci95"][0] >= gap[k]
    ]
    for name, th in law["theories"].items():
        ok = all(
            exponent_verdict(v) not in ("outside", None) for k, v in th.items() if k in ("q", "r")
        )
        if law["LM_part_chosen"] == "LM3":
            ok = ok and name == "bound" and theory_verdict(r0, 0.5) in ("inside", "near")
        if ok:
            out.append(name)
    if len(out) == 2:  # both inside every interval (so some interval is wider than the gap)
        return [f"undecided: {', '.join(wide)}, wider than the theories' difference "
                "(more sizes or draws)"]  # fmt: skip
    if out and wide:  # the other theory is excluded, but not by the wide interval
        other = next(n for n in law["theories"] if n != out[0])
        by = [k for k, v in law["theories"][other].items()
              if k in "qr" and exponent_verdict(v) == "outside"]  # fmt: skip
        why = (f"the interval of {' and '.join(by)}" if by
               else "the second M term (LM)^-r0 the data need")  # fmt: skip
        return [
            f"{out[0]}: {other} excluded by {why}; {', '.join(wide)} wider than the "
            "theories' difference does not confirm the rest (more sizes or draws)"
        ]
    if out:
        return out
    text = "neither: "
    if law["LM_part_chosen"] == "LM3":
        text += (
            f"the errors need a second M term (LM)^-r0, r0 = {interval_text(law['r0'], r0)}, and "
            if r0
            else "the errors need a second M term, and "
        )
    measured = " and ".join(
        f"{k} = " + (interval_text(law[k], law[f"{k}_ci95"]) if law.get(f"{k}_ci95") else "")
        for k in "qr"
    )
    theories = "; ".join(
        f"the {name} has "
        + ", ".join(f"{k} = {RATE_THEORIES[name][k]:g}" for k in "qr")
        + " ("
        + (
            " and ".join(k for k, v in th.items() if k in "qr" and v["verdict"] == "outside")
            or "none"
        )
        + f" beyond ±{THEORY_TOLERANCE:g})"
        for name, th in law["theories"].items()
    )
    return [f"{text}D^q (LM)^-r measured with {measured}; {theories}"]


def _shape_of(exps: dict) -> dict:
    return optimal_shape(exps["p"], exps["q"], exps["r"], exps["s"], r0=exps.get("r0"))


def _optimal_shapes(laws):
    """The optimal shapes of the fitted laws, of the bound and of the conjecture, and which
    the measured exponents support (each theory's exponents not excluded by the fit's
    intervals)."""
    out = {
        "budget": "P = D (d_in + d_out) + 2 L M D (≈ 2LMD)",
        "bound": _shape_of(RATE_THEORIES["bound"]),
        "conjecture": _shape_of(RATE_THEORIES["conjecture"]),
    }
    for q, law in laws.items():
        if law.get("p") is None:
            out[q] = {"reason": law.get("reason", "no fit")}
            continue
        # negative fitted decay exponents (noise) are clipped at 0 for the optimisation; an L
        # term the grid does not see (below 5% of the law everywhere) is given p = 1, the
        # exponent of both theories, rather than its unresolved fit
        exps = {k: max(law[k], 0.0) for k in ("p", "q", "r", "s", "r0") if k in law}
        shape = {}
        ci = law.get("p_ci95")
        if law["L_term_max_share"] < 0.05 or ci is None or ci[1] - ci[0] > 2.0:
            exps["p"] = 1.0
            shape["note"] = (
                f"the L term is not resolved on this grid (largest share of the fitted law "
                f"{law['L_term_max_share']:.1%}, p interval {ci}); p = 1 (both theories) used"
            )
        shape.update(_shape_of(exps))
        shape["supported_by_measurements"] = _verdict(law)
        out[q] = shape
    return out
