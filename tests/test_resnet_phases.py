"""Chaintron's scaling criteria on the deep ResNet on an embedding
(`meanfield.diagnostics.criteria.deep_criteria_rates`) and `meanfield study resnet-phases`."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield.diagnostics.criteria import deep_criteria_rates
from meanfield.models.deep_embedded import DeepEmbeddedResNet
from meanfield.stats.fits import summarize
from meanfield.studies import StudyInputError
from meanfield.studies.two_layer_phases import study as phases
from meanfield.training.deep_embedded import backward_fields, train_with_final

X = jnp.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
Y = jnp.array([[1.0, 0.3], [-0.5, 0.2]])


def _net(key, L, M, D, s_v=1.0):
    return DeepEmbeddedResNet.sample(
        key, L=L, M=M, D=D, d_in=3, d_out=2, activation="tanh", s_v=s_v
    )


@pytest.mark.parametrize("L, M, D", [(3, 5, 4), (8, 512, 128)])  # the quick preset's L, M
def test_deep_rates_against_the_slides_sums(L, M, D):
    """The rates from `jax.grad` in the units against the slide's sums written out in
    numpy, layer by layer, from the hidden states of a plain loop and the backward fields
    `b^l = nD ∂𝓛/∂h^l` (`backward_fields`, the gradient in a perturbation of the states,
    not in the units): decay_u = (η_u/LM) Σ_{j,l} ‖(1/n) Σ_i ρ'(P) Q h_i^{l-1}‖_D²,
    decay_v = (η_v/LM) Σ_{j,l} ‖(1/n) Σ_i ρ(P) b_i^l‖_D², Ṗ_loc = −(η_u/n) Σ_k ρ'(P_k) Q_k
    ⟨h_k^{l-1}, h_i^{l-1}⟩_D."""
    net = _net(jr.key(3), L, M, D, s_v=1.7)
    lr_u, lr_v = 0.35, 0.8
    r = deep_criteria_rates(net, X, Y, lr_u=lr_u, lr_v=lr_v)
    u, v = np.asarray(net.u), np.asarray(net.v)
    x = np.asarray(X)
    n = x.shape[0]
    h = x @ np.asarray(net.embedding.w_in).T  # (n, D)
    states = [h]
    for layer in range(L):  # the forward pass, a plain loop
        h = h + np.tanh(h @ u[layer].T / D) @ v[layer] / (L * M)
        states.append(h)
    b = np.asarray(backward_fields(net, X, Y))  # (n, L + 1, D)
    decay_u = decay_v = 0.0
    p_dot = []
    for layer in range(L):
        h_prev, b_l = states[layer], b[:, layer + 1]
        P = h_prev @ u[layer].T / D  # (n, M)
        Q = b_l @ v[layer].T / D
        rho, drho = np.tanh(P), 1 - np.tanh(P) ** 2
        du = (drho * Q).T @ h_prev / n  # (M, D): (1/n) Σ_i ρ'(P) Q h_i
        dv = rho.T @ b_l / n
        decay_u += lr_u * np.sum(du**2) / D / (L * M)
        decay_v += lr_v * np.sum(dv**2) / D / (L * M)
        p_dot.append(-lr_u * du @ h_prev.T / D)  # (M, n)
    f = states[-1] @ np.asarray(net.embedding.w_out) / D
    np.testing.assert_allclose(float(r.loss), 0.5 * np.mean(np.sum((f - Y) ** 2, 1)), rtol=1e-12)
    np.testing.assert_allclose(float(r.decay_u), decay_u, rtol=1e-10)
    np.testing.assert_allclose(float(r.decay_v), decay_v, rtol=1e-10)
    np.testing.assert_allclose(
        float(r.local_update), np.sqrt(np.mean(np.square(p_dot))), rtol=1e-10
    )
    residual = states[-1] - states[0]
    np.testing.assert_allclose(
        float(r.hidden), np.sqrt(np.mean(np.sum(residual**2, 1) / D)), rtol=1e-12
    )


def test_the_deep_decay_rates_are_the_flows_loss_derivative():
    """decay_u + decay_v = −d𝓛/dt along the flow: the loss after GD steps ±ε of the flow
    (central difference) against the rates, independently of their formula."""
    net = _net(jr.key(4), 4, 32, 16, s_v=1.3)
    lr_u, lr_v = 0.6, 1.1
    r = deep_criteria_rates(net, X, Y, lr_u=lr_u, lr_v=lr_v)

    def loss_at(eps):
        sign = 1 if eps > 0 else -1
        outputs, _ = train_with_final(
            net, X, Y, eta_u=sign * abs(eps) * lr_u, eta_v=sign * abs(eps) * lr_v, steps=1
        )[:2]
        return 0.5 * float(jnp.mean(jnp.sum((outputs[-1] - Y) ** 2, -1)))

    eps = 1e-6
    derivative = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    np.testing.assert_allclose(-derivative, float(r.decay_u + r.decay_v), rtol=1e-6)


def test_the_deep_hidden_slope_is_a_measurement_not_a_check_of_the_code():
    """In the deep ResNet ‖h^L − h^0‖_D is linear in v to first order only: its slope
    against D is counted as one measurement (the same draws at every s_v), never printed as
    the perceptron's check of the code; the line names the deep quantity."""
    rng = np.random.default_rng(0)
    cfg = {"D": [64, 256, 1024], "s_v_sweep": [0.5, 1.0, 2.0, 4.0], "seed": 0}
    pts = []
    for D in cfg["D"]:
        base = rng.lognormal(0, 0.1, 6)
        for s in cfg["s_v_sweep"]:
            law = min(1.0, 1.0 / s**2) * math.sqrt(s**2 + 0.25)
            noise = rng.lognormal(0, 0.01, (3, 6))
            pts.append({"D": D, "s_v": s, "sigma_v": s * math.sqrt(D),
                        "hidden": summarize(s * math.sqrt(D) / 64 * base),
                        "local_update": summarize(law * noise[0]),
                        "decay": summarize(0.08 * noise[1]),
                        "decay_u_unscaled": summarize(0.08 * s**2 * noise[2])})  # fmt: skip
    fits = phases.slope_fits(cfg, pts)
    mlu = phases.mlu_points(cfg, pts, n_boot=100)
    counts = phases.agreement(fits, mlu, deep=True)
    assert "by_construction" not in counts["hidden_vs_D"]
    assert counts["hidden_vs_D"] == {"agree": 4, "of": 4, "independent": 1}
    lines = phases.headline(fits, mlu, deep=True)
    hidden = [line for line in lines if "‖h^L − h^0‖_D" in line]
    assert len(hidden) == 1 and "check of the code" not in hidden[0]
    assert "1 independent measurement" in hidden[0] and "first order" in hidden[0]
    assert not any("‖h‖_D" in line for line in lines)


