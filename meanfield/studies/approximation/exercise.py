"""The parameter-budget exercise of `meanfield study approximation` (the lecture "Universal
approximation & going deep": "on a 784 → ? → 10 classifier", one hidden layer of 2048
units against eight of 128): both networks' parameter counts at 784 inputs, exact, against
the lecture's "~1.63 M" and "~0.22 M", and its "deep-narrow typically wins on natural data"
measured on scikit-learn's digits (64 inputs, offline), by Welch's interval on the test
errors of independently initialised networks.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from ...io.datasets import load_digits
from ...stats.compare import difference_interval, lower_arm
from ...training.approximation import fit_mlp, mlp_parameters, predict, sample_mlp

# (width, hidden layers) of the lecture's two classifiers, the input dimension it counts
# at, its stated counts, and the Adam learning rates tried
EXERCISE = {"shallow-wide": (2048, 1), "deep-narrow": (128, 8)}
EXERCISE_INPUTS, EXERCISE_CLASSES = 784, 10
EXERCISE_LECTURE = {"shallow-wide": 1.63e6, "deep-narrow": 0.22e6, "ratio": 7.0}
EXERCISE_LRS = (1e-3, 3e-3)
# the digits' training images (1797, 20% held out)
DIGITS_TRAIN = 1438


def exercise_cost(cfg):
    """The exercise's estimated cost (`args.Cost`): every (learning rate, seed) network of
    an architecture trained at once on the digits' training images (64 inputs)."""
    from ...harness.args import PYTHON_STEP, Cost

    nets = cfg["exercise_seeds"] * len(EXERCISE_LRS)
    ex_work, ex_memory, ex_elements = 0.0, 0.0, 0.0
    for width, depth in EXERCISE.values():
        params = mlp_parameters(64, width, depth, EXERCISE_CLASSES)
        ex_work += nets * (6.0 * cfg["exercise_steps"] * DIGITS_TRAIN * params + PYTHON_STEP)
        ex_memory = max(ex_memory, nets * 8.0 * (2 * DIGITS_TRAIN * width * depth + 4 * params
                                                 + cfg["exercise_steps"]))  # fmt: skip
        ex_elements = max(ex_elements, nets * DIGITS_TRAIN * width)
    return Cost("--exercise-seeds/--exercise-steps", "the parameter-budget exercise",
                memory=ex_memory, work=ex_work, elements=ex_elements,
                array="the hidden activations of an architecture's networks")  # fmt: skip


@eqx.filter_jit
def _train_classifiers(keys, lrs, data, *, width, depth, steps):
    """Every (learning rate, initialisation) classifier trained on the digits: test
    errors and final training cross-entropies, each `(lrs, seeds)`."""
    x, y, x_test, y_test = data

    def one(key, lr):
        model = sample_mlp(key, d=x.shape[1], width=width, depth=depth, outputs=EXERCISE_CLASSES)
        model, losses = fit_mlp(model, x, y, steps=steps, lr=lr, loss="cross_entropy")
        wrong = jnp.argmax(predict(model, x_test), axis=-1) != y_test
        error = jnp.mean(wrong.astype(x.dtype))  # k/359 exactly in float64
        logits = predict(model, x)
        final = jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))
        return error, final

    return jax.vmap(lambda lr: jax.vmap(lambda k: one(k, lr))(keys))(lrs)


def exercise_point(cfg, master, steps=None) -> dict:
    """The parameter-budget exercise (module docstring): per architecture, its parameter
    counts at 784 and at the digits' 64 inputs, and each network's test error at the
    learning rate with the lowest mean final training loss."""
    steps = cfg["exercise_steps"] if steps is None else steps
    dtype = jnp.result_type(float)
    digits = load_digits(jr.fold_in(master, 7_841_000))
    data = (jnp.asarray(digits.x_train, dtype), jnp.asarray(digits.y_train),
            jnp.asarray(digits.x_test, dtype), jnp.asarray(digits.y_test))  # fmt: skip
    lrs = jnp.asarray(EXERCISE_LRS, dtype)
    arms = []
    for index, (name, (width, depth)) in enumerate(EXERCISE.items()):
        keys = jr.split(jr.fold_in(master, 7_842_000 + index), cfg["exercise_seeds"])
        error, final = (
            np.asarray(a, dtype=float)
            for a in _train_classifiers(keys, lrs, data, width=width, depth=depth, steps=steps)
        )
        ok = np.isfinite(final)
        means = [
            float(f[o].mean()) if o.any() else math.inf for f, o in zip(final, ok, strict=True)
        ]
        best = int(np.argmin(means))

        def kept(values, ok=ok[best]):
            return [float(v) if o else None for v, o in zip(values, ok, strict=True)]

        arms.append({
            "name": name, "width": width, "depth": depth,
            "parameters": mlp_parameters(digits.n_features, width, depth, EXERCISE_CLASSES),
            "parameters_784": mlp_parameters(EXERCISE_INPUTS, width, depth, EXERCISE_CLASSES),
            "lr": EXERCISE_LRS[best],
            "test_error": kept(error[best]),
            "train_loss": kept(final[best]),
            "exploded": int((~ok[best]).sum()),
        })  # fmt: skip
    return {"exercise": "digits", "data": str(digits), "steps": steps, "arms": arms}


def exercise_comparison(point) -> dict:
    """Deep-narrow against shallow-wide: the difference of mean test errors (deep −
    shallow) with Welch's 95% interval over the networks, the lower one ("not resolved"
    where the interval holds 0), and the parameter counts at 784 inputs against the
    lecture's."""
    by = {a["name"]: a for a in point["arms"]}
    shallow, deep = by["shallow-wide"], by["deep-narrow"]
    out = difference_interval(
        [v for v in shallow["test_error"] if v is not None],
        [v for v in deep["test_error"] if v is not None],
    )
    out["lower"] = lower_arm(out, ("shallow-wide", "deep-narrow"))
    out["parameters_784"] = {a["name"]: a["parameters_784"] for a in point["arms"]}
    out["ratio_784"] = shallow["parameters_784"] / deep["parameters_784"]
    out["lecture"] = EXERCISE_LECTURE
    return out


def exercise_headline(c) -> str:
    counts = c["parameters_784"]
    ci = c["ci95"]
    measured = "no interval" if ci is None else (
        f"{c['difference']:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"
    )  # fmt: skip
    return (
        f"784 → ? → 10: 784→2048→10 has {counts['shallow-wide']:,} parameters, 784→128×8→10 "
        f"{counts['deep-narrow']:,} ({c['ratio_784']:.2f}×; the lecture: ~1.63 M, ~0.22 M, "
        f"7×); on the digits, test error deep − shallow {measured}, lower: {c['lower']}"
    )


def lecture_square_text(built: dict) -> str:
    """The headline's words on the lecture's x²-from-4-ReLUs table (`constructions`'
    `lecture_square`): its printed weights measured, flagged as the lecture's slip, and
    the interpolant's weights beside them."""
    t = built["lecture_square"]
    printed = ", ".join(f"{v:g}" for v in t["printed_weights"])
    right = ", ".join(f"{v:g}" for v in t["corrected_weights"])
    return (
        f"the lecture's table for x² from 4 ReLUs is off: its weights ({printed}) give "
        f"f(1) = {t['printed_f_at_1']:g} (max error {t['printed_max_error']:.3g}); the "
        f"interpolant's are ({right}), max error {t['corrected_max_error']:g} (1/(4p²) at p = 4)"
    )
