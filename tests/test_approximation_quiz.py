"""The lecture's pop quiz in `meanfield study approximation`: the residual network beside
the plain one (its parameter count, its forward pass against a plain loop, its training
through `fit_mlp`), arms keyed by (depth, architecture), the quiz's reading fed
contradicting data, and the preset's machinery end to end at a tiny size."""

import json
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.cli import main
from meanfield.studies.approximation import study as S
from meanfield.studies.approximation.verdicts import arm_reading, quiz_lines, quiz_reading
from meanfield.training.approximation import (
    ResidualMLP,
    fit_mlp,
    mlp_shape,
    network_parameters,
    network_shape,
    predict,
    residual_parameters,
    sample_network,
    sample_residual_mlp,
)


def _leaves(model) -> int:
    return sum(x.size for x in jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array)))


@pytest.mark.parametrize("norm", [False, True])
def test_residual_parameter_count_is_the_leaves_and_the_width_the_largest_the_budget_holds(norm):
    for d, width, depth in [(1, 5, 1), (1, 3, 4), (3, 7, 2), (2, 14, 50)]:
        model = sample_residual_mlp(jr.key(0), d=d, width=width, depth=depth, norm=norm)
        assert residual_parameters(d, width, depth, norm=norm) == _leaves(model)
    arch = "residual-norm" if norm else "residual"
    for budget in (40, 100, 1000, 10333):
        for depth in (1, 2, 4, 50):
            if budget < network_parameters(1, 1, depth, arch):
                with pytest.raises(ValueError, match="^budget: "):
                    network_shape(budget, 1, depth, arch)
                continue
            width, params = network_shape(budget, 1, depth, arch)
            assert params == network_parameters(1, width, depth, arch) <= budget
            assert network_parameters(1, width + 1, depth, arch) > budget
            model = sample_network(jr.key(1), d=1, width=width, depth=depth, architecture=arch)
            assert _leaves(model) == params
            if not norm:  # the same linear layers as the plain network
                assert (width, params) == mlp_shape(budget, 1, depth)
    with pytest.raises(ValueError, match="^architecture='dense'"):
        network_shape(100, 1, 2, "dense")


def test_the_pop_quiz_preset_gives_the_lectures_thin_network_and_equal_counts():
    """10 333 parameters: 50 × 14 (the lecture's thin network) and 1 × 3444, exactly."""
    preset = S.PRESETS["pop-quiz"]
    (budget,) = preset["budgets"]
    assert network_shape(budget, 1, 50, "plain") == (14, 10333)
    assert network_shape(budget, 1, 50, "residual") == (14, 10333)
    assert network_shape(budget, 1, 1, "plain") == (3444, 10333)
    assert preset["targets"] == ["sin50"] and preset["depths"] == [1, 50]


@pytest.mark.parametrize("norm", [False, True])
def test_residual_forward_is_a_plain_loop(norm):
    """`ResidualMLP` against the formula written out: h = W₀x + b₀; h += (W_l relu(N h) +
    b_l)/sqrt(depth − 1); out = W relu(N h) + b, N a layer norm (gain, bias) or nothing."""
    d, width, depth = 3, 6, 5
    model = sample_residual_mlp(jr.key(2), d=d, width=width, depth=depth, norm=norm)
    if norm:  # gains and biases away from 1 and 0, so that they count
        norms = [eqx.tree_at(lambda n: (n.weight, n.bias), n,
                             (1.0 + 0.1 * jr.normal(jr.key(10 + i), (width,)),
                              0.1 * jr.normal(jr.key(20 + i), (width,))))
                 for i, n in enumerate(model.norms or [])]  # fmt: skip
        model = eqx.tree_at(lambda m: m.norms, model, norms)
    x = np.asarray(jr.normal(jr.key(3), (d,)), float)

    def lin(layer, v):
        return np.asarray(layer.weight, float) @ v + np.asarray(layer.bias, float)

    def n(i, v):
        if not norm:
            return v
        z = (v - v.mean()) / math.sqrt(v.var() + 1e-5)
        return z * np.asarray(model.norms[i].weight) + np.asarray(model.norms[i].bias)

    h = lin(model.first, x)
    for i in range(depth - 1):
        h = h + lin(model.blocks[i], np.maximum(n(i, h), 0.0)) / math.sqrt(depth - 1)
    want = lin(model.last, np.maximum(n(depth - 1, h), 0.0))
    np.testing.assert_allclose(float(model(jnp.asarray(x))), float(np.squeeze(want)), rtol=1e-10)
    assert len(model.blocks) == depth - 1 and model.scale == 1 / 2


