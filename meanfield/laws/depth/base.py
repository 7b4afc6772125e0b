"""The abstract depth law: how the layer weights V_1..V_L vary along depth (docs: Mathematics §4).

A depth law draws the d×d weights of every layer of a depth-L network at once.
Laws with a *path* (Brownian, fractional Brownian, smooth) draw one realisation
on [0, 1] from a key and read the weights of every depth off that one
realisation, so networks of different depth and the limit share their randomness
(the coupling). The i.i.d. law has no path: each depth gets fresh draws.
"""

import abc

import equinox as eqx
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from ..._validation import check_positive_int


def check_depth(L, name: str = "L") -> int:
    """`L` must be a positive Python integer (a static depth)."""
    check_positive_int(L, name)
    return L


class AbstractDepthLaw(eqx.Module):
    """The law of the stacked layer weights `(V_1, ..., V_L)` of a depth-L network.

    Subclass it and implement `weights(key, L)`. Every built-in law draws d×d
    matrices whose entries have variance `1/d`, the scale at which the phases of
    Mathematics §4 hold.
    """

    d: eqx.AbstractVar[int]

    @abc.abstractmethod
    def weights(self, key: PRNGKeyArray, L: int) -> Float[Array, "L d d"]:
        """The weights `V_1..V_L`, stacked as `(L, d, d)`.

        **Arguments:**

        - `key`: a `jax.random` key.
        - `L`: the depth, a positive Python integer.

        **Returns:** an array of shape `(L, d, d)`.
        """


class AbstractPathLaw(AbstractDepthLaw):
    """A depth law read off one random path on [0, 1] (the coupled laws).

    Subclasses implement `path(key)` (one realisation, what the limit is driven by)
    and `weights_from_path(path, L)`; then `weights(key, L)` is
    `weights_from_path(path(key), L)`, so for one key every depth reads the same
    realisation: a coarse network's weights are aggregates of the fine ones.
    """

    @abc.abstractmethod
    def path(self, key: PRNGKeyArray) -> PyTree:
        """One realisation of the path: the object the limit equation is driven by."""

    @abc.abstractmethod
    def weights_from_path(self, path: PyTree, L: int) -> Float[Array, "L d d"]:
        """The weights of a depth-L network read off a realisation `path`."""

    def weights(self, key: PRNGKeyArray, L: int) -> Float[Array, "L d d"]:
        return self.weights_from_path(self.path(key), check_depth(L))


class AbstractIncrementLaw(AbstractPathLaw):
    """Weights from the increments of a self-similar matrix path X sampled on a fine grid.

    `path(key)` returns `X(j/n_fine)`, `j = 0..n_fine`, as `(n_fine + 1, d, d)`, with
    `X(0) = 0` and `Var X_ij(t) = t^{2H}`; a depth-L network (L dividing `n_fine`) uses

        V_k = L^H (X(k/L) − X((k−1)/L)) / sqrt(d),      k = 1..L,

    so every `V_k` has i.i.d.-looking entries of variance `1/d`, and `L^{-H} V_k =
    d^{-1/2} ΔX_k`: with the scaling `α = L^{-H}` the network is the Euler scheme of
    `dH = d^{-1/2} dX σ(H)` on that very path.
    """

    n_fine: eqx.AbstractVar[int]
    hurst: eqx.AbstractVar[float]  # the self-similarity index H (1/2 for Brownian motion)

    def weights_from_path(self, path: Float[Array, "n+1 d d"], L: int) -> Float[Array, "L d d"]:
        check_depth(L)
        n = path.shape[0] - 1
        if n % L:
            raise ValueError(
                f"L={L} must divide the fine grid n_fine={n} (use a depth that divides it, "
                "or a finer grid that is a multiple of every depth)"
            )
        coarse = path[:: n // L]
        return (float(L) ** self.hurst / self.d**0.5) * (coarse[1:] - coarse[:-1])
