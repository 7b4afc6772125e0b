"""The high-dimensional two-layer perceptron of Chaintron's "ResNets of all shapes and sizes"
and its two limits (docs: Mathematics §6).

The network (M units, embedding dimension D, frozen `W_in`, `W_out`):

    h^0(x) = W_in x,   P^j(x) = ⟨u^j, h^0(x)⟩_D,   h(x) = (1/M) Σ_j ρ(P^j(x)) v^j ∈ R^D,
    f(x) = W_outᵀ h(x) / D,     u^j, v^j ∈ R^D with entries N(0, s_u² D), N(0, s_v² D),

trained by GD on `𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` in the seed's convention
`u ← u − η_u·D·M·∇_u 𝓛`, `v ← v − η_v·D·M·∇_v 𝓛`.

**The reduction.** With `a^j = W_outᵀ v^j / D ∈ R^{d_out}` and `p^j = (P^j(x_i))_i ∈ R^n`,

    f(x_m) = (1/M) Σ_j ρ(p^j_m) a^j,      g_i = f(x_i) − y_i,
    Δa^j   = −η_v (1/n) Σ_i ρ(p^j_i) G_out g_i,
    Δp^j_m = −η_u (1/n) Σ_i ρ'(p^j_i) (a^j · g_i) G_in[i, m],

with `G_in = (⟨h^0(x_i), h^0(x_m)⟩_D)` and `G_out = W_outᵀ W_out / D`: the network *is* a
system of M particles `(p^j, a^j)` in `R^{n + d_out}`, drawn from
`N(0, s_u² G_in) ⊗ N(0, s_v² G_out)`, and the draw of `(W_in, W_out)` enters only through
the two Gram matrices (tested against the network in R^D, to rounding). Hence

* the **fixed-D mean-field limit** (M → ∞ at the same `W_in`, `W_out`, the seed's
  "neural-mean equation") is the same recursion with the mean over units replaced by the
  expectation over that Gaussian law: an `(n + d_out)`-dimensional Gaussian integral,
  computed here by tensor Gauss–Hermite quadrature (Monte Carlo beyond 4 dimensions), its
  error estimated by a second rule. Its hidden field is
  `h_k(x) = W_out (G_out⁻¹ E[ρ(p_k) a_0] + E[ρ(p_k) c_k])` where `v_k = v_0 + W_out c_k`
  (the part of `v_0` outside the span of `W_out` averages out: `E[v_0 | a_0] =
  W_out G_out⁻¹ a_0`, Stein's lemma / Gaussian conditioning);
* the **D → ∞ limit** (the seed's skeleton maps and cavity method) is the same recursion
  at the Grams' limits `G_in → σ_in² X Xᵀ`, `G_out → σ_out² I`: the coefficients
  `(F_k, G_k)` of the updates `ΔU_k = F_k · h^0`, `ΔV_k = G_k · W_out ∇𝓛` are the skeleton
  maps, `(p_0, a_0)` the Gaussian cavity fields `(Z^h, Z^b)`, and coordinate d of the
  hidden field tends to `H_k^d = W_out^d · c^∞_k`. The fixed-D limit differs from it
  through the Grams' fluctuations, O(D^{-1/2}).

The output error of a finite network against its fixed-D limit is therefore a
Monte-Carlo error over M particles in a D-independent dimension (~ 1/sqrt(M), the seed's
bound sqrt(D/M) is not attained by the outputs), while its hidden field carries the part
of each `v^j` outside the span of `W_out`, of RMS `s_v sqrt(D)`, whence
`‖ĥ − h‖_D ~ sqrt(D/M)`; `meanfield study two-layer` measures both.
"""

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from ._validation import check_finite_array
from .activations import resolve_activation
from .embedding import Embedding, norm_d, sample_units
from .training import gd_loop

MAX_NODES = 2**20  # a quadrature rule larger than this is refused (use Monte Carlo)


def check_data(xs, ys) -> tuple[jax.Array, jax.Array]:
    """Inputs `xs` (n, d_in) and targets `ys` (n, d_out), finite; one-line errors otherwise."""
    xs, ys = jnp.asarray(xs), jnp.asarray(ys)
    if xs.ndim != 2:
        raise ValueError(f"xs: must have shape (n, d_in), got {xs.shape}")
    if ys.ndim != 2 or ys.shape[0] != xs.shape[0]:
        raise ValueError(f"ys: must have shape (n, d_out) with n = {xs.shape[0]}, got {ys.shape}")
    _check_finite(xs=xs, ys=ys)
    return xs, ys


