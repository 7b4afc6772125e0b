"""The finite network `h_k = h_{k−1} + L^{-β} V_k σ(h_{k−1})` with given weights
(`matrix_resnet`), whose limits are the neural SDE / Young / ODE of
`meanfield.limits.neural_sde`."""

from collections.abc import Callable

from jaxtyping import Array, Float

from .._validation import check_finite_array
from ..blocks.layers import MatrixBlock
from .resnet import ResNet


def matrix_resnet(
    weights: Float[Array, "L d d"], beta: float, activation: str | Callable = "tanh"
) -> ResNet:
    """The finite network `h_k = h_{k−1} + L^{-β} V_k σ(h_{k−1})` with the given weights.

    A `ResNet` with a `MatrixBlock(activation)` and `α = L^{-β}` (`DepthPowerScaling`).
    """
    from ..scaling import DepthPowerScaling

    check_finite_array(weights, "weights")  # concrete values; traced ones pass
    check_finite_array(beta, "beta")
    L = weights.shape[0]
    return ResNet(MatrixBlock(activation), weights, DepthPowerScaling(beta)(L, 1))
