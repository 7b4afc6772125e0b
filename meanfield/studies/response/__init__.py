"""`meanfield study response`: the response function and the optimal residual scaling
alpha* at initialisation (run, the paper's figures, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "response function and optimal residual scaling α* at initialisation"
