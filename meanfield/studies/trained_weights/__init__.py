"""`meanfield study trained-weights`: trained weights along depth, their regularity before
and after training and the test accuracy over (beta, H) (run, figures).
"""
