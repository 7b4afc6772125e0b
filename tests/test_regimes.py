"""Training regimes (`meanfield.diagnostics.regimes`, `meanfield study regimes`): the local/global
against its definition and a finite difference, the diagnostics against a plain
computation, the predicted diagram, the classification on hand-built exponents, explosions
reported, the study end to end and its refusals."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import meanfield as mf
from meanfield.diagnostics import regimes as R
from meanfield.studies import StudyInputError, run_study


def small_net(key, L=6, M=5, d=4, scale=0.3, activation="tanh"):
    law = mf.TwoLayerGaussianLaw(d, sigma_u=d**-0.5)
    net = mf.ResNet.sample(mf.TwoLayerBlock(activation), law, L=L, M=M, scaling=1.0, key=key)
    return mf.ResNet(R.ScaledBlock(net.block, jnp.asarray(scale)), net.params, 1.0)


def data(key, n=7, d=4):
    kx, ky = jr.split(key)
    return jr.normal(kx, (n, d)), jr.normal(ky, (n, d))


def test_split_adds_up_and_matches_a_finite_difference(key):
    """local + global = total to round-off; the local part of a small weight change is
    D_zφ(h_0, z_0)·Δz to second order (a finite difference with Δz ∝ ε: the residual
    falls like ε²)."""
    net = small_net(key)
    xs, _ = data(jr.key(1))
    h0 = net.states(xs)
    direction = jax.tree.map(lambda p: jr.normal(jr.key(2), p.shape), net.params)
    residuals = []
    for eps in (1e-2, 1e-3):
        moved = jax.tree.map(lambda p, q, e=eps: p + e * q, net.params, direction)
        h1 = eqx.tree_at(lambda m: m.params, net, moved).states(xs)
        local, glob, total, base = R.feature_changes(net.block, net.params, moved, h0, h1)
        np.testing.assert_allclose(local + glob, total, rtol=0, atol=1e-14)
        assert local.shape == base.shape == (7, 6, 5, 4)

        def phi(z, h):  # every unit at the frozen inputs h0
            per_layer = jax.vmap(net.block, in_axes=(None, 0))
            return jax.vmap(jax.vmap(per_layer, in_axes=(0, 0)), in_axes=(0, None))(h, z)

        _, tangent = jax.jvp(lambda z: phi(z, h0[:, :-1]), (net.params,), (direction,))
        residuals.append(float(jnp.max(jnp.abs(local - eps * tangent))))
        # the direct definition: φ(h0, z1) − φ(h0, z0)
        np.testing.assert_allclose(local, phi(moved, h0[:, :-1]) - phi(net.params, h0[:, :-1]),
                                   rtol=0, atol=1e-14)  # fmt: skip
    assert residuals[1] < residuals[0] / 50, residuals  # second order: 100x per decade


def test_diagnostics_against_a_plain_computation(key):
    """predictor and parameter movement, forward deviation and losses recomputed from
    `meanfield.train` and the networks' own outputs."""
    net = small_net(key)
    xs, ys = data(jr.key(3))
    opt = optax.sgd(0.5)
    dg = eqx.filter_jit(lambda n: R.regime_diagnostics(n, xs, ys, optimizer=opt, steps=4))(net)
    res = mf.train(net, xs, ys, optimizer=opt, steps=4)
    f0, f1 = jax.vmap(net)(xs), jax.vmap(res.net)(xs)
    expected = np.sqrt(np.mean(np.sum((f1 - f0) ** 2, -1)))
    np.testing.assert_allclose(dg.predictor_movement, expected, rtol=1e-12)
    np.testing.assert_allclose(dg.losses, res.losses, rtol=1e-12)
    du = res.net.params.u - net.params.u
    dv = res.net.params.v - net.params.v
    moved = np.sqrt(np.sum(du**2, -1) + np.sum(dv**2, -1))
    start = np.sqrt(np.sum(net.params.u**2, -1) + np.sum(net.params.v**2, -1))
    expected = np.sqrt(np.mean(moved**2)) / np.sqrt(np.mean(start**2))
    np.testing.assert_allclose(dg.parameter_movement, expected, rtol=1e-12)
    h = net.states(xs)
    dev = np.linalg.norm(h[:, -1] - h[:, 0], axis=-1) / np.linalg.norm(h[:, 0], axis=-1)
    np.testing.assert_allclose(dg.forward_deviation, np.sqrt(np.mean(dev**2)), rtol=1e-12)
    assert not bool(dg.exploded) and float(dg.local_change) > 0 and float(dg.global_change) > 0


