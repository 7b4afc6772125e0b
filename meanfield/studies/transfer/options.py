"""The options of `meanfield study transfer`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_int
from ..shared.arguments import add_transformer_arguments as add_model_arguments

DEFAULT_X64 = False

PRESETS = {
    "quick": {
        "parametrisations": ["standard", "mup", "depth-mup", "completep"],
        "width_parametrisations": ["standard", "mup"],
        "depths": [2, 4, 8, 16],
        "width": 16,
        "widths": [16, 32, 64],
        "depth": 2,
        # 1e-3 … 4.5e-2: lr* after the shorter budgets (larger) stays inside the grid
        "lrs": [1e-3 * 2.0 ** (k / 2) for k in range(0, 12)],
        "steps": 100,
        "seeds": 8,
        "batch": 8,
        "context": 16,
        "heads": 2,
        "base_width": 16,
        "base_depth": 2,
    },
    "paper": {
        "parametrisations": ["standard", "mup", "depth-mup", "completep"],
        "width_parametrisations": ["standard", "mup"],
        "depths": [2, 4, 8, 16, 32],
        "width": 64,
        "widths": [32, 64, 128, 256],
        "depth": 4,
        "lrs": [1e-3 * 2.0 ** (k / 2) for k in range(-4, 11)],
        "steps": 250,
        "seeds": 6,
        "batch": 16,
        "context": 32,
        "heads": 2,
        "base_width": 32,
        "base_depth": 2,
    },
}


def add_arguments(parser):
    parser.add_argument("--parametrisations", help="tables of the depth line (comma list)")
    parser.add_argument("--width-parametrisations", help="tables of the width line")
    parser.add_argument("--depths", type=int_list, help="depths L of the depth line")
    parser.add_argument("--width", type=positive_int, help="width N of the depth line")
    parser.add_argument("--widths", type=int_list, help="widths N of the width line")
    parser.add_argument("--depth", type=positive_int, help="depth L of the width line")
    parser.add_argument("--lrs", type=float_list, help="base learning rates (increasing)")
    parser.add_argument("--steps", type=positive_int, help="optimiser steps per run")
    parser.add_argument("--seeds", type=positive_int, help="networks per size")
    parser.add_argument(
        "--budgets", type=int_list,
        help="shorter trainings, in steps, whose held-out loss is measured on the way: lr* "
        "and its drift at each (does training longer change the drift?); default: a "
        "quarter and a half of --steps",
    )  # fmt: skip
    add_model_arguments(parser)
