"""What the figures of `meanfield study two-layer` read from `results.json`."""

from ...harness.schema_language import *


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

SCHEMA = study(
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
