"""The options of `meanfield study approximation`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_int
from ..shared.choices import ARCHITECTURES

DEFAULT_X64 = True

TARGETS = ("square", "sawtooth", "sin50", "parity", "spirals", "smooth1", "smooth2", "smooth4")

DEFAULT_SAWTOOTH_K, DEFAULT_PARITY_N = 4, 8  # unless --sawtooth-k, --parity-n

# the targets run by default (the smooth d-dimensional ones on request)
DEFAULT_TARGETS = TARGETS[:5]

PRESETS = {
    # quick: budget 2048 (~490 s) and the exercise's 8 × 300 steps (~220 s) made 15 minutes
    # on a 2-core CPU; without them, 4 × 100 steps, 4.5 minutes cold (the verdicts unchanged:
    # one hidden layer lower or not resolved, shallow-wide lower on the digits)
    "quick": {
        "budgets": [32, 128, 512],
        "depths": [1, 4],
        "seeds": 10,
        "steps": 3000,
        "lrs": [0.003, 0.01, 0.03],
        "exercise_seeds": 4,
        "exercise_steps": 100,
        "architectures": ["plain"],
    },
    "paper": {
        "budgets": [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
        "depths": [1, 2, 4, 8],
        "seeds": 16,
        "steps": 20000,
        "lrs": [0.001, 0.003, 0.01, 0.03],
        "exercise_seeds": 16,
        "exercise_steps": 1000,
        "architectures": ["plain"],
    },
}

# the lecture's pop quiz: ~10 000 parameters on sin(50x), one hidden layer against 50 thin
# ones, plain and residual; 10 333 parameters: exactly 50 × 14 (the lecture's thin network)
# and 1 × 3444 (the lecture's "5,000" units count ~10 000 weights, no biases). One learning
# rate, 0.003: at 3000 steps it gave every arm that learned a lower final training loss
# than 0.01 (median test RMS 0.43 against 0.46 for one hidden layer, 0.35 against 0.42
# residual; 0.03 left residual networks at the constant in a trial). No exercise.
PRESETS["pop-quiz"] = {**PRESETS["quick"], "budgets": [10333], "depths": [1, 50], "seeds": 8,
                       "steps": 4000, "lrs": [0.003], "architectures": ["plain", "residual"],
                       "targets": ["sin50"], "exercise": False}  # fmt: skip

# the options a preset sets: (flag, type, what it is)
PRESET_OPTIONS = (
    ("--budgets", int_list, "parameter budgets, increasing"),
    ("--depths", int_list, "hidden layers per network, 1 (shallow) and deeper"),
    ("--seeds", positive_int, "networks per depth and budget"),
    ("--steps", positive_int, "full-batch Adam steps per network"),
    ("--lrs", float_list, "Adam learning rates tried, increasing"),
    ("--exercise-seeds", positive_int, "networks per architecture of the 784 → ? → 10 exercise"),
    ("--exercise-steps", positive_int, "full-batch Adam steps of the exercise's networks"),
    ("--architectures", lambda text: [t.strip() for t in text.split(",")],
     f"deep networks' architectures among {', '.join(ARCHITECTURES)} (one hidden layer: plain)"),
)  # fmt: skip


def add_arguments(parser):
    for flag, kind, what in PRESET_OPTIONS:
        value = PRESETS["quick"][flag.removeprefix("--").replace("-", "_")]
        quick = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        parser.add_argument(flag, type=kind, help=f"{what} (quick: {quick})")
    parser.add_argument(
        "--targets",
        help=f"comma list among {', '.join(TARGETS)} (default: {','.join(DEFAULT_TARGETS)})",
    )
    parser.add_argument("--sawtooth-k", type=positive_int, help="the sawtooth target's tent "
                        f"maps composed (2^k teeth; default {DEFAULT_SAWTOOTH_K})")  # fmt: skip
    parser.add_argument("--parity-n", type=positive_int, help="bits of the parity target "
                        f"(default {DEFAULT_PARITY_N}; all 2^n inputs)")  # fmt: skip
    parser.add_argument("--train-points", type=positive_int, default=256,
                        help="grid points of [0, 1] the 1-D targets are trained on")  # fmt: skip
