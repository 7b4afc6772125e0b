"""`meanfield study phases`: identity, stability and explosion of ResNets at initialisation
against beta, and the critical beta (run, figures).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "identity / stability / explosion of ResNets at initialisation vs β; critical β"
