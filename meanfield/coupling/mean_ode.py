"""Coupling a finite ResNet with its mean-ODE limit, particle by particle (docs: Mathematics §3).

Finite unit (j, l) starts at the same draw as its limit copy, `Z_0^{j,l}(s) ≡ Ẑ_0^{j,l}`.
The finite network is trained by GD in the mean-ODE convention; the limit copy is
evolved by the *limit* update with the limit mean fields. After k steps:

    Δ_k^h = max_{l, i} ‖h_k(l/L; x_i) − ĥ_k^l(x_i)‖        (l = 0..L)
    Δ_k^b = max_{l, i} ‖b_k(l/L; x_i) − b̂_k^l(x_i)‖        (l = 0..L)
    Δ_k^Z = max_{j, l} ‖Z_k^{j,l}(l/L) − Ẑ_k^{j,l}‖         (l = 1..L)

The depth point of unit layer l is s_l = l/L, for the three errors (the documentation's
definition); the norm of Z is the Euclidean norm over all its leaves.

The limit enters only through its mean fields on the grid s = l/L
(`LimitOnGrid`), so one reference serves every (L, M) and every seed.
"""

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import jax.random as jr
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from .._validation import as_number, check_finite_array, check_key, check_positive_int
from ..blocks.base import AbstractUnitBlock, WeightedUnits
from ..laws.unit import AbstractGaussianLaw, AbstractLaw, as_law
from ..limits.mean_ode import MeanODESolution
from ..limits.particles import Particles, particle_gradients
from ..models.resnet import ResNet
from ..training.loop import gd_loop, squared_loss
from ..training.resnet import loss_and_gradients, mean_ode_sgd, train


class LimitOnGrid(eqx.Module):
    """The limit's mean fields at s = l/L, l = 0..L, for steps 0..k.

    - `h`, `b`: `(k + 1, L + 1, n, d)`.
    - `learning_rate`, `loss`: those the limit was trained with (`limit_on_grid` records
      the `MeanODE`'s; None, the default, where unknown, as for a grid built by hand).
      Where they are known, `coupled_errors` and `euler_errors` refuse another learning
      rate or loss (the errors would measure the distance between two different GD
      dynamics), and use the grid's loss when given none.
    """

    h: Float[Array, "k+1 L+1 n d"]
    b: Float[Array, "k+1 L+1 n d"]
    learning_rate: float | None = eqx.field(static=True, default=None)
    loss: Callable | None = eqx.field(static=True, default=None)

    @property
    def L(self) -> int:
        return self.h.shape[1] - 1

    @property
    def steps(self) -> int:
        return self.h.shape[0] - 1


def limit_on_grid(solution: MeanODESolution, L: int) -> LimitOnGrid:
    """Evaluate a solved limit at s = l/L, l = 0..L, for every step (one compiled call
    per L): what `coupled_errors` compares a depth-L network with.

        limit = solve_mean_ode(MeanODE(block, particles, xs, ys, learning_rate), steps)
        grid = limit_on_grid(limit, L)           # grid.h, grid.b: (steps + 1, L + 1, n, d)
    """
    check_positive_int(L, "L")
    h, b = solution.fields(jnp.arange(L + 1) / L)
    model = solution.model
    return LimitOnGrid(h=h, b=b, learning_rate=model.learning_rate, loss=model.loss)


def _tree_norm(tree: PyTree, lead: int) -> Array:
    """Euclidean norm over all trailing axes and leaves, keeping `lead` leading axes."""
    sq = [
        jnp.sum(jnp.reshape(x, x.shape[:lead] + (-1,)) ** 2, axis=-1) for x in jax.tree.leaves(tree)
    ]
    return jnp.sqrt(sum(sq))


def _layer_gradients(block: AbstractUnitBlock, z: PyTree, hs: Array, bs: Array) -> PyTree:
    """`particle_gradients` of every layer's units: `z` leaves `(L, N, ...)`, layer l
    with the states `hs[l]` (h^{l-1}) and `bs[l]` (b^l), each `(n, d)`."""
    return jax.vmap(lambda zl, h, b: particle_gradients(block, zl, h, b))(z, hs, bs)


def limit_copies(
    block: AbstractUnitBlock, z0: PyTree, grid: LimitOnGrid, learning_rate: float
) -> PyTree:
    """`Z_k^{j,l}(l/L)` for k = 0..steps from the draws `z0` (leaves `(L, M, ...)`): the
    limit's GD step with the limit's mean fields at s = l/L (`particle_gradients`), run
    by the one GD loop (`gd_loop`, plain SGD at rate η).

    Returns the history with a leading step axis, like `TrainResult.params`.
    """

    def grad_fn(z, k):
        hs, bs = grid.h[k, 1:], grid.b[k, 1:]  # layer l uses s = l/L, l = 1..L
        return _layer_gradients(block, z, hs, bs), None

    history, _ = gd_loop(grad_fn, z0, optax.sgd(learning_rate), grid.steps, last=False)
    return history


