"""The exact ReLU constructions of `meanfield study approximation`, measured in float64:
x² from a staircase of ReLUs, the sawtooth's pieces, parity shallow and deep, and the
curse of dimensionality of piecewise-linear interpolation (`constructions`), with what
their numbers say (`construction_checks`)."""

import math

import numpy as np

from ...stats.fits import line_fit
from ...theory import approximation as approximation_theory

# the constructions: square with these many ReLUs, sawtooth and parity up to these sizes,
# the curse of dimensionality in these dimensions and grid sizes (cells per side)
SQUARE_PIECES = (1, 2, 4, 8, 16, 32, 64)
SAWTOOTH_K = tuple(range(1, 11))
PARITY_N = tuple(range(2, 13))
CURSE_CELLS = {1: (4, 8, 16, 32, 64), 2: (4, 8, 16, 32), 3: (2, 4, 8, 16), 4: (2, 4, 8, 12)}
CURSE_POINTS = 20000
EPSILON = 1e-3


def constructions(seed: int) -> dict:
    """The exact constructions, measured (float64)."""
    grid = np.linspace(0.0, 1.0, 2**14 + 1)  # holds every knot and cell midpoint used
    square = []
    for p in SQUARE_PIECES:
        net = approximation_theory.square_staircase(p)
        error = float(np.max(np.abs(net(grid) - grid**2)))
        square.append({"relus": net.units, "parameters": net.parameters, "max_error": error,
                       "predicted": approximation_theory.square_staircase_error(p)})  # fmt: skip
    sawtooth = []
    for k in SAWTOOTH_K:
        points = 2 ** (k + 3) + 1
        pieces = approximation_theory.count_pieces(
            lambda x, k=k: approximation_theory.sawtooth(x, k), 0.0, 1.0, points
        )
        theory = approximation_theory
        sawtooth.append({"k": k, "pieces": pieces, "predicted_pieces": theory.sawtooth_pieces(k),
                         "deep_units": theory.sawtooth_deep_units(k),
                         "shallow_units": theory.shallow_units_needed(pieces)})  # fmt: skip
    parity = []
    for n in PARITY_N:
        bits = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(float)
        truth = bits.sum(axis=1) % 2
        theory = approximation_theory
        parity.append({
            "n": n,
            "shallow_wrong": int(np.sum(np.abs(theory.parity_shallow(n)(bits) - truth) > 1e-9)),
            "deep_wrong": int(np.sum(np.abs(theory.parity_deep(n)(bits) - truth) > 1e-9)),
            "shallow_units": theory.parity_shallow_units(n),
            "deep_units": theory.parity_deep_units(n), "deep_depth": theory.parity_deep_depth(n),
            "lookup_units": theory.parity_lookup_units(n),
        })  # fmt: skip
    rng = np.random.default_rng([seed, 11])
    curse = []
    for d, cells_list in CURSE_CELLS.items():
        x = rng.random((CURSE_POINTS, d))
        rows = [
            {"cells": c, "pieces": approximation_theory.simplex_pieces(c, d),
             "rms": approximation_theory.interpolation_error(smooth_function, d, c, x)}
            for c in cells_list
        ]  # fmt: skip
        slope, intercept = line_fit(
            np.log([r["pieces"] for r in rows]), np.log([r["rms"] for r in rows])
        )
        needed = math.exp((math.log(EPSILON) - intercept) / slope) if slope < 0 else None
        curse.append({"d": d, "rows": rows, "slope": slope, "predicted_slope": -2.0 / d,
                      "pieces_for_epsilon": needed})  # fmt: skip
    return {"square": square, "sawtooth": sawtooth, "parity": parity, "curse": curse,
            "epsilon": EPSILON, "function": "exp(-2 |x - c|²), c = (0.5, ..., 0.5)",
            "lecture_square": approximation_theory.lecture_square_table()}  # fmt: skip


def smooth_function(x):
    """The curse-of-dimensionality part's smooth function on [0, 1]^d, rows of `x`."""
    return np.exp(-2.0 * np.sum((x - 0.5) ** 2, axis=1))


def construction_checks(c: dict) -> dict:
    """What the constructions' numbers say: the staircase's worst relative deviation from
    1/(4p²), sawtooth pieces against 2^k, parity's wrong inputs, rates within 0.15 of −2/d."""
    square_dev = max(abs(r["max_error"] - r["predicted"]) / r["predicted"] for r in c["square"])
    saw_ok = sum(r["pieces"] == r["predicted_pieces"] for r in c["sawtooth"])
    wrong = sum(r["shallow_wrong"] + r["deep_wrong"] for r in c["parity"])
    rates = sum(abs(r["slope"] - r["predicted_slope"]) <= 0.15 for r in c["curse"])
    return {
        "square_worst_relative_deviation": square_dev,
        "sawtooth_pieces_as_predicted": [int(saw_ok), len(c["sawtooth"])],
        "parity_wrong_inputs": int(wrong),
        "curse_rates_within_0.15": [int(rates), len(c["curse"])],
    }
