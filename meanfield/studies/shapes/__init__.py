"""`meanfield study shapes`: the joint limit in depth L, width M and dimension D, its
rates, rate law and optimal shape (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "the joint limit in depth L, width M and dimension D: rates, rate law, optimal shape"
