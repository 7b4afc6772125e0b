"""What each study's figures read from `results.json`, checked before `meanfield plot DIR`
draws them: an edited or damaged file is refused in one line naming the JSON path and the
problem (`StudyInputError`), never a traceback from deep inside matplotlib, and never a
figure drawn silently from a value of the wrong kind (`"L": "four"`, `"x64": "no"`).

The per-study tables (`SCHEMAS`, in the schema language of
`meanfield.studies.schema_language`) list what each study's `plot(out, results)` and the
helpers it calls read: a key the plot does not read is not checked (the files carry much
more).

Why this file is long: one short table per study, kept side by side so that a change to
what the figures read is checked against every study's table in one place (coord-check's
and transfer's, with their relations to the configuration, in
`meanfield.studies.schema_checks`).

```python
validate(results)  # raises StudyInputError("DIR: results.json: points[3].L: ...")
```
"""

from __future__ import annotations

from ..runtime.errors import StudyInputError

# coord-check's and transfer's, with the relations to the configuration their figures use
from .schema_checks import COORD_CHECK, TRANSFER
from .schema_language import (
    FIT,
    NAT,
    NUM,
    OPT_NUM,
    PAIR,
    POS,
    PREFIX,
    STAT,
    Any,
    Array,
    Bool,
    List,
    Map,
    Maybe,
    Member,
    Num,
    Record,
    Ref,
    SchemaRefusal,
    Spec,
    Str,
    Tagged,
    Tuple,
    When,
    Where,
    below_path,
    entries_text,
    first_found,
    fit_record,
    need,
    shown_value,
    shown_values,
    study,
    sub_path,
)

__all__ = ["SCHEMAS", "StudyInputError", "validate"]


# ------------------------------------------------------------------ the walker's helpers


# ------------------------------------------------------------------ the schema's kinds


# ------------------------------------------------------------------ shared pieces


# ------------------------------------------------------------------ mean-ode

_MEAN_ODE_GRID = {"L": List(POS, min_len=1), "M": List(POS, min_len=1), "L_for_M": POS,
                  "fit_M_max": NUM}  # fmt: skip


def _mean_ode_config(cfg, root):
    if "block" in cfg or "law" in cfg:
        return None
    # the built-in 2LP: its activation and init are named in the title
    return first_found(
        *(need(cfg, k, Any(), "no block or law named") for k in ("activation", "init"))
    )


def _mean_ode_fits(fits, root):
    """A fit against L of an error names the width M of its line and its theory slope."""
    for i, f in enumerate(fits):
        if f.get("against") == "L" and f.get("quantity") in ("delta_h", "delta_b", "delta_z"):
            found = first_found(
                below_path(".fixed", need(f.get("fixed") or {}, "M", POS, "the line's width")),
                need(f, "theory", OPT_NUM, "the line's theory slope"),
            )
            if found:
                return f"[{i}]" + found[0], found[1]
    return None


_MEAN_ODE = study(
    {**_MEAN_ODE_GRID, "steps": NAT, "d": Any(), "inputs": Any(), "seeds": Any()},
    {
        "points": List(Record({"L": POS, "M": POS, "steps": NAT, "delta_h": STAT,
                               "delta_b": STAT, "delta_z": STAT})),
        "grid?": Maybe(Record(_MEAN_ODE_GRID)),
        "decomposition": List(Record({"L": POS, "steps": NAT, "delta_h_euler": OPT_NUM,
                                      "delta_b_euler": OPT_NUM, "delta_z_euler": OPT_NUM})),
        "fits": Where(List(fit_record(found=True)), _mean_ode_fits),
        "figure_floors?": Maybe(Map(OPT_NUM)),
        # the headline law fits (`law_fits`); a results file from before them has none
        "rates?": List(Record({"quantity": Str(), "part": Str(),
                               "fixed": Record({"steps": NAT}), "p?": OPT_NUM, "q?": OPT_NUM,
                               "p_ci95?": Maybe(PAIR), "q_ci95?": Maybe(PAIR), "a?": OPT_NUM,
                               "b?": OPT_NUM, "c_over_a?": OPT_NUM})),
    },
    _mean_ode_config,
)  # fmt: skip

