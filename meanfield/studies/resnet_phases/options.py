"""The options of `meanfield study resnet-phases`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import positive_int
from ..two_layer_phases import options as two_layer_phases

DEFAULT_X64 = True

PRESETS = {
    # quick: D = 1024 (~6 s a draw of 20 GD steps on 8M weights) was 95% of a 20-minute
    # run on a 2-core CPU; D = 16, 64, 256 keep the factor-4 spacing in ~1.5 minutes
    "quick": {
        "D": [16, 64, 256],
        "s_v_sweep": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
        "L": 8,
        "M": 1024,
        "seeds": 6,
    },
    "paper": {
        "D": [64, 256, 1024, 4096],
        "s_v_sweep": [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
        "L": 16,
        "M": 2048,
        "seeds": 16,
    },
}


def add_arguments(parser):
    two_layer_phases.add_arguments(parser)
    parser.add_argument("--L", type=positive_int, help="depth (residual layers)")