class CoupledErrors(eqx.Module):
    """Δ^h, Δ^b, Δ^Z for steps 0..k (each `(k + 1,)`), and the finite losses."""

    delta_h: Float[Array, " k+1"]
    delta_b: Float[Array, " k+1"]
    delta_z: Float[Array, " k+1"]
    loss: Float[Array, " k+1"]


def _state_errors(adjoint, grid: LimitOnGrid):
    """Δ^h, Δ^b per step from forward/backward states with leaves `(k+1, n, L+1, d)`."""
    hs, bs = jnp.swapaxes(adjoint.h, 1, 2), jnp.swapaxes(adjoint.b, 1, 2)  # (k+1, L+1, n, d)
    dh = jnp.max(jnp.linalg.norm(hs - grid.h, axis=-1), axis=(1, 2))
    db = jnp.max(jnp.linalg.norm(bs - grid.b, axis=-1), axis=(1, 2))
    return dh, db


def _limit_loss(grid: LimitOnGrid, learning_rate, loss) -> Callable:
    """The loss to train with (the grid's by default); refuses a learning rate or loss
    other than those the limit was solved with, where the grid records them."""
    lr = as_number(learning_rate)
    if (
        grid.learning_rate is not None
        and isinstance(lr, int | float)  # a traced rate goes unchecked
        and not math.isclose(lr, grid.learning_rate, rel_tol=1e-6)
    ):
        raise ValueError(
            f"learning_rate must be the limit's ({grid.learning_rate!r}, the MeanODE's), "
            f"got {learning_rate!r}"
        )
    if loss is None:
        return squared_loss if grid.loss is None else grid.loss
    if grid.loss is not None and loss is not grid.loss:
        raise ValueError(
            f"loss must be the function the limit was solved with ({_name(grid.loss)}, the "
            f"MeanODE's), got {_name(loss)}"
        )
    return loss


def _name(f) -> str:
    return getattr(f, "__qualname__", None) or repr(f)


def _check_coupling(net: ResNet, xs, grid: LimitOnGrid, learning_rate, depth, width) -> None:
    """One-line errors for inputs that would otherwise give numbers without a meaning."""
    n, d = jnp.shape(xs)
    for name, value in (("xs", xs), ("grid.h", grid.h), ("grid.b", grid.b)):
        check_finite_array(value, name)  # concrete values; traced ones pass
    if grid.h.shape != grid.b.shape or grid.h.shape[2:] != (n, d):
        raise ValueError(
            f"grid: h and b must have shape (k + 1, L + 1, n, d) with (n, d) = {(n, d)} "
            f"(the inputs'), got {grid.h.shape} and {grid.b.shape}"
        )
    # 1/(LM) to float32 rounding (an α held as a float32 array: 1 + 3e-8 at L 4, M 3)
    if not math.isclose(float(net.alpha) * net.L * net.M, 1.0, rel_tol=1e-6):
        raise ValueError(
            f"net: the coupling is for the mean-ODE scaling α = 1/(LM) = {1 / (net.L * net.M)!r}"
            f", got α = {net.alpha!r}"
        )
    lr = as_number(learning_rate)
    if isinstance(lr, bool) or not isinstance(lr, int | float | jax.Array):
        raise ValueError(f"learning_rate must be a finite number, got {learning_rate!r}")
    if isinstance(lr, int | float) and not (math.isfinite(lr) and lr >= 0):  # not traced
        raise ValueError(f"learning_rate must be a finite number >= 0, got {learning_rate!r}")
    for name, value, most in (("depth", depth, net.L), ("width", width, net.M)):
        value = as_number(value)
        if isinstance(value, int) and not 1 <= value <= most:  # traced values go unchecked
            raise ValueError(f"{name} must be in 1..{most} (the network's), got {value}")


