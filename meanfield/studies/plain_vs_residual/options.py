"""The options of `meanfield study plain-vs-residual`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import int_list, positive_float, positive_int

DEFAULT_X64 = True

ACTIVATIONS = ("sigmoid", "tanh", "relu", "leaky_relu")

PRESETS = {
    # quick: the gradients' unfitted depths 64, 128, the training's depths 4, 8, 32 and half
    # its 400 steps took 6 of 10 minutes on a 2-core CPU; the plain network degrades at
    # L = 64 only (at 400 steps 0.43 against 0.008 at L = 2, 0.0 at L = 32)
    "quick": {
        "L": [4, 8, 16, 32],
        "N": 512,
        "seeds": 16,
        "train_L": [2, 16, 64],
        "train_steps": 200,
        "train_seeds": 3,
        "train_N": 48,
    },
    "paper": {
        "L": [4, 8, 16, 32, 64, 128, 256, 512],
        "N": 2048,
        "seeds": 32,
        "train_L": [2, 4, 8, 16, 32, 64, 128],
        "train_steps": 2000,
        "train_seeds": 5,
        "train_N": 128,
    },
}


def add_arguments(parser):
    parser.add_argument("--L", type=int_list, help="depths of the gradient part (comma list)")
    parser.add_argument("--N", type=positive_int, help="width of the gradient part")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per depth")
    parser.add_argument(
        "--activations",
        help=f"comma list among {', '.join(ACTIVATIONS)} (default: all)",
    )
    parser.add_argument("--train-L", type=int_list, help="depths of the degradation part")
    parser.add_argument("--train-steps", type=positive_int, help="Adam steps per network")
    parser.add_argument("--train-seeds", type=positive_int, help="draws per trained depth")
    parser.add_argument("--train-N", type=positive_int, help="width of the trained networks")
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="Adam learning rate")
    parser.add_argument(
        "--batch-norm",
        action="store_true",
        help="also train the pre-activation network at alpha = 1, and the three "
        "architectures at alpha = 1 with batch normalisation (degradation part)",
    )
    parser.add_argument(
        "--projection",
        action="store_true",
        help="also train networks that widen from train-N/2 to train-N halfway: plain, and "
        "post-activation with zero-padding and projection shortcuts (degradation part)",
    )
