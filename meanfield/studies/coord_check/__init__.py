"""`meanfield study coord-check`: the coordinate check of a Transformer's parametrisations,
or of a ResNet of your own block, across width and depth (run, figures, the ResNet
side).
"""
