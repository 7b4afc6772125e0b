"""What the figures of `meanfield study sde` read from `results.json`."""

from ...harness.schema_language import *


def _sde_config(cfg, root):
    # the title of fBm weights names H, of smooth weights ℓ
    key = {"fbm": "hurst", "smooth": "length_scale"}.get(cfg["weights"])
    return None if key is None else need(cfg, key, Any(), f"the title of {cfg['weights']} weights")


SCHEMA = study(
    {"weights": Str(("brownian", "fbm", "smooth")), "d": Any(), "activation": Any(),
     "seeds": Any()},
    {
        "points": List(Record({"L": POS, "error_final": STAT, "error_sup": STAT})),
        "fits": Where(List(FIT, min_len=1), lambda fits, root: below_path(
            "[0]", need(fits[0], "theory", NUM, "the title's theory slope"))),
        "reference": Record({"error_estimate?": OPT_NUM}),
    },
    _sde_config,
)  # fmt: skip
