"""Batch normalisation in the plain and residual networks (seed 003's `Linear → BatchNorm →
ReLU`; seed 001's "batch normalization or scaling"): the batch forward against a NumPy
loop, the reference batch's statistics, gradients against `jax.grad` of a plain loop, the
exact law of the mean square at initialisation, and the refusals."""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.models import plain as P
from meanfield.training import plain as P_training


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _relu(u):
    return np.maximum(u, 0.0)


def _numpy_layers(arch, W, b, gamma, alpha, H, count):
    """The batch forward written out layer by layer in NumPy (float64)."""
    hs = [H]
    for l in range(W.shape[0]):
        u = H if arch != "pre-activation" else _relu(H)
        v = u @ W[l].T
        if gamma is not None:
            ref = v[:count]
            v = (v - ref.mean(0)) / np.sqrt(ref.var(0) + P.BATCH_NORM_EPS) * gamma[l]
        v = v + b[l]
        if arch == "plain":
            H = _relu(v)
        elif arch == "post-activation":
            H = _relu(H + alpha * v)
        else:
            H = H + alpha * v
        hs.append(H)
    return np.stack(hs)


def _random_net(key, arch, *, L=5, N=24, norm="batch"):
    kw, kb, kg = jr.split(key, 3)
    W = jr.normal(kw, (L, N, N)) * math.sqrt(2 / N)
    b = 0.1 * jr.normal(kb, (L, N))
    gamma = None if norm is None else 1 + 0.3 * jr.normal(kg, (L, N))
    return P.LayeredNet(W, b, 0.7, arch, "relu", gamma=gamma, norm=norm)


