"""The finite ResNet h^l = h^{l-1} + α · layer(h^{l-1}, θ_l) (Mathematics §1), on the engine."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._validation import check_finite_array, check_key, check_positive_int
from ..blocks.base import AbstractBlock, AbstractUnitBlock
from ..engine import AbstractDepthLoop, Adjoint, AutoLoop
from ..engine.base import Final
from ..laws.unit import AbstractGaussianLaw, AbstractLaw, as_law
from ..scaling import AbstractScaling, resolve_alpha


def _depth_and_width(block: AbstractBlock, params: PyTree) -> tuple[int, int]:
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError("params must contain at least one array")
    lead = 2 if isinstance(block, AbstractUnitBlock) else 1
    axes = "(L, M, ...)" if lead == 2 else "(L, ...)"
    shapes = [jnp.shape(leaf) for leaf in leaves]
    if any(len(s) < lead for s in shapes) or len({s[:lead] for s in shapes}) != 1:
        raise ValueError(
            f"params must be stacked with leading axes {axes} shared by every leaf, "
            f"got leaf shapes {shapes}"
        )
    L = shapes[0][0]
    M = shapes[0][1] if lead == 2 else 1
    if L < 1 or M < 1:
        raise ValueError(f"params must have L >= 1 and M >= 1, got L={L}, M={M}")
    return L, M


class ResNet(eqx.Module):
    """A finite residual network (docs: Mathematics §1).

    `h^0 = x` (or `W_in x` with an embedding), `h^l = h^{l-1} + α layer(h^{l-1}, θ_l)`
    for `l = 1..L`, output `h^L` (or `W_outᵀ h^L / D` with a readout).

    **Arguments:**

    - `block`: an `AbstractUnitBlock` (units summed over M) or an
      `AbstractLayerBlock`.
    - `params`: a pytree stacked along depth: leaves of shape `(L, M, ...)` for a
      unit block, `(L, ...)` for a layer block.
    - `alpha`: the residual scaling α (a positive Python number).
    - `embedding`: optional `(D, d_in)` matrix W_in, `h^0 = W_in x`.
    - `readout`: optional `(D, d_out)` matrix W_out, output `W_outᵀ h^L / D`.
    - `loop`: how the network runs over depth, an `AbstractDepthLoop` (`ScanLoop`,
      `FusedLoop`, `AutoLoop`); default `AutoLoop()`: the scan on a CPU, the fused
      kernels of a 2LP on a GPU where they apply. It changes the speed, never the
      values (up to rounding).

    Concrete `params`, `embedding`, `readout` and inputs must be finite (a one-line
    error naming the argument and the first NaN or inf); traced ones, under `jit`,
    `vmap` or `grad`, are not checked.

    Use `ResNet.sample` to draw the parameters from a law μ_0. `net(x)` is the output
    for one input (batch with `jax.vmap(net)`); `net.states(xs)` and
    `net.adjoint(xs, w)` run a batch through the depth loop at once.
    """

    block: AbstractBlock
    params: PyTree
    embedding: Float[Array, "D d_in"] | None
    readout: Float[Array, "D d_out"] | None
    loop: AbstractDepthLoop
    alpha: float = eqx.field(static=True)
    L: int = eqx.field(static=True)
    M: int = eqx.field(static=True)

    def __init__(
        self,
        block: AbstractBlock,
        params: PyTree,
        alpha: float,
        *,
        embedding: Float[Array, "D d_in"] | None = None,
        readout: Float[Array, "D d_out"] | None = None,
        loop: AbstractDepthLoop | None = None,
    ):
        if not isinstance(block, AbstractBlock):
            raise ValueError(
                "block must be an AbstractUnitBlock or AbstractLayerBlock, "
                f"got {type(block).__name__}"
            )
        self.L, self.M = _depth_and_width(block, params)
        try:
            alpha = float(alpha)
        except (TypeError, ValueError, jax.errors.ConcretizationTypeError):
            raise ValueError(f"alpha must be a Python number, got {alpha!r}") from None
        if not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be finite and > 0, got {alpha!r}")
        for name, mat in (("embedding", embedding), ("readout", readout)):
            if mat is not None and jnp.ndim(mat) != 2:
                raise ValueError(f"{name} must be a 2-D matrix, got shape {jnp.shape(mat)}")
        if embedding is not None and readout is not None:
            if jnp.shape(embedding)[0] != jnp.shape(readout)[0]:
                raise ValueError(
                    f"embedding (shape {jnp.shape(embedding)}) and readout "
                    f"(shape {jnp.shape(readout)}) must share their first dimension D"
                )
        # concrete arrays only: under `jit` they are traced and pass (no host round trip)
        for name, value in (("params", params), ("embedding", embedding), ("readout", readout)):
            check_finite_array(value, name)
        loop = AutoLoop() if loop is None else loop
        if not isinstance(loop, AbstractDepthLoop):
            raise ValueError(f"loop must be an AbstractDepthLoop, got {type(loop).__name__}")
        self.block = block
        self.params = params
        self.alpha = alpha
        self.embedding = embedding
        self.readout = readout
        self.loop = loop

    @classmethod
    def sample(
        cls,
        block: AbstractBlock,
        law: AbstractLaw,
        *,
        L: int,
        M: int | None = None,
        scaling: AbstractScaling | float,
        key: PRNGKeyArray,
        embedding: Float[Array, "D d_in"] | None = None,
        readout: Float[Array, "D d_out"] | None = None,
        loop: AbstractDepthLoop | None = None,
    ) -> "ResNet":
        """Draw the parameters i.i.d. from `law`, one draw per unit (or per layer).

        **Arguments:**

        - `block`, `embedding`, `readout`, `loop`: as in `ResNet`.
        - `law`: the initial law μ_0 of one unit's (or one layer's) parameters (or a
          function of no arguments returning it, `laws.unit.as_law`).
        - `L`: depth (>= 1). `M`: units per layer (>= 1), for unit blocks only.
        - `scaling`: an `AbstractScaling` evaluated at `(L, M)`, or a number.
        - `key`: a `jax.random` key (`jax.random.key(0)`; an integer is refused).
        """
        check_key(key)
        law = as_law(law)
        if isinstance(L, bool) or not isinstance(L, int) or L < 1:
            raise ValueError(f"L must be an integer >= 1, got {L!r}")
        check_positive_int(L, "L")  # and at most 2^31 - 1
        unit = isinstance(block, AbstractUnitBlock)
        if unit:
            if M is None or isinstance(M, bool) or not isinstance(M, int) or M < 1:
                raise ValueError(f"M must be an integer >= 1 for a unit block, got {M!r}")
            check_positive_int(M, "M")
        elif M not in (None, 1):
            raise ValueError(f"M must be None (or 1) for a layer block, got {M!r}")
        width = M if unit and M is not None else 1
        alpha = resolve_alpha(scaling, L, width)
        shape = (L, width) if unit else (L,)
        if isinstance(law, AbstractGaussianLaw):
            # one draw of every Gaussian coordinate: the same law as one key per unit, and
            # far cheaper to compile than splitting L·M keys
            g = jr.normal(key, shape + (law.gaussian_dim,))
            transform = jax.vmap(law.transform)
            params = jax.vmap(transform)(g) if unit else transform(g)
        else:
            keys = jr.split(key, shape)
            params = jax.vmap(jax.vmap(law.sample))(keys) if unit else jax.vmap(law.sample)(keys)
        return cls(block, params, alpha, embedding=embedding, readout=readout, loop=loop)

    def embed(self, x: Float[Array, " d_in"]) -> Float[Array, " d"]:
        """h^0 for one input: `x`, or `W_in x` with an embedding."""
        if jnp.ndim(x) != 1:
            raise ValueError(
                f"x must be a single input of shape (d,), got shape {jnp.shape(x)}; "
                "batch over inputs with jax.vmap"
            )
        check_finite_array(x, "x")
        if self.embedding is not None and jnp.shape(x)[0] != jnp.shape(self.embedding)[1]:
            raise ValueError(
                f"x has dimension {jnp.shape(x)[0]} but the embedding expects "
                f"{jnp.shape(self.embedding)[1]}"
            )
        return x if self.embedding is None else self.embedding @ x

    def output(self, h: Float[Array, " d"]) -> Float[Array, " d_out"]:
        """The output for one final state h^L: `h^L`, or `W_outᵀ h^L / D` with a readout."""
        if self.readout is None:
            return h
        if jnp.shape(h) != jnp.shape(self.readout)[:1]:
            raise ValueError(
                f"readout has shape {jnp.shape(self.readout)} but the state h^L has shape "
                f"{jnp.shape(h)}: its first dimension must be the state's D"
            )
        return self.readout.T @ h / self.readout.shape[0]

    def _initial(self, xs: Float[Array, "n d_in"]) -> Float[Array, "n d"]:
        """h^0 of a batch; a one-line error unless `xs` is `(n, d_in)`, finite, and fits
        the block (the finiteness of concrete inputs only: under `jit` it is not checked)."""
        if jnp.ndim(xs) != 2:
            raise ValueError(f"xs must have shape (n, d_in), got {jnp.shape(xs)}")
        check_finite_array(xs, "xs")
        h0 = jax.vmap(self.embed)(xs)
        first = jax.tree.map(lambda p: p[0], self.params)
        try:
            out = jax.eval_shape(self.block.layer, h0[0], first)
        except (TypeError, ValueError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ValueError(
                f"x (state shape {h0.shape[1:]}) does not fit the block and params: {reason}"
            ) from None
        if out.shape != h0.shape[1:]:
            raise ValueError(
                f"block.layer maps a state of shape {h0.shape[1:]} to shape {out.shape}; "
                "the residual increment must have the shape of the state (check x and params)"
            )
        return h0

    def states(self, xs: Float[Array, "n d_in"]) -> Float[Array, "n L+1 d"]:
        """Every hidden state h^0..h^L of a batch of inputs, `(n, L + 1, d)`.

        Differentiable through `ScanLoop`; the fused kernels' states are not (use
        `adjoint` for the backward states).
        """
        h0 = self._initial(xs)
        return self.loop.forward(self.block, self.params, self.alpha, h0, return_all=True)

    def adjoint(self, xs: Float[Array, "n d_in"], final: Final) -> Adjoint:
        """The forward pass and the adjoint recursion (B) of Mathematics §2 for a batch.

        `final` is `b^L`: an `(n, d)` array, or a function of the final states h^L
        `(n, d)` returning it (a loss gradient). **Returns:** an `Adjoint` with every
        input's states `h`, `b` (`(n, L + 1, d)`) and the parameter gradients summed
        over the inputs, `Σ_i α D_2φ(h_i^{l-1}, z^{j,l})ᵀ b_i^l`. They agree with
        `jax.grad` of the forward pass to round-off (tested for every loop).
        """
        h0 = self._initial(xs)
        if not callable(final):
            check_finite_array(final, "final")
        return self.loop.adjoint(self.block, self.params, self.alpha, h0, final)

    def with_params(self, params: PyTree, embedding=None, readout=None) -> "ResNet":
        """This network with other params, embedding and readout of the same shapes, not
        checked for NaN: for the library's own results (gradients, trained parameters),
        where a NaN is an outcome to report, not an input to refuse."""
        return eqx.tree_at(
            lambda m: (m.params, m.embedding, m.readout),
            self,
            (params, embedding, readout),
            is_leaf=lambda x: x is None,
        )

    def __call__(self, x: Float[Array, " d_in"]) -> Float[Array, " d_out"]:
        """The network output for one input x."""
        self.embed(x)  # a one-line error unless x is one input that fits the embedding
        h0 = self._initial(x[None])
        hL = self.loop.forward(self.block, self.params, self.alpha, h0)[0]
        return self.output(hL)
