"""Coverage of the library's 95% intervals, on simulated data with a known truth and the
studies' own correlation structure, at the sizes the quick presets use.

    python benchmarks/coverage.py [--replicates 400] [--kinds loglog,paired,...] [--json PATH]

Each kind simulates data whose true value is known, runs the library's own estimator and
interval on it `--replicates` times, and counts how often the interval holds the truth
(with the binomial standard error of that count). A calibrated 95% interval covers in
[0.92, 0.98] at 400 replicates. `tests/test_coverage.py` runs the cheap kinds in CI.

Kinds:

* `loglog`: `fit_loglog`, the headline slope: errors `c x^p ε` at the mean-ODE study's
  line (L = 8..128, 10 draws a point), ε of several positive laws of mean 1.
* `loglog-paired`: `fit_loglog(paired=True)`: the two-layer study's width line (M = 128 ..
  8192, 16 draws), draw k of every point sharing a random factor (its embedding).
* `regularity`: `estimate_hurst(unit_axis=1)`: fractional Brownian paths of index H along
  depth (L = 64), the d² entries of one network sharing a common path (correlated
  entries, as after training), 2 and 6 networks.
* `rate-sum`: `fit_rate_sum`, the mean-ODE study's joint `a/L + b/sqrt(LM)` on its grid.
* `rate-law`: `fit_rate_law(paired=True)`, the shapes study's `a L^-p + b D^q (LM)^-r` on
  its quick grid (31 points, 12 draws sharing an embedding at each D).
* `fig6-tail`: the response study's Figure 6 power-law exponent of η^l's tail over 1000
  initialisations whose layers are correlated.
* `coord-check`: the coordinate check's slopes (`fit_loglog`), 4 sizes × 4 draws.
* `plain-rate`: plain-vs-residual's per-layer rate (`slope_interval`), 4 depths × 16 draws.
* `transfer-drift`: the transfer study's lr* drift at its quick and paper presets'
  layouts, lr* at a random phase between grid points, symmetric and skewed loss curves.
* `delta-quantile`: the mean-ODE study's δ-quantile slope (`convergence.delta_quantiles`),
  17 points × 10 draws, four laws of the draws.
"""

import argparse
import json
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

NOISES: dict[str, Callable] = {
    "half-normal": lambda rng, size: np.abs(rng.normal(size=size)) / math.sqrt(2 / math.pi),
    "chi(3)": lambda rng, size: np.sqrt(rng.chisquare(3, size)) / stats.chi(3).mean(),
    "log-normal(0.5)": lambda rng, size: rng.lognormal(-0.125, 0.5, size),
    "exponential": lambda rng, size: rng.exponential(1.0, size),
}


def _loglog(rng, r, noise):
    from meanfield.stats.fits import fit_loglog

    x, p = np.array([8.0, 16, 32, 64, 128]), -1.0
    samples = [x_**p * NOISES[noise](rng, 10) for x_ in x]
    f = fit_loglog(x, samples, quantity="q", against="L", seed=r)
    return f["ci95"], p


def _coord_check(rng, r, sigma):
    """The coordinate check's slopes: 4 sizes, 4 independent draws each (its quick
    preset), sizes log-normal about a flat truth."""
    from meanfield.stats.fits import fit_loglog

    x, p = np.array([32.0, 64, 128, 256]), 0.0
    samples = [x_**p * rng.lognormal(0.0, sigma, 4) for x_ in x]
    f = fit_loglog(x, samples, quantity="q", against="N", seed=r)
    return f["ci95"], p


def _loglog_paired(rng, r, noise):
    from meanfield.stats.fits import fit_loglog

    x, p, n = np.array([128.0, 512, 2048, 8192]), -0.5, 16
    shared = rng.lognormal(0.0, 0.3, n)  # draw k's embedding, felt at every width
    samples = [x_**p * shared ** (0.5 + 0.1 * i) * NOISES[noise](rng, n) for i, x_ in
               enumerate(x)]  # fmt: skip
    f = fit_loglog(x, samples, quantity="q", against="M", seed=r, paired=True)
    # the shared factor's exponent grows with the width: E[shared^c] moves the truth
    c = 0.5 + 0.1 * np.arange(len(x))
    means = x**p * np.exp(0.5 * (0.3 * c) ** 2)
    xc = np.log(x) - np.log(x).mean()
    truth = float(xc @ np.log(means) / (xc @ xc))
    return f["ci95"], truth


