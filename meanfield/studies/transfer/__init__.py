"""`meanfield study transfer`: learning-rate transfer of a Transformer across depth and
width, per parametrisation (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "learning-rate transfer of a Transformer across depth and width, per parametrisation"
