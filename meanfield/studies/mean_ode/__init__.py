"""`meanfield study mean-ode`: finite ResNets against the neural mean-ODE limit, the 1/L +
1/sqrt(LM) study (run, grid design, reference limit, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "finite ResNets vs the neural mean-ODE limit: the 1/L + 1/sqrt(LM) study"
