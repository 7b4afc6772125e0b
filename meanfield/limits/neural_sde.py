"""The depth limits of Mathematics §4 as vector fields: neural SDE, Young equation, neural ODE.

With layer weights read off a path on [0, 1] (`meanfield.laws.depth`) and the scaling
`α = L^{-β}` at the critical β, the ResNet `h_k = h_{k−1} + α V_k σ(h_{k−1})`
converges to

* Brownian weights, β = 1/2: the Itô SDE `dH_t = d^{-1/2} dB_t σ(H_t)`;
* fBm weights (H > 1/2), β = H: the Young equation `dH_t = d^{-1/2} dB^H_t σ(H_t)`;
* smooth weights 𝒱, β = 1: the ODE `dH_t = 𝒱(t) σ(H_t) dt`.

These modules describe the vector fields; `solvers` integrates them on the very
path the finite networks read (so errors are pathwise, strong errors). `strong_errors`
measures, for one path, the errors of the networks of several depths against the
limit and the limit's own error.
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._validation import check_finite_array, check_positive_int
from ..blocks.activations import resolve_activation
from ..laws.depth import BrownianLaw, FractionalBrownianLaw, SmoothGPLaw
from ..laws.depth.smooth import SmoothPath
from ..solvers import ControlledSolution, evaluate_many, solve_controlled, solve_dense


class NeuralSDE(eqx.Module):
    """`dH_t = d^{-1/2} dX_t σ(H_t)`, X a d×d matrix path (Brownian: Itô; fBm: Young).

    **Arguments:**

    - `activation`: σ, a name or a callable (default `tanh`).
    """

    activation: str | Callable = eqx.field(static=True, default="tanh")

    def __check_init__(self):
        resolve_activation(self.activation)

    def diffusion(self, t, h: Float[Array, " d"], args=None) -> Float[Array, " d"]:
        """`g(h) = d^{-1/2} σ(h)`: the increment of H over a step is `ΔX @ g(h)`."""
        del t, args
        return resolve_activation(self.activation)(h) / math.sqrt(h.shape[0])

    def solve(
        self,
        path: Float[Array, "n+1 d d"],
        x: Float[Array, " d"],
        *,
        steps: int | None = None,
        save: int,
        solver: str = "euler",
    ) -> ControlledSolution:
        """Solve from `H_0 = x` on the sampled path (X at `j/n`), with `steps` fixed steps
        on its grid (default n) and the states saved at `j/save`.

        `solver="euler"` is Euler–Maruyama, the Itô solution for a Brownian path (and
        exactly the finite network when `steps = L`); `"heun"` is for Young equations
        (H > 1/2) only, where it converges faster than Euler (about 2H − 1/2 against
        2H − 1, `solvers.solve_young`): on a Brownian path it converges to the
        Stratonovich solution, a different equation.
        """
        check_finite_array(path, "path")  # concrete values; traced ones pass
        check_finite_array(x, "x")
        steps = path.shape[0] - 1 if steps is None else steps
        return solve_controlled(self.diffusion, path, x, steps=steps, save=save, solver=solver)


class NeuralODE(eqx.Module):
    """`dH_t = 𝒱(t) σ(H_t) dt` for one smooth weight function 𝒱 (a `SmoothPath`).

    **Arguments:**

    - `activation`: σ, a name or a callable (default `tanh`).
    """

    activation: str | Callable = eqx.field(static=True, default="tanh")

    def __check_init__(self):
        resolve_activation(self.activation)

    def vector_field(self, t, h: Float[Array, " d"], path: SmoothPath) -> Float[Array, " d"]:
        """`𝒱(t) σ(h)`."""
        return path(t) @ resolve_activation(self.activation)(h)

    def solve(
        self,
        path: SmoothPath,
        x: Float[Array, " d"],
        *,
        save: int,
        rtol: float = 1e-10,
        atol: float = 1e-10,
        solver: str = "dopri8",
    ) -> tuple[Float[Array, "save+1 d"], Array, Array]:
        """Solve from `H_0 = x` with an adaptive high-order solver (Dopri8 by default).

        **Returns:** `(ys, ok, num_steps)`: the states at `j/save`, `j = 0..save`, whether
        the solve succeeded, and the accepted steps.
        """
        check_positive_int(save, "save")
        check_finite_array(path, "path")  # concrete values; traced ones pass
        check_finite_array(x, "x")
        sol = solve_dense(
            self.vector_field, x, t0=0.0, t1=1.0, args=path, rtol=rtol, atol=atol, solver=solver
        )
        ts = jnp.arange(save + 1, dtype=x.dtype) / save
        return evaluate_many(sol, ts), sol.ok, sol.num_steps


def limit_beta(law: BrownianLaw | FractionalBrownianLaw | SmoothGPLaw) -> float:
    """β of the limit: 1/2 (Brownian), H (fBm), 1 (smooth weights)."""
    return 1.0 if isinstance(law, SmoothGPLaw) else float(law.hurst)
