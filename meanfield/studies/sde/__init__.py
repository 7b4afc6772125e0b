"""`meanfield study sde`: the strong error of ResNets with Brownian, fBm or smooth weights
against their SDE, Young or ODE limit (run, figures).
"""
