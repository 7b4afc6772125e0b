"""A fused depth loop for the 2LP ResNet: one Pallas kernel for all L layers.

A plain `lax.scan` over layers launches a few kernels per layer; for the small d and M
of convergence studies each launch costs far more than the arithmetic (Mathematics §7 asks for
large L many times over). Here one kernel runs the whole recursion

    h^l = h^{l-1} + α Σ_j v_j^l ρ(c · u_j^l · h^{l-1}),      l = 1..L

for a tile of `block_batch` inputs: the tile of h stays in registers for all L layers
and the weights of each layer are read from memory as the loop reaches them. They do
not depend on h, so their loads can be issued ahead of the arithmetic that needs them;
`KernelConfig.weight_loads` says how far ahead (`WEIGHT_LOADS`): at each layer
(`"inline"`), for the `layers_per_step` layers of a loop step at its start
(`"hoisted"`), or one loop step ahead, carried through the loop (`"prefetch"`, software
pipelining by hand: the loads of step i + 1 are in flight while step i computes).
The products are written as broadcasts and sums, never as `dot`, so float32 and
float64 both work and no tensor-core rounding enters. Triton has no erf, so ρ = erf
and gelu are evaluated by `meanfield.special` (exp and arithmetic, as accurate as
XLA's). The kernels use Pallas' Triton backend (chosen by passing Triton's compiler
settings; jax 0.11 deprecates it in favour of Mosaic GPU, with a warning); the tests
lower them for an H100 from a CPU machine (`jax.export`), which catches anything
Triton cannot express without a GPU.

The backward pass (recursion (B) of Mathematics §2) is a second kernel running from layer L
down to 1 with b on chip; it reads the forward states saved by the first kernel and
writes per-layer gradients, summed over the inputs of its tile(s). `jax.grad` of
`fused_hidden` uses it through a `jax.custom_vjp`.

Shapes are padded to powers of two (Triton's tiles): zero coordinates of h, u, v and
zero units (u = v = 0) contribute exactly 0, and zero layers appended at the end are
the identity, so padding changes no value. On CPU the kernels run in Pallas interpret
mode only (this is how they are tested against the plain scan).
"""

import math
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.lax as lax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .. import special
from ..blocks.activations import resolve_activation

# largest tile (inputs × units × coordinates) one kernel program holds for one layer
MAX_TILE = 2048
# at most this many programs write separate gradient partial sums; beyond it a program
# loops over several input tiles and accumulates (keeps the partials' memory bounded)
MAX_PARTIALS = 64
# compiled kernels give each program as few inputs as keep the programs at most this
# many (about what an H100 holds at once: 132 SMs x 16 programs of 4 warps). Measured on
# an H100 at d 8, M 16, L 4096, batch 256, float32 (benchmarks/kernel_variants.py):
# 1 input per program 0.97 ms, 4 inputs 1.41 ms, 16 inputs 3.3 ms (the former default)
RESIDENT_PROGRAMS = 2048
# when the kernels issue the loads of the weights (and saved states) of a layer
WEIGHT_LOADS = ("inline", "hoisted", "prefetch")


