"""The degradation part of `meanfield study plain-vs-residual`: plain and residual ReLU
classifiers of growing depth trained with the same budget on one teacher task, their
scale at initialisation, and the verdicts read from them.

The networks (`TrainNet`): by default plain, post- and pre-activation (He, residual α =
1/sqrt(L)); `--batch-norm` adds Marion et al.'s "batch normalization or scaling" (the
pre-activation network at α = 1 with neither: its mean square doubles per layer; the three
architectures at α = 1 with batch normalisation, `meanfield.models.plain`); `--projection`
adds the lecture's "projection shortcuts when shapes change" (networks that widen from N/2 to
N halfway, `meanfield.models.staged`: plain, and post-activation with He et al.'s
zero-padding (A) and projection (B) shortcuts, compared depth by depth).
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.random as jr
import numpy as np

from ...models import plain, staged
from ...stats.compare import difference_interval, lower_arm, mean_interval
from ...training import plain as plain_training

TASK = {"d_in": 16, "classes": 4, "n_train": 512, "n_test": 2048}
# draws of each trained network's initialisation whose scale is recorded (a forward pass
# of the training inputs each: cheap beside the training)
INIT_DRAWS = 64


def alpha_value(alpha: str, L: int) -> float:
    return 1.0 if alpha == "1" else 1.0 / math.sqrt(L)


class TrainNet(NamedTuple):
    """A network of the degradation part: architecture, initialisation, α, normalisation
    (None or "batch") and widening (None: one width; else the shortcut where it widens,
    `meanfield.models.staged.SHORTCUTS`)."""

    architecture: str
    init: str
    alpha: str
    norm: str | None = None
    shortcut: str | None = None

    @property
    def name(self) -> str:
        """The architecture, then `, α = 1` for a residual network at α = 1 without
        normalisation, ` + BN` with batch normalisation, `, widening` / `, zero-pad
        shortcut` / `, projection shortcut` for a network that widens."""
        if self.shortcut is not None:
            what = "widening" if self.shortcut == "none" else f"{self.shortcut} shortcut"
            return f"{self.architecture}, {what}"
        if self.norm is not None:
            return f"{self.architecture} + BN"
        if self.architecture != "plain" and self.alpha == "1":
            return f"{self.architecture}, α = 1"
        return self.architecture

    @property
    def label(self) -> str:
        """The name with its initialisation and α, as the legends and titles show it."""
        bn = " + BN" if self.norm else ""
        if self.architecture == "plain":
            text = f"plain{bn} (He)"
        else:
            text = f"{self.architecture}{bn} (He, α = {self.alpha})"
        if self.shortcut is not None:
            text += ", widening" if self.shortcut == "none" else f", {self.shortcut} shortcut"
        return text


TRAIN_ARCHITECTURES = (
    TrainNet("plain", "he", "1"),
    TrainNet("post-activation", "he", "1/sqrt(L)"),
    TrainNet("pre-activation", "he", "1/sqrt(L)"),
)
BATCH_NORM_ARCHITECTURES = (
    TrainNet("pre-activation", "he", "1"),
    TrainNet("plain", "he", "1", "batch"),
    TrainNet("post-activation", "he", "1", "batch"),
    TrainNet("pre-activation", "he", "1", "batch"),
)
PROJECTION_ARCHITECTURES = (
    TrainNet("plain", "he", "1", shortcut="none"),
    TrainNet("post-activation", "he", "1/sqrt(L)", shortcut="zero-pad"),
    TrainNet("post-activation", "he", "1/sqrt(L)", shortcut="projection"),
)


def train_architectures(cfg) -> tuple[TrainNet, ...]:
    """The degradation part's networks under a configuration (`--batch-norm` adds four,
    `--projection` three; the keys of the defaults' draws do not move)."""
    out = TRAIN_ARCHITECTURES
    if cfg.get("batch_norm"):
        out += BATCH_NORM_ARCHITECTURES
    if cfg.get("projection"):
        out += PROJECTION_ARCHITECTURES
    return out


def cell_name(cell) -> str:
    """A cell's network name (results written before the options existed have none: one
    network per architecture)."""
    return cell.get("name", cell["architecture"])


def cells_of(cells, net: TrainNet) -> list:
    """A network's cells."""
    return [c for c in cells if cell_name(c) == net.name]


def _sample(key, alpha, *, net: TrainNet, L, N):
    common = {"d_in": TASK["d_in"], "classes": TASK["classes"], "L": L, "N": N,
              "architecture": net.architecture, "activation": "relu", "init": net.init,
              "alpha": alpha}  # fmt: skip
    if net.shortcut is not None:
        return staged.StagedClassifier.sample(key, shortcut=net.shortcut, **common)
    return plain.Classifier.sample(key, norm=net.norm, **common)


