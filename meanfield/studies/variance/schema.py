"""What the figures of `meanfield study variance` read from `results.json`."""

from ...harness.schema_language import *

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

SCHEMA = When(
    lambda r: (
        _VARIANCE_SIGMA_V
        if isinstance(r, dict) and isinstance(r.get("config"), dict) and r["config"].get("sigma_vs")
        else _VARIANCE_GAMMAS
    )
)
