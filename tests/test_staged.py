"""Networks that widen along depth, with zero-padding and projection shortcuts (seed 003's
"projection shortcuts when shapes change"): the forward pass against a NumPy loop, the
stage depths, gradients against `jax.grad` of a plain loop, training, the refusals, and
the study's shortcut comparison fed contradicting draws."""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.models import staged as S
from meanfield.training import plain as P_training


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _relu(u):
    return np.maximum(u, 0.0)


def _numpy_forward(model, x):
    """The states of one input, layer by layer in NumPy, from the model's arrays."""
    arch, alpha = model.first.architecture, model.first.alpha

    def square(h, W, b):
        if arch == "plain":
            return _relu(W @ h + b)
        if arch == "post-activation":
            return _relu(h + alpha * (W @ h + b))
        return h + alpha * (W @ _relu(h) + b)

    h = np.asarray(model.A) @ x
    states = [h]
    for W, b in zip(np.asarray(model.first.W), np.asarray(model.first.b), strict=True):
        h = square(h, W, b)
        states.append(h)
    W, b = np.asarray(model.W), np.asarray(model.b)
    if model.shortcut == "none":
        h = _relu(W @ h + b)
    else:
        skip = np.concatenate([h, np.zeros(W.shape[0] - h.size)])
        if model.shortcut == "projection":
            skip = np.asarray(model.S) @ h
        h = skip + alpha * (W @ _relu(h) + b) if arch == "pre-activation" else _relu(
            skip + alpha * (W @ h + b)
        )  # fmt: skip
    states.append(h)
    for W, b in zip(np.asarray(model.second.W), np.asarray(model.second.b), strict=True):
        h = square(h, W, b)
        states.append(h)
    return states


CASES = [
    ("plain", "none"),
    ("post-activation", "zero-pad"),
    ("post-activation", "projection"),
    ("pre-activation", "projection"),
]