# a study that judged nothing (a heavy-tailed law) has no points and draws no figure
_MEAN_ODE_NOTHING = study({}, {"points": List(Any())})
MEAN_ODE = When(lambda r: _MEAN_ODE_NOTHING if r.get("points") == [] else _MEAN_ODE)

# ------------------------------------------------------------------ sde


def _sde_config(cfg, root):
    # the title of fBm weights names H, of smooth weights ℓ
    key = {"fbm": "hurst", "smooth": "length_scale"}.get(cfg["weights"])
    return None if key is None else need(cfg, key, Any(), f"the title of {cfg['weights']} weights")


SDE = study(
    {"weights": Str(("brownian", "fbm", "smooth")), "d": Any(), "activation": Any(),
     "seeds": Any()},
    {
        "points": List(Record({"L": POS, "error_final": STAT, "error_sup": STAT})),
        "fits": Where(List(FIT, min_len=1), lambda fits, root: below_path(
            "[0]", need(fits[0], "theory", NUM, "the title's theory slope"))),
        "reference": Record({"error_estimate?": OPT_NUM}),
    },
    _sde_config,
)  # fmt: skip

# ------------------------------------------------------------------ phases

_BETAS = Ref("config.beta", length=True)
_RATIO = Record({"values": List(OPT_NUM)})
_ESTIMATE_FIELDS = {
    "estimate?": OPT_NUM,
    "ci95?": Maybe(PAIR),
    "theory?": OPT_NUM,
    "slopes?": Maybe(List(OPT_NUM, length=_BETAS)),
    "phases?": Maybe(List(Str(), length=_BETAS)),
}


def _ratio_values(point, root):
    """A point's draws fill at most `config.seeds` places."""
    seeds = root["config"]["seeds"]
    for q in ("forward", "gradient", "forward_max"):
        if q in point and len(point[q]["values"]) > seeds:
            return f".{q}.values", (
                f"expected at most {entries_text(seeds)} (config.seeds), "
                f"got {entries_text(len(point[q]['values']))}"
            )
    return None


def _phases_config(cfg, root):
    if root.get("stability_bounds") is not None and 0.5 not in cfg["beta"]:
        return ".beta", "expected 0.5 among the β (stability_bounds are drawn at β = 1/2)"
    return None


_HURSTS = Ref("heatmap.hurst", length=True)
_STABILITY = Record(
    {
        "per_L": List(Record({
            "L": POS,
            "forward_sq": List(Record({"delta": NUM, "lower": NUM, "upper": NUM,
                                       "fraction_inside": OPT_NUM})),
            "gradient_sq_mean": OPT_NUM,
            "gradient_sq_se?": OPT_NUM,
        }), min_len=1),
        "gradient_bounds": List(NUM),
    }
)  # fmt: skip

PHASES = study(
    {"beta": List(NUM, min_len=1), "L": List(POS, min_len=1), "seeds": POS,
     "weights": Str(("iid", "rademacher", "smooth", "fbm")), "d": Any(), "seed": NAT,
     "hurst?": OPT_NUM, "length_scale": Num(positive=True), "slope_tol?": OPT_NUM,
     "loss?": Str(("squared", "readout"))},
    {
        "points": List(Where(Record({"L": Member(POS, "config.L"),
                                     "beta": Member(NUM, "config.beta"),
                                     "forward?": _RATIO, "gradient?": _RATIO,
                                     "forward_max?": _RATIO}), _ratio_values)),
        "critical_beta": Record({**_ESTIMATE_FIELDS,
                                 "from_gradient?": Maybe(Record(_ESTIMATE_FIELDS)),
                                 "from_max_over_depth?": Maybe(Record(_ESTIMATE_FIELDS))}),
        "heatmap?": Maybe(Record({
            "hurst": List(NUM, min_len=1),
            "slope_forward": List(List(OPT_NUM, length=_BETAS), length=_HURSTS),
            "critical_beta": List(Record({"estimate": OPT_NUM, "ci95": Maybe(PAIR)}),
                                  length=_HURSTS),
            "critical_beta_gradient?": Maybe(List(Record({"estimate?": OPT_NUM,
                                                          "ci95?": Maybe(PAIR)}))),
        })),
        "stability_bounds?": Maybe(_STABILITY),
    },
    _phases_config,
)  # fmt: skip

