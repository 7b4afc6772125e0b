"""The options of `meanfield study sde`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import int_list, positive_float, positive_int
from ..shared.choices import ACTIVATIONS

DEFAULT_X64 = True

WEIGHTS = ("brownian", "fbm", "smooth")

PRESETS = {
    "quick": {"L": [8, 16, 32, 64, 128, 256], "seeds": 128, "n_fine": 2**15},
    "paper": {"L": [8, 16, 32, 64, 128, 256, 512, 1024], "seeds": 1024, "n_fine": 2**18},
}


def add_arguments(parser):
    parser.add_argument("--weights", choices=WEIGHTS, default="brownian", help="depth law")
    parser.add_argument("--hurst", type=float, help="Hurst index H for --weights fbm (1/2 < H < 1)")
    parser.add_argument("--L", type=int_list, help="depths, increasing (e.g. 8,16,32)")
    parser.add_argument("--seeds", type=positive_int, help="paths (finite networks per depth)")
    parser.add_argument("--d", type=positive_int, help="state dimension (default 4)")
    parser.add_argument("--n-fine", type=positive_int, help="steps of the fine grid of the path")
    parser.add_argument("--activation", help=f"σ, one of {', '.join(ACTIVATIONS)} (default tanh)")
    parser.add_argument(
        "--length-scale", type=positive_float, help="ℓ of the smooth weights (default 0.2)"
    )
    parser.add_argument("--rtol", type=positive_float, help="ODE reference tolerance (smooth)")
    parser.add_argument(
        "--young-solver",
        choices=["heun", "midpoint", "euler"],
        help="fBm reference solver on the fine grid (default heun)",
    )
    parser.add_argument("--batch", type=positive_int, help="seeds per vectorised batch")


def default_out(args) -> str:
    """Each depth law gets its own default folder."""
    return f"results/sde-{args.weights}"
