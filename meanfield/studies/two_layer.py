"""`meanfield study two-layer`: the high-dimensional two-layer perceptron of Chaintron's
"ResNets of all shapes and sizes".

(a) **Width**: finite perceptrons (M units, embedding dimension D) against their fixed-D
    mean-field limit at the same embedding draw (`meanfield.shallow.gaussian_limit`, exact
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
"""

import functools
import math
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from .. import shallow
from ..activations import resolve_activation
from ..embedding import Embedding, norm_d
from ..fits import fit_loglog, fit_values, summarize
from ..plotting import layout, loglog_series, size_ticks, use_agg
from .args import (
    PYTHON_STEP,
    Cost,
    check_activation,
    check_costs,
    float_list,
    int_list,
    positive_float,
    positive_int,
)
from .runner import StudyInputError, start_study

HELP = "the high-dimensional two-layer perceptron: width, dimension, scaling criteria, lazy regime"
DEFAULT_X64 = True
PRESETS = {
    "quick": {
        "M": [128, 512, 2048, 8192],
        "D": [8, 32, 128],
        "D_limit": [16, 64, 256, 1024, 4096],
        "s_v_sweep": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
        "sweep_M": [512, 4096],
        "sweep_D": 64,
        "seeds": 16,
    },
    "paper": {
        "M": [256, 1024, 4096, 16384, 65536],
        "D": [16, 64, 256, 1024],
        "D_limit": [16, 64, 256, 1024, 4096, 16384, 65536],
        "s_v_sweep": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        "sweep_M": [1024, 16384],
        "sweep_D": 256,
        "seeds": 32,
    },
}
# the built-in data set: two inputs in R^3 at 53°, one output
DATA_X = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]
DATA_Y = [[1.0], [-0.5]]
S_V_FIT = 2.0  # the criteria's slopes against s_v are fitted over s_v >= S_V_FIT
JUDGE = 10.0  # a point is fitted only if its error is JUDGE x its reference's own error


def add_model_arguments(parser, *, activation: str, lr: float, steps: int) -> None:
    """The options of Chaintron's models, shared with `meanfield study shapes`."""
    parser.add_argument("--activation", default=activation, help=f"ρ (default: {activation})")
    parser.add_argument(
        "--data", help="FILE.npz with arrays x (n, d_in) and y (n, d_out) (default: built-in)"
    )
    parser.add_argument("--sigma-in", type=positive_float, default=1.0, help="σ_in (1)")
    parser.add_argument("--sigma-out", type=positive_float, default=1.0, help="σ_out (1)")
    parser.add_argument("--s-u", type=positive_float, default=1.0, help="u ~ N(0, s_u² D) (1)")
    parser.add_argument("--s-v", type=positive_float, default=1.0, help="v ~ N(0, s_v² D) (1)")
    parser.add_argument("--lr-u", type=positive_float, default=lr, help=f"η_u ({lr:g})")
    parser.add_argument("--lr-v", type=positive_float, default=lr, help=f"η_v ({lr:g})")
    parser.add_argument("--steps", type=positive_int, default=steps, help=f"GD steps K ({steps})")


def model_config(args, x, y) -> dict:
    """The configuration entries of `add_model_arguments`' options and the data."""
    names = ("activation", "sigma_in", "sigma_out", "s_u", "s_v", "lr_u", "lr_v", "steps")
    cfg = {name: getattr(args, name) for name in names}
    cfg.update(data=args.data or "built-in", x=x.tolist(), y=y.tolist())
    # the file's bytes: a --resume on other data is refused naming --data (runner)
    if args.data is not None:
        from ..datasets import sha256_file

        cfg["data_sha256"] = sha256_file(args.data)
    return cfg


def add_arguments(parser):
    add_model_arguments(parser, activation="tanh", lr=0.5, steps=5)
    parser.add_argument("--M", type=int_list, help="widths of part (a)")
    parser.add_argument("--D", type=int_list, help="embedding dimensions of part (a)")
    parser.add_argument("--D-limit", type=int_list, help="dimensions of part (b)")
    parser.add_argument("--s-v-sweep", type=float_list, help="s_v values of parts (c), (d)")
    parser.add_argument("--sweep-M", type=int_list, help="widths of parts (c), (d)")
    parser.add_argument("--sweep-D", type=positive_int, help="embedding dimension of (c), (d)")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")


# the data sets `load_data` takes, per study (`--data`); beyond them a run does not end in
# reasonable time or memory on a CPU. two-layer: every limit solve carries each input
# through its ~10^6 quadrature nodes at every GD step (measured at K = 5: 4.8 GB and 42 s
# per solve for 50 inputs, ~0.09 GB and ~1 s per input), each draw's embedding W_in is
# D × d_in (2.6 GB at d_in = 5000 and the paper preset's D = 65536), and the limit is a
# Gaussian integral over rank(x) + d_out dimensions, which its tensor quadrature takes up
# to 4 (`shallow.gaussian_limit`). shapes: its limit solves an ODE over (d_in + d_out)²
# entries (measured on the smallest grid: d_in + d_out = 51 took 1.3 GB and 90 s, 201
# over 10 GB and 300 s) and its networks carry (K + 1, n, L + 1, D) hidden states
DATA_LIMITS = {
    "two-layer": {"n": 100, "d_in": 5000, "dims": 4},
    "shapes": {"n": 200, "columns": 32},
}
# the magnitudes of the data taken: the studies square them and multiply them by d_in, D
# and M (Grams, losses, GD steps), which overflows float32 (3.4e38) beyond ~1e15 and
# float64 beyond ~1e150; an x whose largest value is below MIN_DATA has a vanishing Gram
MAX_DATA = 1e12
MIN_DATA = 1e-12
_Matrix = np.ndarray[tuple[int, int], np.dtype[np.float64]]  # what `load_data` returns


