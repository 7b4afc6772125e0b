"""Closed forms at infinite width: the Gaussian expectations of an activation
(`gain`, `second_moment`), the response function and its optimal residual scaling
(`response`, `optimal_scaling`), the variance law of the first forward pass, the tangent
kernel and its shallow approximation, gradients through depth of plain and residual
networks (`predicted_log_ratio`), exact ReLU constructions (`approximation`: x² from p
ReLUs, the sawtooth in depth, parity, piecewise-linear interpolation in d dimensions), and
the stochastic-approximation lemma for mean ODEs (`stochastic_approximation`: the
Euler–Monte Carlo scheme, its ε terms, and a mean ODE whose expectation is exact).
"""

from . import gaussian as gaussian
from .gaussian import gaussian_expectation as gaussian_expectation
from .gaussian import second_moment as second_moment
from .gaussian import gain as gain
from .gaussian import erf_second_moment as erf_second_moment
from .gaussian import erf_gain as erf_gain
from .gaussian import relu_second_moment as relu_second_moment
from .gaussian import relu_mean as relu_mean
from . import response as response
from .response import PerLayer as PerLayer
from .response import ResponseCurves as ResponseCurves
from .response import variances as variances
from .response import output_response_curve as output_response_curve
from . import alpha_star as alpha_star
from .alpha_star import optimal_scaling as optimal_scaling
from .alpha_star import saturation_formula as saturation_formula
from .alpha_star import saturation_asymptotic as saturation_asymptotic
from . import variance as variance
from .variance import estimate_c as estimate_c
from .variance import variance_law as variance_law
from .variance import sampled_deviation as sampled_deviation
from .variance import sampled_backward_deviation as sampled_backward_deviation
from . import tangent as tangent
from .tangent import tangent_kernel as tangent_kernel
from .tangent import shallow_tangent_kernel as shallow_tangent_kernel
from .tangent import relative_difference as relative_difference
from . import gradients as gradients
from .gradients import gaussian_moments as gaussian_moments
from .gradients import finite_width_log_ratios as finite_width_log_ratios
from .gradients import population as population
from .gradients import predicted_log_ratio as predicted_log_ratio
from . import approximation as approximation
from .approximation import ShallowReLU as ShallowReLU
from .approximation import square_staircase as square_staircase
from .approximation import sawtooth as sawtooth
from .approximation import count_pieces as count_pieces
from .approximation import simplex_interpolate as simplex_interpolate
from . import stochastic_approximation as stochastic_approximation
