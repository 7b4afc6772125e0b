"""`meanfield study plain-vs-residual`: gradients through plain and residual networks, and
the degradation problem (run, figures, the trained networks).
"""
