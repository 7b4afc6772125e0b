"""The options of `meanfield study variance`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import add_unit_arguments, float_list, positive_float, positive_int

DEFAULT_X64 = True

PRESETS = {"quick": {"nets": 4000}, "paper": {"nets": 100_000}}


def add_arguments(parser):
    add_unit_arguments(parser, gammas=[0.25, 0.5, 0.75], d=4, activation="relu")
    parser.add_argument("--sigma-v", type=positive_float, default=1.0, help="σ_v (1); σ_u=1/√d")
    parser.add_argument("--nets", type=positive_int, help="random networks per point")
    parser.add_argument(
        "--block",
        help="your own unit block, MODULE:NAME or FILE.py:NAME (class or instance), with --law "
        "(e.g. meanfield.blocks.attention:AttentionHead); default: the 2LP",
    )
    parser.add_argument("--law", help="the law of your block's parameters (with --block)")
    parser.add_argument(
        "--sigma-vs",
        type=float_list,
        help="Chaintron's scaling instead of --gammas: α = 1/(LM) and these values of σ_v "
        "(e.g. 0.5,2,8,32; the built-in 2LP only)",
    )
    parser.add_argument(
        "--c-samples",
        type=positive_int,
        default=200_000,
        help="Monte-Carlo draws per direction for c (200000)",
    )