def coupled_errors(
    net: ResNet,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    grid: LimitOnGrid,
    *,
    learning_rate: float,
    loss=None,
    depth: int | Int[Array, ""] | None = None,
    width: int | Int[Array, ""] | None = None,
) -> CoupledErrors:
    """Train the finite network for `grid.steps` GD steps (mean-ODE convention) and
    measure its distance to the limit and to the limit copies of its own units.

    **Padding.** With `depth` and/or `width` (Python or traced integers), `net` holds a
    depth-`depth`, width-`width` network in the corner `[:depth, :width]` of its
    `(L, M)` units, and the rest is padding: padded units carry weight 0 (they add
    nothing, receive no gradient and are left out of Δ^Z), so layers beyond `depth` are
    the identity, and the real units are weighted so that the network has
    `α = net.alpha · L·M / (depth·width) = 1/(depth·width)`, the mean-ODE scaling of the
    real network (`net.alpha` must be 1/(LM), as without padding). `grid` must then
    have `L + 1` rows, its rows beyond `depth` equal to row `depth` (the limit at
    s = 1); with that, Δ^h and Δ^b are those of the real network. One compiled program
    thus serves every `depth <= L`, `width <= M` (this is how `meanfield study mean-ode`
    keeps its number of programs low); the result equals the unpadded computation up
    to rounding.

    `learning_rate`, `loss`: η (mean-ODE convention) and `loss(y, prediction)` of the GD
    steps, those of the limit (default loss: the grid's, else `½‖prediction − y‖²`); a
    grid from `limit_on_grid` knows the limit's and refuses others.

    The training runs the network's own depth loop (`net.loop`); with the fused
    kernels (`FusedLoop`) a 2LP network, padded or not, trains through them.
    """
    if net.L != grid.L:
        raise ValueError(f"the network has L={net.L} but the limit grid has L={grid.L}")
    _check_coupling(net, xs, grid, learning_rate, depth, width)
    check_finite_array(ys, "ys")
    block = net.block
    if not isinstance(block, AbstractUnitBlock):
        raise ValueError(f"net must have a unit block (the mean ODE's), got {type(block).__name__}")
    loss = _limit_loss(grid, learning_rate, loss)
    padded = depth is not None or width is not None
    depth = net.L if depth is None else depth
    width = net.M if width is None else width
    model, mask = net, None
    if padded:
        dtype = jax.tree.leaves(net.params)[0].dtype
        mask = (jnp.arange(net.L)[:, None] < depth) & (jnp.arange(net.M)[None, :] < width)
        scale = jnp.asarray(net.L * net.M, dtype) / (depth * width)
        weights = jnp.where(mask, scale, 0).astype(dtype)
        model = ResNet(WeightedUnits(block), (net.params, weights), net.alpha, loop=net.loop)
    result = train(
        model,
        xs,
        ys,
        optimizer=mean_ode_sgd(learning_rate, L=depth, M=width),
        steps=grid.steps,
        loss=loss,
        return_adjoint=True,
    )
    assert result.adjoint is not None  # return_adjoint=True
    dh, db = _state_errors(result.adjoint, grid)
    trained = result.params[0] if padded else result.params
    # the copies start from the units the training history holds at step 0, not from
    # `net.params`: XLA may compute a draw made in the same program twice (two fusions,
    # rounded differently), and Z_0 = Ẑ_0 must hold exactly
    copies = limit_copies(block, jax.tree.map(lambda a: a[0], trained), grid, learning_rate)
    dz = _tree_norm(jax.tree.map(jnp.subtract, copies, trained), 3)  # (k+1, L, M)
    if mask is not None:
        dz = jnp.where(mask, dz, 0)
    return CoupledErrors(
        delta_h=dh, delta_b=db, delta_z=jnp.max(dz, axis=(1, 2)), loss=result.losses
    )


def draw_units(law: AbstractLaw, key: PRNGKeyArray, L: int, M: int) -> PyTree:
    """L·M unit draws from `law` (leaves `(L, M, ...)`) such that unit (l, j) depends on
    `(key, l, j)` only, not on `L` or `M`.

    For an `AbstractGaussianLaw`, layer l uses `jr.normal(jr.fold_in(key, l), (M, p))`
    (p Gaussian coordinates); with JAX's partitionable threefry
    (`jax_threefry_partitionable`, the default since JAX 0.5, which `pyproject.toml`
    requires) the first rows of a larger draw are the smaller draw, so a network drawn
    inside a padded array (see `coupled_errors`) has exactly the units it would have on
    its own. With that flag turned off the draws are still i.i.d. from `law`, but they
    change with the array's shape. Any other law samples unit (l, j) from the key
    `fold_in(fold_in(key, l), j)`.
    """
    check_key(key)
    law = as_law(law)
    if isinstance(law, AbstractGaussianLaw):
        g = jax.vmap(lambda l: jr.normal(jr.fold_in(key, l), (M, law.gaussian_dim)))(jnp.arange(L))
        return jax.vmap(jax.vmap(law.transform))(g)

    def layer(l):
        keys = jax.vmap(lambda j: jr.fold_in(jr.fold_in(key, l), j))(jnp.arange(M))
        return jax.vmap(law.sample)(keys)

    return jax.vmap(layer)(jnp.arange(L))


