"""What the figures of `meanfield study approximation` read from `results.json`."""

from ...harness.schema_language import *

_ARM = Record(
    {
        "depth": Member(POS, "config.depths"),
        "parameters": POS,
        "rms": List(Maybe(Num(positive=True))),
        "exploded": NAT,
    }
)
SCHEMA = study(
    {"targets": List(Str(), min_len=1), "depths": List(POS, min_len=1), "lrs": List(NUM),
     "steps": POS, "seeds": POS, "sawtooth_k": POS, "parity_n": POS, "seed": NAT,
     "spiral_turns": Num(positive=True)},
    {
        "points": List(Record({"target": Member(Str(), "config.targets"), "budget": POS,
                               "constant_rms": Num(positive=True),
                               "arms": List(_ARM, min_len=1)}), min_len=1),
        "comparisons": List(Record({"target": Str(), "budget": POS, "lower": Str()})),
        "exercise?": Record({
            "arms": List(Record({"name": Str(), "width": POS, "depth": POS, "parameters": POS,
                                 "parameters_784": POS, "test_error": List(OPT_NUM, min_len=1)}),
                         length=2),
            "comparison": Record({"lower": Str(), "ci95": Maybe(PAIR)}),
        }),
        "constructions": Record({
            "square": List(Record({"relus": POS, "max_error": Num(positive=True)}), min_len=1),
            "sawtooth": List(Record({"k": POS, "pieces": POS, "predicted_pieces": POS,
                                     "deep_units": POS, "shallow_units": NAT}), min_len=1),
            "parity": List(Record({"n": POS, "shallow_wrong": NAT, "deep_wrong": NAT,
                                   "shallow_units": POS, "deep_units": NAT,
                                   "lookup_units": POS}), min_len=1),
            "curse": List(Record({"d": POS, "slope": NUM, "predicted_slope": NUM,
                                  "rows": List(Record({"pieces": POS, "rms": Num(positive=True)}),
                                               min_len=1)})),
        }),
    },
)  # fmt: skip
