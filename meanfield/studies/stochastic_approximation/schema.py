"""What the figures of `meanfield study stochastic-approximation` read from `results.json`."""

from ...harness.schema_language import *


def _every_response(points, root):
    """Each point carries the response of every ε term at every size (its mean drawn)."""
    sizes = root["config"]["sizes"]
    for i, p in enumerate(points):
        for kind in ("initial", "function", "samples"):
            for e in sizes:
                key = f"{kind}_{e:g}"
                found = need(p, key, MEAN, "the figure draws every ε term at every size")
                if found:
                    return f"[{i}]" + found[0], found[1]
    return None


SCHEMA = study(
    {"L": List(POS, min_len=1), "M": List(POS, min_len=1),
     "sizes": List(Num(positive=True), min_len=1), "seeds": POS},
    {
        "points": Where(List(Record({"L": Member(POS, "config.L"), "M": Member(POS, "config.M"),
                                     "base_error": MEAN}), min_len=1), _every_response),
        "fits?": Maybe(List(fit_record())),
        "limit_responses?": Map(Map(Num())),
    },
)  # fmt: skip