@eqx.filter_jit
def _euler_errors(block, particles, xs, ys, grid, *, learning_rate, probes, loss=None, depth=None):
    """`euler_errors` compiled (its arguments, typed there): one program per depth (or
    padded depth) and particle count."""
    loss = _limit_loss(grid, learning_rate, loss)
    L = grid.L
    n_probe = jax.tree.leaves(probes)[0].shape[0]
    tile = lambda a: jnp.broadcast_to(a, (L,) + a.shape)
    z0 = jax.tree.map(lambda a, b: tile(jnp.concatenate([a, b])), particles.z, probes)
    w = tile(jnp.concatenate([particles.weights, jnp.zeros(n_probe)]))
    layers = None
    if depth is not None:  # layers beyond `depth` weigh 0 (the identity); α = 1/depth
        layers = jnp.arange(L) < depth
        w = jnp.where(layers[:, None], w * (jnp.asarray(L, w.dtype) / depth), 0).astype(w.dtype)
    # built once: in the loop only its units change (`ResNet.with_params`: the moving units are
    # not checked for NaN, a result, not an input, where `jax.disable_jit` runs the loop)
    base = ResNet(WeightedUnits(block), (z0, w), 1.0 / L)

    # each particle moves by its own gradient (weights aside: a probe of weight zero
    # moves too), skipped after the last step, where only the states are kept
    def grad_fn(z, k):
        g = loss_and_gradients(base.with_params((z, w)), xs, ys, loss)
        h, b = jnp.swapaxes(g.adjoint.h, 0, 1), jnp.swapaxes(g.adjoint.b, 0, 1)  # (L+1, n, d)
        grads = lax.cond(
            k < grid.steps,
            lambda: _layer_gradients(block, z, h[:-1], b[1:]),
            lambda: jax.tree.map(jnp.zeros_like, z),
        )
        return grads, (g.adjoint, g.loss)

    history, (adjoints, losses) = gd_loop(grad_fn, z0, optax.sgd(learning_rate), grid.steps)
    dh, db = _state_errors(adjoints, grid)
    probe_hist = jax.tree.map(lambda a: a[:, :, -n_probe:], history)
    copies = limit_copies(block, jax.tree.map(lambda a: a[0], probe_hist), grid, learning_rate)
    dz = _tree_norm(jax.tree.map(jnp.subtract, copies, probe_hist), 3)  # (k+1, L, P)
    if layers is not None:  # the padded layers' probes are no units of the network
        dz = jnp.where(layers[None, :, None], dz, 0)
    return CoupledErrors(delta_h=dh, delta_b=db, delta_z=jnp.max(dz, axis=(1, 2)), loss=losses)


def euler_errors(
    block: AbstractUnitBlock,
    particles: Particles,
    xs: Float[Array, "n d"],
    ys: Float[Array, "n d"],
    grid: LimitOnGrid,
    *,
    learning_rate: float,
    probes: PyTree,
    loss=None,
    depth: int | Int[Array, ""] | None = None,
) -> CoupledErrors:
    """The discretisation part of the error: the finite recursion run with the limit's
    own particles at every layer (depth-constant units, α = 1/L, GD per particle in the
    mean-ODE convention) against the limit solved with the same particles.

    **Padding.** With `depth` (a Python or traced integer at most `grid.L`), the
    recursion of that depth runs inside the grid's `L` layers: the layers beyond it are
    the identity (their particles weigh 0) and the others weigh `L/depth` (so that
    α = 1/depth), and Δ^Z is taken over the first `depth` layers; `grid` must then have
    its rows beyond `depth` equal to row `depth` (`design.pad_grid`). One compiled program
    thus serves every depth up to `L` (`meanfield study mean-ode` on a CPU); the result
    equals the unpadded one up to rounding.

    `probes` (leaves with a leading axis P) are extra units of weight zero: they do not
    move the network, they are trained like every unit, and Δ^Z is measured on them
    (the quadrature nodes themselves reach far into the tails, where the max over
    units would say nothing about typical units).

    Compiled (`eqx.filter_jit`): one program per depth and particle count; concrete
    `particles`, `xs`, `ys`, `grid` and `probes` must be finite (a one-line error naming
    the first NaN or inf), checked before the compiled call. `euler_errors.lower(...)`
    compiles it ahead, as for any `eqx.filter_jit` function.
    """
    for name, value in (
        ("particles", particles),
        ("xs", xs),
        ("ys", ys),
        ("grid.h", grid.h),
        ("grid.b", grid.b),
        ("probes", probes),
    ):
        check_finite_array(value, name)  # concrete values; traced ones pass
    if isinstance(depth, int) and not 1 <= depth <= grid.L:
        raise ValueError(f"depth: must be in 1..{grid.L} (the grid's L), got {depth}")
    return _euler_errors(
        block, particles, xs, ys, grid, learning_rate=learning_rate, probes=probes, loss=loss,
        depth=depth,
    )  # fmt: skip


# compile ahead, as for the `eqx.filter_jit` function it calls (study mean-ode does)
euler_errors.lower = _euler_errors.lower  # pyright: ignore[reportFunctionMemberAccess]
