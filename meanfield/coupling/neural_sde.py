"""Strong errors of finite matrix ResNets against their neural SDE / Young / ODE limit solved
on the same path (`strong_errors`)."""

from collections.abc import Callable, Sequence

import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from .._validation import check_finite_array
from ..laws.depth import BrownianLaw, FractionalBrownianLaw, SmoothGPLaw
from ..limits.neural_sde import NeuralODE, NeuralSDE, limit_beta
from ..models.matrix import matrix_resnet


def strong_errors(
    law: BrownianLaw | FractionalBrownianLaw | SmoothGPLaw,
    x: Float[Array, " d"],
    depths: Sequence[int],
    *,
    key: PRNGKeyArray,
    activation: str | Callable = "tanh",
    young_solver: str = "heun",
    rtol: float = 1e-10,
) -> dict[str, Array]:
    """For one path of `law` (drawn from `key`): the errors of the finite networks of
    every depth in `depths` against the limit solved on that same path, and the
    limit's own error.

    The network of depth L is `matrix_resnet(law.weights_from_path(path, L),
    limit_beta(law))`; the limit is Euler–Maruyama on the fine grid (Brownian: the
    Itô SDE), `young_solver` on the fine grid (fBm: the Young equation), or Dopri8 at
    `rtol` (smooth: the ODE). Its error is measured against the same solver on half
    the fine grid (Brownian, fBm) or at `rtol / 100` (smooth). Every depth must divide
    the largest, and for paths half the fine grid.

    **Returns:** `final` and `sup` `(len(depths),)`: `‖H_1 − h_L‖` and
    `max_k ‖H_{k/L} − h_k‖`; `check_final`, `check_sup`: the same distances between the
    reference and its check; `ok`; `solver_steps`.
    """
    check_finite_array(x, "x")  # concrete values; traced ones pass
    save = max(depths)
    if isinstance(law, SmoothGPLaw):
        model = NeuralODE(activation)
        path = law.path(key)
        ys, ok, steps = model.solve(path, x, save=save, rtol=rtol, atol=rtol)
        yc, okc, _ = model.solve(path, x, save=save, rtol=rtol / 100, atol=rtol / 100)
        ok = ok & okc
        weights = [law.weights_from_path(path, L) for L in depths]
    else:
        sde = NeuralSDE(activation)
        solver = "euler" if isinstance(law, BrownianLaw) else young_solver
        n = law.n_fine
        path = law.path(key)
        ref = sde.solve(path, x, steps=n, save=save, solver=solver)
        check = sde.solve(path, x, steps=n // 2, save=save, solver=solver)
        ys, yc, ok, steps = ref.ys, check.ys, ref.ok & check.ok, jnp.asarray(n)
        weights = [law.weights_from_path(path, L) for L in depths]
    beta = limit_beta(law)
    finals, sups = [], []
    for L, V in zip(depths, weights, strict=True):  # a handful of static depths
        net = matrix_resnet(V, beta, activation)
        err = jnp.linalg.norm(net.states(x[None])[0] - ys[:: save // L], axis=-1)
        finals.append(err[-1])
        sups.append(jnp.max(err))
    diff = jnp.linalg.norm(ys - yc, axis=-1)
    return {
        "final": jnp.stack(finals),
        "sup": jnp.stack(sups),
        "check_final": diff[-1],
        "check_sup": jnp.max(diff),
        "ok": ok,
        "solver_steps": steps,
    }
