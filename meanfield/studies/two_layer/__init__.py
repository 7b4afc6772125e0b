"""`meanfield study two-layer`: the high-dimensional two-layer perceptron in width,
dimension, scaling criteria and the lazy regime (run, figures).
"""
