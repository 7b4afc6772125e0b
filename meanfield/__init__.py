"""meanfield: deep residual networks and their large-depth limits in JAX.

The public API, in the order data flows through it:
blocks and laws → scaling → finite ResNet → backward pass / training →
limits → studies.
"""

from .activations import ACTIVATIONS as ACTIVATIONS
from .activations import resolve_activation as resolve_activation
from .backward import Adjoint as Adjoint
from .backward import Gradients as Gradients
from .backward import backward as backward
from .backward import loss_and_gradients as loss_and_gradients
from .backward import squared_loss as squared_loss
from .blocks import AbstractBlock as AbstractBlock
from .blocks import AbstractLayerBlock as AbstractLayerBlock
from .blocks import AbstractUnitBlock as AbstractUnitBlock
from .blocks import FunctionBlock as FunctionBlock
from .laws import AbstractGaussianLaw as AbstractGaussianLaw
from .laws import AbstractLaw as AbstractLaw
from .laws import DenseGaussianLaw as DenseGaussianLaw
from .laws import MatrixGaussianLaw as MatrixGaussianLaw
from .laws import PerceptronGaussianLaw as PerceptronGaussianLaw
from .laws import SamplerLaw as SamplerLaw
from .laws import TwoLayerGaussianLaw as TwoLayerGaussianLaw
from .laws import TwoLayerNonCentredLaw as TwoLayerNonCentredLaw
from .layer_blocks import DenseBlock as DenseBlock
from .layer_blocks import DenseParams as DenseParams
from .layer_blocks import MatrixBlock as MatrixBlock
from .layer_blocks import PerceptronBlock as PerceptronBlock
from .layer_blocks import PerceptronParams as PerceptronParams
from .resnet import ResNet as ResNet
from .scaling import AbstractScaling as AbstractScaling
from .scaling import ConstantScaling as ConstantScaling
from .scaling import CriticalScaling as CriticalScaling
from .scaling import DepthPowerScaling as DepthPowerScaling
from .scaling import FunctionScaling as FunctionScaling
from .scaling import MeanODEScaling as MeanODEScaling
from .scaling import resolve_alpha as resolve_alpha
from .training import TrainResult as TrainResult
from .training import mean_ode_sgd as mean_ode_sgd
from .training import plain_sgd as plain_sgd
from .training import train as train
from .two_layer import TwoLayerBlock as TwoLayerBlock
from .two_layer import TwoLayerParams as TwoLayerParams

__version__ = "0.1.0"