@pytest.mark.parametrize(("arch", "shortcut"), CASES)
@pytest.mark.parametrize("L", [1, 2, 7])
def test_forward_against_a_numpy_loop(arch, shortcut, L):
    # the study's sizes: width 48 (24 before widening), 16 inputs, 40 of them
    model = S.StagedClassifier.sample(jr.key(L), d_in=16, classes=4, L=L, N=48,
                                      architecture=arch, shortcut=shortcut, alpha=0.6)  # fmt: skip
    model = jax.tree.map(lambda a: a + 0.05 if jnp.ndim(a) == 1 else a, model)  # biases != 0
    xs = jr.normal(jr.key(99), (40, 16))
    want = [_numpy_forward(model, x) for x in np.asarray(xs)]
    assert len(want[0]) == L + 1
    assert [s.size for s in want[0]] == [24] * (L // 2 + 1) + [48] * (L - L // 2)
    logits = np.asarray(jax.jit(lambda m, x: m(x))(model, xs))
    np.testing.assert_allclose(logits, [np.asarray(model.C) @ w[-1] for w in want], rtol=1e-11,
                               atol=1e-12)  # fmt: skip
    ms = np.asarray(model.mean_squares(xs))
    expected = [np.mean([np.mean(w[l] ** 2) for w in want]) for l in range(L + 1)]
    np.testing.assert_allclose(ms, expected, rtol=1e-11)


def test_stage_depths_put_the_widening_layer_halfway():
    assert [S.stage_depths(L) for L in (1, 2, 3, 8, 9)] == [(0, 0), (1, 0), (1, 1), (4, 3), (4, 4)]
    for L in range(1, 20):
        before, after = S.stage_depths(L)
        assert before + 1 + after == L


def test_zero_pad_shortcut_carries_the_input_with_no_branch():
    """With α = 0 the zero-padding shortcut is the identity on the first N1 units (then
    ReLU, post-activation) and zero elsewhere; the projection is S h."""
    model = S.StagedClassifier.sample(jr.key(1), d_in=4, classes=2, L=1, N=10,
                                      shortcut="zero-pad", alpha=0.0)  # fmt: skip
    h = jr.normal(jr.key(2), (5,))
    np.testing.assert_array_equal(np.asarray(model._widen(h)),
                                  np.concatenate([_relu(np.asarray(h)), np.zeros(5)]))  # fmt: skip
    proj = S.StagedClassifier.sample(jr.key(1), d_in=4, classes=2, L=1, N=10,
                                     shortcut="projection", alpha=0.0)  # fmt: skip
    np.testing.assert_allclose(np.asarray(proj._widen(h)), _relu(np.asarray(proj.S @ h)))


def test_gradients_against_jax_grad_of_a_plain_loop():
    model = S.StagedClassifier.sample(jr.key(3), d_in=5, classes=3, L=4, N=12,
                                      shortcut="projection", alpha=0.5)  # fmt: skip
    xs, labels = jr.normal(jr.key(4), (9, 5)), jr.randint(jr.key(5), (9,), 0, 3)

    def loop_loss(A, W1, Wt, St, W2, C):
        H = xs @ A.T
        for W in W1:
            H = jax.nn.relu(H + 0.5 * H @ W.T)
        H = jax.nn.relu(H @ St.T + 0.5 * H @ Wt.T)
        for W in W2:
            H = jax.nn.relu(H + 0.5 * H @ W.T)
        logits = H @ C.T
        logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    from meanfield.models.plain import cross_entropy

    want = jax.grad(loop_loss, argnums=tuple(range(6)))(
        model.A, model.first.W, model.W, model.S, model.second.W, model.C
    )
    g = jax.grad(cross_entropy)(model, xs, labels)
    for got, w in zip((g.A, g.first.W, g.W, g.S, g.second.W, g.C), want, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("shortcut", ["zero-pad", "projection"])
def test_training_trains_every_part_and_learns(shortcut):
    from meanfield.models.plain import teacher_task

    data = teacher_task(jr.key(6), d_in=4, classes=3, n_train=64, n_test=64, width=8)
    model = S.StagedClassifier.sample(jr.key(7), d_in=4, classes=3, L=4, N=16,
                                      shortcut=shortcut, alpha=0.5)  # fmt: skip
    trained, losses, acc = P_training.train_classifier(model, data, steps=150, lr=1e-2)
    assert float(losses[-1]) < 0.5 * float(losses[0])
    parts = ["A", "W", "b", "C"] + (["S"] if shortcut == "projection" else [])
    for name in parts:
        assert float(jnp.max(jnp.abs(getattr(trained, name) - getattr(model, name)))) > 1e-4
    assert float(jnp.max(jnp.abs(trained.first.W - model.first.W))) > 1e-4
    assert trained.first.alpha == model.first.alpha  # α is not trained
    assert 0 <= float(acc) <= 1


def test_refusals_name_the_argument():
    kw = {"d_in": 3, "classes": 2, "L": 3, "N": 8}
    with pytest.raises(ValueError, match="^shortcut='none': a post-activation network"):
        S.StagedClassifier.sample(jr.key(0), shortcut="none", **kw)
    with pytest.raises(ValueError, match="^shortcut='zero-pad': a plain network"):
        S.StagedClassifier.sample(jr.key(0), architecture="plain", shortcut="zero-pad", **kw)
    with pytest.raises(ValueError, match="^shortcut='identity'"):
        S.StagedClassifier.sample(jr.key(0), shortcut="identity", **kw)
    with pytest.raises(ValueError, match="^N=1"):
        S.StagedClassifier.sample(jr.key(0), d_in=3, classes=2, L=3, N=1)
    with pytest.raises(ValueError, match="^L must be a positive integer"):
        S.StagedClassifier.sample(jr.key(0), d_in=3, classes=2, L=0, N=8)
    model = S.StagedClassifier.sample(jr.key(0), shortcut="projection", **kw)
    with pytest.raises(ValueError, match="^S: "):
        S.StagedClassifier(model.A, model.first, model.W, model.b, None, model.second, model.C,
                           "projection")  # fmt: skip
    with pytest.raises(ValueError, match="^S"):
        S.StagedClassifier(model.A, model.first, model.W, model.b, model.S * jnp.nan,
                           model.second, model.C, "projection")  # fmt: skip


def test_the_shortcut_comparison_reads_the_draws_and_can_go_either_way():
    """Projection − zero-pad in mean log training loss, Welch's interval over the draws:
    draws with projection clearly lower say "projection", the reverse "zero-pad", equal
    laws "not resolved"; an exploded draw (None) is left out."""
    from meanfield.studies.plain_vs_residual.degradation import (
        SHORTCUT_PAIR,
        shortcut_comparison,
        shortcut_headline,
    )

    rng = np.random.default_rng(0)

    def cells(shift):
        out = []
        for name, s in zip(SHORTCUT_PAIR, (0.0, shift), strict=True):
            losses = list(np.exp(rng.normal(math.log(0.1) + s, 0.1, 8)))
            out.append({"name": name, "L": 8, "train_losses": [*losses, None]})
        return out

    (lower,) = shortcut_comparison(cells(-1.0))
    assert lower["lower"] == "projection" and lower["draws"] == [8, 8]
    assert lower["ci95"][0] < -1.0 < lower["ci95"][1] or abs(lower["difference"] + 1) < 0.3
    assert shortcut_comparison(cells(+1.0))[0]["lower"] == "zero-pad"
    assert shortcut_comparison(cells(0.0))[0]["lower"] == "not resolved"
    assert shortcut_comparison([cells(0.0)[0]]) == []
    assert "L = 8" in shortcut_headline([lower]) and shortcut_headline([]) == ""
