"""The options of `meanfield study coord-check`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import int_list, positive_float, positive_int
from ..shared.arguments import add_transformer_arguments as add_model_arguments

DEFAULT_X64 = False

PRESETS = {
    "quick": {
        "parametrisations": ["standard", "mup", "depth-mup", "completep"],
        "widths": [32, 64, 128, 256],
        "depth": 2,
        "depths": [2, 4, 8, 16, 32],
        "width": 32,
        "steps": 4,
        "seeds": 4,
        "lr": 3e-3,
        "batch": 8,
        "context": 32,
        "heads": 2,
        "base_width": 32,
        "base_depth": 2,
    },
    "paper": {
        "parametrisations": ["standard", "mup", "depth-mup", "completep"],
        "widths": [64, 128, 256, 512, 1024],
        "depth": 2,
        "depths": [2, 4, 8, 16, 32, 64, 128],
        "width": 64,
        "steps": 4,
        "seeds": 8,
        "lr": 3e-3,
        "batch": 16,
        "context": 64,
        "heads": 4,
        "base_width": 64,
        "base_depth": 2,
    },
}

MODELS = ("transformer", "resnet")


def add_arguments(parser):
    parser.add_argument("--parametrisations", help="tables, comma list: standard, mup, "
                        "depth-mup, completep, or MODULE:NAME / FILE.py:NAME of a "
                        "meanfield.parametrisation.Parametrisation")  # fmt: skip
    parser.add_argument("--widths", type=int_list, help="widths N of the width line")
    parser.add_argument("--depth", type=positive_int, help="depth L of the width line")
    parser.add_argument("--depths", type=int_list, help="depths L of the depth line")
    parser.add_argument("--width", type=positive_int, help="width N of the depth line")
    parser.add_argument("--steps", type=positive_int, help="optimiser steps")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per size")
    parser.add_argument("--lr", type=positive_float, help="base learning rate")
    parser.add_argument(
        "--model",
        choices=MODELS,
        help="the network checked: a Transformer "
        "(default) or a ResNet of unit blocks (implied by --block/--law)",
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--block",
        help="your unit block φ, FILE.py:NAME or MODULE:NAME (a "
        "ResNet of your units; default: the 2LP v tanh(uᵀh))",
    )
    parser.add_argument(
        "--law",
        help="the law of your units' parameters, FILE.py:NAME "
        "(default: u ~ N(0, I/d), v ~ N(0, I))",
    )
    parser.add_argument("--d", type=positive_int, help="the ResNet's state dimension d")
    parser.add_argument("--inputs", type=positive_int, help="the ResNet's training inputs")
