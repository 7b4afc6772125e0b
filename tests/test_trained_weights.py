"""Res-1 networks trained on data (`meanfield.models.res1`) and `meanfield study trained-weights`:
the forward pass against a plain loop, training on the offline digits, explosions
reported, early stopping, and the study end to end with its refusals."""

import json
import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.io.datasets import load_digits
from meanfield.laws.depth import FractionalBrownianLaw, IIDGaussianLaw, SmoothGPLaw
from meanfield.models import res1
from meanfield.studies import StudyInputError, run_study
from meanfield.training import res1 as res1_training


@pytest.fixture(scope="module")
def digits():
    ds = load_digits(0)
    return ds, (ds.x_train, ds.y_train, ds.x_test, ds.y_test)


def test_forward_is_the_res1_recursion(key):
    """logits = B h_L, h_k = h_{k-1} + L^-β V_k σ(h_{k-1}), h_0 = A x: a NumPy loop."""
    L, d, beta = 7, 5, 0.75
    model = res1.Res1Classifier.sample(
        key, IIDGaussianLaw(d), L=L, d_in=3, classes=4, beta=beta, activation="tanh"
    )
    x = np.asarray(jr.normal(jr.key(1), (6, 3)))
    A, V, B = (np.asarray(a) for a in (model.A, model.V, model.B))
    h = x @ A.T
    for k in range(L):
        h = h + L**-beta * np.tanh(h) @ V[k].T
    np.testing.assert_allclose(model(x), h @ B.T, rtol=1e-12, atol=1e-12)
    assert float(model.scale) == pytest.approx(L**-beta)


# the training of `test_training_learns_the_digits`, compiled once for its three laws (the
# law only draws the initial weights: the networks, and so the program, are the same)
_train_two = jax.jit(
    jax.vmap(
        lambda m, k, data: res1_training.train_res1(m, data, key=k, steps=200, lr=3e-3),
        in_axes=(0, 0, None),
    )
)


@pytest.mark.parametrize(
    "law", [IIDGaussianLaw(16), SmoothGPLaw(16), FractionalBrownianLaw(16, 0.7)], ids=str
)
def test_training_learns_the_digits(digits, law):
    """200 Adam steps of a depth-32 network reach well above chance (0.1) on the held-out
    digits; minibatch losses fall; nothing explodes; vmapped over two networks."""
    _, data = digits
    models = [
        res1.Res1Classifier.sample(jr.key(s), law, L=32, d_in=64, classes=10, beta=0.5)
        for s in range(2)
    ]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *models)
    out = _train_two(stacked, jr.split(jr.key(2), 2), data)
    acc = np.asarray(out.test_accuracy)
    assert np.all(acc > 0.85), acc
    assert not np.any(np.asarray(out.exploded))
    losses = np.asarray(out.losses)
    assert np.all(losses[:, -20:].mean(1) < 0.3 * losses[:, :20].mean(1))
    assert np.all(np.asarray(out.steps_run) == 200)


def test_explosion_is_reported_not_averaged(digits):
    """A network whose forward pass overflows stops updating at once: exploded, steps_run
    0, NaN losses, the weights those it started with."""
    _, data = digits
    model = res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(8), L=32, d_in=64,
                                       classes=10, beta=0.0, activation="identity")  # fmt: skip
    model = res1.Res1Classifier(model.A, 1e10 * model.V, model.B, model.scale, "identity")
    out = res1_training.train_res1(model, data, key=jr.key(1), steps=20)
    assert bool(out.exploded) and int(out.steps_run) == 0
    assert np.all(np.isnan(np.asarray(out.losses)))
    np.testing.assert_array_equal(out.model.V, model.V)


def test_an_explosion_returns_the_last_model_with_a_finite_loss(digits):
    """SGD at a rate that overflows the loss at the 4th step: the model returned is the one
    before the update that overflowed (the 3rd), whose loss was finite; not the one whose
    loss overflowed."""
    _, data = digits
    model = res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(8), L=8, d_in=64,
                                       classes=10, beta=0.0, activation="identity")  # fmt: skip
    run = lambda steps: res1_training.train_res1(model, data, key=jr.key(1), steps=steps,  # noqa: E731
                                        optimizer="sgd", lr=10.0)  # fmt: skip
    out = run(30)
    assert bool(out.exploded) and int(out.steps_run) == 3
    losses = np.asarray(out.losses)
    assert np.all(np.isfinite(losses[:3])) and np.all(np.isnan(losses[3:]))
    before = run(2)  # the parameters after 2 updates: their loss (the 3rd) was finite
    assert not bool(before.exploded)
    for name in ("A", "V", "B"):
        np.testing.assert_array_equal(getattr(out.model, name), getattr(before.model, name))


