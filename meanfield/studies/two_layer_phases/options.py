"""The options of `meanfield study two-layer-phases`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import float_list, int_list, positive_float, positive_int

DEFAULT_X64 = True

PRESETS = {
    "quick": {
        "D": [64, 256, 1024, 2048],
        "s_v_sweep": [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
        "M": 1024,
        "seeds": 8,
    },
    "paper": {
        "D": [64, 256, 1024, 4096],
        "s_v_sweep": [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
        "M": 16384,
        "seeds": 16,
    },
}

DEFAULTS = {
    "activation": "tanh",
    "sigma_in": 1.0,
    "sigma_out": 1.0,
    "s_u": 1.0,
    "lr_u": 1.0,
    "lr_v": 1.0,
    "time": 1.0,
    "dt": 0.05,
}


def add_arguments(parser):
    d = DEFAULTS
    parser.add_argument("--D", type=int_list, help="embedding dimensions")
    parser.add_argument(
        "--s-v-sweep", type=float_list, help="output scales s_v = σ_v / sqrt(D) at every D"
    )
    parser.add_argument("--M", type=positive_int, help="width (units)")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")
    parser.add_argument("--activation", help=f"ρ (default: {d['activation']})")
    parser.add_argument(
        "--data",
        help="FILE.npz with arrays x (n, d_in), distinct inputs, and y (n, d_out) (default: "
        "built-in)",
    )
    for name, what in (
        ("sigma_in", "σ_in"),
        ("sigma_out", "σ_out"),
        ("s_u", "u ~ N(0, s_u² D)"),
        ("lr_u", "η_u before scaling"),
        ("lr_v", "η_v"),
        ("time", "training time t of the flow"),
        ("dt", "the flow's Euler step"),
    ):
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=positive_float, help=f"{what} (default: {d[name]:g})")
