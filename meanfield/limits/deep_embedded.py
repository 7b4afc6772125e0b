"""The joint L, M, D → ∞ limits of the deep ResNet on an embedding
(`meanfield.models.deep_embedded`; docs: Mathematics): the exact linear limit
(`linear_limit`) and the limit for any activation (`limit`: quadrature, Monte Carlo or
quasi-Monte Carlo over the units' Gaussian law)."""

import functools
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax import lax
from jaxtyping import Array, Float

from .._validation import check_finite_arguments
from ..blocks.activations import resolve_activation
from ..models.embedding import Embedding
from ..solvers import evaluate_many, solve_dense

# ---------------------------------------------------------------- the finite network


def basis_gram(embedding: Embedding) -> Float[Array, "p p"]:
    """`G = EᵀE / D` for `E = [W_in, W_out]` (p = d_in + d_out): the draw's Gram matrix,
    which makes `linear_limit` the fixed-D (L, M → ∞) limit at that draw."""
    e = jnp.concatenate([embedding.w_in, embedding.w_out], axis=1)
    return e.T @ e / embedding.D


class LinearLimit(eqx.Module):
    """The outcome of `linear_limit`, after k = 0..K updates:

    - `outputs` (K+1, n, d_out): `f_k(x_i)`;
    - `hidden_coef`, `backward_coef` (K+1, n, S, p): η_{k,i}(s), ζ_{k,i}(s) on the grid `ts`
      (S,): `H_k(s; x_i) = W_in η[:d_in] + W_out η[d_in:]` at any embedding draw
      (`hidden`), `b_k = E ζ` (`backward`: the rescaled field, `n D ∂𝓛/∂h`);
    - `error_estimate`: max |difference| over outputs and coefficients between the solves
      at `rtol = atol = rtol` and at `rtol_check`: the coarser solve's error, an upper
      estimate of the returned (finer) one's;
    - `ok`: whether every solve succeeded;
    - `outputs_se`, `hidden_se` (sampling rules only, else None): the standard error of
      every entry of `outputs` and `hidden_coef` (the replicates' or batches' spread over
      the square root of their number), for errors judged entry by entry or step by step.
    """

    outputs: Array
    hidden_coef: Array
    backward_coef: Array
    ts: Array
    error_estimate: Array
    ok: Array
    kind: str = eqx.field(static=True, default="linear-exact")
    outputs_se: Array | None = None
    hidden_se: Array | None = None

    def hidden(self, embedding: Embedding) -> Float[Array, "K+1 n S D"]:
        """The hidden fields `H_k(s; x_i) ∈ R^D` at this embedding draw."""
        return self.hidden_coef @ jnp.concatenate([embedding.w_in, embedding.w_out], 1).T

    def backward(self, embedding: Embedding) -> Float[Array, "K+1 n S D"]:
        """The rescaled backward fields `b_k(s; x_i) ∈ R^D` at this embedding draw."""
        return self.backward_coef @ jnp.concatenate([embedding.w_in, embedding.w_out], 1).T


def _unit_maps(eta, zeta, gram, lr_u, lr_v, n):
    """`(M^u_a, M^v_a)`, a = 0..K (shape (K+1, p, 2p) each), from η_a, ζ_a (item 2)."""
    p = gram.shape[0]
    s_u, s_v = jnp.eye(p, 2 * p), jnp.eye(p, 2 * p, p)

    def one(carry, ez):
        mu, mv = carry
        e, z = ez  # (n, p)
        q = z @ s_v + z @ gram @ mv  # rows q_iᵀ
        pp = e @ s_u + e @ gram @ mu
        return (mu - lr_u / n * e.T @ q, mv - lr_v / n * z.T @ pp), (mu, mv)

    zero = jnp.zeros((p, 2 * p), gram.dtype)
    _, (mus, mvs) = lax.scan(one, (zero, zero), (eta, zeta))
    return mus, mvs


