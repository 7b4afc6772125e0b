"""What the figures of `meanfield study two-layer-phases` read from `results.json`."""

from ...harness.schema_language import *

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
