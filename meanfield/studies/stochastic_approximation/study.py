"""`meanfield study stochastic-approximation`: the ε terms of Chaintron's
stochastic-approximation proposition for mean ODEs (`meanfield.theory.stochastic_approximation`).

The proposition bounds the inexact Euler–Monte Carlo scheme's error by
`‖â^0 − a(0)‖ + ‖f − f̂‖_∞ + ε + 1/L + sqrt(log(1/δ)/M)`, with constants that do not
depend on L or M. The mean-ODE studies measure its last two terms (the Euler and Monte
Carlo errors). This study measures the first three, on a mean ODE whose expectation is
exact (`SteinExample`: `f(a, (u, v)) = v tanh(⟨u, a⟩)`, v = B u + τ ξ), solved by Diffrax in
float64 with its own error estimated.

For each (L, M) and independent draw of the LM samples, the scheme runs unperturbed and
with one ε term of size e along a fixed unit vector:

* `initial`: `â^0 = a(0) + e w`;
* `function`: `f̂ = f + e w`, so `‖f − f̂‖_∞ = e`;
* `samples`: each `v^{j,ℓ}` moved by e along `u^{j,ℓ}/‖u^{j,ℓ}‖`, so `‖Ẑ − Z‖ = e`. The move
  is correlated with the sample, so it does not average out over the LM samples.

The response to a term is `‖â_e^L − â^L‖ / e`: the change at the last layer (s = 1) per
unit size, on the same samples. The proposition says it is bounded independently of L
and M; it does not accumulate over the LM samples or the L layers. Measured:

* its slope against L at the largest M, and against M at the largest L, with a bootstrap
  interval over the draws. A slope is judged *flat* when its interval lies inside
  `±FLAT`: a factor `16^0.05 = 1.15` over a 16-fold range, declared here before any
  run. Contradicting data, a response that grows like L^{1/2} or L, fail it;
* for `initial` and `function`, the limit of the response: the same mean ODE started at
  `a(0) + e w`, or with `e w` added to its field, solved the same way. The ratio of the
  measured response at the largest (L, M) to this limit is reported with its interval;
* the unperturbed error `sup_ℓ ‖â^ℓ − a(s_ℓ)‖` (the Euler and Monte Carlo terms) beside them.
"""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ..._eager import traced_op_by_op
from ...harness.args import (
    PYTHON_STEP,
    Cost,
    preset_config,
)
from ...harness.runner import start_study
from ...harness.self_check import of_terms
from ...runtime.errors import StudyInputError
from ...runtime.sharding import disable_jit_active
from ...stats.compare import mean_interval
from ...stats.fits import fit_loglog, fit_values, summarize
from ...theory import stochastic_approximation as stochastic_approximation_theory
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
from .schema import SCHEMA as SCHEMA  # what its figures read (the protocol)

DEFAULTS = {"d": 4}
OPTIONS = ("L", "M", "sizes", "seeds", "d")
FLAT = 0.05  # a slope is flat when its 95% interval lies in [-FLAT, FLAT]


def configure(args) -> dict:
    """The configuration from the options, refused in one line naming the option where a
    size is out of range."""
    cfg = preset_config(args, DEFAULTS, PRESETS, OPTIONS)
    for name in ("L", "M"):
        if len(cfg[name]) < 2 or len(set(cfg[name])) != len(cfg[name]):
            raise StudyInputError(f"--{name}: need at least 2 distinct values, got {cfg[name]}")
    if not all(0 < e <= 1 for e in cfg["sizes"]) or len(set(cfg["sizes"])) != len(cfg["sizes"]):
        raise StudyInputError(f"--sizes: need distinct values in (0, 1], got {cfg['sizes']}")
    if cfg["seeds"] < 4:
        raise StudyInputError(
            f"--seeds: need at least 4 draws for the intervals, got {cfg['seeds']}"
        )
    if cfg["d"] > 64:
        raise StudyInputError(f"--d: at most 64 (a d × d field per sample), got {cfg['d']}")
    return cfg