def test_an_explosion_is_flagged(key):
    """A learning rate that diverges: `exploded`, whatever NaNs the movements hold."""
    net = small_net(key, scale=1.0, activation="relu")
    xs, ys = data(jr.key(4))
    dg = R.regime_diagnostics(net, xs, ys, optimizer=optax.sgd(1e4), steps=6)
    assert bool(dg.exploded)


@pytest.mark.parametrize(
    "gamma, lam, expected",
    [
        (0.25, 0.0, "explosion"),  # forward pass
        (0.75, 1.0, "explosion"),  # above the learning line
        (1.5, 1.75, "explosion"),  # above the local line (weights move by >> 1)
        (1.0, 0.5, "no-learning"),
        (0.5, 0.0, "lazy-ode"),
        (0.75, 0.5, "lazy-ode"),
        (1.0, 1.0, "local-feature-learning"),
    ],
)
def test_predicted_regimes(gamma, lam, expected):
    assert R.predicted_regime(gamma, lam)[0] == expected
    e = R.predicted_exponents(gamma, lam)
    assert e["predictor"] == pytest.approx(lam + 1 - 2 * gamma)
    assert e["global"] == e["predictor"] and e["local"] == pytest.approx(lam - gamma)


def ex(v, half=0.05):
    return {"value": v, "ci": [v - half, v + half]}


def exps_of(forward, predictor, local, glob):
    return {"forward": ex(forward), "predictor": ex(predictor), "local": ex(local),
            "global": ex(glob)}  # fmt: skip


@pytest.mark.parametrize(
    "exps, exploded, expected",
    [
        (exps_of(0.6, 0.0, 0.0, 0.0), False, "explosion"),  # the forward pass grows
        (exps_of(-0.5, 0.5, 0.0, 0.5), False, "explosion"),  # the predictor step grows
        (exps_of(-0.5, 0.0, 0.5, 0.0), False, "explosion"),  # the weights move by >> 1
        (exps_of(-0.5, -0.5, -0.5, -0.5), False, "no-learning"),
        (exps_of(-0.5, 0.0, 0.0, 0.0), False, "local-feature-learning"),
        (exps_of(0.0, 0.0, -0.5, 0.0), False, "lazy-ode"),
        (exps_of(-0.5, 0.0, -0.5, -0.5), False, "kernel"),
        (exps_of(-0.5, 0.0, 0.0, 0.0), True, "explosion"),  # a draw exploded
    ],
)
def test_classification_of_hand_built_exponents(exps, exploded, expected):
    out = R.classify(exps, exploded=exploded)
    assert out["regime"] == expected and out["ambiguous"] is False


def test_an_interval_across_a_threshold_is_ambiguous():
    exps = {"forward": ex(-0.5), "predictor": ex(0.0), "local": ex(-0.2, 0.1),
            "global": ex(0.0)}  # fmt: skip
    out = R.classify(exps, exploded=False)
    assert out["ambiguous"] and "local exponent" in out["ambiguous_decisions"][0]


