"""The large-depth and large-width limits of the models: particles and the neural mean
ODE (forward, adjoint, gradient descent in the limit), the neural SDE / Young / ODE, and
the limits of the networks on an embedding (fixed D: `particle_dynamics`; D → ∞:
`gaussian_limit`, `linear_limit`, and `meanfield.limits.deep_embedded.limit`).
"""

from . import particles as particles
from .particles import Particles as Particles
from .particles import monte_carlo_particles as monte_carlo_particles
from .particles import hermite_rule as hermite_rule
from .particles import gauss_hermite_particles as gauss_hermite_particles
from .particles import particle_gradients as particle_gradients
from .particles import particle_step as particle_step
from . import mean_ode as mean_ode
from .mean_ode import MeanODE as MeanODE
from .mean_ode import MeanODESolution as MeanODESolution
from .mean_ode import solve_mean_ode as solve_mean_ode
from . import neural_sde as neural_sde
from .neural_sde import NeuralSDE as NeuralSDE
from .neural_sde import NeuralODE as NeuralODE
from .neural_sde import limit_beta as limit_beta
from . import perceptron as perceptron
from .perceptron import ParticleLimit as ParticleLimit
from .perceptron import particle_dynamics as particle_dynamics
from .perceptron import gaussian_nodes as gaussian_nodes
from .perceptron import monte_carlo_nodes as monte_carlo_nodes
from .perceptron import Limit as Limit
from .perceptron import gaussian_limit as gaussian_limit
from .perceptron import infinite_d_grams as infinite_d_grams
from . import deep_embedded as deep_embedded
from .deep_embedded import basis_gram as basis_gram
from .deep_embedded import LinearLimit as LinearLimit
from .deep_embedded import linear_limit as linear_limit
from .deep_embedded import sobol_gaussian as sobol_gaussian
from .deep_embedded import sign_symmetric as sign_symmetric
from .deep_embedded import gauss_hermite as gauss_hermite
from .deep_embedded import quadrature_orders as quadrature_orders
