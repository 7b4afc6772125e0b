"""What the figures of `meanfield study mean-ode` read from `results.json`."""

from ...harness.schema_language import *

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
SCHEMA = When(lambda r: _MEAN_ODE_NOTHING if r.get("points") == [] else _MEAN_ODE)
