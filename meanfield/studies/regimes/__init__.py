"""`meanfield study regimes`: the phase diagram of training regimes over (gamma, lambda)
and learning-rate transfer across depth (run, figures).
"""
