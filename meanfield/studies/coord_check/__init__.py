"""`meanfield study coord-check`: the coordinate check of a Transformer's parametrisations,
or of a ResNet of your own block, across width and depth (run, figures, the ResNet
side).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = (
    "coordinate check of a Transformer's parametrisations, or of a ResNet of your own unit "
    "block, across width and depth"
)
