"""Gradient descent on the two-layer perceptron on an embedding
(`meanfield.models.perceptron`), its units' learning rates scaled as in Chaintron's
seed."""

import equinox as eqx
import jax
import optax

from .._validation import check_finite_arguments
from ..models.perceptron import Perceptron, loss
from .loop import gd_loop


def _with_units(net: Perceptron, theta) -> Perceptron:
    return eqx.tree_at(lambda n: (n.u, n.v), net, (theta["u"], theta["v"]))


def train(net: Perceptron, xs, ys, *, lr_u: float, lr_v: float, steps: int, width=None):
    """`steps` GD steps in the seed's convention (`η · D · M · ∇`; `W_in`, `W_out` frozen),
    through `meanfield.gd_loop`. `width` (a Python or traced integer): `net` holds that
    many units in its first rows, zero beyond (`Perceptron.hidden`); it trains as that
    network, with `M = width`, and its padded rows stay zero.

    **Returns:** `(nets, outputs, hidden)`: the units `(u, v)` before step k = 0..steps
    (arrays with a leading axis of steps + 1), the outputs (steps + 1, n, d_out) and the
    hidden fields (steps + 1, n, D) after k updates.
    """
    check_finite_arguments(colon=True, xs=xs, ys=ys, lr_u=lr_u, lr_v=lr_v)
    D, M = net.embedding.D, net.M if width is None else width
    scale = {"u": lr_u * D * M, "v": lr_v * D * M}

    def grad_fn(theta, k):
        grads = jax.grad(lambda t: loss(_with_units(net, t), xs, ys, width))(theta)
        current = _with_units(net, theta)
        return {name: scale[name] * g for name, g in grads.items()}, (
            current(xs, width),
            current.hidden(xs, width),
        )

    thetas, (outputs, hidden) = gd_loop(grad_fn, {"u": net.u, "v": net.v}, optax.sgd(1.0), steps)
    return thetas, outputs, hidden


def flow(net: Perceptron, xs, ys, *, lr_u: float, lr_v: float, time: float, dt: float):
    """The seed's gradient flow `u̇ = −η_u·D·M·∇_u 𝓛`, `v̇ = −η_v·D·M·∇_v 𝓛` up to `time`,
    by Euler steps of size `dt` (`round(time / dt)` of them; GD at rates `η·dt`, through
    `meanfield.gd_loop` without its history: memory O(1) in the steps).

    **Returns:** the perceptron at `time`."""
    check_finite_arguments(colon=True, time=time, dt=dt)
    if not dt > 0 or not time >= 0:
        raise ValueError(f"time, dt: need time >= 0 and dt > 0, got {time!r}, {dt!r}")
    D, M = net.embedding.D, net.M
    scale = {"u": lr_u * D * M, "v": lr_v * D * M}

    def grad_fn(theta, k):
        grads = jax.grad(lambda t: loss(_with_units(net, t), xs, ys))(theta)
        return {name: scale[name] * g for name, g in grads.items()}, None

    theta, _ = gd_loop(
        grad_fn, {"u": net.u, "v": net.v}, optax.sgd(dt), round(time / dt), history=False
    )
    return _with_units(net, theta)