def _check_finite(**arrays) -> None:
    """`name: contains NaN or inf (...)` for the first concrete argument holding one
    (traced ones, under `jit`, `vmap`, `grad`, pass: no host round trip there)."""
    for name, value in arrays.items():
        check_finite_array(value, name, colon=True)


class Perceptron(eqx.Module):
    """The two-layer perceptron of Chaintron's "ResNets of all shapes and sizes" on a frozen
    embedding (module docstring).

    `u`, `v`: arrays (M, D) (`u[j]` is unit j's input weights, `v[j]` its output ones).
    Concrete arrays (the embedding's too, and the inputs `xs` of every method) must be
    finite: a one-line error naming the first NaN or inf.
    """

    embedding: Embedding
    u: jax.Array
    v: jax.Array
    activation: Callable = eqx.field(static=True)

    def __check_init__(self):
        _check_finite(embedding=self.embedding, u=self.u, v=self.v)

    @classmethod
    def sample(
        cls,
        key,
        *,
        M: int,
        D: int,
        d_in: int,
        d_out: int,
        activation: str | Callable = "tanh",
        s_u: float = 1.0,
        s_v: float = 1.0,
        sigma_in: float = 1.0,
        sigma_out: float = 1.0,
    ) -> "Perceptron":
        """Draw the embedding and M units (entries N(0, s_u² D), N(0, s_v² D))."""
        emb, u, v = sample_units(
            key, {"M": M}, D=D, d_in=d_in, d_out=d_out, s_u=s_u, s_v=s_v,
            sigma_in=sigma_in, sigma_out=sigma_out,
        )  # fmt: skip
        return cls(emb, u, v, resolve_activation(activation))

    @property
    def M(self) -> int:
        return self.u.shape[0]

    def preactivations(self, xs):
        """`P^j(x_i) = ⟨u^j, h^0(x_i)⟩_D`, shape (n, M): a matrix product."""
        _check_finite(xs=xs)
        return self.embedding.embed(xs) @ self.u.T / self.embedding.D

    def hidden(self, xs):
        """`h(x_i) = (1/M) Σ_j ρ(P^j(x_i)) v^j`, shape (n, D)."""
        return self.activation(self.preactivations(xs)) @ self.v / self.M

    def __call__(self, xs):
        """`f(x_i)`, shape (n, d_out)."""
        return self.embedding.readout(self.hidden(xs))


def loss(net: Perceptron, xs, ys):
    """`𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²`."""
    return 0.5 * jnp.mean(jnp.sum((net(xs) - ys) ** 2, axis=-1))


def train(net: Perceptron, xs, ys, *, lr_u: float, lr_v: float, steps: int):
    """`steps` GD steps in the seed's convention (`η · D · M · ∇`; `W_in`, `W_out` frozen),
    through `meanfield.gd_loop`.

    **Returns:** `(nets, outputs, hidden)`: the units `(u, v)` before step k = 0..steps
    (arrays with a leading axis of steps + 1), the outputs (steps + 1, n, d_out) and the
    hidden fields (steps + 1, n, D) after k updates.
    """
    _check_finite(xs=xs, ys=ys, lr_u=lr_u, lr_v=lr_v)
    D, M = net.embedding.D, net.M
    scale = {"u": lr_u * D * M, "v": lr_v * D * M}

    def with_units(theta):
        return eqx.tree_at(lambda n: (n.u, n.v), net, (theta["u"], theta["v"]))

    def grad_fn(theta, k):
        grads = jax.grad(lambda t: loss(with_units(t), xs, ys))(theta)
        current = with_units(theta)
        return {name: scale[name] * g for name, g in grads.items()}, (
            current(xs),
            current.hidden(xs),
        )

    thetas, (outputs, hidden) = gd_loop(grad_fn, {"u": net.u, "v": net.v}, optax.sgd(1.0), steps)
    return thetas, outputs, hidden


# ---------------------------------------------------------------- the reduced particles


class ParticleLimit(eqx.Module):
    """The outcome of `particle_dynamics`: `outputs` (K+1, n, d_out) after k updates,
    `hidden_coef` (K+1, n, d_out): the hidden field is `h_k(x_m) = W_out @ hidden_coef[k, m]`
    (for a weighted particle set standing for the Gaussian law), `preactivations`
    (K+1, N, n): every particle's `p_k`."""

    outputs: jax.Array
    hidden_coef: jax.Array
    preactivations: jax.Array


