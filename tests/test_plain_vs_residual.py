"""Plain and residual networks (seed 003): gradients against `jax.grad`, the pre-activation
network against the engine's ResNet, the infinite-width predictions against closed forms,
quadrature and finite networks, and the study's output and refusals."""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy import integrate, special

import meanfield
from meanfield.blocks.layers import DenseBlock, DenseParams
from meanfield.models import plain as P
from meanfield.studies import run_study
from meanfield.studies.plain_vs_residual.study import _rates, configurations
from meanfield.theory import gradients as P_theory
from meanfield.training import plain as P_training


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("architecture", P.ARCHITECTURES)
@pytest.mark.parametrize("activation", ["sigmoid", "tanh", "relu", "leaky_relu"])
def test_gradient_log_norms_against_jax_grad(architecture, activation):
    """‖∂𝓛/∂h^l‖ of the renormalised backward recursion equals jax.grad of 𝓛 = ⟨B, h^L⟩
    with respect to a perturbation added to h^l (a plain Python loop over layers)."""
    L, N = 5, 7
    k1, k2, k3 = jr.split(jr.key(3), 3)
    net = P.LayeredNet.sample(
        k1, L=L, N=N, architecture=architecture, activation=activation, init="he", alpha=0.7
    )
    net = P.LayeredNet(net.W, 0.1 * jr.normal(k3, (L, N)), 0.7, architecture, activation)
    x, B = jr.normal(k2, (N,)), jr.normal(k3, (N,))
    sigma = meanfield.blocks.activations.resolve_activation(activation)

    def loss(deltas):
        h = x + deltas[0]
        for l in range(L):
            W, b = net.W[l], net.b[l]
            if architecture == "plain":
                h = sigma(W @ h + b)
            elif architecture == "post-activation":
                h = sigma(h + 0.7 * (W @ h + b))
            else:
                h = h + 0.7 * (W @ sigma(h) + b)
            h = h + deltas[l + 1]
        return B @ h

    grads = jax.grad(loss)(jnp.zeros((L + 1, N)))
    expected = np.log(np.linalg.norm(np.asarray(grads), axis=1))
    np.testing.assert_allclose(net.gradient_log_norms(x, B), expected, rtol=0, atol=1e-12)


def test_pre_activation_is_the_engines_resnet():
    """pre-activation = meanfield.ResNet(DenseBlock(σ), ...): states and gradients."""
    L, N, alpha = 6, 5, 0.4
    k1, k2, k3 = jr.split(jr.key(1), 3)
    net = P.LayeredNet.sample(k1, L=L, N=N, architecture="pre-activation", activation="tanh",
                              init="xavier", alpha=alpha)  # fmt: skip
    net = P.LayeredNet(net.W, 0.1 * jr.normal(k3, (L, N)), alpha, "pre-activation", "tanh")
    ref = meanfield.ResNet(DenseBlock("tanh"), DenseParams(net.W, net.b), alpha)
    x, B = jr.normal(k2, (N,)), jr.normal(k3, (N,))
    hs, _ = net.layers(x)
    np.testing.assert_allclose(hs, ref.states(x[None])[0], rtol=0, atol=1e-13)
    adj = ref.adjoint(x[None], B[None])  # the cotangent of h^L: ∂⟨B, h^L⟩/∂h^L
    np.testing.assert_allclose(
        net.gradient_log_norms(x, B), np.log(np.linalg.norm(adj.b[0], axis=-1)), atol=1e-12
    )


@pytest.mark.parametrize(
    ("init", "per_layer"),
    [("xavier", math.log(0.5)), ("he", 0.0), ("normal", math.log(64 / 2))],
)
def test_relu_plain_prediction_closed_form(init, per_layer):
    """ReLU plain: χ = σ_w²/2 at every layer (Xavier halves, He keeps, N(0,1) × N/2)."""
    value, err = P_theory.predicted_log_ratio("plain", "relu", init, N=64, L=10)
    assert err == 0.0
    assert value == pytest.approx(10 * per_layer, abs=1e-12)


