"""`meanfield study variance`: the variance of the first forward pass, Chizat's Proposition
2.1 and its three regimes (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "variance of the first forward pass: Chizat's Prop. 2.1 and its three regimes"