def test_small_deep_study_end_to_end(tmp_path, self_checked):
    """A small grid: the points, the slopes, the MLU points, the headline and the figure
    (`resnet_phases.png`); `meanfield plot` redraws it from results.json."""
    r = mf.run_study(
        "resnet-phases",
        out=str(tmp_path / "p"),
        D=[8, 32],
        s_v_sweep=[0.5, 1.0, 2.0, 4.0],
        L=4,
        M=256,
        seeds=3,
        dt=0.25,
        no_progress=True,
    )
    self_checked(r)
    assert r["config"]["L"] == 4 and len(r["points"]) == 8
    assert all(f["ci95"] for f in r["fits"] if f["slope"] is not None)
    assert [m["D"] for m in r["mlu_points"]] == [8, 32]
    assert any("‖h^L − h^0‖_D" in line for line in r["headline"])
    # the unscaled rate's share grows as s_v² at t = 0 (up to the outputs' size)
    fit = next(
        f for f in r["fits"] if f["quantity"] == "decay_u_unscaled" and f["fixed"]["D"] == 32
    )
    assert abs(fit["slope"] - 2.0) < 0.3
    assert (tmp_path / "p" / "resnet_phases.png").exists()
    assert not (tmp_path / "p" / "two_layer_phases.png").exists()


