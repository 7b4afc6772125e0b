"""The options of `meanfield study shapes`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import add_pad_argument, int_list, positive_float, positive_int
from ..shared.arguments import add_embedded_arguments as add_model_arguments

DEFAULT_X64 = True

PRESETS = {
    "quick": {"L": [4, 8, 16, 32, 64], "M": [4, 16, 64], "D": [8, 32, 128], "seeds": 12},
    "paper": {
        "L": [8, 16, 32, 64, 128, 256, 512],
        "M": [8, 32, 128, 512],
        "D": [16, 64, 256, 512],
        "seeds": 16,
    },
}


def add_arguments(parser):
    add_model_arguments(parser, activation="identity", lr=0.1, steps=3)
    parser.add_argument("--L", type=int_list, help="depths (comma list)")
    parser.add_argument("--M", type=int_list, help="widths (comma list)")
    parser.add_argument("--D", type=int_list, help="embedding dimensions (comma list)")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")
    parser.add_argument(
        "--lr-in", type=positive_float, help="η_in: train W_in at η_in·D·∇ (default: frozen)"
    )
    parser.add_argument(
        "--lr-out", type=positive_float, help="η_out: train W_out at η_out·D·∇ (default: frozen)"
    )
    add_pad_argument(parser, "L*M*D")