def test_leaky_and_pre_activation_closed_forms():
    a = meanfield.blocks.activations.LEAKY_SLOPE
    value, _ = P_theory.predicted_log_ratio("plain", "leaky_relu", "he", N=32, L=7)
    assert value == pytest.approx(7 * math.log(1 + a**2), abs=1e-12)
    alpha = 1 / math.sqrt(20)
    value, _ = P_theory.predicted_log_ratio("pre-activation", "relu", "he", N=32, L=20, alpha=alpha)
    assert value == pytest.approx(20 * math.log1p(alpha**2 * 2 * 0.5), abs=1e-12)


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
@pytest.mark.parametrize("q", [0.3, 2.0, 500.0])
def test_gaussian_moments_against_adaptive_quadrature(activation, q):
    f = {"tanh": np.tanh, "sigmoid": special.expit}[activation]
    df = {"tanh": lambda z: 1 - np.tanh(z) ** 2,
          "sigmoid": lambda z: special.expit(z) * (1 - special.expit(z))}[activation]  # fmt: skip
    s = math.sqrt(q)
    dens = lambda z: math.exp(-z * z / (2 * q)) / math.sqrt(2 * math.pi * q)
    e_s2 = integrate.quad(lambda z: f(z) ** 2 * dens(z), -12 * s, 12 * s, points=[0], limit=400)[0]
    e_d2 = integrate.quad(lambda z: df(z) ** 2 * dens(z), -12 * s, 12 * s, points=[0], limit=400)[0]
    got = P_theory.gaussian_moments(activation, jnp.asarray(q))
    np.testing.assert_allclose([float(got[0]), float(got[1])], [e_s2, e_d2], rtol=1e-7)


@pytest.mark.parametrize(("init", "alpha", "L"), [("he", 0.5, 12), ("xavier", 1.0, 6)])
def test_population_against_quadrature_and_closed_form(init, alpha, L):
    """With ρ = identity, post- and pre-activation are the same network h + αWh: the
    population (post) and the quadrature (pre) both give L log(1 + α² σ_w²)."""
    gain = P.weight_gain(init, 8)
    exact = L * math.log1p(alpha**2 * gain)
    pre, _ = P_theory.predicted_log_ratio("pre-activation", "identity", init, N=8, L=L, alpha=alpha)
    post, err = P_theory.predicted_log_ratio(
        "post-activation", "identity", init, N=8, L=L, alpha=alpha
    )
    assert pre == pytest.approx(exact, abs=1e-9)
    assert 0 < err < 0.05
    assert abs(post - exact) < 4 * err


@pytest.mark.runs_long
@pytest.mark.parametrize(
    ("architecture", "activation", "init", "alpha"),
    [
        ("post-activation", "tanh", "xavier", 0.25),
        ("plain", "sigmoid", "he", 1.0),
        ("pre-activation", "relu", "he", 0.25),
    ],  # fmt: skip
)
def test_prediction_against_finite_networks(architecture, activation, init, alpha):
    """Monte Carlo over N = 512 networks (16 draws): the measured mean log-ratio lies within
    4 standard errors plus the O(L/N) finite-width bias (0.02 per layer) of the prediction;
    the post-activation case is the one the naive factorised χ gets wrong by a factor 2."""
    L, N = 16, 512

    def one(key):
        k1, k2, k3 = jr.split(key, 3)
        net = P.LayeredNet.sample(k1, L=L, N=N, architecture=architecture,
                                  activation=activation, init=init, alpha=alpha)  # fmt: skip
        g = net.gradient_log_norms(jr.normal(k2, (N,)), jr.normal(k3, (N,)))
        return 2 * (g[0] - g[-1])

    r = np.asarray(jax.lax.map(jax.jit(one), jr.split(jr.key(7), 16)))
    pred, err = P_theory.predicted_log_ratio(architecture, activation, init, N=N, L=L, alpha=alpha)
    se = r.std(ddof=1) / 4
    assert abs(r.mean() - pred) < 4 * math.hypot(se, err) + 0.02 * L


def test_finite_width_plain_relu_closed_form():
    """Plain ReLU at width N: f = (σ_w²/N) χ²_K with K ~ Binomial(N, 1/2) active units, so
    E log f = log(σ_w²/N) + Σ_K P(K) (ψ(K/2) + log 2) exactly (the K = 0 atom, 2^-N, left
    out); against the Laplace-transform evaluation, per layer and summed."""
    N, L = 32, 3
    K = np.arange(1, N + 1)
    pk = np.exp(special.gammaln(N + 1) - special.gammaln(K + 1) - special.gammaln(N - K + 1))
    for init in ("he", "xavier"):
        gain = P.weight_gain(init, N)
        exact = math.log(gain / N) + np.sum(pk / 2.0**N * (special.digamma(K / 2) + math.log(2)))
        got = P_theory.finite_width_log_ratios(
            "plain", "relu", init, N=N, Ls=[1, L], alphas=[1.0, 1.0]
        )
        assert abs(got[0] - exact) < 1e-7 and abs(got[1] - L * exact) < 3e-7, (got, exact)
        assert abs(exact - math.log(gain / 2)) > 0.03  # the finite-width term is visible


