"""`meanfield study tangent-kernel`: the tangent kernel of finite ResNets against the
shallow M*L-unit kernel (run).
"""

# read by `meanfield study --help` without importing the study (and JAX)
HELP = "tangent kernel of finite ResNets vs the shallow M·L-unit kernel (docs: Mathematics §5.1)"
