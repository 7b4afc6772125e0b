"""The deep ResNet on an embedding of Chaintron's "ResNets of all shapes and sizes"
(docs: Mathematics §6) and its limits: exact for linear ρ,
an ODE in depth whose vector field is a Gaussian expectation in R^{2p} for any ρ.

**The network** (L layers of M units, embedding dimension D, frozen `W_in`, `W_out`):

    h^0 = W_in x,   h^l = h^{l-1} + (1/(LM)) Σ_j v^{j,l} ρ(⟨u^{j,l}, h^{l-1}⟩_D),
    f = W_outᵀ h^L / D,

`u, v ∈ R^D` with entries N(0, s_u² D), N(0, s_v² D), trained by GD on
`𝓛 = (1/n) Σ_i ½‖f(x_i) − y_i‖²` as `u ← u − η_u·LMD·∇_u 𝓛`, `v ← v − η_v·LMD·∇_v 𝓛`.
With the rescaled backward field `b_i^l = n D ∂𝓛/∂h_i^l` (so `b_i^L = W_out (f(x_i) − y_i)`,
‖b‖_D = Θ(1)) a step is `u ← u − (η_u/n) Σ_i ρ'(P_i) ⟨v, b_i^l⟩_D h_i^{l-1}`,
`v ← v − (η_v/n) Σ_i ρ(P_i) b_i^l`.

**The exact limit for ρ(p) = p** (derivation; every equation below is one the code uses).

1. *Basis.* Let `E = [W_in, W_out]` (D×p, p = d_in + d_out) and `G = EᵀE/D`. Every update
   of a unit is a combination of forward fields h and backward fields b; `h_k(0) = W_in x`
   and `b_k(1) = W_out r` lie in span E, and the residual map (3.) only adds combinations
   of h's and b's. Hence `h_{k,i}(s) = E η_{k,i}(s)`, `b_{k,i}(s) = E ζ_{k,i}(s)` with
   coefficients η, ζ ∈ R^p — exactly, at every D (the "W_in α + W_out β" form is not only
   a D → ∞ statement). D enters only through G: the draw's G gives the fixed-D limit
   (L, M → ∞ at that embedding, Mathematics §6 "fixed-D limit", exact for linear ρ); the joint
   limit L, M, D → ∞ is the same system at `G_∞ = diag(σ_in² I, σ_out² I)` (the draw's G
   fluctuates around it by O(D^{-1/2})).
2. *A unit.* Write `u_k = u_0 + E μ_k`, `v_k = v_0 + E ν_k`. Of `(u_0, v_0)` only the
   projections `ξ = (Eᵀu_0/D, Eᵀv_0/D) ∈ R^{2p}` enter (⟨u_0, Eη⟩_D = ξ_u·η), with
   `ξ ~ N(0, C)`, `C = diag(s_u² G, s_v² G)`, and `E[v_0 ξᵀ] = s_v² E S_v`,
   `E[u_0 ξᵀ] = s_u² E S_u`, where `S_u = [I 0]`, `S_v = [0 I]` (p×2p). The updates are
   linear in the unit's own parameters, so `μ_k = M^u_k ξ`, `ν_k = M^v_k ξ` with, at each
   depth s (the unit at depth s sees h(s) and b(s)),

       P_{k,i} = ⟨u_k, h_{k,i}⟩_D = p_{k,i}·ξ,   p_{k,i} = S_uᵀ η_{k,i} + M^u_kᵀ G η_{k,i}
       Q_{k,i} = ⟨v_k, b_{k,i}⟩_D = q_{k,i}·ξ,   q_{k,i} = S_vᵀ ζ_{k,i} + M^v_kᵀ G ζ_{k,i}
       M^u_{k+1} = M^u_k − (η_u/n) Σ_i η_{k,i} q_{k,i}ᵀ,   M^u_0 = 0,
       M^v_{k+1} = M^v_k − (η_v/n) Σ_i ζ_{k,i} p_{k,i}ᵀ,   M^v_0 = 0.

3. *The residual map.* Layer l adds `(1/(LM)) Σ_j v_k ⟨u_k, h⟩_D`; L layers per unit of
   depth make it `∂_s h = E_unit[v_k ⟨u_k, h⟩_D]` plus a fluctuation. The part
   `v_0 ⟨u_0, h⟩_D` has mean zero, and its sum over the LM units moves each coordinate
   of h by O(sqrt(D/(LM))) (the random part of the map, gone when D/(LM) → 0); the rest
   is Gaussian algebra: `⟨u_k, Eη⟩_D = ξᵀ(S_uᵀ + M^u_kᵀ G) η` and
   `E[v_k ξᵀ] = E (s_v² S_v + M^v_k C)`, so

       ∂_s η_{k,i} =  R_k η_{k,i},   R_k = (s_v² S_v + M^v_k C)(S_uᵀ + M^u_kᵀ G),
       ∂_s ζ_{k,i} = −R̃_k ζ_{k,i},   R̃_k = (s_u² S_u + M^u_k C)(S_vᵀ + M^v_kᵀ G)  (G-adjoint),
       η_{k,i}(0) = (x_i, 0),   f_k(x_i) = G[d_in:, :] η_{k,i}(1),
       ζ_{k,i}(1) = (0, f_k(x_i) − y_i).

   The columns of M^v lie in span{ζ}, those of M^u in span{η}, so `R_k = Σ ζ_c A_{ac} η_aᵀ G`,
   i.e. `W_k(s) = (1/D) Σ_{a,c} A_{ac}(s) b_c(s) h_a(s)ᵀ` (Mathematics §6; a, c run over (step,
   input) pairs); `⟨h_a, h_c⟩_D = η_aᵀ G η_c`, `⟨h_a, b_c⟩_D = η_aᵀ G ζ_c`, ... and the
   projections on W_in, W_out are read off η, ζ: the state (η, ζ) carries all of them.
4. *Checks by hand.* `R_0 = s_v² S_v S_uᵀ = 0`: `h_0 ≡ W_in x`, `f_0 = W_outᵀ W_in x / D`
   (→ 0). `M^u_1 = −(η_u/n) Σ η_0 ζ_0ᵀ S_v`, `M^v_1 = −(η_v/n) Σ ζ_0 η_0ᵀ S_u`, and
   `S_u C S_vᵀ = 0` give `R_1 = −((η_u s_v² + η_v s_u²)/n) Σ_i ζ_{0,i} η_{0,i}ᵀ G`, nilpotent at
   G_∞, whence `f_1(x) = (η_u s_v² + η_v s_u²) σ_in² σ_out² (1/n) Σ_i ⟨x, x_i⟩ y_i`.
5. *Numerics.* Step k's forward ODE needs ζ_a(s), a < k, whose ODEs start at s = 1. They
   are linear, so they are integrated forward from their values at s = 0: the state
   `(η_0..η_k, ζ_0..ζ_{k−1}, Y_k)` with `Y_k(0) = I`, `∂_s Y_k = −R̃_k Y_k` goes from s = 0
   to 1 in one adaptive solve (Dopri8, `meanfield.solvers`), the M's being rebuilt from
   (η_a, ζ_a)(s) inside the vector field; then `ζ_k(0) = Y_k(1)⁻¹ ζ_k(1)` and
   `ζ_k(s) = Y_k(s) ζ_k(0)`. K + 1 solves in a `lax.scan`, each of the same shape.

**The limit for any ρ** (`limit`; derivation, every equation one the code uses). At fixed
D, L, M → ∞ is the mean ODE of Mathematics §3 in R^D with unit `φ(h; u, v) = v ρ(⟨u, h⟩_D)`:

    ∂_s h_k = E[v_k ρ(P_k)],   ∂_s b_k = −E[u_k ρ'(P_k) Q_k],   P = ⟨u_k, h⟩_D, Q = ⟨v_k, b⟩_D,
    u_{k+1} = u_k − (η_u/n) Σ_i ρ'(P_{k,i}) Q_{k,i} h_{k,i},
    v_{k+1} = v_k − (η_v/n) Σ_i ρ(P_{k,i}) b_{k,i}.

6. *Span E and ξ, for any ρ.* Induction on k and s: suppose h_a = E η_a, b_a = E ζ_a for
   a < k. Then a unit's updates add multiples of h's and b's, so `u_k = u_0 + E μ_k`,
   `v_k = v_0 + E ν_k` with (`ξ_u = Eᵀu_0/D`, `ξ_v = Eᵀv_0/D`, scalar coefficients now
   NONLINEAR in ξ through ρ, ρ')

       P_{a,i} = (ξ_u + G μ_a)·η_{a,i},        Q_{a,i} = (ξ_v + G ν_a)·ζ_{a,i},
       μ_{a+1} = μ_a − (η_u/n) Σ_i ρ'(P_{a,i}) Q_{a,i} η_{a,i},   μ_0 = 0,
       ν_{a+1} = ν_a − (η_v/n) Σ_i ρ(P_{a,i}) ζ_{a,i},            ν_0 = 0,

   functions of ξ = (ξ_u, ξ_v) alone (given the history η_a(s), ζ_a(s), a < k; for a = k
   only P_k, which needs μ_k, i.e. ζ_a for a < k). The rest of (u_0, v_0) enters neither
   P nor Q while h, b ∈ span E. Gaussian conditioning: (u_0, v_0, ξ) are jointly Gaussian,
   `Cov(ξ) = C = diag(s_u² G, s_v² G)`, `E[v_0 ξᵀ] = s_v² E S_v`, `E[u_0 ξᵀ] = s_u² E S_u`
   (S_u = [I 0], S_v = [0 I], p×2p), so `E[v_0 | ξ] = s_v² E S_v C⁻¹ ξ = E G⁻¹ ξ_v` and
   `E[u_0 | ξ] = E G⁻¹ ξ_u` (the projections of v_0, u_0 on span E). Hence

       ∂_s h_{k,i} = E_ξ[E[v_k | ξ] ρ(P_{k,i})],   E[v_k | ξ] = E (G⁻¹ξ_v + ν_k(ξ)):
       ∂_s η_{k,i} =  E_ξ[(G⁻¹ξ_v + ν_k(ξ)) ρ(P_{k,i}(ξ))]   ∈ R^p,
       ∂_s ζ_{k,i} = −R̃_{k,i} ζ_{k,i},
       R̃_{k,i} = E_ξ[(G⁻¹ξ_u + μ_k(ξ)) ρ'(P_{k,i}(ξ)) (ξ_v + G ν_k(ξ))ᵀ]   (p×p),

   both in span E, which closes the induction from `h(0) = W_in x`, `b(1) = W_out (f − y)`
   (items 1, 3: η(0) = (x_i, 0), ζ(1) = (0, f_k(x_i) − y_i), f_k = G[d_in:, :] η_k(1)). The
   part of v_0 (u_0) outside span E has mean zero given ξ: summed over the LM units it
   moves h (b) by O(sqrt(D/(LM))) per coordinate, the fluctuation of a finite network;
   the depth discretisation adds O(1/L). The backward ODE is linear in ζ_k (μ_k, ν_k do
   not depend on ζ_k), with one matrix per input now (ρ'(P_{k,i}) depends on i), so the
   propagator trick of item 5 applies with `Y_{k,i}`, i = 1..n. For ρ = id, ν_k = M^v_k ξ,
   μ_k = M^u_k ξ and the expectations are item 3's matrices (`E[G⁻¹ξ_v ξᵀ] = s_v² S_v`):
   the same system, as the tests confirm. The joint limit is the same system at G_∞.
7. *Numerics.* Item 5's scheme, the state `(η_0..η_K, ζ_0..ζ_K, Y_{k,1..n})` of solve k
   (η_a for a ≤ k and ζ_a for a < k move), the expectation over ξ replaced by a weighted
   sum over nodes ξ_j = (s_u C_G z_u, s_v C_G z_v) (G = C_G C_Gᵀ, Cholesky; G⁻¹ξ =
   s C_G⁻ᵀ z) shared by every depth s, so the vector field is smooth in s: the recursion
   of item 6 is a `lax.scan` over a at each evaluation, O(K N n p²) work for N nodes.
8. *Rules.* Tensor Gauss–Hermite in the 2p dimensions of z, `order` nodes along z_u and
   fewer along z_v (the integrands are affine in ξ_v at k ≤ 1 and depend on it nonlinearly
   only through μ, i.e. at O(η_u); measured for tanh, d_in = d_out = 1, K = 2: (24, 24,
   6, 6) nodes and (24, 24, 8, 8) agree to 1e-12, each 4e-6 from (40, 40, 12, 12)).
   Gauss–Hermite converges only like exp(−c sqrt(order)) for tanh (poles at ±iπ/2 of
   ρ), algebraically for relu; the error estimate (a second rule) measures it. Beyond 4
   dimensions, randomised quasi-Monte Carlo (`"qmc"`, the default) or Monte Carlo: points
   z in sign-symmetric quadruples (z_u, z_v), (−z_u, −z_v), (z_u, −z_v), (−z_u, z_v) (the
   law is invariant under each flip; the flip of z_v alone cancels the noise of
   `G⁻¹ξ_v ρ(P)` exactly at k = 0, which cut the error bar 8×), the base points z drawn
   i.i.d. or as independently scrambled Sobol sets (each an unbiased rule; their spread
   is the error estimate). Only the unit recursion's steps a ≤ k run in solve k (a loop
   of k + 1 trips), so the K + 1 solves cost O(K²/2) recursion steps per depth.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jax import lax
from jaxtyping import Array, Float

from .._validation import check_finite_arguments
from ..blocks.activations import resolve_activation
from ..engine.scan import default_unroll
from .embedding import Embedding, sample_units

# ---------------------------------------------------------------- the finite network


class DeepEmbeddedResNet(eqx.Module):
    """The deep ResNet of Mathematics §6 (module docstring): `u`, `v` of shape (L, M, D),
    `u[l-1, j]` the input weights of unit j of layer l. Concrete arrays (the embedding's
    too, and the inputs `xs`) must be finite: a one-line error naming the first NaN or inf."""

    embedding: Embedding
    u: Float[Array, "L M D"]
    v: Float[Array, "L M D"]
    activation: Callable = eqx.field(static=True)

    def __check_init__(self):
        check_finite_arguments(colon=True, embedding=self.embedding, u=self.u, v=self.v)

    @classmethod
    def sample(
        cls, key, *, L: int, M: int, activation: str | Callable = "identity", **kwargs
    ) -> "DeepEmbeddedResNet":
        """Draw the embedding and the L·M units (entries N(0, s_u² D), N(0, s_v² D)).

        `**kwargs`: the keyword arguments `D`, `d_in`, `d_out` (required) and `s_u`, `s_v`,
        `sigma_in`, `sigma_out` (default 1.0 each) of `sample_units`."""
        emb, u, v = sample_units(key, {"L": L, "M": M}, **kwargs)
        return cls(emb, u, v, resolve_activation(activation))

    def hidden(
        self,
        xs: Float[Array, "n d_in"],
        *,
        unroll: int | None = None,
        size: "tuple | None" = None,
    ) -> Float[Array, "n L+1 D"]:
        """The hidden states `h^l(x_i)`, l = 0..L, shape (n, L + 1, D) (a `lax.scan`;
        `unroll` layers per loop step, default `engine.scan.default_unroll`: 1 on a CPU,
        8 on a GPU/TPU; it changes the speed, never the values).

        `size = (L, M, D)` (Python or traced integers): the arrays hold a network of that
        depth, width and dimension in their corner `[:L, :M, :D]`, zero elsewhere (the
        embedding's rows beyond D too; `padded_units`), so that one compiled program serves
        every smaller shape. Its scales are the network's own (`1/(LM)`, `⟨·,·⟩_D`); the
        padded units are masked (they add nothing and receive no gradient, whatever ρ(0)),
        so the padded layers are the identity and the padded coordinates stay zero: rows
        beyond L repeat `h^L`, coordinates beyond D are 0."""
        check_finite_arguments(colon=True, xs=xs)
        L, M, D = self.u.shape if size is None else size
        unroll = min(default_unroll(unroll), self.u.shape[0])
        h0 = self.embedding.embed(xs)

        def layer(h, uvm):
            u, v, *m = uvm
            a = self.activation(h @ u.T / D)
            if m:  # the padded units (of the padded layers too) add nothing
                a = jnp.where(m[0], a, 0)
            h = h + a @ v / (L * M)
            return h, h

        inputs = (self.u, self.v)
        if size is not None:
            rows, cols = jnp.arange(self.u.shape[0]), jnp.arange(self.u.shape[1])
            inputs += ((rows[:, None] < L) & (cols[None, :] < M),)
        _, hs = lax.scan(layer, h0, inputs, unroll=unroll)
        return jnp.concatenate([h0[:, None], jnp.moveaxis(hs, 0, 1)], axis=1)

    def __call__(self, xs: Float[Array, "n d_in"]) -> Float[Array, "n d_out"]:
        """The outputs `f(x_i) = W_outᵀ h^L(x_i) / D`, shape (n, d_out)."""
        return self.embedding.readout(self.hidden(xs)[:, -1])


def padded_units(key, *, L, M, D, box: tuple[int, int, int], s_u=1.0, s_v=1.0, dtype=None):
    """Units `u`, `v` of shape `box = (L_b, M_b, D_b)` holding an (L, M, D) network in
    their corner (entries N(0, s_u² D), N(0, s_v² D)), zero elsewhere, such that entry
    `(l, j, d)` depends on `(key, l, j, d)` only, not on the box: the same network drawn
    in any box that holds it (L, M, D Python or traced integers; `DeepEmbeddedResNet.hidden`
    with `size`). Unit (l, j) of `u` draws its D coordinates as the first D of
    `jr.normal(fold_in(fold_in(k_u, l), j), (D_b,))`, which with JAX's partitionable
    threefry (`jax_threefry_partitionable`, the default since JAX 0.5) are
    `jr.normal(fold_in(fold_in(k_u, l), j), (D,))` whatever D_b (`k_u, k_v = split(key)`)."""
    Lb, Mb, Db = box
    dtype = jnp.result_type(float) if dtype is None else dtype
    inside = (
        (jnp.arange(Lb)[:, None, None] < L)
        & (jnp.arange(Mb)[None, :, None] < M)
        & (jnp.arange(Db)[None, None, :] < D)
    )
    scale = jnp.sqrt(jnp.asarray(D, dtype))

    def draw(k, s):
        def unit(l, j):
            return jr.normal(jr.fold_in(jr.fold_in(k, l), j), (Db,), dtype)

        z = jax.vmap(lambda l: jax.vmap(lambda j: unit(l, j))(jnp.arange(Mb)))(jnp.arange(Lb))
        return jnp.where(inside, s * scale * z, 0)

    k_u, k_v = jr.split(key)
    return draw(k_u, s_u), draw(k_v, s_v)