def cost_parts(args, cfg) -> list:
    """The estimated cost (`args.Cost`; the launcher checks it before `run`): every
    draw's samples and states, unperturbed and under each term and size."""
    width, d, S = 8 if cfg["x64"] else 4, cfg["d"], cfg["seeds"]
    L, M = max(cfg["L"]), max(cfg["M"])
    runs = 1 + 3 * len(cfg["sizes"])
    return [
        Cost("--L/--M/--d/--seeds/--sizes", "the points",
             memory=width * S * (2 * L * M * d + runs * (L + 1) * d) * 2,
             work=math.fsum(S * runs * Lk * Mk * d * 12 + PYTHON_STEP
                            for Lk in cfg["L"] for Mk in cfg["M"]),
             elements=S * L * M * d,
             array="a point's samples, (seeds, L, M, d)", memory_flags="--L/--M/--d/--seeds"),
    ]  # fmt: skip


def run(args, cfg):
    runner = start_study(args, cfg)
    master = jr.key(cfg["seed"])
    example = stochastic_approximation_theory.SteinExample.make(cfg["d"], key=jr.fold_in(master, 0))
    direction = jnp.ones(cfg["d"]) / math.sqrt(cfg["d"])
    limit_errors = []

    def point(spec):
        L, M = spec["L"], spec["M"]
        ref, ref_error = _limit(example, L)
        limit_errors.append(ref_error)
        keys = jr.split(jr.fold_in(jr.fold_in(master, L), M), cfg["seeds"])
        base, responses = _draws(keys, example, ref, direction, tuple(cfg["sizes"]), L, M)
        # errors and responses are differences of states of the size of a(s): their
        # round-off is that of the states (`self_check.of_terms`), the response's over e
        out = {
            "base_error": of_terms(summarize(np.asarray(base)), ref),
            "reference_error": of_terms(ref_error, ref),
        }
        for i, kind in enumerate(stochastic_approximation_theory.KINDS):
            for j, e in enumerate(cfg["sizes"]):
                response = summarize(np.asarray(responses[:, i, j]))
                out[f"{kind}_{e:g}"] = of_terms(response, np.max(np.abs(ref)) / e)
        return out

    specs = [{"L": L, "M": M} for L in cfg["L"] for M in cfg["M"]]
    points = runner.run_points(
        specs, point, describe=lambda s: f"L={s['L']} M={s['M']}",
        route="op by op (its limit's solves and its draws: their traced programs, equation "
        "by equation)",
    )  # fmt: skip
    limits = {
        kind: {
            f"{e:g}": _limit_response(example, kind, e, direction) for e in cfg["sizes"]
        } for kind in ("initial", "function")
    }  # fmt: skip
    fits = response_fits(cfg, points)
    checks = flat_checks(fits)
    lines = line_verdicts(checks)
    ratios = limit_ratios(cfg, points, limits)
    monte_carlo = monte_carlo_verdicts(fits)
    runner.finish(
        {
            "points": points,
            "fits": fits,
            "flat": checks,
            # one verdict per term and line: the sizes e share their draws
            "flat_lines": [{k: v for k, v in line.items() if k != "sizes"} for line in lines],
            "limit_responses": limits,
            "limit_ratios": ratios,
            "monte_carlo_term": monte_carlo,
            "headline": headline(checks, ratios, lines) + monte_carlo_lines(monte_carlo),
            "reference": {
                "limit": "the mean ODE da/ds = g(|a|^2) B a (Stein's lemma; g by a trapezoid "
                "rule), Diffrax dopri8 at rtol = atol = 1e-12",
                "error_estimate": max(p["reference_error"] for p in points),
            },
        },
        plot=plot,
    )


def plot(out, results) -> None:
    """The figure from `results.json` alone (`meanfield plot DIR`)."""
    from .plot import figure

    figure(out, results["config"], results["points"], results.get("fits") or [],
           results.get("limit_responses") or {})  # fmt: skip


def _limit(example, L: int):
    """`example.limit(L)`; in the self-check, its two solves' traced programs evaluated
    equation by equation (not diffrax's Python again, op by op: most of the check)."""
    if not disable_jit_active():
        return example.limit(L)
    fine = traced_op_by_op(lambda: example.perturbed_limit(L))
    rough = traced_op_by_op(lambda: example.perturbed_limit(L, rtol=1e-9, order=2001))
    return fine, float(jnp.max(jnp.abs(fine - rough)))


