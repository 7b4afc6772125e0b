"""`meanfield study trained-weights`: trained weights along depth, their regularity before
and after training and the test accuracy over (beta, H) (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "trained weights along depth: regularity before/after and test accuracy over (β, H)"
