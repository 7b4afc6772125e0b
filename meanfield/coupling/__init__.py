"""A finite network against its limit: the coupled errors Δ^h, Δ^b, Δ^Z of a ResNet and
its mean ODE (`coupled_errors`, `euler_errors`), the strong errors of the neural SDE, the
embedded networks' errors, and the convergence numerics the studies run on them
(references with their own error, designs, fits of the rates).
"""

from . import mean_ode as mean_ode
from .mean_ode import LimitOnGrid as LimitOnGrid
from .mean_ode import limit_on_grid as limit_on_grid
from .mean_ode import limit_copies as limit_copies
from .mean_ode import CoupledErrors as CoupledErrors
from .mean_ode import coupled_errors as coupled_errors
from .mean_ode import draw_units as draw_units
from .mean_ode import euler_errors as euler_errors
from . import neural_sde as neural_sde
from .neural_sde import strong_errors as strong_errors
from . import perceptron as perceptron
from .perceptron import output_error as output_error
from .perceptron import hidden_error as hidden_error
from . import deep_embedded as deep_embedded
from . import reference as reference
from .reference import reference_particles as reference_particles
from .reference import solve_reference as solve_reference
from .reference import reference_errors as reference_errors
from .reference import reference_error as reference_error
from .reference import limit_grids as limit_grids
from .reference import solve_reference_replicas as solve_reference_replicas
from .reference import reference_target as reference_target
from .reference import particles_for as particles_for
from .reference import refine_reference as refine_reference
from . import design as design
from .design import first_pass_mean as first_pass_mean
from .design import design_lines as design_lines
from .design import merged_boxes as merged_boxes
from .design import program_boxes as program_boxes
from .design import seed_program as seed_program
from .design import pad_grid as pad_grid
from .design import pilot_errors as pilot_errors
from .design import fit_pilot as fit_pilot
from .design import euler_coefficient as euler_coefficient
from . import convergence as convergence
from .convergence import circle_data as circle_data
from .convergence import summarize_steps as summarize_steps
from .convergence import convergence_fits as convergence_fits
from .convergence import delta_quantiles as delta_quantiles
