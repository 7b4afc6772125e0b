"""The exponent of a depth law with its next order, from paired draws: the strong error of
a finite ResNet against its neural SDE / Young / ODE limit (`meanfield study sde`).

Euler's scheme has an error expansion in powers of its step: `a L^-p + c L^-2p + …` for
the ODE (p = 1, next order L^-2) and for Euler–Maruyama's strong error (p = 1/2, next
order L^-1), and, as measured, for Euler on a Young equation (p = 2H − 1, the local slope
steeper at small L). A one-term log-log slope over a finite range of L is bent by the next
order; `fit_paired_depth_law` fits `a L^-p + c L^-2p` to the mean over draws at each depth
(relative least squares, p profiled: at a fixed p the law is linear in a and c, so the fit
is a 1-D search, exact on exact data where a general optimiser stalls in the valley along
which p and c trade off; the first term must lead at the deepest depth, else
`a L^-p/2 + c L^-p` with a → 0 would mimic `c L^-p`) with a 95% interval for p from the
paired bootstrap: each draw (a weight path) is read at every depth, so the draws are
resampled jointly across depths and the fit repeated on every resample (percentile
interval), widened to p's move when the order after the next (`e L^-3p`) is fitted too,
where that move stands out of its own sampling spread (a truncation of the expansion that
moves every resample alike, which the bootstrap cannot see). Coverage on simulated paired
draws: `tests/test_depth_law.py`.
"""

from collections.abc import Sequence

import numpy as np

from .fits import EXPLOSION_THRESHOLD, exponent_theory

MODEL = "a L^-p + c L^-2p"
N_BOOT = 1000


P_GRID = np.linspace(0.05, 3.0, 591)  # p's grid, step 0.005, then refined


def _profile_loss(p, y, logL, terms: int = 2):
    """For each row of `y` (k, n) and each exponent in `p` (k, P), the weighted least
    squares of `Σ_m A_m L^-mp` (m = 1..`terms`) to y, weights 1/y (relative errors):
    `(loss, coefficients (k, P, terms))`; the loss inf where A_1 ≤ 0, the law is not
    positive at every depth or its later orders overtake the first at the deepest
    (`logL` increasing)."""
    X1 = np.exp(-p[..., None] * logL)  # (k, P, n)
    X = np.stack([X1 ** (m + 1) for m in range(terms)], axis=-1)  # (k, P, n, terms)
    Xw = X / y[:, None, :, None]  # rows weighted by 1/y
    G = np.einsum("kpnm,kpnl->kpml", Xw, Xw)
    b = Xw.sum(axis=2)  # Xwᵀ (y/y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            coef = np.linalg.solve(G, b[..., None])[..., 0]
        except np.linalg.LinAlgError:
            coef = np.full(b.shape, np.nan)
        law = np.einsum("kpnm,kpm->kpn", X, coef)
        loss = np.sum((law / y[:, None, :] - 1.0) ** 2, axis=-1)  # Σ W (law − y)²
        # a law of positive values whose first term leads at the deepest depth (else
        # a L^-p/2 + c L^-p with a → 0 would mimic c L^-p: p is the exponent the error
        # approaches as L grows, which the later orders must not overtake in range)
        later = np.sum(np.abs(coef[..., 1:]) * X[..., -1, 1:], axis=-1)
        leads = later <= coef[..., 0] * X1[..., -1]
    positive = (coef[..., 0] > 0) & np.all(law > 0, axis=-1) & leads
    loss = np.where(positive & np.isfinite(loss), np.maximum(loss, 0.0), np.inf)
    return loss, coef


def _fit_rows(y, logL, terms: int = 2):
    """`Σ_m a_m L^-mp` (m = 1..`terms`; the law `a L^-p + c L^-2p` at 2) fitted to each row
    of `y` (k, n) by relative least squares: p profiled (the law is linear in the a_m at a
    fixed p) over `P_GRID`, then refined by golden-section search in the grid cell around
    the best. **Returns** (p, a, c/a, loss), each (k,): the loss the mean squared relative
    residual; NaN where no p fits."""
    k = len(y)
    grid = np.broadcast_to(P_GRID, (k, P_GRID.size))
    loss, _ = _profile_loss(grid, y, logL, terms)
    best = np.argmin(loss, axis=1)
    step = P_GRID[1] - P_GRID[0]
    lo = np.maximum(P_GRID[best] - step, P_GRID[0])
    hi = np.minimum(P_GRID[best] + step, P_GRID[-1])
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(45):  # the cell shrinks by 0.618 a step: 2·0.005·0.618^45 ~ 4e-12
        x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        f1 = _profile_loss(x1[:, None], y, logL, terms)[0][:, 0]
        f2 = _profile_loss(x2[:, None], y, logL, terms)[0][:, 0]
        left = f1 <= f2
        hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
    p = (lo + hi) / 2
    # a refinement that lands past a constraint's edge (loss inf) keeps the grid's best
    worse = ~(_profile_loss(p[:, None], y, logL, terms)[0][:, 0] <= loss[np.arange(k), best])
    p = np.where(worse, P_GRID[best], p)
    loss, coef = _profile_loss(p[:, None], y, logL, terms)
    loss, A, C = loss[:, 0], coef[:, 0, 0], coef[:, 0, 1]
    ok = np.isfinite(loss)
    nan = np.full(k, np.nan)
    return (np.where(ok, p, nan), np.where(ok, A, nan), np.where(ok, C / A, nan),
            np.where(ok, loss / y.shape[1], nan))  # fmt: skip


