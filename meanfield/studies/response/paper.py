"""The parts of Fischer, Dahmen and Helias ("Optimal signal propagation in ResNets through
residual scaling") beyond the headline figures, for `meanfield study response`:

* **Figure 3**: the kernels K^l and responses χ^l against l for α ∈ {1, 0.3, 0.1}
  (theory and simulation);
* **Figure 6**: the response increments η^l at L = 20 on log and log-log axes, and the
  power-law exponent of their tail (fitted on the simulation with an interval, beside the
  theory's), against an exponential fit of the same points;
* **Figure 1(b)**: the signal distribution h^L ~ N(0, K^L) against the dynamic range of erf
  for α below, at and above α* (theory and a simulated histogram);
* the **linearised response** `∂K^{L+1}/∂K^0 ≈ σ_{w,out}² (1 + α²σ_w²)^L` (their (7) with
  φ(h) ≈ h) against the exact χ^out, and the same with the activation's gain at the
  input kernel, `G(K^0) = d⟨φ²⟩/dK` (exact as α → 0);
* the **maximum-entropy condition** (their Supplementary B): the Kullback–Leibler
  divergence between the uniform law on [−1, 1] and the law of erf(h), h ~ N(0, σ²),
  computed numerically against σ², its minimiser, and K^L at the numerical α* of every
  depth;
* **cross-input correlations** through depth: two inputs of correlation c^0 through the
  two-input kernel recursion (erf's closed form) and finite networks, ResNet against
  feed-forward network, with the distance to the limit fitted as a power law and as an
  exponential in l.

The settings of Figures 2, 3 and 6 are the captions': σ_w² = σ_{w,in}² = σ_{w,out}² = 1.2,
σ_b² = σ_{b,in}² = σ_{b,out}² = 0.2, N = 500, d_in = 100; the input kernel is then
`K^0 = σ_{w,in}² ‖x‖²/d_in + σ_{b,in}² = 1.4` for standardised inputs (‖x‖² = d_in), the
value used here (the paper gives no x; any input has K^0 ≥ σ_{b,in}² = 0.2).
"""

import math
from typing import Any

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from scipy import special

from ...diagnostics.signal_propagation import simulate_response
from ...stats.fits import line_fit, theory_inside
from ...theory.response import FIG2, response

# Figures 2, 3, 6 (module docstring)
CAPTION: dict[str, Any] = {"sigma_w2": 1.2, "sigma_b2": 0.2, "K0": 1.4}
FIG3_ALPHAS = (1.0, 0.3, 0.1)
FIG6_DEPTH = 20
TAIL_FROM = 5  # the tail of η^l fitted from this layer on
CORRELATION_C0 = 0.5


def _summary(values, theory) -> dict:
    v = np.asarray(values, dtype=float)
    mean, se = v.mean(axis=0), v.std(axis=0, ddof=1) / math.sqrt(v.shape[0])
    z = (mean - np.asarray(theory)) / np.where(se > 0, se, np.inf)
    return {"sim_mean": mean.tolist(), "sim_se": se.tolist(), "theory": np.asarray(theory).tolist(),
            "max_abs_z": float(np.max(np.abs(z)))}  # fmt: skip


def figure3(cfg, key) -> dict:
    """K^l and χ^l against l for α ∈ FIG3_ALPHAS at the caption's setting, L = max depth."""
    L = max(cfg["depths"])
    sim = simulate_response(
        jnp.asarray(FIG3_ALPHAS), L=L, K0=CAPTION["K0"], sigma_w2=CAPTION["sigma_w2"],
        sigma_b2=CAPTION["sigma_b2"], activation=cfg["activation"], width=cfg["width"],
        d_out=cfg["d_out"], inits=cfg["inits"], key=key,
    )  # fmt: skip
    out = {"L": L, "alphas": list(FIG3_ALPHAS), **CAPTION, "per_alpha": []}
    for i, a in enumerate(FIG3_ALPHAS):
        th = response(a, L=L, activation=cfg["activation"], **CAPTION)
        out["per_alpha"].append(
            {"alpha": a, "K": _summary(sim.K[i], th.K), "chi": _summary(sim.chi[i], th.chi)}
        )
    return out


