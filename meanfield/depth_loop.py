"""The depth loop of a finite ResNet over a batch of inputs, by the fastest method.

Every method computes the same recursion (R) of SPEC §1 for a batch of inputs:

* `"scan"`: the foundation's own path, `jax.vmap(net)` (a `lax.scan` over layers,
  one step per layer). The oracle every other method is tested against, and the CPU
  path (on a CPU a loop step costs about as much as a kernel call, and no fusion wins).
* `"unroll"`: one batched `lax.scan` whose body runs `unroll` layers, so the loop
  overhead is paid once per `unroll` layers. Works for every block.
* `"pallas"`: the fused kernels of `meanfield.fused_two_layer` (2LP blocks only):
  one kernel runs all L layers with h on chip, and a second the backward pass.
  On a CPU it runs in Pallas interpret mode (for tests; slow).
* `"auto"`: `"scan"` on CPU; on GPU/TPU `"pallas"` for a 2LP block whose layer fits
  one kernel tile and whose kernels compile on this device (checked once per
  configuration by compiling a tiny instance), else `"unroll"`.

Seeds are batched by `jax.vmap` over networks (the kernels gain a grid axis), so all
seeds and inputs of a grid point run as one program.

`forward_batch` (outputs or every state), `adjoint_batch` (states and the adjoint
recursion) and `loss_and_gradients_batch` (a GD step's loss and gradients: what
`meanfield.train(method=...)` and the mean-ODE study run) take any of the methods. A
2LP with weighted units (`WeightedUnits`, how `coupled_errors` pads a network) runs in
the kernels as a 2LP with v scaled by the weights.
"""

import functools
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from . import fused_two_layer as fused
from ._validation import check_positive_int
from .backward import (
    Adjoint,
    Gradients,
    backward_from_states,
    check_data,
    loss_and_gradients,
    output_cotangent,
    squared_loss,
)
from .blocks import WeightedUnits
from .resnet import ResNet
from .two_layer import TwoLayerBlock, TwoLayerParams

METHODS = ("auto", "scan", "unroll", "pallas")
DEFAULT_UNROLL = 8


class PallasOptions(NamedTuple):
    """Tiling of the fused kernels (all optional; see `meanfield.fused_two_layer`).

    - `block_batch`: inputs per kernel program (a power of two; default
      `fused_two_layer.default_block_batch`: few on a GPU, many in interpret mode).
    - `layers_per_step`: layers unrolled in one step of the kernel loop (default 8).
    - `num_warps`, `num_stages`: Triton settings on GPU.
    - `interpret`: Pallas interpret mode; default: on exactly when running on CPU.
    - `weight_loads`: when the kernels load each layer's weights, one of
      `fused_two_layer.WEIGHT_LOADS` (`"inline"`, `"hoisted"`, `"prefetch"`); it
      changes the speed on a GPU, never the values. Default `"prefetch"`: on an H100
      at d 8, M 16, L 4096, batch 256 (float32) the forward pass took 1.00 ms against
      1.42 ms `"inline"`, forward+backward 9.3 ms against 16.1 ms.
    """

    block_batch: int | None = None
    layers_per_step: int = 8
    num_warps: int | None = None
    num_stages: int | None = None
    interpret: bool | None = None
    weight_loads: str = "prefetch"


class BatchAdjoint(NamedTuple):
    """Forward states, backward states and input-summed gradients of a batch (SPEC §2).

    - `h`: `(n, L + 1, d)`, h^0..h^L of every input.
    - `b`: `(n, L + 1, d)`, b^0..b^L with b^L = w.
    - `grads`: the params pytree, each leaf `Σ_i α D_2φ(h_i^{l-1}, z^{j,l})ᵀ b_i^l`.
    """

    h: Array
    b: Array
    grads: PyTree


class _TwoLayer(NamedTuple):
    """The parts of a 2LP network (`weights`: the `WeightedUnits` weights, or None)."""

    block: TwoLayerBlock
    u: Array
    v: Array
    weights: Array | None

    def kernel_v(self) -> Array:
        """v as the kernels take it: `w v` for weighted units (no gradient to w)."""
        if self.weights is None:
            return self.v
        return lax.stop_gradient(self.weights)[..., None].astype(self.v.dtype) * self.v