@pytest.mark.runs_long
@pytest.mark.parametrize(
    "architecture, activation, init, alpha",
    [("pre-activation", "tanh", "normal", 1.0), ("plain", "sigmoid", "normal", 1.0),
     ("pre-activation", "relu", "he", 0.3)],
)  # fmt: skip
def test_finite_width_against_monte_carlo_of_the_model(architecture, activation, init, alpha):
    """Each layer's E[log f] of the independence model at width N = 64, by the Laplace
    transform, against a Monte Carlo of the same model (20000 layers: states i.i.d.
    N(0, q_l), backward weights fresh Gaussians, p̂ uniform on the sphere), within 4 SE."""
    N, L, S = 64, 3, 20000
    gain = P.weight_gain(init, N)
    logs = np.diff(
        [0.0] + P_theory.finite_width_log_ratios(
            architecture, activation, init, N=N, Ls=[1, 2, 3], alphas=[alpha] * 3
        )
    )  # fmt: skip
    sigma = meanfield.blocks.activations.resolve_activation(activation)
    dsigma = jax.vmap(jax.vmap(jax.grad(sigma)))
    q, m = 1.0, 1.0
    for layer in range(L):
        k1, k2, k3 = jr.split(jr.key(layer), 3)
        g = jr.normal(k3, (S, N))
        p = g / jnp.linalg.norm(g, axis=1, keepdims=True)
        w = jr.normal(k2, (S, N))
        if architecture == "plain":
            q = gain * m
            h = math.sqrt(q) * jr.normal(k1, (S, N))
            v = dsigma(h) * p  # ‖W^T v‖² = (σ_w²/N) ‖v‖² χ²_N under the model
            f = gain / N * jnp.sum(v**2, 1) * jnp.sum(w**2, 1)
            m = float(P_theory.gaussian_moments(activation, q)[0])
        else:
            h = math.sqrt(q) * jr.normal(k1, (S, N))
            f = jnp.sum((p + alpha * dsigma(h) * math.sqrt(gain / N) * w) ** 2, 1)
            q = q + alpha**2 * gain * float(P_theory.gaussian_moments(activation, q)[0])
        lf = np.log(np.asarray(f))
        assert abs(lf.mean() - logs[layer]) < 4 * lf.std() / math.sqrt(S), (layer, lf.mean())


@pytest.mark.runs_long
def test_finite_width_prediction_against_networks():
    """Pre-activation tanh under N(0, 1) weights (σ_w² = N, no infinite-width limit): only
    about sqrt(N/l) coordinates carry the gradient, so the mean of the log-ratio sits below
    the infinite-width formula by O(sqrt(l/N)) per layer. 64 networks at N = 256, L = 8:
    the width-N prediction within 3 SE, the infinite-width one more than 3 SE away."""
    L, N = 8, 256

    def one(key):
        k1, k2, k3 = jr.split(key, 3)
        net = P.LayeredNet.sample(k1, L=L, N=N, architecture="pre-activation",
                                  activation="tanh", init="normal")  # fmt: skip
        g = net.gradient_log_norms(jr.normal(k2, (N,)), jr.normal(k3, (N,)))
        return 2 * (g[0] - g[-1])

    r = np.asarray(jax.lax.map(jax.jit(one), jr.split(jr.key(7), 64)))
    se = r.std(ddof=1) / 8
    width_n = P_theory.finite_width_log_ratios("pre-activation", "tanh", "normal", N=N, Ls=[L],
                                        alphas=[1.0])[0]  # fmt: skip
    infinite = P_theory.predicted_log_ratio("pre-activation", "tanh", "normal", N=N, L=L)[0]
    assert abs(r.mean() - width_n) < 3 * se, (r.mean(), se, width_n)
    assert abs(r.mean() - infinite) > 3 * se, (r.mean(), se, infinite)


def test_train_classifier_learns_and_vmaps():
    data = P.teacher_task(jr.key(0), d_in=4, classes=3, n_train=64, n_test=64, width=8)

    def one(key):
        model = P.Classifier.sample(key, d_in=4, classes=3, L=3, N=8, architecture="pre-activation",
                                    activation="relu", init="he", alpha=0.5)  # fmt: skip
        _, losses, acc = P_training.train_classifier(model, data, steps=200, lr=1e-2)
        return losses, acc

    losses, acc = jax.vmap(one)(jr.split(jr.key(1), 2))
    assert np.all(np.asarray(losses[:, -1]) < 0.5 * np.asarray(losses[:, 0]))
    assert np.all((np.asarray(acc) >= 0) & (np.asarray(acc) <= 1))


