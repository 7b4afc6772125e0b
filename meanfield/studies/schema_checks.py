"""The schemas of the Transformer studies' figures (`coord-check`, `transfer`; part of
`meanfield.studies.schema`'s tables, kept here because that file is long), with the
relations their plots rely on, so that `meanfield plot DIR` refuses before it draws
anything (issue 75):

* the sizes of the points and lines are the configuration's (`config.widths`,
  `config.depths`, `config.width`, `config.depth`), and every size a line draws has its
  point (a plot looks each one up);
* every list a figure draws against another has its length (a size's draws per step,
  `config.steps + 1`; a loss curve per learning rate of `config.lrs`);
* every value drawn on a log axis is a size, never negative (a coordinate's RMS, a
  nonlinear fraction) or positive (a learning rate);
* the configuration holds what the titles read (a Transformer's `config.base_depth`).
"""

from __future__ import annotations

from .schema_language import (
    NUM,
    OPT_NUM,
    PAIR,
    POS,
    Bool,
    List,
    Map,
    Maybe,
    Num,
    Record,
    Ref,
    Spec,
    Str,
    Tuple,
    When,
    Where,
    shown_values,
    study,
)

# a size: an RMS or a fraction, drawn on a log axis where above 0; null for an exploded draw
SIZE = Maybe(Num(non_negative=True))
POSITIVE = Num(positive=True)
# the tables the titles name the optimisers of (`coord_check_plot._optimisers`)
TABLES = List(Record({"optimizer?": Str(("adam", "sgd"))}))


def _size_text(width, depth) -> str:
    return f"width {width}, depth {depth}"


# ------------------------------------------------------------------ coord-check

COORD_QUANTITIES = (
    "activation/embedding", "activation/attention", "activation/mlp", "change/attention",
    "change/mlp", "change/logits", "update/q", "update/k", "update/v", "update/o",
    "update/in", "update/out", "update/embedding", "update/unembedding",
)  # fmt: skip
RESNET_QUANTITIES = (
    "activation/state", "activation/unit", "change/state", "change/output", "update/unit",
    "update/layer",
)  # fmt: skip
# a quantity of a point: per draw (config.seeds of them), its size at every step 0..steps
_DRAWS_BY_STEP = List(List(SIZE, length=Ref("config.steps", plus=1)), length=Ref("config.seeds"))


def _coord_sizes(doc, root):
    """The points at the configuration's sizes, the lines along its widths and depths,
    every size of a line with its point."""
    cfg = doc["config"]
    allowed = {(n, cfg["depth"]) for n in cfg["widths"]}
    allowed |= {(cfg["width"], d) for d in cfg["depths"]}
    for i, p in enumerate(doc["points"]):
        if (p["width"], p["depth"]) not in allowed:
            return f".points[{i}]", (
                f"{_size_text(p['width'], p['depth'])} is not a size of the config (widths "
                f"{shown_values(cfg['widths'])} at depth {cfg['depth']}, depths "
                f"{shown_values(cfg['depths'])} at width {cfg['width']})"
            )
    have = {(p["parametrisation"], p["width"], p["depth"]) for p in doc["points"]}
    for j, line in enumerate(doc["lines"]):
        width = line["against"] == "width"
        key, wanted = ("widths", cfg["widths"]) if width else ("depths", cfg["depths"])
        if line["sizes"] != wanted:
            return f".lines[{j}].sizes", (
                f"{shown_values(line['sizes'])} is not config.{key} {shown_values(wanted)}"
            )
        fixed = {"depth": cfg["depth"]} if width else {"width": cfg["width"]}
        if line["fixed"] != fixed:
            return f".lines[{j}].fixed", f"expected {shown_values(fixed)} (the config's)"
        for n in line["sizes"]:
            size = (n, cfg["depth"]) if width else (cfg["width"], n)
            if (line["parametrisation"], *size) not in have:
                return f".lines[{j}]", (
                    f"no point of {line['parametrisation']!r} at {_size_text(*size)}"
                )
    return None


def _coord_check(quantities, config: dict) -> Spec:
    return Where(study(
        {"parametrisations": List(Str(), min_len=1), "widths": List(POS, min_len=1),
         "depths": List(POS, min_len=1), "width": POS, "depth": POS, "steps": POS,
         "seeds": POS, "lr": POSITIVE, "model?": Str(("transformer", "resnet")),
         "tables?": TABLES, **config},
        {
            "points": List(Record({
                "parametrisation": Str(), "width": POS, "depth": POS,
                "sizes": Record({q: _DRAWS_BY_STEP for q in quantities}),
            })),
            "lines": List(Record({
                "parametrisation": Str(), "against": Str(("width", "depth")),
                "sizes": List(POS, min_len=1), "fixed": Map(POS), "claims_flat": Bool(),
                "fits": Record({q: Record({"slope": OPT_NUM, "ci95?": Maybe(PAIR),
                                           "predicted?": OPT_NUM})
                                for q in quantities}),
            })),
        },
    ), _coord_sizes)  # fmt: skip


# a Transformer's figure names its base depth (the depth rules are off there)
_COORD_TRANSFORMER = _coord_check(COORD_QUANTITIES, {"base_depth": POS})
_COORD_RESNET = _coord_check(RESNET_QUANTITIES, {})
# a Transformer's check, or a ResNet of unit blocks' (its config's `model`)
COORD_CHECK = When(
    lambda doc: (
        _COORD_RESNET
        if isinstance(doc, dict)
        and isinstance(doc.get("config"), dict)
        and doc["config"].get("model") == "resnet"
        else _COORD_TRANSFORMER
    )
)


# ------------------------------------------------------------------ transfer

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
                f"{_size_text(p['width'], p['depth'])} is not a size of the config's "
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
                        f"no point of {line['parametrisation']!r} at {_size_text(cfg['width'], d)}"
                    )
    return None


_INTERVAL = Maybe(Tuple(POSITIVE, POSITIVE))
TRANSFER = Where(study(
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