def _data_dtype(name: str, dtype: np.dtype) -> None:
    """Refuse what is not real numbers (from the array's header, before it is read)."""
    if dtype.hasobject:
        raise StudyInputError(
            f"--data: {name} is an array of Python objects (dtype object); need real numbers"
        )
    if dtype.kind == "c":
        raise StudyInputError(
            f"--data: {name} is complex ({dtype}); need real numbers (the imaginary part "
            f"would be dropped: save {name}.real if it is zero)"
        )
    if dtype.kind == "b":
        raise StudyInputError(
            f"--data: {name} holds booleans; need real numbers (save {name}.astype(float))"
        )
    if dtype.kind not in "iuf":
        raise StudyInputError(
            f"--data: {name} has dtype {dtype.str!r}, not numbers; need real numbers"
        )


def _data_shapes(x_shape, y_shape, study: str) -> None:
    """Refuse shapes that are not (n, d_in), (n, d_out), empty ones, and sizes beyond
    `DATA_LIMITS[study]` (from the headers, before the arrays are read)."""
    if len(x_shape) != 2:
        raise StudyInputError(f"--data: xs: must have shape (n, d_in), got {x_shape}")
    n, d_in = x_shape
    if len(y_shape) != 2 or y_shape[0] != n:
        raise StudyInputError(f"--data: ys: must have shape (n, d_out) with n = {n}, got {y_shape}")
    d_out = y_shape[1]
    if n == 0:
        raise StudyInputError(f"--data: x has no rows (shape {x_shape}); need at least one input")
    for name, shape, cols in (("x", x_shape, "d_in"), ("y", y_shape, "d_out")):
        if shape[1] == 0:
            raise StudyInputError(
                f"--data: {name} has no columns (shape {shape}); need {cols} >= 1"
            )
    limits = DATA_LIMITS[study]
    if n > limits["n"]:
        raise StudyInputError(
            f"--data: x has {n} inputs (rows), more than the {limits['n']} that {study} takes "
            "(its limits carry every input through each quadrature node and GD step; "
            "about 0.1 GB and 1 s per input and limit solve)"
            if study == "two-layer"
            else f"--data: x has {n} inputs (rows), more than the {limits['n']} that {study} "
            "takes (its networks carry (steps + 1, n, L + 1, D) hidden states per draw)"
        )
    if "d_in" in limits and d_in > limits["d_in"]:
        raise StudyInputError(
            f"--data: x has {d_in} columns (d_in), more than the {limits['d_in']} that "
            f"{study} takes (each draw's embedding W_in is D × d_in: 2.6 GB at d_in = 5000 "
            "and D = 65536)"
        )
    if "columns" in limits and d_in + d_out > limits["columns"]:
        raise StudyInputError(
            f"--data: x, y have d_in + d_out = {d_in} + {d_out} = {d_in + d_out} columns, "
            f"more than the {limits['columns']} that {study} takes (its limit solves an ODE "
            "over (d_in + d_out)² entries: 51 columns took 1.3 GB and 90 s on the smallest "
            "grid, 201 over 10 GB)"
        )


def _data_values(name: str, a: np.ndarray) -> np.ndarray:
    """`a` as float64 (integers and float16 converted, exactly up to 2^53), refused where
    it holds NaN, inf or values beyond `MAX_DATA` (checked in its own dtype first, so
    that a long double beyond float64 is named as what it is)."""
    from .._validation import check_finite_array

    if a.dtype.kind in "iu" or a.dtype.itemsize < 8:  # exact; a long double stays
        a = a.astype(np.float64)
    try:
        check_finite_array(a, f"{name}s", colon=True)  # `xs: contains NaN or inf (...)`
    except ValueError as err:
        raise StudyInputError(f"--data: {err}") from None
    big = np.abs(a) > MAX_DATA
    if big.any():
        i, j = np.unravel_index(int(np.argmax(big)), a.shape)
        value = np.format_float_scientific(a[i, j], precision=3, trim="-")
        raise StudyInputError(
            f"--data: {name} holds {value} at row {i}, column {j} ({int(big.sum())} of its "
            f"{a.size} entries beyond |value| <= {MAX_DATA:g}): the study squares the data "
            "and multiplies them by d_in, D and M, which overflows; rescale the data"
        )
    return a.astype(np.float64)