def _fbm_cholesky(n: int, hurst: float) -> np.ndarray:
    t = np.arange(1, n + 1) / n
    h2 = 2 * hurst
    cov = 0.5 * (t[:, None] ** h2 + t[None, :] ** h2 - np.abs(t[:, None] - t[None, :]) ** h2)
    return np.linalg.cholesky(cov)


def _regularity(rng, r, networks, hurst=0.7, L=64, d=4, shared=0.8):
    from meanfield.diagnostics.regularity import estimate_hurst

    chol = _fbm_cholesky(L, hurst)
    common = chol @ rng.normal(size=(L, networks))  # one path per network
    own = chol @ rng.normal(size=(L, networks * d * d))
    paths = math.sqrt(shared) * np.repeat(common, d * d, axis=1) + math.sqrt(1 - shared) * own
    paths = paths.reshape(L, networks, d, d)
    est = estimate_hurst(paths, axis=0, unit_axis=1, seed=r)
    return est.interval, hurst


def _rate_sum(rng, r, noise):
    from meanfield.stats.rate_law import fit_rate_sum

    pts = [(L, 16384) for L in (8, 16, 32, 64, 128)] + [(1024, M) for M in (1, 4, 16, 64)]
    a, b = 0.5, 0.3
    samples = [(a / L + b / math.sqrt(L * M)) * NOISES[noise](rng, 10) for L, M in pts]
    f = fit_rate_sum([p[0] for p in pts], [p[1] for p in pts], samples, quantity="q",
                     n_boot=500, seed=r)  # fmt: skip
    return (f["a_ci95"], a), (f["b_ci95"], b)


def _rate_law(rng, r, a=0.3, shared=0.3):
    """The shapes study's rate law `a L^-p + b D^q (LM)^-r` (`fit_rate_law`, law "LM",
    paired) on its quick grid's 31 points with D <= LM/4 (L 4..64, M 4, 16, 64, D 8, 32,
    128), 12 draws; draw k of every point at one D shares a factor (its embedding), each
    point's error half-normal around it. Truth p = 1, q = r = 1/2; with `a` = 0.3 the L
    term is as small as on the study's grid (not resolved there), with 3 it is resolved."""
    from meanfield.stats.rate_law import fit_rate_law

    Ls, Ms, Ds, n = (4, 8, 16, 32, 64), (4, 16, 64), (8, 32, 128), 12
    pts = [(L, M, D) for L in Ls for M in Ms for D in Ds if D <= L * M / 4]
    emb = {D: rng.lognormal(-(shared**2) / 2, shared, n) for D in Ds}
    samples = [
        (a / L + math.sqrt(D / (L * M))) * emb[D] * NOISES["half-normal"](rng, n) for L, M, D in pts
    ]
    f = fit_rate_law(*zip(*pts, strict=True), samples, quantity="q", law="LM", seed=r,
                     paired=True)  # fmt: skip
    return (f.get("q_ci95"), 0.5), (f.get("r_ci95"), 0.5), (f.get("p_ci95"), 1.0)


def _mean_ode_law(rng, r, noise="gamma", depth=True):
    """The main job's joint law (`fit_depth_width_law`) at its quick layout: L 8..128 ×
    M 1, 4, 16, 64, 16384 and M 1..64 at L = 1024, 10 networks a point. Each draw is the
    law's value (Δ^h's fit after one step: a = 0.46, c/a = −1.2, b = 1.1; p = 1, q = ½)
    times a factor of mean 1 whose spread grows with the Monte-Carlo term's share, as the
    study's (3% where the depth term dominates, 70% where the units' fluctuation does):
    gamma or log-normal. Without `depth` the law is the Monte-Carlo term alone (a
    centred initialisation before training)."""
    from meanfield.stats.joint_law import fit_depth_width_law

    pts = [(L, M) for L in (8, 16, 32, 64, 128) for M in (1, 4, 16, 64, 16384)]
    pts += [(1024, M) for M in (1, 4, 16, 64)]
    a, c, b = (0.46, -1.2, 1.1) if depth else (0.0, 0.0, 1.1)
    samples = []
    for L, M in pts:
        d, s = a / L * (1 + c / L), b / math.sqrt(L * M)
        value = math.sqrt(d * d + s * s)
        cv = 0.03 + 0.7 * s * s / (d * d + s * s)
        if noise == "gamma":
            draws = rng.gamma(1 / cv**2, cv**2, 10)
        else:
            sigma = math.sqrt(math.log(1 + cv**2))
            draws = rng.lognormal(-(sigma**2) / 2, sigma, 10)
        samples.append(value * draws)
    f = fit_depth_width_law([p[0] for p in pts], [p[1] for p in pts], samples, quantity="q",
                            c_over_a=c, depth_term=depth, seed=r)  # fmt: skip
    return [(f.get("p_ci95"), 1.0), (f.get("q_ci95"), 0.5)] if depth else [(f.get("q_ci95"), 0.5)]


