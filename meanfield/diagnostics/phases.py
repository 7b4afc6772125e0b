"""Phases at initialisation: identity, stability, explosion (Mathematics §4, Marion et al. 2022).

For `h_k = h_{k−1} + L^{-β} V_k ReLU(W_k h_{k−1})` at initialisation, the forward
ratio `‖h_L − h_0‖/‖h_0‖` and the gradient ratio `‖p_0 − p_L‖/‖p_L‖`
(`p_k = ∂𝓛/∂h_k`, from the explicit backward recursion, `ResNet.adjoint`)
go to 0 (identity) for β above a critical β_c, to ∞ (explosion) below it, and stay
of order one at β_c: β_c = 1/2 for i.i.d. weights, 1 for smooth weights, and a
continuum in between for fBm increments.

**The critical-β estimator.** For each β the ratio behaves like a power of L near
β_c (`r ≈ c L^{β_c − β}` when r is small: a sum of L terms of size L^{-β}, with
i.i.d. or smoothly correlated signs), and grows faster than any power for β < β_c.
So the log-log slope

    s(β) = slope of log median_seeds r(L) against log L

is positive below β_c, negative above, and crosses 0 at β_c (where the network
converges to a non-degenerate limit). The estimate is the zero crossing of s,
linearly interpolated between the two grid values of β that bracket it, after
making s non-increasing in β (running minimum from small β; s is decreasing in
theory, the envelope only removes noise). The median, not the mean, is used
because exploding draws are heavy-tailed (and a draw that overflows counts as
+∞ without breaking the median). The 95% interval is a percentile bootstrap over
draws (the same resampled draws for every β and L, which share their weights);
it covers sampling noise, not the finite-L bias of s at β_c nor the β-grid
resolution, which are reported beside it (`grid_spacing`).

Classification of one β: `explosion` if s > tol or more than half the draws at
the largest L exploded, `identity` if s < −tol, else `stability` (tol = 0.05 by
default).
"""

import math
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from ..blocks.activations import resolve_activation
from ..blocks.base import AbstractLayerBlock
from ..laws.depth.base import AbstractDepthLaw, AbstractPathLaw
from ..models.resnet import ResNet

# E[‖p_0 − p_L‖²/‖p_L‖²] at β = 1/2 with i.i.d. weights (docs: Mathematics §4)
GRADIENT_BOUNDS = (math.exp(0.5) - 1.0, math.exp(4.0) - 1.0)
SLOPE_TOL = 0.05
PHASES = ("identity", "stability", "explosion")


def forward_bounds(d: int, delta: float) -> tuple[float, float]:
    """The β = 1/2 i.i.d. bounds on `‖h_L − h_0‖²/‖h_0‖²`, holding with probability ≥ 1 − δ:
    `(exp(3/8 − sqrt(22/(dδ))) − 1, exp(1 + sqrt(10/(dδ))) + 1)`."""
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return (
        math.exp(3.0 / 8.0 - math.sqrt(22.0 / (d * delta))) - 1.0,
        math.exp(1.0 + math.sqrt(10.0 / (d * delta))) + 1.0,
    )


class ScaledPerceptronParams(eqx.Module):
    """Parameters `(V, W, scale)` of a `ScaledPerceptronBlock` (stacked `(L, ...)`)."""

    V: Float[Array, "... d m"]
    W: Float[Array, "... m d"]
    scale: Float[Array, "..."]


class ScaledPerceptronBlock(AbstractLayerBlock):
    """`F(h, (V, W, a)) = a V σ(W h)`: a `PerceptronBlock` with a per-layer scale as data.

    With `a = α` in every layer and `ResNet(..., alpha=1)` this is the network
    `h_k = h_{k−1} + α V_k σ(W_k h_{k−1})`, with α a traced value: one compiled program
    serves every β (α = L^{-β}) and vmapping over β multiplies inside the layer, so no
    copy of the weights is made per β (tested against `PerceptronBlock` with
    `DepthPowerScaling`).

    **Arguments:**

    - `activation`: σ, a name or a callable (default `relu`).
    """

    activation: str | Callable = eqx.field(static=True, default="relu")

    def __check_init__(self):
        resolve_activation(self.activation)

    def __call__(self, h: Float[Array, " d"], theta: ScaledPerceptronParams) -> Float[Array, " d"]:
        return theta.scale * (theta.V @ resolve_activation(self.activation)(theta.W @ h))


