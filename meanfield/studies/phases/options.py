"""The options of `meanfield study phases`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_float, positive_int
from ..shared.choices import PHASE_LOSSES as LOSSES

DEFAULT_X64 = True

WEIGHTS = ("iid", "rademacher", "smooth", "fbm")

BETAS = [0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5]

PRESETS = {
    "quick": {
        "L": [16, 32, 64, 128, 256, 512],
        "beta": BETAS,
        "seeds": 64,
        "d": 32,
        "heatmap_hurst": [0.3, 0.5, 0.7, 0.9],
    },
    "paper": {
        "L": [16, 32, 64, 128, 256, 512, 1024, 2048],
        "beta": [0.0] + [0.25 + 0.0625 * i for i in range(21)],  # β = 0: no scaling
        "seeds": 512,
        "d": 64,
        "heatmap_hurst": [0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95],
    },
}


def default_out(args) -> str:
    """Each depth law gets its own default folder."""
    return f"results/phases-{args.weights}"


def add_arguments(parser):
    parser.add_argument("--weights", choices=WEIGHTS, default="iid", help="depth law of V and W")
    parser.add_argument("--hurst", type=float, help="Hurst index H ∈ (0, 1) for --weights fbm")
    parser.add_argument("--beta", type=float_list, help="scaling exponents β, increasing")
    parser.add_argument("--L", type=int_list, help="depths, increasing (e.g. 16,32,64)")
    parser.add_argument("--seeds", type=positive_int, help="draws per (β, L)")
    parser.add_argument("--d", type=positive_int, help="state dimension (V, W are d×d)")
    parser.add_argument(
        "--length-scale", type=positive_float, help="ℓ of the smooth weights (default 0.2)"
    )
    parser.add_argument(
        "--heatmap-hurst",
        type=float_list,
        help="Hurst indices of the Hurst × β heatmap (--weights fbm)",
    )
    parser.add_argument("--no-heatmap", action="store_true", help="skip the fBm heatmap")
    parser.add_argument(
        "--loss",
        choices=LOSSES,
        default="squared",
        help="squared: ½‖h_L − y‖² (p_L = h_L − y); readout: ⟨B, h_L⟩ with a fixed random "
        "B (p_L = B, the theorem's convention) (default: squared)",
    )
    parser.add_argument(
        "--slope-tol", type=positive_float, help="|slope| below which a β is 'stability'"
    )
    parser.add_argument("--batch", type=positive_int, help="draws per vectorised batch")
    parser.add_argument("--bootstrap", type=positive_int, help="bootstrap replicates")
