"""Rates in depth, width and embedding dimension fitted jointly (docs: Mathematics §6):
`fit_rate_sum` (the two-term law `a/L + b/sqrt(LM)`, relative least squares over the
grid with a bootstrap over independent draws) and `fit_rate_law` (the joint L, M, D law
`a L^-p + b D^q (LM)^-r + c D^-s` and its variants, every exponent with its interval),
with the optimal shapes such a law predicts (`optimal_shape`).
"""

import functools
from collections.abc import Iterable, Sequence

import numpy as np

from .fits import (
    EXPLOSION_THRESHOLD,
    check_fit_args,
    exploded_mask,
    exponent_theory,
    split_exploded,
    studentized_slope,
)


def _rate_sum_coefficients(L, M, means, scale=None):
    """`(a, b) >= 0` minimising Σ ((a/L + b/sqrt(LM) − m) / s)², s the `scale` of each
    point (default: the means themselves, relative least squares), for one row of point
    means `(P,)` or a stack of them `(B, P)` (bootstrap draws) at once. Where the
    unconstrained minimum has a negative coefficient, the better of the two one-term fits
    (each clipped at 0) is taken."""
    means = np.asarray(means, dtype=float)
    single = means.ndim == 1
    means = np.atleast_2d(means)
    scale = means if scale is None else np.broadcast_to(np.atleast_2d(scale), means.shape)
    X = np.stack([1.0 / L, 1.0 / np.sqrt(L * M)], axis=1)  # (P, 2)
    A = X[None] / scale[:, :, None]  # (B, P, 2)
    y = means / scale  # (B, P)
    coef = np.einsum("bjp,bp->bj", np.linalg.pinv(A), y)  # least squares
    negative = np.any(coef < 0, axis=1)
    if np.any(negative):
        An, yn = A[negative], y[negative]
        cols = np.maximum(
            np.einsum("bpj,bp->bj", An, yn) / np.einsum("bpj,bpj->bj", An, An), 0.0
        )  # (b, 2)
        resid = [np.sum((An[:, :, j] * cols[:, j : j + 1] - yn) ** 2, axis=1) for j in (0, 1)]
        pick = (resid[1] < resid[0]).astype(int)  # ties keep the 1/L term
        rows = np.arange(len(cols))
        fallback = np.zeros_like(cols)
        fallback[rows, pick] = cols[rows, pick]
        coef[negative] = fallback
    return coef[0] if single else coef


RATE_SUM_ITERATIONS = 3  # reweightings of the relative least squares (IRLS)


def _rate_sum_irls(L, M, means, variances=None):
    """`(coef (B, 2), se (B, 2))`: `a/L + b/sqrt(LM)` by relative least squares reweighted
    by the fitted values (dividing by the noisy means themselves biases the fit and left
    its interval covering 70–88%), and, given the variances of the point means, the
    coefficients' sandwich standard errors."""
    means = np.atleast_2d(np.asarray(means, dtype=float))
    X = np.stack([1.0 / L, 1.0 / np.sqrt(L * M)], axis=1)  # (P, 2)
    coef = _rate_sum_coefficients(L, M, means)
    for _ in range(RATE_SUM_ITERATIONS):
        pred = coef @ X.T
        scale = np.where(pred > 0, pred, means)
        coef = _rate_sum_coefficients(L, M, means, scale)
    if variances is None:
        return coef, None
    pred = coef @ X.T
    w = 1.0 / np.where(pred > 0, pred, means) ** 2  # (B, P)
    bread = np.linalg.pinv(np.einsum("pi,bp,pj->bij", X, w, X))
    meat = np.einsum("pi,bp,pj->bij", X, w**2 * np.atleast_2d(variances), X)
    cov = bread @ meat @ bread
    return coef, np.sqrt(np.maximum(np.einsum("bii->bi", cov), 0.0))