@functools.partial(jax.jit, static_argnames=("net", "L", "N", "steps"))
def _train_draws(keys, data, alpha, lr, *, net, L, N, steps):
    def one(key):
        model = _sample(key, alpha, net=net, L=L, N=N)
        model, losses, acc = plain_training.train_classifier(model, data, steps=steps, lr=lr)
        final = plain.cross_entropy(model, data[0], data[1])
        return final, acc, losses

    return jax.vmap(one)(keys)


@functools.partial(jax.jit, static_argnames=("net", "L", "N"))
def _init_mean_squares(keys, x, alpha, *, net, L, N):
    """Per draw (four at a time: the states of a draw are (L+1, n, N)), the mean square
    of h^0..h^L over the training inputs and the units at initialisation."""
    return jax.lax.map(
        lambda key: _sample(key, alpha, net=net, L=L, N=N).mean_squares(x), keys, batch_size=4
    )


def init_scale(ms, net: TrainNet, L) -> tuple[dict, dict | None]:
    """The per-layer mean (and standard error) over the finite draws of `ms` (draws,
    L+1), and the check of the last layer's increment `ms(h^L) − ms(h^0)` against its
    exact expectation where a mean over draws can judge it: L for pre-activation + BN at
    α = 1 (each branch centred with unit variance per unit over the batch, up to
    ε/variance ≈ 1e-5, and W → −W leaves the law unchanged: the cross terms vanish in
    expectation; the increments' spread is small). Plain He keeps E ms(h^l) exactly too
    (tests/test_batch_norm.py), but its draws are heavy-tailed at depth (a product of L
    fluctuating factors: skewness 6.6 at L = 32, N = 48), so that a mean over 64 draws
    sits below it more often than its interval says: not judged."""
    ok = np.all(np.isfinite(ms), axis=1)
    good = ms[ok]
    stats = {
        "mean": good.mean(0).tolist() if ok.any() else [None] * ms.shape[1],
        "se": (good.std(0, ddof=1) / math.sqrt(good.shape[0])).tolist()
        if ok.sum() > 1
        else [None] * ms.shape[1],
        "draws": int(ok.sum()),
        "exploded": int((~ok).sum()),
    }
    if net != TrainNet("pre-activation", "he", "1", "batch"):
        return stats, None
    predicted = float(L)
    inc = mean_interval(good[:, -1] - good[:, 0])
    ci = inc["ci95"]
    return stats, {
        "predicted_increment": predicted,
        "increment": inc["mean"],
        "increment_ci95": ci,
        "draws": inc["draws"],
        "agrees": None if ci is None else bool(ci[0] <= predicted <= ci[1]),
    }