def _two_layer(net: ResNet) -> _TwoLayer | None:
    """The 2LP parts of `net`, or None. A `WeightedUnits` 2LP block (params
    `(TwoLayerParams, weights)`, weights `(L, M)`) is a 2LP with `v` scaled by the
    weights: `w v ρ(c uᵀh)`, the form in which `coupled_errors` pads a network."""
    block, params, weights = net.block, net.params, None
    # exact types: a subclass may compute another layer, which the kernels would ignore
    if type(block) is WeightedUnits and isinstance(params, tuple) and len(params) == 2:
        block, (params, weights) = block.block, params
    if type(block) is not TwoLayerBlock or type(params) is not TwoLayerParams:
        return None
    u, v = params.u, params.v
    if not (u.ndim == 3 and u.shape == v.shape and jnp.issubdtype(u.dtype, jnp.floating)):
        return None
    if weights is not None and jnp.shape(weights) != u.shape[:2]:
        return None
    return _TwoLayer(block, u, v, weights)


def _kernel_config(
    net: ResNet, parts: _TwoLayer, n: int, options: PallasOptions
) -> fused.KernelConfig:
    """The kernels' settings for `net`, whose 2LP parts (`_two_layer`) are `parts`."""
    L, M, d = parts.u.shape
    interpret = options.interpret
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    block_batch = options.block_batch or fused.default_block_batch(n, M, d, not interpret)
    if block_batch < 1 or block_batch & (block_batch - 1):
        raise ValueError(f"block_batch must be a power of two, got {block_batch}")
    if options.layers_per_step < 1:
        raise ValueError(f"layers_per_step must be >= 1, got {options.layers_per_step}")
    fused.check_weight_loads(options.weight_loads)
    return fused.KernelConfig(
        alpha=net.alpha,
        activation=parts.block.activation,
        inner_scale=float(parts.block.inner_scale),
        block_batch=block_batch,
        layers_per_step=options.layers_per_step,
        interpret=bool(interpret),
        num_warps=options.num_warps,
        num_stages=options.num_stages,
        weight_loads=options.weight_loads,
    )


@functools.lru_cache(maxsize=256)
def _compiles(cfg: fused.KernelConfig, M: int, d: int, dtype: str) -> str | None:
    """Compile a tiny instance of the kernels, as `jax.grad` runs them (the custom VJP)
    and as `adjoint_batch` runs them (every state saved); None if they compile, else
    the reason."""
    K, n = cfg.layers_per_step, cfg.block_batch
    h0 = jax.ShapeDtypeStruct((n, d), dtype)
    w = jax.ShapeDtypeStruct((2 * K, M, d), dtype)

    def loss(h0, u, v):
        return jnp.sum(fused.fused_hidden(h0, u, v, cfg))

    def states(h0, u, v):
        return fused.fused_states(h0, u, v, lambda hL: hL, cfg)

    try:
        jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(h0, w, w).compile()
        jax.jit(states).lower(h0, w, w).compile()
    except Exception as err:  # any lowering/compile failure means: do not use the kernel
        return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
    return None


def pallas_supported(net: ResNet, n: int, options: PallasOptions | None = None) -> tuple[bool, str]:
    """Whether the fused kernels apply to `net` for a batch of `n` inputs, and why not.

    Checks the block (2LP, or a `WeightedUnits` 2LP), the tile size, and that both
    kernels compile on the default device (once per configuration; the answer is
    cached). `net` may hold `jax.ShapeDtypeStruct`s (`jax.eval_shape` of a network).
    """
    options = options or PallasOptions()
    parts = _two_layer(net)
    if parts is None:
        return False, "not a 2LP network (TwoLayerBlock with TwoLayerParams)"
    L, M, d = parts.u.shape
    if not fused.eligible(M, d):
        return False, f"one layer (M={M}, d={d}) exceeds a kernel tile ({fused.MAX_TILE})"
    cfg = _kernel_config(net, parts, n, options)._replace(alpha=1.0)  # α does not affect compiling
    reason = _compiles(cfg, M, d, jnp.dtype(parts.u.dtype).name)
    return reason is None, reason or "ok"


def choose_method(
    net: ResNet, n: int, method: str = "auto", options: PallasOptions | None = None
) -> str:
    """Resolve `method` (one of `METHODS`) to the method actually run."""
    options = options or PallasOptions()
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "pallas" and _two_layer(net) is None:
        raise ValueError(
            "method='pallas' needs a 2LP network (exactly TwoLayerBlock and TwoLayerParams, "
            "or WeightedUnits of them)"
        )
    if method != "auto":
        return method
    if jax.default_backend() == "cpu":
        return "scan"
    ok, reason = pallas_supported(net, n, options)
    if not ok and _two_layer(net) is not None:
        _warn_once(f"fused Pallas depth loop not used ({reason}); using the unrolled scan")
    return "pallas" if ok else "unroll"


