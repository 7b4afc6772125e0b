"""`meanfield study resnet-phases`: the deep ResNet's phase diagram over (sigma_v, D),
criteria 1, 3, 5 and the MLU point (run; figures and records shared with two-layer-
phases).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "the deep ResNet's phase diagram over (sigma_v, D): criteria 1, 3, 5 and the MLU point"
