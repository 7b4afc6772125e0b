"""Infinite-width theory at initialisation (docs: Mathematics §5): Gaussian expectations, the
kernel and response recursions, the optimal residual scaling, the variance law and
the tangent kernel."""
