"""Tangent kernels at initialisation (SPEC §5.1, Chizat §3.3).

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

from ..backward import backward
from ..blocks import AbstractUnitBlock
from ..resnet import ResNet


def _gram(Ja, Jb):
    """Σ over parameters of Ja[k] Jb[k']: Ja, Jb pytrees with a leading output axis."""
    pairs = jax.tree.leaves(
        jax.tree.map(lambda a, b: a.reshape(a.shape[0], -1) @ b.reshape(b.shape[0], -1).T, Ja, Jb)
    )
    return sum(pairs)


def tangent_kernel(net: ResNet, x, x2):
    """The empirical tangent kernel `K(x, x2)` (d×d) of `h^L` in the units' parameters."""
    d = jax.eval_shape(net.hidden, x).shape[0]  # the shape only: no forward pass
    jax.eval_shape(net.hidden, x2)  # x2 fits too: a one-line error otherwise
    eye = jnp.eye(d, dtype=jnp.result_type(x))
    Ja = jax.vmap(lambda e: backward(net, x, e).grads)(eye)
    Jb = jax.vmap(lambda e: backward(net, x2, e).grads)(eye)
    return _gram(Ja, Jb)


def shallow_tangent_kernel(net: ResNet, x, x2):
    """`α² Σ_{j,l} D_2φ(h^0(x), z^{j,l}) D_2φ(h^0(x2), z^{j,l})ᵀ` (forward and backward
    taken as the identity; `h^0 = net.embed`)."""
    if not isinstance(net.block, AbstractUnitBlock):
        raise ValueError("the shallow tangent kernel needs a unit block")
    d = jax.eval_shape(net.hidden, x).shape[0]  # checks x against the network
    jax.eval_shape(net.hidden, x2)
    eye = jnp.eye(d, dtype=jnp.result_type(x))

    def jac(h):
        def one_unit(z):
            _, vjp = jax.vjp(lambda zz: net.block(h, zz), z)
            return jax.vmap(lambda e: vjp(e)[0])(eye)  # leaves (d, ...)

        per_unit = jax.vmap(jax.vmap(one_unit))(net.params)  # leaves (L, M, d, ...)
        return jax.tree.map(lambda a: net.alpha * jnp.moveaxis(a, 2, 0), per_unit)

    return _gram(jac(net.embed(x)), jac(net.embed(x2)))


def relative_difference(net: ResNet, x, x2):
    """`‖K − K_shallow‖_F / ‖K‖_F`."""
    K, S = tangent_kernel(net, x, x2), shallow_tangent_kernel(net, x, x2)
    return jnp.linalg.norm(K - S) / jnp.linalg.norm(K)
