"""Science several studies share: a user's own block and law (mean-ode, coord-check,
variance), the Transformer's options (coord-check, transfer), the embedded-data options
and the two-layer inputs (two-layer, two-layer-phases, resnet-phases, shapes).
"""
