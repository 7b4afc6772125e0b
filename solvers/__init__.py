"""solvers: the only part of the project that talks to Diffrax.

Models in `meanfield` describe vector fields; the functions here integrate them.
"""

from .ode import SOLVERS as SOLVERS
from .ode import DenseSolution as DenseSolution
from .ode import evaluate_many as evaluate_many
from .ode import solve_dense as solve_dense