def train_point(cfg, L, master):
    """Every network of `train_architectures(cfg)` at depth L: `train_seeds` draws trained
    together, and `init_draws` draws' scale at initialisation."""
    data = plain.teacher_task(jr.fold_in(master, 10**6), **TASK)
    cells = []
    for index, net in enumerate(train_architectures(cfg)):
        keys = jr.split(jr.fold_in(master, 2 * 10**6 + 1000 * index + L), cfg["train_seeds"])
        alpha = alpha_value(net.alpha, L)
        final, acc, losses = (
            np.asarray(a)
            for a in _train_draws(
                keys, data, alpha, cfg["lr"], net=net, L=L, N=cfg["train_N"],
                steps=cfg["train_steps"],
            )
        )  # fmt: skip
        init_keys = jr.split(
            jr.fold_in(master, 3 * 10**6 + 1000 * index + L), cfg.get("init_draws", INIT_DRAWS)
        )
        ms = np.asarray(
            _init_mean_squares(init_keys, data[0], alpha, net=net, L=L, N=cfg["train_N"])
        )
        scale, check = init_scale(ms, net, L)
        ok = np.isfinite(final)
        cells.append(
            {
                "name": net.name,
                "architecture": net.architecture,
                "activation": "relu",
                "init": net.init,
                "alpha": net.alpha,
                "norm": net.norm,
                "shortcut": net.shortcut,
                "L": L,
                "init_mean_square": scale,
                "init_check": check,
                "train_loss": float(final[ok].mean()) if ok.any() else None,
                "train_loss_std": float(final[ok].std(ddof=1)) if ok.sum() > 1 else None,
                "train_losses": [float(v) if o else None for v, o in zip(final, ok, strict=True)],
                "test_accuracy": float(acc[ok].mean()) if ok.any() else None,
                "test_accuracy_std": float(acc[ok].std(ddof=1)) if ok.sum() > 1 else None,
                "exploded": int((~ok).sum()),
                "draws": int(ok.sum()),
                # the mean over the finite draws (none: no curve, and no empty mean)
                "loss_curve": (
                    losses[ok].mean(0) if ok.any() else np.full(losses.shape[1], np.nan)
                )[:: max(1, cfg["train_steps"] // 100)].tolist(),
            }
        )
    return {"cells": cells}


def degradation_verdict(cells):
    """At the largest depth: is each network's training loss above its shallowest
    depth's by more than twice their combined standard error?"""
    out = {}
    for arch in dict.fromkeys(cell_name(c) for c in cells):
        mine = sorted((c for c in cells if cell_name(c) == arch), key=lambda c: c["L"])
        if len(mine) < 2 or mine[0]["train_loss"] is None or mine[-1]["train_loss"] is None:
            out[arch] = {"degrades": None, "reason": "explosion or fewer than two depths"}
            continue
        a, b = mine[0], mine[-1]
        if a["train_loss_std"] is None or b["train_loss_std"] is None:  # one draw: no spread
            out[arch] = {"degrades": None, "reason": "a depth with fewer than two draws"}
            continue
        se = math.hypot(
            a["train_loss_std"] / math.sqrt(a["draws"]),
            b["train_loss_std"] / math.sqrt(b["draws"]),
        )
        out[arch] = {
            "shallow_L": a["L"],
            "deep_L": b["L"],
            "shallow_loss": a["train_loss"],
            "deep_loss": b["train_loss"],
            "difference_se": se,
            "degrades": bool(b["train_loss"] - a["train_loss"] > 2 * se),
        }
    return out


def init_checks(cells) -> dict:
    """Per network with an exact expectation of its scale at initialisation: at each
    trained depth, the measured increment `ms(h^L) − ms(h^0)` with its 95% interval
    against it, and how many depths agree (the interval holds the expectation)."""
    out = {}
    for c in cells:
        check = c.get("init_check")
        if check is None:
            continue
        rec = out.setdefault(c["name"], {"agree": 0, "judged": 0, "depths": []})
        rec["depths"].append({"L": c["L"], **check})
        if check["agrees"] is not None:
            rec["judged"] += 1
            rec["agree"] += int(check["agrees"])
    return out


def init_headline(checks) -> str:
    """The headline line of the initial-scale checks."""
    if not checks:
        return "scale at initialisation: no network with an exact expectation was trained"
    parts = []
    for name, rec in checks.items():
        deep = max(rec["depths"], key=lambda d: d["L"])
        ci = deep["increment_ci95"]
        at = "no interval"
        if ci is not None:
            at = (
                f"{deep['increment']:.3g} [{ci[0]:.3g}, {ci[1]:.3g}] against "
                f"{deep['predicted_increment']:g} at L = {deep['L']}"
            )
        parts.append(f"{name} {rec['agree']} of {rec['judged']} depths ({at})")
    return (
        "ms(h^L) - ms(h^0) at initialisation, the exact expectation inside its 95% "
        "interval: " + "; ".join(parts)
    )


SHORTCUT_PAIR = ("post-activation, zero-pad shortcut", "post-activation, projection shortcut")


def shortcut_comparison(cells) -> list[dict]:
    """At each depth where both widening residual networks were trained: the difference
    of their mean log final training loss (projection − zero-pad) over their independent
    draws, with Welch's 95% interval (`difference_interval`), and the lower one
    (`lower_arm`: "not resolved" where the interval holds 0). He et al. (2015, Table 3)
    found projections (B) slightly better than zero-padding (A) on ImageNet."""
    by = {(c.get("name"), c["L"]): c for c in cells}
    out = []
    for L in sorted({c["L"] for c in cells}):
        a, b = by.get((SHORTCUT_PAIR[0], L)), by.get((SHORTCUT_PAIR[1], L))
        if a is None or b is None:
            continue
        logs = [
            [math.log(v) if v is not None and v > 0 else math.nan for v in c["train_losses"]]
            for c in (a, b)
        ]
        interval = difference_interval(*logs)
        out.append({"L": L, **interval, "lower": lower_arm(interval, ("zero-pad", "projection"))})
    return out


def shortcut_headline(comparison) -> str:
    """The headline line of the shortcut comparison (empty without `--projection`)."""
    if not comparison:
        return ""
    parts = []
    for c in comparison:
        ci = c["ci95"]
        text = "no interval" if ci is None else (
            f"{c['difference']:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"
        )  # fmt: skip
        parts.append(f"L = {c['L']}: {text} ({c['lower']})")
    return "log training loss, projection minus zero-pad shortcut (lower one): " + "; ".join(parts)
