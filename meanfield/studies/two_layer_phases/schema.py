"""What `meanfield study two-layer-phases`'s figures read from `results.json`, checked before
`meanfield plot DIR` draws them (`meanfield.studies.schema`).
"""

from __future__ import annotations

from ...harness.schema_language import (
    MEAN,
    NUM,
    OPT_NUM,
    POS,
    List,
    Maybe,
    Member,
    Num,
    Record,
    fit_record,
    study,
)

SCHEMA = study(
    {"M": POS, "time": Num(positive=True), "s_v_sweep": List(Num(positive=True), min_len=1)},
    {
        "points": List(Record({"D": POS, "s_v": Member(Num(positive=True), "config.s_v_sweep"),
                               "sigma_v": Num(positive=True), "hidden": MEAN, "decay": MEAN,
                               "decay_u_unscaled": MEAN, "local_update": MEAN}),
                       min_len=1),  # no point: nothing on the log axes
        "fits?": Maybe(List(fit_record(theory=NUM))),
        "mlu_points?": Maybe(List(Record({"D": POS, "s_v": OPT_NUM, "sigma_v": OPT_NUM}))),
    },
)  # fmt: skip