def fit_paired_depth_law(
    L: Sequence[int],
    draws,
    *,
    quantity: str,
    theory: float,
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> dict:
    """`a L^-p + c L^-2p` fitted to the mean over draws of `draws` (draws, len(L)): the
    draw `i` of every depth is the same path. A draw with a value that is not finite or
    beyond `EXPLOSION_THRESHOLD` at any depth is left out of every depth (`excluded`), so
    the pairs stay whole. **Returns** p with its 95% interval (`p_ci95`: the percentile
    interval over `n_boot` paired resamples of the draws, `p_ci95_sampling`, widened to the
    truncation's `p_ci95_misfit`; module docstring), `a`, `c_over_a`, the theory `theory`
    of p and whether the interval holds it; with fewer than 4 depths or 2 usable draws, the
    reason instead."""
    Ls = np.asarray(L, dtype=float)
    x = np.asarray(draws, dtype=float)
    if x.ndim != 2 or x.shape[1] != Ls.size:
        raise ValueError(f"draws: need shape (draws, {Ls.size}), got {x.shape}")
    good = np.all(np.isfinite(x) & (np.abs(x) <= EXPLOSION_THRESHOLD) & (x > 0), axis=1)
    result: dict = {"quantity": quantity, "model": MODEL, "n_points": int(Ls.size),
                    "draws": int(good.sum()), "excluded": int((~good).sum())}  # fmt: skip
    if Ls.size < 4 or good.sum() < 2:
        result["reason"] = (
            f"{Ls.size} depth(s) and {int(good.sum())} usable draw(s); the law's three "
            "parameters need 4 depths, the interval 2 draws"
        )
        return result
    x = x[good]
    rng = np.random.default_rng([seed, 74])
    picks = rng.integers(0, len(x), size=(n_boot, len(x)))
    means = np.concatenate([x.mean(axis=0)[None], x[picks].mean(axis=1)])
    p_all, a, c_over_a, loss = _fit_rows(means, np.log(Ls))
    if not np.isfinite(p_all[0]):
        result["reason"] = "no exponent in [0.05, 3] gives a positive law through the means"
        return result
    p, boot = float(p_all[0]), p_all[1:]
    # the law's truncation: p's move when the order after the next (a L^-3p term) is fitted
    # too, counted where it stands out of the move's own sampling spread (over the same
    # resamples, > 2 standard deviations): the bootstrap over draws does not see a
    # truncation that moves every resample alike (nearly exact means, smooth weights)
    moved = 0.0
    if Ls.size >= 5:
        third = _fit_rows(means, np.log(Ls), terms=3)[0]
        shifts = third - p_all
        spread = float(np.nanstd(shifts[1:]))
        if np.isfinite(shifts[0]) and abs(float(shifts[0])) > 2.0 * spread:
            moved = abs(float(shifts[0]))
    misfit = [p - moved, p + moved]
    unfit = int(np.sum(~np.isfinite(boot)))  # a resample no law fits: counted at the edge
    boot = np.where(np.isfinite(boot), boot, np.inf)
    sampling = [float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))]
    ci = [min(sampling[0], misfit[0]), max(sampling[1], misfit[1])]
    result.update(
        p=p,
        p_ci95=ci,
        p_ci95_sampling=sampling,
        p_ci95_misfit=misfit,
        a=float(a[0]),
        c_over_a=float(c_over_a[0]),
        rel_rms=float(np.sqrt(loss[0])),
        resamples_unfit=unfit,
        interval=f"the paired percentile bootstrap over the draws ({n_boot} resamples, the "
        "fit repeated on each), widened to p's move when the order after the next is "
        "fitted too, where that move stands out of its sampling spread",
        theory={"p": exponent_theory(float(theory), ci)},
    )
    return result


def law_mean(fit: dict, L) -> np.ndarray:
    """The fitted law `a L^-p (1 + c' L^-p)` at depths `L` (`c_over_a` = c')."""
    Ls = np.asarray(L, dtype=float)
    return fit["a"] * Ls ** -fit["p"] * (1.0 + fit["c_over_a"] * Ls ** -fit["p"])