# ------------------------------------------------------------------ response

_SIM = {"sim_mean": Array(), "sim_se": Array(), "theory": Array()}
_LAYERS = Record({**_SIM, "z": Array()})
_OUTPUT = Record({"sim_mean": OPT_NUM, "sim_se": OPT_NUM, "theory": OPT_NUM})
_CORRELATION = Record(
    {**_SIM, "limit": NUM, "long_theory_layers": Array(), "long_theory_distance": Array(),
     "tail_fit": Record({"better_fit": Str(), "power_exponent?": OPT_NUM,
                         "exponential_length?": OPT_NUM}),
     "predicted_power_exponent?": NUM}
)  # fmt: skip


def _response_curves(curves, root):
    """The theory curves the figures draw: one per depth, Figures 2 and 5's."""
    from ..theory.response import FIG5_SIGMA_B2, FIG5_SIGMA_W2

    keys = [f"chi_out_L{L}" for L in root["config"]["depths"]]
    keys += [f"fig2_{n}_{q}" for n in ("resnet", "ffnet") for q in ("C", "eta")]
    keys += [f"fig5_w{s}" for s in FIG5_SIGMA_W2]
    keys += [f"fig5_b{s}{star}" for s in FIG5_SIGMA_B2 for star in ("", "_star")]
    keys += ["alpha_grid", "formula_L", "formula_curve", "K0_grid", "alpha_star_K0",
             "formula_K0", "fig4c_alpha", "fig4c_surface"]  # fmt: skip
    missing = next((k for k in keys if k not in curves), None)
    return None if missing is None else (sub_path(missing), "missing (a theory curve drawn)")


def _response_stars(stars, root):
    """A simulated α* is drawn with the simulation of its depth."""
    simulated = {s["L"] for s in root.get("alpha_star_simulations", [])}
    for i, s in enumerate(stars):
        if s.get("simulated") is not None and s["L"] not in simulated:
            return f"[{i}].simulated", (
                f"no entry of alpha_star_simulations has L = {s['L']} (its simulation)"
            )
    return None


RESPONSE = study(
    {"depths": List(POS, min_len=1), "width": Any(), "K0": NUM, "sigma_w2": NUM,
     "sigma_b2": NUM},
    {
        "theory_curves": Where(Map(Array()), _response_curves),
        "figure2_simulation": Record({
            "resnet?": Record({"C": Record({"sim_mean": Array(), "sim_se": Array()}),
                               "eta": Record({"sim_mean": Array(), "sim_se?": Array()})}),
            "ffnet?": Record({"C": Record({"sim_mean": Array(), "sim_se": Array()}),
                              "eta": Record({"sim_mean": Array(), "sim_se?": Array()})}),
        }),
        "alpha_star_simulations?": List(Record({"L": POS, "alphas": List(Num(positive=True)),
                                                "chi_out_mean": Array(),
                                                "chi_out_se": Array()})),
        "alpha_star": Where(List(Record({"L": POS, "asymptotic": OPT_NUM, "numeric": OPT_NUM,
                                         "simulated?": Maybe(Record({"value": NUM,
                                                                     "ci95": PAIR}))})),
                            _response_stars),
        "points": List(Record({"alpha": NUM, "C": _LAYERS, "chi": _LAYERS,
                               "K": Record(_SIM), "eta": Record(_SIM),
                               "chi_out": _OUTPUT, "K_out": _OUTPUT})),
        "paper_figures": Record({
            "fig3?": Maybe(Record({"per_alpha": List(Record({"alpha": NUM, "K": Record(_SIM),
                                                             "chi": Record(_SIM)}), length=3),
                                   "sigma_w2": Any(), "sigma_b2": Any(), "K0": Any()})),
            "fig6?": Maybe(Record({
                "eta": Record(_SIM), "L": Any(), "tail_from": Any(),
                "simulation_fit": Record({"layers": List(Num(), min_len=1),
                                          "power_exponent": OPT_NUM,
                                          "power_exponent_ci95": Maybe(PAIR),
                                          "better_fit": Any()}),
                "theory_power_exponent_same_estimator?": OPT_NUM,
            })),
            "signal?": Maybe(Record({
                "bins": Tuple(NUM, NUM, POS), "L": Any(),
                "per_alpha": List(Record({"K_L": Num(positive=True), "factor": NUM,
                                          "fraction_outside_dynamic_range": NUM,
                                          "histogram": Array()}), length=3),
            })),
            "alpha_star_over_K0?": List(Record({"value": NUM, "K0": NUM, "ci95": PAIR})),
            "linearised_response?": Maybe(Record({"gain_at_K0": NUM})),
            "correlations?": Maybe(Record({"resnet": _CORRELATION, "ffnet": _CORRELATION,
                                           "c0": Any(), "sigma_w2": Any(), "sigma_b2": Any(),
                                           "K0": Any()})),
            "max_entropy?": Maybe(Record({
                "sigma2": List(NUM, min_len=1), "kl": List(NUM, length=Ref(
                    "paper_figures.max_entropy.sigma2", length=True)),
                "argmin_sigma2": NUM, "paper_condition": NUM,
                "K_L_at_alpha_star": List(Record({"K_L": NUM})),
            })),
        }),
    },
)  # fmt: skip

