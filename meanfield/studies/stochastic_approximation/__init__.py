"""`meanfield study stochastic-approximation`: the epsilon terms of the stochastic-
approximation proposition for mean ODEs (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "the epsilon terms of the stochastic-approximation proposition for mean ODEs"