def _fig6_tail(rng, r, by_inits=True, tilt_sd=0.3, inits=1000, kappa=1.5):
    """The response study's Figure 6 tail: η^l at layers 5..20 of 1000 initialisations,
    mean `l^-κ` at every layer, each initialisation's curve off by a level and a tilt in
    log l of its own (the layers of one network are correlated) and a gamma noise per
    layer; the power-law exponent's interval over the initialisations (`by_inits`) or, as
    before, a parametric bootstrap of each layer's mean on its own."""
    from meanfield.studies.response.paper import _power_and_exponential

    layers = np.arange(5, 21)
    x = np.log(layers / 10.0)
    level = rng.normal(0.0, 0.5, (inits, 1))
    tilt = rng.normal(0.0, tilt_sd, (inits, 1))
    eta = (
        layers**-kappa
        * np.exp(level - 0.5**2 / 2)
        * np.exp(tilt * x - tilt_sd**2 * x**2 / 2)
        * rng.gamma(2.0, 0.5, (inits, layers.size))
    )
    m, s = eta.mean(axis=0), eta.std(axis=0, ddof=1) / math.sqrt(inits)
    fit = _power_and_exponential(layers, m, s, 400, np.random.default_rng(r),
                                 draws=eta if by_inits else None)  # fmt: skip
    return fit["power_exponent_ci95"], kappa


def _plain_rate(rng, r):
    from meanfield.stats.compare import slope_interval

    L, slope = np.array([4.0, 8, 16, 32]), -0.69
    samples = [slope * x + rng.normal(0.0, 0.05 * math.sqrt(x), 16) for x in L]
    return slope_interval(L, samples), slope


def _delta_quantile(rng, r, noise="half-normal"):
    from meanfield.coupling.convergence import delta_quantiles

    dist = {"half-normal": stats.halfnorm(), "chi(3)": stats.chi(3),
            "log-normal(0.5)": stats.lognorm(0.5), "exponential": stats.expon()}[noise]  # fmt: skip
    points = [
        {"steps": 1, "L": i, "M": 1,
         "delta_h": {"values": ((1 + i) * dist.rvs(size=10, random_state=rng)).tolist(),
                     "exploded_draws": []}}
        for i in range(17)
    ]  # fmt: skip
    out = delta_quantiles(points, 1, n_boot=300, seed=r)
    deltas = np.asarray(out["deltas"])
    q = np.array([dist.ppf(1 - d) for d in deltas]) / dist.median()
    x = np.log(1 / deltas)
    xc = x - x.mean()
    return out["fits"]["log"]["slope_ci95"], float(xc @ (q - q.mean()) / (xc @ xc))


def _critical_beta(rng, r, shared=0.5, n_boot=500):
    """The phases study's β_c: ratios `L^{s(β)} e^{η}` over its quick grid (10 β, 6 depths,
    64 draws), s(β) = 1 − 2β near the crossing (β_c = 1/2), each draw's noise shared
    across every β and depth (the same weights) in part."""
    from meanfield.diagnostics.phases import critical_beta

    betas = np.array([0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5])
    Ls = np.array([16, 32, 64, 128, 256, 512])
    draws = 64
    common = rng.normal(size=(1, 1, draws))
    eta = math.sqrt(shared) * common + math.sqrt(1 - shared) * rng.normal(
        size=(len(betas), len(Ls), draws)
    )
    slopes = 1.0 - 2.0 * betas
    samples = Ls[None, :, None] ** slopes[:, None, None] * np.exp(eta)
    out = critical_beta(betas, Ls, samples, n_boot=n_boot, seed=r)
    return out["ci95"], 0.5


