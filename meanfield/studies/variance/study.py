"""`meanfield study variance`: the variance of the first forward pass (docs: Mathematics §5.1).

Monte-Carlo estimate of c in `E‖φ(h, Z_0)‖² = c‖h‖²`, then `E‖h^L − x‖²` over many random
networks against `((1 + cα²M)^L − 1)‖x‖²`, for α = L^{-γ}/sqrt(M) with γ below, at and
above 1/2 as L grows: explosion (γ < 1/2), a finite limit e^c − 1 (γ = 1/2), and the
identity (γ > 1/2, where Δ_L² ~ c L^{1−2γ}).

With `--sigma-vs`, Chaintron's scaling of the 2LP ResNet on an embedding instead: α =
1/(LM) (the `1/(LM) Σ_j v_j ρ(⟨u_j, h⟩_D)` of the slides, `σ_u = √D` there being `σ_u =
1/√d` here), swept in σ_v: `Δ_L² = ((1 + c σ_v²/(L² M))^L − 1)‖x‖²` (exact for ReLU), that
is `Θ(σ_v²/(LM))` while `σ_v = O(√(LM))` and an explosion beyond.
"""

import functools
import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...blocks.two_layer import TwoLayerBlock
from ...harness.args import (
    PYTHON_STEP,
    UNIT_OPTIONS,
    Cost,
    check_scale,
    check_unit_arguments,
)
from ...harness.cache import cache_folder
from ...harness.runner import start_study, study_precision
from ...harness.self_check import of_terms
from ...laws.unit import TwoLayerGaussianLaw
from ...runtime.errors import StudyInputError
from ...stats.fits import fit_loglog, judge_theory, split_exploded
from ...theory.variance import (
    estimate_c,
    sampled_backward_deviation,
    sampled_deviation,
    variance_law,
)
from . import HELP as HELP  # its line in `meanfield study --help` (the package's)
from .options import (
    DEFAULT_X64 as DEFAULT_X64,
)
from .options import (
    PRESETS as PRESETS,
)
from .options import (  # the command line's (read without JAX: options.py)
    add_arguments as add_arguments,
)
from .plot import lm_figure, variance_figure
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

BACKWARD_NETS = 1000  # networks of the backward-pass measurement per point (at most)


def near_identity(gamma: float, slope: float | None) -> bool:
    """The first backward pass approaches the identity as `M L α² → 0`: only where that
    is the theory's limit (γ > 1/2, where `M L α² = L^{1−2γ}` falls with L) and the
    deviation's measured slope against L is negative (it falls as L grows)."""
    return bool(gamma > 0.5 and slope is not None and slope < 0)