def test_depth_one_residual_is_the_plain_network():
    plain = sample_network(jr.key(4), d=1, width=7, depth=1, architecture="plain")
    res = sample_residual_mlp(jr.key(5), d=1, width=7, depth=1)
    res = eqx.tree_at(lambda m: (m.first, m.last), res, (plain.layers[0], plain.layers[1]))
    xs = jnp.linspace(0.0, 1.0, 9)[:, None]
    np.testing.assert_allclose(predict(res, xs), predict(plain, xs), rtol=1e-14)


def test_the_residual_network_trains_through_fit_mlp():
    """`fit_mlp` on a `ResidualMLP` (the plain network's call): its first Adam step moves
    every parameter by lr · g/(|g| + 1e-8), g the gradient of the mean squared error; the
    loss falls over more steps."""
    model = sample_residual_mlp(jr.key(6), d=1, width=5, depth=4)
    xs = jnp.linspace(0.0, 1.0, 17)[:, None]
    ys = jnp.sin(3.0 * xs[:, 0])
    trained, losses = fit_mlp(model, xs, ys, steps=1, lr=0.01)
    assert isinstance(trained, ResidualMLP)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    loss, grads = jax.value_and_grad(
        lambda p: jnp.mean((predict(eqx.combine(p, static), xs) - ys) ** 2)
    )(params)
    assert float(losses[0]) == pytest.approx(float(loss), rel=1e-12)
    moved = jax.tree.leaves(eqx.filter(trained, eqx.is_inexact_array))
    for after, before, g in zip(moved, jax.tree.leaves(params), jax.tree.leaves(grads),
                                strict=True):  # fmt: skip
        np.testing.assert_allclose(after, before - 0.01 * g / (jnp.abs(g) + 1e-8), atol=1e-14)
    _, longer = fit_mlp(model, xs, ys, steps=300, lr=0.01)
    assert float(longer[-1]) < 0.2 * float(longer[0])


def test_arms_are_keyed_by_depth_and_architecture_and_the_plain_ones_unchanged():
    cfg = {"depths": [1, 3], "architectures": ["plain", "residual"]}
    assert S.arms(cfg) == [(1, "plain"), (3, "plain"), (3, "residual")]
    assert S.arms({"depths": [1, 3]}) == [(1, "plain"), (3, "plain")]
    cfg = {"depths": [1, 3], "architectures": ["plain", "residual"], "seeds": 2, "steps": 3,
           "lrs": [0.01], "train_points": 16, "test_points": 64, "seed": 0, "parity_n": 8,
           "preset": "quick"}  # fmt: skip
    master = jr.key(0)
    both = S._point(cfg, {"target": "sin50", "budget": 60}, master)
    plain = S._point({**cfg, "architectures": ["plain"]}, {"target": "sin50", "budget": 60}, master)
    kinds = [(a["depth"], a["architecture"]) for a in both["arms"]]
    assert kinds == [(1, "plain"), (3, "plain"), (3, "residual")]
    assert both["arms"][1]["width"] == both["arms"][2]["width"]  # the same count, same width
    assert both["arms"][1]["rms"] != both["arms"][2]["rms"]  # distinct networks
    # the plain arms do not move when a residual one is added (their keys unchanged)
    assert [a["rms"] for a in plain["arms"]] == [a["rms"] for a in both["arms"][:2]]
    assert "example_fit" in both["arms"][0] and "example_fit" not in plain["arms"][0]
    # the depth verdict reads the plain arms only
    assert S.compare_depths(both)["draws"] == S.compare_depths(plain)["draws"]


def _point(shallow, plain, residual, spread=(0.3, 1e-17, 0.2)):
    arms = []
    for (depth, kind, width, rms), s in zip(
        [(1, "plain", 3444, shallow), (50, "plain", 14, plain), (50, "residual", 14, residual)],
        spread, strict=True,
    ):  # fmt: skip
        arms.append({"depth": depth, "architecture": kind, "width": width, "parameters": 10333,
                     "rms": rms, "init_spread": [s] * len(rms)})  # fmt: skip
    return {"target": "sin50", "budget": 10333, "constant_rms": 0.7071, "arms": arms}


