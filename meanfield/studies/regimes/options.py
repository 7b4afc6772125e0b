"""The options of `meanfield study regimes`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_float, positive_int

DEFAULT_X64 = True

PRESETS = {
    "quick": {
        "L": [8, 16, 32, 64, 128],
        "gammas": [0.25, 0.5, 0.75, 1.0, 1.25],
        "lambdas": [-0.5, 0.0, 0.5, 1.0, 1.5],
        "seeds": 4,
        "steps": 3,
        "lr0": 0.03,
        "d": 8,
        "M": 16,
        "n": 32,
        "transfer_L": [4, 8, 16, 32, 64],
        "transfer_lrs": [2.0 ** (e / 2) for e in range(-8, 9)],
        "transfer_steps": 50,
        "transfer_seeds": 4,
    },
    "paper": {
        "L": [8, 16, 32, 64, 128, 256, 512],
        "gammas": [0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25],
        "lambdas": [-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5],
        "seeds": 8,
        "steps": 3,
        "lr0": 0.03,
        "d": 16,
        "M": 32,
        "n": 64,
        "transfer_L": [4, 8, 16, 32, 64, 128, 256],
        "transfer_lrs": [2.0 ** (e / 4) for e in range(-16, 17)],
        "transfer_steps": 200,
        "transfer_seeds": 8,
    },
}


def add_arguments(parser):
    parser.add_argument("--L", type=int_list, help="depths of the diagram (comma list)")
    parser.add_argument("--gammas", type=float_list, help="exponents γ of α = L^-γ/M")
    parser.add_argument("--lambdas", type=float_list, help="exponents λ of η = lr0·M·L^λ")
    parser.add_argument("--seeds", type=positive_int, help="draws per (cell, depth)")
    parser.add_argument("--steps", type=positive_int, help="GD steps before the diagnostics")
    parser.add_argument("--lr0", type=positive_float, help="learning-rate prefactor")
    parser.add_argument("--d", type=positive_int, help="state dimension")
    parser.add_argument("--M", type=positive_int, help="units per layer")
    parser.add_argument("--activation", default="relu", help="ρ of the 2LP units (relu)")
    parser.add_argument("--transfer-L", type=int_list, help="depths of the transfer part")
    parser.add_argument("--transfer-steps", type=positive_int, help="GD steps per run")
    parser.add_argument("--transfer-seeds", type=positive_int, help="draws per (lr, depth)")
    parser.add_argument("--no-transfer", action="store_true", help="skip the transfer part")
