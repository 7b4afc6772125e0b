"""The names `meanfield` re-exports, for type checkers and for the lazy loader
(`meanfield/__init__.py` reads this file: each name is imported at its first use)."""

# the user's residual block φ and the laws of its parameters (docs: Mathematics §1)
# the layers, as attributes (`meanfield.blocks.DenseBlock`)
from . import blocks as blocks
from . import coupling as coupling
from . import diagnostics as diagnostics
from . import engine as engine
from . import io as io
from . import laws as laws
from . import limits as limits
from . import models as models
from . import parametrisation as parametrisation
from . import runtime as runtime
from . import scaling as scaling
from . import special as special
from . import stats as stats
from . import studies as studies
from . import theory as theory
from . import training as training
from .blocks import AbstractLayerBlock as AbstractLayerBlock
from .blocks import AbstractUnitBlock as AbstractUnitBlock
from .blocks import AttentionHead as AttentionHead
from .blocks import DenseBlock as DenseBlock
from .blocks import FunctionBlock as FunctionBlock
from .blocks import MatrixBlock as MatrixBlock
from .blocks import PerceptronBlock as PerceptronBlock
from .blocks import TwoLayerBlock as TwoLayerBlock
from .blocks import TwoLayerParams as TwoLayerParams
from .coupling import CoupledErrors as CoupledErrors
from .coupling import LimitOnGrid as LimitOnGrid
from .coupling import coupled_errors as coupled_errors
from .coupling import euler_errors as euler_errors
from .coupling import limit_on_grid as limit_on_grid
from .diagnostics import critical_beta as critical_beta
from .diagnostics import depth_ratios as depth_ratios
from .diagnostics import perceptron_resnet as perceptron_resnet

# signal propagation at initialisation (docs: Mathematics §5)
from .diagnostics import simulate_response as simulate_response

# the engine: how a network runs over depth (forward (R), adjoint (B), gradients)
from .engine import AbstractDepthLoop as AbstractDepthLoop
from .engine import Adjoint as Adjoint
from .engine import AutoLoop as AutoLoop
from .engine import FusedLoop as FusedLoop
from .engine import ScanLoop as ScanLoop
from .io import StudyResults as StudyResults
from .io import load_results as load_results
from .laws import AbstractGaussianLaw as AbstractGaussianLaw
from .laws import AbstractLaw as AbstractLaw
from .laws import AttentionGaussianLaw as AttentionGaussianLaw
from .laws import DenseGaussianLaw as DenseGaussianLaw
from .laws import MatrixGaussianLaw as MatrixGaussianLaw
from .laws import PerceptronGaussianLaw as PerceptronGaussianLaw
from .laws import SamplerLaw as SamplerLaw
from .laws import TwoLayerGaussianLaw as TwoLayerGaussianLaw
from .laws import TwoLayerNonCentredLaw as TwoLayerNonCentredLaw
from .laws.depth import BrownianLaw as BrownianLaw
from .laws.depth import FractionalBrownianLaw as FractionalBrownianLaw
from .laws.depth import IIDGaussianLaw as IIDGaussianLaw
from .laws.depth import SmoothGPLaw as SmoothGPLaw
from .limits import MeanODE as MeanODE
from .limits import MeanODESolution as MeanODESolution

# neural SDE / Young / ODE limits and phases at initialisation (docs: Mathematics §4)
from .limits import NeuralODE as NeuralODE
from .limits import NeuralSDE as NeuralSDE

# the neural mean-ODE limit and the coupling with finite networks (docs: Mathematics §3)
from .limits import Particles as Particles
from .limits import gauss_hermite_particles as gauss_hermite_particles
from .limits import monte_carlo_particles as monte_carlo_particles
from .limits import particle_step as particle_step
from .limits import solve_mean_ode as solve_mean_ode

# the finite network and gradient descent (docs: Mathematics §1, §2)
from .models import ResNet as ResNet
from .models import matrix_resnet as matrix_resnet
from .runtime import enable_compilation_cache as enable_compilation_cache
from .runtime import shard_seeds as shard_seeds

# the residual scaling α(L, M)
from .scaling import AbstractScaling as AbstractScaling
from .scaling import ConstantScaling as ConstantScaling
from .scaling import CriticalScaling as CriticalScaling
from .scaling import DepthPowerScaling as DepthPowerScaling
from .scaling import FunctionScaling as FunctionScaling
from .scaling import MeanODEScaling as MeanODEScaling

# rates with intervals; running fast (seeds over devices, compilation cache)
from .stats import fit_loglog as fit_loglog
from .stats import fit_rate_sum as fit_rate_sum
from .stats import summarize as summarize

# the studies from Python (as `meanfield study NAME` on the command line)
from .studies import mean_ode_study as mean_ode_study
from .studies import run_study as run_study
from .theory.alpha_star import optimal_scaling as optimal_scaling
from .theory.response import response as response
from .training import Gradients as Gradients
from .training import TrainResult as TrainResult
from .training import gd_loop as gd_loop
from .training import loss_and_gradients as loss_and_gradients
from .training import mean_ode_sgd as mean_ode_sgd
from .training import squared_loss as squared_loss
from .training import train as train
