"""`meanfield study approximation`: why depth, from exact ReLU constructions and trained
shallow against deep networks (run, figures, the 784 -> ? -> 10 exercise, verdicts).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "why depth: exact ReLU constructions, and trained shallow against deep networks"
