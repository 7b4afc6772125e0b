"""The options of `meanfield study two-layer`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import add_pad_argument, float_list, int_list, positive_int
from ..shared.arguments import add_embedded_arguments as add_model_arguments

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
        "n_sweep": [2, 8, 32, 128],
        "input_draws": 400,
        "input_M": 512,
        "input_D": 256,
    },
    "paper": {
        "M": [256, 1024, 4096, 16384, 65536],
        "D": [16, 64, 256, 1024],
        "D_limit": [16, 64, 256, 1024, 4096, 16384, 65536],
        "s_v_sweep": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        "sweep_M": [1024, 16384],
        "sweep_D": 256,
        "seeds": 32,
        "n_sweep": [2, 8, 32, 128, 512],
        "input_draws": 2000,
        "input_M": 4096,
        "input_D": 1024,
    },
}


def add_arguments(parser):
    add_model_arguments(parser, activation="tanh", lr=0.5, steps=5)
    parser.add_argument("--M", type=int_list, help="widths of part (a)")
    parser.add_argument("--D", type=int_list, help="embedding dimensions of part (a)")
    parser.add_argument("--D-limit", type=int_list, help="dimensions of part (b)")
    parser.add_argument("--s-v-sweep", type=float_list, help="s_v values of parts (c), (d)")
    parser.add_argument("--sweep-M", type=int_list, help="widths of parts (c), (d)")
    parser.add_argument("--sweep-D", type=positive_int, help="embedding dimension of (c), (d)")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")
    parser.add_argument("--n-sweep", type=int_list, help="numbers of inputs n of part (e)")
    parser.add_argument("--input-draws", type=positive_int, help="draws per point of part (e)")
    parser.add_argument("--input-M", type=positive_int, help="width of part (e)")
    parser.add_argument("--input-D", type=positive_int, help="embedding dimension of part (e)")
    add_pad_argument(parser, "units x D, part (a)")
