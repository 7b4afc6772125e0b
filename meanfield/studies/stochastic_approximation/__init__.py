"""`meanfield study stochastic-approximation`: the epsilon terms of the stochastic-
approximation proposition for mean ODEs (run, figures).
"""