def _vector_field(s, y, args):
    eta, zeta, ymat = y
    k, gram, cov, coef = args
    lr_u, lr_v, su2, sv2 = coef[0], coef[1], coef[2], coef[3]
    n, p = eta.shape[1], gram.shape[0]
    s_u, s_v = jnp.eye(p, 2 * p), jnp.eye(p, 2 * p, p)
    mus, mvs = _unit_maps(eta, zeta, gram, lr_u, lr_v, n)
    mt = lambda m: jnp.swapaxes(m, -1, -2)
    r = (sv2 * s_v[None] + mvs @ cov) @ (s_u.T[None] + mt(mus) @ gram)  # (K+1, p, p)
    rt = (su2 * s_u[None] + mus @ cov) @ (s_v.T[None] + mt(mvs) @ gram)
    a = jnp.arange(eta.shape[0])[:, None, None]
    deta = jnp.where(a <= k, eta @ mt(r), 0.0)
    dzeta = jnp.where(a < k, -zeta @ mt(rt), 0.0)
    return deta, dzeta, -rt[k] @ ymat


def _solves(xs, ys, gram, ts, steps, solve_k, propagate, backward, lr_in=0.0, lr_out=0.0):
    """The solves k = 0..`steps` of the limit, one `lax.scan` (items 4–5): solve k is
    `solve_k(eta0, zeta0, k)` (a dense solution of (η, ζ, Y) from the forward coefficients
    η_a(0) of every step a and the backward coefficients of the earlier solves); its ζ_k(0)
    is `propagate(Y(1), ζ_k(1))`, and its backward coefficients on `ts` are
    `einsum(backward, Y(ts), ζ_k(0))`.

    **A trainable embedding** (`lr_in`, `lr_out` > 0): the embedding stays in the
    span of its initial columns, `W_in,k = E C_in,k`, `W_out,k = E C_out,k` (E = [W_in,
    W_out] at initialisation, C_in,0 = [I; 0], C_out,0 = [0; I]), since its gradients are
    `Σ_i b(0; x_i) x_iᵀ` and `Σ_i h(1; x_i) g_iᵀ`, fields in that span. Step k starts from
    `η_k(0; x) = C_in,k x`, reads out `f = C_out,kᵀ G η_k(1)`, ends at `ζ_k(1) = C_out,k g`,
    and updates `C_in,k+1 = C_in,k − (lr_in/n) Σ_i ζ_k(0; x_i) x_iᵀ`,
    `C_out,k+1 = C_out,k − (lr_out/n) Σ_i η_k(1; x_i) g_iᵀ` (GD on W_in, W_out at rates
    `η · D · ∇`). Frozen (the default), C stays at its start and this is the frozen limit.

    **Returns:** the outputs, hidden and backward coefficients and the solves' `ok`, each
    with a leading axis k."""
    n, d_in = xs.shape
    p = gram.shape[0]
    c_in = jnp.eye(p, d_in, dtype=gram.dtype)
    c_out = jnp.eye(p, p - d_in, -d_in, dtype=gram.dtype)
    eta0 = jnp.broadcast_to(xs @ c_in.T, (steps + 1, n, p))

    def step(carry, k):
        zeta0, eta0, c_in, c_out = carry
        sol = solve_k(eta0, zeta0, k)
        eta1, _, y1 = sol.evaluate(1.0)
        f = eta1[k] @ gram @ c_out
        g = f - ys
        zeta_k0 = propagate(y1, g @ c_out.T)
        etas, _, ymats = evaluate_many(sol, ts)  # (S, K+1, n, p), Y: (S, p, p) or (S, n, p, p)
        hidden = jnp.moveaxis(etas[:, k], 0, 1)  # (n, S, p)
        backward_k = jnp.einsum(backward, ymats, zeta_k0)
        c_in = c_in - lr_in / n * zeta_k0.T @ xs
        c_out = c_out - lr_out / n * eta1[k].T @ g
        # step k + 1 starts from the updated embedding (dropped after the last step)
        eta0 = eta0.at[k + 1].set(xs @ c_in.T, mode="drop")
        return (zeta0.at[k].set(zeta_k0), eta0, c_in, c_out), (f, hidden, backward_k, sol.ok)

    zeta0 = jnp.zeros((steps + 1, n, p), gram.dtype)
    _, out = lax.scan(step, (zeta0, eta0, c_in, c_out), jnp.arange(steps + 1))
    return out


