"""What the figures of `meanfield study trained-weights` read from `results.json`."""

from ...harness.schema_language import *

_REGULARITY = Maybe(Where(Record({"hurst?": OPT_NUM, "interval?": Maybe(PAIR)}),
                          lambda r, root: None if r.get("hurst") is None else need(
                              r, "interval", PAIR, "the index is drawn with it")))  # fmt: skip


def _cell_row(cell, root):
    """A cell is drawn in the row of its initialisation (and Hurst index, for fBm)."""
    cfg = root["config"]
    init, hurst = cell["init"], cell["hurst"]
    if init not in cfg["inits"]:
        return (
            ".init",
            f"{shown_value(init)} is not one of config.inits {shown_values(cfg['inits'])}",
        )
    if init == "fbm" and hurst not in cfg["hursts"]:
        return (
            ".hurst",
            f"{shown_value(hurst)} is not one of config.hursts {shown_values(cfg['hursts'])}",
        )
    if init != "fbm" and hurst is not None:
        return (
            ".hurst",
            f"expected null (only fbm cells have a Hurst index), got {shown_value(hurst)}",
        )
    return None


_PATH = List(OPT_NUM, length=Ref("config.L"))
SCHEMA = study(
    {"L": POS, "betas": List(NUM, min_len=1), "hursts": List(NUM),
     "inits": List(Str(("iid", "fbm", "smooth"))), "d": Any(), "data_description": Str(),
     "steps": Any(), "optimizer": Any(), "seeds": Any()},
    {
        "cells": List(Where(Record({
            "init": Str(("iid", "fbm", "smooth")), "hurst": OPT_NUM,
            "beta": Member(NUM, "config.betas"), "exploded": NAT,
            "test_accuracy": Record({"mean": OPT_NUM}),
            "example_path?": Record({"before": _PATH, "after": _PATH}),
            **{f"regularity{kind}_{when}?": _REGULARITY
               for kind in ("", "_cumulative") for when in ("before", "after")},
            "regularity_update?": _REGULARITY,
        }), _cell_row)),
    },
)  # fmt: skip
