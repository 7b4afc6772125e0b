"""The neural mean-ODE limit and gradient descent in L² (docs: Mathematics §3).

With α = 1/(LM) and L, M → ∞, depth becomes s ∈ [0, 1] and the units of a layer
become the law of a random parameter Z_k(s):

    ∂_s h_k(s) =  E[φ(h_k(s), Z_k(s))],                h_k(0) = x
    ∂_s b_k(s) = −E[D_1φ(h_k(s), Z_k(s))ᵀ b_k(s)],      b_k(1) = ∇loss(y, h_k(1))
    Z_{k+1}(s) = Z_k(s) − η (1/n) Σ_i D_2φ(h_k(s; x_i), Z_k(s))ᵀ b_k(s; x_i)
    Z_0(s) ≡ Z_0 ~ μ_0.

The expectation is carried by weighted particles shared by every depth
(`meanfield.limits.particles`). `Z_k(s)` is a function of the initial draw and the
stored dense mean fields of steps 0..k-1, evaluated on demand; D_1φ and D_2φ are
vector-Jacobian products from JAX.
"""

import functools
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._validation import as_number, check_finite_array
from ..blocks.base import AbstractUnitBlock
from ..solvers import DenseSolution, evaluate_many, solve_dense
from ..training.loop import squared_loss
from .particles import Particles, particle_step


class MeanODE(eqx.Module):
    """The mean-ODE limit of a unit-block ResNet on a data set, trained by GD in L².

    **Arguments:**

    - `block`: the unit block φ.
    - `particles`: the expectation over μ_0 (Monte Carlo or quadrature).
    - `xs`, `ys`: the data set, `(n, d)` each (the state is the output; no readout).
    - `learning_rate`: η in the mean-ODE convention (docs: Mathematics §2).
    - `loss`: `loss(y, prediction)`, default `½‖prediction − y‖²`.

    Concrete `xs`, `ys` and particles must be finite (a one-line error naming the
    first NaN or inf); traced ones, under `jit`, are not checked.
    """

    block: AbstractUnitBlock
    particles: Particles
    xs: Float[Array, "n d"]
    ys: Float[Array, "n d"]
    learning_rate: float = eqx.field(static=True, converter=as_number)
    loss: Callable = eqx.field(static=True, default=squared_loss)

    def __check_init__(self):
        if not isinstance(self.block, AbstractUnitBlock):
            raise ValueError(f"block must be an AbstractUnitBlock, got {type(self.block).__name__}")
        if jnp.ndim(self.xs) != 2 or jnp.shape(self.ys) != jnp.shape(self.xs):
            raise ValueError(
                f"xs and ys must both have shape (n, d), got {jnp.shape(self.xs)} and "
                f"{jnp.shape(self.ys)}"
            )
        for name, value in (("xs", self.xs), ("ys", self.ys), ("particles", self.particles)):
            check_finite_array(value, name)  # concrete values only: traced ones pass
        lr = self.learning_rate
        ok = isinstance(lr, int | float) and not isinstance(lr, bool)
        if not (ok and math.isfinite(lr) and lr >= 0):
            raise ValueError(f"learning_rate must be a finite number >= 0, got {lr!r}")

    def velocity(self, h: Float[Array, "n d"], z: PyTree) -> Float[Array, "n d"]:
        """`E[φ(h_i, Z)]` for every input i, with Z the (evolved) particles `z`."""
        w = self.particles.weights

        def one(hi):
            values = jax.vmap(lambda zp: self.block(hi, zp))(z)
            return jnp.tensordot(w, values, axes=1)

        return jax.vmap(one)(h)

    def adjoint_velocity(self, h: Float[Array, "n d"], b: Float[Array, "n d"], z: PyTree):
        """`−E[D_1φ(h_i, Z)ᵀ b_i]` for every input i."""
        w = self.particles.weights

        def one(hi, bi):
            _, vjp = jax.vjp(
                lambda hh: jnp.tensordot(w, jax.vmap(lambda zp: self.block(hh, zp))(z), axes=1), hi
            )
            return -vjp(bi)[0]

        return jax.vmap(one)(h, b)

    def terminal_adjoint(self, h1: Float[Array, "n d"]) -> Float[Array, "n d"]:
        """`b(1) = ∇loss(y_i, h_i(1))` for every input."""
        return jax.vmap(jax.grad(lambda h, y: self.loss(y, h)))(h1, self.ys)

    def loss_value(self, h1: Float[Array, "n d"]) -> Float[Array, ""]:
        """The data loss `(1/n) Σ_i loss(y_i, h_i(1))`."""
        return jnp.mean(jax.vmap(lambda h, y: self.loss(y, h))(h1, self.ys))

    def evolve(self, z0: PyTree, s, history) -> PyTree:
        """`Z_k(s)` of particles `z0` (leading axis) given the mean fields of steps < k.

        `history` is a tuple of `(forward, backward)` dense solutions, one per step.
        """
        z = z0
        for fwd, bwd in history:
            z = self.gd_step(z, s, fwd, bwd)
        return z

    def gd_step(self, z: PyTree, s, forward: DenseSolution, backward: DenseSolution) -> PyTree:
        """One limit GD step of particles `z` (leading axis) at depth s, with the mean
        fields of one step's `forward` and `backward` solutions."""
        return particle_step(
            self.block, z, forward.evaluate(s), backward.evaluate(s), self.learning_rate
        )


