"""What the figures of `meanfield study response` read from `results.json`."""

from ...harness.schema_language import *

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
    from ...theory.response import FIG5_SIGMA_B2, FIG5_SIGMA_W2

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


SCHEMA = study(
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
