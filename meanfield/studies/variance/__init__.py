"""`meanfield study variance`: the variance of the first forward pass, Chizat's Proposition
2.1 and its three regimes (run, figures).
"""