@functools.partial(jax.jit, static_argnames=("steps",))
def _solve(xs, ys, gram, ts, coef, rtol, *, steps):
    p = gram.shape[0]
    cov = jax.scipy.linalg.block_diag(coef[2] * gram, coef[3] * gram)

    def solve_k(eta0, zeta0, k):
        y0 = (eta0, zeta0, jnp.eye(p, dtype=gram.dtype))
        return solve_dense(
            _vector_field, y0, t0=0.0, t1=1.0, args=(k, gram, cov, coef), rtol=rtol, atol=rtol,
            max_steps=1024,
        )  # fmt: skip

    return _solves(
        xs, ys, gram, ts, steps, solve_k,
        lambda y1, zeta_end: jnp.linalg.solve(y1, zeta_end.T).T, "spq,nq->nsp",
        coef[4], coef[5],
    )  # fmt: skip


def _problem(xs, ys, gram, ts, sigma_in, sigma_out, **rates):
    """The checks and defaults shared by `linear_limit` and `limit`: inputs (n, d_in),
    targets (n, d_out), the Gram (default G_∞ = diag(σ_in² I, σ_out² I)), the depths `ts`
    (default 33 points on [0, 1]), every concrete one finite, and the `rates` (learning
    rates, scales) too; one-line errors naming the argument."""
    check_finite_arguments(
        colon=True, xs=xs, ys=ys, gram=gram, ts=ts, sigma_in=sigma_in, sigma_out=sigma_out
    )
    check_finite_arguments(colon=True, **rates)
    xs, ys = jnp.asarray(xs, float), jnp.asarray(ys, float)
    if xs.ndim != 2 or ys.ndim != 2 or xs.shape[0] != ys.shape[0]:
        raise ValueError(
            f"xs, ys: must have shapes (n, d_in), (n, d_out), got {xs.shape}, {ys.shape}"
        )
    d_in, d_out = xs.shape[1], ys.shape[1]
    if gram is None:
        gram = jnp.diag(
            jnp.concatenate([jnp.full(d_in, sigma_in**2), jnp.full(d_out, sigma_out**2)])
        )
    gram = jnp.asarray(gram, float)
    if gram.shape != (d_in + d_out,) * 2:
        raise ValueError(
            f"gram: must have shape (d_in + d_out,)*2 = {(d_in + d_out,) * 2}, got {gram.shape}"
        )
    ts = jnp.linspace(0.0, 1.0, 33) if ts is None else jnp.asarray(ts, float)
    if ts.ndim != 1:
        raise ValueError(f"ts: must be one-dimensional, got shape {ts.shape}")
    return xs, ys, gram, ts


def _arguments(
    xs,
    ys,
    *,
    eta_u=0.1,
    eta_v=0.1,
    s_u=1.0,
    s_v=1.0,
    sigma_in=1.0,
    sigma_out=1.0,
    gram=None,
    ts=None,
    eta_in=0.0,
    eta_out=0.0,
):
    """The keyword arguments shared by `linear_limit` and `limit`, with their defaults: the
    learning rates `eta_u`, `eta_v` and scales `s_u`, `s_v` (as in
    `DeepEmbeddedResNet.sample` and `train`), `sigma_in`, `sigma_out` (of the default
    Gram) and `gram`, `ts`; checked by `_problem`.

    `eta_in`, `eta_out` (default 0: frozen) train the embedding as
    `meanfield.training.deep_embedded.train` does, at `η · D · ∇` (`_solves`).

    **Returns:** `(xs, ys, gram, ts, coef)` as float arrays,
    `coef = [η_u, η_v, s_u², s_v², η_in, η_out]`.
    """
    rates = {"eta_u": eta_u, "eta_v": eta_v, "s_u": s_u, "s_v": s_v, "eta_in": eta_in,
             "eta_out": eta_out}  # fmt: skip
    xs, ys, gram, ts = _problem(xs, ys, gram, ts, sigma_in, sigma_out, **rates)
    return xs, ys, gram, ts, jnp.asarray([eta_u, eta_v, s_u**2, s_v**2, eta_in, eta_out], float)