@pytest.mark.runs_long
def test_early_stopping_keeps_the_best_validation_model(digits):
    """With a validation share and patience, training stops early and returns the model of
    the best validation accuracy (not the last one)."""
    _, data = digits
    model = res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(16), L=32, d_in=64,
                                       classes=10, beta=0.5)  # fmt: skip
    out = res1_training.train_res1(model, data, key=jr.key(3), steps=3000, lr=1e-2, validation=200,
                          eval_every=20, patience=3)  # fmt: skip
    assert int(out.steps_run) < 3000
    assert float(out.test_accuracy) > 0.85
    nan = np.isnan(np.asarray(out.losses))
    assert nan[int(out.steps_run) :].all() and not nan[: int(out.steps_run)].any()


def test_validation_evaluates_after_the_last_step(digits):
    """Fewer steps than `eval_every`: the model after the last update is evaluated and kept
    when it beats the untrained one (before, the untrained model came back silently)."""
    _, data = digits
    model = res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(16), L=8, d_in=64,
                                       classes=10, beta=0.5)  # fmt: skip
    untrained = float(res1.accuracy(model, data[2], data[3]))
    out = res1_training.train_res1(model, data, key=jr.key(3), steps=40, lr=1e-2, validation=200,
                          eval_every=50)  # fmt: skip
    assert untrained < 0.3 < float(out.test_accuracy)
    with pytest.raises(ValueError, match="^patience: "):
        res1_training.train_res1(model, data, key=jr.key(0), steps=2, patience=3)


def test_bad_arguments_are_refused(digits):
    _, data = digits
    model = res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(4), L=4, d_in=64,
                                       classes=10, beta=0.5)  # fmt: skip
    with pytest.raises(ValueError, match="^optimizer="):
        res1_training.train_res1(model, data, key=jr.key(0), steps=2, optimizer="rmsprop")
    with pytest.raises(ValueError, match="^batch_size: "):
        res1_training.train_res1(model, data, key=jr.key(0), steps=2, batch_size=10**6)
    with pytest.raises(ValueError, match="^lr: "):
        res1_training.train_res1(model, data, key=jr.key(0), steps=2, lr=math.nan)
    with pytest.raises(ValueError, match="^beta: "):
        res1.Res1Classifier.sample(jr.key(0), IIDGaussianLaw(4), L=4, d_in=2, classes=2,
                                   beta=-1.0)  # fmt: skip
    with pytest.raises(ValueError, match="^law: "):
        res1.Res1Classifier.sample(jr.key(0), "iid", L=4, d_in=2, classes=2, beta=0.5)


def test_study_end_to_end_and_refusals(tmp_path, self_checked):
    """A small study: every (init, H, β) cell with accuracies and regularities; the i.i.d.
    partial sums read 1/2 before training and the fBm ones H, the smooth weights ≈ 1; the
    figures are written; bad options are refused in one line before any folder is made."""
    out = tmp_path / "tw"
    res = run_study(
        "trained-weights", out=str(out), L=32, d=8, betas=[0.5, 1.0], hursts=[0.7],
        steps=150, seeds=2, no_progress=True,
    )  # fmt: skip
    self_checked(res)
    cells = res["cells"]
    assert len(cells) == 2 * 3
    for c in cells:
        assert c["test_accuracy"]["mean"] > 0.5 and c["exploded"] == 0
        before = c["regularity_cumulative_before"]["hurst"]
        expected = {"iid": 0.5, "smooth": 1.0, "fbm": 0.7}[c["init"]]
        assert abs(before - expected) < 0.1, (c["init"], before)
        assert len(c["regularity_update"]["per_network"]) == 2
        assert len(c["example_path"]["after"]) == 32
    assert res["best_test_accuracy"]["value"] > 0.8
    assert len(res["regularity_statement"]["lines"]) == 3
    for name in ("weights_along_depth.png", "accuracy_heatmap.png", "regularity.png"):
        assert (out / name).stat().st_size > 10_000
    assert json.loads((out / "results.json").read_text())["study"] == "trained-weights"
    for bad, match in (
        (dict(inits="iid,relu"), "^--inits: "),
        (dict(hursts=[0.5, 1.5]), "^--hursts: "),
        (dict(L=16), "^--L: "),
        (dict(L=48, inits="fbm"), "^--L: "),
        (dict(data=str(tmp_path / "missing.npz")), "^--data: "),
        (dict(seeds=1), "^--seeds: "),
    ):
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("trained-weights", out=str(target), **bad)
        assert not target.exists()