@pytest.mark.runs_long
def test_study_end_to_end_and_refusals(tmp_path, self_checked):
    """A small diagram and transfer: cells classified, agreement counted, the mean-ODE
    learning rate staying put and the unscaled one drifting down; explosions reported
    as regimes and counts, never as NaN means; figures written; bad options refused."""
    out = tmp_path / "rg"
    res = run_study(
        "regimes", out=str(out), L=[8, 16, 32], gammas=[0.25, 0.5, 1.0], lambdas=[0.0, 1.0],
        seeds=2, transfer_L=[4, 8, 16], transfer_steps=20, transfer_seeds=4, no_progress=True,
    )  # fmt: skip
    self_checked(res)
    cells = {(c["gamma"], c["lambda"]): c for c in res["cells"]}
    assert cells[(1.0, 1.0)]["regime"] == "local-feature-learning"
    assert cells[(0.5, 0.0)]["regime"] == "lazy-ode"
    assert cells[(1.0, 0.0)]["regime"] == "no-learning"
    assert cells[(0.25, 1.0)]["regime"] == "explosion"
    assert res["agreement"]["agree"] == res["agreement"]["judged"] > 0
    for c in res["cells"]:
        for values in c["exponents"].values():
            assert values is None or math.isfinite(values)
    transfer = {t["parametrization"]: t for t in res["transfer"]}
    assert abs(transfer["mean-ode"]["drift_exponent"]) < 0.2
    # four networks a depth: the jackknife interval (Welch t) excludes no drift
    assert transfer["standard"]["drift_ci95"][1] < 0, transfer["standard"]
    for name in ("phase_diagram.png", "transfer.png"):
        assert (out / name).stat().st_size > 10_000
    for bad, match in (
        (dict(L=[8, 16]), "^--L: "),
        (dict(gammas=[-1.0, 0.5]), "^--gammas: "),
        (dict(lambdas=[0.0, 5.0]), "^--lambdas: "),
        (dict(seeds=1), "^--seeds, "),
        (dict(transfer_L=[4, 8]), "^--transfer-L: "),
        (dict(activation="nope"), "^--activation: "),
    ):
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("regimes", out=str(target), **bad)
        assert not target.exists()


@pytest.mark.parametrize("gamma", [0.5, 0.625, 0.75, 0.875, 0.95, 1.0])
def test_prediction_at_the_classifiers_resolution_on_the_learning_line(gamma):
    """On λ = 2γ − 1 the study's prediction (margin EXPONENT_TOL) is what `classify` says of
    the exact predicted exponents: a local exponent γ − 1 within the tolerance of 0 reads
    as local feature learning for both (at γ = 0.875 the zero-margin prediction says
    lazy-ode, which no measurement at this resolution could confirm)."""
    lam = 2 * gamma - 1
    e = R.predicted_exponents(gamma, lam)
    exact = {k: {"value": e[k], "ci": None} for k in ("predictor", "local", "global")}
    exact["forward"] = {"value": -0.5, "ci": None}
    measured = R.classify(exact, exploded=False)["regime"]
    assert R.predicted_regime(gamma, lam, margin=R.EXPONENT_TOL)[0] == measured


def test_agreement_counts_only_what_the_classifier_can_judge():
    """Fed cells that contradict their prediction, ambiguous cells and cells near a
    boundary: the disagreement is counted, the others are set apart and counted, and the
    headline says so (a count of 'agree of judged' over every cell could not fail)."""
    from meanfield.studies.regimes.plot import classified_agreement
    from meanfield.studies.regimes.study import _headline

    def cell(g, lam, regime, distance, ambiguous=False, predicted="no-learning"):
        return {"gamma": g, "lambda": lam, "regime": regime, "predicted_regime": predicted,
                "distance_to_boundary": distance, "ambiguous": ambiguous}  # fmt: skip

    cells = [
        cell(1.0, 0.0, "no-learning", 0.5),  # judged, agrees
        cell(1.25, -0.5, "explosion", 0.75),  # judged, contradicts its prediction
        cell(0.25, 0.0, "explosion", 0.25, predicted="explosion"),  # near: 0.25 < 0.4
        cell(1.0, -0.5, "no-learning", 0.5, ambiguous=True),  # ambiguous
        cell(0.75, 0.5, "lazy-ode", 0.0, predicted="lazy-ode"),  # on the line
    ]
    cells.append(cell(0.0, 0.0, "explosion", 0.1, ambiguous=True, predicted="explosion"))
    a = classified_agreement(cells)
    # the learning line's cell is judged against its line, not faded as "near a boundary"
    assert (a["agree"], a["judged"], a["near_boundary"], a["ambiguous"]) == (1, 2, 2, 1)
    assert [(d["gamma"], d["lambda"]) for d in a["disagree"]] == [(1.25, -0.5)]
    assert {d["why"] for d in a["not_judged"]} == {"near a boundary", "ambiguous"}
    line = _headline(a, [])[0]
    assert "1 of 2 judged off the learning lines, 1 of 1 on them" in line
    assert "2 within the classifier's resolution" in line and "1 ambiguous" in line
    # every square drawn is counted (issue 74: the title said 0 ambiguous beside 5 squares)
    assert a["ambiguous_drawn"] == 2
    # the learning line's cells (predicted lazy-ode or local feature learning), counted apart
    assert [(d["gamma"], d["lambda"]) for d in a["on_learning_line"]] == [(0.75, 0.5)]
    assert a["on_learning_line_agree"] == a["on_learning_line_agree_judged"] == 1
    cells[-2]["regime"] = "no-learning"  # measured off its prediction: the count falls
    assert classified_agreement(cells)["on_learning_line_agree_judged"] == 0


