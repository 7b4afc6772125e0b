"""`meanfield study two-layer`: the high-dimensional two-layer perceptron in width,
dimension, scaling criteria and the lazy regime (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "the high-dimensional two-layer perceptron: width, dimension, scaling criteria, lazy regime"
