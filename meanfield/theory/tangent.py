"""Tangent kernels at initialisation (Mathematics §5.1, Chizat §3.3).

The empirical tangent kernel of a finite ResNet in its units' parameters θ,
`K(x, x') = Σ_θ ∂h^L(x)/∂θ ∂h^L(x')/∂θᵀ` (a d×d matrix for the hidden state
`h^L ∈ R^d`; a readout, if any, is not applied: the output's kernel is
`W_outᵀ K W_out / D²`), computed from the explicit backward pass (one adjoint per
direction of h^L), and its shallow approximation when the forward and backward
passes are the identity,

    K_shallow(x, x') = α² Σ_{j,l} D_2φ(h^0(x), z^{j,l}) D_2φ(h^0(x'), z^{j,l})ᵀ,

the tangent kernel of a shallow network with M·L units (`h^0(x) = x`, or `W_in x`
with an embedding). Their relative difference vanishes as `M L α² → 0`.
"""

import jax
import jax.numpy as jnp

from ..blocks.base import AbstractUnitBlock
from ..models.resnet import ResNet


def _gram(Ja, Jb):
    """Σ over parameters of Ja[k] Jb[k']: Ja, Jb pytrees with a leading output axis."""
    pairs = jax.tree.leaves(
        jax.tree.map(lambda a, b: a.reshape(a.shape[0], -1) @ b.reshape(b.shape[0], -1).T, Ja, Jb)
    )
    return sum(pairs)


def _state_dim(net: ResNet, x, x2) -> int:
    """d, the state dimension; a one-line error unless x and x2 both fit the network
    (shapes only: no forward pass)."""
    d = jax.eval_shape(net.states, x[None]).shape[-1]
    jax.eval_shape(net.states, x2[None])
    return d


def tangent_kernel(net: ResNet, x, x2):
    """The empirical tangent kernel `K(x, x2)` (d×d) of `h^L` in the units' parameters."""
    d = _state_dim(net, x, x2)
    eye = jnp.eye(d, dtype=jnp.result_type(x))
    Ja = jax.vmap(lambda e: net.adjoint(x[None], e[None]).grads)(eye)
    Jb = jax.vmap(lambda e: net.adjoint(x2[None], e[None]).grads)(eye)
    return _gram(Ja, Jb)


def shallow_tangent_kernel(net: ResNet, x, x2):
    """`α² Σ_{j,l} D_2φ(h^0(x), z^{j,l}) D_2φ(h^0(x2), z^{j,l})ᵀ` (forward and backward
    taken as the identity; `h^0 = net.embed`)."""
    block = net.block
    if not isinstance(block, AbstractUnitBlock):
        raise ValueError("the shallow tangent kernel needs a unit block")
    d = _state_dim(net, x, x2)
    eye = jnp.eye(d, dtype=jnp.result_type(x))

    def jac(h):
        def one_unit(z):
            _, vjp = jax.vjp(lambda zz: block(h, zz), z)
            return jax.vmap(lambda e: vjp(e)[0])(eye)  # leaves (d, ...)

        per_unit = jax.vmap(jax.vmap(one_unit))(net.params)  # leaves (L, M, d, ...)
        return jax.tree.map(lambda a: net.alpha * jnp.moveaxis(a, 2, 0), per_unit)

    return _gram(jac(net.embed(x)), jac(net.embed(x2)))


def relative_difference(net: ResNet, x, x2):
    """`‖K − K_shallow‖_F / ‖K‖_F`."""
    K, S = tangent_kernel(net, x, x2), shallow_tangent_kernel(net, x, x2)
    return jnp.linalg.norm(K - S) / jnp.linalg.norm(K)