def test_the_drift_says_which_depths_its_line_goes_through():
    from meanfield.studies.regimes.plot import drift_text

    t = {"drift_exponent": -1.43, "drift_ci95": [-1.46, -1.37], "L": [4, 8, 16, 32, 64],
         "optimal_lr": [1.0, 0.4, 0.15, None, None], "unresolved_L": [32, 64]}  # fmt: skip
    text = drift_text(t)
    assert "a line through L = 4, 8, 16" in text and "left out: L = 32, 64" in text
    assert drift_text({"drift_exponent": None, "reason": "lr* resolved at 2 depth(s)"}) == (
        "unresolved (lr* resolved at 2 depth(s))"
    )


def test_the_optimal_lr_is_unresolved_at_either_edge_of_the_grid():
    """lr* at the grid's first or last learning rate is not a minimum: None (the drift leaves
    that depth out and says so); inside, the parabola's vertex, within its neighbours."""
    import numpy as np

    from meanfield.stats.transfer import optimal_lr as _optimum

    lrs = [0.01, 0.03, 0.1, 0.3, 1.0]
    assert _optimum(lrs, np.log([1, 2, 3, 4, 5])) is None  # falling towards small lr
    assert _optimum(lrs, np.log([5, 4, 3, 2, 1])) is None  # still falling at the largest
    x = np.log(lrs)
    star = _optimum(lrs, (x - np.log(0.1)) ** 2)
    assert star == pytest.approx(0.1, rel=1e-9)


def test_a_point_in_batches_equals_the_point_at_once(monkeypatch):
    """The networks of a point run `nets_per_batch` at a time (`lax.map` over vmapped
    batches): a batch of one, of three (12 networks: no remainder) and of five (a
    remainder of two) give the numbers of all twelve vmapped at once, each network against
    its own key, to round-off."""
    from meanfield.harness.self_check import split_terms
    from meanfield.studies.regimes import study as S

    cfg = {"d": 4, "M": 4, "n": 8, "steps": 3, "seeds": 3, "activation": "tanh", "x64": True,
           "lr0": 0.5, "transfer_steps": 3, "transfer_lrs": [0.1, 1.0],
           "transfer_seeds": 2}  # fmt: skip
    master = jr.key(3)
    xs, ys = S.task(jr.fold_in(master, 1), cfg["d"], cfg["n"])
    cells = [(g, lam) for g in (0.5, 1.0) for lam in (0.0, 1.0)]
    runs = {}
    for batch in (12, 1, 3, 5):
        monkeypatch.setattr(S, "nets_per_batch", lambda one, nets, b=batch: min(b, nets))
        runs[batch] = (
            split_terms(S._diagram_point(cfg, 8, cells, xs, ys, master))[0],
            S._transfer_point(cfg, 8, xs, ys, master),
        )

    def flat(tree):
        leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda x: x is None)
        return np.array([np.nan if v is None else v for v in leaves], dtype=float)

    whole = flat(runs[12])
    assert np.isfinite(whole).sum() > 100
    for batch in (1, 3, 5):
        np.testing.assert_allclose(flat(runs[batch]), whole, rtol=1e-10, atol=1e-13)
