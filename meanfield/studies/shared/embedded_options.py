"""The options and data shared by the studies of networks on an embedding (`two-layer`,
`shapes`): the model's options (activation, learning rates, steps, output scale) and the
`--data` file of inputs and targets, read and refused in one line naming the problem
(shape, dtype, magnitude, beyond what a run ends in reasonable time).
"""

from pathlib import Path

import numpy as np

from ...limits import perceptron as perceptron_limits
from ...runtime.errors import StudyInputError

# the built-in data set: two inputs in R^3 at 53°, one output
DATA_X = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]


DATA_Y = [[1.0], [-0.5]]


def model_config(args, x, y) -> dict:
    """The configuration entries of `add_model_arguments`' options and the data."""
    names = ("activation", "sigma_in", "sigma_out", "s_u", "s_v", "lr_u", "lr_v", "steps")
    cfg = {name: getattr(args, name) for name in names}
    cfg.update(data=args.data or "built-in", x=x.tolist(), y=y.tolist())
    # the file's bytes: a --resume on other data is refused naming --data (runner)
    if args.data is not None:
        from ...io.datasets import sha256_file

        cfg["data_sha256"] = sha256_file(args.data)
    return cfg


# the data sets `load_data` takes, per study (`--data`); beyond them a run does not end in
# reasonable time or memory on a CPU. two-layer: every limit solve carries each input
# through its ~10^6 quadrature nodes at every GD step (measured at K = 5: 4.8 GB and 42 s
# per solve for 50 inputs, ~0.09 GB and ~1 s per input), each draw's embedding W_in is
# D × d_in (2.6 GB at d_in = 5000 and the paper preset's D = 65536), and the limit is a
# Gaussian integral over rank(x) + d_out dimensions, which its tensor quadrature takes up
# to 4 (`shallow_limits.gaussian_limit`). shapes: its limit solves an ODE over (d_in + d_out)²
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
    from ..._validation import check_finite_array

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
    `shallow_limits.gram_root`; measured: duplicated inputs run as fast as distinct ones);
    the phase studies, whose claims need distinct inputs, refuse them
    (`refuse_duplicated_inputs`)."""
    if path is None:
        return np.array(default[0], dtype=np.float64), np.array(default[1], dtype=np.float64)
    if not Path(path).is_file():
        raise StudyInputError(f"--data: no such file {path!r}")
    from ...io.datasets import DataFileError, npz_array, npz_headers

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
        rank = perceptron_limits.gram_root(x @ x.T).shape[1]
        if rank + y.shape[1] > dims:
            raise StudyInputError(
                f"--data: x spans {rank} dimension(s) and y has {y.shape[1]} column(s): the "
                f"{study} limit is a Gaussian integral over rank(x) + d_out = "
                f"{rank + y.shape[1]} dimensions, more than the {dims} its tensor quadrature "
                "takes"
            )
    return x, y


def config_data(cfg) -> tuple[_Matrix, _Matrix]:
    """The data `x`, `y` of a configuration (`model_config`'s lists) as float64 arrays: the
    arrays `load_data` returned, bit for bit (a float64 list round-trips exactly)."""
    return np.asarray(cfg["x"], dtype=np.float64), np.asarray(cfg["y"], dtype=np.float64)


def duplicated_rows(x) -> list[list[int]]:
    """The groups of rows of `x` that are the same input (equal entry by entry, -0 as 0),
    each group's rows in order, the groups in the order of their first row."""
    x = np.asarray(x, dtype=np.float64) + 0.0  # -0.0 -> 0.0
    _, first, inverse, counts = np.unique(
        x, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.ravel()
    groups = [np.flatnonzero(inverse == g).tolist() for g in np.flatnonzero(counts > 1)]
    return sorted(groups, key=lambda rows: rows[0])


def refuse_duplicated_inputs(x, study: str, why: str) -> None:
    """Refuse (one line naming --data) inputs `x` with duplicated rows, for a study whose
    claim needs distinct inputs (`why`: what fails with duplicates); `two-layer` and
    `shapes` take them (`load_data`)."""
    groups = duplicated_rows(x)
    if not groups:
        return

    def rows(g):
        return ", ".join(map(str, g[:-1])) + f" and {g[-1]}"

    named = "; ".join(f"rows {rows(g)}" for g in groups[:3])
    more = f" (and {len(groups) - 3} more groups)" if len(groups) > 3 else ""
    raise StudyInputError(
        f"--data: x has duplicated inputs, {named}{more}: {study} needs distinct inputs "
        f"({why}); keep one row of each"
    )