def perceptron_resnet(
    V: Float[Array, "L d d"], W: Float[Array, "L d d"], alpha, activation: str = "relu"
) -> ResNet:
    """`h_k = h_{k−1} + α V_k σ(W_k h_{k−1})` as a `ResNet` whose α may be traced.

    A `ScaledPerceptronBlock` with `scale = α` in every layer and `alpha=1`: the same
    map and the same backward states b^k as `ResNet(PerceptronBlock, (V, W), alpha=α)`.
    """
    scale = jnp.broadcast_to(jnp.asarray(alpha, V.dtype), V.shape[:1])
    params = ScaledPerceptronParams(V=V, W=W, scale=scale)
    return ResNet(ScaledPerceptronBlock(activation), params, 1.0)


class DepthRatios(eqx.Module):
    """`forward = ‖h_L − h_0‖/‖h_0‖`, `gradient = ‖p_0 − p_L‖/‖p_L‖` and
    `forward_max = max_k ‖h_k − h_0‖/‖h_0‖` (the form of the smooth-weights explosion
    theorem) of one network."""

    forward: Array
    gradient: Array
    forward_max: Array


LOSSES = ("squared", "readout")


def depth_ratios(
    net: ResNet, x: Float[Array, " d"], y: Float[Array, " d"], loss: str = "squared"
) -> DepthRatios:
    """The forward and gradient ratios at input x, for the loss `½‖h_L − y‖²`
    (`loss="squared"`: `p_L = h_L − y` depends on the residual weights) or the readout
    loss `⟨y, h_L⟩` with y a fixed random readout B (`loss="readout"`: `p_L = B`, the
    theorem's convention, independent of the residual weights).

    The gradients `p_k = ∂𝓛/∂h_k` are the backward states `b^k` of the explicit
    recursion (B) (`ResNet.adjoint`), started from `p_L`.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: use one of {', '.join(LOSSES)}")
    final = (lambda hL: hL - y[None]) if loss == "squared" else y[None]
    adj = net.adjoint(x[None], final)
    h, b = adj.h[0], adj.b[0]
    h0, p0, pL = h[0], b[0], b[-1]
    along = jnp.linalg.norm(h - h0[None], axis=-1) / jnp.linalg.norm(h0)
    return DepthRatios(
        forward=along[-1],
        gradient=jnp.linalg.norm(p0 - pL) / jnp.linalg.norm(pL),
        forward_max=jnp.max(along),
    )


class FlowIdentity(eqx.Module):
    """`‖p_0‖²/‖p_L‖²` by the backward recursion, beside its forward-flow form
    `E_z[((p_L/‖p_L‖)ᵀ q_L(z))²]` with `q_L(z) = (∂h_L/∂h_0) z`, z ~ N(0, I_d), by Monte
    Carlo over `draws` z (`flow_mean`, `flow_se`)."""

    backward: Array
    flow_mean: Array
    flow_se: Array


def gradient_flow_identity(
    net: ResNet, x: Float[Array, " d"], y: Float[Array, " d"], *, key: PRNGKeyArray,
    draws: int = 256, loss: str = "squared",
) -> FlowIdentity:  # fmt: skip
    """The identity of Marion et al. linking the gradient ratio to the forward flow of
    perturbations, `‖p_0‖²/‖p_L‖² = E_z[((p_L/‖p_L‖)ᵀ q_L(z))²]`, where
    `q_{k+1}(z) = q_k(z) + L^{-β} V_{k+1} ∂g(h_k)/∂h q_k(z)` carries a perturbation z of
    h_0 forward (`jax.jvp` of the forward pass): the left side from the backward states
    (`ResNet.adjoint`), the right side by Monte Carlo."""
    if loss not in LOSSES:
        raise ValueError(f"loss={loss!r}: use one of {', '.join(LOSSES)}")
    final = (lambda hL: hL - y[None]) if loss == "squared" else y[None]
    adj = net.adjoint(x[None], final)
    p0, pL = adj.b[0, 0], adj.b[0, -1]
    direction = pL / jnp.linalg.norm(pL)
    forward = lambda h0: net.states(h0[None])[0, -1]  # noqa: E731
    z = jr.normal(key, (draws,) + x.shape, x.dtype)
    q = jax.vmap(lambda zz: jax.jvp(forward, (x,), (zz,))[1])(z)
    sq = (q @ direction) ** 2
    return FlowIdentity(
        backward=jnp.sum(p0**2) / jnp.sum(pL**2),
        flow_mean=jnp.mean(sq),
        flow_se=jnp.std(sq, ddof=1) / jnp.sqrt(draws),
    )


def ratio_draw(
    law: AbstractDepthLaw,
    depths: Sequence[int],
    betas: Float[Array, " n_beta"],
    *,
    key: PRNGKeyArray,
    activation: str = "relu",
    loss: str = "squared",
) -> tuple[Float[Array, "n_L n_beta"], Float[Array, "n_L n_beta"], Float[Array, "n_L n_beta"]]:
    """One draw of the phase study: V and W from `law` (one path each for a path law,
    shared by every depth), input x and target y standard normal (y is the readout B
    with `loss="readout"`); the forward and gradient ratios (`depth_ratios`) of
    `perceptron_resnet(V, W, L^{-β})` for every depth L in `depths` and every β in
    `betas` (vmapped: one program serves every β).

    **Returns:** `(forward, gradient, forward_max)`, each `(len(depths), len(betas))`.
    """
    d = law.d
    kv, kw, kx, ky = (jr.fold_in(key, i) for i in range(4))
    x, y = jr.normal(kx, (d,)), jr.normal(ky, (d,))
    if isinstance(law, AbstractPathLaw):
        pv, pw = law.path(kv), law.path(kw)
        draw = lambda L: (law.weights_from_path(pv, L), law.weights_from_path(pw, L))
    else:
        draw = lambda L: (law.weights(kv, L), law.weights(kw, L))
    fwd, grad, fmax = [], [], []
    for L in depths:  # a handful of static depths, each a lax.scan over its layers
        V, W = draw(L)

        def at(beta, V=V, W=W, L=L):
            r = depth_ratios(perceptron_resnet(V, W, float(L) ** -beta, activation), x, y, loss)
            return r.forward, r.gradient, r.forward_max

        f, g, m = jax.vmap(at)(betas)
        fwd.append(f)
        grad.append(g)
        fmax.append(m)
    return jnp.stack(fwd), jnp.stack(grad), jnp.stack(fmax)


def median_log_slope(Ls: Sequence[int], samples: np.ndarray) -> float:
    """Least-squares slope of `log median(r)` against `log L`; `samples` is `(n_L, draws)`.

    +∞ if a median is infinite (more than half the draws exploded at some depth); −∞ if
    a median is 0 (more than half the draws left h_L = h_0 exactly in floating point:
    deep in the identity phase, or α = L^{-β} itself underflowed).
    """
    return float(_median_log_slopes(Ls, np.asarray(samples, dtype=float)))


def _median_log_slopes(Ls: Sequence[int], samples: np.ndarray) -> np.ndarray:
    """`median_log_slope` over the leading axes of `samples` (`(..., n_L, draws)`), at
    once: the bootstrap's thousands of replicates without a Python loop."""
    with np.errstate(invalid="ignore"):  # inf − inf when the middle draws both overflowed
        med = np.median(samples, axis=-1)
    x = np.log(np.asarray(Ls, dtype=float))
    xc = x - x.mean()
    finite = np.all(np.isfinite(med), axis=-1)
    positive = np.all(med > 0, axis=-1)
    usable = (finite & positive)[..., None]
    slope = np.log(np.where(usable, med, 1.0)) @ xc / (xc @ xc)
    return np.where(~finite, math.inf, np.where(~positive, -math.inf, slope))