def _draws(keys, example, ref, direction, sizes, L, M):
    """Per draw: the unperturbed error sup_ℓ ‖â^ℓ − a(s_ℓ)‖ and the responses
    ‖â_e^L − â^L‖ / e, shape (draws, kinds, sizes)."""

    @jax.jit
    def one(key):
        zs = example.sample(key, L, M)
        base = stochastic_approximation_theory.euler_monte_carlo(
            stochastic_approximation_theory.stein_f, example.a0, zs
        )
        rows = []
        for kind in stochastic_approximation_theory.KINDS:
            row = []
            for e in sizes:
                path = stochastic_approximation_theory.perturbed_scheme(
                    stochastic_approximation_theory.stein_f, example.a0, zs, kind, e, direction
                )
                row.append(jnp.linalg.norm(path[-1] - base[-1]) / e)
            rows.append(jnp.stack(row))
        return jnp.max(jnp.linalg.norm(base - ref, axis=-1)), jnp.stack(rows)

    if disable_jit_active():  # the self-check: the compiled program's own operations
        base, responses = traced_op_by_op(jax.jit(lambda k: jax.lax.map(one, k)), keys)
    else:
        base, responses = jax.lax.map(one, keys)
    return base, np.asarray(responses)


def _limit_response(example, kind, e, direction) -> float:
    """The limit of a response: ‖a_e(1) − a(1)‖ / e for the perturbed mean ODE."""
    a = example.perturbed_limit(1)
    a_e = example.perturbed_limit(1, kind, e, direction)
    return float(jnp.linalg.norm(a_e[-1] - a[-1]) / e)


def response_names(cfg) -> list[str]:
    """The point's response quantities, `KIND_SIZE` (e.g. `initial_0.01`)."""
    return [f"{k}_{e:g}" for k in stochastic_approximation_theory.KINDS for e in cfg["sizes"]]


def response_fits(cfg, points) -> list[dict]:
    """Per kind and size: the response's slope against L at the largest M and against M
    at the largest L, with its interval over the draws; the unperturbed error's too. No
    theory slope: the prediction is a bound, judged by `flat_checks` (a response converges
    to its limit at a rate in 1/L, so its slope at finite L is small but not 0)."""
    fits = []
    L_max, M_max = max(cfg["L"]), max(cfg["M"])
    quantities = [*response_names(cfg), "base_error"]
    for q in quantities:
        for against, fixed in (("L", {"M": M_max}), ("M", {"L": L_max})):
            ((name, value),) = fixed.items()
            rows = sorted((p for p in points if p[name] == value), key=lambda p: p[against])
            fit = fit_loglog(
                [r[against] for r in rows], [fit_values(r[q]) for r in rows], quantity=q,
                against=against, fixed=fixed, theory=None, seed=cfg["seed"],
            )  # fmt: skip
            fit["sizes"] = [r[against] for r in rows]
            fits.append(fit)
    return fits


def flat_checks(fits) -> list[dict]:
    """Per response fit: flat (its interval inside ±FLAT), growing or falling (its interval
    beyond it), or undecided."""
    out = []
    for f in fits:
        if f["quantity"] == "base_error":
            continue
        ci = f.get("ci95")
        if ci is None:
            verdict = None
        elif -FLAT <= ci[0] and ci[1] <= FLAT:
            verdict = "flat"
        elif ci[0] > FLAT:
            verdict = "grows"
        elif ci[1] < -FLAT:
            verdict = "falls"
        else:
            verdict = "undecided"
        out.append({"quantity": f["quantity"], "against": f["against"], "slope": f["slope"],
                    "ci95": ci, "verdict": verdict})  # fmt: skip
    return out


def limit_ratios(cfg, points, limits) -> list[dict]:
    """At the largest (L, M): the measured response over its limit, with Student's
    interval over the draws, for the terms whose limit is a mean ODE."""
    top = next(p for p in points if p["L"] == max(cfg["L"]) and p["M"] == max(cfg["M"]))
    out = []
    for kind, per_size in limits.items():
        for e, lim in per_size.items():
            values = [v for v in top[f"{kind}_{e}"]["values"] if v is not None]
            est = mean_interval(np.asarray(values) / lim)
            out.append({"kind": kind, "size": float(e), "limit": lim, "ratio": est["mean"],
                        "ci95": est["ci95"]})  # fmt: skip
    return out


