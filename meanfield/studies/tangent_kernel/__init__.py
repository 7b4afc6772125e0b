"""`meanfield study tangent-kernel`: the tangent kernel of finite ResNets against the
shallow M*L-unit kernel (run).
"""
