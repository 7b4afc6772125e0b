"""`meanfield study transfer`: learning-rate transfer of a Transformer across depth and
width, per parametrisation (run, figures).
"""
