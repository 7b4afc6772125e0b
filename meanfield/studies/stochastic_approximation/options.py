"""The options of `meanfield study stochastic-approximation`, its presets and precision
(no JAX here: the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_int

DEFAULT_X64 = True

PRESETS = {
    "quick": {"L": [16, 64, 256], "M": [16, 64, 256], "sizes": [0.01, 0.1], "seeds": 32},
    "paper": {"L": [16, 64, 256, 1024], "M": [16, 64, 256, 1024], "sizes": [0.003, 0.03, 0.3],
              "seeds": 128},
}  # fmt: skip


def add_arguments(parser):
    parser.add_argument("--L", type=int_list, help="depths (layers of the scheme)")
    parser.add_argument("--M", type=int_list, help="samples per layer")
    parser.add_argument("--sizes", type=float_list, help="sizes e of the ε terms")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")
    parser.add_argument("--d", type=positive_int, help="dimension of the state (default: 4)")