def fit_rate_sum(
    L: Sequence[int],
    M: Sequence[int],
    samples: Sequence[Sequence[float]],
    *,
    quantity: str,
    n_boot: int = 1000,
    seed: int = 0,
    threshold: float = EXPLOSION_THRESHOLD,
) -> dict:
    """Joint fit `error ≈ a/L + b/sqrt(LM)` over every usable grid point.

    Relative (log-like) least squares with a, b >= 0, reweighted by the fitted values
    (`_rate_sum_irls`); 95% intervals by a studentized bootstrap over each point's seeds
    (sandwich standard errors; 92–96% coverage at the mean-ODE study's 10 seeds, where
    the percentile bootstrap of the unweighted fit gave 70–88%); `rel_rms` is the
    root-mean-square relative residual. Seeds whose error is exactly 0 count in the means;
    `bootstrap_dropped` as in `fit_loglog`.
    """
    check_fit_args(n_boot, L=L, M=M)
    Ls, Ms, goods, excluded = [], [], [], 0
    for li, mi, s in zip(L, M, samples, strict=True):
        good, bad = split_exploded(s, threshold)
        excluded += bad
        if good.size and good.mean() > 0:  # the fit is relative to the mean
            Ls.append(float(li))
            Ms.append(float(mi))
            goods.append(good)
    result = {
        "quantity": quantity,
        "model": "a/L + b/sqrt(LM)",
        "a": None,
        "b": None,
        "a_ci95": None,
        "b_ci95": None,
        "rel_rms": None,
        "n_points": len(Ls),
        "excluded": excluded,
        "bootstrap_dropped": 0,
    }
    if len(Ls) < 3:
        result["reason"] = f"only {len(Ls)} usable point(s); the joint fit needs three"
        return result
    Ls, Ms = np.asarray(Ls), np.asarray(Ms)
    means = np.array([g.mean() for g in goods])
    variances = np.array([g.var(ddof=1) / g.size if g.size > 1 else 0.0 for g in goods])
    coef, se = _rate_sum_irls(Ls, Ms, means, variances)
    a, b = coef[0]
    pred = a / Ls + b / np.sqrt(Ls * Ms)
    result.update(a=float(a), b=float(b), rel_rms=float(np.sqrt(np.mean((pred / means - 1) ** 2))))
    result["interval"] = f"studentized bootstrap over each point's draws ({n_boot} replicates)"
    rng = np.random.default_rng(seed)
    bm = np.empty((n_boot, len(goods)))
    bv = np.empty((n_boot, len(goods)))
    for i, g in enumerate(goods):
        r = g[rng.integers(0, g.size, size=(n_boot, g.size))]
        bm[:, i] = r.mean(axis=1)
        bv[:, i] = r.var(axis=1, ddof=1) / g.size if g.size > 1 else 0.0
    keep = np.all(bm > 0, axis=1)
    result["bootstrap_dropped"] = int(n_boot - keep.sum())
    if not keep.any():
        return result
    bcoef, bse = _rate_sum_irls(Ls, Ms, bm[keep], bv[keep])
    assert se is not None and bse is not None
    for j, name in enumerate(("a_ci95", "b_ci95")):
        ok = bse[:, j] > 0
        if se[0, j] > 0 and ok.any():
            t = (bcoef[ok, j] - coef[0, j]) / bse[ok, j]
            lo, hi = np.percentile(t, [2.5, 97.5])
            lower, upper = coef[0, j] - hi * se[0, j], coef[0, j] - lo * se[0, j]
            result[name] = [float(max(lower, 0.0)), float(max(upper, 0.0))]  # a, b >= 0
        else:  # a coefficient held at 0 by the constraint: its bootstrap range
            result[name] = [float(np.percentile(bcoef[:, j], 2.5)),
                            float(np.percentile(bcoef[:, j], 97.5))]  # fmt: skip
    return result