# ------------------------------------------------------------------ variance

_VARIANCE_GAMMAS = study(
    {"gammas": List(NUM), "M": POS, "activation": Any(), "block": Any()},
    {
        "points": List(Record({
            "L": POS, "gamma": NUM, "mean": OPT_NUM, "se": OPT_NUM, "theory": OPT_NUM,
            "regime": Any(), "exploded?": NAT, "MLalpha2": Num(positive=True),
            "backward": Record({"sup": Record({"mean": OPT_NUM, "se": OPT_NUM}),
                                "end": Record({"mean": OPT_NUM})}),
        }), min_len=1),  # no point: nothing on the log axes
        "reference": Record({"c": OPT_NUM}),
    },
)  # fmt: skip

# `--sigma-vs`: Chaintron's scaling α = 1/(LM), points over (L, σ_v), no backward pass
_VARIANCE_SIGMA_V = study(
    {"sigma_vs": List(Num(positive=True), min_len=1), "L": List(POS, min_len=1), "M": POS,
     "d": POS, "activation": Any()},
    {
        "points": List(Record({
            "L": POS, "sigma_v": Num(positive=True), "mean": OPT_NUM, "se": OPT_NUM,
            "theory": OPT_NUM, "exploded?": NAT, "sigma_v2_over_LM": Num(positive=True),
        }), min_len=1),
        "reference": Record({"c": OPT_NUM}),
    },
)  # fmt: skip

VARIANCE = When(
    lambda r: (
        _VARIANCE_SIGMA_V
        if isinstance(r, dict) and isinstance(r.get("config"), dict) and r["config"].get("sigma_vs")
        else _VARIANCE_GAMMAS
    )
)

# ------------------------------------------------------------------ tangent-kernel

TANGENT_KERNEL = study(
    {"gammas": List(NUM), "L": List(POS, min_len=1)},
    {
        "points": List(Record({"L": Member(POS, "config.L"), "gamma": Member(NUM, "config.gammas"),
                               "MLalpha2": Num(positive=True),
                               "relative_difference": STAT})),
        # a fit against L names its theory slope in the legend
        "fits?": Maybe(List(fit_record(theory=NUM))),
    },
)  # fmt: skip

# ------------------------------------------------------------------ two-layer


def _two_layer_fits(fits, root):
    """A criterion's fitted line is drawn over its sizes, its interval in the legend."""
    for i, f in enumerate(fits):
        if f["against"] == "s_v" and f.get("slope") is not None:
            found = first_found(need(f, "ci95", PAIR, "the fit has a slope"),
                           need(f, "sizes", List(Num(positive=True), min_len=1),
                                 "the fit has a slope"))  # fmt: skip
            if found:
                return f"[{i}]" + found[0], found[1]
    return None