def particle_dynamics(
    p0, a0, weights, g_in, g_out, ys, activation, *, lr_u, lr_v, steps: int
) -> ParticleLimit:
    """The reduced GD recursion (module docstring) for particles `p0` (N, n), `a0`
    (N, d_out) with `weights` (N,) summing to one: the finite network with weights 1/M, a
    limit with quadrature or Monte-Carlo weights. Compiled once per shape, activation and
    number of steps (the learning rates are traced); concrete arrays and rates must be
    finite (checked before the compiled call)."""
    _check_finite(
        p0=p0, a0=a0, weights=weights, g_in=g_in, g_out=g_out, ys=ys, lr_u=lr_u, lr_v=lr_v
    )
    return _particle_dynamics(
        p0, a0, weights, g_in, g_out, ys, activation, lr_u=lr_u, lr_v=lr_v, steps=steps
    )


@functools.partial(jax.jit, static_argnames=("activation", "steps"))
def _particle_dynamics(
    p0, a0, weights, g_in, g_out, ys, activation, *, lr_u, lr_v, steps: int
) -> ParticleLimit:
    """`particle_dynamics`, compiled."""
    rho = resolve_activation(activation)
    drho = jax.vmap(jax.vmap(jax.grad(rho)))
    n = ys.shape[0]
    g_out_inv = jnp.linalg.inv(g_out)

    def step(carry, _):
        p, a, c = carry
        act = rho(p)  # (N, n)
        f = jnp.einsum("j,jm,jo->mo", weights, act, a)
        coef = jnp.einsum("j,jm,jo->mo", weights, act, a0 @ g_out_inv + c)
        g = f - ys  # (n, d_out)
        dc = -lr_v / n * act @ g  # (N, d_out): v += W_out dc
        dp = -lr_u / n * (drho(p) * (a @ g.T)) @ g_in  # (N, n)
        return (p + dp, a + dc @ g_out, c + dc), (f, coef, p)

    c0 = jnp.zeros_like(a0)
    _, (f, coef, ps) = jax.lax.scan(step, (p0, a0, c0), None, length=steps + 1)
    return ParticleLimit(f, coef, ps)


def reduce(net: Perceptron, xs):
    """The particles `(p^j, a^j)` of a network at inputs `xs`: arrays (M, n), (M, d_out)."""
    return net.preactivations(xs).T, net.embedding.readout(net.v)


def _root(cov, tol: float = 1e-12):
    """A square root `R` (dim × rank) of a PSD `cov` with `R Rᵀ = cov`, dropping
    directions whose eigenvalue is below `tol` times the largest."""
    w, q = np.linalg.eigh(np.asarray(cov, dtype=float))
    keep = w > tol * max(w.max(), 0.0)
    return q[:, keep] * np.sqrt(w[keep])


def gaussian_nodes(g_in, g_out, *, s_u: float, s_v: float, order: int):
    """Tensor Gauss–Hermite nodes and weights for `(p_0, a_0) ~ N(0, s_u² G_in) ⊗
    N(0, s_v² G_out)`: arrays (N, n), (N, d_out), (N,). Directions where `G_in` is
    singular (inputs spanning fewer than n dimensions) are not integrated over."""
    _check_finite(g_in=g_in, g_out=g_out, s_u=s_u, s_v=s_v)
    r_in, r_out = s_u * _root(g_in), s_v * _root(g_out)
    dims = r_in.shape[1] + r_out.shape[1]
    if order**dims > MAX_NODES:
        raise ValueError(
            f"order: {order}^{dims} quadrature nodes exceed {MAX_NODES}; use Monte Carlo"
        )
    x, w = np.polynomial.hermite_e.hermegauss(order)
    grids = np.meshgrid(*([x] * dims), indexing="ij")
    z = np.stack([g.ravel() for g in grids], axis=-1)
    weights = np.prod(np.meshgrid(*([w] * dims), indexing="ij"), axis=0).ravel()
    weights = weights / weights.sum()
    k = r_in.shape[1]
    return (
        jnp.asarray(z[:, :k] @ r_in.T),
        jnp.asarray(z[:, k:] @ r_out.T),
        jnp.asarray(weights),
    )


