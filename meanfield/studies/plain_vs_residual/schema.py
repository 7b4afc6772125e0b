"""What the figures of `meanfield study plain-vs-residual` read from `results.json`."""

from ...harness.schema_language import *


def _configurations(root) -> int:
    from .grid import configurations

    return len(configurations(root["config"]["activations"]))


class _Configs(Ref):
    """As many as the gradient part's configurations of `config.activations`."""

    def __init__(self):
        super().__init__("config.activations")

    def resolve(self, root) -> int:
        return _configurations(root)

    def text(self) -> str:
        return "one per configuration of config.activations"


def _one_gradient_point(points, root):
    if not any(p["part"] == "gradients" for p in points):
        return "", 'expected at least one point of part "gradients" (the figures\' depths)'
    return None


def _rate_holds(rate, root):
    if rate["rate"] is None:
        return None
    why = "the rate is measured"
    return first_found(need(rate, "rate_ci", PAIR, why),
                  need(rate, "predicted_width_N", NUM, why),
                  need(rate, "predicted", NUM, why))  # fmt: skip


_LAYER_STATS = Record({"mean": List(OPT_NUM, min_len=1)})
SCHEMA = study(
    {"activations": List(Str(("sigmoid", "tanh", "relu", "leaky_relu")), min_len=1),
     "L": List(POS), "N": Any(), "seeds": Any(), "train_steps": POS, "lr": Any(),
     "train_N": Any(), "train_seeds": Any()},
    {
        "points": Where(List(Tagged("part", {
            "gradients": Record({"L": POS, "cells": List(Record({
                "log_ratio": List(OPT_NUM), "log_grad?": _LAYER_STATS,
                "act_mean?": _LAYER_STATS, "act_std?": _LAYER_STATS,
                "active?": _LAYER_STATS}), length=_Configs())}),
            "train": Record({}),
        })), _one_gradient_point),
        "gradient_rates": List(Where(Record({
            "architecture": Str(("plain", "post-activation", "pre-activation")),
            "init": Str(("normal", "xavier", "he")), "alpha": Str(("1", "1/sqrt(L)")),
            "rate": OPT_NUM, "depths": List(POS),
            "predicted_log_ratio": List(OPT_NUM)}), _rate_holds),
            length=_Configs()),
        "degradation": List(Record({
            "architecture": Str(), "L": POS, "train_loss": OPT_NUM, "train_loss_std": OPT_NUM,
            "test_accuracy": OPT_NUM, "test_accuracy_std": OPT_NUM,
            "loss_curve": List(OPT_NUM), "name?": Str(), "norm?": Maybe(Str(("batch",))),
            "shortcut?": Maybe(Str(("none", "zero-pad", "projection"))),
            "train_losses?": List(OPT_NUM),
            "init_mean_square?": Record({"mean": List(OPT_NUM, min_len=2)})})),
    },
)  # fmt: skip