def linear_limit(
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    *,
    steps: int,
    rtol: float = 1e-11,
    rtol_check: float = 1e-8,
    **kwargs,
) -> LinearLimit:
    """The exact limit of `DeepEmbeddedResNet` with ρ(p) = p after k = 0..`steps` GD
    updates (module docstring, items 1–5).

    **Arguments:** inputs `xs` (n, d_in), targets `ys` (n, d_out); `**kwargs`: the keyword
    arguments `eta_u`, `eta_v` (learning rates, default 0.1 each), `s_u`, `s_v`, `sigma_in`,
    `sigma_out` (scales, default 1.0 each: as in `DeepEmbeddedResNet.sample` and `train`),
    `gram` and `ts` (default None each), `eta_in`, `eta_out` (default 0: the embedding
    frozen; otherwise trained, kept in the span of its initial columns, `_solves`).
    `gram`: None for the joint limit L, M, D → ∞ (`G_∞ = diag(σ_in² I, σ_out² I)`), or
    `basis_gram(embedding)` for the fixed-D limit (L, M → ∞) at that draw (σ_in, σ_out
    are then unused). `ts`: the depths
    s at which the fields are returned (default 33 points on [0, 1]; for a network of
    depth L pass `jnp.arange(L + 1) / L`). Solved twice, at `rtol = atol = rtol` and
    `rtol_check`; the difference is `error_estimate`. Jittable and vmappable over arrays.

    **Returns:** a `LinearLimit`.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {steps!r}")
    xs, ys, gram, ts, coef = _arguments(xs, ys, **kwargs)
    fine = _solve(xs, ys, gram, ts, coef, jnp.asarray(rtol, float), steps=steps)
    coarse = _solve(xs, ys, gram, ts, coef, jnp.asarray(rtol_check, float), steps=steps)
    diffs = [jnp.max(jnp.abs(a - b)) for a, b in zip(fine[:3], coarse[:3], strict=True)]
    ok = jnp.all(fine[3]) & jnp.all(coarse[3])
    return LinearLimit(fine[0], fine[1], fine[2], ts, jnp.max(jnp.stack(diffs)), ok)


MAX_NODES = 2**20  # a quadrature rule larger than this is refused (use Monte Carlo)


MC_BATCHES = 8  # batches of the Monte-Carlo error estimate


QMC_REPLICATES = 8  # independent scramblings of the quasi-Monte-Carlo rule


METHODS = ("auto", "linear", "quadrature", "monte-carlo", "qmc")


def nonlinear_field(s, y, args):
    """Item 7 of the module docstring: the vector field of solve k at depth s. The unit
    recursion runs over a = 0..k only (a `fori_loop` of k + 1 trips: the later steps' fields
    are zero in solve k); R̃_a is contracted with ζ_a directly (O(N n p) per step), the
    full matrix R̃_k formed only for the propagator."""
    eta, zeta, ymat = y  # (K+1, n, p), (K+1, n, p), (n, p, p)
    k, gram, nodes, coef, rho = args
    xi_u, xi_v, c_u, c_v, w = nodes  # (N, p) x4, (N,)
    lr_u, lr_v = coef[0], coef[1]
    n = eta.shape[1]

    def one(a, carry):
        mu, nu, deta, dzeta, rt_k = carry  # μ_a(ξ), ν_a(ξ): (N, p)
        e, z = eta[a], zeta[a]  # (n, p)
        uu = xi_u + mu @ gram  # P = uu · η
        vv = xi_v + nu @ gram  # Q = vv · ζ
        pre, q = uu @ e.T, vv @ z.T  # (N, n)
        act, dact = jax.jvp(rho, (pre,), (jnp.ones_like(pre),))
        deta = deta.at[a].set(jnp.einsum("N,Np,Ni->ip", w, c_v + nu, act))
        dz = -jnp.einsum("N,Np,Ni->ip", w, c_u + mu, dact * q)  # −R̃_a ζ_a
        dzeta = dzeta.at[a].set(jnp.where(a < k, dz, 0.0))
        rt_k = lax.cond(
            a == k,
            lambda: jnp.einsum("N,Np,Ni,Nq->ipq", w, c_u + mu, dact, vv),
            lambda: rt_k,
        )
        mu = mu - lr_u / n * (dact * q) @ e
        nu = nu - lr_v / n * act @ z
        return mu, nu, deta, dzeta, rt_k

    zero = jnp.zeros_like(xi_u)
    init = (zero, zero, jnp.zeros_like(eta), jnp.zeros_like(zeta), jnp.zeros_like(ymat))
    _, _, deta, dzeta, rt_k = lax.fori_loop(0, k + 1, one, init)
    return deta, dzeta, -rt_k @ ymat


def conditional_nodes(z, w, gram, s_u, s_v):
    """ξ = (ξ_u, ξ_v) ~ N(0, diag(s_u² G, s_v² G)) from standard nodes `z` (N, 2p), and the
    conditional means' coefficients G⁻¹ξ_u, G⁻¹ξ_v (item 6)."""
    p = gram.shape[0]
    chol = jnp.linalg.cholesky(gram)  # G = C Cᵀ: ξ = s C z, G⁻¹ξ = s C⁻ᵀ z
    inv_t = jax.scipy.linalg.solve_triangular(chol, jnp.eye(p, dtype=gram.dtype), lower=True)
    z_u, z_v = z[:, :p], z[:, p:]
    return (s_u * z_u @ chol.T, s_v * z_v @ chol.T, s_u * z_u @ inv_t, s_v * z_v @ inv_t, w)