_STEPS = List(Record({"mean": OPT_NUM, "std": OPT_NUM}), min_len=Ref("config.steps", plus=1))

TWO_LAYER = study(
    {"steps": NAT, "D": List(POS), "M": List(POS), "D_limit": List(POS), "sweep_M": List(POS),
     "s_v_sweep": List(NUM), "activation": Any(), "s_u": Any(), "s_v": Any(), "lr_u": Any(),
     "lr_v": Any(), "seeds": Any(), "sweep_D": Any(), "input_M?": POS, "input_D?": POS,
     "input_draws?": POS},
    {
        "points": List(Tagged("part", {
            "width": Record({"D": POS, "M": POS, "output_error": _STEPS,
                             "hidden_error": _STEPS}),
            "dimension": Record({"D": POS, "output_error": _STEPS, "hidden_error": _STEPS,
                                 "reference_error": OPT_NUM}),
            "criteria": Record({"M": POS, "s_v": Member(NUM, "config.s_v_sweep"),
                                "rule": Str(("balanced", "unscaled")),
                                "loss": List(Record({"mean": OPT_NUM}), min_len=2),
                                "first_step_decrease": STAT, "feature_movement": STAT,
                                "kernel_change": STAT}),
            "diversity": Record({"D": POS, "scaled": STAT, "unscaled": STAT}),
            "inputs": Record({"family": Str(("orthogonal", "arc")), "n": POS}),
        }), min_len=1),  # no point: nothing on the log axes
        # part (e), the log(n/δ) factor: its figure reads the rows alone
        "input_factor?": Record({"rows": List(Record({
            "family": Str(("orthogonal", "arc")), "n": POS, "delta": Num(positive=True),
            "ratio": OPT_NUM, "ci95?": Maybe(PAIR), "quantile_sqrt_M?": OPT_NUM,
            "predicted_sqrt_M?": OPT_NUM}))}),
        "fits": Where(List(fit_record(sizes=List(Num(positive=True)))), _two_layer_fits),
        "critical_scale": Record({"rows": List(Record({
            "min_sqrt": Num(positive=True), "sigma_v_star": OPT_NUM, "d_out": POS,
            "heuristic": OPT_NUM}), min_len=1)}),
    },
)  # fmt: skip
# (`fit_record(sizes=...)` makes sizes required; two-layer's fits all have them)

# ------------------------------------------------------------------ two-layer-phases

_MEAN = Record({"mean": OPT_NUM})


def _every_response(points, root):
    """Each point carries the response of every ε term at every size (its mean drawn)."""
    sizes = root["config"]["sizes"]
    for i, p in enumerate(points):
        for kind in ("initial", "function", "samples"):
            for e in sizes:
                key = f"{kind}_{e:g}"
                found = need(p, key, _MEAN, "the figure draws every ε term at every size")
                if found:
                    return f"[{i}]" + found[0], found[1]
    return None


TWO_LAYER_PHASES = study(
    {"M": POS, "time": Num(positive=True), "s_v_sweep": List(Num(positive=True), min_len=1)},
    {
        "points": List(Record({"D": POS, "s_v": Member(Num(positive=True), "config.s_v_sweep"),
                               "sigma_v": Num(positive=True), "hidden": _MEAN, "decay": _MEAN,
                               "decay_u_unscaled": _MEAN, "local_update": _MEAN}),
                       min_len=1),  # no point: nothing on the log axes
        "fits?": Maybe(List(fit_record(theory=NUM))),
        "mlu_points?": Maybe(List(Record({"D": POS, "s_v": OPT_NUM, "sigma_v": OPT_NUM}))),
    },
)  # fmt: skip

# ------------------------------------------------------------------ stochastic-approximation

STOCHASTIC_APPROXIMATION = study(
    {"L": List(POS, min_len=1), "M": List(POS, min_len=1),
     "sizes": List(Num(positive=True), min_len=1), "seeds": POS},
    {
        "points": Where(List(Record({"L": Member(POS, "config.L"), "M": Member(POS, "config.M"),
                                     "base_error": _MEAN}), min_len=1), _every_response),
        "fits?": Maybe(List(fit_record())),
        "limit_responses?": Map(Map(Num())),
    },
)  # fmt: skip