# the rate laws, each a sum of terms `exp(log_k) L^-p (LM)^-r D^q` (free exponents named,
# the others 0): name -> (formula, [(coefficient, L exponent, LM exponent, D exponent)])
RATE_LAWS = {
    "full": (
        "a L^-p + b D^q (LM)^-r + c D^-s",
        [("log_a", "p", None, None), ("log_b", None, "r", "q"), ("log_c", None, None, "-s")],
    ),
    "LM": ("a L^-p + b D^q (LM)^-r", [("log_a", "p", None, None), ("log_b", None, "r", "q")]),
    "LM3": (
        "a L^-p + b0 (LM)^-r0 + b D^q (LM)^-r",
        [("log_a", "p", None, None), ("log_b0", None, "r0", None), ("log_b", None, "r", "q")],
    ),
}


RATE_LAW = RATE_LAWS["full"][0]


# the proven bound's and the conjecture's exponents (docs: Mathematics §6)
RATE_THEORIES = {
    "bound": {"p": 1.0, "q": 0.5, "r": 0.5, "s": 0.5},
    "conjecture": {"p": 1.0, "q": 1.0, "r": 1.0, "s": 0.5},
}


def _law_names(law: str) -> list[str]:
    names = []
    for term in RATE_LAWS[law][1]:
        names += [t.lstrip("-") for t in term if t is not None]
    return names


def _rate_law_model(t, logL, logM, logD, law):
    """log of the law's value at the points, for the parameters `t` (`_law_names`)."""
    import jax
    import jax.numpy as jnp

    get = dict(zip(_law_names(law), t, strict=True))
    sizes = {"L": logL, "LM": logL + logM, "D": logD}
    logs = []
    for coef, p_l, r_lm, q_d in RATE_LAWS[law][1]:
        term = get[coef]
        if p_l is not None:
            term = term - get[p_l] * sizes["L"]
        if r_lm is not None:
            term = term - get[r_lm] * sizes["LM"]
        if q_d is not None:
            sign = -1.0 if q_d.startswith("-") else 1.0
            term = term + sign * get[q_d.lstrip("-")] * sizes["D"]
        logs.append(term)
    return jax.nn.logsumexp(jnp.stack(logs), axis=0)


