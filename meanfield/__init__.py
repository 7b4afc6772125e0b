# ruff: noqa: I001  (imports are grouped by topic, in the order data flows)
"""meanfield: deep residual networks and their large-depth limits in JAX.

The public API, in the order data flows through it (each module imports only from
the ones before it):

    blocks, laws → scaling → engine (the depth loop) → ResNet → training →
    limits (mean ODE, neural SDE/ODE) → coupling → fits → studies

Everything else lives in submodules: `meanfield.engine` (the depth loops and the
fused kernels), `meanfield.theory` (closed forms at infinite width),
`meanfield.depth` (depth laws), `meanfield.fits`, `meanfield.sharding`,
`meanfield.compilation`, `meanfield.studies`, `meanfield.embedding` and
`meanfield.shallow` (Chaintron's embedding and two-layer perceptron), `meanfield.deep_embedded`
(the deep ResNet on an embedding and its joint L, M, D limit), `meanfield.plain` (plain and
residual networks, gradients through depth), `meanfield.regimes` (training regimes),
`meanfield.res1` (res-1 networks trained on data), `meanfield.regularity`,
`meanfield.datasets`.
"""

# the user's residual block φ and the laws of its parameters (docs: Mathematics §1)
from .blocks import AbstractLayerBlock as AbstractLayerBlock
from .blocks import AbstractUnitBlock as AbstractUnitBlock
from .blocks import FunctionBlock as FunctionBlock
from .two_layer import TwoLayerBlock as TwoLayerBlock
from .two_layer import TwoLayerParams as TwoLayerParams
from .attention import AttentionHead as AttentionHead
from .attention import AttentionGaussianLaw as AttentionGaussianLaw
from .layer_blocks import DenseBlock as DenseBlock
from .layer_blocks import MatrixBlock as MatrixBlock
from .layer_blocks import PerceptronBlock as PerceptronBlock
from .laws import AbstractGaussianLaw as AbstractGaussianLaw
from .laws import AbstractLaw as AbstractLaw
from .laws import DenseGaussianLaw as DenseGaussianLaw
from .laws import MatrixGaussianLaw as MatrixGaussianLaw
from .laws import PerceptronGaussianLaw as PerceptronGaussianLaw
from .laws import SamplerLaw as SamplerLaw
from .laws import TwoLayerGaussianLaw as TwoLayerGaussianLaw
from .laws import TwoLayerNonCentredLaw as TwoLayerNonCentredLaw
from .depth import BrownianLaw as BrownianLaw
from .depth import FractionalBrownianLaw as FractionalBrownianLaw
from .depth import IIDGaussianLaw as IIDGaussianLaw
from .depth import SmoothGPLaw as SmoothGPLaw

# the residual scaling α(L, M)
from .scaling import AbstractScaling as AbstractScaling
from .scaling import ConstantScaling as ConstantScaling
from .scaling import CriticalScaling as CriticalScaling
from .scaling import DepthPowerScaling as DepthPowerScaling
from .scaling import FunctionScaling as FunctionScaling
from .scaling import MeanODEScaling as MeanODEScaling

# the engine: how a network runs over depth (forward (R), adjoint (B), gradients)
from .engine import AbstractDepthLoop as AbstractDepthLoop
from .engine import Adjoint as Adjoint
from .engine import AutoLoop as AutoLoop
from .engine import FusedLoop as FusedLoop
from .engine import ScanLoop as ScanLoop

# the finite network and gradient descent (docs: Mathematics §1, §2)
from .resnet import ResNet as ResNet
from .training import Gradients as Gradients
from .training import TrainResult as TrainResult
from .training import gd_loop as gd_loop
from .training import loss_and_gradients as loss_and_gradients
from .training import mean_ode_sgd as mean_ode_sgd
from .training import squared_loss as squared_loss
from .training import train as train

# the neural mean-ODE limit and the coupling with finite networks (docs: Mathematics §3)
from .particles import Particles as Particles
from .particles import gauss_hermite_particles as gauss_hermite_particles
from .particles import monte_carlo_particles as monte_carlo_particles
from .particles import particle_step as particle_step
from .meanode import MeanODE as MeanODE
from .meanode import MeanODESolution as MeanODESolution
from .meanode import solve_mean_ode as solve_mean_ode
from .coupling import CoupledErrors as CoupledErrors
from .coupling import LimitOnGrid as LimitOnGrid
from .coupling import coupled_errors as coupled_errors
from .coupling import euler_errors as euler_errors
from .coupling import limit_on_grid as limit_on_grid

# neural SDE / Young / ODE limits and phases at initialisation (docs: Mathematics §4)
from .neural_sde import NeuralODE as NeuralODE
from .neural_sde import NeuralSDE as NeuralSDE
from .neural_sde import matrix_resnet as matrix_resnet
from .phases import critical_beta as critical_beta
from .phases import depth_ratios as depth_ratios
from .phases import perceptron_resnet as perceptron_resnet

# signal propagation at initialisation (docs: Mathematics §5)
from .signal_propagation import simulate_response as simulate_response
from .theory.alpha_star import optimal_scaling as optimal_scaling
from .theory.response import response as response

# rates with intervals; running fast (seeds over devices, compilation cache)
from .fits import fit_loglog as fit_loglog
from .fits import fit_rate_sum as fit_rate_sum
from .fits import summarize as summarize
from .compilation import enable_compilation_cache as enable_compilation_cache
from .sharding import shard_seeds as shard_seeds

# the studies from Python (as `meanfield study NAME` on the command line)
from .studies import mean_ode_study as mean_ode_study
from .studies import run_study as run_study
from .results import StudyResults as StudyResults
from .results import load_results as load_results

__version__ = "0.3.0"

# a JAX release known to compute wrong results: a warning here, a refusal in every study
from .releases import warn_on_import as _warn_on_import

_warn_on_import()