# ------------------------------------------------------------------ shapes

_SHAPE = Record({"L": NUM, "M": NUM, "D": NUM})
_SIX = ("output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
        "output_D_gap", "hidden_D_gap")  # fmt: skip

SHAPES = study(
    {"steps": NAT, "L": List(POS, min_len=1), "M": List(POS, min_len=1),
     "D": List(POS, min_len=1), "activation": Any(), "seeds": Any()},
    {
        "points": List(Record({"L": POS, "M": Member(POS, "config.M"),
                               "D": Member(POS, "config.D"), "steps": NAT,
                               **{q: STAT for q in _SIX}})),
        "fits": List(fit_record(
            term_share=NUM, dominant=Bool(),
            # the fixed sizes select the points of a line: the points' own keys
            fixed=Record({"L?": POS, "M?": POS, "D?": POS, "steps?": NAT}, closed=True))),
        "rate_law": Any(),
        "optimal_shape": Record({"bound": _SHAPE, "conjecture": _SHAPE,
                                 "output_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM}),
                                 "hidden_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM})}),
        # one network's fields against its fixed-D limit (shapes_trajectories.png)
        "trajectory?": Maybe(Record({
            "L": POS, "M": POS, "D": POS, "steps": NAT,
            **{k: List(List(NUM)) for k in ("h", "h_limit", "b", "b_limit")},
            **{k: List(NUM, min_len=1) for k in ("h_last", "h_last_limit", "b_first",
                                                 "b_first_limit")}})),
    },
)  # fmt: skip

# ------------------------------------------------------------------ plain-vs-residual


def _configurations(root) -> int:
    from .plain_vs_residual import configurations

    return len(configurations(root["config"]["activations"]))


class _Configs(Ref):
    """As many as the gradient part's configurations of `config.activations`."""

    def __init__(self):
        super().__init__("config.activations")

    def resolve(self, root) -> int:
        return _configurations(root)

    def text(self) -> str:
        return "one per configuration of config.activations"


def _one_gradient_point(points, root):
    if not any(p["part"] == "gradients" for p in points):
        return "", 'expected at least one point of part "gradients" (the figures\' depths)'
    return None


def _rate_holds(rate, root):
    if rate["rate"] is None:
        return None
    why = "the rate is measured"
    return first_found(need(rate, "rate_ci", PAIR, why),
                  need(rate, "predicted_width_N", NUM, why),
                  need(rate, "predicted", NUM, why))  # fmt: skip


_LAYER_STATS = Record({"mean": List(OPT_NUM, min_len=1)})
PLAIN_VS_RESIDUAL = study(
    {"activations": List(Str(("sigmoid", "tanh", "relu", "leaky_relu")), min_len=1),
     "L": List(POS), "N": Any(), "seeds": Any(), "train_steps": POS, "lr": Any(),
     "train_N": Any(), "train_seeds": Any()},
    {
        "points": Where(List(Tagged("part", {
            "gradients": Record({"L": POS, "cells": List(Record({
                "log_ratio": List(OPT_NUM), "log_grad?": _LAYER_STATS,
                "act_mean?": _LAYER_STATS, "act_std?": _LAYER_STATS,
                "active?": _LAYER_STATS}), length=_Configs())}),
            "train": Record({}),
        })), _one_gradient_point),
        "gradient_rates": List(Where(Record({
            "architecture": Str(("plain", "post-activation", "pre-activation")),
            "init": Str(("normal", "xavier", "he")), "alpha": Str(("1", "1/sqrt(L)")),
            "rate": OPT_NUM, "depths": List(POS),
            "predicted_log_ratio": List(OPT_NUM)}), _rate_holds),
            length=_Configs()),
        "degradation": List(Record({
            "architecture": Str(), "L": POS, "train_loss": OPT_NUM, "train_loss_std": OPT_NUM,
            "test_accuracy": OPT_NUM, "test_accuracy_std": OPT_NUM,
            "loss_curve": List(OPT_NUM), "name?": Str(), "norm?": Maybe(Str(("batch",))),
            "shortcut?": Maybe(Str(("none", "zero-pad", "projection"))),
            "train_losses?": List(OPT_NUM),
            "init_mean_square?": Record({"mean": List(OPT_NUM, min_len=2)})})),
    },
)  # fmt: skip

# ------------------------------------------------------------------ trained-weights

_REGULARITY = Maybe(Where(Record({"hurst?": OPT_NUM, "interval?": Maybe(PAIR)}),
                          lambda r, root: None if r.get("hurst") is None else need(
                              r, "interval", PAIR, "the index is drawn with it")))  # fmt: skip


def _cell_row(cell, root):
    """A cell is drawn in the row of its initialisation (and Hurst index, for fBm)."""
    cfg = root["config"]
    init, hurst = cell["init"], cell["hurst"]
    if init not in cfg["inits"]:
        return (
            ".init",
            f"{shown_value(init)} is not one of config.inits {shown_values(cfg['inits'])}",
        )
    if init == "fbm" and hurst not in cfg["hursts"]:
        return (
            ".hurst",
            f"{shown_value(hurst)} is not one of config.hursts {shown_values(cfg['hursts'])}",
        )
    if init != "fbm" and hurst is not None:
        return (
            ".hurst",
            f"expected null (only fbm cells have a Hurst index), got {shown_value(hurst)}",
        )
    return None


_PATH = List(OPT_NUM, length=Ref("config.L"))
TRAINED_WEIGHTS = study(
    {"L": POS, "betas": List(NUM, min_len=1), "hursts": List(NUM),
     "inits": List(Str(("iid", "fbm", "smooth"))), "d": Any(), "data_description": Str(),
     "steps": Any(), "optimizer": Any(), "seeds": Any()},
    {
        "cells": List(Where(Record({
            "init": Str(("iid", "fbm", "smooth")), "hurst": OPT_NUM,
            "beta": Member(NUM, "config.betas"), "exploded": NAT,
            "test_accuracy": Record({"mean": OPT_NUM}),
            "example_path?": Record({"before": _PATH, "after": _PATH}),
            **{f"regularity{kind}_{when}?": _REGULARITY
               for kind in ("", "_cumulative") for when in ("before", "after")},
            "regularity_update?": _REGULARITY,
        }), _cell_row)),
    },
)  # fmt: skip

# ------------------------------------------------------------------ regimes


def _transfer_holds(rec, root):
    n = len(rec["L"])
    for key in ("loss_curves", "optimal_lr"):
        if len(rec[key]) != n:
            return f".{key}", f"expected {entries_text(n)} (as many as its L), got {len(rec[key])}"
    return None


_LRS = Ref("config.transfer_lrs", length=True)
REGIMES = study(
    {"gammas": List(NUM, min_len=1), "lambdas": List(NUM, min_len=1), "L": List(POS, min_len=1),
     "seeds": Any(), "steps": Any(), "transfer_lrs": List(Num(positive=True)),
     "transfer_steps": Any()},
    {
        "points": List(Tagged("part", {
            "diagram": Record({"L": POS, "cells": List(Record({
                "gamma": NUM, "lambda": NUM,
                **{q: List(OPT_NUM) for q in ("forward_deviation", "predictor_movement",
                                              "local_change", "global_change",
                                              "parameter_movement", "loss_ratio")}}))}),
            "transfer": Record({}),
        })),
        "cells": List(Record({"gamma": NUM, "lambda": NUM, "ambiguous": Bool(),
                              "distance_to_boundary": NUM, "regime": Maybe(Str()),
                              "predicted_regime": Maybe(Str())})),
        "transfer": List(Where(Record({
            "parametrization": Str(), "gamma": NUM, "lambda": NUM, "L": List(POS),
            "loss_curves": List(List(NUM, length=_LRS)), "optimal_lr": List(OPT_NUM),
            "drift_exponent": OPT_NUM, "drift_ci95?": Maybe(PAIR),
            "unresolved_L?": Maybe(List(Any()))}), _transfer_holds)),
    },
)  # fmt: skip

# ------------------------------------------------------------------ approximation

_ARM = Record(
    {
        "depth": Member(POS, "config.depths"),
        "parameters": POS,
        "rms": List(Maybe(Num(positive=True))),
        "exploded": NAT,
    }
)
APPROXIMATION = study(
    {"targets": List(Str(), min_len=1), "depths": List(POS, min_len=1), "lrs": List(NUM),
     "steps": POS, "seeds": POS, "sawtooth_k": POS, "parity_n": POS, "seed": NAT,
     "spiral_turns": Num(positive=True)},
    {
        "points": List(Record({"target": Member(Str(), "config.targets"), "budget": POS,
                               "constant_rms": Num(positive=True),
                               "arms": List(_ARM, min_len=1)}), min_len=1),
        "comparisons": List(Record({"target": Str(), "budget": POS, "lower": Str()})),
        "exercise?": Record({
            "arms": List(Record({"name": Str(), "width": POS, "depth": POS, "parameters": POS,
                                 "parameters_784": POS, "test_error": List(OPT_NUM, min_len=1)}),
                         length=2),
            "comparison": Record({"lower": Str(), "ci95": Maybe(PAIR)}),
        }),
        "constructions": Record({
            "square": List(Record({"relus": POS, "max_error": Num(positive=True)}), min_len=1),
            "sawtooth": List(Record({"k": POS, "pieces": POS, "predicted_pieces": POS,
                                     "deep_units": POS, "shallow_units": NAT}), min_len=1),
            "parity": List(Record({"n": POS, "shallow_wrong": NAT, "deep_wrong": NAT,
                                   "shallow_units": POS, "deep_units": NAT,
                                   "lookup_units": POS}), min_len=1),
            "curse": List(Record({"d": POS, "slope": NUM, "predicted_slope": NUM,
                                  "rows": List(Record({"pieces": POS, "rms": Num(positive=True)}),
                                               min_len=1)})),
        }),
    },
)  # fmt: skip

# ------------------------------------------------------------------ the tables

SCHEMAS: dict[str, Spec] = {
    "mean-ode": MEAN_ODE,
    "sde": SDE,
    "phases": PHASES,
    "response": RESPONSE,
    "variance": VARIANCE,
    "tangent-kernel": TANGENT_KERNEL,
    "two-layer": TWO_LAYER,
    "two-layer-phases": TWO_LAYER_PHASES,
    "resnet-phases": TWO_LAYER_PHASES,  # the same records, its config with L too
    "stochastic-approximation": STOCHASTIC_APPROXIMATION,
    "shapes": SHAPES,
    "plain-vs-residual": PLAIN_VS_RESIDUAL,
    "trained-weights": TRAINED_WEIGHTS,
    "regimes": REGIMES,
    "approximation": APPROXIMATION,
    "coord-check": COORD_CHECK,
    "transfer": TRANSFER,
}

_COMMON = Record({"study": Str(), "config": Record({"x64?": Bool()})})


def check(results) -> None:
    """Raise `SchemaRefusal` (path, problem) where `results` does not fit its study's schema."""
    if not isinstance(results, dict):
        raise SchemaRefusal("", f"expected an object, got {shown_value(results)}")
    if "study" not in results:
        raise SchemaRefusal("study", "missing (expected a string naming a study)")
    study_name = results["study"]
    if not isinstance(study_name, str):
        raise SchemaRefusal(
            "study", f"expected a string naming a study, got {shown_value(study_name)}"
        )
    SCHEMAS.get(study_name, _COMMON).check(results, "", results)


def validate(results) -> None:
    """Check a study's `results.json` (parsed) against what its plot reads: a one-line
    `StudyInputError` naming the JSON path and the problem, e.g.
    `DIR: results.json: points[3].L: expected a positive integer, got "four"`."""
    try:
        check(results)
    except SchemaRefusal as err:
        where = f"{err.path}: " if err.path else ""
        raise StudyInputError(f"{PREFIX}: {where}{err.problem}") from None