# networks computed at once by `theory.variance.sampled_deviation` (`map_batched`)
NETS_PER_BATCH = 256
C_DIRECTIONS = 8  # the directions of h at which `estimate_c` evaluates every draw


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`), checked by the launcher before `run`, of the
    estimate of c (every draw of the law in each of 8 directions, at once) and of the
    points (per point, `nets` networks of L·M units in batches of `NETS_PER_BATCH`, their
    states along depth kept; then the backward pass of `backward_nets`), with the law's
    draws of P numbers per unit (`block_and_law`)."""
    _, law = block_and_law(cfg)
    P = sum(int(np.prod(a.shape)) for a in jax.tree.leaves(jax.eval_shape(law.sample, jr.key(0))))
    d, M, nets, back = cfg["d"], cfg["M"], cfg["nets"], cfg["backward_nets"]
    samples, width = cfg["c_samples"], 8 if cfg["x64"] else 4
    L = max(cfg["L"])
    unit = 4 * P + 10 * d  # operations of one unit at one state
    batch = min(nets, NETS_PER_BATCH)
    per_net = L * M * (P + 4 * d) + 6 * (L + 1) * d
    points = len(cfg.get("sigma_vs") or cfg["gammas"]) * math.fsum(
        nets * Lk * M * unit + 3 * back * Lk * M * unit + PYTHON_STEP for Lk in cfg["L"]
    )
    return [
        Cost(
            "--c-samples/--d",
            "the estimate of c",
            memory=width * samples * (P + 3 * C_DIRECTIONS * d + 4),
            work=C_DIRECTIONS * samples * unit,
            elements=samples * max(P, C_DIRECTIONS * d),
            array="the draws of the law, (c-samples, parameters), or their φ, (8, c-samples, d)",
        ),
        Cost(
            "--L/--M/--d/--nets/--gammas",
            "the networks of the deepest point",
            memory=width * (batch * per_net + 3 * nets * (L + 1 + d)),
            work=points,
            elements=max(batch * L * M * P, nets * (L + 1)),
            array="a batch of networks' units, (batch, L, M, parameters), or the states of "
            "every network, (nets, L + 1)",
            memory_flags="--L/--M/--d/--nets",
        ),
    ]


MAX_SIGMA_V = 1e3  # the outputs scale as σ_v^2 · (1 + γ-terms)^L


def configure(args) -> dict:
    """The study's configuration from its options, refusing (one line naming the option,
    after `check_unit_arguments`) too few networks or draws, a σ_v beyond `MAX_SIGMA_V`,
    `--sigma-vs` with a σ_v of its own or a `--block`, and a user's block and law that
    do not load or run (`_check_block_and_law`)."""
    check_unit_arguments(args)
    if args.nets is not None and args.nets < 2:
        raise StudyInputError(f"--nets: need at least 2 networks for an error bar, got {args.nets}")
    if args.c_samples < 2:
        raise StudyInputError(
            f"--c-samples: need at least 2 for an error bar, got {args.c_samples}"
        )
    check_scale("--sigma-v", args.sigma_v, MAX_SIGMA_V, "the outputs' variance overflows")
    sweep = args.sigma_vs
    if sweep is not None:
        if args.block is not None or args.law is not None:
            raise StudyInputError("--sigma-vs: sweeps σ_v of the built-in 2LP, not with --block")
        if args.sigma_v != 1.0:
            raise StudyInputError("--sigma-v: not used with --sigma-vs (the σ_v values swept)")
        if not all(v > 0 for v in sweep):
            raise StudyInputError(f"--sigma-vs: values must be positive, got {sweep}")
        for v in sweep:
            check_scale("--sigma-vs", v, MAX_SIGMA_V, "the outputs' variance overflows")
    cfg = {
        **{name: getattr(args, name) for name in UNIT_OPTIONS},
        "sigma_u": 1 / math.sqrt(args.d),
        "sigma_v": args.sigma_v,
        "block": args.block,
        "law": args.law,
        "nets": args.nets or PRESETS[args.preset]["nets"],
        "backward_nets": min(args.nets or PRESETS[args.preset]["nets"], BACKWARD_NETS),
        "c_samples": args.c_samples,
        "c_at_norm": 1.0,  # ‖x‖: c is estimated at states of the input's norm
        # Chaintron's scaling α = 1/(LM), swept in σ_v (c estimated at σ_v = 1, then
        # c σ_v²: v ~ σ_v N(0, I)); None: α = L^-γ/√M at each γ
        **({"sigma_vs": list(sweep), "gammas": []} if sweep is not None else {}),
        "seed": args.seed,
        "x64": args.x64,
        "preset": args.preset,
    }
    _check_block_and_law(args, cfg)
    if args.block is not None:  # the user's code by its content (as `study mean-ode`)
        from ..shared.own_block import record_user_code

        record_user_code(cfg, *block_and_law(cfg), args.block, args.law)
    return cfg


def run(args, cfg):
    block, law = block_and_law(cfg)
    cache_folder()  # an unusable MEANFIELD_ARTIFACT_CACHE refused before the folder is made
    runner = start_study(args, cfg)
    # c kept in the artifact cache (by configuration and code), where the configuration
    # names all it depends on: a user's code known by its content
    from ..shared.own_block import known_by_content

    runner.share_artifacts = known_by_content(cfg)
    master = jr.key(cfg["seed"])
    # at the input's norm (‖x‖ = 1): for a non-homogeneous ρ, c depends on ‖h‖
    c_ref = runner.artifact("c", lambda: _estimate_c(block, law, cfg, key=jr.fold_in(master, 1)))
    c = float(c_ref["c"])  # NaN where no draw of the law gave a finite φ
    c_exploded = int(c_ref.get("exploded", 0))  # (absent from a folder made before)
    if c_exploded:
        runner.warn(_c_warning(c_exploded, cfg["c_samples"]))
    x = jnp.ones(cfg["d"]) / math.sqrt(cfg["d"])  # ‖x‖ = 1
    direction = jnp.zeros(cfg["d"]).at[0].set(1.0)  # b^L, a unit vector

    def point(spec):
        if "sigma_v" in spec:  # Chaintron's scaling, its own networks (tag 4)
            return _lm_point(cfg, block, master, c, x, spec)
        return _gamma_point(cfg, block, law, master, c, x, direction, spec)

    if cfg.get("sigma_vs"):
        specs = [{"L": L, "sigma_v": s} for s in cfg["sigma_vs"] for L in cfg["L"]]
    else:
        specs = [{"L": L, "gamma": g} for g in cfg["gammas"] for L in cfg["L"]]
    points = runner.run_points(specs, point, describe=_at)
    exploded = _exploded_warning(points, cfg["nets"])
    if exploded:
        runner.warn(exploded)
    fits = _forward_fits(cfg, points)
    backward = _backward_identity(cfg, points)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "backward_identity": {
                "claim": "Chizat's lecture notes on ResNets, §3.1: with M L alpha^2 -> 0 the first "
                "backward pass is "
                "close to the identity, sup_l |b^l - b^L| -> 0 (same form as the forward pass)",
                "per_gamma": backward,
            },
            "reference": _reference(cfg, c_ref, c, c_exploded),
        },
        plot=plot,
    )


def _gamma_point(cfg, block, law, master, c, x, direction, spec) -> dict:
    """The point at depth L and γ (α = L^-γ/√M): the forward pass against the variance law,
    then the first backward pass (its own networks, tag 3)."""
    L, g, M = spec["L"], spec["gamma"], cfg["M"]
    alpha = L ** (-g) / math.sqrt(M)
    devs, final = sampled_deviation(
        block,
        law,
        L=L,
        M=M,
        alpha=alpha,
        x=x,
        # L and γ folded in one after the other (L·1000 + 1000γ collided, e.g.
        # (4, 1.25) and (5, 0.25)); γ on a 1e-6 grid: γ values closer than that
        # share their networks (the points stay distinct)
        key=jr.fold_in(jr.fold_in(jr.fold_in(master, 2), L), round(1e6 * g)),
        nets=cfg["nets"],
        final_state=True,
    )
    back = np.asarray(
        sampled_backward_deviation(
            block, law, L=L, M=M, alpha=alpha, x=x, direction=direction,
            key=jr.fold_in(jr.fold_in(jr.fold_in(master, 3), L), round(1e6 * g)),
            nets=cfg["backward_nets"],
        )
    )  # fmt: skip
    return {
        **_forward_point(devs, final, float(variance_law(c, alpha, M, L, 1.0))),
        "alpha": alpha,
        "MLalpha2": M * L * alpha**2,
        "regime": "explosion" if g < 0.5 else "critical" if g == 0.5 else "identity",
        "backward": {
            "end": _mean_se(back[:, 0]),
            "sup": _mean_se(back.max(axis=1)),
            "meaning": "|b^l - b^L|^2/|b^L|^2 at l = 0 (end) and its sup over l, "
            "mean over networks, b^L a fixed unit vector",
        },
    }


def _lm_point(cfg, block, master, c, x, spec) -> dict:
    """The point at depth L and σ_v under Chaintron's scaling α = 1/(LM)."""
    L, s, M = spec["L"], spec["sigma_v"], cfg["M"]
    alpha = 1.0 / (L * M)
    law_s = TwoLayerGaussianLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_v=s)
    devs, final = sampled_deviation(
        block, law_s, L=L, M=M, alpha=alpha, x=x,
        key=jr.fold_in(jr.fold_in(jr.fold_in(master, 4), L), round(1e6 * s)),
        nets=cfg["nets"], final_state=True,
    )  # fmt: skip
    return {
        **_forward_point(devs, final, float(variance_law(c * s**2, alpha, M, L, 1.0))),
        "alpha": alpha,
        "MLalpha2": M * L * alpha**2,
        "sigma_v2_over_LM": s**2 / (L * M),
        "theory_leading": c * s**2 / (L * M),  # the Θ(σ_v²/(LM)) term: c σ_v²/(LM)
        "regime": "Θ(σ_v²/(LM))" if s**2 <= L * M else "explosion",
    }


def _forward_fits(cfg, points) -> list[dict]:
    """The log-log fits of Δ_L² against L: slope 1 − 2γ at each γ > 1/2, and −1 at each σ_v
    of Chaintron's scaling whose points all stay out of the explosion."""
    fits = []
    for g in cfg["gammas"]:
        rows = [p for p in points if p["gamma"] == g]
        if g > 0.5:  # Δ_L² ≈ c L^{1−2γ}
            fit = fit_loglog(
                [p["L"] for p in rows],
                [[p["mean"]] for p in rows],
                quantity="delta_L^2",
                against="L",
                fixed={"gamma": g},
                theory=1 - 2 * g,
            )
            fit["ci95"] = None
            fits.append(judge_theory(fit))
    for sv in cfg.get("sigma_vs") or []:  # Δ_L² ≈ c σ_v²/(LM): slope −1 against L
        rows = [p for p in points if p["sigma_v"] == sv and p["mean"] is not None]
        if len(rows) >= 2 and all(p["regime"] != "explosion" for p in rows):
            fit = fit_loglog(
                [p["L"] for p in rows],
                [[p["mean"]] for p in rows],
                quantity="delta_L^2",
                against="L",
                fixed={"sigma_v": sv, "alpha": "1/(LM)"},
                theory=-1.0,
            )
            fit["ci95"] = None
            fits.append(judge_theory(fit))
    return fits


def _backward_identity(cfg, points) -> list[dict]:
    """Per γ: the backward pass's largest deviation against M L α², its log-log slope
    against L (theory 1 − 2γ for γ > 1/2) and whether it approaches the identity."""
    backward = []
    for g in cfg["gammas"]:
        rows = [p for p in points if p["gamma"] == g]
        fit = fit_loglog(
            [p["L"] for p in rows],
            [[p["backward"]["sup"]["mean"]] for p in rows],
            quantity="backward_sup_deviation",
            against="L",
            fixed={"gamma": g},
            theory=1 - 2 * g if g > 0.5 else None,
        )
        fit["ci95"] = None
        judge_theory(fit)
        backward.append(
            {
                "gamma": g,
                "MLalpha2": [p["MLalpha2"] for p in rows],
                "sup_mean": [p["backward"]["sup"]["mean"] for p in rows],
                "sup_se": [p["backward"]["sup"]["se"] for p in rows],
                "slope": fit["slope"],
                "theory_slope": fit["theory"],
                "near_identity": near_identity(g, fit["slope"]),
            }
        )
    return backward


def _reference(cfg, c_ref, c: float, c_exploded: int) -> dict:
    """The estimate of c, its closed form where known, and whether the law is exact."""
    closed = {"relu": cfg["d"] / 2 * cfg["sigma_u"] ** 2 * cfg["sigma_v"] ** 2}
    if cfg["block"] is not None:
        closed = {}
    return {
        "c": c,
        "c_se": float(c_ref["se"]),
        "c_exploded": c_exploded,
        "c_per_direction": np.asarray(c_ref["per_direction"]).tolist(),
        "c_closed_form": closed.get(cfg["activation"]),
        # Prop. 2.1 needs E‖φ(h, Z)‖² = c‖h‖² at every h: true for a positively
        # homogeneous ρ; otherwise c is taken at ‖h‖ = ‖x‖ = 1 and the law is exact at
        # the first layer only
        "c_assumption_exact": cfg["block"] is None and cfg["activation"] in ("relu", "identity"),
        "error_estimate": float(c_ref["se"]),
        "critical_limit": math.exp(c) - 1,
        **(
            {"c_meaning": "c at sigma_v = 1; each point's law uses c sigma_v^2"}
            if cfg.get("sigma_vs")
            else {}
        ),
    }


def plot(out, results) -> None:
    """The figure from `results.json` alone (`meanfield plot DIR`)."""
    c = results["reference"]["c"]  # null where no draw of the law gave a finite φ
    c = math.nan if c is None else c
    if results["config"].get("sigma_vs"):
        lm_figure(out, results["config"], results["points"], c)
    else:
        variance_figure(out, results["config"], results["points"], c)


def _estimate_c(block, law, cfg, *, key) -> dict:
    """`theory.variance.estimate_c` at ‖h‖ = `c_at_norm`, as a dict (`c`, `se`,
    `per_direction`, and `exploded`: how many draws of the law gave a non-finite φ in
    some direction). Where some did, the same estimate over the other draws (the same
    draws and directions, the same crossed random-effects variance); NaN where none is
    finite."""
    d, samples, norm = cfg["d"], cfg["c_samples"], cfg["c_at_norm"]
    c, se, per = estimate_c(block, law, d, key=key, samples=samples, norm=norm)
    if bool(jnp.isfinite(c)):
        return {"c": float(c), "se": float(se), "per_direction": np.asarray(per), "exploded": 0}
    # the draws and directions of `estimate_c` (its defaults: 8 directions)
    directions = 8
    kh, kz = jr.split(key)
    hs = jr.normal(kh, (directions, d))
    hs = norm * hs / jnp.linalg.norm(hs, axis=1, keepdims=True)
    zs = jax.vmap(law.sample)(jr.split(kz, samples))
    r = jax.vmap(lambda h: jnp.sum(jax.vmap(lambda z: block(h, z))(zs) ** 2, axis=-1) / (h @ h))(
        hs
    )  # (directions, samples)
    r = np.asarray(r, dtype=float)
    keep = np.all(np.isfinite(r), axis=0)
    exploded = int((~keep).sum())
    r = r[:, keep]
    S = r.shape[1]
    if S < 2:  # nothing (or one draw) to average: c is unknown
        nan = np.full(directions, np.nan)
        return {"c": math.nan, "se": math.nan, "per_direction": nan, "exploded": exploded}
    c = float(np.mean(r))
    per_draw, per_direction = r.mean(axis=0), r.mean(axis=1)
    var = float(np.var(per_draw, ddof=1)) / S
    resid = r - per_draw[None, :] - per_direction[:, None] + c
    s2e = float(np.sum(resid**2)) / ((directions - 1) * (S - 1))
    both = var + float(np.var(per_direction, ddof=1)) / directions - s2e / (directions * S)
    var = max(var, both)
    return {"c": c, "se": math.sqrt(var), "per_direction": per_direction, "exploded": exploded}


def _c_warning(exploded: int, samples: int) -> str:
    if exploded >= samples - 1:
        return (
            f"c: φ was not finite for {exploded} of the {samples} draws of the law: c is "
            "unknown, and so is the variance law (no theory drawn)"
        )
    return (
        f"c: φ was not finite for {exploded} of the {samples} draws of the law (exploded); "
        "c is the mean over the others"
    )


def _forward_point(devs, final, theory: float) -> dict:
    """A point's forward-pass record from the deviations `devs` `(nets, L + 1)` (a NaN, an
    overflowed network, counted as inf) and final states: the mean and standard error at
    l = L over the finite networks (those that overflowed are counted, not averaged: the
    explosion regime at large depth; the law itself is then inf, stored as null), the law
    `theory`, the z-score, `E[h^L] = x` and the maximal bound."""
    devs, final = np.asarray(devs), np.asarray(final)
    devs = np.where(np.isnan(devs), np.inf, devs)  # an overflowed network: exploded
    dev, exploded = split_exploded(devs[:, -1], threshold=math.inf)
    mean = float(dev.mean()) if dev.size else None
    se = float(dev.std(ddof=1) / math.sqrt(dev.size)) if dev.size > 1 else None
    finite = mean is not None and se is not None and se > 0 and math.isfinite(theory)
    # E[h^L] − x is about 0 (Proposition 2.1), a mean of differences h^L − x: its round-off
    # is that of the states' coordinates, up to |x_i| + |h^L_i − x_i| with ‖x‖ = 1
    # (`self_check.of_terms`)
    states = 1.0 + np.abs(final)
    return {
        "draws": int(devs.shape[0]),
        "mean_state": of_terms(_mean_state(final), states),
        "maximal_bound": _maximal_bound(devs.max(axis=1), theory),
        "mean": mean,
        "se": se,
        "exploded": exploded,
        "theory": theory,
        "z": (mean - theory) / se if finite and mean is not None and se else None,
    }


def _at(p) -> str:
    """A point's name: `L=4 γ=0.5`, or `L=4 σ_v=2` under Chaintron's scaling."""
    if "sigma_v" in p:
        return f"L={p['L']} σ_v={p['sigma_v']:g}"
    return f"L={p['L']} γ={p['gamma']:g}"


def _exploded_warning(points, nets: int) -> str | None:
    """The warning line naming how many networks exploded (a non-finite or overflowed
    state), at which points, and the points left with no finite network."""
    hit = [p for p in points if p.get("exploded")]
    if not hit:
        return None
    total = sum(p["exploded"] for p in hit)
    where = ", ".join(f"{_at(p)} ({p['exploded']})" for p in hit)
    line = (
        f"{total} network(s) exploded (a non-finite or overflowed state) at {len(hit)} "
        f"of {len(points)} point(s), of {nets} each: {where}; the means are over the others"
    )
    gone = [p for p in hit if p["mean"] is None]
    if gone:
        names = ", ".join(_at(p) for p in gone)
        line += f"; no finite network at {names} (exploded: left out of the fits and figure)"
    return line


def _mean_se(v) -> dict:
    """Mean and standard error over the finite values; the others counted as exploded."""
    v, exploded = split_exploded(v, threshold=math.inf)
    return {
        "mean": float(v.mean()) if v.size else None,
        "se": float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None,
        "exploded": exploded,
    }


def _check_block_and_law(args, cfg) -> None:
    """A user's `--block` / `--law`: given together, without the built-in 2LP's options,
    loaded and tried on the input (one-line errors naming the option, as in `study
    mean-ode`)."""
    if args.block is None and args.law is None:
        return
    if args.block is None or args.law is None:
        flag = "--law" if args.law is None else "--block"
        raise StudyInputError(f"{flag}: --block and --law go together")
    if args.activation != "relu" or args.sigma_v != 1.0:
        raise StudyInputError("--activation/--sigma-v: set the built-in 2LP, not used with --block")
    from ..shared.own_block import check_block_law

    _user_block_and_law.cache_clear()  # a file edited since an earlier study is read afresh
    block, law = block_and_law(cfg)
    with study_precision(cfg["x64"]):  # tried in the precision the study runs in
        check_block_law(block, law, jnp.ones((1, cfg["d"])) / math.sqrt(cfg["d"]))


def block_and_law(cfg):
    """The built-in 2LP and its law, or the user's `--block` / `--law` (`cfg["block"]`,
    `cfg["law"]`), loaded once per study: the configuration's check, the cost and the run
    share them."""
    if cfg["block"] is None and cfg["law"] is None:
        block = TwoLayerBlock(cfg["activation"])
        return block, TwoLayerGaussianLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_v=cfg["sigma_v"])
    return _user_block_and_law(cfg["block"], cfg["law"], bool(cfg["x64"]))


@functools.lru_cache(maxsize=1)
def _user_block_and_law(block_spec: str, law_spec: str, x64: bool):
    from ..shared.own_block import user_block, user_law

    with study_precision(x64):  # made in the precision the study runs in
        return user_block(block_spec), user_law(law_spec)


MAXIMAL_BETAS = (0.5, 1.0, 2.0)


def _mean_state(final) -> dict:
    """Proposition 2.1's `E[h^L] = x` (Chizat's lecture notes on ResNets): the mean of `h^L − x`
    over the networks, per
    coordinate, with its standard error; `holds` when every |z| < 3.5 (a false alarm has
    probability < 0.002 for d ≤ 4 under the proposition)."""
    finite = np.all(np.isfinite(final), axis=1)
    exploded = int((~finite).sum())
    final = final[finite]
    if final.shape[0] < 2:  # overflowed networks are not averaged: nothing to judge
        return {"mean": None, "se": None, "max_abs_z": None, "holds": None,
                "exploded": exploded}  # fmt: skip
    m = final.mean(axis=0)
    se = final.std(axis=0, ddof=1) / math.sqrt(final.shape[0])
    z = np.where(se > 0, m / np.where(se > 0, se, 1.0), 0.0)
    return {
        "mean": m.tolist(),
        "se": se.tolist(),
        "max_abs_z": float(np.max(np.abs(z))),
        "holds": bool(np.all(np.isfinite(z)) and np.max(np.abs(z)) < 3.5),
        "exploded": exploded,
    }


def _maximal_bound(sup_sq, variance) -> list[dict]:
    """Remark 2.2 of Chizat's lecture notes on ResNets:
    `P(sup_l ‖h^l − x‖ ≥ β‖x‖) ≤ ((1 + cα²M)^L − 1)/β²` (Doob's
    inequality on the martingale h^l − x, ‖x‖ = 1 here): the fraction of networks whose
    largest deviation along depth reaches β, with its binomial standard error, against the
    bound (`holds`: the fraction is below the bound plus two standard errors)."""
    n = sup_sq.shape[0]
    rows = []
    for beta in MAXIMAL_BETAS:
        frac = float(np.mean(sup_sq >= beta**2))
        se = math.sqrt(max(frac * (1 - frac), 1.0 / n) / n)
        if math.isnan(variance):  # no law (c unknown): no bound (an overflowed one holds)
            rows.append({"beta": beta, "fraction": frac, "se": se, "bound": None, "holds": None})
            continue
        bound = variance / beta**2
        rows.append(
            {"beta": beta, "fraction": frac, "se": se, "bound": bound,
             "holds": frac <= min(bound, 1.0) + 2 * se}
        )  # fmt: skip
    return rows
