"""`meanfield study regimes`: the phase diagram of training regimes over (gamma, lambda)
and learning-rate transfer across depth (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "phase diagram of training regimes over (γ, λ) and learning-rate transfer across depth"