def zero_crossing(betas: Sequence[float], slopes: Sequence[float]) -> float | None:
    """The β where the running-minimum envelope of `slopes` crosses 0 (linear
    interpolation), or None if it does not cross inside the grid."""
    b = np.asarray(betas, dtype=float)
    s = np.minimum.accumulate(np.asarray(slopes, dtype=float))
    for i in range(len(b) - 1):
        if s[i] > 0 >= s[i + 1]:
            if not (math.isfinite(s[i]) and math.isfinite(s[i + 1])):
                # exploded at b[i] or underflowed at b[i + 1]: no slope to interpolate
                return float(0.5 * (b[i] + b[i + 1]))
            return float(b[i] + (b[i + 1] - b[i]) * s[i] / (s[i] - s[i + 1]))
    return None


def _zero_crossings(betas: Sequence[float], slopes: np.ndarray) -> np.ndarray:
    """`zero_crossing` for each row of `slopes` (`(replicates, len(betas))`), NaN where a
    row does not cross: the same arithmetic, element by element."""
    b = np.asarray(betas, dtype=float)
    s = np.minimum.accumulate(np.asarray(slopes, dtype=float), axis=-1)
    if s.shape[-1] < 2:
        return np.full(s.shape[0], math.nan)
    crosses = (s[:, :-1] > 0) & (s[:, 1:] <= 0)
    i = np.argmax(crosses, axis=-1)  # the first crossing
    rows = np.arange(s.shape[0])
    si, sj, bi, bj = s[rows, i], s[rows, i + 1], b[i], b[i + 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        linear = bi + (bj - bi) * si / (si - sj)
    c = np.where(np.isfinite(si) & np.isfinite(sj), linear, 0.5 * (bi + bj))
    return np.where(np.any(crosses, axis=-1), c, math.nan)


# bootstrap replicates' resampled ratios held at once: at most this many values (32 MB)
_BOOT_CHUNK_VALUES = 4_000_000


def classify(slope: float, exploded_fraction: float, tol: float = SLOPE_TOL) -> str:
    """`explosion`, `identity` or `stability` from the slope s(β) (see the module docstring)."""
    if slope > tol or exploded_fraction > 0.5:
        return "explosion"
    if slope < -tol:
        return "identity"
    return "stability"


def critical_beta(
    betas: Sequence[float],
    Ls: Sequence[int],
    samples: np.ndarray,
    *,
    theory: float | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    tol: float = SLOPE_TOL,
) -> dict:
    """Estimate β_c from ratios `samples[β, L, draw]` (see the module docstring).

    **Returns:** a dict with `estimate`, `ci95` (bootstrap over draws), `theory`,
    `slopes` (s(β) per β), `slopes_ci95`, `phases`, `grid_spacing`, `bootstrap_failures`
    (replicates without a crossing), and `reason` when there is no estimate.
    """
    samples = np.asarray(samples, dtype=float)
    samples = np.where(np.isnan(samples), np.inf, samples)
    if samples.ndim != 3:
        raise ValueError(
            f"samples must have shape (len(betas), len(Ls), draws), got {samples.shape}"
        )
    b, ls = np.asarray(betas, dtype=float), np.asarray(Ls, dtype=float)
    if b.ndim != 1 or not np.all(np.isfinite(b)) or np.any(np.diff(b) <= 0):
        raise ValueError(f"betas must be finite and strictly increasing, got {list(betas)}")
    if ls.ndim != 1 or np.any(ls <= 0) or len(set(ls.tolist())) < 2:
        raise ValueError(
            f"Ls must be depths >= 1 with at least two distinct values, got {list(Ls)}"
        )
    n_beta, n_L, n_draw = samples.shape
    if n_beta != len(betas) or n_L != len(Ls):
        raise ValueError(
            f"samples must have shape (len(betas), len(Ls), draws), got {samples.shape}"
        )
    slopes = [float(v) for v in _median_log_slopes(Ls, samples)]
    exploded = [float(np.mean(~np.isfinite(samples[i, -1]))) for i in range(n_beta)]
    # the draws resampled together at every β and L (one network draw is one unit)
    idx = np.random.default_rng(seed).integers(0, n_draw, (n_boot, n_draw))
    boot_slopes = np.empty((n_boot, n_beta))
    chunk = max(1, _BOOT_CHUNK_VALUES // max(1, samples.size))
    for k in range(0, n_boot, chunk):
        resampled = samples[:, :, idx[k : k + chunk]]  # (β, L, replicates, draws)
        boot_slopes[k : k + chunk] = _median_log_slopes(Ls, np.moveaxis(resampled, 2, 0))
    crossings = _zero_crossings(betas, boot_slopes) if n_boot else np.empty(0)
    boot_est = crossings[~np.isnan(crossings)].tolist()

    def ci(v):
        v = np.asarray(v, dtype=float)
        if v.size == 0:
            return None
        # interpolating next to an infinite (exploded) draw gives inf − inf = NaN; there
        # the nearest order statistic is the answer
        method = "linear" if np.all(np.isfinite(v)) else "nearest"
        lo, hi = np.percentile(v, [2.5, 97.5], method=method)
        return [float(lo), float(hi)]

    estimate = zero_crossing(betas, slopes)
    result = {
        "estimate": estimate,
        "ci95": ci(boot_est) if estimate is not None else None,
        "theory": theory,
        "betas": [float(b) for b in betas],
        "slopes": slopes,
        "slopes_ci95": [ci(boot_slopes[:, i]) for i in range(n_beta)],
        "phases": [classify(s, e, tol) for s, e in zip(slopes, exploded, strict=True)],
        "exploded_fraction_at_largest_L": exploded,
        "grid_spacing": float(np.min(np.diff(betas))) if n_beta > 1 else None,
        "bootstrap_failures": n_boot - len(boot_est),
        "method": "zero crossing of the log-log slope of the median ratio against L",
    }
    if estimate is None:  # the envelope is then of one sign: its first value says which
        where = "below" if slopes[0] <= 0 else "above"
        result["reason"] = f"the slope does not change sign on the β grid: β_c is {where} it"
    return result


def exponential_growth(
    Ls: Sequence[int], samples: np.ndarray, *, n_boot: int = 1000, seed: int = 0
) -> dict:
    """The growth of ratios `samples[L, draw]` that grow exponentially in depth (β = 0,
    no scaling): the least-squares line of the log median over draws against L itself,
    `log ratio ≈ c + r L`, its rate r per layer with a 95% percentile bootstrap over the
    draws (resampled together at every L), and the residual RMS of that line against the
    log-log line's (against log L): the smaller says which law the medians follow. None
    where a median is not finite (more than half the draws overflowed)."""
    samples = np.asarray(samples, dtype=float)
    x = np.asarray(Ls, dtype=float)
    med = np.median(np.where(np.isnan(samples), np.inf, samples), axis=1)
    out: dict = {"model": "log median ratio ≈ c + r L", "rate": None, "ci95": None}
    if not np.all(np.isfinite(med) & (med > 0)):
        out["reason"] = "a median ratio is not finite or not positive (overflow)"
        return out
    y = np.log(med)
    against = {"linear": x, "loglog": np.log(x)}
    fits = {name: np.polyfit(v, y, 1) for name, v in against.items()}
    resid = {n: float(np.sqrt(np.mean((np.polyval(fits[n], v) - y) ** 2)))
             for n, v in against.items()}  # fmt: skip
    idx = np.random.default_rng(seed).integers(0, samples.shape[1], (n_boot, samples.shape[1]))
    boot = np.median(samples[:, idx], axis=2)  # (L, replicates)
    ok = np.all(np.isfinite(boot) & (boot > 0), axis=0)
    xc = x - x.mean()
    rates = (xc @ np.log(boot[:, ok])) / (xc @ xc)
    out.update(
        rate=float(fits["linear"][0]),
        ci95=[float(v) for v in np.percentile(rates, [2.5, 97.5])] if rates.size else None,
        residual_rms=resid["linear"],
        loglog_residual_rms=resid["loglog"],
        loglog_slope=float(fits["loglog"][0]),
        exponential=resid["linear"] < resid["loglog"],
        bootstrap_dropped=int(n_boot - ok.sum()),
    )
    return out
