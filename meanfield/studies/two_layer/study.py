"""`meanfield study two-layer`: the high-dimensional two-layer perceptron of Chaintron's
"ResNets of all shapes and sizes".

(a) **Width**: finite perceptrons (M units, embedding dimension D) against their fixed-D
    mean-field limit at the same embedding draw (`meanfield.limits.perceptron.gaussian_limit`, exact
    up to its stated quadrature error), after k = 0..K GD steps: the output error
    `max_i |f̂_k(x_i) − f_k(x_i)|` and the hidden error `max_i ‖ĥ_k(x_i) − h_k(x_i)‖_D`
    against M at each D, slope −1/2; and which of M or D/M their curves collapse against.
(b) **Dimension**: the fixed-D limit against the D → ∞ limit (skeleton maps / cavity:
    the same reduced system at the Grams' limits), slope −1/2.
(c) **Scaling criteria** (Chaintron, "Phase diagram"): feature diversity (`σ_u = s_u
    sqrt(D)` keeps the pre-activations Θ(1), `σ_u = s_u` does not), balanced loss decay
    (the first step's relative loss decrease against s_v with `η_u = lr_u min(1, 1/s_v²)`
    and with `η_u = lr_u`), feature learning (how far the pre-activations move, slope −1
    in s_v past 1 with the balanced rate), and the critical output scale
    `σ_v ≃ min(sqrt(M), sqrt(d_out))` of the operator-norm heuristic, measured.
(d) **Lazy regime**: the relative change of the dynamics' empirical tangent kernel over
    the K steps against s_v (two widths), with its fitted exponent. At the balanced rate
    the first-order changes of the kernel (in p and in a, each O(1/s_v) relative) are odd
    in a and cancel in the mean over units, so the change is O(1/s_v²) as M → ∞ (slope
    −2), plus a fluctuation O(1/(s_v sqrt(M))) that flattens the slope at small M.

(e) **Inputs**: the `log(n/δ)` factor of the width bound at n inputs, orthogonal or on an
    arc, against the max of n independent Gaussians (`two_layer_inputs`).

Why this file is long: it is one study with five parts, (a) to (e), sharing one
configuration, cost model and run; its figures are `two_layer_plot`, its shared options
and `--data` file `embedded_options`.
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ..._mapping import map_batched
from ...blocks.activations import resolve_activation
from ...coupling import perceptron as perceptron_coupling
from ...coupling.design import program_boxes
from ...harness.args import (
    PYTHON_STEP,
    Cost,
    check_activation,
    override,
    pad_budget,
)
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...io.plotting import use_agg
from ...limits import perceptron as perceptron_limits
from ...models import perceptron
from ...models.embedding import Embedding, norm_d
from ...runtime.errors import StudyInputError
from ...stats.fits import fit_loglog, fit_values, summarize
from ...training import perceptron as perceptron_training
from ..shared import two_layer_inputs
from ..shared.embedded_options import config_data, load_data, model_config
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
    CRITERIA_THEORY,
    criteria_figure,
    critical_figure,
    inputs_figure,
    limits_figure,
    series,
)
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

MIN_INPUT_DRAWS = 50  # part (e)'s quantiles at δ = 0.02 rest on at least one draw above
S_V_FIT = 2.0  # the criteria's slopes against s_v are fitted over s_v >= S_V_FIT
JUDGE = 10.0  # a point is fitted only if its error is JUDGE x its reference's own error


# the largest scales and rates taken: beyond them the first GD step overflows float64
# (σ_in = 1e300: OverflowError) or every draw explodes and the figures have nothing to
# draw (η_u = 1e300); within them a draw that explodes is counted (`exploded`) and the
# study finishes. Scales enter squared, a rate times D·M: MAX_SCALE² · MAX_RATE stays far
# below the largest float64
MAX_SCALE = 1e3
MAX_RATE = 1e3
SCALE_OPTIONS = {
    "sigma_in": "--sigma-in",
    "sigma_out": "--sigma-out",
    "s_u": "--s-u",
    "s_v": "--s-v",
}
RATE_OPTIONS = {"lr_u": "--lr-u", "lr_v": "--lr-v"}
# a compiled call per draw (the width and dimension parts loop over draws in Python)
# costs this much besides its arithmetic; operations per unit, input and GD step (the
# forward pass, its gradient and the update: about 12 multiply-adds per unit coordinate)
OPS_PER_UNIT_STEP = 12
# part (a) trains its draws vmapped, in batches of at most this many bytes (or one draw)
WIDTH_BATCH_BYTES = 2**30


def net_bytes(cfg, M: int, D: int, n: int, d_in: int, d_out: int) -> float:
    """One draw's memory in training: its units before each of the K + 1 steps, about 12
    more copies of them (gradients, activations, updates), its hidden fields and embedding."""
    steps, width = cfg["steps"] + 1, 8 if cfg["x64"] else 4
    return width * (steps * 2 * M * D + 12 * M * D + steps * n * D + D * (d_in + d_out))


def width_batch(cfg, M: int, D: int, n: int, d_in: int, d_out: int) -> int:
    """How many of part (a)'s draws train at once in a program `M` units wide."""
    per_draw = net_bytes(cfg, M, D, n, d_in, d_out)
    return int(max(1, min(cfg["seeds"], WIDTH_BATCH_BYTES // per_draw)))


def check_scales(cfg) -> None:
    """Refuse, in one line naming the option, a scale (σ_in, σ_out, s_u, s_v) beyond
    `MAX_SCALE` or a learning rate beyond `MAX_RATE` (shared with `study shapes`)."""
    from ...harness.args import check_scale

    for name, flag in SCALE_OPTIONS.items():
        check_scale(flag, cfg[name], MAX_SCALE, "a larger scale overflows the GD steps")
    for name, flag in RATE_OPTIONS.items():
        check_scale(flag, cfg[name], MAX_RATE, "a larger rate overflows the GD steps")
    if cfg.get("s_v_sweep"):
        check_scale(
            "--s-v-sweep", max(cfg["s_v_sweep"]), MAX_SCALE, "a larger scale overflows the GD steps"
        )


def limit_cost(cfg, n: int, d_in: int, d_out: int) -> tuple[float, float, float]:
    """`(bytes, operations, elements)` of one `shallow_limits.gaussian_limit` solve: two
    Gauss-Hermite rules (`order`^dims and `(order + order // 2)`^dims nodes, dims = the
    rank of the Grams, at most min(n, d_in) + d_out) whose particles' pre-activations are
    kept after every step, (K+1, N, n)."""
    K, width = cfg["steps"], 8 if cfg["x64"] else 4
    dims = min(n, d_in) + d_out
    order = {1: 64, 2: 64, 3: 64}.get(dims, 20)
    fine = float(order + order // 2) ** dims
    nodes = fine + float(order) ** dims
    memory = width * nodes * ((K + 1) * n + 4 * n + 2 * d_out + 1)
    work = 30.0 * (K + 1) * nodes * n * (d_out + 1) + 2 * PYTHON_STEP
    return memory, work, (K + 1) * fine * n


def cost_parts(args, cfg) -> list[Cost]:
    """The estimated cost of each part at the data's sizes (`_parts`): the launcher checks
    it before `run`, one line naming the options, with the estimate."""
    (n, d_in), (_, d_out) = np.shape(cfg["x"]), np.shape(cfg["y"])
    return _parts(cfg, n, d_in, d_out)


def _parts(cfg, n: int, d_in: int, d_out: int) -> list[Cost]:
    """The estimated cost of each part (`args.Cost`) for `n` inputs of dimension `d_in`
    and `d_out` outputs. Every draw trains with its trajectory kept (u and v before each
    of the K + 1 steps, the hidden fields after each): part (a) `width_batch` draws at once,
    the criteria's one at a time in a `lax.map`; every fixed-D limit is a quadrature
    (`limit_cost`)."""
    lim_mem, lim_work, lim_elements = limit = limit_cost(cfg, n, d_in, d_out)
    return [
        _width_cost(cfg, n, d_in, d_out, limit),
        _dimension_cost(cfg, n, d_in, d_out, limit),
        _criteria_cost(cfg, n, d_in, d_out),
        Cost(
            "--steps",
            "the D → ∞ limit",
            memory=lim_mem,
            work=lim_work,
            elements=lim_elements,
            array="the limit's particles along training, (steps + 1, nodes, n)",
        ),
        _inputs_cost(cfg),
        _diversity_cost(cfg, n),
    ]


def _net_cost(cfg, M: int, D: int, n: int, d_in: int, d_out: int) -> tuple[float, float, int]:
    """One draw's training: bytes, operations, the largest array."""
    steps = cfg["steps"] + 1
    work = steps * n * M * D * OPS_PER_UNIT_STEP + PYTHON_STEP
    return net_bytes(cfg, M, D, n, d_in, d_out), work, steps * M * D


def _width_cost(cfg, n: int, d_in: int, d_out: int, limit) -> Cost:
    """Part (a): a batch of the widest networks at once, every width's draws and the
    fixed-D limits of every D."""
    S = cfg["seeds"]
    lim_mem, lim_work, lim_elements = limit
    M_max, D_max = max(cfg["M"]), max(cfg["D"])
    width_mem, _, width_elements = _net_cost(cfg, M_max, D_max, n, d_in, d_out)
    batch = width_batch(cfg, M_max, D_max, n, d_in, d_out)
    width_mem, width_elements = batch * width_mem, batch * width_elements
    width_work = math.fsum(
        S * _net_cost(cfg, M, D, n, d_in, d_out)[1] for M in cfg["M"] for D in cfg["D"]
    )
    width_work += S * len(cfg["D"]) * lim_work
    return Cost(
        "--M/--D/--seeds/--steps",
        "the width part (a)",
        memory=max(width_mem, lim_mem),
        work=width_work,
        elements=max(width_elements, lim_elements),
        array="the trajectories of a batch of networks' units, (batch, steps + 1, M, D)",
        memory_flags="--M/--D/--steps",
        memory_what=(
            "one network of the largest width and dimension, part (a)"
            if batch == 1
            else f"a batch of {batch} networks of the largest width and dimension, part (a)"
        ),
    )


def _dimension_cost(cfg, n: int, d_in: int, d_out: int, limit) -> Cost:
    """Part (b): a draw's embedding and hidden fields and its fixed-D limit, at every D."""
    S, steps, width = cfg["seeds"], cfg["steps"] + 1, 8 if cfg["x64"] else 4
    lim_mem, lim_work, lim_elements = limit
    dim_D = max(cfg["D_limit"])
    return Cost(
        "--D-limit/--seeds/--steps",
        "the dimension part (b)",
        memory=max(width * (steps * n * dim_D * 2 + dim_D * (d_in + d_out)), lim_mem),
        work=S
        * math.fsum(
            lim_work + D * (d_in + d_out) * n * 4 + steps * n * D * d_out * 2 + PYTHON_STEP
            for D in cfg["D_limit"]
        ),  # fmt: skip
        elements=max(steps * n * dim_D, dim_D * (d_in + d_out), lim_elements),
        array="a draw's embedding or hidden fields, (D, d_in + d_out) or (steps + 1, n, D)",
        memory_flags="--D-limit/--steps",
    )


def _criteria_cost(cfg, n: int, d_in: int, d_out: int) -> Cost:
    """Parts (c) and (d): one network at a time with its tangent kernel, at every width,
    s_v and rule."""
    S, steps, width = cfg["seeds"], cfg["steps"] + 1, 8 if cfg["x64"] else 4
    sweep = len(cfg["sweep_M"]) * len(cfg["s_v_sweep"]) * 2
    Ms, Ds = max(cfg["sweep_M"]), cfg["sweep_D"]
    kernel = n * n * d_out * d_out  # the tangent kernel's terms per unit
    crit_mem = _net_cost(cfg, Ms, Ds, n, d_in, d_out)[0] + width * (Ms * kernel + S * steps * 4)
    crit_work = math.fsum(
        S * (_net_cost(cfg, M, Ds, n, d_in, d_out)[1] - PYTHON_STEP + 4 * M * kernel)
        for M in cfg["sweep_M"]
    ) * len(cfg["s_v_sweep"]) * 2 + sweep * PYTHON_STEP  # fmt: skip
    return Cost(
        "--sweep-M/--sweep-D/--s-v-sweep/--seeds/--steps",
        "the criteria part, (c) and (d)",
        memory=crit_mem,
        work=crit_work,
        elements=max(steps * Ms * Ds, S * steps),
        array="the trajectory of one network's units, (steps + 1, sweep-M, sweep-D)",
        memory_flags="--sweep-M/--sweep-D/--seeds/--steps",
    )


def _inputs_cost(cfg) -> Cost:
    """Part (e): a batch of its draws' units at once, and every draw's bootstrap."""
    width = 8 if cfg["x64"] else 4
    Mi, Di, max_n = cfg["input_M"], cfg["input_D"], max(cfg["n_sweep"])
    inputs_batch = two_layer_inputs.batch_size(cfg["input_draws"], Mi, Di)
    return Cost(
        "--n-sweep/--input-draws/--input-M/--input-D",
        "the inputs part (e)",
        memory=width * inputs_batch * (3 * Mi * Di + Di * (max_n + 1) + max_n * Mi)
        + 16.0 * cfg["input_draws"] * (2 + two_layer_inputs.N_BOOT),
        work=2
        * cfg["input_draws"]
        * math.fsum(4 * n * Mi * Di + 4 * Mi * Di + PYTHON_STEP / 64 for n in cfg["n_sweep"]),
        elements=max(inputs_batch * Mi * Di, cfg["input_draws"] * two_layer_inputs.N_BOOT),
        array="the units of a batch of part (e)'s draws, (batch, input-M, input-D)",
        memory_flags="--n-sweep/--input-draws/--input-M/--input-D",
    )


def _diversity_cost(cfg, n: int) -> Cost:
    """The feature diversity: a network of 256 units at every D of part (b)."""
    width, dim_D = 8 if cfg["x64"] else 4, max(cfg["D_limit"])
    return Cost(
        "--D-limit",
        "the feature diversity",
        memory=width * 256 * dim_D * 4,
        work=math.fsum(16 * (256 * D * n * 4 + PYTHON_STEP) for D in cfg["D_limit"]),
        elements=256 * dim_D,
        array="a network of 256 units, (256, D)",
    )


# the grid's options: each from the command line where given, else from the preset
GRID = (
    "M", "D", "D_limit", "s_v_sweep", "sweep_M", "sweep_D", "seeds", "n_sweep",
    "input_draws", "input_M", "input_D",
)  # fmt: skip


def configure(args) -> dict:
    """The configuration: the model's options and the data (`--data`, kept in it as
    lists), each part's grid (the options, else the preset), every value refused in one
    line naming its option (`_check_config`, `check_scales`)."""
    check_activation(args.activation)
    preset = PRESETS[args.preset]
    x, y = load_data(args.data)
    cfg = {
        **model_config(args, x, y),
        **{name: preset[name] for name in GRID},
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    cfg = override(cfg, args, GRID)
    _check_config(cfg, x)
    check_scales(cfg)
    return cfg


def _check_config(cfg, x) -> None:
    """Refuse, in one line naming the option, grids out of range and embedding dimensions
    below the number of inputs `x` (singular Grams)."""
    for name in ("M", "D", "D_limit", "sweep_M", "n_sweep"):
        if any(v < 1 for v in cfg[name]) or len(set(cfg[name])) != len(cfg[name]):
            flag = "--" + name.replace("_", "-")
            raise StudyInputError(f"{flag}: need distinct positive integers, got {cfg[name]}")
    if any(v <= 0 for v in cfg["s_v_sweep"]):
        raise StudyInputError(f"--s-v-sweep: values must be > 0, got {cfg['s_v_sweep']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 draws for a spread, got {cfg['seeds']}")
    if cfg["input_draws"] < MIN_INPUT_DRAWS:
        raise StudyInputError(
            f"--input-draws: need at least {MIN_INPUT_DRAWS} for the quantiles at δ = "
            f"{min(two_layer_inputs.DELTAS):g}, got {cfg['input_draws']}"
        )
    if min(cfg["D"] + cfg["D_limit"]) < x.shape[0]:
        raise StudyInputError(
            f"--D, --D-limit: the Gram of {x.shape[0]} inputs is singular below D = {x.shape[0]}"
        )


def run(args, cfg):
    """The study: every part's points run, the fits and verdicts written with the figures."""
    x, y = config_data(cfg)  # the data `configure` read, from their lists
    pad = pad_budget(args)
    runner = start_study(args, cfg)
    # part (a)'s widths at one D run in few programs: a width padded into a wider one's
    boxes = program_boxes([(D, M) for D in cfg["D"] for M in cfg["M"]], cfg["seeds"], pad)
    study = _Study(cfg, jnp.asarray(x), jnp.asarray(y), boxes)
    # the self-check recomputes its point op by op unpadded: it checks the padding too
    points = runner.run_points(
        _specs(cfg), study.point, describe=_describe,
        check=functools.partial(study.point, padded=False),
    )  # fmt: skip
    _finish(runner, cfg, study, points, pad, boxes)


def _specs(cfg) -> list[dict]:
    """The grid points of every part, in the order they run."""
    return (
        [{"part": "width", "D": D, "M": M} for D in cfg["D"] for M in cfg["M"]]
        + [{"part": "dimension", "D": D} for D in cfg["D_limit"]]
        + [
            {"part": "criteria", "M": M, "s_v": s, "rule": rule}
            for M in cfg["sweep_M"]
            for s in cfg["s_v_sweep"]
            for rule in ("balanced", "unscaled")
        ]
        + [{"part": "diversity", "D": D} for D in cfg["D_limit"]]
        + [
            {"part": "inputs", "family": f, "n": n}
            for f in two_layer_inputs.FAMILIES
            for n in cfg["n_sweep"]
        ]
    )


def _finish(runner, cfg, study, points, pad, boxes) -> None:
    """The fits, the critical scale, the criteria's table and part (e)'s factor, written
    with the points and the compiled programs' boxes (`runner.finish`)."""
    fits, collapse, warnings = _fits(cfg, points, study.infinite)
    for w in warnings:
        runner.warn(w)
    critical = critical_scale(jr.fold_in(jr.key(cfg["seed"]), 7))
    table = _criteria_table(cfg, points)
    factor = two_layer_inputs.factor_rows(cfg, points)
    factor_summary = two_layer_inputs.factor_summary(factor)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "collapse": collapse,
            "critical_scale": critical,
            "criteria_table": table,
            "input_factor": {"rows": factor, "summary": factor_summary},
            "verdict_lines": two_layer_inputs.factor_lines(factor_summary),
            "error_definitions": ERROR_DEFINITIONS,
            "limit": _limit_record(study.infinite),
            "reference": {
                "method": study.infinite.method,
                "error_estimate": max(study.infinite.error_outputs, study.infinite.error_hidden),
            },
        },
        {
            # part (a)'s compiled programs: each point ran in the width named here (its
            # own, or a wider point's at the same D, padded: the same values to round-off)
            "pad_coordinates": pad,
            "programs": len(set(boxes.values())),
            "boxes": {f"D={D} M={M}": box[1] for (D, M), box in boxes.items()},
        },
        plot=plot,
    )


def _limit_record(infinite) -> dict:
    """What the limits are: the D → ∞ limit `infinite` and the fixed-D limit per draw."""
    return {
        "infinite_D": {
            "kind": "D -> infinity (skeleton maps / cavity: reduced particles at the "
            "Grams' limits sigma_in^2 X X^T, sigma_out^2 I)",
            "method": infinite.method,
            "outputs": infinite.outputs,
            "error_estimate": max(infinite.error_outputs, infinite.error_hidden),
        },
        "fixed_D": "per draw: Gauss-Hermite quadrature of the reduced particles at the "
        "draw's Grams; each point records the largest error estimate of its draws",
    }


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    factor = (results.get("input_factor") or {}).get("rows")
    _figures(out, results["config"], results["points"], results["fits"],
             results["critical_scale"], factor)  # fmt: skip


def _describe(spec):
    if spec["part"] == "width":
        return f"width D={spec['D']} M={spec['M']}"
    if spec["part"] == "criteria":
        return f"criteria M={spec['M']} s_v={spec['s_v']} {spec['rule']}"
    if spec["part"] == "inputs":
        return f"inputs {spec['family']} n={spec['n']}"
    return f"{spec['part']} D={spec['D']}"


class _Study:
    """The per-point computations; every draw is keyed by (seed, part, size, draw)."""

    def __init__(self, cfg, x, y, boxes=None):
        self.cfg, self.x, self.y = cfg, x, y
        self.boxes = boxes or {}  # (D, M) of part (a) -> the box of its program
        self.master = jr.key(cfg["seed"])
        self.kw = {"lr_u": cfg["lr_u"], "lr_v": cfg["lr_v"], "steps": cfg["steps"]}
        g_in, g_out = perceptron_limits.infinite_d_grams(
            x, y.shape[1], cfg["sigma_in"], cfg["sigma_out"]
        )
        self.infinite = self.limit(g_in, g_out)
        self._fixed: dict = {}

    def limit(self, g_in, g_out, s_v=None, lr_u=None):
        c = self.cfg
        kw = dict(self.kw, lr_u=c["lr_u"] if lr_u is None else lr_u)
        return perceptron_limits.gaussian_limit(
            g_in, g_out, self.y, activation=c["activation"], s_u=c["s_u"],
            s_v=c["s_v"] if s_v is None else s_v, **kw,
        )  # fmt: skip

    def _embedding(self, key, D):
        c = self.cfg
        return Embedding.sample(
            key, D, self.x.shape[1], self.y.shape[1], c["sigma_in"], c["sigma_out"]
        )

    def _net(self, key, M, D, *, s_v=None, s_u=None, embedding=None):
        """A perceptron drawn from `key` (its embedding too, unless `embedding` is given)."""
        c = self.cfg
        k_emb, k_units = jr.split(key)
        net = perceptron.Perceptron.sample(
            k_units, M=M, D=D, d_in=self.x.shape[1], d_out=self.y.shape[1],
            activation=c["activation"], s_u=c["s_u"] if s_u is None else s_u,
            s_v=c["s_v"] if s_v is None else s_v,
        )  # fmt: skip
        emb = self._embedding(k_emb, D) if embedding is None else embedding
        return eqx.tree_at(lambda n: n.embedding, net, emb)

    def _draw_key(self, part, D, i):
        return jr.fold_in(jr.fold_in(jr.fold_in(self.master, part), D), i)

    def fixed_d(self, D, i):
        """The fixed-D limit at draw i's embedding (shared by every M of part (a))."""
        if (D, i) not in self._fixed:
            emb = self._embedding(self._draw_key(0, D, i), D)
            g_in, g_out = emb.grams(self.x)
            self._fixed[(D, i)] = (emb, self.limit(g_in, g_out))
        return self._fixed[(D, i)]

    def point(self, spec, padded: bool = True):
        if spec["part"] == "width":
            return self.width(spec, padded)
        return getattr(self, spec["part"])(spec)

    def width(self, spec, padded: bool = True):
        """Part (a): every draw trained at once (vmapped) in the program of the point's box
        (`boxes`: a wider point's at the same D, its units padded; `padded=False`: its own)."""
        D, M, c = spec["D"], spec["M"], self.cfg
        box = self.boxes.get((D, M), (D, M))[1] if padded else M
        out_err, hid_err, ref_err = [], [], []
        fixed = [self.fixed_d(D, i) for i in range(c["seeds"])]
        keys = jnp.stack([jr.fold_in(self._draw_key(0, D, i), M) for i in range(c["seeds"])])
        embs = jax.tree.map(lambda *a: jnp.stack(a), *[emb for emb, _ in fixed])
        n, d_in, d_out = *self.x.shape, self.y.shape[1]
        batch = width_batch(c, box, D, n, d_in, d_out)
        run = _width_program(box, d_in, d_out, c["activation"], c["s_u"], c["s_v"], c["lr_u"],
                             c["lr_v"], c["steps"], batch)  # fmt: skip
        outputs, hidden = (np.asarray(a) for a in run(keys, embs, self.x, self.y, jnp.asarray(M)))
        sizes = []  # the limits' largest output and hidden state (`_per_step`)
        for i, (emb, lim) in enumerate(fixed):
            f_hat, h_hat = outputs[i], hidden[i]
            h_lim = lim.hidden_coef @ emb.w_out.T  # (K+1, n, D)
            out_err.append(np.asarray(perceptron_coupling.output_error(f_hat, lim.outputs)))
            hid_err.append(np.asarray(perceptron_coupling.hidden_error(h_hat, h_lim)))
            ref_err.append(max(lim.error_outputs, _hidden_bound(lim.error_hidden, emb)))
            sizes.append(_sizes(lim, h_lim))
        return _per_step(out_err, hid_err, ref_err, sizes)

    def dimension(self, spec):
        D, c = spec["D"], self.cfg
        inf = self.infinite
        out_err, hid_err, ref_err, sizes = [], [], [], []
        for i in range(c["seeds"]):
            emb = self._embedding(self._draw_key(1, D, i), D)
            lim = self.limit(*emb.grams(self.x))
            out_err.append(np.asarray(perceptron_coupling.output_error(lim.outputs, inf.outputs)))
            diff = (lim.hidden_coef - inf.hidden_coef) @ emb.w_out.T
            hid_err.append(np.asarray(jnp.max(norm_d(diff), axis=-1)))
            ref_err.append(
                max(lim.error_outputs + inf.error_outputs,
                    _hidden_bound(lim.error_hidden + inf.error_hidden, emb))
            )  # fmt: skip
            sizes.append(_sizes(lim, lim.hidden_coef @ emb.w_out.T))
            sizes.append(_sizes(inf, inf.hidden_coef @ emb.w_out.T))
        return _per_step(out_err, hid_err, ref_err, sizes)

    def criteria(self, spec):
        """Loss decay, feature movement and tangent-kernel change over the K steps at
        s_v, with η_u = lr_u min(1, 1/s_v²) ("balanced") or η_u = lr_u ("unscaled")."""
        c, M, s_v = self.cfg, spec["M"], spec["s_v"]
        lr_u = c["lr_u"] * (min(1.0, 1.0 / s_v**2) if spec["rule"] == "balanced" else 1.0)
        keys = jr.split(jr.fold_in(jr.fold_in(self.master, 2), round(1e6 * s_v) + M), c["seeds"])
        losses, move, kernel, features = _criteria_draws(
            keys, self.x, self.y, s_v, lr_u, c["lr_v"], M=M, D=c["sweep_D"],
            activation=c["activation"], steps=c["steps"], s_u=c["s_u"],
            sigma_in=c["sigma_in"], sigma_out=c["sigma_out"],
        )  # fmt: skip
        losses = np.asarray(losses)
        decrease = (losses[:, 0] - losses[:, 1]) / losses[:, 0]
        # differences (`self_check.of_terms`): of the losses over ℓ_0 (terms 1 and ℓ_1/ℓ_0),
        # of the pre-activations (`features`: their largest), of the kernels over ‖k_0‖ (1)
        return {
            "lr_u": lr_u,
            "loss": [summarize(losses[:, k], keep_values=False) for k in range(losses.shape[1])],
            "first_step_decrease": of_terms(summarize(decrease), losses[:, :2] / losses[:, :1]),
            "feature_movement": of_terms(summarize(np.asarray(move)), features),
            "kernel_change": of_terms(summarize(np.asarray(kernel)), 1.0),
        }

    def inputs(self, spec):
        """Part (e): the max over n inputs of the output error at initialisation."""
        family = two_layer_inputs.FAMILIES.index(spec["family"])
        key = jr.fold_in(jr.fold_in(jr.fold_in(self.master, 4), family), spec["n"])
        return two_layer_inputs.point(
            jr.split(key, self.cfg["input_draws"]), spec["family"], spec["n"], self.cfg
        )

    def diversity(self, spec):
        """RMS of the initial pre-activations over units and inputs, with σ_u = s_u sqrt(D)
        (the seed's criterion) and with σ_u = s_u."""
        c, D = self.cfg, spec["D"]
        out = {}
        for name, s_u in (("scaled", c["s_u"]), ("unscaled", c["s_u"] / math.sqrt(D))):
            vals = []
            for i in range(min(c["seeds"], 8)):
                net = self._net(self._draw_key(3, D, i), 256, D, s_u=s_u)
                vals.append(float(jnp.sqrt(jnp.mean(net.preactivations(self.x) ** 2))))
            out[name] = summarize(vals)
        return out


@functools.cache
def _width_program(box: int, d_in, d_out, activation, s_u, s_v, lr_u, lr_v, steps, batch):
    """Part (a)'s program for every width up to `box` (traced `width`): per draw key, the
    units of `_Study._net` drawn `box` wide (the first `width` rows are the narrower
    network's own: JAX's partitionable threefry draws row j of a (box, D) normal as that
    of any (width, D) one), the rows beyond masked to zero, trained as a `width`-unit
    network (`train` with `width`); the draws vmapped, `batch` at a time. Returns the
    outputs and hidden fields after each step, (draws, K+1, n, d_out) and (draws, K+1,
    n, D)."""

    def one(key, emb, x, y, width):
        net = perceptron.Perceptron.sample(
            jr.split(key)[1], M=box, D=emb.D, d_in=d_in, d_out=d_out, activation=activation,
            s_u=s_u, s_v=s_v,
        )  # fmt: skip
        rows = (jnp.arange(box) < width)[:, None]
        net = eqx.tree_at(
            lambda n: (n.embedding, n.u, n.v),
            net,
            (emb, jnp.where(rows, net.u, 0), jnp.where(rows, net.v, 0)),
        )
        _, outputs, hidden = perceptron_training.train(
            net, x, y, lr_u=lr_u, lr_v=lr_v, steps=steps, width=width
        )
        return outputs, hidden

    def program(keys, embs, x, y, width):
        return map_batched(lambda a: one(a[0], a[1], x, y, width), (keys, embs), batch)

    return jax.jit(program)


@functools.partial(
    jax.jit, static_argnames=("M", "D", "activation", "steps", "s_u", "sigma_in", "sigma_out")
)
def _criteria_draws(keys, x, y, s_v, lr_u, lr_v, *, M, D, activation, steps, s_u, sigma_in,
                    sigma_out):  # fmt: skip
    """Per draw: the losses after k = 0..K steps, the RMS movement of the pre-activations
    and the relative change of the tangent kernel over the K steps (s_v, rates traced), and
    the largest pre-activation before and after (the movement's scale)."""

    def one(key):
        net = perceptron.Perceptron.sample(
            key, M=M, D=D, d_in=x.shape[1], d_out=y.shape[1], activation=activation,
            s_u=s_u, sigma_in=sigma_in, sigma_out=sigma_out,
        )  # fmt: skip
        net = eqx.tree_at(lambda n: n.v, net, s_v * net.v)
        thetas, f, _ = perceptron_training.train(net, x, y, lr_u=lr_u, lr_v=lr_v, steps=steps)
        losses = 0.5 * jnp.mean(jnp.sum((f - y[None]) ** 2, axis=-1), axis=-1)
        g_in, g_out = net.embedding.grams(x)
        first = perceptron.reduce(net, x)
        last_net = eqx.tree_at(lambda n: (n.u, n.v), net, (thetas["u"][-1], thetas["v"][-1]))
        last = perceptron.reduce(last_net, x)
        k0 = tangent_kernel(*first, g_in, g_out, activation, lr_u, lr_v)
        k1 = tangent_kernel(*last, g_in, g_out, activation, lr_u, lr_v)
        move = jnp.sqrt(jnp.mean((last[0] - first[0]) ** 2))
        size = jnp.maximum(jnp.max(jnp.abs(first[0])), jnp.max(jnp.abs(last[0])))
        return losses, move, jnp.linalg.norm(k1 - k0) / jnp.linalg.norm(k0), size

    return jax.lax.map(one, keys)


def _hidden_bound(coef_error, emb):
    """A bound on `‖W_out δc‖_D` for coefficients δc with `max |δc| <= coef_error`:
    `‖W_out δc‖_D² = δcᵀ G_out δc <= d_out tr(G_out) max|δc|²`."""
    g_out = emb.w_out.T @ emb.w_out / emb.D
    return coef_error * math.sqrt(g_out.shape[0] * float(jnp.trace(g_out)))


def _sizes(lim, hidden) -> tuple[float, float]:
    """A limit's largest output entry and hidden state `‖h‖_D` (`hidden`: its fields)."""
    return float(np.max(np.abs(lim.outputs))), float(np.max(norm_d(hidden)))


def _per_step(out_err, hid_err, ref_err, sizes):
    out_err, hid_err = np.stack(out_err), np.stack(hid_err)  # (seeds, K+1)
    outputs, hidden = np.max(sizes, axis=0)  # over the limits the errors compare (`_sizes`)
    # errors against a limit (of one limit against another: exactly 0 at k = 0 in the
    # dimension part), the quadrature's error estimates: their round-off is that of the
    # outputs and hidden states they are differences of (`self_check.of_terms`)
    return {
        "output_error": of_terms([summarize(out_err[:, k]) for k in range(out_err.shape[1])],
                                 outputs),
        "hidden_error": of_terms([summarize(hid_err[:, k]) for k in range(hid_err.shape[1])],
                                 hidden),
        "reference_error": of_terms(float(max(ref_err)), max(outputs, hidden)),
    }  # fmt: skip


def tangent_kernel(p, a, g_in, g_out, activation, lr_u, lr_v):
    """The empirical tangent kernel of the GD dynamics in the seed's convention,
    `ḟ(x_m) = −(1/n) Σ_i K[m, i] g_i`, from the reduced particles `(p, a)` (M, n), (M, d_out):
    `K[m, i] = (1/M) Σ_j (η_u ρ'(p_jm) ρ'(p_ji) G_in[m, i] a_j a_jᵀ + η_v ρ(p_jm) ρ(p_ji) G_out)`,
    shape (n, d_out, n, d_out)."""
    rho = resolve_activation(activation)
    drho = jax.vmap(jax.vmap(jax.grad(rho)))
    act, dact = rho(p), drho(p)
    M = p.shape[0]
    ku = lr_u * jnp.einsum("jm,ji,jo,jq->moiq", dact, dact, a, a) * g_in[:, None, :, None]
    kv = lr_v * jnp.einsum("jm,ji->mi", act, act)[:, None, :, None] * g_out[None, :, None, :]
    return (ku + kv) / M


def critical_scale(key, widths=(16, 64, 256), outputs=(1, 4, 16, 64, 256), draws=8):
    """The operator-norm heuristic's critical scale, measured: the σ_v at which the readout
    `V ρ / M` (V: d_out × M, N(0, σ_v²) entries) has RMS→RMS gain 1,
    `σ_v* = sqrt(M d_out) / E‖V_0‖_2` with V_0 standard, beside `min(sqrt(M), sqrt(d_out))`
    and the heuristic's `1 / (1/sqrt(M) + 1/sqrt(d_out))`."""
    rows = []
    for M in widths:
        for d_out in outputs:
            k = jr.fold_in(jr.fold_in(key, M), d_out)
            v = np.asarray(jr.normal(k, (draws, d_out, M)))
            norms = np.linalg.svd(v, compute_uv=False)[:, 0]
            star = math.sqrt(M * d_out) / norms.mean()
            rows.append(
                {
                    "M": M,
                    "d_out": d_out,
                    "sigma_v_star": star,
                    "min_sqrt": min(math.sqrt(M), math.sqrt(d_out)),
                    "heuristic": 1 / (1 / math.sqrt(M) + 1 / math.sqrt(d_out)),
                }
            )
    ratios = [r["sigma_v_star"] / r["min_sqrt"] for r in rows]
    heuristic = [r["sigma_v_star"] / r["heuristic"] for r in rows]
    return {
        "rows": rows,
        "ratio_to_min_sqrt": [min(ratios), max(ratios)],
        "ratio_to_heuristic": [min(heuristic), max(heuristic)],
    }


# how the errors are measured (the seed's two-layer theorem bounds a sup over inputs;
# `study shapes` takes the RMS over inputs, Mathematics §6): in results.json and figures
ERROR_DEFINITIONS = {
    "output_error": "max over the inputs of the RMS over output coordinates of f̂ − f",
    "hidden_error": "max over the inputs of ‖ĥ − h‖_D (the RMS over the D coordinates)",
}


def _fit_judged(
    rows, stats, against, quantity, fixed, theory, seed, warnings, x=None, paired=False
):
    """A log-log fit over the points whose error lies JUDGE x above their reference's
    (`paired`: draw i of every point shares its embedding, as along M at a fixed D)."""
    keep = [
        (r, s) for r, s in zip(rows, stats, strict=True)
        if s["mean"] is not None and s["mean"] >= JUDGE * r["reference_error"]
    ]  # fmt: skip
    if len(keep) < len(rows):
        warnings.append(
            f"{quantity} against {against} at {fixed}: {len(rows) - len(keep)} point(s) within "
            f"{JUDGE:g}x of their reference's own error, not fitted"
        )
    xs = [r[against] if x is None else x(r) for r, _ in keep]
    values = [fit_values(s) for _, s in keep]
    fit = fit_loglog(
        xs, values, quantity=quantity, against=against, fixed=fixed, theory=theory, seed=seed,
        paired=paired,
    )  # fmt: skip
    fit["sizes"] = xs
    return fit


def _fits(cfg, points, infinite):
    fits, warnings = [], []
    K = cfg["steps"]
    for k in range(K + 1):
        for D in cfg["D"]:
            for q in ("output_error", "hidden_error"):
                rows, stats = series(points, "width", "M", {"D": D}, "M", q, k)
                fits.append(
                    _fit_judged(
                        rows,
                        stats,
                        "M",
                        q,
                        {"D": D, "steps": k},
                        -0.5,
                        cfg["seed"],
                        warnings,
                        paired=True,  # draw i's embedding serves every M at this D
                    )  # fmt: skip
                )
        for q in ("output_error", "hidden_error") if k > 0 else ():  # f_0 = 0 in both limits
            rows, stats = series(points, "dimension", "D", {}, "D", q, k)
            fits.append(_fit_judged(rows, stats, "D", q, {"steps": k}, -0.5, cfg["seed"], warnings))
    for M in cfg["sweep_M"]:
        rows = sorted(
            (
                p
                for p in points
                if p["part"] == "criteria" and p["M"] == M and p["rule"] == "balanced"
            ),
            key=lambda p: p["s_v"],
        )
        big = [r for r in rows if r["s_v"] >= 2.0]
        for q, theory in CRITERIA_THEORY.items():
            fit = fit_loglog(
                [r["s_v"] for r in big],
                [[v for v in r[q]["values"] if v is not None] for r in big],
                quantity=q, against="s_v", fixed={"M": M, "rule": "balanced"},
                theory=theory, seed=cfg["seed"],
            )  # fmt: skip
            fit["sizes"] = [r["s_v"] for r in big]
            fit["range"] = f"s_v >= {S_V_FIT:g}"
            fits.append(fit)
    rows = sorted((p for p in points if p["part"] == "diversity"), key=lambda p: p["D"])
    for name, theory in (("scaled", 0.0), ("unscaled", -0.5)):
        fit = fit_loglog(
            [r["D"] for r in rows],
            [r[name]["values"] for r in rows],
            quantity=f"preactivation_rms_{name}", against="D", theory=theory, seed=cfg["seed"],
        )  # fmt: skip
        fits.append(fit)
    collapse = _collapse(cfg, points)
    return fits, collapse, warnings


def _criteria_table(cfg, points):
    """One row per (M, s_v): the loss ratio after one step under each rule, and the
    feature movement and kernel change at the balanced rate (means over draws)."""
    rows = []
    for M in cfg["sweep_M"]:
        for s_v in cfg["s_v_sweep"]:
            row = {"M": M, "s_v": s_v}
            for p in points:
                if p["part"] == "criteria" and p["M"] == M and p["s_v"] == s_v:
                    first, initial = p["loss"][1]["mean"], p["loss"][0]["mean"]
                    # null where every draw exploded (counted in the point's summaries,
                    # named in the criteria figure): no ratio
                    ratio = None if first is None or initial is None else first / initial
                    row[f"loss_ratio_first_step_{p['rule']}"] = ratio
                    row[f"lr_u_{p['rule']}"] = p["lr_u"]
                    if p["rule"] == "balanced":
                        row["feature_movement"] = p["feature_movement"]["mean"]
                        row["kernel_change"] = p["kernel_change"]["mean"]
            rows.append(row)
    return rows


def _collapse(cfg, points):
    """How well the width curves collapse: at step K, the spread (max/min over D) of the
    fitted coefficient c in `error ≈ c M^{-1/2}` (collapse against M) and in
    `error ≈ c (D/M)^{1/2}` (collapse against D/M), per quantity."""
    K = cfg["steps"]
    out = {}
    for q in ("output_error", "hidden_error"):
        coef_m, coef_dm = [], []
        for D in cfg["D"]:
            rows, stats = series(points, "width", "M", {"D": D}, "M", q, K)
            c = [
                s["mean"] * math.sqrt(r["M"])
                for r, s in zip(rows, stats, strict=True)
                if s.get("mean") is not None and math.isfinite(s["mean"]) and s["mean"] > 0
            ]
            if not c:  # every mean at this D exploded or vanished: it takes no part
                continue
            coef_m.append(float(np.exp(np.mean(np.log(c)))))
            coef_dm.append(coef_m[-1] / math.sqrt(D))
        if len(coef_m) < 2:
            out[q] = {
                "collapses_against": None,
                "reason": "fewer than two dimensions D with a positive finite error",
            }
            continue
        out[q] = {
            "against_M": {"coefficients": coef_m, "spread": max(coef_m) / min(coef_m)},
            "against_D_over_M": {"coefficients": coef_dm, "spread": max(coef_dm) / min(coef_dm)},
            "collapses_against": "M"
            if max(coef_m) / min(coef_m) < max(coef_dm) / min(coef_dm)
            else "D/M",
        }
    return out


def _figures(out, cfg, points, fits, critical, factor=None):
    """The figures: the limits after each step k (`two_layer_limits.png` at k = K,
    `two_layer_limits_step{k}.png` before), the criteria and the critical scale."""
    use_agg()
    by_fit = {
        (f["quantity"], f["against"], tuple(sorted((f.get("fixed") or {}).items()))): f
        for f in fits
    }
    for k in range(cfg["steps"] + 1):
        limits_figure(out, cfg, points, by_fit, k)
    criteria_figure(out, cfg, points, by_fit)
    critical_figure(out, critical)
    if factor:
        inputs_figure(out, cfg, factor)
