"""Whether a Transformer's layers learn non-linearly or lazily (Mathematics §8, §11; the
CompleteP claim that only α = 1 keeps every layer learning non-linearly as depth grows).

For every layer l and branch F_l (attention, MLP), at the branch's input u after
training (held fixed), the change of the branch in its own weights,
`Δ_l = F_l(u; θ_l) − F_l(u; θ_l^0)`, is compared with its linearisation around the
initial weights, `J_l = ∂_θ F_l(u; θ_l^0) · (θ_l − θ_l^0)` (a `jax.jvp`):

    nonlinear fraction_l = RMS(Δ_l − J_l) / RMS(Δ_l).

A lazy layer moves as its linearisation (fraction → 0); a layer learning features does
not (fraction of order 1). With Adam, a layer's weights move by about the learning rate,
so under the depth rules `lr ∝ L^{α−1}` the fraction scales as `L^{α−1}`: flat in depth
at α = 1 (CompleteP), shrinking as `L^{-1/2}` at α = ½ (depth-μP).
"""

import jax
import jax.numpy as jnp


def _rms(a, axis=None):
    return jnp.sqrt(jnp.mean(a**2, axis=axis))


def nonlinear_fractions(model, params0: dict, params: dict, tokens) -> dict:
    """The nonlinear fraction of every layer's attention and MLP branch (module
    docstring) on the batch `tokens` (B, T): `{"attention": (L,), "mlp": (L,)}`, each an
    RMS over the batch's entries."""
    attn, mlp = model.branches(tokens.shape[1])

    def inputs(t):
        _, states = model.residual(params, t, capture=True)
        x0 = model.embed(params, t)[None]
        before_attention = jnp.concatenate([x0, states["x_mlp"][:-1]], axis=0)
        return before_attention, states["x_attention"]  # (L, T, N) each

    u_attention, u_mlp = jax.vmap(inputs)(tokens)  # (B, L, T, N)

    def fraction(block, theta0, theta, u):  # u: (B, L, T, N)
        def one_layer(t0, t1, ul):  # ul: (B, T, N)
            def f(th, h):
                return block(h.reshape(-1), th)

            tangent = jax.tree.map(lambda a, b: a - b, t1, t0)

            def per_sequence(h):
                moved = f(t1, h) - f(t0, h)
                _, lin = jax.jvp(lambda th: f(th, h), (t0,), (tangent,))
                return moved, lin

            moved, lin = jax.vmap(per_sequence)(ul)
            return _rms(moved - lin) / _rms(moved)

        # the layers one after the other (`lax.map`), not as one more vmapped axis: the
        # attention's products stay at rank 3 plus the caller's batch axes
        return jax.lax.map(lambda a: one_layer(*a), (theta0, theta, jnp.swapaxes(u, 0, 1)))

    return {
        "attention": fraction(attn, params0["attention"], params["attention"], u_attention),
        "mlp": fraction(mlp, params0["mlp"], params["mlp"], u_mlp),
    }
