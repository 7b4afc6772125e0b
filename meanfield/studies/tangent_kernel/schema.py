"""What the figures of `meanfield study tangent-kernel` read from `results.json`."""

from ...harness.schema_language import *

SCHEMA = study(
    {"gammas": List(NUM), "L": List(POS, min_len=1)},
    {
        "points": List(Record({"L": Member(POS, "config.L"), "gamma": Member(NUM, "config.gammas"),
                               "MLalpha2": Num(positive=True),
                               "relative_difference": STAT})),
        # a fit against L names its theory slope in the legend
        "fits?": Maybe(List(fit_record(theory=NUM))),
    },
)  # fmt: skip
