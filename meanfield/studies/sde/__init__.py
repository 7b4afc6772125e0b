"""`meanfield study sde`: the strong error of ResNets with Brownian, fBm or smooth weights
against their SDE, Young or ODE limit (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "strong error of ResNets with Brownian, fBm or smooth weights vs their SDE/Young/ODE limit"