def _alpha_star(rng, r, inits=300):
    """The response study's α*: the vertex of the 5-point parabola through the mean of 300
    initialisations' curves χ(α) on 15 log-spaced α, each initialisation's curve off the
    mean by a level and a tilt of its own (shared by every α: the same initialisation) and
    a little independent noise; its interval a bootstrap over initialisations. The truth
    is the same estimator on the population's mean curve."""
    from meanfield.stats.fits import parabola_argmax, parabola_argmax_interval

    x = np.linspace(-0.3, 0.3, 15)
    f = 2.3 - 2.2 * (x - 0.02) ** 2 + 0.3 * (x - 0.02) ** 3
    level = rng.normal(0.0, 0.25, (inits, 1))
    tilt = rng.normal(0.0, 0.25, (inits, 1))
    chis = f * np.exp(level + tilt * x) + rng.normal(0.0, 0.02, (inits, x.size))
    interval = parabola_argmax_interval(x, chis, n_boot=400, seed=r)
    mean_curve = f * np.exp(0.5 * 0.25**2 + 0.5 * (0.25 * x) ** 2)  # E[e^{level + tilt x}]
    return interval["ci95"], float(parabola_argmax(x, mean_curve))


def _lr_drift(rng, r, seeds=4, drift=-0.5):
    """The regimes study's lr* drift: per depth (4..64) the log final loss over 17 learning
    rates (2^(e/2)) of `seeds` networks, a parabola in log lr with its minimum at
    lr*(L) = L^drift, each network's curve off by a level and a tilt of its own; lr* from
    the mean curve, the drift a line through log lr* against log L, its interval from the
    networks' jackknife (`regimes._transfer`)."""
    from meanfield.studies.regimes.study import PARAMETRIZATIONS, _transfer

    lrs = [2.0 ** (e / 2) for e in range(-8, 9)]
    x = np.log(lrs)
    points = []
    for L in (4, 8, 16, 32, 64):
        centre = drift * math.log(L)
        logs = 0.5 * (x[:, None] - centre) ** 2 - 2.0  # (lrs, seeds)
        logs = logs + rng.normal(0, 0.3, (1, seeds)) + rng.normal(0, 0.15, (1, seeds)) * x[:, None]
        logs = logs + rng.normal(0, 0.05, logs.shape)
        entry = {
            "final_loss": np.exp(logs).tolist(),
            "initial_loss": np.full(logs.shape, 1e9).tolist(),
        }
        points.append({"L": L, "parametrizations": {n: entry for n in PARAMETRIZATIONS}})
    (rec, *_) = _transfer({"seed": r, "transfer_lrs": lrs}, points)
    return rec["drift_ci95"], drift