@functools.lru_cache(maxsize=64)
def _warn_once(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def _check_batch(net: ResNet, xs, unroll: int = DEFAULT_UNROLL) -> int:
    """The batch size; a one-line error if `xs` is not `(n, d_in)` or its rows do not
    fit the network (for every method, as the scan checks: the kernels would pad a
    mismatched state instead of failing)."""
    check_positive_int(unroll, "unroll")
    if jnp.ndim(xs) != 2:
        raise ValueError(f"xs must have shape (n, d_in), got {jnp.shape(xs)}")
    jax.eval_shape(net.hidden, jax.ShapeDtypeStruct(jnp.shape(xs)[1:], jnp.result_type(xs)))
    return jnp.shape(xs)[0]


def _unrolled(net: ResNet, h0, unroll: int, return_all: bool):
    """One batched scan over layers, `unroll` layers per loop step."""
    layer = jax.vmap(net.block.layer, in_axes=(0, None))

    def step(h, theta):
        h = h + net.alpha * layer(h, theta)
        return h, (h if return_all else None)

    hL, hs = lax.scan(step, h0, net.params, unroll=min(unroll, net.L))
    if return_all:
        return jnp.concatenate([h0[:, None], jnp.swapaxes(hs, 0, 1)], axis=1)
    return hL


def forward_batch(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    *,
    method: str = "auto",
    return_all: bool = False,
    unroll: int = DEFAULT_UNROLL,
    options: PallasOptions | None = None,
) -> Array:
    """The network on a batch of inputs, by one of the `METHODS`.

    **Arguments:**

    - `net`: a `ResNet` (vmap over networks to batch seeds).
    - `xs`: `(n, d_in)` inputs.
    - `method`: `"auto"` (default), `"scan"`, `"unroll"` or `"pallas"` (module docstring).
    - `return_all`: return the hidden states h^0..h^L as `(n, L + 1, d)` instead of
      the outputs. Differentiable for `"scan"` and `"unroll"`; for the kernels
      `jax.grad` raises (use `adjoint_batch` to get backward states).
    - `unroll`: layers per loop step of `"unroll"`.
    - `options`: `PallasOptions` for `"pallas"`.

    **Returns:** `(n, d_out)` outputs (or the states with `return_all`).
    Differentiable (`jax.grad`): the fused kernels carry their own backward kernel.
    """
    n = _check_batch(net, xs, unroll)
    options = options or PallasOptions()
    chosen = choose_method(net, n, method, options)
    if chosen == "scan":
        if return_all:
            return jax.vmap(lambda x: net.hidden(x, return_all=True))(xs)
        return jax.vmap(net)(xs)
    h0 = jax.vmap(net.embed)(xs)
    if chosen == "unroll":
        out = _unrolled(net, h0, unroll, return_all)
    else:
        parts = _two_layer(net)
        cfg = _kernel_config(net, parts, n, options)
        u, v = parts.u, parts.kernel_v()
        if return_all:
            return fused.fused_forward_states(h0, u, v, cfg)
        out = fused.fused_hidden(h0, u, v, cfg)
    return out if return_all else jax.vmap(net.output)(out)


def adjoint_batch(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ws: Float[Array, "n d"] | Callable[[Array], Array],
    *,
    method: str = "auto",
    unroll: int = DEFAULT_UNROLL,
    options: PallasOptions | None = None,
) -> BatchAdjoint:
    """Forward pass and the explicit adjoint recursion (B) for a batch, `b^L = w_i`.

    `ws` is the `(n, d)` array of final cotangents, or a function of the final states
    h^L `(n, d)` returning them (a loss gradient: see `loss_and_gradients_batch`).
    The gradients are summed over the inputs (divide by n for a mean loss); the
    states are kept for every input (what the coupling with a limit needs).
    `"scan"` runs the foundation's `backward` per input; `"unroll"` one batched
    reverse scan; `"pallas"` the fused kernels.
    """
    n = _check_batch(net, xs, unroll)
    if not callable(ws) and jnp.shape(ws)[0] != n:
        raise ValueError(f"ws must have one row per input ({n}), got shape {jnp.shape(ws)}")
    final = ws if callable(ws) else (lambda hL: ws)
    options = options or PallasOptions()
    chosen = choose_method(net, n, method, options)
    if chosen == "scan":
        hs = jax.vmap(lambda x: net.hidden(x, return_all=True))(xs)
        adj = jax.vmap(lambda h, w: backward_from_states(net, h, w))(hs, final(hs[:, -1]))
        return BatchAdjoint(adj.h, adj.b, jax.tree.map(lambda g: jnp.sum(g, axis=0), adj.grads))
    if chosen == "pallas":
        h0 = jax.vmap(net.embed)(xs)
        parts = _two_layer(net)
        cfg = _kernel_config(net, parts, n, options)
        st = fused.fused_states(h0, parts.u, parts.kernel_v(), final, cfg)
        return BatchAdjoint(st.h, st.b, _unweighted_grads(parts, st.u, st.v))
    hs = forward_batch(net, xs, method="unroll", return_all=True, unroll=unroll)
    ws = final(hs[:, -1])
    layer = jax.vmap(net.block.layer, in_axes=(0, None))

    def step(b, inputs):
        h_prev, theta = inputs
        _, vjp = jax.vjp(layer, h_prev, theta)
        gh, gtheta = vjp(b)
        b = b + net.alpha * gh
        return b, (b, jax.tree.map(lambda g: net.alpha * g, gtheta))

    h_prev = jnp.swapaxes(hs[:, :-1], 0, 1)
    _, (bs, grads) = lax.scan(
        step, ws, (h_prev, net.params), reverse=True, unroll=min(unroll, net.L)
    )
    b = jnp.concatenate([jnp.swapaxes(bs, 0, 1), ws[:, None]], axis=1)
    return BatchAdjoint(hs, b, grads)


def _unweighted_grads(parts: _TwoLayer, gu: Array, gv: Array) -> PyTree:
    """The kernels' gradients (of u and of the weighted v) as the network's params
    pytree: for `WeightedUnits`, `∂/∂v = w ∂/∂(w v)` and no gradient for the weights."""
    if parts.weights is None:
        return TwoLayerParams(u=gu, v=gv)
    w = parts.weights[..., None].astype(gv.dtype)
    return (TwoLayerParams(u=gu, v=w * gv), jnp.zeros_like(parts.weights))


def loss_and_gradients_batch(
    net: ResNet,
    xs: Float[Array, "n d_in"],
    ys: Float[Array, "n d_out"],
    loss: Callable = squared_loss,
    *,
    method: str = "auto",
    unroll: int = DEFAULT_UNROLL,
    options: PallasOptions | None = None,
) -> Gradients:
    """`meanfield.loss_and_gradients` with the depth loops run by one of the `METHODS`.

    `"scan"` is `loss_and_gradients` itself. The other methods run the forward and
    backward loops once for the whole batch (`adjoint_batch` with the loss gradient as
    final cotangent) and sum the gradients over the inputs as they go, so the returned
    `adjoint` holds every input's states `h` and `b` but `grads=None`.
    """
    check_data(net, xs, ys)  # the rows' fit to the network included
    check_positive_int(unroll, "unroll")
    n = jnp.shape(xs)[0]
    options = options or PallasOptions()
    chosen = choose_method(net, n, method, options)
    if chosen == "scan":
        return loss_and_gradients(net, xs, ys, loss)
    head = jax.vmap(lambda h, y: output_cotangent(net, h, y, loss))
    adj = adjoint_batch(
        net, xs, lambda hL: head(hL, ys)[1], method=chosen, unroll=unroll, options=options
    )
    hL = adj.h[:, -1]
    values, _, dpred = head(hL, ys)
    g_emb = g_read = None
    if net.embedding is not None:
        g_emb = jnp.einsum("nd,ne->de", adj.b[:, 0], xs) / n
    if net.readout is not None:
        g_read = jnp.einsum("nd,no->do", hL, dpred) / (n * net.readout.shape[0])
    grads = ResNet(
        net.block,
        jax.tree.map(lambda g: g / n, adj.grads),
        net.alpha,
        embedding=g_emb,
        readout=g_read,
    )
    return Gradients(loss=jnp.mean(values), grads=grads, adjoint=Adjoint(adj.h, adj.b, None))
