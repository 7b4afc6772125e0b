"""The options of `meanfield study tangent-kernel`, its presets and precision (no JAX here:
the command line reads them; `study.py` re-exports them)."""

from ...harness.args import add_unit_arguments, positive_int

DEFAULT_X64 = True

PRESETS = {"quick": {"nets": 32}, "paper": {"nets": 256}}


def add_arguments(parser):
    add_unit_arguments(parser, gammas=[0.5, 0.75, 1.0], d=3, activation="tanh")
    parser.add_argument("--nets", type=positive_int, help="random networks per point")
