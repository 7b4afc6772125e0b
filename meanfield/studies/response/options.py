"""The options of `meanfield study response`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_float, positive_int
from ..shared.choices import RESPONSE_METHODS as METHODS

DEFAULT_X64 = True

PRESETS = {
    "quick": {"inits": 1000, "alpha_star_inits": 300},
    "paper": {"inits": 1000, "alpha_star_inits": 1000},
}


def add_arguments(parser):
    parser.add_argument("--sigma-w2", type=positive_float, default=1.25, help="σ_w² (1.25)")
    parser.add_argument("--sigma-b2", type=float, default=0.05, help="σ_b² (0.05)")
    parser.add_argument("--K0", type=positive_float, default=0.05, help="input kernel K^0 (0.05)")
    parser.add_argument(
        "--depths",
        type=int_list,
        default=[2, 5, 10, 20, 30],
        help="depths L, increasing (2,5,10,20,30)",
    )
    parser.add_argument("--width", type=positive_int, help="simulated width N (500)")
    parser.add_argument("--d-out", type=positive_int, help="outputs d_out (100)")
    parser.add_argument("--inits", type=positive_int, help="initialisations per simulated α")
    parser.add_argument(
        "--alpha-star-inits", type=positive_int, help="initialisations per α when simulating α*"
    )
    parser.add_argument(
        "--alphas",
        type=float_list,
        help="α values simulated layer by layer (default: 0.1, α*(L_max), 0.5)",
    )
    parser.add_argument("--activation", default="erf", help="φ (erf)")
    parser.add_argument(
        "--method",
        choices=list(METHODS),
        help="finite-width sampler (default gaussian-identity; 'full' draws every weight matrix)",
    )
    parser.add_argument("--no-simulate", action="store_true", help="theory only")