@functools.partial(jax.jit, static_argnames=("steps", "activation"))
def _solve_nonlinear(xs, ys, gram, ts, coef, rtol, z, w, *, steps, activation):
    n, p = xs.shape[0], gram.shape[0]
    rho = resolve_activation(activation)
    nodes = conditional_nodes(z, w, gram, jnp.sqrt(coef[2]), jnp.sqrt(coef[3]))
    eye = jnp.broadcast_to(jnp.eye(p, dtype=gram.dtype), (n, p, p))

    def solve_k(eta0, zeta0, k):
        return solve_dense(
            nonlinear_field, (eta0, zeta0, eye), t0=0.0, t1=1.0,
            args=(k, gram, nodes, coef, rho), rtol=rtol, atol=rtol, max_steps=1024,
        )  # fmt: skip

    return _solves(
        xs, ys, gram, ts, steps, solve_k,
        lambda y1, zeta_end: jnp.linalg.solve(y1, zeta_end[..., None])[..., 0],  # (n, p)
        "snpq,nq->nsp", coef[4], coef[5],
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("steps", "activation"))
def _solve_replicates(xs, ys, gram, ts, coef, rtol, z, w, *, steps, activation):
    """`_solve_nonlinear` for each replicate rule (z[r], w[r]), one after the other."""
    return lax.map(
        lambda zw: _solve_nonlinear(
            xs, ys, gram, ts, coef, rtol, *zw, steps=steps, activation=activation
        ),
        (z, w),
    )


