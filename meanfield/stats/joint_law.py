"""The exponents of the mean-ODE convergence law, estimated jointly over the grid
(docs: Mathematics §7, "The rates from the whole law").

The theorem bounds the coupled errors by `c (1/L + 1/sqrt(LM))`: a depth (Euler) term and
a Monte-Carlo term over the LM units. A one-term log-log slope along a line of the grid is
bent by the other term wherever it is not negligible; the headline therefore estimates
both exponents of the whole law at once:

* `fit_depth_law`: the Euler part, one deterministic value per depth,
  `a L^-p + c L^-2p` (the explicit Euler scheme's error expansion: its next order);
* `fit_depth_width_law`: the finite networks, from every usable grid point's draws,

      mean over networks of Δ  ≈  sqrt( (a L^-p (1 + c L^-p))² + (b (LM)^-q)² ),

  the depth term with the Euler part's measured next order (`c`, held fixed) and the
  Monte-Carlo term in quadrature: the error is a deterministic depth bias plus a
  fluctuation of mean zero, so the mean of their squared sum has no cross term and
  `E[Δ²] = (depth term)² + (Monte-Carlo term)²` to leading order (the bound's plain sum
  is the triangle inequality's, an upper bound). Fitted to the mean (default; the mean
  square is dominated by the heavy tails of narrow networks) or, with
  `statistic="rms"`, to the root-mean-square, for which the quadrature is exact; the
  exponents are those of the two regimes either way. Where the limit is trivial at a
  step (a centred initialisation before training) only the Monte-Carlo term exists and
  only q is fitted.

Both fits are relative least squares in log space; the exponents' 95% intervals are the
studentized bootstrap of the fit linearised at its optimum over each point's networks (the
independent unit), as `fit_rate_law`'s; for the Euler part (no draws) the regression's
t interval. Coverage at the main job's layout: `benchmarks/coverage.py --kinds mean-ode-law`.
"""

import functools
from collections.abc import Sequence

import numpy as np

from .fits import EXPLOSION_THRESHOLD, check_fit_args, exponent_theory, split_exploded, t975
from .rate_law import least_squares_in_log, linearised_intervals

# BFGS's gradient tolerance: tight, so that exact law values give the exponents to 1e-6
GTOL = 1e-10

# what is fitted at each point: the power of the draws averaged, and its name
STATISTICS = {"mean": (1, "mean over networks"), "rms": (2, "root-mean-square over networks")}

# the theorem's exponents (Chaintron, Mathematics §3): depth 1/L, Monte-Carlo 1/sqrt(LM)
THEORY = {"p": 1.0, "q": 0.5}


def _depth_model(t, logL):
    """log of `a L^-p + c L^-2p`, t = (log a, p, c/a): `log a − p log L + log(1 + c' L^-p)`."""
    import jax.numpy as jnp

    log_a, p, c = t
    return log_a - p * logL + jnp.log(jnp.maximum(1.0 + c * jnp.exp(-p * logL), 1e-300))


def _law_model(t, logL, logLM, c, depth):
    """log of `sqrt((a L^-p (1 + c L^-p))² + (b (LM)^-q)²)`; t = (log a, p, log b, q), or
    (log b, q) without the depth term."""
    import jax.numpy as jnp

    if not depth:
        log_b, q = t
        return log_b - q * logLM
    log_a, p, log_b, q = t
    depth_term = _depth_model((log_a, p, c), logL)
    return jnp.logaddexp(2 * depth_term, 2 * (log_b - q * logLM)) / 2


@functools.cache
def _jitted(name: str, depth: bool = True, power: int = 1):
    """The least squares of one model, jitted once: "depth" (`_depth_model`) or "law"
    (`_law_model` of the `power`-th moment: `power` × the log of the law)."""
    import jax

    if name == "depth":
        return jax.jit(
            lambda starts, logy, logL: least_squares_in_log(
                _depth_model, starts, logy, logL, gtol=GTOL
            )
        )

    def model(t, logL, logLM, c):
        return power * _law_model(t, logL, logLM, c, depth)

    return jax.jit(
        lambda starts, logy, logL, logLM, c: least_squares_in_log(
            model, starts, logy, logL, logLM, c, gtol=GTOL
        )
    )


# `fit_depth_law`'s starting values of c/a (its starts: (log a, p = 1, c/a) each)
_DEPTH_STARTS_C = (-1.0, 0.0, 1.0)