def _init(update, before, after):
    from meanfield.stats.fits import line_fit

    betas = [0.0, 0.5, 1.0]
    e = {"beta": betas, "update": update, "cumulative_before": before,
         "cumulative_after": after}  # fmt: skip
    e["update_slope_in_beta"] = line_fit(betas, update)[0]
    e["update_rises_with_beta"] = all(b > a for a, b in zip(update, update[1:], strict=False))
    e["update_falls_with_beta"] = all(b < a for a, b in zip(update, update[1:], strict=False))
    return e


def test_the_conclusion_is_computed_and_says_the_opposite_on_opposite_data():
    """Fed indices that rise with β, fall with β, or neither, and starting regularities
    that differ or not, the conclusion says each; it never states a trend the numbers
    do not have."""
    from meanfield.studies.trained_weights.study import regularity_conclusion

    betas = [0.0, 0.5, 1.0]
    rising = {"iid": _init([0.5, 0.6, 0.7], [0.5] * 3, [0.52, 0.6, 0.8]),
              "smooth": _init([0.6, 0.8, 0.9], [1.0] * 3, [1.0, 0.95, 0.7])}  # fmt: skip
    text, f = regularity_conclusion(rising, betas)
    assert f["update_trend_in_beta"] == "rises" and "smoother the larger β" in text
    assert f["starting_regularity_differs"] and f["moves_more_at_largest_beta"]
    assert "the initialisation sets the starting regularity" in text
    falling = {k: _init(e["update"][::-1], e["cumulative_before"], e["cumulative_after"])
               for k, e in rising.items()}  # fmt: skip
    text, f = regularity_conclusion(falling, betas)
    assert f["update_trend_in_beta"] == "falls" and "rougher the larger β" in text
    assert "smoother" not in text
    mixed = {"iid": rising["iid"], "smooth": falling["smooth"]}
    text, f = regularity_conclusion(mixed, betas)
    assert f["update_trend_in_beta"] == "mixed" and "rises with β for 1, falls for 1 of 2" in text
    same_start = {"a": _init([0.5, 0.6, 0.7], [0.5] * 3, [0.7, 0.6, 0.5]),
                  "b": _init([0.5, 0.6, 0.7], [0.51] * 3, [0.71, 0.6, 0.52])}  # fmt: skip
    text, f = regularity_conclusion(same_start, betas)
    assert not f["starting_regularity_differs"] and not f["moves_more_at_largest_beta"]
    assert "neither the initialisation nor β sets it apart" in text
    assert "sets the starting regularity" not in text


def test_the_per_initialisation_statement_follows_the_cells():
    """`_statement` itself, on cells whose update index rises with β for one initialisation
    and falls for the other: each entry says which, and the conclusion is mixed."""
    from meanfield.studies.trained_weights.study import _statement

    def cell(init, beta, update):
        r = lambda h: {"hurst": h, "interval": [h - 0.05, h + 0.05]}  # noqa: E731
        return {"init": init, "hurst": None, "beta": beta, "regularity_before": r(0.5),
                "regularity_after": r(0.55), "regularity_cumulative_before": r(0.5),
                "regularity_cumulative_after": r(0.6), "regularity_update": r(update)}  # fmt: skip

    betas = [0.0, 0.5, 1.0]
    cells = [cell("iid", b, u) for b, u in zip(betas, [0.3, 0.5, 0.7], strict=True)]
    cells += [cell("smooth", b, u) for b, u in zip(betas, [0.9, 0.7, 0.4], strict=True)]
    out = _statement({"betas": betas}, cells)
    iid, smooth = out["per_init"]["iid"], out["per_init"]["smooth"]
    assert iid["update_rises_with_beta"] and not iid["update_falls_with_beta"]
    assert smooth["update_falls_with_beta"] and not smooth["update_rises_with_beta"]
    assert iid["update_slope_in_beta"] > 0 > smooth["update_slope_in_beta"]
    assert out["findings"]["update_trend_in_beta"] == "mixed"


def test_cells_with_exploded_networks_are_warned():
    """Issue 74: a cell where trained networks exploded is named with its count in a
    warning (they are left out of its accuracies); cells without explosions are not."""
    from meanfield.studies.trained_weights.study import exploded_warning

    cells = [
        {"init": "iid", "hurst": None, "beta": 0.5, "draws": 4, "exploded": 0},
        {"init": "fbm", "hurst": 0.7, "beta": 0.25, "draws": 4, "exploded": 3},
    ]
    assert exploded_warning(cells[:1]) is None
    warning = exploded_warning(cells)
    assert (
        warning is not None
        and "in 1 cell(s)" in warning
        and "fbm H=0.7 beta=0.25: 3 of 4" in warning
    )