def sobol_gaussian(key, replicates: int, base: int, dim: int, dtype=None) -> Array:
    """`replicates` independent randomised quasi-Monte-Carlo point sets of `base` (a power
    of 2) standard Gaussian points in R^dim, shape (replicates, base, dim): Owen-scrambled
    Sobol points (`scipy.stats.qmc.Sobol`, one scrambling per replicate, its seed drawn
    from `key`) through the inverse normal CDF. Each set alone is an unbiased rule; their
    spread estimates its error. The points are made on the host (`jax.pure_callback`), so
    this runs under `jit` and `vmap` with a traced key."""
    dtype = jnp.result_type(float) if dtype is None else dtype
    seeds = jr.randint(key, (replicates,), 0, 2**31 - 1)
    shape = jax.ShapeDtypeStruct((replicates, base, dim), dtype)
    return jax.pure_callback(
        functools.partial(_sobol_host, base=base, dim=dim, dtype=dtype), shape, seeds,
        vmap_method="sequential",
    )  # fmt: skip


def _sobol_host(seeds, *, base: int, dim: int, dtype) -> np.ndarray:
    from scipy.special import ndtri
    from scipy.stats import qmc

    tiny = np.finfo(float).eps
    sets = [
        qmc.Sobol(dim, scramble=True, rng=np.random.default_rng(int(s))).random_base2(
            int(np.log2(base))
        )
        for s in np.asarray(seeds)
    ]
    return ndtri(np.clip(np.stack(sets), tiny, 1 - tiny)).astype(dtype)


def sign_symmetric(z: Array) -> Array:
    """The quadruples (z_u, z_v), (−z_u, −z_v), (z_u, −z_v), (−z_u, z_v) of points z
    (..., N, 2p), shape (..., 4N, 2p): the Gaussian law is invariant under each flip, and
    the flip of z_v alone cancels the noise of `G⁻¹ξ_v ρ(P)` exactly at k = 0 (item 8)."""
    p = z.shape[-1] // 2
    signs = jnp.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], z.dtype)
    flips = [jnp.repeat(sg, p).reshape((1,) * (z.ndim - 1) + (2 * p,)) for sg in signs]
    return jnp.concatenate([z * f for f in flips], axis=-2)


def gauss_hermite(orders: tuple[int, ...]) -> tuple[Array, Array]:
    """Tensor Gauss–Hermite nodes (Π orders, len(orders)) and weights (summing to one) for
    the standard Gaussian in R^len(orders), `orders[d]` nodes along dimension d."""
    size = int(np.prod(orders))
    if size > MAX_NODES:
        raise ValueError(
            f"order: {size} quadrature nodes {orders} exceed {MAX_NODES}; use method='monte-carlo'"
        )
    rules = [np.polynomial.hermite_e.hermegauss(q) for q in orders]
    grids = np.meshgrid(*[x for x, _ in rules], indexing="ij")
    z = np.stack([g.ravel() for g in grids], axis=-1)
    w = np.prod(np.meshgrid(*[w for _, w in rules], indexing="ij"), axis=0).ravel()
    return jnp.asarray(z), jnp.asarray(w / w.sum())


