"""What `meanfield study coord-check`'s figures read from `results.json`, checked before
`meanfield plot DIR` draws them (`meanfield.studies.schema`), with the relations its plot
relies on (issue 75):

* the sizes of the points and lines are the configuration's (`config.widths`,
  `config.depths`), and every size a line draws has its point (a plot looks each one up);
* a size's draws per step have `config.steps + 1` entries;
* every value drawn on a log axis is a size, never negative (a coordinate's RMS);
* the configuration holds what the titles read (a Transformer's `config.base_depth`).
"""

from ...harness.schema_language import *

# the tables the titles name the optimisers of (`coord_check.plot.optimisers`)
TABLES = List(Record({"optimizer?": Str(("adam", "sgd"))}))


def size_text(width, depth) -> str:
    return f"width {width}, depth {depth}"


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
                f"{size_text(p['width'], p['depth'])} is not a size of the config (widths "
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
                    f"no point of {line['parametrisation']!r} at {size_text(*size)}"
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
SCHEMA = When(
    lambda doc: (
        _COORD_RESNET
        if isinstance(doc, dict)
        and isinstance(doc.get("config"), dict)
        and doc["config"].get("model") == "resnet"
        else _COORD_TRANSFORMER
    )
)