def _transfer_drift(rng, r, preset="quick", line="depth", drift=0.0, skew=0.0):
    """The transfer study's lr* drift at its own layout (a preset's rates, sizes and
    networks per size): log loss `g(log lr − log lr*)` around lr*(size) = size^drift, lr*
    at a random phase between the grid's rates (the grid's resolution), `g` the parabola
    `0.06 u²` (`skew` 0) or the asymmetric `0.12 (e^{ku} − 1 − ku)/k²` (`skew` k), each
    network off by a level (sd 0.02) and a tilt in log lr (sd 0.008) of its own, and
    noise of sd 0.01 per rate: the sizes measured in the quick preset's run (RESULTS)."""
    from meanfield.stats.transfer import drift as fit_drift
    from meanfield.studies.transfer.study import PRESETS

    p = PRESETS[preset]
    lrs = np.asarray(p["lrs"], dtype=float)
    sizes = p["depths"] if line == "depth" else p["widths"]
    x = np.log(lrs)
    middle = x[len(x) // 2] + rng.uniform(-0.5, 0.5) * (x[1] - x[0])
    log_sizes = np.log(sizes)
    curves = []
    for s in log_sizes:
        u = x - (middle + drift * (s - log_sizes.mean()))
        g = 0.06 * u**2 if skew == 0 else 0.12 * (np.exp(skew * u) - 1 - skew * u) / skew**2
        nets = p["seeds"]
        c = g[:, None] + rng.normal(0, 0.02, (1, nets))
        c = c + rng.normal(0, 0.008, (1, nets)) * (x - x.mean())[:, None]
        curves.append(c + rng.normal(0, 0.01, c.shape))
    rec = fit_drift(list(lrs), list(sizes), curves, seed=r)
    return rec["drift_ci95"], drift


# the intervals of a kind whose replicate returns several, in order
PARTS = {"rate-sum": ("a", "b"), "rate-law": ("q", "r", "p"), "mean-ode-law": ("p", "q")}


def cases() -> dict[str, list[tuple[str, Callable]]]:
    """kind -> [(label, replicate(rng, r) -> [(interval, truth), ...])]"""

    def one(fn, *args):
        return lambda rng, r: [fn(rng, r, *args)]

    return {
        "loglog": [(f"10 draws, {n}", one(_loglog, n)) for n in NOISES],
        "loglog-paired": [(f"16 draws, {n}", one(_loglog_paired, n)) for n in NOISES],
        "coord-check": [(f"4 draws, log-normal({s})", one(_coord_check, s)) for s in (0.1, 0.3)],
        "regularity": [(f"{g} networks, H = 0.7", one(_regularity, g)) for g in (2, 6)],
        "rate-sum": [
            (f"10 draws, {n}", lambda rng, r, n=n: list(_rate_sum(rng, r, n)))
            for n in ("half-normal", "chi(3)", "log-normal(0.5)")
        ],  # fmt: skip
        "rate-law": [
            (f"12 draws × 31 points, L term {t}", lambda rng, r, a=a: list(_rate_law(rng, r, a)))
            for t, a in (("as the study's (a = 0.3)", 0.3), ("resolved (a = 3)", 3.0))
        ],
        "mean-ode-law": [
            (f"29 points × 10 networks, {n}", lambda rng, r, n=n: _mean_ode_law(rng, r, n))
            for n in ("gamma", "log-normal")
        ]
        + [
            (
                "29 points × 10 networks, Monte-Carlo term alone",
                lambda rng, r: _mean_ode_law(rng, r, "gamma", depth=False),
            )
        ],  # fmt: skip
        "plain-rate": [("4 depths × 16 draws, Gaussian", one(_plain_rate))],
        "fig6-tail": [
            (f"1000 initialisations, tilt {t}{old}", one(_fig6_tail, not old, t))
            for t in (0.3, 0.6)
            for old in ("", ", each layer on its own (the old interval)")
        ],
        "critical-beta": [
            (f"64 draws, shared noise {f}", one(_critical_beta, f)) for f in (0.0, 0.5)
        ]
        + [
            ("64 draws, shared noise 0.5 (100 bootstrap draws)", one(_critical_beta, 0.5, 100))
        ],  # fmt: skip
        "alpha-star": [("300 initialisations", one(_alpha_star))],
        "lr-drift": [(f"{s} networks per depth", one(_lr_drift, s)) for s in (4, 8)],
        "transfer-drift": [
            (
                f"{preset} {line} line, drift {d:g}, skew {k:g}",
                one(_transfer_drift, preset, line, d, k),
            )
            for preset in ("quick", "paper")
            for line in ("depth", "width")
            for d, k in ((0.0, 0.0), (0.3, 1.0), (-0.3, -1.0))
        ],
        "delta-quantile": [
            (f"17 points × 10 draws, {n}", one(_delta_quantile, n))
            for n in ("half-normal", "chi(3)", "log-normal(0.5)", "exponential")
        ],  # fmt: skip
    }


def coverage(replicate: Callable, replicates: int, seed: int = 0) -> list[dict]:
    """Per interval the replicate returns: the fraction of replicates whose interval holds
    the truth, with its binomial standard error."""
    rng = np.random.default_rng(seed)
    hits = None
    for r in range(replicates):
        outs = replicate(rng, r)
        if hits is None:
            hits = [0] * len(outs)
        for j, (ci, truth) in enumerate(outs):
            hits[j] += ci is not None and ci[0] <= truth <= ci[1]
    assert hits is not None
    rows = []
    for h in hits:
        c = h / replicates
        rows.append({"coverage": c, "se": math.sqrt(c * (1 - c) / replicates)})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=400)
    parser.add_argument("--kinds", default=",".join(cases()))
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    table = []
    for kind in args.kinds.split(","):
        for label, replicate in cases()[kind]:
            t0 = time.perf_counter()
            rows = coverage(replicate, args.replicates)
            for j, row in enumerate(rows):
                name = label if len(rows) == 1 else f"{label} ({PARTS[kind][j]})"
                table.append({"kind": kind, "case": name, "replicates": args.replicates,
                              **row, "seconds": time.perf_counter() - t0})  # fmt: skip
                print(f"{kind:15s} {name:40s} {row['coverage']:.3f} ± {row['se']:.3f}",
                      flush=True)  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