def quadrature_orders(p: int, order: int) -> tuple[int, ...]:
    """The nodes per dimension of ξ = (ξ_u, ξ_v) ∈ R^{2p} (item 8): `order` along ξ_u,
    `max(order // 3, min(order, 6))` along ξ_v."""
    return (order,) * p + (max(order // 3, min(order, 6)),) * p


def _is_identity(activation) -> bool:
    return activation == "identity" or activation is resolve_activation("identity")


def _check_count(value, name: str, least: int) -> None:
    """Refuse `value` unless it is an integer (not a bool) >= `least` (ValueError naming
    `name`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}: must be an integer >= {least}, got {value!r}")


def _checked_activation(activation: str | Callable, method: str) -> bool:
    """Whether `activation` is the identity; refuses an unknown activation or `method`,
    and `method="linear"` for any other activation (`limit`)."""
    identity = _is_identity(activation)
    if not callable(activation):
        resolve_activation(activation)
    if method not in METHODS:
        raise ValueError(f"method={method!r}: use one of {', '.join(map(repr, METHODS))}")
    if method == "linear" and not identity:
        raise ValueError(f"method='linear': only for activation='identity', got {activation!r}")
    return identity


def limit(
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    *,
    activation: str | Callable = "identity",
    steps: int,
    method: str = "auto",
    order: int | None = None,
    particles: int | None = None,
    key=None,
    rtol: float | None = None,
    rtol_check: float | None = None,
    **kwargs,
) -> LinearLimit:
    """The limit of `DeepEmbeddedResNet` with any activation ρ after k = 0..`steps` GD
    updates (module docstring, items 6–8): the fixed-D limit (L, M → ∞) at `gram =
    basis_gram(embedding)`, the joint limit L, M, D → ∞ at `gram=None`.

    **Arguments:** as `linear_limit` (`**kwargs`: `eta_u`, `eta_v`, `s_u`, `s_v`,
    `sigma_in`, `sigma_out`, `gram`, `ts`, `eta_in`, `eta_out`, with its defaults), plus
    - `activation`: a name of `meanfield.blocks.activations.ACTIVATIONS` or an elementwise
      callable (static: one compilation per activation);
    - `method`: `"auto"` (ρ = identity: `linear_limit`, exact; otherwise tensor
      Gauss–Hermite when the 2p = 2(d_in + d_out) Gaussian dimensions are ≤ 4, randomised
      quasi-Monte Carlo beyond), `"linear"` (ρ = identity only), `"quadrature"`,
      `"monte-carlo"` or `"qmc"`;
    - `order`: Gauss–Hermite nodes per dimension of ξ_u (default 24 in ≤ 4 dimensions, 3
      above — enough only for polynomial ρ), `max(order // 3, min(order, 6))` per
      dimension of ξ_v (`quadrature_orders`, item 8); its error is estimated against the
      rule of `order − order // 4` (solved at `rtol_check`);
    - `particles`: Monte-Carlo draws of ξ (default 2^14, in sign-symmetric quadruples,
      item 8; rounded up to a multiple of 32), or for `"qmc"` the points over all
      replicates (default 2^14: 8 scramblings of 2^m Sobol points, each in sign-symmetric
      quadruples, 2^m the power of 2 at or above particles / 32); `key` their key (default
      `jr.key(0)`; for `"qmc"` it must be concrete: the points are made by SciPy);
    - `rtol`, `rtol_check`: ODE tolerances (defaults 1e-11, 1e-8 for the exact linear
      solve, 1e-10, 1e-7 otherwise).

    `error_estimate` (the limit's own error, max over entries of the outputs and hidden
    coefficients; for `"linear"` also the backward ones): for `"linear"` the difference
    with the solve at `rtol_check`; for
    `"quadrature"` the difference with the rule of `order − order // 4` nodes at
    `rtol_check` (the coarser rule's error: an upper estimate of the returned one's, as
    long as the rule converges — it does geometrically for tanh, erf; only algebraically
    for relu, whose ρ' jumps); for `"monte-carlo"` 3 × the batch-means standard error
    (the spread of 8 solves on disjoint eighths of the draws, / sqrt(8)), an error bar
    of ~3σ per entry for the returned N-draw solve (the ODE error, ≤ `rtol`, is far
    below it); for `"qmc"` the limit is the mean of the 8 replicate solves and the error
    3 × the standard error of that mean (their spread / sqrt(8), max over entries) plus
    the ODE error (one replicate solved again at `rtol_check`). Randomised QMC converges
    faster than Monte Carlo for smooth integrands (measured at the seed's tanh setting,
    2p = 20: the replicates' spread falls like N^-0.7, against N^-0.5). Jittable and
    vmappable over `gram` (and the other arrays) with the static choices (`activation`,
    `method`, `order`, `particles`, `steps`) as Python values.

    **Returns:** a `LinearLimit` with `kind` "linear-exact", "quadrature", "monte-carlo"
    or "qmc".
    """
    _check_count(steps, "steps", 0)
    identity = _checked_activation(activation, method)
    xs, ys, gram, ts, coef = _arguments(xs, ys, **kwargs)
    p = xs.shape[1] + ys.shape[1]
    if method == "auto":
        method = "linear" if identity else ("quadrature" if 2 * p <= 4 else "qmc")
    if method == "linear":
        return linear_limit(
            xs, ys, steps=steps, **{**kwargs, "gram": gram, "ts": ts},
            rtol=1e-11 if rtol is None else rtol,
            rtol_check=1e-8 if rtol_check is None else rtol_check,
        )  # fmt: skip
    rtol = 1e-10 if rtol is None else rtol
    rtol_check = 1e-7 if rtol_check is None else rtol_check
    solve = functools.partial(
        _solve_nonlinear, xs, ys, gram, ts, coef, steps=steps, activation=activation
    )
    if method == "quadrature":
        if order is None:
            order = 24 if 2 * p <= 4 else 3
        _check_count(order, "order", 2)
        check = order - order // 4
        fine = solve(jnp.asarray(rtol, float), *gauss_hermite(quadrature_orders(p, order)))
        coarse = solve(jnp.asarray(rtol_check, float), *gauss_hermite(quadrature_orders(p, check)))
        diffs = [jnp.max(jnp.abs(a - b)) for a, b in zip(fine[:2], coarse[:2], strict=True)]
        err = jnp.max(jnp.stack(diffs))
        ok = jnp.all(fine[3]) & jnp.all(coarse[3])
        return LinearLimit(fine[0], fine[1], fine[2], ts, err, ok, method)
    particles = 2**14 if particles is None else particles
    _check_count(particles, "particles", 32)
    key = jr.key(0) if key is None else key
    if method == "monte-carlo":
        per = -(-particles // (4 * MC_BATCHES))  # sign-symmetric quadruples per batch
        z = sign_symmetric(jr.normal(key, (MC_BATCHES, per, 2 * p), gram.dtype))  # (B, 4per, 2p)
        w = jnp.full(z.shape[:2], 1.0 / z.shape[1], gram.dtype)
        fine = solve(jnp.asarray(rtol, float), z.reshape(-1, 2 * p), w.reshape(-1) / MC_BATCHES)
        batches = jax.vmap(lambda zb, wb: solve(jnp.asarray(rtol_check, float), zb, wb))(z, w)
        se = [jnp.std(b, axis=0, ddof=1) / MC_BATCHES**0.5 for b in batches[:2]]
        err = 3 * jnp.max(jnp.stack([jnp.max(e) for e in se]))
        ok = jnp.all(fine[3]) & jnp.all(batches[3])
        return LinearLimit(fine[0], fine[1], fine[2], ts, err, ok, method, se[0], se[1])
    # "qmc": QMC_REPLICATES scramblings of 2^m Sobol points, each in sign-symmetric quadruples
    base = 2 ** max(1, math.ceil(math.log2(particles / (4 * QMC_REPLICATES))))
    z = sign_symmetric(sobol_gaussian(key, QMC_REPLICATES, base, 2 * p, gram.dtype))
    w = jnp.full(z.shape[:2], 1.0 / z.shape[1], gram.dtype)
    reps = _solve_replicates(
        xs, ys, gram, ts, coef, jnp.asarray(rtol, float), z, w, steps=steps, activation=activation
    )
    fine = [jnp.mean(r, axis=0) for r in reps[:3]]
    se = [jnp.std(r, axis=0, ddof=1) / QMC_REPLICATES**0.5 for r in reps[:2]]
    ses = [jnp.max(e) for e in se]
    # the ODE's own error: one replicate solved again at rtol_check
    check = solve(jnp.asarray(rtol_check, float), z[0], w[0])
    ode = [jnp.max(jnp.abs(a[0] - b)) for a, b in zip(reps[:2], check[:2], strict=True)]
    err = 3 * jnp.max(jnp.stack(ses)) + jnp.max(jnp.stack(ode))
    ok = jnp.all(reps[3]) & jnp.all(check[3])
    return LinearLimit(fine[0], fine[1], fine[2], ts, err, ok, method, se[0], se[1])