def monte_carlo_nodes(key, g_in, g_out, *, s_u: float, s_v: float, particles: int):
    """`particles` i.i.d. draws of `(p_0, a_0)` with equal weights (as `gaussian_nodes`)."""
    _check_finite(g_in=g_in, g_out=g_out, s_u=s_u, s_v=s_v)
    r_in, r_out = s_u * _root(g_in), s_v * _root(g_out)
    k1, k2 = jr.split(key)
    z_in = jr.normal(k1, (particles, r_in.shape[1]))
    z_out = jr.normal(k2, (particles, r_out.shape[1]))
    return (
        z_in @ jnp.asarray(r_in.T),
        z_out @ jnp.asarray(r_out.T),
        jnp.full(particles, 1 / particles),
    )


class Limit(eqx.Module):
    """A limit's outputs (K+1, n, d_out), hidden-field coefficients (K+1, n, d_out)
    (`h_k(x_m) = W_out @ hidden_coef[k, m]`), and the estimate of its own error in each
    (the largest difference with a second, finer rule)."""

    outputs: jax.Array
    hidden_coef: jax.Array
    error_outputs: float
    error_hidden: float
    method: str = eqx.field(static=True)


def gaussian_limit(
    g_in,
    g_out,
    ys,
    *,
    activation: str | Callable = "tanh",
    s_u: float = 1.0,
    s_v: float = 1.0,
    lr_u: float,
    lr_v: float,
    steps: int,
    order: int | None = None,
) -> Limit:
    """The mean-field limit of the reduced particles for the Grams `g_in`, `g_out`: the
    fixed-D limit at a draw's Grams (`Embedding.grams`), the D → ∞ limit at theirs
    (`infinite_d_grams`). Quadrature of `order` nodes per dimension (default: 64 for up to
    three dimensions, 20 for four), its error estimated against
    `order + order // 2` nodes; beyond 4 dimensions refused (use `monte_carlo_nodes` with
    `particle_dynamics` and the spread over draws)."""
    _check_finite(g_in=g_in, g_out=g_out, ys=ys, s_u=s_u, s_v=s_v, lr_u=lr_u, lr_v=lr_v)
    g_in, g_out = np.asarray(g_in), np.asarray(g_out)
    dims = _root(g_in).shape[1] + _root(g_out).shape[1]
    if dims > 4:
        raise ValueError(
            f"g_in, g_out: {dims} Gaussian dimensions (> 4) for tensor quadrature; "
            "use monte_carlo_nodes with particle_dynamics"
        )
    if order is None:
        order = {1: 64, 2: 64, 3: 64, 4: 20}[dims]
    ys = jnp.asarray(ys)

    def solve(q):
        p0, a0, w = gaussian_nodes(g_in, g_out, s_u=s_u, s_v=s_v, order=q)
        return _particle_dynamics(  # its arrays checked above
            p0, a0, w, jnp.asarray(g_in), jnp.asarray(g_out), ys, activation,
            lr_u=lr_u, lr_v=lr_v, steps=steps,
        )  # fmt: skip

    coarse, fine = solve(order), solve(order + order // 2)
    return Limit(
        fine.outputs,
        fine.hidden_coef,
        float(jnp.max(jnp.abs(fine.outputs - coarse.outputs))),
        float(jnp.max(jnp.abs(fine.hidden_coef - coarse.hidden_coef))),
        f"Gauss-Hermite {order + order // 2}^{dims} (error vs {order}^{dims})",
    )


def infinite_d_grams(xs, d_out: int, sigma_in: float = 1.0, sigma_out: float = 1.0):
    """The Grams' D → ∞ limits `σ_in² X Xᵀ` and `σ_out² I`."""
    _check_finite(xs=xs, sigma_in=sigma_in, sigma_out=sigma_out)
    xs = jnp.asarray(xs)
    return sigma_in**2 * xs @ xs.T, sigma_out**2 * jnp.eye(d_out, dtype=xs.dtype)


def output_error(f_hat, f):
    """The seed's `max_i |f̂(x_i) − f(x_i)|`, with the RMS over output coordinates for a
    vector output: arrays (..., n, d_out) -> (...)."""
    return jnp.max(jnp.sqrt(jnp.mean((f_hat - f) ** 2, axis=-1)), axis=-1)


def hidden_error(h_hat, h):
    """`max_i ‖ĥ(x_i) − h(x_i)‖_D`: arrays (..., n, D) -> (...)."""
    return jnp.max(norm_d(h_hat - h), axis=-1)