def load_data(path, default=(DATA_X, DATA_Y), study: str = "two-layer") -> tuple[_Matrix, _Matrix]:
    """`x` (n, d_in), `y` (n, d_out) as float64 from an .npz (`default` when `path` is
    None), for `study` ("two-layer" or "shapes": its `DATA_LIMITS`). Every problem of the
    file is refused in one line naming --data, dtypes and sizes from the arrays' headers
    before they are read: an empty, truncated or non-.npz file (a single .npy, text),
    missing arrays, complex, object, boolean or non-numeric dtypes (integers and float16
    are converted to float64), a shape that is not (n, d_in), (n, d_out), no rows or
    columns, sizes beyond `DATA_LIMITS`, NaN or inf, values beyond `MAX_DATA`, an x that
    is zero (or below `MIN_DATA`) and, for two-layer, inputs that span more dimensions
    than its limit's quadrature takes. Duplicated inputs are taken: no computation of
    either study inverts their Gram (the limits drop its null directions,
    `shallow._root`; measured: duplicated inputs run as fast as distinct ones)."""
    if path is None:
        return np.array(default[0], dtype=np.float64), np.array(default[1], dtype=np.float64)
    if not Path(path).is_file():
        raise StudyInputError(f"--data: no such file {path!r}")
    from ..datasets import DataFileError, npz_array, npz_headers

    try:
        headers = npz_headers(path)
        missing = [k for k in ("x", "y") if k not in headers]
        if missing:
            raise StudyInputError(
                f"--data: {path!r} has no array {missing[0]!r} (need x (n, d_in), y (n, d_out))"
            )
        for name in ("x", "y"):
            _data_dtype(name, headers[name][1])
        _data_shapes(headers["x"][0], headers["y"][0], study)
        x, y = npz_array(path, "x"), npz_array(path, "y")
    except DataFileError as err:
        raise StudyInputError(f"--data: cannot read {path!r} as .npz: it {err}") from None
    x, y = _data_values("x", x), _data_values("y", y)
    top = float(np.max(np.abs(x)))
    if top < MIN_DATA:
        raise StudyInputError(
            "--data: x is all zeros: the inputs span nothing (their Gram X Xᵀ is 0)"
            if top == 0
            else f"--data: x's largest |value| is {top:.3g}, below {MIN_DATA:g}: its Gram "
            "X Xᵀ vanishes in floating point; rescale the data"
        )
    dims = DATA_LIMITS[study].get("dims")
    if dims is not None:
        rank = shallow._root(x @ x.T).shape[1]
        if rank + y.shape[1] > dims:
            raise StudyInputError(
                f"--data: x spans {rank} dimension(s) and y has {y.shape[1]} column(s): the "
                f"{study} limit is a Gaussian integral over rank(x) + d_out = "
                f"{rank + y.shape[1]} dimensions, more than the {dims} its tensor quadrature "
                "takes"
            )
    return x, y


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


def check_scales(cfg) -> None:
    """Refuse, in one line naming the option, a scale (σ_in, σ_out, s_u, s_v) beyond
    `MAX_SCALE` or a learning rate beyond `MAX_RATE` (shared with `study shapes`)."""
    from .args import check_scale

    for name, flag in SCALE_OPTIONS.items():
        check_scale(flag, cfg[name], MAX_SCALE, "a larger scale overflows the GD steps")
    for name, flag in RATE_OPTIONS.items():
        check_scale(flag, cfg[name], MAX_RATE, "a larger rate overflows the GD steps")
    if cfg.get("s_v_sweep"):
        check_scale(
            "--s-v-sweep", max(cfg["s_v_sweep"]), MAX_SCALE, "a larger scale overflows the GD steps"
        )


