"""Adaptive, dense ODE solves with Diffrax (the mean-ODE limit's forward and adjoint)."""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

SOLVERS = {"dopri8": diffrax.Dopri8, "dopri5": diffrax.Dopri5, "tsit5": diffrax.Tsit5}


class DenseSolution(eqx.Module):
    """A solved ODE that can be evaluated anywhere in its interval.

    - `evaluate(t)`: the state at time t (dense interpolation of the solver's order).
    - `num_steps`: accepted steps; `ok`: whether the solve succeeded. A failure is
      returned as data (`ok = False`), never thrown inside a study.
    """

    solution: diffrax.Solution
    num_steps: Array
    ok: Array

    def evaluate(self, t) -> PyTree:
        return self.solution.evaluate(t)


def solve_dense(
    vector_field: Callable,
    y0: PyTree,
    *,
    t0: float,
    t1: float,
    args: PyTree = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    solver: str = "dopri8",
    max_steps: int = 16384,
) -> DenseSolution:
    """Solve `dy/dt = vector_field(t, y, args)` from `t0` to `t1` (either direction).

    An adaptive solver (`dopri8` by default: order 8, 8th-order dense output) with a
    PID step-size controller at tolerances `rtol`, `atol`.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r} is not known; use one of {', '.join(SOLVERS)}")
    if isinstance(rtol, int | float) and isinstance(atol, int | float) and not (rtol > 0 < atol):
        raise ValueError(f"rtol and atol must be > 0, got rtol={rtol}, atol={atol}")
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        SOLVERS[solver](),
        t0=t0,
        t1=t1,
        dt0=None,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(dense=True, t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        throw=False,
    )
    ok = sol.result == diffrax.RESULTS.successful
    return DenseSolution(
        solution=sol, num_steps=jnp.asarray(sol.stats["num_accepted_steps"]), ok=ok
    )


def evaluate_many(sol: DenseSolution, ts: Array) -> PyTree:
    """Evaluate a dense solution at every time in `ts` (vmapped)."""
    return jax.vmap(sol.evaluate)(ts)
