"""What the figures of `meanfield study phases` read from `results.json`."""

from ...harness.schema_language import *

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

SCHEMA = study(
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