def test_the_quiz_reading_follows_the_numbers_either_way():
    """A plain 50-layer network at the constant against a shallow one that fits, and the
    reverse: each arm's sentence, the differences and the answer turn with the data."""
    rng = np.random.default_rng(0)
    at_constant = list(0.7071 + rng.normal(0, 1e-5, 8))
    fits = list(0.05 + rng.normal(0, 0.005, 8))
    halfway = list(0.3 + rng.normal(0, 0.01, 8))
    q = quiz_reading(_point(fits, at_constant, halfway))
    by = {r["name"]: r for r in q["arms"]}
    deep = by["50 × 14 plain"]
    assert deep["state"] == "stays at the constant" and "stays at the constant" in deep["text"]
    assert "is flat" in deep["text"]  # its initial output's spread 1e-17, far below 0.0007
    assert by["1 × 3444"]["state"] == "learned" and by["50 × 14 residual"]["state"] == "learned"
    assert q["answer"] == "lowest error: 1 × 3444"
    (d_plain, d_res, r_vs_p) = q["differences"]
    assert (d_plain["kind"], d_plain["lower"]) == ("deep − shallow", "1 × 3444")
    assert d_plain["difference"] == pytest.approx(np.mean(at_constant) - np.mean(fits))
    assert (r_vs_p["kind"], r_vs_p["lower"]) == ("residual − plain", "50 × 14 residual")
    assert d_res["lower"] == "1 × 3444"
    lines = quiz_lines(q)
    assert "50 × 14 plain stays at the constant: mean RMS 0.7071" in lines[2]
    assert lines[-1] == "the quiz, measured: lowest error: 1 × 3444"
    # the reverse: the deep plain network fits, the shallow one stays at the constant
    q = quiz_reading(_point(at_constant, fits, halfway, spread=(1e-17, 0.3, 0.2)))
    by = {r["name"]: r for r in q["arms"]}
    assert by["50 × 14 plain"]["state"] == "learned" and "learned" in by["50 × 14 plain"]["text"]
    assert by["1 × 3444"]["state"] == "stays at the constant"
    assert q["answer"] == "lowest error: 50 × 14 plain"
    assert q["differences"][0]["lower"] == "50 × 14 plain" and q["differences"][0]["difference"] < 0
    assert q["differences"][2]["lower"] == "50 × 14 plain"
    # overlapping arms: not resolved, said so
    q = quiz_reading(_point(fits, list(np.array(fits) + 1e-3), halfway))
    assert "not resolved against" in q["answer"]
    # worse than the constant, and an arm of exploded networks
    worse = arm_reading({"depth": 50, "width": 14, "parameters": 10333, "rms": [2.0, 2.1]}, 0.7)
    assert worse["state"] == "worse than the constant"
    gone = arm_reading({"depth": 50, "width": 14, "parameters": 10333, "rms": [None, None]}, 0.7)
    assert gone["state"] == "exploded" and gone["mean_rms"] is None


TINY = ["--preset", "pop-quiz", "--budgets", "60", "--depths", "1,3", "--seeds", "2",
        "--steps", "4", "--lrs", "0.01", "--train-points", "16"]  # fmt: skip


def test_the_pop_quiz_end_to_end_at_a_tiny_size(tmp_path, self_checked):
    out = tmp_path / "q"
    assert main(["study", "approximation", *TINY, "--out", str(out), "--no-progress"]) == 0
    r = json.loads((out / "results.json").read_text())
    self_checked(r)
    assert "exercise" not in r and not r["config"]["exercise"]
    (point,) = r["points"]
    assert point["target"] == "sin50"
    assert [(a["depth"], a["architecture"]) for a in point["arms"]] == [
        (1, "plain"), (3, "plain"), (3, "residual")
    ]  # fmt: skip
    # the best constant's error: the RMS of sin(50x) about its mean on the test points
    xt = (np.arange(4096) + 0.5) / 4096
    assert point["constant_rms"] == pytest.approx(np.std(np.sin(50 * xt)), rel=1e-12)
    (q,) = r["quiz"]
    assert q == json.loads(json.dumps(quiz_reading(point)))
    assert r["headline"][: len(quiz_lines(q))] == quiz_lines(q)
    assert r["headline"][0].startswith("pop quiz, sin50 at 60 parameters")
    assert (out / "pop_quiz.png").exists() and not (out / "exercise.png").exists()
    assert main(["plot", str(out)]) == 0


@pytest.mark.parametrize("archs", ["residual", "plain,dense", "plain,plain"])
def test_bad_architectures_are_refused_in_one_line(tmp_path, capsys, archs):
    out = tmp_path / "o"
    code = main(["study", "approximation", *TINY, "--architectures", archs, "--out", str(out)])
    assert code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "--architectures" in err[0], err
    assert not out.exists()