def line_verdicts(checks) -> list[dict]:
    """Per ε term and line of the grid (against L, against M): one verdict. The sizes e
    of a term perturb the same draws (their responses correlate 0.99 and more), so they
    are one measurement: the line is flat where every size's slope is, grows or falls
    where every size's does, else undecided; `sizes` keeps each size's check."""
    out = []
    for kind in stochastic_approximation_theory.KINDS:
        for against in ("L", "M"):
            mine = [c for c in checks if c["quantity"].startswith(kind + "_")
                    and c["against"] == against]  # fmt: skip
            if not mine:
                continue
            verdicts = {c["verdict"] for c in mine}
            verdict = verdicts.pop() if len(verdicts) == 1 else "undecided"
            out.append({"kind": kind, "against": against, "verdict": verdict, "sizes": mine})
    return out


# the lemma's Monte-Carlo term in the two forms the seed gives, as slopes of the
# unperturbed error's mean against L and M (a log factor aside): the slide's
# sqrt(log(1/δ)/M) does not fall with L; the proof's sqrt(log(L/δ)/(LM)) falls as L^-1/2
MONTE_CARLO_FORMS = {
    "slide": ("sqrt(log(1/δ)/M)", {"L": 0.0, "M": -0.5}),
    "proof": ("sqrt(log(L/δ)/(LM))", {"L": -0.5, "M": -0.5}),
}


def monte_carlo_verdicts(fits) -> list[dict]:
    """Per line of the grid, the unperturbed error's slope and interval against each form
    of the Monte-Carlo term: whether the interval holds the form's slope (its log factor
    moves the proof's slope in L by about +0.06 over L = 16..256 at δ = 0.05)."""
    out = []
    for f in fits:
        if f["quantity"] != "base_error" or f.get("ci95") is None:
            continue
        lo, hi = f["ci95"]
        out.append({
            "against": f["against"], "fixed": f["fixed"], "slope": f["slope"], "ci95": f["ci95"],
            "forms": {name: {"form": form, "slope": slopes[f["against"]],
                             "inside_ci95": bool(lo <= slopes[f["against"]] <= hi)}
                      for name, (form, slopes) in MONTE_CARLO_FORMS.items()},
        })  # fmt: skip
    return out


def monte_carlo_lines(verdicts) -> list[str]:
    """The headline's lines for `monte_carlo_verdicts`."""
    lines = []
    for v in verdicts:
        forms = "; ".join(
            f"the {name}'s {f['form']} ({f['slope']:g}) "
            + ("inside" if f["inside_ci95"] else "OUTSIDE")
            for name, f in v["forms"].items()
        )
        where = ", ".join(f"{k}={x}" for k, x in v["fixed"].items())
        lines.append(
            f"Monte-Carlo term, the unperturbed error against {v['against']} ({where}): slope "
            f"{v['slope']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]: {forms}"
        )
    return lines


def headline(checks, ratios, verdicts=None) -> list[str]:
    """The lines the study prints: per ε term its lines' flat verdicts (`line_verdicts`,
    computed from `checks` unless given), then each limit ratio."""
    verdicts = line_verdicts(checks) if verdicts is None else verdicts
    lines = []
    for kind in stochastic_approximation_theory.KINDS:
        mine = [v for v in verdicts if v["kind"] == kind]
        flat = sum(v["verdict"] == "flat" for v in mine)
        off = [f"{c['quantity']} vs {c['against']}: {c['slope']:.3f} [{c['ci95'][0]:.3f}, "
               f"{c['ci95'][1]:.3f}] {c['verdict']}" for v in mine for c in v["sizes"]
               if c["verdict"] != "flat" and c["ci95"] is not None]  # fmt: skip
        sizes = len(mine[0]["sizes"]) if mine else 0
        lines.append(
            f"ε term '{kind}': the response per unit size is flat in L and M (slope within "
            f"±{FLAT:g}) on {flat} of {len(mine)} lines of the grid (each line one "
            f"measurement: its {sizes} sizes e perturb the same draws)"
            + (f" (not: {'; '.join(off)})" if off else "")
        )
    for r in ratios:
        lines.append(
            f"ε term '{r['kind']}' at e = {r['size']:g}: response / its mean-ODE limit "
            f"{r['limit']:.4f} = {r['ratio']:.4f} [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}]"
        )
    return lines
