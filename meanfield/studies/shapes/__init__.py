"""`meanfield study shapes`: the joint limit in depth L, width M and dimension D, its
rates, rate law and optimal shape (run, figures).
"""