def test_bad_deep_inputs_are_refused(tmp_path):
    for options, message in [
        ({"L": 0}, "--L"),
        ({"s_v_sweep": [1.0]}, "^--s-v-sweep: need at least 2 distinct values"),
        ({"M": 1}, "^--M: need at least 2 units"),
    ]:
        with pytest.raises((StudyInputError, ValueError), match=message):
            mf.run_study("resnet-phases", out=str(tmp_path / "s"), no_progress=True, **options)


def test_deep_study_draws_match_a_direct_draw():
    """The study's draw at (D, s_v) is the network `DeepEmbeddedResNet.sample` gives at the
    same key with v rescaled, and its rates are `deep_criteria_rates` of it."""
    from meanfield.studies.resnet_phases.study import _draws

    keys = jr.split(jr.key(7), 2)
    kw = dict(L=3, M=16, D=8, activation="tanh", s_u=1.0, sigma_in=1.0, sigma_out=1.0,
              time=0.2, dt=0.1)  # fmt: skip
    start, _, _ = _draws(keys, X, Y, 2.0, 0.25, 1.0, 1.0, **kw)
    net = DeepEmbeddedResNet.sample(keys[1], L=3, M=16, D=8, d_in=3, d_out=2, activation="tanh")
    net = eqx.tree_at(lambda n: n.v, net, 2.0 * net.v)
    direct = deep_criteria_rates(net, X, Y, lr_u=0.25, lr_v=1.0)
    np.testing.assert_allclose(start.local_update[1], direct.local_update, rtol=1e-12)
    np.testing.assert_allclose(start.hidden[1], direct.hidden, rtol=1e-12)
    jax.block_until_ready(start)


def test_misses_past_the_boundary_are_told_apart_from_misses_inside():
    """A slope that misses over cells where ‖h^L − h^0‖_D ≥ 1/2 is counted past criterion
    1's boundary; a miss over small cells only is named as a miss inside it."""
    points = [
        {"D": D, "s_v": s, "hidden": {"mean": 0.01 * s * D**0.5}}
        for D in (64, 256)
        for s in (1.0, 4.0, 8.0)
    ]  # the cells with ‖h^L − h^0‖_D ≥ 0.5: (256, 4), (256, 8), (64, 8)
    fits = [
        {"quantity": "local_update", "against": "s_v", "fixed": {"D": 256},
         "sizes": [1.0, 4.0, 8.0], "theory_verdict": "outside"},
        {"quantity": "decay", "against": "D", "fixed": {"s_v": 1.0},
         "sizes": [64, 256], "theory_verdict": "outside"},
        {"quantity": "decay", "against": "D", "fixed": {"s_v": 4.0},
         "sizes": [64, 256], "theory_verdict": "inside"},
        # missed within the tolerance: not a miss
        {"quantity": "hidden", "against": "D", "fixed": {"s_v": 2.0},
         "sizes": [64, 256], "theory_verdict": "near"},
    ]  # fmt: skip
    line = phases.past_boundary(fits, points)
    assert line.startswith("past criterion 1's boundary: 1 of the 2 slopes")
    assert "(3 of 6 cells)" in line and "inside it: decay vs D at s_v=1" in line
    for f in fits:
        f["theory_verdict"] = "inside" if f["quantity"] == "decay" else f["theory_verdict"]
    assert "1 of the 1 slopes" in phases.past_boundary(fits, points)
    assert "none misses inside it" in phases.past_boundary(fits, points)
