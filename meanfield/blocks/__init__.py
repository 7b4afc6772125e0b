"""The user's residual block φ (docs: Mathematics §1): the abstract unit and layer
blocks, the built-in two-layer, dense, matrix, perceptron and attention blocks, and the
activations they take by name.
"""

from . import base as base
from .base import AbstractBlock as AbstractBlock
from .base import AbstractUnitBlock as AbstractUnitBlock
from .base import AbstractLayerBlock as AbstractLayerBlock
from .base import FunctionBlock as FunctionBlock
from .base import WeightedUnits as WeightedUnits
from .base import LayerUnits as LayerUnits
from . import two_layer as two_layer
from .two_layer import TwoLayerParams as TwoLayerParams
from .two_layer import TwoLayerBlock as TwoLayerBlock
from . import layers as layers
from .layers import MatrixBlock as MatrixBlock
from .layers import PerceptronParams as PerceptronParams
from .layers import PerceptronBlock as PerceptronBlock
from .layers import DenseParams as DenseParams
from .layers import DenseBlock as DenseBlock
from . import attention as attention
from .attention import AttentionParams as AttentionParams
from .attention import AttentionHead as AttentionHead
from . import activations as activations
from .activations import resolve_activation as resolve_activation
from . import transformer as transformer
from .transformer import CausalAttention as CausalAttention
from .transformer import MLPBranch as MLPBranch
