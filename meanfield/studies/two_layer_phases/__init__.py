"""`meanfield study two-layer-phases`: the two-layer perceptron's phase diagram over
(sigma_v, D), criteria 1, 3, 5 and the MLU point (run, figures, the phase cells).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = (
    "the two-layer perceptron's phase diagram over (sigma_v, D): criteria 1, 3, 5 and the MLU point"
)
