"""What `meanfield study resnet-phases`'s figures read from `results.json`: the records of
two-layer-phases, whose figures it draws (its configuration has `L` too, not read by them).
"""

from ..two_layer_phases.schema import SCHEMA as SCHEMA
