"""What the figures of `meanfield study regimes` read from `results.json`."""

from ...harness.schema_language import *


def _transfer_holds(rec, root):
    n = len(rec["L"])
    for key in ("loss_curves", "optimal_lr"):
        if len(rec[key]) != n:
            return f".{key}", f"expected {entries_text(n)} (as many as its L), got {len(rec[key])}"
    return None


_LRS = Ref("config.transfer_lrs", length=True)
SCHEMA = study(
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
