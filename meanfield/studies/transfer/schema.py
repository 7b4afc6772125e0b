"""What `meanfield study transfer`'s figures read from `results.json`, checked before
`meanfield plot DIR` draws them (`meanfield.studies.schema`), with the relations its plot
relies on (issue 75): the sizes of the points are the configuration's (`config.width`,
`config.depth`, `config.widths`, `config.depths`) and every size a line draws has its
point; a loss curve has one entry per learning rate of `config.lrs`; every value drawn
on a log axis is a size (a nonlinear fraction) or positive (a learning rate).
"""

from ...harness.schema_language import *
from ..coord_check.schema import TABLES, size_text

_LRS = Ref("config.lrs", length=True)
_BY_RATE = List(List(OPT_NUM), length=_LRS)  # (learning rates, networks)
_FRACTIONS = List(List(SIZE), length=_LRS)  # nonlinear fractions, on a log axis
_VERDICT = Str(("transfers", "drifts", "undecided"))
_DRIFT = {"drift_exponent": OPT_NUM, "drift_ci95": Maybe(PAIR), "verdict": _VERDICT}


def _transfer_line(line, root):
    """A line's curves: one per size, each over every learning rate."""
    n, rates = len(line["sizes"]), len(root["config"]["lrs"])
    for key in ("loss_curves", "loss_se_curves", "optimal_lr", "optimal_lr_ci95"):
        if key in line and len(line[key]) != n:
            return f".{key}", f"expected a list of {n} entries (as many as sizes)"
    for key in ("loss_curves", "loss_se_curves"):
        for i, curve in enumerate(line.get(key) or []):
            if curve is not None and len(curve) != rates:
                return f".{key}[{i}]", f"expected a list of {rates} entries (as many as config.lrs)"
    return None


def _transfer_sizes(doc, root):
    """The points at the configuration's sizes (a depth line's at `width`, a width
    line's at `depth`), the lines along its depths and widths, and a depth line's every
    depth with its point (the laziness figure looks each one up)."""
    cfg = doc["config"]
    for i, p in enumerate(doc["points"]):
        depth = p["line"] == "depth"
        ok = (
            p["width"] == cfg["width"] and p["depth"] in cfg["depths"]
            if depth
            else p["depth"] == cfg["depth"] and p["width"] in cfg["widths"]
        )
        if not ok:
            along = (
                f"depths {shown_values(cfg['depths'])} at width {cfg['width']}"
                if depth
                else f"widths {shown_values(cfg['widths'])} at depth {cfg['depth']}"
            )
            return f".points[{i}]", (
                f"{size_text(p['width'], p['depth'])} is not a size of the config's "
                f"{p['line']} line ({along})"
            )
    have = {(p["line"], p["parametrisation"], p["width"], p["depth"]) for p in doc["points"]}
    for j, line in enumerate(doc["lines"]):
        key = "depths" if line["line"] == "depth" else "widths"
        if line["sizes"] != cfg[key]:
            return f".lines[{j}].sizes", (
                f"{shown_values(line['sizes'])} is not config.{key} {shown_values(cfg[key])}"
            )
        if line["line"] == "depth" and line.get("laziness"):
            for d in line["sizes"]:
                if ("depth", line["parametrisation"], cfg["width"], d) not in have:
                    return f".lines[{j}]", (
                        f"no point of {line['parametrisation']!r} at {size_text(cfg['width'], d)}"
                    )
    return None


_INTERVAL = Maybe(Tuple(POSITIVE, POSITIVE))
SCHEMA = Where(study(
    {"lrs": List(POSITIVE, min_len=1), "steps": POS, "seeds": POS, "width": POS,
     "depth": POS, "widths": List(POS, min_len=1), "depths": List(POS, min_len=1),
     "tables?": TABLES},
    {
        "points": List(Record({
            "line": Str(("depth", "width")), "parametrisation": Str(), "width": POS,
            "depth": POS, "final_loss": _BY_RATE, "initial_loss": _BY_RATE,
            "nonlinear_attention": _FRACTIONS, "nonlinear_mlp": _FRACTIONS,
            "budget_loss?": List(_BY_RATE),
        })),
        "lines": List(Where(Record({
            "line": Str(("depth", "width")), "parametrisation": Str(),
            "sizes": List(POS, min_len=1), "loss_curves": List(List(NUM)),
            "loss_se_curves?": List(Maybe(List(OPT_NUM))),
            "optimal_lr": List(Maybe(POSITIVE)), "optimal_lr_ci95?": List(_INTERVAL),
            "band?": POSITIVE, **_DRIFT,
            "budgets?": List(Record({"steps": POS, "optimal_lr": List(Maybe(POSITIVE)),
                                     **_DRIFT})),
            "laziness?": Record({"lr": POSITIVE,
                                 "attention": Record({"slope": OPT_NUM, "ci95?": Maybe(PAIR)}),
                                 "mlp": Record({"slope": OPT_NUM, "ci95?": Maybe(PAIR)})}),
        }), _transfer_line)),
    },
), _transfer_sizes)  # fmt: skip
