"""The options of `meanfield study trained-weights`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, positive_float, positive_int
from ..shared.choices import RES1_OPTIMIZERS

DEFAULT_X64 = False  # training in float32: the accuracies and the regularity (a log-log

# slope over lags of variograms of O(1/d) increments) are far above its round-off
INITS = ("iid", "smooth", "fbm")

PRESETS = {
    "quick": {
        "L": 64,
        "d": 32,
        "betas": [0.0, 0.25, 0.5, 0.75, 1.0],
        "hursts": [0.1, 0.3, 0.5, 0.7, 0.9],
        "inits": list(INITS),
        "steps": 400,
        "batch_size": 128,
        "lr": 3e-3,
        "seeds": 2,
    },
    "paper": {
        "L": 256,
        "d": 64,
        "betas": [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0],
        "hursts": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
        "inits": list(INITS),
        "steps": 3000,
        "batch_size": 128,
        "lr": 1e-3,
        "seeds": 3,
    },
}


def add_arguments(parser):
    parser.add_argument(
        "--data",
        help="MNIST / CIFAR-10 files (an .npz, a folder of idx files, CIFAR-10's python "
        "version); default: scikit-learn's digits, offline",
    )
    parser.add_argument("--L", type=positive_int, help="depth")
    parser.add_argument("--d", type=positive_int, help="width of the residual stream")
    parser.add_argument("--betas", type=float_list, help="scales β of L^-β (comma list)")
    parser.add_argument("--hursts", type=float_list, help="Hurst indices of the fBm init")
    parser.add_argument("--inits", help=f"comma list among {', '.join(INITS)} (default: all)")
    parser.add_argument("--steps", type=positive_int, help="optimiser updates")
    parser.add_argument("--batch-size", type=positive_int, help="examples per update")
    parser.add_argument("--lr", type=positive_float, help="learning rate")
    parser.add_argument(
        "--optimizer", choices=RES1_OPTIMIZERS, default="adam", help="(default: adam)"
    )
    parser.add_argument("--seeds", type=positive_int, help="independent networks per cell")
    parser.add_argument("--activation", default="relu", help="σ (default: relu)")
