# ruff: noqa: I001  (imports are grouped by topic, not sorted)
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
from .backward import backward_from_states as backward_from_states
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


# the neural mean-ODE limit (SPEC §3)
from .coupling import CoupledErrors as CoupledErrors
from .coupling import LimitOnGrid as LimitOnGrid
from .coupling import coupled_errors as coupled_errors
from .coupling import euler_errors as euler_errors
from .coupling import limit_copies as limit_copies
from .coupling import limit_on_grid as limit_on_grid
from .fits import exploded_draws as exploded_draws
from .fits import fit_loglog as fit_loglog
from .fits import fit_rate_sum as fit_rate_sum
from .fits import fit_values as fit_values
from .fits import summarize as summarize
from .meanode import MeanODE as MeanODE
from .meanode import MeanODESolution as MeanODESolution
from .meanode import particle_step as particle_step
from .meanode import solve_mean_ode as solve_mean_ode
from .particles import Particles as Particles
from .particles import gauss_hermite_particles as gauss_hermite_particles
from .particles import monte_carlo_particles as monte_carlo_particles

# neural SDE / Young / ODE limits and phases (SPEC §4)
from .depth import BrownianLaw as BrownianLaw
from .depth import FractionalBrownianLaw as FractionalBrownianLaw
from .depth import IIDGaussianLaw as IIDGaussianLaw
from .depth import SmoothGPLaw as SmoothGPLaw
from .neural_sde import NeuralODE as NeuralODE
from .neural_sde import NeuralSDE as NeuralSDE
from .neural_sde import matrix_resnet as matrix_resnet
from .phases import critical_beta as critical_beta
from .phases import depth_ratios as depth_ratios
from .phases import perceptron_resnet as perceptron_resnet

# signal propagation at initialisation (SPEC §5)
from .signal_propagation import simulate_response as simulate_response
from .theory.alpha_star import optimal_scaling as optimal_scaling
from .theory.alpha_star import saturation_asymptotic as saturation_asymptotic
from .theory.alpha_star import saturation_formula as saturation_formula
from .theory.response import output_response_curve as output_response_curve
from .theory.response import response as response

# running fast: fused depth loop, seeds over devices, compilation cache
from .compilation import CompileCounter as CompileCounter
from .compilation import disable_compilation_cache as disable_compilation_cache
from .compilation import enable_compilation_cache as enable_compilation_cache
from .depth_loop import BatchAdjoint as BatchAdjoint
from .depth_loop import PallasOptions as PallasOptions
from .depth_loop import adjoint_batch as adjoint_batch
from .depth_loop import choose_method as choose_method
from .depth_loop import forward_batch as forward_batch
from .depth_loop import loss_and_gradients_batch as loss_and_gradients_batch
from .depth_loop import pallas_supported as pallas_supported
from .sharding import seed_mesh as seed_mesh
from .sharding import shard_seeds as shard_seeds

__version__ = "0.1.0"