def compile_fits(points: int, depths: int, depth_terms: Sequence[bool] = (True,)) -> None:
    """Compile ahead the programs `fit_depth_law` and `fit_depth_width_law` (mean, with
    each of `depth_terms`) run on `depths` depths and `points` grid points: a study calls
    it in a thread while its networks run, and its fits then find them compiled (tracing
    BFGS under `vmap` and compiling it took 4-5 s of the mean-ODE quick preset's end).
    Other sizes compile when fitted, as before; nothing is computed here."""
    import jax
    import jax.numpy as jnp

    arr = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.result_type(float))
    if depths >= 4:  # fewer: `fit_depth_law` gives its reason, fits nothing
        _jitted("depth").lower(arr(len(_DEPTH_STARTS_C), 3), arr(depths), arr(depths)).compile()
    for depth_term in dict.fromkeys(depth_terms):
        names = 4 if depth_term else 2
        if points < names + 2:
            continue
        starts = arr(len(_law_starts(0.0, depth_term)), names)
        # c is a Python float (weakly typed) at the fit, as here
        _jitted("law", depth_term, 1).lower(
            starts, arr(points), arr(points), arr(points), 0.0
        ).compile()


def _theory(result: dict, names: Sequence[str]) -> None:
    """`theory` per exponent: the theorem's value and what the 95% interval says of it
    (`exponent_theory`: whether it holds it, and inside, near or outside)."""
    result["theory"] = {k: exponent_theory(THEORY[k], result.get(f"{k}_ci95")) for k in names}


def fit_depth_law(L: Sequence[int], values: Sequence[float], *, quantity: str) -> dict:
    """The Euler part's law `a L^-p + c L^-2p` over depths (one deterministic value each),
    relative least squares; p's 95% interval the regression's (t at n − 3 degrees of
    freedom: the residual is the expansion's higher orders, not noise). Needs 4 depths
    with positive values; `c_over_a` is the next order's size relative to the first."""
    check_fit_args(1, L=L)
    rows = [(float(li), float(v)) for li, v in zip(L, values, strict=True)
            if v is not None and np.isfinite(v) and v > 0]  # fmt: skip
    result: dict = {"quantity": quantity, "model": "a L^-p + c L^-2p", "n_points": len(rows)}
    if len(rows) < 4:
        result["reason"] = f"only {len(rows)} usable depth(s); the law's three parameters need 4"
        return result
    import jax.numpy as jnp

    logL = jnp.log(jnp.asarray([r[0] for r in rows]))
    logy = jnp.log(jnp.asarray([r[1] for r in rows]))
    starts = jnp.asarray([[float(logy[0] + logL[0]), 1.0, c] for c in _DEPTH_STARTS_C])
    theta, loss, _, J = _jitted("depth")(starts, logy, logL)
    theta, J = np.asarray(theta), np.asarray(J)
    dof = len(rows) - 3
    resid2 = float(loss) * len(rows) / dof
    cov = np.linalg.pinv(J.T @ J) * resid2
    se = float(np.sqrt(max(cov[1, 1], 0.0)))
    p = float(theta[1])
    result.update(
        a=float(np.exp(theta[0])),
        p=p,
        c_over_a=float(theta[2]),
        # held fixed in the finite networks' law: its own error moves their p little
        # (mean-ODE quick preset: se 0.01-0.02, p moving by < 0.002; Mathematics §7)
        c_over_a_se=float(np.sqrt(max(cov[2, 2], 0.0))),
        p_ci95=[p - t975(dof) * se, p + t975(dof) * se],
        rel_rms=float(np.sqrt(loss)),
        interval=f"the regression's t interval ({dof} degrees of freedom): one value per depth",
    )
    _theory(result, ["p"])
    return result


def _law_starts(scale: float, depth_term: bool) -> list[list[float]]:
    """BFGS's starting points for `fit_depth_width_law`: the exponents the theorem's, the
    coefficients a grid around the data's `scale` (the two terms' sizes are not known)."""
    offsets = (-3.0, -1.0, 1.0, 3.0)
    if depth_term:
        return [[scale + i, 1.0, scale + j + 2.0, 0.5] for i in offsets for j in offsets]
    return [[scale + j + 2.0, 0.5] for j in offsets]


