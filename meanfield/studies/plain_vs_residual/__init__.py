"""`meanfield study plain-vs-residual`: gradients through plain and residual networks, and
the degradation problem (run, figures, the trained networks).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "gradients through plain and residual networks, and the degradation problem"