def least_squares_in_log(model, starts, logy, *args, gtol=None):
    """Least squares of `model(t, *args) − logy` (a model of the log of the points'
    statistics) by BFGS from every start (jax.scipy); the best parameters, its loss, the
    influence of each log value on each parameter at the best (`(JᵀJ)⁻¹Jᵀ`, J the model's
    Jacobian) and J itself. `gtol`: BFGS's gradient tolerance (its default where None)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.optimize import minimize

    def loss(t):
        return jnp.mean((model(t, *args) - logy) ** 2)

    options = {"maxiter": 500} if gtol is None else {"maxiter": 500, "gtol": gtol}
    res = jax.vmap(lambda t0: minimize(loss, t0, method="BFGS", options=options))(starts)
    best = jnp.argmin(jnp.where(jnp.isfinite(res.fun), res.fun, jnp.inf))
    theta = res.x[best]
    J = jax.jacfwd(model)(theta, *args)  # (P, k)
    return theta, res.fun[best], jnp.linalg.pinv(J), J


def _rate_law_fit(logL, logM, logD, logy, starts, law):
    """`least_squares_in_log` of one rate law (`_rate_law_model`) over its parameters
    (`_law_names`): the best, its loss and the influence of each log-mean on each."""
    theta, loss, influence, _ = least_squares_in_log(
        lambda t, a, b, c: _rate_law_model(t, a, b, c, law), starts, logy, logL, logM, logD
    )
    return theta, loss, influence


def _starts(law: str, scale: float) -> list[list[float]]:
    """Starting points: each theory's exponents, coefficients near the data's scale."""
    names = _law_names(law)
    out = []
    for th in RATE_THEORIES.values():
        for off in (-1.5, 0.0, 1.5):
            start = []
            for name in names:
                if name.startswith("log_"):
                    start.append(scale + (off if name == "log_a" else -off / 2))
                elif name == "r0":
                    start.append(0.5)
                else:
                    start.append(th[name])
            out.append(start)
    return out


@functools.cache
def _rate_law_jit(law: str):
    """`_rate_law_fit` of one law, jitted once (a program per call would compile anew)."""
    import jax

    return jax.jit(functools.partial(_rate_law_fit, law=law))


def fit_rate_law(
    L: Sequence[int],
    M: Sequence[int],
    D: Sequence[int],
    samples: Sequence[Sequence[float]],
    *,
    quantity: str,
    law: str = "full",
    n_boot: int = 200,
    seed: int = 0,
    threshold: float = EXPLOSION_THRESHOLD,
    paired: bool = False,
) -> dict:
    """Joint fit of a rate law with free exponents and positive coefficients over grid
    points: `law` "full" `a L^-p + b D^q (LM)^-r + c D^-s`, "LM" `a L^-p + b D^q (LM)^-r`
    (errors against the fixed-D limit, which have no D term), "LM3" with a second M term
    `b0 (LM)^-r0` (`RATE_LAWS`). Relative least squares in log space (BFGS from the bound's
    and the conjecture's exponents). 95% intervals: the fit linearised at its optimum
    (each parameter a weighted sum of the points' log-means, `(JᵀJ)⁻¹Jᵀ`), its standard
    error by the delta method and a studentized bootstrap over the seeds, as `fit_loglog`'s
    (resampled within each point, or with `paired` draw k of every point jointly: points
    sharing a draw's embedding, NaN where a draw is not usable). On the shapes study's
    quick grid (12 draws) it covers q and r 92–95% of the time (the percentile bootstrap of
    the refitted law: 84–93%), an unresolved L term's p not (benchmarks/coverage.py).
    `rel_rms` the residual, `aic` = n log(rel_rms²) + 2 (parameters) to compare laws on the
    same points; each exponent compared with the proven bound's and the
    conjecture's (`RATE_THEORIES`)."""
    import jax.numpy as jnp

    if law not in RATE_LAWS:
        raise ValueError(f"law: unknown {law!r}; use one of {', '.join(RATE_LAWS)}")
    check_fit_args(n_boot, L=L, M=M, D=D)
    rows, goods, draws, excluded = _usable_points(L, M, D, samples, threshold)
    names = _law_names(law)
    result: dict = {
        "quantity": quantity,
        "model": RATE_LAWS[law][0],
        "n_points": len(rows),
        "excluded": excluded,
    }
    if len(rows) < 2 * len(names):
        result["reason"] = (
            f"only {len(rows)} usable points; the {len(names)}-parameter law needs {2 * len(names)}"
        )
        return result
    arr = np.log(np.asarray(rows))
    logL, logM, logD = (jnp.asarray(arr[:, i]) for i in range(3))
    means = np.array([g.mean() for g in goods])
    starts = jnp.asarray(_starts(law, float(np.log(np.median(means)))))
    theta, loss, influence = _rate_law_jit(law)(
        logL, logM, logD, jnp.log(jnp.asarray(means)), starts
    )
    result.update({k: float(v) for k, v in zip(names, np.asarray(theta), strict=True)})
    result["rel_rms"] = float(np.sqrt(loss))
    result["aic"] = float(len(rows) * np.log(max(float(loss), 1e-300)) + 2 * len(names))
    if paired and len({g.size for g in draws}) > 1:
        sizes = sorted({g.size for g in draws})
        raise ValueError(f"samples: paired draws need one count per point, got {sizes}")
    influence = np.asarray(influence)
    unit = "the draws, jointly across points" if paired else "each point's draws"
    result["interval"] = (
        f"studentized bootstrap over {unit} ({n_boot} replicates) of the fit linearised at "
        "its optimum"
    )
    result["bootstrap_dropped"] = linearised_intervals(
        result,
        zip(names, influence, strict=True),
        draws if paired else goods,
        paired=paired,
        n_boot=n_boot,
        seed=seed,
    )
    result["theories"] = _theories(result, names)
    return result


def _usable_points(L, M, D, samples, threshold: float) -> tuple[list, list, list, int]:
    """The points whose finite draws have a positive mean: their (L, M, D), those draws,
    every draw with the exploded ones as NaN (for a paired bootstrap), and the number of
    exploded draws left out."""
    rows, goods, draws, excluded = [], [], [], 0
    for li, mi, di, s in zip(L, M, D, samples, strict=True):
        good, bad = split_exploded(s, threshold)
        excluded += bad
        if good.size and good.mean() > 0:
            rows.append((float(li), float(mi), float(di)))
            goods.append(good)
            v = np.asarray(s, dtype=float)
            draws.append(np.where(exploded_mask(v, threshold), np.nan, v))
    return rows, goods, draws, excluded


def linearised_intervals(
    result: dict,
    rows: Iterable[tuple[str, np.ndarray]],
    draws: Sequence[np.ndarray],
    *,
    paired: bool,
    n_boot: int,
    seed: int,
) -> int:
    """Each parameter's 95% interval `result[f"{name}_ci95"]` for the `(name, influence)`
    `rows` of a fit linearised at its optimum (the parameter a weighted sum of the points'
    log-statistics): `studentized_slope` over the points' `draws`, around `result[name]`.
    **Returns:** the most bootstrap draws any parameter's bootstrap left out."""
    dropped = 0
    for k, influence in rows:
        _, se, t, dropped_k = studentized_slope(
            draws, influence, paired=paired, n_boot=n_boot, seed=seed
        )
        dropped = max(dropped, dropped_k)
        if t.size and np.isfinite(se) and se > 0:
            lo, hi = np.percentile(t, [2.5, 97.5])
            v = result[k]
            result[f"{k}_ci95"] = [float(v - hi * se), float(v - lo * se)]
    return dropped


def _theories(result: dict, names: Sequence[str]) -> dict:
    """Per theory of `RATE_THEORIES`, each fitted exponent's value there and what the
    fit's 95% interval says of it (`exponent_theory`; None without an interval)."""
    return {
        name: {k: exponent_theory(v, result.get(f"{k}_ci95")) for k, v in th.items() if k in names}
        for name, th in RATE_THEORIES.items()
    }


def optimal_shape(
    p: float, q: float, r: float, s: float, *, r0: float | None = None, grid: int = 600
) -> dict:
    """The shape `L ~ P^λ, M ~ P^μ, D ~ P^δ` (λ + μ + δ = 1: the budget P ≈ 2LMD) that
    minimises `L^-p + D^q (LM)^-r + D^-s` (plus `(LM)^-r0` if given) as P → ∞: it
    maximises the slowest term's decay `min(pλ, r(λ + μ) − qδ, sδ, r0(λ + μ))` over the
    simplex (a grid of step 1/grid); of the maximisers the one with the smallest λ (the
    shallowest), as the seed states its shapes.

    **Returns:** `{"L", "M", "D"}` exponents and `error_exponent` (the error decays as
    `P^-error_exponent`)."""
    step = 1.0 / grid
    best, arg = -np.inf, (0.0, 0.0, 0.0)
    lam = np.arange(grid + 1) * step
    for d in np.arange(grid + 1) * step:
        lm = lam[lam <= 1 - d + 1e-12]
        mu = 1 - d - lm
        rate = np.minimum(np.minimum(p * lm, r * (lm + mu) - q * d), s * d)
        if r0 is not None:
            rate = np.minimum(rate, r0 * (lm + mu))
        i = int(np.argmax(rate))
        if rate[i] > best + 1e-9:
            best, arg = float(rate[i]), (float(lm[i]), float(mu[i]), float(d))
    return {"L": arg[0], "M": arg[1], "D": arg[2], "error_exponent": best}
