"""solvers: the only part of the project that talks to Diffrax.

Models in `meanfield` describe vector fields; the functions here integrate them.
"""

from .controlled import ControlledSolution as ControlledSolution
from .controlled import GridPath as GridPath
from .controlled import MatrixControlTerm as MatrixControlTerm
from .controlled import solve_controlled as solve_controlled
from .controlled import solve_ito as solve_ito
from .controlled import solve_young as solve_young
from .ode import SOLVERS as SOLVERS
from .ode import DenseSolution as DenseSolution
from .ode import evaluate_many as evaluate_many
from .ode import solve_dense as solve_dense