def fit_depth_width_law(
    L: Sequence[int],
    M: Sequence[int],
    samples: Sequence[Sequence[float]],
    *,
    quantity: str,
    c_over_a: float = 0.0,
    depth_term: bool = True,
    statistic: str = "mean",
    n_boot: int = 1000,
    seed: int = 0,
    threshold: float = EXPLOSION_THRESHOLD,
) -> dict:
    """The exponents p, q of `sqrt((a L^-p (1 + c L^-p))² + (b (LM)^-q)²)` fitted to the
    mean (or, `statistic="rms"`, the root-mean-square) over networks of every grid point
    (module docstring); `c_over_a` the
    depth term's next order, held fixed (the Euler part's, `fit_depth_law`); without
    `depth_term` only `b (LM)^-q`. Exploded draws are left out and counted (`excluded`);
    points without a positive finite draw are left out and named (`dropped`).
    **Returns** `p`, `q` (or `q` alone), `a`, `b`, each exponent's `*_ci95`, `theory`
    (the theorem's p = 1, q = 1/2 and whether each interval holds it), `rel_rms`,
    `n_points`, `draws` (the independent networks behind the fit), `bootstrap_dropped`."""
    check_fit_args(n_boot, L=L, M=M)
    if statistic not in STATISTICS:
        raise ValueError(f"statistic: {statistic!r} is not one of {', '.join(STATISTICS)}")
    power = STATISTICS[statistic][0]
    rows, goods, excluded, dropped = [], [], 0, []
    for li, mi, s in zip(L, M, samples, strict=True):
        good, bad = split_exploded(s, threshold)
        excluded += bad
        if good.size and np.mean(good**power) > 0:
            rows.append((float(li), float(mi)))
            goods.append(good**power)
        else:
            dropped.append({"L": int(li), "M": int(mi), "reason": "no positive finite draw"})
    names = ["log_a", "p", "log_b", "q"] if depth_term else ["log_b", "q"]
    model = ("sqrt((a L^-p (1 + c L^-p))^2 + (b (LM)^-q)^2)" if depth_term
             else "b (LM)^-q")  # fmt: skip
    result: dict = {
        "quantity": quantity,
        "model": model,
        "statistic": STATISTICS[statistic][1],
        "c_over_a": float(c_over_a) if depth_term else None,
        "n_points": len(rows),
        "draws": int(sum(g.size for g in goods)),
        "excluded": excluded,
        "dropped": dropped,
    }
    if len(rows) < len(names) + 2:
        result["reason"] = (
            f"only {len(rows)} usable points; the {len(names)}-parameter law needs {len(names) + 2}"
        )
        return result
    import jax.numpy as jnp

    arr = np.log(np.asarray(rows))
    logL, logLM = jnp.asarray(arr[:, 0]), jnp.asarray(arr[:, 0] + arr[:, 1])
    logy = jnp.log(jnp.asarray([g.mean() for g in goods]))
    scale = float(np.median(np.asarray(logy))) / power
    theta, loss, influence, _ = _jitted("law", depth_term, power)(
        jnp.asarray(_law_starts(scale, depth_term)), logy, logL, logLM, float(c_over_a)
    )
    theta, influence = np.asarray(theta), np.asarray(influence)
    values = dict(zip(names, theta.tolist(), strict=True))
    result.update({k: v for k, v in values.items() if not k.startswith("log_")})
    result.update({k[4:]: float(np.exp(v)) for k, v in values.items() if k.startswith("log_")})
    result["rel_rms"] = float(np.sqrt(loss)) / power  # in the log of the statistic
    exponents = [(k, influence[i]) for i, k in enumerate(names) if not k.startswith("log_")]
    result["bootstrap_dropped"] = linearised_intervals(
        result, exponents, goods, paired=False, n_boot=n_boot, seed=seed
    )
    result["interval"] = (
        f"studentized bootstrap over each point's networks ({n_boot} replicates) of the fit "
        "linearised at its optimum"
    )
    _theory(result, [k for k in ("p", "q") if k in names])
    return result


def law_value(fit: dict, L, M):
    """The fitted law's value at depths `L` and widths `M` (arrays), or None where the
    fit has no Monte-Carlo term's parameters."""
    if fit.get("q") is None or fit.get("b") is None:
        return None
    L, M = np.asarray(L, float), np.asarray(M, float)
    mc = fit["b"] * (L * M) ** -fit["q"]
    if fit.get("p") is None or fit.get("a") is None:
        return mc
    depth = fit["a"] * L ** -fit["p"] * (1 + (fit.get("c_over_a") or 0.0) * L ** -fit["p"])
    return np.sqrt(depth**2 + mc**2)