@pytest.mark.parametrize("arch", P.ARCHITECTURES)
@pytest.mark.parametrize("count", [40, 25])
def test_batch_forward_against_a_numpy_loop(arch, count):
    # sizes where XLA tiles the matrix products (n = 40 rows, N = 24 units, L = 5)
    net = _random_net(jr.key(1), arch)
    xs = jr.normal(jr.key(2), (40, 24))
    hs, _ = net.batch_layers(xs, count=count)
    want = _numpy_layers(arch, *(np.asarray(a) for a in (net.W, net.b, net.gamma)), 0.7,
                         np.asarray(xs), count)  # fmt: skip
    np.testing.assert_allclose(np.asarray(hs), want, rtol=1e-12, atol=1e-12)
    # compiled (fused) and eager agree too
    hs_jit, _ = jax.jit(lambda n, x: n.batch_layers(x, count=count))(net, xs)
    np.testing.assert_allclose(np.asarray(hs_jit), want, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("arch", P.ARCHITECTURES)
def test_without_norm_each_row_is_mapped_alone(arch):
    net = _random_net(jr.key(3), arch, norm=None)
    xs = jr.normal(jr.key(4), (7, 24))
    hs, pre = net.batch_layers(xs)
    one_hs, one_pre = jax.vmap(net.layers)(xs)
    np.testing.assert_allclose(np.asarray(hs), np.moveaxis(np.asarray(one_hs), 0, 1), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(pre), np.moveaxis(np.asarray(one_pre), 0, 1), rtol=1e-13)


def test_test_inputs_take_the_reference_batchs_statistics():
    model = P.Classifier.sample(jr.key(5), d_in=6, classes=3, L=4, N=16,
                                architecture="pre-activation", alpha=1.0, norm="batch")  # fmt: skip
    train, test = jr.normal(jr.key(6), (30, 6)), jr.normal(jr.key(7), (9, 6))
    with_ref = np.asarray(model(test, reference=train))
    A, C = np.asarray(model.A), np.asarray(model.C)
    net = model.net
    H = np.concatenate([np.asarray(train), np.asarray(test)]) @ A.T
    hs = _numpy_layers("pre-activation", np.asarray(net.W), np.asarray(net.b),
                       np.asarray(net.gamma), 1.0, H, 30)  # fmt: skip
    np.testing.assert_allclose(with_ref, hs[-1][30:] @ C.T, rtol=1e-12, atol=1e-12)
    # the test batch's own statistics give other logits; the training set with itself as
    # reference is the training-mode forward
    assert np.max(np.abs(np.asarray(model(test)) - with_ref)) > 1e-3
    np.testing.assert_allclose(np.asarray(model(train, reference=train)), np.asarray(model(train)),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    # one test input at a time gives the same logits as the whole test batch
    one = np.concatenate([np.asarray(model(test[i : i + 1], reference=train)) for i in range(9)])
    np.testing.assert_allclose(one, with_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch", P.ARCHITECTURES)
def test_gradients_against_jax_grad_of_a_plain_loop(arch):
    model = P.Classifier.sample(jr.key(8), d_in=5, classes=3, L=3, N=12, architecture=arch,
                                alpha=0.5, norm="batch")  # fmt: skip
    model = jax.tree.map(lambda a: a, model)
    xs, labels = jr.normal(jr.key(9), (20, 5)), jr.randint(jr.key(10), (20,), 0, 3)

    def loop_loss(A, W, b, g, C):
        H = xs @ A.T
        for l in range(W.shape[0]):
            u = jax.nn.relu(H) if arch == "pre-activation" else H
            v = u @ W[l].T
            mean, var = v.mean(0, keepdims=True), v.var(0, keepdims=True)
            v = (v - mean) / jnp.sqrt(var + P.BATCH_NORM_EPS) * g[l][None] + b[l][None]
            H = {"plain": jax.nn.relu(v), "post-activation": jax.nn.relu(H + 0.5 * v),
                 "pre-activation": H + 0.5 * v}[arch]  # fmt: skip
        logits = H @ C.T
        logp = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    net = model.net
    want = jax.grad(loop_loss, argnums=(0, 1, 2, 3, 4))(model.A, net.W, net.b, net.gamma, model.C)
    got = jax.grad(P.cross_entropy)(model, xs, labels)
    for g, w in zip((got.A, got.net.W, got.net.b, got.net.gamma, got.C), want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12)


def test_training_trains_gamma_and_learns():
    data = P.teacher_task(jr.key(11), d_in=4, classes=3, n_train=64, n_test=64, width=8)
    model = P.Classifier.sample(jr.key(12), d_in=4, classes=3, L=4, N=8,
                                architecture="plain", alpha=1.0, norm="batch")  # fmt: skip
    trained, losses, acc = P_training.train_classifier(model, data, steps=200, lr=1e-2)
    assert float(losses[-1]) < 0.5 * float(losses[0])
    assert float(jnp.max(jnp.abs(trained.net.gamma - 1))) > 1e-2
    assert float(acc) == pytest.approx(
        float(P.accuracy(trained, data[2], data[3], reference=data[0])), abs=0
    )


def _mean_squares(arch, alpha, norm, *, L, N, n, draws, key):
    """Per draw, the mean square of h^0 and h^L over the batch and the units at
    initialisation (He weights, zero biases, γ = 1)."""

    def one(k):
        kn, kx = jr.split(k)
        net = P.LayeredNet.sample(kn, L=L, N=N, architecture=arch, init="he", alpha=alpha,
                                  norm=norm)  # fmt: skip
        hs, _ = net.batch_layers(jr.normal(kx, (n, N)))
        return jnp.mean(hs[0] ** 2), jnp.mean(hs[-1] ** 2)

    first, last = jax.jit(jax.vmap(one))(jr.split(key, draws))
    return np.asarray(first), np.asarray(last)


def test_batch_norm_adds_one_to_the_mean_square_per_layer():
    """Pre-activation with BN at α = 1: each branch is centred with unit variance per unit
    over the batch, and W → −W leaves the law unchanged, so E ms(h^L) = E ms(h^0) + L
    exactly (up to ε/variance ≈ 1e-5 per layer), at any width: a Monte-Carlo mean over 200
    draws within 4 standard errors. Without BN (He, α = 1), ms(h^L)/ms(h^0) ≈ 2^L."""
    L = 16
    first, last = _mean_squares("pre-activation", 1.0, "batch", L=L, N=64, n=48, draws=200,
                                key=jr.key(13))  # fmt: skip
    d = last - first
    se = d.std(ddof=1) / math.sqrt(d.size)
    assert abs(d.mean() - L) < 4 * se, (d.mean(), se)
    assert se < 0.05 * L  # the check resolves a 5% departure from L
    first, last = _mean_squares("pre-activation", 1.0, None, L=L, N=64, n=48, draws=50,
                                key=jr.key(14))  # fmt: skip
    assert np.median(np.log2(last / first)) > 0.8 * L


def test_plain_he_keeps_the_mean_square_in_expectation():
    """Plain ReLU with He weights: given h^{l-1}, W h^{l-1} is Gaussian with variance
    2 ms(h^{l-1}) per unit, so E ms(h^l) = ms(h^{l-1}) exactly (at L = 8, N = 96 the
    draws are mildly skewed; the study does not judge this one at its depths, where they
    are heavy-tailed)."""
    first, last = _mean_squares("plain", 1.0, None, L=8, N=96, n=8, draws=400, key=jr.key(15))
    r = last - first
    se = r.std(ddof=1) / math.sqrt(r.size)
    assert abs(r.mean()) < 4 * se, (r.mean(), se)
    assert se < 0.05 * first.mean()


def test_refusals_name_the_argument():
    W, b = jnp.zeros((2, 3, 3)), jnp.zeros((2, 3))
    with pytest.raises(ValueError, match="^norm='layer'"):
        P.LayeredNet(W, b, 1.0, "plain", "relu", gamma=jnp.ones((2, 3)), norm="layer")
    with pytest.raises(ValueError, match="^gamma: given with norm=None"):
        P.LayeredNet(W, b, 1.0, "plain", "relu", gamma=jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="^gamma: given with norm='batch'"):
        P.LayeredNet(W, b, 1.0, "plain", "relu", norm="batch")
    with pytest.raises(ValueError, match=r"^gamma: shape \(3, 2\)"):
        P.LayeredNet(W, b, 1.0, "plain", "relu", gamma=jnp.ones((3, 2)), norm="batch")
    with pytest.raises(ValueError, match="^gamma"):
        P.LayeredNet(W, b, 1.0, "plain", "relu", gamma=jnp.full((2, 3), jnp.nan), norm="batch")
    net = P.LayeredNet(W, b, 1.0, "plain", "relu", gamma=jnp.ones((2, 3)), norm="batch")
    with pytest.raises(ValueError, match="^norm='batch' normalises over a batch"):
        net.layers(jnp.zeros(3))
    with pytest.raises(ValueError, match="^count=0"):
        net.batch_layers(jnp.zeros((4, 3)), count=0)


@pytest.mark.parametrize("law", ["normal", "gamma"])
def test_mean_interval_covers_at_its_level(law):
    """Student's interval over 64 independent draws holds the true mean in 95% of 4000
    simulated samples (Gaussian, and skewed as the BN increments at most are: a gamma
    law of shape 4, skewness 1), within three binomial standard errors."""
    from meanfield.stats.compare import mean_interval

    rng = np.random.default_rng(0)
    reps, n = 4000, 64
    if law == "normal":
        samples, truth = rng.normal(3.0, 2.0, (reps, n)), 3.0
    else:
        samples, truth = rng.gamma(4.0, 0.5, (reps, n)), 2.0
    hits = 0
    for x in samples:
        lo, hi = mean_interval(x)["ci95"]
        hits += lo <= truth <= hi
    coverage = hits / reps
    assert abs(coverage - 0.95) < 3 * math.sqrt(0.95 * 0.05 / reps), coverage


def test_mean_interval_leaves_out_non_finite_draws_and_needs_two():
    from meanfield.stats.compare import mean_interval

    out = mean_interval([1.0, np.nan, 3.0, np.inf])
    assert out["mean"] == 2.0 and out["draws"] == 2 and out["ci95"][0] < 2.0 < out["ci95"][1]
    assert mean_interval([1.0])["ci95"] is None and mean_interval([])["mean"] is None
    with pytest.raises(ValueError, match="^level"):
        mean_interval([1.0, 2.0], level=1.0)


def test_the_initial_scale_check_is_computed_from_the_draws_and_can_fail():
    """The study's check of pre-activation + BN at α = 1 (increment L in expectation):
    draws centred on L agree, draws centred 10% above disagree, explosions are counted
    and left out; other networks are not judged."""
    from meanfield.studies.plain_vs_residual.degradation import (
        TrainNet,
        init_checks,
        init_headline,
        init_scale,
    )

    rng = np.random.default_rng(1)
    L = 16
    first = rng.normal(1.0, 0.05, 64)

    def ms(increment):
        out = np.linspace(0, 1, L + 1)[None] * increment[:, None] + first[:, None]
        out[3, :] = np.inf  # one draw exploded
        return out

    bn = TrainNet("pre-activation", "he", "1", "batch")
    stats, check = init_scale(ms(rng.normal(L, 0.3, 64)), bn, L)
    assert check["agrees"] is True and check["draws"] == 63 and stats["exploded"] == 1
    _, bad = init_scale(ms(rng.normal(1.1 * L, 0.3, 64)), bn, L)
    assert bad["agrees"] is False
    assert init_scale(ms(rng.normal(L, 0.3, 64)), TrainNet("plain", "he", "1"), L)[1] is None
    cells = [{"name": "pre-activation + BN", "L": L, "init_check": c} for c in (check, bad)]
    cells.append({"name": "plain", "L": L, "init_check": None})
    checks = init_checks(cells)
    assert list(checks) == ["pre-activation + BN"]
    assert (checks["pre-activation + BN"]["agree"], checks["pre-activation + BN"]["judged"]) == (
        1,
        2,
    )
    assert "pre-activation + BN 1 of 2 depths" in init_headline(checks)
    assert "no network" in init_headline({})