def _power_and_exponential(layers, means, ses, n_boot, rng, draws=None) -> dict:
    """Power law `log η = −κ log l + c` and exponential `log η = −l/ξ + c` fitted to the
    tail (weighted by the standard errors of log η), and each fit's weighted residual.
    The exponent's 95% interval is a percentile bootstrap over the initialisations
    (`draws`, `(inits, layers)`: the layers of one network are one unit, resampled
    together; a parametric bootstrap of each layer on its own, as before, took correlated
    layers for independent ones), or without `draws` a parametric bootstrap of log η
    (normal with SE s/m). Only layers resolved from zero (m > 3 s) are fitted: a noisy
    tail kept where it happens to be positive and dropped where not would bias the
    exponent."""
    l = np.asarray(layers, float)
    m, s = np.asarray(means, float), np.asarray(ses, float)
    ok = (m > 3 * s) & (m > 0) & np.isfinite(m)
    l, m, s = l[ok], m[ok], s[ok]
    if draws is not None:
        draws = np.asarray(draws, float)[:, ok]
    if l.size < 3:
        return {"layers": l.tolist(), "power_exponent": None, "power_exponent_ci95": None,
                "power_weighted_residual": None, "exponential_length": None,
                "exponential_weighted_residual": None, "better_fit": None,
                "note": "fewer than 3 layers resolved from zero (mean > 3 SE)",
                "interval": None, "bootstrap_dropped": 0}  # fmt: skip
    y, w = np.log(m), np.where(s > 0, m / np.maximum(s, 1e-300), 1.0)  # 1/σ of log η

    def fit(x, yy):
        A = np.stack([x, np.ones_like(x)], 1) * w[:, None]
        coef, *_ = np.linalg.lstsq(A, yy * w, rcond=None)
        resid = A @ coef - yy * w
        return coef, float(np.sqrt(np.mean(resid**2)))

    (slope_p, _), res_p = fit(np.log(l), y)
    (slope_e, _), res_e = fit(l, y)
    # every replicate at once; the power-law slope of each is linear in its log η: the
    # weighted least-squares slope Σ w²(x − x̄) y / Σ w²(x − x̄)², x̄ weighted by w²
    x, w2 = np.log(l), w**2
    xc = x - (w2 @ x) / w2.sum()
    to_slope = w2 * xc / (w2 @ xc**2)
    if draws is None:
        yb = y + (s / m) * rng.standard_normal((n_boot, m.size))
    else:
        idx = rng.integers(0, draws.shape[0], (n_boot, draws.shape[0]))
        chunk = max(1, 4_000_000 // max(1, draws.size))  # resampled values held: 32 MB
        mb = np.empty((n_boot, draws.shape[1]))
        for k in range(0, n_boot, chunk):
            mb[k : k + chunk] = draws[idx[k : k + chunk]].mean(axis=1)
        positive = np.all(mb > 0, axis=1)
        yb = np.log(mb[positive])
    dropped = n_boot - yb.shape[0]
    boots = (-(yb @ to_slope)).tolist()
    return {
        "layers": l.tolist(),
        "power_exponent": -slope_p,
        "power_exponent_ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]
        if boots else None,  # n_boot = 0: a deterministic curve
        "power_weighted_residual": res_p,
        "exponential_length": -1.0 / slope_e if slope_e < 0 else None,
        "exponential_weighted_residual": res_e,
        "better_fit": "power law" if res_p < res_e else "exponential",
        "interval": (
            None if not n_boot else
            f"percentile bootstrap over the {draws.shape[0]} initialisations ({n_boot} replicates)"
            if draws is not None else f"parametric bootstrap of each layer ({n_boot} replicates)"
        ),
        "bootstrap_dropped": dropped,
    }  # fmt: skip


def figure6(cfg, key) -> dict:
    """η^l at L = 20 (caption setting) and its tail's power law, from theory and simulation."""
    L = FIG6_DEPTH
    th = response(FIG2["alpha"], L=L, activation=cfg["activation"], **CAPTION)
    sim = simulate_response(
        FIG2["alpha"], L=L, K0=CAPTION["K0"], sigma_w2=CAPTION["sigma_w2"],
        sigma_b2=CAPTION["sigma_b2"], activation=cfg["activation"], width=cfg["width"],
        d_out=cfg["d_out"], inits=cfg["inits"], key=key,
    )  # fmt: skip
    eta = _summary(sim.eta, th.eta)
    layers = np.arange(TAIL_FROM, L + 1)
    rng = np.random.default_rng(cfg["seed"])
    sim_fit = _power_and_exponential(
        layers, np.asarray(eta["sim_mean"])[TAIL_FROM:], np.asarray(eta["sim_se"])[TAIL_FROM:],
        1000, rng, draws=np.asarray(sim.eta, float)[:, TAIL_FROM:],
    )  # fmt: skip
    th_eta = np.asarray(th.eta)[TAIL_FROM:]
    theory_slope = line_fit(np.log(layers), np.log(th_eta))[0]
    # the theory curve through the simulation's estimator: the layers it fitted, with the
    # same weights (m / se of the simulated means)
    m_sim, s_sim = np.asarray(eta["sim_mean"])[TAIL_FROM:], np.asarray(eta["sim_se"])[TAIL_FROM:]
    keep = np.isin(layers, sim_fit["layers"])
    same = _power_and_exponential(layers[keep], th_eta[keep],
                                  th_eta[keep] * s_sim[keep] / m_sim[keep], 0, rng)  # fmt: skip
    same = same["power_exponent"]
    ci = sim_fit["power_exponent_ci95"]
    return {"L": L, **CAPTION, "eta": eta, "tail_from": TAIL_FROM, "simulation_fit": sim_fit,
            "theory_power_exponent": -theory_slope,
            "theory_power_exponent_same_estimator": same,
            "theory_inside_ci95": bool(theory_inside(ci, same))}  # fmt: skip


def linearised(cfg, theory_chi) -> dict:
    """χ^out against `σ_{w,out}² (1 + α²σ_w²)^L` (their (7), φ(h) ≈ h: slope 1) and against
    the same with the activation's gain at the input kernel, `G(K^0) = d⟨φ²⟩/dK` (the
    exact small-α limit: `σ_{w,out}² G (1 + α²σ_w² G)^L`), on the study's α grid at every
    depth: the ratio at the smallest α and the largest α up to which each form holds
    within 5%."""
    from ...theory.gaussian import gain

    g = float(gain(cfg["activation"], cfg["K0"]))
    grid = np.asarray(theory_chi["alpha_grid"])
    s2 = cfg["sigma_w2"]
    rows = []
    for L in cfg["depths"]:
        exact = np.asarray(theory_chi[f"chi_out_L{L}"])
        row = {"L": L}
        for name, slope in (("paper_form", 1.0), ("gain_form", g)):
            lin = s2 * slope * (1 + grid**2 * s2 * slope) ** L
            ratio = exact / lin
            good = np.abs(ratio - 1) < 0.05
            # the contiguous range from the smallest α on
            upto = int(np.argmin(good)) if not np.all(good) else len(grid)
            row[name] = {
                "ratio_at_smallest_alpha": float(ratio[0]),
                "holds_within_5pct_up_to_alpha": float(grid[upto - 1]) if upto > 0 else None,
            }
        rows.append(row)
    return {
        "K0": cfg["K0"],
        "gain_at_K0": g,
        "per_L": rows,
        "note": "(7) treats the activation as the identity (slope 1); the exact response at "
        "small alpha is the same form with the gain G(K^0) of the activation",
    }


def max_entropy(cfg, stars) -> dict:
    """D_KL(uniform on [−1, 1] | law of erf(h), h ~ N(0, σ²)) against σ², by quadrature (in
    h = erf⁻¹(z): Gauss–Hermite, exact for this integrand), and
    its minimiser; their closed form `ln√2 + ½ ln σ² + 1/(4σ²) − ½` beside it; K^L at the
    numerical α* of each depth (which signal variance the true optimum has)."""
    # z = erf(h) on (−1, 1): dz = (2/√π) e^{−h²} dh, so Gauss–Hermite nodes h (weight e^{−h²})
    # integrate exactly the integrand, polynomial in h
    h, wh = np.polynomial.hermite.hermgauss(60)
    wz = 2 / np.sqrt(np.pi) * wh
    sig2 = np.geomspace(0.05, 5.0, 400)
    # −log p_φ(z) = ½ log(2πσ²) + h²/(2σ²) + log φ'(h), φ' = 2/√π e^{−h²}
    logp = -(0.5 * np.log(2 * np.pi * sig2[:, None]) + h[None] ** 2 / (2 * sig2[:, None])
             + np.log(2 / np.sqrt(np.pi)) - h[None] ** 2)  # fmt: skip
    kl = np.sum(wz[None] * 0.5 * (np.log(0.5) - logp), axis=1)
    closed = np.log(np.sqrt(2)) + 0.5 * np.log(sig2) + 1 / (4 * sig2) - 0.5
    j = int(np.argmin(kl))
    k_at_star = [
        {"L": s["L"], "alpha_star": s["numeric"],
         "K_L": float(response(s["numeric"], L=s["L"], K0=cfg["K0"], sigma_w2=cfg["sigma_w2"],
                               sigma_b2=cfg["sigma_b2"], activation=cfg["activation"]).K[-1])}
        for s in stars
    ]  # fmt: skip
    return {
        "sigma2": sig2.tolist(),
        "kl": kl.tolist(),
        "closed_form_max_difference": float(np.max(np.abs(kl - closed))),
        "argmin_sigma2": float(sig2[j]),
        "paper_condition": 0.25,
        "note": "dD/dsigma^2 = 1/(2 sigma^2) - 1/(4 sigma^4) vanishes at sigma^2 = 1/2; the "
        "supplement's derivative 1/sigma^2 - 1/(4 sigma^4) (zero at 1/4) drops a factor 1/2",
        "K_L_at_alpha_star": k_at_star,
    }


def _erf_pair(Kaa, Kbb, Kab):
    """⟨erf(h_a) erf(h_b)⟩ for a centred Gaussian pair (closed form), in float64 on the host:
    `correlation_theory` calls it 4 LONG_DEPTH times on scalars (as JAX operations, 11 s of
    a small response study; as Python floats, milliseconds)."""
    return 2 / math.pi * math.asin(2 * Kab / math.sqrt((1 + 2 * Kaa) * (1 + 2 * Kbb)))


def resnet_correlation_limit(sigma_w2, sigma_b2) -> float:
    """The limit of c^l in the erf ResNet: the kernels grow like l, every increment
    saturates (⟨erf erf⟩ → (2/π) arcsin c), so `c^∞` is the stable fixed point of
    `c ↦ (σ_w² (2/π) arcsin c + σ_b²)/(σ_w² + σ_b²)` below 1 (c = 1 is the unstable one),
    reached like 1/l (a Cesàro mean): by bisection."""
    f = lambda c: (sigma_w2 * 2 / math.pi * math.asin(c) + sigma_b2) / (sigma_w2 + sigma_b2) - c  # noqa: E731
    lo, hi = -1.0 + 1e-12, 1.0 - 1e-9
    if f(lo) < 0:  # no root below 1
        return 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def correlation_theory(L, *, alpha, residual, K0, c0, sigma_w2, sigma_b2):
    """c^l = K_ab^l / K^l, l = 0..L, of two inputs with K_aa^0 = K_bb^0 = K0, K_ab^0 = c0 K0."""
    K, Kab, out = K0, c0 * K0, [c0]
    for _ in range(L):
        m = _erf_pair(K, K, K)
        mab = _erf_pair(K, K, Kab)
        if residual:
            K, Kab = (
                K + alpha**2 * (sigma_w2 * m + sigma_b2),
                Kab + alpha**2 * (sigma_w2 * mab + sigma_b2),
            )
        else:
            K, Kab = sigma_w2 * m + sigma_b2, sigma_w2 * mab + sigma_b2
        out.append(float(Kab / K))
    return np.asarray(out)


def correlation_simulation(L, *, alpha, residual, K0, c0, sigma_w2, sigma_b2, width, inits, key):
    """The same from `inits` width-`width` networks with erf (every weight drawn), per layer:
    the empirical correlation `h_a·h_b / sqrt(‖h_a‖²‖h_b‖²)` (mean, standard error)."""

    def one(k):
        kx, kl = jr.split(k)
        g = jr.normal(kx, (2, width))
        ha = math.sqrt(K0) * g[0]
        hb = math.sqrt(K0) * (c0 * g[0] + math.sqrt(1 - c0**2) * g[1])

        def layer(hs, kk):
            kw, kb = jr.split(kk)
            W = jr.normal(kw, (width, width)) * math.sqrt(sigma_w2 / width)
            b = jr.normal(kb, (width,)) * math.sqrt(sigma_b2)
            new = [W @ jax.scipy.special.erf(h) + b for h in hs]
            hs = [h + alpha * n for h, n in zip(hs, new, strict=True)] if residual else new
            c = hs[0] @ hs[1] / jnp.sqrt((hs[0] @ hs[0]) * (hs[1] @ hs[1]))
            return hs, c

        _, cs = jax.lax.scan(lambda hs, kk: layer(hs, kk), [ha, hb], jr.split(kl, L))
        c_first = ha @ hb / jnp.sqrt((ha @ ha) * (hb @ hb))
        return jnp.concatenate([c_first[None], cs])

    cs = np.asarray(jax.lax.map(jax.jit(one), jr.split(key, inits)))
    return cs.mean(0), cs.std(0, ddof=1) / math.sqrt(inits)


LONG_DEPTH = 2000  # layers of the recursion whose tail decides power law against exponential


def correlations(cfg, key) -> dict:
    """Cross-input correlations through depth (caption setting, α = 1, c^0 = 0.5), ResNet
    against feed-forward network: the two-input recursion against finite networks layer by
    layer (z-scores, l ≤ L); the recursion's distance to its limit over LONG_DEPTH layers,
    fitted as a power law and as an exponential on its tail (the ResNet from l = 100; the
    feed-forward net until it reaches round-off), beside the ResNet's predicted exponent
    κ = 1 − f'(c^∞) (`resnet_correlation_limit`: near the fixed point
    c^{l+1} − c^∞ ≈ (1 − κ/l)(c^l − c^∞))."""
    L = max(cfg["depths"])
    inits = max(2, min(cfg["inits"], 200))
    s_w, s_b = CAPTION["sigma_w2"], CAPTION["sigma_b2"]
    out = {"L": L, "c0": CORRELATION_C0, **CAPTION, "inits": inits, "long_depth": LONG_DEPTH}
    rng = np.random.default_rng(cfg["seed"] + 1)
    for name, residual in (("resnet", True), ("ffnet", False)):
        kw = dict(alpha=1.0, residual=residual, K0=CAPTION["K0"], c0=CORRELATION_C0,
                  sigma_w2=s_w, sigma_b2=s_b)  # fmt: skip
        long = correlation_theory(LONG_DEPTH, **kw)
        slope = float("nan")  # the ResNet's f'(c^∞), below
        if residual:  # reached like a power of l: the fixed point of the saturated increments
            limit = resnet_correlation_limit(s_w, s_b)
            slope = s_w / (s_w + s_b) * 2 / math.pi / math.sqrt(1 - limit**2)
            tail = np.arange(100, LONG_DEPTH + 1)
        else:  # reached exponentially: the recursion itself, far out
            limit = float(long[-1])
            dist = np.abs(long - limit)
            tail = np.arange(1, max(3, int(np.argmax(dist < 1e-12)) if np.any(dist < 1e-12)
                                    else LONG_DEPTH))  # fmt: skip
        th = long[: L + 1]
        mean, se = correlation_simulation(L, width=cfg["width"], inits=inits,
                                          key=jr.fold_in(key, residual), **kw)  # fmt: skip
        d_tail = np.abs(long[tail] - limit)
        shown = np.unique(np.geomspace(1, LONG_DEPTH, 200).astype(int))
        out[name] = {
            "theory": th.tolist(),
            "limit": float(limit),
            "sim_mean": mean.tolist(),
            "sim_se": se.tolist(),
            "max_abs_z": float(np.max(np.abs((mean - th) / np.where(se > 0, se, np.inf)))),
            "long_theory_layers": shown.tolist(),
            "long_theory_distance": np.abs(long[shown] - limit).tolist(),
            "tail_layers": [int(tail[0]), int(tail[-1])],
            "tail_fit": _power_and_exponential(tail, d_tail, 1e-9 * d_tail, 0, rng),
        }
        if residual:
            out[name]["predicted_power_exponent"] = 1 - slope
    return out


def signal_distribution(cfg, stars, key) -> dict:
    """Figure 1(b): h^L of width-N networks (every weight drawn, a few initialisations) at
    α* / 3, α*, 3 α* (L = max depth) against N(0, K^L) and erf's dynamic range [−1, 1]."""
    L = max(cfg["depths"])
    star = next(s["numeric"] for s in stars if s["L"] == L)
    rows = []
    for factor in (1 / 3, 1.0, 3.0):
        a = star * factor
        th = response(a, L=L, K0=cfg["K0"], sigma_w2=cfg["sigma_w2"], sigma_b2=cfg["sigma_b2"],
                      activation=cfg["activation"])  # fmt: skip
        KL = float(th.K[-1])

        def one(k, a=a):
            k0, kl = jr.split(k)
            h = math.sqrt(cfg["K0"]) * jr.normal(k0, (cfg["width"],))

            def layer(h, kk):
                kw, kb = jr.split(kk)
                W = jr.normal(kw, (cfg["width"],) * 2) * math.sqrt(cfg["sigma_w2"] / cfg["width"])
                b = jr.normal(kb, (cfg["width"],)) * math.sqrt(cfg["sigma_b2"])
                return h + a * (W @ jax.scipy.special.erf(h) + b), None

            return jax.lax.scan(layer, h, jr.split(kl, L))[0]

        hs = np.asarray(jax.lax.map(jax.jit(one), jr.split(jr.fold_in(key, round(1e6 * a)), 20)))
        hs = hs.ravel()
        # a density of all samples (those beyond ±4 counted in the normalisation), so that
        # it compares with N(0, K^L) however much mass lies outside the drawn range
        counts = np.histogram(hs, bins=60, range=(-4, 4))[0]
        hist = counts / (hs.size * (8 / 60))
        rows.append({"alpha": a, "factor": factor, "K_L": KL, "sim_variance": float(hs.var()),
                     "fraction_outside_dynamic_range": float(np.mean(np.abs(hs) > 1)),
                     "theory_fraction_outside": float(special.erfc(1 / math.sqrt(2 * KL))),
                     "histogram": hist.tolist()})  # fmt: skip
    return {"L": L, "alpha_star": star, "per_alpha": rows, "bins": [-4, 4, 60]}
