"""What `meanfield study tangent-kernel`'s figures read from `results.json`, checked before
`meanfield plot DIR` draws them (`meanfield.studies.schema`).
"""

from __future__ import annotations

from ...harness.schema_language import (
    NUM,
    POS,
    STAT,
    List,
    Maybe,
    Member,
    Num,
    Record,
    fit_record,
    study,
)

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
