"""meanfield: deep residual networks and their large-depth limits in JAX.

The package is built in layers, in the order data flows through them; each imports only
from the ones before it (tests/test_import_graph.py), and each folder's front re-exports
its public names (`from meanfield.models import ResNet`):

    blocks (the user's φ) → laws (unit laws, `laws.depth`) → scaling (α(L, M)) →
    engine (the depth loop) → models (finite networks) → training → limits (mean ODE,
    neural SDE/ODE, embedded limits) → coupling (network ↔ limit, convergence numerics)
    → diagnostics (phases, signal propagation, regimes, regularity) → theory (closed
    forms) → studies (`meanfield study NAME`) → cli;

below them `stats` (fits and intervals), `io` (results, data sets, figures) and
`runtime` (devices, compilation cache, known-bad releases). This front re-exports the
names a user needs first; docs/api.md lists every front, the CHANGELOG where each name
moved.
"""

# the user's residual block φ and the laws of its parameters (docs: Mathematics §1)
from .blocks import AbstractLayerBlock as AbstractLayerBlock
from .blocks import AbstractUnitBlock as AbstractUnitBlock
from .blocks import FunctionBlock as FunctionBlock
from .blocks import TwoLayerBlock as TwoLayerBlock
from .blocks import TwoLayerParams as TwoLayerParams
from .blocks import AttentionHead as AttentionHead
from .laws import AttentionGaussianLaw as AttentionGaussianLaw
from .blocks import DenseBlock as DenseBlock
from .blocks import MatrixBlock as MatrixBlock
from .blocks import PerceptronBlock as PerceptronBlock
from .laws import AbstractGaussianLaw as AbstractGaussianLaw
from .laws import AbstractLaw as AbstractLaw
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
from .models import ResNet as ResNet
from .training import Gradients as Gradients
from .training import TrainResult as TrainResult
from .training import gd_loop as gd_loop
from .training import loss_and_gradients as loss_and_gradients
from .training import mean_ode_sgd as mean_ode_sgd
from .training import squared_loss as squared_loss
from .training import train as train

# the neural mean-ODE limit and the coupling with finite networks (docs: Mathematics §3)
from .limits import Particles as Particles
from .limits import gauss_hermite_particles as gauss_hermite_particles
from .limits import monte_carlo_particles as monte_carlo_particles
from .limits import particle_step as particle_step
from .limits import MeanODE as MeanODE
from .limits import MeanODESolution as MeanODESolution
from .limits import solve_mean_ode as solve_mean_ode
from .coupling import CoupledErrors as CoupledErrors
from .coupling import LimitOnGrid as LimitOnGrid
from .coupling import coupled_errors as coupled_errors
from .coupling import euler_errors as euler_errors
from .coupling import limit_on_grid as limit_on_grid

# neural SDE / Young / ODE limits and phases at initialisation (docs: Mathematics §4)
from .limits import NeuralODE as NeuralODE
from .limits import NeuralSDE as NeuralSDE
from .models import matrix_resnet as matrix_resnet
from .diagnostics import critical_beta as critical_beta
from .diagnostics import depth_ratios as depth_ratios
from .diagnostics import perceptron_resnet as perceptron_resnet

# signal propagation at initialisation (docs: Mathematics §5)
from .diagnostics import simulate_response as simulate_response
from .theory.alpha_star import optimal_scaling as optimal_scaling
from .theory.response import response as response

# rates with intervals; running fast (seeds over devices, compilation cache)
from .stats import fit_loglog as fit_loglog
from .stats import fit_rate_sum as fit_rate_sum
from .stats import summarize as summarize
from .runtime import enable_compilation_cache as enable_compilation_cache
from .runtime import shard_seeds as shard_seeds

# the studies from Python (as `meanfield study NAME` on the command line)
from .studies import mean_ode_study as mean_ode_study
from .studies import run_study as run_study
from .io import StudyResults as StudyResults
from .io import load_results as load_results

from ._version import __version__ as __version__

# a JAX release known to compute wrong results: a warning here, a refusal in every study
from .runtime import warn_on_import as _warn_on_import

_warn_on_import()