class KernelConfig(NamedTuple):
    """Static settings of the fused kernels (hashable: part of the compiled program).

    - `alpha`: the residual scaling α.
    - `activation`: ρ, a name from `meanfield.ACTIVATIONS` or a scalar callable.
    - `inner_scale`: c in ρ(c · uᵀh).
    - `block_batch`: inputs per kernel program (a power of two).
    - `layers_per_step`: layers unrolled in one step of the kernel's loop.
    - `interpret`: run in Pallas interpret mode (CPU, tests).
    - `num_warps`, `num_stages`: Triton settings on GPU (`None`: Triton's default).
    - `weight_loads`: one of `WEIGHT_LOADS` (module docstring); no effect on values.
    """

    alpha: float
    activation: str | Callable
    inner_scale: float = 1.0
    block_batch: int = 16
    layers_per_step: int = 8
    interpret: bool = False
    num_warps: int | None = None
    num_stages: int | None = None
    weight_loads: str = "inline"


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def default_block_batch(n: int, M: int, d: int, compiled: bool = False) -> int:
    """Inputs per program (a power of two within `MAX_TILE` elements per layer).

    Compiled (GPU): as few as keep at most `RESIDENT_PROGRAMS` programs, since each
    program's time is the latency of its L dependent layers, not its arithmetic.
    Interpret mode (CPU): as many as fit, since every program costs a Python-level
    step of the interpreter."""
    per_input = next_pow2(M) * next_pow2(d)
    largest = max(1, min(next_pow2(n), MAX_TILE // per_input if per_input <= MAX_TILE else 1))
    if not compiled:
        return largest
    return min(largest, next_pow2(-(-n // RESIDENT_PROGRAMS)))


def eligible(M: int, d: int) -> bool:
    """Whether one layer of one input fits a tile (else the scan is compute-bound anyway)."""
    return next_pow2(M) * next_pow2(d) <= MAX_TILE


class _Padded(NamedTuple):
    n: int
    L: int
    M: int
    d: int
    Bb: int  # inputs per tile
    Bp: int  # padded batch
    Lp: int
    Mp: int
    dp: int


def _padded(n: int, L: int, M: int, d: int, cfg: KernelConfig) -> _Padded:
    Bb = cfg.block_batch
    K = cfg.layers_per_step
    # the backward kernel gives each program `per` input tiles, at most MAX_PARTIALS
    # programs: the tiles are padded to a multiple of `per` (zero inputs with a zero
    # cotangent add nothing), so that a batch of prime size does not fall to one program
    tiles = -(-n // Bb)
    per = -(-tiles // MAX_PARTIALS)
    return _Padded(
        n=n,
        L=L,
        M=M,
        d=d,
        Bb=Bb,
        Bp=-(-tiles // per) * per * Bb,
        Lp=-(-L // K) * K,
        Mp=next_pow2(M),
        dp=next_pow2(d),
    )


def _pad(x: Array, shape: tuple[int, ...]) -> Array:
    return jnp.pad(x, [(0, t - s) for s, t in zip(x.shape, shape, strict=True)])


def _compiler_params(cfg: KernelConfig):
    """Triton's settings whenever a kernel is compiled rather than interpreted. Passing
    them also selects Pallas' Triton backend: the GPU default may be Mosaic GPU (as in
    jax 0.10), on which these kernels do not lower, and the default backend says nothing
    when lowering for a GPU from another machine (`jax.export`)."""
    if cfg.interpret:
        return None
    from jax.experimental.pallas import triton as pltriton

    params = getattr(pltriton, "CompilerParams", None)
    if params is None:  # its name before jax 0.6
        params = pltriton.TritonCompilerParams  # pyright: ignore[reportAttributeAccessIssue]
    return params(num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def _pallas_call(kernel, cfg, **kwargs):
    from jax.experimental import pallas as pl

    params = _compiler_params(cfg)
    if params is not None:
        kwargs["compiler_params"] = params
    return pl.pallas_call(kernel, interpret=cfg.interpret, **kwargs)


def _ds(start, size):
    from jax.experimental import pallas as pl

    return pl.ds(start, size)


# activations whose library versions use a primitive Triton lacks (erf), by name
KERNEL_ACTIVATIONS = {"erf": special.erf, "gelu": special.gelu}


def kernel_activation(activation):
    """ρ as the kernels evaluate it: `meanfield.special`'s erf and gelu (exp and
    arithmetic only, as accurate as XLA's) for those names, else `resolve_activation`."""
    if isinstance(activation, str) and activation in KERNEL_ACTIVATIONS:
        return KERNEL_ACTIVATIONS[activation]
    return resolve_activation(activation)


def _layer_forward(h, u, v, cfg: KernelConfig):
    """One layer on a tile: h (B, d), u and v (M, d)."""
    rho = kernel_activation(cfg.activation)
    s = jnp.sum(h[:, None, :] * u[None, :, :], axis=2)
    a = rho(cfg.inner_scale * s)
    return h + cfg.alpha * jnp.sum(a[:, :, None] * v[None, :, :], axis=1)


def check_weight_loads(weight_loads: str) -> str:
    """`weight_loads` if it is one of `WEIGHT_LOADS`, else a one-line `ValueError`."""
    if weight_loads not in WEIGHT_LOADS:
        choices = ", ".join(WEIGHT_LOADS)
        raise ValueError(f"weight_loads must be one of {choices}, got {weight_loads!r}")
    return weight_loads


def layer_loop(steps: int, K: int, init, load_one, body, weight_loads: str):
    """`lax.fori_loop` over `steps` loop steps of `K` layers each, the loads apart.

    `load_one(i, k)` reads what layer k of step i needs from memory (no dependence on
    the carry); `body(i, carry, get)` runs the K layers of step i, taking layer k's
    loads from `get(k)`. `weight_loads` places the loads (`WEIGHT_LOADS`): inside
    `get` (`"inline"`), all K at the start of the step (`"hoisted"`), or one step
    ahead, carried by the loop (`"prefetch"`; the last step re-reads its own loads).
    """
    check_weight_loads(weight_loads)

    def loads(i):
        return tuple(load_one(i, k) for k in range(K))

    if weight_loads == "prefetch":

        def step(i, carry):
            x, current = carry
            ahead = loads(jnp.minimum(i + 1, steps - 1))
            return body(i, x, current.__getitem__), ahead

        return lax.fori_loop(0, steps, step, (init, loads(0)))[0]
    if weight_loads == "hoisted":
        return lax.fori_loop(0, steps, lambda i, x: body(i, x, loads(i).__getitem__), init)
    return lax.fori_loop(0, steps, lambda i, x: body(i, x, lambda k: load_one(i, k)), init)


def _forward_kernel(cfg: KernelConfig, shape: _Padded, save: bool):
    K = cfg.layers_per_step

    def kernel(h0_ref, u_ref, v_ref, hL_ref, *hs_ref):
        def load_one(i, k):
            return u_ref[i * K + k], v_ref[i * K + k]

        def body(i, h, get):
            for k in range(K):
                if save:
                    hs_ref[0][i * K + k] = h  # h^{l-1} of layer l = i K + k + 1
                u, v = get(k)
                h = _layer_forward(h, u, v, cfg)
            return h

        hL_ref[...] = layer_loop(shape.Lp // K, K, h0_ref[...], load_one, body, cfg.weight_loads)

    return kernel


def _forward(h0p, up, vp, cfg: KernelConfig, shape: _Padded, save: bool):
    """hL (Bp, dp), and with `save` the states h^0..h^{Lp-1} as (Lp, Bp, dp)."""
    from jax.experimental import pallas as pl

    s = shape
    tile = pl.BlockSpec((s.Bb, s.dp), lambda i: (i, 0))
    weights = pl.BlockSpec((s.Lp, s.Mp, s.dp), lambda i: (0, 0, 0))
    out_shape = [jax.ShapeDtypeStruct((s.Bp, s.dp), h0p.dtype)]
    out_specs = [tile]
    if save:
        out_shape.append(jax.ShapeDtypeStruct((s.Lp, s.Bp, s.dp), h0p.dtype))
        out_specs.append(pl.BlockSpec((s.Lp, s.Bb, s.dp), lambda i: (0, i, 0)))
    call = _pallas_call(
        _forward_kernel(cfg, s, save),
        cfg,
        out_shape=out_shape,
        grid=(s.Bp // s.Bb,),
        in_specs=[tile, weights, weights],
        out_specs=out_specs,
        name="meanfield_fused_2lp_forward",
    )
    return call(h0p, up, vp)


def _groups(shape: _Padded) -> tuple[int, int]:
    """(programs, input tiles per program) of the backward kernel."""
    tiles = shape.Bp // shape.Bb
    per = -(-tiles // MAX_PARTIALS)
    assert tiles % per == 0, (tiles, per)  # `_padded` pads the tiles to a multiple
    return tiles // per, per


def _backward_kernel(cfg: KernelConfig, shape: _Padded, per: int, save: bool):
    K, Bb, Lp = cfg.layers_per_step, shape.Bb, shape.Lp
    rho = kernel_activation(cfg.activation)
    c, alpha = cfg.inner_scale, cfg.alpha

    def kernel(hs_ref, u_ref, v_ref, w_ref, b0_ref, gu_ref, gv_ref, *bs_ref):
        def tile(g, carry):
            rows = _ds(g * Bb, Bb)

            def load_one(i, k):
                layer = Lp - 1 - (i * K + k)
                return hs_ref[layer, rows, :], u_ref[layer], v_ref[layer]

            def body(i, b, get):
                for k in range(K):
                    layer = Lp - 1 - (i * K + k)
                    hp, u, v = get(k)
                    s = c * jnp.sum(hp[:, None, :] * u[None, :, :], axis=2)
                    a, da = jax.jvp(rho, (s,), (jnp.ones_like(s),))
                    q = da * jnp.sum(b[:, None, :] * v[None, :, :], axis=2)
                    gv = alpha * jnp.sum(a[:, :, None] * b[:, None, :], axis=0)
                    gu = (alpha * c) * jnp.sum(q[:, :, None] * hp[:, None, :], axis=0)
                    if per > 1:
                        first = g == 0
                        gv = gv + jnp.where(first, 0.0, gv_ref[layer])
                        gu = gu + jnp.where(first, 0.0, gu_ref[layer])
                    gv_ref[layer], gu_ref[layer] = gv, gu
                    b = b + (alpha * c) * jnp.sum(q[:, :, None] * u[None, :, :], axis=1)
                    if save:
                        bs_ref[0][layer, rows, :] = b  # b^{l-1} of layer l = layer + 1
                return b

            b0_ref[rows, :] = layer_loop(
                Lp // K, K, w_ref[rows, :], load_one, body, cfg.weight_loads
            )
            return carry

        lax.fori_loop(0, per, tile, 0)

    return kernel


def _backward(hs, up, vp, wp, cfg: KernelConfig, shape: _Padded, save: bool):
    """b^0 (Bp, dp), gradients of u and v (Lp, Mp, dp) summed over inputs, and the states
    b^0..b^{Lp-1} as (Lp, Bp, dp) with `save` (else None)."""
    from jax.experimental import pallas as pl

    s = shape
    programs, per = _groups(s)
    rows = per * s.Bb
    tile = pl.BlockSpec((rows, s.dp), lambda i: (i, 0))
    states = pl.BlockSpec((s.Lp, rows, s.dp), lambda i: (0, i, 0))
    weights = pl.BlockSpec((s.Lp, s.Mp, s.dp), lambda i: (0, 0, 0))
    partials = pl.BlockSpec((None, s.Lp, s.Mp, s.dp), lambda i: (i, 0, 0, 0))
    dtype = hs.dtype
    out_shape = [
        jax.ShapeDtypeStruct((s.Bp, s.dp), dtype),
        jax.ShapeDtypeStruct((programs, s.Lp, s.Mp, s.dp), dtype),
        jax.ShapeDtypeStruct((programs, s.Lp, s.Mp, s.dp), dtype),
    ]
    out_specs = [tile, partials, partials]
    if save:
        out_shape.append(jax.ShapeDtypeStruct((s.Lp, s.Bp, s.dp), dtype))
        out_specs.append(states)
    call = _pallas_call(
        _backward_kernel(cfg, s, per, save),
        cfg,
        out_shape=out_shape,
        grid=(programs,),
        in_specs=[states, weights, weights, tile],
        out_specs=out_specs,
        name="meanfield_fused_2lp_backward",
    )
    out = call(hs, up, vp, wp)
    # the weights' gradients in the weights' dtype (computed in the states' dtype), as
    # `jax.grad` of the scan gives them when the two differ
    gu = jnp.sum(out[1], axis=0).astype(up.dtype)
    gv = jnp.sum(out[2], axis=0).astype(vp.dtype)
    return out[0], gu, gv, (out[3] if save else None)


def _pad_all(h0, u, v, cfg):
    (n, d), (L, M, _) = h0.shape, u.shape
    s = _padded(n, L, M, d, cfg)
    wshape = (s.Lp, s.Mp, s.dp)
    return s, _pad(h0, (s.Bp, s.dp)), _pad(u, wshape), _pad(v, wshape)


@partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _fused(h0p, up, vp, cfg: KernelConfig, shape: _Padded):
    return _forward(h0p, up, vp, cfg, shape, save=False)[0]


def _fused_fwd(h0p, up, vp, cfg, shape):
    hL, hs = _forward(h0p, up, vp, cfg, shape, save=True)
    return hL, (hs, up, vp)


def _fused_bwd(cfg, shape, res, w):
    hs, up, vp = res
    return _backward(hs, up, vp, w, cfg, shape, save=False)[:3]


_fused.defvjp(_fused_fwd, _fused_bwd)


def fused_hidden(
    h0: Float[Array, "n d"], u: Float[Array, "L M d"], v: Float[Array, "L M d"], cfg: KernelConfig
) -> Float[Array, "n d"]:
    """h^L for every row of `h0`, through the fused kernel; differentiable in h0, u, v.

    **Arguments:**

    - `h0`: the initial states, one row per input.
    - `u`, `v`: the 2LP weights stacked `(L, M, d)`.
    - `cfg`: the `KernelConfig` (α, ρ, tiles).

    **Returns:** `(n, d)`, the final states h^L.
    """
    s, h0p, up, vp = _pad_all(h0, u, v, cfg)
    hL: Array = _fused(h0p, up, vp, cfg, s)  # pyright: ignore[reportAssignmentType]
    return hL[: s.n, : s.d]


class FusedStates(NamedTuple):
    """All forward and backward states and the input-summed gradients of a batch.

    - `h`: `(n, L + 1, d)`, h^0..h^L of every input.
    - `b`: `(n, L + 1, d)`, b^0..b^L (b^L = w).
    - `u`, `v`: `(L, M, d)`, `Σ_i α D_2φ(h_i^{l-1}, z^{j,l})ᵀ b_i^l` for each weight.
    """

    h: Array
    b: Array
    u: Array
    v: Array


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def fused_forward_states(
    h0: Float[Array, "n d"], u: Float[Array, "L M d"], v: Float[Array, "L M d"], cfg: KernelConfig
) -> Float[Array, "n L+1 d"]:
    """h^0..h^L of every row of `h0` (one fused kernel; not differentiable: `jax.grad`
    through it raises a one-line error; `fused_states` gives the backward states)."""
    s, h0p, up, vp = _pad_all(h0, u, v, cfg)
    hL, hs = _forward(h0p, up, vp, cfg, s, save=True)
    h = jnp.concatenate([hs[: s.L, : s.n, : s.d], hL[None, : s.n, : s.d]], axis=0)
    return jnp.swapaxes(h, 0, 1)


def _states_fwd(h0, u, v, cfg):
    return fused_forward_states(h0, u, v, cfg), None


def _states_bwd(cfg, res, g):
    raise ValueError(
        "the fused kernels' states h^0..h^L (ResNet.states with loop=FusedLoop()) are "
        "not differentiable: differentiate the outputs (net(x)), use loop=ScanLoop(), "
        "or get the backward states from ResNet.adjoint"
    )


fused_forward_states.defvjp(_states_fwd, _states_bwd)


def fused_states(
    h0: Float[Array, "n d"],
    u: Float[Array, "L M d"],
    v: Float[Array, "L M d"],
    w: Float[Array, "n d"] | Callable[[Array], Array],
    cfg: KernelConfig,
) -> FusedStates:
    """Forward states, the adjoint recursion (B) from `b^L = w`, and the gradients summed
    over the inputs, each in one fused kernel (no autodiff through them).

    `w` is the `(n, d)` array of final cotangents, or a function of the final states
    h^L `(n, d)` returning them (a loss gradient: the forward kernel runs first, then
    `w(h^L)`, then the backward kernel)."""
    s, h0p, up, vp = _pad_all(h0, u, v, cfg)
    hL, hs = _forward(h0p, up, vp, cfg, s, save=True)
    if callable(w):
        w = w(hL[: s.n, : s.d])
    if jnp.shape(w) != (s.n, s.d):
        raise ValueError(f"w must have shape (n, d) = {(s.n, s.d)}, got {jnp.shape(w)}")
    wp = _pad(w, (s.Bp, s.dp))
    _, gu, gv, bs = _backward(hs, up, vp, wp, cfg, s, save=True)
    assert bs is not None
    n, L, M, d = s.n, s.L, s.M, s.d
    h = jnp.concatenate([hs[:L, :n, :d], hL[None, :n, :d]], axis=0)
    b = jnp.concatenate([bs[:L, :n, :d], w[None]], axis=0)
    return FusedStates(
        h=jnp.swapaxes(h, 0, 1),
        b=jnp.swapaxes(b, 0, 1),
        u=gu[:L, :M, :d],
        v=gv[:L, :M, :d],
    )
