"""What the figures of `meanfield study shapes` read from `results.json`."""

from ...harness.schema_language import *

_SHAPE = Record({"L": NUM, "M": NUM, "D": NUM})
_SIX = ("output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
        "output_D_gap", "hidden_D_gap")  # fmt: skip

SCHEMA = study(
    {"steps": NAT, "L": List(POS, min_len=1), "M": List(POS, min_len=1),
     "D": List(POS, min_len=1), "activation": Any(), "seeds": Any()},
    {
        "points": List(Record({"L": POS, "M": Member(POS, "config.M"),
                               "D": Member(POS, "config.D"), "steps": NAT,
                               **{q: STAT for q in _SIX}})),
        "fits": List(fit_record(
            term_share=NUM, dominant=Bool(),
            # the fixed sizes select the points of a line: the points' own keys
            fixed=Record({"L?": POS, "M?": POS, "D?": POS, "steps?": NAT}, closed=True))),
        "rate_law": Any(),
        "optimal_shape": Record({"bound": _SHAPE, "conjecture": _SHAPE,
                                 "output_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM}),
                                 "hidden_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM})}),
        # one network's fields against its fixed-D limit (shapes_trajectories.png)
        "trajectory?": Maybe(Record({
            "L": POS, "M": POS, "D": POS, "steps": NAT,
            **{k: List(List(NUM)) for k in ("h", "h_limit", "b", "b_limit")},
            **{k: List(NUM, min_len=1) for k in ("h_last", "h_last_limit", "b_first",
                                                 "b_first_limit")}})),
    },
)  # fmt: skip