def _evolve_stacked(model: "MeanODE", z0: PyTree, s, history, count) -> PyTree:
    """`model.evolve` with the history stacked: `history` is a `(forward, backward)`
    pair whose leaves have a leading axis of slots (or None: no step), of which the
    first `count` (traced) are used. One compiled solve thus serves every GD step."""
    if history is None:
        return z0

    def body(i, z):
        fwd, bwd = jax.tree.map(lambda a: a[i] if eqx.is_array(a) else a, history)
        return model.gd_step(z, s, fwd, bwd)

    return jax.lax.fori_loop(0, count, body, z0)


def _forward_field(s, h, args):
    model, history, count = args
    return model.velocity(h, _evolve_stacked(model, model.particles.z, s, history, count))


def _backward_field(s, b, args):
    model, history, count, forward = args
    z = _evolve_stacked(model, model.particles.z, s, history, count)
    return model.adjoint_velocity(forward.evaluate(s), b, z)


@functools.lru_cache(maxsize=16)
def _solution_shapes(state: jax.ShapeDtypeStruct, tol: jax.ShapeDtypeStruct, solver: str):
    """The shapes of what `_solve_step` returns (its two solves, each of the state's
    shape), traced once per state, tolerance type and solver, with a trivial field."""

    def solves(xs, tol):
        field = lambda s, h, args: h
        return (
            solve_dense(field, xs, t0=0.0, t1=1.0, rtol=tol, atol=tol, solver=solver),
            solve_dense(field, xs, t0=1.0, t1=0.0, rtol=tol, atol=tol, solver=solver),
        )

    return eqx.filter_eval_shape(solves, state, tol)


@eqx.filter_jit
def _solve_step(model: MeanODE, history, count, rtol, atol, solver):
    forward = solve_dense(
        _forward_field,
        model.xs,
        t0=0.0,
        t1=1.0,
        args=(model, history, count),
        rtol=rtol,
        atol=atol,
        solver=solver,
    )
    b1 = model.terminal_adjoint(forward.evaluate(1.0))
    backward = solve_dense(
        _backward_field,
        b1,
        t0=1.0,
        t1=0.0,
        args=(model, history, count, forward),
        rtol=rtol,
        atol=atol,
        solver=solver,
    )
    return forward, backward


