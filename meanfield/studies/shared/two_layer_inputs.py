"""Part (e) of `meanfield study two-layer`: the `log(n/δ)` factor of Chaintron's two-layer
bound, `max_{i ≤ n} |f̂_k(x_i) − f_k(x_i)| ≤ c_k sqrt(log(n/δ) D/M)` with probability
`1 − δ`.

The factor comes from a union bound over the n inputs, which is tight when the n errors
are independent and loose when they are correlated. The part measures both cases at
initialisation (k = 0), where the fixed-D limit's outputs vanish exactly: `f_0(x) =
E[ρ(p(x)) a] = E[ρ(p(x))] E[a] = 0`, since a = W_outᵀ v / D is centred and independent of
p. So the error is the network's own output `f̂_0(x_i) = (1/M) Σ_j ρ(p^j_i) a^j`, which
needs no quadrature at any n. This is the step the union bound acts on; after training,
`study two-layer` measures the width rates at n = 2. Two families of n unit inputs (d_out = 1):

* **orthogonal**: `x_i = e_i ∈ R^n`. As M → ∞ the errors `sqrt(M) f̂_0(x_i)` are centred
  Gaussians, uncorrelated across inputs up to the embedding's O(D^{-1/2}) (odd ρ), so the
  max over inputs of n *independent* |N(0, σ²/M)| has the exact `1 − δ` quantile
  `q(n, δ) = σ Φ^{-1}((1 + (1 − δ)^{1/n}) / 2) / sqrt(M)`. This grows as
  `σ sqrt(2 log(2n/δ)) / sqrt(M)` for small δ/n: the seed's factor, attained;
* **arc**: n inputs at angles 0..90° on a quarter circle in R² (n = 2: the orthogonal pair).
  Their errors are values of one smooth random function of the angle, so the max
  saturates as the arc fills, and the union bound's factor is not attained.

Measured per (family, n): the max over inputs of `|f̂_0(x_i)|` and the mean square of the
errors, over independent draws of the network (its embedding and units). Per δ, the
empirical `1 − δ` quantile of the max is divided by `q(n, δ)` at the draws' own
σ̂ = RMS of the errors, with a percentile bootstrap interval over the draws
(`ratio_interval`, its coverage checked on simulated draws): a ratio of 1 means the
factor is attained.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtri

from ...models import perceptron
from ...stats.fits import interval_text, summarize

FAMILIES = ("orthogonal", "arc")
DELTAS = (0.5, 0.2, 0.1, 0.05, 0.02)
N_BOOT = 1000
BATCH_ELEMENTS = 2**24  # unit coordinates (draws × M × D) vmapped at once


def inputs(family: str, n: int) -> jax.Array:
    """The n unit inputs of a family: (n, n) or (n, 2)."""
    if family == "orthogonal":
        return jnp.eye(n)
    if family == "arc":
        angles = (math.pi / 2) * jnp.arange(n) / max(n - 1, 1)
        return jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1)
    raise ValueError(f"family: expected one of {FAMILIES}, got {family!r}")


@functools.partial(
    jax.jit,
    static_argnames=("M", "D", "activation", "s_u", "s_v", "sigma_in", "sigma_out"),
)
def draws(keys, x, *, M, D, activation, s_u, s_v, sigma_in, sigma_out):
    """Per draw of a perceptron at inputs `x`: the max over inputs of `|f̂_0(x_i)|` and the
    mean over inputs of `f̂_0(x_i)²` (d_out = 1), in batches (`BATCH_ELEMENTS`)."""

    def one(key):
        net = perceptron.Perceptron.sample(
            key, M=M, D=D, d_in=x.shape[1], d_out=1, activation=activation, s_u=s_u,
            s_v=s_v, sigma_in=sigma_in, sigma_out=sigma_out,
        )  # fmt: skip
        f = net(x)[:, 0]
        return jnp.max(jnp.abs(f)), jnp.mean(f**2)

    return jax.lax.map(one, keys, batch_size=batch_size(keys.shape[0], M, D))


def batch_size(draws: int, M: int, D: int) -> int:
    """How many draws of M units in dimension D run at once (`BATCH_ELEMENTS`)."""
    return max(1, min(draws, BATCH_ELEMENTS // (M * D)))


def point(keys, family, n, cfg) -> dict:
    """A (family, n) point: the summaries of the max error and the mean square (with
    every draw's value, for the bootstrap)."""
    top, square = draws(
        keys, inputs(family, n), M=cfg["input_M"], D=cfg["input_D"],
        activation=cfg["activation"], s_u=cfg["s_u"], s_v=cfg["s_v"],
        sigma_in=cfg["sigma_in"], sigma_out=cfg["sigma_out"],
    )  # fmt: skip
    return {"max_error": summarize(np.asarray(top)), "mean_square": summarize(np.asarray(square))}


def independent_quantile(sigma, n: int, delta: float):
    """The `1 − δ` quantile of the max of n independent |N(0, σ²)|."""
    return sigma * ndtri((1 + (1 - delta) ** (1 / n)) / 2)


def ratio_interval(
    top, square, n: int, delta: float, *, n_boot: int = N_BOOT, seed: int | list[int] = 0
):
    """The empirical `1 − δ` quantile of `top` over `independent_quantile` at σ̂ =
    sqrt(mean(square)), and its 95% percentile bootstrap interval (the draws resampled,
    both estimates recomputed on each resample). Returns (ratio, [lo, hi])."""
    top, square = np.asarray(top, float), np.asarray(square, float)

    def ratio(t, s):
        return np.quantile(t, 1 - delta, axis=-1) / independent_quantile(
            np.sqrt(np.mean(s, axis=-1)), n, delta
        )

    rng = np.random.default_rng(seed)
    idx = rng.integers(0, top.size, size=(n_boot, top.size))
    boot = ratio(top[idx], square[idx])
    return float(ratio(top, square)), [float(v) for v in np.quantile(boot, [0.025, 0.975])]


def factor_rows(cfg, points) -> list[dict]:
    """Per family, n and δ: the measured quantile (times sqrt(M)), the independent-Gaussian
    prediction, their ratio with its interval, and whether the interval holds 1
    (`attained`; None where a draw is not finite)."""
    rows = []
    for p in points:
        if p.get("part") != "inputs":
            continue
        top = [math.nan if v is None else v for v in p["max_error"]["values"]]
        square = [math.nan if v is None else v for v in p["mean_square"]["values"]]
        for delta in DELTAS:
            row = {"family": p["family"], "n": p["n"], "delta": delta}
            if not np.isfinite(top + square).all():
                row.update(ratio=None, ci95=None, attained=None, reason="a draw is not finite")
                rows.append(row)
                continue
            seed = [cfg["seed"], p["n"], FAMILIES.index(p["family"]), round(1e6 * delta)]
            ratio, ci = ratio_interval(top, square, p["n"], delta, seed=seed)
            root_m = math.sqrt(cfg["input_M"])
            sigma = math.sqrt(float(np.mean(square)))
            row.update(
                quantile_sqrt_M=float(np.quantile(top, 1 - delta)) * root_m,
                predicted_sqrt_M=float(independent_quantile(sigma, p["n"], delta)) * root_m,
                sigma_sqrt_M=sigma * root_m,
                ratio=ratio,
                ci95=ci,
                attained=bool(ci[0] <= 1.0 <= ci[1]),
            )
            rows.append(row)
    return rows


def factor_summary(rows) -> dict:
    """Per family: the (n, δ) whose ratio's interval holds 1, of those judged, and the
    ratio at the largest n for the largest δ (the median's saturation)."""
    out = {}
    for family in FAMILIES:
        mine = [r for r in rows if r["family"] == family and r["attained"] is not None]
        if not mine:
            continue
        top_n = max(r["n"] for r in mine)
        at_top = [r for r in mine if r["n"] == top_n and r["delta"] == max(DELTAS)]
        out[family] = {
            "attained": sum(r["attained"] for r in mine),
            "of": len(mine),
            "largest_n": top_n,
            "ratio_at_largest_n": at_top[0]["ratio"] if at_top else None,
            "ci95_at_largest_n": at_top[0]["ci95"] if at_top else None,
        }
    return out


def factor_lines(summary) -> list[str]:
    """The printed lines: per family, where the union bound's factor is attained."""
    lines = []
    for family, s in summary.items():
        ci = s["ci95_at_largest_n"] or [math.nan, math.nan]
        lines.append(
            f"log(n/δ) factor, {family} inputs: quantile of max_i |f̂_0(x_i)| / independent-"
            f"Gaussian law holds 1 at {s['attained']} of {s['of']} (n, δ); at n = "
            f"{s['largest_n']}, δ = {max(DELTAS):g}: "
            f"{interval_text(s['ratio_at_largest_n'], ci)}"
        )
    return lines