def limit_cost(cfg, n: int, d_in: int, d_out: int) -> tuple[float, float, float]:
    """`(bytes, operations, elements)` of one `shallow.gaussian_limit` solve: two
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


def cost_parts(cfg, n: int, d_in: int, d_out: int) -> list[Cost]:
    """The estimated cost of each part (`args.Cost`) for `n` inputs of dimension `d_in`
    and `d_out` outputs. Every draw trains with its trajectory kept (u and v before each
    of the K + 1 steps, the hidden fields after each), one draw at a time (the criteria's
    draws in a `lax.map`); every fixed-D limit is a quadrature (`limit_cost`)."""
    K, S, width = cfg["steps"], cfg["seeds"], 8 if cfg["x64"] else 4
    steps = K + 1
    lim_mem, lim_work, lim_elements = limit_cost(cfg, n, d_in, d_out)

    def net(M, D):  # one draw: bytes, operations, the largest array
        memory = width * (steps * 2 * M * D + 12 * M * D + steps * n * D + D * (d_in + d_out))
        work = steps * n * M * D * OPS_PER_UNIT_STEP + PYTHON_STEP
        return memory, work, steps * M * D

    M_max, D_max = max(cfg["M"]), max(cfg["D"])
    width_mem, _, width_elements = net(M_max, D_max)
    width_work = math.fsum(S * net(M, D)[1] for M in cfg["M"] for D in cfg["D"])
    width_work += S * len(cfg["D"]) * lim_work
    dim_D = max(cfg["D_limit"])
    sweep = len(cfg["sweep_M"]) * len(cfg["s_v_sweep"]) * 2
    Ms, Ds = max(cfg["sweep_M"]), cfg["sweep_D"]
    kernel = n * n * d_out * d_out  # the tangent kernel's terms per unit
    crit_mem = net(Ms, Ds)[0] + width * (Ms * kernel + S * steps * 4)
    crit_work = math.fsum(
        S * (net(M, Ds)[1] - PYTHON_STEP + 4 * M * kernel) for M in cfg["sweep_M"]
    ) * len(cfg["s_v_sweep"]) * 2 + sweep * PYTHON_STEP  # fmt: skip
    return [
        Cost(
            "--M/--D/--seeds/--steps",
            "the width part (a)",
            memory=max(width_mem, lim_mem),
            work=width_work,
            elements=max(width_elements, lim_elements),
            array="the trajectory of one network's units, (steps + 1, M, D)",
            memory_flags="--M/--D/--steps",
            memory_what="one network of the largest width and dimension, part (a)",
        ),
        Cost(
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
        ),
        Cost(
            "--sweep-M/--sweep-D/--s-v-sweep/--seeds/--steps",
            "the criteria part, (c) and (d)",
            memory=crit_mem,
            work=crit_work,
            elements=max(steps * Ms * Ds, S * steps),
            array="the trajectory of one network's units, (steps + 1, sweep-M, sweep-D)",
            memory_flags="--sweep-M/--sweep-D/--seeds/--steps",
        ),
        Cost(
            "--steps",
            "the D → ∞ limit",
            memory=lim_mem,
            work=lim_work,
            elements=lim_elements,
            array="the limit's particles along training, (steps + 1, nodes, n)",
        ),
        Cost(
            "--D-limit",
            "the feature diversity",
            memory=width * 256 * dim_D * 4,
            work=math.fsum(16 * (256 * D * n * 4 + PYTHON_STEP) for D in cfg["D_limit"]),
            elements=256 * dim_D,
            array="a network of 256 units, (256, D)",
        ),
    ]


def check_cost(cfg, n: int, d_in: int, d_out: int) -> None:
    """Refuse, before the folder is made and anything is allocated, absurd scales
    (`check_scales`) and a configuration beyond this machine's memory, the array sizes
    XLA takes or the work limit (`cost_parts`, `args.check_costs`): one line naming the
    options, with the estimate."""
    check_scales(cfg)
    check_costs(cost_parts(cfg, n, d_in, d_out))


def run(args):
    check_activation(args.activation)
    preset = PRESETS[args.preset]
    x, y = load_data(args.data)
    cfg = {
        **model_config(args, x, y),
        "M": args.M or preset["M"],
        "D": args.D or preset["D"],
        "D_limit": args.D_limit or preset["D_limit"],
        "s_v_sweep": args.s_v_sweep or preset["s_v_sweep"],
        "sweep_M": args.sweep_M or preset["sweep_M"],
        "sweep_D": args.sweep_D or preset["sweep_D"],
        "seeds": args.seeds or preset["seeds"],
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    for name in ("M", "D", "D_limit", "sweep_M"):
        if any(v < 1 for v in cfg[name]) or len(set(cfg[name])) != len(cfg[name]):
            flag = "--" + name.replace("_", "-")
            raise StudyInputError(f"{flag}: need distinct positive integers, got {cfg[name]}")
    if any(v <= 0 for v in cfg["s_v_sweep"]):
        raise StudyInputError(f"--s-v-sweep: values must be > 0, got {cfg['s_v_sweep']}")
    if cfg["seeds"] < 2:
        raise StudyInputError(f"--seeds: need at least 2 draws for a spread, got {cfg['seeds']}")
    if min(cfg["D"] + cfg["D_limit"]) < x.shape[0]:
        raise StudyInputError(
            f"--D, --D-limit: the Gram of {x.shape[0]} inputs is singular below D = {x.shape[0]}"
        )
    check_cost(cfg, *x.shape, y.shape[1])
    runner = start_study(args, cfg)
    study = _Study(cfg, jnp.asarray(x), jnp.asarray(y))
    specs = (
        [{"part": "width", "D": D, "M": M} for D in cfg["D"] for M in cfg["M"]]
        + [{"part": "dimension", "D": D} for D in cfg["D_limit"]]
        + [
            {"part": "criteria", "M": M, "s_v": s, "rule": rule}
            for M in cfg["sweep_M"]
            for s in cfg["s_v_sweep"]
            for rule in ("balanced", "unscaled")
        ]
        + [{"part": "diversity", "D": D} for D in cfg["D_limit"]]
    )
    points = runner.run_points(specs, study.point, describe=_describe)
    fits, collapse, warnings = _fits(cfg, points, study.infinite)
    for w in warnings:
        runner.warn(w)
    critical = critical_scale(jr.fold_in(jr.key(cfg["seed"]), 7))
    table = _criteria_table(cfg, points)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "collapse": collapse,
            "critical_scale": critical,
            "criteria_table": table,
            "error_definitions": ERROR_DEFINITIONS,
            "limit": {
                "infinite_D": {
                    "kind": "D -> infinity (skeleton maps / cavity: reduced particles at the "
                    "Grams' limits sigma_in^2 X X^T, sigma_out^2 I)",
                    "method": study.infinite.method,
                    "outputs": study.infinite.outputs,
                    "error_estimate": max(
                        study.infinite.error_outputs, study.infinite.error_hidden
                    ),
                },
                "fixed_D": "per draw: Gauss-Hermite quadrature of the reduced particles at the "
                "draw's Grams; each point records the largest error estimate of its draws",
            },
            "reference": {
                "method": study.infinite.method,
                "error_estimate": max(study.infinite.error_outputs, study.infinite.error_hidden),
            },
        },
        plot=plot,
    )


def plot(out, results) -> None:
    """The figures from `results.json` alone (`meanfield plot DIR`)."""
    _figures(out, results["config"], results["points"], results["fits"],
             results["critical_scale"])  # fmt: skip


def _describe(spec):
    if spec["part"] == "width":
        return f"width D={spec['D']} M={spec['M']}"
    if spec["part"] == "criteria":
        return f"criteria M={spec['M']} s_v={spec['s_v']} {spec['rule']}"
    return f"{spec['part']} D={spec['D']}"


class _Study:
    """The per-point computations; every draw is keyed by (seed, part, size, draw)."""

    def __init__(self, cfg, x, y):
        self.cfg, self.x, self.y = cfg, x, y
        self.master = jr.key(cfg["seed"])
        self.kw = {"lr_u": cfg["lr_u"], "lr_v": cfg["lr_v"], "steps": cfg["steps"]}
        g_in, g_out = shallow.infinite_d_grams(x, y.shape[1], cfg["sigma_in"], cfg["sigma_out"])
        self.infinite = self.limit(g_in, g_out)
        self._fixed: dict = {}

    def limit(self, g_in, g_out, s_v=None, lr_u=None):
        c = self.cfg
        kw = dict(self.kw, lr_u=c["lr_u"] if lr_u is None else lr_u)
        return shallow.gaussian_limit(
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
        net = shallow.Perceptron.sample(
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

    def point(self, spec):
        return getattr(self, spec["part"])(spec)

    def width(self, spec):
        D, M, c = spec["D"], spec["M"], self.cfg
        out_err, hid_err, ref_err = [], [], []
        run = jax.jit(lambda net: shallow.train(net, self.x, self.y, **self.kw)[1:])
        for i in range(c["seeds"]):
            emb, lim = self.fixed_d(D, i)
            net = self._net(jr.fold_in(self._draw_key(0, D, i), M), M, D, embedding=emb)
            f_hat, h_hat = run(net)
            h_lim = lim.hidden_coef @ emb.w_out.T  # (K+1, n, D)
            out_err.append(np.asarray(shallow.output_error(f_hat, lim.outputs)))
            hid_err.append(np.asarray(shallow.hidden_error(h_hat, h_lim)))
            ref_err.append(max(lim.error_outputs, _hidden_bound(lim.error_hidden, emb)))
        return _per_step(out_err, hid_err, ref_err)

    def dimension(self, spec):
        D, c = spec["D"], self.cfg
        inf = self.infinite
        out_err, hid_err, ref_err = [], [], []
        for i in range(c["seeds"]):
            emb = self._embedding(self._draw_key(1, D, i), D)
            lim = self.limit(*emb.grams(self.x))
            out_err.append(np.asarray(shallow.output_error(lim.outputs, inf.outputs)))
            diff = (lim.hidden_coef - inf.hidden_coef) @ emb.w_out.T
            hid_err.append(np.asarray(jnp.max(norm_d(diff), axis=-1)))
            ref_err.append(
                max(lim.error_outputs + inf.error_outputs,
                    _hidden_bound(lim.error_hidden + inf.error_hidden, emb))
            )  # fmt: skip
        return _per_step(out_err, hid_err, ref_err)

    def criteria(self, spec):
        """Loss decay, feature movement and tangent-kernel change over the K steps at
        s_v, with η_u = lr_u min(1, 1/s_v²) ("balanced") or η_u = lr_u ("unscaled")."""
        c, M, s_v = self.cfg, spec["M"], spec["s_v"]
        lr_u = c["lr_u"] * (min(1.0, 1.0 / s_v**2) if spec["rule"] == "balanced" else 1.0)
        keys = jr.split(jr.fold_in(jr.fold_in(self.master, 2), round(1e6 * s_v) + M), c["seeds"])
        losses, move, kernel = _criteria_draws(
            keys, self.x, self.y, s_v, lr_u, c["lr_v"], M=M, D=c["sweep_D"],
            activation=c["activation"], steps=c["steps"], s_u=c["s_u"],
            sigma_in=c["sigma_in"], sigma_out=c["sigma_out"],
        )  # fmt: skip
        losses = np.asarray(losses)
        decrease = (losses[:, 0] - losses[:, 1]) / losses[:, 0]
        return {
            "lr_u": lr_u,
            "loss": [summarize(losses[:, k], keep_values=False) for k in range(losses.shape[1])],
            "first_step_decrease": summarize(decrease),
            "feature_movement": summarize(np.asarray(move)),
            "kernel_change": summarize(np.asarray(kernel)),
        }

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


@functools.partial(
    jax.jit, static_argnames=("M", "D", "activation", "steps", "s_u", "sigma_in", "sigma_out")
)
def _criteria_draws(keys, x, y, s_v, lr_u, lr_v, *, M, D, activation, steps, s_u, sigma_in,
                    sigma_out):  # fmt: skip
    """Per draw: the losses after k = 0..K steps, the RMS movement of the pre-activations
    and the relative change of the tangent kernel over the K steps (s_v, rates traced)."""

    def one(key):
        net = shallow.Perceptron.sample(
            key, M=M, D=D, d_in=x.shape[1], d_out=y.shape[1], activation=activation,
            s_u=s_u, sigma_in=sigma_in, sigma_out=sigma_out,
        )  # fmt: skip
        net = eqx.tree_at(lambda n: n.v, net, s_v * net.v)
        thetas, f, _ = shallow.train(net, x, y, lr_u=lr_u, lr_v=lr_v, steps=steps)
        losses = 0.5 * jnp.mean(jnp.sum((f - y[None]) ** 2, axis=-1), axis=-1)
        g_in, g_out = net.embedding.grams(x)
        first = shallow.reduce(net, x)
        last_net = eqx.tree_at(lambda n: (n.u, n.v), net, (thetas["u"][-1], thetas["v"][-1]))
        last = shallow.reduce(last_net, x)
        k0 = tangent_kernel(*first, g_in, g_out, activation, lr_u, lr_v)
        k1 = tangent_kernel(*last, g_in, g_out, activation, lr_u, lr_v)
        move = jnp.sqrt(jnp.mean((last[0] - first[0]) ** 2))
        return losses, move, jnp.linalg.norm(k1 - k0) / jnp.linalg.norm(k0)

    return jax.lax.map(one, keys)


def _hidden_bound(coef_error, emb):
    """A bound on `‖W_out δc‖_D` for coefficients δc with `max |δc| <= coef_error`:
    `‖W_out δc‖_D² = δcᵀ G_out δc <= d_out tr(G_out) max|δc|²`."""
    g_out = emb.w_out.T @ emb.w_out / emb.D
    return coef_error * math.sqrt(g_out.shape[0] * float(jnp.trace(g_out)))


def _per_step(out_err, hid_err, ref_err):
    out_err, hid_err = np.stack(out_err), np.stack(hid_err)  # (seeds, K+1)
    return {
        "output_error": [summarize(out_err[:, k]) for k in range(out_err.shape[1])],
        "hidden_error": [summarize(hid_err[:, k]) for k in range(hid_err.shape[1])],
        "reference_error": float(max(ref_err)),
    }


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


def _series(points, part, key, fixed, against, quantity, k):
    rows = sorted(
        (p for p in points if p["part"] == part and all(p[a] == b for a, b in fixed.items())),
        key=lambda p: p[against],
    )
    return rows, [r[quantity][k] for r in rows]


# how the errors are measured (the seed's two-layer theorem bounds a sup over inputs;
# `study shapes` takes the RMS over inputs, Mathematics §6): in results.json and figures
ERROR_DEFINITIONS = {
    "output_error": "max over the inputs of the RMS over output coordinates of f̂ − f",
    "hidden_error": "max over the inputs of ‖ĥ − h‖_D (the RMS over the D coordinates)",
}

# the slopes against s_v (s_v >= 2) of the lazy-regime criteria (module docstring, (d)):
# features move like 1/s_v, the tangent kernel like 1/s_v² (its first-order changes cancel)
CRITERIA_THEORY = {"feature_movement": -1.0, "kernel_change": -2.0}


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
                rows, stats = _series(points, "width", "M", {"D": D}, "M", q, k)
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
            rows, stats = _series(points, "dimension", "D", {}, "D", q, k)
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


def _fit_lines(ax, fit, theory, color):
    """The fitted line (dashed) and the theory's slope (dotted, through the fitted points'
    geometric centre), both over the fitted range only."""
    xs = np.geomspace(min(fit["sizes"]), max(fit["sizes"]), 10)
    ax.plot(xs, np.exp(fit["intercept"]) * xs ** fit["slope"], "--", color=color, lw=1)
    xc = math.exp(np.mean(np.log(fit["sizes"])))
    yc = math.exp(fit["intercept"]) * xc ** fit["slope"]
    ax.plot(xs, yc * (xs / xc) ** theory, ":", color="gray", lw=1.5)


def _criteria_rows(points, M, rule):
    return sorted(
        (p for p in points if p["part"] == "criteria" and p["M"] == M and p["rule"] == rule),
        key=lambda p: p["s_v"],
    )


def _collapse(cfg, points):
    """How well the width curves collapse: at step K, the spread (max/min over D) of the
    fitted coefficient c in `error ≈ c M^{-1/2}` (collapse against M) and in
    `error ≈ c (D/M)^{1/2}` (collapse against D/M), per quantity."""
    K = cfg["steps"]
    out = {}
    for q in ("output_error", "hidden_error"):
        coef_m, coef_dm = [], []
        for D in cfg["D"]:
            rows, stats = _series(points, "width", "M", {"D": D}, "M", q, K)
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


def _figures(out, cfg, points, fits, critical):
    """The figures: the limits after each step k (`two_layer_limits.png` at k = K,
    `two_layer_limits_step{k}.png` before), the criteria and the critical scale."""
    use_agg()
    by_fit = {
        (f["quantity"], f["against"], tuple(sorted((f.get("fixed") or {}).items()))): f
        for f in fits
    }
    for k in range(cfg["steps"] + 1):
        _limits_figure(out, cfg, points, by_fit, k)
    _criteria_figure(out, cfg, points, by_fit)
    _critical_figure(out, critical)


def _means(stats):
    """The means of `stats` (NaN where every draw exploded)."""
    return [math.nan if s["mean"] is None else s["mean"] for s in stats]


def _limits_figure(out, cfg, points, by_fit, k):
    import matplotlib.pyplot as plt

    K = cfg["steps"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(cfg["D"])))
    for ax, q, title in (
        (axes[0, 0], "output_error", "output error max_i RMS_out(f̂ − f)"),
        (axes[0, 1], "hidden_error", "hidden error max_i ‖ĥ − h‖_D"),
    ):
        for D, color in zip(cfg["D"], colors, strict=True):
            rows, stats = _series(points, "width", "M", {"D": D}, "M", q, k)
            fit = by_fit.get((q, "M", tuple(sorted({"D": D, "steps": k}.items()))))
            loglog_series(
                ax, [r["M"] for r in rows], [s["mean"] for s in stats], [s["std"] for s in stats],
                fit=fit, theory=-0.5, label=f"D={D}", color=color,
            )  # fmt: skip
        ax.set(xscale="log", yscale="log", xlabel="width M", ylabel=f"{title} after k={k} steps")
        ax.set_title(f"part (a), {q.replace('_', ' ')}: finite vs fixed-D limit", fontsize=10)
        size_ticks(ax, cfg["M"])
        ax.legend(fontsize=7)
    ax = axes[1, 0]
    for D, color in zip(cfg["D"], colors, strict=True):
        for q in ("hidden_error", "output_error"):
            rows, stats = _series(points, "width", "M", {"D": D}, "M", q, k)
            x = [D / r["M"] for r in rows] if q == "hidden_error" else [1 / r["M"] for r in rows]
            ax.plot(
                x, _means(stats), marker="o" if q == "hidden_error" else "s", color=color,
                linestyle="-" if q == "hidden_error" else ":",
                label=f"D={D}: hidden vs D/M" if q == "hidden_error" else f"D={D}: output vs 1/M",
            )  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="D/M (hidden, solid) and 1/M (output, dotted)",
           ylabel=f"error after k={k} steps")  # fmt: skip
    ax.set_title("part (a), collapse: hidden error on D/M, output error on 1/M", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    ax = axes[1, 1]
    for q, color in (("output_error", "C0"), ("hidden_error", "C3")):
        rows, stats = _series(points, "dimension", "D", {}, "D", q, k)
        fit = by_fit.get((q, "D", (("steps", k),)))
        loglog_series(
            ax, [r["D"] for r in rows], [s["mean"] for s in stats], [s["std"] for s in stats],
            fit=fit, theory=-0.5 if k else None, label=q.replace("_", " "), color=color,
        )  # fmt: skip
        ref = [r["reference_error"] for r in rows]
        ax.plot([r["D"] for r in rows], ref, color="gray", linestyle="--", linewidth=0.8)
    ax.plot([], [], color="gray", linestyle="--", label="quadrature error of the limits")
    ax.set(xscale="log", yscale="log", xlabel="embedding dimension D",
           ylabel=f"fixed-D limit − D→∞ limit, k={k}")  # fmt: skip
    ax.set_title("part (b): fixed-D limit vs D → ∞ limit (skeleton maps)", fontsize=10)
    if k == 0:  # f_0 = 0 in both limits, and the same initial particles
        ax.plot([], [], " ", label="k = 0: the two limits agree up to round-off")
    size_ticks(ax, cfg["D_limit"])
    ax.legend(fontsize=7)
    fig.suptitle(
        f"two-layer perceptron after k={k} of {K} steps, ρ={cfg['activation']}, "
        f"s_u={cfg['s_u']}, s_v={cfg['s_v']}, η=({cfg['lr_u']}, {cfg['lr_v']}); mean over "
        f"{cfg['seeds']} draws, bars ×/÷ their geometric spread",
        fontsize=10,
    )
    layout(fig)
    stem = "two_layer_limits" if k == K else f"two_layer_limits_step{k}"
    fig.savefig(Path(out) / f"{stem}.png", dpi=120)
    plt.close(fig)


def _criteria_figure(out, cfg, points, by_fit):
    import matplotlib.pyplot as plt

    K = cfg["steps"]
    fig, axes = plt.subplots(2, 4, figsize=(20, 9))
    styles = list(zip(cfg["sweep_M"], ("-", "--", "-.", ":"), "osD^", strict=False))
    rules = (("balanced", "C2"), ("unscaled", "C1"))
    for M, ls, mk in styles:
        for rule, color in rules:
            rows = _criteria_rows(points, M, rule)
            s = [r["s_v"] for r in rows]
            ratio = [
                math.nan if None in (r["loss"][0]["mean"], r["loss"][1]["mean"])
                else r["loss"][1]["mean"] / r["loss"][0]["mean"]
                for r in rows
            ]  # fmt: skip
            axes[0, 0].plot(s, ratio, color=color, linestyle=ls, marker=mk, label=f"{rule}, M={M}")
            axes[0, 1].plot(
                s, _means([r["first_step_decrease"] for r in rows]), color=color, linestyle=ls,
                marker=mk, label=f"{rule}, M={M}",
            )  # fmt: skip
        for ax, (q, theory) in zip(axes[0, 2:], CRITERIA_THEORY.items(), strict=True):
            rows = _criteria_rows(points, M, "balanced")
            s = [r["s_v"] for r in rows]
            fit = by_fit.get((q, "s_v", tuple(sorted({"M": M, "rule": "balanced"}.items()))))
            label = f"balanced, M={M}"
            if fit and fit.get("slope") is not None:
                label += f": slope {fit['slope']:.2f} [{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]"
            loglog_series(
                ax, s, [r[q]["mean"] for r in rows], [r[q]["std"] for r in rows],
                label=label, linestyle=ls, color="C2", marker=mk,
            )  # fmt: skip
            if fit and fit.get("slope") is not None:
                _fit_lines(ax, fit, theory, "C2")
            rows = _criteria_rows(points, M, "unscaled")
            loglog_series(
                ax, [r["s_v"] for r in rows], [r[q]["mean"] for r in rows],
                [r[q]["std"] for r in rows], label=f"η_u = lr, M={M}", linestyle=ls,
                color="C1", marker=mk,
            )  # fmt: skip
    _say_exploded(axes[0, 0], points, "loss", upto=1)
    for ax, q in zip(axes[0, 1:], ("first_step_decrease", *CRITERIA_THEORY), strict=True):
        _say_exploded(ax, points, q)
    axes[0, 2].plot([], [], ":", color="gray", label="theory: slope −1 (s_v ≥ 2)")
    axes[0, 3].plot([], [], ":", color="gray", label="theory (M → ∞): slope −2 (s_v ≥ 2)")
    axes[0, 0].set(xscale="log", yscale="log", xlabel="s_v (v ~ N(0, s_v² D))",
                   ylabel="mean loss after one step / mean initial loss")  # fmt: skip
    axes[0, 0].axhline(1, color="gray", linewidth=0.6)
    axes[0, 0].set_title(
        "part (c), balanced loss decay: η_u = lr·min(1, 1/s_v²) vs η_u = lr", fontsize=9
    )
    axes[0, 0].legend(fontsize=7, handlelength=3.5)
    axes[0, 1].set_xscale("log")
    axes[0, 1].set_yscale("symlog", linthresh=0.1)
    axes[0, 1].axhline(0, color="gray", linewidth=0.6)
    axes[0, 1].set(xlabel="s_v", ylabel="mean over draws of (loss_0 − loss_1) / loss_0")
    axes[0, 1].set_title("part (c), first-step relative loss decrease (per draw)", fontsize=9)
    axes[0, 1].legend(fontsize=7, handlelength=3.5)
    axes[0, 2].set(xscale="log", yscale="log", xlabel="s_v",
                   ylabel=f"RMS |P_K − P_0| over units, inputs (K={K})")  # fmt: skip
    axes[0, 2].set_title("part (c), feature learning: balanced rate (fit) and η_u = lr", fontsize=9)
    axes[0, 2].legend(fontsize=6)
    axes[0, 3].set(xscale="log", yscale="log", xlabel="s_v",
                   ylabel=f"‖K_K − K_0‖_F / ‖K_0‖_F (K={K})")  # fmt: skip
    axes[0, 3].set_title(
        "part (d), lazy regime: kernel change, balanced (fit) and η_u = lr", fontsize=9
    )
    axes[0, 3].legend(fontsize=6)
    # the training loss after each step, per rule: colour s_v, line style M
    colors = plt.cm.viridis(np.linspace(0.1, 0.85, len(cfg["s_v_sweep"])))
    for ax, (rule, name) in zip(
        axes[1, :2], (("balanced", "balanced rate η_u = lr·min(1, 1/s_v²)"),
                      ("unscaled", "η_u = lr (unscaled)")), strict=True,
    ):  # fmt: skip
        for j, (M, ls, mk) in enumerate(styles):
            for r in _criteria_rows(points, M, rule):
                color = colors[cfg["s_v_sweep"].index(r["s_v"])]
                loss = _means(r["loss"])
                ax.plot(range(len(loss)), loss, color=color, linestyle=ls, marker=mk,
                        markersize=3, label=f"s_v={r['s_v']:g}" if j == 0 else None)  # fmt: skip
            ax.plot([], [], color="0.3", linestyle=ls, marker=mk, label=f"M={M}")
        ax.set(yscale="log", xlabel="GD step k", ylabel="mean training loss after k steps")
        ax.set_title(f"part (c), training loss, {name}", fontsize=9)
        _say_exploded(ax, [p for p in points if p.get("rule") == rule], "loss")
        ax.legend(fontsize=6, ncol=2)
    ax = axes[1, 2]
    rows = sorted((p for p in points if p["part"] == "diversity"), key=lambda p: p["D"])
    for name, theory, color, text in (
        ("scaled", 0.0, "C0", "σ_u = s_u sqrt(D)"), ("unscaled", -0.5, "C3", "σ_u = s_u"),
    ):  # fmt: skip
        fit = by_fit.get((f"preactivation_rms_{name}", "D", ()))
        loglog_series(
            ax, [r["D"] for r in rows], [r[name]["mean"] for r in rows],
            [r[name]["std"] for r in rows], fit=fit, theory=theory, label=text, color=color,
        )  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="embedding dimension D",
           ylabel="RMS of the initial pre-activations")  # fmt: skip
    ax.set_title("part (c), feature diversity: pre-activations at initialisation", fontsize=9)
    if rows:
        size_ticks(ax, [r["D"] for r in rows])
        ax.legend(fontsize=7)
    axes[1, 3].set_axis_off()
    fig.suptitle(
        f"mean over {cfg['seeds']} draws, bars ×/÷ their geometric spread, D={cfg['sweep_D']} "
        "(feature diversity: 256 units, up to 8 draws per D; dotted: theory slopes)",
        fontsize=9,
    )
    layout(fig)
    fig.savefig(Path(out) / "two_layer_criteria.png", dpi=110)
    plt.close(fig)


def _say_exploded(ax, points, q, upto=None) -> None:
    """Name on `ax` the criteria points whose `q` (the loss: after steps 0..`upto`, every
    step when None) exploded in every draw: they have no mean to draw."""
    gone = []
    for p in points:
        if p["part"] != "criteria":
            continue
        stats = p[q][: None if upto is None else upto + 1] if q == "loss" else [p[q]]
        steps = [k for k, stat in enumerate(stats) if stat["mean"] is None]
        if steps:
            at = f" from k = {steps[0]}" if q == "loss" else ""
            gone.append(f"{p['rule']}, M={p['M']}, s_v={p['s_v']:g}{at}")
    if gone:  # an entry of the legend (drawn after)
        ax.plot([], [], " ", label="every draw exploded (not drawn):\n" + "\n".join(gone))


def _critical_figure(out, critical):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.3))
    rows = critical["rows"]
    dots = ax.scatter(
        [r["min_sqrt"] for r in rows],
        [r["sigma_v_star"] for r in rows],
        s=14,
        c=np.log2([r["d_out"] for r in rows]),
        label="measured σ_v* (colour: d_out)",
    )
    outs = sorted({r["d_out"] for r in rows})
    bar = fig.colorbar(dots, ax=ax, ticks=np.log2(outs))
    bar.ax.set_yticklabels([str(d) for d in outs])
    bar.set_label("output dimension d_out")
    xs = [r["min_sqrt"] for r in rows]
    grid = np.geomspace(min(xs) / 1.2, max(xs) * 1.2, 10)  # the diagonal over the data
    ax.plot(grid, grid, color="gray", linestyle=":", label="σ_v* = min(√M, √d_out)")
    ax.plot([r["min_sqrt"] for r in rows], [r["heuristic"] for r in rows], "x", color="C3",
            label="1/(1/√M + 1/√d_out)")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="min(√M, √d_out)",
           ylabel="σ_v with RMS→RMS gain 1 of V/M")  # fmt: skip
    ax.set_title("part (c): critical output scale (operator-norm heuristic)", fontsize=9)
    ax.legend(fontsize=7)
    layout(fig)
    fig.savefig(Path(out) / "two_layer_critical_scale.png", dpi=120)
    plt.close(fig)