class MeanODESolution(eqx.Module):
    """The mean fields of k GD steps in L²: dense forward and adjoint solutions per step.

    - `h(step, s)`, `b(step, s)`: `(n, d)` at depth s (s may be an array: leading axis);
      `fields(s)`: both, at every step, in one compiled call.
    - `params(z0, step, s)`: `Z_step(s)` for initial draws `z0` (leading axis).
    - `ok`: every solve succeeded; `num_steps`: accepted solver steps per solve.
    """

    model: MeanODE
    forward: tuple[DenseSolution, ...]
    backward: tuple[DenseSolution, ...]

    @property
    def steps(self) -> int:
        """k, the GD steps solved (the fields exist for steps 0..k)."""
        return len(self.forward) - 1

    @property
    def ok(self) -> bool:
        """Whether every forward and adjoint solve succeeded."""
        return bool(all(bool(s.ok) for s in self.forward + self.backward))

    @property
    def num_steps(self) -> list[int]:
        """The solver steps each solve accepted: the k + 1 forward ones, then the k + 1
        adjoint ones."""
        return [int(s.num_steps) for s in self.forward + self.backward]

    def _at(self, sols, step, s):
        check_finite_array(s, "s")
        s = jnp.asarray(s)
        if s.ndim == 0:
            return sols[step].evaluate(s)
        return evaluate_many(sols[step], s)

    def h(self, step: int, s) -> Array:
        """The mean field `h_step(s)` of the forward pass after `step` GD steps (0..k), at
        depth `s` in [0, 1]: `(n, d)` for a number `s`, `(len(s), n, d)` for a 1-D array
        (one row per input of the data set)."""
        return self._at(self.forward, step, s)

    def b(self, step: int, s) -> Array:
        """The adjoint `b_step(s)` (the loss's gradient with respect to `h_step(s)`, solved
        backward from s = 1), with the shapes of `h`."""
        return self._at(self.backward, step, s)

    def fields(self, s) -> tuple[Array, Array]:
        """`h` and `b` of every step at the depths `s` (1-D), each `(steps + 1, len(s), n, d)`.

        One compiled call (a program per length of `s`), where `h(step, s)` and
        `b(step, s)` run op by op.
        """
        check_finite_array(s, "s")
        s = jnp.asarray(s)
        if s.ndim != 1:
            raise ValueError(f"s must be a 1-D array of depths, got shape {s.shape}")
        return _fields(self.forward, self.backward, s)

    def params(self, z0: PyTree, step: int, s) -> PyTree:
        """`Z_step(s)`: the units drawn as `z0` (leaves with a leading axis of draws)
        after `step` GD steps of the limit at depth `s`, leaves shaped as `z0`'s."""
        check_finite_array(z0, "z0")
        check_finite_array(s, "s")
        history = tuple(zip(self.forward[:step], self.backward[:step], strict=True))
        # s as an array: a Python float would be a static argument, one compile per value
        return _evolve(self.model, z0, jnp.asarray(s, dtype=float), history)

    def loss(self, step: int) -> Array:
        """The limit's loss after `step` GD steps (a scalar): the mean over the data set of
        `loss(y, h_step(1))`."""
        return self.model.loss_value(self.h(step, 1.0))


@eqx.filter_jit
def _fields(forward, backward, s):
    return (
        jnp.stack([evaluate_many(sol, s) for sol in forward]),
        jnp.stack([evaluate_many(sol, s) for sol in backward]),
    )


@eqx.filter_jit
def _evolve(model: MeanODE, z0, s, history):
    return model.evolve(z0, s, history)


@eqx.filter_jit
def _set_slot(slots, k, new):
    return jax.tree.map(lambda buf, x: buf.at[k].set(x) if eqx.is_array(buf) else buf, slots, new)


def solve_mean_ode(
    model: MeanODE,
    steps: int,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    solver: str = "dopri8",
) -> MeanODESolution:
    """Solve the forward and adjoint mean ODEs for GD steps 0..`steps` (docs: Mathematics §3).

    Each step is an adaptive Diffrax solve forward in s (0 → 1) and backward (1 → 0)
    with dense output, so that later steps evaluate h_k(s), b_k(s) anywhere. Every
    step runs one compiled program (the earlier steps' solutions are passed in stacked
    slots with a traced count), so `steps` does not multiply the compile time.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    tols = as_number(rtol), as_number(atol)
    if not all(isinstance(t, int | float) and math.isfinite(t) and t > 0 for t in tols):
        raise ValueError(f"rtol and atol must be finite numbers > 0, got rtol={rtol}, atol={atol}")
    # tolerances are traced values: solves that differ only in them share one program
    rtol_a, atol_a = (jnp.asarray(t, dtype=float) for t in tols)
    if steps == 0:
        f, b = _solve_step(model, None, 0, rtol_a, atol_a, solver)
        return MeanODESolution(model=model, forward=(f,), backward=(b,))
    # every step's solve is one program: the solutions of the earlier steps sit in
    # `steps` stacked slots (zeros until solved) and a traced count says how many count
    # (non-array leaves, such as diffrax's `max_steps` statistic, stay as they are); the
    # shapes of a solution do not depend on its vector field: traced with a trivial one
    state = jax.ShapeDtypeStruct(model.xs.shape, model.xs.dtype)
    shapes = _solution_shapes(state, jax.ShapeDtypeStruct((), rtol_a.dtype), solver)
    is_array = lambda x: isinstance(x, jax.ShapeDtypeStruct)
    slots = jax.tree.map(
        lambda x: np.zeros((steps,) + x.shape, x.dtype) if is_array(x) else x, shapes
    )
    forward, backward = [], []
    for k in range(steps + 1):
        f, b = _solve_step(model, slots, jnp.asarray(k), rtol_a, atol_a, solver)
        forward.append(f)
        backward.append(b)
        if k < steps:
            slots = _set_slot(slots, jnp.asarray(k), (f, b))
    return MeanODESolution(model=model, forward=tuple(forward), backward=tuple(backward))
