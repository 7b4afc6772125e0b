"""`meanfield study phases`: identity, stability and explosion of ResNets at initialisation
against beta, and the critical beta (run, figures).
"""
