"""`meanfield study response`: the response function and the optimal residual scaling
alpha* at initialisation (run, the paper's figures, figures).
"""