def test_rates_exclude_explosions_and_report_them():
    """A draw that exploded (None) is counted in `exploded` and never enters the mean."""
    cfg = {"N": 256, "seed": 0}
    configs = [{"architecture": "plain", "activation": "relu", "init": "xavier", "alpha": "1"}]
    points = [
        {
            "L": L,
            "cells": [
                {
                    "log_ratio": [L * math.log(0.5) + e for e in (0.01, -0.01)] + [None],
                    "exploded": 1,
                }
            ],
        }  # fmt: skip
        for L in (4, 8, 16)
    ]
    (rate,) = _rates(cfg, configs, points)
    assert rate["exploded"] == 3
    assert rate["rate"] == pytest.approx(math.log(0.5), abs=1e-12)
    assert rate["predicted"] == pytest.approx(math.log(0.5), abs=1e-12)
    assert rate["agrees"] is True


def test_configurations_cover_the_issue():
    cs = configurations(["relu"])
    assert len(cs) == 3 + 6 + 6
    assert {c["alpha"] for c in cs if c["architecture"] == "plain"} == {"1"}


def test_study_small_run_and_refusals(tmp_path, self_checked):
    # the smallest grid that still fits a rate (two depths L <= N/16) and judges the
    # degradation (two trained depths); its cost is in running the post-activation
    # predictions (populations of 2^19 paths through L layers, -O0) and in compiling:
    # `train_steps` equal to the self-check's own (SELF_CHECK_STEPS) lets the check's
    # compiled training reuse the run's programs; seed 1 makes the self-check draw a
    # training point (`parttrain_L2`, as seed 0 did at L = 4, 8), so that the check's
    # short-training route (compiled and op by op) stays the one exercised
    from meanfield.studies.plain_vs_residual.study import SELF_CHECK_STEPS

    res = run_study(
        "plain-vs-residual", out=str(tmp_path / "s"), L=[2, 4], N=64, seeds=3,
        activations="relu", train_L=[2, 3], train_steps=SELF_CHECK_STEPS, train_seeds=2,
        seed=1, no_progress=True,
    )  # fmt: skip
    assert len(res["gradient_rates"]) == 15
    self_checked(res)
    assert [c["point"] for c in res["self_check"]] == ["parttrain_L2"]
    assert all(r["fitted_depths"] == [2, 4] for r in res["gradient_rates"])
    for r in res["gradient_rates"]:
        assert {"architecture", "activation", "init", "rate", "rate_ci", "predicted"} <= set(r)
    assert [c["name"] for c in res["degradation"] if c["L"] == 2] == [
        "plain", "post-activation", "pre-activation",
    ]  # fmt: skip
    for c in res["degradation"]:
        assert {"architecture", "L", "train_loss", "test_accuracy", "norm"} <= set(c)
        assert len(c["init_mean_square"]["mean"]) == c["L"] + 1
    assert res["init_checks"] == {} and res["shortcut_comparison"] == []
    names = ("gradient_norms.png", "gradient_rates.png", "degradation.png", "init_scale.png")
    for name in names:
        assert (tmp_path / "s" / name).exists()
    with pytest.raises(meanfield.studies.StudyInputError, match="--activations"):
        run_study("plain-vs-residual", out=str(tmp_path / "t"), activations="relu,swish")
    with pytest.raises(meanfield.studies.StudyInputError, match="--L"):
        run_study("plain-vs-residual", out=str(tmp_path / "u"), L=[4])
    with pytest.raises(meanfield.studies.StudyInputError, match="^--train-N, --projection"):
        run_study("plain-vs-residual", out=str(tmp_path / "u"), train_N=1, projection=True)
    assert not (tmp_path / "t").exists() and not (tmp_path / "u").exists()
    # no rate measured (every configuration exploded at its fitted depths): `plot` still
    # draws every figure, the rates' one saying so (it took min() of nothing)
    import json

    from meanfield.cli import main

    edited = json.loads((tmp_path / "s" / "results.json").read_text())
    for r in edited["gradient_rates"]:
        r["rate"], r["rate_ci"] = None, None
    (tmp_path / "s" / "results.json").write_text(json.dumps(edited))
    before = (tmp_path / "s" / "gradient_rates.png").stat().st_mtime_ns
    assert main(["plot", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "gradient_rates.png").stat().st_mtime_ns != before
    # results written before the networks had names and an initial scale: the degradation
    # figures still draw them (by architecture), and no empty init_scale.png is written
    for c in edited["degradation"]:
        for key in ("name", "norm", "shortcut", "init_mean_square", "init_check", "train_losses"):
            c.pop(key)
    (tmp_path / "s" / "results.json").write_text(json.dumps(edited))
    (tmp_path / "s" / "init_scale.png").unlink()
    before = (tmp_path / "s" / "degradation.png").stat().st_mtime_ns
    assert main(["plot", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "degradation.png").stat().st_mtime_ns != before
    assert not (tmp_path / "s" / "init_scale.png").exists()


def test_study_batch_norm_and_projection_options(tmp_path):
    """`--batch-norm` and `--projection` add their seven networks after the default three,
    the exact check of pre-activation + BN's scale at
    initialisation, and the shortcut comparison; every figure draws them (conftest). The
    self-check is left out here (the test above runs it on a training point)."""
    res = run_study(
        "plain-vs-residual", out=str(tmp_path / "s"), L=[2, 4], N=64, seeds=3,
        activations="relu", train_L=[2, 3], train_steps=2, train_seeds=2, seed=1,
        no_progress=True, batch_norm=True, projection=True, no_self_check=True,
    )  # fmt: skip
    assert [c["name"] for c in res["degradation"] if c["L"] == 2] == [
        "plain", "post-activation", "pre-activation", "pre-activation, α = 1", "plain + BN",
        "post-activation + BN", "pre-activation + BN", "plain, widening",
        "post-activation, zero-pad shortcut", "post-activation, projection shortcut",
    ]  # fmt: skip
    assert list(res["degradation_verdict"]) == [c["name"] for c in res["degradation"][:10]]
    assert [c["L"] for c in res["shortcut_comparison"]] == [2, 3]
    for c in res["shortcut_comparison"]:
        assert c["lower"] in ("zero-pad", "projection", "not resolved")
    for c in res["degradation"]:
        assert {"architecture", "L", "train_loss", "test_accuracy", "norm"} <= set(c)
        assert len(c["init_mean_square"]["mean"]) == c["L"] + 1
        assert (c["init_check"] is not None) == (c["name"] == "pre-activation + BN")
    # the one network with an exact expectation at initialisation: + 1 per layer
    checks = res["init_checks"]["pre-activation + BN"]
    assert [d["L"] for d in checks["depths"]] == [2, 3] and checks["judged"] == 2
    for d in checks["depths"]:
        assert d["increment_ci95"][0] < d["increment"] < d["increment_ci95"][1]
        assert abs(d["increment"] - d["L"]) < 0.1 * d["L"]


def test_agreement_is_relative_to_the_measurement_and_can_fail():
    """No absolute floor: a rate measured at 0.015 [0.012, 0.018] does not agree with a
    prediction of 0 (it did, within 0.02); one whose interval holds 0 does; a large rate
    within 10% of its prediction agrees; the prediction's own error widens the interval."""
    from meanfield.studies.plain_vs_residual.study import agrees

    assert not agrees(0.015, [0.012, 0.018], 0.0)
    assert agrees(0.003, [-0.002, 0.008], 0.0)
    assert agrees(1.05, [1.04, 1.06], 1.0) and not agrees(1.15, [1.14, 1.16], 1.0)
    assert agrees(0.015, [0.012, 0.018], 0.0, predicted_error=0.007)


def test_degradation_needs_a_spread_to_be_judged():
    from meanfield.studies.plain_vs_residual.degradation import TRAIN_ARCHITECTURES
    from meanfield.studies.plain_vs_residual.degradation import (
        degradation_verdict as _degradation_verdict,
    )

    arch = TRAIN_ARCHITECTURES[0].name
    cells = [
        {"architecture": arch, "L": 2, "train_loss": 0.01, "train_loss_std": None, "draws": 1},
        {"architecture": arch, "L": 64, "train_loss": 0.2, "train_loss_std": None, "draws": 1},
    ]
    assert _degradation_verdict(cells)[arch]["degrades"] is None  # was True (std taken as 0)
    cells[0]["train_loss_std"] = cells[1]["train_loss_std"] = 0.01
    cells[0]["draws"] = cells[1]["draws"] = 3
    assert _degradation_verdict(cells)[arch]["degrades"] is True
    cells[1]["train_loss"] = 0.015
    assert _degradation_verdict(cells)[arch]["degrades"] is False


def test_the_agreement_count_counts_disagreement_and_leaves_out_the_unjudged():
    from meanfield.studies.plain_vs_residual.study import agreement_counts

    rates = [{"agrees": True, "agrees_infinite_width": True},
             {"agrees": False, "agrees_infinite_width": False},
             {"agrees": False, "agrees_infinite_width": True},
             {"agrees": None}]  # fmt: skip
    assert agreement_counts(rates) == (1, 3, 2)
    assert agreement_counts([{"agrees": False}] * 4) == (0, 4, 0)
