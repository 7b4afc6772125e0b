"""The options of `meanfield study mean-ode`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import int_list, nonnegative_int, positive_float, positive_int
from ..shared.choices import ACTIVATIONS

DEFAULT_X64 = True

PRESETS = {
    "quick": {
        "L": [8, 16, 32, 64, 128],
        "M": [1, 4, 16, 64, 16384],
        "L_for_M": 1024,
        "fit_M_max": 64,
        "seeds": 10,
        "steps": 1,
    },
    "paper": {
        "L": [8, 16, 32, 64, 128, 256, 512],
        "M": [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144],
        "L_for_M": 16384,
        "fit_M_max": 256,
        "seeds": 64,
        "steps": 2,
    },
}

# how the finite networks run their depth loops (`--depth-loop`, `depth_loop_method`)
DEPTH_LOOPS = ("auto", "scan", "pallas")


def add_arguments(parser):
    """The study's options: the networks and their law, the reference and the lines
    of the fits, then how the programs compile and run."""
    _add_network_arguments(parser)
    _add_reference_arguments(parser)
    _add_engine_arguments(parser)


def _add_network_arguments(parser) -> None:
    """The grid, the networks, their training and their law (built in or the user's)."""
    parser.add_argument("--L", type=int_list, help="depths, increasing (e.g. 4,8,16)")
    parser.add_argument("--M", type=int_list, help="widths, increasing (e.g. 1,16,256)")
    parser.add_argument("--seeds", type=positive_int, help="finite networks per grid point")
    parser.add_argument("--steps", type=nonnegative_int, help="GD steps k (>= 0)")
    parser.add_argument("--activation", help=f"one of {', '.join(ACTIVATIONS)}")
    parser.add_argument("--init", choices=["centred", "non-centred"], help="initial law μ_0")
    parser.add_argument("--d", type=positive_int, help="state dimension (default 2)")
    parser.add_argument("--inputs", type=positive_int, help="training inputs n (default 3)")
    parser.add_argument("--sigma-u", type=positive_float, help="std of u (default 1.25)")
    parser.add_argument("--sigma-v", type=positive_float, help="std of v, centred init (default 1)")
    parser.add_argument("--sigma-xi", type=float, help="std of ξ in v = u + ξ (default 0)")
    parser.add_argument("--lr", type=float, help="learning rate η, mean-ODE convention")
    parser.add_argument(
        "--block",
        help="your residual block: MODULE:NAME (importable, e.g. from PYTHONPATH) or "
        "PATH.py:NAME, an AbstractUnitBlock or AbstractLayerBlock (class or instance); "
        "with it --activation is refused",
    )
    parser.add_argument(
        "--law",
        help="the law of its parameters: MODULE:NAME or PATH.py:NAME, an AbstractLaw or a "
        "function of no arguments returning one; with it --init and --sigma-* are refused",
    )
    parser.add_argument(
        "--design",
        choices=["auto", "grid"],
        help="'auto' (default with --block, unless --L or --M is given): a pilot fit of "
        "a/L + b/sqrt(LM) places the line of depths where 1/L dominates and the line of "
        "widths where 1/sqrt(LM) does, within the reference's accuracy; 'grid': --L x --M "
        "and the preset's lines",
    )


def _add_reference_arguments(parser) -> None:
    """The reference limit, and the line of widths of the fit against M."""
    parser.add_argument(
        "--reference",
        choices=["auto", "quadrature", "monte-carlo"],
        help="how the limit's expectation is computed: Gauss-Hermite quadrature (Gaussian "
        "laws) or Monte-Carlo particles with a batch-means error (default: quadrature for "
        "the built-in block; 'auto' with --block: quadrature where the law is Gaussian and "
        "has few enough coordinates, else Monte Carlo)",
    )
    parser.add_argument(
        "--order",
        type=positive_int,
        help="Gauss-Hermite order per coordinate, >= 3 (default: the largest with at most "
        "2^16 nodes in all and 4096 per coordinate)",
    )
    parser.add_argument("--particles", type=positive_int, help="Monte-Carlo reference particles")
    parser.add_argument(
        "--L-for-M",
        type=positive_int,
        help="the depth of the line of widths used for the fit against M",
    )
    parser.add_argument(
        "--fit-M-max",
        type=positive_int,
        help="largest M in the fit against M (the Monte-Carlo-dominated range)",
    )


def _add_engine_arguments(parser) -> None:
    """How the finite networks' programs compile and run (the values do not change)."""
    parser.add_argument(
        "--compile-workers",
        type=positive_int,
        help="programs compiled ahead in parallel threads (default: min(8, CPU cores))",
    )
    parser.add_argument(
        "--unroll",
        type=positive_int,
        default=1,
        help="layers per step of the finite networks' loops over layers (default 1; the "
        "values do not change, the speed and compile time do: see `ResNet`)",
    )
    parser.add_argument(
        "--depth-loop",
        choices=DEPTH_LOOPS,
        default="auto",
        help="how the finite networks run their loops over layers: 'scan' (a lax.scan step "
        "per layer), 'pallas' (the fused kernels of meanfield.engine.FusedLoop in every "
        "program whose layer fits a kernel tile, the scan elsewhere; Pallas interpret mode "
        "on a CPU: slow, for tests) or 'auto' (default: 'pallas' on a GPU/TPU where the "
        "kernels apply and compile, else 'scan'); the values agree up to rounding",
    )
    parser.add_argument(
        "--seed-batch-units",
        type=positive_int,
        help="at most this many units (seeds x L*M) computed at once on a device, and at "
        "least one seed (default 2^20 on CPU, 2^24 on GPU/TPU)",
    )
    parser.add_argument(
        "--pad-units",
        type=nonnegative_int,
        help="what one more compiled program costs in padded units, seeds x (extra L*M): "
        "grid points share a program (the widest, or on a CPU also the deepest, of them) "
        "while their padding together costs less (default 2^22 on CPU, 2^28 on GPU/TPU; "
        "0: one program per (L, M))",
    )
